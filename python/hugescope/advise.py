"""``hugescope advise``: from a program to a plan to a measured speedup (issue
#14, section 2; the performance engineer's path).

1. **Trace** the program (built with ``hugescope cc``; ASLR off, so the
   addresses hold in later runs of the same binary and environment).
2. **Simulate** the policies (default pcc, hawkeye, oracle, linux) at a few
   budgets of k 2 MiB pages, each a budgeted run of the OS model
   (``validate.rankings``), and estimate each plan's speedup with the cost
   model: cycles of a static 4 KiB map over cycles of the plan's static map.
3. **Print** the regions worth promoting (the best plan's, with the traced
   region each lies in) and **write** that plan.
4. **Run** the program natively under base pages and under the plan
   (``linux.run``: median of N runs) and report the measured speedup beside the
   estimate.

Everything heavy is done by the modules it calls; this one chooses and reports.

    from hugescope import advise
    r = advise.advise(["./prog", "arg"], out="advise-out", ks=[1, 2, 4])
    r["rows"]   # policy, k, regions, estimate, measured
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence

from ._core import HugescopeError
from ._io import check_output, write_json

HUGE = 2 << 20
DEFAULT_POLICIES = ["pcc", "hawkeye", "oracle", "linux"]
DEFAULT_KS = [1, 2, 4]
# Region kinds MADV_COLLAPSE can make huge in a program: private anonymous
# memory. File-backed kinds (code, data, file) are page cache, out of reach.
COLLAPSIBLE_KINDS = ("anon", "heap", "bss", "stack")


def candidates(header: Dict[str, Any]) -> List[int]:
    """2 MiB regions wholly inside the trace's collapsible regions, ascending."""
    from .validate import candidate_regions

    regions = [r for r in header.get("regions", []) if r.get("kind", "anon") in COLLAPSIBLE_KINDS]
    return candidate_regions({"regions": regions})


def region_name(header: Dict[str, Any], addr: int) -> str:
    """The traced region holding ``addr`` (its name from /proc/PID/maps)."""
    for r in header.get("regions", []):
        if int(r["base"]) <= addr < int(r["base"]) + int(r["len"]):
            return r["name"]
    return "?"


def estimate(trace: str, regions: Sequence[int], base_cycles: float, machine: Dict[str, Any], tmpdir: str) -> float:
    """Estimated speedup of promoting ``regions``: cost-model cycles of the
    base-page map over those of the plan's static map, same trace."""
    from . import api
    from .validate import make_plan

    path = os.path.join(tmpdir, f"plan-{len(os.listdir(tmpdir))}.json")
    write_json(path, make_plan(regions))
    return base_cycles / api.simulate(trace, pages=path, **machine)["cost"]["total_cycles"]


def advise(argv: Sequence[str], out: str, ks: Sequence[int] = DEFAULT_KS, policies: Sequence[str] = DEFAULT_POLICIES,
           repeat: int = 3, warmup: int = 1, duration: float = 60.0, timeout: Optional[float] = None,
           preset: Optional[str] = None, log: Callable[[str], None] = lambda s: None) -> Dict[str, Any]:
    """Trace, simulate, choose, measure (module docstring). Writes
    ``OUT/trace.hst``, ``OUT/plan.json`` (the best plan) and ``OUT/advise.json``
    (every row). Returns that record."""
    from . import api, calibrate, linux, tracing
    from .validate import make_plan, rankings

    argv = [os.fspath(a) for a in argv]
    if not argv:
        raise ValueError("advise: give the program after '--'")
    ks = sorted(set(ks))
    if not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
        raise ValueError(f"--ks: {ks!r} must be positive numbers of 2 MiB pages")
    known = set(api.policies())
    for p in policies:
        if p.partition(":")[0] not in known:
            raise ValueError(f"--policies: unknown policy '{p}' (known: {', '.join(sorted(known))})")
    os.makedirs(out, exist_ok=True)
    trace, plan_path, rec_path = (os.path.join(out, f) for f in ("trace.hst", "plan.json", "advise.json"))
    for path, kind in ((trace, "hst"), (plan_path, "json"), (rec_path, "json")):
        check_output(path, kind)
    machine = calibrate.machine_args(preset, None)

    log(f"tracing {' '.join(argv)}")
    had_trace = os.path.exists(trace)
    try:
        return _advise_traced(argv, trace, plan_path, rec_path, ks, policies, repeat, warmup, duration, timeout,
                              machine, log)
    except BaseException:
        # Refused (the program failed, no region to promote), failed or
        # interrupted: the trace made for this advice goes too, so a refused
        # advise leaves nothing behind (a trace that was there before stays).
        if not had_trace:
            try:
                os.unlink(trace)
            except FileNotFoundError:
                pass
        raise


def _advise_traced(argv, trace, plan_path, rec_path, ks, policies, repeat, warmup, duration, timeout, machine, log):
    """The steps of ``advise`` from tracing the program on."""
    from . import api, linux, tracing
    from .validate import make_plan, rankings

    t = tracing.trace_program(argv, trace)
    if t["exit_status"] != 0:
        raise HugescopeError(f"advise: the traced program exited with status {t['exit_status']}; fix it first")
    header = api.trace_info(trace)["header"]
    cand = candidates(header)
    if not cand:
        raise HugescopeError("advise: the program has no anonymous region holding a whole 2 MiB page; "
                             "huge pages cannot help it (was it built with 'hugescope cc'?)")
    footprint = sum(int(r["len"]) for r in header["regions"] if r.get("kind", "anon") in COLLAPSIBLE_KINDS)

    log(f"simulating {', '.join(policies)} at k = {', '.join(map(str, ks))} huge pages")
    rank = rankings(trace, policies, ks, cand, footprint, duration=float(duration),
                    **{k: v for k, v in machine.items() if v is not None})
    base_cycles = api.simulate(trace, pages="4k", **machine)["cost"]["total_cycles"]
    est: Dict[frozenset, float] = {}
    with tempfile.TemporaryDirectory(prefix="hugescope-advise-") as tmp:
        for regs in rank.values():
            if frozenset(regs) not in est:
                est[frozenset(regs)] = estimate(trace, regs, base_cycles, machine, tmp) if regs else 1.0
    # The best plan: highest estimate; on a tie the smaller budget, then the policy order given.
    order = sorted(rank, key=lambda pk: (-est[frozenset(rank[pk])], pk[1], list(policies).index(pk[0])))
    best = order[0]
    best_regions = rank[best]
    how = (f"cost model ({machine.get('preset') or 'default preset'}): total cycles of a static 4 KiB map / of the "
           "plan's static map, over the traced run")
    plan = make_plan(best_regions, note=f"advise {best[0]} k={best[1]}", policy=best[0],
                     estimate={"speedup_vs_base": est[frozenset(best_regions)], "how": how})
    write_json(plan_path, plan)

    log(f"measuring base pages ({warmup} warm-up + {repeat} runs)")
    base = linux.run(argv, plan=None, repeat=repeat, warmup=warmup, timeout=timeout).check()
    log(f"measuring the plan of {best[0]} k={best[1]} ({warmup} warm-up + {repeat} runs)")
    planned = linux.run(argv, plan=plan, repeat=repeat, warmup=warmup, timeout=timeout).check()
    tb, sp = base.summary["wall_s"], planned.summary["wall_s"]
    measured = {"median": tb["median"] / sp["median"], "min": tb["median"] / sp["max"], "max": tb["median"] / sp["min"]}
    rows = [{"policy": p, "k": k, "regions": [f"{a:#x}" for a in rank[(p, k)]],
             "estimate": est[frozenset(rank[(p, k)])], "chosen": (p, k) == best} for (p, k) in order]
    rec = {
        "program": argv, "trace": trace, "plan": plan_path, "best": {"policy": best[0], "k": best[1]},
        "promote": [{"start": f"{a:#x}", "region": region_name(header, a)} for a in best_regions],
        "rows": rows,
        "estimate": est[frozenset(best_regions)],
        "measured": measured,
        "base_wall_s": tb, "plan_wall_s": sp,
        "how": {
            "estimate": how,
            "measured": f"median of {repeat} runs after {warmup} warm-up, wall clock from spawn to wait4 of the same "
                        "binary (ASLR off), base pages vs the plan applied with process_madvise(MADV_COLLAPSE) as its "
                        "ranges are populated; min/max = base median / plan max and min",
        },
        "collapse": [{k: o.get(k) for k in ("start", "status", "regions", "regions_collapsed", "errno", "reason")}
                     for o in planned.outcomes],
    }
    write_json(rec_path, rec)
    return rec
