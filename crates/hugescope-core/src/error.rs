//! One error type for the whole core. Every variant names *what* was wrong and
//! *where* (file and byte offset for traces, key for configs), because a research
//! tool that says "invalid data" and nothing else wastes an afternoon.

use std::path::{Path, PathBuf};

pub type Result<T> = std::result::Result<T, Error>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The operating system refused a file operation.
    #[error("{}: {source}", shown_path(path))]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file was read but its content is not what the format promises.
    #[error("{}: at byte {offset}: {}", shown_path(path), shown(msg, MESSAGE_CHARS))]
    Format {
        path: PathBuf,
        offset: u64,
        msg: String,
    },
    /// A configuration value (preset, TOML key, CLI override) is invalid.
    #[error("configuration: {}", shown(.0, MESSAGE_CHARS))]
    Config(String),
    /// An argument or input value is invalid (bad size, unknown name, ...).
    #[error("{}", shown(.0, MESSAGE_CHARS))]
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

/// Longest value (in characters) an error message repeats from its input.
pub const SHOWN_CHARS: usize = 80;
/// Longest message text an error shows: the messages themselves are a
/// sentence or two, so only one built around a value from the input (a 10 MB
/// label, a whole line of a 100 MB file) comes near it, and is cut here, in
/// one place for every error, with control characters escaped.
pub const MESSAGE_CHARS: usize = 500;
/// Longest path an error message repeats.
pub const SHOWN_PATH_CHARS: usize = 240;

/// A value from the user or from a file, as an error message shows it:
/// control and other non-printing characters escaped (`\n`, `\x1b`, `\u{..}`),
/// cut to `max` characters with the full length stated. A multi-megabyte value
/// or a file name holding a terminal escape stays one short, harmless line.
pub fn shown(s: &str, max: usize) -> String {
    let mut out = String::new();
    let mut n = 0;
    for (i, c) in s.char_indices() {
        if n >= max {
            out.push_str(&format!("... ({} bytes in all)", s.len()));
            let _ = i;
            return out;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() || matches!(c as u32, 0x200b..=0x200f | 0x202a..=0x202e | 0x2066..=0x2069 | 0xfeff) => {
                out.push_str(&format!("\\u{{{:x}}}", c as u32))
            }
            c => out.push(c),
        }
        n += 1;
    }
    out
}

/// A path as an error message shows it (see [`shown`]); bytes that are not
/// UTF-8 appear as U+FFFD.
pub fn shown_path(p: &Path) -> String {
    shown(&p.to_string_lossy(), SHOWN_PATH_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_escapes_and_cuts() {
        assert_eq!(shown("plain", 80), "plain");
        assert_eq!(shown("a\nb\x1b[31mc\u{202e}", 80), "a\\nb\\x1b[31mc\\u{202e}");
        let long = "x".repeat(10_000_000);
        let s = shown(&long, 80);
        assert_eq!(s, format!("{}... (10000000 bytes in all)", "x".repeat(80)));
        assert_eq!(shown(&"é".repeat(81), 80).chars().filter(|&c| c == 'é').count(), 80);
        let e = Error::io("out/evil\x1b]0;owned\x07name", std::io::Error::from(std::io::ErrorKind::NotFound));
        assert!(!e.to_string().contains('\x1b'), "{e}");
    }
}
