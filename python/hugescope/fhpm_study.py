"""The experiments of FHPM (Li et al., "FHPM: Fine-grained Huge Page
Management For Virtualization") on this simulator, as named studies
(reference: shared/reference/fhpm.md). FHPM is a host policy: the traced
process stands for the VM, its addresses for guest-physical memory.

* ``monitoring`` (Table 4): a Redis-like store (4KB values, YCSB hotspot:
  80% of operations on a key range of 20%, loaded in hashed order so hot
  values are scattered over the huge pages) under each access monitor --
  base scan (the VM backed by 4KB pages: the truth), huge scan (one A bit per
  2MB), split scan, sampling scan (5% of the huge pages split) and FHPM
  (stage 1 plus companion stage 2) -- as MB of memory per normalized access
  frequency bin. Huge scan overstates the hot set by the hot bloat; FHPM
  should not.
* ``hp-policy`` (Fig 8's microbenchmark): random access, 1:1 reads and
  writes, to exactly 10 regions of every huge page (PSR 0.98). The fixed
  thresholds T = 10 and T = 256 demote every page; FHPM's hot-page-pressure
  policy keeps some huge pages when the pressure is low (a sweep of f_use).

* ``split-collapse`` (Table 6): under the hypervisor model (the traced
  program in a VM, guest Linux THP), the host splits every huge page of the
  VM and collapses it 10 s later while the guest passes sequentially over
  working sets of several sizes, with Linux's split/collapse (the EPT is
  zapped: one exit per 4KB touched afterwards) or FHPM's VM-friendly one
  (refilled eagerly: no exits).

The tiered-memory (``tmm``) and sharing (``sharing``) studies of their own
modules register here with one line each (``register``).

Every figure is an estimate of the cost model or a counter of the OS model;
``shape_checks`` states the paper's claims and whether this run shows them.
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import _core, api, workloads
from .studies import (VERDICT, Steps, StudyResult, Studies, check_choice, check_study_outputs, claim, num,
                      simulate_configs, study_names, trace_dir)

MIB = 1 << 20

#: Table 4's normalized-frequency bins (the policy's stats use the same labels).
FREQ_BINS = ["[0,20)", "[20,40)", "[40,60)", "[60,80)", "[80,100]"]

#: Table 4 as the paper gives it (MB per bin, Redis with 20GB of data).
PAPER_T4 = {"base": [19171, 184, 79, 11, 1029], "huge": [330, 124, 163, 1528, 18186],
            "split": [19243, 183, 82, 11, 955], "sampling": [1144, 38, 491, 975, 17830],
            "fhpm": [19271, 183, 70, 10, 943]}

#: The monitors of Table 4, in the paper's order (label -> fhpm-scan monitor).
MONITORS = [("base scan", "base"), ("huge scan", "huge"), ("split scan", "split"),
            ("sampling scan (5%)", "sampling"), ("FHPM", "fhpm")]

#: Per scale: the workload and OS options of each study. "ci" keeps the
#: studies within about a minute; "paper" runs the paper's footprints where
#: this machine (2 cores, 24 GiB) allows and says where it does not
#: (docs/reproduction.md, "FHPM at paper scale"). Windows: the first opens at
#: start_s (monitoring: after the load phase), the decision is taken at the
#: end of each 10 s window of every 20 s period. Monitoring: the run phase
#: lasts ops / (ops_per_key_s x records) seconds (33 s: one whole window of
#: ``rounds`` 1 s rounds after the first second). Paper scale:
#: - monitoring: 2M 4KB values (8 GiB; the paper's 20GB is 5M, but the kv
#:   generator holds every value, about 1 GB of memory per GiB of store);
#:   the window opens 10 s after the load phase's last access (its 2M page
#:   faults take up to 7.6 s of virtual time) and the run phase lasts 44 s;
#: - hp-policy: the paper's 16GB (8192 huge pages), 8M accesses (each region
#:   about 2 per second: every one seen in a 5 s stage 2), the first window
#:   at 8 s (mapping 8192 huge pages, zeroed at fault, takes about 4 s of
#:   virtual time: a window at 1 s saw 2,287 of them);
#: - split-collapse: the paper's 2-16 GB working sets, reads and writes as
#:   Table 6's two columns, 10 passes; the split at 8 s, after the first pass
#:   has populated 16 GB (at 1 s it has not: part of the VM is not mapped yet),
#:   and one window only (a 16 GB run under Linux's exits outlasts 20 s).
SCALES: Dict[str, Dict[str, Dict[str, Any]]] = {
    "ci": {
        "monitoring": {"params": {"records": 8192, "ops": 5400}, "ops_per_key_s": 0.02, "rounds": 30},
        "hp-policy": {"huge_pages": 32, "accesses": 400_000, "duration": 45.0, "start_s": 1.0,
                      "f_use": [0.5, 0.85, 0.95, 1.0]},
        "split-collapse": {"wss_mib": [16, 32, 64], "passes": 20, "duration": 20.5},
    },
    "paper": {
        "monitoring": {"params": {"records": 2_097_152, "ops": 1_850_000}, "ops_per_key_s": 0.02, "rounds": 30,
                       "settle_s": 10.0},
        "hp-policy": {"huge_pages": 8192, "accesses": 8_000_000, "duration": 45.0, "start_s": 8.0,
                      "f_use": [0.25, 0.5, 0.75, 0.85, 0.95, 1.0]},
        "split-collapse": {"wss_mib": [2048, 4096, 8192, 16384], "passes": 10, "duration": 20.5, "start_s": 8,
                           "period_s": 60, "access": ["read", "write"]},
    },
}

#: The machine of every study (a 4-level x86-64 with 2MB pages).
PRESET = "haswell-pcc"


@dataclass
class Study:
    """One FHPM study: ``run(cfg, tdir, seed, step) -> (rows, extra tables)``,
    its progress ``steps(cfg)``, its claims ``checks(rows)``, the columns
    shown, and a one-line headline ``headline(rows) -> (here, paper)``."""
    run: Callable
    steps: Callable[[Dict[str, Any]], int]
    checks: Callable[[List[Dict[str, Any]]], List[Dict[str, Any]]]
    columns: List[str]
    headline: Callable[[List[Dict[str, Any]]], Tuple[str, str]]


def _f(v, fmt="{:.1f}"):
    return "n/a" if v is None else fmt.format(v)


def _stats(d: Dict[str, Any]) -> Dict[str, Any]:
    return (d.get("policy_params") or {}).get("stats") or {}


# ---------------------------------------------------------------- monitoring (Table 4)

def _monitoring(cfg, tdir, seed, step):
    params = {"value_size": 4096, "distribution": "hotspot", "load_order": "shuffled", "read_ratio": 0.5,
              **cfg["params"], "seed": seed}
    path = os.path.join(tdir, "fhpm-kv.hst")
    summary = workloads.trace("kv", path, **params)["summary"]
    step("monitoring: trace kv")
    # Time: the run phase serves ``ops_per_key_s`` operations per key per
    # second (the paper's Redis: some 100k ops/s over 5M 4KB values, an
    # estimate), so a hot value is touched now and then and a cold one
    # rarely, as in T4's base scan; the first window opens once the load
    # phase is over (its marker's access index at that rate).
    loaded = next((m["index"] for m in summary.get("markers", []) if m["label"] == "loaded"), 0)
    run_accesses = summary["accesses"] - loaded
    rate = cfg["ops_per_key_s"] * params["records"] * run_accesses / params["ops"]
    # ``settle_s`` after the load phase's last access: the load's page
    # faults add virtual time the access index does not count (2M 4KB faults
    # of the base scan's VM take 7.6 s: a window 1 s after the index would
    # open 6 s before the load ends there).
    start_s = round(loaded / rate + cfg.get("settle_s", 1.0), 3)
    # Table 4 is full monitoring (§6.2.2: clears every 1 s throughout): FHPM's
    # companion PTEs are read and cleared with every round of stage 2 too.
    # Its length is not stated; §3 monitors the same Redis "with one scan per
    # second for 30 rounds", so the frequency is read over one window of
    # ``rounds`` 1 s rounds (the period longer than the run: no second
    # window). With 10 rounds a hot value, touched in about one round of 13,
    # lands in [20,40) whenever it is touched twice (binomial: 18% of them).
    window = f",window_s={cfg['rounds']},period_s={cfg['rounds'] + 10}"
    configs = [(label, f"fhpm-scan:monitor={m},remap_rate=0,start_s={start_s}{window}"
                + (",full=true" if m == "fhpm" else ""), {}) for label, m in MONITORS]
    results = simulate_configs(path, configs, PRESET, {"rate": rate, "with_base": False},
                               lambda what: step(f"monitoring: {what}"))
    rows = []
    for (label, spec, _), (_, m), d in zip(configs, MONITORS, results):
        h = _stats(d).get("freq_histogram_mb") or {}
        mb = [float(h.get(b, 0.0)) for b in FREQ_BINS]
        rows.append({"monitor": label, "policy": spec, **{f"mb_{b}": x for b, x in zip(FREQ_BINS, mb)},
                     "hot_mb": mb[-1], "total_mb": sum(mb), "windows": _stats(d).get("windows"),
                     "rounds": _stats(d).get("rounds"),
                     "paper_hot_mb": PAPER_T4[m][-1],
                     "paper_hot_share": PAPER_T4[m][-1] / sum(PAPER_T4[m]), "kind": "estimate"})
    truth = rows[0]
    for r in rows:
        # L1 distance of the histogram from the base scan's (MB moved).
        r["l1_vs_base_mb"] = sum(abs(r[f"mb_{b}"] - truth[f"mb_{b}"]) for b in FREQ_BINS)
        r["hot_share"] = r["hot_mb"] / r["total_mb"] if r["total_mb"] else None
    return rows, {}


def _by_monitor(rows) -> Dict[str, Dict[str, Any]]:
    return {r["monitor"]: r for r in rows}


def _monitoring_checks(rows):
    out: List[Dict[str, Any]] = []
    b = _by_monitor(rows)
    base, huge, fhpm, split = (num((b.get(k) or {}).get("hot_mb")) for k in ("base scan", "huge scan", "FHPM",
                                                                             "split scan"))
    claim(out, "huge scan overstates the hot set by the hot bloat (T4: 18186 vs 1029 MB in [80,100]; here >= 2x "
               "the base scan's)", None if base is None or huge is None else huge >= 2 * base,
          f"huge {_f(huge)} MB vs base {_f(base)} MB")
    claim(out, "FHPM does not: its hottest bin is within 10% of the base scan's (T4: 943 vs 1029 MB, 0.92x; "
               "full monitoring, companion PTEs cleared every round)",
          None if None in (base, huge, fhpm) or base <= 0 else abs(fhpm - base) <= 0.1 * base,
          f"FHPM {_f(fhpm, '{:.3f}')} MB vs base {_f(base, '{:.3f}')} MB ({_f(None if not base else fhpm / base, '{:.2f}')}x; "
          f"huge {_f(huge)} MB)")
    l1 = {k: num((b.get(k) or {}).get("l1_vs_base_mb")) for k in ("FHPM", "huge scan", "sampling scan (5%)")}
    claim(out, "FHPM's histogram is closer to the truth than huge and sampling scans' (T4)",
          None if None in l1.values() else l1["FHPM"] < min(l1["huge scan"], l1["sampling scan (5%)"]),
          ", ".join(f"{k} L1 {_f(v)} MB" for k, v in l1.items()))
    claim(out, "split scan agrees with the base scan (T4: 955 vs 1029 MB)",
          None if base is None or split is None else abs(split - base) <= 0.1 * max(base, 1.0),
          f"split {_f(split)} MB vs base {_f(base)} MB")
    return out


def _monitoring_headline(rows):
    b = _by_monitor(rows)
    here = ", ".join(f"{k} {_f(num((b.get(k) or {}).get('hot_mb')))}" for k in ("base scan", "huge scan", "FHPM"))
    return f"[80,100] MB: {here}", "[80,100] MB: base 1029, huge 18186, FHPM 943"


# ---------------------------------------------------------------- hp-policy (Fig 8 microbenchmark)

#: Where the microbenchmark's memory starts (2MB-aligned, below 2^47).
HP_BASE = 0x7f00_0000_0000


def _ten_regions_trace(path: str, huge_pages: int, accesses: int, seed: int) -> None:
    """Fig 8's microbenchmark as a text trace: ``huge_pages`` 2MB pages with
    exactly 10 4KB regions each (chosen at random, fixed for the run),
    accessed uniformly at random, reads and writes 1:1 (spec §7)."""
    rng = random.Random(seed)
    regions = [HP_BASE + p * 2 * MIB + r * 4096 for p in range(huge_pages) for r in sorted(rng.sample(range(512), 10))]
    with open(path, "w") as f:
        f.write("# fhpm hp-policy microbenchmark: 10 regions per huge page\n")
        # First touch of every region in order (the VM's memory laid out), then random.
        for a in regions:
            f.write(f"{a:#x},W\n")
        for _ in range(accesses):
            f.write(f"{rng.choice(regions) + 64 * rng.randrange(64):#x},{'W' if rng.random() < 0.5 else 'R'}\n")


def _hp_configs(cfg) -> List[Tuple[str, str, Dict[str, Any]]]:
    common = f"remap_rate=0,start_s={cfg['start_s']}"
    return ([("huge pages only", "ideal", {}), ("T=10", f"fhpm-fixed:t=10,{common}", {}),
             ("T=256", f"fhpm-fixed:t=256,{common}", {})]
            + [(f"FHPM f_use={f}", f"fhpm:f_use={f},{common}", {}) for f in cfg["f_use"]])


def _hp_policy(cfg, tdir, seed, step):
    from .tracing import import_trace

    txt, path = os.path.join(tdir, "fhpm-ten-regions.txt"), os.path.join(tdir, "fhpm-ten-regions.hst")
    _ten_regions_trace(txt, cfg["huge_pages"], cfg["accesses"], seed)
    import_trace("text", txt, path)
    os.remove(txt)
    step("hp-policy: trace")
    configs = _hp_configs(cfg)
    # An imported trace declares no footprint: memory is sized here (the
    # VM's plus as much again, so companion pages and collapses have room).
    memory = f"{2 * cfg['huge_pages'] * 2 + 16}MiB"
    results = simulate_configs(path, configs, PRESET, {"duration": cfg["duration"], "memory": memory},
                               lambda what: step(f"hp-policy: {what}"))
    rows = []
    for (label, spec, _), d in zip(configs, results):
        s = _stats(d)
        procs = d.get("processes", [])
        huge = sum(p["huge_bytes"] for p in procs)
        periods = s.get("periods") or []
        rows.append({"config": label, "policy": spec, "huge_pages_left": huge // (2 * MIB),
                     "huge_share": huge / (cfg["huge_pages"] * 2 * MIB),
                     "pages_demoted": s.get("pages_demoted"), "pages_promoted": s.get("pages_promoted"),
                     "s_hot_mb": periods[0]["s_hot_bytes"] / MIB if periods else None,
                     "hp_mb": periods[0]["hp_start_bytes"] / MIB if periods else None,
                     "speedup_est": d.get("speedup_vs_base"),
                     # Translation alone: at this trace length the one-time
                     # 2MB zeroing dominates the OS-inclusive figure.
                     "translation_speedup_est": d.get("translation_speedup_vs_base"),
                     "walk_reduction": d.get("walk_reduction_vs_base"), "kind": "estimate"})
    return rows, {}


def _hp_checks(rows):
    out: List[Dict[str, Any]] = []
    b = {r["config"]: r for r in rows}
    for t in ("T=10", "T=256"):
        h = num((b.get(t) or {}).get("huge_share"))
        claim(out, f"{t} demotes every huge page at Ns = 10 (Fig 8: 'Ns <= T')", None if h is None else h == 0,
              f"huge share {_f(None if h is None else 100 * h)}%")
    fh = [(float(r["config"].split("=")[1]), num(r["huge_share"])) for r in rows if r["config"].startswith("FHPM")]
    fh = sorted((f, h) for f, h in fh if h is not None)
    claim(out, "FHPM keeps some huge pages when the pressure is low (Fig 8; here at the highest f_use)",
          None if not fh else fh[-1][1] > 0, ", ".join(f"f_use {f}: {100 * h:.0f}%" for f, h in fh))
    claim(out, "FHPM demotes more as the pressure grows (lower f_use: no more huge pages kept)",
          None if len(fh) < 2 else all(a[1] <= c[1] for a, c in zip(fh, fh[1:])),
          ", ".join(f"{f}: {100 * h:.0f}%" for f, h in fh))
    return out


def _hp_headline(rows):
    b = {r["config"]: r for r in rows}
    here = ", ".join(f"{r['config']} {100 * r['huge_share']:.0f}%" for r in rows if r["config"] != "huge pages only")
    return f"huge pages kept: {here}", "T=10 and T=256 demote all; FHPM keeps some at low pressure"


# ---------------------------------------------------------------- split-collapse (Table 6)

#: Table 6's access columns: the trace's operation per 4KB page (``rw``:
#: reads and writes alternating page by page, Fig 6's 1:1 program).
ACCESS = {"rw": "read/write", "read": "read", "write": "write"}


def _sequential_trace(path: str, wss_mib: int, passes: int, access: str = "rw") -> None:
    """Sequential passes over ``wss_mib`` MiB, one access per 4KB page:
    reads and writes alternating page by page (``rw``), or only reads or
    only writes (Table 6's two columns)."""
    pages = wss_mib * MIB // 4096
    with open(path, "w") as f:
        f.write(f"# fhpm split-collapse: {passes} sequential {ACCESS[access]} passes over {wss_mib} MiB\n")
        for p in range(passes):
            def op(i: int) -> str:
                return ("W" if (i + p) % 2 else "R") if access == "rw" else ("W" if access == "write" else "R")
            f.writelines(f"{HP_BASE + i * 4096:#x},{op(i)}\n" for i in range(pages))


def _split_collapse(cfg, tdir, seed, step):
    """Every huge page of the VM split at ``start_s`` (1 s) and collapsed 10 s
    later (the split scan's window, one A-bit round) by the host, Linux's
    way or the VM-friendly way; the guest (Linux THP) passes over its working
    set the whole time (``access``: the scale's columns). VM exits that
    follow an EPT zap are the split/collapse's. ``period_s``, when set, keeps
    a second window out of a run that the exits stretch."""
    from .tracing import import_trace

    rows = []
    for access in cfg.get("access", ["rw"]):
        for wss in cfg["wss_mib"]:
            name = f"fhpm-seq-{wss}" + ("" if access == "rw" else f"-{access}")
            txt, path = os.path.join(tdir, f"{name}.txt"), os.path.join(tdir, f"{name}.hst")
            _sequential_trace(txt, wss, cfg["passes"], access)
            import_trace("text", txt, path)
            os.remove(txt)
            for label, friendly in (("Linux", "false"), ("VM-friendly", "true")):
                host = (f"fhpm-scan:monitor=split,friendly={friendly},round_s=10,remap_rate=0,"
                        f"start_s={cfg.get('start_s', 1)}" + (f",period_s={cfg['period_s']}" if "period_s" in cfg else ""))
                d = api.compare(path, ["linux"], preset=PRESET, host_policy=host, with_base=False,
                                duration=cfg["duration"], memory=f"{2 * wss + 64}MiB")[0].to_dict()
                v = d.get("virt") or {}
                exits = v.get("vm_exits") or {}
                after = exits.get("ept_violation_after_zap")
                rows.append({"wss_mib": wss, "access": ACCESS[access], "config": label, "host_policy": host,
                             "vm_exits": exits.get("total"), "vm_exits_after_zap": after,
                             "exits_per_4kb": None if after is None else after / (wss * MIB // 4096),
                             # The host's splits (every huge page of the VM, guest tables included).
                             "host_splits": (v.get("host_os_stats") or {}).get("demotions"),
                             "kind": "estimate"})
                step(f"split-collapse: {wss} MiB {ACCESS[access]} {label}")
    return rows, {}


def _sc_checks(rows):
    out: List[Dict[str, Any]] = []
    lin = sorted((r["wss_mib"], num(r["exits_per_4kb"])) for r in rows if r["config"] == "Linux")
    fr = sorted((r["wss_mib"], num(r["vm_exits_after_zap"])) for r in rows if r["config"] == "VM-friendly")
    claim(out, "Linux's split+collapse costs about one VM exit per 4KB of working set (T6: 1.04)",
          None if not lin or any(x is None for _, x in lin) else all(0.9 <= x <= 1.2 for _, x in lin),
          ", ".join(f"{w} MiB: {x:.3f}" for w, x in lin if x is not None))
    claim(out, "the VM-friendly variant's exits stay near constant, far below Linux's (T6: 915-1,215 at every size)",
          None if not fr or any(x is None for _, x in fr) else max(x for _, x in fr) <= 0.01 * max(
              (w * MIB // 4096) for w, _ in fr),
          ", ".join(f"{w} MiB: {x:,.0f}" for w, x in fr if x is not None))
    return out


def _sc_headline(rows):
    here = "; ".join(f"{r['wss_mib']} MiB {r.get('access', 'read/write')} {r['config']} {r['vm_exits_after_zap']}"
                     for r in rows)
    return f"exits after zaps: {here}", "2GB: Linux 545,715 read vs friendly 1,197; ~1.04 exits per 4KB"


# ---------------------------------------------------------------- registry

#: The studies by name, in the order they run: each registers with one line.
RUNNERS: Dict[str, Study] = {
    "monitoring": Study(_monitoring, lambda cfg: 1 + 1, _monitoring_checks,
                        ["monitor", *(f"mb_{b}" for b in FREQ_BINS), "l1_vs_base_mb", "paper_hot_mb"],
                        _monitoring_headline),
    "hp-policy": Study(_hp_policy, lambda cfg: 1 + 1, _hp_checks,
                       ["config", "huge_pages_left", "huge_share", "pages_demoted", "pages_promoted", "hp_mb",
                        "translation_speedup_est"], _hp_headline),
    "split-collapse": Study(_split_collapse, lambda cfg: len(cfg["wss_mib"]) * 2 * len(cfg.get("access", ["rw"])),
                            _sc_checks, ["wss_mib", "access", "config", "host_splits", "vm_exits", "vm_exits_after_zap", "exits_per_4kb"], _sc_headline),
}

#: The study names (kept in step with RUNNERS by ``register``).
STUDIES: List[str] = list(RUNNERS)

#: Columns shown per study (the CLI's table; all are in the saved CSV).
COLUMNS: Dict[str, List[str]] = {name: s.columns for name, s in RUNNERS.items()}


def register(name: str, study: Study, scales: Dict[str, Dict[str, Any]]) -> None:
    """Add a study (another module's: ``tmm``, ``sharing``, ``split-collapse``)
    with its configuration per scale (``"ci"`` and ``"paper"``)."""
    RUNNERS[name] = study
    if name not in STUDIES:
        STUDIES.append(name)
    COLUMNS[name] = study.columns
    for scale, cfg in scales.items():
        SCALES.setdefault(scale, {})[name] = cfg


def shape_checks(study: str, rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The paper's claims for ``study``, each PASS/FAIL on these rows."""
    return RUNNERS[study].checks(rows)


# ---------------------------------------------------------------- running

def _names(studies) -> List[str]:
    return study_names(studies, STUDIES)


def check_args(studies, scale: str) -> List[str]:
    """The studies to run (default all); an unknown study or scale is one error line."""
    names = _names(studies)
    check_choice(scale, "scale", list(SCALES))
    return names


def fhpm_studies(studies: Optional[Sequence[str]] = None, scale: str = "ci", seed: int = 1,
                 traces: Optional[str] = None,
                 progress: Optional[Callable[[str, int, int], None]] = None) -> Studies:
    """Run the FHPM studies (module docstring): ``studies`` a subset of
    ``STUDIES`` (default all), ``scale`` ``"ci"`` or ``"paper"``, ``seed`` of
    every workload; ``traces`` a directory to keep the generated traces in.
    ``progress(step, done, total)`` is called as work completes."""
    import pandas as pd

    names = check_args(studies, scale)
    seed = int(seed)
    cfgs = {s: SCALES[scale][s] for s in names}
    step = Steps(sum(RUNNERS[s].steps(c) for s, c in cfgs.items()), progress)
    out: Dict[str, StudyResult] = {}
    with trace_dir(traces, "hugescope-fhpm-") as tdir:
        for s in names:
            rows, extra = RUNNERS[s].run(cfgs[s], tdir, seed, step)
            meta = {"hugescope_version": _core.version(), "kind": "estimate", "study": s, "scale": scale,
                    "preset": PRESET, "seed": seed, "config": cfgs[s]}
            out[s] = StudyResult("fhpm", s, pd.DataFrame(rows), {k: pd.DataFrame(v) for k, v in extra.items()},
                                 meta, shape_checks)
    meta = {"hugescope_studies": "fhpm", "hugescope_version": _core.version(), "kind": "estimate",
            "scale": scale, "seed": seed, "studies": names, "preset": PRESET}
    return Studies(out, meta)


def headlines(result: Studies) -> List[Dict[str, Any]]:
    """One line per study: its headline figures beside the paper's, and
    whether all of its claims hold."""
    out = []
    for name, s in result.studies.items():
        here, paper = RUNNERS[name].headline(s.table.to_dict("records"))
        verdicts = [c["holds"] for c in s.checks()]
        holds = False if False in verdicts else (None if None in verdicts or not verdicts else True)
        out.append({"study": name, "this run (estimates)": here, "paper": paper, "claims": VERDICT[holds]})
    return out


def save(result: Studies, out: str, plots: bool = True) -> Dict[str, str]:
    """Write each study's ``OUT/fhpm-STUDY.csv``, ``-checks.csv``, ``.json`` and figure."""
    return result.save(out, plots)


def check_outputs(out: str, studies: Optional[Sequence[str]] = None, plots: bool = True) -> None:
    """Before any trace is made: refuse any file :func:`save` would write that must not be replaced."""
    for s in _names(studies):
        check_study_outputs(f"fhpm-{s}", out, f"fhpm-{s}", ("checks",), plots)


# ---------------------------------------------------------------- the consumers' studies (other modules)

def _adapted(run_fn, study: str):
    """A ``Study.run`` for a module whose runner returns a ``StudyResult``
    (``fhpm_tmm.run_tmm``, ``fhpm_share.run_sharing``): its steps counted in
    this run's progress, its table and extra tables handed back as rows."""
    def run(cfg, tdir, seed, step):
        r = run_fn(scale=cfg["scale"], seed=seed, traces=tdir, progress=lambda what, done, total: step(what))
        return r.table.to_dict("records"), {k: v.to_dict("records") for k, v in r.extra.items()}
    return run


def _sharing_headline(rows):
    from . import fhpm_share
    import pandas as pd

    h = fhpm_share.headline(StudyResult("fhpm", "sharing", pd.DataFrame(rows), {}, {}, fhpm_share.shape_checks))
    return h["this run (estimates)"], h["paper"]


def _tmm_headline(rows):
    from . import fhpm_tmm

    here = ", ".join(f"{r['config']} u={r['u']:g} {_f(num(r.get('perf_norm')), '{:.2f}')}"
                     for r in rows if r["u"] in (0.0, 1.0) and r["config"] != fhpm_tmm.BASELINE)
    return here, fhpm_tmm.PAPER["tmm"]


def _register_consumers() -> None:
    from . import fhpm_share, fhpm_tmm

    register("tmm", Study(_adapted(fhpm_tmm.run_tmm, "tmm"), lambda cfg: 2 * len(fhpm_tmm.US),
                          lambda rows: fhpm_tmm.shape_checks("tmm", rows), fhpm_tmm.COLUMNS["tmm"], _tmm_headline),
             {scale: {"scale": scale} for scale in fhpm_tmm.SCALES})
    register("sharing", Study(_adapted(fhpm_share.run_sharing, "sharing"), lambda cfg: len(fhpm_share.VMS) + 1,
                              lambda rows: fhpm_share.shape_checks("sharing", rows), fhpm_share.COLUMNS,
                              _sharing_headline),
             {scale: {"scale": scale} for scale in fhpm_share.SCALES})


_register_consumers()
