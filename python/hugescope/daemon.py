"""A userspace huge-page daemon for live processes (issue #14, section 3).

The policy, the signals, the budget and the rate limit are in the Rust core
(``hugescope_linux::daemon``); this module only steps it at an interval, stops
it when the targets are gone or the time is up, and collects what it did.
``docs/daemon.md`` describes the signals, the policies and what demotion means.

    from hugescope import daemon
    r = daemon.run("hawkeye", pids=[1234], budget="64MiB", duration=60)
    r["final"]["processes"][0]["daemon_huge"]       # bytes the daemon made huge
"""

from __future__ import annotations

import json
import math
import os
import signal
import time
from typing import Any, Callable, Dict, Optional, Sequence

from . import _core, units
from .linux import PID_MAX

POLICIES = ("khugepaged", "ingens", "hawkeye", "pcc")
# Bounds of the step interval: 10 ms (a step reads smaps and pagemap of every
# watched process; faster is all overhead) to one hour.
INTERVAL_MIN_S = 0.01
INTERVAL_MAX_S = 3600.0
# Default rate: 8 collapses a second, i.e. 16 MiB/s. khugepaged's default scan
# (4096 pages every 10 s) is 8 regions per 10 s; the daemon decides from better
# information and so may act faster, while one collapse still costs 7-11 ms of
# copying on the development VM (docs/linux.md), about 8% of a core at this rate.
DEFAULT_RATE = 8.0


def _size(v, what: str) -> Optional[int]:
    if v is None:
        return None
    try:
        n = units.parse_size(v) if isinstance(v, str) else int(v)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what}: {v!r} is not a size ({e})") from None
    if n < (2 << 20):
        raise ValueError(f"{what}: {v!r} is less than one 2 MiB huge page")
    return n


def _seconds(v, what: str, lo: float, hi: float) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: {v!r} is not a number of seconds") from None
    if not (math.isfinite(x) and lo <= x <= hi):
        raise ValueError(f"{what}: {v!r} must be between {lo} and {hi} seconds")
    return x


def config(policy: str, pids: Sequence[int] = (), cgroup: Optional[str] = None,
           budget=None, budget_per_process=None, rate: float = DEFAULT_RATE,
           utilization: float = 0.9, set_madvise: bool = False) -> Dict[str, Any]:
    """The daemon's configuration, checked (ValueError names the bad field)."""
    if policy not in POLICIES:
        raise ValueError(f"--policy: {policy!r} is not one of {', '.join(POLICIES)}")
    out_pids = []
    for p in pids:
        if isinstance(p, bool) or not isinstance(p, int) or not 0 < p <= PID_MAX:
            raise ValueError(f"--pid: {p!r} is not a process id")
        out_pids.append(p)
    if not out_pids and cgroup is None:
        raise ValueError("daemon: give at least one --pid or a --cgroup")
    try:
        rate = float(rate)
        utilization = float(utilization)
    except (TypeError, ValueError):
        raise ValueError(f"--rate/--utilization: {rate!r}/{utilization!r} are not numbers") from None
    if not (math.isfinite(rate) and 0 < rate <= 1e6):
        raise ValueError(f"--rate: {rate!r} must be a number of collapses per second in (0, 1e6]")
    if not (math.isfinite(utilization) and 0 < utilization <= 1):
        raise ValueError(f"--utilization: {utilization!r} must be in (0, 1]")
    return {
        "policy": policy, "pids": out_pids, "cgroup": None if cgroup is None else os.fspath(cgroup),
        "budget_total": _size(budget, "--budget"),
        "budget_per_process": _size(budget_per_process, "--budget-per-process"),
        "rate": rate, "utilization": utilization, "set_madvise": bool(set_madvise),
    }


def run(policy: str, pids: Sequence[int] = (), cgroup: Optional[str] = None, *, budget=None,
        budget_per_process=None, rate: float = DEFAULT_RATE, interval: float = 1.0,
        duration: Optional[float] = None, utilization: float = 0.9, set_madvise: bool = False,
        on_step: Optional[Callable[[dict], None]] = None) -> Dict[str, Any]:
    """Run the daemon until every watched process has exited (pids only), or for
    ``duration`` seconds. Each step's status goes to ``on_step``. Returns
    ``{"config", "steps", "decisions", "final", "wall_s", "cpu_s"}``; ``cpu_s`` is
    the daemon's own CPU time (user + system of this process) over the run.
    SIGINT/SIGTERM (whatever a handler raises, a ``KeyboardInterrupt``) stop it
    between two steps; the exception propagates carrying the result so far as
    its ``daemon_result`` (``"stopped_by"`` naming the signal; None in a run
    that ended by itself), so a ``--cgroup`` daemon, which only a signal ends,
    can keep its decisions. What it changed is restored either way. When every watched process was refused
    (pid 1, a kernel thread, no permission) or failed, and no cgroup is
    watched, ``HugescopeError`` says so: nothing was done."""
    cfg = config(policy, pids, cgroup, budget, budget_per_process, rate, utilization, set_madvise)
    interval = _seconds(interval, "--interval", INTERVAL_MIN_S, INTERVAL_MAX_S)
    if duration is not None:
        duration = _seconds(duration, "--duration", 0.0, 1e9)
    d = _core.LiveDaemon(json.dumps(cfg))
    steps, decisions = 0, []
    t0 = time.monotonic()
    cpu0 = _cpu_s()
    final: Dict[str, Any] = {}
    stopped_by, interrupted = None, None
    try:
        while True:
            final = json.loads(d.step())
            steps += 1
            decisions.extend(final["decisions"])
            if on_step is not None:
                on_step(final)
            if final["done"]:
                break
            left = None if duration is None else duration - (time.monotonic() - t0)
            if left is not None and left <= 0:
                break
            time.sleep(interval if left is None else min(interval, left))
    except KeyboardInterrupt as e:
        stopped_by, interrupted = signal.Signals(getattr(e, "signum", signal.SIGINT)).name, e
    finally:
        d.close()
    result = {"config": cfg, "interval_s": interval, "steps": steps, "decisions": decisions, "final": final,
              "wall_s": time.monotonic() - t0, "cpu_s": _cpu_s() - cpu0, "stopped_by": stopped_by}
    if interrupted is not None:
        # The interruption goes on (a caller's own loop must stop too); what
        # the daemon did rides on it for a caller that keeps it (`daemon --json`).
        interrupted.daemon_result = result
        raise interrupted
    _refuse_if_nothing_watched(cfg, final)
    return result


def _refuse_if_nothing_watched(cfg: Dict[str, Any], final: Dict[str, Any]) -> None:
    """A daemon whose every process was refused or failed did nothing: an
    error, not a success (``daemon --pid 1`` used to exit 0)."""
    procs = final.get("processes") or []
    if cfg["cgroup"] is not None or not procs:
        return
    bad = [p for p in procs if str(p.get("state", "")).startswith(("refused", "failed"))]
    if len(bad) == len(procs):
        why = "; ".join(f"pid {p['pid']}: {_core.shown(str(p['state']), 120)}" for p in bad[:4])
        raise _core.HugescopeError(f"daemon: no watched process could be acted on ({why})")


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system
