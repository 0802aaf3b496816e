"""The calibrated cost model: predicted run time of a plan from a measured base.

A simulation gives translation counters; the machine gives run times. This
module turns one into the other with a handful of parameters, each with a unit
(``PARAM_UNITS``), and fits them (docs/cost-model.md, "The calibrated model")::

    X(P)         = l2_hits x l2_hit_ns + pwc_hits x pwc_hit_ns
                 + walk_refs_llc x walk_ref_llc_ns + walk_refs_mem x walk_ref_mem_ns
    predicted(P) = T_allhuge (measured)
                 + (1 - overlap) x (X(P) - X(all huge))
    speedup(P)   = predicted(base pages) / predicted(P)

* The program's own time (its data accesses, its computation) is not modelled
  per access: it is the measured time of the workload with every region huge,
  which differs from any plan's only by translation. So a workload whose
  accesses are expensive (GUPS) and one whose are cheap (streaming BFS) need
  no common per-access constant (the flaw of the old two-parameter fit,
  docs/linux.md, "hugescope calibrate").
* Walk references are priced by where they hit in the data caches: the
  simulator's page-table line cache (``hw/ptcache.rs``, on when the machine's
  ``cost.pt_cache_lines`` > 0, as in the preset ``hugescope calibrate``
  writes) splits them into ``walk_refs_llc`` and ``walk_refs_mem``. A result
  without the split (the model off) counts every reference as an LLC hit.
* ``overlap`` is the share of translation time hidden behind other work (the
  out-of-order core keeps issuing independent loads during a walk; a pointer
  chase hides nothing). 0 <= overlap <= 1.

The latencies come from the microbenchmarks of ``hugescope calibrate``
(``params_from_cost``); ``fit`` then fits the free parameters (by default
``overlap`` and ``walk_ref_mem_ns``) to measured plans by least squares of the
relative error of the predicted speedups, every parameter within its bounds.
Everything this module returns is an estimate of the model. The model itself
(the formula, the parameters' units, bounds and defaults) is the core's
(``hugescope_core::cost::Calibrated``): this module fits and calls it.

A point: ``{"workload": str, "plan": str, "features": features(sim of this
plan's static map), "features_huge": features(sim of all huge), "t_huge":
measured s of the all-huge run, "t": measured s of this plan}`` (``t`` absent
when only predicting). The base-page plan of a workload is the point whose
``plan`` is one of ``BASE_PLANS``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from . import _core

#: Every parameter and its unit, its upper bound (lower bounds are all 0) and
#: its value without a calibration: the core's table
#: (``hugescope_core::cost::CALIBRATED_PARAMS``), read once.
PARAM_UNITS: Dict[str, str] = {name: unit for name, unit, _, _ in _core.cost_params()}
BOUNDS: Dict[str, float] = {name: upper for name, _, upper, _ in _core.cost_params()}
DEFAULT_PARAMS: Dict[str, float] = {name: default for name, _, _, default in _core.cost_params()}
#: What ``fit`` fits unless told otherwise; the rest are held at ``start``.
FREE = ("overlap", "walk_ref_mem_ns")
#: Plan names of the base-page run of a workload.
BASE_PLANS = ("base", "4k", "none")
#: The counters ``features`` keeps.
FEATURES = ("accesses", "l1_hits", "l2_hits", "walks", "walk_refs", "walk_refs_llc", "walk_refs_mem", "pwc_hits")


def features(sim) -> Dict[str, float]:
    """The counters the model uses, from one ``simulate()`` result (a
    ``SimResult``, its record, or its dict form). Without the page-table line
    cache's split, every walk reference counts as an LLC hit (``classified``
    0)."""
    from .results import as_record

    rec = as_record(sim) if isinstance(sim, (dict, _core.Record)) or hasattr(sim, "record") else None
    t = getattr(rec, "translation", None)
    if not isinstance(t, _core.Record):
        raise ValueError("features: not a simulation result (no 'translation' counters)")
    out = {"accesses": float(t.accesses), "l1_hits": float(t.l1_hits), "l2_hits": float(t.l2_hits),
           "walks": float(t.walks), "walk_refs": float(t.walk_refs), "pwc_hits": float(t.pwc_hits)}
    classified = "walk_refs_mem" in t
    out["walk_refs_mem"] = float(t.walk_refs_mem) if classified else 0.0
    out["walk_refs_llc"] = float(t.walk_refs_llc) if classified else out["walk_refs"]
    out["classified"] = 1.0 if classified else 0.0
    return out


def walker_cycles(translation, cost) -> float:
    """Cycles the page walker spends (walk references and PWC hits, the
    L1-miss/L2-hit term left out; an estimate) from a result's
    ``translation`` record and its machine's ``cost`` record
    (``hugescope_core::cost::walker_cycles``)."""
    return _core.cost_walker_cycles(float(translation.walk_refs), float(translation.pwc_hits),
                                    float(cost.walk_ref_cycles), float(cost.pwc_hit_cycles))


def _counts(feat: Dict[str, float]):
    # The counters the core's model reads, in its order.
    return (feat["l2_hits"], feat["pwc_hits"], feat["walk_refs_llc"], feat["walk_refs_mem"])


def _values(params: Dict[str, float]) -> list:
    missing = [k for k in PARAM_UNITS if k not in params]
    if missing:
        raise ValueError(f"cost model parameters missing: {', '.join(missing)}")
    for k in PARAM_UNITS:
        if not isinstance(params[k], (int, float)):
            raise ValueError(f"cost model parameter {k}={params[k]!r} is not a number ({PARAM_UNITS[k]})")
    return [float(params[k]) for k in PARAM_UNITS]


def _core_call(fn, *args):
    # The core's refusals (a parameter out of bounds, a counter that is no
    # count) are ValueErrors here, as this module's callers expect.
    try:
        return fn(*args)
    except _core.HugescopeError as e:
        raise ValueError(str(e)) from None


def translation_seconds(feat: Dict[str, float], params: Dict[str, float]) -> float:
    """X: the translation time of a run's counters before overlap, in seconds
    (``hugescope_core::cost::Calibrated::translation_seconds``)."""
    return _core_call(_core.cost_translation_seconds, _counts(feat), _values(params))


def _check_params(params: Dict[str, float]) -> Dict[str, float]:
    values = _values(params)
    _core_call(_core.cost_translation_seconds, (0.0, 0.0, 0.0, 0.0), values)  # the core checks the bounds
    return dict(zip(PARAM_UNITS, values))


def predict_seconds(point: Dict[str, Any], params: Dict[str, float]) -> float:
    """Predicted run time (s, an estimate) of ``point``'s plan: its workload's
    measured all-huge time plus the translation time the plan adds over all
    huge, less the overlapped share
    (``hugescope_core::cost::Calibrated::predict_seconds``)."""
    values = _check_params(params).values()
    t_huge = float(point["t_huge"])
    if not t_huge > 0:
        raise ValueError(f"{point.get('workload')}/{point.get('plan')}: t_huge {point['t_huge']!r} is not positive")
    return _core_call(_core.cost_predict_seconds, t_huge, _counts(point["features"]), _counts(point["features_huge"]),
                      list(values))


def params_from_cost(cost: Dict[str, Any], overlap: float = 0.0) -> Dict[str, float]:
    """Starting parameters from a machine's ``[cost]`` table (cycles at
    ``cpu_ghz``; e.g. the preset ``hugescope calibrate`` saved). With the
    page-table line cache off, a missing reference costs what a hit does."""
    ghz = float(cost["cpu_ghz"])
    ns = lambda k: float(cost.get(k, 0.0)) / ghz  # noqa: E731
    llc = ns("walk_ref_cycles")
    mem = ns("walk_ref_mem_cycles") if int(cost.get("pt_cache_lines", 0) or 0) > 0 else llc
    return {"l2_hit_ns": ns("l2_hit_cycles"), "pwc_hit_ns": ns("pwc_hit_cycles"), "walk_ref_llc_ns": llc,
            "walk_ref_mem_ns": mem, "overlap": float(overlap)}


def _base_points(points: Sequence[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    base: Dict[str, Dict[str, Any]] = {}
    for p in points:
        if str(p.get("plan", "")).lower() in BASE_PLANS:
            base.setdefault(p["workload"], p)
    return base


def residuals(points: Sequence[Dict[str, Any]], params: Dict[str, float]) -> List[float]:
    """Relative error of each point's predicted speedup over its workload's
    base-page point (predicted / measured - 1). A workload with no base point
    among ``points`` is compared on speedup over all huge instead (the
    relative error of the time). Base points themselves are left out (0 by
    construction)."""
    base = _base_points(points)
    out = []
    for p in points:
        b = base.get(p["workload"])
        if b is p:
            continue
        pred, meas = predict_seconds(p, params), float(p["t"])
        if b is not None:
            out.append((predict_seconds(b, params) / pred) / (float(b["t"]) / meas) - 1.0)
        else:
            out.append(pred / meas - 1.0)
    return out


def fit(points: List[Dict[str, Any]], start: Optional[Dict[str, float]] = None,
        free: Sequence[str] = FREE) -> Dict[str, float]:
    """Fit the ``free`` parameters to measured ``points`` (each with ``t``):
    least squares of ``residuals`` (the relative error of predicted
    speedups), every parameter within [0, ``BOUNDS``] (scipy's bounded
    trust-region solver; the problem has a handful of unknowns). The others
    stay at ``start`` (default ``DEFAULT_PARAMS``; a partial ``start`` is
    completed from it). Returns ``{name: value}`` for every name of
    ``PARAM_UNITS``. Deterministic: no random start."""
    import numpy as np
    from scipy.optimize import least_squares

    params = dict(DEFAULT_PARAMS)
    params.update(start or {})
    params = _check_params(params)
    free = list(free)
    unknown = [k for k in free if k not in PARAM_UNITS]
    if unknown:
        raise ValueError(f"cannot fit unknown parameters {unknown} (parameters: {', '.join(PARAM_UNITS)})")
    if not points:
        raise ValueError("nothing to fit: no points")
    for p in points:
        for k in ("workload", "plan", "features", "features_huge", "t_huge", "t"):
            if k not in p:
                raise ValueError(f"point {p.get('workload')}/{p.get('plan')} has no '{k}'")
        if not float(p["t"]) > 0:
            raise ValueError(f"{p['workload']}/{p['plan']}: measured time {p['t']!r} is not positive")
    if not free or not residuals(points, params):
        return params

    def res(x):
        q = dict(params, **dict(zip(free, (float(v) for v in x))))
        return np.asarray(residuals(points, q))

    x0 = [min(max(params[k], 0.0), BOUNDS[k]) for k in free]
    r = least_squares(res, x0, bounds=([0.0] * len(free), [BOUNDS[k] for k in free]), method="trf")
    params.update({k: float(min(max(v, 0.0), BOUNDS[k])) for k, v in zip(free, r.x)})
    return params
