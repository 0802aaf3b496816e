//! Trace mode and native mode of every workload: same result, same layout,
//! every traced access inside a declared region, same progress points; and bad
//! parameters give one clear input error.

use std::sync::Mutex;

use hugescope_core::trace::{Access, AccessSink, Region};
use hugescope_core::Error;
use hugescope_workloads::{header, list, native, plan, trace, NativeOptions, Params};
use serde_json::{json, Value};

/// Native runs map fixed addresses: only one at a time per process.
static NATIVE: Mutex<()> = Mutex::new(());

fn params(v: Value) -> Params {
    v.as_object().cloned().unwrap_or_default()
}

/// Checks every access against the declared regions.
struct CheckSink {
    regions: Vec<Region>,
    count: u64,
    outside: Vec<Access>,
    cpus: Vec<u64>,
    labels: Vec<String>,
}

impl CheckSink {
    fn new(regions: Vec<Region>) -> Self {
        CheckSink { regions, count: 0, outside: Vec::new(), cpus: vec![0; 256], labels: Vec::new() }
    }
}

impl AccessSink for CheckSink {
    fn access(&mut self, a: Access) {
        self.count += 1;
        self.cpus[a.cpu as usize] += 1;
        let i = self.regions.partition_point(|r| r.base <= a.addr);
        let inside = i > 0 && self.regions[i - 1].contains(a.pid, a.addr);
        if !inside && self.outside.len() < 10 {
            self.outside.push(a);
        }
    }
    fn progress(&mut self, label: &str) {
        self.labels.push(label.to_string());
    }
    // Setup population and releases are range events, not progress points:
    // both must lie wholly inside one declared region.
    fn populate(&mut self, pid: u16, start: u64, len: u64) {
        self.check_range(pid, start, len);
    }
    fn free(&mut self, pid: u16, start: u64, len: u64) {
        self.check_range(pid, start, len);
    }
}

impl CheckSink {
    fn check_range(&mut self, pid: u16, start: u64, len: u64) {
        let ok = len > 0
            && self.regions.iter().any(|r| r.contains(pid, start) && start + len <= r.end());
        if !ok && self.outside.len() < 10 {
            self.outside.push(Access { addr: start, write: true, cpu: 0, pid });
        }
    }
}

fn small_cases() -> Vec<(&'static str, Value)> {
    vec![
        ("gups", json!({"size": "1MiB", "updates": 20000, "threads": 2})),
        ("bfs", json!({"scale": 11, "degree": 8, "threads": 2})),
        ("bfs", json!({"scale": 11, "degree": 8, "direction_optimizing": false, "dbg": true})),
        ("bfs", json!({"scale": 10, "generator": "uniform", "degree": 4})),
        ("sssp", json!({"scale": 10, "degree": 8, "delta": 8, "threads": 3})),
        ("pagerank", json!({"scale": 10, "degree": 8, "iterations": 5, "threads": 2})),
        ("kv", json!({"records": 3000, "ops": 6000, "value_size": 64, "delete_fraction": 0.7, "insert_ratio": 0.05, "threads": 2})),
        ("kv", json!({"records": 2000, "ops": 4000, "distribution": "latest", "insert_ratio": 0.05})),
        ("btree", json!({"records": 20000, "ops": 5000, "threads": 2, "stack_size": "64KiB"})),
        ("pointer-chase", json!({"size": "1MiB", "hops": 20000, "threads": 2, "locality": 0.2})),
        ("canneal", json!({"elements": 3000, "swaps_per_temp": 1000, "temp_steps": 5})),
        ("cg", json!({"rows": 3000, "nonzeros": 5, "iterations": 10, "threads": 2})),
        ("stream", json!({"size": "512KiB", "iterations": 2, "threads": 2})),
        ("graph500", json!({"scale": 11, "degree": 8, "threads": 2})),
        ("memcached", json!({"records": 3000, "ops": 6000, "threads": 2})),
        ("mysql", json!({"records": 5000, "ops": 3000, "threads": 8, "cpus": 2, "quantum": 4, "stack_size": "64KiB", "file_size": "1MiB"})),
        ("npb-bt", json!({"grid": 8, "iterations": 2, "threads": 3})),
        ("npb-cg", json!({"rows": 3000, "nonzeros": 5, "iterations": 3, "threads": 2})),
        ("redis", json!({"records": 2000, "ops": 3000, "value_size": "8KiB", "threads": 2})),
        ("svm", json!({"features": 20000, "rows": 3000, "nnz_per_row": 10, "epochs": 2, "threads": 2})),
        ("seqtouch", json!({"size": "4MiB", "threads": 2, "write": true})),
        ("seqtouch", json!({"size": "2MiB", "stride": 1000})),
        ("web", json!({"requests": 40, "buf_min": "16KiB", "buf_max": "64KiB", "heap": "512KiB", "table": "1MiB", "rows_per_request": 20, "threads": 2, "write_ratio": 0.5})),
        // The Navarro paper's workloads (single-threaded programs).
        ("matrix", json!({"n": 100, "repetitions": 2})),
        ("rbtree", json!({"nodes": 500, "ops": 3000, "traverse": 20})),
        ("fftw", json!({"n": 20, "lines": 0.3})),
        ("adversary", json!({"size": "1MiB", "rounds": 3})),
        ("stride4m", json!({"size": "32MiB", "stride": "256KiB", "passes": 3})),
        ("cmp", json!({"size": "1MiB"})),
        ("dirtyfile", json!({"size": "8MiB", "write_every": 64})),
        ("mapdummy", json!({"size": "64KiB", "cycles": 3, "rate": 1000, "access_rate": 100000})),
        ("sharemicro", json!({"size": "8MiB", "reads": 20000, "order": 3})),
        // The FHPM paper's PSR microbenchmark.
        ("psr", json!({"footprint": "16MiB", "hot": "2MiB", "u": 0.5, "accesses": 20000, "threads": 2})),
        // The daemon study's hot/cold GUPS (issue #14).
        ("hotcold", json!({"size": "4MiB", "hot_size": "1MiB", "updates": 20000, "threads": 2})),
    ]
}

#[test]
fn every_listed_workload_has_a_case_and_documented_params() {
    let names: Vec<&str> = list().iter().map(|w| w.name).collect();
    for n in &names {
        assert!(small_cases().iter().any(|(c, _)| c == n), "no test case for {n}");
    }
    for w in list() {
        assert!(!w.about.is_empty());
        for p in &w.params {
            assert!(!p.help.is_empty(), "{}.{}", w.name, p.name);
            assert!(["int", "size", "float", "bool", "str", "path"].contains(&p.kind));
        }
        // defaults resolve (plan with no params must not fail on parsing)
        let h = header(w.name, &Params::new());
        assert!(h.is_ok(), "{}: {:?}", w.name, h.err());
    }
}

#[test]
fn trace_and_native_agree_and_addresses_are_declared() {
    let _g = NATIVE.lock().unwrap_or_else(|e| e.into_inner());
    for (name, p) in small_cases() {
        let p = params(p);
        let layout = plan(name, &p).unwrap();
        assert!(layout.regions.windows(2).all(|w| w[0].end() <= w[1].base));
        assert!(layout.regions.iter().all(|r| r.base % (2 << 20) == 0));
        let mut sink = CheckSink::new(layout.regions.clone());
        let t = trace(name, &p, &mut sink).unwrap();
        assert_eq!(sink.count, t.accesses, "{name}");
        assert!(t.accesses > 0, "{name}");
        assert!(sink.outside.is_empty(), "{name}: accesses outside regions: {:?}", sink.outside);
        let cpus_used = sink.cpus.iter().filter(|&&c| c > 0).count() as u32;
        assert_eq!(cpus_used, layout.cpus, "{name}: every simulated thread issues accesses");

        let mut labels = Vec::new();
        let n = native(name, &p, &NativeOptions { thp: false }, &mut |l: &str| labels.push(l.to_string())).unwrap();
        assert_eq!(t.result, n.result, "{name}: trace and native results differ");
        assert_eq!(labels, sink.labels, "{name}: progress points differ");
        let plain: Vec<(String, u64, u64)> = n.regions.iter().map(|r| (r.name.clone(), r.base, r.len)).collect();
        let want: Vec<(String, u64, u64)> = layout.regions.iter().map(|r| (r.name.clone(), r.base, r.len)).collect();
        assert_eq!(plain, want, "{name}");
        assert!(n.run_seconds >= 0.0 && n.setup_seconds >= 0.0);
    }
}

#[test]
fn results_are_meaningful() {
    let mut sink = CheckSink::new(Vec::new());
    let r = trace("bfs", &params(json!({"scale": 12})), &mut sink).unwrap().result;
    assert_eq!(r["parents_valid"], true);
    assert!(r["reached"].as_u64().unwrap() > 1000);
    assert!(sink.labels.iter().any(|l| l == "level:1"));
    let r = trace("stream", &params(json!({"size": "64KiB"})), &mut sink).unwrap().result;
    assert_eq!(r["valid"], true);
    let r = trace("cg", &params(json!({"rows": 2000, "nonzeros": 4})), &mut sink).unwrap().result;
    assert!(r["residual"].as_f64().unwrap() < 1e-6 * r["initial_residual"].as_f64().unwrap());
}

#[test]
fn gups_emits_two_accesses_per_update_on_one_element() {
    let p = params(json!({"size": "64KiB", "updates": 12345}));
    let mut v: Vec<Access> = Vec::new();
    let out = trace("gups", &p, &mut v).unwrap();
    assert_eq!(out.accesses, 2 * 12345);
    assert_eq!(v.len(), 2 * 12345);
    for pair in v.chunks(2) {
        assert!(!pair[0].write && pair[1].write);
        assert_eq!(pair[0].addr, pair[1].addr);
        assert_eq!(pair[0].addr % 8, 0);
    }
    // Same seed, same trace; another seed, another.
    let mut w: Vec<Access> = Vec::new();
    trace("gups", &p, &mut w).unwrap();
    assert_eq!(v, w);
    let mut p2 = p.clone();
    p2.insert("seed".into(), json!(2));
    let mut x: Vec<Access> = Vec::new();
    trace("gups", &p2, &mut x).unwrap();
    assert_ne!(v, x);
}

#[test]
fn graph_files_load_in_both_modes() {
    let _g = NATIVE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let el = dir.path().join("g.wel");
    let mut text = String::from("# small weighted graph\n");
    for i in 0..200u32 {
        text.push_str(&format!("{} {} {}\n", i, (i * 7 + 3) % 200, 1 + i % 9));
        text.push_str(&format!("{} {} {}\n", i, (i + 1) % 200, 2));
    }
    std::fs::write(&el, text).unwrap();
    let mtx = dir.path().join("g.mtx");
    std::fs::write(&mtx, "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 2\n2 1\n3 2\n").unwrap();
    for (name, path) in [("sssp", &el), ("bfs", &el), ("pagerank", &el), ("bfs", &mtx)] {
        let p = params(json!({"file": path.to_str().unwrap()}));
        let mut sink = CheckSink::new(plan(name, &p).unwrap().regions);
        let t = trace(name, &p, &mut sink).unwrap();
        assert!(sink.outside.is_empty());
        let n = native(name, &p, &NativeOptions { thp: true }, &mut |_: &str| {}).unwrap();
        assert_eq!(t.result, n.result, "{name} {path:?}");
        assert!(n.regions.iter().all(|r| r.hugepage_advised));
    }
    let p = params(json!({"file": mtx.to_str().unwrap()}));
    let r = trace("bfs", &p, &mut CheckSink::new(Vec::new())).unwrap().result;
    assert_eq!(r["vertices"], 3);
}

#[test]
fn native_reports_a_taken_address_clearly() {
    let _g = NATIVE.lock().unwrap_or_else(|e| e.into_inner());
    let p = params(json!({"size": "64KiB", "updates": 10}));
    let l = plan("gups", &p).unwrap();
    let base = l.regions[0].base;
    // Occupy the table's address, then ask for a native run.
    let q = unsafe {
        libc::mmap(
            base as *mut libc::c_void,
            4096,
            libc::PROT_READ,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    assert_eq!(q as u64, base);
    let e = native("gups", &p, &NativeOptions::default(), &mut |_: &str| {}).unwrap_err().to_string();
    unsafe { libc::munmap(q, 4096) };
    assert!(e.contains("table") && e.contains(&format!("{base:#x}")), "{e}");
    // After the failed run nothing stays mapped: a second run succeeds.
    assert!(native("gups", &p, &NativeOptions::default(), &mut |_: &str| {}).is_ok());
}

fn input_err(name: &str, p: Value) -> String {
    match plan(name, &params(p)) {
        Err(Error::Input(m)) => m,
        other => panic!("{name}: expected an input error, got {other:?}"),
    }
}

#[test]
fn bad_parameters_give_one_clear_input_error() {
    assert!(input_err("nosuch", json!({})).contains("unknown workload 'nosuch'"));
    assert!(input_err("gups", json!({"sise": "1MiB"})).contains("unknown parameter 'sise'"));
    assert!(input_err("gups", json!({"size": "-1"})).contains("size"));
    assert!(input_err("gups", json!({"size": -4096})).contains("size"));
    assert!(input_err("gups", json!({"size": 0})).contains("size"));
    assert!(input_err("gups", json!({"updates": 0})).contains("updates"));
    assert!(input_err("stream", json!({"size": "12q"})).contains("size"));
    assert!(input_err("bfs", json!({"scale": 40})).contains("scale"));
    assert!(input_err("bfs", json!({"scale": 30})).contains("memory"));
    assert!(input_err("bfs", json!({"scale": 0})).contains("scale"));
    assert!(input_err("bfs", json!({"generator": "smallworld"})).contains("generator"));
    assert!(input_err("bfs", json!({"file": "/nonexistent/graph.el"})).contains("/nonexistent/graph.el"));
    assert!(input_err("kv", json!({"read_ratio": 1.5})).contains("read_ratio"));
    assert!(input_err("kv", json!({"distribution": "pareto"})).contains("distribution"));
    assert!(input_err("kv", json!({"value_size": 12})).contains("value_size"));
    assert!(input_err("pointer-chase", json!({"node_size": 4})).contains("node_size"));
    assert!(input_err("gups", json!({"threads": 0})).contains("threads"));
    assert!(input_err("gups", json!({"threads": 1000})).contains("threads"));
    assert!(input_err("pagerank", json!({"direction_optimizing": true})).contains("unknown parameter"));
    assert!(input_err("sssp", json!({"dbg": "maybe"})).contains("dbg"));
    assert!(input_err("gups", json!({"size": "1TiB"})).contains("memory"));
}

#[test]
fn header_carries_resolved_params_and_regions() {
    let h = header("bfs", &params(json!({"scale": "12", "threads": 4}))).unwrap();
    assert_eq!(h.workload, "bfs");
    assert_eq!(h.cpus, 4);
    assert_eq!(h.params["scale"], 12);
    assert_eq!(h.params["degree"], 16);
    assert!(h.accesses_per_second.is_none());
    let names: Vec<&str> = h.regions.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["offsets", "neighbors", "parent", "queue", "front", "curr"]);
    assert_eq!(h.footprint(), plan("bfs", &params(json!({"scale": 12, "threads": 4}))).unwrap().footprint);
}

/// Ingens (issue #11) runs on every workload: traced straight into the OS
/// model with `ingens` and `linux` on one simulated machine each, at 100
/// accesses per virtual second so its daemons (tracking every 2 s,
/// Promote-kth every 10 s, compaction every 5 s) fire; the kernel's
/// invariants hold at the end and no page went without memory.
#[test]
fn ingens_runs_on_every_workload() {
    use hugescope_core::config::MachineConfig;
    use hugescope_core::hw::Geometry;
    use hugescope_core::os::clock::TimeBase;
    use hugescope_core::os::kernel::{Kernel, OsConfig};
    use hugescope_core::sim::Simulator;
    let cfg = MachineConfig::preset("haswell-pcc").unwrap();
    for (name, v) in small_cases() {
        let p = params(v);
        let h = header(name, &p).unwrap();
        for pol in ["ingens", "linux"] {
            let o = OsConfig { time: Some(TimeBase::AccessRate { accesses_per_second: 100.0 }), ..Default::default() };
            let policy = hugescope_core::policy::make(pol, &[]).unwrap();
            let k = Kernel::new(Geometry::new(&cfg).unwrap(), cfg.cost.clone(), &h, &o, policy).unwrap();
            let mut sim = Simulator::new(cfg.clone(), h.cpus.max(1) as usize, k).unwrap();
            trace(name, &p, &mut sim).unwrap();
            sim.pt.finish();
            sim.pt.check_invariants().unwrap_or_else(|e| panic!("{name} under {pol}: {e}"));
            assert_eq!(sim.pt.stats().out_of_memory, 0, "{name} under {pol}");
            if pol == "ingens" {
                let t = &sim.pt.policy_params()["tracking"];
                assert!(t["passes"].as_u64().unwrap() >= 1, "{name}: no tracking pass in {} s", sim.pt.now());
            }
        }
    }
}
