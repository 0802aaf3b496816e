"""FHPM's tiered-memory study (Li et al., "FHPM: Fine-grained Huge Page
Management For Virtualization", §2.2 Fig 2; reference: shared/reference/fhpm.md
§6, §7, §11) on this simulator:

* ``tmm`` (Fig 2): the PSR microbenchmark (workload ``psr``: random 1:1
  reads/writes over hot data of constant size, a share ``u`` of it in
  unbalanced 2MB pages whose 4KB regions are only 10% used) with a fast tier
  twice the hot data, for ``u`` in 0, 0.25, 0.5, 0.75, 1. Estimated
  performance of HMM-v-Huge (tracking, ranking and migration at 2MB) and
  HMM-v-Base (all at 4KB), normalized to every page 2MB with everything in
  the fast tier. The paper's shape: HMM-v-Huge is best at u = 0 and falls
  as u grows (hot bloat: a 2MB page with a few hot regions fills the fast
  tier with cold data), below HMM-v-Base, which tracks hot data exactly but
  loses TLB reach.

FHPM-TMM itself (the ``fhpm`` policy with ``consumer=tmm``) joins the sweep
when that policy is registered (``FHPM_TMM``); it is not part of this module.
Runs are virtualized by default (``virt=True``): the psr program runs in a VM
whose guest maps every region 2MB (guest THP always: ``ideal``), and the
tiered-memory policy runs in the host on the EPT (the VM process's page
table), as HMM-v does; the tiers are the host's. ``virt=False`` runs the
policy natively on the program's own page table. Every figure is an estimate of the cost
model (memory time by tier: ``os.tier_*``) or a counter of the OS model;
``shape_checks`` states the paper's claims and whether this run shows them.

Entry points: :func:`run_tmm` (the ``tmm`` study as a ``StudyResult``),
:func:`tmm_studies` (``Studies``, as ``navarro_studies``), :func:`shape_checks`,
:func:`headlines`, :func:`check_outputs`.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import _core, workloads
from .studies import (VERDICT, Steps, StudyResult, Studies, check_choice, check_study_outputs, claim, num,
                      simulate_configs, study_names, trace_dir)

#: The studies, in the order they run and are reported.
STUDIES = ["tmm"]

#: The machine: an x86-64 core with 4KB and 2MB pages (the paper's Cascade Lake).
PRESET = "haswell-pcc"

#: The unbalanced shares of Fig 2's x axis.
US = [0.0, 0.25, 0.5, 0.75, 1.0]
#: The smallest gap in normalized performance an ordering claim counts: the
#: resolution of a speedup row in the reproduction table (fhpm.toml).
RESOLUTION = 0.02

#: The normalization baseline: every page 2MB, all memory fast (spec §9):
#: the same fast tier, with slow frames as fast as fast ones.
BASELINE = "all 2MB, all fast"

#: The guest policy of a virtualized run: guest THP always (spec §11), so
#: the baseline's walks are 2MB/2MB.
GUEST = "ideal"

#: The configurations: label -> policy spec (each scale adds HMM-v's round
#: knobs). ``ideal`` maps every region 2MB at first touch.
CONFIGS: List[Tuple[str, str]] = [(BASELINE, "ideal"), ("HMM-v-Huge", "hmmv:granularity=huge"),
                                  ("HMM-v-Base", "hmmv:granularity=base")]

#: FHPM-TMM, added to the sweep when the ``fhpm`` policy exists.
FHPM_TMM = ("FHPM-TMM", "fhpm:consumer=tmm")

#: FHPM-TMM's monitoring clock in these 10 s runs (the paper's 1 s rounds,
#: 10 s window of every 20 s, scaled by 1/10 as HMM-v's placements are):
#: rounds of 0.25 s, two of stage 1, a 1 s window every 2 s.
FHPM_CLOCK = "round_s=0.25,stage1_rounds=2,window_s=1,period_s=2"

#: Per scale: the psr parameters (the paper's 40GB footprint and 4GB hot data
#: scaled with their 10:1 ratio), the fast tier (the paper's 8GB: twice the
#: hot data; memory is the OS model's default, the slow tier the rest), the virtual
#: duration the trace spans and HMM-v's rounds (an A-bit round every
#: ``interval`` s, a placement every ``rounds`` rounds: 10 placements).
#: No cold accesses: the paper's program "focus[es] on accessing 4GB"; with
#: the workload's default 1% spread over the cold 2MB pages, every one of
#: them is accessed in every round, at the paper's rates as here, and no
#: A-bit scanner at 2MB could find the hot data even at u=0 (against Fig 2).
SCALES: Dict[str, Dict[str, Any]] = {
    "ci": {"psr": {"footprint": "256MiB", "hot": "24MiB", "accesses": "2M", "cold": 0}, "fast": "48MiB",
           "duration": 10.0, "interval": 0.5, "rounds": 2, "fhpm": FHPM_CLOCK},
    "paper": {"psr": {"footprint": "4GiB", "hot": "400MiB", "accesses": "20M", "cold": 0}, "fast": "800MiB",
              "duration": 10.0, "interval": 0.5, "rounds": 2, "fhpm": FHPM_CLOCK},
}

#: The paper's Fig 2 as text (its exact values are read off a plot).
PAPER = {"tmm": "HMM-v-Huge optimal at u=0, below HMM-v-Base as u grows"}

#: The columns shown (terminal and report; all in the saved table).
COLUMNS = {"tmm": ["u", "config", "perf_norm", "fast_access_share", "fast_huge_ratio", "promoted_mib",
                   "demoted_mib", "recopied_mib", "dtlb_misses", "vm_exits"]}

MIB = 1 << 20


def _policies() -> List[str]:
    return [name for name, _ in _core.policies()]


def _configs(cfg: Dict[str, Any], with_fhpm: bool, virt: bool) -> List[Tuple[str, str, Dict[str, Any]]]:
    """(label, spec, options) of every configuration at this scale: the
    scale's fast tier, and for the baseline slow frames as fast as fast
    ones. Virtualized, the spec is the guest's and the policy the host's."""
    rounds = f"interval={cfg['interval']},rounds={cfg['rounds']}"
    out = []
    for label, spec in CONFIGS + ([FHPM_TMM] if with_fhpm else []):
        if spec.startswith("hmmv"):
            spec = f"{spec},{rounds}"
        elif spec.startswith("fhpm"):
            spec = f"{spec},{cfg['fhpm']}"
        opts: Dict[str, Any] = {"set": [f"os.tier_fast={cfg['fast']}"]
                                + (["os.tier_slow_ns=90"] if label == BASELINE else [])}
        if virt:
            spec, opts = GUEST, {**opts, "host_policy": spec}
        out.append((label, spec, opts))
    return out


def _row(u: float, label: str, spec: str, d: Dict[str, Any]) -> Dict[str, Any]:
    # The tiers are the host's in a virtualized run.
    host = (d.get("virt") or {}).get("host_os_stats") or d["os_stats"]
    t = host.get("tiers") or {}
    exits = ((d.get("virt") or {}).get("vm_exits") or {})
    return {"u": u, "config": label, "policy": spec, "total_cycles": d["cost"]["total_cycles"],
            "vm_exits": exits.get("total"), "exits_after_zap": exits.get("ept_violation_after_zap"),
            "memory_cycles": d["cost"].get("memory_cycles", 0.0), "translation_cycles": d["cost"]["translation_cycles"],
            "os_cycles": d["cost"]["os_cycles"], "dtlb_misses": d["translation"]["walks"],
            "fast_access_share": t.get("fast_access_share"), "fast_huge_ratio": t.get("fast_huge_ratio"),
            "promoted_mib": t.get("promoted_bytes", 0) / MIB, "demoted_mib": t.get("demoted_bytes", 0) / MIB,
            "host_compacted_pages": host.get("compaction_migrated_pages", 0),
            "recopied_mib": t.get("recopied_bytes", 0) / MIB, "migration_failures": t.get("migration_failures"),
            "placements": t.get("placements"), "kind": "estimate"}


def _tmm(paths: Dict[float, str], cfg: Dict[str, Any], step, with_fhpm: bool, virt: bool) -> List[Dict[str, Any]]:
    configs = _configs(cfg, with_fhpm, virt)
    rows = []
    for u, path in paths.items():
        results = simulate_configs(path, configs, PRESET, {"duration": cfg["duration"], "with_base": False},
                                   lambda what, u=u: step(f"u={u}: {what}"))
        base = results[0]["cost"]["total_cycles"]
        for (label, spec, opts), d in zip(configs, results):
            r = _row(u, label, opts.get("host_policy", spec), d)
            r["perf_norm"] = base / r["total_cycles"] if r["total_cycles"] else None
            rows.append(r)
    return rows


def _perf(rows, config: str) -> Dict[float, Optional[float]]:
    return {r["u"]: num(r.get("perf_norm")) for r in rows if r["config"] == config}


def _f(v, fmt="{:.3f}"):
    return "n/a" if v is None else fmt.format(v)


def shape_checks(study: str, rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Fig 2's claims on these rows, each PASS/FAIL (or not testable when
    the run lacks what the claim needs)."""
    out: List[Dict[str, Any]] = []
    if study != "tmm":
        return out
    huge, base = _perf(rows, "HMM-v-Huge"), _perf(rows, "HMM-v-Base")
    us = sorted(u for u in huge if huge[u] is not None and base.get(u) is not None)
    lo, hi = (us[0], us[-1]) if us else (None, None)
    h0, b0 = (huge[lo], base[lo]) if us else (None, None)
    # "Near": the first placement comes after two 0.5 s rounds of the 10 s
    # run, a warm-up with the hot data where allocation put it (mostly slow).
    claim(out, "at u=0 (all hot pages balanced) HMM-v-Huge is the better baseline, within 20% of all-fast 2MB "
               "(Fig 2: optimal; here 1 s of 10 is warm-up)",
          None if not us or lo != 0.0 else h0 > b0 and h0 >= 0.8,
          f"u=0: Huge {_f(h0)}, Base {_f(b0)} of all-fast 2MB")
    hs = [huge[u] for u in us]
    claim(out, "HMM-v-Huge falls as u grows (hot bloat fills the fast tier with cold regions)",
          None if len(us) < 3 else all(b <= a + 0.01 for a, b in zip(hs, hs[1:])) and hs[-1] < hs[0] - 0.1,
          ", ".join(f"u={u}: {huge[u]:.3f}" for u in us))
    claim(out, "HMM-v-Huge ends below HMM-v-Base at high u (Fig 2: the lines cross)",
          None if not us or hi != 1.0 else huge[hi] < base[hi],
          f"u=1: Huge {_f(huge.get(1.0))}, Base {_f(base.get(1.0))}")
    bs = [base[u] for u in us]
    claim(out, "HMM-v-Base stays roughly flat over u (it tracks hot 4KB regions exactly; within 10%)",
          None if len(us) < 2 else max(bs) - min(bs) <= 0.1 * max(bs),
          f"{min(bs):.3f}..{max(bs):.3f}" if bs else "n/a")
    fh = _perf(rows, FHPM_TMM[0])
    common = [u for u in us if u > 0 and fh.get(u) is not None]
    if fh:
        # Fig 2: FHPM-TMM best at every u. Here it is for every u > 0; at
        # u = 0 the paper's claim is a tie with HMM-v-Huge ("optimal"; §6.5:
        # 1% apart on GAPBS-PR, the companion pages' monitoring), and here
        # FHPM-TMM trails it by more (issue #35, row f2-u0-fhpm-vs-huge): the
        # placement is the same (equal fast-tier access share), the gap is the
        # translations of stage 2, whose companion pages map every hot huge
        # page with 4KB entries for 0.5 s of each 2 s period (the spec's 5 s
        # of 20, the stage split the paper leaves open) on a random-access
        # program far beyond 4KB TLB reach. ``companion_cost`` states that cause.
        claim(out, f"FHPM-TMM beats both HMM-v baselines by more than {RESOLUTION} at every u > 0 (Fig 2: best at "
                   "every u)",
              None if not common else all(fh[u] > max(huge[u], base[u]) + RESOLUTION for u in common),
              ", ".join(f"u={u}: FHPM {_f(fh[u])} vs Huge {_f(huge[u])}, Base {_f(base[u])}" for u in common))
        claim(out, "at u=0 FHPM-TMM places as HMM-v-Huge does (fast-tier access share within 1 point); what it "
                   "trails by is stage 2's 4KB translations (more TLB misses, not memory time)",
              companion_cost(rows), _u0_detail(rows))
    return out


def _at(rows, config: str, u: float) -> Optional[Dict[str, Any]]:
    return next((r for r in rows if r["config"] == config and r["u"] == u), None)


def companion_cost(rows: List[Dict[str, Any]]) -> Optional[bool]:
    """Whether FHPM-TMM's gap to HMM-v-Huge at u=0 is translation, not
    placement: the same fast-tier access share (within 1 point), memory time
    within 1%, and more DTLB misses (None: the run lacks u=0 or a config)."""
    h, f = _at(rows, "HMM-v-Huge", 0.0), _at(rows, FHPM_TMM[0], 0.0)
    if h is None or f is None or None in (num(h.get("fast_access_share")), num(f.get("fast_access_share"))):
        return None
    return (abs(f["fast_access_share"] - h["fast_access_share"]) <= 0.01
            and abs(f["memory_cycles"] - h["memory_cycles"]) <= 0.01 * h["memory_cycles"]
            and f["dtlb_misses"] > 10 * max(h["dtlb_misses"], 1))


def _u0_detail(rows) -> str:
    h, f = _at(rows, "HMM-v-Huge", 0.0), _at(rows, FHPM_TMM[0], 0.0)
    if h is None or f is None:
        return "n/a"
    return (f"u=0: FHPM {_f(num(f.get('perf_norm')))} vs Huge {_f(num(h.get('perf_norm')))}; fast-tier access share "
            f"{_f(num(f.get('fast_access_share')))} vs {_f(num(h.get('fast_access_share')))}; memory cycles "
            f"{f['memory_cycles']:.3g} vs {h['memory_cycles']:.3g}; DTLB misses {f['dtlb_misses']:,} vs {h['dtlb_misses']:,}")


# ---------------------------------------------------------------- running

def check_args(studies, scale: str) -> List[str]:
    """The studies to run (``tmm``); a name that is no study or a scale that
    is none gives one error line."""
    names = study_names(studies, STUDIES)
    check_choice(scale, "scale", list(SCALES))
    return names


def _psr_params(scale: str, u: float, seed: int) -> Dict[str, Any]:
    return {**SCALES[scale]["psr"], "u": u, "seed": seed}


def run_tmm(scale: str = "ci", seed: int = 1, traces: Optional[str] = None,
            progress: Optional[Callable[[str, int, int], None]] = None, us: Sequence[float] = US,
            fhpm: Optional[bool] = None, virt: bool = True) -> StudyResult:
    """The ``tmm`` study (module docstring) as a ``StudyResult``: one row per
    ``u`` and configuration. ``fhpm`` adds FHPM-TMM (default: when the
    ``fhpm`` policy is registered); ``virt`` runs the policies in the host
    under the hypervisor (default) or natively. ``traces`` a directory to
    keep the psr traces in (default a temporary one)."""
    import pandas as pd

    check_choice(scale, "scale", list(SCALES))
    seed = int(seed)
    with_fhpm = ("fhpm" in _policies()) if fhpm is None else bool(fhpm)
    cfg = SCALES[scale]
    us = [float(u) for u in us]
    step = Steps(2 * len(us), progress)
    with trace_dir(traces, "hugescope-fhpm-tmm-") as tdir:
        paths: Dict[float, str] = {}
        for u in us:
            paths[u] = os.path.join(tdir, f"fhpm-psr-u{u:g}.hst")
            workloads.trace("psr", paths[u], **_psr_params(scale, u, seed))
            step(f"tmm: trace psr u={u:g}")
        rows = _tmm(paths, cfg, step, with_fhpm, bool(virt))
    meta = {"hugescope_version": _core.version(), "kind": "estimate", "study": "tmm", "scale": scale,
            "preset": PRESET, "seed": seed, "virtualized": bool(virt), "guest_policy": GUEST if virt else None,
            "workloads": {f"u={u:g}": ["psr", _psr_params(scale, u, seed)] for u in us},
            "os_options": {"duration": cfg["duration"], "fast": cfg["fast"]},
            "configs": [[lbl, spec, opts] for lbl, spec, opts in _configs(cfg, with_fhpm, bool(virt))],
            "paper": PAPER["tmm"]}
    return StudyResult("fhpm", "tmm", pd.DataFrame(rows), {}, meta, shape_checks)


RUNNERS: Dict[str, Callable[..., StudyResult]] = {"tmm": run_tmm}


def tmm_studies(studies: Optional[Sequence[str]] = None, scale: str = "ci", seed: int = 1,
                traces: Optional[str] = None, progress: Optional[Callable[[str, int, int], None]] = None,
                virt: bool = True) -> Studies:
    """The studies of this module as ``Studies`` (as ``navarro_studies``)."""
    names = check_args(studies, scale)
    out = {s: RUNNERS[s](scale=scale, seed=seed, traces=traces, progress=progress, virt=virt) for s in names}
    meta = {"hugescope_studies": "fhpm", "hugescope_version": _core.version(), "kind": "estimate",
            "scale": scale, "seed": int(seed), "studies": names, "presets": {s: PRESET for s in names}}
    return Studies(out, meta)


def headlines(result: Studies) -> List[Dict[str, Any]]:
    """One line per study: normalized performance at u=0 and u=1, the
    paper's shape, and whether all claims hold."""
    out = []
    for name, s in result.studies.items():
        rows = s.table.to_dict("records")
        huge, base = _perf(rows, "HMM-v-Huge"), _perf(rows, "HMM-v-Base")
        here = (f"Huge {_f(huge.get(0.0), '{:.2f}')} -> {_f(huge.get(1.0), '{:.2f}')}, "
                f"Base {_f(base.get(0.0), '{:.2f}')} -> {_f(base.get(1.0), '{:.2f}')} (u=0 -> 1)")
        verdicts = [c["holds"] for c in s.checks()]
        holds = False if False in verdicts else (None if None in verdicts or not verdicts else True)
        out.append({"study": name, "this run (estimates)": here, "paper": PAPER[name], "claims": VERDICT[holds]})
    return out


def check_outputs(out: str, studies: Optional[Sequence[str]] = None, plots: bool = True) -> None:
    """Before any trace is made: refuse any file ``Studies.save`` would
    write in ``out`` that must not be replaced."""
    for s in study_names(studies, STUDIES):
        check_study_outputs(f"fhpm-{s}", out, f"fhpm-{s}", ("checks",), plots)
