"""Noise control for native measurements: interleaved rounds, one pinned CPU,
memory prepared the same way before every run, and the noise floor measured
from repeated identical runs (issue #15, "validation that can fail").

Why each piece:

* **Interleaving** (base, plan A, plan B, ..., base again; repeated for N
  rounds) pairs every plan with base runs made minutes, not a quarter hour,
  apart: a shared machine's speed drifts (other jobs, frequency, the host of
  a VM), and drift between two blocks of runs would look like an effect.
* **Pinning** each run's process to one CPU (``sched_setaffinity``, chosen
  once as the least busy of the CPUs this process may use) keeps a run from
  migrating between cores mid-measurement and from sharing a core with
  itself.
* **Memory prepared identically**: as root, ``/proc/sys/vm/compact_memory``
  is written before every run, so every run starts with free memory
  compacted (huge-page collapses find 2 MiB blocks the same way every time).
  It changes no setting (it is a trigger), so there is nothing to restore.
  Without root nothing is done, and the result says so.
* **Noise floor**: the two base runs of a round are identical runs; the
  largest |ln(t_a / t_b)| over the rounds is the largest difference that
  chance produced, and a measured speedup within it of 1 (or of another
  plan's) is reported as a tie, not ranked.
* **Priority** (``nice``, as root): a measured run may raise its own
  priority (nice -20) so that co-running programs get little of its CPU and
  seldom run between its time slices to pollute its caches and TLBs; it ends
  with the run, nothing is left changed.
* **The clock** (``CLOCKS``): a run's measured time is its wall time, or
  its own CPU time (user + system of the measured thread or process). On a
  shared machine or a VM, time a run spends preempted by other programs, or
  stolen by the host, is in the wall time and not in the CPU time, so the CPU
  clock keeps other programs' load out of the speedups; what it keeps in is
  everything the run itself executes, TLB misses and page walks included.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

COMPACT = "/proc/sys/vm/compact_memory"
#: The clocks a run's measured time can be read from (module docstring;
#: ``measured_time``): ``wall_s``, or ``cpu_s`` (the run's exact CPU time). Each command says
#: what they time for it (``validate_suite.PHASE_CLOCKS``, ``advise.ADVISE_CLOCKS``).
CLOCKS = ("wall", "cpu")


# ---------------------------------------------------------------- the CPU

def _cpu_idle(path: str = "/proc/stat") -> Dict[int, tuple]:
    """cpu -> (idle + iowait jiffies, total jiffies) from /proc/stat."""
    out = {}
    with open(path) as f:
        for line in f:
            name, *fields = line.split()
            if not name.startswith("cpu") or name == "cpu":
                continue
            vals = [int(v) for v in fields[:8]]
            out[int(name[3:])] = (vals[3] + vals[4], sum(vals))
    return out


def least_loaded_cpu(sample_s: float = 1.0, allowed: Optional[Sequence[int]] = None,
                     stat: Callable[[], Dict[int, tuple]] = _cpu_idle) -> int:
    """The CPU (of ``allowed``, default those this process may run on) that
    was idle the largest share of ``sample_s`` seconds (/proc/stat, sampled
    twice); the lowest-numbered among equals."""
    cpus = sorted(allowed if allowed is not None else os.sched_getaffinity(0))
    if not cpus:
        raise ValueError("no CPU to choose from")
    a = stat()
    time.sleep(sample_s)
    b = stat()

    def idle_share(c: int) -> float:
        if c not in a or c not in b:
            return -1.0
        di, dt = b[c][0] - a[c][0], b[c][1] - a[c][1]
        return di / dt if dt > 0 else 1.0

    return max(cpus, key=lambda c: (idle_share(c), -c))


def check_cpu(cpu: int) -> int:
    """``cpu`` if this process may run there, else a ValueError naming the allowed ones."""
    allowed = sorted(os.sched_getaffinity(0))
    if isinstance(cpu, bool) or not isinstance(cpu, int) or cpu not in allowed:
        raise ValueError(f"cpu {cpu!r} is not one this process may use ({', '.join(map(str, allowed))})")
    return cpu


def machine_busy(stat: Callable[[], Dict[int, tuple]] = _cpu_idle) -> tuple:
    """(busy jiffies, total jiffies) of every CPU together, from /proc/stat."""
    s = stat()
    return (sum(t - i for i, t in s.values()), sum(t for _, t in s.values()))


def with_load(run_one: Callable[[str], Dict[str, Any]],
              stat: Callable[[], Dict[int, tuple]] = _cpu_idle) -> Callable[[str], Dict[str, Any]]:
    """``run_one`` with the machine's load at each run added to its record:
    ``loadavg_1m`` (/proc/loadavg as the run starts) and ``busy_share``, the
    share of all CPUs' time that was busy during the run (/proc/stat before
    and after). When the record holds the run's own CPU time (``user_s`` +
    ``sys_s``), ``others_busy_share`` is the busy share left after taking it
    out: what everything else on the machine used (hugescope's collapses
    included), the load that can skew a wall time."""
    ncpu = max(1, len(stat()))

    def run(name: str) -> Dict[str, Any]:
        load = os.getloadavg()[0]
        b0, t0 = machine_busy(stat)
        rec = run_one(name)
        b1, t1 = machine_busy(stat)
        busy = (b1 - b0) / (t1 - t0) if t1 > t0 else 0.0
        out = dict(rec, loadavg_1m=load, busy_share=busy)
        own, wall = cpu_time_of(rec) or 0.0, rec.get("wall_s")
        if own and wall:
            out["others_busy_share"] = max(0.0, busy - own / (wall * ncpu))
        return out
    return run


# ---------------------------------------------------------------- memory

def can_compact() -> bool:
    return os.geteuid() == 0 and os.access(COMPACT, os.W_OK)


def prepare_memory() -> Dict[str, Any]:
    """Compact free memory (as root); returns ``{"compacted", "seconds"}``."""
    if not can_compact():
        return {"compacted": False, "seconds": 0.0}
    t0 = time.monotonic()
    with open(COMPACT, "w") as f:
        f.write("1")
    return {"compacted": True, "seconds": time.monotonic() - t0}


# ---------------------------------------------------------------- interleaved rounds

def check_nice(nice: int) -> int:
    """A measured run's nice value: -20..19; below 0 (a higher priority than
    other programs) only as root, which may raise it."""
    if isinstance(nice, bool) or not isinstance(nice, int) or not -20 <= nice <= 19:
        raise ValueError(f"nice must be an integer from -20 to 19, got {nice!r}")
    if nice < 0 and os.geteuid() != 0:
        raise ValueError(f"nice {nice}: a priority above other programs' needs root")
    return nice


def check_clock(clock: str) -> str:
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {', '.join(CLOCKS)}, got {clock!r}")
    return clock


def measured_time(rec: Dict[str, Any], clock: str) -> float:
    """The run's time on ``clock``: ``wall_s``, or its CPU time ``cpu_s``.

    ``cpu_s`` is the scheduler's exact runtime of the measured thread. A
    record made before it existed has only ``user_s + sys_s``, whose rusage
    split is sampled at the timer tick (4 ms at HZ=250: 6-8% of a 50-70 ms
    phase); it is used then, and ``cpu_time_of`` says which."""
    if clock == "wall":
        return rec.get("wall_s")
    t = cpu_time_of(rec)
    if t is None:
        raise ValueError("the cpu clock needs the run's cpu_s (or user_s and sys_s)")
    return t


def cpu_time_of(rec: Dict[str, Any]) -> Optional[float]:
    """A run record's own CPU time: ``cpu_s`` when it has one, else
    ``user_s + sys_s``; None when it has neither."""
    c = rec.get("cpu_s")
    if isinstance(c, (int, float)) and not isinstance(c, bool):
        return float(c)
    u, s = rec.get("user_s"), rec.get("sys_s")
    if isinstance(u, (int, float)) and isinstance(s, (int, float)):
        return float(u) + float(s)
    return None


def interleaved(order: Sequence[str], run_one: Callable[[str], Dict[str, Any]], rounds: int, warmup: int = 1,
                prepare: Callable[[], Dict[str, Any]] = prepare_memory,
                log: Callable[[str], None] = lambda s: None, clock: str = "wall") -> List[Dict[str, Any]]:
    """Run ``order`` (names; a name may appear twice, e.g. base first and
    last) ``rounds`` times in that order, after ``warmup`` unmeasured runs of
    ``order[0]``, calling ``prepare()`` before every run. ``run_one(name)``
    runs once and returns a record with ``wall_s`` (and ``cpu_s``
    for the cpu clock). Returns one record per measured run:
    ``round``, ``position``, ``name``, the run's record and ``t_s``, its
    time on ``clock`` (``CLOCKS``)."""
    check_clock(clock)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be an integer >= 1, got {rounds!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an integer >= 0, got {warmup!r}")
    if not order:
        raise ValueError("nothing to run")
    for i in range(warmup):
        prepare()
        log(f"warm-up {i + 1}/{warmup}: {order[0]}")
        run_one(order[0])
    out = []
    for r in range(rounds):
        log(f"round {r + 1}/{rounds}: {len(order)} runs")
        for pos, name in enumerate(order):
            prep = prepare()
            rec = run_one(name)
            t = measured_time(rec, clock)
            if not (isinstance(t, (int, float)) and t > 0):
                raise ValueError(f"{name}: run gave no positive {clock} time ({t!r})")
            out.append(dict(rec, t_s=t, clock=clock, round=r, position=pos, name=name, compacted=prep["compacted"],
                            compact_s=prep["seconds"]))
    return out


# ---------------------------------------------------------------- floor and ties

def noise_floor(pairs: Sequence[Sequence[float]]) -> float:
    """The largest |ln(t_a / t_b)| over pairs of identical runs: how far apart
    chance put two runs that should take the same time."""
    if not pairs:
        raise ValueError("the noise floor needs at least one pair of identical runs")
    out = 0.0
    for a, b in pairs:
        if not (a > 0 and b > 0):
            raise ValueError(f"times must be positive, got {a!r} and {b!r}")
        out = max(out, abs(math.log(a / b)))
    return out


def above_floor(speedup: float, floor: float) -> bool:
    """True when a speedup over base differs from 1 by more than the floor
    (in log terms, so 1.1x and 1/1.1x are as far)."""
    return abs(math.log(speedup)) > floor


def tie_groups(values: Sequence[float], floor: float) -> List[int]:
    """Group measured speedups that chance cannot tell apart: in ascending
    order, a group starts at its smallest value and takes every next value
    within ``floor`` of it (in log); group ids count from 0 in that order and
    are returned in the input order. Anchoring on the group's first value
    (not chaining neighbours) keeps a slow slope of small steps from merging
    into one group."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ids = [0] * len(values)
    gid, anchor = -1, None
    for i in order:
        v = values[i]
        if anchor is None or math.log(v / anchor) > floor:
            gid += 1
            anchor = v
        ids[i] = gid
    return ids


def tied(values: Sequence[float], floor: float) -> List[float]:
    """``values`` with each tie group replaced by its median, so a rank
    correlation gives the members one shared (average) rank."""
    ids = tie_groups(values, floor)
    med = {g: statistics.median(v for v, h in zip(values, ids) if h == g) for g in set(ids)}
    return [med[g] for g in ids]
