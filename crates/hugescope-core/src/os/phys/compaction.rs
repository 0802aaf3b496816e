//! Compaction: migrate movable blocks out of an aligned block so it becomes
//! free (Linux `mm/compaction.c`, Ingens §4.4; reference notes
//! linux-thp-and-hawkeye.md A.7 and ingens.md section 2.7).
//!
//! Scheme (a documented departure from Linux's two scanners):
//! 1. **Candidates** (Linux's migration scanner) are the aligned blocks of the
//!    requested order that hold no unmovable frame (an unmovable page blocks
//!    its whole 2 MB pageblock for ever, PCC §5.1.1) and no allocated block of
//!    the requested order or more. They are emptied **fewest allocated frames
//!    first**, ties to the lowest address: the Ingens recommendation
//!    (ingens.md 2.7 "Rec. algorithm"), which creates a free block with the
//!    fewest migrations. A candidate is started only when every block in it
//!    may move and the remaining cap pays for all of it, so compaction never
//!    moves pages out of a block it then cannot free for lack of budget.
//! 2. **Destinations** (Linux's free scanner) are pageblocks taken in the order
//!    pinned first (pageblocks with an unmovable frame can never be freed, so
//!    filling their holes costs nothing: Ingens' "already broken blocks"),
//!    then most allocated first, then highest address first (Linux's free
//!    scanner runs down from the top of the node). Inside a pageblock the
//!    smallest free block that fits is used. A destination is never a free
//!    block of the requested order or larger (that would destroy what
//!    compaction is building) nor inside the candidate being emptied.
//! 3. **The scanners meet** as in Linux: within one call a pageblock that
//!    received pages is not emptied, and one that gave pages receives none, so
//!    no page moves twice.
//! 4. It stops when the goal holds (one free block of the order for
//!    `compact`), or when the candidates or the cap (in base pages migrated,
//!    like Ingens' 100 MB = 25,600 pages per round) run out.

use super::buddy::{mobility_of, ALLOC, HEAD, ORDER_MASK, UNMOV};
use super::{Pfn, PhysMem};
use std::ops::Range;

/// One block moved by compaction. The owner tag moved with it; the kernel
/// rewrites the mapping of `owner` from `from` to `to` and shoots down TLBs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Migration {
    pub from: Pfn,
    pub to: Pfn,
    pub order: u32,
    pub owner: u64,
}

/// What one compaction call did. The kernel charges cost from
/// `migrated_pages` (base pages copied) and `scanned_blocks`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CompactResult {
    /// The goal holds at the end (for `compact`: a free block of the order exists).
    pub success: bool,
    /// Base pages migrated (a moved order-k block counts 2^k).
    pub migrated_pages: u64,
    /// Candidate blocks of the requested order that compaction examined
    /// (walked to check movability or emptied).
    pub scanned_blocks: u64,
}

impl PhysMem {
    /// Compact until one free block of `order` exists, migrating at most
    /// `max_migrations` base pages. Every moved block is reported to `on_move`
    /// after the move (so `owner(to)` is already the moved owner).
    pub fn compact(
        &mut self,
        order: u32,
        max_migrations: u64,
        on_move: &mut dyn FnMut(Migration),
    ) -> CompactResult {
        self.compact_until(
            order,
            max_migrations,
            &mut |pm: &PhysMem| pm.free_blocks_at_least(order) >= 1,
            &mut |_, _, _| true,
            on_move,
        )
    }

    /// Compact inside `range` only, until it holds a free block of `order`:
    /// candidates and destinations are both in it, so no page enters or
    /// leaves it. A memory tier's direct compaction (`os/tier.rs`: Linux
    /// compacts the target node of a THP migration, and a tier is a frame
    /// range of one node). `range` is in whole pageblocks.
    pub fn compact_in(
        &mut self,
        order: u32,
        range: Range<Pfn>,
        max_migrations: u64,
        on_move: &mut dyn FnMut(Migration),
    ) -> CompactResult {
        let (lo, hi) = (range.start, range.end);
        self.compact_range(
            order,
            range,
            max_migrations,
            &mut |pm: &PhysMem| pm.find_free_in(order, lo, hi).is_some(),
            &mut |_, _, _| true,
            on_move,
        )
    }

    /// General form: empty candidate blocks of `order` until `done(self)`
    /// holds (e.g. Ingens' "FMFI ≤ 0.8", §4.4), migrating at most
    /// `max_migrations` base pages. `can_move(pfn, order, owner)` may veto a
    /// block (Ingens never moves frequently accessed pages, §4.4); a candidate
    /// holding a vetoed block is skipped whole.
    pub fn compact_until(
        &mut self,
        order: u32,
        max_migrations: u64,
        done: &mut dyn FnMut(&PhysMem) -> bool,
        can_move: &mut dyn FnMut(Pfn, u32, u64) -> bool,
        on_move: &mut dyn FnMut(Migration),
    ) -> CompactResult {
        let all = 0..self.total;
        self.compact_range(order, all, max_migrations, done, can_move, on_move)
    }

    /// `compact_until` with candidates and destinations inside `range`.
    fn compact_range(
        &mut self,
        order: u32,
        range: Range<Pfn>,
        max_migrations: u64,
        done: &mut dyn FnMut(&PhysMem) -> bool,
        can_move: &mut dyn FnMut(Pfn, u32, u64) -> bool,
        on_move: &mut dyn FnMut(Migration),
    ) -> CompactResult {
        let mut res = CompactResult::default();
        if done(self) {
            res.success = true;
            return res;
        }
        // Order 0 needs no contiguity; beyond max_order nothing can help; and
        // an empty candidate needs at least 2^order free frames in total.
        if order == 0 || order > self.max_order || self.free < 1 << order {
            return res;
        }
        let pb = |p: Pfn| (p >> self.pb_order) as usize;
        let pbs_in = pb(range.start)..pb(range.end.min(self.total) + (1 << self.pb_order) - 1);
        let mut dests = self.destinations(order);
        dests.retain(|i| pbs_in.contains(i));
        let mut di = 0usize;
        let mut role = vec![0u8; self.pb_used.len()];
        let mut cands = self.candidates(order);
        cands.retain(|&(_, base)| base >= range.start && base + (1 << order) <= range.end);
        for (_, base) in cands {
            if done(self) {
                break;
            }
            let end = base + (1u64 << order);
            let pbs = (base >> self.pb_order) as usize..=((end - 1) >> self.pb_order) as usize;
            if role[pbs.clone()].contains(&DEST) {
                continue;
            }
            // Re-read: earlier moves may have landed here.
            let Some(used) = self.movable_used(base, end, order) else {
                continue;
            };
            if used == 0 || res.migrated_pages + used > max_migrations {
                continue;
            }
            res.scanned_blocks += 1;
            let mut vetoed = false;
            self.for_each_allocated(base, end, &mut |pm, p, o| {
                vetoed |= !can_move(p, o, pm.owners.get(p, o));
            });
            if vetoed {
                continue;
            }
            role[pbs].fill(SOURCE);
            let mut p = base;
            while p < end {
                let s = self.state[p as usize];
                let o = (s & ORDER_MASK) as u32;
                if s & ALLOC == 0 {
                    p += 1 << o;
                    continue;
                }
                let owner = self.owners.get(p, o);
                let Some(to) = self.relocate(p, o, s, base..end, order, &dests, &mut di, &role)
                else {
                    // No free block outside the candidate fits this one; the
                    // candidate stays partly emptied and the next is tried.
                    break;
                };
                role[(to >> self.pb_order) as usize] = DEST;
                res.migrated_pages += 1 << o;
                on_move(Migration {
                    from: p,
                    to,
                    order: o,
                    owner,
                });
                // The freed block may have merged with free blocks after it.
                let (h, ho) = self.block_of(p).expect("frame lies in a block");
                p = h + (1u64 << ho);
            }
        }
        res.success = done(self);
        res
    }

    /// Candidate blocks `(allocated frames, base)` of `order`, sorted.
    fn candidates(&self, order: u32) -> Vec<(u64, Pfn)> {
        let mut out = Vec::new();
        let n = self.total >> order;
        if order >= self.pb_order {
            // Pageblock counters answer without walking frames.
            let per = 1usize << (order - self.pb_order);
            for c in 0..n as usize {
                let pbs = c * per..(c + 1) * per;
                if self.pb_unmovable[pbs.clone()].iter().any(|&u| u > 0) {
                    continue;
                }
                let used: u64 = self.pb_used[pbs].iter().map(|&u| u as u64).sum();
                if used > 0 && used < 1 << order {
                    out.push((used, (c as u64) << order));
                }
            }
        } else {
            // Sub-pageblock orders: walk the movable pageblocks.
            for pb in 0..self.pageblocks() {
                if self.pb_unmovable[pb as usize] > 0 || self.pb_used[pb as usize] == 0 {
                    continue;
                }
                let pb_base = pb << self.pb_order;
                for c in 0..1u64 << (self.pb_order - order) {
                    let base = pb_base + (c << order);
                    if let Some(used) = self.movable_used(base, base + (1 << order), order) {
                        if used > 0 {
                            out.push((used, base));
                        }
                    }
                }
            }
        }
        out.sort_unstable();
        out
    }

    /// Allocated frames in `[base, end)` if the range can be emptied: no
    /// unmovable block and no allocated block of `order` or more.
    fn movable_used(&self, base: Pfn, end: Pfn, order: u32) -> Option<u64> {
        let pb_lo = (base >> self.pb_order) as usize;
        let pb_hi = ((end - 1) >> self.pb_order) as usize;
        if self.pb_unmovable[pb_lo..=pb_hi].iter().any(|&u| u > 0) {
            return None;
        }
        if order >= self.pb_order {
            let used: u64 = self.pb_used[pb_lo..=pb_hi].iter().map(|&u| u as u64).sum();
            if used == end - base {
                // Possibly one block of the whole order; a walk settles it.
                let s = self.state[base as usize];
                if s & ALLOC != 0 && (s & ORDER_MASK) as u32 >= order {
                    return None;
                }
            }
            return Some(used);
        }
        // Inside one pageblock: the block holding `base` may be larger than
        // the candidate (then it is free or a big allocated block).
        let (h, ho) = self.block_of(base)?;
        if ho >= order {
            let s = self.state[h as usize];
            return if s & ALLOC != 0 { None } else { Some(0) };
        }
        let mut used = 0;
        let mut p = base;
        while p < end {
            let s = self.state[p as usize];
            debug_assert!(s & HEAD != 0);
            let o = (s & ORDER_MASK) as u32;
            if s & ALLOC != 0 {
                debug_assert!(s & UNMOV == 0);
                used += 1u64 << o;
            }
            p += 1 << o;
        }
        Some(used)
    }

    fn for_each_allocated(&self, base: Pfn, end: Pfn, f: &mut dyn FnMut(&PhysMem, Pfn, u32)) {
        let mut p = base;
        while p < end {
            let s = self.state[p as usize];
            let o = (s & ORDER_MASK) as u32;
            if s & ALLOC != 0 {
                f(self, p, o);
            }
            p += 1 << o;
        }
    }

    /// Destination pageblocks in preference order (see the module docs):
    /// those with free frames that can hold blocks below `limit`.
    fn destinations(&self, limit: u32) -> Vec<usize> {
        let full = 1u16 << self.pb_order;
        // An entirely free pageblock only offers blocks of pageblock order or
        // more, useful only when compacting for a larger order.
        let want_free = limit > self.pb_order;
        let mut d: Vec<usize> = (0..self.pb_used.len())
            .filter(|&i| self.pb_used[i] < full && (want_free || self.pb_used[i] > 0))
            .collect();
        d.sort_unstable_by_key(|&i| {
            (
                std::cmp::Reverse(self.pb_unmovable[i] > 0),
                std::cmp::Reverse(self.pb_used[i]),
                std::cmp::Reverse(i),
            )
        });
        d
    }

    /// Move the allocated block `p` (order `o`, state `s`) out of `avoid` into
    /// a free block of order below `limit`; returns the new frame.
    #[allow(clippy::too_many_arguments)]
    fn relocate(
        &mut self,
        p: Pfn,
        o: u32,
        s: u8,
        avoid: std::ops::Range<Pfn>,
        limit: u32,
        dests: &[usize],
        di: &mut usize,
        role: &[u8],
    ) -> Option<Pfn> {
        let full = 1u16 << self.pb_order;
        let mut found = None;
        for (i, &pb) in dests.iter().enumerate().skip(*di) {
            // Sources never refill and only sources lose pages, so a full or
            // source pageblock at the head of the list is done for this call.
            if role[pb] == SOURCE || self.pb_used[pb] == full {
                if i == *di {
                    *di += 1;
                }
                continue;
            }
            if let Some(hit) = self.fit_in_pageblock(pb, o, limit, &avoid) {
                found = Some(hit);
                break;
            }
        }
        let (dest, k) = found?;
        // Use the top 2^o frames of the destination (free scanner from the
        // top), returning the lower halves to the free lists.
        self.take_free(dest, k);
        let (mut h, mut k) = (dest, k);
        while k > o {
            k -= 1;
            self.push_free(h, k);
            h += 1u64 << k;
        }
        let owner = self.owners.get(p, o);
        self.mark_alloc(h, o, mobility_of(s), owner);
        self.release(p, o, s);
        Some(h)
    }

    /// Smallest free block in pageblock `pb` of order in `o..limit` outside
    /// `avoid` (highest address among equals).
    fn fit_in_pageblock(
        &self,
        pb: usize,
        o: u32,
        limit: u32,
        avoid: &std::ops::Range<Pfn>,
    ) -> Option<(Pfn, u32)> {
        let base = (pb as u64) << self.pb_order;
        let end = (base + (1u64 << self.pb_order)).min(self.total);
        let fits = |h: Pfn, k: u32| {
            k >= o && k < limit && (h + (1u64 << k) <= avoid.start || h >= avoid.end)
        };
        let (h, k) = self.block_of(base)?;
        if k >= self.pb_order {
            // One block covers the pageblock (a free or allocated large block).
            let free = self.state[h as usize] & ALLOC == 0;
            return (free && fits(h, k)).then_some((h, k));
        }
        let mut best: Option<(Pfn, u32)> = None;
        let mut q = base;
        while q < end {
            let st = self.state[q as usize];
            let k = (st & ORDER_MASK) as u32;
            if st & ALLOC == 0 && fits(q, k) && best.is_none_or(|(_, bk)| k <= bk) {
                best = Some((q, k));
            }
            q += 1 << k;
        }
        best
    }
}

/// Roles of a pageblock within one compaction call.
const SOURCE: u8 = 1;
const DEST: u8 = 2;
