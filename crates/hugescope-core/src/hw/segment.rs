//! Direct-segment hardware (Basu et al., ISCA'13, §4.1): three registers per
//! hardware context, BASE, LIMIT and OFFSET. A virtual address with
//! BASE <= va < LIMIT translates to va + OFFSET without any TLB or page walk;
//! the check runs in parallel with the L1 TLB lookup, so it adds no latency.
//! The OS loads the registers when it schedules the process owning the
//! segment, so each context's segment is tagged with that address space and
//! an access of any other space never hits it.

use super::space::Space;
use crate::{Error, Result};

/// Alignment of BASE, LIMIT and OFFSET. The paper's registers hold 4KB-page
/// granular values (the segment backs whole base pages; the remainder of the
/// address space is paged), so unaligned values are rejected rather than
/// silently rounded.
pub const SEGMENT_ALIGN: u64 = 4096;

/// One context's BASE / LIMIT / OFFSET. LIMIT is exclusive; BASE == LIMIT is
/// the disabled segment (the paper's "BASE = LIMIT" null segment).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirectSegment {
    pub base: u64,
    pub limit: u64,
    pub offset: u64,
}

impl DirectSegment {
    /// A validated segment: 4KB-aligned fields, BASE <= LIMIT, and LIMIT
    /// within the trace address space (a larger LIMIT could never be reached
    /// and most likely is a typo).
    pub fn new(base: u64, limit: u64, offset: u64) -> Result<DirectSegment> {
        for (name, v) in [("base", base), ("limit", limit), ("offset", offset)] {
            if v % SEGMENT_ALIGN != 0 {
                return Err(Error::input(format!("direct segment {name}={v:#x}: not 4KB aligned")));
            }
        }
        if limit < base {
            return Err(Error::input(format!("direct segment limit={limit:#x}: below base={base:#x}")));
        }
        let top = 1u64 << crate::trace::ADDR_BITS;
        if limit > top {
            return Err(Error::input(format!(
                "direct segment limit={limit:#x}: beyond the {}-bit address space",
                crate::trace::ADDR_BITS
            )));
        }
        Ok(DirectSegment { base, limit, offset })
    }

    #[inline(always)]
    pub fn is_enabled(&self) -> bool {
        self.limit > self.base
    }

    #[inline(always)]
    pub fn contains(&self, va: u64) -> bool {
        self.base <= va && va < self.limit
    }

    /// The physical address of `va` (meaningful only inside the segment).
    /// Wrapping: the hardware adder has no carry out, so an OFFSET may be a
    /// "negative" (two's complement) displacement.
    #[inline(always)]
    pub fn translate(&self, va: u64) -> u64 {
        va.wrapping_add(self.offset)
    }
}

/// One cpu's segment registers with the address space they were loaded for,
/// laid out for the hot path: `contains` is a single unsigned compare of
/// `va - base` against `len`, and a disabled segment has `len == 0`, which
/// nothing is below, so a machine without segments pays one never-taken
/// branch per access.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmentRegs {
    base: u64,
    len: u64,
    pub space: Space,
    pub seg: DirectSegment,
}

impl SegmentRegs {
    pub fn load(space: Space, seg: DirectSegment) -> SegmentRegs {
        SegmentRegs { base: seg.base, len: seg.limit - seg.base, space, seg }
    }

    /// Whether `va` is inside the loaded segment, whatever its space.
    #[inline(always)]
    pub fn covers(&self, va: u64) -> bool {
        va.wrapping_sub(self.base) < self.len
    }

    #[inline(always)]
    pub fn is_enabled(&self) -> bool {
        self.len != 0
    }
}

/// Most region classes a walk can be attributed to (the classifier's result
/// is clamped to the last one, "other").
pub const MAX_REGION_CLASSES: usize = 8;

/// Classifies the address of a walk outside the segment into a region-class
/// index (0..MAX_REGION_CLASSES). The OS side sets it from the trace's region
/// kinds (heap, stack, file, ...) so the walks the segment failed to remove
/// can be attributed; a shared function so the MMU stays cloneable per cpu.
#[derive(Clone)]
pub struct RegionClassifier(pub std::sync::Arc<dyn Fn(Space, u64) -> usize + Send + Sync>);

impl std::fmt::Debug for RegionClassifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RegionClassifier")
    }
}
