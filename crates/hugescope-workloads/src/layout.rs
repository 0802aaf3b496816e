//! Fixed virtual-address layout of a workload's regions.
//!
//! Every workload places its data structures from one constant base, each region
//! starting on a 2MB boundary, in a fixed order. The same layout is used by the
//! trace (the addresses in the records) and by the native run (the `mmap`
//! addresses), so a promotion plan made on one applies to the other.

use hugescope_core::trace::Region;
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

    /// Append a region of at least `bytes` bytes on the next 2MB boundary.
    pub fn add(&mut self, name: impl Into<String>, bytes: u64) -> Result<()> {
        let name = name.into();
        let base = match self.regions.last() {
            None => BASE,
            Some(r) => r.end().div_ceil(ALIGN) * ALIGN,
        };
        let len = bytes.max(1).div_ceil(PAGE).checked_mul(PAGE);
        let end = len.and_then(|l| base.checked_add(l));
        match (len, end) {
            (Some(len), Some(end)) if end <= LIMIT => {
                self.regions.push(Region::new(name, base, len));
                Ok(())
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
}
