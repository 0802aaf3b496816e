//! Sweeps that share work: a shared pass with fork on divergence.
//!
//! Configurations that differ only in what they decide (the PCC's size,
//! counters, replacement and the OS side's selection knobs: PCC §3.2-§3.3,
//! Fig. 6's sweep of 4..1024 entries) run as one simulation while their
//! shared state is identical: one set of MMUs, one kernel, with each
//! configuration's PCC fed every walk (`os::members`). PCC updates are off
//! the walk's critical path in hardware (§3.2) and cheap here; the TLBs,
//! page tables and clock are simulated once for the whole group.
//!
//! A pcc configuration changes the shared state only when it reads its PCCs
//! (a timer: PCC §3.3 steps A-C). There the group stops: each member runs its
//! read on a copy of the state, and members whose resulting states are equal
//! (kernel, MMUs and segment unit, compared whole) stay one group; the others
//! continue as groups of their own. Exact by construction: every member
//! follows the same sequence of states as its own run would, so its result is
//! byte-identical to a separate run (tested against `run::simulate_policies`).
//!
//! Why not LRU stack distances (one pass gives every size's misses): they
//! are exact only for a stack algorithm without feedback, and the PCC is
//! neither. Its default replacement is LFU with counters that start at 0 on
//! insertion and are halved together on saturation, so which entries a table
//! holds depends on its size in a way no stack order captures; and its reads
//! promote regions, which changes later walks (docs/assumptions.md).

use crate::config::MachineConfig;
use crate::hw::{PageTable, RadixWalker, Segments};
use crate::os::kernel::{Kernel, OsConfig};
use crate::os::members::MemberParts;
use crate::run::{self, PassSink, PolicyResult, PolicySpec, Prepared, Run, RunOptions};
use crate::sim::{Simulator, TraceInfo};
use crate::Result;

type Sim = Simulator<Kernel, RadixWalker, Segments>;

/// The share class of `spec` under the run's OS configuration `os`: specs
/// with the same class may ride one pass; None for one that runs alone.
/// Only a lone policy that declares decision-only parameters qualifies
/// (`Policy::decision_only_params`, the `pcc` policy's): it acts on timers
/// alone (no fault-time or per-walk decisions), so its PCC is its only
/// state between reads. Its huge-page budget may differ (the utility
/// curve's N%: PCC §4).
pub fn share_class(spec: &PolicySpec, os: &OsConfig) -> Option<String> {
    let [part] = spec.parts.as_slice() else {
        return None;
    };
    let decision_only = spec.make().ok()?.first()?.decision_only_params()?;
    let mut fixed: Vec<&(String, String)> = part
        .params
        .iter()
        .filter(|(k, _)| !decision_only.contains(&k.as_str()))
        .collect();
    fixed.sort();
    // The configuration's OS settings as `run::build` resolves them, less
    // the budget: a member's own (`os::members`), read only by promotions.
    let own = spec.os.as_ref().map(|o| OsConfig {
        time: o.time.or(os.time),
        ..o.clone()
    });
    let shared = OsConfig {
        budget: None,
        ..own.unwrap_or_else(|| os.clone())
    };
    Some(format!("{} {fixed:?} {shared:?}", part.name))
}

/// A group of configurations sharing one simulation: `members[0]` is
/// installed in the kernel, the others ride (`os::members`), in order.
struct Group {
    sim: Sim,
    members: Vec<usize>,
}

/// Counters of a shared pass, for the bench and the tests.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ShareStats {
    /// Groups at the start (configurations that share a pass count once).
    pub groups_at_start: usize,
    /// Groups at the end.
    pub groups_at_end: usize,
    /// Decision points where a group of two or more ran its members' daemons.
    pub decisions: u64,
    /// Times a group split.
    pub splits: u64,
    /// Access index of the first split (None: no group ever split).
    pub first_split_at: Option<u64>,
}

/// The shared state of `sim` (no member installed) as one comparable text:
/// every field of the kernel, the MMUs and the segment unit.
fn state_text(sim: &Sim) -> String {
    format!(
        "{:?}\n{}\n{:?}\n{:?}",
        sim.pt,
        sim.pt.phys().state_text(),
        sim.mmus,
        sim.seg
    )
}

/// A cheap summary that differs whenever a decision did anything visible
/// (the full comparison runs only where it matches).
fn fingerprint(sim: &Sim) -> String {
    let k = &sim.pt;
    format!(
        "{:?} {} {} {:?}",
        k.stats(),
        k.huge_bytes(),
        k.executed_plan().len(),
        k.clock()
    )
}

/// A state a decision reached, and the members that reached it.
struct Reached {
    sim: Sim,
    fingerprint: String,
    /// The full text, once a comparison needed it.
    text: Option<String>,
    members: Vec<usize>,
    parts: Vec<MemberParts>,
}

/// Run the daemons due in group `g` once per member, each on its own copy
/// of the state, and regroup the members by the state they reach.
fn decide(mut g: Group, stats: &mut ShareStats, at: u64) -> Vec<Group> {
    stats.decisions += 1;
    let mut parts = vec![g.sim.pt.take_member()];
    parts.extend(g.sim.pt.take_riding_members());
    let n = parts.len();
    let mut bare = Some(g.sim);
    let mut out: Vec<Reached> = Vec::new();
    for (j, (m, spec)) in parts.into_iter().zip(g.members).enumerate() {
        let mut s = if j + 1 < n {
            bare.as_ref()
                .expect("state kept for the last member")
                .clone()
        } else {
            bare.take().expect("state")
        };
        s.pt.install_member(m);
        s.pt.run_deferred_timers();
        if s.pt.has_shootdowns() {
            s.apply_shootdowns();
        }
        let m = s.pt.take_member();
        let fp = fingerprint(&s);
        let mut text = None;
        let mut found = None;
        for (i, o) in out.iter_mut().enumerate() {
            if o.fingerprint != fp {
                continue;
            }
            let theirs = o.text.get_or_insert_with(|| state_text(&o.sim));
            if *text.get_or_insert_with(|| state_text(&s)) == *theirs {
                found = Some(i);
                break;
            }
        }
        match found {
            Some(i) => {
                out[i].members.push(spec);
                out[i].parts.push(m);
            }
            None => out.push(Reached {
                sim: s,
                fingerprint: fp,
                text,
                members: vec![spec],
                parts: vec![m],
            }),
        }
    }
    if out.len() > 1 {
        stats.splits += 1;
        stats.first_split_at.get_or_insert(at);
    }
    out.into_iter()
        .map(
            |Reached {
                 mut sim,
                 members,
                 parts,
                 ..
             }| {
                let mut it = parts.into_iter();
                sim.pt
                    .install_member(it.next().expect("a group has a member"));
                for m in it {
                    sim.pt.add_riding_member(m);
                }
                sim.pt.set_defer_timers(members.len() > 1);
                Group { sim, members }
            },
        )
        .collect()
}

/// The pass over groups: each steps through each access; a group whose
/// daemons came due decides and may split, the parts going on from the next
/// access.
struct Groups {
    groups: Vec<Group>,
    at: u64,
    model_bytes: u64,
    model_limit: u64,
    stats: ShareStats,
}

impl PassSink for Groups {
    fn accesses(&mut self, recs: &[u64]) {
        let mut work: Vec<(Group, usize)> = self.groups.drain(..).rev().map(|g| (g, 0)).collect();
        let mut done = Vec::with_capacity(work.len());
        while let Some((mut g, from)) = work.pop() {
            let mut i = from;
            while i < recs.len() {
                i += g.sim.step_records_while(&recs[i..], |pt| !pt.timers_due());
                if g.sim.pt.timers_due() {
                    // A cancelled run fires no more daemons (`Kernel`), so
                    // its timers stay due and every access would come here
                    // and compare whole states: stop this chunk instead (the
                    // pass's per-chunk check then ends the run, whose
                    // result is discarded).
                    if crate::cancel::requested() {
                        break;
                    }
                    let mut parts = decide(g, &mut self.stats, self.at + i as u64);
                    g = parts.remove(0);
                    for p in parts.into_iter().rev() {
                        work.push((p, i));
                    }
                }
            }
            done.push(g);
        }
        self.groups = done;
        self.at += recs.len() as u64;
    }
    fn marker(&mut self, label: &str) {
        for g in self.groups.iter_mut() {
            crate::trace::AccessSink::progress(&mut g.sim, label);
        }
    }
    fn chunk_done(&mut self, n: u64) -> Result<()> {
        // Each member counts as the run of its own it stands for.
        let pages = self
            .groups
            .iter()
            .map(|g| g.sim.pt.inferred_pages() * g.members.len() as u64)
            .sum();
        run::check_inferred_pages(pages, self.model_bytes, self.model_limit, n)
    }
}

/// `run::simulate_policies` with a shared pass: the same results, byte for
/// byte, with configurations of one share class (`share_class`) simulated
/// together until their decisions differ.
pub fn simulate_shared(
    path: &str,
    machine: &MachineConfig,
    os: &OsConfig,
    specs: &[PolicySpec],
    opts: &RunOptions,
) -> Result<Vec<PolicyResult>> {
    simulate_shared_stats(path, machine, os, specs, opts).map(|(r, _)| r)
}

/// `simulate_shared` and the counters of its sharing.
pub fn simulate_shared_stats(
    path: &str,
    machine: &MachineConfig,
    os: &OsConfig,
    specs: &[PolicySpec],
    opts: &RunOptions,
) -> Result<(Vec<PolicyResult>, ShareStats)> {
    let Prepared {
        header,
        runs,
        assembly,
        model_bytes,
        model_limit,
    } = run::prepare(path, machine, os, specs, opts)?;
    let labels: Vec<(PolicySpec, OsConfig)> = runs
        .iter()
        .map(|r| (r.spec.clone(), r.os.clone()))
        .collect();
    let mut groups: Vec<Group> = Vec::new();
    let mut classes: Vec<(String, usize)> = Vec::new();
    for (i, mut r) in runs.into_iter().enumerate() {
        // The base reference added for the speedups runs alone.
        let class = assembly
            .spec_of(i)
            .and_then(|s| share_class(&specs[s], os));
        let joined = class
            .as_ref()
            .and_then(|c| classes.iter().find(|(k, _)| k == c))
            .map(|&(_, gi)| gi);
        match joined {
            Some(gi) => {
                // Same class: the same kernel build and the same daemon
                // schedule, so the shared states are equal (checked).
                let m = r.sim.pt.take_member();
                let g = &mut groups[gi];
                let lead = g.sim.pt.take_member();
                debug_assert_eq!(
                    state_text(&g.sim),
                    state_text(&r.sim),
                    "a share class starts from one state"
                );
                g.sim.pt.install_member(lead);
                g.sim.pt.add_riding_member(m);
                g.sim.pt.set_defer_timers(true);
                g.members.push(i);
            }
            None => {
                if let Some(c) = class {
                    classes.push((c, groups.len()));
                }
                groups.push(Group {
                    sim: r.sim,
                    members: vec![i],
                });
            }
        }
    }
    let stats = ShareStats {
        groups_at_start: groups.len(),
        ..Default::default()
    };
    let mut pass = Groups {
        groups,
        at: 0,
        model_bytes,
        model_limit,
        stats,
    };
    // With every result read from the results cache this still decodes the
    // trace, checking the CRCs the cache key relies on (`run::simulate_policies`).
    run::pass(path, opts, &mut pass)?;
    let Groups {
        groups, mut stats, ..
    } = pass;
    stats.groups_at_end = groups.len();
    let info = TraceInfo::new(path, &header);
    let mut results: Vec<Option<PolicyResult>> = (0..labels.len()).map(|_| None).collect();
    for mut g in groups {
        let mut parts = vec![g.sim.pt.take_member()];
        parts.extend(g.sim.pt.take_riding_members());
        g.sim.pt.set_defer_timers(false);
        let n = parts.len();
        let mut bare = Some(g.sim);
        for (j, (m, i)) in parts.into_iter().zip(g.members).enumerate() {
            let mut sim = if j + 1 < n {
                bare.as_ref().expect("state kept").clone()
            } else {
                bare.take().expect("state")
            };
            sim.pt.install_member(m);
            let (spec, os) = labels[i].clone();
            results[i] = Some(run::finish(&mut Run { spec, os, sim }, &info));
        }
    }
    let results = results
        .into_iter()
        .map(|r| r.expect("every configuration has a result"))
        .collect();
    Ok((assembly.finish(results), stats))
}
