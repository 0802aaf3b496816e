//! The binary buddy allocator (Navarro §5.1 / Linux `mm/page_alloc.c`).
//!
//! Per-frame state is one byte (`state`): the first frame of every block, free
//! or allocated, is a *head* and stores the block's order; every other frame
//! is 0. Blocks tile memory, so walking heads visits every block, and the
//! block holding any frame is found by trying its alignments (at most
//! `max_order + 1` probes). Free blocks of order `k` are kept in a bitset
//! indexed by `pfn >> k` (see `freeset`).

use super::freeset::FreeSet;
use super::owners::OwnerTable;
use super::{Mobility, Pfn};
use crate::{Error, Result};

/// Head of a block (free or allocated).
pub(super) const HEAD: u8 = 0x80;
/// The block is allocated.
pub(super) const ALLOC: u8 = 0x40;
/// The allocated block is unmovable.
pub(super) const UNMOV: u8 = 0x20;
/// Order of the block, in the head byte.
pub(super) const ORDER_MASK: u8 = 0x1f;

/// Largest supported `max_order` (the order lives in 5 bits of the head byte).
const MAX_ORDER_LIMIT: u32 = 30;
/// Upper bound on simulated frames: 2^32 frames is 16 TiB of 4 KiB pages.
const MAX_FRAMES: u64 = 1 << 32;
/// The pageblock is the 2 MB block (see the module docs).
const PAGEBLOCK_BYTES: u64 = 2 << 20;

/// An allocated block, as seen by the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockInfo {
    pub pfn: Pfn,
    pub order: u32,
    pub mobility: Mobility,
    pub owner: u64,
}

/// Physical memory of one node. See the module documentation.
#[derive(Clone)]
pub struct PhysMem {
    pub(super) base_page: u64,
    pub(super) max_order: u32,
    /// Order of a pageblock (2 MB, capped at `max_order`).
    pub(super) pb_order: u32,
    pub(super) total: u64,
    pub(super) free: u64,
    pub(super) state: Vec<u8>,
    /// Free blocks of each order, indexed by `pfn >> order`.
    pub(super) lists: Vec<FreeSet>,
    /// Allocated frames per pageblock.
    pub(super) pb_used: Vec<u16>,
    /// Allocated unmovable frames per pageblock.
    pub(super) pb_unmovable: Vec<u16>,
    pub(super) owners: OwnerTable,
    /// Memory tiers (os/tier.rs): allocate below this frame first (the fast
    /// tier, FHPM §6.1); 0: no preference (one tier, the default).
    pub(super) prefer_below: Pfn,
    misuse: u64,
    last_misuse: Option<String>,
}

impl std::fmt::Debug for PhysMem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PhysMem")
            .field("base_page", &self.base_page)
            .field("max_order", &self.max_order)
            .field("total_frames", &self.total)
            .field("free_frames", &self.free)
            .field("buddyinfo", &self.buddyinfo())
            .finish()
    }
}

impl PhysMem {
    /// Every field as text, for comparing two states whole (a shared pass:
    /// `crate::sweep`); `Debug` above is a summary.
    pub(crate) fn state_text(&self) -> String {
        format!(
            "{} {} {} {} {} {:?} {:?} {:?} {:?} {:?} {} {} {:?}",
            self.base_page,
            self.max_order,
            self.pb_order,
            self.total,
            self.free,
            self.state,
            self.lists,
            self.pb_used,
            self.pb_unmovable,
            self.owners,
            self.prefer_below,
            self.misuse,
            self.last_misuse
        )
    }
}

impl PhysMem {
    /// `total_bytes` of memory made of base pages of `base_page` bytes (a power
    /// of two from 4 KiB to 1 MiB; 4096 or 8192 in the papers), with blocks up
    /// to `max_order` (18 = 1 GiB of 4 KiB pages). Memory need not be a
    /// multiple of the largest block: the tail is covered by smaller blocks.
    pub fn new(total_bytes: u64, base_page: u64, max_order: u32) -> Result<PhysMem> {
        if !base_page.is_power_of_two() || !(4096..=1 << 20).contains(&base_page) {
            return Err(Error::config(format!(
                "physical memory: base page size {base_page} must be a power of two from 4096 to 1048576 bytes"
            )));
        }
        if max_order > MAX_ORDER_LIMIT {
            return Err(Error::config(format!(
                "physical memory: max_order {max_order} exceeds {MAX_ORDER_LIMIT}"
            )));
        }
        if total_bytes == 0 || !total_bytes.is_multiple_of(base_page) {
            return Err(Error::config(format!(
                "physical memory: size {total_bytes} bytes must be a positive multiple of the base page ({base_page} bytes)"
            )));
        }
        let total = total_bytes / base_page;
        if total > MAX_FRAMES {
            return Err(Error::config(format!(
                "physical memory: {total} frames exceed the supported {MAX_FRAMES}"
            )));
        }
        let pb_order = (PAGEBLOCK_BYTES / base_page)
            .max(1)
            .trailing_zeros()
            .min(max_order);
        let n_pb = total.div_ceil(1 << pb_order) as usize;
        let lists = (0..=max_order)
            .map(|k| FreeSet::new(total.div_ceil(1 << k) as usize))
            .collect();
        let mut pm = PhysMem {
            base_page,
            max_order,
            pb_order,
            total,
            free: 0,
            state: vec![0u8; total as usize],
            lists,
            pb_used: vec![0; n_pb],
            pb_unmovable: vec![0; n_pb],
            owners: OwnerTable::new(total, pb_order),
            prefer_below: 0,
            misuse: 0,
            last_misuse: None,
        };
        // Cover memory with the largest aligned blocks that fit.
        let mut p = 0u64;
        while p < total {
            let mut o = max_order.min(if p == 0 { 63 } else { p.trailing_zeros() });
            while p + (1u64 << o) > total {
                o -= 1;
            }
            pm.push_free(p, o);
            pm.free += 1 << o;
            p += 1 << o;
        }
        Ok(pm)
    }

    pub fn base_page(&self) -> u64 {
        self.base_page
    }
    pub fn max_order(&self) -> u32 {
        self.max_order
    }
    /// Order of the 2 MB pageblock (9 with 4 KiB pages), capped at `max_order`.
    pub fn pageblock_order(&self) -> u32 {
        self.pb_order
    }
    /// Complete pageblocks (a partial one at the end of memory is not counted).
    pub fn pageblocks(&self) -> u64 {
        self.total >> self.pb_order
    }
    pub fn total_frames(&self) -> u64 {
        self.total
    }
    pub fn free_frames(&self) -> u64 {
        self.free
    }

    /// Free blocks per order `0..=max_order`, like `/proc/buddyinfo`.
    pub fn buddyinfo(&self) -> Vec<u64> {
        self.lists.iter().map(FreeSet::len).collect()
    }

    /// Free memory fragmentation index at `order` (Ingens §3.1, §4.4; Gorman's
    /// unusable free space index): the share of free frames that lie in free
    /// blocks smaller than `order`. 0 = all free memory usable at `order`,
    /// 1 = none (also when nothing is free).
    pub fn fmfi(&self, order: u32) -> f64 {
        if self.free == 0 {
            return 1.0;
        }
        let usable: u64 = (order..=self.max_order)
            .map(|k| self.lists[k as usize].len() << k)
            .sum();
        (self.free - usable) as f64 / self.free as f64
    }

    /// How many blocks of `order` could be allocated right now without
    /// compaction: `Σ_{k ≥ order} free_blocks[k] · 2^(k − order)`. (A free
    /// 4 MB block counts as two 2 MB blocks.)
    pub fn free_blocks_at_least(&self, order: u32) -> u64 {
        (order..=self.max_order)
            .map(|k| self.lists[k as usize].len() << (k - order))
            .sum()
    }

    /// Pageblocks holding at least one unmovable frame (never compactable).
    pub fn unmovable_pageblocks(&self) -> u64 {
        self.pb_unmovable.iter().filter(|&&n| n > 0).count() as u64
    }

    /// Allocated frames in pageblock `index` (0 if out of range).
    pub fn pageblock_used(&self, index: u64) -> u64 {
        self.pb_used.get(index as usize).map_or(0, |&n| n as u64)
    }

    /// Heap bytes of the allocator's own state (state bytes, free lists, owner
    /// tags, pageblock counters), for checking the "few bytes per frame" budget.
    pub fn heap_bytes(&self) -> usize {
        self.state.len()
            + self.lists.iter().map(FreeSet::heap_bytes).sum::<usize>()
            + self.owners.heap_bytes()
            + 4 * self.pb_used.len()
    }

    // ----- allocation -------------------------------------------------------

    /// Allocate a naturally aligned block of `2^order` frames: the smallest
    /// free order that fits, lowest address first, split Linux-style (the
    /// upper halves go back to the free lists). `None` when no free block is
    /// large enough; the kernel decides whether to compact.
    pub fn alloc(&mut self, order: u32, mobility: Mobility, owner: u64) -> Option<Pfn> {
        if order > self.max_order {
            return None;
        }
        // Memory tiers: the fast tier first (os/phys/ranged.rs).
        if self.prefer_below != 0 {
            if let Some(p) = self.alloc_in(order, 0, self.prefer_below, mobility, owner) {
                return Some(p);
            }
        }
        let k = (order..=self.max_order).find(|&k| self.lists[k as usize].len() > 0)?;
        let p = (self.lists[k as usize].first()? as u64) << k;
        self.take_free(p, k);
        let mut k = k;
        while k > order {
            k -= 1;
            self.push_free(p + (1 << k), k);
        }
        self.mark_alloc(p, order, mobility, owner);
        Some(p)
    }

    /// Allocate the specific block `[pfn, pfn + 2^order)` if it is entirely
    /// free (used by the fragmentation injectors and by reservation policies
    /// that need a particular extent). `None` if it is not free, misaligned or
    /// out of range.
    pub fn alloc_at(
        &mut self,
        pfn: Pfn,
        order: u32,
        mobility: Mobility,
        owner: u64,
    ) -> Option<Pfn> {
        if order > self.max_order
            || !pfn.is_multiple_of(1u64 << order)
            || pfn + (1u64 << order) > self.total
        {
            return None;
        }
        let (mut h, mut k) = (order..=self.max_order).find_map(|k| {
            let h = pfn & !((1u64 << k) - 1);
            (self.state[h as usize] == HEAD | k as u8).then_some((h, k))
        })?;
        self.take_free(h, k);
        while k > order {
            k -= 1;
            let half = 1u64 << k;
            if pfn >= h + half {
                self.push_free(h, k);
                h += half;
            } else {
                self.push_free(h + half, k);
            }
        }
        debug_assert_eq!(h, pfn);
        self.mark_alloc(pfn, order, mobility, owner);
        Some(pfn)
    }

    /// Free the allocated block at `pfn` of `order` and coalesce it with its
    /// free buddies. Misuse (not an allocated block of that order) is ignored
    /// and recorded; see `try_free`.
    pub fn free(&mut self, pfn: Pfn, order: u32) {
        if let Err(e) = self.try_free(pfn, order) {
            self.record(e);
        }
    }

    /// `free` that reports misuse as `Error::input` instead of recording it.
    pub fn try_free(&mut self, pfn: Pfn, order: u32) -> Result<()> {
        let s = self.check_alloc_head(pfn, order, "free")?;
        self.release(pfn, order, s);
        Ok(())
    }

    /// Split an allocated block of `order` into `2^order` base-page
    /// allocations with the same mobility and owner (Linux `split_huge_page`).
    pub fn split(&mut self, pfn: Pfn, order: u32) {
        if let Err(e) = self.try_split_to(pfn, order, 0) {
            self.record(e);
        }
    }

    /// Split an allocated block of `order` into allocated blocks of
    /// `new_order` (a Navarro preemption splits one level at a time, §4.8).
    pub fn split_to(&mut self, pfn: Pfn, order: u32, new_order: u32) {
        if let Err(e) = self.try_split_to(pfn, order, new_order) {
            self.record(e);
        }
    }

    /// `split_to` that reports misuse as `Error::input`.
    pub fn try_split_to(&mut self, pfn: Pfn, order: u32, new_order: u32) -> Result<()> {
        let s = self.check_alloc_head(pfn, order, "split")?;
        if new_order > order {
            return Err(Error::input(format!(
                "split: cannot split the order-{order} block at frame {pfn} into larger order {new_order}"
            )));
        }
        let owner = self.owners.get(pfn, order);
        let byte = HEAD | ALLOC | (s & UNMOV) | new_order as u8;
        for i in 0..1u64 << (order - new_order) {
            let q = pfn + (i << new_order);
            self.state[q as usize] = byte;
            self.owners.set(q, new_order, owner);
        }
        Ok(())
    }

    /// Merge the allocated blocks tiling `[pfn, pfn + 2^order)` into one
    /// allocated block of `order` owned by `owner`: the inverse of `split`,
    /// for a collapse in place (a huge leaf installed over frames that are
    /// already contiguous, so nothing is allocated or copied). Every frame must
    /// be allocated, in blocks of one mobility; free frames are not touched.
    pub fn try_merge(&mut self, pfn: Pfn, order: u32, owner: u64) -> Result<()> {
        if order > self.max_order || !pfn.is_multiple_of(1u64 << order) || pfn + (1u64 << order) > self.total {
            return Err(Error::input(format!("merge: no order-{order} block can start at frame {pfn}")));
        }
        let end = pfn + (1u64 << order);
        let first = self.state[pfn as usize];
        let mut q = pfn;
        while q < end {
            let s = self.state[q as usize];
            if s & (HEAD | ALLOC) != HEAD | ALLOC || (s & UNMOV) != (first & UNMOV) || (s & ORDER_MASK) as u32 > order {
                return Err(Error::input(format!("merge: frame {q} is not an allocated block of the range at frame {pfn}")));
            }
            q += 1 << (s & ORDER_MASK);
        }
        // Drop the small blocks' heads and tags, then head the whole range.
        let mut q = pfn;
        while q < end {
            let o = (self.state[q as usize] & ORDER_MASK) as u32;
            self.owners.on_free(q, o);
            self.state[q as usize] = 0;
            q += 1 << o;
        }
        self.state[pfn as usize] = HEAD | ALLOC | (first & UNMOV) | order as u8;
        self.owners.set(pfn, order, owner);
        Ok(())
    }

    /// Set the owner tag of the allocated block holding `pfn` (misuse recorded).
    pub fn set_owner(&mut self, pfn: Pfn, owner: u64) {
        match self.allocated_block(pfn) {
            Some(b) => self.owners.set(b.pfn, b.order, owner),
            None => self.record(Error::input(format!(
                "set_owner: frame {pfn} is not in an allocated block"
            ))),
        }
    }

    /// Owner tag of the allocated block holding `pfn`; `None` if the frame is
    /// free or beyond memory.
    pub fn owner(&self, pfn: Pfn) -> Option<u64> {
        self.allocated_block(pfn).map(|b| b.owner)
    }

    /// The allocated block holding `pfn`, if any.
    pub fn allocated_block(&self, pfn: Pfn) -> Option<BlockInfo> {
        let (h, o) = self.block_of(pfn)?;
        let s = self.state[h as usize];
        (s & ALLOC != 0).then(|| BlockInfo {
            pfn: h,
            order: o,
            mobility: mobility_of(s),
            owner: self.owners.get(h, o),
        })
    }

    /// Free every allocated block whose owner is `owner` (e.g. `FRAG_OWNER`
    /// when the fragmenting program exits); returns the frames freed.
    pub fn release_owner(&mut self, owner: u64) -> u64 {
        let mut freed = 0;
        let mut p = 0u64;
        while p < self.total {
            let s = self.state[p as usize];
            let o = (s & ORDER_MASK) as u32;
            if s & ALLOC != 0 && self.owners.get(p, o) == owner {
                self.release(p, o, s);
                freed += 1 << o;
                // The freed block may have merged with free blocks after it;
                // resume after the merged block.
                let (h, ho) = self.block_of(p).expect("frame lies in a block");
                p = h + (1 << ho);
            } else {
                p += 1 << o;
            }
        }
        freed
    }

    /// Number of misuses ignored by the infallible methods since creation.
    pub fn misuse_count(&self) -> u64 {
        self.misuse
    }

    /// The most recent misuse, as an error, clearing it.
    pub fn take_misuse(&mut self) -> Option<Error> {
        self.last_misuse.take().map(Error::input)
    }

    // ----- invariants -------------------------------------------------------

    /// Full consistency check (O(frames)): blocks tile memory, non-head frames
    /// are zero, every free block is in exactly its free list and nothing else
    /// is, free buddies are coalesced, free and per-pageblock counters match.
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        let mut free = 0u64;
        let mut per_order = vec![0u64; self.max_order as usize + 1];
        let mut used = vec![0u64; self.pb_used.len()];
        let mut unmov = vec![0u64; self.pb_used.len()];
        let mut p = 0u64;
        while p < self.total {
            let s = self.state[p as usize];
            if s & HEAD == 0 {
                return Err(format!("frame {p} should start a block but is not a head"));
            }
            let o = (s & ORDER_MASK) as u32;
            if o > self.max_order {
                return Err(format!("block at {p} has order {o} > max_order"));
            }
            let n = 1u64 << o;
            if !p.is_multiple_of(n) || p + n > self.total {
                return Err(format!(
                    "block at {p} of order {o} is misaligned or past the end"
                ));
            }
            if let Some(q) = (p + 1..p + n).find(|&q| self.state[q as usize] != 0) {
                return Err(format!(
                    "frame {q} inside the block at {p} (order {o}) has state {:#x}",
                    self.state[q as usize]
                ));
            }
            if s & ALLOC == 0 {
                if s != HEAD | o as u8 {
                    return Err(format!("free block at {p} has stray flags {s:#x}"));
                }
                if !self.lists[o as usize].contains((p >> o) as usize) {
                    return Err(format!(
                        "free block at {p} (order {o}) missing from its free list"
                    ));
                }
                if o < self.max_order {
                    let b = p ^ n;
                    if b < self.total && self.state[b as usize] == HEAD | o as u8 {
                        return Err(format!(
                            "free buddies at {p} and {b} (order {o}) not coalesced"
                        ));
                    }
                }
                if o >= self.pb_order && !self.owners.chunk_is_empty(p) {
                    return Err(format!("owner storage kept for the free pageblock at {p}"));
                }
                free += n;
                per_order[o as usize] += 1;
            } else {
                let pb = (p >> self.pb_order) as usize;
                if o >= self.pb_order {
                    for i in 0..1usize << (o - self.pb_order) {
                        used[pb + i] += 1 << self.pb_order;
                        if s & UNMOV != 0 {
                            unmov[pb + i] += 1 << self.pb_order;
                        }
                    }
                } else {
                    used[pb] += n;
                    if s & UNMOV != 0 {
                        unmov[pb] += n;
                    }
                }
            }
            p += n;
        }
        if free != self.free {
            return Err(format!(
                "free counter {} but {free} free frames found",
                self.free
            ));
        }
        for (o, list) in self.lists.iter().enumerate() {
            if list.len() != per_order[o] {
                return Err(format!(
                    "free list {o} holds {} blocks but {} free blocks found",
                    list.len(),
                    per_order[o]
                ));
            }
            if let Some(i) = list.iter().find(|&i| {
                let p = (i as u64) << o;
                p >= self.total || self.state[p as usize] != HEAD | o as u8
            }) {
                return Err(format!(
                    "free list {o} has stale entry for frame {}",
                    (i as u64) << o
                ));
            }
        }
        for i in 0..used.len() {
            if used[i] != self.pb_used[i] as u64 || unmov[i] != self.pb_unmovable[i] as u64 {
                return Err(format!(
                    "pageblock {i}: counters used={} unmovable={} but found {} and {}",
                    self.pb_used[i], self.pb_unmovable[i], used[i], unmov[i]
                ));
            }
        }
        Ok(())
    }

    // ----- internals shared with fragment.rs and compaction.rs --------------

    pub(super) fn push_free(&mut self, p: Pfn, o: u32) {
        self.state[p as usize] = HEAD | o as u8;
        let fresh = self.lists[o as usize].insert((p >> o) as usize);
        debug_assert!(fresh, "block at {p} order {o} already free");
    }

    pub(super) fn take_free(&mut self, p: Pfn, o: u32) {
        let was = self.lists[o as usize].remove((p >> o) as usize);
        debug_assert!(was, "block at {p} order {o} was not free");
        self.state[p as usize] = 0;
    }

    /// Mark the (already unlinked) block at `p` allocated and account for it.
    pub(super) fn mark_alloc(&mut self, p: Pfn, o: u32, mobility: Mobility, owner: u64) {
        let unmov = mobility == Mobility::Unmovable;
        self.state[p as usize] = HEAD | ALLOC | if unmov { UNMOV } else { 0 } | o as u8;
        self.free -= 1 << o;
        self.account(p, o, unmov, true);
        self.owners.set(p, o, owner);
    }

    /// Free the allocated block at `p` (state byte `s`) and coalesce.
    pub(super) fn release(&mut self, pfn: Pfn, order: u32, s: u8) {
        debug_assert_eq!(s & (HEAD | ALLOC), HEAD | ALLOC);
        self.account(pfn, order, s & UNMOV != 0, false);
        self.owners.on_free(pfn, order);
        self.state[pfn as usize] = 0;
        self.free += 1 << order;
        let (mut p, mut o) = (pfn, order);
        while o < self.max_order {
            let buddy = p ^ (1u64 << o);
            if buddy >= self.total || self.state[buddy as usize] != HEAD | o as u8 {
                break;
            }
            self.take_free(buddy, o);
            p = p.min(buddy);
            o += 1;
        }
        self.push_free(p, o);
        if order < self.pb_order && o >= self.pb_order {
            // The pageblock became wholly free: its owner array is garbage.
            self.owners.release_chunk(pfn);
        }
    }

    fn account(&mut self, p: Pfn, o: u32, unmov: bool, add: bool) {
        let pb = (p >> self.pb_order) as usize;
        if o >= self.pb_order {
            let full = 1u16 << self.pb_order;
            for i in pb..pb + (1usize << (o - self.pb_order)) {
                self.pb_used[i] = if add { full } else { 0 };
                if unmov {
                    self.pb_unmovable[i] = if add { full } else { 0 };
                }
            }
        } else {
            let n = 1u16 << o;
            if add {
                self.pb_used[pb] += n;
                if unmov {
                    self.pb_unmovable[pb] += n;
                }
            } else {
                self.pb_used[pb] -= n;
                if unmov {
                    self.pb_unmovable[pb] -= n;
                }
            }
        }
    }

    /// Head and order of the block (free or allocated) holding `pfn`.
    pub(super) fn block_of(&self, pfn: Pfn) -> Option<(Pfn, u32)> {
        if pfn >= self.total {
            return None;
        }
        (0..=self.max_order).find_map(|o| {
            let h = pfn & !((1u64 << o) - 1);
            let s = self.state[h as usize];
            (s & HEAD != 0 && (s & ORDER_MASK) as u32 == o).then_some((h, o))
        })
    }

    fn check_alloc_head(&self, pfn: Pfn, order: u32, what: &str) -> Result<u8> {
        if pfn >= self.total {
            return Err(Error::input(format!(
                "{what}: frame {pfn} is beyond the end of memory ({} frames)",
                self.total
            )));
        }
        let s = self.state[pfn as usize];
        if s & (HEAD | ALLOC) != HEAD | ALLOC {
            return Err(Error::input(format!(
                "{what}: frame {pfn} does not start an allocated block"
            )));
        }
        if (s & ORDER_MASK) as u32 != order {
            return Err(Error::input(format!(
                "{what}: the block at frame {pfn} has order {}, not {order}",
                s & ORDER_MASK
            )));
        }
        Ok(s)
    }

    fn record(&mut self, e: Error) {
        self.misuse += 1;
        self.last_misuse = Some(e.to_string());
    }
}

pub(super) fn mobility_of(s: u8) -> Mobility {
    if s & UNMOV != 0 {
        Mobility::Unmovable
    } else {
        Mobility::Movable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn fresh_memory_is_max_order_blocks() {
        let pm = PhysMem::new(16 * MIB, 4096, 9).unwrap();
        assert_eq!(pm.total_frames(), 4096);
        assert_eq!(pm.buddyinfo(), vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 8]);
        assert_eq!(pm.fmfi(9), 0.0);
        pm.check_invariants().unwrap();
        // 6 MiB + 12 KiB with max order 9: three 2 MiB blocks, then 8 KiB + 4 KiB.
        let pm = PhysMem::new(6 * MIB + 12 * 1024, 4096, 9).unwrap();
        assert_eq!(pm.buddyinfo(), vec![1, 1, 0, 0, 0, 0, 0, 0, 0, 3]);
        pm.check_invariants().unwrap();
    }

    #[test]
    fn buddyinfo_after_allocations() {
        // 64 frames, max order 6 (one free order-6 block).
        let mut pm = PhysMem::new(64 * 4096, 4096, 6).unwrap();
        assert_eq!(pm.alloc(0, Mobility::Movable, 1), Some(0));
        // Splitting 64 leaves one free block of each order 0..=5.
        assert_eq!(pm.buddyinfo(), vec![1, 1, 1, 1, 1, 1, 0]);
        // Best fit: the order-2 request takes the free order-2 block at 4.
        assert_eq!(pm.alloc(2, Mobility::Unmovable, 2), Some(4));
        assert_eq!(pm.buddyinfo(), vec![1, 1, 0, 1, 1, 1, 0]);
        // Lowest address among equal orders: order 0 takes frame 1.
        assert_eq!(pm.alloc(0, Mobility::Movable, 3), Some(1));
        assert_eq!(pm.buddyinfo(), vec![0, 1, 0, 1, 1, 1, 0]);
        assert_eq!(pm.free_frames(), 64 - 6);
        pm.free(0, 0);
        pm.free(1, 0);
        // 0 and 1 coalesce with the free order-1 block at 2 into order 2 at 0.
        assert_eq!(pm.buddyinfo(), vec![0, 0, 1, 1, 1, 1, 0]);
        pm.free(4, 2);
        assert_eq!(pm.buddyinfo(), vec![0, 0, 0, 0, 0, 0, 1]);
        pm.check_invariants().unwrap();
        assert_eq!(pm.misuse_count(), 0);
    }

    #[test]
    fn fmfi_of_known_layout() {
        // 2048 frames = four 2 MiB pageblocks, max order 9.
        let mut pm = PhysMem::new(8 * MIB, 4096, 9).unwrap();
        // Pin frame 0 of pageblocks 0 and 1: each leaves free blocks of orders
        // 0..=8 = 511 unusable frames. Pageblocks 2 and 3 stay free (1024).
        assert_eq!(pm.alloc_at(0, 0, Mobility::Unmovable, 7), Some(0));
        assert_eq!(pm.alloc_at(512, 0, Mobility::Unmovable, 7), Some(512));
        assert_eq!(pm.free_frames(), 2046);
        let want = 1022.0 / 2046.0;
        assert!((pm.fmfi(9) - want).abs() < 1e-12, "{}", pm.fmfi(9));
        // At order 8 the two order-8 halves (256 each) are usable too.
        let want8 = (1022.0 - 512.0) / 2046.0;
        assert!((pm.fmfi(8) - want8).abs() < 1e-12);
        assert_eq!(pm.fmfi(0), 0.0);
        assert_eq!(pm.free_blocks_at_least(9), 2);
        assert_eq!(pm.free_blocks_at_least(8), 2 * 2 + 2);
        assert_eq!(pm.unmovable_pageblocks(), 2);
        // Nothing free: FMFI is 1 by definition.
        let mut full = PhysMem::new(2 * MIB, 4096, 9).unwrap();
        full.alloc(9, Mobility::Movable, 0).unwrap();
        assert_eq!(full.fmfi(9), 1.0);
        assert_eq!(full.fmfi(0), 1.0);
    }

    #[test]
    fn misuse_is_reported_not_panicking() {
        let mut pm = PhysMem::new(64 * 4096, 4096, 6).unwrap();
        let p = pm.alloc(3, Mobility::Movable, 9).unwrap();
        assert!(pm.try_free(p, 2).is_err());
        assert!(pm.try_free(p + 1, 0).is_err());
        assert!(pm.try_free(1000, 0).is_err());
        assert!(pm.try_free(40, 0).is_err()); // free frame
        pm.free(p, 4);
        pm.split(63, 0);
        pm.set_owner(63, 1);
        assert_eq!(pm.misuse_count(), 3);
        assert!(pm.take_misuse().unwrap().to_string().contains("set_owner"));
        assert!(pm.take_misuse().is_none());
        assert_eq!(pm.alloc(7, Mobility::Movable, 0), None);
        assert_eq!(pm.alloc_at(3, 2, Mobility::Movable, 0), None); // misaligned
        assert_eq!(pm.alloc_at(0, 0, Mobility::Movable, 0), None); // taken
        pm.check_invariants().unwrap();
        pm.free(p, 3);
        assert_eq!(pm.buddyinfo(), vec![0, 0, 0, 0, 0, 0, 1]);
    }

    #[test]
    fn bad_configuration_is_an_error() {
        assert!(PhysMem::new(1 << 20, 3000, 9).is_err());
        assert!(PhysMem::new(1 << 20, 4096, 31).is_err());
        assert!(PhysMem::new(0, 4096, 9).is_err());
        assert!(PhysMem::new(4097, 4096, 9).is_err());
        // 8 KiB pages: the 2 MiB pageblock is order 8.
        assert_eq!(PhysMem::new(1 << 30, 8192, 9).unwrap().pageblock_order(), 8);
        assert_eq!(PhysMem::new(1 << 20, 4096, 4).unwrap().pageblock_order(), 4);
    }

    #[test]
    fn split_keeps_owner_and_mobility() {
        let mut pm = PhysMem::new(4 * MIB, 4096, 10).unwrap();
        let p = pm.alloc(9, Mobility::Movable, 77).unwrap();
        assert_eq!(pm.owner(p + 300), Some(77));
        pm.split(p, 9);
        assert_eq!(pm.misuse_count(), 0);
        for q in [p, p + 1, p + 300, p + 511] {
            let b = pm.allocated_block(q).unwrap();
            assert_eq!(
                (b.pfn, b.order, b.owner, b.mobility),
                (q, 0, 77, Mobility::Movable)
            );
        }
        pm.set_owner(p + 5, 5);
        assert_eq!(pm.owner(p + 5), Some(5));
        assert_eq!(pm.owner(p + 6), Some(77));
        pm.check_invariants().unwrap();
        // Freeing all 512 base pages coalesces back to one free order-10 block.
        for q in p..p + 512 {
            pm.free(q, 0);
        }
        assert_eq!(pm.buddyinfo()[10], 1);
        assert_eq!(pm.owner(p), None);
        pm.check_invariants().unwrap();
    }

    #[test]
    fn release_owner_frees_only_that_owner() {
        let mut pm = PhysMem::new(4 * MIB, 4096, 10).unwrap();
        for i in 0..100u64 {
            pm.alloc((i % 3) as u32, Mobility::Movable, i % 2).unwrap();
        }
        let before = pm.free_frames();
        let freed = pm.release_owner(1);
        // Owners 1 are odd i: orders (i % 3) for odd i in 0..100.
        let want: u64 = (0..100u64)
            .filter(|i| i % 2 == 1)
            .map(|i| 1 << (i % 3))
            .sum();
        assert_eq!(freed, want);
        assert_eq!(pm.free_frames(), before + want);
        pm.check_invariants().unwrap();
    }
}
