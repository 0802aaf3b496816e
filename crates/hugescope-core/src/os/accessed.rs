//! Accessed bits and access coverage, the OS side of reference tracking
//! (Linux: mm/rmap.c folio_referenced / ptep_clear_young, mm/page_idle.c).
//! Clearing the bits shoots the range down so the next access walks and sets
//! them again; coverage tracking is HawkEye's per-base-page access record.

use super::aspace::{size_of_flags, ACCESSED, PRESENT};
use super::kernel::Kernel;

impl Kernel {
    /// Turn per-base-page coverage tracking on or off (HawkEye's "access
    /// coverage" with every access counted, as the PCC artifact models it:
    /// linux-thp-and-hawkeye.md B.6). Turning it on allocates a bitset per VMA
    /// if needed and clears every bit (a new window starts); turning it off
    /// keeps the bits for `take_coverage`. While off, nothing is paid per access.
    pub fn track_coverage(&mut self, on: bool) {
        if on {
            for sp in self.spaces.iter_mut() {
                for v in sp.vmas.iter_mut() {
                    // A fresh zeroed bitset, not clear + resize: the bits of
                    // pages never accessed stay unbacked (aspace.rs).
                    v.cov = vec![0; v.flags.len().div_ceil(64)];
                }
            }
        }
        self.coverage_on = on;
    }

    pub fn coverage_tracking(&self) -> bool {
        self.coverage_on
    }

    /// Base pages of the PMD-level region at `start` accessed since tracking
    /// was turned on (or since the last take of this region); clears them.
    /// Only the part of the region inside the VMA holding `start` counts.
    pub fn take_coverage(&mut self, pid: u16, start: u64) -> u32 {
        let (bs, len) = (self.shape.base_shift, self.region_bytes());
        let start = start & !(len - 1);
        let Some(sp) = self.spaces.get_mut(pid as usize) else { return 0 };
        let Some(vi) = sp.find(start).or_else(|| sp.find(start + len - 1)) else { return 0 };
        let v = &mut sp.vmas[vi];
        let (lo, hi) = (start.max(v.start), (start + len).min(v.end));
        if lo >= hi {
            return 0;
        }
        let (a, b) = (v.page_index(lo, bs), v.page_index(hi - 1, bs) + 1);
        v.take_cov(a, b)
    }

    /// Clear the accessed bits of the base pages (and PMD bits if `pmd`) in a
    /// range, with the TLB invalidation that makes later accesses set them again.
    pub fn clear_accessed(&mut self, pid: u16, start: u64, len: u64, pmd: bool) {
        let (bs, rs) = (self.shape.base_shift, self.shape.region_shift);
        let Some(sp) = self.spaces.get_mut(pid as usize) else { return };
        let mut touched = false;
        for v in sp.vmas.iter_mut() {
            let lo = start.max(v.start);
            let hi = (start + len).min(v.end);
            if lo >= hi {
                continue;
            }
            let (a, b) = (v.page_index(lo, bs), v.page_index(hi - 1, bs) + 1);
            for f in &mut v.flags[a..b] {
                *f &= !ACCESSED;
            }
            if pmd {
                let (r0, r1) = (v.region_index(lo, rs), v.region_index(hi - 1, rs));
                for r in r0..=r1 {
                    v.pmd_a[r] = false;
                }
            }
            touched = true;
        }
        if touched {
            self.stats.accessed_bit_clears += 1;
            self.charge_us(((len >> bs) as f64) * self.costs.scan_pte_us);
            // Clearing a bit changes no mapping: only cached copies go.
            self.with_eager_refill(|k| k.shootdown(pid, start, start + len));
        }
    }
}

/// One leaf as an access-bit scanner saw it (`Kernel::scan_young`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct YoungLeaf {
    /// Virtual address of the leaf's first byte inside the scanned range
    /// (a huge leaf is reported once, at its aligned start, if that lies in
    /// the range).
    pub addr: u64,
    /// Page-size index of the leaf.
    pub size: usize,
    /// Base pages the leaf maps.
    pub pages: u32,
    /// The leaf's accessed bit (any walk through it since the last clear).
    pub accessed: bool,
}

impl Kernel {
    /// Scan the present leaves of `pid` in [start, end), as a reference
    /// tracker does (Linux: page_idle / folio_referenced; Ingens' Scan-kth,
    /// §5.2): each leaf's accessed bit goes to `visit`, which answers whether
    /// to clear it. Cleared leaves are invalidated in the TLBs when `flush` is
    /// set (Ingens' behaviour: a TLB-resident translation would never set the
    /// bit again; stock x86 Linux skips that flush, ingens.md §3 item 11), as
    /// one batched shootdown: one IPI charged per call, each cleared leaf
    /// invalidated on its own (no over-invalidation of the leaves kept).
    /// The scan's own CPU time is the caller's to charge. Returns the number
    /// of leaves cleared.
    pub fn scan_young(
        &mut self,
        pid: u16,
        start: u64,
        end: u64,
        flush: bool,
        visit: &mut dyn FnMut(YoungLeaf) -> bool,
    ) -> u64 {
        let bs = self.shape.base_shift;
        let sizes = &self.geo.sizes;
        let Some(sp) = self.spaces.get_mut(pid as usize) else {
            return 0;
        };
        let mut cleared: Vec<(u64, u64)> = Vec::new();
        for v in sp.vmas.iter_mut() {
            let (lo, hi) = (start.max(v.start), end.min(v.end));
            if lo >= hi {
                continue;
            }
            let (a, b) = (v.page_index(lo, bs), v.page_index(hi - 1, bs) + 1);
            let mut i = a;
            while i < b {
                let f = v.flags[i];
                if f & PRESENT == 0 {
                    i += 1;
                    continue;
                }
                let size = size_of_flags(f);
                let (first, n) = if size == 0 {
                    (i, 1)
                } else {
                    // The whole leaf, from its aligned start, clipped to the VMA.
                    let leaf = sizes[size];
                    let va = v.start + ((i as u64) << bs);
                    let ls = (va & !(leaf - 1)).max(v.start);
                    let le = ((va & !(leaf - 1)) + leaf).min(v.end);
                    (v.page_index(ls, bs), ((le - ls) >> bs) as usize)
                };
                let leaf_pages = &mut v.flags[first..first + n];
                let accessed = leaf_pages.iter().any(|&g| g & ACCESSED != 0);
                let addr = v.start + ((first as u64) << bs);
                if visit(YoungLeaf {
                    addr,
                    size,
                    pages: n as u32,
                    accessed,
                }) {
                    for g in leaf_pages.iter_mut() {
                        *g &= !ACCESSED;
                    }
                    cleared.push((addr, addr + ((n as u64) << bs)));
                }
                i = first + n;
            }
        }
        let n = cleared.len() as u64;
        if n > 0 {
            self.stats.accessed_bit_clears += n;
            if flush {
                self.with_eager_refill(|k| k.shootdown_batch(pid, &cleared));
            }
        }
        n
    }
}
