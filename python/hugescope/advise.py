"""``hugescope advise``: from a program to a plan to a measured speedup (issue
#14, section 2; the performance engineer's path).

1. **Trace** the program (built with ``hugescope cc``; ASLR off, so the
   addresses hold in later runs of the same binary and environment), or
   reuse a trace of it (``trace=``); the trace is deleted at the end unless
   kept (``keep_trace``).
2. **Simulate** the policies (default pcc, hawkeye, oracle, linux) at a few
   budgets (default 1%, 4%, 16%, 64% and 100% of the program's collapsible
   footprint, as k 2 MiB pages; or k given), each a budgeted run of the OS model
   (``validate.rankings``), and estimate each plan's speedup with the cost
   model: cycles of a static 4 KiB map over cycles of the plan's static map.
3. **Print** every traced region's accesses, walks and share of walk cycles
   in the base-page run (``api.region_profile``: the same pass as the
   estimates' base run), the regions worth promoting (the best plan's, with
   the traced region each lies in) and **write** that plan.
4. **Measure** the user's plain build (``hugescope cc`` writes ``PROG.plain``
   beside the instrumented ``PROG``; or ``plain=``): warm-up base runs give
   the whole run's base time, and one run with every anonymous mapping
   collapsed gives the seconds per 2 MiB collapse (``collapse_rate``).
   Each plan's **whole-run** estimate follows (``whole_run``: only the
   simulated phase speeds up, every collapse is paid), and the **recommended** budget is the smallest whose whole-run
   estimate is within ``tolerance`` of the best (``recommend``), not the
   largest. Then interleaved rounds (base, plan, base; ``noise.interleaved``)
   measure it, each run with the machine's load; the base pairs give the
   noise floor, and a measured gain within it is "within noise".

Everything heavy is done by the modules it calls; this one chooses and reports.

    from hugescope import advise
    r = advise.advise(["./prog", "arg"], out="advise-out")   # budgets 1% ... 100%
    r["rows"]   # policy, budget, k, regions, estimate, whole_run, chosen, fewer_because
    r["measured"]  # median, min, max, noise_floor, verdict; r["runs"]: every run with its load
    r["regions"]  # name, base, len, kind, pid, accesses, walks, walk_refs, walk_cycles, walk_cycle_share (+ site)
"""

from __future__ import annotations

import math
import os
import shutil
import statistics
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ._core import HugescopeError
from ._io import check_output, write_json

HUGE = 2 << 20
DEFAULT_POLICIES = ["pcc", "hawkeye", "oracle", "linux"]
#: Default budgets: shares of the program's collapsible footprint (issue
#: #38: 1, 2, 4 pages covered at most 8 MiB of 176-672 MiB programs).
DEFAULT_BUDGETS = ["1%", "4%", "16%", "64%", "100%"]
#: The recommended budget: the smallest whose whole-run estimate is within
#: this of the best (in log terms). A larger budget must buy more than this
#: share of the run to be worth holding its extra 2 MiB blocks: the memory's
#: charge (docs/assumptions.md, "advise").
RECOMMEND_TOLERANCE = 0.01
#: Names of the measured runs (``noise.interleaved``'s order: base, plan,
#: base; and the run that measures the collapse rate).
BASE, PLAN, ALL = "base", "plan", "all (collapse rate)"
# Region kinds MADV_COLLAPSE can make huge in a program: private anonymous
# memory. File-backed kinds (code, data, file) are page cache, out of reach.
COLLAPSIBLE_KINDS = ("anon", "heap", "bss", "stack")


def candidates(header: Dict[str, Any]) -> List[int]:
    """2 MiB regions wholly inside the trace's collapsible regions, ascending."""
    from .validate import candidate_regions

    regions = [r for r in header.get("regions", []) if r.get("kind", "anon") in COLLAPSIBLE_KINDS]
    return candidate_regions({"regions": regions})


def region_at(header: Dict[str, Any], addr: int) -> Optional[Dict[str, Any]]:
    """The traced region holding ``addr`` (the first in header order)."""
    for r in header.get("regions", []):
        if int(r["base"]) <= addr < int(r["base"]) + int(r["len"]):
            return r
    return None


def promoted_entry(header: Dict[str, Any], addr: int, profile_rows: List[Dict[str, Any]]) -> Dict[str, Any]:
    """A promoted 2 MiB page at ``addr`` for the record: its start, the
    traced region holding it, and that whole region's accesses and walks in
    the base-page run (``region_accesses``, ``region_walks``)."""
    r = region_at(header, addr)
    out: Dict[str, Any] = {"start": f"{addr:#x}", "region": "?" if r is None else r["name"]}
    key = None if r is None else (int(r.get("pid", 0)), int(r["base"]), int(r["len"]), r["name"])
    row = next((x for x in profile_rows if (x["pid"], x["base"], x["len"], x["name"]) == key), None)
    if row is not None:
        out.update(region_accesses=row["accesses"], region_walks=row["walks"])
    return out


def estimate(trace: str, regions: Sequence[int], base_cycles: float, machine: Dict[str, Any], tmpdir: str) -> float:
    """Estimated speedup of promoting ``regions``: cost-model cycles of the
    base-page map over those of the plan's static map, same trace."""
    from . import api
    from .validate import make_plan

    path = os.path.join(tmpdir, f"plan-{len(os.listdir(tmpdir))}.json")
    write_json(path, make_plan(regions))
    return base_cycles / api.simulate(trace, pages=path, **machine)["cost"]["total_cycles"]


def parse_budget(text: str) -> float:
    """A budget share: ``4%`` or ``0.04`` -> 0.04, in (0, 1]."""
    t = str(text).strip()
    try:
        x = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise ValueError(f"--budgets: '{text}' is not a share of the footprint (e.g. 4% or 0.04)") from None
    if not 0 < x <= 1:
        raise ValueError(f"--budgets: '{text}' must be above 0 and at most 100%")
    return x


def budget_pages(shares: Sequence[str], footprint: int) -> Dict[int, List[str]]:
    """k (2 MiB pages) for each budget share of ``footprint`` bytes, at least
    one page, rounded down: {k: [the shares that give it]}, ascending."""
    out: Dict[int, List[str]] = {}
    for b in shares:
        k = max(1, int(parse_budget(b) * footprint) // HUGE)
        out.setdefault(k, []).append(str(b).strip())
    return dict(sorted(out.items()))


def shortfall(policy: str, k: int, chosen: int, n_candidates: int, promoted: Optional[Dict[str, int]],
              duration: float) -> str:
    """Why a row holds fewer than ``k`` regions, in words ('' when it holds k)."""
    if chosen >= k:
        return ""
    parts = []
    if promoted is not None and chosen < min(k, n_candidates):
        why = (f"{policy} promoted {promoted['all']} regions in the simulated run ({duration:g} virtual s), "
               "below the budget: its own promotion rule stopped it, not the budget")
        if promoted["all"] > promoted["collapsible"]:
            why += (f"; {promoted['all'] - promoted['collapsible']} of them lie outside the regions MADV_COLLAPSE "
                    "can make huge")
        parts.append(why)
    if n_candidates < k:
        parts.append(f"the program has only {n_candidates} whole 2 MiB regions that can be collapsed")
    return "; ".join(parts)


def whole_run(speedup: float, t_sim: float, t_base: float, regions: int, s_per_region: float) -> Dict[str, float]:
    """The whole-run estimate of a plan (docs/assumptions.md, "advise"): the
    plan speeds up only the simulated phase, by ``speedup`` (the cost
    model's, over the trace), and every collapse is paid on top.

    ``t_sim``: seconds of the simulated phase under base pages (the cost
    model's cycles at the machine's clock); ``t_base``: the measured whole
    run under base pages. The phase is at most the run: T_in = min(t_sim,
    t_base), the rest (set-up, libc, I/O, whatever the trace does not see)
    unchanged. T_plan = t_base - T_in x (1 - 1/speedup) + regions x
    s_per_region; the estimate is t_base / T_plan."""
    if not (t_base > 0 and speedup > 0 and t_sim >= 0 and s_per_region >= 0 and regions >= 0):
        raise ValueError(f"whole_run: bad inputs (speedup {speedup!r}, t_sim {t_sim!r}, t_base {t_base!r}, "
                         f"regions {regions!r}, s_per_region {s_per_region!r})")
    t_in = min(t_sim, t_base)
    saved = t_in * (1 - 1 / speedup)
    collapse = regions * s_per_region
    return {"speedup": t_base / (t_base - saved + collapse), "saved_s": saved, "collapse_s": collapse,
            "phase_share": t_in / t_base}


def collapse_rate(every: Dict[str, Any], probe: Callable[[], Dict[str, Any]]) -> Dict[str, Any]:
    """Seconds per 2 MiB collapse, from ``every``: a run of the measured
    program with every anonymous mapping collapsed as it is populated
    (``collapse_s``, hugescope's time in process_madvise, over the regions
    its ``outcomes`` collapsed). When it collapsed nothing, ``probe()``
    (``collapse_cost.probe``: hugescope's own memory). Same keys as the
    probe's: ``s_per_region``, ``measured``, ``regions``, ``how``."""
    n = sum(int(o.get("regions_collapsed") or 0) for o in every.get("outcomes", []))
    if n > 0 and every.get("collapse_s", 0) > 0:
        return {"s_per_region": every["collapse_s"] / n, "measured": True, "regions": n,
                "how": f"measured: hugescope's time in process_madvise(MADV_COLLAPSE) / the {n} 2 MiB regions it "
                       "collapsed, in one run of the measured build with every anonymous mapping collapsed as it "
                       "was populated (run 'all (collapse rate)')"}
    out = dict(probe())
    out["how"] += "; the run with every anonymous mapping collapsed collapsed none"
    return out


def recommend(rows: Sequence[Dict[str, Any]], policies: Sequence[str], tolerance: float = RECOMMEND_TOLERANCE
              ) -> Dict[str, Any]:
    """The recommended row of ``rows`` (each with ``policy``, ``k``,
    ``regions`` (how many) and ``whole`` = its whole-run estimate): the best
    policy at each budget (highest estimate; on a tie the first in
    ``policies``), then the smallest budget whose estimate is within
    ``tolerance`` (log terms) of the best budget's. When no row's estimate is
    above 1 (no plan pays for its collapses), the smallest budget's best row:
    it costs the least. A row promoting nothing is no advice: it is left out
    unless every row is empty."""
    if not rows:
        raise ValueError("recommend: no rows")
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be in [0, 1), got {tolerance!r}")
    rows = [r for r in rows if r["regions"] > 0] or list(rows)
    order = list(policies)
    best_at: Dict[int, Dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: (r["k"], -r["whole"], order.index(r["policy"]))):
        best_at.setdefault(r["k"], r)
    top = max(r["whole"] for r in best_at.values())
    if top <= 1.0:
        return best_at[min(best_at)]
    floor = math.log(top) - tolerance
    return next(best_at[k] for k in sorted(best_at) if math.log(best_at[k]["whole"]) >= floor)


def measured_build(argv: Sequence[str], plain: Optional[str] = None, instrumented: bool = False
                   ) -> Tuple[List[str], str]:
    """The command advise measures and, in words, which build it is: the
    plain build given with ``plain``; else ``PROG.plain`` when ``PROG`` is an
    instrumented build (``hugescope cc`` writes both); the instrumented build
    itself only when ``instrumented`` asks for it; a program holding no
    tracing runtime as given. An instrumented build without a plain one is
    refused (measuring it would time the hooks, up to 2.5x native)."""
    from . import tracing

    argv = list(argv)
    if plain is not None and instrumented:
        raise ValueError("--plain names the build to measure and --measure-instrumented measures the traced one: "
                         "give one")
    prog = argv[0]
    path = shutil.which(prog) if os.sep not in prog else prog
    if path is None or not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise HugescopeError(f"program '{prog}': not found or not executable")
    if plain is not None:
        plain = os.fspath(plain)
        if not (os.path.isfile(plain) and os.access(plain, os.X_OK)):
            raise HugescopeError(f"--plain {plain}: not an executable file")
        if tracing.is_instrumented(plain):
            raise HugescopeError(f"--plain {plain} holds hugescope's tracing runtime: give the build made "
                                 "without 'hugescope cc'")
        return [plain, *argv[1:]], f"the plain build {plain} (--plain)"
    if instrumented:
        return argv, f"the instrumented build {prog} (--measure-instrumented; its hooks make it slower than native)"
    if not tracing.is_instrumented(path):
        return argv, f"{prog} as given (it holds no tracing runtime)"
    cand = tracing.plain_path(path)
    if not (os.path.isfile(cand) and os.access(cand, os.X_OK)):
        raise HugescopeError(f"advise: {prog} is instrumented ('hugescope cc') and has no plain build {cand} "
                             "('hugescope cc' writes one when it links from sources); give --plain BINARY, the "
                             "program built without hugescope, or --measure-instrumented")
    if os.path.getmtime(cand) < os.path.getmtime(path):
        raise HugescopeError(f"advise: the plain build {cand} is older than {prog}: rebuild both with 'hugescope cc' "
                             "or give --plain BINARY")
    return [cand, *argv[1:]], f"the plain build {cand} ('hugescope cc' wrote it beside {prog})"


def advise(argv: Sequence[str], out: str, ks: Optional[Sequence[int]] = None,
           policies: Sequence[str] = DEFAULT_POLICIES, budgets: Optional[Sequence[str]] = None,
           repeat: int = 3, warmup: int = 1, duration: float = 60.0, timeout: Optional[float] = None,
           preset: Optional[str] = None, config: Optional[str] = None, trace: Optional[str] = None,
           keep_trace: bool = False, log: Callable[[str], None] = lambda s: None,
           progress: Optional[Callable[[str, int, Optional[int]], None]] = None,
           by_site: bool = False, plain: Optional[str] = None, measure_instrumented: bool = False,
           tolerance: float = RECOMMEND_TOLERANCE, fit: Optional[int] = None, clock: str = "wall") -> Dict[str, Any]:
    """Trace, simulate, choose, measure (module docstring). Writes
    ``OUT/plan.json`` (the best plan) and ``OUT/advise.json`` (every row), and
    returns that record. ``preset`` and ``config`` choose the machine of the
    estimates as everywhere (``config`` may be a file written by ``hugescope
    calibrate --out FILE``); the record's ``machine`` and the plan header's
    estimate name it.

    The stages: **trace** (skipped with ``trace=FILE``, a trace of the same
    program and arguments made earlier, e.g. kept by ``keep_trace``),
    **simulate** (every policy and budget, then the estimates) and
    **measure** (base pages, then the plan). The trace this call makes goes
    to ``OUT/trace.hst`` and is deleted at the end unless ``keep_trace`` (a
    trace is hundreds of MB to GBs); a trace given with ``trace`` is never
    deleted. ``progress(stage, done, total)`` is called as each stage goes
    (``total`` None while unknown); ``record["stages_s"]`` holds each stage's
    wall time. ``by_site`` writes the plan's entries that cover whole
    allocations by allocation site (``Plan::by_site``), so it applies to the
    program re-linked with another layout (the runs measure the same plan
    by address: a plain build reports no allocation sites).

    The runs measure the plain build (``measured_build``: ``plain``, else
    ``PROG.plain``; ``measure_instrumented`` the traced build instead):
    ``max(1, warmup)`` base runs first (their median is the whole run's base
    time of the estimates), one with every anonymous mapping collapsed (the
    collapse rate), then ``repeat`` interleaved rounds of base, plan,
    base. ``tolerance`` sets the recommended budget (``recommend``).

    ``fit=K`` measures K layouts of the program first (``mosaic``: base, all
    huge, the policies' choices, random subsets; interleaved rounds) and
    fits its own runtime model to them; that model, not the cost model,
    then prices every plan and picks the budget, with its held-out error
    as the bar. Writes ``OUT/model.json``, ``OUT/held-out.csv`` and
    ``OUT/predicted-vs-measured.png`` too.

    ``clock``: what a run's time is (``noise.CLOCKS``): ``wall``, spawn to
    wait4 with the plan's collapses in it; ``cpu``, the program's own CPU
    time (user + system of all its threads, from wait4), which leaves out
    time preempted or stolen by the host, and the collapses too (hugescope's
    process makes them): the whole-run estimate then charges none."""
    from . import calibrate
    from .validate_suite import check_policies

    argv = [os.fspath(a) for a in argv]
    if not argv:
        raise ValueError("advise: give the program after '--'")
    if ks is not None and budgets is not None:
        raise ValueError("--ks gives budgets in 2 MiB pages and --budgets as shares of the footprint: give one")
    if ks is not None:
        ks = sorted(set(ks))
        if not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
            raise ValueError(f"--ks: {ks!r} must be positive numbers of 2 MiB pages")
    else:
        budgets = list(budgets if budgets is not None else DEFAULT_BUDGETS)
        if not budgets:
            raise ValueError("--budgets: give at least one share")
        for b in budgets:
            parse_budget(b)
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 <= tolerance < 1:
        raise ValueError(f"--tolerance: {tolerance!r} must be a share in [0, 1) (e.g. 0.01 for 1%)")
    policies = check_policies(policies, "--policies")
    if trace is not None:
        trace = os.fspath(trace)
        if keep_trace:
            raise ValueError("--keep-trace keeps the trace advise makes; with --trace it makes none")
        if not os.path.isfile(trace):
            raise HugescopeError(f"--trace {trace}: no such trace file")
    from .noise import check_clock
    check_clock(clock)
    if fit is not None:
        from . import mosaic
        mosaic.check_layouts(fit)
    os.makedirs(out, exist_ok=True)
    made = os.path.join(out, "trace.hst")
    plan_path, rec_path = (os.path.join(out, f) for f in ("plan.json", "advise.json"))
    for path, kind in (((made, "hst"),) if trace is None else ()) + ((plan_path, "json"), (rec_path, "json")):
        check_output(path, kind)
    if fit is not None:
        mosaic.check_outputs(out, trace=False)
    run_argv, build = measured_build(argv, plain, measure_instrumented)
    measure = {"argv": run_argv, "build": build, "tolerance": float(tolerance), "fit": fit, "out": out,
               "clock": clock}
    # No --preset/--config: the calibrated preset when one was saved (issue #36).
    preset, config, label = calibrate.estimate_machine(preset, config)
    machine = calibrate.machine_args(preset, config)
    tell = progress or (lambda stage, done, total: None)
    stages: Dict[str, float] = {}

    if trace is not None:
        _check_trace_of(trace, argv)
        log(f"reusing the trace {trace} (tracing skipped)")
        stages["trace"] = 0.0
        return _advise_traced(argv, trace, plan_path, rec_path, ks, budgets, policies, repeat, warmup, duration,
                              timeout, machine, label, log, tell, stages, measure, trace_kept=True, by_site=by_site)
    log(f"tracing {' '.join(argv)}")
    had_trace = os.path.exists(made)
    keep = False
    try:
        rec = _advise_traced(argv, None, plan_path, rec_path, ks, budgets, policies, repeat, warmup, duration,
                             timeout, machine, label, log, tell, stages, measure, trace_kept=keep_trace, made=made,
                             by_site=by_site)
        keep = keep_trace
        return rec
    finally:
        # Refused (the program failed, no region to promote), failed,
        # interrupted, or done without --keep-trace: the trace made for this
        # advice goes (a trace that was there before stays).
        if not keep and not had_trace:
            try:
                os.unlink(made)
            except FileNotFoundError:
                pass


def _check_trace_of(trace: str, argv: List[str]) -> None:
    """A reused trace must be of this program with these arguments: the
    plan's addresses come from it."""
    from . import api

    params = api.trace_info(trace)["header"].get("params") or {}
    traced = params.get("argv")
    if traced is None:
        raise HugescopeError(f"--trace {trace}: not a trace of a program (made by 'hugescope trace -- PROG' or "
                             "advise --keep-trace)")
    if list(traced) != argv:
        raise HugescopeError(f"--trace {trace} is a trace of '{' '.join(traced)}', not of '{' '.join(argv)}'; "
                             "give the same program and arguments")


def _advise_traced(argv, trace, plan_path, rec_path, ks, budgets, policies, repeat, warmup, duration, timeout, machine,
                   label, log, tell, stages, measure, trace_kept, made=None, by_site=False):
    """The stages of ``advise``: trace (when ``trace`` is None, into
    ``made``), simulate, measure."""
    import time
    from . import api, collapse_cost, linux, noise, tracing
    from .validate import make_plan, rankings
    from .validate_suite import speedups

    if trace is None:
        t0 = time.monotonic()
        tell("trace", 0, None)
        t = tracing.trace_program(argv, made)
        stages["trace"] = time.monotonic() - t0
        tell("trace", 1, 1)
        if t["exit_status"] != 0:
            raise HugescopeError(f"advise: the traced program exited with status {t['exit_status']}; fix it first")
        trace = made
    header = api.trace_info(trace)["header"]
    cand = candidates(header)
    if not cand:
        raise HugescopeError("advise: the program has no anonymous region holding a whole 2 MiB page; "
                             "huge pages cannot help it (was it built with 'hugescope cc'?)")
    footprint = sum(int(r["len"]) for r in header["regions"] if r.get("kind", "anon") in COLLAPSIBLE_KINDS)
    # k per budget: shares of the collapsible footprint, or pages as given.
    shares = budget_pages(budgets, footprint) if ks is None else {k: [f"{k} pages"] for k in ks}
    ks = list(shares)

    log(f"simulating {', '.join(policies)} at k = {', '.join(map(str, ks))} huge pages")
    t0 = time.monotonic()
    n_sim = len([p for p in policies if p != "random"]) * len(ks)
    # The simulate stage: every (policy, k) run, the base-page run, then one
    # estimate per distinct plan (at most one per run).
    total = n_sim + 1 + n_sim
    tell("simulate", 0, total)
    promoted: Dict = {}
    rank = rankings(trace, policies, ks, cand, footprint, duration=float(duration), promoted=promoted,
                    progress=lambda done, _n: tell("simulate", done, total),
                    **{k: v for k, v in machine.items() if v is not None})
    # The base-page run, split by traced region in the same pass: each
    # region's accesses, walks and share of walk cycles (issue #38).
    profile = api.region_profile(trace, pages="4k", **machine)
    base_cycles = profile.result["cost"]["total_cycles"]
    region_rows = profile.rows(header)
    done = n_sim + 1
    tell("simulate", done, total)
    est: Dict[frozenset, float] = {}
    with tempfile.TemporaryDirectory(prefix="hugescope-advise-") as tmp:
        for regs in rank.values():
            if frozenset(regs) not in est:
                est[frozenset(regs)] = estimate(trace, regs, base_cycles, machine, tmp) if regs else 1.0
            done += 1
            tell("simulate", min(done, total), total)
    tell("simulate", total, total)
    stages["simulate"] = time.monotonic() - t0
    # The base run's simulated phase in seconds: the cost model's cycles at
    # the machine's clock (whole_run's t_sim).
    t_sim = float(profile.result["cost"]["seconds"])

    # measure: the base time of the whole run and the collapse rate first,
    # then the recommendation, then the interleaved rounds of it.
    clock = measure["clock"]
    t0 = time.monotonic()
    probes = max(1, warmup)
    fit = measure.get("fit")
    n_runs = probes + 1 + 3 * repeat + (repeat * (fit + 1) if fit else 0)
    tell("measure", 0, n_runs)
    count = iter(range(1, n_runs + 1))
    plan_for_runs: Dict[str, Any] = {ALL: "all"}

    def one(name: str) -> Dict[str, Any]:
        # No samples: each walks the program's page tables, more of them on
        # base pages than under the plan (linux.run, ``sample_ms``).
        res = linux.run(measure["argv"], plan=plan_for_runs.get(name), repeat=1, warmup=0, timeout=timeout,
                        sample_ms=0).check()
        sm = res.summary
        tell("measure", next(count), n_runs)
        return {"wall_s": sm["wall_s"]["median"], "user_s": sm["user_s"]["median"],
                "sys_s": sm["sys_s"]["median"], "cpu_s": sm["cpu_s"]["median"], "collapse_s": (sm.get("collapse_s") or {}).get("median", 0.0),
                "outcomes": res.outcomes}
    run_one = noise.with_load(one)
    log(f"measuring {measure['build']}: {probes} base run(s) for the whole run's time")
    warm = []
    for i in range(probes):
        prep = noise.prepare_memory()
        warm.append(dict(run_one(BASE), name="base (warm-up)", round=None, position=i, compacted=prep["compacted"],
                         compact_s=prep["seconds"]))
    t_base = statistics.median(noise.measured_time(r, clock) for r in warm)
    # The collapse rate on the measured program itself, through the
    # launcher's path (every anonymous mapping collapsed as it is populated,
    # while the program runs); the probe of hugescope's own memory only when
    # that run collapsed nothing.
    prep = noise.prepare_memory()
    every = dict(run_one(ALL), name=ALL, round=None, position=0, compacted=prep["compacted"], compact_s=prep["seconds"])
    rate = collapse_rate(every, collapse_cost.probe)
    log(f"MADV_COLLAPSE: {rate['s_per_region'] * 1e3:.2f} ms per 2 MiB region ({rate['how'].split(':')[0]})")

    # On the cpu clock the collapses are hugescope's time, not the program's.
    charged = rate["s_per_region"] if clock == "wall" else 0.0
    whole = {regs: whole_run(est[regs], t_sim, t_base, len(regs), charged) for regs in est}
    model = None
    if fit:
        # The raw runner: the layouts' rounds record the load themselves.
        model = _fit_program(trace, cand, rank, policies, fit, machine, repeat, one, plan_for_runs, whole, log,
                             clock)
    cands = [{"policy": p, "k": k, "regions": len(rank[(p, k)]), "whole": whole[frozenset(rank[(p, k)])]["speedup"]}
             for (p, k) in rank]
    pick = recommend(cands, policies, measure["tolerance"])
    best = (pick["policy"], pick["k"])
    best_regions = rank[best]
    best_whole = whole[frozenset(best_regions)]
    how = (f"cost model ({label}): total cycles of a static 4 KiB map / of the plan's static map, over the "
           "traced run")
    how_whole = (f"estimate, whole run: base time T (median of {probes} measured base run(s) of the measured build) / "
                 f"(T - T_in x (1 - 1/S) + n x c); S = the traced phase's speedup, {how}; T_in = min(T, the base "
                 "run's simulated seconds, its cycles at the machine's clock): the only phase a plan speeds up; "
                 f"n = the plan's 2 MiB regions, c = seconds per MADV_COLLAPSE ({rate['how']})")
    how_pick = (f"the smallest budget whose whole-run estimate is within {measure['tolerance']:.1%} (log terms) of "
                "the best budget's, each budget's best policy that promotes something; a larger one must buy more "
                "than that to pay for its extra 2 MiB pages; none above 1x: the smallest budget")
    if model is not None:
        how_whole = model["how"]
    plan = make_plan(best_regions, note=f"advise {best[0]} k={best[1]}", policy=best[0],
                     estimate={"speedup_vs_base": best_whole["speedup"],
                               "translation_speedup_vs_base": est[frozenset(best_regions)], "how": how_whole})
    # The runs measure the plan by address: a plain build reports no
    # allocation sites to resolve site entries with.
    plan_for_runs[PLAN] = plan
    if by_site:
        import json
        from . import _core
        plan = json.loads(_core.plan_by_site(json.dumps(plan), trace))
    write_json(plan_path, plan)

    log(f"measuring the plan of {best[0]} k={best[1]}: {repeat} interleaved round(s) of base, plan, base")
    runs = noise.interleaved([BASE, PLAN, BASE], run_one, repeat, warmup=0, prepare=noise.prepare_memory, log=log,
                             clock=clock)
    stages["measure"] = time.monotonic() - t0
    sp = speedups({"label": "advise", "plans": [{"plan": BASE}, {"plan": PLAN}]}, runs)
    m = sp["plans"][PLAN]
    floor = sp["floor"]
    verdict = ("within noise" if not noise.above_floor(m["speedup"], floor)
               else "gain" if m["speedup"] > 1 else "loss")
    measured = {"median": m["speedup"], "min": m["min"], "max": m["max"], "rounds": m["rounds"],
                "noise_floor": floor, "verdict": verdict}
    first_plan = next(r for r in runs if r["name"] == PLAN)
    outcomes = first_plan["outcomes"]
    applied = [o for o in outcomes if o.get("status") == "collapsed"]
    layout_runs = [] if model is None else [dict(x, name=f"layout: {x['name']}") for x in model["runs"]]
    run_rows = [{k: r.get(k) for k in ("name", "round", "position", "t_s", "wall_s", "user_s", "sys_s", "cpu_s", "collapse_s",
                                       "loadavg_1m", "busy_share", "others_busy_share", "compacted", "compact_s")}
                for r in warm + [every] + layout_runs + runs]

    def spread(name):
        xs = [r["t_s"] for r in runs if r["name"] == name]
        return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}
    collapse_runs = [r["collapse_s"] for r in runs if r["name"] == PLAN]
    rows = [{"policy": p, "k": k, "budget": ", ".join(shares[k]), "regions": [f"{a:#x}" for a in rank[(p, k)]],
             "estimate": est[frozenset(rank[(p, k)])], "whole_run": whole[frozenset(rank[(p, k)])]["speedup"],
             "collapse_s_estimate": whole[frozenset(rank[(p, k)])]["collapse_s"], "chosen": (p, k) == best,
             "fewer_because": shortfall(p, k, len(rank[(p, k)]), len(cand), promoted.get((p, k)), float(duration))}
            for (p, k) in sorted(rank, key=lambda pk: (pk[1], list(policies).index(pk[0])))]
    rec = {
        "program": argv, "measured_program": measure["argv"], "measured_build": measure["build"],
        "trace": trace if trace_kept else None, "plan": plan_path,
        "best": {"policy": best[0], "k": best[1], "budget": ", ".join(shares[best[1]]),
                 "pays": best_whole["speedup"] > 1.0},
        "footprint_bytes": footprint, "candidate_regions": len(cand),
        "machine": label,
        "regions": region_rows,
        "promote": [promoted_entry(header, a, region_rows) for a in best_regions],
        "rows": rows,
        "estimate": est[frozenset(best_regions)],
        "collapse_rate": rate,
        "estimate_whole": dict(best_whole, base_s=t_base, simulated_s=t_sim, regions=len(best_regions),
                               collapse_s_per_region=charged, collapse_rate_measured=rate["measured"]),
        "clock": clock,
        "measured": measured,
        "model": None if model is None else {k: v for k, v in model.items() if k not in ("points", "runs")},
        "base_s": spread(BASE), "plan_s": spread(PLAN),
        "collapse_s_measured": {"median": statistics.median(collapse_runs), "min": min(collapse_runs),
                                "max": max(collapse_runs)},
        "plan_applied": {"entries": len(outcomes), "collapsed": len(applied)},
        "runs": run_rows,
        "stages_s": dict(stages),
        "how": {
            "estimate": how,
            "estimate_whole": how_whole,
            "recommended": how_pick,
            "measured": f"{measure['build']}, {repeat} interleaved round(s) of base, plan, base after {probes} "
                        "base warm-up run(s) and one run with every anonymous mapping collapsed (the collapse "
                        "rate), each a fresh process (ASLR off), memory compacted first as root; "
                        f"{ADVISE_CLOCKS[clock]}; the plan applied with process_madvise(MADV_COLLAPSE) as its "
                        "ranges are populated; a round's gain = the geometric mean of "
                        "its two base times / its plan time; median (min, max) over the rounds",
            "noise_floor": "the largest |ln(t_a / t_b)| of a round's two base runs over the rounds; a measured gain "
                           "whose |ln| is within it is 'within noise', above it 'gain' or 'loss'",
            "load": "per run: loadavg_1m = /proc/loadavg as it starts; busy_share = busy share of all CPUs over the "
                    "run (/proc/stat); others_busy_share = that less the run's own user + system time",
            "stages_s": "wall clock of each stage in this process (time.monotonic); trace 0 when reused",
            "regions": "simulated: the base-page (4 KiB) run of the estimates, each access and TLB miss counted in "
                       f"the traced region holding its address; walk cycles priced by the cost model ({label})",
        },
        "collapse": [{k: o.get(k) for k in ("start", "status", "regions", "regions_collapsed", "errno", "reason")}
                     for o in outcomes],
    }
    if model is not None:
        _write_model(model, measure["out"], argv)
    write_json(rec_path, rec)
    return rec


#: A measured run's time per clock (``noise.CLOCKS``), as the record says it.
ADVISE_CLOCKS = {
    "wall": "wall clock from spawn to wait4, the plan's collapse time included",
    "cpu": "the program's CPU time, user + system of all its threads from wait4 (time preempted or stolen by the "
           "host is not in it, nor the collapses: hugescope's process makes them)",
}

#: The name of a layout's run while ``advise --fit`` measures layouts.
LAYOUT = "layout"


def _fit_program(trace, cand, rank, policies, k, machine, rounds, run_one, plan_for_runs, whole, log,
                 clock="wall"):
    """``advise --fit K``: measure K layouts of the program (``mosaic``),
    fit its model with the plan's 2 MiB regions as a counter too (the
    measured runs include the collapses), then price every ranked plan with
    it: ``whole[regions]`` gets the model's speedup (an estimate) in place
    of the cost model's. Returns the model record."""
    from . import mosaic, noise, validate_suite as vs

    layouts = mosaic.sample_layouts(cand, rank, list(policies), k, seed=1)
    log(f"fitting this program's model: {len(layouts)} layouts, {rounds} interleaved round(s)")

    def run_layout(plan_json):
        plan_for_runs[LAYOUT] = plan_json
        return run_one(LAYOUT)
    features = mosaic.FEATURES + ("regions",)
    got = mosaic.fit_layouts(trace, layouts, machine, run_layout, rounds, 0, noise.prepare_memory, log, features,
                             clock=clock)
    plan_for_runs.pop(LAYOUT, None)
    m, ho = got["model"], got["held_out"]
    priced = [{"plan": f"{len(r)} regions", "regions": sorted(r), "sources": []} for r in whole if r]
    vs.plan_features(trace, priced, machine)
    t_base = mosaic.predict(m, layouts[0]["features"])
    for p in priced:
        p["features"]["regions"] = float(len(p["regions"]))
        t = mosaic.predict(m, p["features"])
        whole[frozenset(p["regions"])] = dict(whole[frozenset(p["regions"])], speedup=t_base / t, model_s=t)
    floor = got["measured"]["floor"]
    log(f"model: held-out max |error| {100 * ho['max_abs_error']:.1f}%, median {100 * ho['median_abs_error']:.1f}% "
        f"(noise floor {100 * floor:.1f}%)")
    return {"kind": "estimate", "workload": "advise", "layouts": len(layouts), "rounds": rounds, "model": m,
            "held_out": {kk: v for kk, v in ho.items() if kk != "rows"}, "noise_floor": floor, "runs": got["runs"],
            "bound": max(0.03, floor), "within_bound": ho["max_abs_error"] <= max(0.03, floor),
            "points": [dict(p, predicted_s=r["predicted_s"], error=r["error"],
                            speedup=got["measured"]["plans"][p["plan"]]["speedup"],
                            speedup_min=got["measured"]["plans"][p["plan"]]["min"],
                            speedup_max=got["measured"]["plans"][p["plan"]]["max"])
                       for p, r in zip(got["points"], ho["rows"])],
            "how": "estimate, whole run: this program's model (advise --fit; mosaic.FORM plus c_regions x the "
                   "plan's 2 MiB regions, the measured runs including their collapses) fitted to "
                   f"{len(layouts)} measured layouts; speedup = the model's base time / its plan time; bar: the "
                   "held-out max |error| (leave-one-layout-out)"}


def _write_model(model, out, argv):
    """``advise --fit``'s model, held-out table and plot (``mosaic.outputs``)."""
    from . import mosaic
    rec = dict({k: v for k, v in model.items() if k != "runs"}, hugescope_experiment="model",
               workload=" ".join(argv))
    mosaic.write_outputs(rec, mosaic.outputs(out))
