//! Fixed virtual-address layout of a workload's regions.
//!
//! Every workload places its data structures from one constant base, each region
//! starting on a 2MB boundary, in a fixed order. The same layout is used by the
//! trace (the addresses in the records) and by the native run (the `mmap`
//! addresses), so a promotion plan made on one applies to the other.

use hugescope_core::trace::{Region, RegionKind};
use hugescope_core::{Error, Result};

/// Base of the first region: 16 TiB. On x86-64 Linux with 4-level paging the
/// executable and brk heap sit near 0x5555_5555_0000 (PIE) or below 4 GiB
/// (non-PIE), and mmap/stack allocations grow down from just below 128 TiB; the
/// range from 16 TiB up to ~85 TiB is normally untouched, leaving tens of TiB for
/// a workload's footprint.
pub const BASE: u64 = 0x1000_0000_0000;
/// Regions start on 2MB boundaries so each one can be backed by huge pages from
/// its first byte.
pub const ALIGN: u64 = 2 << 20;
/// Region lengths are rounded up to whole base pages.
pub const PAGE: u64 = 4096;
/// Highest address a layout may reach (stay far from the mmap area and stack).
pub const LIMIT: u64 = 0x5000_0000_0000;

#[derive(Clone, Debug, Default)]
pub struct Layout {
    pub regions: Vec<Region>,
}

impl Layout {
    pub fn new() -> Self {
        Layout::default()
    }

    /// Append an anonymous region of at least `bytes` bytes on the next 2MB
    /// boundary (the kind every workload's data has unless it says otherwise).
    pub fn add(&mut self, name: impl Into<String>, bytes: u64) -> Result<()> {
        self.add_kind(name, bytes, RegionKind::Anon).map(|_| ())
    }

    /// Append a region of the given kind (a thread stack, BSS, a file mapping,
    /// code) on the next 2MB boundary: direct segments cover only anonymous
    /// memory, so a workload that models the rest of a process tags it
    /// (Basu et al. ISCA'13 §3.2). Anonymous regions serialize as before.
    pub fn add_kind(&mut self, name: impl Into<String>, bytes: u64, kind: RegionKind) -> Result<&mut Region> {
        self.add_aligned(name, bytes, kind, ALIGN, 0)
    }

    /// Append a region starting `offset` bytes (a multiple of 2MB, below
    /// `align`) past a multiple of `align` (a power of two, at least 2MB), after
    /// the last region: NPB CG puts each large array in its own 1GB page so
    /// that the 4-entry 1GB TLB must hold more arrays than it has entries. The
    /// offset staggers arrays over the 2MB TLB's sets, as arrays of arbitrary
    /// sizes are in a real run (all at 1GB boundaries, they would share one set).
    pub fn add_aligned(&mut self, name: impl Into<String>, bytes: u64, kind: RegionKind, align: u64, offset: u64) -> Result<&mut Region> {
        let name = name.into();
        let align = align.max(ALIGN).next_power_of_two();
        let offset = offset / ALIGN * ALIGN % align;
        let after = self.regions.last().map_or(BASE, |r| r.end());
        // The first multiple of `align` at or after `after`, plus `offset`:
        // a region never shares an `align` unit with the one before it.
        let base = after.div_ceil(align).checked_mul(align).and_then(|b| b.checked_add(offset));
        let len = bytes.max(1).div_ceil(PAGE).checked_mul(PAGE);
        let end = len.zip(base).and_then(|(l, b)| b.checked_add(l));
        match (base, len, end) {
            (Some(base), Some(len), Some(end)) if end <= LIMIT => {
                self.regions.push(Region::new(name, base, len).with_kind(kind));
                Ok(self.regions.last_mut().expect("just pushed"))
            }
            _ => Err(Error::input(format!(
                "region '{name}' of {bytes} bytes does not fit the address range reserved for workloads"
            ))),
        }
    }

    /// Region by name. Layout construction and use live in the same module, so a
    /// missing name is a programming error reported as an error, not a panic.
    pub fn get(&self, name: &str) -> Result<&Region> {
        self.regions
            .iter()
            .find(|r| r.name == name)
            .ok_or_else(|| Error::input(format!("internal layout error: no region '{name}'")))
    }

    pub fn footprint(&self) -> u64 {
        self.regions.iter().map(|r| r.len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_are_2mb_aligned_and_disjoint() {
        let mut l = Layout::new();
        l.add("a", 1).unwrap();
        l.add("b", 3 << 20).unwrap();
        l.add("c", 4096).unwrap();
        assert_eq!(l.regions[0].base, BASE);
        assert_eq!(l.regions[0].len, 4096);
        assert_eq!(l.regions[1].base, BASE + ALIGN);
        assert_eq!(l.regions[1].len, 3 << 20);
        assert_eq!(l.regions[2].base, BASE + 3 * ALIGN);
        assert_eq!(l.footprint(), 4096 + (3 << 20) + 4096);
        assert!(l.get("d").is_err());
        assert!(l.add("huge", u64::MAX / 2).is_err());
    }

    #[test]
    fn kinds_and_alignment() {
        let mut l = Layout::new();
        l.add("a", 4096).unwrap();
        l.add_kind("s", 8 << 20, RegionKind::Stack).unwrap();
        l.add_aligned("g", 1, RegionKind::Anon, 1 << 30, 0).unwrap();
        l.add_aligned("h", 1, RegionKind::Anon, 1 << 30, 0).unwrap().segment_opt_out = true;
        l.add_aligned("i", 1, RegionKind::Anon, 1 << 30, 3 * ALIGN).unwrap();
        assert_eq!(l.regions[0].kind, RegionKind::Anon);
        assert_eq!(l.regions[1].kind, RegionKind::Stack);
        assert_eq!(l.regions[1].base, BASE + ALIGN);
        assert_eq!(l.regions[2].base % (1 << 30), 0);
        assert_eq!(l.regions[3].base, l.regions[2].base + (1 << 30));
        assert!(l.regions[3].segment_opt_out);
        assert_eq!(l.regions[4].base, l.regions[3].base + (1 << 30) + 3 * ALIGN);
        // An anonymous region serializes exactly as before kinds existed.
        let j = serde_json::to_string(&l.regions[0]).unwrap();
        assert!(!j.contains("kind") && !j.contains("opt_out"), "{j}");
    }
}
