//! The results cache (`result_cache`) for the reference runs beyond the base
//! reference: requested `base` and `ideal` runs (also under a sweep point's
//! own budget and fragmentation) and static page-size maps (all 4KB, 2MB,
//! 1GB). Each read back gives results byte-identical to simulating it; a
//! read entry is really what the result holds; a changed OS or machine knob
//! is another key (a miss), never a wrong hit.
//!
//! One test function: the cache directory is process-wide (environment).

mod common;

use common::{machine, BASE, MB2};
use hugescope_core::config::MachineConfig;
use hugescope_core::configuration::Config;
use hugescope_core::os::clock::TimeBase;
use hugescope_core::os::kernel::OsConfig;
use hugescope_core::plan::{Plan, PlanEntry, When};
use hugescope_core::result_cache;
use hugescope_core::run::{simulate_policies, PolicySpec, RunOptions};
use hugescope_core::sim::simulate_static;
use hugescope_core::sweep::simulate_shared_stats;
use hugescope_core::sweep_batch::{run_points, SweepPoint};

fn trace(dir: &std::path::Path) -> String {
    common::cache_test_trace(dir, "t.hst", 0x0ddba11)
}

fn os() -> OsConfig {
    OsConfig { time: Some(TimeBase::AccessRate { accesses_per_second: 1e6 }), sample_every: 10_000, ..Default::default() }
}

fn specs(list: &[&str]) -> Vec<PolicySpec> {
    list.iter().map(|s| PolicySpec::parse(s).unwrap()).collect()
}

fn sim(path: &str, m: &MachineConfig, o: &OsConfig, list: &[&str]) -> String {
    let opts = RunOptions { with_base: true, ..Default::default() };
    serde_json::to_string(&simulate_policies(path, m, o, &specs(list), &opts).unwrap()).unwrap()
}

/// Whether two results' JSON texts are equal; where they first differ is
/// printed when not (the texts are long).
fn same(a: &str, b: &str) -> bool {
    let i = a.bytes().zip(b.bytes()).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
    if a.len() != b.len() || i < a.len() {
        let from = i.saturating_sub(120);
        eprintln!("results differ at byte {i}: ...{} | ...{}", &a[from..(i + 60).min(a.len())], &b[from..(i + 60).min(b.len())]);
        return false;
    }
    true
}

fn hits(kind: &str) -> u64 {
    result_cache::hits_by_kind().iter().find(|(k, _)| k == kind).map_or(0, |(_, n)| *n)
}

fn entries(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    common::cache_entries(dir)
}

/// The entry whose key names `needle` (the reference's description).
fn entry_with(dir: &std::path::Path, needle: &str) -> std::path::PathBuf {
    let found: Vec<_> = entries(dir).into_iter().filter(|p| std::fs::read_to_string(p).unwrap().contains(needle)).collect();
    assert_eq!(found.len(), 1, "one entry holds {needle}: {found:?}");
    found[0].clone()
}

/// Rewrite an entry's body with `edit` and a recomputed checksum: a valid
/// entry whose numbers differ from what was simulated.
fn forge(p: &std::path::Path, edit: impl Fn(&str) -> String) -> String {
    let text = std::fs::read_to_string(p).unwrap();
    let (_, body) = text.split_once('\n').unwrap();
    let forged = edit(body);
    assert_ne!(forged, body);
    std::fs::write(p, format!("{:08x}\n{forged}", crc32fast::hash(forged.as_bytes()))).unwrap();
    text
}

#[test]
fn cached_reference_runs_and_static_maps_are_byte_identical_and_keyed_on_every_knob() {
    let t = tempfile::tempdir().unwrap();
    let cache = t.path().join("cache");
    let path = trace(t.path());
    let m = machine();
    std::env::set_var(result_cache::CACHE_DIR_ENV, &cache);

    // Requested base and ideal beside a policy, and the two alone.
    let mixed = ["pcc:entries=16", "base", "ideal"];
    let refs = ["base", "ideal"];
    std::env::set_var(result_cache::NO_CACHE_ENV, "1");
    let mixed_off = sim(&path, &m, &os(), &mixed);
    let refs_off = sim(&path, &m, &os(), &refs);
    let statics_off: Vec<String> =
        ["4k", "2m", "1g"].iter().map(|p| serde_json::to_string(&simulate_static(&path, m.clone(), p).unwrap()).unwrap()).collect();
    assert!(!cache.exists(), "--no-cache creates nothing");
    std::env::remove_var(result_cache::NO_CACHE_ENV);

    // Cold: simulated and stored, one entry per reference run (base, ideal).
    let (b0, i0) = (hits("base"), hits("ideal"));
    assert!(same(&sim(&path, &m, &os(), &mixed), &mixed_off), "results differ");
    assert_eq!((hits("base"), hits("ideal")), (b0, i0), "a cold cache has nothing to read");
    assert_eq!(entries(&cache).len(), 2);
    // Warm: both read back, the policy simulated beside them, same bytes.
    assert!(same(&sim(&path, &m, &os(), &mixed), &mixed_off), "results differ");
    assert_eq!((hits("base"), hits("ideal")), (b0 + 1, i0 + 1));
    // Every run cached: nothing simulated at all, same bytes (labels and
    // the trace's path come from the request).
    assert!(same(&sim(&path, &m, &os(), &refs), &refs_off), "results differ");
    assert_eq!((hits("base"), hits("ideal")), (b0 + 2, i0 + 2));
    // Under another path (a copy of the trace): the same content, so a hit,
    // and the result names the path asked for.
    let copy = t.path().join("copy.hst");
    std::fs::copy(&path, &copy).unwrap();
    let copy = copy.to_str().unwrap();
    let refs_copy = sim(copy, &m, &os(), &refs);
    assert_eq!((hits("base"), hits("ideal")), (b0 + 3, i0 + 3));
    assert!(same(&refs_copy, &refs_off.replace(&path, copy)), "results differ");

    // A damaged copy (one byte of a chunk's compressed records flipped: its
    // frame headers, which name the trace in the key, are unchanged) is
    // refused as without the cache, never answered from it.
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    let bad = t.path().join("bad.hst");
    std::fs::write(&bad, &bytes).unwrap();
    let bad = bad.to_str().unwrap();
    let opts = RunOptions { with_base: true, ..Default::default() };
    let err = simulate_policies(bad, &m, &os(), &specs(&refs), &opts).unwrap_err().to_string();
    assert!(err.contains("bad.hst"), "{err}");

    // A read entry is what the result holds: a forged ideal (valid checksum,
    // other walk count) shows up in the output; then restored.
    let ideal_entry = entry_with(&cache, "\"policy\":\"ideal\"");
    let good = forge(&ideal_entry, |b| b.replacen("\"walks\":", "\"walks\":7", 1));
    assert!(sim(&path, &m, &os(), &refs) != refs_off, "the entry is what the run reads");
    // A corrupt one (checksum kept) is a miss, replaced by the simulated one.
    std::fs::write(&ideal_entry, good.replacen("\"promotions\":", "\"promotions\":9", 1)).unwrap();
    let i1 = hits("ideal");
    assert!(same(&sim(&path, &m, &os(), &refs), &refs_off), "results differ");
    assert_eq!(hits("ideal"), i1);
    assert_eq!(std::fs::read_to_string(&ideal_entry).unwrap(), good);

    // A changed OS knob is another key: a miss (simulated and stored), never
    // the other configuration's result. One knob of each kind the OS model
    // reads: a cost, the seed, the timeline period, the time base, memory.
    let knobs: Vec<(&str, OsConfig)> = vec![
        ("a fault cost", { let mut o = os(); o.costs.fault_base_us += 1.0; o }),
        ("the seed", OsConfig { seed: 2, ..os() }),
        ("the sample period", OsConfig { sample_every: 20_000, ..os() }),
        ("the rate", OsConfig { time: Some(TimeBase::AccessRate { accesses_per_second: 2e6 }), ..os() }),
        ("the memory", OsConfig { memory_bytes: Some(64 << 20), ..os() }),
    ];
    for (what, o) in &knobs {
        let (b, i, n) = (hits("base"), hits("ideal"), entries(&cache).len());
        let warm_off = {
            std::env::set_var(result_cache::NO_CACHE_ENV, "1");
            let r = sim(&path, &m, o, &refs);
            std::env::remove_var(result_cache::NO_CACHE_ENV);
            r
        };
        assert!(same(&sim(&path, &m, o, &refs), &warm_off), "{what}");
        assert_eq!((hits("base"), hits("ideal")), (b, i), "changing {what} misses the cache");
        assert_eq!(entries(&cache).len(), n + 2, "{what}: stored under its own keys");
        assert!(same(&sim(&path, &m, o, &refs), &warm_off), "{what}");
        assert_eq!((hits("base"), hits("ideal")), (b + 1, i + 1), "{what}: then read back");
    }
    // A changed machine knob: a miss too.
    let mut m2 = machine();
    m2.cost.cpu_ghz *= 2.0;
    let i2 = hits("ideal");
    std::env::set_var(result_cache::NO_CACHE_ENV, "1");
    let m2_off = sim(&path, &m2, &os(), &refs);
    std::env::remove_var(result_cache::NO_CACHE_ENV);
    assert!(same(&sim(&path, &m2, &os(), &refs), &m2_off), "results differ");
    assert_eq!(hits("ideal"), i2, "changing the machine misses the cache");
    // ideal's own parameter is part of the key.
    let sized = ["ideal:size=1g"];
    std::env::set_var(result_cache::NO_CACHE_ENV, "1");
    let sized_off = sim(&path, &m, &os(), &sized);
    std::env::remove_var(result_cache::NO_CACHE_ENV);
    let i3 = hits("ideal");
    assert!(same(&sim(&path, &m, &os(), &sized), &sized_off), "results differ");
    assert_eq!(hits("ideal"), i3, "another ideal size is another key");
    assert!(sized_off != sim(&path, &m, &os(), &["ideal"]), "and another result");

    // Static maps: all 4KB, 2MB, 1GB each stored once, then read back with
    // the same bytes.
    for (p, off) in ["4k", "2m", "1g"].iter().zip(&statics_off) {
        let run = || serde_json::to_string(&simulate_static(&path, m.clone(), p).unwrap()).unwrap();
        let kind = format!("static map {}", serde_json::from_str::<serde_json::Value>(off).unwrap()["pages"].as_str().unwrap());
        let h = hits(&kind);
        assert!(same(&run(), off), "{p} cold");
        assert_eq!(hits(&kind), h, "{p} cold");
        assert!(same(&run(), off), "{p} warm");
        assert_eq!(hits(&kind), h + 1, "{p}: read back ({kind})");
    }
    // The damaged copy, with all 4KB cached for its frame headers: refused.
    let err = simulate_static(bad, m.clone(), "4k").unwrap_err().to_string();
    assert!(err.contains("bad.hst"), "{err}");
    // The entry is what the static result holds; a machine knob misses.
    let pages_2m = serde_json::from_str::<serde_json::Value>(&statics_off[1]).unwrap()["pages"].as_str().unwrap().to_string();
    let all2m = entry_with(&cache, &format!("\"static\":\"{pages_2m}\""));
    forge(&all2m, |b| b.replacen("\"walks\":", "\"walks\":7", 1));
    assert!(serde_json::to_string(&simulate_static(&path, m.clone(), "2m").unwrap()).unwrap() != statics_off[1], "results the same");
    let pages_4k = serde_json::from_str::<serde_json::Value>(&statics_off[0]).unwrap()["pages"].as_str().unwrap().to_string();
    let kind_4k = format!("static map {pages_4k}");
    let h = hits(&kind_4k);
    let mut slower = machine();
    slower.cost.walk_ref_mem_cycles += 10.0;
    let other = serde_json::to_string(&simulate_static(&path, slower.clone(), "4k").unwrap()).unwrap();
    assert_eq!(hits(&kind_4k), h, "changing the machine misses the cache");
    assert!(other != statics_off[0], "results the same");
    assert!(same(&serde_json::to_string(&simulate_static(&path, slower, "4k").unwrap()).unwrap(), &other), "results differ");
    assert_eq!(hits(&kind_4k), h + 1);
    // A plan file's map is never cached.
    let plan = t.path().join("plan.json");
    let entry = PlanEntry { start: BASE, length: MB2, page_size: MB2, when: When::Start, pid: 0, note: None };
    std::fs::write(&plan, serde_json::to_string(&Plan::new(vec![entry])).unwrap()).unwrap();
    let n = entries(&cache).len();
    simulate_static(&path, m.clone(), plan.to_str().unwrap()).unwrap();
    simulate_static(&path, m.clone(), plan.to_str().unwrap()).unwrap();
    assert_eq!(entries(&cache).len(), n, "a plan's map is not stored");

    // A sweep's points: ideal and base under their own budget and
    // fragmentation (their own keys), in a shared pass on two threads.
    let cfg = Config::load(Some("haswell-pcc"), None, &["os.rate=1e6".to_string()], &[]).unwrap();
    let point = |p: &str, budget: Option<f64>, frag: Option<f64>| SweepPoint { policy: p.into(), budget, frag, ..Default::default() };
    let points = vec![
        point("pcc", Some(0.25), None),
        point("pcc:entries=8", Some(0.25), None),
        point("ideal", None, Some(0.5)),
        point("base", None, Some(0.5)),
        point("ideal", None, None),
        point("linux", None, Some(0.5)),
    ];
    let sweep = || serde_json::to_string(&run_points(&path, &cfg, &points, 2, true).unwrap()).unwrap();
    std::env::set_var(result_cache::NO_CACHE_ENV, "1");
    let sweep_off = sweep();
    std::env::remove_var(result_cache::NO_CACHE_ENV);
    assert!(same(&sweep(), &sweep_off), "cold");
    let (b, i) = (hits("base"), hits("ideal"));
    assert!(same(&sweep(), &sweep_off), "warm");
    // ideal fragmented and not, base fragmented, and the batch's base
    // reference (one unit of the batch, read once for both threads).
    assert_eq!((hits("ideal"), hits("base")), (i + 2, b + 2));
    // The shared pass with every run cached decodes nothing and gives the
    // same bytes as the uncached simulation.
    let specs_all = specs(&["base", "ideal"]);
    let opts = RunOptions { with_base: true, ..Default::default() };
    let (shared, stats) = simulate_shared_stats(&path, &m, &os(), &specs_all, &opts).unwrap();
    assert_eq!(stats.groups_at_start, 0, "nothing left to simulate");
    assert!(same(&serde_json::to_string(&shared).unwrap(), &refs_off), "results differ");
}
