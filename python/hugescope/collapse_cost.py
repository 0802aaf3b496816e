"""What one MADV_COLLAPSE of a populated 2 MiB region costs on this machine
now (issue #36: collapses cost 0.2-2.7 s a run and were not in advise's
estimate). ``advise`` measures the rate on the program itself first (a run
with every mapping collapsed, ``advise.collapse_rate``); this probe is its
fallback when that run collapses nothing.

``probe()`` maps a few 2 MiB-aligned regions of its own, fills every 4 KiB
page of them in base pages, and times ``madvise(MADV_COLLAPSE)`` on each: the
same kernel work (allocate a huge page, copy 512 base pages, remap) the
launcher's ``process_madvise`` asks for in the measured program. It takes
tens of milliseconds. Where the kernel refuses (no MADV_COLLAPSE before Linux
6.1, THP ``never``), the rate is the one measured on the development VM
(``docs/linux.md``) and the result says it was not measured here.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import statistics
import time
from typing import Any, Dict

HUGE = 2 << 20
MADV_COLLAPSE = 25
#: The middle of the 7-11 ms per populated region measured on the 2-core
#: development VM (docs/linux.md); used only when the probe cannot run.
FALLBACK_S_PER_REGION = 0.009
#: Regions the probe collapses: enough for a median, few enough to stay
#: well under a tenth of a second.
PROBE_REGIONS = 4


def probe(regions: int = PROBE_REGIONS) -> Dict[str, Any]:
    """Seconds per 2 MiB collapse: ``{"s_per_region", "measured", "regions",
    "how"}``; ``measured`` False when the kernel refused and the fallback
    rate is given instead (``how`` says why)."""
    if isinstance(regions, bool) or not isinstance(regions, int) or regions < 1:
        raise ValueError(f"regions must be an integer >= 1, got {regions!r}")
    size = (regions + 1) * HUGE
    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    buf = ctypes.c_char.from_buffer(m)
    try:
        # The first 2 MiB boundary inside the mapping: a collapse takes one
        # aligned 2 MiB range.
        off = -ctypes.addressof(buf) % HUGE
        length = regions * HUGE
        # Base pages at fault time whatever the THP mode (under 'always' a
        # fault would take a huge page and the collapse would do nothing),
        # then eligible again for the collapse.
        m.madvise(mmap.MADV_NOHUGEPAGE, off, length)
        page = mmap.PAGESIZE
        for a in range(off, off + length, page):
            m[a] = 1
        m.madvise(mmap.MADV_HUGEPAGE, off, length)
        times = []
        for r in range(regions):
            t0 = time.perf_counter()
            m.madvise(MADV_COLLAPSE, off + r * HUGE, HUGE)
            times.append(time.perf_counter() - t0)
    except OSError as e:
        name = errno.errorcode.get(e.errno, str(e.errno))
        return {"s_per_region": FALLBACK_S_PER_REGION, "measured": False, "regions": 0,
                "how": f"not measured (this kernel refused MADV_COLLAPSE: {name}); {FALLBACK_S_PER_REGION * 1e3:g} ms "
                       "per region, the middle of the 7-11 ms measured on the development VM (docs/linux.md)"}
    finally:
        del buf
        m.close()
    med = statistics.median(times)
    return {"s_per_region": med, "measured": True, "regions": regions,
            "how": f"measured: median wall time (time.perf_counter) of madvise(MADV_COLLAPSE) on {regions} 2 MiB "
                   f"regions hugescope mapped and filled in base pages itself (pid {os.getpid()}), just before the "
                   "measured runs"}
