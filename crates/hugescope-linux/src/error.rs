//! The crate's error type. Every variant says *what* failed and *where* (the file
//! under /proc or /sys, the process, the address range), because "permission
//! denied" on its own does not tell a researcher which of five files needed root.

use std::path::PathBuf;

pub type Result<T> = std::result::Result<T, Error>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a file under /proc or /sys failed.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A kernel file was read but did not have the expected shape.
    #[error("{path}: line {line}: {msg}")]
    Parse { path: PathBuf, line: usize, msg: String },
    /// A system call failed; `what` names the call and its arguments.
    #[error("{what}: {errno_name} ({source})")]
    Sys {
        what: String,
        errno_name: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// The operation needs privileges this process does not have.
    #[error("permission: {0}")]
    Permission(String),
    /// The operation was refused because it would be unsafe or cannot work here.
    #[error("refused: {0}")]
    Refused(String),
    /// A bad argument.
    #[error("{0}")]
    Input(String),
    /// Stopped by this signal (SIGINT, SIGTERM) after cleaning up.
    #[error("interrupted by signal {0}")]
    Interrupted(i32),
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
    pub fn parse(path: impl Into<PathBuf>, line: usize, msg: impl Into<String>) -> Self {
        Error::Parse { path: path.into(), line, msg: msg.into() }
    }
    /// Build a `Sys` error from the current `errno`.
    pub fn last_os(what: impl Into<String>) -> Self {
        Error::sys(what, std::io::Error::last_os_error())
    }
    /// A `Sys` error of `what` failing with `source` (an errno).
    pub fn sys(what: impl Into<String>, source: std::io::Error) -> Self {
        Error::Sys {
            what: what.into(),
            errno_name: errno_name(source.raw_os_error().unwrap_or(0)),
            source,
        }
    }
    pub fn input(msg: impl Into<String>) -> Self {
        Error::Input(msg.into())
    }
    pub fn refused(msg: impl Into<String>) -> Self {
        Error::Refused(msg.into())
    }
    pub fn permission(msg: impl Into<String>) -> Self {
        Error::Permission(msg.into())
    }
}

/// The symbolic name of an errno value, for reports that people grep.
pub fn errno_name(e: i32) -> &'static str {
    match e {
        0 => "OK",
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::EINVAL => "EINVAL",
        libc::ENOSYS => "ENOSYS",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ECHILD => "ECHILD",
        _ => "EUNKNOWN",
    }
}
