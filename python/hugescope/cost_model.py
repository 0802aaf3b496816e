"""The cost model that turns a plan's simulated counters into predicted
seconds, and its fit to measured runs (the interface ``validate_suite`` and
calibration share; issue #15).

This is the **minimal stand-in** of that interface: today's linear model,
priced from the measured all-huge run instead of a fixed per-access cost::

    seconds(plan) = t_huge + overlap * (walk_refs(plan) - walk_refs(huge)) * walk_ref_cycles
                                     + overlap * (l2_hits(plan) - l2_hits(huge)) * l2_hit_cycles
                                     ------------------------------------------------------- / (cpu_ghz * 1e9)

``t_huge`` is the measured time of the run with every region huge: it holds
the program's own (non-translation) time and the little translation left with
huge pages, so a workload's per-access cost is measured, not assumed
(issue #15, "the program's own non-translation time from a measured base").
The difference in translation work between the plan and all-huge is priced
per walk reference and per L2 TLB hit, and ``overlap`` is the share of those
cycles that stalls the program (walks overlap with other work out of order).
``walk_ref_cycles`` and ``overlap`` are fitted, both >= 0; ``l2_hit_cycles``
and ``cpu_ghz`` are held at their start values.

A point (one plan of one workload) is::

    {"workload": str, "plan": str, "features": features(sim of the plan's static map),
     "features_huge": features(sim of all huge), "t_huge": measured s of all huge,
     "t": measured s of this plan (absent when only predicting)}

and a plan's predicted speedup is ``predict_seconds(base point) /
predict_seconds(plan point)``, the base point being the workload's point whose
``plan`` is ``"base"``.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

#: Each parameter and its unit.
PARAM_UNITS: Dict[str, str] = {
    "walk_ref_cycles": "cycles per page-walk memory reference (fitted, >= 0)",
    "overlap": "share of translation cycles that stall the program, dimensionless (fitted, >= 0)",
    "l2_hit_cycles": "cycles per L2 TLB hit (held)",
    "cpu_ghz": "GHz, cycles to seconds (held: this host's clock)",
}
FITTED = ("walk_ref_cycles", "overlap")
#: Start values: the haswell-pcc preset's latencies, every walk cycle stalling.
DEFAULTS = {"walk_ref_cycles": 50.0, "overlap": 1.0, "l2_hit_cycles": 7.0}
#: The counters the model reads from a simulation result.
COUNTERS = ("accesses", "l2_hits", "walk_refs", "walks")


def features(sim: Dict[str, Any]) -> Dict[str, float]:
    """The counters the model uses, from one ``simulate()`` result dict
    (``SimResult.to_dict()``)."""
    t = sim["translation"]
    return {k: float(t[k]) for k in COUNTERS}


def _start(start: Optional[Dict[str, Any]]) -> Dict[str, float]:
    from .calibrate import host_ghz

    p = dict(DEFAULTS)
    p["cpu_ghz"] = host_ghz() or 3.0
    for k, v in (start or {}).items():
        if k not in PARAM_UNITS:
            raise ValueError(f"unknown cost-model parameter '{k}' (known: {', '.join(PARAM_UNITS)})")
        p[k] = float(v)
    if not p["cpu_ghz"] > 0:
        raise ValueError(f"cpu_ghz {p['cpu_ghz']!r} is not positive")
    return p


def predict_seconds(point: Dict[str, Any], params: Dict[str, float]) -> float:
    """Predicted seconds of the point's plan (an estimate)."""
    f, h = point["features"], point["features_huge"]
    extra = (params["walk_ref_cycles"] * (f["walk_refs"] - h["walk_refs"])
             + params["l2_hit_cycles"] * (f["l2_hits"] - h["l2_hits"]))
    return float(point["t_huge"]) + params["overlap"] * extra / (params["cpu_ghz"] * 1e9)


def _pairs(points: List[Dict[str, Any]]):
    """(base point, plan point) of every measured non-base plan."""
    bases = {p["workload"]: p for p in points if p["plan"] == "base"}
    out = []
    for p in points:
        if p["plan"] == "base":
            continue
        b = bases.get(p["workload"])
        if b is None:
            raise ValueError(f"{p['workload']}: no base point (plan 'base') to measure speedups from")
        out.append((b, p))
    return out


def fit(points: List[Dict[str, Any]], start: Optional[Dict[str, Any]] = None) -> Dict[str, float]:
    """Fit ``walk_ref_cycles`` and ``overlap`` (both >= 0) minimising the
    squared relative error of the predicted speedup over every measured
    non-base plan (scipy's bounded least squares from ``start``). Returns every
    parameter (units in ``PARAM_UNITS``)."""
    import numpy as np
    from scipy.optimize import least_squares

    params = _start(start)
    pairs = _pairs(list(points))
    for _, p in pairs + [(None, b) for b, _ in pairs]:
        for key in ("t", "t_huge"):
            v = p.get(key)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{p['workload']} {p['plan']}: measured {key} {v!r} is not a positive time")
    if not pairs:
        raise ValueError("nothing to fit: no measured plan besides base")

    def residuals(x):
        q = dict(params, walk_ref_cycles=x[0], overlap=x[1])
        return [predict_seconds(b, q) / predict_seconds(p, q) / (b["t"] / p["t"]) - 1.0 for b, p in pairs]

    x0 = np.array([params["walk_ref_cycles"], params["overlap"]], dtype=float)
    r = least_squares(residuals, x0, bounds=([0.0, 0.0], [np.inf, np.inf]))
    params["walk_ref_cycles"], params["overlap"] = float(r.x[0]), float(r.x[1])
    return params
