"""``hugescope bench``: throughput and memory measurements (never tests).

For each workload it traces a small input into a temporary directory, then
measures in one process, with the passes interleaved (decode, then each row,
repeated; ``hugescope_core::bench::pipeline_throughput``):

* the decode floor (zstd, checksums, byte planes, unpacking; nothing else),
* the full pipeline ``hugescope simulate --no-base`` runs for each policy
  (decode + MMU + kernel + policy), and the static 4KB map (the MMU alone),

each as the best and the median of the repeats, with its ratio to the floor.
Then the peak RSS of simulating the same workload at N and 10N accesses, each
in a fresh Python process (``getrusage`` in the child, so the two runs never
share a high-water mark), and their ratio: memory must not grow with the
trace's length.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional, Tuple

from . import _core, bench_tracegen, workloads

#: The row of the static base-page map (``hugescope_core::bench::STATIC_ROW``).
STATIC_ROW = "static 4k"

PRESET = "haswell-pcc"

#: Workload parameters besides the access cap: GUPS over a table of ``size``
#: (two accesses per update), BFS and the key-value store at sizes whose
#: traces reach the cap.
def _params(name: str, size: str, accesses: int) -> Dict:
    if name == "gups":
        return {"size": size, "updates": max(1, accesses // 2)}
    if name == "bfs":
        return {"scale": 18}
    if name == "kv":
        return {"ops": max(1, accesses // 4)}
    raise ValueError(name)


WORKLOADS = ("gups", "bfs", "kv")


def _trace(name: str, path: str, size: str, accesses: int) -> Dict:
    """Trace ``accesses`` accesses of workload ``name`` into ``path``; returns
    the accesses written and the end-to-end generation time."""
    t0 = time.perf_counter()
    res = workloads.trace(name, path, limit=accesses, **_params(name, size, accesses))
    secs = time.perf_counter() - t0
    return {"accesses": res["summary"]["accesses"], "seconds": secs}


# The child process of a peak-RSS measurement: import, note the high-water
# mark, simulate, note it again. VmHWM of /proc/self/status, not getrusage:
# ru_maxrss survives exec, so a child would start at its parent's peak (the
# parent traced a GUPS table of --size); VmHWM belongs to the new image.
_RSS_CHILD = """
import json, sys
from hugescope import _core
def hwm():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
before = hwm()
out = _core.simulate_policies(sys.argv[1], [sys.argv[2]], sys.argv[3], with_base=False)
print(json.dumps({"rss_kib_after_import": before, "rss_kib_peak": hwm(),
                  "accesses": out[0].translation.accesses}))
"""


def peak_rss(trace: str, policy: str, preset: str = PRESET) -> Dict:
    """Peak RSS (KiB, ``VmHWM`` of a fresh child process) of simulating
    ``policy`` over ``trace``, and the child's RSS right after importing
    hugescope (the interpreter and the extension, before any model state)."""
    p = subprocess.run([sys.executable, "-c", _RSS_CHILD, trace, policy, preset],
                       capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise RuntimeError(f"peak-RSS child failed: {p.stderr.strip().splitlines()[-1:]}")
    return json.loads(p.stdout)


def run(accesses: int, repeat: int, size: str, names: List[str], policies: List[str],
        rss_accesses: Optional[int], rss_policy: str = "pcc",
        note: Callable[[str], None] = lambda s: None,
        sweeps: Optional[Tuple[List[str], Optional[float]]] = None, console=None) -> Dict:
    """Every measurement of ``hugescope bench`` as one JSON-ready dict.
    ``sweeps=(extra traces, virtual duration)``: also the cost of shared-pass
    sweeps against one simulation (``bench_sweeps``) on the GUPS trace and the
    extra traces, printed on ``console`` as they finish."""
    report: Dict = {"kind": "measurement", "preset": PRESET, "accesses": accesses, "repeats": repeat,
                    "workloads": [], "tracegen": [], "tracegen_ratio": [], "rss": None}
    with tempfile.TemporaryDirectory() as d:
        for name in names:
            path = os.path.join(d, f"{name}.hst")
            note(f"tracing {name} ({accesses:,} accesses)")
            gen = _trace(name, path, size, accesses)
            report["tracegen"].append({"workload": name, "accesses": gen["accesses"], "how": "wall time of one run",
                                       "end_to_end_accesses_per_second": gen["accesses"] / gen["seconds"]})
            note(f"measuring {name}: decode floor, {', '.join(policies)}, {STATIC_ROW} ({repeat} rounds)")
            r = json.loads(_core.bench_pipeline(path, PRESET, [*policies, STATIC_ROW], repeat))
            r["workload"] = name
            r["params"] = _params(name, size, accesses)
            r["trace"] = f"{name}.hst (temporary)"
            report["workloads"].append(r)
        if sweeps is not None:
            from . import bench_sweeps

            if "gups" not in names:
                raise ValueError("--sweeps measures on the GUPS trace: keep gups in --workloads")
            note("sweeps: sensitivity and a 9-budget x 4-policy curve vs one simulation, shared and separate")
            # At most 3 runs of each sweep: the separate curve alone is
            # 20-25 simulations, and the best of 3 already steadies the ratio.
            bench_sweeps.report([os.path.join(d, "gups.hst"), *sweeps[0]], sweeps[1], console or _quiet(), report,
                                repeat=min(repeat, 3))
        # Trace generation, generator alone vs end to end (gups and bfs at
        # about the same access count; bench_tracegen.py).
        note(f"trace generation: gups and bfs, generator alone vs end to end ({repeat} alternating runs)")
        report["tracegen_ratio"] = bench_tracegen.rows(size, accesses, repeat, d)
        if rss_accesses:
            rows = []
            for n in (rss_accesses, 10 * rss_accesses):
                path = os.path.join(d, f"gups-rss-{n}.hst")
                note(f"peak RSS: tracing gups ({n:,} accesses), simulating {rss_policy} in a child process")
                _trace("gups", path, size, n)
                rows.append({"accesses": n, **peak_rss(path, rss_policy)})
                os.unlink(path)
            small, big = rows
            report["rss"] = {
                "how": "VmHWM (/proc/self/status) of a fresh child process (python -c: import hugescope, "
                       "simulate one policy with no base run), one child per trace length",
                "workload": "gups", "size": size, "policy": rss_policy, "runs": rows,
                "ratio": big["rss_kib_peak"] / small["rss_kib_peak"],
                "model_ratio": ((big["rss_kib_peak"] - big["rss_kib_after_import"])
                                / max(1, small["rss_kib_peak"] - small["rss_kib_after_import"])),
            }
    return report


def render(report: Dict, console) -> None:
    """The tables of ``hugescope bench`` on ``console`` (rich)."""
    from rich.table import Table

    t = Table(title=f"hugescope bench: {report['preset']}, {report['accesses']:,} accesses per trace "
                    f"(measurements: wall time of {report['repeats']} interleaved passes each; decode on one thread, simulate "
                    f"with the trace decoded and the PCC updated on other threads when two cpus are free; "
                    f"M accesses/s, best and median)")
    for c in ("workload", "row", "decode best", "decode median", "simulate best", "simulate median",
              "ratio best", "ratio median"):
        t.add_column(c, justify="right")
    for w in report["workloads"]:
        dec = w["decode_only"]
        for r in w["rows"]:
            s = r["simulate"]
            t.add_row(w["workload"], r["what"], f"{dec['accesses_per_second'] / 1e6:.1f}",
                      f"{dec['median_accesses_per_second'] / 1e6:.1f}", f"{s['accesses_per_second'] / 1e6:.1f}",
                      f"{s['median_accesses_per_second'] / 1e6:.1f}", f"{r['ratio']:.3f}", f"{r['median_ratio']:.3f}")
    console.print(t)
    if report.get("tracegen_ratio"):
        console.print(bench_tracegen.table(report["tracegen_ratio"], report["repeats"]))
    # One cold run each (the traces the rows above read): the process's first
    # touch of a fresh GUPS table is in it, which on a VM can cost seconds of
    # host page faults, so it may read well below the best-of-N table above.
    for g in report["tracegen"]:
        console.print(f"trace generation end to end, {g['workload']} (one run: the bench's own input, generator, "
                      f"encoding, zstd, disk, first touch of its memory included): "
                      f"{g['end_to_end_accesses_per_second'] / 1e6:.1f} M accesses/s")
    rss = report["rss"]
    if rss:
        small, big = rss["runs"]
        console.print(f"peak RSS ({rss['how']}), {rss['workload']} {rss['size']} under {rss['policy']}: "
                      f"{small['accesses']:,} accesses {small['rss_kib_peak'] / 1024:.1f} MiB, "
                      f"{big['accesses']:,} accesses {big['rss_kib_peak'] / 1024:.1f} MiB: ratio {rss['ratio']:.3f} "
                      f"(above the {small['rss_kib_after_import'] / 1024:.1f} MiB after import: "
                      f"ratio {rss['model_ratio']:.3f})")


def _quiet():
    """A console that prints nothing (the JSON keeps every figure)."""
    from rich.console import Console

    return Console(file=open(os.devnull, "w"))
