"""Subcommands of the `hugescope` CLI: experiments. Registered by `cli.build_parser`.

    hugescope curve TRACE --policies pcc,hawkeye,oracle --budgets 0,1,2,4,8,16,32,64,100 -o DIR
    hugescope frag TRACE --levels 50,90 -o DIR
    hugescope sensitivity TRACE --pcc-sizes 4..1024 -o DIR
    hugescope reuse TRACE -o DIR
    hugescope multi TRACE [TRACE2 ...] -o DIR      (several traces are merged first)
    hugescope merge A.hst B.hst -o AB.hst          (also reachable as 'hugescope trace merge' once wired)
    hugescope report DIR -o report.html
    hugescope reproduce pcc|ds|ingens|navarro|fhpm|virt|all --scale ci --seeds 3 -o DIR

Each experiment prints a summary table, writes CSV + JSON (and PNG figures)
into the results directory, and shows a progress bar on a terminal.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import List

from rich.markup import escape
from rich.table import Table

from . import experiments as ex
from . import units


def _cli():
    # Imported late: cli imports this module while building its parser.
    from . import cli
    return cli


# ---------------------------------------------------------------- parsing

def parse_numbers(text: str, what: str, integer: bool = False, low: float = None, high: float = None) -> List[float]:
    """'0,1,2,4' -> [0, 1, 2, 4]; 'A..B' -> powers of two from A to B
    (A and B powers of two); both forms can be mixed: '4..64,100'. Every
    value must be finite and within ``low``..``high``; errors echo the item as
    typed."""
    out: List[float] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        if ".." in part:
            lo, _, hi = part.partition("..")
            try:
                a, b = int(lo), int(hi)
            except ValueError:
                raise ValueError(f"{what}: '{part}' is not a range of integers like 4..1024") from None
            if a < 1 or b < a or a & (a - 1) or b & (b - 1):
                raise ValueError(f"{what}: range '{part}' must go from a power of two up to a larger power of two")
            if high is not None and b > high:
                raise ValueError(f"{what}: range '{part}' goes beyond {high:g}")
            n = a
            while n <= b:
                out.append(n)
                n *= 2
            continue
        try:
            v = float(part)
        except ValueError:
            raise ValueError(f"{what}: '{part}' is not a number") from None
        if v != v or v in (float("inf"), float("-inf")):
            raise ValueError(f"{what}: '{part}' is not a finite number")
        if (low is not None and v < low) or (high is not None and v > high):
            raise ValueError(f"{what}: '{part}' is out of range (expected {low:g}..{high:g})")
        if integer:
            if v != int(v):
                raise ValueError(f"{what}: '{part}' is not an integer")
            v = int(v)
        out.append(v)
    if not out:
        raise ValueError(f"{what}: empty list")
    return out


def _policies(text: str) -> List[str]:
    # Policy parameters use commas too ("pcc:entries=64,demotion=true"), so the
    # list is split on commas that start a new policy name (no '=' before ':').
    items: List[str] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        if items and "=" in part and ":" not in part.split("=")[0]:
            items[-1] += "," + part
        else:
            items.append(part)
    if not items:
        raise ValueError("no policy given")
    return items


def _add_common(p: argparse.ArgumentParser, out_default: str = "results", fragments: bool = True) -> None:
    cli = _cli()
    cli._add_machine_args(p)
    p.add_argument("-o", "--out", default=out_default, help=f"results directory (default {out_default})")
    p.add_argument("--duration", type=units.float_arg("--duration", positive=True), default=None,
                   help="virtual seconds the trace spans (so the papers' 30 s intervals fire on a short trace)")
    p.add_argument("--memory", default=None, help="simulated physical memory (default: 1.3 x footprint + 8MiB, at least 64MiB)")
    p.add_argument("--footprint", default=None, help="footprint the N%% limits refer to (default: the trace's regions)")
    p.add_argument("--rate", type=units.float_arg("--rate", positive=True), default=None,
                   help="nominal accesses per second (instead of --duration)")
    if fragments:
        p.add_argument("--seed", type=cli.seed_arg, default=None,
                       help="seed of the fragmentation injector (default 1)")
    p.add_argument("--os", action="append", default=[], metavar="COST=US", help="override an OS cost in microseconds (= --set os.COST=US; see hugescope config --keys)")
    p.add_argument("--threads", type=units.int_arg("--threads", 1, ex.MAX_THREADS), default=min(2, os.cpu_count() or 1),
                   help=f"simulation threads (each decodes the trace once; default 2, at most {ex.MAX_THREADS})")
    p.add_argument("--no-plots", action="store_true", help="do not write PNG figures next to the results")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted run from the finished points kept in OUT/NAME.checkpoint.json "
                        "(or OUT/NAME.parts with --results-format csv,parquet)")
    _backend_args(p, "the batches")


def _backend_args(p, what: str) -> None:
    """``--backend`` and ``--ray-address``: where ``what`` run."""
    p.add_argument("--backend", choices=ex.BACKENDS, default="local",
                   help=f"where {what} run: local (this machine's cores, default) or ray (Ray "
                        "tasks: a local Ray instance, or the cluster at --ray-address; needs hugescope[ray])")
    p.add_argument("--ray-address", metavar="ADDR", default=None,
                   help="with --backend ray: the cluster's head HOST:PORT (or auto, ray://HOST:PORT); "
                        "default: start a local Ray instance")


def _common(a) -> dict:
    return {"preset": a.preset, "config": a.config, "set": a.set, "memory": a.memory, "footprint": a.footprint,
            "duration": a.duration, "rate": a.rate, "seed": getattr(a, "seed", None), "os_costs": a.os,
            "threads": a.threads, "backend": a.backend, "ray_address": a.ray_address}


def _time_base(a) -> None:
    if getattr(a, "duration", None) is not None and getattr(a, "rate", None) is not None:
        raise ValueError("--duration and --rate both set the virtual time base "
                         "(rate = accesses / duration); give one of them")


def _name(experiment: str, trace: str) -> str:
    return f"{experiment}-{ex._stem(trace)}"


def _open_traces(paths) -> None:
    """Open each input trace (its header and footer read) before anything is
    created: a FIFO, a device or a non-trace is refused in one line without
    leaving an empty results directory behind."""
    from . import api

    for t in paths:
        api.trace_info(t)


def _prepare(a, experiment: str, trace: str, extra=(), made: bool = False) -> str:
    """Before the work: the trace is opened (unless ``made`` by the command,
    as a merge is), every file the command will write is checked (results
    directory created, CSV/JSON/PNG and checkpoint refused if they must not be
    replaced); returns the checkpoint path."""
    from . import plots

    _time_base(a)
    name = _name(experiment, trace)
    if not made:
        _open_traces([trace])
    inputs = [trace] + ([a.config] if getattr(a, "config", None) else [])
    inputs += _cli().policy_inputs(_policies(a.policies) if getattr(a, "policies", None) else [])
    ex.check_outputs(a.out, name, extra, inputs)
    if not a.no_plots:
        for png in plots.figure_paths({"hugescope_experiment": experiment}, os.path.join(a.out, name)):
            ex.check_output(png, "png", inputs)
    return ex.checkpoint_path(a.out, name)


@contextlib.contextmanager
def _keeps(checkpoint: str):
    """On SIGINT/SIGTERM, tell main what the interrupted sweep kept."""
    from .sweep_parts import parts_path

    try:
        yield
    except KeyboardInterrupt:
        kept = [p for p in (checkpoint, parts_path(checkpoint)) if os.path.exists(p)]
        if kept:
            _cli().interrupt_note = (f"finished points kept in {kept[0]}; "
                                     "run the same command with --resume to continue")
        raise


@contextlib.contextmanager
def _backend(a):
    """``--backend ray``: Ray for the whole sweep, started (or connected)
    before the work under a spinner; ``--ray-address`` alone is refused."""
    if a.backend != "ray":
        if a.ray_address is not None:
            raise ValueError("--ray-address applies to --backend ray only")
        yield
        return
    from . import ray_backend

    ray_backend.require()
    where = f"connecting to Ray at {a.ray_address}" if a.ray_address else "starting a local Ray instance"
    with contextlib.ExitStack() as stack:
        if sys.stderr.isatty():
            with _cli().err_console.status(where):
                stack.enter_context(ray_backend.session(a.ray_address))
        else:
            stack.enter_context(ray_backend.session(a.ray_address))
        yield


@contextlib.contextmanager
def _progress(description: str):
    """A progress callback ``(done, total)``: a rich bar on a terminal (stderr),
    nothing otherwise."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=_cli().err_console, transient=True) as p:
        task = p.add_task(description, total=None)
        p.start_task(task)

        def update(done, total):
            p.update(task, completed=done, total=total)

        yield update


def _user_errors(fn):
    """Turn ValueError (bad argument values) into the CLI's one-line error."""
    def run(a):
        try:
            return fn(a)
        except ValueError as e:
            # HugescopeError is what the CLI's main catches whichever way it
            # was started (console script or `python -m hugescope.cli`).
            raise ex.HugescopeError(str(e)) from None
    return run


def _fmt(col: str, v) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "-"
    if col in ("huge_share", "ptw_rate", "page_share", "access_share", "walk_reduction"):
        return f"{100 * v:.2f}%"
    if col == "speedup_est":
        return f"{v:.3f}x"
    if isinstance(v, float):
        return f"{v:,.3f}".rstrip("0").rstrip(".") if v == int(v) else f"{v:,.3f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _print_table(df, columns, title: str) -> None:
    console = _cli().console
    cols = [c for c in columns if c in df.columns]
    heads = {"speedup_est": "speedup (estimate)", "ptw_rate": "PTW rate", "huge_share": "huge share",
             "budget_pct": "limit %", "frag_pct": "frag %"}
    rows = [[_fmt(c, rec.get(c)) for c in cols] for rec in df.to_dict(orient="records")]
    widest = [max((len(r[i]) for r in rows), default=0) for i in range(len(cols))]
    names = [heads.get(c, c) for c in cols]
    # No value is ever cut ("refere..." on an 80-column terminal, issue #38):
    # each column is at least as wide as its widest value, and when the table
    # would not fit on one line per header, each header takes a line per word.
    natural = sum(max(w, len(n)) for w, n in zip(widest, names)) + 3 * len(cols) + 1
    split = natural > console.width
    t = Table(title=title, pad_edge=not split)
    for c, n, w in zip(cols, names, widest):
        t.add_column(n.replace(" ", "\n") if split else n,
                     justify="left" if c in ("policy", "role", "region", "class") else "right", min_width=w)
    for r in rows:
        t.add_row(*r)
    console.print(t)


def _finish(df, a, extra=None, checkpoint=None) -> None:
    name = _name(df.attrs['meta']['hugescope_experiment'], df.attrs['meta']['trace']['path'])
    paths = ex.save(df, a.out, name=name, extra_tables=extra)
    msg = f"wrote {paths['csv']} and {paths['json']}"
    if not a.no_plots:
        from . import plots
        data = ex.load(paths["json"])
        pngs = plots.save_figures(data, os.path.join(a.out, name))
        if pngs:
            msg += " and " + ", ".join(pngs)
    # Only once every result file is written: the checkpoint is what an
    # interruption before this point resumes from.
    ex.remove_checkpoint(checkpoint)
    _cli().console.print(escape(msg))


# ---------------------------------------------------------------- commands

@_user_errors
def cmd_curve(a) -> int:
    policies = _policies(a.policies)
    budgets = parse_numbers(a.budgets, "--budgets", low=0, high=100)
    frag_points = parse_numbers(a.frag_points, "--frag-points", low=0, high=100) if a.frag_points.strip() else []
    if not frag_points:
        # Both only shape the fragmentation points: without any they do nothing.
        if a.frag_policy is not None:
            raise ValueError(f"--frag-policy '{a.frag_policy}' has no effect without --frag-points")
        if a.seed is not None:
            raise ValueError("--seed seeds the fragmentation injector; it has no effect without --frag-points")
    ckpt = _prepare(a, "curve", a.trace)
    with _backend(a), _keeps(ckpt), _progress("utility curve") as tick:
        df = ex.curve(a.trace, policies=policies, budgets=budgets, frag_points=frag_points,
                      frag_policy=a.frag_policy or "linux", progress=tick, checkpoint=ckpt, resume=a.resume,
                      **_common(a))
    _print_table(df, ["policy", "role", "budget_pct", "frag_pct", "huge_share", "promotions", "ptw_rate",
                      "speedup_est"], "utility curve (speedup and walks are estimates of the model)")
    _finish(df, a, checkpoint=ckpt)
    return 0


@_user_errors
def cmd_frag(a) -> int:
    levels = parse_numbers(a.levels, "--levels", low=0, high=100)
    policies = _policies(a.policies)
    ckpt = _prepare(a, "frag", a.trace)
    with _backend(a), _keeps(ckpt), _progress("fragmentation") as tick:
        df = ex.frag(a.trace, levels=levels, policies=policies, frag_method=a.frag_method, progress=tick,
                     checkpoint=ckpt, resume=a.resume, **_common(a))
    _print_table(df, ["policy", "frag_pct", "fmfi", "huge_share", "promotions", "ptw_rate", "speedup_est"],
                 "fragmentation (speedup over unfragmented base pages, estimate)")
    _finish(df, a, checkpoint=ckpt)
    return 0


@_user_errors
def cmd_sensitivity(a) -> int:
    sizes = parse_numbers(a.pcc_sizes, "--pcc-sizes", integer=True, low=1, high=units.U64_MAX)
    budget = parse_numbers(a.budget, "--budget", low=0, high=100)
    if len(budget) != 1:
        raise ValueError(f"--budget takes one percentage, not '{a.budget}'")
    ckpt = _prepare(a, "sensitivity", a.trace)
    with _backend(a), _keeps(ckpt), _progress("PCC size sensitivity") as tick:
        df = ex.sensitivity(a.trace, pcc_sizes=sizes, budget=budget[0], policy=a.policy, param=a.param, progress=tick,
                            checkpoint=ckpt, resume=a.resume, **_common(a))
    _print_table(df, ["policy", "role", "size", "huge_share", "promotions", "ptw_rate", "speedup_est"],
                 f"PCC size sensitivity at a {budget[0]:g}% limit (estimates)")
    _finish(df, a, checkpoint=ckpt)
    return 0


@_user_errors
def cmd_tlb_sizes(a) -> int:
    entries = None
    if a.entries:
        entries = parse_numbers(a.entries, "--entries", integer=True, low=1, high=units.U64_MAX)
    _prepare(a, "tlb-sizes", a.trace)
    with _progress("TLB size sensitivity (one pass)") as tick:
        df = ex.tlb_sizes(a.trace, entries=entries, pages=a.pages, structure=a.structure, preset=a.preset,
                          config=a.config, set=a.set, progress=tick)
    _print_table(df, ["entries", "ways", "configured", "l2_hits", "walks", "walks_per_1k_accesses",
                      "speedup_vs_configured"],
                 "L2 TLB size sensitivity (walks simulated exactly in one pass; speedup is an estimate)")
    _finish(df, a)
    return 0


@_user_errors
def cmd_reuse(a) -> int:
    _prepare(a, "reuse", a.trace, extra=("points",))
    with _progress("reuse distance"):
        res = ex.reuse(a.trace, threshold=a.threshold, average=a.average, alpha=a.alpha, max_points=a.max_points,
                       seed=a.seed)
    t = Table(title=f"page reuse classes per region (measured on the trace; threshold {a.threshold:g})")
    for c in ("region", "pid", "pages", "TLB-friendly", "HUB", "low reuse", "HUB accesses"):
        t.add_column(c, justify="left" if c == "region" else "right")
    for g in res.report.regions + [res.report.total]:
        if g.pages == 0:
            continue
        cl = {getattr(c, "class"): c for c in g.classes}  # (`class` is a Python keyword)
        t.add_row(g.name, str(g.pid), f"{g.pages:,}", f"{100 * cl['tlb_friendly'].page_share:.1f}%",
                  f"{100 * cl['hub'].page_share:.1f}%", f"{100 * cl['low_reuse'].page_share:.1f}%",
                  f"{100 * cl['hub'].access_share:.1f}%")
    _cli().console.print(t)
    _finish(res.regions, a, extra={"points": res.points})
    return 0


@_user_errors
def cmd_multi(a) -> int:
    trace = a.traces[0]
    policies = _policies(a.policies)
    budgets = parse_numbers(a.budgets, "--budgets", low=0, high=100)
    if len(a.traces) == 1:
        # Merging options shape a merge, which one trace does not need.
        if a.slice is not None:
            raise ValueError("--slice applies when several traces are merged; one was given")
        if a.shared_cpus:
            raise ValueError("--shared-cpus applies when several traces are merged; one was given")
    else:
        from ._io import prepare_dir
        _open_traces(a.traces)
        prepare_dir(a.out)
        trace = os.path.join(a.out, "merged-" + "-".join(ex._stem(t) for t in a.traces) + ".hst")
        ex.check_output(trace, "hst", a.traces)
    # The merged trace's name is known before merging, so every output is
    # checked before the merge (the first piece of work).
    ckpt = _prepare(a, "multi", trace, extra=("processes", "timeline"), made=len(a.traces) > 1)
    if len(a.traces) > 1:
        rep = ex.merge(a.traces, trace, slice=65536 if a.slice is None else a.slice, separate_cpus=not a.shared_cpus)
        _cli().console.print(escape(f"merged {len(a.traces)} traces into {trace} "
                                    f"({rep['summary']['accesses']:,} accesses)"))
    with _backend(a), _keeps(ckpt), _progress("multi-process comparison") as tick:
        df, procs, tl = ex.multi(trace, policies=policies, budgets=budgets, progress=tick, checkpoint=ckpt,
                                 resume=a.resume, **_common(a))
    _print_table(df, ["policy", "role", "budget_pct", "huge_share", "promotions", "ptw_rate", "speedup_est"],
                 "promotion policies (combined speedup, estimate)")
    if len(procs) and procs["pid"].nunique() > 1:
        _print_table(procs, ["policy", "budget_pct", "pid", "process", "huge_share", "walk_reduction", "speedup_est"],
                     "per process (estimates; a process's speedup is its own cycles, OS time left out)")
    _finish(df, a, extra={"processes": procs, "timeline": tl}, checkpoint=ckpt)
    return 0


@_user_errors
def cmd_merge(a) -> int:
    rep = ex.merge(a.inputs, a.output, slice=a.slice, separate_cpus=not a.shared_cpus)
    h, s = rep["header"], rep["summary"]
    _cli().console.print(escape(f"wrote {a.output}: {s['accesses']:,} accesses of {h['processes']} processes "
                                f"({', '.join(h['process_names'])}) on {h['cpus']} cpus, per pid {s['per_pid']}"))
    return 0


@_user_errors
def cmd_report(a) -> int:
    from . import report
    out = a.output or os.path.join(a.results, "report.html")
    if not os.path.isdir(a.results):
        raise ValueError(f"{a.results}: not a directory of results")
    _cli().check_output(out, "html")
    report.build(a.results, out, title=a.title)
    _cli().console.print(escape(f"wrote {out}"))
    return 0


DS_COLUMNS = ["workload", "4KB %", "2MB %", "1GB %", "DS derived %", "DS linear %", "DS simulated %", "DS+2MB %", "f_DS %",
              "paper 4KB %", "paper 2MB %", "paper 1GB %", "paper f_DS %"]


def print_ds_tables(r, console) -> None:
    """Tables 4/5 beside the paper's, and the claims, as rich tables."""
    t = Table(title="Direct segments (ISCA'13 Tables 4/5): % of cycles in page walks, estimates; "
                    "paper columns measured by the authors")
    cols = [c for c in DS_COLUMNS if c in r.tables.columns]
    for c in cols:
        t.add_column(c, justify="left" if c == "workload" else "right")
    for rec in r.tables.to_dict(orient="records"):
        t.add_row(*["-" if rec.get(c) is None or rec.get(c) != rec.get(c) else
                    (rec[c] if isinstance(rec[c], str) else f"{rec[c]:.3f}") for c in cols])
    console.print(t)
    print_claims(r.checks(), console)


def print_claims(checks, console) -> None:
    """The paper's claims checked on a run, one PASS/FAIL row each (the
    ``study`` column when the claims come from several studies)."""
    from .studies import VERDICT

    c = Table(title="The paper's claims on this run")
    many = any("study" in x for x in checks)
    if many:
        c.add_column("study")
    for col in ("claim", "holds", "detail"):
        c.add_column(col)
    for x in checks:
        verdict = VERDICT[x["holds"]]
        c.add_row(*([escape(x["study"])] if many else []), escape(x["claim"]),
                  f"[red]{verdict}[/]" if x["holds"] is False else verdict, escape(x["detail"]))
    console.print(c)


#: Columns printed per Ingens study (all in the saved table).
INGENS_COLUMNS = {
    "bloat": ["config", "rss_bytes", "bloat", "speedup_est", "paper_rss_gb", "paper_kops"],
    "async": ["config", "run_time_est_s", "speedup_est", "huge_bytes_peak", "promotion_mb_per_s", "paper_run_s",
              "paper_huge_mb"],
    "fault-latency": ["config", "mean_fault_us", "latency_vs_base", "fallback_share", "paper_latency_us"],
    "fairness": ["config", "pid", "finish_seconds", "huge_bytes", "huge_share"],
    "fragmented": ["memory", "config", "speedup_est", "compactions", "fault_seconds", "huge_share", "paper_req_s"],
}


def _ingens_cell(col: str, v) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "-"
    if col.endswith("_bytes") or col in ("huge_bytes", "rss_bytes"):
        return f"{v / 2**20:,.0f} MiB"
    if col in ("huge_share", "fallback_share"):
        return f"{100 * v:.1f}%"
    if col in ("speedup_est", "bloat", "latency_vs_base"):
        return f"{v:.3f}x"
    if isinstance(v, float):
        return f"{v:,.3f}"
    return escape(str(v))


def print_ingens(r, console) -> None:
    """One table per Ingens study, then every claim as a PASS/FAIL row."""
    print_studies(r, console, INGENS_COLUMNS,
                  lambda name, m: f"Ingens {name} ({m['workload']}, {m['scale']} scale): estimates; "
                                  "paper_* columns measured by the authors")


def print_navarro(r, console) -> None:
    """One table per Navarro study, then every claim as a PASS/FAIL row."""
    from .navarro_study import COLUMNS

    print_studies(r, console, COLUMNS,
                  lambda name, m: f"Navarro {name} ({m['preset']}, {m['scale']} scale): estimates; "
                                  "paper_* columns measured by the authors")


def print_studies(r, console, columns, title) -> None:
    """One table per study of ``r`` (columns per study from ``columns``,
    title from ``title(name, meta)``; estimates, paper columns are the
    paper's measurements), then every claim as a PASS/FAIL row."""
    for name, s in r.studies.items():
        t = Table(title=title(name, s.meta))
        cols = [c for c in columns[name] if c in s.table.columns]
        for c in cols:
            t.add_column(c, justify="left" if c in ("config", "memory", "workload") else "right")
        for rec in s.table.to_dict(orient="records"):
            t.add_row(*[_ingens_cell(c, rec.get(c)) for c in cols])
        console.print(t)
    print_claims(r.checks(), console)


@_user_errors
def cmd_ingens(a) -> int:
    from . import ingens_study as ing

    studies = ing.check_args(a.studies or None, a.scale, a.preset)
    return _run_studies(a, ing, "ingens", studies, print_ingens,
                        lambda progress: ing.ingens_studies(studies, scale=a.scale, preset=a.preset, seed=a.seed,
                                                            traces=a.traces, progress=progress))


@_user_errors
def cmd_navarro(a) -> int:
    from . import navarro_study as nav

    studies = nav.check_args(a.studies or None, a.scale)
    return _run_studies(a, nav, "navarro", studies, print_navarro,
                        lambda progress: nav.navarro_studies(studies, scale=a.scale, seed=a.seed, traces=a.traces,
                                                             progress=progress))


def print_fhpm(r, console) -> None:
    """One table per FHPM study, then every claim as a PASS/FAIL row."""
    from .fhpm_study import COLUMNS

    print_studies(r, console, COLUMNS,
                  lambda name, m: f"FHPM {name} ({m['preset']}, {m['scale']} scale): estimates; "
                                  "paper_* columns measured by the authors")


@_user_errors
def cmd_fhpm(a) -> int:
    from . import fhpm_study as fh

    studies = fh.check_args(a.studies or None, a.scale)
    return _run_studies(a, fh, "fhpm", studies, print_fhpm,
                        lambda progress: fh.fhpm_studies(studies, scale=a.scale, seed=a.seed, traces=a.traces,
                                                         progress=progress))


def print_virt(r, console) -> None:
    """One table per virtualization study, then every claim as a PASS/FAIL row."""
    from .virt_study import COLUMNS

    print_studies(r, console, COLUMNS,
                  lambda name, m: f"Virtualization {name} ({m['preset']}, {m['scale']} scale): estimates; "
                                  + ("direct segments in a VM, host and guest base pages (ISCA'13 §3.3, extension)"
                                     if name == "ds-virt" else
                                     "configs hX/gY: host X, guest Y (B base pages, H huge pages)"))


@_user_errors
def cmd_virt(a) -> int:
    from . import virt_study as vs

    studies = vs.check_args(a.studies or None, a.scale)
    return _run_studies(a, vs, "virt", studies, print_virt,
                        lambda progress: vs.virt_studies(studies, scale=a.scale, seed=a.seed, traces=a.traces,
                                                         progress=progress))


def _study_args(p) -> None:
    """The options every paper-study command shares (``ingens``, ``navarro``)."""
    p.add_argument("--seed", type=_cli().seed_arg, default=1, help="seed of every workload (default 1)")
    p.add_argument("-o", "--out", default="results", help="results directory (default results)")
    _cli().json_option(p, "also write every study and claim to one JSON file")
    p.add_argument("--traces", default=None, help="keep the generated traces in this directory (default: temporary)")
    p.add_argument("--no-plots", action="store_true", help="do not write PNG figures")


def _run_studies(a, module, name: str, studies, printer, run) -> int:
    """A paper's studies from the CLI: every output checked before the first
    trace, a progress bar, the tables, then the files (and ``--json``)."""
    from ._io import emit_json, prepare_dir

    module.check_outputs(a.out, studies, plots=not a.no_plots)
    _cli().check_outputs([(a.json, "json")], [])
    if a.traces:
        prepare_dir(a.traces)
    with _progress(name) as bar:
        r = run((lambda step, done, total: bar(done, total)) if bar else None)
    with _cli().human_to_stderr(a.json):
        printer(r, _cli().console)
    paths = list(module.save(r, a.out, plots=not a.no_plots).values())
    if a.json:
        paths.append(emit_json(a.json, r.to_dict()))
    with _cli().human_to_stderr(a.json):
        _cli().console.print(escape("wrote " + ", ".join(paths)))
    return 0


@_user_errors
def cmd_ds_tables(a) -> int:
    from . import ds_tables as ds
    from ._io import prepare_dir

    names = _policies(a.workloads) if a.workloads else None
    sizes = None if a.gups_sizes is None else [s.strip() for s in a.gups_sizes.split(",") if s.strip()]
    # Every output is checked before the first trace is made.
    ds.check_outputs(a.out, plots=not a.no_plots)
    if a.traces:
        prepare_dir(a.traces)
    with _progress("ds-tables") as bar:
        r = ds.ds_tables(names, scale=a.scale, preset=a.preset, seed=a.seed, gups_sizes=sizes, traces=a.traces,
                         progress=(lambda step, done, total: bar(done, total)) if bar else None)
    print_ds_tables(r, _cli().console)
    paths = ds.save(r, a.out, plots=not a.no_plots)
    _cli().console.print(escape("wrote " + ", ".join(paths.values())))
    return 0


@_user_errors
def cmd_reproduce(a) -> int:
    from . import reproduce as rp
    from ._io import prepare_dir
    from .reproduce import render

    papers = rp.papers_arg(a.paper)
    seeds = rp.seeds_arg(a.seeds)
    # Every output is checked before the first trace is made.
    rp.check_outputs(a.out)
    if a.traces:
        prepare_dir(a.traces)
    with _backend(a), _progress(f"reproduce {a.paper}") as bar:
        r = rp.run(papers, scale=a.scale, seeds=seeds, traces=a.traces,
                   progress=(lambda step, done, total: bar(done, None)) if bar else None,
                   backend=a.backend, ray_address=a.ray_address)
    for t in render.rich_tables(r):
        _cli().console.print(t)
    paths = r.save(a.out)
    _cli().console.print(escape("wrote " + ", ".join(paths.values())))
    return 0


def _merge_parser(prog: str) -> argparse.ArgumentParser:
    p = _cli().Parser(prog=prog, description="Interleave traces into one multi-process trace "
                                "(round robin in fixed slices; input i becomes pid i).")
    _merge_args(p)
    return p


def _merge_args(p) -> None:
    p.add_argument("inputs", nargs="+", metavar="TRACE", help="two or more .hst traces")
    p.add_argument("-o", "--output", required=True, help="merged trace to write (.hst)")
    p.add_argument("--slice", type=units.int_arg("--slice", 1), default=65536,
                   help="accesses taken from one trace at a time (default 65536)")
    p.add_argument("--shared-cpus", action="store_true",
                   help="keep cpu ids (processes share cores) instead of giving each trace its own cpus")


def cmd_trace_merge(argv: List[str]) -> int:
    """Entry point for `hugescope trace merge ...` (argv after 'merge')."""
    return cmd_merge(_merge_parser("hugescope trace merge").parse_args(argv))


def add_commands(sub) -> None:
    """Add this module's subcommands to the CLI's subparsers."""
    c = sub.add_parser("curve", help="utility curves: speedup and PTW rate vs huge-page limit (PCC Fig. 5)")
    c.add_argument("trace")
    c.add_argument("--policies", default=",".join(ex.DEFAULT_CURVE_POLICIES), help="comma-separated policies")
    c.add_argument("--budgets", default=",".join(str(b) for b in ex.DEFAULT_BUDGETS),
                   help="huge-page limits in %% of the footprint (default 0,1,2,4,8,16,32,64,100)")
    c.add_argument("--frag-points", default="50,90", help="fragmentation levels (%%) for the Linux points ('' for none)")
    c.add_argument("--frag-policy", default=None, help="policy of the fragmentation points (default linux)")
    _add_common(c)
    c.set_defaults(func=cmd_curve)

    f = sub.add_parser("frag", help="speedup of policies on fragmented memory (PCC Fig. 7)")
    f.add_argument("trace")
    f.add_argument("--levels", default="50,90", help="%% of 2MB blocks holding an unmovable page (default 50,90)")
    f.add_argument("--policies", default=",".join(ex.DEFAULT_FRAG_POLICIES), help="comma-separated policies")
    f.add_argument("--frag-method", default="pcc", choices=["pcc", "ingens"], help="fragmentation method")
    _add_common(f)
    f.set_defaults(func=cmd_frag)

    s = sub.add_parser("sensitivity", help="PCC size sensitivity (PCC Fig. 6)")
    s.add_argument("trace")
    s.add_argument("--pcc-sizes", default="4..1024", help="PCC entries: '4..1024' (powers of two) or a comma list")
    s.add_argument("--budget", default="32", help="huge-page limit in %% of the footprint (default 32)")
    s.add_argument("--policy", default="pcc", help="policy to vary (default pcc)")
    s.add_argument("--param", default="entries", help="its parameter to vary (default entries: the pcc policy's PCC size)")
    _add_common(s, fragments=False)
    s.set_defaults(func=cmd_sensitivity)

    t = sub.add_parser("tlb-sizes", help="L2 TLB size sensitivity over a static page map, every size in one pass")
    t.add_argument("trace")
    t.add_argument("--entries", default=None,
                   help="L2 sizes: a comma list or 'A..B' (multiples of its sets; default 1,2,4,6,8,12,16 ways)")
    t.add_argument("--pages", default="4k", help="static page-size map: 4k, 2m, 1g, or a plan JSON file (default 4k)")
    t.add_argument("--structure", default=None, help="the L2 TLB to vary, e.g. l2.4k (default: the machine's only one)")
    _cli()._add_machine_args(t)
    t.add_argument("-o", "--out", default="results", help="results directory (default results)")
    t.add_argument("--no-plots", action="store_true", help="do not write PNG figures next to the results")
    t.set_defaults(func=cmd_tlb_sizes)

    r = sub.add_parser("reuse", help="page reuse distance at 4KB and 2MB, HUB classification (PCC Fig. 2)")
    r.add_argument("trace")
    r.add_argument("-o", "--out", default="results", help="results directory (default results)")
    r.add_argument("--threshold", type=units.float_arg("--threshold", positive=True), default=1024,
                   help="low reuse distance below this (default 1024)")
    r.add_argument("--average", default="ema", choices=["ema", "mean"], help="per-page average (default ema)")
    r.add_argument("--alpha", type=units.float_arg("--alpha", 0.0, 1.0), default=0.9,
                   help="EMA weight of the old value (default 0.9)")
    r.add_argument("--max-points", type=units.int_arg("--max-points", 0, ex.MAX_REUSE_POINTS), default=20000,
                   help=f"pages kept for the scatter plot (default 20000, at most {ex.MAX_REUSE_POINTS:,})")
    r.add_argument("--seed", type=_cli().seed_arg, default=1, help="seed of the scatter sampling")
    r.add_argument("--no-plots", action="store_true", help="do not write PNG figures")
    r.set_defaults(func=cmd_reuse)

    m = sub.add_parser("multi", help="multithread/multiprocess promotion policies over time (PCC Figs. 8-9)")
    m.add_argument("traces", nargs="+", metavar="TRACE", help="a multi-threaded or merged trace, or several traces to merge")
    m.add_argument("--policies", default=",".join(ex.DEFAULT_MULTI_POLICIES), help="comma-separated policies")
    m.add_argument("--budgets", default=",".join(str(b) for b in ex.DEFAULT_MULTI_BUDGETS),
                   help="huge-page limits in %% of the combined footprint")
    m.add_argument("--slice", type=units.int_arg("--slice", 1), default=None,
                   help="merge slice when several traces are given (default 65536)")
    m.add_argument("--shared-cpus", action="store_true", help="merged processes share cpus")
    _add_common(m, fragments=False)
    m.set_defaults(func=cmd_multi)

    g = sub.add_parser("merge", help="interleave traces into one multi-process trace (= 'trace merge')")
    _merge_args(g)
    g.set_defaults(func=cmd_merge)

    d = sub.add_parser("ds-tables", help="direct segments: the paper's Tables 4/5 and GUPS scaling (ISCA'13)")
    d.add_argument("--scale", default="ci", choices=["ci", "paper"],
                   help="ci: seconds, footprints up to 1GiB (default); paper: GUPS to 32GiB (its Fig. 5 sweep "
                        "included, addresses only) and the other workloads at docs/reproduction.md's sizes, minutes")
    d.add_argument("--workloads", default=None,
                   help="comma-separated subset of gups,graph500,npb-cg,memcached,mysql,npb-bt (default all)")
    d.add_argument("--preset", default="sandybridge-ds", help="machine preset (default sandybridge-ds, the paper's Table 1)")
    d.add_argument("--gups-sizes", default=None,
                   help="GUPS table sizes of the scaling sweep, comma-separated ('' skips it; default per scale)")
    d.add_argument("--traces", default=None, help="keep the generated traces in this directory (default: temporary)")
    d.add_argument("--seed", type=_cli().seed_arg, default=1, help="seed of every workload (default 1)")
    d.add_argument("-o", "--out", default="results", help="results directory (default results)")
    d.add_argument("--no-plots", action="store_true", help="do not write PNG figures")
    d.set_defaults(func=cmd_ds_tables)

    i = sub.add_parser("ingens", help="Ingens (OSDI'16): bloat, async promotion, fault latency, fairness, "
                                      "fragmented memory")
    i.add_argument("studies", nargs="*", metavar="STUDY",
                   help="bloat, async, fault-latency, fairness, fragmented (default all)")
    i.add_argument("--scale", default="ci",
                   help="ci: well under a minute for all five (default); paper: larger footprints, minutes")
    i.add_argument("--preset", default="haswell-pcc", help="machine preset (default haswell-pcc)")
    _study_args(i)
    i.set_defaults(func=cmd_ingens)

    nv = sub.add_parser("navarro", help="reservation-based superpages (OSDI'02): best case, one size vs all, "
                                        "write-back, sustained benefit, and today's mTHP")
    nv.add_argument("studies", nargs="*", metavar="STUDY",
                    help="best-case, sizes, preemption, writeback, sustained, mthp (default all)")
    nv.add_argument("--scale", default="ci",
                    help="ci: about half a minute for all five (default); paper: larger runs, minutes")
    _study_args(nv)
    nv.set_defaults(func=cmd_navarro)

    fh = sub.add_parser("fhpm", help="FHPM (virtualization): Table 4's access monitors, the hot-page-pressure "
                                     "policy against fixed thresholds (Fig 8), split/collapse VM exits (Table 6)")
    fh.add_argument("studies", nargs="*", metavar="STUDY", help="monitoring, hp-policy, split-collapse (default all)")
    fh.add_argument("--scale", default="ci", help="ci: about a minute for all (default); paper: larger runs, minutes")
    _study_args(fh)
    fh.set_defaults(func=cmd_fhpm)

    vt = sub.add_parser("virt", help="huge pages under virtualization (issue #13): nested walks for host/guest "
                                     "base and huge pages (Ingens Table 3); direct segments in a VM (ISCA'13 §3.3)")
    vt.add_argument("studies", nargs="*", metavar="STUDY", help="nested, ds-virt (default all)")
    vt.add_argument("--scale", default="ci",
                    help="tiny: seconds; ci: under a minute (default); paper: larger runs, minutes")
    _study_args(vt)
    vt.set_defaults(func=cmd_virt)

    from .reproduce import DEFAULT_SEEDS, PAPERS
    rr = sub.add_parser("reproduce", help="each quantitative result of a paper beside hugescope's, with a verdict "
                                          "computed by code (docs/reproduction.md)")
    rr.add_argument("paper", choices=[*PAPERS, "all"], help="the paper (virt: the virtualization section, Ingens Table 3 and direct segments in a VM), or all")
    rr.add_argument("--scale", default="ci", choices=["ci", "paper"],
                    help="ci: minutes on 2 cores (default); paper: the papers' footprints (rows say what that "
                         "still needs)")
    rr.add_argument("--seeds", type=units.int_arg("--seeds", 1, 64), default=DEFAULT_SEEDS,
                    help=f"workload seeds 1..N per seeded workload (default {DEFAULT_SEEDS}; a shape needs 3)")
    rr.add_argument("-o", "--out", default="results",
                    help="directory for reproduction.csv, .json and .html (default results)")
    rr.add_argument("--traces", default=None, help="keep the generated traces in this directory (default: temporary)")
    _backend_args(rr, "the PCC paper's sweeps (curve, fragmentation, PCC sizes)")
    rr.set_defaults(func=cmd_reproduce)

    rp = sub.add_parser("report", help="one self-contained HTML page from a results directory")
    rp.add_argument("results", help="results directory")
    rp.add_argument("-o", "--output", default=None, help="HTML file (default RESULTS/report.html)")
    rp.add_argument("--title", default=None, help="page title")
    rp.set_defaults(func=cmd_report)
