"""`hugescope demo` (what `make demo` runs): the main demonstration at a scale
that finishes in a couple of minutes on 2 cores.

1. Trace GUPS at two sizes and graph kernels on a Kronecker graph (Graph500
   parameters).
2. The MMU alone: each trace through 4KB-only and 2MB-only page maps.
3. The OS model: base, ideal and Linux THP (free memory, 50% and 90% of 2MB
   blocks fragmented) on the same pass of each trace.
4. If the PCC-paper experiments are available: utility curves of every
   workload (BFS also the reuse and fragmentation figures) and the HTML report.

Every speedup printed is an estimate of the cost model.
"""

from __future__ import annotations

import os
import time
from typing import Optional

from rich.console import Console
from rich.table import Table

from . import api, workloads
from ._io import write_json

console = Console(width=None if os.isatty(1) else 160)

# Scales chosen so the whole demo stays within three minutes on 2 cores.
# BFS runs top-down: at these reduced scales the bottom-up sweeps of
# direction-optimizing BFS are sequential and TLB-friendly, while at the
# paper's scale 25 the random parent/offset accesses dominate either way.
# BFS uses scale 21, the smallest at which it is TLB-bound the way the paper's
# inputs are: its 8 MiB parent array exceeds the 4 MiB reach of the L2 TLB in
# 4KB pages (page-walk rate 22% of accesses, against 3.7% at scale 20, where
# the array fits), and its 300 MiB footprint makes a 1% budget one whole 2MB
# region (at scale 20 it is 0.75 of one, so no policy can promote anything).
GRAPHS = [
    ("bfs", {"scale": 21, "direction_optimizing": False}, {"scale": 16, "direction_optimizing": False}),
    ("pagerank", {"scale": 19, "iterations": 2}, {"scale": 15, "iterations": 2}),
]


# GUPS, the TLB worst case (random 8-byte updates), at two sizes far beyond
# the 4 MiB reach of the L2 TLB in 4KB pages: 64 MiB is 32 huge pages, as many
# as the 2MB L1 TLB holds; 1 GiB is 512, which fit the shared L2.
GUPS = [({"size": "64MiB", "updates": 2_000_000}, {"size": "16MiB", "updates": 200_000}),
        ({"size": "1GiB", "updates": 2_000_000}, {"size": "64MiB", "updates": 200_000})]


def _trace(out: str, name: str, params: dict, label: str = "") -> str:
    path = os.path.join(out, f"{label}.hst" if label else f"{name}-s{params['scale']}.hst")
    if not os.path.exists(path):
        t = time.monotonic()
        info = workloads.trace(name, path, **params)
        console.print(f"traced {name} {params}: {info['summary']['accesses']:,} accesses in {time.monotonic() - t:.1f} s -> {path}")
    return path


def static_table(traces: dict) -> Table:
    t = Table(title="MMU alone: every page 4KB vs every page 2MB (haswell-pcc; cycles are estimates)")
    for c in ("workload", "accesses", "walks/1k (4KB)", "walks/1k (2MB)", "xlat share (4KB)", "xlat share (2MB)", "speedup (2MB, est.)"):
        t.add_column(c, justify="left" if c == "workload" else "right")
    rows = {}
    for name, path in traces.items():
        r4 = api.simulate(path, preset="haswell-pcc", pages="4k")
        r2 = api.simulate(path, preset="haswell-pcc", pages="2m")
        rows[name] = {"4k": r4.to_dict(), "2m": r2.to_dict()}
        a, b = r4.record, r2.record
        t.add_row(name, f"{a.translation.accesses:,}",
                  f"{a.translation.walks_per_1k_accesses:.2f}", f"{b.translation.walks_per_1k_accesses:.2f}",
                  f"{100 * a.cost.translation_share:.1f}%", f"{100 * b.cost.translation_share:.1f}%",
                  f"{a.cost.total_cycles / b.cost.total_cycles:.3f}x")
    return t, rows


def policy_table(traces: dict, names=None) -> tuple:
    t = Table(title="OS model: policies on the same pass of each trace (speedups over base pages are estimates)")
    for c in ("workload", "policy", "memory", "walks/1k", "huge share", "fallbacks", "speedup (xlat)", "speedup (xlat+OS)"):
        t.add_column(c, justify="left" if c in ("workload", "policy", "memory") else "right")
    out = {}
    for name, path in traces.items():
        if names is not None and name not in names:
            continue
        runs = [("free", {}), ("50% fragmented", {"frag": 0.5}), ("90% fragmented", {"frag": 0.9})]
        out[name] = {}
        for label, opts in runs:
            pols = ["ideal", "linux"] if not opts else ["linux"]
            res = api.compare(path, pols, preset="haswell-pcc", **opts)
            for r in res:
                s = r.summary()
                out[name][f"{s['label']} ({label})"] = r.to_dict()
                t.add_row(name, s["label"], label, f"{s['walks_per_1k']:.2f}", f"{100 * s['huge_share']:.1f}%",
                          f"{s['fault_fallbacks']:,}", f"{s['xlat_speedup_est']:.3f}x", f"{s['speedup_est']:.3f}x")
    return t, out


def ingens_table(lines, paper: str = "Ingens (OSDI'16)") -> Table:
    """A paper's studies, one line each: headline figures beside the paper's."""
    t = Table(title=f"{paper} at CI scale: headline figures (estimates) beside the paper's")
    for c in ("study", "this run (estimates)", "paper", "claims"):
        t.add_column(c)
    for line in lines:
        t.add_row(*[line[c] for c in ("study", "this run (estimates)", "paper", "claims")])
    return t


def reproduction(out: str, traces: dict, static: dict, ds_run, curves: dict, frag, quick: bool,
                 studies: Optional[dict] = None) -> None:
    """The reproduction table of all five papers and the virtualization
    section at CI scale from the demo's
    own runs (seed 1: BFS's curve and fragmentation bars, PageRank's curve,
    both kernels' static runs, the DS tables); only what the demo lacks is
    simulated (the PCC size sensitivity of both kernels, PageRank's
    fragmentation bars; Ingens' Table 6 and Table 3 runs). ``studies``: the
    demo's seed-1 Ingens, Navarro and FHPM studies (``{"ingens": Studies,
    "navarro": Studies, "fhpm": Studies}``). One seed, so no ordering can be called a shape:
    ``hugescope reproduce`` runs three. Written to ``OUT/results``."""
    from . import reproduce
    from .reproduce import render
    from .results import SimResult

    kernels = ["bfs", "pagerank"]
    params = {name: small if quick else full for name, full, small in GRAPHS}
    pcc = {k: {1: {"trace": traces[k], "curve": curves[traces[k]], "static": SimResult(static[k]["4k"]).summary(),
                   "params": params[k]}} for k in kernels}
    pcc["bfs"][1]["frag"] = frag
    console.print("reproduction table of the five papers and the virtualization section at CI scale "
                  "(seed 1; PCC size sensitivity and PageRank's "
                  "fragmentation bars run now, the rest reused) ...")
    reuse = {"pcc": pcc, "ds": {1: ds_run}, **{p: {1: st} for p, st in (studies or {}).items()}}
    r = reproduce.run("all", scale="ci", seeds=[1], reuse=reuse, kernels=kernels)
    for t in render.rich_tables(r):
        console.print(t)
    paths = r.save(os.path.join(out, "results"))
    console.print(f"reproduction: {paths['csv']} (and .json, .html)")


def run_demo(out: str = "demo-out", quick: bool = False) -> int:
    from ._io import check_output, prepare_dir

    start = time.monotonic()
    # Every place the demo writes is checked before its first trace: the
    # results JSON, the experiments' directory and the report (in ./demo-report).
    prepare_dir(out)
    check_output(os.path.join(out, "demo-results.json"), "json")
    prepare_dir(os.path.join(out, "results"))
    prepare_dir("demo-report")
    check_output(os.path.join("demo-report", "report.html"), "html")
    from . import ds_tables as ds
    from . import ingens_study as ing
    from . import navarro_study as nav
    from . import fhpm_study as fh
    from . import virt_study as vs
    ds.check_outputs(os.path.join(out, "results"))
    from . import reproduce
    reproduce.check_outputs(os.path.join(out, "results"))
    ing.check_outputs(os.path.join(out, "results"))
    nav.check_outputs(os.path.join(out, "results"))
    vs.check_outputs(os.path.join(out, "results"))
    fh.check_outputs(os.path.join(out, "results"))
    traces = {}
    for name, full, small in GRAPHS:
        traces[name] = _trace(out, name, small if quick else full)
    gups = {}
    for full, small in GUPS:
        params = small if quick else full
        label = f"gups-{params['size']}"
        gups[label] = _trace(out, "gups", params, label)
    shown = []  # every terminal table, for the report too
    t, static = static_table({**gups, **traces})
    console.print(t)
    shown.append(t)
    # BFS gets the full PCC-paper treatment below; the policy table shows PageRank.
    t, pol = policy_table(traces, names={"pagerank"})
    console.print(t)
    shown.append(t)
    write_json(os.path.join(out, "demo-results.json"), {"static": static, "policies": pol})
    console.print(f"results: {os.path.join(out, 'demo-results.json')} (every counter; cycle figures are estimates)")
    # Direct segments (ISCA'13): Tables 4/5 and the GUPS sweep at CI scale,
    # saved beside the PCC experiments so the report shows them too.
    from .cli_experiments import print_ds_tables
    r = ds_run = ds.ds_tables(scale="ci", gups_sizes=["64KiB", "4MiB", "16MiB", "256MiB"] if quick else None)
    print_ds_tables(r, console)
    ds.save(r, os.path.join(out, "results"))
    # Ingens (OSDI'16): the five studies at CI scale, one line each here,
    # their tables and figures in the report.
    r = ing_run = ing.ingens_studies(scale="ci")
    shown.append(ingens_table(ing.headlines(r)))
    console.print(shown[-1])
    ing.save(r, os.path.join(out, "results"))
    # Reservation-based superpages (OSDI'02) and today's mTHP: the five
    # studies at CI scale, one line each here.
    r = nav_run = nav.navarro_studies(scale="ci")
    shown.append(ingens_table(nav.headlines(r), "Navarro (OSDI'02) and mTHP"))
    console.print(shown[-1])
    nav.save(r, os.path.join(out, "results"))
    # Virtualization (Ingens' host/guest page-size table, direct segments in
    # a VM) and FHPM's five studies at CI scale, one line each here.
    r = vs.virt_studies(scale="ci")
    shown.append(ingens_table(vs.headlines(r), "Virtualization: nested walks"))
    console.print(shown[-1])
    vs.save(r, os.path.join(out, "results"))
    r = fh_run = fh.fhpm_studies(scale="ci")
    shown.append(ingens_table(fh.headlines(r), "FHPM (fine-grained huge pages for VMs)"))
    console.print(shown[-1])
    fh.save(r, os.path.join(out, "results"))
    from .demo_paper import run_paper_demo
    # BFS gets every PCC-paper figure; the other workloads the utility curve.
    others = [p for name, p in traces.items() if name != "bfs"] + list(gups.values())
    # The reproduction table (docs/reproduction.md) at CI scale, from the
    # runs above: seed 1 of the demo's BFS and PageRank, its DS tables.
    def table(curves, frag):
        runs = {"ingens": ing_run, "navarro": nav_run, "fhpm": fh_run}
        reproduction(out, traces, static, ds_run, curves, frag, quick, runs)

    run_paper_demo(out, traces["bfs"], console, quick=quick, tables=shown, others=others, reproduce=table)
    console.print(f"demo finished in {time.monotonic() - start:.0f} s")
    return 0
