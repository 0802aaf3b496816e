//! The results cache: reference runs that do not change, kept between runs.
//!
//! Every `simulate --policy`, sweep point batch and reproduction adds a
//! `base` run beside the policies for their speedups (`run::add_base`);
//! sweeps also ask for `base` and `ideal` as reference lines, and
//! reproductions for static page-size maps (all 4KB, 2MB, 1GB). For the same
//! trace, machine and OS configuration each is the same every time, and on
//! graph traces `base` costs more than the policy run itself (issue #37). So
//! each is stored here once and read back after (`run::reference_key` and
//! `run::Assembly` for policy runs, `sim::simulate_static` for static maps:
//! which runs, what is stored).
//!
//! - **Key.** The canonical JSON of: this cache's format version, the
//!   hugescope version and a hash of the core's sources taken at build time
//!   (`build.rs`: a model change invalidates every entry), the trace's
//!   content identity (`hst::content_identity`: length and hashes over every
//!   frame header, each of which holds its chunk's CRC-32), the full machine
//!   configuration, the resolved OS configuration of the run (time base,
//!   budget and fragmentation included; none for a static map) as
//!   serialized, and the reference run (its policies and their parameters,
//!   or the static map as resolved). The file name is a hash of the key; the
//!   entry holds the key itself, and a different key (a hash collision) is
//!   a miss.
//! - **Where.** `$HUGESCOPE_CACHE_DIR`, else `$XDG_CACHE_HOME/hugescope`,
//!   else `~/.cache/hugescope`. `HUGESCOPE_NO_CACHE=1` (the CLI's
//!   `--no-cache`) turns it off. Users run as root: the directory is used
//!   only when `trusted_dir::check_dir` trusts it (the settings journal's
//!   rule: owned by this user, writable by no one else, no world-writable
//!   non-sticky directory above, not a symbolic link) and an entry only when
//!   `check_file` trusts it; otherwise the cache is off for the run and
//!   `status()` says why.
//! - **Bounded.** At most `HUGESCOPE_CACHE_MAX_BYTES` (default
//!   `DEFAULT_MAX_BYTES`, 64 MiB: a static map's entry is a few KiB, a policy
//!   run's about 0.3 KiB per timeline sample, so 300 KiB for 10^9 accesses at
//!   the default sample period; one larger than `MAX_ENTRY_BYTES` is not
//!   stored). A read touches the
//!   entry's modification time, and after a store the least recently used
//!   entries are removed until the total is under the bound (LRU).
//! - **Safe under concurrent runs.** An entry is written to a temporary file
//!   of its own (`O_EXCL`), synced and renamed over the final name, so a
//!   reader sees a whole entry or none. Two runs storing the same key write
//!   the same bytes.
//! - **Never trusted blindly.** An entry is one line of CRC-32 (hex) and then
//!   the JSON body. A bad checksum, a wrong key, a body that does not parse,
//!   or a reference that does not serialize back to the stored text byte for
//!   byte is ignored (a miss) and replaced by the next store. Results are
//!   byte-identical with and without the cache (tested).

use crate::config::MachineConfig;
use crate::os::kernel::OsConfig;
use serde::de::DeserializeOwned;
use serde::Serialize;
use crate::trusted_dir::{self, Distrust};
use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

pub const CACHE_DIR_ENV: &str = "HUGESCOPE_CACHE_DIR";
pub const NO_CACHE_ENV: &str = "HUGESCOPE_NO_CACHE";
pub const MAX_BYTES_ENV: &str = "HUGESCOPE_CACHE_MAX_BYTES";
/// Default bound on the cache's total size.
pub const DEFAULT_MAX_BYTES: u64 = 64 << 20;
/// Bumped when the entry layout or the key's content changes (2: whole
/// results of reference runs, static maps).
pub const FORMAT: u32 = 2;
/// Largest entry stored or read (a run's result grows with its timeline).
const MAX_ENTRY_BYTES: u64 = 16 << 20;
const SUFFIX: &str = ".entry";

/// Hits and stores since the process started, for the line that says so.
static HITS: AtomicU64 = AtomicU64::new(0);
/// Hits by kind of reference run (`CacheKey::kind`), in order of first hit.
static HITS_BY_KIND: Mutex<Vec<(String, u64)>> = Mutex::new(Vec::new());
static STORES: AtomicU64 = AtomicU64::new(0);
/// Why the cache was last found unusable (None: usable or never tried).
static REFUSED: Mutex<Option<String>> = Mutex::new(None);

/// The cache directory as configured, whether or not it exists; None when
/// turned off or no home is known.
pub fn configured_dir() -> Option<PathBuf> {
    if std::env::var_os(NO_CACHE_ENV).is_some_and(|v| !v.is_empty() && v != "0") {
        return None;
    }
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(d) = env(CACHE_DIR_ENV) {
        return Some(d);
    }
    // XDG: a relative XDG_CACHE_HOME is invalid and ignored.
    if let Some(x) = env("XDG_CACHE_HOME").filter(|p| p.is_absolute()) {
        return Some(x.join("hugescope"));
    }
    env("HOME").map(|h| h.join(".cache").join("hugescope"))
}

/// The bound on the cache's size (`MAX_BYTES_ENV`, else the default).
pub fn max_bytes() -> crate::Result<u64> {
    match std::env::var(MAX_BYTES_ENV) {
        Ok(v) if !v.is_empty() => crate::units::parse_size(&v)
            .map_err(|e| crate::Error::input(format!("{MAX_BYTES_ENV}={}: {e}", crate::error::shown(&v, 40)))),
        _ => Ok(DEFAULT_MAX_BYTES),
    }
}

/// The usable cache directory, created (mode 0700) if missing; None when the
/// cache is off or the directory is not trusted (the reason kept for `status`).
fn usable_dir() -> Option<PathBuf> {
    let dir = configured_dir()?;
    let checked = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| Distrust::Io { path: dir.clone(), source: e })
        .and_then(|_| trusted_dir::check_dir(&dir, "the cache directory"));
    match checked {
        Ok(()) => Some(dir),
        Err(d) => {
            *REFUSED.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("results cache not used: {d}"));
            None
        }
    }
}

/// What a reference run is keyed on (see the module comment).
#[derive(Clone, Debug, PartialEq)]
pub struct CacheKey {
    text: String,
    /// What the run is, for the line that says what was reused ("base",
    /// "static all 4KB"): not part of the key (`reference` decides).
    kind: String,
}

impl CacheKey {
    /// The key of reference run `reference` (its canonical description) of
    /// the trace with `trace_identity` on `machine`, under `os` (None: a
    /// static map, which has no OS). `kind` names it for people.
    pub fn new(trace_identity: &str, machine: &MachineConfig, os: Option<&OsConfig>, reference: serde_json::Value, kind: &str) -> crate::Result<CacheKey> {
        let v = serde_json::json!({
            "format": FORMAT,
            "hugescope_version": env!("CARGO_PKG_VERSION"),
            // A hash of the crate's sources (build.rs): a changed model
            // never reads an older build's entries, version bump or not.
            "model": env!("HUGESCOPE_MODEL_HASH"),
            "trace": trace_identity,
            "machine": machine,
            "os": os,
            "reference": reference,
        });
        let text = serde_json::to_string(&v).map_err(|e| crate::Error::input(e.to_string()))?;
        Ok(CacheKey { text, kind: kind.to_string() })
    }

    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// File name: two independent hashes of the key (96 bits); the entry
    /// holds the key, so a collision is only a miss.
    fn file_name(&self) -> String {
        let fnv = crate::fnv::update(crate::fnv::START, self.text.as_bytes());
        format!("{fnv:016x}{:08x}{SUFFIX}", crc32fast::hash(self.text.as_bytes()))
    }
}

/// The keys of one trace's reference runs: the trace's content identity is
/// read on the first key asked for (one pass over the frame headers), and
/// not at all when the cache is off.
pub struct TraceKeys<'a> {
    path: &'a str,
    identity: Option<String>,
}

impl<'a> TraceKeys<'a> {
    pub fn new(path: &'a str) -> TraceKeys<'a> {
        TraceKeys { path, identity: None }
    }

    /// `CacheKey::new` for this trace; None when the cache is off.
    pub fn key(&mut self, machine: &MachineConfig, os: Option<&OsConfig>, reference: serde_json::Value, kind: &str) -> crate::Result<Option<CacheKey>> {
        if configured_dir().is_none() {
            return Ok(None);
        }
        if self.identity.is_none() {
            self.identity = Some(crate::trace::hst::content_identity(self.path)?);
        }
        let id = self.identity.as_deref().expect("set above");
        CacheKey::new(id, machine, os, reference, kind).map(Some)
    }
}

/// The entry's text: CRC-32 of the body, newline, body.
fn entry_text<T: Serialize>(key: &CacheKey, reference: &T) -> crate::Result<String> {
    let refer = serde_json::to_string(reference).map_err(|e| crate::Error::input(e.to_string()))?;
    let body = format!("{{\"key\":{},\"reference\":{refer}}}", key.text);
    Ok(format!("{:08x}\n{body}", crc32fast::hash(body.as_bytes())))
}

/// The reference stored in `text` under `key`, if the entry is whole and
/// exactly what `store` writes for it.
fn parse_entry<T: Serialize + DeserializeOwned>(text: &str, key: &CacheKey) -> Option<T> {
    let (crc, body) = text.split_once('\n')?;
    if u32::from_str_radix(crc, 16).ok()? != crc32fast::hash(body.as_bytes()) {
        return None;
    }
    #[derive(serde::Deserialize)]
    #[serde(bound = "T: DeserializeOwned")]
    struct Body<T> {
        key: serde_json::Value,
        reference: T,
    }
    let b: Body<T> = serde_json::from_str(body).ok()?;
    if serde_json::to_string(&b.key).ok()? != key.text {
        return None;
    }
    // Round trip: what would be stored for this reference must be exactly
    // the stored text, so every number used is the one simulated.
    (entry_text(key, &b.reference).ok()? == text).then_some(b.reference)
}

/// The cached reference for `key`, if any trusted, whole entry holds it.
pub fn load<T: Serialize + DeserializeOwned>(key: &CacheKey) -> Option<T> {
    let dir = usable_dir()?;
    let p = dir.join(key.file_name());
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&p)
        .ok()?;
    let meta = f.metadata().ok()?;
    if trusted_dir::check_file(&p, &meta).is_err() || meta.len() > MAX_ENTRY_BYTES {
        return None;
    }
    let mut text = String::new();
    (&f).take(MAX_ENTRY_BYTES).read_to_string(&mut text).ok()?;
    let r = parse_entry(&text, key)?;
    // Least recently used: a read counts as a use.
    let _ = f.set_modified(std::time::SystemTime::now());
    HITS.fetch_add(1, Ordering::Relaxed);
    let mut by = HITS_BY_KIND.lock().unwrap_or_else(|e| e.into_inner());
    match by.iter_mut().find(|(k, _)| *k == key.kind) {
        Some((_, n)) => *n += 1,
        None => by.push((key.kind.clone(), 1)),
    }
    Some(r)
}

/// Store `reference` under `key` (atomically), then evict down to the bound.
/// A failure to store is not an error of the run: the result is complete
/// without the cache; it is noted for `status`.
pub fn store<T: Serialize>(key: &CacheKey, reference: &T) {
    let Some(dir) = usable_dir() else { return };
    match try_store(&dir, key, reference) {
        Ok(false) => return,
        Ok(true) => {}
        Err(e) => {
            *REFUSED.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("results cache: could not store an entry: {e}"));
            return;
        }
    }
    STORES.fetch_add(1, Ordering::Relaxed);
    if let Ok(bound) = max_bytes() {
        evict(&dir, bound);
    }
}

/// Write the entry; false when it is too large to be read back.
fn try_store<T: Serialize>(dir: &Path, key: &CacheKey, reference: &T) -> crate::Result<bool> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let text = entry_text(key, reference)?;
    if text.len() as u64 > MAX_ENTRY_BYTES {
        // Never read back (`load`): not worth the disk.
        return Ok(false);
    }
    let fin = dir.join(key.file_name());
    let tmp = dir.join(format!(
        ".{}.{}.{}.tmp",
        key.file_name(),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| -> std::io::Result<()> {
        let mut f = OpenOptions::new()
            .create_new(true)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()
    })();
    if let Err(e) = written.and_then(|_| std::fs::rename(&tmp, &fin)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(crate::Error::io(&fin, e));
    }
    Ok(true)
}

/// The entries of `dir`: (path, bytes, last use), oldest first.
fn entries(dir: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else { return out };
    for e in rd.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if !name.ends_with(SUFFIX) || name.starts_with('.') {
            continue;
        }
        if let Some(m) = e.metadata().ok().filter(|m| m.file_type().is_file()) {
            out.push((e.path(), m.len(), m.modified().unwrap_or(std::time::UNIX_EPOCH)));
        }
    }
    out.sort_by(|a, b| a.2.cmp(&b.2).then_with(|| a.0.cmp(&b.0)));
    out
}

/// Remove least recently used entries until the total is at most `bound`.
fn evict(dir: &Path, bound: u64) {
    let list = entries(dir);
    let mut total: u64 = list.iter().map(|e| e.1).sum();
    for (p, bytes, _) in list {
        if total <= bound {
            break;
        }
        // Another run may have removed it first: either way it is gone.
        let _ = std::fs::remove_file(&p);
        total -= bytes;
    }
}

/// What `hugescope cache info` prints.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CacheInfo {
    /// The directory (None: the cache is off).
    pub dir: Option<String>,
    pub enabled: bool,
    pub entries: u64,
    pub bytes: u64,
    pub max_bytes: u64,
    /// Why the cache is not used, when it is not.
    pub refused: Option<String>,
    /// Entries read and stored by this process.
    pub hits: u64,
    pub stores: u64,
}

/// The cache's state. Does not create the directory.
pub fn info() -> crate::Result<CacheInfo> {
    let max_bytes = max_bytes()?;
    let dir = configured_dir();
    let mut refused = status();
    let mut enabled = false;
    let (mut entries_n, mut bytes) = (0, 0);
    if let Some(d) = &dir {
        if d.exists() || std::fs::symlink_metadata(d).is_ok() {
            match trusted_dir::check_dir(d, "the cache directory") {
                Ok(()) => {
                    enabled = true;
                    let list = entries(d);
                    entries_n = list.len() as u64;
                    bytes = list.iter().map(|e| e.1).sum();
                }
                Err(e) => refused = Some(format!("results cache not used: {e}")),
            }
        } else {
            enabled = true; // created on first store
        }
    }
    Ok(CacheInfo {
        dir: dir.map(|d| d.display().to_string()),
        enabled,
        entries: entries_n,
        bytes,
        max_bytes,
        refused,
        hits: HITS.load(Ordering::Relaxed),
        stores: STORES.load(Ordering::Relaxed),
    })
}

/// Remove every entry (and stale temporary file) of a trusted cache
/// directory; other files are left alone. Returns how many were removed.
pub fn clear() -> crate::Result<u64> {
    let Some(dir) = configured_dir() else { return Ok(0) };
    if std::fs::symlink_metadata(&dir).is_err() {
        return Ok(0);
    }
    trusted_dir::check_dir(&dir, "the cache directory").map_err(|d| crate::Error::input(format!("refusing to clear the cache: {d}")))?;
    let mut n = 0;
    for e in std::fs::read_dir(&dir).map_err(|e| crate::Error::io(&dir, e))?.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        let ours = name.ends_with(SUFFIX) || (name.starts_with('.') && name.ends_with(".tmp") && name.contains(SUFFIX));
        // remove_file unlinks a symbolic link itself, never its target.
        if ours && std::fs::remove_file(e.path()).is_ok() {
            n += 1;
        }
    }
    Ok(n)
}

/// Entries read by this process so far (the CLI's "reused" line).
pub fn hits() -> u64 {
    HITS.load(Ordering::Relaxed)
}

/// Entries read by this process so far, by kind of reference run, in order
/// of first hit.
pub fn hits_by_kind() -> Vec<(String, u64)> {
    HITS_BY_KIND.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Why the cache was not usable in this process, if it was not.
pub fn status() -> Option<String> {
    REFUSED.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    // What `run` stores (its `Reference`) has this shape: counters and floats.
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Reference {
        accesses: u64,
        walk_rate: f64,
        total_cycles: f64,
    }

    fn reference() -> Reference {
        // A float that needs all 17 digits.
        Reference { accesses: 1000, walk_rate: 0.1 + 0.2, total_cycles: 12345.678901234567 }
    }

    fn key(t: &str) -> CacheKey {
        CacheKey::new(t, &crate::config::MachineConfig::preset("haswell-pcc").unwrap(), Some(&OsConfig::default()), serde_json::json!("base"), "base").unwrap()
    }

    #[test]
    fn an_entry_round_trips_exactly_and_any_change_to_it_is_a_miss() {
        let k = key("t1");
        let text = entry_text(&k, &reference()).unwrap();
        let back: Reference = parse_entry(&text, &k).expect("a whole entry reads back");
        assert_eq!(serde_json::to_string(&back).unwrap(), serde_json::to_string(&reference()).unwrap());
        // Another key (another trace) is a miss even with a valid checksum.
        assert!(parse_entry::<Reference>(&text, &key("t2")).is_none());
        // One changed digit: the checksum fails.
        let bad = text.replacen("1000", "1001", 1);
        assert_ne!(bad, text);
        assert!(parse_entry::<Reference>(&bad, &k).is_none());
        // A truncated entry (half written): a miss.
        assert!(parse_entry::<Reference>(&text[..text.len() / 2], &k).is_none());
        // A checksum recomputed over a changed body still fails the round
        // trip when the body is not what store writes (extra whitespace).
        let (_, body) = text.split_once('\n').unwrap();
        let spaced = body.replacen(",\"reference\"", ", \"reference\"", 1);
        let forged = format!("{:08x}\n{spaced}", crc32fast::hash(spaced.as_bytes()));
        assert!(parse_entry::<Reference>(&forged, &k).is_none());
    }

    #[test]
    fn eviction_removes_the_least_recently_used_entries_first() {
        let t = tempfile::tempdir().unwrap();
        let now = std::time::SystemTime::now();
        for (i, age) in [(0, 30u64), (1, 10), (2, 20)] {
            let p = t.path().join(format!("{i}{SUFFIX}"));
            std::fs::write(&p, vec![b'x'; 100]).unwrap();
            let f = std::fs::File::options().write(true).open(&p).unwrap();
            f.set_modified(now - std::time::Duration::from_secs(age)).unwrap();
        }
        std::fs::write(t.path().join("notes.txt"), "not ours").unwrap();
        evict(t.path(), 150);
        let left: Vec<String> = entries(t.path()).iter().map(|e| e.0.file_name().unwrap().to_string_lossy().into()).collect();
        // 0 (oldest) and 2 go, 1 (most recent) stays; other files untouched.
        assert_eq!(left, vec![format!("1{SUFFIX}")]);
        assert!(t.path().join("notes.txt").exists());
    }
}
