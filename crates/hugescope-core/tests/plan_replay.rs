//! Plan replay fidelity (issue #15): a plan emitted by a policy, replayed with
//! `static:plan=F` over the same trace, promotes at the accesses where the
//! policy did, so it reproduces the policy's page walks (within 1%). The trace
//! has progress markers, and the policy acts between them: a plan that only
//! named the last marker (what `--emit-plan` wrote before `after_marker`)
//! replays earlier, and the test shows that this is measurably wrong.

use hugescope_core::config::MachineConfig;
use hugescope_core::os::kernel::OsConfig;
use hugescope_core::plan::{Plan, When};
use hugescope_core::run::{simulate_policies, PolicyResult, PolicySpec, RunOptions};
use hugescope_core::trace::hst::HstWriter;
use hugescope_core::trace::{Access, Region, TraceHeader};

const BASE: u64 = 0x7e00_0000_0000;
const MB2: u64 = 2 << 20;
const REGIONS: u64 = 24;
const LEVELS: u64 = 8;
const PER_LEVEL: u64 = 60_000;

/// A BFS-like trace: each "level" (a progress marker) scatters accesses over a
/// few hot regions that change from level to level, over a background of the
/// whole footprint, so which regions are worth promoting (and when) matters.
fn write_trace(path: &std::path::Path) {
    let mut h = TraceHeader::new("replay");
    h.regions.push(Region::new("data", BASE, REGIONS * MB2));
    let mut w = HstWriter::create(path, &h).unwrap();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for level in 0..LEVELS {
        w.mark(&format!("level:{}", level + 1));
        for _ in 0..PER_LEVEL {
            let r = next();
            // Three hot regions per level, 3/4 of the accesses.
            let region = if r % 4 != 0 { (level * 3 + (r >> 8) % 3) % REGIONS } else { (r >> 8) % REGIONS };
            let page = (r >> 20) % 512;
            w.write(Access::read(BASE + region * MB2 + page * 4096 + (r >> 40) % 4096 / 8 * 8)).unwrap();
        }
    }
    w.finish().unwrap();
}

fn run(trace: &str, policy: &str) -> PolicyResult {
    let m = MachineConfig::preset("haswell-pcc").unwrap();
    let opts = RunOptions { duration_s: Some(60.0), with_base: false, ..Default::default() };
    let spec = PolicySpec::parse(policy).unwrap();
    simulate_policies(trace, &m, &OsConfig::default(), &[spec], &opts).unwrap().remove(0)
}

fn rel_diff(a: u64, b: u64) -> f64 {
    (a as f64 - b as f64).abs() / a.max(1) as f64
}

#[test]
fn replaying_an_emitted_plan_reproduces_the_policys_walks() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.hst");
    write_trace(&trace);
    let trace = trace.to_str().unwrap();

    // Reads every 70000 accesses against markers every 60000: the rounds fall
    // between markers (the one at 420000 right before a marker, recorded as
    // 60000 after the previous one).
    let pcc = run(trace, "pcc:interval_accesses=70000,regions_to_promote=4");
    let plan = pcc.plan();
    assert!(plan.entries.len() >= 8, "the policy promoted too little to test: {:?}", plan.entries);
    let mut after = 0;
    for e in &plan.entries {
        match &e.when {
            When::AfterMarker { label, accesses } => {
                assert!(label.starts_with("level:") && *accesses > 0 && *accesses <= PER_LEVEL, "{e:?}");
                after += 1;
            }
            other => panic!("a promotion between markers recorded as {other:?}"),
        }
    }
    assert_eq!(after, plan.entries.len());

    let replay_walks = |name: &str, plan: &Plan| {
        let f = d.path().join(name);
        std::fs::write(&f, plan.to_json()).unwrap();
        let r = run(trace, &format!("static:plan={}", f.display()));
        (r.translation.walks, r.executed_plan.len())
    };

    let (walks, promoted) = replay_walks("emitted.json", &plan);
    let err = rel_diff(pcc.translation.walks, walks);
    eprintln!("policy walks {}, replay {walks} ({:.3}% apart)", pcc.translation.walks, err * 100.0);
    assert!(err < 0.01, "replay walks {walks} vs policy {}: {:.2}% apart", pcc.translation.walks, err * 100.0);
    assert_eq!(promoted, plan.entries.len(), "the replay promoted other regions");

    // The old record (the last marker only) acts at the marker: earlier than
    // the policy, so it removes walks the policy's run made. The test above is
    // therefore able to tell the two apart.
    let mut at_marker = plan.clone();
    for e in &mut at_marker.entries {
        if let When::AfterMarker { label, .. } = &e.when {
            e.when = When::Progress(label.clone());
        }
    }
    let (early, _) = replay_walks("at_marker.json", &at_marker);
    eprintln!("at-marker replay walks {early}");
    assert!(
        rel_diff(pcc.translation.walks, early) > 0.01 && early < pcc.translation.walks,
        "at-marker replay {early} walks vs policy {}: the trace does not separate the two",
        pcc.translation.walks
    );
}
