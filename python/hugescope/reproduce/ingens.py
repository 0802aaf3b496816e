"""The rows of Ingens (``papers/ingens.toml`` in the core), measured with the
Ingens studies (``ingens_study``) as building blocks, per seed: ``bloat``
(Tables 5 and 10: Redis after its deletes), ``async`` (Table 4: SVM),
``fault-latency`` (§3.1, inputs), ``fairness`` (Fig. 5: three canneal
instances) and ``fragmented`` (Table 9: the web workload at FMFI 0.9 and
unfragmented). Two more runs on the same workloads: each of SVM, canneal,
Redis and the web workload under base pages, Linux THP, FreeBSD-style
reservations (the ``navarro`` policy on x86-64) and Ingens on unfragmented
memory (Table 6, Fig. 4), and the four host/guest page-size combinations
of a VM (Table 3, ``virt_study``'s nested runs). Every number is the cost
model's estimate or a counter of the OS model, on ``haswell-pcc``.
"""
from __future__ import annotations

import os
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence

from .. import api, ingens_study as ing, virt_study, workloads
from .common import StudyRows, mean, measured, mib, study_command

STUDIES = ["bloat", "async", "fault-latency", "fairness", "fragmented"]
PRESET = "haswell-pcc"
#: Table 3 and Table 6's workloads: (row name, the study whose workload and size it takes).
EXTRA = {"svm": "async", "canneal": "fairness", "redis": "bloat", "olio": "fragmented"}
#: Table 6 and Fig. 4's policies on unfragmented memory.
T6 = [("linux", ing.LINUX), ("freebsd", "navarro"), ("ingens", "ingens")]


def _sources(scale: str, study: str) -> str:
    name, _ = ing.WORKLOADS[study]
    return (f"ingens_study '{study}' at {scale} scale: {name} {ing._trace_params(study, scale, 1)} (seed varies), "  # noqa: SLF001
            f"OS options {ing.SCALES[scale][study]['os']}, configurations {[c[1] for c in ing.CONFIGS[study]]}; "
            f"machine {PRESET}; cycles and OS costs from the cost model's defaults (docs/cost-model.md, "
            f"docs/assumptions.md: estimates; the fault costs are Ingens §3.1's)")


def _command(scale: str, seeds: List[int], what: str) -> str:
    return study_command("ingens", scale, seeds, what)


def _extra_os(scale: str, study: str) -> Dict[str, Any]:
    """The run length of ``study`` without its memory set-up (unfragmented,
    no budget): Table 6 and Fig. 4 run on plentiful memory."""
    return {k: v for k, v in ing.SCALES[scale][study]["os"].items() if k == "duration"}


def measure(scale: str, seeds: Sequence[int], step: Callable[[str], None],
            reuse: Optional[Dict[int, Any]] = None, keep: Optional[Dict[int, Any]] = None) -> tuple:
    """The Ingens rows' measurements at ``scale`` over ``seeds``, and the
    evidence table. ``reuse``: per seed, the studies a caller already ran
    at this scale (the demo's); Table 6's and Table 3's runs always run.
    ``keep``: filled with each seed's ``table3`` (for the virt section)."""
    import pandas as pd

    seeds = list(seeds)
    tables: Dict[str, List[List[Dict[str, Any]]]] = {s: [] for s in STUDIES}
    t6: List[Dict[str, Dict[str, float]]] = []
    t3: List[Dict[str, Dict[str, Dict[str, Any]]]] = []
    for seed in seeds:
        have = (reuse or {}).get(seed)
        r = have if have is not None and all(s in have.studies for s in STUDIES) else ing.ingens_studies(
            STUDIES, scale=scale, seed=seed)
        for s in STUDIES:
            tables[s].append(r[s].table.to_dict("records"))
        step(f"ingens seed {seed}: studies")
        with tempfile.TemporaryDirectory(prefix="hugescope-ingens-extra-") as tdir:
            paths = trace_extra(tdir, scale, seed)
            t6.append(_table6(paths, scale))
            step(f"ingens seed {seed}: Table 6 / Fig. 4")
            t3.append(table3(paths, scale))
            if keep is not None:
                keep[seed] = t3[-1]
            step(f"ingens seed {seed}: Table 3 (nested)")
    evidence = pd.DataFrame([{**x, "study": s, "seed": seed} for s in STUDIES for seed, rows in zip(seeds, tables[s])
                             for x in rows])
    return _rows(scale, seeds, tables, t6, t3), evidence


def trace_extra(tdir: str, scale: str, seed: int) -> Dict[str, str]:
    """Trace Table 3 and Table 6's workloads (``EXTRA``) into ``tdir``: path per row name."""
    paths = {}
    for name, study in EXTRA.items():
        paths[name] = os.path.join(tdir, f"{name}.hst")
        workloads.trace(ing.WORKLOADS[study][0], paths[name], **ing._trace_params(study, scale, seed))  # noqa: SLF001
    return paths


def _table6(paths: Dict[str, str], scale: str) -> Dict[str, Dict[str, float]]:
    """Speedup over base pages of each Table 6 policy on each workload."""
    out: Dict[str, Dict[str, float]] = {}
    for name, path in paths.items():
        res = api.compare(path, [spec for _, spec in T6], preset=PRESET, **_extra_os(scale, EXTRA[name]))
        out[name] = {label: r.record.speedup_vs_base for (label, _), r in zip(T6, res)}
    return out


def table3(paths: Dict[str, str], scale: str) -> Dict[str, Dict[str, Dict[str, Any]]]:
    """virt_study's nested rows of each host/guest combination per workload
    (``paths`` from ``trace_extra``): per workload, per configuration, the
    row (``speedup_est`` over hB/gB, walks, references, cycles, VM exits)."""
    out: Dict[str, Dict[str, Dict[str, Any]]] = {}
    for name, path in paths.items():
        rows = virt_study._nested({name: path}, {"os": _extra_os(scale, EXTRA[name])}, lambda _: None)  # noqa: SLF001
        out[name] = {r["config"]: r for r in rows}
    return out


def table3_rows(scale: str, seeds: List[int], t3: List[Dict[str, Dict[str, Dict[str, Any]]]], command: str,
                note=None) -> List[Dict[str, Any]]:
    """The Table 3 rows (``t3-W-CONFIG``) of each seed's ``table3``, for
    this paper and for the sections that include them (``papers/virt.toml``).
    ``note(workload)``: the row's evidence (default: every workload's
    speedups of the first seed)."""
    ev3 = "; ".join(f"{w}: " + ", ".join(f"{c} {r['speedup_est']:.3f}x" for c, r in sp.items())
                    for w, sp in t3[0].items())
    out = []
    for w in EXTRA:
        for key, cfg in (("hb-gh", "hB/gH"), ("hh-gb", "hH/gB"), ("hh-gh", "hH/gH")):
            out.append(measured(f"t3-{w}-{key}", [x[w][cfg]["speedup_est"] for x in t3], seeds,
                                _sources(scale, EXTRA[w]), command, note=note(w) if note else ev3))
    return out


def table3_command(paper: str, scale: str, seeds: List[int]) -> str:
    return (f"hugescope reproduce {paper} --scale {scale} --seeds {len(seeds)} "
            "(virt_study nested: --host-policy base|linux --guest-policy base|linux)")


def _by(rows: List[Dict[str, Any]], config: str, **where) -> Dict[str, Any]:
    for r in rows:
        if r["config"] == config and all(r.get(k) == v for k, v in where.items()):
            return r
    raise KeyError(f"ingens reproduction: no row {config!r} {where}")


def _spread(rows: List[Dict[str, Any]], config: str) -> float:
    fin = [r["finish_seconds"] for r in rows if r["config"] == config]
    return 100 * (max(fin) - min(fin)) / max(fin)


def _rows(scale: str, seeds: List[int], t, t6, t3) -> List[Dict[str, Any]]:
    rows = StudyRows(seeds, t, lambda study: _sources(scale, study), lambda study: _command(scale, seeds, study))
    out, add, per = rows.out, rows.add, rows.per

    # ---- §3.1: fault latency (every row an input: the costs are this section's).
    fl = t["fault-latency"][0]
    fev = "; ".join(f"{r['config']}: {r['mean_fault_us']:.2f} us over {r['faults_base'] + r['faults_huge']:,} faults"
                    for r in fl)
    add("s31-base-latency", "fault-latency", per("fault-latency", lambda r: _by(r, "base pages")["mean_fault_us"]), fev)
    add("s31-huge-latency", "fault-latency", per("fault-latency", lambda r: _by(r, "huge, unfragmented")["mean_fault_us"]), fev)
    add("s31-huge-vs-base", "fault-latency",
        per("fault-latency", lambda r: _by(r, "huge, unfragmented")["mean_fault_us"] / _by(r, "base pages")["mean_fault_us"]), fev)
    add("s31-frag-latency", "fault-latency", per("fault-latency", lambda r: _by(r, "THP at FMFI 0.9")["mean_fault_us"]), fev)
    add("s31-frag-fallback", "fault-latency", per("fault-latency", lambda r: 100 * _by(r, "THP at FMFI 0.9")["fallback_share"]), fev)

    # ---- Table 4: synchronous against asynchronous-only promotion (SVM).
    a0 = t["async"][0]
    aev = "; ".join(f"{r['config']}: {r['speedup_est']:.3f}x, huge memory at peak {mib(r['huge_bytes_peak'])}, "
                    f"{r['promotions']} promotions" for r in a0)
    add("t4-sync-speedup", "async", per("async", lambda r: _by(r, "synchronous")["speedup_est"]), aev)
    add("t4-async-speedup", "async", per("async", lambda r: _by(r, "asynchronous only")["speedup_est"]), aev)
    add("t4-async-over-sync-time", "async",
        per("async", lambda r: _by(r, "asynchronous only")["run_time_est_s"] / _by(r, "synchronous")["run_time_est_s"]), aev)
    add("t4-async-huge-share", "async",
        per("async", lambda r: 100 * _by(r, "asynchronous only")["huge_bytes_peak"] / _by(r, "synchronous")["huge_bytes_peak"]), aev)
    add("t4-async-rate", "async", per("async", lambda r: _by(r, "asynchronous only")["promotion_mb_per_s"]), aev)

    # ---- Tables 5 and 10: Redis after its deletes.
    b0 = {r["config"]: r for r in t["bloat"][0]}
    records = ing._trace_params("bloat", scale, seeds[0])["records"]  # noqa: SLF001
    bev = (f"seed {seeds[0]}: " + "; ".join(f"{c}: RSS {mib(r['rss_bytes'])} ({r['bloat']:.3f}x), huge {mib(r['huge_bytes'])}, "
                                          f"speedup {r['speedup_est']:.3f}x" for c, r in b0.items())
           + f". {records} keys; 8 KiB values in jemalloc's 10 KiB class, two per 5-page run: a run's pages return "
             "only when both values are deleted (0.7^2 = 49% of runs), so a 2MB region keeps about 51% of its pages")
    add("t5-redis-bloat", "bloat", per("bloat", lambda r: _by(r, "linux")["bloat"]), bev)
    add("t5-redis-thp-rss", "bloat", per("bloat", lambda r: _by(r, "linux")["rss_bytes"] / (_records(scale) * 8192)), bev)
    add("t10-nohuge-rss", "bloat", per("bloat", lambda r: 100 * _by(r, "linux-nohuge")["rss_bytes"] / _by(r, "linux")["rss_bytes"]), bev)
    for th in (90, 70, 50):
        add(f"t10-ingens-{th}-rss", "bloat", per("bloat", lambda r, th=th: _by(r, f"ingens-{th}%")["bloat"]), bev)
    add("t10-trend-70", "bloat", per("bloat", lambda r: _by(r, "ingens-70%")["bloat"]), bev)
    add("t10-trend-50", "bloat", per("bloat", lambda r: _by(r, "ingens-50%")["bloat"]), bev)
    per_get = _per_request_note(b0)
    for cfg, label in (("linux", "linux"), ("ingens-90", "ingens-90%"), ("ingens-70", "ingens-70%"), ("ingens-50", "ingens-50%")):
        add(f"t10-{cfg}-kops", "bloat", per("bloat", lambda r, label=label: _by(r, label)["speedup_est"]), per_get)

    # ---- Table 6 and Fig. 4: unfragmented memory, four workloads.
    ev6 = "; ".join(f"{w}: " + ", ".join(f"{p} {v:.3f}x" for p, v in sp.items()) for w, sp in t6[0].items())
    src6 = "; ".join(_sources(scale, EXTRA[w]) for w in ("svm", "canneal", "redis"))
    cmd6 = (f"hugescope reproduce ingens --scale {scale} --seeds {len(seeds)}; per workload W (the studies' traces): "
            f"hugescope simulate W.hst --policy {' --policy '.join(s for _, s in T6)}")
    for os_ in ("freebsd", "linux"):
        for w in ("svm", "canneal", "redis"):
            out.append(measured(f"t6-{os_}-{w}", [x[w][os_] for x in t6], seeds, src6, cmd6, note=ev6))
    out.append(measured("t6-canneal-order", [x["canneal"]["freebsd"] for x in t6], seeds, src6, cmd6, note=ev6))
    over = lambda x: [100 * (x[w]["linux"] / x[w]["ingens"] - 1) for w in EXTRA]  # noqa: E731
    out.append(measured("f4-mean-overhead", [mean(over(x)) for x in t6], seeds, src6, cmd6,
                        note="Linux's speedup over Ingens' - 1 per workload (seed %d): %s. %s" % (
                            seeds[0], ", ".join(f"{w} {v:.1f}%" for w, v in zip(EXTRA, over(t6[0]))), ev6)))
    out.append(measured("f4-max-overhead", [max(over(x)) for x in t6], seeds, src6, cmd6, note=ev6))

    # ---- Table 3: host and guest page sizes (nested walks).
    out += table3_rows(scale, seeds, t3, table3_command("ingens", scale, seeds))

    # ---- Table 9 and §6.2: the web workload at FMFI 0.9 and unfragmented.
    def frag(rows, cfg, mem):
        return _by(rows, cfg, memory=mem)["speedup_est"]

    f0 = t["fragmented"][0]
    fev9 = "; ".join(f"{r['memory']}, {r['config']}: {r['speedup_est']:.3f}x, {r['compactions']} compactions, "
                     f"{r['fault_seconds']:.2f} s in faults" for r in f0)
    add("t9-throughput", "fragmented", per("fragmented", lambda r: frag(r, "ingens", "FMFI 0.9") / frag(r, "linux", "FMFI 0.9")), fev9)
    add("s62-avg-latency", "fragmented",
        per("fragmented", lambda r: 100 * (1 - frag(r, "linux", "FMFI 0.9") / frag(r, "ingens", "FMFI 0.9"))), fev9)
    add("s62-unfrag-throughput", "fragmented",
        per("fragmented", lambda r: 100 * (1 - frag(r, "ingens", "unfragmented") / frag(r, "linux", "unfragmented"))), fev9)
    add("s62-adaptive", "fragmented",
        per("fragmented", lambda r: frag(r, "ingens adaptive", "unfragmented") / frag(r, "linux", "unfragmented")), fev9)

    # ---- Fig. 5: three canneal instances.
    fa0 = t["fairness"][0]
    fev5 = "; ".join(f"{r['config']} pid {r['pid']}: finish {r['finish_seconds']:.3f} s, huge {mib(r['huge_bytes'])}"
                     for r in fa0)
    add("f5-linux-spread", "fairness", per("fairness", lambda r: _spread(r, "linux")), fev5)
    add("f5-ingens-spread", "fairness", per("fairness", lambda r: _spread(r, "ingens")), fev5)

    def first_share(rows) -> float:
        h = {r["pid"]: r["huge_bytes"] for r in rows if r["config"] == "linux"}
        rest = mean([h[1], h[2]])
        return h[0] / rest if rest else h[0] / (2 << 20)

    add("f5-linux-first", "fairness", per("fairness", first_share), fev5 + "; a pid without huge memory counts as one 2MB page in the ratio")

    def equal(rows) -> float:
        h = [r["huge_bytes"] for r in rows if r["config"] == "ingens"]
        return max(h) / max(min(h), 2 << 20)

    add("f5-ingens-equal", "fairness", per("fairness", equal), fev5)
    return out


def _records(scale: str) -> int:
    from ..units import parse_count

    return parse_count(ing.SCALES[scale]["bloat"]["params"]["records"])


def _per_request_note(rows: Dict[str, Dict[str, Any]]) -> str:
    """Why the GET throughput rows sit far above the paper's: the trace holds
    the store's memory accesses only, while a real GET also runs the network
    stack and the event loop (19.0K ops/s is 53 us per GET)."""
    return ("speedups of the traced phase over base pages (the store's loads, deletes and GETs; no network stack, "
            "no event loop: the paper's 19.0K GETs/s are 53 us each, mostly outside the store's data, which dilutes "
            "the TLB gain the model shows undiluted): "
            + "; ".join(f"{c} {r['speedup_est']:.3f}x" for c, r in rows.items()))
