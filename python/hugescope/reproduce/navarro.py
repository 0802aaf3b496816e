"""The rows of Navarro et al.'s superpages (``papers/navarro.toml`` in the
core), measured with the Navarro studies (``navarro_study``) as building
blocks: per seed, ``best-case`` (Table 1), ``sizes`` (Tables 2 and 3, and
canneal as the mcf-like case), ``preemption`` and the adversary and cmp runs
(§6.6), ``writeback`` (§6.7) and ``sustained`` (§6.5), all on the
``alpha-21264`` preset. Every number is the cost model's estimate or a
counter of the OS model.

Seeds change the workloads that draw random numbers (Tree's operations,
canneal's netlist, the server of the sustained study); Matrix, FFTW, the
adversary, cmp, the 4MB stride and the dirty file are the same at every
seed, so their spread is zero.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence

from .. import navarro_study as nav
from .common import StudyRows, mean, measured, run_studies, study_command

STUDIES = ["best-case", "sizes", "preemption", "writeback", "sustained"]
#: Table 1's programs with a workload, as the studies label them.
OWN = {"matrix": "Matrix", "tree": "Tree", "fftw": "FFTW"}
SIZES = {"64kb": "64KB", "512kb": "512KB", "4mb": "4MB", "all": "all"}


def _sources(scale: str, study: str) -> str:
    wl = "; ".join(f"{lbl}: {name} {nav._workload_params(study, scale, lbl, 1)}"  # noqa: SLF001 - the study's own helper
                   for lbl, (name, _) in nav.WORKLOADS.get(study, {}).items())
    return (f"navarro_study '{study}' at {scale} scale ({wl}; seed varies); machine {nav.PRESETS[study]} (the paper's "
            f"Alpha 21264: 8KB base, 64KB/512KB/4MB, 128-entry DTLB); OS options {nav.SCALES[scale][study]['os']}; "
            f"cycles and OS costs from the cost model's defaults (docs/cost-model.md, docs/assumptions.md: estimates)")


def _command(scale: str, seeds: List[int], study: str) -> str:
    return study_command("navarro", scale, seeds, study)


def measure(scale: str, seeds: Sequence[int], step: Callable[[str], None],
            reuse: Optional[Dict[int, Any]] = None) -> tuple:
    """The Navarro rows' measurements at ``scale`` over ``seeds``, and the
    evidence table (one row per study row, configuration and seed).
    ``reuse``: per seed, the studies a caller already ran at this scale (the
    demo's)."""
    seeds = list(seeds)
    runs, tables, evidence = run_studies("navarro", STUDIES, seeds,
                                         lambda st, s: nav.navarro_studies(st, scale=scale, seed=s), step, reuse)
    return _rows(scale, seeds, tables, [run["sustained"].extra.get("timeline") for run in runs]), evidence


def _pick(rows: List[Dict[str, Any]], workload: str, config: str) -> Dict[str, Any]:
    for r in rows:
        if r.get("workload") == workload and r["config"] == config:
            return r
    raise KeyError(f"navarro reproduction: no row {workload!r} / {config!r}")


def _rows(scale: str, seeds: List[int], t: Dict[str, List[List[Dict[str, Any]]]], timelines) -> List[Dict[str, Any]]:
    rows = StudyRows(seeds, t, lambda study: _sources(scale, study), lambda study: _command(scale, seeds, study))
    out, add, per = rows.out, rows.add, rows.per

    # ---- Table 1 (best case): speedup, miss reduction, superpages per size.
    for key, wl in OWN.items():
        nv = lambda rows, wl=wl: _pick(rows, wl, "navarro")  # noqa: E731
        first = nv(t["best-case"][0])
        ev = (f"{wl} seed {seeds[0]}: {first['dtlb_misses']:,} DTLB misses (walks) against {first['base_dtlb_misses']:,} "
              f"with base pages in {first['accesses']:,} accesses; superpages at the end 64KB {first.get('pages_64k', 0)}, "
              f"512KB {first.get('pages_512k', 0)}, 4MB {first.get('pages_4m', 0)}; speedup {first['speedup_est']:.3f}x")
        add(f"t1-{key}-speedup", "best-case", per("best-case", lambda r: nv(r)["speedup_est"]), ev)
        add(f"t1-{key}-misses", "best-case", per("best-case", lambda r: nv(r)["miss_reduction_pct"]), ev)
        for size, col in (("64kb", "pages_64k"), ("512kb", "pages_512k"), ("4mb", "pages_4m")):
            add(f"t1-{key}-{size}", "best-case", per("best-case", lambda r, col=col: nv(r).get(col) or 0), ev)
    m = _pick(t["best-case"][0], "Matrix", "navarro")
    add("s63-matrix-miss-rate", "best-case",
        per("best-case", lambda r: 100 * _pick(r, "Matrix", "navarro")["base_dtlb_misses"] / _pick(r, "Matrix", "navarro")["accesses"]),
        f"base pages: {m['base_dtlb_misses']:,} walks in {m['accesses']:,} accesses")

    # ---- Tables 2 and 3: one size against all, Matrix and FFTW.
    for key in ("matrix", "fftw"):
        wl = OWN[key]
        first = {c: _pick(t["sizes"][0], wl, c) for c in SIZES.values()}
        ev = f"{wl} seed {seeds[0]}: " + "; ".join(
            f"{c} {first[c]['speedup_est']:.3f}x, {first[c]['dtlb_misses']:,} misses ({first[c]['miss_reduction_pct']:.2f}% fewer)"
            for c in SIZES.values())
        if key == "matrix":
            ev += (". The two 7.6 MiB arrays are separate 2MB-aligned regions: 4MB pages cover one aligned 4MB of each, "
                   "the rest of b (written down its columns) stays in base pages")
        for s, c in SIZES.items():
            add(f"t2-{key}-{s}", "sizes", per("sizes", lambda r, c=c, wl=wl: _pick(r, wl, c)["speedup_est"]), ev)
            add(f"t3-{key}-{s}", "sizes", per("sizes", lambda r, c=c, wl=wl: _pick(r, wl, c)["miss_reduction_pct"]), ev)

    def multi(rows) -> float:
        best = max(_pick(rows, "Canneal", c)["speedup_est"] for c in ("64KB", "512KB", "4MB"))
        return (_pick(rows, "Canneal", "all")["speedup_est"] - 1) / (best - 1)

    cn = {c: _pick(t["sizes"][0], "Canneal", c)["speedup_est"] for c in SIZES.values()}
    add("t2-mcf-like-multi", "sizes", per("sizes", multi),
        "canneal seed %d: %s" % (seeds[0], ", ".join(f"{c} {v:.3f}x" for c, v in cn.items())))

    def best_sizes(rows) -> List[str]:
        return [max(("64KB", "512KB", "4MB"), key=lambda c, wl=wl: _pick(rows, wl, c)["speedup_est"])
                for wl in ("Matrix", "FFTW", "Canneal")]

    add("t2-best-size-varies", "sizes", per("sizes", lambda r: len(set(best_sizes(r)))),
        "best single size (Matrix, FFTW, canneal) per seed: " + "; ".join(
            f"seed {s}: {', '.join(best_sizes(r))}" for s, r in zip(seeds, t["sizes"])))

    # ---- §6.6: the adversary, cmp, the 4MB stride with preemption.
    for row_id, wl in (("s66-adversary", "adversary"), ("s66-cmp", "cmp")):
        add(row_id, "best-case", per("best-case", lambda r, wl=wl: 100 * (1 / _pick(r, wl, "navarro")["speedup_est"] - 1)),
            f"{wl}: speedup {_pick(t['best-case'][0], wl, 'navarro')['speedup_est']:.4f}x over base pages, "
            f"{_pick(t['best-case'][0], wl, 'navarro')['promotions']} promotions, "
            f"{_pick(t['best-case'][0], wl, 'navarro')['demotions']} demotions")
    p = _pick(t["preemption"][0], "4MB stride", "navarro")
    pev = (f"{p['faults_base']} faults (allocations), {p['preemptions']} preemptions, {p['reservations']} reservations, "
           f"{p['preferred_failures']} preferred-size "
           f"failures on 4 MiB of memory; speedup {p['speedup_est']:.4f}x over base pages on the same memory")
    add("s66-stride4m", "preemption",
        per("preemption", lambda r: 100 * (1 / _pick(r, "4MB stride", "navarro")["speedup_est"] - 1)), pev)
    # Allocations are the touches' faults: once the 64KB reservations are
    # preempted too, the last ones are base pages without a reservation.
    add("s66-preemption-rate", "preemption",
        per("preemption", lambda r: (_pick(r, "4MB stride", "navarro")["faults_base"] - 1)
            / max(_pick(r, "4MB stride", "navarro")["preemptions"], 1)), pev)

    # ---- §6.7: write-back of dirty superpages, time and bytes.
    w, wo = (_pick(t["writeback"][0], "dirty file", c) for c in ("demote on write", "no demote on write"))
    wev = (f"demote on write: {w['writeback_bytes']:,} bytes written back ({w['writeback_seconds']:.3f} s at "
           f"os.writeback_us per 8KB page), {w['wp_traps']} write-protect traps, run {w['virtual_seconds']:.3f} s; "
           f"without: {wo['writeback_bytes']:,} bytes ({wo['writeback_seconds']:.1f} s), run {wo['virtual_seconds']:.2f} s")
    add("s67-writeback", "writeback",
        per("writeback", lambda r: _pick(r, "dirty file", "no demote on write")["virtual_seconds"]
            / _pick(r, "dirty file", "demote on write")["virtual_seconds"]), wev)
    add("s67-io-volume", "writeback",
        per("writeback", lambda r: _pick(r, "dirty file", "no demote on write")["writeback_bytes"]
            / _pick(r, "dirty file", "demote on write")["writeback_bytes"]), wev)

    # ---- §6.5: sustained benefit.
    out += _sustained(scale, seeds, t["sustained"], timelines)
    return out


PLAIN, AWARE = "plain daemon (A-LRU)", "contiguity-aware daemon"


def _sustained(scale: str, seeds: List[int], tables, timelines) -> List[Dict[str, Any]]:
    src, cmd = _sources(scale, "sustained"), _command(scale, seeds, "sustained")
    out: List[Dict[str, Any]] = []

    def runs(rows, cfg) -> List[Dict[str, Any]]:
        return sorted((r for r in rows if r["config"] == cfg), key=lambda r: r["run"])

    def peak(tl, cfg, rows) -> float:
        """Fig. 5's contiguity at its highest from the first run's start to
        the last run's end (after it everything has exited: all free)."""
        rs = runs(rows, cfg)
        lo, hi = min(r["start_s"] for r in rs), max(r["finish_s"] for r in rs)
        xs = [x["contiguity"] for x in tl.to_dict("records")
              if x["config"] == cfg and lo <= x["time_s"] < hi and x.get("contiguity") is not None]
        return 100 * max(xs) if xs else 0.0

    first = tables[0]
    counters = "; ".join(
        f"{cfg}: runs start {', '.join('%g' % r['start_s'] for r in runs(first, cfg))} s and finish "
        f"{', '.join('%.1f' % r['finish_s'] for r in runs(first, cfg))} s (each starts when the one before exits), "
        f"{runs(first, cfg)[0]['pages_evicted']:,} pages evicted, "
        f"{runs(first, cfg)[0]['contiguity_wakeups']} contiguity wakeups, "
        f"{runs(first, cfg)[0]['preferred_failures']} preferred-size failures, mean contiguity "
        f"{100 * runs(first, cfg)[0]['mean_contiguity']:.1f}%" for cfg in (PLAIN, AWARE))
    note = f"seed {seeds[0]}: {counters}"
    share = lambda rows, cfg: [100 * r["superpage_bytes_peak"] / r["footprint_bytes"] for r in runs(rows, cfg)]  # noqa: E731
    got = "; ".join(f"{cfg}: " + ", ".join("%.0f%%" % x for x in share(first, cfg)) for cfg in (PLAIN, AWARE))
    note = f"superpage memory at each run's peak over its footprint, seed {seeds[0]}: {got}; {note}"
    for i in range(4):
        out.append(measured(f"s65-daemon-run{i + 1}", [share(r, AWARE)[i] for r in tables], seeds, src, cmd, note=note))
    out.append(measured("s65-cache-runs", [mean(share(r, PLAIN)) for r in tables], seeds, src, cmd, note=note))
    out.append(measured("s65-daemon-more", [mean(share(r, AWARE)) for r in tables], seeds, src, cmd,
                        other=[mean(share(r, PLAIN)) for r in tables], other_label="the plain daemon's", note=note))
    pk_a = [peak(tl, AWARE, r) for tl, r in zip(timelines, tables)]
    pk_p = [peak(tl, PLAIN, r) for tl, r in zip(timelines, tables)]
    out.append(measured("s65-daemon-contiguity", pk_a, seeds, src, cmd, note=note))
    out.append(measured("s65-cache-contiguity", pk_p, seeds, src, cmd, note=note))
    out.append(measured("s65-contiguity-order", pk_a, seeds, src, cmd, other=pk_p, other_label="the plain daemon's peak",
                        note=note))
    last = lambda rows, cfg: max(r["finish_s"] for r in runs(rows, cfg))  # noqa: E731
    out.append(measured("s65-finish", [last(r, PLAIN) / last(r, AWARE) for r in tables], seeds, src, cmd,
                        note=f"last run ends (plain / aware) per seed: " + "; ".join(
                            f"{s}: {last(r, PLAIN):.1f} / {last(r, AWARE):.1f} s" for s, r in zip(seeds, tables))))
    return out
