//! The shape of a workload under the direct-segments paper's static page
//! configurations (Basu et al. ISCA'13 Tables 4/5): walks per 1000 accesses
//! with all-4KB, all-2MB and all-1GB pages, and where the 4KB walks land by
//! region kind. One trace pass feeds the three simulators directly (no file).
//!
//! "Outside" walks are those to regions a direct segment would not cover:
//! stacks, BSS/data, files, code and opt-out anonymous memory (reference §8.3:
//! out-of-segment walks by VMA class). f_DS = 1 - outside share.

use std::collections::BTreeMap;

use serde::Serialize;

use hugescope_core::config::MachineConfig;
use hugescope_core::hw::{Geometry, Leaf, PageTable};
use hugescope_core::pagemap::StaticMap;
use hugescope_core::sim::Simulator;
use hugescope_core::trace::{Access, AccessSink, Region};
use hugescope_core::Result;

use crate::registry::{header, trace, Params};

/// Walks of one workload run under each static page size.
#[derive(Clone, Debug, Serialize)]
pub struct Shape {
    pub accesses: u64,
    /// Page-size label ("4k", "2m", "1g") -> walks.
    pub walks: BTreeMap<String, u64>,
    /// Region kind ("anon", "stack", ...; "anon-opt-out" for opted-out
    /// anonymous memory) -> walks in the 4KB run.
    pub walks_4k_by_kind: BTreeMap<String, u64>,
    /// Share of the 4KB walks outside the would-be primary region (1 - f_DS).
    pub outside_share: f64,
}

impl Shape {
    pub fn per_1k(&self, pages: &str) -> f64 {
        self.walks.get(pages).copied().unwrap_or(0) as f64 * 1000.0 / self.accesses.max(1) as f64
    }
}

fn kind_label(r: &Region) -> String {
    if r.kind.is_primary_candidate() && r.segment_opt_out {
        format!("{}-opt-out", r.kind.name())
    } else {
        r.kind.name().to_string()
    }
}

/// All-4KB page table that charges each walk to the region it lands in.
struct ByRegion {
    regions: Vec<Region>,
    walks: Vec<u64>,
    unmapped: u64,
}

impl PageTable for ByRegion {
    #[inline]
    fn leaf(&mut self, a: &Access) -> Leaf {
        let i = self.regions.partition_point(|r| r.base <= a.addr);
        if i > 0 && a.addr < self.regions[i - 1].end() {
            self.walks[i - 1] += 1;
        } else {
            self.unmapped += 1;
        }
        Leaf::sized(0)
    }
}

struct Tee {
    base: Simulator<ByRegion>,
    huge: Vec<(String, Simulator<StaticMap>)>,
}

impl AccessSink for Tee {
    #[inline]
    fn access(&mut self, a: Access) {
        self.base.step(a);
        for (_, s) in &mut self.huge {
            s.step(a);
        }
    }
}

/// Trace workload `name` with `params` straight into 4KB, 2MB and 1GB
/// simulations of `machine` (page sizes the machine lacks are left out).
pub fn measure(name: &str, params: &Params, machine: &MachineConfig) -> Result<Shape> {
    let h = header(name, params)?;
    let cpus = h.cpus.max(1) as usize;
    let geo = Geometry::new(machine)?;
    let mut regions = h.regions.clone();
    regions.sort_by_key(|r| r.base);
    let n = regions.len();
    let base = Simulator::new(machine.clone(), cpus, ByRegion { regions, walks: vec![0; n], unmapped: 0 })?;
    let mut huge = Vec::new();
    for label in ["2m", "1g"] {
        if let Ok(map) = StaticMap::from_spec(label, &geo) {
            huge.push((label.to_string(), Simulator::new(machine.clone(), cpus, map)?));
        }
    }
    let mut tee = Tee { base, huge };
    let out = trace(name, params, &mut tee)?;
    let mut walks = BTreeMap::new();
    walks.insert("4k".to_string(), tee.base.counters().walks);
    for (label, s) in &tee.huge {
        walks.insert(label.clone(), s.counters().walks);
    }
    let pt = &tee.base.pt;
    let mut by_kind: BTreeMap<String, u64> = BTreeMap::new();
    let mut outside = pt.unmapped;
    for (r, &w) in pt.regions.iter().zip(&pt.walks) {
        *by_kind.entry(kind_label(r)).or_insert(0) += w;
        if !r.in_primary() {
            outside += w;
        }
    }
    if pt.unmapped > 0 {
        by_kind.insert("unmapped".to_string(), pt.unmapped);
    }
    let total = walks["4k"];
    Ok(Shape {
        accesses: out.accesses,
        walks,
        walks_4k_by_kind: by_kind,
        outside_share: if total == 0 { 0.0 } else { outside as f64 / total as f64 },
    })
}
