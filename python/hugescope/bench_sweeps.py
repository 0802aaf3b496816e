"""What sweeps cost relative to one simulation (``hugescope bench --sweeps``).

Measurements, never tests: CPU time of each sweep (every thread of the process:
the trace is decoded on a second thread when two cpus are free), the best of
``repeat`` runs, divided by the best CPU time of one simulation of the same
trace in the same run (one
configuration, pcc at the sensitivity's 32% budget, with the base reference
every sweep point and every ``hugescope simulate`` carries). Each sweep runs
twice: shared (configurations of one share class simulated as one until
their decisions differ, the core's ``sweep``) and separate (each on its own);
the two give byte-identical results, which is checked here too.

- sensitivity: ``hugescope sensitivity``'s configurations (PCC sizes
  4..1024 at 32%, base, ideal);
- curve: 9 budgets (PCC paper §4) x 4 policies (pcc, pcc with the artifact's
  read schedule, hawkeye, oracle), base and ideal.

And ``tlb_sizes``: the default L2 TLB sizes of ``hugescope tlb-sizes`` over
base pages in one pass against one static 4KB simulation, and against one
static simulation per size (with a check that the results are identical).
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Optional

from . import experiments as ex

CURVE_POLICIES = ["pcc", "pcc:artifact_phase=true", "hawkeye", "oracle"]


def _timed(f: Callable[[], Any]):
    # CPU time of this process (every thread): on a shared machine the wall
    # clock also counts other programs' turns on the cores.
    t = time.process_time()
    r = f()
    return time.process_time() - t, r


def _best(f: Callable[[], Any], repeat: int):
    """The least CPU time of ``repeat`` runs of ``f`` (a run costs a fraction
    of a second to a few seconds: one run's figure moves by 10% with what
    else the machine does), and the last run's result."""
    runs = [_timed(f) for _ in range(max(1, repeat))]
    return min(t for t, _ in runs), runs[-1][1]


def _same(a, b) -> bool:
    return [x.record for x in a] == [x.record for x in b]


def divergence(results) -> Dict[str, Any]:
    """When configurations' decisions first differ: each pcc result's reads
    as (regions promoted, refusals), compared read by read (exact: from the
    results' executed plans and per-read records)."""
    per = []
    times: List[float] = []
    for r in results:
        d = r.to_dict()
        ivs = (d.get("policy_params") or {}).get("intervals")
        if not isinstance(ivs, list):
            continue
        plan = [(e["pid"], e["start"]) for e in d["executed_plan"]]
        reads, i = [], 0
        for iv in ivs:
            reads.append((tuple(plan[i:i + iv["promoted"]]), iv["failed"]))
            i += iv["promoted"]
        per.append(reads)
        times = [iv["time_s"] for iv in ivs]
    first = next((k for k in range(len(times)) if len({tuple(p[:k + 1]) for p in per}) > 1), None)
    return {"reads": len(times), "first_divergent_read": None if first is None else first + 1,
            "first_divergent_read_s": None if first is None else times[first],
            "distinct_decision_sequences": len({tuple(p) for p in per})}


def measure(trace: str, duration: Optional[float] = None, sizes: Optional[List[int]] = None,
            budgets: Optional[List[float]] = None, which=("sensitivity", "curve"), repeat: int = 3) -> Dict[str, Any]:
    """CPU times (seconds, best of ``repeat`` runs) and ratios to one
    simulation of ``trace``, one thread, ``duration`` seconds of virtual time
    (None: the trace's rate)."""
    common: Dict[str, Any] = {"threads": 1}
    if duration is not None:
        common["duration"] = duration
    sizes = list(sizes or ex.DEFAULT_PCC_SIZES)
    budgets = list(budgets or ex.DEFAULT_BUDGETS)
    one_s, _ = _best(lambda: ex.run_configs(trace, [{"policy": "pcc", "budget": 0.32}], **common), repeat)
    sweeps = {
        "sensitivity": ex.sensitivity_configs(sizes, 32.0)[0],
        "curve": ex.curve_configs(CURVE_POLICIES, budgets, [])[0],
    }
    out: Dict[str, Any] = {"trace": os.path.basename(trace), "duration_s": duration, "one_simulation_s": one_s,
                           "runs_each": max(1, repeat), "load_average_1min": os.getloadavg()[0]}
    for name, configs in sweeps.items():
        if name not in which:
            continue
        shared_s, shared = _best(lambda: ex.run_configs(trace, configs, share=True, **common), repeat)
        separate_s, separate = _best(lambda: ex.run_configs(trace, configs, share=False, **common), repeat)
        out[name] = {"configurations": len(configs), "shared_s": shared_s, "separate_s": separate_s,
                     "shared_ratio": shared_s / one_s, "separate_ratio": separate_s / one_s,
                     "identical": _same(shared, separate)}
        if name == "sensitivity":
            out[name]["divergence"] = divergence(shared[:len(sizes)])
    return out


def measure_tlb_sizes(trace: str, repeat: int = 3) -> Dict[str, Any]:
    """CPU time (best of ``repeat`` runs) of ``tlb-sizes`` (default sizes,
    4KB pages) and of one static simulation per size, as ratios to one
    static simulation of ``trace``."""
    from . import _core

    one_s, _ = _best(lambda: _core.simulate_static(trace, pages="4k"), repeat)
    pass_s, rep = _best(lambda: _core.simulate_tlb_sizes(trace, []), repeat)
    key = rep.structure[len("l2."):]

    def separate():
        return [_core.simulate_static(trace, pages="4k", overrides=[
            f"l2.{key}.entries={p.entries}", f"l2.{key}.ways={getattr(p.result.machine.l2, key).ways}"])
            for p in rep.points]

    separate_s, runs = _best(separate, repeat)
    same = [p.result for p in rep.points] == runs
    return {"sizes": len(rep.points), "one_static_s": one_s, "one_pass_s": pass_s, "separate_s": separate_s,
            "one_pass_ratio": pass_s / one_s, "separate_ratio": separate_s / one_s, "identical": same,
            "walks_priced": rep.walks_priced,
            "size_walks": sum(p.result.translation.walks for p in rep.points)}


def report(traces: List[str], duration: Optional[float], console, json_out: Optional[dict] = None,
           repeat: int = 3) -> None:
    """Measure each trace and print one table (``hugescope bench --sweeps``)."""
    from rich.table import Table

    runs = f"best of {max(1, repeat)} runs" if repeat > 1 else "one run"
    t = Table(title=f"sweeps vs one simulation (measurements: CPU time of the process, {runs} each; "
                    "one simulation = pcc at 32% with its base reference)")
    for c in ("trace", "one sim (s)", "sensitivity shared", "sensitivity separate", "curve shared",
              "curve separate", "identical", "sizes first differ"):
        t.add_column(c, justify="right")
    rows = []
    for path in traces:
        m = measure(path, duration, repeat=repeat)
        rows.append(m)
        s, c, dv = m["sensitivity"], m["curve"], m["sensitivity"]["divergence"]
        first = "never" if dv["first_divergent_read"] is None else \
            f"read {dv['first_divergent_read']}/{dv['reads']} ({dv['first_divergent_read_s']:g} s)"
        t.add_row(m["trace"], f"{m['one_simulation_s']:.2f}", f"{s['shared_ratio']:.2f}x", f"{s['separate_ratio']:.2f}x",
                  f"{c['shared_ratio']:.2f}x", f"{c['separate_ratio']:.2f}x",
                  "yes" if s["identical"] and c["identical"] else "NO", first)
    console.print(t)
    tt = Table(title=f"L2 TLB sizes in one pass vs one static 4KB simulation (measurements: CPU time of the process, "
                     f"{runs} each; hugescope tlb-sizes' default sizes)")
    for c in ("trace", "sizes", "one static (s)", "one pass", "separate runs", "walks priced / size walks",
              "identical"):
        tt.add_column(c, justify="right")
    for path, m in zip(traces, rows):
        ts = measure_tlb_sizes(path, repeat)
        m["tlb_sizes"] = ts
        tt.add_row(m["trace"], str(ts["sizes"]), f"{ts['one_static_s']:.2f}", f"{ts['one_pass_ratio']:.2f}x",
                   f"{ts['separate_ratio']:.2f}x", f"{ts['walks_priced'] / max(ts['size_walks'], 1):.2f}",
                   "yes" if ts["identical"] else "NO")
    console.print(tt)
    console.print(f"load average (1 min) at the end: {os.getloadavg()[0]:.2f}; virtual duration: "
                  f"{'the trace rate' if duration is None else f'{duration:g} s'}")
    if json_out is not None:
        json_out["sweeps"] = rows
