//! Scaffolding shared by the integration tests: a one-region header, a
//! simulator over the OS model with a named policy, a small deterministic
//! generator. Each test file uses part of it.
#![allow(dead_code)]

use hugescope_core::config::MachineConfig;
use hugescope_core::hw::Geometry;
use hugescope_core::os::kernel::{Kernel, OsConfig};
use hugescope_core::policy::{self, Policy};
use hugescope_core::profile::WalkProfile;
use hugescope_core::sim::Simulator;
use hugescope_core::trace::{Region, TraceHeader};

pub const BASE: u64 = 0x7e00_0000_0000;
pub const MB2: u64 = 2 << 20;

/// One declared region of `len` bytes at `BASE` in pid 0.
pub fn header(len: u64, advised: bool) -> TraceHeader {
    let mut h = TraceHeader::new("synthetic");
    h.regions.push(Region {
        hugepage_advised: advised,
        ..Region::new("data", BASE, len)
    });
    h
}

pub fn machine() -> MachineConfig {
    MachineConfig::preset("haswell-pcc").unwrap()
}

/// A simulator on haswell-pcc over the OS model running `pol` on `cpus` cpus,
/// with the oracle's walk profile if given.
pub fn sim_with(
    h: &TraceHeader,
    o: OsConfig,
    mut pol: Box<dyn Policy>,
    profile: Option<&WalkProfile>,
    cpus: usize,
) -> Simulator<Kernel> {
    let cfg = machine();
    if let Some(p) = profile {
        assert!(pol.wants_profile());
        pol.set_profile(p);
    }
    let k = Kernel::new(Geometry::new(&cfg).unwrap(), cfg.cost.clone(), h, &o, pol).unwrap();
    Simulator::new(cfg, cpus, k).unwrap()
}

/// The same with a registered policy by name and `key=value` parameters.
pub fn sim_cpus(
    h: &TraceHeader,
    o: OsConfig,
    name: &str,
    params: &[(&str, &str)],
    cpus: usize,
) -> Simulator<Kernel> {
    let p: Vec<(String, String)> = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    sim_with(h, o, policy::make(name, &p).unwrap(), None, cpus)
}

pub fn sim(h: &TraceHeader, o: OsConfig, name: &str, params: &[(&str, &str)]) -> Simulator<Kernel> {
    sim_cpus(h, o, name, params, 1)
}

/// mthp: a simulator on machine `cfg` (any preset, overrides applied) over
/// the OS model running the registered policy `name` with `params`, one cpu.
pub fn sim_on(
    cfg: &MachineConfig,
    h: &TraceHeader,
    o: OsConfig,
    name: &str,
    params: &[(&str, &str)],
) -> Simulator<Kernel> {
    let p: Vec<(String, String)> = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let k = Kernel::new(
        Geometry::new(cfg).unwrap(),
        cfg.cost.clone(),
        h,
        &o,
        policy::make(name, &p).unwrap(),
    )
    .unwrap();
    Simulator::new(cfg.clone(), 1, k).unwrap()
}

/// Xorshift64: deterministic test streams.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
pub mod hstfile;
