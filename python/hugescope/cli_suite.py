"""``hugescope validate --suite NAME`` / ``--workload SPEC ...``: the
validation suite on the command line (``validate_suite``)."""

from __future__ import annotations

import argparse
import os
from typing import List

from rich.markup import escape
from rich.table import Table

from . import linux


def parser() -> argparse.ArgumentParser:
    from . import validate_suite as vs
    from .cli_linux import _count_arg, _seconds_arg, _seed

    from .cli import Parser

    # The CLI's parser: a bad option is one error line, as everywhere else.
    p = Parser(
        prog="hugescope validate", formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="hugescope validate (--suite NAME | --workload NAME[:k=v,...] ...) [options] -o DIR",
        description="Predicted vs measured speedup of plans over a suite of workloads: per workload, base, top-k "
                    "regions by each policy at k = fractions of its regions, and all huge; measured in interleaved "
                    "rounds (base, plans, base) pinned to one CPU, the noise floor from the two base runs of each "
                    "round; the cost model fitted leaving each workload out (LOO) and on all (in-sample). "
                    f"Suites: {', '.join(f'{k} ({len(v)} workloads)' for k, v in vs.SUITES.items())}.")
    p.add_argument("--suite", choices=sorted(vs.SUITES), default=None, help="a named suite")
    p.add_argument("--workload", action="append", default=[], metavar="NAME[:k=v,...]",
                   help="a workload and its parameters (repeatable; added to the suite's)")
    p.add_argument("--fractions", default=",".join(f"{f:g}" for f in vs.DEFAULT_FRACTIONS),
                   help="k as fractions of each workload's 2 MiB regions (default 1/8,1/4,1/2 as decimals)")
    p.add_argument("--policies", default=",".join(vs.DEFAULT_POLICIES), help="policies that rank the regions")
    p.add_argument("--rounds", type=_count_arg("rounds", 1, linux.RUNS_MAX), default=vs.DEFAULT_ROUNDS,
                   help=f"interleaved rounds (default {vs.DEFAULT_ROUNDS})")
    measure_options(p)
    p.add_argument("--warmup", type=_count_arg("warm-up runs", 0, linux.RUNS_MAX), default=1,
                   help="unmeasured base runs before each workload's rounds (default 1)")
    p.add_argument("--cpu", type=_count_arg("cpu", 0, 1 << 20), default=None,
                   help="pin every run here (default: the least busy CPU, chosen once)")
    p.add_argument("--rank-seed", type=_seed, default=1, help="seed of the rankings' simulations (default 1)")
    p.add_argument("--duration", type=_seconds_arg(positive=True), default=60.0,
                   help="virtual seconds each trace spans for the simulated policies (default 60)")
    p.add_argument("--preset", default=None, help="machine preset of the simulations, or 'calibrated'")
    p.add_argument("--config", metavar="TOML", default=None, help="machine TOML")
    p.add_argument("--trace-dir", metavar="DIR", default=None, help="keep the traces here (default: temporary)")
    p.add_argument("-o", "--out", metavar="DIR", required=True, help="results directory (for 'hugescope report')")
    return p


def _floats(text: str, what: str) -> List[float]:
    out = []
    for s in filter(None, (x.strip() for x in text.split(","))):
        try:
            out.append(float(s))
        except ValueError:
            raise ValueError(f"{what}: '{s}' is not a number") from None
    return out


def render(df) -> None:
    from .cli import console

    meta = df.attrs["meta"]
    opts = meta["options"]
    t = Table(title=f"predicted (estimate, cost model) vs measured speedup, median (min..max) of {opts['rounds']} "
                    f"interleaved round(s); * = within the noise floor (tie with base, not ranked)")
    for c in ("workload", "plan", "regions", "measured", "min..max", "LOO (estimate)", "in-sample (estimate)"):
        t.add_column(c, justify="left" if c in ("workload", "plan") else "right")
    q = {k: g.set_index(["workload", "plan"]) for k, g in df.groupby("quantity")}
    for (w, plan), m in q["measured"].iterrows():
        if plan == "base":
            continue
        mark = "" if m["ranked"] else " *"
        loo, ins = q["predicted_loo"].loc[(w, plan), "speedup"], q["predicted_in"].loc[(w, plan), "speedup"]
        t.add_row(escape(str(w)), escape(str(plan)), str(m["regions"]), f"{m['speedup']:.3f}x{mark}",
                  f"{m['speedup_min']:.3f}..{m['speedup_max']:.3f}", f"{loo:.3f}x", f"{ins:.3f}x")
    console.print(t)
    w = Table(title="per workload (Spearman and median abs error over the ranked plans)")
    for c in ("workload", "plans", "ranked", "noise floor", "Spearman LOO", "Spearman in", "MAE LOO", "MAE in"):
        w.add_column(c, justify="left" if c == "workload" else "right")

    def f(v, pct=False):
        return "-" if v is None or v != v else (f"{100 * v:.1f}%" if pct else f"{v:.3f}")
    for r in df.attrs["tables"]["workloads"]:
        w.add_row(escape(r["workload"]), str(r["plans"]), str(r["ranked"]), f"{r['floor_pct']:.1f}%",
                  f(r["spearman_loo"]), f(r["spearman_in"]), f(r["mae_loo"], True), f(r["mae_in"], True))
    console.print(w)
    for key, what in (("loo", "leave-one-workload-out"), ("in_sample", "in-sample")):
        s = meta["summary"][key]
        console.print(f"{what}: {s['ranked']} of {s['plans']} plans above the noise floor ({s['distinct']} distinct "
                      f"after ties); Spearman "
                      f"{f(s['spearman'])}; median abs error {f(s['median_abs_error'], True)} (ranked), "
                      f"{f(s['median_abs_error_all'], True)} (all plans)")


def measure_options(p) -> None:
    """--clock and --nice of the commands that time workload runs in
    interleaved rounds (validate --suite, model fit)."""
    from . import validate_suite as vs
    from .cli_linux import _count_arg

    p.add_argument("--clock", choices=list(vs.PHASE_CLOCKS), default="wall",
                   help="each run's measured time: 'wall' (default) or 'cpu', the workload thread's CPU time over "
                        "its algorithm phase (time preempted by other programs or stolen by the host is not in it: "
                        "the choice on a shared machine or a VM)")
    p.add_argument("--nice", type=_count_arg("--nice", -20, 19), default=None,
                   help="nice value of each measured run, -20..19 (below 0 as root: co-running programs then get "
                        "little of its CPU; it ends with the run); default: this process's")


def main(rest: List[str]) -> int:
    from . import validate_suite as vs
    from .cli import console, err_console

    a = parser().parse_args(rest)
    df = vs.suite(a.suite, a.workload, fractions=_floats(a.fractions, "fractions"),
                  policies=[s for s in a.policies.split(",")], rounds=a.rounds, warmup=a.warmup, seed=a.rank_seed,
                  preset=a.preset, config=a.config, duration=a.duration, cpu=a.cpu, trace_dir=a.trace_dir,
                  out=a.out, log=lambda s: err_console.print(f"[dim]{escape(s)}[/]"), clock=a.clock, nice=a.nice)
    render(df)
    console.print(f"estimates on {escape(df.attrs['meta'].get('machine_label') or '?')}")
    console.print(f"wrote {escape(os.path.join(a.out, vs.NAME))}.{{csv,json,png}} and -workloads/-runs tables "
                  f"('hugescope report {escape(a.out)}' renders them)")
    return 0
