"""The PCC paper's rows (``papers/pcc.toml`` in the core), measured with the
existing PCC experiments as building blocks: per graph kernel and seed, a
utility curve (``experiments.curve``: PCC and HawkEye at 4% and ~100%, base,
ideal), the fragmentation bars (``experiments.frag``: Linux, HawkEye, PCC
and PCC with demotion at 50% and 90%), the PCC size sensitivity
(``experiments.sensitivity``: 4, 32, 128 and 1024 entries at 32%) and one
static base-page run for the walk references. Every number is the cost
model's estimate (docs/cost-model.md).

CI scale runs the demo's two kernels (BFS at scale 21 top-down, PageRank at
scale 19) and SSSP at scale 20, each the smallest scale whose hot array
reaches the 4 MiB reach of the L2 TLB in 4KB pages (docs/workloads.md,
"Sources of the PCC and direct-segments workloads"). Paper scale (``PAPER``)
runs the three kernels on larger Kronecker graphs, each TLB-bound (PageRank
included), the largest this machine runs within the hour budget; the
paper's own Kronecker 25 (10 GB) stays out of reach (docs/reproduction.md).
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional, Sequence

from .. import api, experiments, workloads
from ..errors import HugescopeError
from .common import geomean, mean, measured, mib, missing, seeds_word, trace_command

PRESET = "haswell-pcc"
#: The trace stands for this many virtual seconds: reads of the PCC at 30, 60
#: and 90 s (demo_paper.DURATION, docs/assumptions.md "Demo virtual duration").
DURATION = 120.0

#: CI-scale parameters per kernel. BFS and PageRank are the demo's (demo.py
#: GRAPHS): BFS at scale 21 is the smallest whose 8 MiB parent array exceeds
#: the L2 TLB's 4 MiB reach in 4KB pages; PageRank at scale 19 is the demo's
#: and is not TLB-bound (its 2 MiB score arrays fit the reach: its rows show
#: the miss). SSSP at scale 20: its 4 MiB distance array reaches the L2 reach
#: (64 walks per 1000 accesses on 4KB pages, 61M accesses), with the bucket
#: width GAP's benchmark runs Kronecker graphs with (bench.mk: -d2).
CI: Dict[str, Dict[str, Any]] = {
    "bfs": {"scale": 21, "direction_optimizing": False},
    "pagerank": {"scale": 19, "iterations": 2},
    "sssp": {"scale": 20, "delta": 2},
}
#: Paper-scale parameters: each kernel one or two Kronecker scales above CI,
#: so that every one is TLB-bound: BFS at scale 22 (4M vertices, 67M edges,
#: a 16 MiB parent array: 4x the L2 TLB's 4 MiB reach in 4KB pages; 281M
#: accesses), SSSP and PageRank at scale 21 (8 and 16 MiB hot arrays;
#: PageRank's 2 MiB score arrays at CI scale 19 fit the reach, which is why
#: its CI rows miss). The rest as at CI scale. The paper's Kronecker 25
#: (10-19 GB, billions of accesses per kernel, 20 OS-model runs each, 3
#: seeds) does not fit the hour on this machine.
PAPER: Dict[str, Dict[str, Any]] = {
    "bfs": {"scale": 22, "direction_optimizing": False},
    "pagerank": {"scale": 21, "iterations": 2},
    "sssp": {"scale": 21, "delta": 2},
}
SCALE_PARAMS = {"ci": CI, "paper": PAPER}
KERNELS = ["bfs", "sssp", "pagerank"]
NAMES = {"bfs": "BFS", "sssp": "SSSP", "pagerank": "PageRank"}

CURVE_POLICIES = ["pcc", "hawkeye"]
CURVE_BUDGETS = [4, 100]
FRAG_POLICIES = ["linux", "hawkeye", "pcc", "pcc:demotion=true"]
#: Short names of the fragmentation policies in the evidence table.
FRAG_KEYS = {"linux": "linux", "hawkeye": "hawkeye", "pcc": "pcc", "pcc:demotion=true": "pcc_demotion"}
FRAG_LEVELS = [50, 90]
SENS_SIZES = [4, 32, 128, 1024]
SENS_BUDGET = 32
#: Fig. 8 (§5.2): each kernel traced again with 2, 4 and 8 threads (one cpu,
#: one TLB hierarchy and one PCC per thread; docs/workloads.md "Threads"), the
#: OS choosing among the per-core PCCs' candidates by highest frequency first
#: or round robin (§3.3.2; ``experiments.multi``), at the 4% limit of the
#: single-thread rows (the paper's 1-4%) and with everything huge.
MT_THREADS = [2, 4, 8]
MT_POLICIES = {"pcc:promotion_policy=1": "hf", "pcc:promotion_policy=0": "rr"}
MT_BUDGET = 4
#: BFS with 8 threads also at 16% and at a limit above it (§5.2: promotion
#: stalls show "when BFS runs with 8 threads and more than 16% of the
#: application footprint is promoted").
MT_OVERHEAD = ("bfs", 8, [16, 32])
#: Fig. 9(b) (§5.3): PageRank and SSSP as two single-threaded processes on
#: cpus of their own (``experiments.merge``: round-robin slices of 65,536
#: accesses), each with its own PCC and huge pages shared system-wide, at 16%
#: of the combined footprint. A process's speedup is its own cycles (its
#: cpus' accesses and translation, the core's ``per_cpu_cycles``) on base
#: pages over those under the policy; the run's OS time is not split by
#: process and is left out of it.
MP_PAIR = ("pagerank", "sssp")
MP_BUDGET = 16
MP_DURATION = ("the merged trace stands for 120 virtual s (PCC reads at 30/60/90 s), the two processes progressing "
               "at the same rate in accesses (docs/experiments.md, 'Merging traces')")
MT_DURATION = ("the multi-threaded traces stand for the same 120 virtual s as the single-threaded ones (PCC reads at "
               "30/60/90 s): a parallel run takes less wall time than a serial one, and fewer reads would promote less; "
               "the paper gives no run times (docs/assumptions.md, 'Multi-threaded PCC runs')")

MACHINE = "machine haswell-pcc (PCC Table 2); cycles from the cost model's defaults (docs/cost-model.md: estimates)"
POLICIES = ("pcc with its defaults: 128 entries per PCC, read every 30 s, up to 128 promotions per read (PCC Table 2, "
            "§3.3.1); hawkeye as the PCC paper describes it: 4096 pages scanned and 8 promotions per round, 1 s "
            "window, 30 s sleep (§2.2, §5.1); the trace spans 120 virtual s, reads at 30/60/90 s (docs/assumptions.md, "
            "'Demo virtual duration')")
FRAG = "fragmentation: one unmovable page in 50% or 90% of the 2MB blocks (PCC §5.1.1), injector seeded with the seed"


def workload_source(name: str, params: Dict[str, Any], scale: str = "ci") -> str:
    p = " ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in params.items())
    size = {"ci": "CI size from docs/workloads.md 'Sources of the PCC and direct-segments workloads'",
            "paper": "paper-scale size from docs/reproduction.md 'Paper scale' (reproduce/pcc.py PAPER)"}[scale]
    return (f"{name} {p}: GAP's {NAMES[name]} on a Graph500 Kronecker graph (A,B,C = 0.57,0.19,0.19, 16 edges per "
            f"vertex; PCC Table 1's input is Kronecker 25), docs/workloads.md 'bfs, sssp, pagerank'; {size}")


def _one(df, what: str, **cond) -> Dict[str, Any]:
    q = df
    for k, v in cond.items():
        q = q[q[k] == v]
    if len(q) != 1:
        raise HugescopeError(f"pcc reproduction: {what}: expected one row for {cond}, found {len(q)}")
    return q.iloc[0].to_dict()


class KernelRun:
    """One kernel at one seed: its trace, the experiments' tables and the
    summary (``SimResult.summary()``) of its static base-page run."""

    def __init__(self, name: str, seed: int, params: Dict[str, Any], trace: str):
        self.name, self.seed, self.params, self.trace = name, seed, params, trace
        self.curve = self.frag = self.sens = None
        self.static: Optional[Dict[str, Any]] = None
        #: Fig. 8: ``experiments.multi``'s rows per thread count.
        self.mt: Dict[int, Any] = {}

    # -- the numbers the rows read
    def curve_row(self, policy: str, budget: Optional[float] = None) -> Dict[str, Any]:
        if budget is None:
            return _one(self.curve, f"{self.name} curve", policy=policy, role="reference")
        return _one(self.curve, f"{self.name} curve", policy=policy, budget_pct=budget)

    def frag_row(self, policy: str, level: float) -> Dict[str, Any]:
        return _one(self.frag, f"{self.name} frag", policy=policy, frag_pct=level)

    def sens_row(self, size: int) -> Dict[str, Any]:
        return _one(self.sens, f"{self.name} sensitivity", size=size)

    def mt_row(self, threads: int, policy: str, budget: Optional[float] = None) -> Dict[str, Any]:
        what = f"{self.name} with {threads} threads"
        if budget is None:
            return _one(self.mt[threads], what, policy=policy, role="reference")
        return _one(self.mt[threads], what, policy=policy, budget_pct=budget)

    def numbers(self) -> Dict[str, Any]:
        """Every number a row reads from this run (the evidence table)."""
        base, ideal = self.curve_row("base"), self.curve_row("ideal")
        pcc4, pcc100, hk4 = self.curve_row("pcc", 4), self.curve_row("pcc", 100), self.curve_row("hawkeye", 4)
        out = {"workload": self.name, "seed": self.seed, "accesses": base["accesses"],
               "footprint_bytes": base.get("footprint_bytes"),
               "base_ptw_rate": base["ptw_rate"], "base_walks": base["walks"],
               "ideal_speedup": ideal["speedup_est"], "ideal_ptw_rate": ideal["ptw_rate"], "ideal_walks": ideal["walks"],
               "pcc4_speedup": pcc4["speedup_est"], "pcc4_ptw_rate": pcc4["ptw_rate"],
               "pcc4_huge_share": pcc4["huge_share"], "pcc4_promotions": pcc4["promotions"],
               "pcc100_ptw_rate": pcc100["ptw_rate"], "pcc100_huge_share": pcc100["huge_share"],
               "hawkeye4_speedup": hk4["speedup_est"], "hawkeye4_promotions": hk4["promotions"]}
        for lvl in FRAG_LEVELS:
            for p in FRAG_POLICIES:
                r = self.frag_row(p, lvl)
                out[f"frag{lvl}_{FRAG_KEYS[p]}_speedup"] = r["speedup_est"]
                out[f"frag{lvl}_{FRAG_KEYS[p]}_huge_share"] = r["huge_share"]
        for n in SENS_SIZES:
            r = self.sens_row(n)
            out[f"pcc{n}e_speedup"], out[f"pcc{n}e_ptw_rate"] = r["speedup_est"], r["ptw_rate"]
        out["static_walks"], out["static_walk_refs"] = self.static["walks"], self.static["walk_refs"]
        for t in MT_THREADS:
            ideal = self.mt_row(t, "ideal")
            out[f"mt{t}_ideal_speedup"] = ideal["speedup_est"]
            for policy, key in MT_POLICIES.items():
                r = self.mt_row(t, policy, MT_BUDGET)
                out[f"mt{t}_{key}_speedup"], out[f"mt{t}_{key}_promotions"] = r["speedup_est"], r["promotions"]
                out[f"mt{t}_{key}_ptw_rate"] = r["ptw_rate"]
        name, t, budgets = MT_OVERHEAD
        if self.name == name:
            for b in budgets:
                out[f"mt{t}_hf{b}_speedup"] = self.mt_row(t, "pcc:promotion_policy=1", b)["speedup_est"]
        return out


def mt_budgets(name: str, threads: int) -> List[float]:
    """The limits a kernel's ``threads``-thread run sweeps (``MT_OVERHEAD``)."""
    extra = MT_OVERHEAD[2] if (name, threads) == MT_OVERHEAD[:2] else []
    return [MT_BUDGET, *extra]


def mt_trace(traces: str, name: str, seed: int, threads: int) -> str:
    return os.path.join(traces, f"{name}-{seed}-t{threads}.hst")


def run_kernel(k: KernelRun, step: Callable[[str], None], backend: Optional[Dict[str, Any]] = None,
               traces: Optional[str] = None, drop_traces: bool = False) -> None:
    """Fill what ``k`` does not hold yet (the demo hands over its seed-1 curve,
    fragmentation and static runs). ``backend``: where the sweeps' batches
    run (``{"backend": "ray", "ray_address": ...}``, ``experiments.run_configs``);
    results do not depend on it. ``traces``: where the multi-threaded traces
    of Fig. 8 go (default beside ``k.trace``); ``drop_traces``: remove each
    once its run is read (paper scale: hundreds of MB each)."""
    common = {"duration": DURATION, "threads": 2, **(backend or {})}
    if k.curve is None:
        k.curve = experiments.curve(k.trace, policies=CURVE_POLICIES, budgets=CURVE_BUDGETS, frag_points=[], **common)
        step(f"{k.name} seed {k.seed}: curve")
    if k.frag is None:
        k.frag = experiments.frag(k.trace, levels=FRAG_LEVELS, policies=FRAG_POLICIES, seed=k.seed, **common)
        step(f"{k.name} seed {k.seed}: fragmentation")
    if k.sens is None:
        k.sens = experiments.sensitivity(k.trace, pcc_sizes=SENS_SIZES, budget=SENS_BUDGET, **common)
        step(f"{k.name} seed {k.seed}: sensitivity")
    if k.static is None:
        k.static = api.simulate(k.trace, preset=PRESET, pages="4k").summary()
        step(f"{k.name} seed {k.seed}: base pages (static)")
    for t in MT_THREADS:
        if t in k.mt:
            continue
        path = mt_trace(traces or os.path.dirname(k.trace), k.name, k.seed, t)
        made = not os.path.exists(path)
        if made:
            workloads.trace(k.name, path, **{**k.params, "threads": t}, seed=k.seed)
        k.mt[t] = experiments.multi(path, policies=list(MT_POLICIES), budgets=mt_budgets(k.name, t), **common)[0]
        if made and drop_traces:
            os.remove(path)
        step(f"{k.name} seed {k.seed}: {t} threads")


def _commands(name: str, params: Dict[str, Any], seeds: List[int], what: Sequence[str], scale: str = "ci") -> str:
    """The commands behind a row: the whole table, then per seed S the trace
    and the experiments the row reads."""
    t = f"{name}-$S.hst"
    cmds = {
        "curve": f"hugescope curve {t} --policies {','.join(CURVE_POLICIES)} --budgets "
                 f"{','.join(map(str, CURVE_BUDGETS))} --frag-points '' --duration {DURATION:g}",
        "frag": f"hugescope frag {t} --levels {','.join(map(str, FRAG_LEVELS))} --policies {','.join(FRAG_POLICIES)} "
                f"--duration {DURATION:g} --seed $S",
        "sens": f"hugescope sensitivity {t} --pcc-sizes {','.join(map(str, SENS_SIZES))} --budget {SENS_BUDGET} "
                f"--duration {DURATION:g}",
        "static": f"hugescope simulate {t} --preset {PRESET} --pages 4k",
    }
    per_seed = " && ".join([trace_command(name, {**params, "seed": "$S"}, t)] + [cmds[w] for w in what])
    return _per_seed_loop(scale, seeds, per_seed)


def _per_seed_loop(scale: str, seeds: List[int], body: str, what: str = "one kernel") -> str:
    """The whole table's command, then ``what``'s ``body`` for each seed S."""
    return (f"hugescope reproduce pcc --scale {scale} --seeds {len(seeds)}; {what}: for S in "
            f"{' '.join(map(str, seeds))}; do {body}; done")


def _mt_commands(name: str, params: Dict[str, Any], seeds: List[int], scale: str) -> str:
    """Fig. 8's commands: per seed, the kernel traced per thread count, then
    the per-core PCC runs at that thread count's limits."""
    mt = f"{name}-$S-t$T.hst"
    loops = []
    for bs in sorted({tuple(mt_budgets(name, n)) for n in MT_THREADS}, key=len):
        ts = [n for n in MT_THREADS if tuple(mt_budgets(name, n)) == bs]
        loops.append(f"for T in {' '.join(map(str, ts))}; do "
                     + trace_command(name, {**params, "threads": "$T", "seed": "$S"}, mt)
                     + f" && hugescope multi {mt} --policies {','.join(MT_POLICIES)} --budgets "
                     f"{','.join(f'{b:g}' for b in bs)} --duration {DURATION:g}; done")
    return _per_seed_loop(scale, seeds, "; ".join(loops))


def _evidence(n: Dict[str, Any]) -> str:
    """Why a kernel's speedups look as they do: its walk rates, footprint and
    the TLB reach (PCC Table 2: 1024 L2 entries, 4 MiB of 4KB pages, 2 GiB of 2MB)."""
    fp = n.get("footprint_bytes") or 0
    return (f"{NAMES[n['workload']]} seed {n['seed']}: footprint {mib(fp)} (L2 TLB reach 4 MiB in 4KB pages, 2 GiB "
            f"in 2MB); PTW rate {100 * n['base_ptw_rate']:.2f}% with 4KB pages, {100 * n['ideal_ptw_rate']:.4f}% all "
            f"2MB, {100 * n['pcc4_ptw_rate']:.2f}% with the PCC at 4% ({n['pcc4_promotions']} promotions, "
            f"{100 * n['pcc4_huge_share']:.1f}% of the footprint huge), {100 * n['pcc100_ptw_rate']:.2f}% at ~100%; "
            f"HawkEye at 4%: {n['hawkeye4_promotions']} promotions")


def measure(scale: str, seeds: Sequence[int], traces: str, step: Callable[[str], None],
            reuse: Optional[Dict[str, Dict[int, Dict[str, Any]]]] = None,
            kernels: Optional[Sequence[str]] = None, backend: Optional[Dict[str, Any]] = None) -> tuple:
    """The PCC rows' measurements at ``scale`` over ``seeds``, and the
    evidence table (one row per kernel and seed). ``reuse``: per kernel and
    seed, tables a caller already has (``trace``, ``curve``, ``frag``,
    ``static``); ``kernels``: the kernels to run (default all three);
    ``backend``: where the sweeps run (``run_kernel``)."""
    import pandas as pd

    seeds = list(seeds)
    sized = SCALE_PARAMS[scale]
    names = list(kernels) if kernels is not None else list(KERNELS)
    runs: Dict[str, List[KernelRun]] = {}
    for name in names:
        runs[name] = []
        for s in seeds:
            have = (reuse or {}).get(name, {}).get(s, {})
            path = have.get("trace") or os.path.join(traces, f"{name}-{s}.hst")
            if not have.get("trace") and not os.path.exists(path):
                workloads.trace(name, path, **sized[name], seed=s)
                step(f"{name} seed {s}: trace")
            k = KernelRun(name, s, have.get("params") or sized[name], path)
            k.curve, k.frag, k.static = have.get("curve"), have.get("frag"), have.get("static")
            run_kernel(k, step, backend, traces, drop_traces=scale == "paper")
            runs[name].append(k)
    nums = {name: [k.numbers() for k in ks] for name, ks in runs.items()}
    pair = None
    if all(k in runs for k in MP_PAIR):
        pair = [pair_numbers(runs[MP_PAIR[0]][i].trace, runs[MP_PAIR[1]][i].trace, s, traces, step, backend,
                             drop=scale == "paper") for i, s in enumerate(seeds)]
    evidence = pd.DataFrame([n for ns in nums.values() for n in ns])
    for name, ks in runs.items():
        for k in ks:
            # The trace of a paper-scale kernel is hundreds of MB; what the
            # rows read is in its tables now.
            if scale == "paper" and not (reuse or {}).get(name, {}).get(k.seed, {}).get("trace") \
                    and k.trace.startswith(traces) and os.path.exists(k.trace):
                os.remove(k.trace)
    return _rows(nums, seeds, names, {k: ks[0].params for k, ks in runs.items()}, scale, pair), evidence


def pair_numbers(a: str, b: str, seed: int, traces: str, step: Callable[[str], None],
                 backend: Optional[Dict[str, Any]] = None, drop: bool = False) -> Dict[str, Any]:
    """Fig. 9(b) at one seed: ``a`` and ``b`` merged into two processes and
    run with both selection policies at ``MP_BUDGET``% and all huge; per
    process its speedup (its own cycles) and huge share, and the combined
    speedup."""
    path = os.path.join(traces, f"{MP_PAIR[0]}-{MP_PAIR[1]}-{seed}.hst")
    # Made again from this run's two traces (an older one may pair other
    # inputs); removed afterwards only if this run created it, as the
    # kernels' own traces are.
    existed = os.path.lexists(path)
    experiments.merge([a, b], path)
    rows, procs, _ = experiments.multi(path, policies=list(MT_POLICIES), budgets=[MP_BUDGET], duration=DURATION,
                                       threads=2, **(backend or {}))
    if drop and not existed:
        os.remove(path)
    step(f"{MP_PAIR[0]} beside {MP_PAIR[1]}, seed {seed}")
    out: Dict[str, Any] = {"seed": seed}
    for policy, key in [*MT_POLICIES.items(), ("ideal", "ideal")]:
        budget = None if policy == "ideal" else MP_BUDGET
        role = "reference" if budget is None else "curve"
        out[f"{key}_speedup"] = _one(rows, "merged run", policy=policy, role=role)["speedup_est"]
        for pid, name in enumerate(MP_PAIR):
            q = procs[(procs["policy"] == policy) & (procs["role"] == role) & (procs["pid"] == pid)]
            if len(q) != 1 or q["speedup_est"].isna().any():
                raise HugescopeError(f"pcc reproduction: no per-process speedup of {name} ({policy}) in the merged run")
            out[f"{key}_{name}_speedup"] = float(q["speedup_est"].iloc[0])
            out[f"{key}_{name}_huge_share"] = float(q["huge_share"].iloc[0])
    return out


def _rows(nums: Dict[str, List[Dict[str, Any]]], seeds: List[int], names: List[str],
          params: Dict[str, Dict[str, Any]], scale: str = "ci",
          pair: Optional[List[Dict[str, Any]]] = None) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    per_seed = lambda f: [f(i) for i in range(len(seeds))]  # noqa: E731
    src = lambda ks: "; ".join([*(workload_source(k, params[k], scale) for k in ks), MACHINE, POLICIES])  # noqa: E731
    cmds = lambda k, what: _commands(k, params[k], seeds, what, scale)  # noqa: E731
    every = f"{seeds_word(seeds)}; {', '.join(NAMES[k] for k in names)}"

    def notes(ks) -> str:
        return " | ".join(_evidence(nums[k][0]) for k in ks)

    # ---- Fig. 1: all-2MB speedups and miss rates, Linux at 50%.
    cmd_all = lambda what: "; ".join(cmds(k, what) for k in names)  # noqa: E731
    fits = all((nums[k][0].get("footprint_bytes") or 0) <= 2 << 30 for k in names)
    out.append(measured("f1-ideal-max", per_seed(lambda i: max(nums[k][i]["ideal_speedup"] for k in names)), seeds,
                        src(names), cmd_all(["curve"]), note=f"over {every}. " + notes(names)))
    out.append(measured("f1-ideal-geomean", per_seed(lambda i: geomean(nums[k][i]["ideal_speedup"] for k in names)),
                        seeds, src(names), cmd_all(["curve"]), note=f"over {every}"))
    out.append(measured("f1-miss-reduction",
                        per_seed(lambda i: mean(nums[k][i]["base_walks"] / max(nums[k][i]["ideal_walks"], 1)
                                                for k in names)),
                        seeds, src(names), cmd_all(["curve"]),
                        note=f"over {every}; walks 4KB / 2MB per kernel (seed {seeds[0]}): " + ", ".join(
                            f"{NAMES[k]} {nums[k][0]['base_walks']:,} / {nums[k][0]['ideal_walks']:,}" for k in names)
                        + (": the footprints fit the 2 GiB reach of the L2 TLB in 2MB pages, so all-2MB leaves "
                           "nearly no walk" if fits else "")))
    out.append(measured("f1-linux-50", per_seed(lambda i: geomean(nums[k][i]["frag50_linux_speedup"] for k in names)),
                        seeds, src(names) + "; " + FRAG, cmd_all(["frag"]),
                        note=f"geomean over {every}; at 50% (seed {seeds[0]}): " + "; ".join(
                            f"{NAMES[k]} {nums[k][0]['frag50_linux_speedup']:.3f}x with "
                            f"{100 * nums[k][0]['frag50_linux_huge_share']:.0f}% of the footprint huge" for k in names)))

    # ---- Fig. 5 and the abstract, per kernel.
    for k in names:
        ns = nums[k]
        s = src([k])
        c = cmds(k, ["curve"])
        ev = _evidence(ns[0])
        out.append(measured(f"f5-{k}-speedup", [n["pcc4_speedup"] for n in ns], seeds, s, c, note=ev))
        share = [100 * n["pcc4_speedup"] / n["ideal_speedup"] for n in ns]
        ideal = ", ".join(f"{n['ideal_speedup']:.3f}x" for n in ns)
        out.append(measured(f"f5-{k}-of-ideal", share, seeds, s, c, note=f"all-2MB speedup {ideal}; " + ev))
        out.append(measured(f"abs-{k}-75", share, seeds, s, c, note=f"all-2MB speedup {ideal}"))
        out.append(measured(f"f5-{k}-vs-hawkeye", [n["pcc4_speedup"] for n in ns], seeds, s, c,
                            other=[n["hawkeye4_speedup"] for n in ns], other_label="HawkEye at 4%", note=ev))
    out.append(measured("f5-ptw-reduction",
                        per_seed(lambda i: mean(100 * (nums[k][i]["base_ptw_rate"] - nums[k][i]["pcc4_ptw_rate"])
                                                for k in names)),
                        seeds, src(names), cmd_all(["curve"]), note=f"mean over {every}. " + notes(names)))
    out.append(_reduction_share("f5-ptw-plateau", nums, names, len(seeds), ("base", "pcc4", "pcc100"), seeds,
                                src(names), cmd_all(["curve"]), f"mean over {every}", "no reduction at ~100%",
                                "no kernel's PTW rate falls at ~100%: the plateau share is undefined"))

    # ---- Fig. 6: PCC size at a 32% limit.
    for k in names:
        ns = nums[k]
        s = src([k])
        c = cmds(k, ["sens"])
        sizes = "; ".join(f"seed {n['seed']}: " + ", ".join(f"{e} entries {n[f'pcc{e}e_speedup']:.4f}x"
                                                              for e in SENS_SIZES) for n in ns)
        out.append(measured(f"f6-{k}-rise", [n["pcc32e_speedup"] for n in ns], seeds, s, c,
                            other=[n["pcc4e_speedup"] for n in ns], other_label="4 entries", note=sizes))
        gain = [(n["pcc128e_speedup"] - n["pcc4e_speedup"], n["pcc1024e_speedup"] - n["pcc4e_speedup"]) for n in ns]
        if all(full > 0 for _, full in gain):
            out.append(measured(f"f6-{k}-bulk", [100 * g / full for g, full in gain], seeds, s, c, note=sizes))
        else:
            out.append(missing(f"f6-{k}-bulk", "1024 entries gain nothing over 4 at a 32% limit (" + sizes
                               + "): the share of the gain is undefined", s, c))
    out.append(_reduction_share("f6-miss-plateau", nums, names, len(seeds), ("pcc4e", "pcc128e", "pcc1024e"), seeds,
                                src(names), cmd_all(["sens"]), f"mean over {every}", "1024 entries walk no less than 4",
                                "no kernel walks less with 1024 entries than with 4 at a 32% limit"))

    # ---- Fig. 7: fragmented memory (geomeans over the kernels, per seed).
    f = src(names) + "; " + FRAG
    cf = cmd_all(["frag"])
    g = lambda key, over=None: per_seed(lambda i: geomean(  # noqa: E731
        nums[k][i][key] / (nums[k][i][over] if over else 1.0) for k in names))
    bars = "; ".join(f"{NAMES[k]} seed {nums[k][0]['seed']}: " + ", ".join(
        f"{p} {nums[k][0][f'frag90_{FRAG_KEYS[p]}_speedup']:.3f}x" for p in FRAG_POLICIES) for k in names)
    out.append(measured("f7-vs-base", g("frag90_pcc_speedup"), seeds, f, cf, note=f"at 90%: {bars}"))
    out.append(measured("f7-vs-hawkeye", g("frag90_pcc_speedup", "frag90_hawkeye_speedup"), seeds, f, cf,
                        note=f"at 90%: {bars}"))
    out.append(measured("f7-vs-linux", g("frag90_pcc_speedup", "frag90_linux_speedup"), seeds, f, cf,
                        note=f"at 90%: {bars}"))
    out.append(measured("abs-vs-linux-50", g("frag50_pcc_speedup", "frag50_linux_speedup"), seeds, f, cf,
                        note="at 50%: " + "; ".join(f"{NAMES[k]}: pcc {nums[k][0]['frag50_pcc_speedup']:.3f}x, linux "
                                                     f"{nums[k][0]['frag50_linux_speedup']:.3f}x" for k in names)))
    out.append(measured("f7-demotion", g("frag90_pcc_demotion_speedup", "frag90_pcc_speedup"), seeds, f, cf,
                        note=f"at 90%: {bars}"))

    # ---- Fig. 8: multithread, one PCC per core (§5.2).
    out += _mt_rows(nums, seeds, names, src, lambda k: _mt_commands(k, params[k], seeds, scale), every)

    # ---- Fig. 9(b): PageRank beside SSSP (§5.3).
    if pair is not None:
        out += _pair_rows(pair, seeds, src(list(MP_PAIR)), params, scale)
    else:
        why = (f"Fig. 9(b) runs {NAMES[MP_PAIR[0]]} beside {NAMES[MP_PAIR[1]]}; this run's kernels were "
               f"{', '.join(NAMES[k] for k in names)}")
        out += [missing(r, why) for r in (*(f"f9b-{n}" for n in MP_PAIR), "f9b-best", "f9b-policy")]

    # ---- §5.4.1: page-walk caches, per kernel's base-page run.
    for k in names:
        ns = nums[k]
        out.append(measured(f"pwc-{k}", [n["static_walk_refs"] / n["static_walks"] for n in ns], seeds,
                            src([k]) + "; page-walk caches of the preset (docs/cost-model.md, walker)",
                            cmds(k, ["static"]),
                            note="; ".join(f"seed {n['seed']}: {n['static_walk_refs']:,} references in "
                                           f"{n['static_walks']:,} walks" for n in ns)))

    # ---- Table 1: the footprints run beside the paper's (an input only where a run takes the paper's size).
    for k in names:
        fp = nums[k][0].get("footprint_bytes") or 0
        why = (f"CI scale runs a scaled-down graph ({mib(fp)}); the paper's footprint is reproduced, as an input, at "
               f"paper scale" if scale == "ci" else
               f"paper scale here runs Kronecker {params[k]['scale']} ({mib(fp)}), not the paper's Kronecker 25: the "
               f"largest whose 20 OS-model runs per seed fit the hour on this 2-core machine")
        out.append(measured(f"t1-{k}-kron", [fp / 1e9], [], workload_source(k, params[k], scale), cmds(k, []),
                            not_attempted=why))
    return out


def _mt_rows(nums: Dict[str, List[Dict[str, Any]]], seeds: List[int], names: List[str],
             src: Callable[[List[str]], str], cmd: Callable[[str], str], every: str) -> List[Dict[str, Any]]:
    """Fig. 8's rows: per thread count the geomean over the kernels of the
    highest-frequency policy's speedup at 4% and the mean share of the
    all-huge speedup; the policy ordering over every kernel and thread count;
    BFS with 8 threads above 16% against 16%."""
    per_seed = lambda f: [f(i) for i in range(len(seeds))]  # noqa: E731
    s = src(names) + "; " + MT_DURATION
    c = "; ".join(cmd(k) for k in names)

    def bars(t: int) -> str:
        return "; ".join(
            f"{NAMES[k]} seed {nums[k][0]['seed']}: highest frequency {nums[k][0][f'mt{t}_hf_speedup']:.3f}x "
            f"({nums[k][0][f'mt{t}_hf_promotions']} promotions, PTW rate {100 * nums[k][0][f'mt{t}_hf_ptw_rate']:.2f}%), "
            f"round robin {nums[k][0][f'mt{t}_rr_speedup']:.3f}x ({nums[k][0][f'mt{t}_rr_promotions']} promotions), "
            f"all huge {nums[k][0][f'mt{t}_ideal_speedup']:.3f}x; one thread at {MT_BUDGET}%: "
            f"{nums[k][0]['pcc4_speedup']:.3f}x"
            for k in names)

    out = []
    for t in MT_THREADS:
        hf = f"mt{t}_hf_speedup"
        out.append(measured(f"f8-{t}t", per_seed(lambda i, hf=hf: geomean(nums[k][i][hf] for k in names)), seeds, s, c,
                            note=f"geomean over {every}, {t} threads at {MT_BUDGET}%: {bars(t)}"))
        out.append(measured(f"f8-{t}t-ideal",
                            per_seed(lambda i, t=t: mean(100 * nums[k][i][f"mt{t}_hf_speedup"]
                                                         / nums[k][i][f"mt{t}_ideal_speedup"] for k in names)),
                            seeds, s, c, note=f"mean over {every}, {t} threads at {MT_BUDGET}%: {bars(t)}"))
    over = lambda key: per_seed(lambda i: geomean(nums[k][i][f"mt{t}_{key}_speedup"]  # noqa: E731
                                                  for k in names for t in MT_THREADS))
    threads = "/".join(map(str, MT_THREADS))
    out.append(measured("f8-policy", over("hf"), seeds, s, c, other=over("rr"), other_label="round robin",
                        note=f"geomean over {every} and {threads} threads at {MT_BUDGET}%; "
                             + " | ".join(f"{t} threads: {bars(t)}" for t in MT_THREADS)))
    out.append(measured("intro-mt", over("hf"), seeds, s, c,
                        note=f"geomean over {every} and {threads} threads, highest frequency at {MT_BUDGET}%"))
    name, t, (at, above) = MT_OVERHEAD
    if name in names:
        ns = nums[name]
        out.append(measured(f"f8-{name}-{t}t-overhead", [n[f"mt{t}_hf{above}_speedup"] for n in ns], seeds,
                            src([name]) + "; " + MT_DURATION, cmd(name),
                            other=[n[f"mt{t}_hf{at}_speedup"] for n in ns], other_label=f"{at}%",
                            note=f"{NAMES[name]}, {t} threads, highest frequency at {above}% against {at}%; the model "
                                 f"charges a promotion's copy as daemon time and its TLB shootdown on the program's "
                                 f"path (docs/kernel.md), and has no stall of a thread touching a page under promotion "
                                 f"(docs/assumptions.md, 'Multi-threaded PCC runs')"))
    return out


def _pair_rows(pair: List[Dict[str, Any]], seeds: List[int], src: str, params: Dict[str, Dict[str, Any]],
               scale: str) -> List[Dict[str, Any]]:
    """Fig. 9(b)'s rows from ``pair_numbers`` per seed: each process's
    speedup under the highest-frequency policy (the pcc policy's default),
    the lower of their shares of their all-huge speedups, and round robin
    against highest frequency on the combined speedup."""
    a, b = MP_PAIR
    s = src + "; " + MP_DURATION
    per_seed = " && ".join([trace_command(k, {**params[k], "seed": "$S"}, f"{k}-$S.hst") for k in MP_PAIR] + [
        f"hugescope trace merge {a}-$S.hst {b}-$S.hst -o {a}-{b}-$S.hst",
        f"hugescope multi {a}-{b}-$S.hst --policies {','.join(MT_POLICIES)} --budgets {MP_BUDGET} "
        f"--duration {DURATION:g}"])
    c = _per_seed_loop(scale, seeds, per_seed, what="the pair")
    p0 = pair[0]
    note = (f"seed {p0['seed']}, {MP_BUDGET}% of the combined footprint: " + "; ".join(
        f"{pol}: combined {p0[f'{key}_speedup']:.3f}x, " + ", ".join(
            f"{NAMES[n]} {p0[f'{key}_{n}_speedup']:.3f}x ({100 * p0[f'{key}_{n}_huge_share']:.1f}% of its footprint "
            f"huge at the end)" for n in MP_PAIR)
        for pol, key in (("highest frequency", "hf"), ("round robin", "rr"), ("all huge", "ideal")))
        + "; per-process speedups leave out OS time (the run's, not split by process)")
    out = [measured(f"f9b-{n}", [p[f"hf_{n}_speedup"] for p in pair], seeds, s, c, note=note) for n in MP_PAIR]
    out.append(measured("f9b-best", [min(100 * p[f"hf_{n}_speedup"] / p[f"ideal_{n}_speedup"] for n in MP_PAIR)
                                     for p in pair], seeds, s, c, note=note))
    out.append(measured("f9b-policy", [p["rr_speedup"] for p in pair], seeds, s, c,
                        other=[p["hf_speedup"] for p in pair], other_label="highest frequency", note=note))
    return out


def _reduction_share(row_id: str, nums: Dict[str, List[Dict[str, Any]]], names: List[str], n_seeds: int,
                     keys: Sequence[str], seeds: List[int], src: str, cmd: str, note: str, why_left: str,
                     why_none: str) -> Dict[str, Any]:
    """Per seed, the mean over kernels of the PTW-rate reduction from
    ``keys[0]`` to ``keys[1]`` as a share of that to ``keys[2]`` (percent); a
    kernel with no reduction to ``keys[2]`` is left out (named in the note),
    and with none left the row is not attempted."""
    start, part, full = (f"{k}_ptw_rate" for k in keys)
    vals, left = [], set()
    for i in range(n_seeds):
        v = []
        for k in names:
            n = nums[k][i]
            if n[start] - n[full] > 0:
                v.append(100 * (n[start] - n[part]) / (n[start] - n[full]))
            else:
                left.add(k)
        if not v:
            return missing(row_id, why_none, src, cmd)
        vals.append(mean(v))
    if left:
        note += f"; left out ({why_left}): {', '.join(NAMES[k] for k in sorted(left))}"
    return measured(row_id, vals, seeds, src, cmd, note=note)


def machine_rows() -> List[Dict[str, Any]]:
    """Table 2's cells as the haswell-pcc preset and the pcc policy hold them
    (every one an input: the preset and the policy's defaults are Table 2)."""
    m = api.machine_config(PRESET)
    src = "the haswell-pcc preset (crates/hugescope-core/src/config.rs), resolved by `hugescope config`"
    cmd = f"hugescope config --preset {PRESET}"
    out = [measured("t2-clock", [m["cost"]["cpu_ghz"]], [], src, cmd)]
    for key, size in (("t2-l1-4k", "4k"), ("t2-l1-2m", "2m"), ("t2-l1-1g", "1g")):
        out.append(measured(key, [m["l1"][size]["entries"]], [], src, cmd, note=f"{m['l1'][size]['ways']}-way"))
    out.append(measured("t2-l2", [m["l2"]["4k+2m"]["entries"]], [], src, cmd, note=f"{m['l2']['4k+2m']['ways']}-way"))
    return out


def policy_rows(pcc_settings: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Table 2's PCC cells as the pcc policy resolves its defaults."""
    src = "the pcc policy's defaults (crates/hugescope-core/src/policy/pcc.rs), as a run reports them (policy_params)"
    cmd = "hugescope simulate TRACE --policy pcc --json"
    hw, st = pcc_settings["hardware"], pcc_settings["settings"]
    return [measured("t2-pcc", [hw["entries"]], [], src, cmd,
                     note=f"replacement {hw['replacement']}, {hw['counter_bits']}-bit counters"),
            measured("t2-promotions", [st["regions_to_promote"]], [], src, cmd,
                     note=f"interval {st['interval_s']:g} s")]


def pcc_settings(traces: str) -> Dict[str, Any]:
    """The pcc policy's resolved defaults, from a run on a tiny GUPS trace."""
    path = os.path.join(traces, "pcc-settings-gups.hst")
    if not os.path.exists(path):
        workloads.trace("gups", path, size="4MiB", updates=1000)
    (r,) = api.compare(path, ["pcc"], preset=PRESET)
    return r.record.policy_params.to_dict()
