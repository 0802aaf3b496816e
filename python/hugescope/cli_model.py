"""``hugescope model fit|predict``: a per-program runtime model fitted to
measured page mosaics (``mosaic``; issue #36)."""

from __future__ import annotations

import os

from rich.markup import escape
from rich.table import Table

from . import linux
from .cli_linux import ESTIMATE_PRESET_HELP


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:+.1f}%"


def cmd_fit(a) -> int:
    from . import mosaic
    from .cli import CliError, console, err_console
    from .cli_suite import _floats

    if not a.workload and a.suite is None:
        raise CliError("model fit: give a workload (NAME[:k=v,...]) or --suite NAME")
    got = mosaic.fit_many(a.suite, a.workload, a.out, layouts=a.layouts, rounds=a.rounds, warmup=a.warmup,
                          policies=[s for s in a.policies.split(",") if s.strip()],
                          fractions=_floats(a.fractions, "fractions"), seed=a.seed, preset=a.preset,
                          config=a.config, duration=a.duration, cpu=a.cpu, clock=a.clock, nice=a.nice,
                          log=lambda s: err_console.print(f"[dim]{escape(s)}[/]"))
    for rec in got["records"]:
        _render_fit(rec, console)
    if len(got["records"]) > 1:
        _render_summary(got["summary"], console)
        console.print(f"wrote {escape(os.path.join(a.out, 'summary.json'))} and one directory per workload")
    else:
        files = mosaic.outputs(a.out)
        console.print(f"wrote {escape(files['model'])}, {escape(files['held_out'])}, {escape(files['plot'])} "
                      f"and the trace {escape(files['trace'])} ('hugescope model predict' reads it)")
    return 0


def _render_fit(rec, console) -> None:
    t = Table(title=f"{escape(rec['workload'])}: measured time per layout (median of {rec['rounds']} interleaved "
                    "round(s)) and the held-out prediction (estimate: model fitted without that layout)")
    for c in ("layout", "regions", "measured s", "speedup", "predicted s", "error"):
        t.add_column(c, justify="left" if c == "layout" else "right")
    for p in rec["points"]:
        t.add_row(escape(p["plan"]), str(p["regions"]), f"{p['t']:.4f}", f"{p['speedup']:.3f}x",
                  f"{p['predicted_s']:.4f}", _pct(p["error"]))
    console.print(t)
    ho, m = rec["held_out"], rec["model"]
    coef = ", ".join(f"{f} {c * 1e9:.3g} ns" for f, c in m["coefficients"].items())
    console.print(f"counters simulated on {escape(rec['machine'])}")
    console.print(f"model ({m['parameters']} parameters, estimate): t0 {m['t0']:.4f} s, {coef} per event")
    rho = ho["spearman"]
    console.print(f"held-out (K={rec['layouts']}): max |error| {100 * ho['max_abs_error']:.1f}%, median "
                  f"{100 * ho['median_abs_error']:.1f}%, Spearman {'-' if rho is None else f'{rho:.3f}'}; noise floor "
                  f"{100 * rec['noise_floor']:.1f}%; bound {100 * rec['bound']:.1f}% "
                  f"({'met' if rec['within_bound'] else 'missed'})")


def cmd_predict(a) -> int:
    from . import mosaic
    from ._io import check_output, emit_json
    from .cli import CliError, console, err_console, human_to_stderr

    try:
        ks = [int(s) for s in a.ks.split(",") if s.strip()]
    except ValueError:
        raise CliError(f"--ks: '{a.ks}' must be comma-separated numbers of 2 MiB regions") from None
    if a.json:
        check_output(a.json, "json", [a.model])
    rec = mosaic.load(a.model)
    with human_to_stderr(a.json):
        rows = mosaic.predict_plans(rec, [s for s in a.policies.split(",") if s.strip()], ks,
                                    log=lambda s: err_console.print(f"[dim]{escape(s)}[/]"))
        err = rec["held_out"]["max_abs_error"]
        if a.json:
            emit_json(a.json, {"hugescope_experiment": "model-predict", "kind": "estimate", "model": a.model,
                               "workload": rec["workload"], "held_out_max_abs_error": err, "rows": rows},
                      inputs=[a.model])
        t = Table(title=f"{escape(rec['workload'])}: predicted time and speedup over base pages (estimates of the "
                        f"model; bar = the held-out max error, {100 * err:.1f}%)")
        for c in ("plan", "regions", "predicted s", "range", "speedup"):
            t.add_column(c, justify="left" if c == "plan" else "right")
        for r in rows:
            t.add_row(escape(r["plan"]), str(r["regions"]), f"{r['predicted_s']:.4f}",
                      f"{r['predicted_s_low']:.4f}..{r['predicted_s_high']:.4f}",
                      "-" if r["speedup"] is None else f"{r['speedup']:.3f}x")
        console.print(t)
    return 0


def cmd_summary(a) -> int:
    from . import mosaic
    from ._io import check_output, emit_json
    from .cli import console, human_to_stderr

    paths = [os.path.join(p, "model.json") if os.path.isdir(p) else p for p in a.models]
    if a.json:
        check_output(a.json, "json", paths)
    s = mosaic.summary([mosaic.load(p) for p in paths])
    with human_to_stderr(a.json):
        if a.json:
            emit_json(a.json, dict(s, hugescope_experiment="model-summary", models=paths), inputs=paths)
        _render_summary(s, console)
    return 0


def _render_summary(s, console) -> None:
    t = Table(title="per-workload models: held-out errors (leave-one-layout-out) against their bounds (max: 3% or "
                    "the noise floor, the larger; median: 1% or the floor)")
    for c in ("workload", "K", "noise floor", "max |error|", "bound", "median |error|", "median bound", "Spearman"):
        t.add_column(c, justify="left" if c == "workload" else "right")
    for r in s["rows"]:
        over = lambda ok: "" if ok else " (over)"
        rho = "-" if r["spearman"] is None else f"{r['spearman']:.3f}"
        t.add_row(escape(r["workload"]), str(r["layouts"]), f"{r['noise_floor']:.1%}",
                  f"{r['max_abs_error']:.1%}{over(r['within_bound'])}", f"{r['bound']:.1%}",
                  f"{r['median_abs_error']:.1%}{over(r['median_within_bound'])}", f"{r['median_bound']:.1%}", rho)
    console.print(t)
    rho = s["pooled_spearman"]
    console.print(f"pooled: Spearman {'-' if rho is None else f'{rho:.3f}'} over {s['pooled_plans']} layouts "
                  "above their noise floor")


def add_commands(sub) -> None:
    from . import mosaic, validate_suite as vs
    from .cli import json_option
    from .cli_linux import _count_arg, _seconds_arg, _seed
    from .cli_suite import measure_options

    p = sub.add_parser("model", help="a per-program runtime model fitted to measured page mosaics: 'fit', "
                                     "'predict' or 'summary'",
                       description="Fit a runtime model of one workload to K measured layouts (mixes of 4 KiB and "
                                   "2 MiB pages over its regions), each priced by its simulated counters, and "
                                   "predict other plans with the held-out error as the bar. See docs/cli.md.")
    ms = p.add_subparsers(dest="model_cmd", metavar="{fit,predict,summary}")
    ms.required = True
    f = ms.add_parser("fit", help="measure K layouts of a workload and fit the model",
                      description=f"Form: {mosaic.FORM}. Held-out: {mosaic.HOW_HELD_OUT}.")
    f.add_argument("workload", metavar="NAME[:k=v,...]", nargs="*", default=[],
                   help="built-in workloads and their parameters (several: one directory each under --out)")
    f.add_argument("--suite", default=None, choices=sorted(vs.SUITES),
                   help="every workload of a validation suite too (default: none)")
    f.add_argument("--layouts", "-K", type=_count_arg("layouts", mosaic.MIN_LAYOUTS, mosaic.MAX_LAYOUTS),
                   default=mosaic.DEFAULT_LAYOUTS,
                   help=f"layouts to measure (default {mosaic.DEFAULT_LAYOUTS}; base and all huge among them)")
    f.add_argument("--rounds", type=_count_arg("rounds", 1, linux.RUNS_MAX), default=3,
                   help="interleaved rounds (default 3)")
    f.add_argument("--warmup", type=_count_arg("warm-up runs", 0, linux.RUNS_MAX), default=1,
                   help="unmeasured base runs first (default 1)")
    measure_options(f)
    f.add_argument("--policies", default=",".join(vs.DEFAULT_POLICIES), help="policies whose choices are layouts")
    f.add_argument("--fractions", default=",".join(f"{x:g}" for x in vs.DEFAULT_FRACTIONS),
                   help="the policies' budgets as fractions of the regions")
    f.add_argument("--seed", type=_seed, default=1, help="seed of the random layouts and the rankings (default 1)")
    f.add_argument("--duration", type=_seconds_arg(positive=True), default=60.0,
                   help="virtual seconds the trace spans for the simulated policies (default 60)")
    f.add_argument("--cpu", type=_count_arg("cpu", 0, 1 << 20), default=None,
                   help="pin every run here (default: the least busy CPU)")
    f.add_argument("--preset", default=None, help=ESTIMATE_PRESET_HELP)
    f.add_argument("--config", metavar="TOML", default=None, help="machine TOML")
    f.add_argument("-o", "--out", metavar="DIR", required=True,
                   help="writes model.json, held-out.csv, predicted-vs-measured.png and trace.hst here")
    f.set_defaults(func=cmd_fit)
    q = ms.add_parser("predict", help="predict policy x budget plans from a fitted model",
                      description="Simulate each policy's top-k choice over the model's trace and price it with the "
                                  "model: predicted time and speedup over base (estimates), with the held-out max "
                                  "error as the bar.")
    q.add_argument("model", help="model.json written by 'hugescope model fit'")
    q.add_argument("--policies", default="pcc,oracle,hawkeye", help="policies (default pcc,oracle,hawkeye)")
    q.add_argument("--ks", default="1,4,16", help="budgets in 2 MiB regions (default 1,4,16)")
    json_option(q, "write the predictions to this JSON file")
    q.set_defaults(func=cmd_predict)
    sm = ms.add_parser("summary", help="the held-out table of several fitted models and the pooled Spearman",
                       description="Per model: K, noise floor, held-out max and median |error| against the bound, "
                                   "Spearman; pooled: Spearman of predicted against measured speedup over every "
                                   "layout above its noise floor.")
    sm.add_argument("models", nargs="+", help="model.json files or the directories 'model fit' wrote")
    json_option(sm, "write the table to this JSON file")
    sm.set_defaults(func=cmd_summary)
