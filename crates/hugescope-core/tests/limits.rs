//! Limits on user-controlled sizes: crafted trace headers (valid checksum,
//! absurd fields), policy knobs out of range or given twice, virtual duration
//! and rate, the model memory estimate, and the bounded per-interval logs.
//! Each absurd value must be one error naming the field and the value.

use std::path::Path;

use hugescope_core::config::MachineConfig;
use hugescope_core::os::kernel::OsConfig;
use hugescope_core::run::{simulate_policies, PolicySpec, RunOptions};
use hugescope_core::trace::hst::{summarize, HstWriter};
use hugescope_core::trace::{Access, Region, TraceHeader};
use hugescope_core::Error;

mod common;
use common::hstfile::{header_json, splice_header};

const BASE: u64 = 0x7e00_0000_0000;

/// A small valid trace: 8MB region, `n` accesses striding over it.
fn small_trace(dir: &Path, n: u64) -> std::path::PathBuf {
    let p = dir.join("small.hst");
    let mut h = TraceHeader::new("limits");
    h.regions.push(Region::new("data", BASE, 8 << 20));
    let mut w = HstWriter::create(&p, &h).unwrap();
    for i in 0..n {
        w.write(Access::read(BASE + (i * 4096 * 7) % (8 << 20))).unwrap();
    }
    w.finish().unwrap();
    p
}

/// The file with one header field replaced (valid checksum); returns the error.
fn crafted(dir: &Path, field: &str, value: serde_json::Value) -> String {
    let src = small_trace(dir, 100);
    let bytes = std::fs::read(&src).unwrap();
    let mut h: serde_json::Value = serde_json::from_slice(header_json(&bytes)).unwrap();
    h[field] = value;
    let p = dir.join(format!("crafted-{field}.hst"));
    std::fs::write(&p, splice_header(&bytes, &serde_json::to_vec(&h).unwrap())).unwrap();
    match summarize(&p, false) {
        Err(e @ Error::Format { .. }) => {
            let m = e.to_string();
            assert!(m.contains(&p.display().to_string()) && m.contains(field), "{m}");
            m
        }
        other => panic!("{field}: expected a format error, got {other:?}"),
    }
}

#[test]
fn crafted_headers_with_valid_checksums_are_refused_by_field() {
    let d = tempfile::tempdir().unwrap();
    let m = crafted(d.path(), "cpus", serde_json::json!(1_000_000_000u64));
    assert!(m.contains("cpus=1000000000") && m.contains("256"), "{m}");
    let m = crafted(d.path(), "processes", serde_json::json!(4_000_000_000u64));
    assert!(m.contains("processes=4000000000") && m.contains("128"), "{m}");
    let m = crafted(d.path(), "accesses_per_second", serde_json::json!(1e-9));
    assert!(m.contains("accesses_per_second=0.000000001") || m.contains("accesses_per_second=1e-9"), "{m}");
    let m = crafted(d.path(), "accesses_per_second", serde_json::json!(0.0));
    assert!(m.contains("accesses_per_second=0"), "{m}");
    let names: Vec<String> = (0..200).map(|i| format!("p{i}")).collect();
    let m = crafted(d.path(), "process_names", serde_json::json!(names));
    assert!(m.contains("200 names"), "{m}");
    let region = |base: u64, len: u64, pid: u64| serde_json::json!({"name": "r", "base": base, "len": len, "pid": pid});
    let m = crafted(d.path(), "regions", serde_json::json!([region(u64::MAX - 10, 100, 0)]));
    assert!(m.contains("regions[0]") && m.contains("48-bit"), "{m}");
    let m = crafted(d.path(), "regions", serde_json::json!([region((1 << 47) + 4096, 1 << 47, 0)]));
    assert!(m.contains("regions[0]"), "{m}");
    let m = crafted(d.path(), "regions", serde_json::json!([region(0, 4096, 500)]));
    assert!(m.contains("regions[0].pid=500"), "{m}");
    let many: Vec<_> = (0..70_000u64).map(|i| region(i << 12, 4096, 0)).collect();
    let m = crafted(d.path(), "regions", serde_json::json!(many));
    assert!(m.contains("70000 regions"), "{m}");
    // A float where a count belongs is a JSON type error, also by name.
    let m = crafted(d.path(), "cpus", serde_json::json!(1e9));
    assert!(m.contains("invalid header JSON"), "{m}");
}

fn run(path: &Path, specs: &[&str], os: OsConfig, opts: RunOptions) -> hugescope_core::Result<Vec<hugescope_core::run::PolicyResult>> {
    let m = MachineConfig::preset("haswell-pcc").unwrap();
    let specs: Vec<PolicySpec> = specs.iter().map(|s| PolicySpec::parse(s).unwrap()).collect();
    simulate_policies(path.to_str().unwrap(), &m, &os, &specs, &opts)
}

fn input_err(r: hugescope_core::Result<Vec<hugescope_core::run::PolicyResult>>) -> String {
    match r {
        Err(e @ Error::Input(_)) => e.to_string(),
        Err(e) => panic!("expected an input error, got {e}"),
        Ok(_) => panic!("expected an error"),
    }
}

#[test]
fn knobs_out_of_range_or_twice_are_one_error_each() {
    let d = tempfile::tempdir().unwrap();
    let p = small_trace(d.path(), 1000);
    let o = || RunOptions { duration_s: Some(60.0), ..Default::default() };
    let cases: &[(&str, &str)] = &[
        ("pcc:entries=4000000000", "entries=4000000000: out of range 1..=16384"),
        ("pcc:entries=0", "entries=0"),
        ("pcc:counter_bits=64", "counter_bits=64"),
        ("pcc:interval_s=0", "interval_s=0"),
        ("pcc:interval_accesses=5", "interval_accesses=5"),
        ("pcc:entries=8,entries=16", "entries given twice"),
        ("pcc:promotion_bias_process=900", "'900' is not a pid"),
        ("pcc:replacement=fifo", "replacement=fifo"),
        ("hawkeye:num_buckets=100000", "num_buckets=100000"),
        ("hawkeye:min_bucket=10", "min_bucket=10"),
        ("hawkeye:window_s=0", "window_s=0"),
        ("hawkeye:ema_alpha_history=1.5", "ema_alpha_history=1.5"),
        ("hawkeye:scan_us_per_page=-1", "scan_us_per_page=-1"),
        ("hawkeye:coverage_source=magic", "coverage_source=magic"),
        ("linux:scan_sleep_ms=0", "scan_sleep_ms=0"),
        ("linux:alloc_sleep_ms=-5", "alloc_sleep_ms=-5"),
        ("linux:max_ptes_none=512", "max_ptes_none=512"),
        ("linux:pages_to_scan=0", "pages_to_scan=0"),
        ("linux:enabled=sometimes", "enabled=sometimes"),
        ("random:interval_s=0.001", "interval_s=0.001"),
    ];
    for (spec, want) in cases {
        let e = input_err(run(&p, &[spec], OsConfig::default(), o()));
        assert!(e.contains(want), "{spec}: {e}");
    }
    let e = MachineConfig::load(None, None, &["l1.4k.entries=64".into(), "l1.4k.entries=32".into()]).unwrap_err().to_string();
    assert!(e.contains("l1.4k.entries given twice"), "{e}");
    let e = MachineConfig::load(None, None, &["cost.walk_ref_cycles=1e300".into()]).unwrap_err().to_string();
    assert!(e.contains("walk_ref_cycles=1e300"), "{e}");
    let e = MachineConfig::load(None, None, &["l2.4k+2m.entries=4000000000".into()]).unwrap_err().to_string();
    assert!(e.contains("entries=4000000000"), "{e}");
}

#[test]
fn duration_rate_sample_period_and_memory_are_bounded() {
    let d = tempfile::tempdir().unwrap();
    let p = small_trace(d.path(), 1000);
    let with = |dur: Option<f64>, rate: Option<f64>| RunOptions { duration_s: dur, accesses_per_second: rate, with_base: false, ..Default::default() };
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1.0000001e6, 1e9] {
        let e = input_err(run(&p, &["pcc"], OsConfig::default(), with(Some(bad), None)));
        assert!(e.contains("duration=") && e.contains("1000000"), "{e}");
    }
    for bad in [0.0, 0.5, 1e13, f64::NAN] {
        let e = input_err(run(&p, &["pcc"], OsConfig::default(), with(None, Some(bad))));
        assert!(e.contains("rate="), "{e}");
    }
    // 1000 accesses at 1 access/s fit; 1000 accesses at a rate implying more
    // than the maximum duration would not (checked with a rate just in range).
    assert!(run(&p, &["base"], OsConfig::default(), with(None, Some(1.0))).is_ok());
    let e = input_err(run(&p, &["pcc"], OsConfig { sample_every: 0, ..Default::default() }, with(Some(10.0), None)));
    assert!(e.contains("sample_every=0"), "{e}");
    // The memory estimate refuses a petabyte before allocating anything.
    let os = OsConfig { memory_bytes: Some(1 << 50), ..Default::default() };
    let e = input_err(run(&p, &["base"], os, with(Some(10.0), None)));
    assert!(e.contains("HUGESCOPE_MODEL_MEMORY_LIMIT") && e.contains("GiB"), "{e}");
}

#[test]
fn long_virtual_runs_keep_bounded_logs_and_say_so() {
    let d = tempfile::tempdir().unwrap();
    let p = small_trace(d.path(), 2000);
    let opts = RunOptions { duration_s: Some(1e6), ..Default::default() };
    let r = run(&p, &["pcc", "hawkeye", "linux", "random"], OsConfig::default(), opts).unwrap();
    let pcc = &r[0].policy_params;
    // 1e6 s / 30 s = 33333 reads, of which 20000 are kept.
    assert_eq!(pcc["intervals"].as_array().unwrap().len(), 20_000);
    assert_eq!(pcc["totals"]["reads"], 33_333);
    assert_eq!(pcc["intervals_dropped"], 13_333);
    assert!(r[0].warnings.iter().any(|w| w.contains("pcc intervals: 13333 entries")), "{:?}", r[0].warnings);
    let he = &r[1].policy_params;
    // HawkEye schedules relative to the access that fired it, so on this
    // sparse trace (500 s per access) a round takes two accesses: 1000 rounds.
    assert_eq!(he["rounds"].as_array().unwrap().len(), 1000);
    // An ordinary run has neither field nor warning.
    let r = run(&p, &["pcc", "hawkeye"], OsConfig::default(), RunOptions { duration_s: Some(120.0), ..Default::default() }).unwrap();
    assert!(r[0].policy_params.get("intervals_dropped").is_none() && r[1].policy_params.get("rounds_dropped").is_none());
    assert!(r.iter().all(|x| x.warnings.is_empty()), "{:?}", r[0].warnings);
}

#[test]
fn a_plan_over_vast_unmapped_space_counts_its_pages_without_visiting_them() {
    let d = tempfile::tempdir().unwrap();
    let p = small_trace(d.path(), 1000);
    let mb2 = 2u64 << 20;
    let run_plan = |start: u64, len: u64| {
        let plan = d.path().join("plan.json");
        std::fs::write(&plan, format!(r#"[{{"start": {start}, "length": {len}, "page_size": {mb2}, "when": {{"accesses": 500}}}}]"#)).unwrap();
        let spec = format!("static:plan={}", plan.display());
        let r = run(&p, &[spec.as_str()], OsConfig::default(), RunOptions { duration_s: Some(10.0), ..Default::default() }).unwrap();
        (r[0].os_stats.promotions, r[0].os_stats.promotion_failures.ineligible)
    };
    // 64 pages of 2MB around the 8MB region: the 4 inside are promoted, the
    // 60 outside are refused as ineligible, as when each was attempted.
    assert_eq!(run_plan(BASE - 32 * mb2, 64 * mb2), (4, 60));
    // 2^25 pages over 2^46 bytes: counted, not visited one by one.
    assert_eq!(run_plan(BASE - (1 << 45), 1 << 46), (4, (1 << 25) - 4));
}

#[test]
fn os_costs_and_ideal_sizes_are_checked() {
    use hugescope_core::os::costs::OsCosts;
    let o = |v: &[&str]| OsCosts::default().with_overrides(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert!(o(&["fault_base_us=5"]).is_ok());
    let e = o(&["fault_base_us=5", "fault_base_us=6"]).unwrap_err().to_string();
    assert!(e.contains("fault_base_us given twice"), "{e}");
    let e = o(&["shootdown_us=1e300"]).unwrap_err().to_string();
    assert!(e.contains("shootdown_us=1e300"), "{e}");
    let e = hugescope_core::policy::make("ideal", &[("size".into(), "3k".into())]).err().unwrap().to_string();
    assert!(e.contains("size=3k"), "{e}");
}

#[test]
fn reuse_options_and_state_are_bounded() {
    use hugescope_core::reuse::{analyze_file, ReuseOptions};
    let d = tempfile::tempdir().unwrap();
    let p = small_trace(d.path(), 100);
    let ps = p.to_str().unwrap();
    let e = analyze_file(ps, &ReuseOptions { small_shift: 6, huge_shift: 40, ..Default::default() }).unwrap_err().to_string();
    assert!(e.contains("huge - small <= 18"), "{e}");
    let e = analyze_file(ps, &ReuseOptions { max_points: usize::MAX, ..Default::default() }).unwrap_err().to_string();
    assert!(e.contains("max_points"), "{e}");
    // A header region of 2^17 1GB pages analysed at 4KB: refused before allocating.
    let bytes = std::fs::read(&p).unwrap();
    let mut h: serde_json::Value = serde_json::from_slice(header_json(&bytes)).unwrap();
    h["regions"] = serde_json::json!([{"name": "big", "base": 0, "len": 1u64 << 47}]);
    let q = d.path().join("big.hst");
    std::fs::write(&q, splice_header(&bytes, &serde_json::to_vec(&h).unwrap())).unwrap();
    let e = analyze_file(q.to_str().unwrap(), &ReuseOptions { small_shift: 12, huge_shift: 30, ..Default::default() }).unwrap_err().to_string();
    assert!(e.contains("reuse analysis") && e.contains("limit"), "{e}");
    assert!(analyze_file(ps, &ReuseOptions::default()).is_ok());
}
