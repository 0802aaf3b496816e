"""Result objects: dict-backed, with DataFrame views.

Every figure is traceable to a counter in the JSON the core produced; cycle
figures are estimates of the cost model (``result["cost"]["kind"] ==
"estimate"``), never measurements.
"""

from __future__ import annotations

import json
from typing import Any, Dict


class SimResult:
    """The result of one simulation.

    ``to_dict()`` gives the full JSON structure; ``to_frame()`` one row per page
    size; ``summary()`` a flat dict of the headline numbers.
    """

    def __init__(self, data: Dict[str, Any]):
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def to_dict(self) -> Dict[str, Any]:
        return json.loads(json.dumps(self._data))

    def to_json(self, indent: int = 2) -> str:
        return json.dumps(self._data, indent=indent, sort_keys=False)

    def summary(self) -> Dict[str, Any]:
        t = self._data["translation"]
        c = self._data["cost"]
        out = {
            "pages": self._data.get("pages"),
            "policy": self._data.get("policy"),
            "accesses": t["accesses"],
            "l1_hits": t["l1_hits"],
            "l2_hits": t["l2_hits"],
            "walks": t["walks"],
            "walk_refs": t["walk_refs"],
            "pwc_hits": t["pwc_hits"],
            "walks_per_1k": t["walks_per_1k_accesses"],
            "walk_rate": t["walk_rate"],
            "translation_share_est": c["translation_share"],
            "total_cycles_est": c["total_cycles"],
        }
        if self._data.get("speedup_vs_base") is not None:
            out["speedup_est"] = self._data["speedup_vs_base"]
            out["xlat_speedup_est"] = self._data.get("translation_speedup_vs_base")
        if "os_stats" in self._data:
            o = self._data["os_stats"]
            procs = self._data.get("processes", [])
            fp = sum(p["footprint_bytes"] for p in procs) or self._data.get("footprint_bytes") or 0
            huge = sum(p["huge_bytes"] for p in procs)
            out.update({
                "label": self._data.get("label"),
                "huge_bytes": huge,
                "huge_share": huge / fp if fp else 0.0,
                "promotions": o["promotions"],
                "faults_base": o["faults_base"],
                "faults_huge": sum(n for _, n in o["faults_huge"]),
                "fault_fallbacks": o["fault_fallbacks"],
                "bloat": max((p["bloat"] for p in procs), default=1.0),
                "virtual_seconds": self._data.get("virtual_seconds"),
            })
            # Reservation-based policies (navarro): the counters exist only
            # when reservations were made, so other summaries are unchanged.
            for key in ("reservations", "preemptions", "peak_reserved_frames", "wp_traps", "writeback_bytes"):
                if key in o:
                    out[key] = o[key]
            # Page daemon runs only (os.pagedaemon, docs/kernel.md): what it
            # evicted and the contiguity left at the end.
            d = o.get("pagedaemon")
            if d is not None:
                out.update({k: d[k] for k in ("pages_evicted", "refaults_soft", "refaults_hard", "bytes_written_back",
                                              "wired_frames")})
            if o.get("contiguity") is not None:
                out["contiguity"] = o["contiguity"]["score"]
        # Virtualized runs only (--host-policy): the hypervisor's counters.
        v = self._data.get("virt")
        if v is not None:
            out.update({"host_policy": v["host_policy"], "vm_exits": v["vm_exits"]["total"],
                        "vm_exits_after_zap": v["vm_exits"]["ept_violation_after_zap"],
                        "vm_exit_seconds": v["vm_exit_seconds"], "guest_huge_bytes": v["guest_huge_bytes"],
                        "host_huge_bytes": v["host_huge_bytes"]})
        return {k: v for k, v in out.items() if v is not None}

    def walks_by_pair(self):
        """Virtualized runs: walks and walk references per (guest, host) leaf
        page size (empty for a native run)."""
        import pandas as pd

        return pd.DataFrame((self._data.get("virt") or {}).get("walks_by_pair", []),
                            columns=["guest", "host", "walks", "walk_refs"])

    def timeline(self):
        """Huge-page bytes, RSS and FMFI over virtual time (one row per sample
        and process); with the page daemon also the contiguity metric
        (Navarro Fig. 5), whose column is absent otherwise."""
        import pandas as pd

        rows = []
        for smp in self._data.get("timeline", []):
            for pid, (h, r) in enumerate(zip(smp["huge_bytes"], smp["rss_bytes"])):
                row = {"time_s": smp["time_s"], "accesses": smp["accesses"], "pid": pid, "huge_bytes": h,
                       "rss_bytes": r, "fmfi": smp["fmfi"], "promotions": smp["promotions"]}
                if "contiguity" in smp:
                    row["contiguity"] = smp["contiguity"]
                rows.append(row)
        return pd.DataFrame(rows)

    def pagedaemon(self) -> Dict[str, Any]:
        """The page daemon's counters (``os_stats.pagedaemon``) plus the final
        contiguity metric; empty when the run had no daemon, wired stream or
        process exit configured."""
        o = self._data.get("os_stats", {})
        out = dict(o.get("pagedaemon") or {})
        if o.get("contiguity") is not None:
            out["contiguity"] = o["contiguity"]["score"]
            out["free_extent_share"] = list(o["contiguity"]["free_extent_share"])
        return out

    def processes(self):
        """One row per process at the end of the run: pid, name, finish time
        (concurrent runs; NaN otherwise), accesses, huge-page bytes, RSS, the
        RSS base pages alone would need, and bloat (RSS / base RSS)."""
        import pandas as pd

        cols = ["pid", "name", "finish_seconds", "accesses", "huge_bytes", "rss_bytes", "base_rss_bytes", "bloat"]
        rows = [{c: p.get(c) for c in cols} for p in self._data.get("processes", [])]
        df = pd.DataFrame(rows, columns=cols)
        # Single-trace runs have no finish time or per-process count: missing
        # values, with the columns' types the same as in a concurrent run.
        df["finish_seconds"] = df["finish_seconds"].astype(float)
        df["accesses"] = df["accesses"].astype("Int64")
        return df

    def plan(self) -> dict:
        """The plan this policy executed (for ``--emit-plan`` and real replay)."""
        return {"version": 1, "entries": self._data.get("executed_plan", [])}

    def to_frame(self):
        """One row per page size: accesses, L1/L2 hits and misses, walks."""
        import pandas as pd

        return pd.DataFrame(self._data["translation"]["by_page_size"]).set_index("page_size")

    def __repr__(self) -> str:
        s = self.summary()
        return (
            f"SimResult(pages={s.get('pages')!r}, accesses={s['accesses']}, walks={s['walks']}, "
            f"walks_per_1k={s['walks_per_1k']:.2f}, translation_share_est={s['translation_share_est']:.3f})"
        )
