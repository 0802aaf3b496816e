"""Walk cost against footprint, measured: the microbenchmarks of
``hugescope calibrate`` and the fit of the page-table line cache's
parameters to them (docs/cost-model.md, "Calibration from microbenchmarks").

For each footprint (log-spaced from the L1 data cache's reach to several GiB)
and each page size (4 KiB, 2 MiB) a pointer chase and a stream of independent
random loads are timed natively (``hugescope_linux::microbench``: one cpu,
warm-up, median of repeats; the share of the buffer really mapped huge is
read from smaps). The difference ``d(F) = t_4k(F) - t_2m(F)`` of the chase is
the translation time one dependent access pays with base pages beyond what it
pays with huge pages.

The model of ``d`` is the simulator's (``hw/ptcache.rs``), counted
analytically for uniform random access (``walk_counts``): per access, the
L1 TLB misses that hit the L2 TLB and the walk references, and of those the
share that hits a page-table line cache of C lines (Che's approximation of
LRU under independent references; each level's lines are equally likely)::

    d(F) = l2(F) x l2_hit_ns + llc(F; C) x walk_ref_llc_ns + mem(F; C) x walk_ref_mem_ns
           (4 KiB counts minus 2 MiB counts)

Linear in the three latencies for a fixed C: ``fit`` solves non-negative
least squares in (``l2_hit_ns``, ``walk_ref_llc_ns``, ``walk_ref_mem_ns -
walk_ref_llc_ns``), so a miss never costs less than a hit, for every C of a
log-spaced grid and keeps the C with the smallest residual. The random-access difference against the chase's gives
the share of walk time independent accesses hide (``overlap_random``), a
starting value for the workloads' overlap (``cost_model``).
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable, Dict, List, Optional, Sequence

from ._core import HugescopeError

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
#: Footprints from 16 KiB (inside any L1 data cache) by factors of 4 to 4 GiB
#: (two buffers of 4 GiB are held at once: 8 GiB of a shared machine is the
#: most the default takes; larger ones with --footprints).
DEFAULT_FOOTPRINTS = [16 * KIB * 4 ** k for k in range(10)]
MODES = ("chase", "random")
PAGES = ("4k", "2m")
#: C grid of the fit: 64 lines (4 KiB) to 4Mi lines (256 MiB), 4 per octave.
C_GRID = [int(round(2 ** (6 + k / 4))) for k in range(16 * 4 + 1)]
#: Entries per 64-byte page-table line; bytes one line's entries map, per level.
PTES_PER_LINE = 8
LINE_SPAN = {"pte": 4 * KIB * PTES_PER_LINE, "pde": 2 * MIB * PTES_PER_LINE, "pdpte": GIB * PTES_PER_LINE}


def measure(footprints: Sequence[int] = DEFAULT_FOOTPRINTS, accesses: int = 1 << 21, repeats: int = 3,
            modes: Sequence[str] = MODES, log: Callable[[str], None] = lambda s: None) -> List[Dict[str, Any]]:
    """Run the microbenchmarks; one ``Measurement`` dict per (footprint,
    mode, pages). Each footprint holds a buffer of each page size at once and
    interleaves their passes; footprints whose two buffers do not fit in
    available memory (less 1 GiB) are skipped with a log line; anything else
    the kernel refuses is an error."""
    from . import _core

    avail = _mem_available()
    out = []
    for f in footprints:
        if avail is not None and len(PAGES) * f + GIB > avail:
            log(f"skipping {_size(f)}: {len(PAGES)} buffers need {_size(len(PAGES) * f)}, "
                f"{_size(avail)} available (1 GiB kept free)")
            continue
        log(f"microbenchmarks over {_size(f)}: {', '.join(modes)}, pages {' and '.join(PAGES)}, interleaved")
        spec = {"footprint": int(f), "pages": list(PAGES), "modes": list(modes), "accesses": int(accesses),
                "repeats": int(repeats), "seed": 1}
        out.extend(json.loads(_core.microbench(json.dumps(spec))))
    return out


def _mem_available() -> Optional[int]:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _size(b: float) -> str:
    for unit, n in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if b >= n:
            return f"{b / n:g} {unit}"
    return f"{b:g} B"


def _tlb_entries(machine: Dict[str, Any], page: str, level: str) -> int:
    """Entries of the ``level`` ("l1"/"l2") TLB structure holding ``page``."""
    for key, c in (machine.get(level) or {}).items():
        if page in key.split("+"):
            return int(c["entries"])
    return 0


def _pwc_entries(machine: Dict[str, Any], name: str) -> int:
    return int(((machine.get("pwc") or {}).get(name) or {}).get("entries", 0))


def _che_hits(lines: Dict[str, float], rate: Dict[str, float], c: float) -> Dict[str, float]:
    """Hit probability per level of an LRU of ``c`` lines under independent
    references (Che et al., JSAC 2002): ``lines[l]`` equally likely lines of
    level l referenced ``rate[l]`` times per walk in all. The characteristic
    time T solves sum_l lines_l (1 - exp(-T rate_l / lines_l)) = c."""
    total = sum(lines.values())
    if c >= total:
        return {k: 1.0 for k in lines}

    def filled(t: float) -> float:
        return sum(n * -math.expm1(-t * rate[k] / n) for k, n in lines.items() if n > 0)

    lo, hi = 0.0, 1.0
    while filled(hi) < c:
        hi *= 2.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if filled(mid) < c else (lo, mid)
    t = 0.5 * (lo + hi)
    return {k: (-math.expm1(-t * rate[k] / n) if n > 0 else 1.0) for k, n in lines.items()}


def walk_counts(footprint: float, page: str, machine: Dict[str, Any], c: float) -> Dict[str, float]:
    """Per access of uniform random loads over ``footprint`` bytes of ``page``
    pages on ``machine`` (a machine config dict: TLB and PWC sizes): the
    expected L2 TLB hits and walk references hitting (``llc``) and missing
    (``mem``) a page-table line cache of ``c`` lines. An LRU structure of E
    entries over n equally likely items hits with probability min(1, E/n)."""
    size = 4 * KIB if page == "4k" else 2 * MIB
    n = max(1.0, footprint / size)
    e1, e2 = _tlb_entries(machine, page, "l1"), _tlb_entries(machine, page, "l2")
    l1_miss = max(0.0, 1.0 - e1 / n)
    walk = max(0.0, 1.0 - (e1 + e2) / n)
    l2_hit = l1_miss - walk
    # References per walk by level: the leaf always; each level above it
    # unless its page-walk cache holds the entry (x86-64: l2 = PDE cache,
    # l3 = PDPTE cache; the PML4E is always cached for these footprints).
    pde_miss = max(0.0, 1.0 - _pwc_entries(machine, "l2") * 2 * MIB / footprint)
    pdpte_miss = max(0.0, 1.0 - _pwc_entries(machine, "l3") * GIB / footprint)
    if page == "4k":
        rate = {"pte": 1.0, "pde": pde_miss, "pdpte": pde_miss * pdpte_miss}
    else:
        rate = {"pde": 1.0, "pdpte": pdpte_miss}
    lines = {k: max(1.0, footprint / LINE_SPAN[k]) for k in rate}
    hit = _che_hits(lines, rate, c)
    refs = sum(rate.values())
    llc = sum(rate[k] * hit[k] for k in rate)
    return {"l2_hits": l2_hit, "walks": walk, "refs": walk * refs, "llc": walk * llc, "mem": walk * (refs - llc)}


def _table(ms: Sequence[Dict[str, Any]], mode: str) -> List[Dict[str, Any]]:
    """Per footprint measured in both page sizes: ns per access of each and their difference."""
    by = {(m["footprint"], m["pages"]): m for m in ms if m["mode"] == mode}
    rows = []
    for f in sorted({k[0] for k in by}):
        if (f, "4k") in by and (f, "2m") in by:
            a, b = by[(f, "4k")], by[(f, "2m")]
            rows.append({"footprint": f, "ns_4k": a["ns_per_access"], "ns_2m": b["ns_per_access"],
                         "delta_ns": a["ns_per_access"] - b["ns_per_access"],
                         "huge_fraction_2m": b["huge_fraction"], "huge_fraction_4k": a["huge_fraction"]})
    return rows


def fit(ms: Sequence[Dict[str, Any]], machine: Dict[str, Any], grid: Sequence[int] = C_GRID) -> Dict[str, Any]:
    """Fit ``l2_hit_ns``, ``walk_ref_llc_ns``, ``walk_ref_mem_ns`` (each >= 0)
    and the capacity ``pt_cache_lines`` (from ``grid``) to the chase's
    4k - 2m differences; see the module's docstring. Returns the parameters,
    the residual, the per-footprint table (measured and fitted difference)
    and ``overlap_random``."""
    from .calibrate import nnls

    # A footprint whose 2 MiB buffer the kernel could not make huge (too few
    # free 2 MiB blocks) measures nothing about walks: left out, and said.
    all_rows = _table(ms, "chase")
    excluded = [{"footprint": r["footprint"], "huge_fraction_2m": r["huge_fraction_2m"]} for r in all_rows
                if r["huge_fraction_2m"] < 0.9]
    rows = [r for r in all_rows if r["huge_fraction_2m"] >= 0.9]
    if len(rows) < 3:
        bad = "; ".join(f"{_size(e['footprint'])} {100 * e['huge_fraction_2m']:.0f}% huge" for e in excluded)
        raise HugescopeError(f"walk calibration needs chase measurements in both page sizes, the 2 MiB buffer at "
                             f"least 90% huge (smaps), at 3 or more footprints; got {len(rows)}"
                             + (f" (left out: {bad}; is transparent_hugepage/enabled 'never', or memory too "
                                "fragmented?)" if excluded else ""))
    best = None
    for c in grid:
        a, y = [], []
        for r in rows:
            w4 = walk_counts(r["footprint"], "4k", machine, c)
            w2 = walk_counts(r["footprint"], "2m", machine, c)
            # Weighted by the access's own time: timing noise on a shared
            # machine grows with the latency measured (a 1 us chase step
            # wobbles by tens of ns, a 5 ns one by a few tenths), so each
            # row counts by its difference relative to it. 1 ns floor.
            wt = 1.0 / max(1.0, r["ns_2m"])
            # Unknowns (l2_hit_ns, walk_ref_llc_ns, extra) with
            # walk_ref_mem_ns = walk_ref_llc_ns + extra, all >= 0: a
            # reference that misses never costs less than one that hits.
            a.append([wt * (w4["l2_hits"] - w2["l2_hits"]), wt * (w4["refs"] - w2["refs"]),
                      wt * (w4["mem"] - w2["mem"])])
            y.append(wt * r["delta_ns"])
        x, rss = nnls(a, y)
        if best is None or rss < best[2] - 1e-12:
            best = (c, x, rss)
    c, (l2, llc, extra), rss = best
    mem = llc + extra
    for r in rows:
        w4 = walk_counts(r["footprint"], "4k", machine, c)
        w2 = walk_counts(r["footprint"], "2m", machine, c)
        r["delta_fit_ns"] = sum((w4[k] - w2[k]) * v for k, v in (("l2_hits", l2), ("llc", llc), ("mem", mem)))
    rand = {r["footprint"]: r for r in _table(ms, "random")}
    hidden = [1.0 - rand[r["footprint"]]["delta_ns"] / r["delta_ns"] for r in rows
              if r["footprint"] in rand and r["delta_ns"] > 5.0]
    overlap = min(1.0, max(0.0, sorted(hidden)[len(hidden) // 2])) if hidden else None
    return {"l2_hit_ns": l2, "walk_ref_llc_ns": llc, "walk_ref_mem_ns": mem, "pt_cache_lines": int(c),
            "rss": rss, "overlap_random": overlap, "table": rows, "random_table": list(rand.values()),
            "excluded": excluded}
