//! Which 2MB regions of a process have every base page touched: a hint for
//! the per-access bookkeeping of huge pages.
//!
//! An access inside a huge page never faults, so the kernel records the
//! first touch of each of its base pages on the access itself (the RSS a
//! base-page run would show: Ingens §3's bloat, `Kernel::after_access`).
//! Once a region's every page is touched there is nothing left to record,
//! but finding that out costs the VMA lookup and the region's counter: a
//! chain of dependent loads on every access of a promoted workload (with
//! the check removed, GUPS 1 GiB under linux ran 84 M accesses/s against
//! 68 on the project's 2-cpu test VM). This remembers
//! such regions, direct-mapped by region number, so the check is one load.
//!
//! A hint only: a region not found takes the full check, which gives the
//! same answer. It is never wrong as long as every place that lowers a
//! region's touched count forgets the region (`forget`): freeing, KSM
//! merging and splitting with reclaim do.

/// Slots, a power of two: 2 GiB of full regions before two share a slot.
const SLOTS: usize = 1024;

#[derive(Clone, Debug, Default)]
pub struct FullRegions {
    /// `region + 1` of the region in each slot (0: none); empty until the
    /// first region fills, so a process that never has one costs nothing.
    tags: Vec<u64>,
}

impl FullRegions {
    /// Whether region `region` (address >> region shift) is known full.
    #[inline(always)]
    pub fn holds(&self, region: u64) -> bool {
        self.tags.get(region as usize % SLOTS) == Some(&(region + 1))
    }

    /// Remember region `region` as full (every base page touched).
    pub fn insert(&mut self, region: u64) {
        if self.tags.is_empty() {
            self.tags = vec![0; SLOTS];
        }
        self.tags[region as usize % SLOTS] = region + 1;
    }

    /// The regions held, for invariant checks.
    pub fn regions(&self) -> impl Iterator<Item = u64> + '_ {
        self.tags.iter().filter(|&&t| t != 0).map(|&t| t - 1)
    }

    /// Region `region`'s touched count went down: it is no longer full.
    #[inline]
    pub fn forget(&mut self, region: u64) {
        if let Some(t) = self.tags.get_mut(region as usize % SLOTS) {
            if *t == region + 1 {
                *t = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_what_was_inserted_until_forgotten_or_displaced() {
        let mut f = FullRegions::default();
        assert!(!f.holds(0) && !f.holds(7), "empty holds nothing");
        f.insert(7);
        assert!(f.holds(7));
        assert!(!f.holds(7 + SLOTS as u64), "same slot, other region");
        f.forget(7 + SLOTS as u64);
        assert!(f.holds(7), "forgetting another region of the slot keeps it");
        f.forget(7);
        assert!(!f.holds(7));
        f.insert(7);
        f.insert(7 + SLOTS as u64);
        assert!(!f.holds(7) && f.holds(7 + SLOTS as u64), "a newer region displaces the older");
        f.insert(0);
        assert!(f.holds(0), "region 0 is a region (tags are region + 1)");
    }
}
