//! What the daemon can see of a live process without writing to it, stopping it or
//! patching the kernel (issue #14, section 3: "signals from what the kernel offers").
//!
//! * **Utilization** per 2 MiB region: the number of present 4 KiB pages, and
//!   whether the region is already PMD-mapped, from one `PAGEMAP_SCAN` per VMA
//!   (exact, per page).
//! * **Access**: the accessed (young) bits are cleared with `/proc/PID/clear_refs`
//!   (`2`: anonymous pages only, the only ones the daemon promotes; `1` would also
//!   make the target re-set the bits of its file pages), and the next sample reads how many bytes of each VMA were referenced
//!   since (`Referenced:` in smaps). When to clear is the daemon's choice, not the
//!   sample's (`epochs.rs`: a clear costs the target far more than a sample does). On this kernel that is the finest access signal
//!   there is: DAMON is built for physical addresses only (`CONFIG_DAMON_VADDR` off),
//!   idle page tracking and soft-dirty are not configured, and pagemap has no young
//!   bit. So access is known **per VMA**, not per 2 MiB region; `docs/daemon.md` says
//!   what that means for each policy. Clearing young bits does not change the
//!   target's memory or registers; it makes the target's pages look idle to reclaim
//!   for one interval (a process under memory pressure may lose a page earlier).

use crate::pagemap::{self, PAGE, PAGE_IS_HUGE, PAGE_IS_PRESENT, PMD};
use crate::smaps::{self, Pid, Vma};
use crate::{Error, Result};
use serde::Serialize;

/// 4 KiB pages per 2 MiB region.
pub const PAGES_PER_REGION: u32 = (PMD / PAGE) as u32;

/// One 2 MiB-aligned region of a VMA that MADV_COLLAPSE could promote.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RegionSample {
    pub start: u64,
    /// Present 4 KiB pages (a PMD-mapped region counts all 512).
    pub present: u32,
    /// The region is one PMD-mapped huge page now.
    pub huge: bool,
    /// Share of the VMA's resident bytes referenced since the last clear (0..1).
    pub referenced: f64,
    /// Start of the VMA the region lies in (the access signal's granularity).
    pub vma_start: u64,
}

/// One sample of one process.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ProcessSample {
    /// Resident bytes of the whole process (smaps Rss summed).
    pub rss: u64,
    /// PMD-mapped anonymous bytes of the whole process (smaps AnonHugePages).
    pub anon_huge: u64,
    pub regions: Vec<RegionSample>,
}

/// A VMA whose 2 MiB regions MADV_COLLAPSE accepts: private anonymous memory not
/// marked MADV_NOHUGEPAGE (the kernel refuses `nh` VMAs, and file-backed memory is
/// out of the daemon's scope: its huge pages belong to the page cache).
pub fn collapsible(v: &Vma) -> bool {
    v.is_anonymous() && v.private() && v.writable() && !v.no_hugepage()
}

/// The 2 MiB-aligned regions wholly inside `[start, end)`.
pub fn aligned_regions(start: u64, end: u64) -> impl Iterator<Item = u64> {
    let a = start.div_ceil(PMD) * PMD;
    let b = end / PMD * PMD;
    (a..b).step_by(PMD as usize)
}

/// Per-region utilization of one VMA from PAGEMAP_SCAN runs of present pages.
pub fn regions_of(v: &Vma, runs: &[pagemap::ScanRun], referenced: f64) -> Vec<RegionSample> {
    aligned_regions(v.start, v.end)
        .map(|r| {
            let (mut present, mut huge) = (0u64, 0u64);
            for run in runs {
                let a = run.start.max(r);
                let b = run.end.min(r + PMD);
                if a < b {
                    present += b - a;
                    if run.categories & PAGE_IS_HUGE != 0 {
                        huge += b - a;
                    }
                }
            }
            RegionSample { start: r, present: (present / PAGE) as u32, huge: huge == PMD, referenced, vma_start: v.start }
        })
        .collect()
}

/// Share of a VMA's resident bytes smaps says were referenced.
pub fn referenced_share(v: &Vma) -> f64 {
    let r = v.fields.get("Referenced").copied().unwrap_or(0);
    if v.rss == 0 { 0.0 } else { (r as f64 / v.rss as f64).min(1.0) }
}

/// Sample `pid`: its VMAs, and the present and huge pages of each collapsible region
/// (`referenced`: the share of the VMA referenced since the last `clear_refs`).
pub fn sample(pid: Pid) -> Result<ProcessSample> {
    let vmas = smaps::vmas(pid)?;
    let mut s = ProcessSample::default();
    for v in &vmas {
        s.rss += v.rss;
        s.anon_huge += v.anon_huge_pages;
        if !collapsible(v) || aligned_regions(v.start, v.end).next().is_none() {
            continue;
        }
        let runs = pagemap::scan(pid, v.start, v.end, PAGE_IS_PRESENT, PAGE_IS_PRESENT | PAGE_IS_HUGE)?;
        s.regions.extend(regions_of(v, &runs, referenced_share(v)));
    }
    Ok(s)
}

/// Clear the accessed bits of every anonymous page of `pid`
/// (`echo 2 > /proc/PID/clear_refs`, the kernel's CLEAR_REFS_ANON).
pub fn clear_refs(pid: Pid) -> Result<()> {
    let p = format!("/proc/{pid}/clear_refs");
    std::fs::write(&p, b"2").map_err(|e| Error::io(&p, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pagemap::ScanRun;

    fn vma(start: u64, end: u64) -> Vma {
        let text = format!("{start:x}-{end:x} rw-p 00000000 00:00 0\nSize: 0 kB\nRss: 0 kB\nVmFlags: rd wr mr mw me ac\n");
        smaps::parse_smaps(&text, std::path::Path::new("test")).unwrap().remove(0)
    }

    #[test]
    fn regions_are_aligned_and_inside() {
        let v: Vec<u64> = aligned_regions(PMD + PAGE, 4 * PMD + PAGE).collect();
        assert_eq!(v, vec![2 * PMD, 3 * PMD]);
        assert_eq!(aligned_regions(PMD + PAGE, 2 * PMD + PAGE).count(), 0);
    }

    #[test]
    fn present_and_huge_counted_per_region() {
        let v = vma(0, 3 * PMD);
        let runs = [
            ScanRun { start: 0, end: PMD, categories: PAGE_IS_PRESENT | PAGE_IS_HUGE },
            ScanRun { start: PMD + 10 * PAGE, end: PMD + 20 * PAGE, categories: PAGE_IS_PRESENT },
            ScanRun { start: 2 * PMD - PAGE, end: 2 * PMD + PAGE, categories: PAGE_IS_PRESENT },
        ];
        let r = regions_of(&v, &runs, 0.5);
        assert_eq!(r.len(), 3);
        assert_eq!((r[0].present, r[0].huge), (512, true));
        assert_eq!((r[1].present, r[1].huge), (11, false));
        assert_eq!((r[2].present, r[2].huge), (1, false));
        assert!(r.iter().all(|x| x.referenced == 0.5 && x.vma_start == 0));
    }
}
