"""Trace-generation rows of ``hugescope bench`` (issue #16): for GUPS and
bfs, the generator alone (its accesses dropped by a sink in the same process)
against the same run written to a ``.hst`` file end to end (packing, byte
planes, zstd, CRC, the disk, fsync, rename), through the path ``hugescope
trace`` runs. The measurement is the core's (``_core.bench_tracegen``); this
module picks the cases and lays out the rows.
"""

from __future__ import annotations

import json
import math
from typing import Any, Dict, List

from rich.table import Table

from . import _core

#: Accesses of a bfs run on a Kronecker graph per vertex (degree 16, seed 1:
#: 30.6M accesses at scale 21, 3.8M at scale 18), to size the bfs case like
#: the GUPS one.
BFS_ACCESSES_PER_VERTEX = 14.6


def bfs_scale(accesses: int) -> int:
    """The Kronecker scale whose bfs trace has about ``accesses`` accesses
    (between 8 and 24)."""
    return max(8, min(24, round(math.log2(max(1.0, accesses / BFS_ACCESSES_PER_VERTEX)))))


def cases(gups_size: str, accesses: int) -> List[tuple]:
    """(workload, params): GUPS as the bench's own trace, bfs at the scale of
    about as many accesses."""
    return [("gups", {"size": gups_size, "updates": max(1, accesses // 2)}),
            ("bfs", {"scale": bfs_scale(accesses)})]


def rows(gups_size: str, accesses: int, repeats: int, directory: str) -> List[Dict[str, Any]]:
    """Measure every case (``repeats`` passes of each kind; trace files are
    written in ``directory`` and deleted). One dict per case: the core's
    report, plus ``ratio_without_setup``, the ratio of the two runs' times
    after the setup of the generator's best pass is taken from both (an
    estimate: it assumes the setup costs the same in both runs)."""
    out = []
    for name, params in cases(gups_size, accesses):
        r = json.loads(_core.bench_tracegen(name, json.dumps(params), repeats, directory))
        gen, e2e, setup = r["generator"]["seconds"], r["end_to_end"]["seconds"], r["setup_seconds"]
        r["ratio_without_setup"] = (gen - setup) / (e2e - setup) if e2e > setup else None
        out.append(r)
    return out


def table(results: List[Dict[str, Any]], repeats: int) -> Table:
    """The rows as a table for the console."""
    t = Table(title=f"trace generation (measurements: wall time of {repeats} whole runs of each kind, alternating, setup included; "
                    f"best and median; file encoded on a second thread)")
    for c in ("workload", "accesses", "generator alone (M acc/s)", "median", "end to end to disk (M acc/s)",
              "median", "setup (s)", "ratio", "median ratio", "ratio without setup (estimate)"):
        t.add_column(c, justify="right")
    for r in results:
        p = r["params"]
        what = f"gups {p['size']}" if r["workload"] == "gups" else f"bfs scale {p['scale']}"
        ws = r["ratio_without_setup"]
        t.add_row(what, f"{r['generator']['accesses']:,}",
                  f"{r['generator']['accesses_per_second'] / 1e6:.1f}",
                  f"{r['generator']['median_accesses_per_second'] / 1e6:.1f}",
                  f"{r['end_to_end']['accesses_per_second'] / 1e6:.1f}",
                  f"{r['end_to_end']['median_accesses_per_second'] / 1e6:.1f}",
                  f"{r['setup_seconds']:.2f}", f"{r['ratio']:.2f}", f"{r['median_ratio']:.2f}",
                  "-" if ws is None else f"{ws:.2f}")
    return t
