//! Static page-size maps: the fixed rule a run maps memory with when no OS
//! model decides (all base pages, all of one huge size, or a plan file naming
//! the ranges to back with huge pages). The OS model replaces this with real
//! page-table state; both answer the same question on a TLB miss.

use crate::hw::Geometry;
use crate::plan::Plan;
use crate::units::{page_label, parse_size};
use crate::{Error, Result};
use std::path::Path;

#[derive(Clone, Debug)]
pub enum StaticMap {
    /// Every address is mapped with page-size index `.0`.
    Uniform(usize),
    /// Listed ranges use their page size; everything else uses base pages.
    /// Sorted by (pid, start), non-overlapping.
    Ranges(Vec<MappedRange>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MappedRange {
    pub pid: u16,
    pub start: u64,
    pub end: u64,
    pub size: usize,
}

impl StaticMap {
    /// Parse `--pages`: a page-size label ("4k", "2m", "1g") or a plan file path.
    pub fn from_spec(spec: &str, geo: &Geometry) -> Result<StaticMap> {
        StaticMap::from_spec_for(spec, geo, &[])
    }

    /// `from_spec` for a trace with `regions`: a plan's entries by
    /// allocation site are resolved against them (`Plan::resolve_sites`).
    pub fn from_spec_for(spec: &str, geo: &Geometry, regions: &[crate::trace::Region]) -> Result<StaticMap> {
        if let Ok(bytes) = parse_size(spec) {
            if !Path::new(spec).exists() {
                return geo.size_index_of(bytes).map(StaticMap::Uniform).ok_or_else(|| {
                    Error::input(format!(
                        "page size '{spec}' is not supported by this machine (sizes: {})",
                        geo.sizes.iter().map(|&b| page_label(b)).collect::<Vec<_>>().join(", ")
                    ))
                });
            }
        }
        let path = Path::new(spec);
        if !path.exists() {
            return Err(Error::input(format!(
                "--pages '{spec}' is neither a page size (4k, 2m, 1g) nor an existing plan file"
            )));
        }
        let plan = Plan::load(path)?.resolve_sites(regions);
        plan.and_then(|p| StaticMap::from_plan(&p, geo)).map_err(|e| match e {
            Error::Input(m) => Error::format(path, 0, m),
            o => o,
        })
    }

    /// A plan used as a static map: every entry applies from the start.
    pub fn from_plan(plan: &Plan, geo: &Geometry) -> Result<StaticMap> {
        let mut ranges = Vec::with_capacity(plan.entries.len());
        for (i, e) in plan.entries.iter().enumerate() {
            let size = geo.size_index_of(e.page_size).ok_or_else(|| {
                Error::input(format!("plan entry {i}: page size {} is not supported by this machine", page_label(e.page_size)))
            })?;
            // A static map has no notion of time: every entry applies from the
            // start, whatever its `when` (the `static` policy honours `when`).
            ranges.push(MappedRange { pid: e.pid, start: e.start, end: e.end(), size });
        }
        ranges.sort_by_key(|r| (r.pid, r.start));
        for w in ranges.windows(2) {
            if w[0].pid == w[1].pid && w[1].start < w[0].end {
                return Err(Error::input(format!("plan ranges at {:#x} and {:#x} overlap", w[0].start, w[1].start)));
            }
        }
        Ok(StaticMap::Ranges(ranges))
    }

    /// Page-size index of the leaf mapping `addr` in process `pid`.
    #[inline]
    pub fn size_at(&self, pid: u16, addr: u64) -> usize {
        match self {
            StaticMap::Uniform(s) => *s,
            StaticMap::Ranges(r) => {
                // Binary search for the last range starting at or before (pid, addr).
                let i = r.partition_point(|m| (m.pid, m.start) <= (pid, addr));
                if i > 0 {
                    let m = &r[i - 1];
                    if m.pid == pid && addr < m.end {
                        return m.size;
                    }
                }
                0
            }
        }
    }

    pub fn describe(&self, geo: &Geometry) -> String {
        match self {
            StaticMap::Uniform(s) => format!("all {}", page_label(geo.sizes[*s])),
            StaticMap::Ranges(r) => format!("plan: {} ranges, {} huge", r.len(), crate::units::fmt_size(r.iter().map(|m| m.end - m.start).sum())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MachineConfig;
    use crate::plan::{PlanEntry, When};

    #[test]
    fn ranges_lookup() {
        let g = Geometry::new(&MachineConfig::preset("haswell-pcc").unwrap()).unwrap();
        let e = |pid, start, length| PlanEntry { start, length, page_size: 2 << 20, when: When::Start, pid, note: None };
        let p = Plan::new(vec![e(0, 0x40_0000, 0x40_0000), e(1, 0, 0x20_0000)]);
        let m = StaticMap::from_plan(&p, &g).unwrap();
        assert_eq!(m.size_at(0, 0x3f_ffff), 0);
        assert_eq!(m.size_at(0, 0x40_0000), 1);
        assert_eq!(m.size_at(0, 0x7f_ffff), 1);
        assert_eq!(m.size_at(0, 0x80_0000), 0);
        assert_eq!(m.size_at(1, 0x1000), 1);
        assert_eq!(m.size_at(2, 0x1000), 0);
        assert!(matches!(StaticMap::from_spec("2m", &g).unwrap(), StaticMap::Uniform(1)));
        assert!(StaticMap::from_spec("64k", &g).is_err());
        assert!(StaticMap::from_spec("/nonexistent/plan.json", &g).is_err());
    }
}
