//! Per-2 MiB huge-page backing from `/proc/PID/pagemap` and `/proc/kpageflags`.
//!
//! smaps counts huge pages per VMA; an experiment that promotes a few 2 MiB ranges
//! inside one large VMA needs to know *which* ranges are huge. Two ways exist:
//!
//! * `pmd_mapped_bytes`: the `PAGEMAP_SCAN` ioctl (Linux 6.7+). Its `PAGE_IS_HUGE`
//!   category means "PMD-mapped THP (or hugetlb)", exactly what a TLB sees, and it
//!   needs no PFN privilege.
//! * `backing`: the classic walk. Read the 512 pagemap entries of a range; if all are
//!   present and their PFNs contiguous from a 512-aligned head whose kpageflags say
//!   THP + compound head, the range is backed by one huge page. PFNs read as zero
//!   without CAP_SYS_ADMIN and kpageflags needs root; then the report says so instead
//!   of guessing. This cannot tell PMD- from PTE-mapped THPs (reference A.8).

use crate::smaps::Pid;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::PathBuf;

pub const PAGE: u64 = 4096;
pub const PMD: u64 = 2 << 20;
const PAGES_PER_PMD: u64 = PMD / PAGE;

// pagemap entry bits (Documentation/admin-guide/mm/pagemap.rst).
pub const PM_PRESENT: u64 = 1 << 63;
pub const PM_SWAPPED: u64 = 1 << 62;
pub const PM_FILE_OR_SHARED: u64 = 1 << 61;
pub const PM_EXCLUSIVE: u64 = 1 << 56;
pub const PM_PFN_MASK: u64 = (1 << 55) - 1;

// kpageflags bits.
pub const KPF_LOCKED: u64 = 1 << 0;
pub const KPF_LRU: u64 = 1 << 5;
pub const KPF_ANON: u64 = 1 << 12;
pub const KPF_COMPOUND_HEAD: u64 = 1 << 15;
pub const KPF_COMPOUND_TAIL: u64 = 1 << 16;
pub const KPF_HUGE: u64 = 1 << 17;
pub const KPF_UNEVICTABLE: u64 = 1 << 18;
pub const KPF_NOPAGE: u64 = 1 << 20;
pub const KPF_THP: u64 = 1 << 22;
pub const KPF_ZERO_PAGE: u64 = 1 << 24;
pub const KPF_MLOCKED: u64 = 1 << 33;

fn pagemap_path(pid: Pid) -> PathBuf {
    if pid == 0 {
        PathBuf::from("/proc/self/pagemap")
    } else {
        PathBuf::from(format!("/proc/{pid}/pagemap"))
    }
}

/// The raw pagemap entries of `npages` pages from `start` (page-aligned).
pub fn read_entries(pid: Pid, start: u64, npages: usize) -> Result<Vec<u64>> {
    let p = pagemap_path(pid);
    let f = File::open(&p).map_err(|e| Error::io(&p, e))?;
    read_entries_from(&f, &p, start, npages)
}

/// Same as `read_entries` on an open pagemap file (the fragmenter reads millions).
pub fn read_entries_from(f: &File, p: &std::path::Path, start: u64, npages: usize) -> Result<Vec<u64>> {
    if !start.is_multiple_of(PAGE) {
        return Err(Error::input(format!("pagemap read at {start:#x}: address is not page-aligned")));
    }
    let mut buf = vec![0u8; npages * 8];
    let mut done = 0;
    while done < buf.len() {
        let off = (start / PAGE) * 8 + done as u64;
        let n = f.read_at(&mut buf[done..], off).map_err(|e| Error::io(p, e))?;
        if n == 0 {
            return Err(Error::parse(p, 0, format!("short read at offset {off:#x}")));
        }
        done += n;
    }
    Ok(buf
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect())
}

/// Page flags of consecutive PFNs from `/proc/kpageflags` (root only).
pub fn kpageflags(first_pfn: u64, count: usize) -> Result<Vec<u64>> {
    let p = PathBuf::from("/proc/kpageflags");
    let f = File::open(&p).map_err(|e| Error::io(&p, e))?;
    let mut buf = vec![0u8; count * 8];
    f.read_exact_at(&mut buf, first_pfn * 8).map_err(|e| Error::io(&p, e))?;
    Ok(buf
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect())
}

/// What the pagemap walk found for one 2 MiB-aligned range.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RangeBacking {
    pub start: u64,
    pub present_pages: u64,
    pub swapped_pages: u64,
    /// PFNs are contiguous and the first is 512-aligned (only if PFNs are visible).
    pub contiguous: Option<bool>,
    /// The first page is a THP compound head (only if kpageflags is readable).
    pub thp_head: Option<bool>,
    /// Backed by one huge page; `None` when the privileges to tell are missing.
    pub huge: Option<bool>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BackingReport {
    pub pid: Pid,
    pub ranges: Vec<RangeBacking>,
    pub pfn_visible: bool,
    pub kpageflags_readable: bool,
    /// Why `huge` is unknown, when it is.
    pub note: Option<String>,
}

impl BackingReport {
    pub fn huge_ranges(&self) -> usize {
        self.ranges.iter().filter(|r| r.huge == Some(true)).count()
    }
}

/// Walk every 2 MiB-aligned range inside `[start, start+len)` (clamped inward).
pub fn backing(pid: Pid, start: u64, len: u64) -> Result<BackingReport> {
    let a = start.div_ceil(PMD) * PMD;
    let b = start.saturating_add(len) / PMD * PMD;
    let mut report = BackingReport { pid, ranges: Vec::new(), pfn_visible: true, kpageflags_readable: true, note: None };
    let mut any_present = false;
    let mut any_pfn = false;
    let mut r = a;
    while r < b {
        let e = read_entries(pid, r, PAGES_PER_PMD as usize)?;
        let present: Vec<&u64> = e.iter().filter(|x| *x & PM_PRESENT != 0).collect();
        let swapped = e.iter().filter(|x| *x & PM_PRESENT == 0 && *x & PM_SWAPPED != 0).count() as u64;
        any_present |= !present.is_empty();
        let pfns: Vec<u64> = e.iter().map(|x| if x & PM_PRESENT != 0 { x & PM_PFN_MASK } else { 0 }).collect();
        let pfn_known = present.iter().any(|x| *x & PM_PFN_MASK != 0);
        any_pfn |= pfn_known;
        let mut rb = RangeBacking { start: r, present_pages: present.len() as u64, swapped_pages: swapped, contiguous: None, thp_head: None, huge: None };
        if present.len() as u64 == PAGES_PER_PMD && pfn_known {
            let first = pfns[0];
            let contiguous = first.is_multiple_of(PAGES_PER_PMD) && pfns.iter().enumerate().all(|(i, p)| *p == first + i as u64);
            rb.contiguous = Some(contiguous);
            if report.kpageflags_readable {
                match kpageflags(first, 1) {
                    Ok(flags) => {
                        let f = flags[0];
                        let head = f & KPF_THP != 0 && f & KPF_COMPOUND_HEAD != 0;
                        rb.thp_head = Some(head);
                        rb.huge = Some(contiguous && head);
                    }
                    Err(_) => report.kpageflags_readable = false,
                }
            }
        } else if (present.len() as u64) < PAGES_PER_PMD {
            // Not every page is present: certainly not one huge mapping.
            rb.huge = Some(false);
        }
        report.ranges.push(rb);
        r += PMD;
    }
    if any_present && !any_pfn {
        report.pfn_visible = false;
        report.note = Some("PFNs read as zero: /proc/PID/pagemap shows frame numbers only with CAP_SYS_ADMIN; fully present ranges are reported as unknown".into());
    } else if !report.kpageflags_readable {
        report.note = Some("/proc/kpageflags is not readable (needs root); contiguity is known but not whether the frames form a THP".into());
    }
    Ok(report)
}

// PAGEMAP_SCAN (include/uapi/linux/fs.h). The layout is UAPI and fixed.
pub const PAGE_IS_PRESENT: u64 = 1 << 3;
pub const PAGE_IS_HUGE: u64 = 1 << 6;

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

#[repr(C)]
#[derive(Default)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

/// `_IOWR('f', 16, struct pm_scan_arg)`.
const PAGEMAP_SCAN: u64 = (3 << 30) | ((std::mem::size_of::<PmScanArg>() as u64) << 16) | ((b'f' as u64) << 8) | 16;

/// One run of pages `PAGEMAP_SCAN` reported: `[start, end)` and the categories of
/// `return_mask` its pages have (`PAGE_IS_*` bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanRun {
    pub start: u64,
    pub end: u64,
    pub categories: u64,
}

/// One open `/proc/PID/pagemap` for several scans: a plan step asks about
/// each of its ranges through one descriptor instead of opening the file per
/// entry.
pub struct Scanner {
    file: File,
    path: PathBuf,
}

impl Scanner {
    pub fn open(pid: Pid) -> Result<Scanner> {
        let path = pagemap_path(pid);
        let file = File::open(&path).map_err(|e| Error::io(&path, e))?;
        Ok(Scanner { file, path })
    }

    /// The runs of `[start, end)` whose pages have every category of `required`,
    /// with their `returned` categories, from the `PAGEMAP_SCAN` ioctl (Linux 6.7+).
    /// Errors (old kernel, no permission, process gone) name the cause.
    pub fn scan(&self, start: u64, end: u64, required: u64, returned: u64) -> Result<Vec<ScanRun>> {
        let mut regions = [PageRegion::default(); 64];
        let mut out = Vec::new();
        let mut cur = start;
        while cur < end {
            let mut arg = PmScanArg {
                size: std::mem::size_of::<PmScanArg>() as u64,
                start: cur,
                end,
                vec: regions.as_mut_ptr() as u64,
                vec_len: regions.len() as u64,
                category_mask: required,
                return_mask: returned,
                ..Default::default()
            };
            // SAFETY: arg and the region array live across the call; the kernel writes at
            // most vec_len regions and the walk_end field.
            let n = unsafe { libc::ioctl(self.file.as_raw_fd(), PAGEMAP_SCAN as _, &mut arg as *mut PmScanArg) };
            if n < 0 {
                return Err(Error::last_os(format!("ioctl(PAGEMAP_SCAN) on {} for {cur:#x}..{end:#x}", self.path.display())));
            }
            out.extend(regions[..n as usize].iter().map(|r| ScanRun { start: r.start, end: r.end, categories: r.categories }));
            // The kernel stops early when the vector is full; walk_end says where.
            if arg.walk_end <= cur || arg.walk_end >= end {
                break;
            }
            cur = arg.walk_end;
        }
        Ok(out)
    }

    /// The PMD-mapped runs of `[start, start+len)`.
    pub fn pmd_mapped(&self, start: u64, len: u64) -> Result<Vec<ScanRun>> {
        self.scan(start, start.saturating_add(len), PAGE_IS_HUGE | PAGE_IS_PRESENT, PAGE_IS_HUGE)
    }

    /// Exact PMD-mapped bytes of `[start, start+len)`.
    pub fn pmd_mapped_bytes(&self, start: u64, len: u64) -> Result<u64> {
        Ok(self.pmd_mapped(start, len)?.iter().map(|r| r.end.saturating_sub(r.start)).sum())
    }
}

/// See `Scanner::scan` (opens the pagemap for this one call).
pub fn scan(pid: Pid, start: u64, end: u64, required: u64, returned: u64) -> Result<Vec<ScanRun>> {
    Scanner::open(pid)?.scan(start, end, required, returned)
}

/// Exact bytes of `[start, start+len)` that are PMD-mapped huge pages, by the
/// `PAGEMAP_SCAN` ioctl. Errors (old kernel, no permission) name the cause; callers
/// fall back to smaps attribution.
pub fn pmd_mapped_bytes(pid: Pid, start: u64, len: u64) -> Result<u64> {
    Scanner::open(pid)?.pmd_mapped_bytes(start, len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_number_matches_uapi() {
        assert_eq!(std::mem::size_of::<PmScanArg>(), 96);
        assert_eq!(PAGEMAP_SCAN, 0xC060_6610);
    }

    #[test]
    fn own_memory_present_and_not_huge_when_nohugepage() {
        let len = 4usize << 20;
        // SAFETY: a private anonymous mapping owned and unmapped by this test.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len + PMD as usize, libc::PROT_READ | libc::PROT_WRITE,
                       libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        assert_ne!(p, libc::MAP_FAILED);
        let a = (p as u64).div_ceil(PMD) * PMD;
        // SAFETY: [a, a+len) lies inside the mapping.
        unsafe {
            libc::madvise(a as *mut _, len, libc::MADV_NOHUGEPAGE);
            std::ptr::write_bytes(a as *mut u8, 7, len);
        }
        let rep = backing(0, a, len as u64).unwrap();
        assert_eq!(rep.ranges.len(), 2);
        assert!(rep.ranges.iter().all(|r| r.present_pages == 512));
        if rep.pfn_visible && rep.kpageflags_readable {
            assert!(rep.ranges.iter().all(|r| r.huge == Some(false)), "{rep:?}");
        } else {
            eprintln!("note: {:?}", rep.note);
        }
        match pmd_mapped_bytes(0, a, len as u64) {
            Ok(b) => assert_eq!(b, 0),
            Err(e) => eprintln!("skip PAGEMAP_SCAN check: {e}"),
        }
        // SAFETY: unmapping the mapping made above.
        unsafe { libc::munmap(p, len + PMD as usize) };
    }
}
