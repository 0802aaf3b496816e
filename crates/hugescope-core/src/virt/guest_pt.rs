//! Where a guest's page-table pages live in its guest-physical memory.
//!
//! A nested walk translates each guest page-table page it reads through the
//! host (`hw::nested`), so the model needs each page's GPA (for the host
//! page-walk caches and the EPT accessed bits) and the host leaf backing it.
//! The guest kernel model keeps its tables as per-VMA arrays, not as pages,
//! so the hypervisor places them: each table page (identified by process,
//! level and the GVA prefix it covers) gets the next 4KB of a page-table area
//! in the order walks first need it. The area sits right above the VM's
//! memory in its GPA space (an area of its own in the host's VM process, so
//! the guest's allocator never hands it out), deterministic for a trace.
//! Sized from the trace's declared regions (every table page they can need,
//! doubled, plus 64 pages for undeclared ones); a full area reuses its last
//! page, counted in `overflow` (docs/assumptions.md "Virtualization").

use crate::trace::TraceHeader;
use std::collections::HashMap;

#[derive(Clone, Debug)]
pub struct GuestPtArea {
    /// GPA of the area's first page.
    pub base: u64,
    pub pages: u64,
    page_bytes: u64,
    level_shifts: Vec<u32>,
    placed: HashMap<(u16, u8, u64), u64>,
    /// Table pages placed so far.
    pub used: u64,
    /// Table pages that found the area full (placed on its last page).
    pub overflow: u64,
}

/// Table pages a walk can read for the declared regions of `h`: a root per
/// process and, per level below it, one page per span that level's table covers.
pub fn table_pages_needed(h: &TraceHeader, level_shifts: &[u32]) -> u64 {
    let roots = h.processes.max(1) as u64;
    let mut n = roots;
    for r in h.regions.iter().filter(|r| r.len > 0) {
        for i in 1..level_shifts.len() {
            let span = level_shifts[i - 1];
            n += ((r.base + r.len - 1) >> span) - (r.base >> span) + 1;
        }
    }
    n
}

impl GuestPtArea {
    /// An area of `pages` pages of `page_bytes` at GPA `base`.
    pub fn new(base: u64, pages: u64, page_bytes: u64, level_shifts: &[u32]) -> GuestPtArea {
        GuestPtArea { base, pages: pages.max(1), page_bytes, level_shifts: level_shifts.to_vec(), placed: HashMap::new(), used: 0, overflow: 0 }
    }

    /// Pages to reserve for a guest running `h`.
    pub fn pages_for(h: &TraceHeader, level_shifts: &[u32]) -> u64 {
        table_pages_needed(h, level_shifts) * 2 + 64
    }

    pub fn bytes(&self) -> u64 {
        self.pages * self.page_bytes
    }

    /// GPA of the table page of guest process `pid` read at root-first level
    /// `level` by a walk of `va`, placed on first use.
    pub fn place(&mut self, pid: u16, level: usize, va: u64) -> u64 {
        let prefix = if level == 0 { 0 } else { va >> self.level_shifts[level - 1] };
        let next = &mut self.used;
        let over = &mut self.overflow;
        let pages = self.pages;
        let i = *self.placed.entry((pid, level as u8, prefix)).or_insert_with(|| {
            if *next < pages {
                *next += 1;
                *next - 1
            } else {
                *over += 1;
                pages - 1
            }
        });
        self.base + i * self.page_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_use_order_and_sharing() {
        let shifts = [39, 30, 21, 12];
        let mut a = GuestPtArea::new(1 << 30, 8, 4096, &shifts);
        let base = 1u64 << 30;
        // A cold walk of one address places the root, PDPT, PD and PT pages.
        let path: Vec<u64> = (0..4).map(|l| a.place(0, l, 0x4000_1000)).collect();
        assert_eq!(path, vec![base, base + 4096, base + 2 * 4096, base + 3 * 4096]);
        // Another 4KB page in the same 2MB shares all four.
        assert_eq!(a.place(0, 3, 0x4000_2000), base + 3 * 4096);
        // Another 2MB region: a new PT page only.
        assert_eq!(a.place(0, 3, 0x4020_0000), base + 4 * 4096);
        assert_eq!(a.place(0, 2, 0x4020_0000), base + 2 * 4096);
        // Another process has its own root.
        assert_eq!(a.place(1, 0, 0x4000_1000), base + 5 * 4096);
        assert_eq!(a.used, 6);
    }
}
