"""Result objects: the core's typed results, with DataFrame views.

A ``SimResult`` holds the core's ``Record`` of one simulation (the Rust
result's fields, read by attribute: ``r.record.translation.walks``; see
``hugescope-py/src/record.rs``). Every figure is traceable to a field of
that record, and the JSON files are written from it by the core; cycle
figures are estimates of the cost model (``r.record.cost.kind ==
"estimate"``), never measurements.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Optional

from . import _core


def as_record(data) -> "_core.Record":
    """The core's record of a result: a ``Record`` as is, or one read from
    a dict (a checkpoint's entry, a saved result file)."""
    if isinstance(data, _core.Record):
        return data
    if isinstance(data, SimResult):
        return data.record
    return _core.Record.from_json(json.dumps(data))


class SimResult:
    """The result of one simulation.

    ``record`` is the core's typed result (attributes); ``to_dict()`` gives
    the full structure as plain dicts; ``to_frame()`` one row per page size;
    ``summary()`` a flat dict of the headline numbers.
    """

    def __init__(self, data):
        self.record = as_record(data)
        self._dict = None

    def _plain(self) -> Dict[str, Any]:
        # The plain form, made once for dict-style reads (``r["translation"]``).
        if self._dict is None:
            self._dict = self.record.to_dict()
        return self._dict

    def __getitem__(self, key: str) -> Any:
        return self._plain()[key]

    def __contains__(self, key: str) -> bool:
        return key in self.record

    def to_dict(self) -> Dict[str, Any]:
        return self.record.to_dict()

    def to_json(self, indent: int = 2) -> str:
        """The result as JSON, written by the core from its record."""
        return self.record.to_json(indent)

    def summary(self) -> Dict[str, Any]:
        r = self.record
        t, c = r.translation, r.cost
        out = {
            "pages": getattr(r, "pages", None),
            "policy": getattr(r, "policy", None),
            "accesses": t.accesses,
            "l1_hits": t.l1_hits,
            "l2_hits": t.l2_hits,
            "walks": t.walks,
            "walk_refs": t.walk_refs,
            "pwc_hits": t.pwc_hits,
            "walks_per_1k": t.walks_per_1k_accesses,
            "walk_rate": t.walk_rate,
            "translation_share_est": c.translation_share,
            "total_cycles_est": c.total_cycles,
        }
        if getattr(r, "speedup_vs_base", None) is not None:
            out["speedup_est"] = r.speedup_vs_base
            out["xlat_speedup_est"] = getattr(r, "translation_speedup_vs_base", None)
        if "os_stats" in r:
            o = r.os_stats
            procs = getattr(r, "processes", [])
            fp = sum(p.footprint_bytes for p in procs) or getattr(r, "footprint_bytes", None) or 0
            huge = sum(p.huge_bytes for p in procs)
            out.update({
                "label": getattr(r, "label", None),
                "huge_bytes": huge,
                "huge_share": huge / fp if fp else 0.0,
                "promotions": o.promotions,
                "faults_base": o.faults_base,
                "faults_huge": sum(n for _, n in o.faults_huge),
                "fault_fallbacks": o.fault_fallbacks,
                "bloat": max((p.bloat for p in procs), default=1.0),
                "virtual_seconds": getattr(r, "virtual_seconds", None),
            })
            # Reservation-based policies (navarro): the counters exist only
            # when reservations were made, so other summaries are unchanged.
            for key in ("reservations", "preemptions", "peak_reserved_frames", "wp_traps", "writeback_bytes"):
                if key in o:
                    out[key] = getattr(o, key)
            # Page daemon runs only (os.pagedaemon, docs/kernel.md): what it
            # evicted and the contiguity left at the end.
            d = getattr(o, "pagedaemon", None)
            if d is not None:
                out.update({"pages_evicted": d.pages_evicted, "refaults_soft": d.refaults_soft,
                            "refaults_hard": d.refaults_hard, "bytes_written_back": d.bytes_written_back,
                            "wired_frames": d.wired_frames})
            if getattr(o, "contiguity", None) is not None:
                out["contiguity"] = o.contiguity.score
        # Virtualized runs only (--host-policy): the hypervisor's counters.
        v = getattr(r, "virt", None)
        if v is not None:
            out.update({"host_policy": v.host_policy, "vm_exits": v.vm_exits.total,
                        "vm_exits_after_zap": v.vm_exits.ept_violation_after_zap,
                        "vm_exit_seconds": v.vm_exit_seconds, "guest_huge_bytes": v.guest_huge_bytes,
                        "host_huge_bytes": v.host_huge_bytes})
        return {k: v for k, v in out.items() if v is not None}

    def walks_by_pair(self):
        """Virtualized runs: walks and walk references per (guest, host) leaf
        page size (empty for a native run)."""
        import pandas as pd

        v = getattr(self.record, "virt", None)
        pairs = [] if v is None else [p.to_dict() for p in v.walks_by_pair]
        return pd.DataFrame(pairs, columns=["guest", "host", "walks", "walk_refs"])

    def timeline(self):
        """Huge-page bytes, RSS and FMFI over virtual time (one row per sample
        and process); with the page daemon also the contiguity metric
        (Navarro Fig. 5), whose column is absent otherwise."""
        import pandas as pd

        rows = []
        for smp in getattr(self.record, "timeline", []):
            for pid, (h, r) in enumerate(zip(smp.huge_bytes, smp.rss_bytes)):
                row = {"time_s": smp.time_s, "accesses": smp.accesses, "pid": pid, "huge_bytes": h,
                       "rss_bytes": r, "fmfi": smp.fmfi, "promotions": smp.promotions}
                if "contiguity" in smp:
                    row["contiguity"] = smp.contiguity
                rows.append(row)
        return pd.DataFrame(rows)

    def pagedaemon(self) -> Dict[str, Any]:
        """The page daemon's counters (``os_stats.pagedaemon``) plus the final
        contiguity metric; empty when the run had no daemon, wired stream or
        process exit configured."""
        o = getattr(self.record, "os_stats", None)
        d = None if o is None else getattr(o, "pagedaemon", None)
        out = {} if d is None else d.to_dict()
        c = None if o is None else getattr(o, "contiguity", None)
        if c is not None:
            out["contiguity"] = c.score
            out["free_extent_share"] = list(c.free_extent_share)
        return out

    def processes(self):
        """One row per process at the end of the run: pid, name, finish time
        (concurrent runs; NaN otherwise), accesses, huge-page bytes, RSS, the
        RSS base pages alone would need, and bloat (RSS / base RSS)."""
        import pandas as pd

        cols = ["pid", "name", "finish_seconds", "accesses", "huge_bytes", "rss_bytes", "base_rss_bytes", "bloat"]
        rows = [{c: getattr(p, c, None) for c in cols} for p in getattr(self.record, "processes", [])]
        df = pd.DataFrame(rows, columns=cols)
        # Single-trace runs have no finish time or per-process count: missing
        # values, with the columns' types the same as in a concurrent run.
        df["finish_seconds"] = df["finish_seconds"].astype(float)
        df["accesses"] = df["accesses"].astype("Int64")
        return df

    def plan(self) -> dict:
        """The plan this policy executed (for ``--emit-plan`` and real replay)."""
        plan = getattr(self.record, "executed_plan", [])
        return {"version": 1, "entries": [e.to_dict() if isinstance(e, _core.Record) else e for e in plan]}

    def to_frame(self):
        """One row per page size: accesses, L1/L2 hits and misses, walks."""
        import pandas as pd

        return pd.DataFrame([s.to_dict() for s in self.record.translation.by_page_size]).set_index("page_size")

    def __repr__(self) -> str:
        s = self.summary()
        return (
            f"SimResult(pages={s.get('pages')!r}, accesses={s['accesses']}, walks={s['walks']}, "
            f"walks_per_1k={s['walks_per_1k']:.2f}, translation_share_est={s['translation_share_est']:.3f})"
        )


#: The name of the row of accesses outside every traced region.
OUTSIDE = "(outside every region)"


class RegionProfile:
    """A static run's accesses, TLB misses (walks) and walk cycles by trace
    region (``api.region_profile``), with the run itself.

    ``record`` is the core's typed result (``regions``, ``outside``,
    ``walk_cycles``, ``how``, ``result``); ``result`` the run as a
    ``SimResult``, equal to ``simulate(trace, pages=...)``'s; ``rows()``
    every region, most walk cycles first, then the row of addresses outside
    every region; ``to_frame()`` the same as a DataFrame. Walk cycles are
    estimates of the cost model.
    """

    COLUMNS = ["name", "base", "len", "kind", "pid", "accesses", "walks", "walk_refs", "walk_cycles",
               "walk_cycle_share"]

    def __init__(self, data):
        self.record = as_record(data)

    @property
    def result(self) -> SimResult:
        return SimResult(self.record.result)

    def rows(self, header: Optional[Dict[str, Any]] = None) -> list:
        """Every region and the row of addresses outside them (``name`` ==
        ``OUTSIDE``, no base), most walk cycles first (ties: most accesses,
        then the core's order). With the trace's ``header``
        (``trace_info(trace)["header"]``), a row whose region records its
        allocation site also has it as ``site``."""
        out = [r.to_dict() for r in self.record.regions]
        outside = self.record.outside.to_dict()
        out.append({"name": OUTSIDE, "base": None, "len": None, "kind": None, "pid": None, **outside})
        if header is not None:
            sites = {(int(r.get("pid", 0)), int(r["base"]), int(r["len"]), r["name"]): r["site"]
                     for r in header.get("regions", []) if r.get("site")}
            for row in out:
                site = sites.get((row["pid"], row["base"], row["len"], row["name"]))
                if site is not None:
                    row["site"] = site
        # Python's sort is stable: the core's order breaks ties.
        return sorted(out, key=lambda r: (-r["walk_cycles"], -r["accesses"]))

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame(self.rows(), columns=self.COLUMNS)

    def to_dict(self) -> Dict[str, Any]:
        return self.record.to_dict()

    def to_json(self, indent: int = 2) -> str:
        return self.record.to_json(indent)

    def __repr__(self) -> str:
        return f"RegionProfile(pages={self.record.pages!r}, regions={len(self.record.regions)})"
