"""``hugescope bench --evaluation TRACE``: the PCC paper's whole evaluation of
one workload as one measurement (issue #37: "the time to a figure").

The evaluation is the project's own experiments with their defaults, run as
``hugescope curve``, ``frag`` and ``sensitivity`` run them (``experiments``:
batches of configurations over both cores, the shared pass for the
configurations that differ only in what they decide, the results cache for
the reference runs). Stages, in order:

1. reference runs: ``base`` and ``ideal`` (every speedup's base-page
   reference and the curves' two reference lines), simulated once into the
   results cache; every later stage reads them back from it;
2. budget sweep (PCC Fig. 5): ``experiments.curve``: pcc, hawkeye and oracle
   at 9 huge-page budgets (0-100% of the footprint), base and ideal, Linux
   at 50% and 90% fragmentation;
3. fragmentation (Fig. 7): ``experiments.frag``: base, linux, hawkeye, pcc
   and pcc with demotion at 50% and 90% of the 2MB blocks fragmented;
4. PCC-size sweep (Fig. 6): ``experiments.sensitivity``: pcc with 4 ... 1024
   entries at a 32% budget, base and ideal.

Measurements, never tests: each stage's wall time (``time.perf_counter``)
and CPU time of the process (every thread, ``time.process_time``), its
configurations and what it read from the results cache. The cache is a
fresh private directory by default, so the figure is a cold start (each
reference run simulated once); ``warm_cache=True`` uses the user's cache as
it is. Other programs on the machine slow the wall time: the load average is
recorded before and after.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from typing import Any, Callable, Dict, Iterator, List, Optional

from . import _core, experiments as ex

#: Virtual seconds the trace spans: the PCC reproductions' (reproduce/pcc.py
#: DURATION: PCC reads at 30, 60 and 90 s).
DURATION = 120.0

#: Simulation threads: both cores of the machine the target is set for.
THREADS = 2

#: The results-cache environment the core reads (``result_cache``).
CACHE_DIR_ENV = "HUGESCOPE_CACHE_DIR"
NO_CACHE_ENV = "HUGESCOPE_NO_CACHE"


def _hits() -> Dict[str, int]:
    return dict(_core.cache_hits_by_kind())


def _diff(before: Dict[str, int], after: Dict[str, int]) -> Dict[str, int]:
    return {k: n - before.get(k, 0) for k, n in sorted(after.items()) if n > before.get(k, 0)}


@contextlib.contextmanager
def _cache(warm: bool) -> Iterator[Optional[str]]:
    """The results cache for the run: a fresh private directory (None: the
    user's, as configured)."""
    if warm:
        yield None
        return
    saved = {k: os.environ.get(k) for k in (CACHE_DIR_ENV, NO_CACHE_ENV)}
    with tempfile.TemporaryDirectory(prefix="hugescope-bench-cache-") as d:
        os.environ[CACHE_DIR_ENV] = d
        os.environ.pop(NO_CACHE_ENV, None)
        try:
            yield d
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def stages(trace: str, duration: float, threads: int) -> List[tuple]:
    """(name, what, configurations, run) of each stage; ``run()`` runs it."""
    common: Dict[str, Any] = {"duration": duration, "threads": threads}
    curve_n = len(ex.curve_configs(ex.DEFAULT_CURVE_POLICIES, ex.DEFAULT_BUDGETS, ex.DEFAULT_FRAG_LEVELS)[0])
    sens_n = len(ex.sensitivity_configs(ex.DEFAULT_PCC_SIZES, 32.0)[0])
    return [
        ("reference runs", "base and ideal, into the results cache", 2,
         lambda: ex.run_configs(trace, [{"policy": "base"}, {"policy": "ideal"}], **common)),
        ("budget sweep", f"curve: {', '.join(ex.DEFAULT_CURVE_POLICIES)} x {len(ex.DEFAULT_BUDGETS)} budgets, base, "
                         f"ideal, linux at {'/'.join(map(str, ex.DEFAULT_FRAG_LEVELS))}% fragmentation", curve_n,
         lambda: ex.curve(trace, frag_points=ex.DEFAULT_FRAG_LEVELS, **common)),
        ("fragmentation", f"frag: {len(ex.DEFAULT_FRAG_POLICIES)} policies x "
                          f"{'/'.join(map(str, ex.DEFAULT_FRAG_LEVELS))}%",
         len(ex.DEFAULT_FRAG_POLICIES) * len(ex.DEFAULT_FRAG_LEVELS),
         lambda: ex.frag(trace, **common)),
        ("PCC-size sweep", f"sensitivity: {len(ex.DEFAULT_PCC_SIZES)} sizes "
                           f"{ex.DEFAULT_PCC_SIZES[0]}..{ex.DEFAULT_PCC_SIZES[-1]} at 32%, base, ideal", sens_n,
         lambda: ex.sensitivity(trace, **common)),
    ]


def measure(trace: str, duration: float = DURATION, threads: int = THREADS, warm_cache: bool = False,
            note: Callable[[str], None] = lambda s: None) -> Dict[str, Any]:
    """Run the whole evaluation of ``trace`` once; the measurements as one
    JSON-ready dict."""
    import json

    info = json.loads(_core.trace_info(trace, False))
    out: Dict[str, Any] = {
        "kind": "measurement", "trace": os.path.basename(trace), "accesses": info["summary"]["accesses"],
        "workload": info["header"]["workload"], "duration_s": duration, "threads": threads,
        "cache": "the user's results cache as it was" if warm_cache else "a fresh private results cache (cold)",
        "how": "wall time (time.perf_counter) and CPU time of the process (time.process_time, every thread) "
               "of each stage, run once",
        "load_average_before": list(os.getloadavg()), "stages": [],
    }
    with _cache(warm_cache):
        t_wall, t_cpu = time.perf_counter(), time.process_time()
        for name, what, n, run in stages(trace, duration, threads):
            note(f"{name}: {what} ({n} configurations)")
            h, w, c = _hits(), time.perf_counter(), time.process_time()
            run()
            wall, cpu = time.perf_counter() - w, time.process_time() - c
            out["stages"].append({"stage": name, "what": what, "configurations": n, "wall_s": wall, "cpu_s": cpu,
                                  "reused": _diff(h, _hits())})
        out["total_wall_s"] = time.perf_counter() - t_wall
        out["total_cpu_s"] = time.process_time() - t_cpu
    out["configurations"] = sum(s["configurations"] for s in out["stages"])
    out["load_average_after"] = list(os.getloadavg())
    return out


def render(m: Dict[str, Any], console) -> None:
    """The table of ``hugescope bench --evaluation`` on ``console`` (rich)."""
    from rich.table import Table

    t = Table(title=f"the PCC evaluation of {m['trace']} ({m['accesses']:,} accesses, {m['duration_s']:g} virtual s, "
                    f"{m['threads']} threads; measurements: {m['how']}; {m['cache']})")
    for c in ("stage", "what", "configurations", "wall (s)", "CPU (s)", "CPU / wall", "read from the cache"):
        t.add_column(c, justify="left" if c in ("stage", "what", "read from the cache") else "right")
    for s in m["stages"]:
        reused = ", ".join(f"{n} {k}" for k, n in s["reused"].items()) or "-"
        t.add_row(s["stage"], s["what"], str(s["configurations"]), f"{s['wall_s']:.1f}", f"{s['cpu_s']:.1f}",
                  f"{s['cpu_s'] / s['wall_s']:.2f}" if s["wall_s"] else "-", reused)
    t.add_row("total", "", str(m["configurations"]), f"{m['total_wall_s']:.1f}", f"{m['total_cpu_s']:.1f}",
              f"{m['total_cpu_s'] / m['total_wall_s']:.2f}" if m["total_wall_s"] else "-", "")
    console.print(t)
    b, a = m["load_average_before"], m["load_average_after"]
    console.print(f"load average (1, 5, 15 min) before {b[0]:.2f} {b[1]:.2f} {b[2]:.2f}, after {a[0]:.2f} {a[1]:.2f} "
                  f"{a[2]:.2f}: other programs on the machine lengthen the wall times")
