//! Several policies and daemons on one simulated kernel (issue #10, substrate
//! item 4): each daemon fires on its own period, timer ids of two policies do
//! not collide, the first fault-time decider wins, and every executed plan
//! entry names the policy that made it.

mod common;

use common::{header, machine, PromoteAt, BASE, MB2};
use hugescope_core::hw::Geometry;
use hugescope_core::os::clock::TimeBase;
use hugescope_core::os::kernel::{AllocMode, Fragmentation, Kernel, OsConfig};
use hugescope_core::policy::{self, Ctx, Fault, FaultAction, Policy};
use hugescope_core::run::PolicySpec;
use hugescope_core::sim::Simulator;
use hugescope_core::trace::{Access, TraceHeader};
use std::cell::RefCell;
use std::rc::Rc;

/// (policy name, timer id, virtual time) of every firing, shared by the test
/// policies of one kernel.
type Log = Rc<RefCell<Vec<(&'static str, u32, f64)>>>;

/// A daemon that fires every `period` seconds with timer `id`; with `cancel`
/// it schedules a second timer of the same id at once and cancels it (so a
/// cancel that reached another policy's timers would show).
struct Ticker {
    name: &'static str,
    period: f64,
    id: u32,
    log: Log,
    cancel: bool,
}

impl Policy for Ticker {
    fn name(&self) -> &'static str {
        self.name
    }
    fn init(&mut self, k: &mut Ctx<'_>) {
        if self.cancel {
            k.schedule_in(self.period / 2.0, self.id);
            k.cancel_timer(self.id);
        }
        k.schedule_in(self.period, self.id);
    }
    fn on_timer(&mut self, k: &mut Ctx<'_>, id: u32) {
        self.log.borrow_mut().push((self.name, id, k.now()));
        k.schedule_in(self.period, self.id);
    }
}

/// A fault-time decider: a huge page for the first region only, none for
/// the others (they fall through to the next policy).
struct FirstRegion;

impl Policy for FirstRegion {
    fn name(&self) -> &'static str {
        "first-region"
    }
    fn on_fault(&mut self, k: &mut Ctx<'_>, f: &Fault) -> FaultAction {
        if f.region_start == BASE && f.region_empty {
            FaultAction::Huge { size: k.pmd_size(), alloc: AllocMode::FreeOnly }
        } else {
            FaultAction::Base
        }
    }
}

fn os(rate: f64) -> OsConfig {
    OsConfig { time: Some(TimeBase::AccessRate { accesses_per_second: rate }), ..Default::default() }
}

fn kernel_sim(h: &TraceHeader, o: OsConfig, pols: Vec<Box<dyn Policy>>) -> Simulator<Kernel> {
    let cfg = machine();
    let k = Kernel::new_multi(Geometry::new(&cfg).unwrap(), cfg.cost.clone(), h, &o, pols).unwrap();
    Simulator::new(cfg, 1, k).unwrap()
}

/// `n` reads cycling over the first `pages` base pages of the region.
fn cycle(s: &mut Simulator<Kernel>, pages: u64, n: u64) {
    for i in 0..n {
        s.step(Access::read(BASE + (i % pages) * 4096));
    }
}

#[test]
fn two_daemons_fire_on_their_own_periods_with_the_same_timer_id() {
    let log: Log = Default::default();
    let a = Ticker { name: "every-1s", period: 1.0, id: 7, log: log.clone(), cancel: false };
    // Same id as `a`; it cancels its own first timer, which must not cancel a's.
    let b = Ticker { name: "every-2.5s", period: 2.5, id: 7, log: log.clone(), cancel: true };
    let mut s = kernel_sim(&header(8 << 20, false), os(1000.0), vec![Box::new(a), Box::new(b)]);
    // 10,500 accesses at 1,000/s: 10.5 s of virtual time (plus a few us of
    // fault time, far from any period boundary). Hand count: every-1s at
    // 1..=10 s = 10 firings; every-2.5s at 2.5, 5, 7.5, 10 s = 4 firings;
    // its cancelled 1.25 s timer never fires.
    cycle(&mut s, 16, 10_500);
    let log = log.borrow();
    let times = |n: &str| log.iter().filter(|e| e.0 == n).map(|e| e.2).collect::<Vec<_>>();
    let (ta, tb) = (times("every-1s"), times("every-2.5s"));
    assert_eq!(ta.len(), 10, "{ta:?}");
    assert_eq!(tb.len(), 4, "{tb:?}");
    for (i, t) in ta.iter().enumerate() {
        assert!((t - (i + 1) as f64).abs() < 1e-3, "every-1s firing {i} at {t}");
    }
    for (i, t) in tb.iter().enumerate() {
        assert!((t - 2.5 * (i + 1) as f64).abs() < 1e-3, "every-2.5s firing {i} at {t}");
    }
    assert!(log.iter().all(|e| e.1 == 7));
    // Equal due times (10 s): `a` scheduled its 10 s timer at 9 s, `b` at
    // 7.5 s, so b's fires first (same-time timers in scheduling order).
    let at10: Vec<&str> = log.iter().filter(|e| (e.2 - 10.0).abs() < 1e-3).map(|e| e.0).collect();
    assert_eq!(at10, ["every-2.5s", "every-1s"]);
    assert_eq!(s.pt.policy_name(), "every-1s+every-2.5s");
    assert_eq!(s.pt.policy_count(), 2);
}

#[test]
fn first_fault_decider_wins_and_plan_entries_name_their_policy() {
    // first-region decides region 0 at its fault; linux (fault-time THP,
    // always) gets the faults first-region answers Base for; promote-at runs
    // as a daemon later but finds everything huge already except what it
    // owns: nothing.
    let h = header(8 << 20, false);
    let linux = policy::make("linux", &[("khugepaged".into(), "false".into())]).unwrap();
    let mut s = kernel_sim(&h, os(1000.0), vec![Box::new(FirstRegion), linux]);
    for r in 0..4 {
        s.step(Access::write(BASE + r * MB2));
    }
    let plan = s.pt.executed_plan();
    let names: Vec<&str> = plan.iter().map(|e| e.note.as_deref().unwrap().split(' ').next().unwrap()).collect();
    assert_eq!(names, ["first-region", "linux", "linux", "linux"]);
    assert_eq!(plan[0].start, BASE);
    assert_eq!(s.pt.stats().promotions, 0, "fault-time huge pages are not promotions");
    s.pt.check_invariants().unwrap();
}

#[test]
fn a_fault_time_decider_and_a_daemon_cooperate() {
    // Region 0 huge at its first fault (first-region); regions 1..3 base at
    // fault, then promoted by the daemon at 1 s: its plan entries name it
    // (before the fix they were written with an empty name).
    let h = header(8 << 20, false);
    let mut s = kernel_sim(&h, os(1000.0), vec![Box::new(FirstRegion), Box::new(PromoteAt { at: 1.0 })]);
    for i in 0..2000u64 {
        s.step(Access::read(BASE + (i % 4) * MB2 + (i % 7) * 4096));
    }
    let plan = s.pt.executed_plan();
    let notes: Vec<&str> = plan.iter().map(|e| e.note.as_deref().unwrap()).collect();
    assert_eq!(plan.len(), 4, "{notes:?}");
    assert!(notes[0].starts_with("first-region at 0.000 s"), "{notes:?}");
    for (i, n) in notes[1..].iter().enumerate() {
        assert!(n.starts_with("promote-at at 1.0"), "{notes:?}");
        assert_eq!(plan[i + 1].start, BASE + (i as u64 + 1) * MB2);
    }
    assert_eq!(s.pt.stats().promotions, 3);
    assert_eq!(s.pt.huge_bytes(), 4 * MB2);
    s.pt.check_invariants().unwrap();
}

#[test]
fn khugepaged_and_pcc_on_one_kernel_fire_on_their_own_periods() {
    // Two shipped daemons of different kinds: khugepaged (linux, a scanner;
    // fault-time THP cannot allocate on memory fragmented this way with
    // defrag=never) and the PCC (hardware-fed reader). Hand count over 10.5 s
    // at 1,000 accesses/s: khugepaged passes at 1, 2, ..., 10 s = 10 (scan
    // and alloc sleeps both 1 s); PCC reads at 2.5, 5, 7.5, 10 s = 4.
    let spec = PolicySpec::parse("linux:defrag=never,scan_sleep_ms=1000,alloc_sleep_ms=1000+pcc:interval_s=2.5").unwrap();
    assert_eq!(spec.name, "linux+pcc");
    let h = header(8 << 20, false);
    let o = OsConfig { fragmentation: Some(Fragmentation::Ingens { fmfi: 0.99, pinned: false }), memory_bytes: Some(64 << 20), ..os(1000.0) };
    let mut s = kernel_sim(&h, o, spec.make().unwrap());
    for i in 0..10_500u64 {
        s.step(Access::write(BASE + (i * 4096 * 3) % (8 << 20)));
    }
    s.pt.finish();
    let d = s.pt.policy_params();
    assert_eq!(d[0]["policy"], "linux");
    assert_eq!(d[1]["policy"], "pcc");
    assert_eq!(d[0]["params"]["khugepaged"]["stats"]["passes"], 10, "{}", d[0]["params"]["khugepaged"]["stats"]);
    assert_eq!(d[1]["params"]["intervals"].as_array().map(|a| a.len()), Some(4));
    // Every plan entry names one of the two, and daemon entries never an empty name.
    for e in s.pt.executed_plan() {
        let n = e.note.as_deref().unwrap();
        assert!(n.starts_with("linux at ") || n.starts_with("pcc at "), "{n}");
    }
    s.pt.check_invariants().unwrap();
}

#[test]
fn spec_syntax_combines_policies_and_keeps_plus_in_values() {
    let s = PolicySpec::parse("pcc+linux:enabled=never").unwrap();
    assert_eq!((s.name.as_str(), s.label.as_str()), ("pcc+linux", "pcc+linux:enabled=never"));
    assert!(s.params.is_empty());
    assert_eq!(s.parts.len(), 2);
    assert_eq!(s.parts[1].params, [("enabled".to_string(), "never".to_string())]);
    // A '+' not followed by a policy name stays in the value.
    let s = PolicySpec::parse("pcc:interval_s=1e+1").unwrap();
    assert_eq!((s.name.as_str(), s.params.len()), ("pcc", 1));
    assert_eq!(s.params[0].1, "1e+1");
    assert_eq!(s.make().unwrap().len(), 1);
    let s = PolicySpec::parse("static:plan=a+b.json+linux").unwrap();
    assert_eq!(s.name, "static+linux");
    assert_eq!(s.parts[0].params[0].1, "a+b.json");
    // A single policy parses as before.
    let s = PolicySpec::parse("linux:enabled=madvise").unwrap();
    assert_eq!((s.name.as_str(), s.params.len(), s.parts.len()), ("linux", 1, 1));
    // Errors name the offending part.
    let e = |t: &str| PolicySpec::parse(t).err().unwrap().to_string();
    assert!(e("pcc+pcc").contains("policy 'pcc' appears twice in 'pcc+pcc'"), "{}", e("pcc+pcc"));
    assert!(e("linux+nosuch").contains("unknown policy 'nosuch' in 'linux+nosuch'"), "{}", e("linux+nosuch"));
    assert!(e("+linux").contains("empty policy name in '+linux'"), "{}", e("+linux"));
}

proptest::proptest! {
    /// Distinct registered policies with values that may hold '+' (but never
    /// '+' followed by a policy name: digits and '.e' only) parse back into
    /// exactly those parts, in order; arbitrary text never panics.
    #[test]
    fn spec_parts_roundtrip(
        picks in proptest::sample::subsequence((0..policy::REGISTRY.len()).collect::<Vec<_>>(), 1..4),
        vals in proptest::collection::vec("[0-9.e+]{1,6}", 4),
        order in proptest::bool::ANY,
        junk in "[a-z:=,+ ]{0,24}",
    ) {
        let _ = PolicySpec::parse(&junk);
        let mut picks = picks;
        if order {
            picks.reverse();
        }
        let parts: Vec<(String, String)> = picks.iter().zip(&vals).map(|(&i, v)| (policy::REGISTRY[i].0.to_string(), v.clone())).collect();
        let text = parts.iter().map(|(n, v)| format!("{n}:k={v}")).collect::<Vec<_>>().join("+");
        let s = PolicySpec::parse(&text).unwrap();
        proptest::prop_assert_eq!(s.parts.len(), parts.len());
        for (p, (n, v)) in s.parts.iter().zip(&parts) {
            proptest::prop_assert_eq!(&p.name, n);
            proptest::prop_assert_eq!(&p.params, &vec![("k".to_string(), v.clone())]);
        }
        proptest::prop_assert_eq!(s.name, parts.iter().map(|p| p.0.as_str()).collect::<Vec<_>>().join("+"));
    }
}
