"""Validate the simulator's predictions against real runs: for each policy and
each k, promote the k 2 MiB regions the policy ranks highest, predict the
speedup with the cost model (a static page map of the workload's trace) and
measure it natively (``MADV_COLLAPSE`` at the end of setup, median of N
fresh-process runs), then ask whether the predictions order the plans the way
the measurements do (Spearman rank correlation).

    from hugescope import validate
    df = validate.validate("bfs", {"scale": 20, "direction_optimizing": False},
                           ks=[1, 2, 4, 8], policies=["pcc", "oracle", "random"], out="results")
    df.attrs["meta"]["spearman"]

The table is tidy: one row per (policy, k, quantity) where quantity is
``predicted`` (``kind == "estimate"``) or ``measured`` (``kind ==
"measurement"``).
"""

from __future__ import annotations

import json
import os
import random
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ._core import HugescopeError
from ._io import write_json

HUGE = 2 << 20
DEFAULT_KS = [1, 2, 4, 8]
DEFAULT_POLICIES = ["pcc", "hawkeye", "oracle", "random"]
#: Virtual seconds the trace spans for the simulated policies: their daemons
#: run on virtual time (the PCC is read every 30 s), so a trace of a second of
#: real work must span a minute for them to act at all.
DEFAULT_DURATION = 60.0


# ---------------------------------------------------------------- statistics

def ranks(xs: Sequence[float]) -> List[float]:
    """1-based ranks, ties sharing the mean of the ranks they span
    (``[10, 20, 20, 30] -> [1, 2.5, 2.5, 4]``; scipy's ``rankdata``)."""
    from scipy.stats import rankdata

    return [float(r) for r in rankdata(xs, method="average")]


def spearman(xs: Sequence[float], ys: Sequence[float]) -> Optional[float]:
    """Spearman's rank correlation (scipy's ``spearmanr``: Pearson's
    correlation of the ranks, ties averaged). ``None`` when it is undefined
    (fewer than 2 points, or one side constant), checked here because scipy
    answers those with NaN and a warning."""
    if len(xs) != len(ys):
        raise ValueError(f"spearman needs equally long lists ({len(xs)} vs {len(ys)})")
    if len(xs) < 2 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    from scipy.stats import spearmanr

    return float(spearmanr(xs, ys)[0])


# ---------------------------------------------------------------- regions and plans

def candidate_regions(layout: Dict[str, Any]) -> List[int]:
    """Start addresses of every 2 MiB-aligned 2 MiB range lying wholly inside
    one of the workload's regions (what MADV_COLLAPSE can make huge), ascending."""
    out = []
    for r in layout["regions"]:
        base, end = int(r["base"]), int(r["base"]) + int(r["len"])
        a = (base + HUGE - 1) // HUGE * HUGE
        while a + HUGE <= end:
            out.append(a)
            a += HUGE
    return sorted(set(out))


def plan_regions(entries: Sequence[Dict[str, Any]]) -> List[int]:
    """The 2 MiB regions of a plan's entries, in the plan's order, without
    repeats: an entry longer than 2 MiB counts as its 2 MiB pieces in address
    order; entries of other page sizes (1 GiB) are left out (MADV_COLLAPSE
    makes 2 MiB pages only)."""
    from . import units

    def size(v) -> int:
        # Hex as the plan emitter writes it ("0x200000"), or "2MiB", or a number.
        if isinstance(v, str):
            return int(v, 16) if v.strip().lower().startswith("0x") else units.parse_size(v)
        return int(v)

    seen, out = set(), []
    for e in entries:
        if size(e.get("page_size", HUGE)) != HUGE:
            continue
        start = int(e["start"], 0) if isinstance(e["start"], str) else int(e["start"])
        length = size(e.get("length", e.get("size")))
        for a in range(start, start + length, HUGE):
            if a not in seen:
                seen.add(a)
                out.append(a)
    return out


def make_plan(regions: Sequence[int], note: str = "", policy: Optional[str] = None,
              estimate: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """A plan promoting ``regions`` (2 MiB starts) at the program's launch
    (``when: start``), written by the core's plan emitter, the one behind
    ``simulate --emit-plan`` (plan.rs ``emit``): adjacent regions merged into
    one range, hex addresses, a header naming ``policy`` and ``estimate``
    (``{"speedup_vs_base": ..., "how": ...}``)."""
    from . import _core

    entries = []
    for a in sorted(regions):
        if a % HUGE:
            raise ValueError(f"region {a:#x} is not 2 MiB-aligned")
        e = {"start": a, "length": HUGE, "page_size": HUGE, "when": "start", "pid": 0}
        if note:
            e["note"] = note
        entries.append(e)
    recorded = json.dumps({"version": 1, "entries": entries})
    return json.loads(_core.plan_emit(recorded, "start", None, None, None, policy,
                                      json.dumps(estimate) if estimate is not None else None))


def random_ranking(candidates: Sequence[int], seed: int) -> List[int]:
    """A seeded random order of the candidate regions: top-k is its first k,
    so the random plans are nested (k=2 contains k=1) like a ranking's."""
    order = list(candidates)
    random.Random(seed).shuffle(order)
    return order


def rankings(trace: str, policies: Sequence[str], ks: Sequence[int], candidates: Sequence[int], footprint: int,
             seed: int = 1, progress: Optional[Callable] = None, promoted: Optional[Dict] = None,
             **common) -> Dict[Tuple[str, int], List[int]]:
    """(policy, k) -> the regions it promotes with huge pages capped at k
    regions. Simulated policies: one budgeted run per k (budget = k 2 MiB pages
    of the footprint), the executed plan's 2 MiB regions in the order they were
    promoted, only regions MADV_COLLAPSE can make huge, the first k of them.
    ``random``: the first k of a seeded shuffle of the candidates.
    ``promoted``, if given, receives for each simulated (policy, k) how many
    2 MiB regions the run promoted (``all``) and how many of them are
    candidates (``collapsible``): why a policy chose fewer than k."""
    from . import experiments

    cand = set(candidates)
    out: Dict[Tuple[str, int], List[int]] = {}
    sim = [p for p in policies if p != "random"]
    configs, keys = [], []
    for p in sim:
        for k in ks:
            # Half a page of slack so rounding the share back to bytes cannot lose the k-th page.
            share = min(1.0, (k * HUGE + HUGE // 2) / footprint)
            configs.append({"policy": p, "budget": share})
            keys.append((p, k))
    if configs:
        results = experiments.run_configs(trace, configs, progress=progress, **common)
        for key, r in zip(keys, results):
            every = plan_regions(r.plan()["entries"])
            regs = [a for a in every if a in cand]
            out[key] = regs[:key[1]]
            if promoted is not None:
                promoted[key] = {"all": len(every), "collapsible": len(regs)}
    if "random" in policies:
        order = random_ranking(candidates, seed)
        for k in ks:
            out[("random", k)] = order[:k]
    return out


# ---------------------------------------------------------------- the experiment

def _parse_list(values, what: str, conv) -> list:
    if isinstance(values, str):
        values = [v for v in values.split(",")]
    out = []
    for v in values:
        s = str(v).strip()
        if not s:
            continue
        try:
            out.append(conv(s))
        except ValueError:
            raise ValueError(f"{what}: '{s}' is not valid") from None
    if not out:
        raise ValueError(f"{what}: empty list")
    return out


def _k(s: str) -> int:
    k = int(s)
    if k < 1:
        raise ValueError(s)
    return k


def validate(workload: str, params: Optional[Dict[str, Any]] = None, ks: Sequence[int] = DEFAULT_KS,
             policies: Sequence[str] = DEFAULT_POLICIES, repeat: int = 3, warmup: int = 1, seed: int = 1,
             preset: Optional[str] = None, config: Optional[str] = None, duration: float = DEFAULT_DURATION,
             trace: Optional[str] = None, trace_dir: Optional[str] = None, out: Optional[str] = None,
             log: Callable[[str], None] = lambda s: None):
    """Predicted vs measured speedup of top-k plans of each policy (see the
    module docstring). ``trace``: reuse a trace of exactly this run (else one is
    generated, in ``trace_dir`` or a temporary directory). ``preset`` may be
    ``"calibrated"`` (the file ``hugescope calibrate`` saved). Returns the tidy
    DataFrame; ``df.attrs["meta"]["spearman"]`` is the rank correlation of
    predicted and measured median speedups over every (policy, k)."""
    import pandas as pd

    from . import api, calibrate, experiments, linux, workloads

    params = dict(params or {})
    ks = sorted(set(_parse_list(ks, "ks", _k)))
    policies = list(dict.fromkeys(_parse_list(policies, "policies", str)))
    known = set(api.policies())
    for p in policies:
        if p != "random" and p.partition(":")[0] not in known:
            raise ValueError(f"policies: unknown policy '{p}' (known: random, {', '.join(sorted(known))})")
    for what, v, least in (("repeat", repeat, 1), ("warmup", warmup, 0), ("seed", seed, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or v < least:
            raise ValueError(f"{what} must be an integer >= {least}, got {v!r}")
    if not (isinstance(duration, (int, float)) and duration > 0):
        raise ValueError(f"duration must be a positive number of seconds, got {duration!r}")
    if workload not in workloads.names():
        raise ValueError(f"unknown workload '{workload}' (workloads: {', '.join(workloads.names())})")
    # No preset/config: the calibrated preset when one was saved (issue #36).
    preset, config, label = calibrate.estimate_machine(preset, config)
    machine = calibrate.machine_args(preset, config)
    log(f"estimates on {label}")
    layout = workloads.layout(workload, **params)
    candidates = candidate_regions(layout)
    if not candidates:
        raise HugescopeError(f"{workload}: no region holds a whole 2 MiB page; nothing to promote")
    footprint = int(layout["footprint"])

    tmp = None
    if trace is None:
        if trace_dir is None:
            tmp = tempfile.TemporaryDirectory(prefix="hugescope-validate-")
            trace_dir = tmp.name
        os.makedirs(trace_dir, exist_ok=True)
        trace = os.path.join(trace_dir, f"{workload}-validate.hst")
        log(f"tracing {workload}")
        workloads.trace(workload, trace, **params)
    elif not os.path.exists(trace):
        raise HugescopeError(f"{trace}: no such trace file")
    try:
        header = api.trace_info(trace)["header"]
        if header.get("workload") != workload:
            raise HugescopeError(f"{trace} is a trace of '{header.get('workload')}', not of '{workload}'")
        log(f"ranking regions: {', '.join(p for p in policies)} at k = {', '.join(map(str, ks))}")
        rank = rankings(trace, policies, ks, candidates, footprint, seed=seed, duration=float(duration),
                        **{k: v for k, v in machine.items() if v is not None})
        log("simulating base pages")
        base_sim = api.simulate(trace, pages="4k", **machine)
        base_cycles = base_sim["cost"]["total_cycles"]
        plan_dir = tempfile.mkdtemp(prefix="hugescope-plans-")
        predicted: Dict[frozenset, float] = {}
        plans: Dict[Tuple[str, int], Dict[str, Any]] = {}
        try:
            for (pol, k), regs in sorted(rank.items(), key=lambda kv: (policies.index(kv[0][0]), kv[0][1])):
                plan = make_plan(regs)
                plans[(pol, k)] = plan
                key = frozenset(regs)
                if key in predicted:
                    continue  # the same regions as another (policy, k): same prediction
                path = os.path.join(plan_dir, f"plan-{len(predicted)}.json")
                write_json(path, plan)
                log(f"simulating {pol} k={k} ({len(regs)} regions)")
                sim = api.simulate(trace, pages=path, **machine)
                predicted[key] = base_cycles / sim["cost"]["total_cycles"]
        finally:
            for f in os.listdir(plan_dir):
                os.unlink(os.path.join(plan_dir, f))
            os.rmdir(plan_dir)
        meta = experiments._meta("validate", trace, [base_sim], {})
    finally:
        if tmp is not None:
            tmp.cleanup()

    log(f"measuring base pages ({warmup} warm-up + {repeat} runs)")
    base = linux.run(workload, plan=None, repeat=repeat, warmup=warmup, **params).check()
    tb = base.summary["wall_s"]["median"]
    measured: Dict[frozenset, Any] = {}
    for (pol, k), plan in plans.items():
        key = frozenset(rank[(pol, k)])
        if key in measured:
            continue  # identical plans are measured once
        if not key:
            measured[key] = base
            continue
        log(f"measuring {pol} k={k} ({warmup} warm-up + {repeat} runs)")
        measured[key] = linux.run(workload, plan=plan, repeat=repeat, warmup=warmup, **params).check()

    pairs = [((pol, k), predicted[frozenset(rank[(pol, k)])],
              tb / measured[frozenset(rank[(pol, k)])].summary["wall_s"]["median"]) for (pol, k) in plans]
    rp = ranks([-p for _, p, _ in pairs])
    rm = ranks([-m for _, _, m in pairs])
    rho = spearman([p for _, p, _ in pairs], [m for _, _, m in pairs])
    how_meas = (f"median of {repeat} fresh-process runs after {warmup} warm-up, wall clock (std::time::Instant) "
                "around the algorithm phase; speedup = base-page median / plan median, min/max = base median / "
                "plan max and min; plan collapsed with MADV_COLLAPSE when setup ended (collapse time excluded)")
    how_est = f"cost model ({label}): total cycles of a static 4 KiB map / of the plan's static map, same trace"
    rows = []
    for i, ((pol, k), p, m) in enumerate(pairs):
        regs = rank[(pol, k)]
        r = measured[frozenset(regs)]
        s = r.summary
        common = {"policy": pol, "k": k, "regions": len(regs),
                  "regions_list": " ".join(f"{a:#x}" for a in sorted(regs))}
        rows.append(dict(common, quantity="predicted", speedup=p, speedup_min=None, speedup_max=None,
                         rank=rp[i], coverage=None, collapsed=None, how=how_est, kind="estimate"))
        collapsed = sum(o.get("regions_collapsed", 0) for o in r.outcomes) if regs else 0
        rows.append(dict(common, quantity="measured", speedup=m,
                         speedup_min=tb / s["wall_s"]["max"], speedup_max=tb / s["wall_s"]["min"],
                         rank=rm[i], coverage=(s.get("coverage") or {}).get("median"),
                         collapsed=collapsed, how=how_meas, kind="measurement"))
    df = pd.DataFrame(rows)
    meta.update({
        "kind": "measurement",
        "spearman": rho,
        "options": {"workload": workload, "params": params, "ks": ks, "policies": policies, "repeat": repeat,
                    "warmup": warmup, "seed": seed, "duration_s": float(duration),
                    "machine": machine.get("preset") or machine.get("config")},
        "machine_label": label,
        "base_measured": {"wall_s": base.summary["wall_s"], "how": how_meas},
        "how": {"estimate": how_est, "measurement": how_meas,
                "spearman": "Pearson correlation of the ranks (ties averaged) of predicted and measured median "
                            "speedups over every (policy, k)"},
    })
    meta["trace"]["path"] = f"{workload}-validate.hst"
    df.attrs["meta"] = meta
    if out:
        experiments.save(df, out, name=f"validate-{workload}")
        from . import plots
        stem = os.path.join(out, f"validate-{workload}")
        data = experiments.load(stem + ".json")
        plots.save_figures(data, stem)
    return df
