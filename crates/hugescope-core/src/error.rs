//! One error type for the whole core. Every variant names *what* was wrong and
//! *where* (file and byte offset for traces, key for configs), because a research
//! tool that says "invalid data" and nothing else wastes an afternoon.

use std::path::PathBuf;

pub type Result<T> = std::result::Result<T, Error>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The operating system refused a file operation.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file was read but its content is not what the format promises.
    #[error("{path}: at byte {offset}: {msg}")]
    Format {
        path: PathBuf,
        offset: u64,
        msg: String,
    },
    /// A configuration value (preset, TOML key, CLI override) is invalid.
    #[error("configuration: {0}")]
    Config(String),
    /// An argument or input value is invalid (bad size, unknown name, ...).
    #[error("{0}")]
    Input(String),
    /// The work was stopped on request (`cancel::request`, a signal).
    #[error("interrupted")]
    Cancelled,
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
    pub fn format(path: impl Into<PathBuf>, offset: u64, msg: impl Into<String>) -> Self {
        Error::Format {
            path: path.into(),
            offset,
            msg: msg.into(),
        }
    }
    pub fn config(msg: impl Into<String>) -> Self {
        Error::Config(msg.into())
    }
    pub fn input(msg: impl Into<String>) -> Self {
        Error::Input(msg.into())
    }
}
