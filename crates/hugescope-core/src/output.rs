//! The checks every output file of hugescope goes through before anything is
//! written (and, for long runs, before any work starts).
//!
//! Users run hugescope as root, where the operating system refuses nothing: a
//! temp-file-then-rename writer pointed at `/dev/full` replaces the device node,
//! pointed at the input trace destroys it, pointed through a symbolic link
//! replaces the link. [`check`] refuses every such target with one message naming
//! the path and the reason, and returns the path the writer must rename onto.
//! The trace writer (`HstWriter::create`) and the Python writer
//! (`hugescope._io`, through `_core.check_output`) both call it, so the rules
//! are the same for every file the tool writes.

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::trace::frames::MAGIC;

/// What a file holds, as far as its first bytes tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Trace,
    Json,
    Html,
    Png,
    Svg,
    Pdf,
    Csv,
    /// An executable or object file (`hugescope cc -o`).
    Elf,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Trace => "hst",
            Kind::Json => "json",
            Kind::Html => "html",
            Kind::Png => "png",
            Kind::Svg => "svg",
            Kind::Pdf => "pdf",
            Kind::Csv => "csv",
            Kind::Elf => "elf",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Kind::Trace => "a hugescope trace (.hst)",
            Kind::Json => "JSON",
            Kind::Html => "HTML",
            Kind::Png => "a PNG image",
            Kind::Svg => "an SVG image",
            Kind::Pdf => "a PDF document",
            Kind::Csv => "CSV",
            Kind::Elf => "an executable or object file (ELF)",
        }
    }

    /// The kind named `s` ("json", "hst", ...).
    pub fn parse(s: &str) -> Result<Kind> {
        const ALL: [Kind; 8] = [
            Kind::Trace,
            Kind::Json,
            Kind::Html,
            Kind::Png,
            Kind::Svg,
            Kind::Pdf,
            Kind::Csv,
            Kind::Elf,
        ];
        ALL.into_iter().find(|k| k.name() == s).ok_or_else(|| {
            Error::input(format!(
                "unknown output kind '{s}' (hst, json, html, png, svg, pdf, csv, elf)"
            ))
        })
    }
}

/// How many leading bytes [`sniff`] looks at.
pub const SNIFF_BYTES: usize = 512;

/// The kind of content starting with `head`, or `None` when it is none of the
/// kinds hugescope writes (an empty file, a user's own text...).
pub fn sniff(head: &[u8]) -> Option<Kind> {
    if head.starts_with(&MAGIC) {
        return Some(Kind::Trace);
    }
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Some(Kind::Png);
    }
    if head.starts_with(b"%PDF-") {
        return Some(Kind::Pdf);
    }
    if head.starts_with(b"\x7fELF") {
        return Some(Kind::Elf);
    }
    let text = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    let start = text
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(text.len());
    let text = &text[start..];
    let lower: Vec<u8> = text
        .iter()
        .take(SNIFF_BYTES)
        .map(u8::to_ascii_lowercase)
        .collect();
    if lower.starts_with(b"<!doctype html") || lower.starts_with(b"<html") {
        return Some(Kind::Html);
    }
    if lower.starts_with(b"<svg") || (lower.starts_with(b"<?xml") && contains(&lower, b"<svg")) {
        return Some(Kind::Svg);
    }
    if matches!(text.first(), Some(b'{') | Some(b'[')) {
        return Some(Kind::Json);
    }
    // A CSV written by hugescope starts with a header row of column names:
    // identifiers separated by commas (pandas quotes nothing there).
    let line = text.split(|&b| b == b'\n').next().unwrap_or(&[]);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let ident = |c: &u8| c.is_ascii_alphanumeric() || *c == b'_';
    if line.contains(&b',')
        && line
            .split(|&b| b == b',')
            .all(|f| !f.is_empty() && f.iter().all(ident))
    {
        return Some(Kind::Csv);
    }
    None
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Makes the names of writability probes unique within the process.
static PROBE_SEQ: AtomicU64 = AtomicU64::new(0);

/// Symbolic links followed at most this many times (as the kernel's ELOOP).
const MAX_LINK_HOPS: usize = 40;

/// Longest file name accepted: the temporary names of the writers add up to
/// 32 bytes to it (".NAME.tmp-PID-SEQ", ".NAME.XXXXXXXX.tmp") and must stay
/// within the 255 bytes of NAME_MAX, or the write would fail after the work.
pub const MAX_NAME_BYTES: usize = 255 - 32;

fn refuse(path: &Path, why: impl std::fmt::Display) -> Error {
    Error::input(format!("{}: {why}", path.display()))
}

/// What `fstat` says a non-regular file is, as a message says it (also for
/// inputs: `crate::input`).
pub(crate) fn file_type_name(t: &fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Check that `path` may receive an output of `kind` (`None`: content of no
/// kind hugescope writes, e.g. a text report) and return the path to
/// rename the finished file onto. Refuses (one message naming the path and why):
/// - an existing target that is not a regular file (directory, device, FIFO,
///   socket);
/// - a symbolic link, unless `follow_symlinks`: then the link's final target is
///   checked and returned (it may not exist yet);
/// - the same file (device and inode) as any of `inputs`;
/// - an existing file whose first bytes show a different kind of output than
///   `kind` (results JSON is never replaced by HTML); same kind, an empty file
///   or content that is no hugescope output may be replaced;
/// - a directory that does not exist, a path component that is not a
///   directory, or a directory where a file cannot be created (tested by
///   creating and removing one: as root `access()` always says yes).
pub fn check(
    path: impl AsRef<Path>,
    kind: Option<Kind>,
    inputs: &[&Path],
    follow_symlinks: bool,
) -> Result<PathBuf> {
    let given = path.as_ref();
    if given.as_os_str().is_empty() {
        return Err(Error::input("output path is empty"));
    }
    let mut target = given.to_path_buf();
    let mut hops = 0;
    let meta = loop {
        match fs::symlink_metadata(&target) {
            Ok(m) if m.file_type().is_symlink() => {
                if !follow_symlinks {
                    return Err(refuse(
                        given,
                        "is a symbolic link; refusing to replace it (use --follow-symlinks to write to its target)",
                    ));
                }
                hops += 1;
                if hops > MAX_LINK_HOPS {
                    return Err(refuse(given, "too many levels of symbolic links"));
                }
                let link = fs::read_link(&target).map_err(|e| Error::io(&target, e))?;
                target = match target.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                };
            }
            Ok(m) => break Some(m),
            Err(e) if e.kind() == ErrorKind::NotFound => break None,
            // ENOTDIR: a component of the path is a regular file.
            Err(e) if e.raw_os_error() == Some(20) => {
                return Err(Error::io(
                    given,
                    std::io::Error::new(
                        ErrorKind::NotADirectory,
                        "a component of the path is not a directory",
                    ),
                ));
            }
            Err(e) => return Err(Error::io(given, e)),
        }
    };
    let shown = if target == given {
        given.display().to_string()
    } else {
        format!("{} (target of {})", target.display(), given.display())
    };
    let refuse_t = |why: &str| Error::input(format!("{shown}: {why}"));
    // Where the file cannot be created at all, the error stays an I/O error
    // (as the operating system would have reported it), with the reason.
    let unplaceable =
        |kind: ErrorKind, why: String| Error::io(&shown, std::io::Error::new(kind, why));
    if let Some(m) = &meta {
        if !m.file_type().is_file() {
            return Err(refuse_t(&format!(
                "is {}, not a regular file; refusing to replace it",
                file_type_name(&m.file_type())
            )));
        }
        for input in inputs {
            if let Ok(im) = fs::metadata(input) {
                if im.dev() == m.dev() && im.ino() == m.ino() {
                    return Err(refuse_t(&format!(
                        "is the same file as the input {}; refusing to overwrite an input",
                        input.display()
                    )));
                }
            }
        }
        let mut head = Vec::with_capacity(SNIFF_BYTES);
        let read =
            fs::File::open(&target).and_then(|f| f.take(SNIFF_BYTES as u64).read_to_end(&mut head));
        if let Err(e) = read {
            return Err(Error::io(&target, e));
        }
        if let Some(old) = sniff(&head) {
            if Some(old) != kind {
                return Err(refuse_t(&format!(
                    "holds {}; refusing to replace it with {} (choose another file name)",
                    old.describe(),
                    kind.map_or("other content", Kind::describe)
                )));
            }
        }
    }
    let name_len = target.file_name().map_or(0, |n| n.len());
    if name_len > MAX_NAME_BYTES {
        return Err(refuse_t(&format!(
            "file name is {name_len} bytes long, more than the {MAX_NAME_BYTES} the atomic writer can use"
        )));
    }
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    match fs::metadata(&dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(unplaceable(
                ErrorKind::NotADirectory,
                format!("{} is not a directory", dir.display()),
            ))
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(unplaceable(
                ErrorKind::NotFound,
                format!("directory {} does not exist", dir.display()),
            ))
        }
        Err(e) if e.raw_os_error() == Some(20) => {
            return Err(unplaceable(
                ErrorKind::NotADirectory,
                "a component of the path is not a directory".into(),
            ))
        }
        Err(e) => return Err(Error::io(&dir, e)),
    }
    probe_writable(&dir).map_err(|e| {
        unplaceable(
            e.kind(),
            format!("cannot create files in {}: {e}", dir.display()),
        )
    })?;
    Ok(target)
}

/// Create and remove a file in `dir`: the only test of writability that also
/// holds for root (read-only mounts, immutable directories, full quotas of
/// inodes).
fn probe_writable(dir: &Path) -> std::io::Result<()> {
    let seq = PROBE_SEQ.fetch_add(1, Ordering::Relaxed);
    let probe = dir.join(format!(".hugescope-probe-{}-{}", std::process::id(), seq));
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)?;
    fs::remove_file(&probe)
}

/// Makes the names of named temporary files unique within the process.
static STAGED_SEQ: AtomicU64 = AtomicU64::new(0);

/// A new file written in its target's directory that takes the target's name
/// only when [`Staged::commit`] renames it there, so a reader never sees half
/// a file. Where the filesystem supports `O_TMPFILE` (ext4, xfs, btrfs, tmpfs)
/// the file has no name at all until then: a SIGKILL, which no handler sees,
/// leaves nothing behind. Elsewhere it is a hidden `.NAME.tmp-PID-SEQ`,
/// removed on drop (every exit but SIGKILL).
pub struct Staged {
    path: PathBuf,
    dir: PathBuf,
    /// The fallback's temporary name; `None` for an unnamed file.
    named: Option<PathBuf>,
    committed: bool,
}

impl Staged {
    /// Start a file for `path` (already accepted by [`check`]) with mode
    /// 0666 & ~umask, as an ordinary create would give it.
    pub fn create(path: &Path) -> Result<(Staged, fs::File)> {
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        use std::os::unix::fs::OpenOptionsExt;
        let unnamed = OpenOptions::new()
            .write(true)
            .mode(0o666)
            .custom_flags(libc::O_TMPFILE | libc::O_CLOEXEC)
            .open(&dir);
        let mut st = Staged { path: path.to_path_buf(), dir, named: None, committed: false };
        match unnamed {
            Ok(f) => Ok((st, f)),
            // Not supported by this filesystem or kernel: a hidden name.
            Err(_) => {
                let seq = STAGED_SEQ.fetch_add(1, Ordering::Relaxed);
                let mut name = std::ffi::OsString::from(".");
                name.push(path.file_name().unwrap_or_default());
                name.push(format!(".tmp-{}-{seq}", std::process::id()));
                let tmp = st.dir.join(name);
                let f = OpenOptions::new().write(true).create_new(true).mode(0o666).open(&tmp)
                    .map_err(|e| Error::io(path, e))?;
                st.named = Some(tmp);
                Ok((st, f))
            }
        }
    }

    /// The final path (what messages name).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Give the finished file (still open, already synced) its final name.
    pub fn commit(&mut self, file: &fs::File) -> Result<()> {
        let tmp = match &self.named {
            Some(t) => t.clone(),
            None => {
                // Link the unnamed file under a hidden name, then rename: a
                // link cannot replace an existing file, a rename can (and
                // atomically). Only a kill between the two leaves the name.
                let seq = STAGED_SEQ.fetch_add(1, Ordering::Relaxed);
                let mut name = std::ffi::OsString::from(".");
                name.push(self.path.file_name().unwrap_or_default());
                name.push(format!(".tmp-{}-{seq}", std::process::id()));
                let tmp = self.dir.join(name);
                link_unnamed(file, &tmp).map_err(|e| Error::io(&self.path, e))?;
                self.named = Some(tmp.clone());
                tmp
            }
        };
        fs::rename(&tmp, &self.path).map_err(|e| Error::io(&self.path, e))?;
        self.committed = true;
        self.named = None;
        Ok(())
    }
}

/// Write `data` to `path` (already accepted by [`check`]) through a
/// [`Staged`] file: fsync, then rename onto `path`. Every error names `path`.
pub fn write_staged(path: &Path, data: &[u8]) -> Result<()> {
    use std::io::Write;
    let (mut st, mut f) = Staged::create(path)?;
    f.write_all(data).and_then(|_| f.sync_all()).map_err(|e| Error::io(path, e))?;
    st.commit(&f)
}

/// Give an `O_TMPFILE` file the name `to`: through /proc/self/fd (any user),
/// else `AT_EMPTY_PATH` (needs CAP_DAC_READ_SEARCH, which root has).
fn link_unnamed(file: &fs::File, to: &Path) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let fd = file.as_raw_fd();
    let to_c = std::ffi::CString::new(to.as_os_str().as_bytes())?;
    let proc = std::ffi::CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL");
    // SAFETY: valid NUL-terminated strings and a descriptor we own.
    let r = unsafe { libc::linkat(libc::AT_FDCWD, proc.as_ptr(), libc::AT_FDCWD, to_c.as_ptr(), libc::AT_SYMLINK_FOLLOW) };
    if r == 0 {
        return Ok(());
    }
    let first = std::io::Error::last_os_error();
    let empty = std::ffi::CString::new("").expect("no NUL");
    // SAFETY: as above.
    let r = unsafe { libc::linkat(fd, empty.as_ptr(), libc::AT_FDCWD, to_c.as_ptr(), libc::AT_EMPTY_PATH) };
    if r == 0 { Ok(()) } else { Err(first) }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.committed {
            if let Some(t) = &self.named {
                // Best effort: nothing useful can be done with an error here.
                let _ = fs::remove_file(t);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("hugescope-output-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_staged_file_has_no_name_until_committed() {
        let d = tmpdir("staged");
        let target = d.join("out.json");
        let (mut st, mut f) = Staged::create(&target).unwrap();
        use std::io::Write;
        f.write_all(b"{}\n").unwrap();
        f.sync_all().unwrap();
        // Nothing visible in the directory yet (tmpfs and ext4 both support
        // O_TMPFILE; elsewhere the hidden fallback name would show here).
        let names = |d: &Path| fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name()).collect::<Vec<_>>();
        assert!(names(&d).is_empty(), "{:?}", names(&d));
        st.commit(&f).unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "{}\n");
        assert_eq!(names(&d).len(), 1);
        // An abandoned one leaves nothing.
        let (st2, _f2) = Staged::create(&d.join("gone.json")).unwrap();
        drop(st2);
        assert_eq!(names(&d).len(), 1);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn sniffs_every_kind() {
        assert_eq!(sniff(&MAGIC), Some(Kind::Trace));
        assert_eq!(sniff(b"  {\"a\": 1}"), Some(Kind::Json));
        assert_eq!(sniff(b"[1]"), Some(Kind::Json));
        assert_eq!(sniff(b"<!DOCTYPE html><html>"), Some(Kind::Html));
        assert_eq!(
            sniff(b"<?xml version='1.0'?>\n<svg xmlns="),
            Some(Kind::Svg)
        );
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n...."), Some(Kind::Png));
        assert_eq!(sniff(b"%PDF-1.4"), Some(Kind::Pdf));
        assert_eq!(sniff(b"\x7fELF\x02\x01\x01"), Some(Kind::Elf));
        assert_eq!(
            sniff(b"policy,budget_pct,huge_share\npcc,1,0.5\n"),
            Some(Kind::Csv)
        );
        assert_eq!(sniff(b""), None);
        assert_eq!(sniff(b"my thesis, chapter 1\n"), None);
    }

    #[test]
    fn refuses_what_must_not_be_replaced() {
        let d = tmpdir("refuse");
        let input = d.join("t.hst");
        fs::write(&input, MAGIC).unwrap();
        let msg = |r: Result<PathBuf>| r.unwrap_err().to_string();
        assert!(
            msg(check(&input, Some(Kind::Json), &[input.as_path()], false))
                .contains("same file as the input")
        );
        let hard = d.join("hard.json");
        fs::hard_link(&input, &hard).unwrap();
        assert!(
            msg(check(&hard, Some(Kind::Trace), &[input.as_path()], false)).contains("same file")
        );
        assert!(msg(check(&d, Some(Kind::Json), &[], false)).contains("a directory"));
        assert!(msg(check("/dev/null", Some(Kind::Json), &[], false)).contains("character device"));
        assert!(msg(check(
            d.join("missing/x.json"),
            Some(Kind::Json),
            &[],
            false
        ))
        .contains("does not exist"));
        assert!(
            msg(check(input.join("x.json"), Some(Kind::Json), &[], false))
                .contains("not a directory")
        );
        let res = d.join("r.json");
        fs::write(&res, "{}\n").unwrap();
        assert!(msg(check(&res, Some(Kind::Html), &[], false)).contains("holds JSON"));
        assert_eq!(check(&res, Some(Kind::Json), &[], false).unwrap(), res);
        let link = d.join("link.json");
        std::os::unix::fs::symlink("r.json", &link).unwrap();
        assert!(msg(check(&link, Some(Kind::Json), &[], false)).contains("symbolic link"));
        assert_eq!(
            check(&link, Some(Kind::Json), &[], true).unwrap(),
            d.join("r.json")
        );
        let dangling = d.join("dangling.json");
        std::os::unix::fs::symlink("new.json", &dangling).unwrap();
        assert_eq!(
            check(&dangling, Some(Kind::Json), &[], true).unwrap(),
            d.join("new.json")
        );
        let long = d.join("x".repeat(MAX_NAME_BYTES + 1));
        assert!(msg(check(&long, Some(Kind::Json), &[], false)).contains("bytes long"));
        // No probe file is left behind.
        let left: Vec<_> = fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(
            left.iter()
                .all(|n| !n.to_string_lossy().starts_with(".hugescope-probe")),
            "{left:?}"
        );
        fs::remove_dir_all(&d).unwrap();
    }
}
