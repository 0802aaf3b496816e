"""The ``hugescope`` command line. Thin: parses arguments, calls the API,
renders tables with rich. Every number printed is a counter from the JSON
result or derived from one; cycle figures are labelled as estimates."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List, Optional

from rich.console import Console
from rich.table import Table

from . import _core, api, workloads
from ._io import write_json
from .errors import EXIT_USAGE, Interrupted
from .progress import progress_counter

# Off a terminal (CI logs, pipes) rich would wrap tables at 80 columns.
console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True)


class CliError(Exception):
    pass


# ---------------------------------------------------------------- simulate

def _add_machine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", help=f"machine preset ({', '.join(_core.presets())}, or 'calibrated' after "
                                    "'hugescope calibrate'); default haswell-pcc")
    p.add_argument("--config", metavar="TOML", help="TOML file merged over the preset")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one configuration value, e.g. l2.4k+2m.entries=1536 (repeatable)")


def _fmt(n) -> str:
    if isinstance(n, float):
        return f"{n:,.3f}"
    return f"{n:,}"


def render_sim(r) -> None:
    d = r.to_dict()
    t, c = d["translation"], d["cost"]
    what = f"pages: {d['pages']}" if "pages" in d else f"policy: {d.get('label', d.get('policy'))}"
    tab = Table(title=f"{(d.get('trace') or {}).get('workload', 'trace')} on {d['machine']['name']}, {what}")
    tab.add_column("page size")
    for col in ("accesses", "L1 hits", "L1 misses", "L2 hits", "L2 misses (walks)"):
        tab.add_column(col, justify="right")
    for row in t["by_page_size"]:
        if row["accesses"] == 0:
            continue
        tab.add_row(row["page_size"], _fmt(row["accesses"]), _fmt(row["l1_hits"]), _fmt(row["l1_misses"]),
                    _fmt(row["l2_hits"]), _fmt(row["l2_misses"]))
    console.print(tab)
    s = Table(show_header=False, box=None)
    s.add_column(style="bold")
    s.add_column(justify="right")
    s.add_row("accesses", _fmt(t["accesses"]))
    s.add_row("walks", _fmt(t["walks"]))
    s.add_row("walk references", _fmt(t["walk_refs"]))
    s.add_row("PWC hits", _fmt(t["pwc_hits"]))
    s.add_row("walks per 1000 accesses", f"{t['walks_per_1k_accesses']:.2f}")
    s.add_row("references per walk", f"{t['refs_per_walk']:.2f}")
    s.add_row("translation cycle share (estimate)", f"{100 * c['translation_share']:.1f}%")
    s.add_row("total cycles (estimate)", f"{c['total_cycles']:.4g}")
    console.print(s)


def _os_options(a) -> dict:
    return {
        "memory": a.memory, "frag": a.frag, "frag_method": a.frag_method, "budget": a.budget,
        "footprint": a.footprint, "duration": a.duration, "rate": a.rate, "seed": a.seed, "os_costs": a.os,
    }


def render_policies(results) -> None:
    t = Table(title="policies (cycles and speedup are estimates of the cost model)")
    cols = ["policy", "walks", "walks/1k", "huge share", "promotions", "huge faults", "fallbacks",
            "bloat", "xlat share", "speedup (xlat)", "speedup (xlat+OS)"]
    for c in cols:
        t.add_column(c, justify="left" if c == "policy" else "right")
    for r in results:
        s = r.summary()
        t.add_row(s["label"], _fmt(s["walks"]), f"{s['walks_per_1k']:.2f}", f"{100 * s['huge_share']:.1f}%",
                  _fmt(s["promotions"]), _fmt(s["faults_huge"]), _fmt(s["fault_fallbacks"]), f"{s['bloat']:.2f}",
                  f"{100 * s['translation_share_est']:.1f}%",
                  "-" if s.get("xlat_speedup_est") is None else f"{s['xlat_speedup_est']:.3f}x",
                  "-" if s.get("speedup_est") is None else f"{s['speedup_est']:.3f}x")
    console.print(t)
    d = results[0].to_dict()
    notes = [f"virtual time {d['virtual_seconds']:.3f} s ({d['time_base']['kind'].replace('_', ' ')})",
             f"memory {_size(d['memory_bytes'])}"]
    if d.get("fragmentation"):
        f = d["fragmentation"]
        notes.append(f"fragmented ({f['method']}): {100 * f['blocked_share']:.0f}% of 2MB blocks, FMFI {f['fmfi']:.2f}")
    if d.get("budget_bytes") is not None:
        notes.append(f"budget {_size(d['budget_bytes'])} of {_size(d['footprint_bytes'])} footprint")
    console.print("; ".join(notes))
    for r in results:
        for w in r.to_dict().get("warnings", []):
            err_console.print(f"[yellow]warning ({r['label']}):[/] {w}")
    procs = results[0]["processes"]
    if len(procs) > 1:
        pt = Table(title="per process")
        for c in ("policy", "pid", "name", "huge share", "rss", "bloat"):
            pt.add_column(c)
        for r in results:
            for p in r["processes"]:
                pt.add_row(r["label"], str(p["pid"]), p["name"], f"{100 * p['huge_share']:.1f}%", _size(p["rss_bytes"]),
                           f"{p['bloat']:.2f}")
        console.print(pt)


def cmd_simulate(a) -> int:
    policy_mode = bool(a.policy) or any(v is not None for v in (a.frag, a.budget, a.memory, a.duration, a.rate)) or bool(a.os)
    if not policy_mode:
        if a.emit_plan:
            raise CliError("--emit-plan records a policy's decisions; add --policy")
        r = api.simulate(a.trace, preset=a.preset, pages=a.pages or "4k", config=a.config, set=a.set)
        if a.json:
            write_json(a.json, r.to_dict())
        if not a.quiet:
            render_sim(r)
        return 0
    if a.pages:
        raise CliError("--pages is a static map; with --policy use --policy static:plan=FILE")
    policies = a.policy or ["linux"]
    results = api.compare(a.trace, policies, preset=a.preset, config=a.config, set=a.set,
                          with_base=not a.no_base, **_os_options(a))
    if a.json:
        data = results[0].to_dict() if len(results) == 1 else [r.to_dict() for r in results]
        write_json(a.json, data)
    if a.emit_plan:
        if len(results) != 1:
            raise CliError("--emit-plan needs exactly one --policy")
        write_json(a.emit_plan, results[0].plan())
    if not a.quiet:
        if len(results) == 1:
            render_sim(results[0])
        render_policies(results)
    return 0


# ---------------------------------------------------------------- trace

def cmd_trace_info(argv: List[str]) -> int:
    p = argparse.ArgumentParser(prog="hugescope trace info", description="Print a trace's header and counts.")
    p.add_argument("file")
    p.add_argument("--verify", action="store_true", help="decode every chunk and check its checksum")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    a = p.parse_args(argv)
    info = api.trace_info(a.file, verify=a.verify)
    if a.json:
        print(json.dumps(info, indent=2))
        return 0
    h, s = info["header"], info["summary"]
    t = Table(title=a.file, show_header=False)
    t.add_column(style="bold")
    t.add_column()
    t.add_row("workload", h["workload"])
    t.add_row("parameters", json.dumps(h.get("params", {})))
    t.add_row("cpus / processes", f"{h['cpus']} / {h.get('processes', 1)}")
    aps = h.get("accesses_per_second")
    t.add_row("nominal accesses/s", "unknown" if aps is None else f"{aps:,.0f}")
    t.add_row("accesses", f"{s['accesses']:,} ({s['reads']:,} reads, {s['writes']:,} writes)")
    t.add_row("per cpu", ", ".join(f"{n:,}" for n in s.get("per_cpu", [])))
    t.add_row("chunks / compressed", f"{s['chunks']:,} / {s['compressed_bytes']:,} bytes")
    t.add_row("address range", f"{s['min_addr']:#x} .. {s['max_addr']:#x}")
    t.add_row("progress markers", str(len(s.get("markers", []))))
    t.add_row("checked", "every chunk decoded and checksummed" if a.verify else "footer counts (use --verify to decode)")
    console.print(t)
    if h.get("regions"):
        rt = Table(title="regions")
        for col in ("name", "pid", "base", "length"):
            rt.add_column(col)
        for r in h["regions"]:
            rt.add_row(r["name"], str(r.get("pid", 0)), f"{r['base']:#x}", _size(r["len"]))
        console.print(rt)
    return 0


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.4g} {unit}"
    return f"{n} B"


def _coerce(kind: str, value: str):
    if kind == "bool":
        v = str(value).lower()
        if v in ("1", "true", "yes", "on"):
            return True
        if v in ("0", "false", "no", "off"):
            return False
        raise CliError(f"'{value}' is not a boolean (true/false)")
    if kind == "int":
        try:
            return int(value)
        except ValueError:
            return value  # suffixes like 50M are parsed by the core
    if kind == "float":
        try:
            return float(value)
        except ValueError:
            raise CliError(f"'{value}' is not a number")
    return value


def workload_parser(name: str, prog: str, extra) -> tuple:
    specs = {w["name"]: w for w in workloads.list()}
    if name not in specs:
        raise CliError(f"unknown workload '{name}'; available: {', '.join(sorted(specs))}")
    w = specs[name]
    p = argparse.ArgumentParser(prog=prog, description=w["about"])
    kinds = {}
    for ps in w["params"]:
        flag = "--" + ps["name"].replace("_", "-")
        kinds[ps["name"]] = ps["kind"]
        # argparse expands %-formats in help text; workload help may say "80%".
        text = f"{ps['help']} (default {ps['default']})".replace("%", "%%")
        if ps["kind"] == "bool":
            p.add_argument(flag, nargs="?", const="true", default=None, help=text)
        else:
            p.add_argument(flag, default=None, help=text)
    extra(p)
    return p, kinds


def _params(a, kinds) -> dict:
    out = {}
    for name, kind in kinds.items():
        v = getattr(a, name, None)
        if v is not None:
            out[name] = _coerce(kind, v)
    return out


def cmd_trace(argv: List[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        console.print("usage: hugescope trace WORKLOAD [params] -o FILE.hst\n"
                      "       hugescope trace info FILE.hst [--verify]\n"
                      "       hugescope trace merge A.hst B.hst -o AB.hst\n\n"
                      f"workloads: {', '.join(workloads.names())}")
        return 0
    if argv[0] == "info":
        return cmd_trace_info(argv[1:])
    if argv[0] == "merge":
        from .cli_experiments import cmd_trace_merge
        return cmd_trace_merge(argv[1:])
    name = argv[0]

    def extra(p):
        p.add_argument("-o", "--output", required=True, help="trace file to write (.hst)")
        p.add_argument("--limit", default=None, help="write at most this many accesses")
        if name == "gups":
            p.add_argument("--accesses", default=None, help="total accesses (2 per update); sets --updates")

    p, kinds = workload_parser(name, f"hugescope trace {name}", extra)
    a = p.parse_args(argv[1:])
    params = _params(a, kinds)
    if name == "gups" and a.accesses is not None:
        from . import units
        params["updates"] = max(1, units.parse_count(a.accesses) // 2)
    limit = None
    if a.limit is not None:
        from . import units
        limit = units.parse_count(a.limit)
    with progress_counter(f"tracing {name}", "accesses") as tick:
        out = workloads.trace(name, a.output, limit=limit, progress=tick, **params)
    s = out["summary"]
    console.print(f"wrote {a.output}: {s['accesses']:,} accesses ({s['writes']:,} writes), "
                  f"{s['compressed_bytes']:,} bytes compressed; result: {json.dumps(out['result'].get('result', out['result']))}")
    return 0


def cmd_native(argv: List[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        console.print(f"usage: hugescope native WORKLOAD [params] [--thp]\n\nworkloads: {', '.join(workloads.names())}")
        return 0
    name = argv[0]

    def extra(p):
        p.add_argument("--thp", action="store_true", help="request MADV_HUGEPAGE on every region")
        p.add_argument("--json", help="write the report to this JSON file")

    p, kinds = workload_parser(name, f"hugescope native {name}", extra)
    a = p.parse_args(argv[1:])
    rep = workloads.native(name, thp=a.thp, **_params(a, kinds))
    if a.json:
        write_json(a.json, rep)
    for w in rep.get("warnings", []):
        err_console.print(f"[yellow]warning:[/] {w}")
    console.print(f"{name}: setup {rep['setup_seconds']:.3f} s, run {rep['run_seconds']:.3f} s "
                  f"(measured wall time, one run); result: {json.dumps(rep['result'])}")
    return 0


def cmd_workloads(a) -> int:
    for w in workloads.list():
        t = Table(title=f"{w['name']}: {w['about']}", title_justify="left")
        t.add_column("parameter")
        t.add_column("kind")
        t.add_column("default")
        t.add_column("meaning")
        for p in w["params"]:
            t.add_row("--" + p["name"].replace("_", "-"), p["kind"], p["default"], p["help"])
        console.print(t)
    return 0


def cmd_policies(a) -> int:
    t = Table(title="policies (parameters: --policy NAME:key=value,...; see docs/policies.md)")
    t.add_column("name")
    t.add_column("what it does")
    for n, d in api.policies().items():
        t.add_row(n, d)
    console.print(t)
    return 0


def cmd_presets(a) -> int:
    if a.name:
        print(json.dumps(api.machine_config(a.name), indent=2))
        return 0
    t = Table(title="machine presets")
    t.add_column("name")
    t.add_column("description")
    for n in _core.presets():
        t.add_row(n, api.machine_config(n)["description"])
    console.print(t)
    return 0


def cmd_bench(a) -> int:
    """Throughput measurements (never tests): decode-only floor and decode +
    simulate of a GUPS trace on haswell-pcc, and trace generation speed."""
    import tempfile
    import time as _time

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "gups.hst")
        from . import units
        n = units.parse_count(a.accesses)
        t0 = _time.perf_counter()
        workloads.trace("gups", path, size=a.size, updates=max(1, n // 2))
        gen = _time.perf_counter() - t0
        t = Table(title=f"hugescope bench: GUPS {a.size}, {n:,} accesses, haswell-pcc "
                        f"(measurements: wall time of {a.repeat} passes each, one thread; best and median)")
        for c in ("pages", "decode only (M acc/s)", "decode + simulate (M acc/s)", "median decode + simulate", "ratio"):
            t.add_column(c, justify="right")
        rows = []
        for pages in ("4k", "2m"):
            r = json.loads(_core.bench_file(path, "haswell-pcc", pages, a.repeat))
            rows.append(r)
            t.add_row(pages, f"{r['decode_only']['accesses_per_second'] / 1e6:.1f}",
                      f"{r['simulate']['accesses_per_second'] / 1e6:.1f}",
                      f"{r['simulate']['median_accesses_per_second'] / 1e6:.1f}", f"{r['ratio']:.2f}")
        console.print(t)
        console.print(f"trace generation end to end (table setup, tracing, zstd compression, disk): "
                      f"{n / gen / 1e6:.1f} M accesses/s; the generator alone: cargo bench -p hugescope-workloads")
        if a.json:
            write_json(a.json, {"kind": "measurement", "static": rows,
                                "tracegen_accesses_per_second": n / gen})
    return 0


def cmd_demo(a) -> int:
    from .demo import run_demo
    return run_demo(a.out, quick=a.quick)


# ---------------------------------------------------------------- main

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hugescope", description="Which memory should be huge pages, and what does each policy buy?")
    p.add_argument("--version", action="version", version=f"hugescope {_core.version()}")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")

    s = sub.add_parser("simulate", help="simulate a trace through the MMU model")
    s.add_argument("trace")
    _add_machine_args(s)
    s.add_argument("--pages", default=None, help="static page-size map: 4k, 2m, 1g, or a plan JSON file (default 4k)")
    s.add_argument("--policy", action="append", default=[], metavar="NAME[:k=v,...]",
                   help="run the OS model with this policy (repeatable: all run on one pass); see 'hugescope policies'")
    s.add_argument("--frag", type=float, default=None, help="fragment memory first: share of 2MB blocks with an unmovable page (pcc) or target FMFI (ingens)")
    s.add_argument("--frag-method", default="pcc", choices=["pcc", "ingens"], help="fragmentation method (default pcc)")
    s.add_argument("--budget", default=None, help="cap huge-page memory at this share of the footprint (0.04 or 4%%)")
    s.add_argument("--memory", default=None, help="simulated physical memory (default: 1.3 x footprint + 8MiB, at least 64MiB)")
    s.add_argument("--footprint", default=None, help="footprint the budget refers to (default: the trace's regions)")
    s.add_argument("--duration", type=float, default=None, help="treat the trace as this many seconds of virtual time")
    s.add_argument("--rate", type=float, default=None, help="nominal accesses per second (default: the trace header's, else cost-model cycles)")
    s.add_argument("--seed", type=int, default=1, help="seed of the fragmentation injector")
    s.add_argument("--os", action="append", default=[], metavar="COST=US", help="override an OS cost in microseconds, e.g. fault_base_us=2.5")
    s.add_argument("--no-base", action="store_true", help="do not simulate base pages alongside (no speedup)")
    s.add_argument("--emit-plan", metavar="PLAN", help="write the plan the policy executed (replay with static:plan=PLAN or 'hugescope run')")
    s.add_argument("--json", metavar="OUT", help="write every counter to this JSON file")
    s.add_argument("-q", "--quiet", action="store_true", help="print nothing (with --json)")
    s.set_defaults(func=cmd_simulate)

    sub.add_parser("trace", help="generate a workload trace, or 'trace info FILE'", add_help=False)
    sub.add_parser("native", help="run a workload natively and time it", add_help=False)

    po = sub.add_parser("policies", help="list huge-page policies")
    po.set_defaults(func=cmd_policies)

    w = sub.add_parser("workloads", help="list built-in workloads and their parameters")
    w.set_defaults(func=cmd_workloads)

    pr = sub.add_parser("presets", help="list machine presets, or print one")
    pr.add_argument("name", nargs="?")
    pr.set_defaults(func=cmd_presets)

    from . import cli_experiments, cli_linux
    cli_experiments.add_commands(sub)
    cli_linux.add_commands(sub)

    b = sub.add_parser("bench", help="measure simulation throughput (decode-only floor vs decode + simulate)")
    b.add_argument("--size", default="1GiB", help="GUPS table size (default 1GiB)")
    b.add_argument("--accesses", default="20M", help="accesses in the GUPS trace (default 20M)")
    b.add_argument("--repeat", type=int, default=5,
                   help="passes per measurement; the best and the median are reported (default 5)")
    b.add_argument("--json", help="write the measurements to this JSON file")
    b.set_defaults(func=cmd_bench)

    d = sub.add_parser("demo", help="the main demonstration (what 'make demo' runs)")
    d.add_argument("--out", default="demo-out", help="directory for traces and results")
    d.add_argument("--quick", action="store_true", help="smaller inputs")
    d.set_defaults(func=cmd_demo)
    return p


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] == "trace":
            return cmd_trace(argv[1:])
        if argv and argv[0] == "native":
            return cmd_native(argv[1:])
        p = build_parser()
        a = p.parse_args(argv)
        if not getattr(a, "func", None):
            p.print_help()
            return 2
        return a.func(a)
    except (_core.HugescopeError, CliError, OSError, ValueError) as e:
        err_console.print(f"[bold red]error:[/] {e}")
        return EXIT_USAGE
    except KeyboardInterrupt as e:
        err_console.print("interrupted; no partial result was written")
        return e.exit_code if isinstance(e, Interrupted) else 130


if __name__ == "__main__":
    sys.exit(main())
