"""Built-in workloads: list them, generate their traces, run them natively.

Every workload places its data structures at the same fixed virtual addresses
in both modes, so a plan computed on the trace applies to the native run.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, List, Optional

from . import _core


def list() -> List[Dict[str, Any]]:  # noqa: A001 - mirrors the CLI verb
    """Every workload with its parameters (name, kind, default, help)."""
    return json.loads(_core.workloads())


def names() -> List[str]:
    return [w["name"] for w in list()]


def layout(name: str, **params) -> Dict[str, Any]:
    """Regions, footprint and resolved parameters of a run, without running it."""
    return json.loads(_core.workload_layout(name, json.dumps(_clean(params))))


def trace(
    name: str,
    out: str,
    limit: Optional[int] = None,
    progress: Optional[Callable[[int], None]] = None,
    **params,
) -> Dict[str, Any]:
    """Generate the trace of workload ``name`` into ``out`` (an ``.hst`` file).

    ``limit`` caps the number of accesses written. ``progress`` is called with
    the number of accesses generated so far (about every million).
    Returns ``{"path", "header", "summary", "result"}``.
    """
    from ._io import check_output, note_written
    from .units import check_callable, check_int

    p = _clean(params)
    if limit is not None:
        limit = check_int(limit, "limit", 1)
    check_callable(progress, "progress", "(accesses generated so far)")
    # Before the trace is generated: the output rules of hugescope._io (a graph
    # file read by the workload is an input), and a followed link resolved.
    target = check_output(out, "hst", [p["file"]] if isinstance(p.get("file"), str) and p["file"] else [])
    text = _core.trace_workload(name, json.dumps(p), target, limit, progress)
    note_written(target)
    return json.loads(text)


def native(name: str, thp: bool = False, progress: Optional[Callable[[str], None]] = None, **params) -> Dict[str, Any]:
    """Run workload ``name`` natively at its fixed addresses.

    ``thp=True`` asks for ``MADV_HUGEPAGE`` on every region; by default nothing
    is advised (base pages under the system's ``madvise`` THP mode).
    ``progress`` is called with each progress label ("level:3", "iter:2").
    Wall times in the report are measurements (``time.monotonic`` in Rust's
    ``Instant``), taken once; repeat runs for statistics.
    """
    from .units import check_callable

    check_callable(progress, "progress", "(a progress label)")
    return json.loads(_core.native_workload(name, json.dumps(_clean(params)), bool(thp), progress))


def _clean(params: Dict[str, Any]) -> Dict[str, Any]:
    return {k.replace("-", "_"): v for k, v in params.items() if v is not None}
