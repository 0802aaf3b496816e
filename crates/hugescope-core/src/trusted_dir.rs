//! Whether a directory and the files in it can be trusted by a process that
//! may run as root: the rule of the settings journal (issue #31), shared by
//! every place hugescope keeps state of its own between runs (the journal in
//! `hugescope-linux::settings`, the results cache in `result_cache`).
//!
//! Whoever can write such a directory decides what the next run reads (a
//! forged journal, a forged cached result) or where it writes (a planted
//! symbolic link). So a directory is trusted when it, and every directory
//! above it, is owned by root or by the running user and writable by no one
//! else; a directory above it may be world-writable if it is sticky (/tmp),
//! since others cannot then rename or replace entries they do not own. A file
//! in it is trusted when it is a regular file owned by the running user with
//! no permissions for group or others, opened without following symbolic
//! links (`O_NOFOLLOW`, so `open_error` sees ELOOP for a link).
//!
//! The checks return a `Distrust` rather than an error of either crate: each
//! caller words the refusal for what it was about to do.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why a directory or file is not trusted.
#[derive(Debug)]
pub enum Distrust {
    /// `path` may have been planted or changed by someone else: `why`.
    Untrusted { path: PathBuf, why: String },
    /// The operating system refused to look at `path`.
    Io { path: PathBuf, source: std::io::Error },
}

impl std::fmt::Display for Distrust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Distrust::Untrusted { path, why } => write!(f, "{} {why}", path.display()),
            Distrust::Io { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

fn untrusted(path: &Path, why: impl Into<String>) -> Distrust {
    Distrust::Untrusted { path: path.to_path_buf(), why: why.into() }
}

/// The user whose files are trusted: the effective user (root when run as root).
pub fn owner() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// An open of a file under `O_NOFOLLOW | O_NONBLOCK` that failed: a symbolic
/// link (ELOOP) or a socket (ENXIO) is untrusted, anything else is the
/// operating system's error.
pub fn open_error(p: &Path, e: std::io::Error) -> Distrust {
    match e.raw_os_error() {
        Some(libc::ELOOP) => untrusted(p, "is a symbolic link"),
        Some(libc::ENXIO) => untrusted(p, "is a socket"),
        _ => Distrust::Io { path: p.to_path_buf(), source: e },
    }
}

/// A file (metadata of the open descriptor) is trusted when it is a regular
/// file owned by `owner()` that group and others can neither read nor write.
pub fn check_file(p: &Path, m: &std::fs::Metadata) -> Result<(), Distrust> {
    if !m.file_type().is_file() {
        return Err(untrusted(p, "is not a regular file"));
    }
    if m.uid() != owner() {
        return Err(untrusted(p, format!("is owned by uid {}, not by uid {}", m.uid(), owner())));
    }
    if m.permissions().mode() & 0o077 != 0 {
        return Err(untrusted(p, format!("has mode {:04o}; it must be 0600", m.permissions().mode() & 0o7777)));
    }
    Ok(())
}

/// `dir` is trusted when it is a directory (not a symbolic link to one)
/// owned by `owner()` and writable only by it, and every directory above it
/// is owned by root or `owner()` and not writable by others unless sticky.
/// `what` names the directory in the refusal ("the state directory").
pub fn check_dir(dir: &Path, what: &str) -> Result<(), Distrust> {
    let me = owner();
    let abs = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        let cwd = std::env::current_dir().map_err(|e| Distrust::Io { path: ".".into(), source: e })?;
        cwd.join(dir)
    };
    let m = std::fs::symlink_metadata(&abs).map_err(|e| Distrust::Io { path: abs.clone(), source: e })?;
    if !m.file_type().is_dir() {
        return Err(untrusted(&abs, "is not a directory (a symbolic link is not followed)"));
    }
    if m.uid() != me || m.permissions().mode() & 0o022 != 0 {
        return Err(untrusted(&abs, format!(
            "is owned by uid {} with mode {:04o}; {what} must be owned by uid {me} and writable only by it",
            m.uid(), m.permissions().mode() & 0o7777)));
    }
    let mut up = abs.parent();
    while let Some(d) = up {
        // Symbolic links above are followed as the kernel would: it is the
        // directory they lead to that must be safe.
        let m = std::fs::metadata(d).map_err(|e| Distrust::Io { path: d.to_path_buf(), source: e })?;
        let mode = m.permissions().mode();
        let owner_ok = m.uid() == 0 || m.uid() == me;
        let writable_by_others = mode & 0o022 != 0 && mode & 0o1000 == 0;
        if !owner_ok || writable_by_others {
            return Err(untrusted(&abs, format!(
                "lies under {} (uid {}, mode {:04o}), which others can write to",
                d.display(), m.uid(), mode & 0o7777)));
        }
        up = d.parent();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_private_directory_is_trusted_and_a_group_writable_one_or_a_link_is_not() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("c");
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        // The tempdir's parents (/tmp: sticky) are acceptable.
        check_dir(&d, "the dir").unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o770)).unwrap();
        let e = check_dir(&d, "the dir").unwrap_err().to_string();
        assert!(e.contains("mode 0770") && e.contains("the dir must be owned"), "{e}");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        let l = t.path().join("link");
        std::os::unix::fs::symlink(&d, &l).unwrap();
        let e = check_dir(&l, "the dir").unwrap_err().to_string();
        assert!(e.contains("symbolic link is not followed"), "{e}");
        // Below a world-writable, non-sticky directory: refused.
        let open = t.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let inner = open.join("c");
        std::fs::create_dir(&inner).unwrap();
        std::fs::set_permissions(&inner, std::fs::Permissions::from_mode(0o700)).unwrap();
        let e = check_dir(&inner, "the dir").unwrap_err().to_string();
        assert!(e.contains("which others can write to"), "{e}");
    }
}
