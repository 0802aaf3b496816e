"""The experiments of reservation-based superpages (Navarro, Iyer, Druschel
and Cox, "Practical, transparent operating system support for superpages",
OSDI'02) on this simulator, and the same question asked of today's Linux
multi-size THP, as named studies (reference: shared/reference/navarro.md):

* ``best-case`` (Table 1): every preferred reservation succeeds (memory
  plentiful). Per workload: superpages per size at the end of the run, DTLB
  misses against base pages, the estimated speedup; with the paper's own
  programs (Matrix, Tree, FFTW) and its overhead programs (the adversary, the
  4MB stride, cmp of two mapped files).
* ``sizes`` (Tables 2 and 3): each superpage size alone against all sizes.
* ``preemption`` (§6.6): a process touching memory with a 4MB stride when
  only 4MB of memory is available and contiguous: one reservation is
  preempted every seven allocations (hand count: 9 preemptions for 64
  touches), and the slowdown over base pages on the same memory.
* ``writeback`` (§6.7): a mapped file read wholly, every 512th page written,
  flushed: bytes written back with demote-on-write (the write-protect trap)
  and without it (dirty superpages written whole), and the time the flush
  takes at the model's disk cost per page written (``os.writeback_us``).
* ``sustained`` (§6.5, Fig. 5): a stream of short-lived processes on memory
  with a page daemon, plain approximate-LRU against Navarro's
  contiguity-aware daemon: contiguity over time and superpages obtained.
* ``mthp`` (2026): the same workloads on an arm64 machine with mTHP folios:
  Linux's PMD-only THP, mTHP with each folio size, and Navarro's
  reservations, with and without the TLB's contiguous-PTE coalescing.

Every figure is an estimate of the cost model or a counter of the OS model;
``shape_checks`` states the paper's claims and whether this run shows them.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import _core, workloads
from .studies import (VERDICT, Steps, StudyResult, Studies, check_choice, check_study_outputs, claim, num, run_row,
                      simulate_configs, study_names, trace_dir)

#: The studies, in the order they run and are reported.
STUDIES = ["best-case", "sizes", "preemption", "writeback", "sustained", "mthp"]

#: The machine of each study: the paper's Alpha 21264 (8KB base; 64KB,
#: 512KB, 4MB; a 128-entry fully associative DTLB), and for ``mthp`` an arm64
#: core with Linux's mTHP folios and 64KB contiguous-PTE TLB entries.
PRESETS = {"best-case": "alpha-21264", "sizes": "alpha-21264", "preemption": "alpha-21264", "writeback": "alpha-21264",
           "sustained": "alpha-21264", "mthp": "arm64-mthp"}

#: The workloads of each study (label -> built-in workload and its fixed
#: parameters). Scale-dependent sizes are in SCALES.
WORKLOADS: Dict[str, Dict[str, Tuple[str, Dict[str, Any]]]] = {
    "best-case": {"Matrix": ("matrix", {}), "Tree": ("rbtree", {}), "FFTW": ("fftw", {}),
                  "GUPS": ("gups", {}), "adversary": ("adversary", {}), "cmp": ("cmp", {})},
    "preemption": {"4MB stride": ("stride4m", {})},
    "sizes": {"Matrix": ("matrix", {}), "Tree": ("rbtree", {}), "FFTW": ("fftw", {}), "GUPS": ("gups", {}),
              "Canneal": ("canneal", {})},
    "writeback": {"dirty file": ("dirtyfile", {})},
    "mthp": {"Matrix": ("matrix", {}), "Tree": ("rbtree", {}), "GUPS": ("gups", {})},
    # 8KB values loaded, 70% deleted at random, then GETs: its live pages
    # end up scattered over physical memory, as the Web server's cache did.
    "sustained": {"server": ("redis", {}), "FFTW": ("fftw", {})},
}

#: Configurations per study: (label, policy spec, options of that run).
CONFIGS: Dict[str, List[Tuple[str, str, Dict[str, Any]]]] = {
    "best-case": [("base pages", "base", {}), ("navarro", "navarro", {})],
    "sizes": [("64KB", "navarro:sizes=64k", {}), ("512KB", "navarro:sizes=512k", {}),
              ("4MB", "navarro:sizes=4m", {}), ("all", "navarro", {})],
    "preemption": [("base pages", "base", {}), ("navarro", "navarro", {})],
    "writeback": [("demote on write", "navarro", {}), ("no demote on write", "navarro:wp=false", {})],
    # Linux THP maps only PMD-size (2MB) pages at fault; mTHP each folio size
    # alone (and PMD at fault as the top-level 'enabled' says: here never, so
    # the size's own effect shows); Navarro's reservations over every size.
    # Each with the preset's contpte coalescing and without it.
    "mthp": [(f"{label}{tag}", spec, opts)
             for tag, opts in (("", {}), (", no coalescing", {"set": ["machine.coalesce=none"]}))
             for label, spec in (("linux (2MB)", "linux"),
                                 ("mthp 16KB", "mthp:enabled=never,enabled_16k=always"),
                                 ("mthp 64KB", "mthp:enabled=never,enabled_64k=always"),
                                 ("mthp 256KB", "mthp:enabled=never,enabled_256k=always"),
                                 ("mthp all + 2MB", "mthp:enabled=always,enabled_16k=always,enabled_32k=always,"
                                                    "enabled_64k=always,enabled_128k=always,enabled_256k=always"),
                                 ("navarro", "navarro"))],
    # The paper's comparison (§6.5): FreeBSD's daemon in approximate-LRU
    # order against the contiguity-aware one; a finished process frees its
    # memory. Both with Navarro's reservations.
    "sustained": [("plain daemon (A-LRU)", "navarro", {"set": ["os.pagedaemon=alru", "os.exit_frees=true"]}),
                  ("contiguity-aware daemon", "navarro",
                   {"set": ["os.pagedaemon=contiguity", "os.exit_frees=true"]})],
}

#: The Alpha 21264 of the paper is a uniprocessor: a remapped range is
#: invalidated in its own TLB, with no inter-processor interrupt. The OS
#: model's shootdown cost (4 us) is an x86 multi-core IPI round; the Alpha
#: studies charge a local invalidation instead (0.5 us, an estimate;
#: docs/assumptions.md, Navarro studies).
ALPHA_OS = {"os_costs": ["shootdown_us=0.5"]}

#: Per scale and study: workload parameters per workload label, and OS
#: options of every run. "ci" keeps every study together within about a
#: minute; "paper" uses the paper's sizes where it gives them.
SCALES: Dict[str, Dict[str, Dict[str, Any]]] = {
    "ci": {
        "best-case": {"params": {"Matrix": {"n": 1000, "repetitions": 1}, "Tree": {"nodes": 50000, "ops": 50000},
                                 "GUPS": {"size": "64MiB", "updates": 200000},
                                 "adversary": {"size": "32MiB", "rounds": 2}, "cmp": {"size": "16MiB"}},
                      "os": ALPHA_OS},
        # §6.6: "only 4MB of memory available and contiguous": the machine's
        # memory is that one 4MB extent; 64 touches 4MB apart.
        "preemption": {"params": {"4MB stride": {"size": "256MiB"}}, "os": {**ALPHA_OS, "memory": "4MiB"}},
        # Canneal at 2M elements (92 MB, over the 64 MB a 128-entry TLB
        # reaches with 512KB pages, in arrays that are not multiples of 4MB):
        # the mcf-like case where no single size suffices.
        "sizes": {"params": {"Matrix": {"n": 1000, "repetitions": 1}, "Tree": {"nodes": 50000, "ops": 50000},
                             "GUPS": {"size": "64MiB", "updates": 200000},
                             "Canneal": {"elements": "2M", "temp_steps": 20}},
                  "os": ALPHA_OS},
        "writeback": {"params": {"dirty file": {"size": "100MiB"}}, "os": ALPHA_OS},
        "sustained": {"params": {"server": {"records": 8000, "ops": "3M", "distribution": "zipfian"}, "FFTW": {"n": 128}},
                      "runs": 4, "first_start_s": 0.3, "os": {**ALPHA_OS, "memory": "80MiB"}},
        "mthp": {"params": {"Matrix": {"n": 1000, "repetitions": 1}, "Tree": {"nodes": 50000, "ops": 50000},
                            "GUPS": {"size": "64MiB", "updates": "1M"}},
                 "os": {}},
    },
    "paper": {
        "best-case": {"params": {"Matrix": {"n": 1000, "repetitions": 5}, "Tree": {"nodes": 50000, "ops": 200000},
                                 "GUPS": {"size": "256MiB", "updates": "2M"},
                                 "adversary": {"size": "256MiB", "rounds": 8}, "cmp": {"size": "100MiB"}},
                      "os": ALPHA_OS},
        # 4MB of memory holds 512 8KB frames: 512 touches use it all (73
        # preemptions: 1 + 8 + 64, one per seven allocations).
        "preemption": {"params": {"4MB stride": {"size": "2GiB"}}, "os": {**ALPHA_OS, "memory": "4MiB"}},
        "sizes": {"params": {"Matrix": {"n": 1000, "repetitions": 5}, "Tree": {"nodes": 50000, "ops": 200000},
                             "GUPS": {"size": "256MiB", "updates": "2M"},
                             "Canneal": {"elements": "2M", "temp_steps": 64}},
                  "os": ALPHA_OS},
        "writeback": {"params": {"dirty file": {"size": "100MiB"}}, "os": ALPHA_OS},
        "sustained": {"params": {"server": {"records": 16000, "ops": "6M", "distribution": "zipfian"}, "FFTW": {"n": 160}},
                      "runs": 4, "first_start_s": 0.3, "os": {**ALPHA_OS, "memory": "160MiB"}},
        "mthp": {"params": {"Matrix": {"n": 1000, "repetitions": 5}, "Tree": {"nodes": 50000, "ops": 200000},
                            "GUPS": {"size": "256MiB", "updates": "4M"}},
                 "os": {}},
    },
}

#: The paper's figures for the rows it has (Table 1 speedups and DTLB miss
#: reductions; Tables 2/3 speedups per size; §6.7's write-back pathology).
PAPER: Dict[str, Dict[str, Dict[str, Any]]] = {
    "best-case": {"Matrix": {"speedup": 7.546, "miss_reduction_pct": 99.47},
                  "Tree": {"speedup": 1.503, "miss_reduction_pct": 97.14},
                  "FFTW": {"speedup": 1.549, "miss_reduction_pct": 99.59},
                  "adversary": {"speedup": 1 / 1.089}, "cmp": {"speedup": 1 / 1.001}},
    "preemption": {"4MB stride": {"speedup": 1 / 1.011, "allocations_per_preemption": 7}},
    "sizes": {"Matrix": {"64KB": 3.83, "512KB": 7.17, "4MB": 6.86, "all": 7.54},
              "FFTW": {"64KB": 1.01, "512KB": 1.00, "4MB": 1.55, "all": 1.55}},
    "writeback": {"dirty file": {"slowdown_without": 20.0}},
}

#: The columns shown per study (terminal and report; all in the saved table).
COLUMNS = {
    "best-case": ["workload", "config", "pages_64k", "pages_512k", "pages_4m", "dtlb_misses", "miss_reduction_pct",
                  "speedup_est", "paper_speedup"],
    "sizes": ["workload", "config", "dtlb_misses", "miss_reduction_pct", "speedup_est", "paper_speedup"],
    "preemption": ["workload", "config", "faults_base", "reservations", "preemptions", "preferred_failures", "speedup_est"],
    "writeback": ["workload", "config", "writeback_bytes", "wp_traps", "writeback_seconds", "speedup_est"],
    "sustained": ["config", "run", "start_s", "finish_s", "superpage_bytes_peak", "mean_contiguity",
                  "pages_evicted"],
    "mthp": ["workload", "config", "dtlb_misses", "miss_reduction_pct", "speedup_est"],
}

MIB = 1 << 20
#: The OS model's default disk write per base page (os.writeback_us, a disk
#: access of the paper's era; docs/assumptions.md "Refault costs").
WRITEBACK_US = 5000.0


def _size_label(bytes_: int) -> str:
    for unit, shift in (("GB", 30), ("MB", 20), ("KB", 10)):
        if bytes_ >= 1 << shift and bytes_ % (1 << shift) == 0:
            return f"{bytes_ >> shift}{unit}"
    return f"{bytes_}B"


def _row(workload: str, label: str, spec: str, d: Dict[str, Any]) -> Dict[str, Any]:
    """The counters one Navarro study row reads: superpages per size at the
    end, DTLB misses (walks) against base pages, the cost model's speedup,
    the reservation counters and bytes written back."""
    r = run_row(label, spec, d)
    t = d["translation"]
    base_walks = ((d.get("base") or {}).get("translation") or {}).get("walks")
    r = {"workload": workload, **r, "accesses": t["accesses"], "dtlb_misses": t["walks"], "base_dtlb_misses": base_walks,
         "miss_reduction_pct": 100.0 * (1 - t["walks"] / base_walks) if base_walks else None}
    pages: Dict[str, int] = {}
    for p in d.get("processes", []):
        for size, n in p.get("huge_pages", []):
            pages[size] = pages.get(size, 0) + n
    for size, n in pages.items():
        r[f"pages_{size}"] = n
    o = d["os_stats"]
    # Reservation counters exist in a result only when reservations were made.
    for key in ("reservations", "preemptions", "preferred_failures", "peak_reserved_frames", "wp_traps",
                "writeback_bytes"):
        r[key] = o.get(key, 0)
    # The flush waits for its writes: os.writeback_us per base page written
    # (os/reserv.rs `writeback`), part of the run's OS time.
    from .units import parse_size

    page = parse_size(d["machine"]["page_sizes"][0])
    wb_us = ((d.get("os") or {}).get("pagedaemon") or {}).get("writeback_us", WRITEBACK_US)
    r["writeback_seconds"] = r["writeback_bytes"] / page * wb_us * 1e-6
    return r


# ---------------------------------------------------------------- the studies

def _per_workload(study: str, paths: Dict[str, str], cfg: Dict[str, Any], preset: str, step) -> Tuple[list, dict]:
    """Every configuration of ``study`` on every workload: one row each."""
    rows = []
    for wl, path in paths.items():
        results = simulate_configs(path, CONFIGS[study], preset, cfg["os"], lambda what, wl=wl: step(f"{wl}: {what}"))
        for (label, spec, _), d in zip(CONFIGS[study], results):
            rows.append(_row(wl, label, spec, d))
    for r in rows:
        paper = (PAPER.get(study) or {}).get(r["workload"]) or {}
        if study == "sizes":
            r["paper_speedup"] = paper.get(r["config"])
        else:
            for k, v in paper.items():
                r[f"paper_{k}"] = v
    return rows, {}


#: ``sustained``: a long-lived key-value server (the paper's Web server: its
#: deletes leave live pages scattered over memory) beside four FFTW runs, one
#: after another, each starting when the one before exits (§6.5: Web, then
#: FFTW x4 "in sequence"; each run's start is the previous run's finish, found
#: by simulating the runs so far: a later run cannot change an earlier one). The server's GETs follow a zipfian law, so most of its pages are
#: cold, as a file cache's are. Memory is smaller than both together, so the page daemon decides
#: what the runs get. The labels of the two traces.
SUSTAINED_TRACES = ("server", "FFTW")


def _sustained_inputs(paths: Dict[str, str], cfg: Dict[str, Any]) -> List[str]:
    return [paths["server"]] + [paths["FFTW"]] * cfg["runs"]


def _sequential_run(traces: List[str], cfg: Dict[str, Any], label: str, spec: str, opts: Dict[str, Any], preset: str,
                    step) -> Tuple[Dict[str, Any], List[float]]:
    """The server from time 0 and the runs one after another: run k+1 starts
    when run k finishes, read from a simulation of the server and runs 1..k
    (the runs after k start later, so they cannot change it). Returns the
    full run's result and the starts."""
    starts = [0.0, float(cfg["first_start_s"])]
    for k in range(1, len(traces) - 1):
        d = simulate_configs(traces[:k + 1], [(label, spec, opts)], preset,
                             {**cfg["os"], "start_s": starts, "with_base": False}, lambda what: step(what))[0]
        starts.append(d["processes"][k]["finish_seconds"])
    d = simulate_configs(traces, [(label, spec, opts)], preset,
                         {**cfg["os"], "start_s": starts, "with_base": False}, lambda what: step(what))[0]
    return d, starts


def _sustained(paths, cfg, preset, step):
    traces = _sustained_inputs(paths, cfg)
    rows, timeline = [], []
    for label, spec, opts in CONFIGS["sustained"]:
        d, starts = _sequential_run(traces, cfg, label, spec, opts, preset, step)
        peak: Dict[int, int] = {}
        for smp in d.get("timeline", []):
            for pid, h in enumerate(smp["huge_bytes"]):
                peak[pid] = max(peak.get(pid, 0), h)
            timeline.append({"config": label, "time_s": smp["time_s"], "contiguity": smp.get("contiguity"),
                             **{f"huge_bytes_{pid}": h for pid, h in enumerate(smp["huge_bytes"])}})
        daemon = d["os_stats"].get("pagedaemon") or {}
        procs = d.get("processes", [])
        # Contiguity while the runs go (from the first run's start): the
        # paper's 42.4% against 8.8% after the Web server drove it to 0.
        mean_c = _mean_contiguity([t for t in timeline if t["config"] == label], label, starts[1])
        for pid in range(1, len(traces)):
            rows.append({"config": label, "policy": spec, "run": pid, "start_s": starts[pid],
                         "finish_s": procs[pid].get("finish_seconds") if pid < len(procs) else None,
                         "superpage_bytes_peak": peak.get(pid, 0),
                         "footprint_bytes": procs[pid].get("footprint_bytes") if pid < len(procs) else None,
                         "mean_contiguity": mean_c,
                         "pages_evicted": daemon.get("pages_evicted"), "contiguity_wakeups": daemon.get("contiguity_wakeups"),
                         "preferred_failures": d["os_stats"].get("preferred_failures", 0),
                         "kind": "estimate"})
    return rows, {"timeline": timeline}


def _sustained_steps(cfg: Dict[str, Any]) -> int:
    return len(SUSTAINED_TRACES) + len(CONFIGS["sustained"]) * cfg["runs"]


def _mean_contiguity(timeline: List[Dict[str, Any]], label: str, after: float) -> Optional[float]:
    xs = [t["contiguity"] for t in timeline if t["config"] == label and t["time_s"] >= after
          and t.get("contiguity") is not None]
    return sum(xs) / len(xs) if xs else None


def _sustained_headline(rows: List[Dict[str, Any]]) -> str:
    per = {}
    for r in rows:
        per.setdefault(r["config"], []).append(r["superpage_bytes_peak"] >> 20)
    return "; ".join(f"{c}: {', '.join(str(x) for x in v)} MiB" for c, v in per.items())


RUNNERS: Dict[str, Callable] = {"best-case": lambda p, c, pr, st: _per_workload("best-case", p, c, pr, st),
                                "sizes": lambda p, c, pr, st: _per_workload("sizes", p, c, pr, st),
                                "preemption": lambda p, c, pr, st: _per_workload("preemption", p, c, pr, st),
                                "writeback": lambda p, c, pr, st: _per_workload("writeback", p, c, pr, st),
                                "sustained": _sustained,
                                "mthp": lambda p, c, pr, st: _per_workload("mthp", p, c, pr, st)}


def _by(rows, workload: str) -> Dict[str, Dict[str, Any]]:
    return {r["config"]: r for r in rows if r["workload"] == workload}


def _f(v, fmt="{:.3f}"):
    return "n/a" if v is None else fmt.format(v)


def shape_checks(study: str, rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The paper's claims for ``study``, each PASS/FAIL on these rows (or not
    testable when the run lacks what the claim needs)."""
    out: List[Dict[str, Any]] = []
    workloads_ = list(dict.fromkeys(r["workload"] for r in rows if "workload" in r))
    if study == "best-case":
        m = _by(rows, "Matrix").get("navarro", {})
        s = num(m.get("speedup_est"))
        claim(out, "Matrix gains several-fold with superpages on the Alpha (Table 1: 7.5x; here >= 3x)",
              None if s is None else s >= 3.0, f"{_f(s)}x")
        a = num(_by(rows, "adversary").get("navarro", {}).get("speedup_est"))
        claim(out, "the adversary (one word per page, then free) costs under 10% (§6.6: 8.9%)",
              None if a is None else a >= 1 / 1.10, f"{_f(a)}x")
        red = [(wl, num(_by(rows, wl).get("navarro", {}).get("miss_reduction_pct"))) for wl in ("Matrix", "FFTW", "Tree")]
        got = [(wl, x) for wl, x in red if x is not None]
        claim(out, "DTLB misses fall by over 90% on the paper's TLB-bound programs (Table 1: 97-99.6%)",
              None if not got else all(x > 90 for _, x in got), ", ".join(f"{wl} {x:.1f}%" for wl, x in got))
    elif study == "sizes":
        never_worse, gains = [], []
        for wl in workloads_:
            b = _by(rows, wl)
            single = [num(b.get(k, {}).get("speedup_est")) for k in ("64KB", "512KB", "4MB")]
            single = [x for x in single if x is not None]
            allx = num(b.get("all", {}).get("speedup_est"))
            if not single or allx is None:
                continue
            best = max(single)
            # "Never worse" within 1%: with every size, a region is promoted
            # at each size in turn as it fills (64KB, 512KB, then 4MB), and
            # each promotion costs a PTE rewrite and an invalidation.
            never_worse.append((wl, allx >= best * 0.99, allx, best))
            gains.append((wl, allx / best - 1))
        claim(out, "all sizes is never worse than the best single size (Tables 2/3; here within 1%)",
              None if not never_worse else all(ok for _, ok, _, _ in never_worse),
              ", ".join(f"{wl} all {a:.3f}x vs best {b:.3f}x" for wl, _, a, b in never_worse))
        claim(out, "all sizes beats the best single size by more than 5% on at least one workload (mcf: 1.68 vs 1.31)",
              None if not gains else any(g > 0.05 for _, g in gains),
              ", ".join(f"{wl} {100 * g:+.1f}%" for wl, g in gains))
        best_size = {}
        for wl in workloads_:
            b = _by(rows, wl)
            cand = [(num(b.get(k, {}).get("speedup_est")), k) for k in ("64KB", "512KB", "4MB")]
            cand = [(x, k) for x, k in cand if x is not None]
            if cand:
                best_size[wl] = max(cand)[1]
        claim(out, "the best single size differs between workloads (SP 64KB, vpr 512KB, FFTW 4MB)",
              None if len(best_size) < 2 else len(set(best_size.values())) > 1,
              ", ".join(f"{wl} {k}" for wl, k in best_size.items()))
    elif study == "preemption":
        n = _by(rows, "4MB stride").get("navarro", {})
        pre, alloc = num(n.get("preemptions")), num(n.get("faults_base"))
        claim(out, "with only 4MB available, one reservation is preempted every seven allocations (§6.6)",
              None if not pre or alloc is None else abs((alloc - 1) / pre - 7) < 0.5,
              "no preemption" if not pre else f"{pre} preemptions in {alloc} allocations: {(alloc - 1) / pre:.2f} after the first each")
    elif study == "writeback":
        b = _by(rows, "dirty file")
        w, wo = num(b.get("demote on write", {}).get("writeback_bytes")), num(b.get("no demote on write", {}).get("writeback_bytes"))
        claim(out, "without demote-on-write a dirty superpage is written back whole: far more bytes (§6.7: >20x)",
              None if not w or wo is None else wo / w > 20,
              "n/a" if not w or wo is None else f"{wo / MIB:.1f} MiB vs {w / MIB:.2f} MiB ({wo / w:.0f}x)")
        tw, two = num(b.get("demote on write", {}).get("virtual_seconds")), num(b.get("no demote on write", {}).get("virtual_seconds"))
        claim(out, "and the run takes more than 20 times as long at the model's disk cost per page written (§6.7)",
              None if not tw or two is None else two / tw > 20,
              "n/a" if not tw or two is None else f"{two:.2f} s vs {tw:.3f} s ({two / tw:.0f}x)")
    elif study == "sustained":
        per: Dict[str, List[Dict[str, Any]]] = {}
        for r in rows:
            per.setdefault(r["config"], []).append(r)
        plain, aware = per.get("plain daemon (A-LRU)", []), per.get("contiguity-aware daemon", [])
        cp = num(plain[0].get("mean_contiguity")) if plain else None
        ca = num(aware[0].get("mean_contiguity")) if aware else None
        claim(out, "the contiguity-aware daemon keeps more memory contiguous while the server runs (§6.5: 42.4% vs 8.8%)",
              None if cp is None or ca is None else ca > cp,
              f"mean contiguity {_f(None if ca is None else 100 * ca, '{:.1f}')}% vs {_f(None if cp is None else 100 * cp, '{:.1f}')}%")
        sp, sa = sum(r["superpage_bytes_peak"] for r in plain), sum(r["superpage_bytes_peak"] for r in aware)
        claim(out, "the contiguity-aware daemon obtains more superpage memory over the repeated runs (§6.5: 20-40 of 60 "
                   "4MB regions per FFTW run, against 0)",
              None if not plain or not aware else sa > sp,
              f"{sa >> 20} MiB vs {sp >> 20} MiB over {len(aware)} runs")
    elif study == "mthp":
        for wl in workloads_:
            b = _by(rows, wl)
            on, off = num(b.get("mthp 64KB", {}).get("dtlb_misses")), num(b.get("mthp 64KB, no coalescing", {}).get("dtlb_misses"))
            claim(out, f"{wl}: contiguous-PTE coalescing raises the TLB reach of 64KB mTHP folios (fewer misses)",
                  None if on is None or off is None else on < off, f"{_f(on, '{:,.0f}')} vs {_f(off, '{:,.0f}')} misses")
    return out


# ---------------------------------------------------------------- running

def _names(studies) -> List[str]:
    return study_names(studies, STUDIES)


def check_args(studies, scale: str) -> List[str]:
    """The studies to run (default all, each once, in the order given); a
    name that is no study or a scale that is none gives one error line."""
    names = _names(studies)
    check_choice(scale, "scale", list(SCALES))
    return names


def _workload_params(study: str, scale: str, label: str, seed: int) -> Dict[str, Any]:
    name, fixed = WORKLOADS[study][label]
    return {**fixed, **SCALES[scale][study].get("params", {}).get(label, {}), "seed": seed}


def navarro_studies(studies: Optional[Sequence[str]] = None, scale: str = "ci", seed: int = 1,
                    traces: Optional[str] = None,
                    progress: Optional[Callable[[str, int, int], None]] = None) -> Studies:
    """Run the Navarro studies (module docstring): ``studies`` a subset of
    ``STUDIES`` (default all), ``scale`` ``"ci"`` or ``"paper"``, ``seed`` of
    every workload; ``traces`` a directory to keep the generated traces in
    (default a temporary one). Each study runs on its machine (``PRESETS``).
    ``progress(step, done, total)`` is called as work completes."""
    import pandas as pd

    names = check_args(studies, scale)
    seed = int(seed)
    cfgs = {s: SCALES[scale][s] for s in names}
    total = sum(_steps(s, cfg) for s, cfg in cfgs.items())
    step = Steps(total, progress)
    out: Dict[str, StudyResult] = {}
    made: Dict[str, str] = {}
    with trace_dir(traces, "hugescope-navarro-") as tdir:
        for s in names:
            cfg, preset = cfgs[s], PRESETS[s]
            paths: Dict[str, str] = {}
            for label, (workload, _) in WORKLOADS.get(s, {}).items():
                params = _workload_params(s, scale, label, seed)
                key = f"{workload}:{sorted(params.items())}"
                if key not in made:
                    made[key] = os.path.join(tdir, f"navarro-{workload}-{len(made)}.hst")
                    workloads.trace(workload, made[key], **params)
                paths[label] = made[key]
                step(f"{s}: trace {label}")
            rows, extra = RUNNERS[s](paths, cfg, preset, lambda what, s=s: step(f"{s}: {what}"))
            meta = {"hugescope_version": _core.version(), "kind": "estimate", "study": s, "scale": scale,
                    "preset": preset, "seed": seed,
                    "workloads": {lbl: [wl, _workload_params(s, scale, lbl, seed)] for lbl, (wl, _) in
                                  WORKLOADS.get(s, {}).items()},
                    "os_options": cfg["os"], "configs": [[lbl, spec, opts] for lbl, spec, opts in CONFIGS.get(s, [])],
                    "paper": PAPER.get(s)}
            out[s] = StudyResult("navarro", s, pd.DataFrame(rows), {k: pd.DataFrame(v) for k, v in extra.items()},
                                 meta, shape_checks)
    meta = {"hugescope_studies": "navarro", "hugescope_version": _core.version(), "kind": "estimate",
            "scale": scale, "seed": seed, "studies": names, "presets": {s: PRESETS[s] for s in names}}
    return Studies(out, meta)


def _steps(study: str, cfg: Dict[str, Any]) -> int:
    """Progress steps of ``study``: one per trace and per simulation pass."""
    from .studies import groups

    if study == "sustained":
        return _sustained_steps(cfg)
    n = len(WORKLOADS[study])
    return n + n * len(groups(CONFIGS[study]))


def headlines(result: Studies) -> List[Dict[str, Any]]:
    """One line per study: its headline figures on this run beside the
    paper's, and whether all of its claims hold (the demo's short table)."""
    out = []
    for name, s in result.studies.items():
        rows = s.table.to_dict("records")
        if name == "best-case":
            here = ", ".join(f"{wl} {_f(num(_by(rows, wl).get('navarro', {}).get('speedup_est')), '{:.2f}x')}"
                             for wl in ("Matrix", "Tree", "FFTW", "adversary"))
            paper = "Matrix 7.55x, Tree 1.50x, FFTW 1.55x, adversary 0.92x"
        elif name == "sizes":
            here = "; ".join(f"{wl} " + "/".join(_f(num(_by(rows, wl).get(k, {}).get("speedup_est")), "{:.2f}")
                                                  for k in ("64KB", "512KB", "4MB", "all"))
                             for wl in ("Matrix", "FFTW"))
            paper = "64KB/512KB/4MB/all: Matrix 3.83/7.17/6.86/7.54; FFTW 1.01/1.00/1.55/1.55"
        elif name == "preemption":
            n = _by(rows, "4MB stride").get("navarro", {})
            here = f"{n.get('preemptions')} preemptions in {n.get('reservations')} reservations, {_f(num(n.get('speedup_est')), '{:.3f}x')}"
            paper = "one preemption per seven allocations, 1.1% slower"
        elif name == "writeback":
            b = _by(rows, "dirty file")
            w, wo = num(b.get("demote on write", {}).get("writeback_bytes")), num(b.get("no demote on write", {}).get("writeback_bytes"))
            here = f"{_f(None if wo is None else wo / MIB, '{:.1f}')} MiB without vs {_f(None if w is None else w / MIB, '{:.2f}')} MiB with"
            paper = ">20x slower without demote-on-write"
        elif name == "sustained":
            here, paper = _sustained_headline(rows), "4MB superpages per FFTW run: plain 0; contiguity-aware 20, 35, 38, 40"
        else:
            b = _by(rows, "Matrix")
            here = ", ".join(f"{k} {_f(num(b.get(k, {}).get('speedup_est')), '{:.2f}x')}"
                             for k in ("linux (2MB)", "mthp 64KB", "mthp 64KB, no coalescing", "navarro"))
            paper = "(no paper: Linux 6.x mTHP)"
        verdicts = [c["holds"] for c in s.checks()]
        holds = False if False in verdicts else (None if None in verdicts or not verdicts else True)
        out.append({"study": name, "this run (estimates)": here, "paper": paper, "claims": VERDICT[holds]})
    return out


# ---------------------------------------------------------------- files

def _extras(study: str) -> Tuple[str, ...]:
    return (("timeline",) if study == "sustained" else ()) + ("checks",)


def save(result: Studies, out: str, plots: bool = True) -> Dict[str, str]:
    """Write each study's ``OUT/navarro-STUDY.csv``, ``-checks.csv`` (and
    ``-timeline.csv`` for ``sustained``), ``.json`` and figures."""
    return result.save(out, plots)


def check_outputs(out: str, studies: Optional[Sequence[str]] = None, plots: bool = True) -> None:
    """Before any trace is made: refuse any file :func:`save` would write in
    ``out`` that must not be replaced (``hugescope._io``)."""
    for s in _names(studies):
        check_study_outputs(f"navarro-{s}", out, f"navarro-{s}", _extras(s), plots)
