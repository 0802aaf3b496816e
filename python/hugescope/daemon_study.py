"""``hugescope daemon-study``: the userspace daemon measured on this machine
(issue #14, section 3, closing note; ``docs/daemon.md``, *Measured*).

For each built-in workload (run natively, one fresh process per run, as
``hugescope run`` does) and for one real program from the distribution
(redis-server driven by redis-benchmark), it measures, in interleaved rounds:

* ``base``: nothing collapsed (THP ``madvise``: the kernel promotes nothing);
* the daemon (``hugescope daemon``, a process of its own) with each policy
  (``khugepaged``, ``ingens``, ``hawkeye``, ``pcc``) under a budget of a share of
  the footprint;
* ``all``: every region huge (built-in workloads: ``plan="all"``, collapsed after
  setup and not timed; redis: the daemon's khugepaged rule without a budget,
  run to completion before the benchmark starts).

Beside each built-in workload it puts the simulator's estimate for the same
policy at the same budget (the workload's trace, shorter but with the same
layout, simulated with ``duration`` = the measured base-page run time, so the
simulated daemons act at the measured pace). It also records the daemon's own
CPU time per second of watching, whether real khugepaged acted (its
``pages_collapsed`` counter around the base runs) and, with ``capture=True``,
the slowdown of each trace capture path against native.

Runs are pinned: the workload (or redis-server) to one CPU, the daemon and
redis-benchmark to another. Nothing is left behind: every process it starts is
ended and reaped (also on SIGINT/SIGTERM), and it changes no kernel setting
(it refuses to run unless THP is ``madvise``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from . import linux, workloads
from ._core import HugescopeError

POLICIES = ("khugepaged", "ingens", "hawkeye", "pcc")
CONDITIONS = ("base",) + POLICIES + ("all",)
# The simulator's policy for each daemon policy (`hugescope policies`): the
# daemon's khugepaged rule is Linux's, the others carry the same names.
SIM_POLICY = {"khugepaged": "linux", "ingens": "ingens", "hawkeye": "hawkeye", "pcc": "pcc"}
HUGE = 2 << 20
KHUGEPAGED = "/sys/kernel/mm/transparent_hugepage/khugepaged"

# The measured workloads at full size. hotcold: 24 MiB hot (99% of the updates)
# after 1 GiB cold, so 3% of the footprint covers the hot table. The cold share
# is kept small because the daemon's access signal is the share of a VMA's pages
# referenced in an interval (docs/daemon.md): at 5% of some 30 M updates/s the
# cold table's 262,144 pages are nearly all referenced within 0.5 s and look as
# covered as the hot ones; at 1%, about half are. gups: the
# uniform case, where 3% of the table can buy about 3% of the gain; bfs: a GAP
# BFS whose random accesses go to parent/offsets, much smaller than the edges.
FULL = {
    "hotcold": dict(size="1GiB", hot_size="24MiB", hot_share=0.99, updates=150_000_000),
    "gups": dict(size="1GiB", updates=150_000_000),
    "bfs": dict(scale=21, generator="uniform", direction_optimizing=False),
}
# Accesses of the trace the simulator estimates from (a prefix of the same
# workload at the same layout; the random workloads are stationary).
SIM_LIMIT = 10_000_000
# Small sizes for a quick check of the plumbing (seconds, not minutes).
QUICK = {
    "hotcold": dict(size="64MiB", hot_size="2MiB", hot_share=0.9, updates=2_000_000),
    "gups": dict(size="64MiB", updates=2_000_000),
    "bfs": dict(scale=14, generator="uniform", direction_optimizing=False),
}


def _median(xs: Sequence[float]) -> Optional[Dict[str, float]]:
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def uptime() -> str:
    """The load average, as /proc/loadavg gives it (reported with every figure)."""
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def _read_int(path: str) -> Optional[int]:
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def khugepaged_counters() -> Dict[str, Optional[int]]:
    """Real khugepaged's activity counters (machine-wide)."""
    return {k: _read_int(os.path.join(KHUGEPAGED, k)) for k in ("pages_collapsed", "full_scans")}


def _rss(pid: int) -> Optional[int]:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return 0


def _proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of every thread of ``pid`` (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pin(pid: int, cpu: Optional[int]) -> None:
    if cpu is not None:
        try:
            os.sched_setaffinity(pid, {cpu})
        except OSError:
            pass  # the process is already gone


def _stop(p: subprocess.Popen, grace: float) -> None:
    """End a process we started: wait ``grace`` s for it to end by itself, then
    SIGTERM (the daemon restores what it changed on SIGTERM), then SIGKILL."""
    linux.stop_in_steps(p, ((None, grace), (signal.SIGTERM, 5.0), (signal.SIGKILL, None)))


class DaemonRunner:
    """Starts ``hugescope daemon`` on a pid (in a process of its own, pinned)
    once the target's resident size reaches ``start_rss`` bytes (for a built-in
    workload: its footprint, i.e. the end of its data construction), and stops
    it at ``close``."""

    def __init__(self, policy: str, budget: Optional[int], rate: float, interval: float, cpu: Optional[int],
                 tmpdir: str, start_rss: int = 0):
        self.policy, self.budget, self.rate, self.interval, self.cpu = policy, budget, rate, interval, cpu
        self.json_path = os.path.join(tmpdir, f"daemon-{policy}-{time.monotonic_ns()}.json")
        self.start_rss = start_rss
        self.proc: Optional[subprocess.Popen] = None
        self.started_s: Optional[float] = None
        self._lock = threading.Lock()
        self._stopping = False
        self._thread: Optional[threading.Thread] = None
        self._t0 = time.monotonic()

    def command(self, pid: int) -> List[str]:
        cmd = [sys.executable, "-m", "hugescope", "daemon", "--policy", self.policy, "--pid", str(pid),
               "--rate", repr(self.rate), "--interval", repr(self.interval), "--json", self.json_path]
        if self.budget is not None:
            cmd += ["--budget", str(self.budget)]
        return cmd

    def _start(self, pid: int) -> None:
        with self._lock:
            if self._stopping:
                return
            self.proc = subprocess.Popen(self.command(pid), env=linux.child_env(), stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE, text=True, process_group=0)
            _pin(self.proc.pid, self.cpu)
            self.started_s = time.monotonic() - self._t0

    def _watch(self, pid: int) -> None:
        while not self._stopping:
            rss = _rss(pid)
            if rss is None:
                return  # the target is gone before its setup ended
            if rss >= self.start_rss:
                self._start(pid)
                return
            time.sleep(0.01)

    def attach(self, pid: int) -> None:
        self._t0 = time.monotonic()
        if self.start_rss <= 0:
            self._start(pid)
            return
        self._thread = threading.Thread(target=self._watch, args=(pid,), daemon=True)
        self._thread.start()

    def close(self, target_gone: bool) -> Optional[Dict[str, Any]]:
        """Stop the daemon (it ends by itself within an interval once its target
        has exited) and return its ``--json`` record, if it wrote one; ``None``
        when the target ended before the daemon started watching it (a run
        shorter than the daemon's start-up)."""
        with self._lock:
            self._stopping = True
        if self._thread is not None:
            self._thread.join()
        if self.proc is None:
            return None
        _stop(self.proc, self.interval + 5.0 if target_gone else 0.0)
        err = self.proc.stderr.read() if self.proc.stderr else ""
        if self.proc.stderr:
            self.proc.stderr.close()
        try:
            with open(self.json_path) as f:
                rec = json.load(f)
        except (OSError, ValueError):
            if target_gone and "no process" in err:
                return None
            if self.proc.returncode != 0:
                raise HugescopeError(f"daemon {self.policy} failed (exit {self.proc.returncode}): "
                                     f"{err.strip()[-300:]}") from None
            return None
        finally:
            try:
                os.unlink(self.json_path)
            except OSError:
                pass
        rec["started_s"] = self.started_s
        return rec


def _daemon_summary(rec: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    if rec is None:
        return None
    f = rec.get("final") or {}
    procs = f.get("processes") or [{}]
    return {"cpu_s": rec["cpu_s"], "wall_s": rec["wall_s"], "steps": rec["steps"], "started_s": rec["started_s"],
            "collapsed": f.get("collapsed_total", 0), "daemon_huge": f.get("daemon_huge_total", 0),
            "clear_refs": f.get("clear_refs_total", 0),
            "first_collapse_s": next((d["t_s"] for d in rec["decisions"] if d["outcome"] == "collapsed"), None),
            "errors": procs[0].get("errors", {}),
            "regions": sorted({d["start"] for d in rec["decisions"] if d["outcome"] == "collapsed"})}


# ---------------------------------------------------------------- built-in workloads

def budget_bytes(footprint: int, share: Optional[float]) -> Optional[int]:
    """The daemon's budget: ``share`` of the footprint, rounded down to whole
    2 MiB pages, at least one; None (no budget, the daemon's default) for None."""
    if share is None:
        return None
    return max(HUGE, int(footprint * share) // HUGE * HUGE)


def _workload_once(name: str, params: Dict[str, Any], cond: str, budget: int, footprint: int, opts: Dict[str, Any],
                   tmpdir: str) -> Dict[str, Any]:
    plan = "all" if cond == "all" else "none"
    # No samples: their page-table walks cost base pages more than huge ones
    # (linux.run, ``sample_ms``); the study reads PAGEMAP_SCAN's coverage.
    request = {"workload": name, "params": workloads._clean(params), "plan": plan, "plan_json": None,
               "sample_ms": 0}
    runner = None
    if cond in POLICIES:
        # The workload's child is a Python process: its own few MiB count in VmRSS,
        # so this is reached at most a few MiB before the data is complete.
        runner = DaemonRunner(cond, budget, opts["rate"], opts["interval"], opts["daemon_cpu"], tmpdir,
                              start_rss=footprint)

    def on_spawn(p: subprocess.Popen):
        _pin(p.pid, opts["cpu"])
        if runner is not None:
            runner.attach(p.pid)
        return (lambda: None) if runner is None else (lambda: out.__setitem__("daemon", runner.close(p.poll() is not None)))

    out: Dict[str, Any] = {}
    load = uptime()
    rec = linux._native_child(request, on_spawn=on_spawn)
    if rec.get("status") != "ok":
        raise HugescopeError(f"{name} under {cond}: the run {rec.get('status')}: {rec.get('status_detail')}")
    regions = {r["name"]: r for r in rec.get("regions_end") or []}
    return {"workload": name, "condition": cond, "run_s": rec["run_s"], "setup_s": rec["setup_s"],
            "cpu_s": rec["cpu_s"],
            "huge_bytes_end": rec.get("huge_bytes_end"),
            "huge_by_region": {k: v.get("huge_bytes") for k, v in regions.items()},
            "daemon": _daemon_summary(out.get("daemon")), "loadavg": load,
            "daemon_note": ("the run ended before the daemon started watching it"
                            if runner is not None and out.get("daemon") is None else None)}


def simulate(name: str, params: Dict[str, Any], share: float, duration: float, tmpdir: str,
             limit: int = SIM_LIMIT, preset: Optional[str] = None, config: Optional[str] = None) -> Dict[str, Any]:
    """The simulator's estimate for every policy at ``share`` of the footprint,
    and for all huge: the workload's trace (its first ``limit`` accesses),
    simulated as ``duration`` seconds of virtual time, on the machine
    ``preset``/``config`` choose (named in ``machine``)."""
    from . import api
    from .calibrate import machine_args, machine_label
    machine = machine_args(preset, config)
    path = os.path.join(tmpdir, f"{name}.hst")
    workloads.trace(name, path, limit=limit, **params)
    try:
        res = api.compare(path, [SIM_POLICY[p] for p in POLICIES], budget=share, duration=duration, **machine)
        out = {p: r["speedup_vs_base"] for p, r in zip(POLICIES, res)}
        base = api.simulate(path, pages="4k", **machine)["cost"]["total_cycles"]
        out["all"] = base / api.simulate(path, pages="2m", **machine)["cost"]["total_cycles"]
        out["base"] = 1.0
    finally:
        os.unlink(path)
    return {"speedup_est": out, "accesses": limit, "virtual_duration_s": duration, "budget_share": share,
            "machine": machine_label(preset, config),
            "how": "estimate: the cost model's cycles (hugescope simulate) of the workload's trace prefix, "
                   "each policy budgeted at the same share of the footprint, vs base pages on the same pass; "
                   "all = static 2 MiB map"}


def estimate_choices(name: str, w: Dict[str, Any], tmpdir: str, limit: int = SIM_LIMIT,
                     preset: Optional[str] = None, config: Optional[str] = None) -> Dict[str, Any]:
    """The simulator's estimate of what each daemon policy actually did: the
    regions it collapsed (the set most of its runs chose) as a static plan over
    the workload's trace, against base pages (``advise.estimate``). This separates
    "the policy chose the wrong regions" from "the right regions buy little"."""
    from collections import Counter

    from . import api
    from .advise import estimate
    path = os.path.join(tmpdir, f"{name}-choices.hst")
    workloads.trace(name, path, limit=limit, **w["params"])
    from .calibrate import machine_args
    machine = machine_args(preset, config)
    out: Dict[str, Any] = {}
    try:
        base = api.simulate(path, pages="4k", **machine)["cost"]["total_cycles"]
        for p in POLICIES:
            sets = Counter(tuple(r["daemon"]["regions"]) for r in w["runs"] if r["condition"] == p and r.get("daemon"))
            if not sets:
                continue
            regions, n = sets.most_common(1)[0]
            by_region = {x["name"]: sum(1 for a in regions if x["base"] <= a < x["base"] + x["len"])
                         for x in w["regions"]}
            out[p] = {"speedup_est": estimate(path, list(regions), base, machine, tmpdir) if regions else 1.0,
                      "regions_by_table": by_region, "runs_with_this_choice": n}
    finally:
        os.unlink(path)
    return out


# ---------------------------------------------------------------- redis

# The dataset: 2 M keys of 1 KiB values, about 2.3 GiB of server memory (more
# keys of smaller values make every run's dataset load, which is per key, longer).
REDIS_KEYS, REDIS_VALUE, REDIS_REQUESTS = 2_000_000, 1024, 600_000
REDIS_PACKAGE = "redis-server"  # Debian's redis-server depends on redis-tools (redis-benchmark, redis-cli)


def ensure_redis() -> Dict[str, str]:
    """Paths of redis-server, redis-cli and redis-benchmark, installed from the
    distribution (apt-get) when missing and we are root, as ``make build``
    installs clang."""
    want = ("redis-server", "redis-cli", "redis-benchmark")
    found = {w: shutil.which(w) for w in want}
    if all(found.values()):
        return found  # type: ignore[return-value]
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise HugescopeError("redis-server and redis-benchmark are not installed: run 'apt-get install "
                             f"{REDIS_PACKAGE}' as root, or pass --no-redis")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", REDIS_PACKAGE]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True)
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    # Debian starts the service on install; this study runs its own server.
    if shutil.which("systemctl"):
        subprocess.run(["systemctl", "disable", "--now", "redis-server"], capture_output=True)
    found = {w: shutil.which(w) for w in want}
    if r.returncode != 0 or not all(found.values()):
        raise HugescopeError(f"could not install {REDIS_PACKAGE}: {(r.stderr or r.stdout).strip()[-300:]}")
    return found  # type: ignore[return-value]


class RedisServer:
    """A private redis-server on a Unix socket in ``workdir`` (no TCP port, no
    persistence except the dataset file it was started from), pinned to
    ``cpu``, dying with this process (PR_SET_PDEATHSIG)."""

    def __init__(self, bins: Dict[str, str], workdir: str, cpu: Optional[int], dbfile: str = "dataset.rdb"):
        from .tracing import _child_setup
        self.bins, self.workdir = bins, workdir
        self.sock = os.path.join(workdir, "redis.sock")
        cmd = [bins["redis-server"], "--port", "0", "--unixsocket", self.sock, "--unixsocketperm", "700",
               "--dir", workdir, "--dbfilename", dbfile, "--save", "", "--appendonly", "no",
               "--enable-debug-command", "local", "--daemonize", "no", "--logfile", os.path.join(workdir, "log")]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     preexec_fn=_child_setup(os.getpid()))
        _pin(self.proc.pid, cpu)
        self.pid = self.proc.pid

    def cli(self, *args: str, timeout: float = 600) -> str:
        r = subprocess.run([self.bins["redis-cli"], "-s", self.sock, *args], capture_output=True, text=True,
                           timeout=timeout)
        if r.returncode != 0:
            raise HugescopeError(f"redis-cli {' '.join(args)}: {r.stderr.strip() or r.stdout.strip()}")
        return r.stdout.strip()

    def wait_ready(self, timeout: float = 600) -> None:
        """Until the server answers PING with its dataset loaded (LOADING otherwise)."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise HugescopeError(f"redis-server exited with {self.proc.returncode} (see its log)")
            if os.path.exists(self.sock):
                r = subprocess.run([self.bins["redis-cli"], "-s", self.sock, "PING"], capture_output=True, text=True)
                if r.stdout.strip() == "PONG":
                    return
            time.sleep(0.1)
        raise HugescopeError("redis-server did not become ready")

    def close(self) -> None:
        _stop(self.proc, 0.0)


# Loads keys key:%012d (redis-benchmark's __rand_int__ format, so its random GETs hit)
# in batches, each one server-side loop (a few seconds of the server's time).
_LOAD_LUA = ("local v = string.rep('x', tonumber(ARGV[3])) "
             "for i = tonumber(ARGV[1]), tonumber(ARGV[2]) - 1 do "
             "redis.call('SET', string.format('key:%012d', i), v) end return 0")
LOAD_BATCH = 500_000


def redis_dataset(bins: Dict[str, str], workdir: str, keys: int, value_size: int, cpu: Optional[int]) -> int:
    """Build the dataset once (``keys`` keys ``key:%012d`` of ``value_size``
    bytes) and save it as ``dataset.rdb``; every measured run starts a fresh
    server from it. Returns the server's ``used_memory`` in bytes."""
    srv = RedisServer(bins, workdir, cpu)
    try:
        srv.wait_ready()
        for lo in range(0, keys, LOAD_BATCH):
            srv.cli("EVAL", _LOAD_LUA, "0", str(lo), str(min(keys, lo + LOAD_BATCH)), str(value_size))
        if int(srv.cli("DBSIZE")) != keys:
            raise HugescopeError(f"redis dataset: {srv.cli('DBSIZE')} keys loaded, wanted {keys}")
        used = _info_int(srv, "used_memory")
        srv.cli("SAVE")
    finally:
        srv.close()
    return used


def _info_int(srv: RedisServer, field: str) -> int:
    for line in srv.cli("INFO", "memory").splitlines():
        if line.startswith(field + ":"):
            return int(line.split(":", 1)[1])
    raise HugescopeError(f"redis INFO has no {field}")


def redis_benchmark(bins: Dict[str, str], sock: str, keys: int, requests: int, cpu: Optional[int]) -> float:
    """GETs of uniformly random existing keys (``-r keys``), 4 clients with 16
    requests in flight each; redis-benchmark's own ops/s (its --csv line)."""
    cmd = [bins["redis-benchmark"], "-s", sock, "-n", str(requests), "-r", str(keys), "-P", "16", "-c", "4",
           "--csv", "GET", "key:__rand_int__"]
    r = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=lambda: _pin(0, cpu))
    if r.returncode != 0:
        raise HugescopeError(f"redis-benchmark failed: {r.stderr.strip()[-300:]}")
    for line in r.stdout.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if len(cells) > 1 and cells[0].startswith("GET"):
            return float(cells[1])
    raise HugescopeError(f"redis-benchmark printed no GET rate: {r.stdout.strip()[-300:]}")


class _Settled(Exception):
    """Raised from on_step to end an unbudgeted collapse once a step did nothing."""


def collapse_all(pid: int) -> int:
    """Every 2 MiB region of ``pid`` with pages present made huge (the daemon's
    khugepaged rule without budget or rate limit, until a step collapses
    nothing): the all-huge reference for a program without a layout. Returns
    the regions collapsed."""
    from . import daemon
    n, idle = [0], [0]

    def on_step(s: dict) -> None:
        made = sum(1 for d in s["decisions"] if d["outcome"] == "collapsed")
        n[0] += made
        # Done when no candidate is left; or stuck (ENOMEM, EAGAIN) for 50 steps.
        idle[0] = 0 if made else idle[0] + 1
        if (s["candidates"] == 0 and s["step"] > 1) or idle[0] >= 50:
            raise _Settled()
    try:
        daemon.run("khugepaged", pids=[pid], rate=1e6, interval=0.01, duration=600, on_step=on_step)
    except _Settled:
        pass
    return n[0]


def _redis_once(bins: Dict[str, str], workdir: str, cond: str, budget: int, keys: int, requests: int,
                opts: Dict[str, Any]) -> Dict[str, Any]:
    srv = RedisServer(bins, workdir, opts["cpu"])
    runner = None
    rec: Dict[str, Any] = {"workload": "redis", "condition": cond}
    try:
        srv.wait_ready()
        rec["rss"] = _rss(srv.pid)
        if cond == "all":
            rec["collapsed_before"] = collapse_all(srv.pid)
        if cond in POLICIES:
            runner = DaemonRunner(cond, budget, opts["rate"], opts["interval"], opts["daemon_cpu"], workdir)
            runner.attach(srv.pid)
        rec["loadavg"] = uptime()
        cpu0 = _proc_cpu_s(srv.pid)
        rec["ops_s"] = redis_benchmark(bins, srv.sock, keys, requests, opts["daemon_cpu"])
        rec["server_cpu_us_per_op"] = (_proc_cpu_s(srv.pid) - cpu0) / requests * 1e6
        rec["huge_bytes_end"] = linux.coverage(srv.pid, exact=False).huge_bytes
    finally:
        srv.close()
        if runner is not None:
            rec["daemon"] = _daemon_summary(runner.close(True))
    return rec


# ---------------------------------------------------------------- capture paths

# The capture-cost program: random 8-byte reads of a 64 MiB array plus a
# read-modify-write of a small global per step (the shape of the test
# program: a large cold array and a small hot one).
CAPTURE_C = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
static unsigned char small[1 << 16];
int main(int argc, char **argv) {
    long steps = atol(argv[1]);
    size_t words = (64u << 20) / 8;
    uint64_t *a = calloc(words, 8), x = 2463534242u, s = 0;
    for (long i = 0; i < steps; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        s += a[x % words];
        small[(i * 64) % sizeof small]++;
    }
    printf("%llu\n", (unsigned long long)s + small[0]);
    return 0;
}
"""


def _timed(cmd: List[str], cpu: Optional[int]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       preexec_fn=lambda: _pin(0, cpu))
    if r.returncode != 0:
        raise HugescopeError(f"{' '.join(cmd[:4])}...: exit {r.returncode}: {r.stderr.strip()[-300:]}")
    return time.perf_counter() - t0


def capture_costs(tmpdir: str, steps: int, valgrind_steps: int, repeat: int, cpu: Optional[int],
                  progress: Callable[[str], None]) -> Dict[str, Any]:
    """Wall time of the capture program natively (clang -O1, no hooks), traced
    through ``hugescope cc`` + ``hugescope trace`` and through ``hugescope trace
    --valgrind``, interleaved, ``repeat`` runs each (fresh processes, pinned).
    Each path's slowdown is its median over native's at the same step count."""
    from . import tracing
    clang = tracing.find_clang()
    src = os.path.join(tmpdir, "capture.c")
    with open(src, "w") as f:
        f.write(CAPTURE_C)
    native, instr = os.path.join(tmpdir, "capture-native"), os.path.join(tmpdir, "capture-cc")
    r = subprocess.run([clang, "-O1", src, "-o", native], capture_output=True, text=True)
    if r.returncode != 0:
        raise HugescopeError(f"clang could not build the capture program: {r.stderr.strip()[-300:]}")
    if tracing.cc(["-O1", src, "-o", instr]) != 0:
        raise HugescopeError("hugescope cc could not build the capture program")
    hs = [sys.executable, "-m", "hugescope"]
    out = os.path.join(tmpdir, "capture.hst")
    paths = {
        "native": ([native, str(steps)], steps),
        "cc_trace": (hs + ["trace", "-o", out, "--", instr, str(steps)], steps),
        "native_small": ([native, str(valgrind_steps)], valgrind_steps),
        "valgrind": (hs + ["trace", "--valgrind", "-o", out, "--", native, str(valgrind_steps)], valgrind_steps),
    }
    times: Dict[str, List[float]] = {k: [] for k in paths}
    loads = []
    for i in range(repeat):
        for k, (cmd, _) in paths.items():
            progress(f"capture {k} {i + 1}/{repeat}")
            loads.append(uptime())
            times[k].append(_timed(cmd, cpu))
            if os.path.exists(out):
                os.unlink(out)
    res = {k: _median(v) for k, v in times.items()}
    res["slowdown"] = {"cc_trace": res["cc_trace"]["median"] / res["native"]["median"],
                       "valgrind": res["valgrind"]["median"] / res["native_small"]["median"]}
    res["steps"] = {"cc_trace": steps, "valgrind": valgrind_steps}
    res["loadavg"] = loads
    res["how"] = ("wall clock (time.perf_counter) around each whole process, Python start-up and the "
                  "conversion to .hst included for the traced paths; median of the runs")
    return res


# ---------------------------------------------------------------- the study

def _cpus(cpu: Optional[int], daemon_cpu: Optional[int]):
    """(workload CPU, daemon CPU): by default the last CPU this process may use
    for the workload and the first other one for the daemon (the same CPU on a
    one-CPU machine)."""
    allowed = sorted(os.sched_getaffinity(0))
    cpu = allowed[-1] if cpu is None else cpu
    if daemon_cpu is None:
        daemon_cpu = next((c for c in allowed if c != cpu), cpu)
    for c, what in ((cpu, "--cpu"), (daemon_cpu, "--daemon-cpu")):
        if c not in allowed:
            raise ValueError(f"{what}: CPU {c} is not one this process may run on ({allowed})")
    return cpu, daemon_cpu


def _check_machine() -> Dict[str, Any]:
    st = linux.thp_state()
    if not st["root"]:
        raise HugescopeError("daemon-study needs root (process_madvise on other processes)")
    if st["pmd_mode"] != "madvise":
        raise HugescopeError(f"daemon-study needs THP in madvise mode for 2 MiB pages (it is {st['pmd_mode']!r}): "
                             "under 'always' base pages cannot be measured, under 'never' nothing can be collapsed; "
                             "this study changes no kernel setting")
    return st


def _summaries(runs: List[Dict[str, Any]], metric: str, higher_better: bool) -> Dict[str, Any]:
    """Per condition: the metric's median/min/max, the speedup of medians over
    base, and the share of all-huge's gain that speedup is."""
    by = {c: _median([r[metric] for r in runs if r["condition"] == c]) for c in CONDITIONS}
    base, all_ = by.get("base"), by.get("all")
    out = {}
    for c, s in by.items():
        if s is None:
            continue
        sp = None
        if base:
            sp = s["median"] / base["median"] if higher_better else base["median"] / s["median"]
        all_sp = None
        if base and all_:
            all_sp = all_["median"] / base["median"] if higher_better else base["median"] / all_["median"]
        share = (sp - 1) / (all_sp - 1) if sp is not None and all_sp is not None and all_sp > 1 else None
        d = [r["daemon"] for r in runs if r["condition"] == c and r.get("daemon")]
        out[c] = dict(s, speedup=sp, share_of_all_gain=share,
                      daemon_cpu_per_s=_median([x["cpu_s"] / x["wall_s"] for x in d if x["wall_s"] > 0]),
                      daemon_huge=_median([x["daemon_huge"] for x in d]),
                      clear_refs=_median([x.get("clear_refs") for x in d]),
                      first_collapse_s=_median([x["first_collapse_s"] for x in d]),
                      huge_bytes_end=_median([r.get("huge_bytes_end") for r in runs if r["condition"] == c]))
    return out


def study(out: str, names: Sequence[str] = tuple(FULL), quick: bool = False, repeat: int = 3,
          budget_share: Optional[float] = 0.03, redis: bool = True, capture: bool = True, sim: bool = True,
          interval: float = 0.5, rate: float = 64.0, cpu: Optional[int] = None, daemon_cpu: Optional[int] = None,
          redis_keys: Optional[int] = None, progress: Optional[Callable[[str], None]] = None,
          preset: Optional[str] = None, config: Optional[str] = None) -> Dict[str, Any]:
    """Run the study and write ``OUT/daemon-study.json`` and ``OUT/daemon-study.md``
    (the tables), rewritten (atomically) after each workload so a stopped study
    keeps what it finished (``"complete": false``). ``quick``: small sizes
    (seconds; for checking the plumbing, the figures mean nothing). Returns the
    JSON's content."""
    from ._io import check_output, prepare_dir, write_atomic, write_json
    progress = progress or (lambda s: None)
    linux._count("repeat", repeat, 1, linux.RUNS_MAX)
    if sim:
        # The estimates sit beside this machine's measured gains: like advise
        # and validate they take the calibrated preset when one was saved and
        # none was named (issue #36 item 1). A bad preset or config is refused
        # here, before any run, not after them.
        from .calibrate import estimate_machine
        preset, config, _ = estimate_machine(preset, config)
    from .api import _share
    # "none": no budget, as `hugescope daemon` runs by default (the cost of the
    # daemon at its default settings is measured this way).
    share = None if budget_share is None or str(budget_share).strip().lower() == "none" else _share(budget_share, "--budget")
    if share is not None and share <= 0:
        raise ValueError(f"--budget: {budget_share!r} must be a share of the footprint in (0, 1] or 'none'")
    sizes = QUICK if quick else FULL
    for n in names:
        if n not in sizes:
            raise ValueError(f"--workloads: {n!r} is not one of {', '.join(sizes)}")
    cpu, daemon_cpu = _cpus(cpu, daemon_cpu)
    opts = {"cpu": cpu, "daemon_cpu": daemon_cpu, "interval": float(interval), "rate": float(rate)}
    paths = {k: os.path.join(out, f"daemon-study.{k}") for k in ("json", "md")}
    prepare_dir(out)
    check_output(paths["json"], "json")
    check_output(paths["md"], head=b"# Daemon study")
    st = _check_machine()
    bins = ensure_redis() if redis else None
    def save(complete: bool) -> None:
        res["complete"] = complete
        res["loadavg_end"] = uptime()
        write_json(paths["json"], res)
        write_atomic(paths["md"], report(res))

    res: Dict[str, Any] = {
        "machine": {"kernel": os.uname().release, "cpus": os.cpu_count(), "thp": st["enabled"]["selected"],
                    "workload_cpu": cpu, "daemon_cpu": daemon_cpu},
        "options": {"quick": quick, "repeat": repeat, "budget_share": share, "interval_s": opts["interval"],
                    "rate": opts["rate"]},
        "loadavg_start": uptime(), "workloads": {}, "how": {
            "cpu_s": "the workload thread's CPU time over its algorithm phase (clock_gettime "
                     "CLOCK_THREAD_CPUTIME_ID, the scheduler's runtime; setup and the all-huge collapses "
                     "excluded), one fresh process per run, pinned "
                     "to one CPU: the primary figure, since on a loaded machine wall time mostly measures the "
                     "scheduler",
            "run_s": "wall clock of the same phase (std::time::Instant)",
            "server_cpu_us_per_op": "redis-server's user + system CPU time (/proc/PID/stat, all threads) over "
                                    "the benchmark, per GET",
            "daemon": "hugescope daemon in its own process on another CPU, started when the workload's VmRSS "
                      "reached its footprint (end of data construction), ended when the workload exited",
            "ops_s": "redis-benchmark's GET rate (--csv), random existing keys",
            "speedup": "median of base over median of the condition (ops/s: the inverse)",
            "share_of_all_gain": "(speedup - 1) / (all-huge speedup - 1)"}}
    with tempfile.TemporaryDirectory(prefix="hugescope-daemon-study-") as tmp:
        for name in names:
            params = dict(sizes[name])
            lay = workloads.layout(name, **params)
            fp = int(lay["footprint"])
            budget = budget_bytes(fp, share)
            runs, kh = [], []
            for i in range(repeat):
                for cond in CONDITIONS:
                    progress(f"{name} {cond} round {i + 1}/{repeat} (load {uptime()})")
                    before = khugepaged_counters()
                    r = _workload_once(name, params, cond, budget, fp, opts, tmp)
                    after = khugepaged_counters()
                    if cond == "base":
                        kh.append({k: (after[k] - before[k]) if after[k] is not None and before[k] is not None
                                   else None for k in after})
                    runs.append(r)
            w = {"params": lay["params"], "footprint": fp, "budget": budget,
                 "regions": [{"name": r["name"], "base": r["base"], "len": r["len"]} for r in lay["regions"]],
                 "runs": runs, "summary": _summaries(runs, "cpu_s", higher_better=False),
                 "summary_wall": _summaries(runs, "run_s", higher_better=False),
                 "real_khugepaged_during_base": kh}
            if sim:
                progress(f"{name}: simulating the policies at {1.0 if share is None else share:.1%} of the footprint")
                dur = w["summary_wall"]["base"]["median"]
                w["simulated"] = simulate(name, params, 1.0 if budget is None else budget / fp, dur, tmp,
                                          limit=2_000_000 if quick else SIM_LIMIT, preset=preset, config=config)
                w["simulated"]["daemon_choice"] = estimate_choices(name, w, tmp,
                                                                   limit=2_000_000 if quick else SIM_LIMIT,
                                                                   preset=preset, config=config)
            res["workloads"][name] = w
            save(False)
        if redis:
            keys = redis_keys or (100_000 if quick else REDIS_KEYS)
            requests = 100_000 if quick else REDIS_REQUESTS
            rdir = os.path.join(tmp, "redis")
            os.mkdir(rdir, 0o700)
            progress(f"redis: loading {keys} keys")
            used = redis_dataset(bins, rdir, keys, REDIS_VALUE, cpu)
            budget = budget_bytes(used, share)
            runs = []
            for i in range(repeat):
                for cond in CONDITIONS:
                    progress(f"redis {cond} round {i + 1}/{repeat} (load {uptime()})")
                    runs.append(_redis_once(bins, rdir, cond, budget, keys, requests, opts))
            res["workloads"]["redis"] = {"params": {"keys": keys, "value_size": REDIS_VALUE, "requests": requests,
                                                    "clients": 4, "pipeline": 16},
                                         "footprint": used, "budget": budget, "runs": runs,
                                         "summary": _summaries(runs, "server_cpu_us_per_op", higher_better=False),
                                         "summary_wall": _summaries(runs, "ops_s", higher_better=True)}
            save(False)
        if capture:
            res["capture"] = capture_costs(tmp, 200_000 if quick else 20_000_000, 20_000 if quick else 200_000,
                                           repeat, cpu, progress)
    save(True)
    return res


def _f(x, fmt="{:.3f}") -> str:
    return "-" if x is None else fmt.format(x)


def _choice(c: Optional[Dict[str, Any]]) -> str:
    if not c:
        return ""
    return " (" + ", ".join(f"{n} {k}" for k, n in c["regions_by_table"].items() if n) + ")"


def report(res: Dict[str, Any]) -> str:
    """The study's tables as Markdown."""
    o = res["options"]
    kind = "quick: plumbing only" if o["quick"] else "full"
    if not res.get("complete", True):
        kind += "; incomplete: stopped before the end"
    lines = [f"# Daemon study ({kind})", "",
             f"kernel {res['machine']['kernel']}, THP {res['machine']['thp']}, {res['machine']['cpus']} CPUs "
             f"(workload on CPU {res['machine']['workload_cpu']}, daemon on CPU {res['machine']['daemon_cpu']}); "
             f"{o['repeat']} interleaved rounds; "
             + ("no budget (the daemon's default)" if o["budget_share"] is None
                else f"budget {o['budget_share']:.1%} of the footprint") + "; daemon "
             f"--interval {o['interval_s']:g} --rate {o['rate']:g}; load average {res['loadavg_start']} at the "
             f"start, {res['loadavg_end']} at the end.", ""]
    for name, w in res["workloads"].items():
        redis = name == "redis"
        unit, wunit = ("server CPU us per GET", "GET/s") if redis else ("workload CPU s", "wall s")
        est = (w.get("simulated") or {}).get("speedup_est", {})
        chosen = (w.get("simulated") or {}).get("daemon_choice", {})
        lines += [f"## {name}", "",
                  f"footprint {w['footprint'] / (1 << 20):.0f} MiB, "
                  + ("no budget" if w["budget"] is None else f"budget {w['budget'] / (1 << 20):.0f} MiB") + "; "
                  f"params {json.dumps(w['params'], sort_keys=True)}"
                  + (f"; estimates on {(w.get('simulated') or {})['machine']}" if (w.get("simulated") or {}).get(
                      "machine") else ""), "",
                  f"| condition | {unit}: median (min-max) | speedup | share of all-huge gain | estimate "
                  f"(simulated policy) | estimate of the daemon's choice | {wunit}: median (min-max) | speedup (wall) "
                  "| huge MiB at end | daemon CPU per s watched | clear_refs writes |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for c, s in w["summary"].items():
            sw = w["summary_wall"][c]
            fmt = "{:.0f}" if redis else "{:.3f}"
            lines.append(f"| {c} | {_f(s['median'], '{:.3f}')} ({_f(s['min'], '{:.3f}')}-{_f(s['max'], '{:.3f}')}) | "
                         f"{_f(s['speedup'])} | {_f(s['share_of_all_gain'], '{:.0%}')} | {_f(est.get(c))} | "
                         f"{_f((chosen.get(c) or {}).get('speedup_est'))}"
                         f"{_choice(chosen.get(c))} | "
                         f"{_f(sw['median'], fmt)} ({_f(sw['min'], fmt)}-{_f(sw['max'], fmt)}) | {_f(sw['speedup'])} | "
                         f"{_f(None if s['huge_bytes_end'] is None else s['huge_bytes_end']['median'] / (1 << 20), '{:.0f}')} | "
                         f"{_f(None if s['daemon_cpu_per_s'] is None else s['daemon_cpu_per_s']['median'], '{:.1%}')} | "
                         f"{_f(None if s.get('clear_refs') is None else s['clear_refs']['median'], '{:.0f}')} |")
        kh = w.get("real_khugepaged_during_base")
        if kh:
            lines += ["", "Real khugepaged (madvise mode) during the base runs: pages_collapsed +"
                      + ", +".join(str(k["pages_collapsed"]) for k in kh) + " (machine-wide counter)."]
        lines.append("")
    cap = res.get("capture")
    if cap:
        lines += ["## Trace capture cost", "", "| path | steps | wall s: median (min-max) | slowdown vs native |",
                  "| --- | --- | --- | --- |"]
        for k, steps, sd in (("native", cap["steps"]["cc_trace"], 1.0), ("cc_trace", cap["steps"]["cc_trace"],
                             cap["slowdown"]["cc_trace"]), ("native_small", cap["steps"]["valgrind"], 1.0),
                             ("valgrind", cap["steps"]["valgrind"], cap["slowdown"]["valgrind"])):
            s = cap[k]
            lines.append(f"| {k} | {steps} | {s['median']:.3f} ({s['min']:.3f}-{s['max']:.3f}) | {sd:.1f}x |")
        lines += ["", cap["how"], ""]
    return "\n".join(lines) + "\n"
