//! A stream of wired kernel allocations (Navarro et al. §5.2; navarro.md §5):
//! page tables, buffers and other kernel memory that can never be paged out
//! or moved. Unclustered, one wired frame is enough to make its whole 4MB
//! extent unrecoverable for a superpage; the paper's fix allocates wired pages
//! from contiguous pools.
//!
//! `scattered` takes each wired frame from a pseudo-random free frame, the
//! way a kernel's LIFO free lists hand out whatever was freed last after
//! memory has churned (the model's buddy allocator is lowest-address-first,
//! which would cluster them by accident). `pooled` allocates a pool of the
//! largest superpage size up to 4MB at once and hands its frames out one by one, so the
//! wired frames share as few extents as possible. Both are unmovable
//! (`Mobility::Unmovable`): compaction cannot undo them either.
//!
//! The stream is driven by the kernel: `rate` wired frames per base-page
//! fault of the program (accumulated, so 0.01 is one per 100 faults), until
//! `share` of memory is wired.

use super::{Mobility, PhysMem, Pfn};
use serde::Serialize;

/// Owner tag of wired frames: no process maps them.
pub const WIRED_OWNER: u64 = u64::MAX - 1;
/// Random probes for a free frame before a scattered allocation takes the
/// lowest free frame instead (memory nearly full).
const SCATTER_PROBES: u32 = 64;

/// Where wired frames come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WiredMode {
    None,
    Scattered,
    Pooled,
}

/// The running stream: its pools and what it holds.
#[derive(Clone, Debug)]
pub struct WiredStream {
    mode: WiredMode,
    rate: f64,
    cap_frames: u64,
    pool_order: u32,
    /// Fractional frames owed (the rate accumulates per fault).
    owed: f64,
    /// The pool being handed out: its first frame and the frames given so far.
    pool: Option<(Pfn, u64)>,
    /// Frames wired so far (handed out to the kernel).
    wired: u64,
    /// Frames the stream holds in the allocator: wired frames plus the
    /// unused rest of the current pool (reserved for wired use).
    held: u64,
    rng: u64,
}

impl WiredStream {
    /// `rate` frames per fault up to `share` of memory, pools of `2^pool_order`
    /// frames (the largest superpage, capped at the buddy's largest block).
    pub fn new(mode: WiredMode, rate: f64, share: f64, pool_order: u32, phys: &PhysMem, seed: u64) -> WiredStream {
        WiredStream {
            mode,
            rate,
            cap_frames: (share * phys.total_frames() as f64) as u64,
            pool_order: pool_order.min(phys.max_order()),
            owed: 0.0,
            pool: None,
            wired: 0,
            held: 0,
            // Any non-zero state; a fixed mix of the seed keeps runs repeatable.
            rng: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
        }
    }

    /// Frames wired so far.
    pub fn wired_frames(&self) -> u64 {
        self.wired
    }

    /// Frames the stream holds allocated (wired plus the rest of the open pool):
    /// the term the kernel's conservation check adds.
    pub fn held_frames(&self) -> u64 {
        self.held
    }

    /// One program fault happened: wire the frames the rate owes.
    pub fn on_fault(&mut self, phys: &mut PhysMem) {
        if self.mode == WiredMode::None {
            return;
        }
        self.owed += self.rate;
        while self.owed >= 1.0 && self.wired < self.cap_frames {
            self.owed -= 1.0;
            if !self.wire_one(phys) {
                // Memory is full: the request is dropped, not retried forever.
                self.owed = 0.0;
                return;
            }
        }
    }

    /// Wire the frame `pfn` if it is free (a hand-placed wired page: tests
    /// and experiments that build a memory layout). False if it is not free.
    pub fn wire_at(&mut self, phys: &mut PhysMem, pfn: Pfn) -> bool {
        let ok = phys.alloc_at(pfn, 0, Mobility::Unmovable, WIRED_OWNER).is_some();
        if ok {
            self.held += 1;
            self.wired += 1;
        }
        ok
    }

    fn next_random(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn wire_one(&mut self, phys: &mut PhysMem) -> bool {
        if self.mode == WiredMode::Pooled {
            if let Some((base, used)) = self.pool {
                if used < 1 << self.pool_order {
                    self.pool = Some((base, used + 1));
                    self.wired += 1;
                    return true;
                }
            }
            if let Some(base) = phys.alloc(self.pool_order, Mobility::Unmovable, WIRED_OWNER) {
                self.pool = Some((base, 1));
                self.held += 1 << self.pool_order;
                self.wired += 1;
                return true;
            }
            // No free pool-sized block left: fall back to a single frame, as
            // a pool allocator does when its contiguous reserve runs out.
        }
        let total = phys.total_frames();
        let mut got = None;
        for _ in 0..SCATTER_PROBES {
            let p = self.next_random() % total;
            if let Some(f) = phys.alloc_at(p, 0, Mobility::Unmovable, WIRED_OWNER) {
                got = Some(f);
                break;
            }
        }
        let got = got.or_else(|| phys.alloc(0, Mobility::Unmovable, WIRED_OWNER));
        if got.is_some() {
            self.held += 1;
            self.wired += 1;
        }
        got.is_some()
    }
}
