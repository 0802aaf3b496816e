//! Every file a user names as input is opened here, the same way.
//!
//! A path may name anything: a FIFO (an open for reading blocks until a writer
//! appears, and the blocked `open` ignores the signal handlers Python installs,
//! so only SIGKILL ends it), a socket, a terminal or `/dev/zero` (endless), a
//! directory, or a regular file of any size. So [`open`] opens with
//! `O_NONBLOCK` (an open of a FIFO then returns at once), checks the type with
//! `fstat` and refuses everything but a regular file in one line, before a
//! byte is read. [`read_text`] and [`read_bytes`] add a size limit, checked
//! against the file's size before reading and again while reading (a file
//! growing under us), so a parser never holds more than its limit.
//!
//! The limits (docs/assumptions.md, "Limits") are far above any real input
//! of their kind; they exist so that a wrong path is one error, not gigabytes.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::shown_path;
use crate::{Error, Result};

/// Largest configuration file (TOML or JSON): a full machine and OS
/// configuration is a few kilobytes.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// Largest plan file (about 500000 entries of pretty-printed JSON).
pub const MAX_PLAN_BYTES: u64 = 64 << 20;
/// Largest JSON document read back from a file hugescope wrote (results,
/// checkpoints, measurements): the largest a demo writes is a few MB.
pub const MAX_RESULT_BYTES: u64 = 256 << 20;
/// Largest graph file (edge list or Matrix Market), read whole: about 200
/// million edges as text, past what a trace can cover.
pub const MAX_GRAPH_BYTES: u64 = 4 << 30;
/// Largest text file of other kinds (a maps file of a raw trace, a
/// microbenchmark's report).
pub const MAX_TEXT_BYTES: u64 = 64 << 20;

/// Bytes read between two checks for cancellation (well under a second).
const READ_PIECE: u64 = 64 << 20;


/// Open `path` (the `what` of the message: "trace", "config", ...) for
/// reading if it is a regular file; else one error naming the path and what it
/// is. Never blocks: the open carries `O_NONBLOCK`, cleared again once the
/// file is known to be regular.
pub fn open(path: &Path, what: &str) -> Result<File> {
    if path.as_os_str().is_empty() {
        return Err(Error::input(format!("{what}: the path is empty")));
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            // open(2) of a socket file.
            Some(libc::ENXIO) => refuse(path, what, "a socket"),
            _ => Error::io(path, e),
        })?;
    let meta = f.metadata().map_err(|e| Error::io(path, e))?;
    let t = meta.file_type();
    if !t.is_file() {
        return Err(refuse(path, what, crate::output::file_type_name(&t)));
    }
    // Regular files ignore O_NONBLOCK, but a later fcntl or a copy of the
    // descriptor should see ordinary blocking semantics.
    // SAFETY: F_GETFL/F_SETFL on a descriptor we own.
    unsafe {
        use std::os::fd::AsRawFd;
        let fd = f.as_raw_fd();
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl >= 0 {
            libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
    }
    Ok(f)
}

fn refuse(path: &Path, what: &str, is: &str) -> Error {
    Error::input(format!(
        "{}: is {is}, not a regular file; a {what} must be a regular file (refused before reading)",
        shown_path(path)
    ))
}

/// The whole of `path`, at most `limit` bytes (else one error, before the
/// bytes are read when the file says its size).
pub fn read_bytes(path: &Path, what: &str, limit: u64) -> Result<Vec<u8>> {
    let f = open(path, what)?;
    let len = f.metadata().map_err(|e| Error::io(path, e))?.len();
    let too_big = |n: u64| {
        Error::input(format!(
            "{}: {what} is {n} bytes, past the {} limit for a {what} (docs/assumptions.md, \"Limits\"); refused before reading",
            shown_path(path),
            crate::units::fmt_size(limit)
        ))
    };
    if len > limit {
        return Err(too_big(len));
    }
    // Under a memory limit (ulimit -v) a failed allocation aborts the process
    // (and the Python interpreter with it): ask for the room first, so a file
    // within the size limit but past the memory is one error line.
    let mut buf = Vec::new();
    buf.try_reserve_exact(len as usize).map_err(|_| {
        Error::input(format!(
            "{}: {what} is {len} bytes, more than this process can allocate to read it (a memory limit?)",
            shown_path(path)
        ))
    })?;
    // In pieces, polling for Ctrl-C between them: a graph file may be
    // gigabytes, seconds of reading.
    let mut rest = f.take(limit + 1);
    loop {
        crate::cancel::check()?;
        let n = (&mut rest).take(READ_PIECE).read_to_end(&mut buf).map_err(|e| Error::io(path, e))?;
        if (n as u64) < READ_PIECE {
            break;
        }
    }
    if buf.len() as u64 > limit {
        return Err(too_big(buf.len() as u64));
    }
    Ok(buf)
}

/// [`read_bytes`] as UTF-8 text.
pub fn read_text(path: &Path, what: &str, limit: u64) -> Result<String> {
    let bytes = read_bytes(path, what, limit)?;
    String::from_utf8(bytes).map_err(|e| {
        Error::format(path, e.utf8_error().valid_up_to() as u64, format!("{what} is not UTF-8 text"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn refuses_special_files_at_once() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let t0 = Instant::now();
        let e = open(&fifo, "trace").unwrap_err().to_string();
        assert!(t0.elapsed() < Duration::from_secs(1));
        assert!(e.contains("is a FIFO") && e.contains("trace must be a regular file"), "{e}");
        assert!(open(Path::new("/dev/zero"), "config").unwrap_err().to_string().contains("character device"));
        assert!(open(d.path(), "plan").unwrap_err().to_string().contains("a directory"));
        let sock = d.path().join("sock");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        assert!(open(&sock, "trace").unwrap_err().to_string().contains("a socket"));
        assert!(open(Path::new(""), "trace").unwrap_err().to_string().contains("empty"));
    }

    #[test]
    fn limits_are_checked_before_reading() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("big.toml");
        let f = File::create(&p).unwrap();
        // Sparse: 2 GB that would take seconds and the memory to read.
        f.set_len(2_000_000_000).unwrap();
        let e = read_text(&p, "config", MAX_CONFIG_BYTES).unwrap_err().to_string();
        assert!(e.contains("2000000000 bytes") && e.contains("1MiB"), "{e}");
        std::fs::write(&p, "x".repeat(10)).unwrap();
        assert_eq!(read_text(&p, "config", 10).unwrap().len(), 10);
        assert!(read_text(&p, "config", 9).is_err());
        std::fs::write(&p, [0xff, 0xfe]).unwrap();
        assert!(read_text(&p, "config", 10).unwrap_err().to_string().contains("not UTF-8"));
    }
}
