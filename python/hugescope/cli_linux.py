"""Subcommands of the `hugescope` CLI: linux. Registered by `cli.build_parser`.

    hugescope run WORKLOAD [params] [--plan PLAN|all] [--repeat N] [--warmup W] [--json OUT]
    hugescope run [--plan PLAN] [--repeat N] -- PROGRAM ARGS...
    hugescope apply PID PLAN
    hugescope fragment --share X [--seed N] [--margin SIZE] [--hold | --seconds T]
    hugescope thp
    hugescope coverage PID
    hugescope calibrate [--footprints SIZE,...] [--workload NAME:k=v,...] [--repeat N] [--out FILE]
    hugescope validate WORKLOAD [params] --ks 1,2,4,8 --policies pcc,oracle,random -o DIR

Every time printed is a measurement; the tables say how it was measured.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import signal
import sys
import threading

from rich.markup import escape
from rich.table import Table

from . import _io, linux, noise, workloads
from ._core import HugescopeError
from ._io import emit_json
from .cli import (CliError, _error_line, _params, _size, check_outputs, console, err_console, human_to_stderr, json_option,
                  workload_parser)
from .errors import EXIT_FAILURE, Interrupted, RunFailed


def _raise_interrupted(signum, frame):
    raise Interrupted(signum)


def _stop_on_signals() -> dict:
    """SIGINT and SIGTERM raise errors.Interrupted, so every cleanup below runs
    (children stopped and reaped, settings restored) and the CLI exits 128+signal.
    The CLI installs the same handlers for every command; a handler already set
    by someone else is kept. Returns the handlers replaced, to put back."""
    old = {}
    if threading.current_thread() is not threading.main_thread():
        return old  # only the main thread may set handlers (and gets the signals)
    for sig in (signal.SIGINT, signal.SIGTERM):
        h = signal.getsignal(sig)
        if h in (signal.SIG_DFL, signal.default_int_handler):
            old[sig] = h
            signal.signal(sig, _raise_interrupted)
    return old


def _repair_note() -> None:
    """Put back settings a killed earlier invocation left changed, and say so."""
    for r in linux.repair_settings():
        err_console.print(f"[yellow]note:[/] {escape(r['message'])}", soft_wrap=True)


def _cli_errors(f):
    """Every Linux command: stop cleanly on SIGINT/SIGTERM, repair settings a
    killed invocation left behind, show bad input (ValueError in the API) as one
    `error: ...` line (exit 2) and failed work (RunFailed) as one line (exit 1)."""
    @functools.wraps(f)
    def g(*a, **k):
        old = _stop_on_signals()
        try:
            _repair_note()
            return f(*a, **k)
        except ValueError as e:
            raise CliError(str(e)) from None
        except RunFailed as e:
            err_console.print(f"[bold red]error:[/] {escape(_error_line(e))}", soft_wrap=True)
            return EXIT_FAILURE
        finally:
            # The CLI may run in a longer-lived process (tests, notebooks).
            for sig, h in old.items():
                signal.signal(sig, h)
    return g


def _count_arg(what: str, least: int, most: int = 1 << 63):
    """argparse type: an integer in least..most; errors echo the value as given."""
    def parse(v: str) -> int:
        try:
            x = int(v)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{v}' is not an integer ({what})")
        if x < least:
            raise argparse.ArgumentTypeError(f"{v}: {what} must be at least {least}")
        if x > most:
            raise argparse.ArgumentTypeError(f"{v}: {what} must be at most {most}")
        return x
    return parse


def _seconds_arg(positive: bool):
    """argparse type: a finite number of seconds, > 0 or >= 0."""
    def parse(v: str) -> float:
        try:
            x = float(v)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{v}' is not a number of seconds")
        if not math.isfinite(x) or x < 0 or (positive and x == 0):
            raise argparse.ArgumentTypeError(f"{v} is not a {'positive' if positive else 'non-negative'} "
                                             "finite number of seconds")
        return x
    return parse


def _sz(n) -> str:
    return "-" if n is None else _size(int(n))


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


# ---------------------------------------------------------------- run

#: --preset of every command whose simulations estimate this machine's gains
#: (advise, validate, daemon-study): calibrate.estimate_machine's default.
ESTIMATE_PRESET_HELP = ("machine preset of the estimates, or 'calibrated' (default: the preset 'hugescope calibrate' "
                        "saved, if there is one, else haswell-pcc)")

RUN_USAGE = """usage: hugescope run WORKLOAD [workload params] [--plan PLAN|all] [--repeat N] [--warmup W] [--json FILE]
       hugescope run [--plan PLAN] [--repeat N] [--warmup W] [--json FILE] -- PROGRAM [ARGS...]

Run a built-in workload natively, or any program, under a promotion plan, and
measure it: N measured runs after W warm-up runs, median/min/max.

  --plan all    every region of the workload collapsed as soon as it is populated;
                for a program, every private anonymous mapping, 2 MiB region
                by region as the program populates it (needs root)
  --plan FILE   a plan (JSON): start, progress-label and time_s entries for a
                workload; start and time_s entries for a program, applied
                region by region as the program populates each range (root)

An entry that is not fully applied is counted in a warning, and its row says
how many regions stayed small and why.
  no --plan     base pages (memory is left as the THP mode makes it)

A program runs with ASLR disabled for it only, so a plan's addresses hold.
workloads: {names}"""


def _run_options(p: argparse.ArgumentParser, suppress: bool) -> None:
    d = (lambda v: argparse.SUPPRESS) if suppress else (lambda v: v)
    p.add_argument("--plan", default=d(None), metavar="PLAN",
                   help="plan JSON file, or 'all' (every region of a workload, or every anonymous mapping of a program, "
                        "huge); default: base pages")
    p.add_argument("--repeat", type=_count_arg("measured runs", 1, linux.RUNS_MAX), default=d(3), help="measured runs (default 3)")
    p.add_argument("--warmup", type=_count_arg("warm-up runs", 0, linux.RUNS_MAX), default=d(1),
                   help="unmeasured runs first (default 1)")
    p.add_argument("--json", default=d(None), metavar="FILE",
                   help="write every measurement to this JSON file ('-': standard output)")
    p.add_argument("--sample-ms", type=_count_arg("sampling period in ms", 0, linux.SAMPLE_MS_MAX), default=d(100),
                   help="huge-page and RSS sampling period in ms (default 100); 0 takes no samples: each sample "
                        "walks the process's page tables, which slows a large base-page run (docs/linux.md)")
    p.add_argument("--timeout", type=_seconds_arg(positive=True), default=d(None),
                   help="kill a program after this many seconds (programs only); the run is marked 'timeout'")
    p.add_argument("--start-timeout", type=_seconds_arg(positive=False), default=d(10.0),
                   help="how long a program's entry keeps collapsing its range's regions as they are populated, "
                        "after it comes due (default 10 s; --plan all: the whole run)")
    p.add_argument("--baseline", action="store_true", default=d(False),
                   help="also run without the plan (same warm-up and repeat) and print the measured gain beside "
                        "the simulator's estimate from the plan's header")


def _progress_line(ev) -> None:
    r = ev["record"]
    # Warm-up and measured runs are numbered on their own ("warm-up 1/1",
    # "run 1/3"); with --baseline the phase leads ("base run 2/3").
    kind = ("base " if ev.get("phase") == "base" else "plan " if ev.get("phase") else "") + \
        ("warm-up" if ev["warmup"] else "run")
    if r.get("status", "ok") != "ok":
        err_console.print(f"[yellow]{kind} {ev['run']}/{ev['of']} {r['status']}: {escape(str(r.get('status_detail')))}[/]")
        return
    t = r.get("run_s", r.get("wall_s"))
    err_console.print(f"[dim]{kind} {ev['run']}/{ev['of']} done: {t:.4f} s[/]")


@_cli_errors
def cmd_run(a) -> int:
    rest = list(a.rest or [])
    if not rest:
        console.print(escape(RUN_USAGE.format(names=", ".join(workloads.names()))))
        return 2
    if rest[0] == "--":
        command = rest[1:]
        if not command:
            raise CliError("nothing after '--': give the program to run")
        opts = vars(a)
    else:
        name = rest[0]
        names = workloads.names()
        if name not in names:
            raise CliError(f"unknown workload '{name}' (workloads: {', '.join(names)}); "
                           f"to run a program, put it after '--': hugescope run --plan PLAN -- {' '.join(rest)}")
        command = None
        p, kinds = workload_parser(name, f"hugescope run {name}", lambda p: _run_options(p, suppress=True))
        wa = p.parse_args(rest[1:])
        opts = dict(vars(a))
        for k, v in vars(wa).items():
            if k in opts and k != "rest":
                if opts[k] != _DEFAULTS.get(k) and v != opts[k]:
                    raise CliError(f"--{k.replace('_', '-')} given twice with different values")
                opts[k] = v
        params = _params(wa, kinds)
    if opts["baseline"] and opts["plan"] is None:
        raise CliError("--baseline measures a plan's gain over base pages: give --plan")
    # The plan is an input: --json must not replace it.
    check_outputs([(opts["json"], "json")], [opts["plan"]] if opts["plan"] not in (None, "all") else [])
    thp = linux.thp_state()
    if not thp["baseline_available"]:
        err_console.print(f"[yellow]warning:[/] THP mode for 2 MiB pages is '{thp['pmd_mode']}': the kernel backs "
                          "memory with huge pages without being asked, so 'no plan' is not a base-page baseline")
    if not thp["plans_applicable"] and opts["plan"]:
        err_console.print("[yellow]warning:[/] transparent_hugepage/enabled is 'never': no plan entry will be applied")
    if command is not None:
        if opts["plan"] and not thp["root"]:
            err_console.print("[yellow]warning:[/] applying a plan to another process needs root "
                              "(CAP_SYS_NICE and ptrace access); entries will fail with EPERM")
        res = linux.run(command, plan=opts["plan"], repeat=opts["repeat"], warmup=opts["warmup"],
                        sample_ms=opts["sample_ms"], timeout=opts["timeout"], start_timeout=opts["start_timeout"],
                        progress=_progress_line, baseline=opts["baseline"])
    else:
        if opts["timeout"] is not None:
            raise CliError("--timeout applies to programs only (a built-in workload runs to completion)")
        res = linux.run(name, plan=opts["plan"], repeat=opts["repeat"], warmup=opts["warmup"],
                        sample_ms=opts["sample_ms"], progress=_progress_line, baseline=opts["baseline"], **params)
    if opts["json"]:
        emit_json(opts["json"], res.to_dict())
    with human_to_stderr(opts["json"]):
        if res.summary["runs"]:
            render_run(res)
    res.check()
    return 0


_DEFAULTS = {"plan": None, "repeat": 3, "warmup": 1, "json": None, "sample_ms": 100, "timeout": None,
             "start_timeout": 10.0, "baseline": False}


def render_run(res: "linux.RunResult") -> None:
    s = res.summary
    if res.kind == "workload":
        ps = ", ".join(f"{k}={v}" for k, v in res.params.items())
        title = escape(f"{res.target} ({ps}), plan: {res.plan}")
    else:
        title = escape(f"{' '.join(res.target)}, plan: {res.plan}")
    t = Table(title=f"{title}\n{s['runs']} measured run(s) after {res.warmup} warm-up; measurements, not estimates")
    t.add_column("measurement")
    for c in ("median", "min", "max"):
        t.add_column(c, justify="right")
    t.add_column("how measured", overflow="fold")

    def row(label, key, fmt):
        v = s.get(key)
        if v is None:
            t.add_row(label, "-", "-", "-", res.how.get(key, ""))
        else:
            t.add_row(label, fmt(v["median"]), fmt(v["min"]), fmt(v["max"]), res.how.get(key, ""))

    secs = lambda x: f"{x:.4f} s"  # noqa: E731
    row("wall time" + (" (algorithm)" if res.kind == "workload" else ""), "wall_s", secs)
    row("user time", "user_s", secs)
    row("system time", "sys_s", secs)
    row("peak RSS", "peak_rss_bytes", _sz)
    row("huge-page bytes", "huge_bytes", _sz)
    cov_how = ("huge-page bytes / footprint of the workload's regions" if res.kind == "workload"
               else "peak AnonHugePages / peak RSS")
    v = s.get("coverage")
    t.add_row("huge-page coverage", *(("-",) * 3 if v is None else (_pct(v["median"]), _pct(v["min"]), _pct(v["max"]))),
              cov_how)
    row("collapse time", "collapse_s", secs)
    if res.kind == "workload":
        row("setup time", "setup_s", secs)
    console.print(t)
    notes = []
    if res.kind == "workload":
        notes.append(f"footprint {_sz(s.get('footprint_bytes'))}")
        if not s.get("results_agree", True):
            notes.append("[red]the workload's result differs between runs[/]")
    else:
        codes = {(r.get("exit_code"), r.get("signal")) for r in res.runs if r.get("status") == "ok"}
        notes.append("exit " + ", ".join(f"code {c}" if c is not None else f"signal {g}" for c, g in sorted(codes, key=str)))
        if not all(r.get("aslr_disabled") for r in res.runs):
            notes.append("[yellow]ASLR was not disabled in every run[/]")
    if not s.get("outcomes_consistent", True):
        notes.append("[yellow]collapse outcomes differ between runs (see --json)[/]")
    console.print("; ".join(notes))
    for w in (res.runs[0].get("warnings", []) if res.runs else []):
        err_console.print(f"[yellow]warning:[/] {escape(w)}")
    render_outcomes(res.outcomes)
    render_samples(res.runs[0].get("samples", []) if res.runs else [])
    render_gain(res)


def render_gain(res: "linux.RunResult") -> None:
    """The plan's gain over base pages: the simulator's estimate (from the
    plan's header) and the measurement (with --baseline), side by side and
    labelled, each saying how it was obtained."""
    g = res.summary.get("gain") or {}
    if res.plan == "none" or (g.get("estimate") is None and res.baseline is None):
        return
    t = Table(title="gain of the plan over base pages")
    for c in ("", "speedup", "how"):
        t.add_column(c, justify="right" if c == "speedup" else "left", overflow="fold")
    x = lambda v: "-" if v is None else f"{v:.3f}x"  # noqa: E731
    t.add_row("estimate", x(g.get("estimate")), escape(g.get("estimate_how") or "the plan's header carries no "
                                                        "estimate (emit it with simulate --emit-plan)"))
    t.add_row("measured", x(g.get("measured")), escape(g.get("measured_how") or "not measured: add --baseline "
                                                       "to run without the plan too"))
    console.print(t)
    if g.get("estimate_on_calibrated") is False and g.get("calibrated_preset"):
        console.print(f"[yellow]note:[/] the plan's estimate was not made on this machine's calibrated preset "
                      f"({escape(g['calibrated_preset'])}); re-emit the plan with 'simulate --emit-plan --preset "
                      "calibrated' (or 'advise', which uses it by default) for an estimate of this machine")


def _when(w) -> str:
    if w == "start" or w is None:
        return "start"
    if isinstance(w, dict):
        (k, v), = w.items()
        if k == "after_marker" and isinstance(v, dict):
            return f"{v.get('accesses', 0):,} accesses after {v.get('label')}"
        return {"time_s": f"t = {v} s", "progress": f"at {v}", "accesses": f"after {v:,} accesses"
                if isinstance(v, int) else f"after {v} accesses"}.get(k, f"{k} {v}")
    return str(w)


def render_outcomes(outcomes, limit: int = 40) -> None:
    if not outcomes:
        return
    t = Table(title="plan entries (first measured run)")
    for c in ("#", "range", "size", "when", "applied at", "status", "regions", "huge after", "errno", "reason"):
        t.add_column(c, justify="right" if c in ("#", "size", "regions", "huge after") else "left",
                     overflow="fold")
    colours = {"collapsed": "green", "partially_collapsed": "yellow", "failed": "red", "skipped": "dim"}
    for o in outcomes[:limit]:
        at = o.get("point") or ("-" if o.get("t_s") is None else f"{o['t_s']:.3f} s")
        if o.get("point") and o.get("t_s") is not None and o["point"] != "not_applied":
            at = f"{o['point']} ({o['t_s']:.3f} s)"
        elif o.get("point") is None and o.get("t_s") is not None:
            at = f"{o['t_s']:.3f} s"
        st = o["status"]
        # --plan all for a program: one outcome over every anonymous mapping.
        everything = str(o.get("note") or "").startswith("all:")
        t.add_row(str(o["index"]), "every anonymous mapping" if everything else
                  f"{o['start']:#x}..{o['start'] + o['length']:#x}", "-" if everything else _sz(o["length"]),
                  _when(o.get("when")), at, f"[{colours.get(st, '')}]{st.replace('_', ' ')}[/]",
                  f"{o['regions_collapsed']}/{o['regions']}", _sz(o.get("bytes_huge_after_exact")),
                  o.get("errno") or "", escape(o.get("reason") or ""))
    console.print(t)
    if len(outcomes) > limit:
        console.print(f"... {len(outcomes) - limit} more entries (see --json)")


def render_samples(samples, points: int = 8) -> None:
    if len(samples) < 2:
        return
    step = max(1, len(samples) // points)
    pick = samples[::step][:points]
    if pick[-1] is not samples[-1]:
        pick.append(samples[-1])
    cells = [f"{x['t_s']:.2f} s: {_sz(x['anon_huge_bytes'])} of {_sz(x['rss_bytes'])}" for x in pick]
    console.print("huge pages over time (first run; AnonHugePages of Rss, smaps_rollup): " + " | ".join(cells))


# ---------------------------------------------------------------- apply

@_cli_errors
def cmd_apply(a) -> int:
    check_outputs([(a.json, "json")], [a.plan])
    outs = linux.apply_plan(a.pid, a.plan, precheck=not a.no_precheck)
    if a.json:
        emit_json(a.json, outs)
    with human_to_stderr(a.json):
        render_outcomes(outs, limit=10_000)
    gone = [o for o in outs if o.get("errno") == "ESRCH"]
    if gone:
        raise RunFailed(f"process {a.pid} exited during apply: {len(gone)} of {len(outs)} entries not applied")
    return 0


# ---------------------------------------------------------------- fragment

def _share(v: str) -> float:
    try:
        x = float(v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{v}' is not a number (the share of 2 MiB blocks to pin, 0..1)")
    if not 0.0 <= x <= 1.0:
        raise argparse.ArgumentTypeError(f"{v} is not between 0 and 1 (the share of 2 MiB blocks to pin)")
    return x


def _seed(v: str) -> int:
    try:
        x = int(v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{v}' is not an integer")
    if x < 0:
        raise argparse.ArgumentTypeError(f"{v} is negative")
    if x >= 1 << 64:
        raise argparse.ArgumentTypeError(f"{v} does not fit in 64 bits")
    return x


def _size_arg(v: str) -> int:
    from . import units
    try:
        return units.parse_size(v)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))


def render_buddy(b, title: str) -> None:
    orders = max((len(c) for _, c in b["zones"]), default=0)
    t = Table(title=title)
    t.add_column("zone")
    for o in range(orders):
        t.add_column(f"{4 << o}K" if o < 8 else f"{(4 << o) >> 10}M", justify="right")
    t.add_column("free 2 MiB blocks", justify="right")
    for name, counts in b["zones"]:
        t.add_row(name, *[f"{c:,}" for c in counts], f"{sum(c << (o - 9) for o, c in enumerate(counts) if o >= 9):,}")
    console.print(t)
    console.print(f"free 2 MiB-capable blocks in total: {b['free_2m_blocks']:,} ({_sz(b['free_2m_blocks'] * (2 << 20))})")


def render_fragment(r) -> None:
    t = Table(title=f"fragmented: share {r['share']}, seed {r['seed']}", show_header=False)
    t.add_column(style="bold")
    t.add_column(justify="right")
    rows = [
        ("memory total / free before / free after", f"{_sz(r['mem_total'])} / {_sz(r['mem_free_before'])} / {_sz(r['mem_free_after'])}"),
        ("margin left free", _sz(r["margin_bytes"])),
        ("allocated while fragmenting", _sz(r["bytes_allocated"])),
        ("2 MiB blocks touched / left whole / pinned", f"{r['blocks_touched']:,} / {r['blocks_whole']:,} / {r['blocks_pinned']:,}"),
        ("pins moved / lost", f"{r['pins_moved']:,} / {r['pins_lost']:,}"),
        ("memory pinned", _sz(r["bytes_pinned"])),
        ("free 2 MiB blocks before -> after", f"{r['free_2m_blocks_before']:,} -> {r['free_2m_blocks_after']:,}"),
        ("took", f"{r['seconds']:.1f} s (measured)"),
    ]
    for k, v in rows:
        t.add_row(k, v)
    console.print(t)


@_cli_errors
def cmd_fragment(a) -> int:
    check_outputs([(a.json, "json")], [])
    if not linux.thp_state()["root"]:
        raise CliError("hugescope fragment needs root: it reads physical frame numbers from /proc/self/pagemap, "
                       "mlocks pages and sets vm.compact_unevictable_allowed")
    render_buddy(linux.buddyinfo(), "/proc/buddyinfo before")
    err_console.print("[dim]fragmenting: allocating most of free memory, then releasing all but the pins "
                      "(about a minute on a 24 GiB machine)...[/]")

    def ready(r):
        render_fragment(r)
        render_buddy(linux.buddyinfo(), "/proc/buddyinfo after fragmenting")
        if a.hold:
            console.print(f"holding (pid {os.getpid()}): Ctrl-C or SIGTERM releases the pins and restores every setting")
        elif a.seconds:
            console.print(f"holding for {a.seconds:g} s")
        sys.stdout.flush()

    with human_to_stderr(a.json):
        rep = linux.fragment(a.share, seed=a.seed, margin=a.margin, hold=a.hold, seconds=a.seconds, on_ready=ready)
    if a.json:
        emit_json(a.json, rep)
    with open("/proc/sys/vm/compact_unevictable_allowed") as f:
        now = f.read().strip()
    with human_to_stderr(a.json):
        console.print(f"released: pins unmapped; vm.compact_unevictable_allowed restored to {now} "
                      f"(was {rep['compact_unevictable_allowed_was']})")
    # --hold ends with a signal by design; exit as a shell reports it (128 + signal).
    sig = rep.get("stopped_by_signal")
    return 128 + sig if sig else 0


# ---------------------------------------------------------------- thp, coverage

@_cli_errors
def cmd_thp(a) -> int:
    check_outputs([(a.json, "json")], [])
    s = linux.thp_state()
    if a.json:
        emit_json(a.json, s)
        return 0
    t = Table(title="transparent huge pages (/sys/kernel/mm/transparent_hugepage)", show_header=False)
    t.add_column(style="bold")
    t.add_column()
    t.add_row("enabled", f"{s['enabled']['selected']}  (options: {' '.join(s['enabled']['options'])})")
    t.add_row("defrag", f"{s['defrag']['selected']}  (options: {' '.join(s['defrag']['options'])})")
    t.add_row("PMD huge page size", _sz(s["hpage_pmd_size"]))
    for k in ("use_zero_page", "shrink_underused"):
        if s.get(k) is not None:
            t.add_row(k, str(s[k]))
    if s.get("mthp_enabled"):
        t.add_row("per-size (mTHP) enabled", ", ".join(f"{k.removeprefix('hugepages-')}={v}" for k, v in sorted(
            s["mthp_enabled"].items(), key=lambda kv: int("".join(ch for ch in kv[0] if ch.isdigit()) or 0))))
    if s.get("khugepaged"):
        t.add_row("khugepaged", ", ".join(f"{k}={v}" for k, v in sorted(s["khugepaged"].items())))
    console.print(t)
    mode = s["pmd_mode"]
    if s["baseline_available"]:
        console.print(f"base-page baseline: [green]available[/] (2 MiB mode '{mode}': memory that is not advised "
                      "stays in 4 KiB pages, so 'hugescope run' without --plan measures base pages)")
    else:
        console.print(f"base-page baseline: [red]not available[/] (2 MiB mode '{mode}': the kernel backs memory "
                      "with huge pages at fault time; set enabled to madvise to measure base pages)")
    if s["other_mthp_always"]:
        console.print(f"[yellow]note:[/] multi-size THP {', '.join(s['other_mthp_always'])} set to always: "
                      "base-page runs get PTE-mapped large folios there (not counted as huge pages)")
    console.print("plans: " + ("[green]applicable[/] with MADV_COLLAPSE (it ignores the mode except never)"
                               if s["plans_applicable"] else "[red]not applied[/] (enabled = never)"))
    console.print("root: " + ("yes (process_madvise on other processes, the fragmenter)" if s["root"] else
                              "no: plans apply to built-in workloads only; programs and the fragmenter need root"))
    return 0


@_cli_errors
def cmd_coverage(a) -> int:
    check_outputs([(a.json, "json")], [])
    c = linux.coverage(a.pid, exact=not a.no_exact)
    d = c.to_dict()
    if a.json:
        emit_json(a.json, d)
    with human_to_stderr(a.json):
        _render_coverage(a, d)
    return 0


def _render_coverage(a, d) -> None:
    t = Table(title=f"huge-page coverage of process {d['pid']} (smaps; exact = PAGEMAP_SCAN PMD-mapped)")
    for col in ("range", "size", "rss", "huge (smaps)", "huge (exact)", "huge/rss", "flags", "mapping"):
        t.add_column(col, justify="right" if col in ("size", "rss", "huge (smaps)", "huge (exact)", "huge/rss") else "left",
                     overflow="fold")
    shown = 0
    for v in d["vmas"]:
        if not a.all and v["rss"] == 0:
            continue
        shown += 1
        flags = " ".join(f for f, on in (("hg", v["hugepage"]), ("nh", v["no_hugepage"])) if on)
        t.add_row(f"{v['start']:#x}..{v['end']:#x}", _sz(v["size"]), _sz(v["rss"]), _sz(v["anon_huge_bytes"]),
                  _sz(v.get("pmd_mapped_bytes")), _pct(v["anon_huge_bytes"] / v["rss"]) if v["rss"] else "-",
                  flags, escape(v["path"] or ("[anon]" if v["anonymous"] else "")))
    console.print(t)
    share = d["anon_huge_total"] / d["rss_total"] if d["rss_total"] else None
    console.print(f"total (smaps_rollup): {_sz(d['anon_huge_total'])} in huge pages of {_sz(d['rss_total'])} resident "
                  f"({_pct(share)}); {shown} of {len(d['vmas'])} VMAs shown" + ("" if a.all else " (resident ones; --all for every VMA)"))


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.0f} MiB"


def _daemon_line(s: dict) -> str:
    """The live status line: regions collapsed, huge bytes per process, last decision."""
    procs = "  ".join(f"pid {p['pid']}: {_mib(p['daemon_huge'])} huge/{_mib(p['rss'])} rss"
                      + ("" if p["state"] == "running" else f" ({p['state']})") for p in s["processes"])
    last = s["decisions"][-1] if s["decisions"] else None
    what = (f"last: {last['outcome']} {last['start']:#x} in {last['pid']} ({last['why']})" if last
            else f"held back: {s['held_back']}" if s["held_back"] else "nothing to do")
    return f"t={s['t_s']:.1f}s collapsed {s['collapsed_total']}  {procs}  {what}"


@_cli_errors
def cmd_daemon(a) -> int:
    from . import daemon
    check_outputs([(a.json, "json")], [])
    with human_to_stderr(a.json), console.status("starting") as status:
        def on_step(s: dict) -> None:
            status.update(escape(_daemon_line(s)))
            for d in s["decisions"]:
                console.print(f"t={d['t_s']:.1f}s pid {d['pid']} {d['start']:#x}: {escape(d['outcome'])} "
                              f"({escape(d['why'])})", soft_wrap=True)
        try:
            r = daemon.run(a.policy, a.pid or (), a.cgroup, budget=a.budget, budget_per_process=a.budget_per_process,
                           rate=a.rate, interval=a.interval, duration=a.duration, utilization=a.utilization,
                           set_madvise=a.set_madvise, on_step=on_step)
        except KeyboardInterrupt as e:
            # A signal is how a --cgroup daemon ends: its decisions so far are
            # written, and the exit status is still the signal's (128 + it).
            r = getattr(e, "daemon_result", None)
            if r is not None and a.json:
                emit_json(a.json, r)
                from . import cli
                cli.interrupt_note = f"the daemon's result so far was written to {a.json}"
            raise
    f = r["final"]
    with human_to_stderr(a.json):
        console.print(escape(_daemon_line(f)), soft_wrap=True)
        console.print(f"{r['steps']} steps in {r['wall_s']:.1f} s; daemon CPU {r['cpu_s']:.3f} s "
                      f"({100 * r['cpu_s'] / max(r['wall_s'], 1e-9):.2f}% of one core); "
                      f"clear_refs writes {f.get('clear_refs_total', 0)} (what the target pays for most)")
    if a.json:
        emit_json(a.json, r)
    return 0


@_cli_errors
def cmd_daemon_study(a) -> int:
    from . import cli, daemon_study
    names = [n for n in a.workloads.split(",") if n]
    cli.interrupt_note = (f"the workloads finished so far are in {os.path.join(a.out, 'daemon-study.json')} "
                          "(\"complete\": false), if any")
    r = daemon_study.study(a.out, names, quick=a.quick, repeat=a.repeat, budget_share=a.budget, redis=not a.no_redis,
                           capture=not a.no_capture, sim=not a.no_sim, interval=a.interval, rate=a.rate,
                           cpu=a.cpu, daemon_cpu=a.daemon_cpu, preset=a.preset, config=a.config,
                           progress=lambda m: err_console.print(f"[dim]{escape(m)}[/]"))
    console.print(daemon_study.report(r), soft_wrap=True, markup=False)
    console.print(f"wrote {os.path.join(a.out, 'daemon-study.json')} and daemon-study.md")
    return 0


def _ks_arg(v: str) -> list:
    try:
        ks = [int(x) for x in v.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{v}' is not a comma-separated list of page counts")
    if not ks or any(k < 1 or k > 1 << 20 for k in ks):
        raise argparse.ArgumentTypeError(f"'{v}': every budget must be 1 to 1048576 huge pages")
    return ks


def _share_arg(v: str) -> float:
    t = v.strip()
    try:
        x = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{v}' is not a share (e.g. 1% or 0.01)")
    if not 0 <= x < 1:
        raise argparse.ArgumentTypeError(f"'{v}' must be at least 0 and below 100%")
    return x


@_cli_errors
def cmd_advise(a) -> int:
    from . import advise
    rest = list(a.rest)
    if rest[:1] == ["--"]:
        rest = rest[1:]
    if not rest:
        raise CliError("advise: give the program after '--' (hugescope advise -- ./prog args)")
    policies = [p for p in a.policies.split(",") if p]
    from .progress import progress_stages
    with progress_stages(["trace", "simulate", "measure"], console=err_console) as tell:
        budgets = [b for b in a.budgets.split(",") if b.strip()] if a.budgets is not None else None
        r = advise.advise(rest, a.out, ks=a.ks, budgets=budgets, policies=policies, repeat=a.repeat, warmup=a.warmup,
                          duration=a.duration, timeout=a.timeout, preset=a.preset, config=a.config, trace=a.trace,
                          keep_trace=a.keep_trace, log=lambda m: err_console.print(f"[dim]{escape(m)}[/]"),
                          progress=tell, by_site=a.by_site, plain=a.plain,
                          measure_instrumented=a.measure_instrumented, tolerance=a.tolerance, fit=a.fit,
                          clock=a.clock)
    from .cli_regions import render_regions
    render_regions(r["regions"], f"traced regions, base pages (walk cycles: estimate, {escape(r['machine'])})",
                   console)
    w = r["estimate_whole"]
    t = Table(title=f"plans (estimates; traced phase: cost model over the trace, {escape(r['machine'])}; whole run: "
                    f"base {w['base_s']:.3f} s measured, collapses at {w['collapse_s_per_region'] * 1e3:.2f} ms per "
                    f"region); budgets of the {_sz(r['footprint_bytes'])} collapsible footprint, "
                    f"{r['candidate_regions']} whole 2 MiB regions")
    for c in ("policy", "budget", "k", "regions", "traced phase", "whole run", "collapses", "",
              "fewer regions than k because"):
        t.add_column(c, overflow="fold")
    for row in r["rows"]:
        regs = row["regions"]
        shown = " ".join(regs) if len(regs) <= 4 else f"{len(regs)}: {' '.join(regs[:3])} ..."
        t.add_row(row["policy"], escape(row["budget"]), str(row["k"]), shown or "-", f"{row['estimate']:.3f}x",
                  f"{row['whole_run']:.3f}x", f"{row['collapse_s_estimate']:.3f} s",
                  "recommended" if row["chosen"] else "", escape(row["fewer_because"]))
    console.print(t)
    console.print(f"recommended budget: {escape(r['how']['recommended'])}", soft_wrap=True)
    if r.get("model"):
        md, ho = r["model"], r["model"]["held_out"]
        console.print(f"whole-run estimates from this program's model (--fit {md['layouts']}): held-out max |error| "
                      f"{ho['max_abs_error']:.1%}, median {ho['median_abs_error']:.1%}, noise floor "
                      f"{md['noise_floor']:.1%}; model.json, held-out.csv and predicted-vs-measured.png in "
                      f"{escape(a.out)}", soft_wrap=True)
    if not r["best"]["pays"]:
        console.print("[yellow]no plan is estimated to pay for its collapses over the whole run[/]: the recommended "
                      "one is the cheapest, measured to show it")
    console.print(f"regions worth promoting ({r['best']['policy']}, budget {escape(r['best']['budget'])}, "
                  f"k={r['best']['k']}):")
    for e in r["promote"]:
        counts = (f"  (region: {e['region_accesses']:,} accesses, {e['region_walks']:,} walks)"
                  if "region_walks" in e else "")
        console.print(f"  {e['start']}  {escape(e['region'])}{counts}")
    m = r["measured"]
    console.print(f"measured build: {escape(r['measured_build'])}", soft_wrap=True)
    tr = Table(title=f"measured runs ({r['clock']} clock; load at each run)")
    for c in ("run", "round", "wall s", "CPU s", "collapse s", "loadavg 1m", "busy (all CPUs)", "busy (others)"):
        tr.add_column(c)
    for x in r["runs"]:
        others = x.get("others_busy_share")
        tr.add_row(escape(x["name"]), "-" if x["round"] is None else str(x["round"] + 1), f"{x['wall_s']:.4f}",
                   f"{noise.cpu_time_of(x):.4f}", f"{x['collapse_s']:.4f}", f"{x['loadavg_1m']:.2f}",
                   f"{x['busy_share']:.0%}", "-" if others is None else f"{others:.0%}")
    console.print(tr)
    # On the cpu clock the collapses are hugescope's CPU time, not the program's: not charged.
    charged = (f"{w['collapse_s']:.3f} s" if r["clock"] == "wall" else "not charged (cpu clock: hugescope makes them)")
    console.print(f"estimate (whole run): {w['speedup']:.3f}x (traced phase {r['estimate']:.3f}x; the plan's "
                  f"{w['regions']} collapses {charged}, simulated phase {w['phase_share']:.0%} of the "
                  f"run)   measured (median of {a.repeat} interleaved round(s)): {m['median']:.3f}x "
                  f"(min {m['min']:.3f}, max {m['max']:.3f}), noise floor {m['noise_floor']:.1%}: "
                  f"[bold]{m['verdict']}[/]")
    cm = r["collapse_s_measured"]
    src = f"{r['collapse_rate']['regions']} regions of the collapse-rate run" if r["collapse_rate"]["regions"] else \
        "not measured here"
    console.print(f"collapses: estimated {w['collapse_s']:.4f} s ({w['regions']} x {w['collapse_s_per_region'] * 1e3:.2f} "
                  f"ms, the rate over {src}); measured {cm['median']:.4f} s (min {cm['min']:.4f}, max {cm['max']:.4f}) "
                  "in the plan's runs (hugescope's time in process_madvise)")
    pa = r["plan_applied"]
    if pa["collapsed"] < pa["entries"]:
        console.print(f"[yellow]warning:[/] {pa['entries'] - pa['collapsed']} of {pa['entries']} plan entries did "
                      "not collapse in the measured build (see below): the measured gain is not the plan's")
    for k in ("estimate", "estimate_whole", "measured", "noise_floor", "load"):
        console.print(f"  {k.replace('_', ' ')}: {escape(r['how'][k])}", soft_wrap=True)
    for o in r["collapse"]:
        console.print(f"  plan entry {int(o['start']):#x}: {o['status']} {o['regions_collapsed']}/{o['regions']}"
                      + (f" ({escape(str(o['reason']))})" if o["status"] != "collapsed" else ""))
    st = r["stages_s"]
    console.print("time per stage (wall clock): " + ", ".join(
        f"{k} {v:.1f} s" + (" (reused trace)" if k == "trace" and a.trace else "") for k, v in st.items()))
    kept = (f" (trace: {escape(r['trace'])}, " + ("given with --trace)" if a.trace else "kept with --keep-trace)")
            if r["trace"] else " (the trace was deleted; --keep-trace keeps it for --trace)")
    console.print(f"wrote {escape(r['plan'])} and {escape(os.path.join(a.out, 'advise.json'))}{kept}")
    return 0


def _pid_arg(v: str) -> int:
    try:
        x = int(v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{v}' is not a process id")
    if x <= 0:
        raise argparse.ArgumentTypeError(f"'{v}' is not a process id")
    return x


def add_commands(sub) -> None:
    """Add this module's subcommands to the CLI's subparsers."""
    r = sub.add_parser("run", help="run a workload or program under a promotion plan and measure it (real Linux)",
                       description=RUN_USAGE.format(names=", ".join(workloads.names())),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _run_options(r, suppress=False)
    r.add_argument("rest", nargs=argparse.REMAINDER, help="WORKLOAD [params] or -- PROGRAM [ARGS]")
    r.set_defaults(func=cmd_run)

    ap = sub.add_parser("apply", help="apply a plan to a running process now (process_madvise; root)")
    ap.add_argument("pid", type=_pid_arg)
    ap.add_argument("plan", help="plan JSON file (every entry is applied now, whatever its 'when')")
    ap.add_argument("--no-precheck", action="store_true", help="skip hugescope's checks and show the kernel's own errno")
    json_option(ap, "write the outcomes to this JSON file")
    ap.set_defaults(func=cmd_apply)

    f = sub.add_parser("fragment", help="fragment free physical memory (PCC paper) and hold it (root)",
                       description="Put one pinned, unmovable 4 KiB page in a share of the free 2 MiB blocks of "
                                   "physical memory, print /proc/buddyinfo before and after, and hold until "
                                   "Ctrl-C/SIGTERM; every changed setting is restored.")
    f.add_argument("--share", type=_share, required=True, help="share of free 2 MiB blocks to pin, 0..1")
    f.add_argument("--seed", type=_seed, default=0, help="seed of the block choice (default 0)")
    f.add_argument("--margin", type=_size_arg, default=None,
                   help="free memory left alone, e.g. 2GiB (default max(1 GiB, 5%% of memory))")
    g = f.add_mutually_exclusive_group()
    g.add_argument("--hold", action="store_true", help="hold the pins until Ctrl-C or SIGTERM")
    g.add_argument("--seconds", type=_seconds_arg(positive=False), default=None, help="hold the pins this long, then release")
    json_option(f, "write the fragmentation report to this JSON file")
    f.set_defaults(func=cmd_fragment)

    t = sub.add_parser("thp", help="the system THP state and whether a base-page baseline can be measured")
    json_option(t, "the state as JSON, to this file", bare=True)
    t.set_defaults(func=cmd_thp)

    c = sub.add_parser("coverage", help="huge-page coverage of a running process per VMA (smaps, PAGEMAP_SCAN)")
    c.add_argument("pid", type=_pid_arg)
    c.add_argument("--all", action="store_true", help="show VMAs with nothing resident too")
    c.add_argument("--no-exact", action="store_true", help="skip the PAGEMAP_SCAN exact figure")
    json_option(c, "write the coverage to this JSON file")
    c.set_defaults(func=cmd_coverage)

    dm = sub.add_parser("daemon", help="run a huge-page policy on live processes (process_madvise MADV_COLLAPSE; root)",
                        description="Sample live processes (pagemap, clear_refs + smaps), let a policy pick 2 MiB "
                                    "regions and collapse them with process_madvise(MADV_COLLAPSE) within a budget "
                                    "and a rate limit. Never writes to, signals or stops a target. See docs/daemon.md.")
    dm.add_argument("--policy", required=True, choices=("khugepaged", "ingens", "hawkeye", "pcc"))
    dm.add_argument("--pid", type=_pid_arg, action="append", help="a process to watch (repeatable)")
    dm.add_argument("--cgroup", help="a cgroup v2 directory: watch every process in it (re-read every step)")
    dm.add_argument("--budget", type=_size_arg, help="huge bytes the daemon may make, over all processes")
    dm.add_argument("--budget-per-process", type=_size_arg, help="huge bytes the daemon may make in each process")
    dm.add_argument("--rate", type=float, default=8.0, help="collapses per second at most (default 8)")
    dm.add_argument("--interval", type=float, default=1.0, help="seconds between samples (default 1)")
    dm.add_argument("--duration", type=_seconds_arg(positive=True), default=None,
                    help="stop after this many seconds (default: when every watched process has exited)")
    dm.add_argument("--utilization", type=float, default=0.9, help="ingens: share of a region present to promote it (default 0.9)")
    dm.add_argument("--set-madvise", action="store_true",
                    help="with THP 'always', switch it to 'madvise' while running (restored on exit)")
    json_option(dm, "write every decision and the final status to this JSON file")
    dm.set_defaults(func=cmd_daemon)

    ds = sub.add_parser("daemon-study", help="measure the daemon's policies vs base pages and all huge natively, "
                        "beside the simulator's estimates (root, THP madvise; minutes)",
                        description="Interleaved native runs of hotcold, gups and bfs and of redis-server with "
                                    "redis-benchmark (installed with apt-get when missing): base pages, the daemon's "
                                    "policies under a budget, all huge; the simulator's estimate at the same budget; "
                                    "the daemon's CPU cost and the trace capture paths' slowdown. See docs/daemon.md.")
    ds.add_argument("--out", default="daemon-study", help="directory for daemon-study.json and daemon-study.md")
    ds.add_argument("--workloads", default="hotcold,gups,bfs", help="built-in workloads (default hotcold,gups,bfs)")
    ds.add_argument("--repeat", type=_count_arg("--repeat", 1, linux.RUNS_MAX), default=3,
                    help="interleaved rounds (default 3)")
    ds.add_argument("--budget", default="3%", help="daemon budget as a share of the footprint (default 3%%), or 'none' (the daemon's default)")
    ds.add_argument("--interval", type=float, default=0.5, help="daemon --interval (default 0.5)")
    ds.add_argument("--rate", type=float, default=64.0, help="daemon --rate (default 64)")
    ds.add_argument("--cpu", type=int, default=None, help="CPU for the workload (default: the last one)")
    ds.add_argument("--daemon-cpu", type=int, default=None, help="CPU for the daemon and redis-benchmark")
    ds.add_argument("--quick", action="store_true", help="small sizes: checks the plumbing in seconds")
    ds.add_argument("--no-redis", action="store_true", help="skip redis-server")
    ds.add_argument("--no-capture", action="store_true", help="skip the trace capture cost")
    ds.add_argument("--no-sim", action="store_true", help="skip the simulator's estimates")
    ds.add_argument("--preset", default=None, help=ESTIMATE_PRESET_HELP)
    ds.add_argument("--config", metavar="TOML", default=None,
                    help="machine TOML of the estimates, e.g. the file 'hugescope calibrate --out FILE' wrote")
    ds.set_defaults(func=cmd_daemon_study)

    av = sub.add_parser("advise", help="trace a program, simulate policies, recommend a plan, measure it (root)",
                        description="Trace a program built with 'hugescope cc' (or reuse a trace: --trace), simulate "
                                    "policies at a few budgets, estimate each plan over the traced phase and over the "
                                    "whole run (collapses charged), recommend the smallest budget within --tolerance "
                                    "of the best, write its plan, and measure it on the plain build (PROGRAM.plain, "
                                    "or --plain) in interleaved rounds of base, plan, base, with the noise floor, a "
                                    "verdict and the load at each run; a progress bar per stage (trace, simulate, "
                                    "measure) on a terminal. See docs/linux.md.")
    av.add_argument("--out", default="advise-out",
                    help="directory for plan.json, advise.json (and trace.hst with --keep-trace)")
    av.add_argument("--trace", metavar="FILE", default=None,
                    help="reuse this trace of the same program and arguments (e.g. kept by --keep-trace): "
                         "the trace stage is skipped")
    av.add_argument("--keep-trace", action="store_true",
                    help="keep the trace in OUT/trace.hst (default: deleted at the end; it can be GBs)")
    av.add_argument("--budgets", default=None, metavar="SHARE,...",
                    help="budgets as shares of the program's collapsible footprint (default "
                         "1%%,4%%,16%%,64%%,100%%), each k = share x footprint / 2 MiB, at least 1")
    av.add_argument("--ks", type=_ks_arg, default=None, help="budgets in 2 MiB pages instead, e.g. 1,2,4")
    av.add_argument("--policies", default="pcc,hawkeye,oracle,linux", help="simulated policies (default pcc,hawkeye,oracle,linux)")
    av.add_argument("--repeat", type=_count_arg("--repeat", 1, linux.RUNS_MAX), default=3,
                    help="interleaved rounds of base, plan, base (default 3)")
    av.add_argument("--warmup", type=_count_arg("--warmup", 0, linux.RUNS_MAX), default=1,
                    help="warm-up base runs, at least 1 made: their median is the whole run's base time of the "
                         "estimates (default 1)")
    av.add_argument("--plain", metavar="BINARY", default=None,
                    help="the program built without hugescope, to measure (default: PROGRAM.plain, which "
                         "'hugescope cc' writes beside PROGRAM)")
    av.add_argument("--measure-instrumented", action="store_true",
                    help="measure the traced (instrumented) build instead of the plain one: slower than native")
    av.add_argument("--clock", choices=list(noise.CLOCKS), default="wall",
                    help="each measured run's time: 'wall' (default: spawn to exit, the plan's collapses in it) or "
                         "'cpu', the program's own CPU time (all threads; time preempted by other programs or "
                         "stolen by the host is not in it, nor the collapses, which hugescope makes)")
    av.add_argument("--tolerance", type=_share_arg, default=0.01,
                    help="the recommended budget is the smallest whose whole-run estimate is within this of the "
                         "best (default 1%%)")
    av.add_argument("--fit", metavar="K", default=None,
                    type=_count_arg("--fit", 3, 64),
                    help="measure K layouts of the program first and price the plans with its own fitted model "
                         "instead of the cost model (hugescope model; writes model.json, held-out.csv and "
                         "predicted-vs-measured.png to --out)")
    av.add_argument("--duration", type=_seconds_arg(positive=True), default=60.0,
                    help="virtual seconds the trace spans for the simulated daemons (default 60)")
    av.add_argument("--timeout", type=_seconds_arg(positive=True), default=None, help="kill a measured run after S seconds")
    av.add_argument("--preset", default=None, help=ESTIMATE_PRESET_HELP)
    av.add_argument("--config", metavar="TOML", default=None,
                    help="machine TOML for the estimates, e.g. the file 'hugescope calibrate --out FILE' wrote")
    av.add_argument("--by-site", action="store_true",
                    help="write the plan by allocation site where it covers whole allocations (the program re-linked "
                         "or rebuilt with another layout still gets it); measured that way too")
    av.add_argument("rest", nargs=argparse.REMAINDER, help="-- PROGRAM [ARGS]")
    av.set_defaults(func=cmd_advise)

    add_calibrate_commands(sub)
    add_validate_command(sub)


# ---------------------------------------------------------------- calibrate, validate

def _ghz_arg(v: str) -> float:
    try:
        x = float(v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{v}' is not a clock in GHz")
    if not x > 0:
        raise argparse.ArgumentTypeError(f"{v}: a clock must be positive")
    return x


def render_calibration(cal) -> None:
    f = cal["fit"]
    start, c = cal["start_cost"], f["cost"]
    t = Table(title=f"cost model fitted on {escape(cal['host'])} ({escape(cal['when'])}), objective: {f['objective']}")
    t.add_column("parameter")
    t.add_column(f"before ({escape(cal['machine'])})", justify="right")
    t.add_column("after (fitted)", justify="right")
    for k in ("base_cycles_per_access", "walk_ref_cycles", "cpu_ghz", "l2_hit_cycles", "pwc_hit_cycles"):
        how = "fitted" if k in ("base_cycles_per_access", "walk_ref_cycles") else (
            "fitted" if k == "cpu_ghz" and f["fit_ghz"] else "host clock" if k == "cpu_ghz" and cal.get("host_ghz")
            else "held")
        t.add_row(f"{k} ({how})", f"{start[k]:.4g}", f"{c[k]:.4g}")
    console.print(t)
    s = Table(title="speedup of all huge vs base pages: measured (median of runs) vs estimated (cost model)")
    for col in ("workload", "measured base", "measured huge", "measured speedup", "estimate before", "residual before",
                "estimate after", "residual after", "time residual after (base / huge)"):
        s.add_column(col, justify="left" if col == "workload" else "right")
    for b, a in zip(f["before"], f["after"]):
        s.add_row(escape(a["label"]), f"{a['base_s_measured']:.4f} s", f"{a['huge_s_measured']:.4f} s",
                  f"{a['speedup_measured']:.3f}x", f"{b['speedup_est']:.3f}x", f"{100 * b['speedup_residual']:+.1f}%",
                  f"{a['speedup_est']:.3f}x", f"{100 * a['speedup_residual']:+.1f}%",
                  f"{100 * a['base_s_residual']:+.1f}% / {100 * a['huge_s_residual']:+.1f}%")
    console.print(s)
    console.print(f"measured: {escape(cal['how'])}; estimates: static 4k and 2m page maps of the same run's trace on "
                  f"{escape(cal['machine'])}; residual = estimate / measurement - 1; "
                  f"sum of squared (weighted) residuals of the fit {f['rss']:.3g}")
    for p in cal["points"]:
        cov = p["huge"].get("coverage")
        if cov is not None and cov < 0.9:
            err_console.print(f"[yellow]warning:[/] {escape(p['label'])}: the all-huge runs reached only "
                              f"{100 * cov:.0f}% huge-page coverage")


def render_walks(cal) -> None:
    f = cal["fit"]
    t = Table(title=f"walk cost vs footprint on {escape(cal['cpu_model'])} (kernel {escape(cal['kernel'])}), "
                    f"{escape(cal['when'])}: pointer chase, ns per access")
    for col in ("footprint", "4 KiB pages", "2 MiB pages", "difference (measured)", "difference (model, fitted)",
                "random 4k - 2m", "huge share of 2m buffer"):
        t.add_column(col, justify="right")
    rand = {r["footprint"]: r for r in f["random_table"]}
    from .walkcal import _size
    for r in f["table"]:
        rr = rand.get(r["footprint"])
        t.add_row(_size(r["footprint"]), f"{r['ns_4k']:.2f}", f"{r['ns_2m']:.2f}", f"{r['delta_ns']:+.2f}",
                  f"{r['delta_fit_ns']:+.2f}", f"{rr['delta_ns']:+.2f}" if rr else "-",
                  f"{100 * r['huge_fraction_2m']:.0f}%")
    console.print(t)
    c = f["cost"]
    console.print(f"fitted (estimates of the model, from the measurements above): walk reference hitting the "
                  f"page-table line cache {f['walk_ref_llc_ns']:.2f} ns ({c['walk_ref_cycles']:.1f} cycles), missing "
                  f"it {f['walk_ref_mem_ns']:.2f} ns ({c['walk_ref_mem_cycles']:.1f} cycles), L2 TLB hit "
                  f"{f['l2_hit_ns']:.2f} ns, capacity C = {f['pt_cache_lines']} lines "
                  f"({f['pt_cache_lines'] * 64 / 2**20:.3g} MiB) at {c['cpu_ghz']:.4g} GHz; overlap of walks in "
                  "independent random loads " + (f"{f['overlap_random']:.2f}" if f["overlap_random"] is not None
                                                 else "not measurable"))
    for e in f.get("excluded") or []:
        err_console.print(f"[yellow]warning:[/] {_size(e['footprint'])} left out of the fit: its 2 MiB buffer was only "
                          f"{100 * e['huge_fraction_2m']:.0f}% huge (smaps)")
    how = next((m["how"] for m in cal["microbench"] if m.get("how")), None)
    if how:
        console.print(f"measured: {escape(how)} (each footprint and page size alike)")
    render_tlbs(f.get("tlb"))


def render_tlbs(t) -> None:
    """This machine's TLBs: CPUID's geometry, the measured reach steps, and
    per level and page size what the preset uses and why."""
    from .walkcal import _size

    if t is None:
        console.print("TLBs: these measurements carry no TLB record; the preset keeps the starting preset's TLBs")
        return
    g = t["geometry"]
    s = Table(title=f"TLBs CPUID reports ({escape(g['vendor'])}, {escape(g['method'])})")
    for c in ("level", "kind", "pages", "entries", "ways", "from"):
        s.add_column(c, justify="right" if c in ("entries", "ways") else "left")
    for x in g["structures"]:
        s.add_row(str(x["level"]), x["kind"], "+".join(x["pages"]), str(x["entries"]),
                  "full" if x["ways"] == 0 else str(x["ways"]), escape(x["source"]))
    console.print(s)
    a = t["analysis"]
    if a["series"]:
        k = Table(title="TLB reach, measured: where the load time steps (page-strided pointer chase, one line a page)")
        for c in ("pages / backing", "step between (pages)", "footprint", "ns a load before -> after",
                  "cycles before -> after", "what"):
            k.add_column(c, justify="left" if c in ("pages / backing", "what") else "right")
        for name, ser in a["series"].items():
            stride, backing = name.split("/")
            label = f"{stride} apart, {'4 KiB' if backing == '4k' else '2 MiB'} pages"
            if not ser["steps"]:
                k.add_row(label, "-", f"none up to {ser['max_pages']} pages", "", "", "")
            for st in ser["steps"]:
                cyc = (f"{st['cycles_before']:.1f} -> {st['cycles_after']:.1f}" if "cycles_before" in st else "-")
                what = {"data cache": f"data cache ({st['cache']})", "reach": "TLB reach",
                        "walks": "walks dearer (page-table lines leave the caches)"}[st["kind"]]
                k.add_row(label, f"{st['pages_before']}..{st['pages_at']}",
                          f"{_size(st['footprint_before'])}..{_size(st['footprint_at'])}",
                          f"{st['ns_before']:.2f} -> {st['ns_after']:.2f}", cyc, what)
        console.print(k)
    v = Table(title="TLB geometry of the calibrated preset (data side)")
    for c in ("level", "page", "CPUID entries", "measured step (pages)", "verdict", "preset uses"):
        v.add_column(c, justify="right" if c in ("CPUID entries",) else "left")
    for r in a["levels"]:
        m = r["measured"]
        u = r["used"]
        v.add_row(f"L{r['level']}", r["page"], str(r["cpuid"]["entries"]) if r["cpuid"] else "-",
                  f"{m['pages_before']}..{m['pages_at']}" if m else "-", escape(r["verdict"]),
                  escape(f"{u['entries']} ({u['from']})") if u else "the starting preset's (a default)")
    console.print(v)
    for n in t["notes"]:
        console.print(f"[yellow]note:[/] {escape(n)}")
    if t.get("how"):
        console.print(f"TLB reach measured: {escape(t['how'])}")


def _calibrate_walks(a, meas) -> int:
    from . import calibrate, units

    if a.fit_ghz or a.trace_dir:
        raise CliError("--fit-ghz and --trace-dir belong to the workload fit (--workload); the walk "
                       "microbenchmarks use the host clock (or --ghz)")
    fps = None
    if a.footprints:
        try:
            fps = [int(units.parse_size(s.strip())) for s in a.footprints.split(",")]
        except (ValueError, TypeError) as e:
            raise CliError(f"--footprints {a.footprints}: {e}")
    cal = calibrate.calibrate_walks(preset=a.preset, config=a.config, footprints=fps,
                                    accesses=a.accesses or (1 << 21), repeat=a.repeat, ghz=a.ghz, measurements=meas,
                                    log=lambda s: err_console.print(f"[dim]{escape(s)}[/]"), tlb=not a.no_tlb_reach)
    if a.json:
        emit_json(a.json, cal)
    with human_to_stderr(a.json):
        render_walks(cal)
    _save_calibration(a, cal, "--preset calibrated")
    return 0


@_cli_errors
def cmd_calibrate(a) -> int:
    from . import calibrate

    if a.measurements and (a.workload or a.trace_dir):
        raise CliError("--measurements refits earlier measurements; --workload and --trace-dir need new runs")
    check_outputs([(a.json, "json")], [a.measurements] if a.measurements else [])
    if a.fit_ghz and a.ghz is not None:
        raise CliError("--ghz sets the clock and --fit-ghz fits it: give one of them")
    if a.preset == "calibrated":
        raise CliError("calibrate starts from a paper preset (e.g. haswell-pcc), not from 'calibrated'")
    wls = [calibrate.parse_workload(s) for s in a.workload] if a.workload else None
    meas = None
    if a.measurements:
        try:
            meas = _io.read_json(a.measurements, "measurements file")
        except ValueError as e:
            raise CliError(str(e)) from None
    if wls is None and (meas is None or meas.get("kind") == "microbench"):
        return _calibrate_walks(a, meas)
    if a.footprints or a.accesses is not None or a.no_tlb_reach:
        raise CliError("--footprints, --accesses and --no-tlb-reach set the microbenchmarks, not the workload fit "
                       "(--workload)")
    cal = calibrate.calibrate(wls, repeat=a.repeat, warmup=a.warmup, preset=a.preset, config=a.config,
                              objective=a.objective, ghz=a.ghz, fit_ghz=a.fit_ghz, trace_dir=a.trace_dir,
                              measurements=meas, log=lambda s: err_console.print(f"[dim]{escape(s)}[/]"))
    if a.json:
        emit_json(a.json, cal)
    with human_to_stderr(a.json):
        render_calibration(cal)
    _save_calibration(a, cal, "--preset calibrated (Python: calibrate.machine_args('calibrated'))")
    return 0


def _save_calibration(a, cal, how_default: str) -> None:
    """Save the fit (unless --dry-run) and say how to use it: ``how_default``
    when it went to the default path, ``--config FILE`` otherwise."""
    from . import calibrate

    if a.dry_run:
        return
    path = calibrate.save_preset(cal, a.out)
    default = os.path.abspath(path) == os.path.abspath(calibrate.default_path())
    console.print(f"saved the calibrated preset to {escape(path)}; use it with "
                  + (how_default if default else f"--config {escape(path)}"))


def add_calibrate_commands(sub) -> None:
    from . import calibrate

    c = sub.add_parser("calibrate", help="fit the cost model to measurements on this machine and save it as a preset",
                       description="By default: run pointer-chase microbenchmarks with 4 KiB and 2 MiB pages over "
                                   "footprints from 16 KiB to 4 GiB (--footprints), fit the page walk's costs "
                                   "(walk_ref_cycles for a reference that hits the page-table line cache, "
                                   "walk_ref_mem_cycles for one that misses, pt_cache_lines, l2_hit_cycles) and "
                                   "save them over the starting preset as a machine TOML (default "
                                   f"{calibrate.default_path()}, used by --preset calibrated and, when no --preset "
                                   "or --config is given, by advise, validate and run; --out FILE elsewhere, "
                                   "then --config FILE). Before them it reads this CPU's TLB geometry (CPUID) and "
                                   "checks it by measuring where TLB reach ends with 4 KiB and 2 MiB pages "
                                   "(--no-tlb-reach: CPUID alone); the preset gets those L1/L2 TLBs, each saying "
                                   "where its numbers come from. With --workload: run those workloads natively with base "
                                   "pages and all huge (median of N fresh-process runs), simulate the same runs and "
                                   "fit base_cycles_per_access and walk_ref_cycles instead (--objective).")
    c.add_argument("--workload", action="append", default=[], metavar="NAME[:k=v,...]",
                   help="fit to this workload's native runs instead of the microbenchmarks (repeatable), e.g. "
                        + "; ".join(calibrate._label(n, p) for n, p in calibrate.DEFAULT_WORKLOADS))
    c.add_argument("--repeat", type=_count_arg("measured runs", 1, linux.RUNS_MAX), default=3,
                   help="measured repetitions of each microbenchmark or workload run (default 3)")
    c.add_argument("--warmup", type=_count_arg("warm-up runs", 0, linux.RUNS_MAX), default=1,
                   help="with --workload: warm-up runs first (default 1)")
    c.add_argument("--preset", default=calibrate.DEFAULT_PRESET,
                   help=f"starting preset; its other latencies are held (default {calibrate.DEFAULT_PRESET})")
    c.add_argument("--config", metavar="TOML", help="TOML merged over the starting preset")
    c.add_argument("--objective", choices=calibrate.OBJECTIVES, default="speedup",
                   help="with --workload: fit speedups (default) or absolute times; see docs/linux.md")
    c.add_argument("--ghz", type=_ghz_arg, default=None, help="clock for cycles -> seconds (default: this host's)")
    c.add_argument("--fit-ghz", action="store_true", help="fit the clock to the measured absolute times")
    c.add_argument("--out", metavar="FILE", default=None, help=f"preset file to write (default {calibrate.default_path()})")
    c.add_argument("--dry-run", action="store_true", help="fit and print, write no preset")
    json_option(c, "write measurements, counters and the fit to this JSON file")
    c.add_argument("--measurements", metavar="JSON", help="refit the measurements of an earlier --json (no runs)")
    c.add_argument("--trace-dir", metavar="DIR", help="keep the traces here (default: a temporary directory)")
    c.add_argument("--footprints", metavar="SIZE,...", default=None,
                   help="walk microbenchmark footprints (default 16KiB, x4 ... 4GiB; those whose two buffers do "
                        "not fit in available memory are skipped)")
    c.add_argument("--accesses", type=_count_arg("accesses", 1, 1 << 32), default=None,
                   help="loads per microbenchmark pass (default 2097152)")
    c.add_argument("--no-tlb-reach", action="store_true",
                   help="take the TLB geometry from CPUID alone, without measuring where TLB reach ends")
    c.set_defaults(func=cmd_calibrate)


VALIDATE_USAGE = """usage: hugescope validate WORKLOAD [workload params] [--ks 1,2,4,8] [--policies pcc,hawkeye,oracle,random]
                          [--repeat N] [--warmup W] [--rank-seed S] [--duration S] [--preset P|calibrated] [--config TOML]
                          [--trace FILE.hst | --trace-dir DIR] -o DIR
       hugescope validate (--suite NAME | --workload NAME[:k=v,...] ...) [options] -o DIR   (options: validate --suite default --help)

For each policy and k: promote the k 2 MiB regions the policy ranks highest,
predict the speedup with the cost model (estimate) and measure it natively
(median of N fresh-process runs), and report the Spearman rank correlation.
workloads: {names}"""


def _validate_options(p: argparse.ArgumentParser) -> None:
    from . import validate
    p.add_argument("--ks", default=",".join(map(str, validate.DEFAULT_KS)), help="numbers of regions, e.g. 1,2,4,8")
    p.add_argument("--policies", default=",".join(validate.DEFAULT_POLICIES),
                   help="policies that rank the regions ('random' = seeded random choice)")
    p.add_argument("--repeat", type=_count_arg("measured runs", 1, linux.RUNS_MAX), default=3, help="measured runs per plan (default 3)")
    p.add_argument("--warmup", type=_count_arg("warm-up runs", 0, linux.RUNS_MAX), default=1, help="warm-up runs per plan (default 1)")
    # Workloads have their own --seed (their data); this one only shuffles the random ranking.
    p.add_argument("--rank-seed", type=_seed, default=1, help="seed of the random ranking (default 1)")
    p.add_argument("--duration", type=_seconds_arg(positive=True), default=validate.DEFAULT_DURATION,
                   help=f"virtual seconds the trace spans for the simulated policies (default {validate.DEFAULT_DURATION:g})")
    p.add_argument("--preset", default=None, help=ESTIMATE_PRESET_HELP)
    p.add_argument("--config", metavar="TOML", default=None, help="machine TOML (e.g. a calibration)")
    p.add_argument("--trace", metavar="FILE", default=None, help="reuse a trace of exactly this run")
    p.add_argument("--trace-dir", metavar="DIR", default=None, help="keep the trace here (default: temporary)")
    p.add_argument("-o", "--out", metavar="DIR", required=True, help="results directory (for 'hugescope report')")


@_cli_errors
def cmd_validate(a) -> int:
    from . import validate

    rest = list(a.rest or [])
    names = workloads.names()
    if rest and rest[0].split("=")[0] in ("--suite", "--workload"):
        from .cli_suite import main
        return main(rest)
    if not rest or rest[0] in ("-h", "--help"):
        console.print(escape(VALIDATE_USAGE.format(names=", ".join(names))))
        return 0 if rest else 2
    name = rest[0]
    if name not in names:
        raise CliError(f"unknown workload '{name}' (workloads: {', '.join(names)})")
    p, kinds = workload_parser(name, f"hugescope validate {name}", _validate_options)
    va = p.parse_args(rest[1:])
    if va.trace and va.trace_dir:
        raise CliError("--trace reuses a trace and --trace-dir keeps a new one: give one of them")
    params = _params(va, kinds)
    df = validate.validate(name, params, ks=va.ks, policies=va.policies, repeat=va.repeat, warmup=va.warmup,
                           seed=va.rank_seed, preset=va.preset, config=va.config, duration=va.duration, trace=va.trace,
                           trace_dir=va.trace_dir, out=va.out, log=lambda s: err_console.print(f"[dim]{escape(s)}[/]"))
    meta = df.attrs["meta"]
    t = Table(title=f"{name}: top-k plans, predicted speedup (estimate, cost model) vs measured speedup "
                    f"(median of {va.repeat} runs)")
    for c in ("policy", "k", "regions", "predicted (estimate)", "rank", "measured median", "min..max", "rank ",
              "collapsed", "coverage"):
        t.add_column(c, justify="left" if c == "policy" else "right")
    pred = df[df["quantity"] == "predicted"].reset_index(drop=True)
    meas = df[df["quantity"] == "measured"].reset_index(drop=True)
    for (_, p_), (_, m) in zip(pred.iterrows(), meas.iterrows()):
        t.add_row(escape(str(p_["policy"])), str(p_["k"]), str(p_["regions"]), f"{p_['speedup']:.3f}x",
                  f"{p_['rank']:g}", f"{m['speedup']:.3f}x", f"{m['speedup_min']:.3f}..{m['speedup_max']:.3f}x",
                  f"{m['rank']:g}", f"{int(m['collapsed'])}/{int(m['regions'])}", _pct(m["coverage"]))
    console.print(t)
    rho = meta.get("spearman")
    console.print(f"Spearman rank correlation of predicted vs measured speedup: "
                  f"{'undefined (a constant side)' if rho is None else f'{rho:.3f}'} over {len(pred)} plans; "
                  f"base pages measured {meta['base_measured']['wall_s']['median']:.4f} s (median)")
    console.print(f"estimates on {escape(meta['machine_label'])}")
    console.print(f"wrote {escape(os.path.join(va.out, f'validate-{name}'))}.{{csv,json,png}} "
                  f"('hugescope report {escape(va.out)}' renders it)")
    return 0


def add_validate_command(sub) -> None:
    v = sub.add_parser("validate", help="predicted vs measured speedup of each policy's top-k plans (real Linux)",
                       description=VALIDATE_USAGE.format(names=", ".join(workloads.names())),
                       formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False)
    v.add_argument("rest", nargs=argparse.REMAINDER, help="WORKLOAD [params] [options]")
    v.set_defaults(func=cmd_validate)
