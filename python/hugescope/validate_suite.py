"""Validation that can fail: predicted vs measured speedup of many plans over
a suite of workloads, with the model's parameters fitted on the other
workloads (leave-one-workload-out) and measurement noise accounted for
(issue #15).

    from hugescope import validate_suite as vs
    df = vs.suite("default", rounds=3, out="results")
    df.attrs["meta"]["summary"]["loo"]      # Spearman, median abs error, plans above the noise floor

Per workload:

1. trace it; rank its 2 MiB regions by each policy at several k (``k`` =
   fractions of the regions ``MADV_COLLAPSE`` can make huge; one budgeted
   simulation per policy and k, ``validate.rankings``); the distinct region
   sets are the plans, with base (nothing huge) and all huge (every region);
2. simulate each plan's static page map: the counters the cost model reads
   (``cost_model.features``);
3. measure natively in interleaved rounds (base, plan A, plan B, ..., base),
   every run a fresh process pinned to one CPU with memory compacted first
   (``noise``); a plan's measured speedup in a round = the round's base time
   (geometric mean of its two base runs) / the plan's time; reported as the
   median (min, max) over rounds;
4. the noise floor = the largest |ln| ratio of a round's two base runs; a plan
   within it of 1 ties with base and is not ranked; ranked plans within it of
   each other share a rank (``noise.tie_groups``).

Then the model (``cost_model``) is fitted on every workload but one and
predicts the held-out one's plans (LOO), and fitted on all (in-sample); per
workload and overall: Spearman's rank correlation over ranked plans and the
median absolute relative error of the predicted speedup.
"""

from __future__ import annotations

import functools
import math
import os
import re
import statistics
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ._core import HugescopeError
from ._io import write_json

#: Named suites: (label, workload, parameters). Sizes chosen so a run's
#: algorithm phase takes ~0.3-1.5 s on the 2-core development VM and the whole
#: default suite ~15-20 minutes (docs/linux.md, "validate --suite").
SUITES: Dict[str, List[Tuple[str, str, Dict[str, Any]]]] = {
    "default": [
        ("gups-1g", "gups", {"size": "1GiB", "updates": "12M"}),
        ("gups-256m", "gups", {"size": "256MiB", "updates": "20M"}),
        ("bfs-td", "bfs", {"scale": 20, "direction_optimizing": False}),
        ("bfs-do", "bfs", {"scale": 21, "direction_optimizing": True}),
        ("pagerank", "pagerank", {"scale": 19, "iterations": 3}),
        ("kv", "kv", {"records": "1M", "ops": "2M"}),
        ("btree", "btree", {"records": "1M", "ops": "1M"}),
    ],
    # Seconds in all: for trying the command (and the tests).
    "tiny": [
        ("gups-16m", "gups", {"size": "16MiB", "updates": "200k"}),
        ("kv-small", "kv", {"records": "20k", "ops": "50k"}),
    ],
}
#: k as fractions of a workload's candidate regions: a geometric series up to
#: all huge (1), so the plans span the range of speedups. (1/16 too would add
#: a quarter to the simulations and mostly plans inside the noise floor.)
DEFAULT_FRACTIONS = (1 / 8, 1 / 4, 1 / 2)
#: HawkEye as the paper describes it (4096 pages scanned per interval) and
#: with the authors' full tracking (scan_pages=0).
DEFAULT_POLICIES = ("pcc", "oracle", "hawkeye", "hawkeye:scan_pages=0")
DEFAULT_ROUNDS = 3
BASE, HUGE_PLAN = "base", "all huge"

HOW_MEASURED = ("interleaved rounds (base, each plan, base again), every run a fresh process pinned to CPU {cpu} "
                "(sched_setaffinity), {prep}; {warmup} warm-up base run(s) first; {clock}, collapses excluded; "
                "a plan's speedup in a round = the "
                "geometric mean of the round's two base times / the plan's time; median (min, max) over {rounds} "
                "round(s)")
#: A workload run's measured time per clock (``noise.CLOCKS``).
PHASE_CLOCKS = {
    "wall": "wall clock (std::time::Instant) around the workload's algorithm phase",
    "cpu": "CPU time of the workload thread over its algorithm phase (clock_gettime CLOCK_THREAD_CPUTIME_ID, "
           "the scheduler's runtime, user + system; time preempted or stolen by the host is not in it)",
}
HOW_FLOOR = ("noise floor = the largest |ln(t_a / t_b)| of a round's two base runs (identical runs) over the "
             "rounds; a plan whose |ln(speedup)| is within it ties with base and is not ranked; ranked plans "
             "within it of each other share a rank (groups anchored on their smallest speedup)")
HOW_PREDICTED = ("cost model (cost_model.py) on the counters of the plan's static page map simulated over the "
                 "workload's trace; predicted speedup = predicted seconds of base / of the plan; LOO: parameters "
                 "fitted on the other workloads; in-sample: fitted on all")


# ---------------------------------------------------------------- the suite's pieces

def resolve(suite: Optional[str] = None, specs: Sequence[str] = ()) -> List[Tuple[str, str, Dict[str, Any]]]:
    """The workloads to run: a named suite's, then each ``NAME[:k=v,...]``
    spec (labelled by the spec itself). Labels must differ."""
    from .calibrate import _label, parse_workload

    out = []
    if suite is not None:
        if suite not in SUITES:
            raise ValueError(f"unknown suite '{suite}' (suites: {', '.join(SUITES)})")
        out += [(label, name, dict(params)) for label, name, params in SUITES[suite]]
    for spec in specs:
        name, params = parse_workload(spec)
        out.append((_label(name, params), name, params))
    if not out:
        raise ValueError("no workloads: give a suite (--suite default) or workloads (--workload NAME[:k=v,...])")
    labels = [o[0] for o in out]
    dup = sorted({x for x in labels if labels.count(x) > 1})
    if dup:
        raise ValueError(f"workload(s) given twice: {', '.join(dup)}")
    return out


def check_policies(policies: Sequence[str], what: str = "policies") -> List[str]:
    """``policies`` stripped and without repeats; an empty list or a policy
    the core does not know (the part before ``:``) is refused, naming
    ``what`` (the option)."""
    from . import api

    out = list(dict.fromkeys(str(p).strip() for p in policies if str(p).strip()))
    if not out:
        raise ValueError(f"{what}: empty list")
    known = set(api.policies())
    for p in out:
        if p.partition(":")[0] not in known:
            raise ValueError(f"{what}: unknown policy '{p}' (known: {', '.join(sorted(known))})")
    return out


def require_measurable(what: str) -> None:
    """Refuse native measurements of plans (``what`` names the command)
    unless THP is in 'madvise' mode: base pages measurable, plans applicable."""
    from . import linux

    thp = linux.thp_state()
    if not thp["baseline_available"] or not thp["plans_applicable"]:
        raise HugescopeError(f"THP mode for 2 MiB pages is '{thp['pmd_mode']}' (enabled: "
                             f"{thp['enabled']['selected']}): {what} needs 'madvise' (base pages measurable, "
                             "plans applicable)")


def plan_ks(n: int, fractions: Sequence[float]) -> List[int]:
    """The k of each fraction of ``n`` candidate regions (rounded, at least
    1, below n: all n is the all-huge plan), ascending, without repeats."""
    ks = set()
    for f in fractions:
        if not (isinstance(f, (int, float)) and 0 < f < 1):
            raise ValueError(f"fractions must lie strictly between 0 and 1, got {f!r}")
        k = max(1, int(round(n * f)))
        if k < n:
            ks.add(k)
    return sorted(ks)


def distinct_plans(rank: Dict[Tuple[str, int], List[int]], policies: Sequence[str], candidates: Sequence[int]
                   ) -> List[Dict[str, Any]]:
    """One plan per distinct region set: base, the rankings' top-k sets (by
    size, then policy order), all huge. Each names every (policy, k) that gave
    it (``sources``); a ranking that chose nothing is base's source."""
    all_set = frozenset(candidates)
    plans: Dict[frozenset, Dict[str, Any]] = {
        frozenset(): {"plan": BASE, "regions": [], "sources": []}}
    keys = sorted(rank, key=lambda pk: (len(rank[pk]), policies.index(pk[0]), pk[1]))
    for pol, k in keys:
        regs = frozenset(rank[(pol, k)])
        src = f"{pol} k={k}"
        if regs == all_set:
            plans.setdefault(regs, {"plan": HUGE_PLAN, "regions": sorted(regs), "sources": []})
        entry = plans.setdefault(regs, {"plan": f"{pol} k={k}", "regions": sorted(regs), "sources": []})
        entry["sources"].append(src)
    plans.setdefault(all_set, {"plan": HUGE_PLAN, "regions": sorted(all_set), "sources": []})
    order = [plans[frozenset()]] + [p for key, p in plans.items() if key and key != all_set] + [plans[all_set]]
    return order


def _file_label(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label)


def prepare(label: str, name: str, params: Dict[str, Any], policies: Sequence[str], fractions: Sequence[float],
            machine: Dict[str, Any], duration: float, seed: int, trace_dir: str,
            log: Callable[[str], None] = lambda s: None) -> Dict[str, Any]:
    """Trace, rank and simulate one workload: its plans (``distinct_plans``)
    with the model's features of each plan's static map."""
    from . import workloads
    from .validate import candidate_regions, rankings

    layout = workloads.layout(name, **params)
    candidates = candidate_regions(layout)
    if not candidates:
        raise HugescopeError(f"{label}: no region holds a whole 2 MiB page; nothing to promote")
    ks = plan_ks(len(candidates), fractions)
    trace = os.path.join(trace_dir, f"{_file_label(label)}.hst")
    log(f"{label}: tracing")
    info = workloads.trace(name, trace, **params)
    log(f"{label}: ranking {len(candidates)} regions by {', '.join(policies)} at k = {', '.join(map(str, ks))}")
    rank = rankings(trace, list(policies), ks, candidates, int(layout["footprint"]), seed=seed,
                    duration=float(duration), **{k: v for k, v in machine.items() if v is not None})
    plans = distinct_plans(rank, list(policies), candidates)
    sim_machine = plan_features(trace, plans, machine, lambda s: log(f"{label}: {s}"))
    return {"label": label, "workload": name, "params": params, "candidates": len(candidates), "ks": ks,
            "footprint": int(layout["footprint"]), "accesses": info["summary"]["accesses"],
            "trace_result": info.get("result"), "plans": plans, "machine": sim_machine}


def plan_features(trace: str, plans: List[Dict[str, Any]], machine: Dict[str, Any],
                  log: Callable[[str], None] = lambda s: None) -> Optional[Dict[str, Any]]:
    """Give each plan (``{"plan", "regions", ...}``) its ``plan_json`` (None
    for no region) and the model's ``features`` of its static page map
    simulated over ``trace``; returns the simulated machine's description."""
    from . import api, cost_model
    from .validate import make_plan

    sim_machine = None
    with tempfile.TemporaryDirectory(prefix="hugescope-suite-") as tmp:
        for i, p in enumerate(plans):
            p["plan_json"] = make_plan(p["regions"]) if p["regions"] else None
            if p["regions"]:
                path = os.path.join(tmp, f"plan-{i}.json")
                write_json(path, p["plan_json"])
                pages = path
            else:
                pages = "4k"
            log(f"simulating {p['plan']} ({len(p['regions'])} regions)")
            sim = api.simulate(trace, pages=pages, **machine)
            p["features"] = cost_model.features(sim)
            sim_machine = sim_machine or sim.record.machine.to_dict()
    return sim_machine


def native_runner(name: str, params: Dict[str, Any], cpu: Optional[int], nice: Optional[int] = None
                  ) -> Callable[[Optional[dict]], Dict[str, Any]]:
    """One fresh-process native run of the workload under a plan (None:
    base), at nice value ``nice`` (None: this process's)."""
    from . import linux

    def run(plan_json: Optional[dict]) -> Dict[str, Any]:
        # No samples: their page-table walks would slow base pages more than
        # huge ones (linux.run, ``sample_ms``); coverage comes from PAGEMAP_SCAN.
        r = linux.run(name, plan=plan_json, repeat=1, warmup=0, cpu=cpu, nice=nice, sample_ms=0, **params).check()
        s = r.summary
        rec = r.runs[0]
        return {"wall_s": s["wall_s"]["median"], "user_s": s["user_s"]["median"], "sys_s": s["sys_s"]["median"],
                "cpu_s": s["cpu_s"]["median"], "coverage": (s.get("coverage") or {}).get("median"),
                "collapsed": sum(o.get("regions_collapsed", 0) for o in r.outcomes),
                "setup_s": rec.get("setup_s"), "cpus": rec.get("cpus"),
                "result": json_key(rec.get("result"))}
    return run


def json_key(v) -> str:
    import json
    return json.dumps(v, sort_keys=True)


def measure(prep: Dict[str, Any], rounds: int, warmup: int, runner: Callable[[Optional[dict]], Dict[str, Any]],
            prepare_memory: Callable[[], Dict[str, Any]], log: Callable[[str], None] = lambda s: None,
            clock: str = "wall") -> List[Dict[str, Any]]:
    """Interleaved rounds of one workload's plans: base, every plan, base
    again, each run timed on ``clock`` (``noise.CLOCKS``)."""
    from . import noise

    by_name = {p["plan"]: p for p in prep["plans"]}
    order = [BASE] + [p["plan"] for p in prep["plans"] if p["plan"] != BASE] + [BASE]
    # Every run with the load it ran under (as advise): what a wide floor
    # came from.
    run_one = noise.with_load(lambda n: runner(by_name[n]["plan_json"]))
    return noise.interleaved(order, run_one, rounds, warmup,
                             prepare=prepare_memory, log=lambda s: log(f"{prep['label']}: {s}"), clock=clock)


# ---------------------------------------------------------------- analysis (pure)

def speedups(prep: Dict[str, Any], runs: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Per plan: measured speedup per round against the round's base; the
    noise floor from the base pairs; the times the model is given."""
    from . import noise

    rounds = sorted({r["round"] for r in runs})
    base_pairs, base_t = [], {}
    for rd in rounds:
        b = [r["t_s"] for r in runs if r["round"] == rd and r["name"] == BASE]
        if len(b) != 2:
            raise ValueError(f"{prep['label']}: round {rd} has {len(b)} base runs, not 2")
        base_pairs.append(b)
        base_t[rd] = math.sqrt(b[0] * b[1])
    floor = noise.noise_floor(base_pairs)
    t_base = statistics.median(base_t.values())
    out = {}
    for p in prep["plans"]:
        if p["plan"] == BASE:
            ratios = [b[0] / b[1] for b in base_pairs]
            out[BASE] = {"speedup": 1.0, "min": min(ratios), "max": max(ratios), "t": t_base,
                         "rounds": [1.0] * len(rounds)}
            continue
        per = {r["round"]: r for r in runs if r["name"] == p["plan"]}
        s = [base_t[rd] / per[rd]["t_s"] for rd in rounds]
        med = statistics.median(s)
        out[p["plan"]] = {"speedup": med, "min": min(s), "max": max(s), "t": t_base / med, "rounds": s,
                          "coverage": statistics.median([per[rd]["coverage"] for rd in rounds])
                          if all(per[rd].get("coverage") is not None for rd in rounds) else None,
                          "collapsed": per[rounds[0]].get("collapsed")}
    results = {r.get("result") for r in runs if r.get("result") is not None}
    return {"floor": floor, "t_base": t_base, "plans": out, "base_pairs": base_pairs,
            "results_agree": len(results) <= 1}


def points(prep: Dict[str, Any], meas: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The cost model's points of one workload (``cost_model`` docstring)."""
    huge = next(p for p in prep["plans"] if p["plan"] == HUGE_PLAN)
    t_huge = meas["plans"][HUGE_PLAN]["t"]
    return [{"workload": prep["label"], "plan": p["plan"], "features": p["features"],
             "features_huge": huge["features"], "t_huge": t_huge, "t": meas["plans"][p["plan"]]["t"]}
            for p in prep["plans"]]


def loo_splits(labels: Sequence[str]) -> List[Tuple[str, List[str]]]:
    """(held-out workload, the workloads fitted on) for each workload."""
    labels = list(dict.fromkeys(labels))
    if len(labels) < 2:
        raise ValueError("leave-one-workload-out needs at least two workloads")
    return [(w, [o for o in labels if o != w]) for w in labels]


def predict_all(pts: List[Dict[str, Any]], params: Dict[str, float]) -> Dict[Tuple[str, str], float]:
    """(workload, plan) -> predicted speedup over the workload's base."""
    from . import cost_model

    base = {p["workload"]: cost_model.predict_seconds(p, params) for p in pts if p["plan"] == BASE}
    return {(p["workload"], p["plan"]): base[p["workload"]] / cost_model.predict_seconds(p, params) for p in pts}


def _mae(rows: List[Dict[str, Any]], key: str) -> Optional[float]:
    """Median of |predicted / measured - 1| over ``rows`` (None without rows)."""
    return statistics.median(abs(r[key] / r["measured"] - 1) for r in rows) if rows else None


def stats(rows: List[Dict[str, Any]], key: str) -> Dict[str, Any]:
    """Spearman and median absolute error of ``key`` (a predicted speedup)
    against the measured speedup: per workload and overall, over the ranked
    plans (above the noise floor; measured ties share a rank) and, for the
    error, also over every plan but base. ``distinct``: the ranked plans'
    tie groups (measured speedups chance can tell apart)."""
    from . import noise
    from .validate import spearman

    per, pooled_p, pooled_m = {}, [], []
    for w in dict.fromkeys(r["workload"] for r in rows):
        rs = [r for r in rows if r["workload"] == w and r["plan"] != BASE]
        ranked = [r for r in rs if r["ranked"]]
        pred = [r[key] for r in ranked]
        meas = noise.tied([r["measured"] for r in ranked], ranked[0]["floor"]) if ranked else []
        per[w] = {"plans": len(rs), "ranked": len(ranked), "distinct": len(set(meas)), "spearman": spearman(pred, meas),
                  "median_abs_error": _mae(ranked, key), "median_abs_error_all": _mae(rs, key)}
        pooled_p += pred
        pooled_m += meas
    ranked = [r for r in rows if r["plan"] != BASE and r["ranked"]]
    every = [r for r in rows if r["plan"] != BASE]
    return {"per_workload": per, "plans": len(every), "ranked": len(ranked),
            "distinct": sum(v["distinct"] for v in per.values()),
            "spearman": spearman(pooled_p, pooled_m),
            "median_abs_error": _mae(ranked, key), "median_abs_error_all": _mae(every, key)}


def analyse(preps: List[Dict[str, Any]], meas: Dict[str, Dict[str, Any]],
            start: Optional[Dict[str, float]] = None) -> Dict[str, Any]:
    """Fit (LOO and in-sample), predict, and score. ``meas``: label ->
    ``speedups()``. Returns ``rows`` (one per workload and plan), ``params``
    (in-sample), ``loo_params`` (held-out label -> params) and ``summary``."""
    from . import cost_model, noise

    pts = [pt for prep in preps for pt in points(prep, meas[prep["label"]])]
    labels = [prep["label"] for prep in preps]
    params = cost_model.fit(pts, start)
    pred_in = predict_all(pts, params)
    pred_loo, loo_params = {}, {}
    for held, train in loo_splits(labels):
        q = cost_model.fit([p for p in pts if p["workload"] in train], start)
        loo_params[held] = q
        pred_loo.update(predict_all([p for p in pts if p["workload"] == held], q))
    rows = []
    for prep in preps:
        m = meas[prep["label"]]
        floor = m["floor"]
        plans = [p for p in prep["plans"] if p["plan"] != BASE]
        ranked = {p["plan"]: noise.above_floor(m["plans"][p["plan"]]["speedup"], floor) for p in plans}
        ranked_names = [p["plan"] for p in plans if ranked[p["plan"]]]
        groups = dict(zip(ranked_names, noise.tie_groups([m["plans"][n]["speedup"] for n in ranked_names], floor)))
        for p in prep["plans"]:
            mp = m["plans"][p["plan"]]
            key = (prep["label"], p["plan"])
            rows.append({"workload": prep["label"], "plan": p["plan"], "sources": "; ".join(p["sources"]),
                         "regions": len(p["regions"]), "measured": mp["speedup"], "measured_min": mp["min"],
                         "measured_max": mp["max"], "predicted_loo": pred_loo[key], "predicted_in": pred_in[key],
                         "floor": floor, "ranked": bool(ranked.get(p["plan"], False)),
                         "tie_group": groups.get(p["plan"]), "collapsed": mp.get("collapsed"),
                         "coverage": mp.get("coverage"), "walk_refs": p["features"]["walk_refs"],
                         "walks": p["features"].get("walks")})
    summary = {"loo": stats(rows, "predicted_loo"), "in_sample": stats(rows, "predicted_in")}
    return {"rows": rows, "params": params, "loo_params": loo_params, "summary": summary}


def _implied_cycles(prep: Dict[str, Any], m: Dict[str, Any]) -> Optional[float]:
    """(measured base time - measured all-huge time) x this host's clock /
    (simulated walk references of base - of all huge): the cycles per walk
    reference the gap implies if translation were all of it (None without a
    difference or a known clock)."""
    from .calibrate import host_ghz

    feats = {p["plan"]: p["features"] for p in prep["plans"]}
    refs = feats[BASE]["walk_refs"] - feats[HUGE_PLAN]["walk_refs"]
    ghz = host_ghz()
    if refs <= 0 or not ghz:
        return None
    return (m["t_base"] - m["plans"][HUGE_PLAN]["t"]) * ghz * 1e9 / refs


# ---------------------------------------------------------------- the experiment

NAME = "validate-suite"


def outputs(out: str) -> List[str]:
    """Every file ``suite`` writes in ``out`` (checked before any work)."""
    from . import experiments, plots

    paths = [p for p, _ in experiments.output_paths(out, NAME, ("workloads", "runs")).values()]
    return paths + plots.figure_paths({"hugescope_experiment": NAME}, os.path.join(out, NAME))


def suite(suite_name: Optional[str] = "default", workload_specs: Sequence[str] = (),
          fractions: Sequence[float] = DEFAULT_FRACTIONS, policies: Sequence[str] = DEFAULT_POLICIES,
          rounds: int = DEFAULT_ROUNDS, warmup: int = 1, seed: int = 1, preset: Optional[str] = None,
          config: Optional[str] = None, duration: float = 60.0, cpu: Optional[int] = None,
          trace_dir: Optional[str] = None, out: Optional[str] = None,
          runner: Optional[Callable[[str, Dict[str, Any], Optional[int]], Callable]] = None,
          prepare_memory: Optional[Callable[[], Dict[str, Any]]] = None,
          log: Callable[[str], None] = lambda s: None, clock: str = "wall", nice: Optional[int] = None):
    """Run the validation suite (module docstring) and return its tidy
    DataFrame (one row per workload, plan and quantity: ``measured``,
    ``predicted_loo``, ``predicted_in``); ``df.attrs["meta"]["summary"]``
    holds the figures. ``runner(name, params, cpu)`` returns the function that
    runs one plan (default: a fresh pinned native process, ``native_runner``);
    tests inject measurements through it. ``out``: write
    ``validate-suite.{csv,json,png}`` and ``-workloads``/``-runs`` tables
    (checked before any work). ``clock``: each run's measured time
    (``PHASE_CLOCKS``); ``nice``: the measured runs' nice value
    (``noise.check_nice``; the default runner only)."""
    import pandas as pd

    from . import api, calibrate, experiments, linux, noise

    noise.check_clock(clock)
    if nice is not None:
        noise.check_nice(nice)
    specs = resolve(suite_name, workload_specs)
    policies = check_policies(policies)
    fractions = list(fractions)
    if not fractions:
        raise ValueError("fractions: empty list")
    plan_ks(1000, fractions)  # checks each fraction
    linux._count("rounds", rounds, 1, linux.RUNS_MAX)
    linux._count("warmup", warmup, 0, linux.RUNS_MAX)
    linux._count("seed", seed, 0)
    if not (isinstance(duration, (int, float)) and not isinstance(duration, bool) and duration > 0):
        raise ValueError(f"duration must be a positive number of seconds, got {duration!r}")
    if cpu is not None:
        noise.check_cpu(cpu)
    # No preset/config: the calibrated preset when one was saved (issue #36).
    preset, config, label = calibrate.estimate_machine(preset, config)
    machine = calibrate.machine_args(preset, config)
    api.machine_config(**machine)  # a bad preset or file fails here, before the traces
    log(f"estimates on {label}")
    if runner is None:
        require_measurable("validation")
        runner = functools.partial(native_runner, nice=nice)
    if out:
        from ._io import check_output, prepare_dir
        prepare_dir(out)
        for p in outputs(out):
            check_output(p, os.path.splitext(p)[1][1:])
    prepare_memory = prepare_memory or noise.prepare_memory
    if cpu is None:
        cpu = noise.least_loaded_cpu()
        log(f"pinning every run to cpu {cpu} (the least busy over 1 s)")

    tmp = None
    if trace_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="hugescope-suite-")
        trace_dir = tmp.name
    os.makedirs(trace_dir, exist_ok=True)
    try:
        # All simulation first, then all measurement: the simulator's threads
        # must not share the machine with the timed runs.
        preps = [prepare(label, name, params, policies, fractions, machine, duration, seed, trace_dir, log)
                 for label, name, params in specs]
    finally:
        if tmp is not None:
            tmp.cleanup()
    all_runs, meas = [], {}
    compacted = set()
    for prep, (label, name, params) in zip(preps, specs):
        runs = measure(prep, rounds, warmup, runner(name, params, cpu), prepare_memory, log, clock)
        meas[label] = speedups(prep, runs)
        if not meas[label]["results_agree"]:
            raise HugescopeError(f"{label}: runs under different plans gave different results (a plan must "
                                 "change speed, not answers)")
        compacted |= {r["compacted"] for r in runs}
        all_runs += [{"workload": label, "round": r["round"], "position": r["position"], "plan": r["name"],
                      "t_s": r["t_s"], "clock": clock, "wall_s": r["wall_s"], "user_s": r.get("user_s"),
                      "sys_s": r.get("sys_s"), "cpu_s": r.get("cpu_s"), "loadavg_1m": r.get("loadavg_1m"),
                      "others_busy_share": r.get("others_busy_share"),
                      "setup_s": r.get("setup_s"), "coverage": r.get("coverage"),
                      "compact_s": r["compact_s"], "kind": "measurement"} for r in runs]
    # The fit starts from the machine's own latencies (a calibrated preset's
    # page-table line cache included) and frees only what cost_model.FREE names.
    from . import cost_model

    res = analyse(preps, meas, start=cost_model.params_from_cost(api.machine_config(**machine)["cost"]))
    prep_how = ("memory compacted before every run (/proc/sys/vm/compact_memory)" if compacted == {True} else
                "memory not compacted (needs root)")
    how_meas = HOW_MEASURED.format(cpu=cpu, prep=prep_how, warmup=warmup, rounds=rounds, clock=PHASE_CLOCKS[clock])

    rows = []
    for r in res["rows"]:
        common = {k: r[k] for k in ("workload", "plan", "sources", "regions")}
        rows.append(dict(common, quantity="measured", speedup=r["measured"], speedup_min=r["measured_min"],
                         speedup_max=r["measured_max"], abs_error=None, floor=r["floor"], ranked=r["ranked"],
                         tie_group=r["tie_group"], collapsed=r["collapsed"], coverage=r["coverage"],
                         kind="measurement"))
        for q, key in (("predicted_loo", "predicted_loo"), ("predicted_in", "predicted_in")):
            rows.append(dict(common, quantity=q, speedup=r[key], speedup_min=None, speedup_max=None,
                             abs_error=abs(r[key] / r["measured"] - 1), floor=None, ranked=r["ranked"],
                             tie_group=None, collapsed=None, coverage=None, sim_walk_refs=r["walk_refs"],
                             sim_walks=r["walks"], kind="estimate"))
    df = pd.DataFrame(rows)
    wl_rows = []
    for prep in preps:
        m, lbl = meas[prep["label"]], prep["label"]
        lo, ins = res["summary"]["loo"]["per_workload"][lbl], res["summary"]["in_sample"]["per_workload"][lbl]
        wl_rows.append({"workload": lbl, "name": prep["workload"], "params": json_key(prep["params"]),
                        "accesses": prep["accesses"], "footprint_bytes": prep["footprint"],
                        "candidates": prep["candidates"], "ks": " ".join(map(str, prep["ks"])),
                        "plans": lo["plans"], "ranked": lo["ranked"], "distinct": lo["distinct"],
                        "floor_pct": 100 * (math.exp(m["floor"]) - 1),
                        "base_s": m["t_base"], "huge_speedup": m["plans"][HUGE_PLAN]["speedup"],
                        "spearman_loo": lo["spearman"], "spearman_in": ins["spearman"],
                        "mae_loo": lo["median_abs_error"], "mae_in": ins["median_abs_error"],
                        "mae_loo_all": lo["median_abs_error_all"],
                        # What one simulated walk reference would have to cost to explain the measured
                        # base - all-huge gap alone: the evidence when one price cannot fit all workloads.
                        "implied_cycles_per_walk_ref": _implied_cycles(prep, m),
                        **{f"loo_{k}": v for k, v in res["loo_params"][lbl].items()},
                        "kind": "measurement"})
    from . import _core, cost_model
    meta = {
        "hugescope_experiment": NAME, "hugescope_version": _core.version(), "kind": "measurement",
        "suite": suite_name, "workloads": [s[0] for s in specs],
        "machine": preps[0]["machine"], "machine_label": label, "cpu": cpu,
        "params": res["params"], "param_units": cost_model.PARAM_UNITS, "loo_params": res["loo_params"],
        "summary": res["summary"],
        "options": {"suite": suite_name, "workloads": list(workload_specs), "fractions": fractions,
                    "policies": policies, "rounds": rounds, "warmup": warmup, "clock": clock, "nice": nice,
                    "seed": seed,
                    "duration_s": float(duration), "machine": machine.get("preset") or machine.get("config"),
                    "cpu": cpu},
        "how": {"measurement": how_meas, "noise_floor": HOW_FLOOR, "estimate": HOW_PREDICTED,
                "spearman": "Pearson correlation of average ranks over the ranked plans (scipy spearmanr); "
                            "overall = all workloads' ranked plans pooled",
                "abs_error": "|predicted / measured speedup - 1|; median over the ranked plans (and over every "
                             "plan but base: *_all)"},
    }
    df.attrs["meta"] = meta
    wdf, rdf = pd.DataFrame(wl_rows), pd.DataFrame(all_runs)
    if out:
        from . import plots
        experiments.save(df, out, name=NAME, extra_tables={"workloads": wdf, "runs": rdf})
        plots.save_figures(experiments.load(os.path.join(out, NAME + ".json")), os.path.join(out, NAME))
    df.attrs["tables"] = {"workloads": wl_rows, "runs": all_runs}
    return df
