"""The ``hugescope`` command line. Thin: parses arguments, calls the API,
renders tables with rich. Every number printed is a counter from the JSON
result or derived from one; cycle figures are labelled as estimates."""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import signal
import sys
from typing import Dict, List, Optional

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import _core, _io, api, units, workloads
from ._io import check_output, emit_json, is_stdout
from .configuration import OS_COSTS_KEYWORD, OS_KEYWORDS
from .errors import EXIT_FAILURE, EXIT_USAGE, Interrupted, RunFailed
from .progress import progress_counter, progress_share

# Off a terminal (CI logs, pipes) rich would wrap tables at 80 columns.
console = Console(width=None if sys.stdout.isatty() else 160)
# soft_wrap: an error is one line whatever the width, so a log or a test can
# rely on "one error, one line" even when stderr is a pipe (80 columns).
err_console = Console(stderr=True, soft_wrap=True, highlight=False)


class CliError(Exception):
    pass


class Parser(argparse.ArgumentParser):
    """argparse with the CLI's error convention: a usage error is one line
    (``error: hugescope simulate: ...``), not the usage block followed by the
    message. It still ends in ``SystemExit(2)`` as argparse does (callers of
    ``main`` in-process rely on that)."""

    def error(self, message):
        err_console.print(f"[bold red]error:[/] {escape(_error_line(f'{self.prog}: {message}'))}")
        raise SystemExit(EXIT_USAGE)

    def format_help(self):
        # A page cited as docs/NAME.md is shown as the command that prints
        # it: an installed package has no docs/ directory (issue #38).
        from .manual import cite_as_command
        return cite_as_command(super().format_help())


#: Set by a command while it works to say what an interruption keeps (e.g. a
#: sweep's checkpoint and how to resume); printed by ``main`` on SIGINT/SIGTERM.
interrupt_note: Optional[str] = None

#: Seeds are u64 in the core; checked here so -1 is an error, not an OverflowError.
seed_arg = units.int_arg("--seed")


# ---------------------------------------------------------------- simulate

def _add_machine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", help=f"machine preset ({', '.join(_core.presets())}, or 'calibrated' after "
                                    "'hugescope calibrate'); default haswell-pcc")
    p.add_argument("--config", metavar="FILE", help="TOML or JSON configuration merged over the preset "
                                                  "([machine], [os], [[policy]]; see docs/configuration.md)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one configuration value, e.g. l2.4k+2m.entries=1536 or os.budget=4%% (repeatable)")


def _fmt(n) -> str:
    if isinstance(n, float):
        return f"{n:,.3f}"
    return f"{n:,}"


def render_sim(r) -> None:
    d = r.record
    t, c = d.translation, d.cost
    what = f"pages: {d.pages}" if "pages" in d else f"policy: {getattr(d, 'label', getattr(d, 'policy', None))}"
    trace = getattr(d, "trace", None)
    tab = Table(title=f"{getattr(trace, 'workload', 'trace')} on {d.machine.name}, {what}")
    tab.add_column("page size")
    for col in ("accesses", "L1 hits", "L1 misses", "L2 hits", "L2 misses (walks)"):
        tab.add_column(col, justify="right")
    for row in t.by_page_size:
        if row.accesses == 0:
            continue
        tab.add_row(row.page_size, _fmt(row.accesses), _fmt(row.l1_hits), _fmt(row.l1_misses),
                    _fmt(row.l2_hits), _fmt(row.l2_misses))
    console.print(tab)
    s = Table(show_header=False, box=None)
    s.add_column(style="bold")
    s.add_column(justify="right")
    s.add_row("accesses", _fmt(t.accesses))
    s.add_row("walks", _fmt(t.walks))
    s.add_row("walk references", _fmt(t.walk_refs))
    s.add_row("PWC hits", _fmt(t.pwc_hits))
    s.add_row("walks per 1000 accesses", f"{t.walks_per_1k_accesses:.2f}")
    s.add_row("references per walk", f"{t.refs_per_walk:.2f}")
    s.add_row("translation cycle share (estimate)", f"{100 * c.translation_share:.1f}%")
    s.add_row("total cycles (estimate)", f"{c.total_cycles:.4g}")
    console.print(s)


def _os_options(a) -> dict:
    """The OS keywords (``configuration.OS_KEYWORDS``) the command's flags set;
    ``--os COST=US`` gives the OS costs."""
    return {**{k: getattr(a, k, None) for k in OS_KEYWORDS}, OS_COSTS_KEYWORD: a.os}


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
    d = results[0].record
    notes = [f"virtual time {d.virtual_seconds:.3f} s ({d.time_base.kind.replace('_', ' ')})",
             f"memory {_size(d.memory_bytes)}"]
    f = getattr(d, "fragmentation", None)
    if f:
        notes.append(f"fragmented ({f.method}): {100 * f.blocked_share:.0f}% of 2MB blocks, FMFI {f.fmfi:.2f}")
    if getattr(d, "budget_bytes", None) is not None:
        notes.append(f"budget {_size(d.budget_bytes)} of {_size(d.footprint_bytes)} footprint")
    console.print("; ".join(notes))
    for r in results:
        for w in getattr(r.record, "warnings", []):
            err_console.print(f"[yellow]warning ({escape(str(r.record.label))}):[/] {escape(str(w))}")
    procs = results[0].record.processes
    if len(procs) > 1:
        # A concurrent run (several traces) also shows when each process
        # finished on its own virtual time, the fairness measure of Ingens §4.
        concurrent = any(getattr(p, "finish_seconds", None) is not None for p in procs)
        title = "per process (finish: the process's own virtual time)" if concurrent else "per process"
        pt = Table(title=title)
        cols = ["policy", "pid", "name"] + (["finish (s)", "huge MB"] if concurrent else []) + \
            ["huge share", "rss", "bloat"]
        for c in cols:
            pt.add_column(c, justify="left" if c in ("policy", "name") else "right")
        for r in results:
            for p in r.record.processes:
                timing = [f"{p.finish_seconds:.6f}", f"{p.huge_bytes / 2**20:,.1f}"] if concurrent else []
                pt.add_row(r.record.label, str(p.pid), p.name, *timing, f"{100 * p.huge_share:.1f}%",
                           _size(p.rss_bytes), f"{p.bloat:.2f}")
        console.print(pt)


def _machine_inputs(a) -> list:
    """Files a command reads besides its trace (never to be overwritten)."""
    return [p for p in (getattr(a, "config", None),) if p]


def policy_inputs(policies) -> list:
    """Files named by policy parameters (``static:plan=FILE``): inputs too,
    so ``--emit-plan`` cannot replace the plan being replayed."""
    out = []
    for p in policies or []:
        for kv in str(p).partition(":")[2].split(","):
            key, _, value = kv.partition("=")
            if key.strip() == "plan" and value.strip():
                out.append(value.strip())
    return out


def check_outputs(outputs, inputs) -> None:
    """Check every (path, kind) output before the work starts, so a long run
    never fails at its end because of where it was asked to write."""
    named = [p for p, _ in outputs if p is not None]
    if sum(is_stdout(p) for p in named) > 1:
        raise CliError("two outputs are sent to standard output ('-'); name a file for all but one")
    if len({os.path.abspath(p) for p in named}) != len(named):
        raise CliError(f"the same file is named for two outputs: {' and '.join(named)}")
    for path, kind in outputs:
        # '-' is standard output: nothing on disk to check (emit_json prints it).
        if path is not None and not is_stdout(path):
            check_output(path, kind, inputs)


@contextlib.contextmanager
def human_to_stderr(*outputs):
    """While a result goes to standard output (``--json -``), the tables and
    notes meant for a person go to stderr, so stdout holds only the result
    and parses as such. A no-op when no output is ``-``."""
    if not any(is_stdout(p) for p in outputs):
        yield
        return
    # Flip the console's own stderr switch rather than pinning a file object:
    # the console keeps following whatever sys.stdout is afterwards.
    old = console.stderr
    console.stderr = True
    try:
        yield
    finally:
        console.stderr = old


def json_option(p: argparse.ArgumentParser, help: str, bare: bool = False) -> None:
    """The one ``--json`` option: a file, or ``-`` for standard output. With
    ``bare`` (commands that printed JSON for a bare ``--json`` and take no
    positional argument it could swallow) the value may be left out: ``-``."""
    if bare:
        p.add_argument("--json", nargs="?", const="-", default=None, metavar="FILE",
                       help=f"{help} ('-' or no value: standard output)")
    else:
        p.add_argument("--json", default=None, metavar="FILE", help=f"{help} ('-': standard output)")


def cmd_simulate(a) -> int:
    # virt: --guest-policy is --policy of a virtualized run; --virt alone
    # runs the host policy api.DEFAULT_HOST_POLICY.
    if a.guest_policy:
        a.policy = list(a.policy) + list(a.guest_policy)
    if (a.virt or a.host_policy) and a.pages:
        raise CliError("--pages is a static map; a virtualized run (--virt, --host-policy) needs --policy or --guest-policy")
    if (a.virt or a.host_policy) and not a.policy and not a.config:
        raise CliError("a virtualized run (--virt, --host-policy) needs a guest policy: add --guest-policy "
                       "(or --policy), e.g. --guest-policy linux")
    # A configuration file's [[policy]] entries run when no --policy is given
    # (`simulate --config run.toml` reproduces a run given by flags).
    file_policies = [] if a.policy or not a.config else api._config_policies(
        config_source(a), a.set)
    # Options of the OS model, which runs only with --policy: without one they
    # would have no effect (they used to switch silently to the linux policy).
    os_only = {"--frag": a.frag, "--frag-method": a.frag_method, "--budget": a.budget, "--memory": a.memory,
               "--footprint": a.footprint, "--duration": a.duration, "--rate": a.rate, "--seed": a.seed,
               "--os": a.os or None, "--no-base": a.no_base or None, "--emit-plan": a.emit_plan,
               "--timing": None if a.timing == "accesses" else a.timing}
    if not a.policy and not file_policies:
        given = [k for k, v in os_only.items() if v is not None]
        if given:
            raise CliError(f"{given[0]} applies to the OS model, which runs only with a policy; "
                           "add --policy (e.g. --policy linux)")
    else:
        if a.pages:
            raise CliError("--pages is a static map; with --policy use --policy static:plan=FILE")
        if a.frag is None and a.frag_method is not None:
            raise CliError(f"--frag-method '{a.frag_method}' has no effect without --frag")
        if a.frag is None and a.seed is not None:
            raise CliError("--seed seeds the fragmentation injector; it has no effect without --frag")
        if a.emit_plan and len(a.policy or file_policies) != 1:
            raise CliError("--emit-plan needs exactly one --policy")
        if a.by_site and not a.emit_plan:
            raise CliError("--by-site writes the emitted plan by allocation site: it needs --emit-plan")
        if a.timing != "accesses" and (not a.emit_plan or len(a.trace) > 1):
            raise CliError(f"--timing {a.timing} times an emitted plan: it needs --emit-plan and one trace")
        if a.duration is not None and a.rate is not None:
            raise CliError("--duration and --rate both set the virtual time base "
                           "(rate = accesses / duration); give one of them")
    # Several traces are concurrent processes of the OS model (sched.rs):
    # they need a policy, and the quantum means something only for them.
    if len(a.trace) > 1 and not a.policy and not file_policies:
        raise CliError(f"{len(a.trace)} traces run as concurrent processes of the OS model, which runs only "
                       "with a policy; add --policy (e.g. --policy linux)")
    if a.quantum_ms is not None and len(a.trace) == 1:
        raise CliError(f"--quantum-ms {a.quantum_ms:g} schedules concurrent processes; it has no effect with one "
                       "trace (give two or more)")
    if a.quiet and not (a.json or a.emit_plan):
        raise CliError("-q prints nothing; without --json or --emit-plan the run would have no output")
    if a.budget is not None:
        a.budget = api._share(a.budget, "--budget")
    inputs = list(a.trace) + _machine_inputs(a) + policy_inputs(a.policy)
    inputs += [p["plan"] for p in file_policies if isinstance(p.get("plan"), str)]
    if a.pages and a.pages.lower() not in ("4k", "2m", "1g"):
        inputs.append(a.pages)
    check_outputs([(a.json, "json"), (a.emit_plan, "json")], inputs)
    with human_to_stderr(a.json, a.emit_plan):
        return _simulate(a, file_policies, inputs)


@contextlib.contextmanager
def working(description: str):
    """A spinner with the elapsed time on stderr while one long step without
    a count of its own runs (drawing the report's figures); nothing when
    stderr is not a terminal. Simulations show a percentage bar instead
    (``progress_share``)."""
    if not sys.stderr.isatty():
        yield
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err_console,
                  transient=True) as p:
        p.add_task(description, total=None)
        yield


def _simulate(a, file_policies, inputs) -> int:
    if not a.policy and not file_policies:
        with progress_share(f"simulating ({a.pages or '4k'} pages)", console=err_console) as tick:
            r = api.simulate(a.trace[0], preset=a.preset, pages=a.pages or "4k", config=a.config, set=a.set,
                             progress=tick)
        if a.json:
            emit_json(a.json, r, inputs=inputs)
        if not a.quiet:
            render_sim(r)
        return 0
    opts = {k: v for k, v in _os_options(a).items() if v is not None and v != []}
    # One trace: the single-trace path exactly as before; several: a list.
    trace = a.trace[0] if len(a.trace) == 1 else a.trace
    names = ", ".join(str(p).split(":")[0] for p in a.policy) or "the configuration's policies"
    with progress_share(f"simulating {names}", console=err_console) as tick:
        results = api.compare(trace, a.policy, preset=a.preset, config=a.config, set=a.set,
                              with_base=not a.no_base, quantum_ms=a.quantum_ms, host_policy=a.host_policy, progress=tick,
                              virt=a.virt, **opts)
    if a.json:
        emit_json(a.json, results[0] if len(results) == 1 else results, inputs=inputs)
    if a.emit_plan:
        emit_json(a.emit_plan, _emitted_plan(a, results[0]), inputs=inputs)
    if not a.quiet:
        if len(results) == 1:
            render_sim(results[0])
        render_policies(results)
    return 0


def _machine_label(a) -> str:
    """The machine the command's estimates use, named as the outputs and
    plan headers name it (``calibrate.machine_label``), with any ``--set``."""
    from .calibrate import machine_label

    label = machine_label(a.preset, a.config)
    return label + (f" with --set {', '.join(a.set)}" if getattr(a, "set", None) else "")


def _emitted_plan(a, r) -> dict:
    """The plan ``--emit-plan`` writes: the policy's record retimed to
    ``--timing`` for the target that replays it, adjacent ranges merged, hex
    addresses, and a header with the simulator's estimate (plan.rs ``emit``)."""
    d = r.record
    estimate = {"speedup_vs_base": getattr(d, "speedup_vs_base", None),
                "translation_speedup_vs_base": getattr(d, "translation_speedup_vs_base", None),
                "how": "simulated: base-page cycles / cycles under this plan's policy on the trace, "
                       f"cost model ({_machine_label(a)}), OS work on the program's path included"}
    plan = _core.plan_emit(json.dumps(r.plan()), a.timing, a.trace[0], a.rate, a.duration,
                           getattr(d, "policy", None), json.dumps(estimate))
    if getattr(a, "by_site", False):
        plan = _core.plan_by_site(plan, a.trace[0])
    return json.loads(plan)


# ---------------------------------------------------------------- trace

def cmd_trace_info(argv: List[str]) -> int:
    p = Parser(prog="hugescope trace info", description="Print a trace's header and counts.")
    # FILE is optional to argparse only so that `trace info --json X.hst`
    # (where --json takes X.hst as its output) gets an error that says so.
    p.add_argument("file", nargs="?", metavar="FILE")
    p.add_argument("--verify", action="store_true", help="decode every chunk and check its checksum")
    json_option(p, "write the header and counts as JSON to this file instead of a table", bare=True)
    a = p.parse_args(argv)
    if a.file is None:
        hint = (f"; '--json {a.json}' names the JSON output: put the trace first (trace info {a.json} --json)"
                if a.json and not is_stdout(a.json) else "")
        raise CliError(f"hugescope trace info: a trace FILE is required{hint}")
    check_outputs([(a.json, "json")], [a.file])
    info = api.trace_info(a.file, verify=a.verify)
    if a.json:
        emit_json(a.json, info, inputs=[a.file])
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


def _coerce(kind: str, value: str, what: str = "value"):
    if kind == "bool":
        v = str(value).lower()
        if v in ("1", "true", "yes", "on"):
            return True
        if v in ("0", "false", "no", "off"):
            return False
        raise CliError(f"{what}: '{value}' is not a boolean (true/false)")
    if kind == "int":
        try:
            n = int(value)
        except ValueError:
            return value  # suffixes like 50M are parsed by the core
        # Past u64 the JSON number would reach the core as a float (1e+20)
        # and its message would not echo what was typed.
        if n > units.U64_MAX:
            raise CliError(f"{what}: '{value}' is out of range (expected at most {units.U64_MAX})")
        return n
    if kind == "float":
        return units.check_float(value, what)
    return value


def workload_parser(name: str, prog: str, extra) -> tuple:
    specs = {w["name"]: w for w in workloads.list()}
    if name not in specs:
        raise CliError(f"unknown workload '{name}'; available: {', '.join(sorted(specs))}")
    w = specs[name]
    p = Parser(prog=prog, description=w["about"])
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
            out[name] = _coerce(kind, v, "--" + name.replace("_", "-"))
    return out


def print_help_text(text: str) -> None:
    """Usage text of the commands parsed outside argparse, printed as is:
    through rich, "[params]" would be taken for a markup tag and vanish."""
    print(text)


def cmd_trace(argv: List[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print_help_text("usage: hugescope trace WORKLOAD [params] -o FILE.hst\n"
                      "       hugescope trace -o FILE.hst [--skip N] [--record M] [--valgrind] -- PROGRAM [args]\n"
                      "       hugescope trace import {lackey,champsim,text} INPUT -o FILE.hst [--skip N] [--record M]\n"
                      "       hugescope trace info FILE.hst [--verify]\n"
                      "       hugescope trace convert OLD.hst -o NEW.hst   (format version 1 or 2 to the current)\n"
                      "       hugescope trace merge A.hst B.hst -o AB.hst\n\n"
                      f"workloads: {', '.join(workloads.names())}\n"
                      "programs: build them with 'hugescope cc' (see docs/tracing.md), or use --valgrind")
        return 0
    if argv[0] == "info":
        return cmd_trace_info(argv[1:])
    if argv[0] == "import":
        return cmd_trace_import(argv[1:])
    if argv[0] == "convert":
        return cmd_trace_convert(argv[1:])
    if argv[0].startswith("-"):
        return cmd_trace_program(argv)
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
        if a.updates is not None:
            raise CliError("--accesses sets --updates (2 accesses per update): give one of them")
        params["updates"] = max(1, _count(a.accesses, "--accesses", 1) // 2)
    limit = None if a.limit is None else _count(a.limit, "--limit", 1)
    # A workload reading a graph file must not write its trace over it.
    check_output(a.output, "hst", [params["file"]] if params.get("file") else [])
    with progress_counter(f"tracing {name}", "accesses") as tick:
        out = workloads.trace(name, a.output, limit=limit, progress=tick, **params)
    s = out["summary"]
    console.print(f"wrote {a.output}: {s['accesses']:,} accesses ({s['writes']:,} writes), "
                  f"{s['compressed_bytes']:,} bytes compressed; result: {json.dumps(out['result'].get('result', out['result']))}")
    return 0


def _window_args(p) -> None:
    p.add_argument("--skip", default="0", help="accesses to skip before recording (default 0)")
    p.add_argument("--record", default=None, help="accesses to record after the skipped ones (default: all)")


def _window(a) -> tuple:
    return _count(a.skip, "--skip"), None if a.record is None else _count(a.record, "--record", 1)


def _print_trace(output: str, s: dict) -> None:
    console.print(f"wrote {output}: {s['accesses']:,} accesses ({s['writes']:,} writes), "
                  f"{s['compressed_bytes']:,} bytes compressed")


def cmd_trace_program(argv: List[str]) -> int:
    from . import tracing

    tracing.refuse_pid(argv)
    if "--" not in argv:
        raise CliError("hugescope trace: give the program after '--' (hugescope trace -o OUT.hst -- ./prog args)")
    cut = argv.index("--")
    p = Parser(prog="hugescope trace", description="Trace a program's data accesses (ASLR off) into a .hst.")
    p.add_argument("-o", "--output", required=True, help="trace file to write (.hst)")
    _window_args(p)
    p.add_argument("--valgrind", action="store_true",
                   help="run any binary under valgrind's lackey tool (no recompile; about 100x slower)")
    p.add_argument("--instructions", action="store_true",
                   help="with --valgrind: also record instruction fetches as reads")
    a = p.parse_args(argv[:cut])
    skip, record = _window(a)
    if a.instructions and not a.valgrind:
        raise CliError("--instructions: only with --valgrind (compiled programs trace data accesses only)")
    s = tracing.trace_program(argv[cut + 1:], a.output, skip=skip, record=record,
                              valgrind=a.valgrind, instructions=a.instructions)
    _print_trace(a.output, s)
    if s.get("truncated"):
        err_console.print("[yellow]warning:[/] the file system's free space reached its reserve "
                          f"({tracing.DISK_RESERVE >> 30} GiB): recording stopped there, the trace holds the accesses "
                          "before it (trace a window with --skip/--record)")
    st = s["exit_status"]
    if st != 0:
        # The trace is kept (it holds the accesses up to the end), but a
        # failed run is reported as one, like any measured program's.
        how = f"was killed by {signal.Signals(-st).name}" if st < 0 else f"exited with status {st}"
        err_console.print(f"[yellow]warning:[/] the program {how}; the trace holds its accesses up to its end")
        return EXIT_FAILURE
    return 0


def cmd_trace_import(argv: List[str]) -> int:
    from . import tracing

    p = Parser(prog="hugescope trace import", description="Convert another tool's trace into a .hst.")
    p.add_argument("format", choices=["lackey", "champsim", "text"],
                   help="lackey: valgrind --tool=lackey --trace-mem=yes output; champsim: 64-byte "
                        "input_instr records (.xz decompressed); text: ADDR[,R|W][,CPU] lines")
    p.add_argument("input", help="file to import")
    p.add_argument("-o", "--output", required=True, help="trace file to write (.hst)")
    _window_args(p)
    p.add_argument("--instructions", action="store_true", help="lackey: also import instruction fetches as reads")
    a = p.parse_args(argv)
    skip, record = _window(a)
    s = tracing.import_trace(a.format, a.input, a.output, skip=skip, record=record, instructions=a.instructions)
    _print_trace(a.output, s)
    return 0


def cmd_trace_convert(argv: List[str]) -> int:
    from . import tracing

    p = Parser(prog="hugescope trace convert",
               description="Rewrite a trace of an older format version (1 or 2) as the current one "
                           "(docs/trace-format.md); records and markers are unchanged.")
    p.add_argument("input", help="trace written by an older hugescope")
    p.add_argument("-o", "--output", required=True, help="trace file to write (.hst)")
    a = p.parse_args(argv)
    s = tracing.convert_trace(a.input, a.output)
    _print_trace(a.output, s)
    return 0


def cmd_cc(argv: List[str]) -> int:
    from . import tracing

    if argv and argv[0] in ("-h", "--help"):
        print_help_text("usage: hugescope cc [clang arguments]   compile and link with the tracing runtime\n"
                      "       hugescope cc --print-cflags      flags for CFLAGS= (compiling)\n"
                      "       hugescope cc --print-ldflags     flags for LDFLAGS= / LIBS= (linking)\n\n"
                      "Build with CC='hugescope cc', then: hugescope trace -o OUT.hst -- ./prog args\n"
                      "Linking from sources (hugescope cc -o prog prog.c) also writes prog.plain, the same build\n"
                      "without the hooks: the one 'hugescope advise' measures.")
        return 0
    if argv == ["--print-cflags"]:
        print(" ".join(tracing.COVERAGE_FLAGS + tracing.SITE_FLAGS))
        return 0
    if argv == ["--print-ldflags"]:
        print(" ".join(tracing.ldflags()))
        return 0
    # clang's own status: its messages are already printed.
    return tracing.cc(argv)


def _count(text, what: str, lo: int = 0) -> int:
    """A count with an optional suffix (50M) in ``lo..=U64_MAX``; errors name
    the option and echo the text as given."""
    try:
        n = units.parse_count(text)
    except ValueError:
        n = None
    if n is None:
        raise CliError(f"{what}: '{text}' is not a count (a number with an optional suffix such as 50M)")
    if not lo <= n <= units.U64_MAX:
        raise CliError(f"{what}: '{text}' is out of range (expected {lo}..{units.U64_MAX})")
    return n


def cmd_native(argv: List[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print_help_text(f"usage: hugescope native WORKLOAD [params] [--thp] [--json FILE]\n\n"
                        f"workloads: {', '.join(workloads.names())}")
        return 0
    name = argv[0]

    def extra(p):
        p.add_argument("--thp", action="store_true", help="request MADV_HUGEPAGE on every region")
        json_option(p, "write the report to this JSON file")

    p, kinds = workload_parser(name, f"hugescope native {name}", extra)
    a = p.parse_args(argv[1:])
    params = _params(a, kinds)
    inputs = [params["file"]] if params.get("file") else []
    check_outputs([(a.json, "json")], inputs)
    rep = workloads.native(name, thp=a.thp, **params)
    if a.json:
        emit_json(a.json, rep, inputs=inputs)
    for w in rep.get("warnings", []):
        err_console.print(f"[yellow]warning:[/] {escape(str(w))}")
    with human_to_stderr(a.json):
        console.print(f"{name}: setup {rep['setup_seconds']:.3f} s, run {rep['run_seconds']:.3f} s "
                      f"(measured wall time, one run); result: {json.dumps(rep['result'])}")
    return 0


#: Formats of the listing commands (workloads, policies, presets, config --keys).
LIST_FORMATS = ("table", "json", "csv")


def listing_options(p: argparse.ArgumentParser, json_help: str = "= --format json, written to this file") -> None:
    """``--format table|json|csv`` of a listing command, and ``--json [FILE]``
    as the shorthand for ``--format json`` (to FILE, or stdout without one)."""
    p.add_argument("--format", choices=LIST_FORMATS, default=None,
                   help="table (default), json, or csv with a header row; printed on standard output")
    json_option(p, json_help, bare=True)


def print_listing(a, data, columns: List[str], rows: List[list], tables: List[Table]) -> int:
    """Print a listing in the format asked for: ``tables`` (rich) for table,
    ``data`` as JSON, or ``columns`` + ``rows`` as CSV."""
    fmt = a.format or ("json" if a.json else "table")
    if a.json and fmt != "json":
        raise CliError(f"--json writes JSON; it contradicts --format {fmt} (give one of them)")
    if fmt == "json":
        check_outputs([(a.json or "-", "json")], [])
        emit_json(a.json or "-", data)
    elif fmt == "csv":
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(columns)
        w.writerows(rows)
    else:
        for t in tables:
            console.print(t)
    return 0


def cmd_workloads(a) -> int:
    ws = workloads.list()
    tables = []
    for w in ws:
        t = Table(title=escape(f"{w['name']}: {w['about']}"), title_justify="left")
        t.add_column("parameter")
        t.add_column("kind")
        t.add_column("default")
        t.add_column("meaning")
        for p in w["params"]:
            t.add_row("--" + p["name"].replace("_", "-"), p["kind"], escape(str(p["default"])), escape(p["help"]))
        tables.append(t)
    # CSV: one row per parameter, the workload named on each (a flat table).
    rows = [[w["name"], "--" + p["name"].replace("_", "-"), p["kind"], p["default"], p["help"]]
            for w in ws for p in w["params"]]
    return print_listing(a, ws, ["workload", "parameter", "kind", "default", "meaning"], rows, tables)


def cmd_policies(a) -> int:
    pol = api.policies()
    t = Table(title="policies (parameters: --policy NAME:key=value,...; several on one kernel: "
                  "--policy A:k=v+B; see docs/policies.md)")
    t.add_column("name")
    t.add_column("what it does")
    for n, d in pol.items():
        t.add_row(n, escape(d))
    return print_listing(a, [{"name": n, "description": d} for n, d in pol.items()], ["name", "description"],
                         [[n, d] for n, d in pol.items()], [t])


def config_source(a) -> dict:
    """The core's source arguments for --preset and --config."""
    from .configuration import source_args
    return source_args(a.preset, a.config)


def cmd_config(a) -> int:
    """Print the resolved configuration (TOML, or JSON with --json), or the
    OS keys with --keys. The TOML printed is a valid --config file."""
    from .configuration import knobs
    from .configuration import load as load_config

    if a.keys:
        cols = ("key", "type", "unit", "default", "range", "meaning")
        rows = [[k["name"], k["type"], k["unit"], f"auto: {k['auto']}" if k["default"] is None else str(k["default"]),
                 k["range"], k["help"]] for k in knobs()]
        t = Table(title=escape("[os] keys (--set os.KEY=VALUE; defaults and ranges from the core's declarations)"))
        for c in cols:
            t.add_column(c)
        for r in rows:
            t.add_row(*[escape(str(x)) for x in r])
        return print_listing(a, knobs(), list(cols), rows, [t])
    if a.format is not None:
        raise CliError(f"--format {a.format} formats the --keys listing; the configuration itself is TOML, "
                       "or JSON with --json")
    check_outputs([(a.json, "json")], _machine_inputs(a))
    cfg = load_config(preset=a.preset, file=a.config, set=a.set, policies=a.policy)
    if a.json:
        emit_json(a.json, cfg.to_dict(), inputs=_machine_inputs(a))
    else:
        print(cfg.to_toml(), end="")
    return 0


def cmd_presets(a) -> int:
    names = _core.presets()
    if a.name is None and a.json in names and not os.path.exists(a.json):
        # `presets --json NAME` would write the list to a file named NAME.
        raise CliError(f"--json '{a.json}': '{a.json}' is a preset; to print it: 'hugescope presets {a.json}' "
                       f"(or 'presets {a.json} --json FILE'); to write the list to a file of that name: ./{a.json}")
    if a.name:
        # One preset is a configuration, not a listing: always JSON.
        if a.format not in (None, "json"):
            raise CliError(f"--format {a.format}: one preset is printed as JSON; --format lists all presets")
        check_outputs([(a.json or "-", "json")], [])
        emit_json(a.json or "-", api.machine_config(a.name))
        return 0
    rows = [[n, api.machine_config(n)["description"]] for n in names]
    t = Table(title="machine presets")
    t.add_column("name")
    t.add_column("description")
    for r in rows:
        t.add_row(*[escape(x) for x in r])
    return print_listing(a, [{"name": n, "description": d} for n, d in rows], ["name", "description"], rows, [t])


def cmd_bench(a) -> int:
    """Throughput and memory measurements (never tests): ``hugescope.bench``;
    ``--evaluation``: the PCC evaluation's wall time (``bench_evaluation``)."""
    from . import bench

    if a.evaluation:
        return _bench_evaluation(a)
    # The rows measure simulating: a reference run (a `base` or `ideal`
    # row, the static maps and reference lines of --sweeps) read back from
    # the results cache would time the cache instead. (`main` restores the
    # variable after the command.)
    os.environ[NO_CACHE_ENV] = "1"

    n = _count(a.accesses, "--accesses", 2)
    rss_n = 0 if a.no_rss else _count(a.rss_accesses, "--rss-accesses", 1)
    try:
        units.parse_size(a.size)  # a bad --size fails here, not after the trace was made
    except ValueError:
        raise CliError(f"--size: '{a.size}' is not a size (e.g. 64MiB, 1GiB)") from None
    names = _split_list(a.workloads, "--workloads", bench.WORKLOADS)
    pols = a.policy or ["pcc", "linux"]
    _core.resolve_config(bench.PRESET, None, [], pols, False, None)  # a bad --policy fails before any tracing
    if a.sweeps and "gups" not in names:
        raise CliError("--sweeps measures on the GUPS trace: keep gups in --workloads")
    for t in a.sweep_trace or []:
        if not os.path.isfile(t):
            raise CliError(f"--sweep-trace: {t}: no such trace file")
    check_outputs([(a.json, "json")], [])
    with human_to_stderr(a.json):
        report = bench.run(n, a.repeat, a.size, names, pols, rss_n or None,
                           note=lambda s: err_console.print(f"[dim]{escape(s)}[/]"),
                           sweeps=(list(a.sweep_trace or []), a.sweep_duration) if a.sweeps else None,
                           console=console)
        bench.render(report, console)
    if a.json:
        emit_json(a.json, report)
    return 0


def _bench_evaluation(a) -> int:
    from . import bench_evaluation

    if not os.path.isfile(a.evaluation):
        raise CliError(f"--evaluation: {a.evaluation}: no such trace file")
    check_outputs([(a.json, "json")], [a.evaluation])
    with human_to_stderr(a.json):
        m = bench_evaluation.measure(a.evaluation, a.evaluation_duration, warm_cache=a.warm_cache,
                                     note=lambda s: err_console.print(f"[dim]{escape(s)}[/]"))
        bench_evaluation.render(m, console)
    if a.json:
        emit_json(a.json, m)
    return 0


def _split_list(text: str, what: str, allowed) -> List[str]:
    """A comma-separated list of names out of ``allowed``."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in names if x not in allowed]
    if bad or not names:
        raise CliError(f"{what}: '{text}' is not a list of {', '.join(allowed)}")
    return names


def cmd_cache(a) -> int:
    """``hugescope cache info|clear``: the results cache (the core's
    ``result_cache``: cached reference runs)."""
    if a.action == "clear":
        if a.json:
            raise CliError("--json applies to 'cache info'")
        n = _core.cache_clear()
        console.print(f"removed {n} cached entr{'y' if n == 1 else 'ies'}")
        return 0
    info = json.loads(_core.cache_info())
    if a.json:
        emit_json(a.json, info)
        return 0
    t = Table(show_header=False, box=None)
    t.add_row("directory", escape(info["dir"] or "(none: the cache is off)"))
    t.add_row("enabled", "yes" if info["enabled"] else "no")
    t.add_row("entries", str(info["entries"]))
    t.add_row("size", f"{info['bytes']} bytes of at most {info['max_bytes']} ({info['max_bytes'] / 2**20:g} MiB)")
    if info["refused"]:
        t.add_row("not used", escape(info["refused"]))
    console.print(t)
    return 0


def cache_hits() -> Dict[str, int]:
    """Cached reference runs read by this process so far, by kind."""
    return dict(_core.cache_hits_by_kind())


def reused_text(before: Dict[str, int], after: Dict[str, int]) -> Optional[str]:
    """What was read from the results cache between two ``cache_hits()``, as
    "3 cached reference runs (2 base, 1 ideal)"; None when nothing was."""
    kinds = sorted((k, n - before.get(k, 0)) for k, n in after.items() if n > before.get(k, 0))
    total = sum(n for _, n in kinds)
    if not total:
        return None
    return (f"{total} cached reference run{'s' if total > 1 else ''} "
            f"({', '.join(f'{n} {k}' for k, n in kinds)})")


def cache_note(hits_before: Dict[str, int], quiet: bool) -> None:
    """One line on stderr when the command reused cached reference runs (or
    found the cache unusable), so a user knows where a result's reference
    runs came from and which they were. Results are byte-identical either
    way."""
    if quiet:
        return
    why = _core.cache_status()
    if why:
        err_console.print(f"note: {escape(why)}")
    reused = reused_text(hits_before, cache_hits())
    if reused:
        err_console.print(f"reused {escape(reused)} from the results cache "
                          "(same trace, machine and OS configuration; 'hugescope --no-cache' recomputes)")


def cmd_demo(a) -> int:
    from .demo import run_demo
    return run_demo(a.out, quick=a.quick)


def cmd_validate(rest: List[str]) -> int:
    # validate takes free-form workload parameters (argparse.REMAINDER), which
    # argparse will not start with an option, so `validate --help` was rejected
    # by the top-level parser; main passes the raw arguments instead.
    from .cli_linux import cmd_validate as run
    return run(argparse.Namespace(rest=rest))


# ---------------------------------------------------------------- main

def cmd_docs(a) -> int:
    from . import manual
    if a.topic is None:
        pages = manual.topics()
        if not pages:
            raise CliError("no documentation pages found in this installation of hugescope")
        t = Table(title="documentation pages: hugescope docs TOPIC prints one")
        t.add_column("topic")
        t.add_column("title")
        for name, title in pages:
            t.add_row(name, escape(title))
        console.print(t)
        return 0
    # The page as it is (Markdown), for a pager or a file: no console markup.
    sys.stdout.write(manual.page(a.topic))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="hugescope", description="Which memory should be huge pages, and what does each policy buy?")
    p.add_argument("--version", action="version", version=f"hugescope {_core.version()}")
    p.add_argument("--follow-symlinks", action="store_true",
                   help="write outputs named by a symbolic link to the link's target (default: refuse such outputs)")
    p.add_argument("--no-cache", action="store_true",
                   help="neither read nor store cached reference runs (base, ideal, static page-size maps: the results cache, 'hugescope cache "
                        "info'); before the command")
    p.add_argument("--results-format", metavar="csv[,parquet]", default="csv",
                   help="result tables: CSV, and with 'parquet' a NAME.parquet beside every NAME.csv (needs "
                        "hugescope[parquet]); before the command")
    p.add_argument("--plot-format", metavar="png[,svg,pdf]", default="png",
                   help="figure files: each figure once per format (default png); before the command")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")

    s = sub.add_parser("simulate", help="simulate a trace through the MMU model (several: concurrent processes)")
    s.add_argument("trace", nargs="+",
                   help="trace file; two or more (the same one may repeat) run as concurrent processes, each "
                        "scheduled by its own virtual time (needs --policy)")
    _add_machine_args(s)
    s.add_argument("--pages", default=None, help="static page-size map: 4k, 2m, 1g, or a plan JSON file (default 4k)")
    s.add_argument("--policy", action="append", default=[], metavar="NAME[:k=v,...]",
                   help="run the OS model with this policy (repeatable: all run on one pass); see 'hugescope policies'")
    s.add_argument("--virt", action="store_true",
                   help=f"virtualized: each trace in its own VM, --policy in the guest, the host running "
                        f"--host-policy (default {api.DEFAULT_HOST_POLICY}); nested walks, VM exits")
    s.add_argument("--host-policy", default=None, metavar="NAME[:k=v,...]",
                   help="virtualized run (implies --virt): the host kernel's policy (base, linux, ingens, ...)")
    s.add_argument("--guest-policy", action="append", default=[], metavar="NAME[:k=v,...]",
                   help="virtualized run: a guest policy (the same as --policy; repeatable)")
    # Checked by the core as os.frag, like --budget (a share: 0.3 or 30%%).
    s.add_argument("--frag", default=None, help="fragment memory first: share of 2MB blocks with an unmovable page (pcc) or target FMFI (ingens); 0.3 or 30%%")
    s.add_argument("--frag-method", default=None, choices=["pcc", "ingens"], help="fragmentation method (default pcc)")
    s.add_argument("--budget", default=None, help="cap huge-page memory at this share of the footprint (0.04 or 4%%)")
    s.add_argument("--memory", default=None, help="simulated physical memory (default: 1.3 x footprint + 8MiB, at least 64MiB)")
    s.add_argument("--footprint", default=None, help="footprint the budget refers to (default: the trace's regions)")
    s.add_argument("--duration", type=units.float_arg("--duration", positive=True), default=None,
                   help="treat the trace as this many seconds of virtual time")
    s.add_argument("--rate", type=units.float_arg("--rate", positive=True), default=None,
                   help="nominal accesses per second (default: the trace header's, else cost-model cycles; several traces: cycles)")
    s.add_argument("--seed", type=seed_arg, default=None, help="seed of the fragmentation injector (default 1; with --frag)")
    s.add_argument("--os", action="append", default=[], metavar="COST=US", help="override an OS cost in microseconds, e.g. fault_base_us=2.5 (= --set os.fault_base_us=2.5)")
    s.add_argument("--quantum-ms", type=units.float_arg("--quantum-ms", *_core.QUANTUM_MS_RANGE), default=None,
                   help=f"concurrent runs: virtual time a process runs before the scheduler picks the one furthest "
                        f"behind (default {_core.DEFAULT_QUANTUM_MS:g} ms)")
    s.add_argument("--no-base", action="store_true", help="do not simulate base pages alongside (no speedup)")
    s.add_argument("--emit-plan", metavar="PLAN", help="write the plan the policy executed (replay with static:plan=PLAN "
                                                        "or 'hugescope run'; '-': standard output)")
    s.add_argument("--by-site", action="store_true",
                   help="write the emitted plan's entries that cover whole allocation sites by site, not address "
                        "(a trace of a program built with 'hugescope cc'): the plan survives a re-link")
    s.add_argument("--timing", default="accesses", choices=["accesses", "seconds", "progress", "start"],
                   help="time the emitted plan's entries in accesses (simulator replay, default), seconds since "
                        "launch (at the trace's access rate), workload progress points, or all at start")
    json_option(s, "write every counter to this JSON file")
    s.add_argument("-q", "--quiet", action="store_true", help="print nothing (with --json)")
    s.set_defaults(func=cmd_simulate)

    sub.add_parser("trace", help="generate a workload trace, trace a program (-- PROG), import one, or 'trace info FILE'", add_help=False)
    sub.add_parser("native", help="run a workload natively and time it", add_help=False)
    sub.add_parser("cc", help="compile a program with the tracing runtime (clang arguments follow)", add_help=False)

    po = sub.add_parser("policies", help="list huge-page policies")
    listing_options(po)
    po.set_defaults(func=cmd_policies)

    w = sub.add_parser("workloads", help="list built-in workloads and their parameters")
    listing_options(w)
    w.set_defaults(func=cmd_workloads)

    cf = sub.add_parser("config", help="print the resolved configuration (machine, os, policies) as TOML or JSON")
    _add_machine_args(cf)
    cf.add_argument("--policy", action="append", default=[], metavar="NAME[:k=v,...]",
                    help="a policy to run (repeatable; replaces the file's [[policy]] entries)")
    cf.add_argument("--keys", action="store_true", help="list the [os] keys: type, unit, default, range, meaning")
    # config --json is the configuration as JSON (or, with --keys, the listing's shorthand).
    listing_options(cf, json_help="the configuration as JSON instead of TOML (with --keys: = --format json)")
    cf.set_defaults(func=cmd_config)

    pr = sub.add_parser("presets", help="list machine presets, or print one")
    pr.add_argument("name", nargs="?", help="print this preset's machine configuration (JSON)")
    listing_options(pr)
    pr.set_defaults(func=cmd_presets)

    from . import cli_experiments, cli_linux, cli_model, cli_regions
    cli_experiments.add_commands(sub)
    cli_linux.add_commands(sub)
    cli_regions.add_commands(sub)
    cli_model.add_commands(sub)

    b = sub.add_parser("bench", help="measure simulation throughput (decode-only floor vs the full pipeline) "
                                     "and peak memory")
    b.add_argument("--size", default="1GiB", help="GUPS table size (default 1GiB)")
    b.add_argument("--accesses", default="4M", help="accesses in each workload's trace (default 4M)")
    b.add_argument("--workloads", default="gups,bfs,kv", help="workloads to trace and measure (default gups,bfs,kv)")
    b.add_argument("--policy", action="append", metavar="SPEC", help="a policy spec measured through the full "
                                                                       "pipeline (repeatable; default pcc and linux)")
    b.add_argument("--rss-accesses", default="1M", help="N of the peak-RSS comparison of GUPS at N and 10N "
                                                        "accesses (default 1M)")
    b.add_argument("--no-rss", action="store_true", help="skip the peak-RSS comparison")
    b.add_argument("--repeat", type=units.int_arg("--repeat", 1, 1000), default=5,
                   help="passes per measurement; the best and the median are reported (default 5)")
    b.add_argument("--sweeps", action="store_true",
                   help="also measure a PCC-size sensitivity and a 9-budget x 4-policy curve against one simulation, "
                        "shared and separate")
    b.add_argument("--sweep-trace", action="append", metavar="TRACE", help="--sweeps: also on this trace (repeatable)")
    b.add_argument("--sweep-duration", type=units.float_arg("--sweep-duration", positive=True), default=None,
                   help="--sweeps: virtual seconds the trace spans (default: its own rate, as the sweep commands)")
    b.add_argument("--evaluation", metavar="TRACE", default=None,
                   help="instead: run the PCC paper's whole evaluation of this trace (reference runs, a 9-budget x "
                        "3-policy curve, fragmentation, PCC sizes; both cores, the shared pass, the results cache) "
                        "and report its wall time by stage")
    b.add_argument("--evaluation-duration", type=units.float_arg("--evaluation-duration", positive=True),
                   default=120.0, help="--evaluation: virtual seconds the trace spans (default 120, as reproduce pcc)")
    b.add_argument("--warm-cache", action="store_true",
                   help="--evaluation: use the results cache as it is (default: a fresh private one, a cold start)")
    json_option(b, "write the measurements to this JSON file")
    b.set_defaults(func=cmd_bench)

    dc = sub.add_parser("docs", help="print a documentation page ('hugescope docs' lists them)",
                        description="Print a documentation page as Markdown (the pages a help text cites as "
                                    "'hugescope docs NAME'), or list the pages with their titles.")
    dc.add_argument("topic", nargs="?", metavar="TOPIC", help="page name, e.g. linux (also linux.md)")
    dc.set_defaults(func=cmd_docs)

    ca = sub.add_parser("cache", help="the results cache of reference runs (base, ideal, static page-size maps): 'info' or "
                                      "'clear'")
    ca.add_argument("action", choices=["info", "clear"], help="info: where it is, entries, size and bound; "
                    "clear: remove every entry")
    json_option(ca, "write the cache's state as JSON to this file (info)", bare=True)
    ca.set_defaults(func=cmd_cache)

    d = sub.add_parser("demo", help="the main demonstration (what 'make demo' runs)")
    d.add_argument("--out", default="demo-out", help="directory for traces and results")
    d.add_argument("--quick", action="store_true", help="smaller inputs")
    d.set_defaults(func=cmd_demo)
    return p


def _raise_interrupted(signum, frame):
    raise Interrupted(signum)


def _install_signal_handlers() -> dict:
    """SIGINT and SIGTERM raise ``Interrupted`` in the main thread, so every
    ``finally`` cleans up (the writer's temporary files, a sweep's checkpoint)
    and the core's long calls stop within a second. Returns the previous
    handlers; nothing is installed outside the main thread (signal.signal
    would refuse)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}
    old = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        old[sig] = signal.signal(sig, _raise_interrupted)
    return old


#: Longest error line printed: messages quote values cut to 80 characters,
#: so only a message built around a huge value comes near it.
ERROR_LINE_CHARS = 600


def _error_line(e: BaseException) -> str:
    # One line per error: a message spanning lines (rare: a value with a
    # newline in it) is joined so the console contract holds; control bytes
    # (a file name with a terminal escape) are escaped and the line is cut, so
    # no input can flood or drive the user's terminal through an error.
    return _core.shown(" ".join(str(e).splitlines()), ERROR_LINE_CHARS) or type(e).__name__


#: The environment variable the core reads to leave the results cache alone
#: (``result_cache::NO_CACHE_ENV``); ``--no-cache`` sets it for one command.
NO_CACHE_ENV = "HUGESCOPE_NO_CACHE"

#: Top-level options taking a value, and where ``_top_options`` puts it.
_TOP_VALUES = {"--results-format": "results", "--plot-format": "plots"}


def _top_options(argv: List[str]) -> dict:
    """Take the top-level options off the front of ``argv`` (in place)."""
    top = {"follow": False, "results": None, "plots": None, "no_cache": False}
    while argv and argv[0].startswith("--"):
        name, eq, value = argv[0].partition("=")
        if name == "--follow-symlinks" and not eq:
            top["follow"] = True
            argv.pop(0)
        elif name == "--no-cache" and not eq:
            top["no_cache"] = True
            argv.pop(0)
        elif name in _TOP_VALUES:
            argv.pop(0)
            if not eq:
                if not argv:
                    raise CliError(f"hugescope: {name} needs a value")
                value = argv.pop(0)
            top[_TOP_VALUES[name]] = value.split(",")
        else:
            break
    return top


def _dispatch(argv: List[str]) -> int:
    if argv and argv[0] == "trace":
        return cmd_trace(argv[1:])
    if argv and argv[0] == "native":
        return cmd_native(argv[1:])
    if argv and argv[0] == "cc":
        return cmd_cc(argv[1:])
    if argv and argv[0] == "validate":
        return cmd_validate(argv[1:])
    p = build_parser()
    a = p.parse_args(argv)
    if not getattr(a, "func", None):
        p.print_help()
        raise CliError("hugescope: a command is required (listed above)")
    return a.func(a)


def _written_note() -> str:
    """What an interruption kept when the command set no note of its own:
    the outputs it had completed (a result written before Ctrl-C stays, and
    the line says so), else that nothing partial was written."""
    done = list(dict.fromkeys(_io.written))
    if not done:
        return "no partial result was written"
    names = ", ".join(_core.shown(p, 120) for p in done[:4]) + (f" and {len(done) - 4} more" if len(done) > 4 else "")
    return f"complete before it, and kept: {names}; nothing partial was written"


def main(argv: Optional[List[str]] = None) -> int:
    global interrupt_note
    argv = list(sys.argv[1:] if argv is None else argv)
    old_handlers = _install_signal_handlers()
    old_follow = _io.FOLLOW_SYMLINKS
    old_no_cache = os.environ.get(NO_CACHE_ENV)
    interrupt_note = None
    _io.written.clear()
    try:
        # The top-level options are taken before the command, so they also
        # hold for the commands parsed outside argparse (trace, native, validate).
        top = _top_options(argv)
        _io.FOLLOW_SYMLINKS = top["follow"]
        if top["no_cache"]:
            os.environ[NO_CACHE_ENV] = "1"
        hits = cache_hits()
        with _io.output_formats(top["results"], top["plots"]):
            code = _dispatch(argv)
        # Only after a success: a failed command's stderr is its one error line.
        cache_note(hits, quiet=code != 0 or any(x in ("-q", "--quiet") for x in argv))
        return code
    except BrokenPipeError:
        # The reader of stdout went away (`hugescope workloads | head`): not
        # bad input. Stop quietly with the status a shell gives a SIGPIPE, and
        # point stdout at /dev/null so the interpreter's final flush is silent.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass  # stdout is not a real file (in-process callers): nothing to silence
        return 128 + signal.SIGPIPE
    except (_core.HugescopeError, CliError, OSError, ValueError) as e:
        err_console.print(f"[bold red]error:[/] {escape(_error_line(e))}")
        return EXIT_USAGE
    except RunFailed as e:
        err_console.print(f"[bold red]error:[/] {escape(_error_line(e))}")
        return EXIT_FAILURE
    except KeyboardInterrupt as e:
        code = e.exit_code if isinstance(e, Interrupted) else 128 + signal.SIGINT
        name = signal.Signals(e.signum).name if isinstance(e, Interrupted) else "SIGINT"
        err_console.print(f"interrupted by {name}; {escape(interrupt_note or _written_note())}")
        return code
    except Exception as e:  # noqa: BLE001 - the last resort: a bug, not bad input
        if os.environ.get("HUGESCOPE_TRACEBACK"):
            raise
        err_console.print(f"[bold red]internal error:[/] {escape(type(e).__name__)}: {escape(_error_line(e))} "
                          "(a bug in hugescope: please report it; HUGESCOPE_TRACEBACK=1 shows the traceback)")
        return EXIT_FAILURE
    finally:
        _io.FOLLOW_SYMLINKS = old_follow
        if old_no_cache is None:
            os.environ.pop(NO_CACHE_ENV, None)
        else:
            os.environ[NO_CACHE_ENV] = old_no_cache
        interrupt_note = None
        _io.written.clear()
        for sig, h in old_handlers.items():
            signal.signal(sig, h)


if __name__ == "__main__":
    sys.exit(main())
