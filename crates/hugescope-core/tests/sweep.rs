//! The shared pass (`sweep`): configurations that differ only in their PCC
//! (PCC §3.2, Fig. 6's sizes) run as one simulation until their decisions
//! differ, with results byte-identical to separate runs
//! (`run::simulate_policies`), whether the group splits or stays merged.

mod common;

use common::{machine, Rng, BASE, MB2};
use hugescope_core::os::clock::TimeBase;
use hugescope_core::os::kernel::OsConfig;
use hugescope_core::run::{simulate_policies, PolicySpec, RunOptions};
use hugescope_core::sweep::{share_class, simulate_shared_stats, ShareStats};
use hugescope_core::trace::hst::HstWriter;
use hugescope_core::trace::Access;

/// A 64 MiB footprint (32 regions): `hot` regions get 80% of 300k accesses
/// at random among 128 of their pages (HUBs: their 4KB translations thrash
/// the TLBs while each region is reused), the other regions of the first
/// `touched` the rest at random over all pages.
fn trace(dir: &tempfile::TempDir, hot: u64, touched: u64) -> String {
    let path = dir.path().join(format!("t{hot}-{touched}.hst"));
    let h = common::header(64 << 20, false);
    let mut w = HstWriter::create(&path, &h).unwrap();
    let mut r = Rng(0x5eed);
    for _ in 0..300_000 {
        let x = r.next();
        let (reg, page) = if !x.is_multiple_of(5) || touched <= hot {
            (x % hot, ((x >> 12) % 128) * 4)
        } else {
            (hot + (x >> 3) % (touched - hot), (x >> 12) % 512)
        };
        w.write(Access::read(BASE + reg * MB2 + page * 4096))
            .unwrap();
    }
    w.finish().unwrap();
    path.to_str().unwrap().to_string()
}

/// PCC reads every 30000 accesses: 9 reads over the trace.
fn os(budget: f64) -> OsConfig {
    OsConfig {
        time: Some(TimeBase::AccessRate {
            accesses_per_second: 1e6,
        }),
        budget: Some(budget),
        ..Default::default()
    }
}

fn specs(list: &[&str]) -> Vec<PolicySpec> {
    list.iter().map(|s| PolicySpec::parse(s).unwrap()).collect()
}

/// Shared and separate results as JSON text, and the sharing counters.
fn both(path: &str, os: &OsConfig, specs: &[PolicySpec]) -> (String, String, ShareStats) {
    // The group counts below include the base run, which a warm results
    // cache (`result_cache`) would skip: off for this file's tests (every
    // test sets the same value, so the process-wide variable is safe).
    std::env::set_var(hugescope_core::result_cache::NO_CACHE_ENV, "1");
    let opts = RunOptions {
        with_base: true,
        ..Default::default()
    };
    let sep = simulate_policies(path, &machine(), os, specs, &opts).unwrap();
    let (shared, stats) = simulate_shared_stats(path, &machine(), os, specs, &opts).unwrap();
    (
        serde_json::to_string(&sep).unwrap(),
        serde_json::to_string(&shared).unwrap(),
        stats,
    )
}

#[test]
fn sizes_that_diverge_split_and_match_separate_runs() {
    let dir = tempfile::tempdir().unwrap();
    // 12 hot regions and 20 touched: a 2-entry PCC promotes 2 per read, a
    // 64-entry one everything with a count; 25% budget = 8 regions.
    let path = trace(&dir, 12, 20);
    let s = specs(&[
        "pcc:interval_accesses=30000,entries=2",
        "pcc:interval_accesses=30000,entries=4",
        "pcc:interval_accesses=30000,entries=8",
        "pcc:interval_accesses=30000,entries=64",
        "ideal",
        "base",
    ]);
    let (sep, shared, st) = both(&path, &os(0.25), &s);
    assert_eq!(
        sep, shared,
        "the shared pass gives the separate runs' results byte for byte"
    );
    // The four pcc sizes start as one group; ideal and base alone: 3.
    assert_eq!(st.groups_at_start, 3);
    assert!(
        st.splits >= 1 && st.groups_at_end > st.groups_at_start,
        "{st:?}"
    );
    // The first read (access 30000) already tells the sizes apart.
    assert_eq!(st.first_split_at, Some(30_000), "{st:?}");
    // Different sizes did promote differently at the first read (the test
    // is not vacuous; 2, 3, 7 and 8 at the time of writing).
    let v: serde_json::Value = serde_json::from_str(&shared).unwrap();
    let first: Vec<u64> = (0..4)
        .map(|i| {
            v[i]["policy_params"]["intervals"][0]["promoted"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert!(
        first.windows(2).all(|w| w[0] < w[1]),
        "first read's promotions grow with the size: {first:?}"
    );
}

#[test]
fn sizes_that_decide_alike_stay_merged_and_match_separate_runs() {
    let dir = tempfile::tempdir().unwrap();
    // Walks reach only 4 regions: PCCs of 4, 8 and 64 entries hold the same
    // regions with the same counts, so each read promotes the same ones.
    let path = trace(&dir, 4, 4);
    let s = specs(&[
        "pcc:interval_accesses=30000,entries=4,regions_to_promote=2",
        "pcc:interval_accesses=30000,entries=8,regions_to_promote=2",
        "pcc:interval_accesses=30000,entries=64,regions_to_promote=2",
    ]);
    let (sep, shared, st) = both(&path, &os(1.0), &s);
    assert_eq!(sep, shared);
    // One group (plus base) from start to end, through every read.
    assert_eq!(
        (st.groups_at_start, st.groups_at_end, st.splits),
        (2, 2, 0),
        "{st:?}"
    );
    assert_eq!(
        st.decisions, 10,
        "one decision per read: accesses 30000, 60000, ..., 300000"
    );
    let v: serde_json::Value = serde_json::from_str(&shared).unwrap();
    for i in 0..3 {
        assert_eq!(
            v[i]["os_stats"]["promotions"], 4,
            "all four walked regions promoted, two per read"
        );
        assert_eq!(v[i]["policy_params"]["hardware"]["entries"], [4, 8, 64][i]);
    }
    // Each member's PCC saw the walks its own run would: the 4-entry one
    // evicts nothing here, so every size counts the same updates.
    let upd = |i: usize| v[i]["policy_params"]["pcc_2m_stats"]["updates"].clone();
    assert_eq!(upd(0), upd(2));
    assert!(upd(0).as_u64().unwrap() > 0);
}

#[test]
fn budget_refusals_alike_stay_merged() {
    let dir = tempfile::tempdir().unwrap();
    let path = trace(&dir, 12, 20);
    // A 0% budget: every read's first attempt is refused the same way.
    let s = specs(&[
        "pcc:interval_accesses=30000,entries=2",
        "pcc:interval_accesses=30000,entries=128",
    ]);
    let (sep, shared, st) = both(&path, &os(0.0), &s);
    assert_eq!(sep, shared);
    assert_eq!((st.groups_at_end, st.splits), (2, 0), "{st:?}");
    let v: serde_json::Value = serde_json::from_str(&shared).unwrap();
    assert_eq!(v[0]["policy_params"]["totals"]["failed_budget"], 10);
    assert_eq!(v[1]["policy_params"]["totals"]["failed_budget"], 10);
}

#[test]
fn only_pcc_configurations_with_one_schedule_share() {
    let o = os(0.25);
    let class = |s: &str| share_class(&PolicySpec::parse(s).unwrap(), &o);
    assert_eq!(
        class("pcc:entries=4"),
        class("pcc:entries=1024,replacement=lru")
    );
    assert_eq!(class("pcc"), class("pcc:entries=16"));
    // The read schedule decides when a member acts: it must match.
    assert_ne!(class("pcc:entries=4"), class("pcc:entries=4,interval_s=10"));
    assert_ne!(class("pcc"), class("pcc:artifact_phase=true"));
    // Policies that act at faults or on walks never ride.
    for s in ["base", "ideal", "hawkeye", "linux", "linux+pcc"] {
        assert_eq!(class(s), None, "{s}");
    }
    // A configuration's budget is its own (read only when it promotes);
    // its other OS settings are part of its class.
    let mut b = PolicySpec::parse("pcc:entries=4").unwrap();
    b.os = Some(os(0.5));
    assert_eq!(share_class(&b, &o), class("pcc:entries=4"));
    b.os = Some(OsConfig { sample_every: 1000, ..os(0.5) });
    assert_ne!(share_class(&b, &o), class("pcc:entries=4"));
}

#[test]
fn budgets_share_until_a_read_tells_them_apart() {
    // The utility curve's points (PCC §4): one pcc at 0%, 10%, 25% and 100%
    // of the footprint; they share the pass until the first read, where
    // each budget admits a different number of promotions.
    let dir = tempfile::tempdir().unwrap();
    let path = trace(&dir, 12, 20);
    let mut s = Vec::new();
    for b in [0.0, 0.1, 0.25, 1.0] {
        let mut p = PolicySpec::parse("pcc:interval_accesses=30000").unwrap();
        p.os = Some(os(b));
        s.push(p);
    }
    s.push(PolicySpec::parse("base").unwrap());
    let common = OsConfig { budget: None, ..os(0.0) };
    let (sep, shared, st) = both(&path, &common, &s);
    assert_eq!(sep, shared);
    assert_eq!(st.groups_at_start, 2, "{st:?}");
    assert_eq!(st.first_split_at, Some(30_000), "{st:?}");
    let v: serde_json::Value = serde_json::from_str(&shared).unwrap();
    let huge: Vec<u64> = (0..4).map(|i| v[i]["huge_bytes_peak"].as_u64().unwrap()).collect();
    assert!(huge.windows(2).all(|w| w[0] < w[1]), "{huge:?}");
    assert_eq!(huge[0], 0);
    let budgets: Vec<serde_json::Value> = (0..4).map(|i| v[i]["budget_bytes"].clone()).collect();
    assert_eq!(budgets, [0, 3 * MB2, 8 * MB2, 32 * MB2].map(serde_json::Value::from).to_vec());
}

/// PCC updates applied in batches on a helper thread (`os/pcc_bank.rs`: a
/// pass that decodes ahead also offloads them) give the results of updates
/// applied walk by walk (`inline_decode`: neither), with reads in the middle
/// of batches and the promotions' shootdowns invalidating PCC entries. On a
/// machine with one cpu both runs are inline.
#[test]
fn pcc_updates_on_a_helper_thread_give_the_inline_results() {
    let dir = tempfile::tempdir().unwrap();
    let path = trace(&dir, 12, 32);
    let s = specs(&["pcc:interval_accesses=30000,entries=8", "pcc:interval_accesses=30000,pcc_1g=true"]);
    let run = |inline_decode| {
        let opts = RunOptions { with_base: false, inline_decode, ..Default::default() };
        simulate_policies(&path, &machine(), &os(0.25), &s, &opts).unwrap()
    };
    let (inline, offloaded) = (run(true), run(false));
    assert_eq!(serde_json::to_string(&offloaded).unwrap(), serde_json::to_string(&inline).unwrap());
    // Not vacuous: several batches of walks (32768 each) and promotions.
    assert!(inline.iter().all(|r| r.translation.walks > 3 * 32768), "{:?}", inline.iter().map(|r| r.translation.walks).collect::<Vec<_>>());
    let v = serde_json::to_value(&inline).unwrap();
    assert!(v[0]["policy_params"]["intervals"][0]["promoted"].as_u64().unwrap() > 0, "the first read promotes");
}
