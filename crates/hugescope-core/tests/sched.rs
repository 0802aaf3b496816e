//! Concurrent processes scheduled by their own virtual time (`sched.rs`,
//! `run::simulate_concurrent`): the interleaving the scheduler picks, markers
//! at their per-process index, finish times that follow each process's
//! translation cost, and the single-trace path left unchanged.

use hugescope_core::config::MachineConfig;
use hugescope_core::hw::{Leaf, Outcome, PageTable};
use hugescope_core::os::clock::{Clock, TimeBase};
use hugescope_core::os::kernel::OsConfig;
use hugescope_core::run::{simulate_concurrent, simulate_policies, PolicyResult, PolicySpec, RunOptions};
use hugescope_core::sched::{self, ProcessClock, SchedOptions};
use hugescope_core::sim::Simulator;
use hugescope_core::trace::hst::HstWriter;
use hugescope_core::trace::merge::{combine, Input};
use hugescope_core::trace::{free_label, Access, Region, TraceHeader};
use hugescope_core::hw::pwc::WalkCost;
use std::path::Path;

/// A page table that records the stream it sees: every access's pid and
/// every marker with the number of accesses before it. Its clock is the
/// kernel's (one access = 1/rate s under an access rate).
struct Recorder {
    clock: Clock,
    pids: Vec<u16>,
    markers: Vec<(usize, String)>,
}

impl PageTable for Recorder {
    fn leaf(&mut self, _a: &Access) -> Leaf {
        Leaf::sized(0)
    }
    fn after_access(&mut self, a: &Access, _o: Outcome, _w: Option<WalkCost>) {
        self.pids.push(a.pid);
        self.clock.tick(0.0);
    }
    fn progress(&mut self, label: &str) {
        self.markers.push((self.pids.len(), label.to_string()));
    }
}

impl ProcessClock for Recorder {
    fn seconds_of(&self, ctx: usize) -> f64 {
        self.clock.seconds_of(ctx)
    }
    fn switch_process(&mut self, ctx: usize) {
        self.clock.switch_to(ctx)
    }
    fn now(&self) -> f64 {
        self.clock.now()
    }
}

/// A one-process trace of `n` reads at `base + i * stride`, with `marks`
/// (index, label) placed before the access of that index (an index of `n`
/// after the last), in small chunks so quanta cross chunk boundaries.
fn trace(path: &Path, name: &str, base: u64, len: u64, n: u64, stride: u64, marks: &[(u64, &str)]) {
    let mut h = TraceHeader::new(name);
    h.regions.push(Region::new("data", base, len));
    let mut w = HstWriter::create(path, &h).unwrap().with_chunk_records(3);
    for i in 0..=n {
        for (_, l) in marks.iter().filter(|(at, _)| *at == i) {
            w.mark(l);
        }
        if i < n {
            w.write(Access::read(base + (i * stride) % len)).unwrap();
        }
    }
    w.finish().unwrap();
}

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

#[test]
fn lowest_virtual_time_runs_for_one_quantum() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("a.hst"), d.path().join("b.hst"));
    trace(&a, "a", 0x1000_0000, 1 << 21, 5, 64, &[(3, "phase")]);
    let fb = free_label(0, 0x2000_0000, 0x1000);
    trace(&b, "b", 0x2000_0000, 1 << 21, 3, 64, &[(0, "start"), (1, &fb)]);
    let mut inputs = vec![Input::open(&s(&a), "run").unwrap(), Input::open(&s(&b), "run").unwrap()];
    let h = combine(&mut inputs, true, "concurrent").unwrap();
    assert_eq!(h.processes, 2);
    let rec = Recorder { clock: Clock::new(TimeBase::AccessRate { accesses_per_second: 1000.0 }), pids: vec![], markers: vec![] };
    let m = MachineConfig::preset("haswell-pcc").unwrap();
    let mut sim = Simulator::new(m, h.cpus as usize, rec).unwrap();
    // 1 ms per access, quantum 1.5 ms: a process runs until its second access
    // of the turn (its time passes the quantum), or its trace ends.
    // t=0: a runs a0 a1 (2 ms); b (0 ms) runs b0 b1 (2 ms); tie at 2 ms goes
    // to the lower pid: a2 a3 (4 ms); b2 and b ends at 3 ms; a4, a ends at 5 ms.
    let fins = sched::run(&mut sim, &mut inputs, &SchedOptions { quantum_ms: 1.5 }, |_| Ok(())).unwrap();
    assert_eq!(sim.pt.pids, vec![0, 0, 1, 1, 0, 0, 1, 0]);
    assert!((fins[0].finish_seconds - 0.005).abs() < 1e-12, "{fins:?}");
    assert!((fins[1].finish_seconds - 0.003).abs() < 1e-12, "{fins:?}");
    assert_eq!((fins[0].accesses.clone(), fins[1].accesses.clone()), (vec![5], vec![3]));
    // Markers at their index in their own process's stream: b's start before
    // b0 (2 accesses in), b's free after b0 (3 in) rewritten to pid 1, a's
    // phase before a3 (a0 a1 b0 b1 a2: 5 in).
    let want = vec![(2, "start".to_string()), (3, free_label(1, 0x2000_0000, 0x1000)), (5, "phase".to_string())];
    assert_eq!(sim.pt.markers, want);
}

fn run_json(r: &[PolicyResult]) -> String {
    serde_json::to_string(r).unwrap()
}

/// Two processes for the finish-time tests: a makes 20000 reads inside one
/// 2MB page; b the same count spread over 256 MB, one access per 2MB page in
/// turn (128 pages: beyond the L1 2MB TLB, so b walks where a hits). Both
/// under `ideal`, without the base reference.
struct TwoProcesses {
    _dir: tempfile::TempDir,
    a: std::path::PathBuf,
    b: std::path::PathBuf,
    m: MachineConfig,
    specs: [PolicySpec; 1],
    opts: RunOptions,
}

fn two_processes() -> TwoProcesses {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("a.hst"), d.path().join("b.hst"));
    trace(&a, "one-page", 0x4000_0000, 1 << 21, 20_000, 64, &[]);
    trace(&b, "scattered", 0x8000_0000, 1 << 28, 20_000, (1 << 21) + 64, &[]);
    let m = MachineConfig::preset("haswell-pcc").unwrap();
    let specs = [PolicySpec::parse("ideal").unwrap()];
    let opts = RunOptions { with_base: false, ..Default::default() };
    TwoProcesses { _dir: d, a, b, m, specs, opts }
}

#[test]
fn cheaper_accesses_finish_earlier_by_their_own_cost() {
    let TwoProcesses { _dir, a, b, m, specs, opts } = two_processes();
    let os = OsConfig::default();
    let conc = simulate_concurrent(&[s(&a), s(&b)], &m, &os, &specs, &opts, &SchedOptions::default()).unwrap();
    let r = &conc[0];
    assert!(matches!(r.time_base, TimeBase::Cycles { .. }), "concurrent runs default to the cycle time base");
    let fa = r.processes[0].finish_seconds.unwrap();
    let fb = r.processes[1].finish_seconds.unwrap();
    // Each process's time is its own accesses' cycles plus its own faults:
    // exactly what it takes alone on the same machine under cycle time
    // (own cpus, so own TLBs; ideal has no daemon).
    let cyc = OsConfig { time: Some(TimeBase::Cycles { hz: m.cost.cpu_ghz * 1e9 }), ..OsConfig::default() };
    let solo = |p: &Path| simulate_policies(&s(p), &m, &cyc, &specs, &opts).unwrap()[0].virtual_seconds;
    let (sa, sb) = (solo(&a), solo(&b));
    assert!((fa - sa).abs() <= 1e-12 * sa, "{fa} vs alone {sa}");
    assert!((fb - sb).abs() <= 1e-12 * sb, "{fb} vs alone {sb}");
    assert!(fa < fb, "the one-page process must finish first: {fa} vs {fb}");
    assert_eq!(r.virtual_seconds, fb);
    assert_eq!(r.processes[0].accesses, Some(20_000));
    assert_eq!(r.processes[1].accesses, Some(20_000));
    // Determinism: the same run again is identical.
    let again = simulate_concurrent(&[s(&a), s(&b)], &m, &os, &specs, &opts, &SchedOptions::default()).unwrap();
    assert_eq!(run_json(&conc), run_json(&again));
}

#[test]
fn finish_times_by_hand() {
    // The same two processes with free OS work, so a process's time is its
    // access cycles over the clock: a makes 1 cold walk of a 2MB leaf (3
    // references: PML4, PDPT, PD) and 19999 L1 hits; b walks once per 2MB
    // page (128) and then hits the L2 TLB on each access (its 128 pages
    // cycle through the 32-entry L1 2MB TLB).
    let TwoProcesses { _dir, a, b, m, specs, opts } = two_processes();
    let os = OsConfig { costs: hugescope_core::os::costs::OsCosts::zero(), ..OsConfig::default() };
    let r = &simulate_concurrent(&[s(&a), s(&b)], &m, &os, &specs, &opts, &SchedOptions::default()).unwrap()[0];
    let t = &r.translation;
    assert_eq!((t.l1_hits, t.l2_hits, t.per_cpu_walks.clone()), (19_999, 19_872, vec![1, 128]));
    let c = &m.cost;
    let hz = c.cpu_ghz * 1e9;
    let walk_a = 3.0 * c.walk_ref_cycles;
    let walks = t.walk_refs as f64 * c.walk_ref_cycles + t.pwc_hits as f64 * c.pwc_hit_cycles;
    let want_a = (20_000.0 * c.base_cycles_per_access + 19_999.0 * c.l1_hit_cycles + walk_a) / hz;
    let want_b = (20_000.0 * c.base_cycles_per_access + 19_872.0 * c.l2_hit_cycles + (walks - walk_a)) / hz;
    let (fa, fb) = (r.processes[0].finish_seconds.unwrap(), r.processes[1].finish_seconds.unwrap());
    assert!((fa - want_a).abs() <= 1e-9 * want_a, "{fa} vs {want_a}");
    assert!((fb - want_b).abs() <= 1e-9 * want_b, "{fb} vs {want_b}");
    // b is later by its L2 hits and its 127 extra walks.
    let later = (19_872.0 * c.l2_hit_cycles - 19_999.0 * c.l1_hit_cycles + walks - 2.0 * walk_a) / hz;
    assert!(((fb - fa) - later).abs() <= 1e-9 * later && later > 0.0);
}

#[test]
fn one_input_takes_the_single_trace_path() {
    let d = tempfile::tempdir().unwrap();
    let a = d.path().join("a.hst");
    trace(&a, "a", 0x4000_0000, 1 << 23, 30_000, 4160, &[(100, "phase")]);
    let m = MachineConfig::preset("haswell-pcc").unwrap();
    let specs = [PolicySpec::parse("linux").unwrap(), PolicySpec::parse("pcc").unwrap()];
    let opts = RunOptions { with_base: true, duration_s: Some(120.0), ..Default::default() };
    let os = OsConfig::default();
    let one = simulate_concurrent(&[s(&a)], &m, &os, &specs, &opts, &SchedOptions::default()).unwrap();
    let single = simulate_policies(&s(&a), &m, &os, &specs, &opts).unwrap();
    let j = run_json(&one);
    assert_eq!(j, run_json(&single));
    assert!(!j.contains("finish_seconds"), "single-trace results keep their fields");
}

#[test]
fn same_file_three_times_is_three_processes() {
    let d = tempfile::tempdir().unwrap();
    let a = d.path().join("a.hst");
    trace(&a, "w", 0x4000_0000, 1 << 23, 9_000, 4160, &[]);
    let m = MachineConfig::preset("haswell-pcc").unwrap();
    let specs = [PolicySpec::parse("base").unwrap()];
    let opts = RunOptions { with_base: true, ..Default::default() };
    let paths = [s(&a), s(&a), s(&a)];
    let r = &simulate_concurrent(&paths, &m, &OsConfig::default(), &specs, &opts, &SchedOptions::default()).unwrap()[0];
    assert_eq!(r.processes.len(), 3);
    assert_eq!(r.translation.accesses, 27_000);
    let f: Vec<f64> = r.processes.iter().map(|p| p.finish_seconds.unwrap()).collect();
    // Identical processes on their own cpus under base pages: identical times.
    assert!(f.iter().all(|x| *x == f[0]), "{f:?}");
    assert_eq!(r.trace.as_ref().unwrap().workload, "concurrent(w,w,w)");
    assert!(r.speedup_vs_base.is_some());
}

#[test]
fn bad_input_is_one_clear_error() {
    let d = tempfile::tempdir().unwrap();
    let a = d.path().join("a.hst");
    trace(&a, "a", 0x4000_0000, 1 << 21, 100, 64, &[]);
    let m = MachineConfig::preset("haswell-pcc").unwrap();
    let specs = [PolicySpec::parse("base").unwrap()];
    let opts = RunOptions::default();
    let os = OsConfig::default();
    for q in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e9] {
        let e = simulate_concurrent(&[s(&a), s(&a)], &m, &os, &specs, &opts, &SchedOptions { quantum_ms: q }).unwrap_err();
        assert!(matches!(e, hugescope_core::Error::Input(_)) && e.to_string().contains("quantum_ms="), "{e}");
        // One input: the quantum is checked all the same.
        assert!(simulate_concurrent(&[s(&a)], &m, &os, &specs, &opts, &SchedOptions { quantum_ms: q }).is_err());
    }
    let missing = d.path().join("missing.hst");
    let e = simulate_concurrent(&[s(&a), s(&missing)], &m, &os, &specs, &opts, &SchedOptions::default()).unwrap_err();
    assert!(e.to_string().contains("missing.hst"), "{e}");
    assert!(simulate_concurrent(&[], &m, &os, &specs, &opts, &SchedOptions::default()).is_err());
}
