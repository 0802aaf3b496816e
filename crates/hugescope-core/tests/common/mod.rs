//! Scaffolding shared by the integration tests: a one-region header, a
//! simulator over the OS model with a named policy, a daemon that promotes
//! at a set time, a small deterministic generator. Each test file uses part
//! of it.
#![allow(dead_code)]

use hugescope_core::config::MachineConfig;
use hugescope_core::hw::Geometry;
use hugescope_core::os::kernel::{AllocMode, Kernel, OsConfig};
use hugescope_core::policy::{self, Ctx, Policy};
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

/// The frame of each of the `n` base pages of `pid` from `start`, as the page
/// tables map them (`MmView::page`; `u32::MAX`: none).
pub fn frames(k: &Kernel, pid: u16, start: u64, n: usize) -> Vec<u32> {
    let page = k.geometry().sizes[0];
    (0..n as u64).map(|i| frame(k, pid, start + i * page)).collect()
}

/// The frame of the base page at `addr` of `pid` (`u32::MAX`: none).
pub fn frame(k: &Kernel, pid: u16, addr: u64) -> u32 {
    k.view().page(pid, addr).and_then(|p| p.frame).map_or(u32::MAX, |f| f as u32)
}

/// The page-size index of the leaf mapping each of the `n` base pages of
/// `pid` from `start` (0: a base page or none).
pub fn leaf_sizes(k: &Kernel, pid: u16, start: u64, n: usize) -> Vec<usize> {
    let page = k.geometry().sizes[0];
    (0..n as u64).map(|i| k.view().page(pid, start + i * page).map_or(0, |p| p.leaf_size)).collect()
}

/// The frame of base page `i` of VMA `vi` (address order) of `pid`.
pub fn vma_frame(k: &Kernel, pid: u16, vi: usize, i: usize) -> u32 {
    let start = k.view().vma(pid, vi).expect("the VMA").start();
    frame(k, pid, start + i as u64 * k.geometry().sizes[0])
}

/// The frames of base pages `pages` of VMA `vi` of `pid`.
pub fn vma_frames(k: &Kernel, pid: u16, vi: usize, pages: std::ops::Range<usize>) -> Vec<u32> {
    pages.map(|i| vma_frame(k, pid, vi, i)).collect()
}

/// The leaf size index of every base page of VMA `vi` of `pid`.
pub fn vma_leaf_sizes(k: &Kernel, pid: u16, vi: usize) -> Vec<usize> {
    let v = k.view().vma(pid, vi).expect("the VMA");
    leaf_sizes(k, pid, v.start(), v.pages() as usize)
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

/// The results-cache tests' trace (`result_cache.rs`, `result_cache_runs.rs`):
/// 60,000 reads spread over the 4KB pages of eight 2MB blocks of one 16 MiB
/// region (so base pages walk and huge pages do not), from `seed`.
pub fn cache_test_trace(dir: &std::path::Path, name: &str, seed: u64) -> String {
    use hugescope_core::trace::hst::HstWriter;
    use hugescope_core::trace::Access;
    let path = dir.join(name);
    let mut w = HstWriter::create(&path, &header(16 << 20, false)).unwrap();
    let mut r = Rng(seed);
    for _ in 0..60_000 {
        let x = r.next();
        w.write(Access::read(BASE + (x % 8) * MB2 + ((x >> 12) % 512) * 4096)).unwrap();
    }
    w.finish().unwrap();
    path.to_str().unwrap().to_string()
}

/// The results cache's entries in `dir`, sorted.
pub fn cache_entries(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "entry")).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// A daemon that promotes every touched region of pid 0 at `at` seconds.
pub struct PromoteAt {
    pub at: f64,
}

impl Policy for PromoteAt {
    fn name(&self) -> &'static str {
        "promote-at"
    }
    fn init(&mut self, k: &mut Ctx<'_>) {
        k.schedule_at(self.at, 1);
    }
    fn on_timer(&mut self, k: &mut Ctx<'_>, _id: u32) {
        let view = k.view();
        let regions: Vec<u64> = view.vma(0, 0).map(|v| (0..v.regions()).map(|ri| v.region_start(ri)).collect()).unwrap_or_default();
        let size = k.pmd_size();
        for r in regions {
            if k.view().region(0, r).is_some_and(|s| s.touched > 0 && s.leaf_size == 0) {
                let _ = k.promote(0, r, size, AllocMode::FreeOnly);
            }
        }
    }
}
