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
4. **Run** the program natively under base pages and under the plan
   (``linux.run``: median of N runs) and report the measured speedup beside the
   estimate.

Everything heavy is done by the modules it calls; this one chooses and reports.

    from hugescope import advise
    r = advise.advise(["./prog", "arg"], out="advise-out")   # budgets 1% ... 100%
    r["rows"]   # policy, budget, k, regions, estimate, fewer_because
    r["regions"]  # name, base, len, kind, pid, accesses, walks, walk_refs, walk_cycles, walk_cycle_share (+ site)
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence

from ._core import HugescopeError
from ._io import check_output, write_json

HUGE = 2 << 20
DEFAULT_POLICIES = ["pcc", "hawkeye", "oracle", "linux"]
#: Default budgets: shares of the program's collapsible footprint (issue
#: #38: 1, 2, 4 pages covered at most 8 MiB of 176-672 MiB programs).
DEFAULT_BUDGETS = ["1%", "4%", "16%", "64%", "100%"]
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


def advise(argv: Sequence[str], out: str, ks: Optional[Sequence[int]] = None,
           policies: Sequence[str] = DEFAULT_POLICIES, budgets: Optional[Sequence[str]] = None,
           repeat: int = 3, warmup: int = 1, duration: float = 60.0, timeout: Optional[float] = None,
           preset: Optional[str] = None, config: Optional[str] = None, trace: Optional[str] = None,
           keep_trace: bool = False, log: Callable[[str], None] = lambda s: None,
           progress: Optional[Callable[[str, int, Optional[int]], None]] = None,
           by_site: bool = False) -> Dict[str, Any]:
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
    program re-linked with another layout."""
    from . import api, calibrate

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
    known = set(api.policies())
    for p in policies:
        if p.partition(":")[0] not in known:
            raise ValueError(f"--policies: unknown policy '{p}' (known: {', '.join(sorted(known))})")
    if trace is not None:
        trace = os.fspath(trace)
        if keep_trace:
            raise ValueError("--keep-trace keeps the trace advise makes; with --trace it makes none")
        if not os.path.isfile(trace):
            raise HugescopeError(f"--trace {trace}: no such trace file")
    os.makedirs(out, exist_ok=True)
    made = os.path.join(out, "trace.hst")
    plan_path, rec_path = (os.path.join(out, f) for f in ("plan.json", "advise.json"))
    for path, kind in (((made, "hst"),) if trace is None else ()) + ((plan_path, "json"), (rec_path, "json")):
        check_output(path, kind)
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
                              timeout, machine, label, log, tell, stages, trace_kept=True, by_site=by_site)
    log(f"tracing {' '.join(argv)}")
    had_trace = os.path.exists(made)
    keep = False
    try:
        rec = _advise_traced(argv, None, plan_path, rec_path, ks, budgets, policies, repeat, warmup, duration,
                             timeout, machine, label, log, tell, stages, trace_kept=keep_trace, made=made,
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
                   label, log, tell, stages, trace_kept, made=None, by_site=False):
    """The stages of ``advise``: trace (when ``trace`` is None, into
    ``made``), simulate, measure."""
    import time
    from . import api, linux, tracing
    from .validate import make_plan, rankings

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
    # The best plan: highest estimate; on a tie the smaller budget, then the policy order given.
    order = sorted(rank, key=lambda pk: (-est[frozenset(rank[pk])], pk[1], list(policies).index(pk[0])))
    best = order[0]
    best_regions = rank[best]
    how = (f"cost model ({label}): total cycles of a static 4 KiB map / of the plan's static map, over the "
           "traced run")
    plan = make_plan(best_regions, note=f"advise {best[0]} k={best[1]}", policy=best[0],
                     estimate={"speedup_vs_base": est[frozenset(best_regions)], "how": how})
    if by_site:
        import json
        from . import _core
        plan = json.loads(_core.plan_by_site(json.dumps(plan), trace))
    write_json(plan_path, plan)

    t0 = time.monotonic()
    runs = 2 * (warmup + repeat)
    tell("measure", 0, runs)
    count = iter(range(1, runs + 1))

    def ran(_ev):
        tell("measure", next(count), runs)

    log(f"measuring base pages ({warmup} warm-up + {repeat} runs)")
    base = linux.run(argv, plan=None, repeat=repeat, warmup=warmup, timeout=timeout, progress=ran).check()
    log(f"measuring the plan of {best[0]} k={best[1]} ({warmup} warm-up + {repeat} runs)")
    planned = linux.run(argv, plan=plan, repeat=repeat, warmup=warmup, timeout=timeout, progress=ran).check()
    stages["measure"] = time.monotonic() - t0
    tb, sp = base.summary["wall_s"], planned.summary["wall_s"]
    measured = {"median": tb["median"] / sp["median"], "min": tb["median"] / sp["max"], "max": tb["median"] / sp["min"]}
    rows = [{"policy": p, "k": k, "budget": ", ".join(shares[k]), "regions": [f"{a:#x}" for a in rank[(p, k)]],
             "estimate": est[frozenset(rank[(p, k)])], "chosen": (p, k) == best,
             "fewer_because": shortfall(p, k, len(rank[(p, k)]), len(cand), promoted.get((p, k)), float(duration))}
            for (p, k) in order]
    rec = {
        "program": argv, "trace": trace if trace_kept else None, "plan": plan_path,
        "best": {"policy": best[0], "k": best[1], "budget": ", ".join(shares[best[1]])},
        "footprint_bytes": footprint, "candidate_regions": len(cand),
        "machine": label,
        "regions": region_rows,
        "promote": [promoted_entry(header, a, region_rows) for a in best_regions],
        "rows": rows,
        "estimate": est[frozenset(best_regions)],
        "measured": measured,
        "base_wall_s": tb, "plan_wall_s": sp,
        "stages_s": dict(stages),
        "how": {
            "estimate": how,
            "measured": f"median of {repeat} runs after {warmup} warm-up, wall clock from spawn to wait4 of the same "
                        "binary (ASLR off), base pages vs the plan applied with process_madvise(MADV_COLLAPSE) as its "
                        "ranges are populated; min/max = base median / plan max and min",
            "stages_s": "wall clock of each stage in this process (time.monotonic); trace 0 when reused",
            "regions": "simulated: the base-page (4 KiB) run of the estimates, each access and TLB miss counted in "
                       f"the traced region holding its address; walk cycles priced by the cost model ({label})",
        },
        "collapse": [{k: o.get(k) for k in ("start", "status", "regions", "regions_collapsed", "errno", "reason")}
                     for o in planned.outcomes],
    }
    write_json(rec_path, rec)
    return rec
