//! Same-page merging, the mechanism (Linux mm/ksm.c; FHPM §2.3, §5; spec
//! fhpm.md §6; Ingens §4.5). A scanner visits candidate base pages a few at
//! a time (Linux's `pages_to_scan` per `sleep_millisecs`: the policy's
//! timer calls `ksm_scan`); each page's content (`os/content.rs`) is looked
//! up first in the *stable* tree (contents already merged: the page is
//! mapped to that frame copy-on-write and its own frame freed), then in the
//! *unstable* tree (contents seen once this pass: both pages are merged into
//! the other page's frame, which becomes the stable frame), else inserted in
//! the unstable tree. The unstable tree is emptied at the end of every full
//! pass, as Linux rebuilds it. Trees are `BTreeMap`s keyed by content: a
//! model of the red-black trees, not their code.
//!
//! Huge pages: Linux KSM scans the base pages of a huge page and splits the
//! huge page when one of them is about to be merged ("share first", FHPM
//! §2.3). Which huge pages may be split is the policy's decision: `ksm_scan`
//! asks the policy's `admit` for every candidate (policies `ksm`,
//! `ingens-share`, `zeroscan`); `ksm_scan_huge` merges whole identical huge
//! pages without splitting (policy `hpshare`, Waldspurger 2002 as FHPM §2.3
//! describes it).
//!
//! A write to a merged page breaks copy-on-write (`break_cow`, called by the
//! content write trap): a fresh frame, a copy, a remap and its shootdown;
//! under the hypervisor that shootdown zaps the EPT entry, so the guest's
//! next touch is a VM exit (the virt model counts and costs it). The CoW
//! cost itself (`cow_us`) is a knob of the sharing policies.
//!
//! Accounting: a merged frame belongs to no process: each mapper gave up
//! its frame (`frames_held` drops by one per merged page) and the shared
//! frames are counted here (`shared_frames`), so the kernel's conservation
//! invariant reads processes + shared + ... = frames in use. Memory saved is
//! the mappings beyond the first of every shared frame (Linux's
//! `pages_sharing`).

use std::collections::BTreeMap;

use serde::Serialize;

use super::aspace::{size_of_flags, NO_PFN, PRESENT};
use super::content::{declared_id, ID_MASK, MERGED, PRIVATE};
use super::kernel::Kernel;
pub use super::metrics::SharingStats;
use super::AllocMode;

/// Costs of the mechanism, set by the sharing policy that enables it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KsmConfig {
    /// A copy-on-write break of a base page: the write-protect fault, a 4KB
    /// copy and the remap (spec §11: "write fault, then a VM exit, a 4KB copy
    /// and an EPT update"; the exit is the virt model's). A huge page's
    /// break adds `copy_base_page_us` per further base page.
    pub cow_us: f64,
    /// Scanning one candidate page: its checksum and the tree comparisons
    /// (ksmd's CPU time, charged as daemon time).
    pub scan_page_us: f64,
}

/// A page the scanner is about to consider, for the policy's `admit`.
#[derive(Clone, Copy, Debug)]
pub struct Candidate {
    pub pid: u16,
    pub va: u64,
    /// Page-size index of the leaf mapping it (0: a base page).
    pub leaf_size: usize,
    pub leaf_start: u64,
    /// Its content id (`os/content.rs`).
    pub content: u64,
}

/// One shared frame: its order (0 or a huge order), its content key and
/// who maps it (pid, address of the page or huge leaf).
#[derive(Clone, Debug)]
struct Shared {
    order: u32,
    key: u64,
    mappers: Vec<(u16, u64)>,
}

/// The mechanism's state (`Kernel::sharing`; None unless a sharing policy
/// enabled it).
#[derive(Clone, Debug)]
pub(crate) struct Ksm {
    pub cfg: KsmConfig,
    pub stats: SharingStats,
    /// Content (with the order it is shared at) -> shared frame.
    stable: BTreeMap<(u32, u64), u64>,
    /// Content (with order) -> the first page seen with it this pass.
    unstable: BTreeMap<(u32, u64), (u16, u64)>,
    /// Shared frame -> its mappers.
    shared: BTreeMap<u64, Shared>,
    /// The scan cursor: next (pid, address) to visit.
    cursor: (u16, u64),
    /// Frames held by shared frames (base pages).
    frames: u64,
}

impl Ksm {
    fn new(cfg: KsmConfig) -> Ksm {
        Ksm { cfg, stats: SharingStats::default(), stable: BTreeMap::new(), unstable: BTreeMap::new(), shared: BTreeMap::new(), cursor: (0, 0), frames: 0 }
    }
}

/// A VMA's content words, allocated if it has none yet (VMAs inferred
/// after sharing was enabled).
fn ensure_words(v: &mut super::aspace::Vma) {
    if v.content.len() != v.flags.len() {
        super::aspace::grow_zeroed(&mut v.content, v.flags.len());
    }
}

impl Kernel {
    /// Turn page contents and same-page merging on (a sharing policy's
    /// `init`). Idempotent: the first configuration stays. From here on
    /// every write is trapped (content and copy-on-write).
    pub fn enable_sharing(&mut self, cfg: KsmConfig) {
        if self.sharing.is_some() {
            return;
        }
        for sp in self.spaces.iter_mut() {
            for v in sp.vmas.iter_mut() {
                super::aspace::grow_zeroed(&mut v.content, v.flags.len());
            }
        }
        self.sharing = Some(Box::new(Ksm::new(cfg)));
        self.write_trap = true;
    }

    /// The sharing counters (None without a sharing policy).
    pub fn sharing_stats(&self) -> Option<SharingStats> {
        self.sharing.as_ref().map(|s| {
            let mut st = s.stats.clone();
            let bs = self.shape.base_shift;
            st.pages_shared = s.frames;
            st.pages_sharing = s.shared.values().map(|f| (f.mappers.len() as u64).saturating_sub(1) << f.order).sum();
            st.saved_bytes = st.pages_sharing << bs;
            let held: u64 = self.spaces.iter().map(|sp| sp.frames_held).sum();
            st.in_use_bytes = (held + s.frames) << bs;
            let before = st.in_use_bytes + st.saved_bytes;
            st.saved_share = if before > 0 { st.saved_bytes as f64 / before as f64 } else { 0.0 };
            st
        })
    }

    /// Frames held by shared frames (the conservation invariant's term).
    pub(super) fn shared_frames(&self) -> u64 {
        self.sharing.as_ref().map_or(0, |s| s.frames)
    }

    /// Mappers of the shared frame at `pfn`, if it is one (tests).
    pub fn shared_mappers(&self, pfn: u64) -> Option<usize> {
        self.sharing.as_ref()?.shared.get(&pfn).map(|f| f.mappers.len())
    }

    /// Whether any base page of [start, start + len) of `pid` is merged: such
    /// a range is not collapsed (Linux khugepaged skips KSM pages; FHPM §5:
    /// "only all base pages are not shared ... can be collapsed").
    pub(super) fn range_merged(&self, pid: u16, start: u64, len: u64) -> bool {
        let bs = self.shape.base_shift;
        let Some(sp) = self.spaces.get(pid as usize) else { return false };
        let Some(vi) = sp.find(start) else { return false };
        let v = &sp.vmas[vi];
        let a = v.page_index(start, bs);
        let b = (a + (len >> bs) as usize).min(v.content.len());
        a < b && v.content[a..b].iter().any(|&w| w & MERGED != 0)
    }

    /// The next page of the scan (the cursor moves past it), wrapping after
    /// the last process: a full pass ends, the unstable tree is emptied.
    fn ksm_advance(&mut self) -> Option<(u16, u64)> {
        let page = 1u64 << self.shape.base_shift;
        let mut wraps = 0;
        loop {
            let ksm = self.sharing.as_mut()?;
            let (pid, va) = ksm.cursor;
            let Some(sp) = self.spaces.get(pid as usize) else {
                ksm.cursor = (0, 0);
                ksm.stats.full_scans += 1;
                ksm.unstable.clear();
                wraps += 1;
                if wraps > 1 {
                    return None; // no process has a VMA
                }
                continue;
            };
            let i = sp.vmas.partition_point(|v| v.end <= va);
            if i == sp.vmas.len() {
                ksm.cursor = (pid + 1, 0);
                continue;
            }
            let a = va.max(sp.vmas[i].start);
            ksm.cursor = (pid, a + page);
            return Some((pid, a));
        }
    }

    /// The candidate at `va` of `pid`, if it is a mapped page the scanner
    /// may consider: present, its frame its own (not a frame of a split
    /// block still held whole), not merged and not private.
    fn ksm_candidate(&self, pid: u16, va: u64) -> Option<Candidate> {
        let bs = self.shape.base_shift;
        let sp = self.spaces.get(pid as usize)?;
        let vi = sp.find(va)?;
        let v = &sp.vmas[vi];
        let pi = v.page_index(va, bs);
        let f = v.flags[pi];
        if f & PRESENT == 0 || v.pfn.get(pi) == NO_PFN || v.leaked(pi) {
            return None;
        }
        let word = v.content.get(pi).copied().unwrap_or(super::content::ZERO);
        if word & MERGED != 0 || word == PRIVATE {
            return None;
        }
        let size = size_of_flags(f);
        let leaf_start = va & !(self.geo.sizes[size] - 1);
        Some(Candidate { pid, va, leaf_size: size, leaf_start, content: word })
    }

    /// Split the huge leaf holding `va` if there is one (KSM splits a huge
    /// page before merging a base page of it). False if it cannot be split.
    fn ksm_make_base(&mut self, pid: u16, va: u64) -> bool {
        let Some(c) = self.ksm_candidate(pid, va) else { return false };
        if c.leaf_size == 0 {
            return true;
        }
        if self.demote(pid, va) {
            if let Some(s) = self.sharing.as_mut() {
                s.stats.huge_splits += 1;
            }
            true
        } else {
            false
        }
    }

    /// Map the base page at `va` to the shared frame `kpfn`; its own frame
    /// goes back to the allocator. The caller queues the shootdown.
    fn ksm_map_shared(&mut self, pid: u16, va: u64, kpfn: u64) -> bool {
        let bs = self.shape.base_shift;
        let sp = &mut self.spaces[pid as usize];
        let Some(vi) = sp.find(va) else { return false };
        let v = &mut sp.vmas[vi];
        let pi = v.page_index(va, bs);
        let old = v.pfn.get(pi);
        if old == NO_PFN || v.leaked(pi) || size_of_flags(v.flags[pi]) != 0 {
            return false;
        }
        v.pfn.set(pi, kpfn as u32);
        ensure_words(v);
        v.content[pi] |= MERGED;
        sp.frames_held -= 1;
        self.phys.free(old as u64, 0);
        let ksm = self.sharing.as_mut().expect("sharing on");
        ksm.shared.get_mut(&kpfn).expect("a shared frame").mappers.push((pid, va));
        ksm.stats.merges += 1;
        ksm.stats.frames_freed += 1;
        true
    }

    /// Make the base page at `va` (already base, unmerged) a shared frame
    /// with itself as its first mapper; returns the frame.
    fn ksm_make_stable(&mut self, pid: u16, va: u64, key: u64) -> Option<u64> {
        let bs = self.shape.base_shift;
        let sp = &mut self.spaces[pid as usize];
        let vi = sp.find(va)?;
        let v = &mut sp.vmas[vi];
        let pi = v.page_index(va, bs);
        let kpfn = v.pfn.get(pi) as u64;
        ensure_words(v);
        v.content[pi] |= MERGED;
        sp.frames_held -= 1;
        let ksm = self.sharing.as_mut()?;
        ksm.frames += 1;
        ksm.shared.insert(kpfn, Shared { order: 0, key, mappers: vec![(pid, va)] });
        ksm.stable.insert((0, key), kpfn);
        Some(kpfn)
    }

    /// One scan step (`ksm_scan`) on the page at `va`; returns the pages
    /// remapped (to shoot down).
    fn ksm_visit(&mut self, pid: u16, va: u64, admit: &mut dyn FnMut(&Kernel, &Candidate) -> bool, remapped: &mut Vec<(u16, u64)>) {
        let Some(c) = self.ksm_candidate(pid, va) else { return };
        if !admit(self, &c) {
            return;
        }
        let key = c.content;
        let ksm = self.sharing.as_ref().expect("sharing on");
        if let Some(&kpfn) = ksm.stable.get(&(0, key)) {
            if self.ksm_make_base(pid, va) && self.ksm_map_shared(pid, va, kpfn) {
                remapped.push((pid, va));
            }
            return;
        }
        let other = ksm.unstable.get(&(0, key)).copied();
        let ksm = self.sharing.as_mut().expect("sharing on");
        let Some((op, ova)) = other else {
            ksm.unstable.insert((0, key), (pid, va));
            return;
        };
        // The unstable tree's page may have changed since (written, freed,
        // merged, or its huge page grown hot): check it again.
        let still = (op, ova) != (pid, va) && self.ksm_candidate(op, ova).is_some_and(|o| o.content == key && admit(self, &o));
        if !still {
            self.sharing.as_mut().expect("sharing on").unstable.insert((0, key), (pid, va));
            return;
        }
        if !self.ksm_make_base(op, ova) || !self.ksm_make_base(pid, va) {
            return;
        }
        self.sharing.as_mut().expect("sharing on").unstable.remove(&(0, key));
        let Some(kpfn) = self.ksm_make_stable(op, ova, key) else { return };
        remapped.push((op, ova));
        if self.ksm_map_shared(pid, va, kpfn) {
            remapped.push((pid, va));
        }
    }

    /// Scan up to `budget` mapped pages from the cursor (one ksmd wake-up),
    /// merging identical base pages; `admit` says which candidates the
    /// policy lets the scanner consider (a candidate inside a huge page that
    /// is admitted is split when it is about to be merged). Returns the pages
    /// scanned. Charges `scan_page_us` per page and one shootdown batch per
    /// process for the remapped pages.
    pub fn ksm_scan(&mut self, budget: u64, admit: &mut dyn FnMut(&Kernel, &Candidate) -> bool) -> u64 {
        if self.sharing.is_none() {
            return 0;
        }
        let total: u64 = self.spaces.iter().flat_map(|s| s.vmas.iter()).map(|v| v.flags.len() as u64).sum();
        let (mut scanned, mut steps) = (0u64, 0u64);
        let mut remapped = Vec::new();
        while scanned < budget && steps < total {
            steps += 1;
            let Some((pid, va)) = self.ksm_advance() else { break };
            let v = &self.spaces[pid as usize];
            let Some(vi) = v.find(va) else { continue };
            let pi = v.vmas[vi].page_index(va, self.shape.base_shift);
            if v.vmas[vi].flags[pi] & PRESENT == 0 {
                continue;
            }
            scanned += 1;
            self.ksm_visit(pid, va, admit, &mut remapped);
        }
        self.ksm_finish_scan(scanned, remapped);
        scanned
    }

    fn ksm_finish_scan(&mut self, scanned: u64, mut remapped: Vec<(u16, u64)>) {
        let Some(ksm) = self.sharing.as_mut() else { return };
        ksm.stats.pages_scanned += scanned;
        let us = scanned as f64 * ksm.cfg.scan_page_us;
        self.charge_us(us);
        remapped.sort_unstable();
        let page = 1u64 << self.shape.base_shift;
        let mut i = 0;
        while i < remapped.len() {
            let pid = remapped[i].0;
            let j = remapped[i..].iter().position(|r| r.0 != pid).map_or(remapped.len(), |n| i + n);
            let ranges: Vec<(u64, u64)> = remapped[i..j].iter().map(|&(_, va)| (va, va + page)).collect();
            self.shootdown_batch(pid, &ranges);
            i = j;
        }
    }

    /// The key of a whole huge leaf's content: a mix of its base pages'
    /// ids; None if a page is private (the huge page equals no other).
    fn huge_key(&self, pid: u16, start: u64, len: u64) -> Option<u64> {
        let bs = self.shape.base_shift;
        let v = &self.spaces[pid as usize].vmas[self.spaces[pid as usize].find(start)?];
        let a = v.page_index(start, bs);
        let words = v.content.get(a..a + (len >> bs) as usize)?;
        let mut h = 0x5eed_u64;
        for &w in words {
            if w & MERGED != 0 || w == PRIVATE {
                return None;
            }
            h = declared_id(h, w);
        }
        Some(h)
    }

    /// Huge-page sharing (`hpshare`): scan up to `budget` base pages' worth of
    /// huge leaves and merge whole identical ones into one shared huge frame,
    /// never splitting. Returns the pages scanned.
    pub fn ksm_scan_huge(&mut self, budget: u64) -> u64 {
        if self.sharing.is_none() {
            return 0;
        }
        let bs = self.shape.base_shift;
        let total: u64 = self.spaces.iter().flat_map(|s| s.vmas.iter()).map(|v| v.flags.len() as u64).sum();
        let (mut scanned, mut steps) = (0u64, 0u64);
        let mut remapped: Vec<(u16, u64, u64)> = Vec::new();
        while scanned < budget && steps < total {
            steps += 1;
            let Some((pid, va)) = self.ksm_advance() else { break };
            let Some(c) = self.ksm_candidate(pid, va) else { continue };
            if c.leaf_size == 0 {
                continue;
            }
            let len = self.geo.sizes[c.leaf_size];
            let order = self.geo.shifts[c.leaf_size] - bs;
            // Visit the leaf once: the cursor skips to its end.
            if let Some(k) = self.sharing.as_mut() {
                k.cursor = (pid, c.leaf_start + len);
            }
            scanned += len >> bs;
            let Some(key) = self.huge_key(pid, c.leaf_start, len) else { continue };
            let ksm = self.sharing.as_ref().expect("sharing on");
            if let Some(&kpfn) = ksm.stable.get(&(order, key)) {
                if self.ksm_map_huge(pid, c.leaf_start, len, kpfn) {
                    remapped.push((pid, c.leaf_start, len));
                }
                continue;
            }
            let other = ksm.unstable.get(&(order, key)).copied();
            let still = other.is_some_and(|(op, ova)| {
                (op, ova) != (pid, c.leaf_start)
                    && self.ksm_candidate(op, ova).is_some_and(|o| o.leaf_size == c.leaf_size && o.leaf_start == ova)
                    && self.huge_key(op, ova, len) == Some(key)
            });
            let ksm = self.sharing.as_mut().expect("sharing on");
            if !still {
                ksm.unstable.insert((order, key), (pid, c.leaf_start));
                continue;
            }
            let (op, ova) = other.expect("checked");
            ksm.unstable.remove(&(order, key));
            // The other leaf's block becomes the shared frame.
            let (kpfn, n) = {
                let sp = &mut self.spaces[op as usize];
                let vi = sp.find(ova).expect("a candidate's VMA");
                let v = &mut sp.vmas[vi];
                let a = v.page_index(ova, bs);
                let n = (len >> bs) as usize;
                for w in &mut v.content[a..a + n] {
                    *w |= MERGED;
                }
                sp.frames_held -= n as u64;
                (v.pfn.get(a) as u64, n as u64)
            };
            let ksm = self.sharing.as_mut().expect("sharing on");
            ksm.frames += n;
            ksm.shared.insert(kpfn, Shared { order, key, mappers: vec![(op, ova)] });
            ksm.stable.insert((order, key), kpfn);
            if self.ksm_map_huge(pid, c.leaf_start, len, kpfn) {
                remapped.push((pid, c.leaf_start, len));
            }
        }
        let pages: Vec<(u16, u64)> = Vec::new();
        self.ksm_finish_scan(scanned, pages);
        for (pid, start, len) in remapped {
            self.shootdown(pid, start, start + len);
        }
        scanned
    }

    /// Map the huge leaf at `start` to the shared huge frame `kpfn`; its own
    /// block goes back to the allocator.
    fn ksm_map_huge(&mut self, pid: u16, start: u64, len: u64, kpfn: u64) -> bool {
        let bs = self.shape.base_shift;
        let n = (len >> bs) as usize;
        let order = n.trailing_zeros();
        let sp = &mut self.spaces[pid as usize];
        let Some(vi) = sp.find(start) else { return false };
        let v = &mut sp.vmas[vi];
        let a = v.page_index(start, bs);
        let old = v.pfn.get(a) as u64;
        for j in 0..n {
            v.pfn.set(a + j, (kpfn + j as u64) as u32);
            v.content[a + j] |= MERGED;
        }
        sp.frames_held -= n as u64;
        self.phys.free(old, order);
        let ksm = self.sharing.as_mut().expect("sharing on");
        ksm.shared.get_mut(&kpfn).expect("a shared frame").mappers.push((pid, start));
        ksm.stats.huge_merges += 1;
        ksm.stats.frames_freed += n as u64;
        true
    }

    /// Drop `mapper` from the shared frame `kpfn`; the last one out frees it.
    fn ksm_unshare(&mut self, kpfn: u64, mapper: (u16, u64)) {
        let Some(ksm) = self.sharing.as_mut() else { return };
        let Some(f) = ksm.shared.get_mut(&kpfn) else { return };
        f.mappers.retain(|&m| m != mapper);
        if f.mappers.is_empty() {
            let (order, key) = (f.order, f.key);
            ksm.shared.remove(&kpfn);
            ksm.stable.remove(&(order, key));
            ksm.frames -= 1u64 << order;
            self.phys.free(kpfn, order);
        }
    }

    /// Copy-on-write break of the merged page at `va` (a write to it): a
    /// private frame (or huge block, for a merged huge leaf) is allocated
    /// and the content copied; the page is remapped and shot down. Charged
    /// to the writer (`cow_us`, plus a copy per further base page).
    pub(super) fn break_cow(&mut self, pid: u16, va: u64) {
        let bs = self.shape.base_shift;
        let Some(sp) = self.spaces.get(pid as usize) else { return };
        let Some(vi) = sp.find(va) else { return };
        let v = &sp.vmas[vi];
        let pi = v.page_index(va, bs);
        let size = size_of_flags(v.flags[pi]);
        let len = self.geo.sizes[size];
        let start = va & !(len - 1);
        let order = self.geo.shifts[size] - bs;
        let a = v.page_index(start, bs);
        let kpfn = v.pfn.get(a) as u64;
        let n = 1usize << order;
        let mode = if order == 0 { AllocMode::FreeOnly } else { AllocMode::Compact { max_pages: 2 * n as u64 } };
        let Some(new) = self.alloc_block(order, mode, Self::owner(pid, start, bs)) else {
            if let Some(s) = self.sharing.as_mut() {
                s.stats.cow_failures += 1;
            }
            return;
        };
        let sp = &mut self.spaces[pid as usize];
        // Compaction may have moved pages: re-find the VMA.
        let vi = sp.find(va).expect("the VMA of a mapped page");
        let v = &mut sp.vmas[vi];
        for j in 0..n {
            v.pfn.set(a + j, (new + j as u64) as u32);
            v.content[a + j] &= ID_MASK;
        }
        sp.frames_held += n as u64;
        sp.peak_frames = sp.peak_frames.max(sp.frames_held);
        self.ksm_unshare(kpfn, (pid, start));
        let (cow_us, copy_us) = (self.sharing.as_ref().map_or(0.0, |s| s.cfg.cow_us), self.costs.copy_base_page_us);
        if let Some(s) = self.sharing.as_mut() {
            s.stats.cow_breaks += 1;
            s.stats.frames_copied += n as u64;
        }
        self.charge_us(cow_us + (n - 1) as f64 * copy_us);
        self.shootdown(pid, start, start + len);
    }

    /// Before `free_range` unmaps [start, end) of `pid`: merged pages in it
    /// leave their shared frames (the frame is not theirs to free). A merged
    /// base page's entry loses its frame (`free_range` then frees nothing for
    /// it); a merged huge leaf wholly inside is unmapped here; one that
    /// straddles the range gets a private copy first (its pages outside stay
    /// mapped), which the unmap then splits and frees as any huge page. Every
    /// page of the range returns to the zero content.
    pub(super) fn ksm_unmap_range(&mut self, pid: u16, start: u64, end: u64) {
        let bs = self.shape.base_shift;
        let page = 1u64 << bs;
        let mut a = start;
        while a < end {
            let Some(vi) = self.spaces.get(pid as usize).and_then(|sp| sp.find(a)) else {
                a += page;
                continue;
            };
            let v = &self.spaces[pid as usize].vmas[vi];
            let pi = v.page_index(a, bs);
            let word = v.content.get(pi).copied().unwrap_or(super::content::ZERO);
            let size = size_of_flags(v.flags[pi]);
            if word & MERGED != 0 && size > 0 {
                let len = self.geo.sizes[size];
                let hs = a & !(len - 1);
                let inside = hs >= start && hs + len <= end;
                if !inside {
                    self.break_cow(pid, a);
                }
                if self.content_word(pid, a) & MERGED != 0 {
                    if !inside {
                        self.note(format!("pid {pid}: no memory for a private copy of the shared huge page at {hs:#x} partly freed: all of it was unmapped"));
                    }
                    self.ksm_drop_huge(pid, hs, len);
                }
            } else if word & MERGED != 0 {
                let kpfn = v.pfn.get(pi) as u64;
                self.spaces[pid as usize].vmas[vi].pfn.set(pi, NO_PFN);
                self.ksm_unshare(kpfn, (pid, a));
            }
            if let Some(w) = self.spaces[pid as usize].vmas[vi].content.get_mut(pi) {
                *w = super::content::ZERO;
            }
            a += page;
        }
    }

    /// Unmap the merged huge leaf at `start` (`len` bytes) of `pid` without
    /// freeing its frame (other mappers may keep it): its pages become
    /// absent (a later touch faults a zero page), the mapper leaves the
    /// shared frame.
    fn ksm_drop_huge(&mut self, pid: u16, start: u64, len: u64) {
        let (bs, rs) = (self.shape.base_shift, self.shape.region_shift);
        let sp = &mut self.spaces[pid as usize];
        let Some(vi) = sp.find(start) else { return };
        let v = &mut sp.vmas[vi];
        let a = v.page_index(start, bs);
        let n = (len >> bs) as usize;
        let size = size_of_flags(v.flags[a]);
        let kpfn = v.pfn.get(a) as u64;
        for j in 0..n {
            v.untouch(a + j, start + ((j as u64) << bs), rs, &mut sp.touched_pages, &mut sp.full);
            v.flags[a + j] = 0;
            v.pfn.set(a + j, NO_PFN);
            v.content[a + j] = super::content::ZERO;
        }
        sp.huge_bytes[size] -= len;
        self.huge_total -= len;
        self.ksm_unshare(kpfn, (pid, start));
        self.shootdown(pid, start, start + len);
    }

    /// Compaction moved the block at `from` to `to`: if it is a shared frame,
    /// every mapper follows it (Linux's rmap walk of a KSM page). True if it
    /// was one (the ordinary single-owner update must not run).
    pub(super) fn ksm_migrated(&mut self, from: u64, to: u64) -> bool {
        let Some(ksm) = self.sharing.as_mut() else { return false };
        let Some(f) = ksm.shared.remove(&from) else { return false };
        ksm.stable.insert((f.order, f.key), to);
        let n = 1usize << f.order;
        let mappers = f.mappers.clone();
        ksm.shared.insert(to, f);
        let bs = self.shape.base_shift;
        for (pid, va) in mappers {
            let sp = &mut self.spaces[pid as usize];
            let Some(vi) = sp.find(va) else { continue };
            let v = &mut sp.vmas[vi];
            let a = v.page_index(va, bs);
            v.pfn.set_run(a, n, to);
            self.shootdown(pid, va, va + ((n as u64) << bs));
        }
        true
    }

    /// The sharing invariants (`check_invariants`): every mapper of a shared
    /// frame maps it and is flagged merged; the merged pages are exactly the
    /// mappers' pages; each shared frame is an allocated block of its order.
    pub(super) fn check_sharing(&self) -> std::result::Result<(), String> {
        let Some(ksm) = self.sharing.as_ref() else { return Ok(()) };
        let bs = self.shape.base_shift;
        let mut mapped = 0u64;
        let mut frames = 0u64;
        for (&kpfn, f) in &ksm.shared {
            frames += 1 << f.order;
            match self.phys.allocated_block(kpfn) {
                Some(b) if b.order == f.order && b.pfn == kpfn => {}
                _ => return Err(format!("shared frame {kpfn} is not an allocated block of order {}", f.order)),
            }
            if ksm.stable.get(&(f.order, f.key)) != Some(&kpfn) {
                return Err(format!("shared frame {kpfn} is not in the stable tree"));
            }
            for &(pid, va) in &f.mappers {
                let sp = self.spaces.get(pid as usize).ok_or("mapper of no process")?;
                let vi = sp.find(va).ok_or("mapper outside every VMA")?;
                let v = &sp.vmas[vi];
                let a = v.page_index(va, bs);
                for j in 0..1usize << f.order {
                    if v.pfn.get(a + j) as u64 != kpfn + j as u64 || v.content[a + j] & MERGED == 0 || v.flags[a + j] & PRESENT == 0 {
                        return Err(format!("pid {pid} page {:#x} does not map shared frame {kpfn} as merged", va + ((j as u64) << bs)));
                    }
                }
                mapped += 1 << f.order;
            }
        }
        let flagged: u64 = self.spaces.iter().flat_map(|s| s.vmas.iter()).map(|v| v.content.iter().filter(|&&w| w & MERGED != 0).count() as u64).sum();
        if flagged != mapped {
            return Err(format!("{flagged} pages flagged merged, {mapped} mappings of shared frames"));
        }
        if frames != ksm.frames {
            return Err(format!("shared frames counted {} != {frames}", ksm.frames));
        }
        Ok(())
    }
}
