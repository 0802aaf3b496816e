"""Calibrate the cost model to this machine: measure built-in workloads natively
with base pages and with every region huge, simulate the same runs, and fit the
cost model's per-access and per-walk-reference cycles so its estimates match
what was measured. The fit is saved as a machine preset (a TOML file that
``MachineConfig::load`` reads, ``preset = "..."`` plus ``[cost]``).

    from hugescope import calibrate
    cal = calibrate.calibrate()                   # default workloads, 3 runs each
    cal["after"]                                  # per workload: measured vs predicted speedup
    calibrate.save_preset(cal, calibrate.default_path())
    hs.simulate("t.hst", **calibrate.machine_args("calibrated"))

The model (docs/cost-model.md) is linear in the simulated counters::

    cycles = accesses*base + walk_refs*walk_ref + l1_hits*l1 + l2_hits*l2 + pwc_hits*pwc
    time   = cycles / (cpu_ghz * 1e9)

``base`` and ``walk_ref`` are fitted; the other latencies stay at the starting
preset's values. Two objectives (see ``fit``):

* ``"speedup"`` (default): least squares over the workloads of the relative
  error of the predicted speedup (all-huge vs base). The speedup is what the
  simulator is used to estimate. Its scale is pinned by the fixed latencies
  (an L2 TLB hit keeps costing ``l2_hit_cycles``), so ``base`` and
  ``walk_ref`` come out in the same cycles.
* ``"time"``: least squares of the relative error of every measured absolute
  time (base and huge run of each workload) at a fixed clock.

Why ``speedup`` is the default: one ``base_cycles_per_access`` serves every
workload, but real programs differ a lot in what an access costs outside
translation (GUPS misses the caches on every update; BFS mostly streams
through neighbour lists). A fit to absolute times compromises between them and
then gets every speedup wrong; a fit to speedups keeps the quantity the model
predicts right and reports the absolute-time error it leaves.

Every measured number is a median of ``repeat`` fresh-process runs (wall clock
around the workload's algorithm phase, ``hugescope.linux.run``); every
predicted number is an estimate of the cost model.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import socket
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import _core
from ._core import HugescopeError
from ._io import write_atomic

#: The default calibration set: GUPS (translation-bound, ~2 s natively on the
#: 2-core development VM) and top-down BFS (a scale whose trace stays under
#: ~150M accesses, so the very run that is measured can be simulated).
DEFAULT_WORKLOADS: List[Tuple[str, Dict[str, Any]]] = [
    ("gups", {"size": "1GiB", "updates": "50M"}),
    ("bfs", {"scale": 21, "direction_optimizing": False}),
]
DEFAULT_PRESET = "haswell-pcc"
#: Counters of the translation result the cost model uses, in this order.
COUNTERS = ("accesses", "l1_hits", "l2_hits", "walk_refs", "pwc_hits")
#: Counter -> [cost] key of its latency.
LATENCY_KEY = {"accesses": "base_cycles_per_access", "l1_hits": "l1_hit_cycles", "l2_hits": "l2_hit_cycles",
               "walk_refs": "walk_ref_cycles", "pwc_hits": "pwc_hit_cycles"}
FITTED = ("base_cycles_per_access", "walk_ref_cycles")
OBJECTIVES = ("speedup", "time")
HOW_MEASURED = ("median of {n} fresh-process runs after {w} warm-up, wall clock (std::time::Instant) around the "
                "workload's algorithm phase, hooks and collapses excluded")


# ---------------------------------------------------------------- where the preset lives

def default_path() -> str:
    """``$XDG_CONFIG_HOME/hugescope/calibrated.toml`` (``~/.config`` by default)."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "hugescope", "calibrated.toml")


def machine_args(preset: Optional[str] = None, config: Optional[str] = None) -> Dict[str, Optional[str]]:
    """``preset``/``config`` keyword arguments for ``api.simulate``/``compare``
    with the name ``calibrated`` resolved: ``preset="calibrated"`` becomes
    ``config=<default_path()>`` (that file names its own starting preset).
    Any other preset passes through. Raises ``HugescopeError`` if the
    calibrated preset is asked for and no calibration has been saved."""
    if preset != "calibrated":
        return {"preset": preset, "config": config}
    if config is not None:
        raise ValueError("preset 'calibrated' is the file saved by 'hugescope calibrate'; give either it or --config")
    path = default_path()
    if not os.path.exists(path):
        raise HugescopeError(f"preset 'calibrated': {path} does not exist; run 'hugescope calibrate' first "
                             "(or pass --config FILE)")
    return {"preset": None, "config": path}


def estimate_machine(preset: Optional[str] = None, config: Optional[str] = None
                     ) -> Tuple[Optional[str], Optional[str], str]:
    """The machine of a real-machine estimate (advise, validate; issue #36)
    as (preset, config, label): what ``preset``/``config`` name, or, when
    neither is given and ``hugescope calibrate`` saved a preset at
    ``default_path()``, that one (``preset="calibrated"``): an estimate for
    this machine starts from what was measured on it. The label
    (``machine_label``) says when the calibrated preset was taken that way.
    The simulator's own commands (simulate, the paper studies) keep the
    paper preset as their default."""
    if preset is None and config is None and os.path.exists(default_path()):
        return "calibrated", None, machine_label("calibrated") + ", the default: no --preset/--config given"
    return preset, config, machine_label(preset, config)


def machine_label(preset: Optional[str] = None, config: Optional[str] = None) -> str:
    """The machine an estimate uses, as every output and plan header names
    it: ``preset haswell-pcc (the default)``, ``preset skylake``, ``calibrated
    (PATH, over preset haswell-pcc)`` or ``config FILE (over preset ...)``,
    the preset underneath read from the resolved configuration. Raises what
    ``machine_args`` raises for a bad combination."""
    from . import api

    m = machine_args(preset, config)
    resolved = api.machine_config(preset=m["preset"], config=m["config"])
    under = resolved.get("preset") or resolved.get("name") or "?"
    if preset == "calibrated":
        return f"calibrated ({m['config']}, over preset {under})"
    if config is None and preset is None and os.path.exists(default_path()):
        # Not chosen: the caller did not go through estimate_machine.
        return f"preset {under} (the default; a calibrated preset exists at {default_path()} but was not used)"
    if config is not None:
        return f"config {os.fspath(config)} (over preset {under})"
    if preset is not None:
        return f"preset {under}"
    return f"preset {under} (the default)"


def host_ghz() -> Optional[float]:
    """The clock the kernel reports for cpu 0 (``cpu MHz`` in /proc/cpuinfo),
    in GHz; ``None`` if unknown. In a VM this is the nominal (TSC) clock."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("cpu mhz"):
                    return float(line.split(":", 1)[1]) / 1000.0
    except (OSError, ValueError):
        pass
    return None


# ---------------------------------------------------------------- the fit (pure math)

def counts_of(sim) -> Dict[str, float]:
    """The cost model's counters from a simulation result (a ``SimResult``, or its dict form)."""
    from .results import as_record

    t = as_record(sim).translation
    return {k: float(getattr(t, k)) for k in COUNTERS}


def cycles(counts: Dict[str, float], cost: Dict[str, float]) -> float:
    """Cycles of the cost model (translation plus base; no OS costs: static maps have none),
    computed by the core (``hugescope_core::cost::static_cycles``)."""
    return _core.cost_static_cycles(tuple(float(counts[k]) for k in COUNTERS),
                                    tuple(float(cost[LATENCY_KEY[k]]) for k in COUNTERS))


def nnls(rows: Sequence[Sequence[float]], rhs: Sequence[float]) -> Tuple[List[float], float]:
    """Least squares with every unknown >= 0 (scipy's Lawson-Hanson active-set
    solver, exact for the handful of unknowns here). Returns (solution,
    residual sum of squares); scipy gives the residual norm, squared here so
    the objective compared across fits stays the sum of squares."""
    import numpy as np
    from scipy.optimize import nnls as _nnls

    x, norm = _nnls(np.asarray(rows, dtype=float), np.asarray(rhs, dtype=float))
    return [float(v) for v in x], float(norm) ** 2


def _fixed_cost(cost: Dict[str, float]) -> Dict[str, float]:
    """The cost with the fitted keys at zero: what the fixed latencies contribute."""
    c = dict(cost)
    for k in FITTED:
        c[k] = 0.0
    return c


def predict(points: Sequence[Dict[str, Any]], cost: Dict[str, float]) -> List[Dict[str, Any]]:
    """Per workload: predicted and measured times and speedup (all-huge vs base)
    under ``cost``, with relative residuals (predicted / measured - 1)."""
    ghz = float(cost["cpu_ghz"])
    out = []
    for p in points:
        c4, c2 = cycles(p["base"]["counts"], cost), cycles(p["huge"]["counts"], cost)
        t4, t2 = p["base"]["time_s"], p["huge"]["time_s"]
        s_pred = c4 / c2 if c2 > 0 else math.inf
        s_meas = t4 / t2 if t2 > 0 else math.inf
        out.append({
            "workload": p["workload"], "label": p.get("label", p["workload"]),
            "speedup_measured": s_meas, "speedup_est": s_pred, "speedup_residual": s_pred / s_meas - 1.0,
            "base_s_measured": t4, "base_s_est": c4 / (ghz * 1e9), "base_s_residual": c4 / (ghz * 1e9) / t4 - 1.0,
            "huge_s_measured": t2, "huge_s_est": c2 / (ghz * 1e9), "huge_s_residual": c2 / (ghz * 1e9) / t2 - 1.0,
        })
    return out


def fit(points: Sequence[Dict[str, Any]], start_cost: Dict[str, float], objective: str = "speedup",
        ghz: Optional[float] = None, fit_ghz: bool = False, iterations: int = 20) -> Dict[str, Any]:
    """Fit ``base_cycles_per_access`` and ``walk_ref_cycles`` (both >= 0).

    ``points``: one dict per workload, ``{"workload", "base": {"counts",
    "time_s"}, "huge": {"counts", "time_s"}}`` (counts as ``counts_of``; time =
    measured seconds). ``start_cost``: the starting preset's ``[cost]``; its
    other latencies are held fixed. ``ghz``: the clock for turning cycles into
    seconds (default: the starting preset's); ``fit_ghz``: instead fit the
    clock that best matches the measured absolute times (relative least
    squares) after the fit, an effective clock of the model.

    ``objective="speedup"``: minimise sum_i ((S_pred_i - S_i) / S_i)^2. With
    predicted cycles C4 = A4 b + R4 w + K4 (base pages) and C2 likewise (huge),
    S_pred = C4 / C2, and the row S_i C2 - C4 = C2 (S_i - S_pred) is linear in
    (b, w); weighting it by 1 / (S_i C2) of the previous iterate gives the
    relative error, so a few reweighted non-negative least-squares steps
    converge (C2 changes little between steps).

    ``objective="time"``: minimise the relative error of every measured time,
    rows (A b + R w + K) / (f T) - 1, linear in (b, w) at a fixed clock f.

    Returns ``{"cost", "objective", "rss", "before", "after"}``; ``before`` and
    ``after`` are ``predict`` under the starting and the fitted cost.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective '{objective}' is not one of {', '.join(OBJECTIVES)}")
    if not points:
        raise ValueError("nothing to fit: no measured workloads")
    for p in points:
        for side in ("base", "huge"):
            if not p[side]["time_s"] > 0:
                raise ValueError(f"{p['workload']}: measured {side} time {p[side]['time_s']!r} is not positive")
    cost = {k: float(v) for k, v in start_cost.items() if k != "source"}
    if ghz is not None:
        if not ghz > 0:
            raise ValueError(f"clock {ghz!r} GHz is not positive")
        cost["cpu_ghz"] = float(ghz)
    start = dict(cost)
    fixed = _fixed_cost(cost)
    f = cost["cpu_ghz"] * 1e9
    rss = 0.0
    if objective == "time":
        rows, rhs = [], []
        for p in points:
            for side in ("base", "huge"):
                c, t = p[side]["counts"], p[side]["time_s"]
                rows.append([c["accesses"] / (f * t), c["walk_refs"] / (f * t)])
                rhs.append(1.0 - cycles(c, fixed) / (f * t))
        (b, w), rss = nnls(rows, rhs)
    else:
        b, w = cost["base_cycles_per_access"], cost["walk_ref_cycles"]
        for _ in range(iterations):
            rows, rhs = [], []
            for p in points:
                c4, c2 = p["base"]["counts"], p["huge"]["counts"]
                s = p["base"]["time_s"] / p["huge"]["time_s"]
                # Weight from the previous iterate; floor it so a zero start cannot divide by zero.
                prev = cycles(c2, dict(cost, base_cycles_per_access=b, walk_ref_cycles=w))
                wt = 1.0 / (s * max(prev, 1e-9 * max(c2["accesses"], 1.0)))
                rows.append([wt * (s * c2["accesses"] - c4["accesses"]), wt * (s * c2["walk_refs"] - c4["walk_refs"])])
                rhs.append(wt * (cycles(c4, fixed) - s * cycles(c2, fixed)))
            (nb, nw), rss = nnls(rows, rhs)
            done = abs(nb - b) <= 1e-9 * max(1.0, b) and abs(nw - w) <= 1e-9 * max(1.0, w)
            b, w = nb, nw
            if done:
                break
    cost["base_cycles_per_access"], cost["walk_ref_cycles"] = b, w
    if fit_ghz:
        # Relative least squares of times in g = 1/f: min sum (g C/T - 1)^2.
        xs = [cycles(p[s]["counts"], cost) / p[s]["time_s"] for p in points for s in ("base", "huge")]
        sxx = sum(x * x for x in xs)
        if sxx <= 0:
            raise ValueError("cannot fit a clock: every predicted cycle count is zero")
        cost["cpu_ghz"] = sxx / sum(xs) / 1e9
    return {"cost": cost, "objective": objective, "rss": rss, "fit_ghz": bool(fit_ghz),
            "before": predict(points, start), "after": predict(points, cost)}


# ---------------------------------------------------------------- measuring and simulating

def _label(name: str, params: Dict[str, Any]) -> str:
    ps = ",".join(f"{k}={v}" for k, v in params.items())
    return f"{name}:{ps}" if ps else name


def parse_workload(spec: str) -> Tuple[str, Dict[str, Any]]:
    """``"gups:size=1GiB,updates=50M"`` -> ("gups", {...}); values as given
    (the core parses sizes and counts; ``true``/``false`` become booleans)."""
    from . import workloads

    name, _, rest = spec.partition(":")
    name = name.strip()
    if name not in workloads.names():
        raise ValueError(f"unknown workload '{name}' in '{spec}' (workloads: {', '.join(workloads.names())})")
    params: Dict[str, Any] = {}
    for item in filter(None, (s.strip() for s in rest.split(","))):
        k, eq, v = item.partition("=")
        if not eq or not k.strip() or not v.strip():
            raise ValueError(f"'{item}' in '{spec}' is not key=value")
        v = v.strip()
        params[k.strip().replace("-", "_")] = {"true": True, "false": False}.get(v.lower(), v)
    workloads.layout(name, **params)  # the core names a bad parameter here, before anything runs
    return name, params


def measure(workloads_: Sequence[Tuple[str, Dict[str, Any]]], repeat: int = 3, warmup: int = 1,
            preset: Optional[str] = DEFAULT_PRESET, config: Optional[str] = None, trace_dir: Optional[str] = None,
            log: Callable[[str], None] = lambda s: None) -> Dict[str, Any]:
    """Run, trace and simulate every workload: the measurements the fit needs.

    For each workload: ``linux.run`` with base pages and with ``plan="all"``
    (``repeat`` measured runs after ``warmup``, each in a fresh process), the
    trace of the same parameters, and static simulations with ``pages="4k"``
    and ``"2m"`` on the machine (``preset``/``config``). Traces go to
    ``trace_dir`` (kept) or a temporary directory (deleted)."""
    from . import api, linux, workloads

    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"repeat must be a positive integer, got {repeat!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be a non-negative integer, got {warmup!r}")
    machine = api.machine_config(**machine_args(preset, config))
    thp = linux.thp_state()
    if not thp["baseline_available"]:
        raise HugescopeError(f"THP mode for 2 MiB pages is '{thp['pmd_mode']}': base pages cannot be measured "
                             "(set transparent_hugepage/enabled to madvise)")
    if not thp["plans_applicable"]:
        raise HugescopeError("transparent_hugepage/enabled is 'never': the all-huge runs cannot be made")
    tmp = None
    if trace_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="hugescope-calibrate-")
        trace_dir = tmp.name
    os.makedirs(trace_dir, exist_ok=True)
    points = []
    try:
        for name, params in workloads_:
            label = _label(name, params)
            side = {}
            for plan, key in ((None, "base"), ("all", "huge")):
                log(f"{label}: measuring {'base pages' if plan is None else 'all huge'} "
                    f"({warmup} warm-up + {repeat} runs)")
                # No samples: their page-table walks cost base pages more than
                # huge ones (linux.run, ``sample_ms``); coverage is PAGEMAP_SCAN's.
                r = linux.run(name, plan=plan, repeat=repeat, warmup=warmup, sample_ms=0, **params).check()
                s = r.summary
                side[key] = {"time_s": s["wall_s"]["median"], "time_min_s": s["wall_s"]["min"],
                             "time_max_s": s["wall_s"]["max"],
                             "coverage": (s.get("coverage") or {}).get("median"),
                             "collapse_s": (s.get("collapse_s") or {}).get("median"),
                             "results_agree": s.get("results_agree"), "runs": s["runs"]}
            path = os.path.join(trace_dir, f"{name}-calibrate.hst")
            log(f"{label}: tracing the same run")
            info = workloads.trace(name, path, **params)
            for pages, key in (("4k", "base"), ("2m", "huge")):
                log(f"{label}: simulating pages={pages}")
                sim = api.simulate(path, pages=pages, **machine_args(preset, config))
                side[key]["counts"] = counts_of(sim)
                side[key]["pages"] = pages
            # The trace is of the very run that was measured: same parameters, same result.
            points.append({"workload": name, "label": label, "params": params, "base": side["base"],
                           "huge": side["huge"], "trace_accesses": info["summary"]["accesses"],
                           "trace_result": info.get("result")})
    finally:
        if tmp is not None:
            tmp.cleanup()
    return {"host": socket.gethostname(), "when": _now(), "preset": preset, "config": config,
            "machine": machine["name"], "start_cost": machine["cost"], "host_ghz": host_ghz(),
            "repeat": repeat, "warmup": warmup, "how": HOW_MEASURED.format(n=repeat, w=warmup),
            "thp": {"enabled": thp["enabled"]["selected"], "pmd_mode": thp["pmd_mode"]}, "points": points}


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def calibrate(workloads_: Optional[Sequence[Tuple[str, Dict[str, Any]]]] = None, repeat: int = 3, warmup: int = 1,
              preset: Optional[str] = DEFAULT_PRESET, config: Optional[str] = None, objective: str = "speedup",
              ghz: Optional[float] = None, fit_ghz: bool = False, trace_dir: Optional[str] = None,
              measurements: Optional[Dict[str, Any]] = None, log: Callable[[str], None] = lambda s: None
              ) -> Dict[str, Any]:
    """Measure (or reuse ``measurements`` from an earlier ``calibrate``), then
    fit. The clock defaults to this host's (``host_ghz``), else the preset's.
    Returns the measurements plus ``fit`` (see ``fit``)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective '{objective}' is not one of {', '.join(OBJECTIVES)}")
    if measurements is None:
        m = measure(list(workloads_ or DEFAULT_WORKLOADS), repeat=repeat, warmup=warmup, preset=preset,
                    config=config, trace_dir=trace_dir, log=log)
    else:
        m = dict(measurements)
        if not isinstance(m.get("points"), list) or "start_cost" not in m:
            raise ValueError("the measurements given are not the output of 'hugescope calibrate --json'")
    clock = ghz if ghz is not None else (m.get("host_ghz") or None)
    m["fit"] = fit(m["points"], m["start_cost"], objective=objective, ghz=clock, fit_ghz=fit_ghz)
    return m


# ---------------------------------------------------------------- walk cost from microbenchmarks

def machine_identity() -> Dict[str, str]:
    """CPU model (``model name`` of /proc/cpuinfo), kernel release, host name."""
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu_model": model, "kernel": os.uname().release, "host": socket.gethostname()}


def calibrate_walks(preset: Optional[str] = DEFAULT_PRESET, config: Optional[str] = None,
                    footprints: Optional[Sequence[int]] = None, accesses: int = 1 << 21, repeat: int = 3,
                    ghz: Optional[float] = None, measurements: Optional[Dict[str, Any]] = None,
                    log: Callable[[str], None] = lambda s: None, tlb: bool = True) -> Dict[str, Any]:
    """The default calibration: the page-walk microbenchmarks of ``walkcal``
    (or the ``microbench`` list of an earlier result, refitted), the fit of
    the page-table line cache (latencies in ns, capacity in lines), and the
    ``[cost]`` it gives at this host's clock: ``walk_ref_cycles`` (a
    reference that hits), ``walk_ref_mem_cycles`` (one that misses),
    ``l2_hit_cycles``, ``pt_cache_lines``; the other keys stay the preset's.

    First, this machine's TLBs (``tlb_tables``): the geometry CPUID reports,
    checked by the TLB-reach microbenchmark (skipped with ``tlb=False``:
    CPUID alone), become the preset's ``l1``/``l2`` tables, and the walk fit
    counts TLB hits with them."""
    from . import api, tlbcal, walkcal

    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"repeat must be a positive integer, got {repeat!r}")
    machine = api.machine_config(**machine_args(preset, config))
    if measurements is None:
        m: Dict[str, Any] = {"kind": "microbench", "when": _now(), **machine_identity(), "preset": preset,
                             "config": config, "machine": machine["name"], "start_cost": machine["cost"],
                             "host_ghz": host_ghz()}
        # This machine's TLBs first: the walk fit counts L1/L2 TLB hits with them.
        m["tlb"] = {"cpuid": tlbcal.cpu_geometry()["raw"], "caches": tlbcal.cache_sizes(),
                    "reach": tlbcal.measure(repeats=repeat, log=log) if tlb else None}
        m["microbench"] = walkcal.measure(footprints or walkcal.DEFAULT_FOOTPRINTS, accesses=accesses,
                                          repeats=repeat, log=log)
    else:
        m = dict(measurements)
        if m.get("kind") != "microbench" or not isinstance(m.get("microbench"), list):
            raise ValueError("the measurements given are not the output of 'hugescope calibrate --json'")
    clock = ghz if ghz is not None else (m.get("host_ghz") or float(m["start_cost"]["cpu_ghz"]))
    tlb_fit = tlb_tables(m.get("tlb"), machine, clock)
    if tlb_fit is not None:
        machine = dict(machine, l1=tlb_fit["tables"]["l1"], l2=tlb_fit["tables"]["l2"])
    f = walkcal.fit(m["microbench"], machine)
    cost = {k: v for k, v in m["start_cost"].items() if k != "source"}
    cost.update({"cpu_ghz": float(clock), "walk_ref_cycles": f["walk_ref_llc_ns"] * clock,
                 "walk_ref_mem_cycles": f["walk_ref_mem_ns"] * clock, "l2_hit_cycles": f["l2_hit_ns"] * clock,
                 "pt_cache_lines": f["pt_cache_lines"]})
    m["fit"] = dict(f, cost=cost, objective="walk microbenchmarks", fit_ghz=False, tlb=tlb_fit)
    return m


def tlb_tables(tlb: Optional[Dict[str, Any]], machine: Dict[str, Any], ghz: Optional[float]) -> Optional[Dict[str, Any]]:
    """The TLB part of a calibration (``tlbcal``): the geometry CPUID reports,
    the measured steps, per level and page size the verdict, and the l1/l2
    tables the preset gets. None when the measurements carry no TLB record
    (an older ``--json``): the preset then keeps the starting preset's TLBs."""
    from . import tlbcal

    if not tlb or not tlb.get("cpuid"):
        return None
    geometry = tlbcal.cpu_geometry(tlb["cpuid"])
    analysis = tlbcal.analyse(geometry, tlb.get("reach"), tlb.get("caches") or {}, ghz)
    tables, notes = tlbcal.machine_tables(analysis, geometry, machine)
    if not tlb.get("reach"):
        notes.append("TLB reach not measured (--no-tlb-reach): CPUID's geometry unchecked")
    return {"geometry": {k: v for k, v in geometry.items() if k != "raw"}, "analysis": analysis,
            "tables": tables, "notes": geometry["notes"] + analysis["notes"] + notes,
            "how": (tlb.get("reach") or {}).get("how")}


# ---------------------------------------------------------------- the preset file

def _toml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid TOML basic string for what we write


def preset_toml(cal: Dict[str, Any]) -> str:
    """The TOML text of a calibration: ``preset = START`` and a ``[cost]``
    table with the fitted keys, the clock and a ``source`` saying what was
    measured, when and where. Per-workload figures go in comments."""
    if cal.get("kind") == "microbench":
        return _walks_toml(cal)
    f = cal["fit"]
    c = f["cost"]
    start = cal.get("preset") or cal.get("machine") or DEFAULT_PRESET
    wl = "; ".join(p["label"] for p in cal["points"])
    clock = ("fitted to the measured times" if f["fit_ghz"] else
             "host clock from /proc/cpuinfo" if cal.get("host_ghz") else "the preset's clock")
    source = (f"calibrated on {cal['host']} at {cal['when']} by hugescope calibrate: {f['objective']} fit of "
              f"base_cycles_per_access and walk_ref_cycles to {wl}, each measured as the {cal['how']}, "
              f"base pages vs every region collapsed (MADV_COLLAPSE); other latencies from {cal['machine']}; "
              f"cpu_ghz: {clock}")
    lines = [
        "# Machine preset fitted by 'hugescope calibrate' (see docs/linux.md, 'hugescope calibrate').",
        f"# host {cal['host']}, {cal['when']}, THP {cal.get('thp', {}).get('enabled', '?')}",
        "# workload: measured speedup (all huge vs base) -> estimate after the fit",
    ]
    for r in f["after"]:
        lines.append(f"#   {r['label']}: measured {r['speedup_measured']:.3f}x (base {r['base_s_measured']:.4f} s, "
                     f"huge {r['huge_s_measured']:.4f} s) -> estimate {r['speedup_est']:.3f}x "
                     f"({100 * r['speedup_residual']:+.1f}%)")
    lines += [
        f"preset = {_toml_str(start)}",
        "",
        "[cost]",
        f"base_cycles_per_access = {c['base_cycles_per_access']:.6g}",
        f"walk_ref_cycles = {c['walk_ref_cycles']:.6g}",
        f"cpu_ghz = {c['cpu_ghz']:.6g}",
        f"source = {_toml_str(source)}",
        "",
    ]
    return "\n".join(lines)


def _walks_toml(cal: Dict[str, Any]) -> str:
    f = cal["fit"]
    c = f["cost"]
    start = cal.get("preset") or cal.get("machine") or DEFAULT_PRESET
    ident = f"{cal['cpu_model']}, kernel {cal['kernel']}, host {cal['host']}"
    source = (f"calibrated on {ident} at {cal['when']} by hugescope calibrate: pointer-chase microbenchmarks "
              f"(4 KiB vs 2 MiB pages, {len(f['table'])} footprints) fitted to the page-table line cache "
              f"(walk_ref_cycles = a reference that hits it, walk_ref_mem_cycles = one that misses, "
              f"pt_cache_lines, l2_hit_cycles); other keys from {cal['machine']}; cpu_ghz: "
              + ("host clock from /proc/cpuinfo" if cal.get("host_ghz") else "the preset's clock"))
    lines = [
        "# Machine preset fitted by 'hugescope calibrate' (see docs/cost-model.md, 'Calibration').",
        f"# {ident}, {cal['when']}",
        "# footprint: chase ns per access with 4 KiB pages, 2 MiB pages, difference measured -> fitted",
    ]
    for r in f["table"]:
        lines.append(f"#   {r['footprint']} B: {r['ns_4k']:.2f} / {r['ns_2m']:.2f} ns, "
                     f"{r['delta_ns']:+.2f} -> {r['delta_fit_ns']:+.2f} ns")
    if f.get("overlap_random") is not None:
        lines.append(f"# overlap of walks in independent random loads (measured): {f['overlap_random']:.3f}")
    t = f.get("tlb")
    lines.append(f"preset = {_toml_str(start)}")
    if t is not None:
        lines += _tlb_toml(t, start)
    lines += [
        "",
        "[cost]",
        f"walk_ref_cycles = {c['walk_ref_cycles']:.6g}",
        f"walk_ref_mem_cycles = {c['walk_ref_mem_cycles']:.6g}",
        f"pt_cache_lines = {int(c['pt_cache_lines'])}",
        f"l2_hit_cycles = {c['l2_hit_cycles']:.6g}",
        f"cpu_ghz = {c['cpu_ghz']:.6g}",
        f"source = {_toml_str(source)}",
        "",
    ]
    return "\n".join(lines)


def _tlb_toml(t: Dict[str, Any], start: str) -> List[str]:
    """The TLB tables of the preset, each with where its numbers come from,
    and what nothing reported (notes) as comments."""
    g = t["geometry"]
    lines = [f"# TLBs: CPUID ({g['vendor']}, {g['method']}), checked by the measured TLB reach "
             f"(hugescope calibrate; {t.get('how') or 'reach not measured'})"]
    for r in t["analysis"]["levels"]:
        m = r["measured"]
        lines.append(f"#   L{r['level']} {r['page']}: CPUID {r['cpuid']['entries'] if r['cpuid'] else 'nothing'}; "
                     + (f"measured step between {m['pages_before']} and {m['pages_at']} pages "
                        f"({m['ns_before']:.2f} -> {m['ns_after']:.2f} ns a load)" if m else "no step measured")
                     + f"; {r['verdict']}")
    for n in t["notes"]:
        lines.append(f"# note: {n}")
    lines.append("# pwc: no CPUID leaf reports page-walk caches; the starting preset's sizes stay (defaults, "
                 f"from {start})")
    if t["analysis"].get("splintered"):
        # The measured reach of 2 MiB pages is that of 4 KiB pages (the note
        # above): each 2 MiB page is held as a 4 KiB entry, its walk still
        # ends at the PMD (MachineConfig::tlb_max_page).
        lines.append('tlb_max_page = "4k"  # measured: 2 MiB pages reach as far as 4 KiB pages in this TLB')
    lines.append('replace = ["l1", "l2"]')
    for name in ("l1", "l2"):
        for key, c in t["tables"][name].items():
            lines += ["", f"[{name}.{_toml_str(key)}]  # {c['why']}", f"entries = {int(c['entries'])}",
                      f"ways = {int(c['ways'])}"]
    return lines


def save_preset(cal: Dict[str, Any], path: Optional[str] = None) -> str:
    """Write the calibration as a machine TOML (atomically) and check that it
    loads as a machine configuration. Returns the path."""
    from . import api

    path = os.fspath(path or default_path())
    text = preset_toml(cal)
    # Check before replacing an earlier calibration: a file that does not load is never written.
    fd, tmp = tempfile.mkstemp(suffix=".toml")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        api.machine_config(config=tmp)
    finally:
        os.unlink(tmp)
    # The default place (~/.config/hugescope) is the tool's own: create it.
    write_atomic(path, text, make_dirs=True)
    return path
