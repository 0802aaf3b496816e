"""Per-program runtime models fitted to measured page mosaics (issue #36,
item 2; after Mosmodel, Agbarya et al., MICRO'20).

A *layout* (Mosmodel's "mosaic") backs some of a program's 2 MiB regions
with huge pages and the rest with base pages. Mosmodel runs the real
program on many layouts and fits its run time from the hardware's counters;
this machine exposes no counters, so the counters here are *simulated*: each
layout's static page map run over the program's trace. The model then prices
a layout it never ran (another policy's choice, another budget) from the
simulation alone.

``fit_workload`` for one workload:

1. trace it; the layouts (``sample_layouts``): no region huge, every region
   huge, the policies' top-k choices at the validation budgets (oracle's is
   the top-k by walks), then seeded random subsets until there are K;
2. simulate each layout's static page map: its counters (``FEATURES``);
3. measure every layout natively in interleaved rounds with base runs
   (``validate_suite.measure``: fresh pinned processes, memory compacted),
   a layout's time = the median round's base time / its median speedup;
4. fit ``FORM`` to the K (counters, time) points (``fit``) and hold each
   layout out in turn (``held_out``): the error bar of every prediction.

Everything a model predicts is an estimate; its held-out error is measured
against the layouts it was not fitted on.
"""

from __future__ import annotations

import math
import functools
import os
import random
import statistics
from typing import Any, Callable, Dict, List, Optional, Sequence

from ._core import HugescopeError

#: The counters the model reads, per layout, from its simulation
#: (``cost_model.features``): TLB misses that hit the L2 TLB, page walks, and
#: the walks' memory references by where they hit (the page-table line cache
#: of a calibrated preset splits them; without it every reference counts as
#: ``walk_refs_llc`` and ``walk_refs_mem`` is 0 and unused).
FEATURES = ("l2_hits", "walks", "walk_refs_llc", "walk_refs_mem")
#: The model's stated form; each coefficient is seconds per event.
FORM = ("t(L) = t0 + c_l2_hits * l2_hits(L) + c_walks * walks(L) + c_walk_refs_llc * walk_refs_llc(L) "
        "+ c_walk_refs_mem * walk_refs_mem(L); every coefficient >= 0 (non-negative least squares of the "
        "relative error over the measured layouts); a counter that is 0 in every layout has no coefficient")
HOW_HELD_OUT = ("leave-one-layout-out: the model refitted on the other K-1 measured layouts predicts the one left "
                "out; error = predicted / measured time - 1")
#: Layouts a fit needs at least: more than the parameters it could fit, and
#: something left to hold out.
MIN_LAYOUTS = 3
MAX_LAYOUTS = 64
DEFAULT_LAYOUTS = 12
BASE, HUGE_PLAN = "base", "all huge"


# ---------------------------------------------------------------- layouts

def check_layouts(k) -> None:
    """Refuse a number of layouts outside MIN_LAYOUTS..MAX_LAYOUTS."""
    if isinstance(k, bool) or not isinstance(k, int) or not MIN_LAYOUTS <= k <= MAX_LAYOUTS:
        raise ValueError(f"layouts: {k!r} must be an integer from {MIN_LAYOUTS} to {MAX_LAYOUTS}")


def sample_layouts(candidates: Sequence[int], rank: Dict, policies: Sequence[str], k: int, seed: int = 1
                   ) -> List[Dict[str, Any]]:
    """At most ``k`` distinct layouts over ``candidates`` (2 MiB region
    starts): base and all huge always; the policies' choices (``rank``, as
    ``validate.rankings`` gives it), evenly thinned by size when there are
    too many; then random subsets (a uniform size in 1..n-1, then uniform
    regions, ``random.Random(seed)``) until ``k`` or no new subset turns up.
    Each is ``{"plan", "regions", "sources"}``, base first and all huge
    last, the rest by number of regions."""
    from .validate_suite import distinct_plans

    check_layouts(k)
    plans = distinct_plans(rank, list(policies), list(candidates))
    base, middle, huge = plans[0], plans[1:-1], plans[-1]
    if len(middle) > k - 2:
        # Keep the smallest and largest choices and evenly spaced ones between.
        idx = sorted({round(i * (len(middle) - 1) / max(1, k - 3)) for i in range(k - 2)})
        middle = [middle[i] for i in idx]
    seen = {frozenset(p["regions"]) for p in [base, huge] + middle}
    rng = random.Random(seed)
    n = len(candidates)
    tries = drawn = 0
    while len(middle) + 2 < k and n > 1 and tries < 50 * k:
        tries += 1
        m = rng.randint(1, n - 1)
        regs = frozenset(rng.sample(list(candidates), m))
        if regs in seen:
            continue
        seen.add(regs)
        drawn += 1
        middle.append({"plan": f"random {drawn} ({m} regions)", "regions": sorted(regs),
                       "sources": [f"random subset, seed {seed}"]})
    middle.sort(key=lambda p: (len(p["regions"]), p["plan"]))
    return [base] + middle + [huge]


# ---------------------------------------------------------------- the model (pure)

def _used(points: Sequence[Dict[str, Any]], features: Sequence[str]) -> List[str]:
    """The features that are not 0 in every point (a column of zeros has no
    coefficient: it would be arbitrary)."""
    return [f for f in features if any(float(p["features"].get(f, 0.0)) != 0.0 for p in points)]


def fit(points: Sequence[Dict[str, Any]], features: Sequence[str] = FEATURES) -> Dict[str, Any]:
    """Fit ``FORM`` to ``points`` (each ``{"features": {...}, "t": seconds}``).
    Non-negative least squares of the relative error (each row divided by
    its measured time, so a 1 s and a 10 s layout weigh the same); columns
    scaled to unit maximum for the solver, coefficients scaled back.
    Returns ``{"form", "t0", "coefficients": {feature: s/event}, "parameters",
    "features"}``."""
    from .calibrate import nnls

    if len(points) < 2:
        raise ValueError(f"fit: {len(points)} measured layout(s); at least 2 are needed")
    for p in points:
        if not (isinstance(p.get("t"), (int, float)) and p["t"] > 0 and math.isfinite(p["t"])):
            raise ValueError(f"fit: layout {p.get('plan', '?')!r} has no positive measured time ({p.get('t')!r})")
    used = _used(points, features)
    scale = [max(abs(float(p["features"][f])) for p in points) for f in used]
    rows = [[1.0 / p["t"]] + [float(p["features"][f]) / s / p["t"] for f, s in zip(used, scale)] for p in points]
    x, _ = nnls(rows, [1.0] * len(points))
    return {"form": FORM, "t0": x[0], "coefficients": {f: v / s for f, v, s in zip(used, x[1:], scale)},
            "parameters": 1 + len(used), "features": list(used)}


def predict(model: Dict[str, Any], features: Dict[str, float]) -> float:
    """The model's time (seconds, an estimate) of a layout with ``features``."""
    return model["t0"] + sum(c * float(features.get(f, 0.0)) for f, c in model["coefficients"].items())


def held_out(points: Sequence[Dict[str, Any]], features: Sequence[str] = FEATURES) -> Dict[str, Any]:
    """Leave-one-layout-out (``HOW_HELD_OUT``): per point its measured time,
    the prediction of the model fitted without it and the error; the max and
    median |error|, and Spearman's rank correlation of predicted against
    measured times over the layouts."""
    from .validate import spearman

    if len(points) < MIN_LAYOUTS:
        raise ValueError(f"held-out errors need at least {MIN_LAYOUTS} measured layouts, got {len(points)}")
    rows = []
    for i, p in enumerate(points):
        m = fit([q for j, q in enumerate(points) if j != i], features)
        t_pred = predict(m, p["features"])
        rows.append({"plan": p.get("plan", str(i)), "regions": p.get("regions"), "measured_s": p["t"],
                     "predicted_s": t_pred, "error": t_pred / p["t"] - 1})
    errs = [abs(r["error"]) for r in rows]
    return {"rows": rows, "max_abs_error": max(errs), "median_abs_error": statistics.median(errs),
            "spearman": spearman([r["predicted_s"] for r in rows], [r["measured_s"] for r in rows]),
            "how": HOW_HELD_OUT}


# ---------------------------------------------------------------- fit a workload

def outputs(out: str) -> Dict[str, str]:
    """The files ``fit_workload`` writes in ``out``."""
    return {"model": os.path.join(out, "model.json"), "held_out": os.path.join(out, "held-out.csv"),
            "plot": os.path.join(out, "predicted-vs-measured.png"), "trace": os.path.join(out, "trace.hst")}


#: The kind ``check_output`` checks each of ``outputs`` as.
OUTPUT_KINDS = {"model": "json", "held_out": "csv", "plot": "png", "trace": "hst"}


#: What a model record keeps of each measured run.
RUN_KEYS = ("round", "position", "name", "t_s", "clock", "wall_s", "user_s", "sys_s", "cpu_s", "compacted",
            "loadavg_1m", "others_busy_share")


def check_outputs(out: str, trace: bool = True) -> None:
    """Check every file of ``outputs(out)`` (the trace only with ``trace``)
    before any work: ``_io.check_output``'s refusals."""
    from ._io import check_output

    for kind, p in outputs(out).items():
        if trace or kind != "trace":
            check_output(p, OUTPUT_KINDS[kind])


def fit_workload(spec, out: str, layouts: int = DEFAULT_LAYOUTS, rounds: int = 3, warmup: int = 1,
                 policies: Optional[Sequence[str]] = None, fractions: Optional[Sequence[float]] = None,
                 seed: int = 1, preset: Optional[str] = None, config: Optional[str] = None,
                 duration: float = 60.0, cpu: Optional[int] = None,
                 runner: Optional[Callable[[str, Dict[str, Any], Optional[int]], Callable]] = None,
                 prepare_memory: Optional[Callable[[], Dict[str, Any]]] = None,
                 log: Callable[[str], None] = lambda s: None, clock: str = "wall",
                 nice: Optional[int] = None) -> Dict[str, Any]:
    """Fit a model of the built-in workload ``spec`` (``NAME[:k=v,...]``, as
    ``validate --suite --workload``, or a resolved (label, name, params)) from ``layouts`` measured layouts (module
    docstring). Writes ``outputs(out)``: the model with its held-out errors
    and how everything was measured (``model.json``), one row per layout
    (``held-out.csv``), the predicted-vs-measured plot, and the trace
    (``model predict`` simulates new plans over it). Returns the model
    record. ``runner`` as in ``validate_suite.suite`` (tests inject
    measurements); ``clock``: each run's measured time
    (``validate_suite.PHASE_CLOCKS``); ``nice``: the measured runs' nice
    value (the default runner only)."""
    from . import api, calibrate, linux, noise, validate_suite as vs
    from ._io import prepare_dir
    from .validate import candidate_regions, rankings
    from . import workloads

    if isinstance(spec, tuple):
        label, name, params = spec
    else:
        (label, name, params), = vs.resolve(None, [spec])
    policies = vs.check_policies(policies if policies is not None else vs.DEFAULT_POLICIES)
    fractions = list(fractions if fractions is not None else vs.DEFAULT_FRACTIONS)
    check_layouts(layouts)
    noise.check_clock(clock)
    if nice is not None:
        noise.check_nice(nice)
    vs.plan_ks(1000, fractions)
    linux._count("rounds", rounds, 1, linux.RUNS_MAX)
    linux._count("warmup", warmup, 0, linux.RUNS_MAX)
    linux._count("seed", seed, 0)
    if cpu is not None:
        noise.check_cpu(cpu)
    # No --preset/--config: the calibrated preset when one was saved (this
    # machine's TLBs), as every real-machine estimate.
    preset, config, machine_label = calibrate.estimate_machine(preset, config)
    machine = calibrate.machine_args(preset, config)
    api.machine_config(**machine)
    if runner is None:
        vs.require_measurable("measuring layouts")
        runner = functools.partial(vs.native_runner, nice=nice)
    paths = outputs(out)
    prepare_dir(out)
    check_outputs(out)
    prepare_memory = prepare_memory or noise.prepare_memory
    if cpu is None:
        cpu = noise.least_loaded_cpu()
        log(f"pinning every run to cpu {cpu} (the least busy over 1 s)")

    layout = workloads.layout(name, **params)
    candidates = candidate_regions(layout)
    if len(candidates) < 2:
        raise HugescopeError(f"{label}: {len(candidates)} region(s) hold a whole 2 MiB page; a model of layouts "
                             "needs at least 2")
    ks = vs.plan_ks(len(candidates), fractions)
    log(f"{label}: tracing")
    info = workloads.trace(name, paths["trace"], **params)
    log(f"{label}: ranking {len(candidates)} regions by {', '.join(policies)} at k = {', '.join(map(str, ks))}")
    rank = rankings(paths["trace"], policies, ks, candidates, int(layout["footprint"]), seed=seed,
                    duration=float(duration), **{k: v for k, v in machine.items() if v is not None})
    plans = sample_layouts(candidates, rank, policies, layouts, seed)
    got = fit_layouts(paths["trace"], plans, machine, runner(name, params, cpu), rounds, warmup, prepare_memory,
                      lambda s: log(f"{label}: {s}"), clock=clock)
    meas, points, model, ho, sim_machine = (got[k] for k in ("measured", "points", "model", "held_out", "machine"))
    floor = meas["floor"]
    # A layout's time is a median over rounds, so chance moves it by up to
    # the floor: a held-out error below that cannot be told from noise.
    bound = max(0.03, floor)
    record = {
        "hugescope_experiment": "model", "kind": "estimate", "workload": label, "name": name, "params": params,
        "trace": os.path.abspath(paths["trace"]), "accesses": info["summary"]["accesses"],
        "candidates": len(candidates), "machine": machine_label,
        "machine_config": sim_machine, "machine_args": machine, "layouts": len(points), "rounds": rounds,
        "clock": clock, "nice": nice,
        "model": model, "base_features": plans[0]["features"], "t_base": meas["t_base"],
        "noise_floor": floor, "held_out": {k: v for k, v in ho.items() if k != "rows"},
        "bound": bound, "within_bound": ho["max_abs_error"] <= bound,
        "points": [dict(p, predicted_s=r["predicted_s"], error=r["error"],
                        speedup=meas["plans"][p["plan"]]["speedup"],
                        speedup_min=meas["plans"][p["plan"]]["min"], speedup_max=meas["plans"][p["plan"]]["max"])
                   for p, r in zip(points, ho["rows"])],
        "how_measured": vs.HOW_MEASURED.format(cpu=cpu, prep="memory compacted before every run when root",
                                               warmup=warmup, rounds=rounds, clock=vs.PHASE_CLOCKS[clock]),
        "how_floor": vs.HOW_FLOOR,
        # Every measured run with both clocks, so a reader can see what the
        # other clock would have given (and the load it ran under).
        "runs": [{k: r.get(k) for k in RUN_KEYS} for r in got["runs"]],
        "how_predicted": "simulated counters of the layout's static page map over the workload's trace on "
                         f"machine {machine_label}, priced by the fitted form",
    }
    write_outputs(record, paths)
    return record


def write_outputs(record: Dict[str, Any], paths: Dict[str, str]) -> None:
    """The model record, its held-out table and its plot (``outputs``)."""
    from . import plots
    from ._io import write_atomic, write_json

    write_json(paths["model"], record)
    write_atomic(paths["held_out"], _held_out_csv(record), "csv")
    write_atomic(paths["plot"], plots.to_png(plots.plot_model(record)), "png")


def fit_many(suite: Optional[str], specs: Sequence[str], out: str, **kw) -> Dict[str, Any]:
    """``fit_workload`` for a suite's workloads (``validate_suite.SUITES``)
    and ``specs``: one workload writes to ``out`` itself, several each to
    ``out/LABEL/`` and the table of all (``summary``) to
    ``out/summary.json``. Every output is checked before the first run.
    Returns ``{"records": [...], "summary": ...}``."""
    from . import validate_suite as vs
    from ._io import check_output, prepare_dir, write_json

    resolved = vs.resolve(suite, specs)
    dirs = [out] if len(resolved) == 1 else [os.path.join(out, vs._file_label(label)) for label, _, _ in resolved]
    prepare_dir(out)
    for d in dirs:
        if os.path.isdir(d):
            check_outputs(d)
    total = os.path.join(out, "summary.json")
    if len(resolved) > 1:
        check_output(total, "json")
    records = [fit_workload(spec, d, **kw) for spec, d in zip(resolved, dirs)]
    s = summary(records)
    if len(resolved) > 1:
        write_json(total, dict(s, hugescope_experiment="model-summary", models=[outputs(d)["model"] for d in dirs]))
    return {"records": records, "summary": s}


def fit_layouts(trace: str, plans: List[Dict[str, Any]], machine: Dict[str, Any],
                run_plan: Callable[[Optional[dict]], Dict[str, Any]], rounds: int, warmup: int,
                prepare_memory: Callable[[], Dict[str, Any]], log: Callable[[str], None] = lambda s: None,
                features: Sequence[str] = FEATURES, clock: str = "wall") -> Dict[str, Any]:
    """Simulate, measure and fit ``plans`` (``sample_layouts``; the first is
    base): each plan's counters over ``trace`` (``validate_suite.
    plan_features``), interleaved rounds of base, every other plan, base
    (``run_plan(plan_json)`` runs once and returns ``wall_s``, and
    ``cpu_s`` for the cpu ``clock``), the model
    and its held-out errors. A feature ``regions`` (in ``features``) is the
    plan's number of 2 MiB regions: the collapse cost when the measured time
    includes the collapses (``advise``). Returns ``measured``
    (``validate_suite.speedups``), ``points``, ``model``, ``held_out``,
    ``runs`` and the simulated ``machine``."""
    from . import validate_suite as vs

    sim_machine = vs.plan_features(trace, plans, machine, log)
    for p in plans:
        p["features"]["regions"] = float(len(p["regions"]))
    prep = {"label": "layouts", "plans": plans}
    runs = vs.measure(prep, rounds, warmup, run_plan, prepare_memory, log, clock)
    meas = vs.speedups(prep, runs)
    if not meas["results_agree"]:
        raise HugescopeError("runs under different layouts gave different results (a layout must change speed, "
                             "not answers)")
    points = [{"plan": p["plan"], "regions": len(p["regions"]), "sources": p["sources"], "features": p["features"],
               "t": meas["plans"][p["plan"]]["t"]} for p in plans]
    return {"measured": meas, "points": points, "model": fit(points, features), "held_out": held_out(points, features),
            "runs": runs, "machine": sim_machine}


def _held_out_csv(record: Dict[str, Any]) -> str:
    import pandas as pd

    cols = ["plan", "regions", "measured_s", "predicted_s", "error", "speedup", "speedup_min", "speedup_max"]
    df = pd.DataFrame([{"plan": p["plan"], "regions": p["regions"], "measured_s": p["t"],
                        "predicted_s": p["predicted_s"], "error": p["error"], "speedup": p["speedup"],
                        "speedup_min": p["speedup_min"], "speedup_max": p["speedup_max"]}
                       for p in record["points"]], columns=cols)
    df.insert(0, "workload", record["workload"])
    df["kind"] = "measured time; predicted_s is the held-out estimate"
    return df.to_csv(index=False)


# ---------------------------------------------------------------- summary

def summary(records: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """The acceptance table of issue #36 over fitted models: per workload K,
    noise floor, held-out max and median |error|, the bound (3% or the
    floor) and whether it holds, Spearman over its layouts; pooled,
    Spearman of predicted against measured speedup over every layout above
    its workload's noise floor. A layout's predicted speedup is the
    workload's measured base time over the layout's held-out predicted time
    (each model fitted per workload, the layout left out)."""
    from . import noise
    from .validate import spearman

    rows, pred, meas = [], [], []
    for r in records:
        ho = r["held_out"]
        rows.append({"workload": r["workload"], "layouts": r["layouts"], "noise_floor": r["noise_floor"],
                     "max_abs_error": ho["max_abs_error"], "median_abs_error": ho["median_abs_error"],
                     "bound": r["bound"], "within_bound": ho["max_abs_error"] <= r["bound"],
                     # Issue #36: the median within 1%, or within the noise
                     # floor where the floor is above it (as the maximum's 3%).
                     "median_bound": max(0.01, r["noise_floor"]),
                     "median_within_bound": ho["median_abs_error"] <= max(0.01, r["noise_floor"]),
                     "spearman": ho["spearman"]})
        t_base = next(p["t"] for p in r["points"] if p["plan"] == BASE)
        for p in r["points"]:
            if p["plan"] != BASE and noise.above_floor(p["speedup"], r["noise_floor"]):
                pred.append(t_base / p["predicted_s"] if p["predicted_s"] > 0 else float("inf"))
                meas.append(p["speedup"])
    return {"rows": rows, "pooled_plans": len(pred), "pooled_spearman": spearman(pred, meas),
            "how": "per workload: leave-one-layout-out errors of its own model; pooled: Spearman of the measured "
                   "base time / the held-out predicted time against the measured speedup, over every layout above "
                   "its workload's noise floor"}


# ---------------------------------------------------------------- predict

def load(path: str) -> Dict[str, Any]:
    """A model written by ``fit_workload``, checked."""
    from ._io import read_json

    rec = read_json(path, "model")
    if not isinstance(rec, dict) or rec.get("hugescope_experiment") != "model" or not isinstance(rec.get("model"), dict):
        raise HugescopeError(f"{path}: not a model written by 'hugescope model fit'")
    m = rec["model"]
    if not isinstance(m.get("t0"), (int, float)) or not isinstance(m.get("coefficients"), dict) or any(
            not isinstance(v, (int, float)) or v < 0 for v in m["coefficients"].values()):
        raise HugescopeError(f"{path}: the model's parameters are missing or negative")
    return rec


def predict_plans(rec: Dict[str, Any], policies: Sequence[str], ks: Sequence[int], seed: int = 1,
                  duration: float = 60.0, log: Callable[[str], None] = lambda s: None) -> List[Dict[str, Any]]:
    """Predict every policy x k layout of the model's workload: its regions
    (``validate.rankings`` over the model's trace), its simulated counters
    and the model's time and speedup over base, each an estimate with the
    held-out error as its bar."""
    from . import validate_suite as vs, workloads
    from .validate import candidate_regions, rankings

    trace = rec["trace"]
    if not os.path.isfile(trace):
        raise HugescopeError(f"the model's trace {trace} is gone; fit the model again")
    policies = vs.check_policies(policies)
    layout = workloads.layout(rec["name"], **rec["params"])
    candidates = candidate_regions(layout)
    ks = sorted({int(k) for k in ks})
    if not ks or ks[0] < 1:
        raise ValueError(f"ks: {ks!r} must be positive numbers of 2 MiB regions")
    machine = {k: v for k, v in rec.get("machine_args", {}).items() if v is not None}
    rank = rankings(trace, list(policies), ks, candidates, int(layout["footprint"]), seed=seed,
                    duration=float(duration), **machine)
    plans = [{"plan": f"{pol} k={k}", "regions": rank[(pol, k)], "sources": [f"{pol} k={k}"]}
             for pol in policies for k in ks]
    vs.plan_features(trace, plans, machine, log)
    model, err = rec["model"], rec["held_out"]["max_abs_error"]
    t_base = predict(model, rec["base_features"])
    out = []
    for p in plans:
        t = predict(model, p["features"])
        out.append({"plan": p["plan"], "regions": len(p["regions"]), "predicted_s": t,
                    "predicted_s_low": t * (1 - err), "predicted_s_high": t * (1 + err),
                    "speedup": t_base / t if t > 0 else None, "kind": "estimate"})
    return out
