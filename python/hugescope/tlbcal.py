"""This machine's TLBs for the calibrated preset (issue #36): the geometry the
CPU reports (CPUID, decoded by ``hugescope_core::cpuid``), checked against
the reach measured on it (``hugescope_linux::tlb_reach``), and the L1/L2
tables the preset gets from them.

The measurement is a page-strided pointer chase over N pages, one line per
page: with 4 KiB pages (and, interleaved, the same pattern on 2 MiB pages)
and with 2 MiB pages 2 MiB apart. The time of a load steps up where the
pages stop fitting a TLB level: ``knees`` finds the steps. Because one line
is touched per page, a step can also be the data cache filling (N lines x
64 B crossing its size): such steps are named as data-cache steps, not
reach. The first reach step of a series is its first-level TLB's reach, the
second the second level's (where walks begin); later steps are walks
getting dearer as page-table lines leave the data caches.

Each (level, page size) then gets: CPUID's entries, the measured reach in
pages, a verdict (agree: the measured step lies within a factor 1.5 of
CPUID's entries), and what the preset uses: CPUID's entries when they agree
or nothing was measured; the measurement (the largest page count measured
before the step) when CPUID reported nothing or disagrees; the starting
preset's structure, labelled a default, when neither says anything.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
PAGE = {"4k": 4 * KIB, "2m": 2 * MIB}
LINE = 64
#: Page counts of the two series: 2^(k/3) (three points per doubling), 4 KiB
#: pages from 8 to 16384 (64 MiB), 2 MiB pages from 2 to 512 (1 GiB) when
#: memory allows (fewer otherwise).
COUNTS_4K = sorted({int(round(2 ** (k / 3))) for k in range(9, 3 * 14 + 1)})
COUNTS_2M = sorted({int(round(2 ** (k / 3))) for k in range(3, 3 * 9 + 1)})
#: A step: the load time rises by this share of the level before it and at
#: least by ABS_NS, at a point and at the next one (one noisy pass is no step).
REL_STEP = 0.25
ABS_NS = 0.5
#: Measured reach and CPUID's entries agree within this factor (the grid
#: has three points per doubling: 1.26 apart).
AGREE = 1.5
#: Structures that serve data loads (the simulator models the data side).
DATA_KINDS = ("data", "load", "unified")


# ---------------------------------------------------------------- what the CPU reports

def cpu_geometry(raw: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The decoded geometry of ``raw`` CPUID leaves (``RawLeaves``; default:
    this CPU's), with the raw leaves under ``raw``."""
    from . import _core

    raw = json.loads(_core.cpuid_leaves()) if raw is None else raw
    g = json.loads(_core.cpuid_decode(json.dumps(raw)))
    g["raw"] = raw
    return g


def reported(geometry: Dict[str, Any], level: int, page: str) -> Optional[Dict[str, Any]]:
    """The data-side structure of ``level`` holding ``page`` (the largest,
    when several do: a micro-TLB in front of the main one is not its reach)."""
    c = [s for s in geometry["structures"]
         if s["level"] == level and s["kind"] in DATA_KINDS and page in s["pages"]]
    return max(c, key=lambda s: s["entries"]) if c else None


def cache_sizes(root: str = "/sys/devices/system/cpu/cpu0/cache") -> Dict[str, int]:
    """Data-cache sizes in bytes by name ("L1d", "L2", "L3") from sysfs; {} if unknown."""
    out: Dict[str, int] = {}
    try:
        for d in sorted(os.listdir(root)):
            p = os.path.join(root, d)
            try:
                level = open(os.path.join(p, "level")).read().strip()
                kind = open(os.path.join(p, "type")).read().strip()
                size = open(os.path.join(p, "size")).read().strip()
            except OSError:
                continue
            if kind == "Instruction":
                continue
            mult = {"K": KIB, "M": MIB, "G": GIB}.get(size[-1:], 1)
            out[f"L{level}" + ("d" if kind == "Data" else "")] = int(size.rstrip("KMG")) * mult
    except OSError:
        pass
    return out


# ---------------------------------------------------------------- measuring

def counts_for(mem_available: Optional[int]) -> Tuple[List[int], List[int]]:
    """The page counts to measure: every 2 MiB count whose buffer fits in
    available memory less 1 GiB (none if none fits)."""
    c2 = [n for n in COUNTS_2M if mem_available is None or n * PAGE["2m"] + GIB <= mem_available]
    return list(COUNTS_4K), c2


def measure(accesses: int = 1 << 17, repeats: int = 3, log: Callable[[str], None] = lambda s: None) -> Dict[str, Any]:
    """Run both series on this machine (a few seconds; at most 1 GiB held)."""
    from . import _core
    from .walkcal import _mem_available, _size

    c4, c2 = counts_for(_mem_available())
    if len(c2) < len(COUNTS_2M):
        log(f"TLB reach: 2 MiB pages up to {c2[-1] if c2 else 0} ({_size((c2[-1] if c2 else 0) * PAGE['2m'])}): "
            "available memory less 1 GiB")
    log(f"TLB reach: page-strided chase over {c4[0]}..{c4[-1]} pages of 4 KiB"
        + (f" and {c2[0]}..{c2[-1]} pages of 2 MiB" if c2 else ""))
    spec = {"counts_4k": c4, "counts_2m": c2, "accesses": int(accesses), "repeats": int(repeats), "seed": 1}
    return json.loads(_core.tlb_reach(json.dumps(spec)))


# ---------------------------------------------------------------- finding the steps (pure)

def knees(curve: Sequence[Tuple[int, float]], rel: float = REL_STEP, abs_ns: float = ABS_NS,
          limit: int = 8) -> List[Dict[str, Any]]:
    """Steps of a load-time curve ``[(pages, ns), ...]`` (any order). The
    level starts at the median of the first three points; a step is the
    first point above ``level x (1 + rel)`` and ``level + abs_ns`` whose next
    point is too (the last point needs no confirmation). After a step the
    level is the median of the step's point and the two after it, so a
    rise spread over a few points is one step. Returns, per step: the pages
    before and at it, and the level (ns) before and after."""
    pts = sorted(curve)
    if len(pts) < 4:
        return []
    med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    level = med([v for _, v in pts[:3]])
    out: List[Dict[str, Any]] = []
    i = 3
    while i < len(pts) and len(out) < limit:
        above = lambda v: v > level * (1 + rel) and v > level + abs_ns  # noqa: E731
        if above(pts[i][1]) and (i + 1 == len(pts) or above(pts[i + 1][1])):
            after = med([v for _, v in pts[i:i + 3]])
            out.append({"pages_before": pts[i - 1][0], "pages_at": pts[i][0], "ns_before": level, "ns_after": after})
            level = after
            i += 3
            continue
        i += 1
    return out


def _curve(points: Sequence[Dict[str, Any]], series: str, backing: str) -> List[Tuple[int, float]]:
    """The fastest pass of each point: other work on a shared machine only
    ever slows a pass down, so the minimum is the least disturbed (the
    median where a record has no minimum)."""
    return [(p["pages"], p.get("ns_min", p["ns_per_access"])) for p in points
            if p["series"] == series and p["backing"] == backing]


def classify(steps: List[Dict[str, Any]], caches: Dict[str, int]) -> List[Dict[str, Any]]:
    """Name each step: a data-cache step when the lines touched (one per
    page) cross a data cache's size within a factor 1.5 at it, else reach."""
    out = []
    for s in steps:
        lo, hi = s["pages_before"] * LINE, s["pages_at"] * LINE
        cache = next((name for name, size in caches.items() if lo / AGREE <= size <= hi * AGREE), None)
        out.append(dict(s, kind="data cache" if cache else "reach", cache=cache))
    return out


# ---------------------------------------------------------------- geometry vs measurement

def analyse(geometry: Dict[str, Any], reach: Optional[Dict[str, Any]], caches: Dict[str, int],
            ghz: Optional[float]) -> Dict[str, Any]:
    """Per series its steps (classified) and per (level, page size) what CPUID
    reports, what was measured, the verdict and the entries the preset uses
    (``used`` None: neither says anything, the starting preset's stays)."""
    pts = (reach or {}).get("points") or []
    series: Dict[str, Any] = {}
    for s, backing in (("4k", "4k"), ("4k", "2m"), ("2m", "2m")):
        curve = _curve(pts, s, backing)
        if curve:
            st = classify(knees(curve), caches)
            # Two TLB levels: a reach step past the second is walks getting
            # dearer (page-table lines leaving the data caches), not a level.
            for k in [k for k in st if k["kind"] == "reach"][2:]:
                k["kind"] = "walks"
            for k in st:
                k["footprint_before"] = k["pages_before"] * PAGE[s]
                k["footprint_at"] = k["pages_at"] * PAGE[s]
                if ghz:
                    k["cycles_before"], k["cycles_after"] = k["ns_before"] * ghz, k["ns_after"] * ghz
            series[f"{s}/{backing}"] = {"steps": st, "max_pages": max(n for n, _ in curve),
                                        "huge_fraction": min(p["huge_fraction"] for p in pts
                                                             if p["series"] == s and p["backing"] == backing)}
    # A 2 MiB buffer the kernel left (mostly) small measures 4 KiB pages:
    # its steps say nothing of 2 MiB pages (THP "never", fragmented memory).
    usable = {k: s for k, s in series.items() if not k.endswith("/2m") or s["huge_fraction"] >= 0.9}
    levels = []
    for page in ("4k", "2m"):
        key = f"{page}/{page}"
        reach_steps = [k for k in (usable.get(key) or {}).get("steps", []) if k["kind"] == "reach"]
        for level in (1, 2):
            r = reported(geometry, level, page)
            m = reach_steps[level - 1] if len(reach_steps) >= level else None
            row: Dict[str, Any] = {"level": level, "page": page, "cpuid": r, "measured": m}
            # Whether a second level includes the first is not reported: its own entries are its reach.
            expected = None if r is None else int(r["entries"])
            if m is None:
                measured_max = (usable.get(key) or {}).get("max_pages")
                row["verdict"] = ("not measured" if measured_max is None else
                                  f"no step up to {measured_max} pages")
                if r is not None and measured_max is not None and expected is not None and expected * AGREE < measured_max:
                    row["verdict"] += f": CPUID's {expected} would have shown one"
                    row["used"] = {"entries": _round_ways(measured_max, r["ways"]), "ways": r["ways"],
                                   "from": f"measurement (a lower bound: no step up to {measured_max} pages; "
                                           f"CPUID says {r['entries']})"}
                elif r is not None:
                    row["used"] = {"entries": r["entries"], "ways": r["ways"], "from": f"CPUID ({r['source']})"}
                else:
                    row["used"] = None
            else:
                row["verdict"] = ("CPUID reports nothing" if r is None else
                                  "agree" if expected / AGREE <= m["pages_at"] and m["pages_before"] <= expected * AGREE
                                  else "disagree")
                if row["verdict"] == "agree":
                    row["used"] = {"entries": r["entries"], "ways": r["ways"],
                                   "from": f"CPUID ({r['source']}), confirmed by the measured step"}
                else:
                    ways = r["ways"] if r else 0
                    row["used"] = {"entries": _round_ways(m["pages_before"], ways), "ways": ways,
                                   "from": f"measurement (step between {m['pages_before']} and {m['pages_at']} pages"
                                           + (f"; CPUID says {r['entries']})" if r else ")")}
            levels.append(row)
    # A 2 MiB page that steps where 4 KiB pages step covers 4 KiB in the TLB.
    notes = []
    a = [k for k in (usable.get("4k/4k") or {}).get("steps", []) if k["kind"] == "reach"]
    b = [k for k in (usable.get("4k/2m") or {}).get("steps", []) if k["kind"] == "reach"]
    splintered = bool(a and b and abs(math.log(b[0]["pages_at"] / a[0]["pages_at"])) <= math.log(AGREE))
    if splintered:
        notes.append(f"2 MiB pages step where 4 KiB pages do ({b[0]['pages_at']} pages of 4 KiB, "
                     f"{b[0]['pages_at'] * 4} KiB): a 2 MiB page covers only 4 KiB in this TLB, as when a host backs "
                     "a guest's memory with 4 KiB pages; the simulator's 2 MiB TLB reach is not this machine's, and "
                     "2 MiB pages here shorten walks without extending reach")
    for key, s in series.items():
        if s["huge_fraction"] < 0.9 and key.endswith("/2m"):
            notes.append(f"series {key}: the 2 MiB buffer was only {100 * s['huge_fraction']:.0f}% huge (smaps): "
                         "its steps are not used")
    return {"series": series, "levels": levels, "splintered": splintered, "notes": notes}


def _round_ways(entries: int, ways: int) -> int:
    """Entries rounded down to a whole number of sets (at least one set)."""
    if ways <= 0:
        return max(1, int(entries))
    return max(ways, int(entries) // ways * ways)


# ---------------------------------------------------------------- the preset's tables

def machine_tables(analysis: Dict[str, Any], geometry: Dict[str, Any], start: Dict[str, Any]
                   ) -> Tuple[Dict[str, Dict[str, Dict[str, Any]]], List[str]]:
    """The ``l1`` and ``l2`` tables of the calibrated preset (key -> entries,
    ways, and ``why``: where the numbers come from), replacing ``start``'s
    (a machine config dict) where anything was reported or measured. A page
    size of ``start`` nobody reported (1 GiB here, on most CPUs) keeps the
    start's structure for it, labelled a default. Returns (tables, notes)."""
    used = {(r["level"], r["page"]): r["used"] for r in analysis["levels"] if r["used"]}
    tables: Dict[str, Dict[str, Dict[str, Any]]] = {"l1": {}, "l2": {}}
    notes = []
    sizes = [p for p in start["page_sizes"]]
    for level, name in ((1, "l1"), (2, "l2")):
        # Structures CPUID reports that hold several sizes stay one (Intel's STLB).
        done = set()
        for page in sizes:
            if page in done:
                continue
            r = reported(geometry, level, page)
            shared = [p for p in (r["pages"] if r else [page]) if p in sizes and p not in done] or [page]
            u = [used[(level, p)] for p in shared if (level, p) in used]
            if u:
                e = u[0]
                tables[name]["+".join(shared)] = {"entries": int(e["entries"]), "ways": int(e["ways"]),
                                                  "why": e["from"]}
                done.update(shared)
            elif r is not None:
                tables[name]["+".join(shared)] = {"entries": int(r["entries"]), "ways": int(r["ways"]),
                                                  "why": f"CPUID ({r['source']})"}
                done.update(shared)
        # What nobody reported: the start's structure for the remaining sizes.
        for key, c in (start.get(name) or {}).items():
            left = [p for p in key.split("+") if p not in done]
            if left:
                tables[name]["+".join(left)] = {"entries": int(c["entries"]), "ways": int(c["ways"]),
                                                "why": f"default: {start['name']}'s {name}.{key}, not reported by "
                                                       "CPUID nor measured"}
                done.update(left)
                notes.append(f"{name} {'+'.join(left)}: not reported by CPUID nor measured; {start['name']}'s "
                             f"{c['entries']} entries kept (a default)")
    return tables, notes
