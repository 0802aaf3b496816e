//! A launched program's allocations, as its tracing runtime reports them,
//! for a plan written by allocation site (issue #38; `PlanEntry`'s sibling
//! `hugescope_core::plan::SiteEntry`).
//!
//! A program built with `hugescope cc` carries the runtime. Given
//! `HUGESCOPE_SITES_OUT`, the runtime appends a line `# alloc CALL SIZE
//! START RET...` to that file for every allocation of at least
//! `HUGESCOPE_SITE_MIN` bytes, and traces nothing. The launcher made the
//! file, in a directory of its own (mode 0700, created fresh, so no other
//! user and no symbolic link decides where it lies), and reads the new lines
//! at every step of its loop. The runtime first writes `# exe PATH` and a
//! `# maps` snapshot (ended by `# end`): a short program can be gone before
//! the launcher reads its `/proc/PID/maps`. Each allocation is symbolized
//! against those maps (and the live ones, for libraries loaded later) by the
//! same code that names a trace's regions (`trace::import::sites`), so its
//! key is the key a trace of the program gave the site.

use crate::smaps::Pid;
use crate::{Error, Result};
use hugescope_core::trace::import::{maps, sites};
use std::io::Read;
use std::path::PathBuf;

/// The environment variables the runtime reads (tracer/hugescope_trace.c).
pub const SITES_ENV: &str = "HUGESCOPE_SITES_OUT";
pub const SITE_MIN_ENV: &str = "HUGESCOPE_SITE_MIN";

/// One allocation of the launched program: `[start, end)` and its site key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocation {
    pub start: u64,
    pub end: u64,
    pub key: String,
}

pub struct SiteWatch {
    dir: PathBuf,
    pub path: PathBuf,
    file: std::fs::File,
    /// Bytes read but not yet a whole line.
    partial: Vec<u8>,
    /// Lines read in all, bounded: a program allocating large blocks in a loop
    /// for hours must not grow the launcher without end.
    pub lines: u64,
    /// The program's executable and its maps at start, as the runtime wrote them.
    exe: Option<String>,
    maps: Vec<maps::MapEntry>,
    in_maps: bool,
}

/// Most allocation lines read from one run; later ones are ignored (and
/// counted, so the run record can say so).
pub const MAX_LINES: u64 = 1 << 20;
/// Most mappings kept from the runtime's snapshot (a real program has hundreds).
const MAX_MAPS: usize = 1 << 16;

impl SiteWatch {
    /// Make the directory and the empty file the runtime appends to.
    pub fn create() -> Result<SiteWatch> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let base = std::env::temp_dir();
        let mut last = None;
        for n in 0..100u32 {
            let dir = base.join(format!("hugescope-sites-{}-{n}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => {
                    let path = dir.join("sites");
                    let made = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path);
                    if let Err(e) = made {
                        let _ = std::fs::remove_dir(&dir);
                        return Err(Error::io(&path, e));
                    }
                    let file = std::fs::File::open(&path).map_err(|e| Error::io(&path, e))?;
                    return Ok(SiteWatch { dir, path, file, partial: Vec::new(), lines: 0, exe: None, maps: Vec::new(), in_maps: false });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(Error::io(&dir, e)),
            }
        }
        Err(Error::io(&base, last.unwrap_or_else(|| std::io::Error::other("no free name"))))
    }

    /// The allocations reported since the last call, symbolized against
    /// process `pid`'s maps now (its code mappings are those of the
    /// allocations: a program does not unmap the code that allocates).
    pub fn poll(&mut self, pid: Pid) -> Vec<Allocation> {
        let mut buf = Vec::new();
        if self.file.read_to_end(&mut buf).is_err() || buf.is_empty() {
            return Vec::new();
        }
        self.partial.extend_from_slice(&buf);
        let Some(cut) = self.partial.iter().rposition(|&b| b == b'\n') else { return Vec::new() };
        let whole: Vec<u8> = self.partial.drain(..=cut).collect();
        let mut events = Vec::new();
        for line in String::from_utf8_lossy(&whole).lines() {
            self.lines += 1;
            if self.lines > MAX_LINES {
                continue;
            }
            if let Some(rest) = line.strip_prefix("# ") {
                self.in_maps = rest == "maps";
                if let Some(ev) = rest.strip_prefix("alloc ").and_then(sites::parse_alloc) {
                    events.push(ev);
                } else if let Some(exe) = rest.strip_prefix("exe ") {
                    self.exe = Some(exe.to_string());
                }
            } else if self.in_maps && self.maps.len() < MAX_MAPS {
                self.maps.extend(maps::parse_line(line));
            }
        }
        if events.is_empty() {
            return Vec::new();
        }
        // The live maps first (libraries loaded since start), then the start's.
        let live: Vec<maps::MapEntry> = std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .map(|t| t.lines().filter_map(maps::parse_line).collect())
            .unwrap_or_default();
        let exe = self.exe.clone().or_else(|| std::fs::read_link(format!("/proc/{pid}/exe")).ok().map(|p| p.to_string_lossy().into_owned()));
        sites::sites(&events, &[self.maps.clone(), live], exe.as_deref())
            .into_iter()
            .map(|(start, end, s)| Allocation { start, end, key: s.key })
            .collect()
    }
}

impl Drop for SiteWatch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn lines_are_read_whole_and_the_directory_goes_with_the_watch() {
        let mut w = SiteWatch::create().unwrap();
        let dir = w.dir.clone();
        let meta = std::fs::metadata(&dir).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(meta.permissions().mode() & 0o777, 0o700);
        let mut f = std::fs::OpenOptions::new().append(true).open(&w.path).unwrap();
        // A torn line waits for its end; a malformed one is dropped.
        f.write_all(b"# alloc malloc 200000 7ffff0000010 1\n# alloc mall").unwrap();
        let me = std::process::id() as Pid;
        let a = w.poll(me);
        assert_eq!(a.len(), 1);
        assert_eq!((a[0].start, a[0].end), (0x7ffff0000010, 0x7ffff0200010));
        f.write_all(b"oc 1000 7000 2\n# alloc bad line\n").unwrap();
        let b = w.poll(me);
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].start, 0x7000);
        assert_eq!(w.lines, 3);
        // The runtime's own snapshot names the executable and its mappings.
        f.write_all(b"# exe /p/prog\n# maps\n555555554000-555555556000 r-xp 00000000 08:01 1 /p/prog\n# end\n").unwrap();
        assert!(w.poll(me).is_empty());
        assert_eq!((w.exe.as_deref(), w.maps.len(), w.in_maps), (Some("/p/prog"), 1, false));
        drop(w);
        assert!(!dir.exists());
    }
}
