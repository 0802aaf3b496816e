//! The contiguity metric of Navarro et al. (OSDI'02 §6.5, Fig. 5; navarro.md
//! §6): how much of physical memory could back superpages right now.
//!
//! Each base frame scores `l` points if the largest fully available, naturally
//! aligned region holding it is of superpage level `l` (1..=S), 0 if it lies
//! in none; the metric is the sum over all frames divided by `S * N`, so 1 is
//! all memory free and 0 is no free superpage-sized extent anywhere.
//! "Available" is free or on the page daemon's cache list: the model frees
//! cached frames into the buddy allocator (pagedaemon.rs), so both are the
//! buddy's free blocks here. Inactive pages do not count (the metric
//! understates what the daemon can recover, as in the paper).
//!
//! Levels nest (a free 4MB region is made of free 512KB regions), so a frame's
//! score equals the number of levels at which its region is free, and the sum
//! is `Σ_l F_l` where `F_l` is the frames in fully free aligned regions of
//! level `l`. The buddy keeps free blocks fully coalesced, so for an order `k`
//! up to `max_order` a region is fully free exactly when a free block of order
//! `>= k` holds it: `F_k = Σ_{j>=k} free_blocks[j] · 2^j`. Larger orders
//! (1GB on a memory whose buddy stops at 4MB) group free top-order blocks.

use super::PhysMem;
use serde::{Deserialize, Serialize};

/// The metric at one moment.
// Deserialize: read back from the results cache (`result_cache`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Contiguity {
    /// Σ score / (S · N): 1 = all memory in free top-size extents.
    pub score: f64,
    /// Per superpage level (smallest first): free aligned extents of that size
    /// over all aligned extents of that size memory holds (comparable across
    /// ISAs, unlike the score whose S differs).
    pub free_extent_share: Vec<f64>,
}

impl PhysMem {
    /// Frames lying in fully free, naturally aligned regions of `order`.
    fn frames_in_free_regions(&self, order: u32) -> u64 {
        if order <= self.max_order {
            return (order..=self.max_order).map(|k| self.lists[k as usize].len() << k).sum();
        }
        // Regions larger than the buddy's largest block: a region is free when
        // every top-order block inside it is free. Free blocks come in
        // increasing index order, so runs of one region are adjacent.
        let top = self.max_order;
        let per_region = 1u64 << (order - top);
        let (mut full, mut current, mut count) = (0u64, u64::MAX, 0u64);
        for i in self.lists[top as usize].iter() {
            let r = i as u64 >> (order - top);
            if r != current {
                current = r;
                count = 0;
            }
            count += 1;
            if count == per_region {
                full += 1;
            }
        }
        full << order
    }

    /// The contiguity metric for superpage orders `orders` (in base pages,
    /// smallest first: `[3, 6, 9]` for Alpha's 64KB/512KB/4MB over 8KB
    /// pages, `[9]` or `[9, 18]` on x86-64). Empty `orders`: score 0. Sizes
    /// of which memory holds no whole aligned extent are left out of `S`.
    pub fn contiguity(&self, orders: &[u32]) -> Contiguity {
        let n = self.total;
        if orders.is_empty() || n == 0 {
            return Contiguity { score: 0.0, free_extent_share: Vec::new() };
        }
        let (mut sum, mut levels) = (0u64, 0u64);
        let mut shares = Vec::with_capacity(orders.len());
        for &k in orders {
            let extents = n >> k;
            if extents == 0 {
                // A size larger than memory (1GB on a small machine) can never
                // score: it is left out of S, so an all-free memory scores 1.
                shares.push(0.0);
                continue;
            }
            let f = self.frames_in_free_regions(k);
            sum += f;
            levels += 1;
            shares.push((f >> k) as f64 / extents as f64);
        }
        let score = if levels == 0 { 0.0 } else { sum as f64 / (levels * n) as f64 };
        Contiguity { score, free_extent_share: shares }
    }
}
