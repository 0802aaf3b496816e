//! `/proc/PID/smaps`: the kernel's per-VMA account of a process's memory.
//!
//! smaps is the ground truth hugescope reports coverage from: `AnonHugePages` counts
//! PMD-mapped anonymous THPs only (what a TLB sees as one 2 MiB entry), `THPeligible`
//! says whether the kernel would consider the VMA at all, and `VmFlags` carries the
//! `hg`/`nh` marks left by `MADV_HUGEPAGE`/`MADV_NOHUGEPAGE`. It is per VMA, so a
//! range smaller than its VMA needs `pagemap::pmd_mapped_bytes` for exact numbers.

use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub type Pid = libc::pid_t;

/// One virtual memory area as smaps describes it. Sizes are in bytes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Vma {
    pub start: u64,
    pub end: u64,
    /// `rwxp` / `rw-s` as printed by the kernel.
    pub perms: String,
    pub offset: u64,
    pub dev: String,
    pub inode: u64,
    /// The backing file, or a pseudo-name (`[heap]`, `[stack]`, `[anon:x]`), or empty.
    pub path: String,
    pub size: u64,
    pub rss: u64,
    /// `Anonymous:` bytes.
    pub anon: u64,
    /// `AnonHugePages:` bytes: PMD-mapped anonymous THPs in this VMA.
    pub anon_huge_pages: u64,
    /// `THPeligible:`; `None` on kernels that do not print it.
    pub thp_eligible: Option<bool>,
    /// The two-letter `VmFlags` mnemonics (`rd wr mr mw me ac nh ...`).
    pub vm_flags: Vec<String>,
    /// Every other `Key: N kB` line, in bytes (Pss, Swap, Locked, ...).
    pub fields: BTreeMap<String, u64>,
}

impl Vma {
    pub fn len(&self) -> u64 {
        self.end - self.start
    }
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
    pub fn has_flag(&self, f: &str) -> bool {
        self.vm_flags.iter().any(|x| x == f)
    }
    /// VM_NOHUGEPAGE (`MADV_NOHUGEPAGE`): every THP path skips this VMA.
    pub fn no_hugepage(&self) -> bool {
        self.has_flag("nh")
    }
    /// VM_HUGEPAGE (`MADV_HUGEPAGE`).
    pub fn hugepage(&self) -> bool {
        self.has_flag("hg")
    }
    pub fn writable(&self) -> bool {
        self.perms.as_bytes().get(1) == Some(&b'w')
    }
    pub fn private(&self) -> bool {
        self.perms.as_bytes().get(3) == Some(&b'p')
    }
    /// Private anonymous memory: no inode, and no file path. `[heap]`, `[stack]` and
    /// `[anon:name]` (prctl-named) areas count; kernel-provided areas such as
    /// `[vdso]` and shared anonymous memory (shmem underneath) do not.
    pub fn is_anonymous(&self) -> bool {
        if self.inode != 0 || !self.private() {
            return false;
        }
        let p = self.path.as_str();
        p.is_empty() || p == "[heap]" || p.starts_with("[stack") || p.starts_with("[anon:")
    }
    pub fn overlaps(&self, start: u64, end: u64) -> bool {
        self.start < end && start < self.end
    }
}

/// Parse the text of a smaps file. `origin` names it in errors.
pub fn parse_smaps(text: &str, origin: &Path) -> Result<Vec<Vma>> {
    let mut out: Vec<Vma> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        if let Some(vma) = parse_header(line) {
            out.push(vma);
            continue;
        }
        let Some(cur) = out.last_mut() else {
            return Err(Error::parse(origin, lineno, format!("field before any VMA header: '{line}'")));
        };
        let Some((key, rest)) = line.split_once(':') else {
            return Err(Error::parse(origin, lineno, format!("neither a VMA header nor 'Key: value': '{line}'")));
        };
        let rest = rest.trim();
        match key {
            "VmFlags" => cur.vm_flags = rest.split_whitespace().map(str::to_string).collect(),
            "THPeligible" => {
                cur.thp_eligible = Some(match rest {
                    "1" => true,
                    "0" => false,
                    other => return Err(Error::parse(origin, lineno, format!("THPeligible is '{other}', expected 0 or 1"))),
                })
            }
            _ => {
                // "Rss:   1234 kB"; a few lines (ProtectionKey) have no unit.
                let mut it = rest.split_whitespace();
                let Some(n) = it.next().and_then(|n| n.parse::<u64>().ok()) else {
                    // Unknown non-numeric fields of future kernels are ignored, not fatal.
                    continue;
                };
                let bytes = match it.next() {
                    Some("kB") => n * 1024,
                    _ => n,
                };
                match key {
                    "Size" => cur.size = bytes,
                    "Rss" => cur.rss = bytes,
                    "Anonymous" => cur.anon = bytes,
                    "AnonHugePages" => cur.anon_huge_pages = bytes,
                    _ => {
                        cur.fields.insert(key.to_string(), bytes);
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Parse "start-end perms offset dev inode [path]"; `None` if the line is not a header.
fn parse_header(line: &str) -> Option<Vma> {
    let mut rest = line;
    let mut next = || -> Option<&str> {
        let t = rest.trim_start();
        let end = t.find(char::is_whitespace).unwrap_or(t.len());
        let (tok, r) = t.split_at(end);
        rest = r;
        if tok.is_empty() {
            None
        } else {
            Some(tok)
        }
    };
    let range = next()?;
    let (a, b) = range.split_once('-')?;
    let start = u64::from_str_radix(a, 16).ok()?;
    let end = u64::from_str_radix(b, 16).ok()?;
    let perms = next()?;
    if perms.len() != 4 {
        return None;
    }
    let offset = u64::from_str_radix(next()?, 16).ok()?;
    let dev = next()?.to_string();
    let inode = next()?.parse::<u64>().ok()?;
    let path = rest.trim().to_string();
    if end < start {
        return None;
    }
    Some(Vma {
        start,
        end,
        perms: perms.to_string(),
        offset,
        dev,
        inode,
        path,
        size: end - start,
        rss: 0,
        anon: 0,
        anon_huge_pages: 0,
        thp_eligible: None,
        vm_flags: Vec::new(),
        fields: BTreeMap::new(),
    })
}

fn proc_path(pid: Pid, file: &str) -> PathBuf {
    if pid == 0 {
        PathBuf::from(format!("/proc/self/{file}"))
    } else {
        PathBuf::from(format!("/proc/{pid}/{file}"))
    }
}

/// The VMAs of a process (`pid` 0 means this process).
pub fn vmas(pid: Pid) -> Result<Vec<Vma>> {
    let p = proc_path(pid, "smaps");
    let text = std::fs::read_to_string(&p).map_err(|e| Error::io(&p, e))?;
    parse_smaps(&text, &p)
}

/// The VMAs that overlap `[start, start+len)`, in address order.
pub fn overlapping(vmas: &[Vma], start: u64, len: u64) -> Vec<&Vma> {
    let end = start.saturating_add(len);
    vmas.iter().filter(|v| v.overlaps(start, end)).collect()
}

/// How much of `[start, start+len)` is covered by VMAs.
pub fn mapped_bytes(vmas: &[Vma], start: u64, len: u64) -> u64 {
    let end = start.saturating_add(len);
    overlapping(vmas, start, len)
        .iter()
        .map(|v| v.end.min(end) - v.start.max(start))
        .sum()
}

/// `AnonHugePages` attributed to `[start, start+len)` from smaps alone.
///
/// A VMA wholly inside the range contributes all its `AnonHugePages`. A VMA that
/// only partly overlaps contributes at most the 2 MiB-aligned part of the overlap
/// (`min(AnonHugePages, aligned overlap)`): smaps cannot say where inside the VMA the
/// huge pages are, so this is an upper bound, exact whenever the huge pages of such a
/// VMA all lie in the range. `pagemap::pmd_mapped_bytes` gives the exact figure.
pub fn attribute_huge(vmas: &[Vma], start: u64, len: u64) -> u64 {
    const PMD: u64 = 2 << 20;
    let end = start.saturating_add(len);
    overlapping(vmas, start, len)
        .iter()
        .map(|v| {
            if v.start >= start && v.end <= end {
                v.anon_huge_pages
            } else {
                let a = v.start.max(start).div_ceil(PMD) * PMD;
                let b = v.end.min(end) / PMD * PMD;
                v.anon_huge_pages.min(b.saturating_sub(a))
            }
        })
        .sum()
}

/// Read smaps of `pid` and attribute `AnonHugePages` to the range (see `attribute_huge`).
pub fn huge_bytes_in(pid: Pid, start: u64, len: u64) -> Result<u64> {
    Ok(attribute_huge(&vmas(pid)?, start, len))
}

/// Total `AnonHugePages` of a process, from the cheap `smaps_rollup`.
pub fn anon_huge_total(pid: Pid) -> Result<u64> {
    kb_field(pid, "smaps_rollup", "AnonHugePages")
}

/// Total `Rss` of a process, from `smaps_rollup`.
pub fn rss_total(pid: Pid) -> Result<u64> {
    kb_field(pid, "smaps_rollup", "Rss")
}

/// `VmRSS` of `/proc/PID/status`: resident bytes now.
pub fn vm_rss(pid: Pid) -> Result<u64> {
    kb_field(pid, "status", "VmRSS")
}

/// `VmHWM` of `/proc/PID/status`: the peak resident bytes of the process's
/// current address space. Unlike `ru_maxrss` it starts afresh at exec, so it
/// does not count what a forked child inherited from its parent.
pub fn vm_hwm(pid: Pid) -> Result<u64> {
    kb_field(pid, "status", "VmHWM")
}

/// A `Key: N kB` line of `/proc/PID/FILE`, in bytes.
fn kb_field(pid: Pid, file: &str, key: &str) -> Result<u64> {
    let p = proc_path(pid, file);
    let text = std::fs::read_to_string(&p).map_err(|e| Error::io(&p, e))?;
    for (i, line) in text.lines().enumerate() {
        if let Some((k, rest)) = line.split_once(':') {
            if k == key {
                let n = rest
                    .split_whitespace()
                    .next()
                    .and_then(|n| n.parse::<u64>().ok())
                    .ok_or_else(|| Error::parse(&p, i + 1, format!("{key} has no number")))?;
                return Ok(n * 1024);
            }
        }
    }
    // A process that has exited (zombie) shows an empty rollup.
    Err(Error::parse(&p, 0, format!("no '{key}' line (has the process exited?)")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CANNED: &str = "\
55d0c5a00000-55d0c5a02000 r--p 00000000 fd:01 1312                       /usr/bin/cat
Size:                  8 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
Rss:                   8 kB
Pss:                   8 kB
Anonymous:             0 kB
AnonHugePages:         0 kB
THPeligible:    0
ProtectionKey:         0
VmFlags: rd mr mw me sd
7f0000000000-7f0001000000 rw-p 00000000 00:00 0 
Size:              16384 kB
Rss:               16384 kB
Anonymous:         16384 kB
AnonHugePages:      4096 kB
Swap:                  0 kB
Locked:                0 kB
THPeligible:    1
VmFlags: rd wr mr mw me ac sd hg
7f0001000000-7f0001200000 rw-p 00000000 00:00 0 
Size:               2048 kB
Rss:                2048 kB
Anonymous:          2048 kB
AnonHugePages:         0 kB
THPeligible:    0
VmFlags: rd wr mr mw me ac sd nh
7ffd1e000000-7ffd1e021000 rw-p 00000000 00:00 0                          [stack]
Size:                132 kB
Rss:                  12 kB
Anonymous:            12 kB
AnonHugePages:         0 kB
THPeligible:    0
VmFlags: rd wr mr mw me gd ac
7ffd1e1f0000-7ffd1e1f2000 r-xp 00000000 00:00 0                          [vdso]
Size:                  8 kB
Rss:                   4 kB
THPeligible:    0
VmFlags: rd ex mr mw me de sd
";

    #[test]
    fn parses_canned_smaps() {
        let v = parse_smaps(CANNED, Path::new("canned")).unwrap();
        assert_eq!(v.len(), 5);
        assert_eq!(v[0].path, "/usr/bin/cat");
        assert_eq!(v[0].inode, 1312);
        assert!(!v[0].is_anonymous());
        assert_eq!(v[0].fields["Pss"], 8192);
        assert_eq!(v[0].fields["ProtectionKey"], 0);
        let big = &v[1];
        assert_eq!((big.start, big.end), (0x7f00_0000_0000, 0x7f00_0100_0000));
        assert_eq!(big.len(), 16 << 20);
        assert_eq!(big.rss, 16 << 20);
        assert_eq!(big.anon_huge_pages, 4 << 20);
        assert_eq!(big.thp_eligible, Some(true));
        assert!(big.hugepage() && !big.no_hugepage() && big.is_anonymous() && big.writable());
        assert_eq!(big.path, "");
        assert!(v[2].no_hugepage());
        assert_eq!(v[3].path, "[stack]");
        assert!(v[3].is_anonymous());
        assert!(!v[4].is_anonymous());
    }

    #[test]
    fn attributes_huge_bytes_to_ranges() {
        let v = parse_smaps(CANNED, Path::new("canned")).unwrap();
        let base = 0x7f00_0000_0000u64;
        // The whole 16 MiB VMA: all of its 4 MiB.
        assert_eq!(attribute_huge(&v, base, 16 << 20), 4 << 20);
        // A 2 MiB slice of it: at most 2 MiB can be huge there.
        assert_eq!(attribute_huge(&v, base + (4 << 20), 2 << 20), 2 << 20);
        // An unaligned 1 MiB slice cannot hold a PMD mapping.
        assert_eq!(attribute_huge(&v, base + (1 << 20), 1 << 20), 0);
        // Spanning the two anonymous VMAs and beyond.
        assert_eq!(attribute_huge(&v, base, 64 << 20), 4 << 20);
        assert_eq!(mapped_bytes(&v, base + (15 << 20), 4 << 20), 3 << 20);
        assert_eq!(overlapping(&v, 0x1000, 0x1000).len(), 0);
    }

    #[test]
    fn bad_input_names_line() {
        let e = parse_smaps("Rss: 4 kB\n", Path::new("x")).unwrap_err().to_string();
        assert!(e.contains("line 1"), "{e}");
        let e = parse_smaps("7f00-7f10 rw-p 0 00:00 0\nTHPeligible: maybe\n", Path::new("x"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2") && e.contains("THPeligible"), "{e}");
        let e = parse_smaps("garbage line\n", Path::new("x")).unwrap_err().to_string();
        assert!(e.contains("garbage"), "{e}");
    }

    #[test]
    fn live_smaps_of_this_process() {
        // A fresh anonymous mapping must show up as one anonymous VMA of its size.
        let len = 4usize << 20;
        // SAFETY: a private anonymous mapping owned and unmapped by this test.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE,
                       libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        assert_ne!(p, libc::MAP_FAILED);
        // SAFETY: the mapping is len bytes and writable.
        unsafe { std::ptr::write_bytes(p as *mut u8, 1, len) };
        let a = p as u64;
        let v = vmas(0).unwrap();
        let hits = overlapping(&v, a, len as u64);
        assert!(!hits.is_empty());
        assert_eq!(mapped_bytes(&v, a, len as u64), len as u64);
        assert!(hits.iter().all(|v| v.is_anonymous() && v.writable()));
        let rss: u64 = hits.iter().map(|v| v.rss).sum();
        assert!(rss >= len as u64, "rss {rss}");
        assert!(rss_total(0).unwrap() >= len as u64);
        anon_huge_total(0).unwrap();
        // SAFETY: unmapping the mapping made above.
        unsafe { libc::munmap(p, len) };
    }
}
