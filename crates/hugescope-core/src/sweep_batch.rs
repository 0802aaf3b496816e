//! A batch of sweep points dealt over threads: how an experiment (utility
//! curve, fragmentation, PCC sizes; PCC MICRO'23 §4-§5) runs many
//! configurations of one trace on the cores it is given.
//!
//! Each point is a policy plus its own huge-page budget and fragmentation
//! (the `PolicySpec.os` override); everything else comes from the run's
//! configuration. Points that may share a pass (`sweep::share_class`: the
//! PCC's sizes and other decision-only knobs) go to one thread together, so
//! they ride one simulation until their decisions differ; the others are
//! dealt round robin. Each thread is one decoding pass of the trace with its
//! points simulated side by side. The `base` reference every result's
//! speedups need is one more unit of the batch (the requested plain `base`
//! point, or one added), simulated once on one thread, or read from the
//! results cache, rather than once beside each thread's points; it is
//! attached to every result at the end (base is deterministic, so this is
//! what each thread would have attached). Results come back in the order of
//! the points and do not depend on the number of threads (tested).

use crate::configuration::Config;
use crate::run::{self, PolicyResult, PolicySpec};
use crate::sweep;
use crate::{Error, Result};
use serde::Deserialize;

/// One point of a sweep: a policy string plus its own OS settings.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepPoint {
    pub policy: String,
    #[serde(default)]
    pub label: Option<String>,
    /// Huge-page budget as a share of the footprint (0..=1); None: no cap.
    #[serde(default)]
    pub budget: Option<f64>,
    /// Fragmentation level (0..=1) and method ("pcc" or "ingens").
    #[serde(default)]
    pub frag: Option<f64>,
    #[serde(default)]
    pub frag_method: Option<String>,
}

/// The policy specs of `points` under `cfg`: a point's own budget and
/// fragmentation go through the same OS knob declarations as `[os]`
/// (parsing, ranges, messages).
pub fn point_specs(cfg: &Config, points: &[SweepPoint]) -> Result<Vec<PolicySpec>> {
    let mut specs = Vec::with_capacity(points.len());
    for p in points {
        let mut spec = PolicySpec::parse(&p.policy)?;
        if let Some(l) = &p.label {
            spec.label = l.clone();
        }
        if p.budget.is_some() || p.frag.is_some() {
            let mut os = cfg.os.clone();
            let origin = format!("configuration '{}'", p.policy);
            os.set("budget", &serde_json::json!(p.budget), &origin)?;
            os.set("frag", &serde_json::json!(p.frag), &origin)?;
            if let Some(m) = &p.frag_method {
                os.set("frag_method", &serde_json::json!(m), &origin)?;
            }
            spec.os = Some(os.os_config());
        }
        specs.push(spec);
    }
    Ok(specs)
}

/// Which thread of `threads` each spec goes to: specs of one share class
/// together, a lone spec on its own, units dealt round robin in order of
/// first appearance. Also returns the number of threads worth starting
/// (no more than there are units).
pub fn deal(specs: &[PolicySpec], common: &crate::os::OsConfig, threads: usize) -> (Vec<usize>, usize) {
    let mut units: Vec<Option<String>> = Vec::new();
    let unit_of: Vec<usize> = specs
        .iter()
        .map(|s| match sweep::share_class(s, common) {
            Some(c) => match units.iter().position(|u| u.as_ref() == Some(&c)) {
                Some(u) => u,
                None => {
                    units.push(Some(c));
                    units.len() - 1
                }
            },
            None => {
                units.push(None);
                units.len() - 1
            }
        })
        .collect();
    let threads = threads.clamp(1, units.len().max(1));
    (unit_of.iter().map(|u| u % threads).collect(), threads)
}

/// Simulate `points` over the trace at `path` on up to `threads` threads.
/// `share=false` simulates every point on its own (the same results, byte
/// for byte; for measuring what sharing saves). Results in point order.
pub fn run_points(path: &str, cfg: &Config, points: &[SweepPoint], threads: usize, share: bool) -> Result<Vec<PolicyResult>> {
    if points.is_empty() {
        return Err(Error::input("no configuration to simulate"));
    }
    let mut specs = point_specs(cfg, points)?;
    let npoints = specs.len();
    // The base reference: a unit of its own (`run::plain_base`: a requested
    // plain base is the reference itself).
    let base_at = run::plain_base(&specs).unwrap_or_else(|| {
        specs.push(PolicySpec::named("base"));
        npoints
    });
    let common = cfg.os.os_config();
    let (thread_of, threads) = deal(&specs, &common, threads);
    // The reference is attached below, once for all threads.
    let mut opts = cfg.run_options(false);
    // One simulation per thread already fills the cpus given.
    opts.inline_decode = threads > 1;
    let groups: Vec<Vec<usize>> = (0..threads)
        .map(|t| (0..specs.len()).filter(|&i| thread_of[i] == t).collect())
        .collect();
    let outputs: Vec<Result<Vec<PolicyResult>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = groups
            .iter()
            .map(|g| {
                let group: Vec<PolicySpec> = g.iter().map(|&i| specs[i].clone()).collect();
                let (machine, common, opts) = (&cfg.machine, &common, &opts);
                scope.spawn(move || {
                    if share {
                        sweep::simulate_shared(path, machine, common, &group, opts)
                    } else {
                        run::simulate_policies(path, machine, common, &group, opts)
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(Error::input("a simulation thread panicked"))))
            .collect()
    });
    let mut slots: Vec<Option<PolicyResult>> = (0..specs.len()).map(|_| None).collect();
    for (g, out) in groups.iter().zip(outputs) {
        for (&i, r) in g.iter().zip(out?) {
            slots[i] = Some(r);
        }
    }
    let results: Vec<PolicyResult> = slots.into_iter().map(|r| r.expect("every configuration has a result")).collect();
    Ok(run::attach_base(results, Some(base_at), npoints))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(s: &str) -> PolicySpec {
        PolicySpec::parse(s).unwrap()
    }

    #[test]
    fn one_share_class_goes_to_one_thread_and_lone_specs_are_dealt_round_robin() {
        let os = crate::os::OsConfig::default();
        // Three pcc sizes share a class (`entries` is decision-only); linux and
        // base run alone: units pcc, linux, base -> threads 0, 1, 0.
        let specs = [spec("pcc:entries=4"), spec("linux"), spec("pcc:entries=64"), spec("base"), spec("pcc:entries=1024")];
        let (thread_of, threads) = deal(&specs, &os, 2);
        assert_eq!(threads, 2);
        assert_eq!(thread_of, vec![0, 1, 0, 0, 0]);
        // Never more threads than units; at least one.
        assert_eq!(deal(&specs, &os, 64).1, 3);
        assert_eq!(deal(&specs[..1], &os, 0).1, 1);
    }
}
