//! Kernel settings hugescope changes, recorded so that they are always put back.
//!
//! A setting (a file under /proc/sys or /sys) is changed only through `change`,
//! which first records the value it had in a state file, and is put back by
//! `release`. If the process that changed it dies without releasing (SIGKILL, a
//! crash, the OOM killer), the record stays behind and `repair_stale`, called by
//! every Linux-side command before it starts, restores the value and removes the
//! record. The state file lives in /run/hugescope by default because /run is
//! cleared at boot exactly when sysctls go back to their defaults, so a record
//! never outlives the change it describes; `HUGESCOPE_STATE_DIR` moves it (tests).
//!
//! Each record names its owners by PID *and* start time (field 22 of
//! /proc/PID/stat): a PID reused by an unrelated process after a kill does not
//! look like a live owner. Several invocations may hold the same setting (two
//! fragmenters): the first records the original value, later ones join the owner
//! list, and the original is restored when the last owner releases or dies.
//! Every read-modify-write of the state file holds an exclusive `flock` on a
//! separate lock file (the state file itself is replaced by rename, so locking it
//! would lock a file that is about to be unlinked), and the state file is written
//! to a temporary file and renamed, so a reader never sees half a record.
//!
//! The journal is trusted only as far as its file can be: whoever can write the
//! state file decides what root writes where on the next invocation. So
//! (`trusted_dir`, `Locked::read`) the directory and each directory above it
//! must be owned by root (or by this user, for a non-root run) and writable by
//! no one else (a sticky directory such as /tmp is allowed above it, since
//! others cannot rename or remove what is ours there); the state and lock files
//! must be regular files owned by this user with no permissions for group or
//! others, opened without following symbolic links; and every recorded path
//! must be one of the kernel settings hugescope itself changes (`ALLOWED`),
//! with a value of the shape those settings take. Anything else is refused
//! with one line and nothing is written.

use crate::{Error, Result};
use hugescope_core::trusted_dir;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The environment variable that moves the state directory.
pub const STATE_DIR_ENV: &str = "HUGESCOPE_STATE_DIR";
pub const DEFAULT_STATE_DIR: &str = "/run/hugescope";
const STATE_FILE: &str = "state.json";
const LOCK_FILE: &str = "state.lock";
/// Largest state file read: a record is a path, a value and a few owners, and
/// hugescope changes a handful of settings; 1 MiB is thousands of times that.
const MAX_STATE_BYTES: u64 = 1 << 20;
/// Longest value a setting may be restored to (the longest legitimate one is
/// a THP mode word or a decimal integer).
const MAX_VALUE_BYTES: usize = 64;

/// The kernel settings the journal may restore: the ones hugescope changes
/// (the fragmenter's sysctls, the daemon's THP mode) and the THP knobs it may
/// change in future, nothing else. A record naming any other path is a forged
/// or corrupt file, never something to write as root.
const ALLOWED: &[&str] = &[
    "/proc/sys/vm/compact_unevictable_allowed",
    "/proc/sys/vm/max_map_count",
    "/proc/sys/vm/compaction_proactiveness",
    "/proc/sys/vm/extfrag_threshold",
    "/sys/kernel/mm/transparent_hugepage/enabled",
    "/sys/kernel/mm/transparent_hugepage/defrag",
    "/sys/kernel/mm/transparent_hugepage/shmem_enabled",
    "/sys/kernel/mm/transparent_hugepage/khugepaged/defrag",
    "/sys/kernel/mm/transparent_hugepage/khugepaged/pages_to_scan",
    "/sys/kernel/mm/transparent_hugepage/khugepaged/scan_sleep_millisecs",
    "/sys/kernel/mm/transparent_hugepage/khugepaged/alloc_sleep_millisecs",
    "/sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none",
    "/sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_swap",
    "/sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_shared",
];

#[cfg(test)]
thread_local! {
    /// Unit tests change stand-in files under a temporary directory.
    static TEST_ROOT: std::cell::RefCell<Option<PathBuf>> = const { std::cell::RefCell::new(None) };
}

/// Whether `path` is a kernel setting the journal may write: one of `ALLOWED`,
/// or a per-size mTHP `enabled` file (hugepages-<N>kB/enabled).
pub fn is_allowed(path: &str) -> bool {
    #[cfg(test)]
    if TEST_ROOT.with(|r| r.borrow().as_ref().is_some_and(|root| Path::new(path).parent() == Some(root.as_path()))) {
        return true;
    }
    if ALLOWED.contains(&path) {
        return true;
    }
    let Some(rest) = path.strip_prefix("/sys/kernel/mm/transparent_hugepage/hugepages-") else { return false };
    let Some(n) = rest.strip_suffix("kB/enabled") else { return false };
    !n.is_empty() && n.len() <= 10 && n.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `v` has the shape of a value those settings take: a short word or
/// integer (letters, digits, '_', '-', '+'), never a newline or a path.
fn is_plain_value(v: &str) -> bool {
    !v.is_empty() && v.len() <= MAX_VALUE_BYTES && v.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-+".contains(&b))
}

/// Cut and escape a value from an untrusted file for a message.
fn shown(s: &str) -> String {
    hugescope_core::error::shown(s, 80)
}

/// A process, identified so that a reused PID is not taken for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub pid: i32,
    /// Start time in clock ticks since boot (/proc/PID/stat field 22).
    pub start_ticks: u64,
}

/// One changed setting: its path, the value it had before hugescope changed it,
/// and the processes that still rely on the change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub path: String,
    pub original: String,
    pub owners: Vec<Owner>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct State {
    version: u32,
    settings: Vec<Record>,
}

/// What `repair_stale` did with one setting left behind by a dead owner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Repair {
    pub path: String,
    pub original: String,
    /// The PIDs of the dead owners.
    pub owners: Vec<i32>,
    /// `None`: restored; else why it could not be (the record is kept).
    pub error: Option<String>,
}

/// One line for the user about a repair.
pub fn describe(r: &Repair) -> String {
    let who = r.owners.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ");
    match &r.error {
        None => format!("restored {} to {} (changed by hugescope process {who}, which was killed before it could restore it)",
                        r.path, r.original),
        Some(e) => format!("{} is still changed by a killed hugescope process {who} (was {}); could not restore it: {e}",
                           r.path, r.original),
    }
}

pub fn state_dir() -> PathBuf {
    match std::env::var_os(STATE_DIR_ENV) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(DEFAULT_STATE_DIR),
    }
}

pub fn state_path() -> PathBuf {
    state_dir().join(STATE_FILE)
}

/// Start time of `pid` in clock ticks since boot, `None` if there is no such process.
pub fn start_ticks(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses: fields after
    // it are counted from the last ')'. Field 3 is the first after it; 22 is the 20th.
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// This process as an owner.
pub fn me() -> Owner {
    let pid = std::process::id() as i32;
    Owner { pid, start_ticks: start_ticks(pid).unwrap_or(0) }
}

/// True when the process recorded as `o` is still running (same PID, same start).
/// A zombie counts as dead: it can no longer release anything.
pub fn is_alive(o: &Owner) -> bool {
    if start_ticks(o.pid) != Some(o.start_ticks) {
        return false;
    }
    let state = std::fs::read_to_string(format!("/proc/{}/stat", o.pid)).ok();
    let s = state.as_deref().and_then(|t| t.rfind(')').map(|i| &t[i + 1..])).and_then(|r| r.split_whitespace().next());
    !matches!(s, Some("Z") | Some("X") | None)
}

/// The state directory, locked for this process until the guard is dropped.
struct Locked {
    dir: PathBuf,
    _lock: File,
}

impl Locked {
    fn acquire(create: bool) -> Result<Locked> {
        let dir = state_dir();
        if create {
            // Root-only: the record says which settings to write back as root.
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).map_err(|e| Error::io(&dir, e))?;
        }
        trusted_dir(&dir)?;
        let lp = dir.join(LOCK_FILE);
        // O_NOFOLLOW: a planted symbolic link is never opened (for writing,
        // even without truncation, it would touch the file it names).
        let lock = OpenOptions::new().create(true).truncate(false).write(true).mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC).open(&lp)
            .map_err(|e| untrusted_open(&lp, e))?;
        trusted_file(&lp, &lock.metadata().map_err(|e| Error::io(&lp, e))?)?;
        // Blocks until the other holder is done; a signal (EINTR) retries.
        loop {
            match rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive) {
                Ok(()) => break,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(Error::sys(format!("flock({})", lp.display()), e.into())),
            }
        }
        Ok(Locked { dir, _lock: lock })
    }

    fn path(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    /// The records, if the file is trusted and every record is one the
    /// journal may act on; else one refusal naming the file and the reason.
    fn read(&self) -> Result<State> {
        let p = self.path();
        let f = match OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC).open(&p) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(State { version: 1, settings: Vec::new() }),
            Err(e) => return Err(untrusted_open(&p, e)),
        };
        let meta = f.metadata().map_err(|e| Error::io(&p, e))?;
        trusted_file(&p, &meta)?;
        if meta.len() > MAX_STATE_BYTES {
            return Err(refuse(&p, format!("is {} bytes, more than a state file can be ({MAX_STATE_BYTES})", meta.len())));
        }
        let mut text = String::new();
        f.take(MAX_STATE_BYTES + 1).read_to_string(&mut text).map_err(|e| Error::io(&p, e))?;
        let s: State = serde_json::from_str(&text)
            .map_err(|e| refuse(&p, format!("is not a hugescope state file (line {}, column {})", e.line(), e.column())))?;
        for r in &s.settings {
            if !is_allowed(&r.path) {
                return Err(refuse(&p, format!("names {}, which is not a kernel setting hugescope changes", shown(&r.path))));
            }
            if !is_plain_value(&r.original) {
                return Err(refuse(&p, format!("records the value {} for {}, which is not a setting's value", shown(&r.original), r.path)));
            }
        }
        Ok(s)
    }

    /// Replace the state file atomically; no settings left means no file.
    fn write(&self, s: &State) -> Result<()> {
        let p = self.path();
        if s.settings.is_empty() {
            return match std::fs::remove_file(&p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(&p, e)),
                _ => Ok(()),
            };
        }
        let tmp = self.dir.join(format!(".{STATE_FILE}.{}.tmp", std::process::id()));
        let text = serde_json::to_string_pretty(s).map_err(|e| Error::input(e.to_string()))?;
        let written = (|| -> std::io::Result<()> {
            let mut f = OpenOptions::new().create(true).truncate(true).write(true).mode(0o600).open(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.write_all(b"\n")?;
            f.sync_all()
        })();
        if let Err(e) = written.and_then(|_| std::fs::rename(&tmp, &p)) {
            let _ = std::fs::remove_file(&tmp);
            return Err(Error::io(&p, e));
        }
        Ok(())
    }
}

/// One refusal line about the journal at `p`; nothing is written after it.
fn refuse(p: &Path, why: String) -> Error {
    Error::refused(format!("settings journal {}: {why}; nothing was restored or changed (remove the file as root if it is yours)", p.display()))
}

/// A refusal of the shared trust rule (`hugescope_core::trusted_dir`,
/// described at the top of this file) as the journal's error.
fn distrust(d: trusted_dir::Distrust) -> Error {
    match d {
        trusted_dir::Distrust::Untrusted { path, why } => refuse(&path, why),
        trusted_dir::Distrust::Io { path, source } => Error::io(path, source),
    }
}

fn untrusted_open(p: &Path, e: std::io::Error) -> Error {
    distrust(trusted_dir::open_error(p, e))
}

fn trusted_file(p: &Path, m: &std::fs::Metadata) -> Result<()> {
    trusted_dir::check_file(p, m).map_err(distrust)
}

fn trusted_dir(dir: &Path) -> Result<()> {
    trusted_dir::check_dir(dir, "the state directory").map_err(distrust)
}

/// A setting's current value as it can be written back: for a multiple-choice
/// sysfs file ("always [madvise] never") the selected word, else the trimmed
/// text.
pub fn read_setting(path: &str) -> Result<String> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let t = text.trim();
    match (t.find('['), t.find(']')) {
        (Some(a), Some(b)) if a < b => Ok(t[a + 1..b].to_string()),
        _ => Ok(t.to_string()),
    }
}

fn write_setting(path: &str, value: &str) -> Result<()> {
    std::fs::write(path, format!("{value}\n")).map_err(|e| Error::io(path, e))
}

/// Set `path` to `value`, recording the value it had first (or joining the
/// owners of an earlier record of the same setting). Returns the original value.
/// Nothing is written to the setting unless the record is safely on disk.
pub fn change(path: &str, value: &str) -> Result<String> {
    if !is_allowed(path) || !is_plain_value(value) {
        return Err(Error::input(format!("{}: not a kernel setting hugescope may change (or {} is not a value for it)",
                                        shown(path), shown(value))));
    }
    let l = Locked::acquire(true)?;
    let mut s = l.read()?;
    let me = me();
    let original = match s.settings.iter_mut().find(|r| r.path == path) {
        Some(r) => {
            if !r.owners.contains(&me) {
                r.owners.push(me);
            }
            r.original.clone()
        }
        None => {
            let original = read_setting(path)?;
            s.settings.push(Record { path: path.to_string(), original: original.clone(), owners: vec![me] });
            original
        }
    };
    l.write(&s)?;
    if let Err(e) = write_setting(path, value) {
        // Not changed after all: drop our claim again.
        drop(l);
        let _ = release(path);
        return Err(e);
    }
    Ok(original)
}

/// Give up this process's claim on `path`; the last owner restores the original
/// value and removes the record. Returns the value restored, if this call did.
pub fn release(path: &str) -> Result<Option<String>> {
    let l = Locked::acquire(false)?;
    let mut s = l.read()?;
    let me = me();
    let Some(i) = s.settings.iter().position(|r| r.path == path) else { return Ok(None) };
    let r = &mut s.settings[i];
    r.owners.retain(|o| *o != me && is_alive(o));
    if !r.owners.is_empty() {
        l.write(&s)?;
        return Ok(None);
    }
    let original = r.original.clone();
    write_setting(path, &original)?;
    s.settings.remove(i);
    l.write(&s)?;
    Ok(Some(original))
}

/// Restore every recorded setting whose owners have all died, and remove those
/// records. Cheap when there is no state file (the usual case). Records that
/// cannot be restored here (not root) are reported with the reason and kept.
pub fn repair_stale() -> Result<Vec<Repair>> {
    let p = state_path();
    if !p.exists() {
        return Ok(Vec::new());
    }
    let l = match Locked::acquire(false) {
        Ok(l) => l,
        // An untrusted journal: one refusal, nothing restored.
        Err(e @ Error::Refused(_)) => return Err(e),
        Err(e) => {
            return Ok(vec![Repair { path: p.display().to_string(), original: String::new(), owners: Vec::new(),
                                    error: Some(format!("cannot lock the state file ({e})")) }])
        }
    };
    let mut s = l.read()?;
    let mut out = Vec::new();
    let mut changed = false;
    s.settings.retain_mut(|r| {
        let before = r.owners.len();
        let dead: Vec<i32> = r.owners.iter().filter(|o| !is_alive(o)).map(|o| o.pid).collect();
        r.owners.retain(is_alive);
        changed |= r.owners.len() != before;
        if !r.owners.is_empty() {
            return true;
        }
        let error = write_setting(&r.path, &r.original).err().map(|e| e.to_string());
        let keep = error.is_some();
        if keep {
            // Keep the record (owners gone) so that a later call as root restores it.
            r.owners.clear();
        }
        out.push(Repair { path: r.path.clone(), original: r.original.clone(), owners: dead, error });
        changed = true;
        keep
    });
    if changed {
        l.write(&s)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::Mutex;

    // The state directory is process-wide (an environment variable): one test at a time.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn setup() -> (tempfile::TempDir, String) {
        let d = tempfile::tempdir().unwrap();
        std::env::set_var(STATE_DIR_ENV, d.path().join("state"));
        let knob = d.path().join("knob");
        std::fs::write(&knob, "1\n").unwrap();
        TEST_ROOT.with(|r| *r.borrow_mut() = Some(d.path().to_path_buf()));
        (d, knob.to_str().unwrap().to_string())
    }

    /// Write a state file by hand (0600, ours) naming `path` with `original`.
    fn plant(path: &str, original: &str) {
        let dir = state_dir();
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).unwrap();
        let text = format!(r#"{{"version": 1, "settings": [{{"path": {path:?}, "original": {original:?}, "owners": [{{"pid": 2147483646, "start_ticks": 1}}]}}]}}"#);
        let f = dir.join(STATE_FILE);
        std::fs::write(&f, text).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    }

    #[test]
    fn only_allow_listed_settings_with_plain_values_are_restored() {
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let (d, knob) = setup();
        // A path outside the allow-list: refused, the file it names untouched.
        let victim = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(victim.path(), "precious\n").unwrap();
        plant(victim.path().to_str().unwrap(), "0");
        let e = repair_stale().unwrap_err().to_string();
        assert!(e.contains("not a kernel setting hugescope changes") && e.contains("nothing was restored"), "{e}");
        assert_eq!(std::fs::read_to_string(victim.path()).unwrap(), "precious\n");
        assert!(state_path().exists(), "a refused journal is left as it is");
        // An allowed path with a value that is not a setting's value.
        plant(&knob, "1\nmore");
        let e = repair_stale().unwrap_err().to_string();
        assert!(e.contains("not a setting's value"), "{e}");
        assert_eq!(std::fs::read_to_string(&knob).unwrap(), "1\n");
        // change() refuses to journal a path outside the list.
        std::fs::remove_file(state_path()).unwrap();
        let e = change("/etc/hostname", "x").unwrap_err().to_string();
        assert!(e.contains("not a kernel setting"), "{e}");
        assert!(!state_path().exists());
        assert!(is_allowed("/sys/kernel/mm/transparent_hugepage/hugepages-64kB/enabled"));
        for bad in ["/sys/kernel/mm/transparent_hugepage/hugepages-64kB/../../../../etc/passwd",
                    "/sys/kernel/mm/transparent_hugepage/hugepages-kB/enabled", "/etc/passwd",
                    "/proc/sys/vm/max_map_count/", "/proc/sys/vm/../vm/max_map_count"] {
            assert!(!is_allowed(bad), "{bad}");
        }
        drop(d);
    }

    #[test]
    fn an_untrusted_journal_is_refused_and_nothing_is_written() {
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let (d, knob) = setup();
        // Group- or world-readable state file.
        plant(&knob, "0");
        std::fs::write(&knob, "5\n").unwrap();
        std::fs::set_permissions(state_path(), std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = repair_stale().unwrap_err().to_string();
        assert!(e.contains("mode 0644"), "{e}");
        assert_eq!(std::fs::read_to_string(&knob).unwrap(), "5\n");
        // A symbolic link as the state file.
        std::fs::remove_file(state_path()).unwrap();
        let real = d.path().join("elsewhere.json");
        std::fs::write(&real, "{}").unwrap();
        std::os::unix::fs::symlink(&real, state_path()).unwrap();
        let e = repair_stale().unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        std::fs::remove_file(state_path()).unwrap();
        // A state directory others can write to.
        plant(&knob, "0");
        std::fs::set_permissions(state_dir(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = repair_stale().unwrap_err().to_string();
        assert!(e.contains("writable only by it"), "{e}");
        let e = change(&knob, "7").unwrap_err().to_string();
        assert!(e.contains("writable only by it"), "{e}");
        assert_eq!(std::fs::read_to_string(&knob).unwrap(), "5\n");
        std::fs::set_permissions(state_dir(), std::fs::Permissions::from_mode(0o700)).unwrap();
        // A state directory under a non-sticky world-writable directory.
        let open = d.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::env::set_var(STATE_DIR_ENV, open.join("state"));
        let e = change(&knob, "7").unwrap_err().to_string();
        assert!(e.contains("which others can write to"), "{e}");
        assert_eq!(std::fs::read_to_string(&knob).unwrap(), "5\n");
        // Sticky (as /tmp): allowed.
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert_eq!(change(&knob, "7").unwrap(), "5");
        assert_eq!(release(&knob).unwrap().as_deref(), Some("5"));
    }

    #[test]
    fn a_multiple_choice_setting_is_recorded_as_its_selected_word() {
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let (_d, knob) = setup();
        std::fs::write(&knob, "always [madvise] never\n").unwrap();
        assert_eq!(read_setting(&knob).unwrap(), "madvise");
    }

    #[test]
    fn change_and_release_restore_and_remove_the_record() {
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let (_d, knob) = setup();
        assert_eq!(change(&knob, "0").unwrap(), "1");
        assert_eq!(read_setting(&knob).unwrap(), "0");
        let text = std::fs::read_to_string(state_path()).unwrap();
        assert!(text.contains(&knob) && text.contains("\"original\": \"1\""), "{text}");
        // A live owner: nothing to repair.
        assert!(repair_stale().unwrap().is_empty());
        assert_eq!(release(&knob).unwrap().as_deref(), Some("1"));
        assert_eq!(read_setting(&knob).unwrap(), "1");
        assert!(!state_path().exists());
        assert_eq!(release(&knob).unwrap(), None);
    }

    #[test]
    fn a_dead_owner_is_repaired_and_a_reused_pid_is_not_an_owner() {
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let (_d, knob) = setup();
        change(&knob, "0").unwrap();
        // Pretend the owner was an earlier process with our PID (PID reuse): a
        // different start time is a different process.
        let l = Locked::acquire(false).unwrap();
        let mut s = l.read().unwrap();
        s.settings[0].owners[0].start_ticks += 1;
        l.write(&s).unwrap();
        drop(l);
        let r = repair_stale().unwrap();
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!((r[0].original.as_str(), r[0].error.as_ref()), ("1", None));
        assert_eq!(read_setting(&knob).unwrap(), "1");
        assert!(!state_path().exists());
    }

    #[test]
    fn a_second_owner_keeps_the_change_until_it_releases() {
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let (_d, knob) = setup();
        change(&knob, "0").unwrap();
        // Another live process (our parent, the test runner's) joins the record.
        let parent = unsafe { libc::getppid() };
        let other = Owner { pid: parent, start_ticks: start_ticks(parent).unwrap() };
        let l = Locked::acquire(false).unwrap();
        let mut s = l.read().unwrap();
        s.settings[0].owners.push(other);
        l.write(&s).unwrap();
        drop(l);
        assert_eq!(release(&knob).unwrap(), None);
        assert_eq!(read_setting(&knob).unwrap(), "0");
        assert!(state_path().exists());
        // Clean up: the parent never really owned it.
        std::fs::remove_file(state_path()).unwrap();
    }

    #[test]
    fn stat_start_time_parses_names_with_parentheses() {
        assert!(start_ticks(std::process::id() as i32).is_some());
        assert!(start_ticks(i32::MAX).is_none());
        assert!(is_alive(&me()));
    }
}
