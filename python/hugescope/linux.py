"""The real-Linux side: apply promotion plans to running programs with
``MADV_COLLAPSE`` and measure what they gain.

Everything here talks to the running kernel; nothing is simulated, and every
time is a measurement (each result says how it was taken in ``how``).

Quick start::

    import hugescope as hs
    from hugescope import linux
    linux.thp_state()["enabled"]["selected"]          # 'madvise'
    base = linux.run("gups", size="1GiB", updates="50M")            # base pages
    huge = linux.run("gups", plan="all", size="1GiB", updates="50M")  # all huge
    base.summary["wall_s"]["median"] / huge.summary["wall_s"]["median"]
    linux.run(["./prog", "arg"], plan="plan.json", repeat=5)        # any program
    linux.apply_plan(1234, "plan.json")                              # a running process

How repetitions run: a built-in workload runs each repetition (warm-ups included)
in a fresh child process (``python -m hugescope._run_native``), so every run
starts with fresh memory, its own peak RSS, and its fixed-address regions free;
a command is launched afresh for every repetition anyway.
"""

from __future__ import annotations

import json
import math
import os
import signal
import statistics
import subprocess
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import _core
from ._core import HugescopeError
from .errors import Interrupted, RunFailed

# How long a child gets to exit after a forwarded SIGINT/SIGTERM before SIGKILL
# (the same grace as the Rust side's lifetime::STOP_GRACE).
STOP_GRACE_S = 2.0
# The largest process id Linux can hand out (PID_MAX_LIMIT on 64-bit).
PID_MAX = 1 << 22
# Largest --repeat/--warmup: far beyond any measurement (a million runs of even a
# 1 ms program is a quarter hour), small enough that a typo is refused, not run.
RUNS_MAX = 1_000_000
# Bounds of the sampling period: 1 ms (a floor: the sampler reads smaps_rollup) to 1 h.
SAMPLE_MS_MAX = 3_600_000

PlanArg = Union[None, str, os.PathLike, dict, list]

MIB = 1 << 20


# ---------------------------------------------------------------- state

def thp_state() -> Dict[str, Any]:
    """The system THP configuration, plus what it means for measurements:

    * ``pmd_mode``: the mode that governs 2 MiB pages at fault time (the
      ``hugepages-2048kB`` setting unless it is ``inherit``, else ``enabled``);
    * ``baseline_available``: base pages can be measured (mode is not ``always``:
      under ``always`` the kernel backs unadvised memory with huge pages);
    * ``plans_applicable``: hugescope applies plans (mode is not ``never``);
    * ``root``: process_madvise on other processes and the fragmenter need root.
    """
    s = json.loads(_core.thp_state())
    pmd = s.get("mthp_enabled", {}).get("hugepages-2048kB", "inherit")
    mode = s["enabled"]["selected"] if pmd in ("inherit", None) else pmd
    s["pmd_mode"] = mode
    s["baseline_available"] = mode != "always"
    s["plans_applicable"] = s["enabled"]["selected"] != "never"
    s["root"] = bool(_core.is_root())
    s["other_mthp_always"] = sorted(k for k, v in s.get("mthp_enabled", {}).items()
                                    if v == "always" and k != "hugepages-2048kB")
    return s


def repair_settings() -> List[Dict[str, Any]]:
    """Restore every kernel setting a killed hugescope process left changed
    (recorded in the state file, ``settings_state_path()``, with an owner that is
    no longer running), and remove those records. Returns one entry per setting:
    ``path``, ``original``, ``owners`` (PIDs), ``error`` (None when restored) and
    ``message`` (one line for the user). Every Linux command calls this first."""
    return json.loads(_core.repair_settings())


def settings_state_path() -> str:
    """The state file that records changed settings: ``/run/hugescope/state.json``,
    or ``state.json`` in ``$HUGESCOPE_STATE_DIR``."""
    return _core.settings_state_path()


def buddyinfo() -> Dict[str, Any]:
    """``/proc/buddyinfo``: ``zones`` [(name, free blocks per order)] and
    ``free_2m_blocks`` (free blocks of order >= 9, in 2 MiB units)."""
    return json.loads(_core.buddyinfo())


class Coverage:
    """Huge-page coverage of one process per VMA (see :func:`coverage`)."""

    def __init__(self, data: Dict[str, Any]):
        self._d = data

    def to_dict(self) -> Dict[str, Any]:
        return self._d

    def __getitem__(self, k):
        return self._d[k]

    def to_frame(self):
        import pandas as pd
        return pd.DataFrame(self._d["vmas"])

    @property
    def huge_bytes(self) -> int:
        return self._d["anon_huge_total"]

    @property
    def rss_bytes(self) -> int:
        return self._d["rss_total"]


def coverage(pid: int, exact: bool = True) -> Coverage:
    """Huge-page coverage of process ``pid`` (0 = this process) per VMA.

    ``anon_huge_bytes`` is smaps ``AnonHugePages`` (PMD-mapped anonymous THPs);
    with ``exact`` each anonymous VMA also gets ``pmd_mapped_bytes`` from the
    ``PAGEMAP_SCAN`` ioctl. Totals come from ``smaps_rollup``. Reading another
    user's process needs ptrace-read access (root).
    """
    pid = _pid(pid)
    return Coverage(json.loads(_core.coverage(pid, bool(exact))))


def _pid(pid) -> int:
    # int("12") and int(12) only: a float or a bool that happens to convert is a mistake.
    if isinstance(pid, (bool, float)) or not isinstance(pid, (int, str)):
        raise ValueError(f"'{pid}' is not a process id")
    try:
        p = int(pid)
    except (TypeError, ValueError):
        raise ValueError(f"'{pid}' is not a process id")
    # 0 names no process (/proc/0 does not exist; to the kernel it would mean "self").
    if not 1 <= p < PID_MAX:
        raise ValueError(f"'{pid}' is not a process id (1..{PID_MAX - 1})")
    return p


def _count(name: str, v, least: int, most: Optional[int] = None) -> int:
    """An integer option (repeat, warmup, seed) checked here, with its name and the
    value as given, instead of a TypeError or OverflowError from the core."""
    if isinstance(v, bool) or not isinstance(v, int) or v < least or (most is not None and v > most):
        bound = f">= {least}" if most is None else f"in {least}..{most}"
        raise ValueError(f"{name} must be an integer {bound}, got {v!r}")
    return v


def _seconds(name: str, v, positive: bool) -> Optional[float]:
    if v is None:
        return None
    # A number, not text that happens to parse: the CLI converts its strings.
    if isinstance(v, (str, bytes)):
        raise ValueError(f"{name} must be a number of seconds, got {v!r}")
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number of seconds, got {v!r}")
    if isinstance(v, bool) or not math.isfinite(x) or x < 0 or (positive and x == 0):
        raise ValueError(f"{name} must be a {'positive' if positive else 'non-negative'} finite number of "
                         f"seconds, got {v!r}")
    return x


def _sample_ms(v) -> int:
    v = _count("sample_ms", v, 0)
    if v > SAMPLE_MS_MAX:
        raise ValueError(f"sample_ms must be at most {SAMPLE_MS_MAX} (one hour), got {v!r}")
    return v


# ---------------------------------------------------------------- plans

def load_plan(plan: PlanArg) -> Optional[Dict[str, Any]]:
    """Validate and normalize a plan given as a file path, a dict
    (``{"version": 1, "entries": [...]}``), a list of entries, or JSON text.
    Returns ``None`` for ``None``. ``"all"`` is not a plan but a mode of
    :func:`run`, and is refused here."""
    if plan is None:
        return None
    if isinstance(plan, (dict, list)):
        return json.loads(_core.plan_parse(json.dumps(plan)))
    if isinstance(plan, (str, os.PathLike)):
        s = os.fspath(plan)
        if s == "all":
            raise ValueError("plan 'all' is a mode of run(), not a plan file")
        if s.lstrip().startswith(("[", "{")) and not os.path.exists(s):
            return json.loads(_core.plan_parse(s))
        if not os.path.exists(s):
            raise HugescopeError(f"plan file '{s}' does not exist")
        return json.loads(_core.plan_load(s))
    raise ValueError(f"a plan is a file path, a dict or a list of entries, not {type(plan).__name__}")


def apply_plan(pid: int, plan: PlanArg, precheck: bool = True) -> List[Dict[str, Any]]:
    """Apply every entry of ``plan`` to the running process ``pid`` now, with
    ``process_madvise(MADV_COLLAPSE)`` (``pid`` 0: this process, plain
    ``madvise``), whatever each entry's ``when`` says. The target is never
    signalled or written to. Returns one outcome per entry: ``status``
    (collapsed, partially_collapsed, failed, skipped), ``reason``, ``errno``,
    ``regions``/``regions_collapsed``, ``bytes_huge_after_exact``, ``collapse_us``.
    Needs CAP_SYS_NICE and ptrace-read access for another process (root)."""
    pid = _pid(pid)
    p = load_plan(plan)
    if p is None:
        raise ValueError("apply_plan needs a plan")
    if pid != 0:
        _check_process(pid)
    return json.loads(_core.apply_plan(pid, json.dumps(p), bool(precheck)))


def _check_process(pid: int) -> None:
    """A target that does not exist (or cannot be seen) is bad input, not a plan
    whose every entry failed."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise HugescopeError(f"process {pid} does not exist")
    except PermissionError:
        raise HugescopeError(f"process {pid} is not accessible (applying a plan to another user's process "
                             "needs root)")
    if not os.path.exists(f"/proc/{pid}/smaps"):
        raise HugescopeError(f"process {pid} is not accessible: /proc/{pid}/smaps does not exist "
                             "(a kernel thread, or a process that just exited)")


# ---------------------------------------------------------------- runs

def _spread(xs: Sequence[float]) -> Optional[Dict[str, float]]:
    xs = [float(x) for x in xs if x is not None]
    if not xs:
        return None
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


# What each summarised number is, for result files and tables.
HOW_WORKLOAD = {
    "wall_s": "wall clock, std::time::Instant around the workload's algorithm phase, minus time in hugescope's "
              "progress hooks (collapses and bookkeeping); setup excluded",
    "user_s": "getrusage(RUSAGE_THREAD) user time of the workload thread over the algorithm phase, hooks excluded",
    "sys_s": "getrusage(RUSAGE_THREAD) system time of the workload thread over the algorithm phase, hooks excluded",
    "cpu_s": "clock_gettime(CLOCK_THREAD_CPUTIME_ID) of the workload thread over the algorithm phase, hooks "
             "excluded: the scheduler's exact runtime (user_s and sys_s are sampled at the timer tick, a 4 ms "
             "step at HZ=250)",
    "peak_rss_bytes": "getrusage(RUSAGE_SELF).ru_maxrss of the child process that ran the workload "
                      "(workload plus Python interpreter)",
    "huge_bytes": "PMD-mapped bytes of the workload's regions at the end of the algorithm phase, "
                  "exact from the PAGEMAP_SCAN ioctl",
    "collapse_s": "wall clock spent in MADV_COLLAPSE, after setup plus in progress hooks",
    "setup_s": "wall clock, std::time::Instant around the workload's data construction (before any collapse)",
    "process_wall_s": "wall clock, std::time::Instant around the whole native run in the child "
                      "(setup, collapses, algorithm)",
}
HOW_COMMAND = {
    "wall_s": "wall clock, std::time::Instant from spawn to reaping the child with wait4",
    "user_s": "ru_utime of the child from wait4",
    "sys_s": "ru_stime of the child from wait4",
    "cpu_s": "ru_utime + ru_stime of the child from wait4 (all its threads)",
    "peak_rss_bytes": "the program's own peak resident set: ru_maxrss of the child from wait4 when it exceeds "
                      "hugescope's RSS at fork (ru_maxrss also counts the forked copy of the launcher the program "
                      "replaced at exec), else the largest VmHWM of /proc/PID/status sampled every sample_ms "
                      "(runs[].peak_rss_source says which)",
    "huge_bytes": "largest AnonHugePages of the child sampled from /proc/PID/smaps_rollup every sample_ms",
    "collapse_s": "wall clock spent in process_madvise(MADV_COLLAPSE) by hugescope (in the parent, "
                  "concurrently with the child)",
}


class RunResult:
    """Measured runs of one workload or command under one plan.

    Every run has a ``status``: ``ok``, ``failed`` (non-zero exit), ``killed`` (by
    a signal) or ``timeout``, and ``status_detail`` in words. Only ``ok`` runs are
    summarised; ``summary["runs"]`` counts them and ``summary["failed_runs"]``
    lists the others (``check()`` raises ``RunFailed`` naming them).

    ``summary`` holds median/min/max over the ok measured runs of ``wall_s``,
    ``user_s``, ``sys_s``, ``peak_rss_bytes``, ``huge_bytes`` and ``collapse_s``;
    ``how`` says how each was measured; ``runs`` are the raw records (one per
    measured run; warm-up runs are not kept); ``outcomes`` the collapse outcome of
    every plan entry in the first measured run.
    """

    def __init__(self, kind: str, target, params: Dict[str, Any], plan: str, repeat: int, warmup: int,
                 runs: List[Dict[str, Any]], footprint: Optional[int] = None,
                 header: Optional[Dict[str, Any]] = None):
        self.header = header
        self.baseline: Optional["RunResult"] = None
        self.kind = kind
        self.target = target
        self.params = params
        self.plan = plan
        self.repeat = repeat
        self.warmup = warmup
        self.runs = runs
        self.footprint = footprint
        self.how = dict(HOW_WORKLOAD if kind == "workload" else HOW_COMMAND)
        self.summary = self._summarise()
        self.summary["gain"] = self._gain()

    def set_baseline(self, base: "RunResult") -> None:
        """Attach the base-page runs of the same target; fills the measured gain."""
        self.baseline = base
        self.summary["gain"] = self._gain()

    def _gain(self) -> Dict[str, Any]:
        """The gain of the plan over base pages: the simulator's estimate from
        the plan's header and, with a baseline, the measured one, each with
        how it was obtained."""
        from .calibrate import default_path

        est = (self.header or {}).get("estimate") or {}
        g = {"estimate": est.get("speedup_vs_base"), "estimate_how": est.get("how") or None,
             "measured": None, "measured_how": None}
        # run prices nothing itself: the estimate is the plan maker's, and its
        # `how` names the machine. Whether that was this machine's calibrated
        # preset is recorded (issue #36), so a paper preset's estimate is not
        # taken for this machine's.
        cal = default_path() if os.path.exists(default_path()) else None
        g["calibrated_preset"] = cal
        how = g["estimate_how"] or ""
        # As machine_label names it: "calibrated (PATH, ..." or "config PATH (...".
        g["estimate_on_calibrated"] = (None if g["estimate"] is None else
                                       bool(cal and (f"calibrated ({cal}," in how or f"config {cal} (" in how)))
        if self.baseline is not None:
            b, p = (self.baseline.summary.get("wall_s") or {}), (self.summary.get("wall_s") or {})
            if b.get("median") and p.get("median"):
                g["measured"] = b["median"] / p["median"]
                g["measured_how"] = (f"median wall time of {self.baseline.summary['runs']} base-page run(s) / median "
                                     f"of {self.summary['runs']} run(s) under the plan, {self.warmup} warm-up each; "
                                     f"wall time: {self.how['wall_s']}")
        return g

    # Per-run figures under common names, whatever the kind.
    def _row(self, i: int, r: Dict[str, Any]) -> Dict[str, Any]:
        applied = r.get("applied", [])
        collapse_s = sum(a["outcome"].get("collapse_us", 0) for a in applied) / 1e6
        if self.kind == "workload":
            huge = r.get("huge_bytes_end")
            return {
                "run": i, "wall_s": r["run_s"], "user_s": r["user_s"], "sys_s": r["sys_s"], "cpu_s": r["cpu_s"],
                "peak_rss_bytes": r["peak_rss_bytes"], "huge_bytes": huge,
                "coverage": None if huge is None or not r["footprint_bytes"] else huge / r["footprint_bytes"],
                "collapse_s": r["collapse_setup_s"] + r["collapse_run_s"], "setup_s": r["setup_s"],
                "process_wall_s": r["wall_s"], "checksum": (r.get("result") or {}).get("checksum"),
            }
        huge = r.get("peak_anon_huge_bytes")
        return {
            "run": i, "wall_s": r["wall_s"], "user_s": r["user_s"], "sys_s": r["sys_s"],
            "cpu_s": r["user_s"] + r["sys_s"], "peak_rss_bytes": r["peak_rss_bytes"], "huge_bytes": huge,
            "coverage": (huge / r["peak_rss_bytes"]) if r["peak_rss_bytes"] else None,
            "collapse_s": collapse_s, "exit_code": r.get("exit_code"), "signal": r.get("signal"),
            "aslr_disabled": r.get("aslr_disabled"),
        }

    @property
    def failed_runs(self) -> List[Dict[str, Any]]:
        """``{"run", "status", "detail"}`` of every measured run that is not ok."""
        return [{"run": i, "status": r.get("status"), "detail": r.get("status_detail")}
                for i, r in enumerate(self.runs) if r.get("status") != "ok"]

    def check(self) -> "RunResult":
        """Raise ``RunFailed`` (one line naming each failed run and why) unless
        every measured run is ok; returns self."""
        bad = self.failed_runs
        if bad:
            what = self.target if isinstance(self.target, str) else " ".join(self.target)
            runs = "; ".join(f"run {b['run'] + 1}: {b['status']} ({b['detail']})" for b in bad)
            raise RunFailed(f"{len(bad)} of {len(self.runs)} measured run(s) of '{what}' failed and were not "
                            f"summarised: {runs}")
        return self

    def _summarise(self) -> Dict[str, Any]:
        ok = [r for r in self.runs if r.get("status") == "ok"]
        rows = [self._row(i, r) for i, r in enumerate(self.runs) if r.get("status") == "ok"]
        keys = ["wall_s", "user_s", "sys_s", "cpu_s", "peak_rss_bytes", "huge_bytes", "coverage", "collapse_s"]
        if self.kind == "workload":
            keys += ["setup_s", "process_wall_s"]
        s = {k: _spread([row[k] for row in rows]) for k in keys}
        s["runs"] = len(rows)
        s["failed_runs"] = self.failed_runs
        # Entries not fully applied, as the first measured run counted them.
        s["plan_warnings"] = list(self.runs[0].get("warnings", [])) if self.runs else []
        statuses = [tuple(a["outcome"]["status"] for a in r.get("applied", [])) for r in ok]
        s["outcomes_consistent"] = len(set(statuses)) <= 1
        if self.kind == "workload":
            # The workload's whole result (checksums, counts): a plan changes speed, not answers.
            results = {json.dumps(r.get("result"), sort_keys=True) for r in ok}
            s["results_agree"] = len(results) <= 1
            s["footprint_bytes"] = self.footprint
        return s

    @property
    def outcomes(self) -> List[Dict[str, Any]]:
        if not self.runs:
            return []
        return [dict(a["outcome"], t_s=a.get("t_s"), done_s=a.get("done_s"), point=a.get("point"), attempts=a.get("attempts"))
                for a in self.runs[0].get("applied", [])]

    def __getitem__(self, k):
        return self.to_dict()[k]

    def to_dict(self) -> Dict[str, Any]:
        thp = self.runs[0].get("thp") if self.runs else None
        return {
            "kind": self.kind, "target": self.target, "params": self.params, "plan": self.plan,
            "repeat": self.repeat, "warmup": self.warmup, "summary": self.summary, "how": self.how,
            "thp": thp, "runs": self.runs, "plan_header": self.header,
            "baseline": None if self.baseline is None else self.baseline.to_dict(),
        }

    def to_frame(self):
        """One row per measured run: wall_s, user_s, sys_s, peak_rss_bytes,
        huge_bytes, coverage, collapse_s (and setup/checksum or exit code)."""
        import pandas as pd
        df = pd.DataFrame([dict(self._row(i, r), status=r.get("status")) if r.get("status") == "ok"
                           else {"run": i, "status": r.get("status")} for i, r in enumerate(self.runs)])
        df.insert(0, "plan", self.plan)
        df.insert(0, "target", self.target if isinstance(self.target, str) else " ".join(self.target))
        return df

    def outcomes_frame(self):
        """One row per plan entry and measured run: the collapse outcome."""
        import pandas as pd
        rows = []
        for i, r in enumerate(self.runs):
            for a in r.get("applied", []):
                o = a["outcome"]
                rows.append({"run": i, "index": o["index"], "start": o["start"], "length": o["length"],
                             "when": json.dumps(o["when"]), "point": a.get("point"), "t_s": a.get("t_s"),
                             "status": o["status"], "regions": o["regions"],
                             "regions_collapsed": o["regions_collapsed"], "errno": o.get("errno"),
                             "reason": o["reason"], "bytes_huge_after_exact": o.get("bytes_huge_after_exact"),
                             "collapse_us": o.get("collapse_us")})
        return pd.DataFrame(rows)

    def coverage_frame(self):
        """Coverage over time: one row per sample (run, t_s, anon_huge_bytes, rss_bytes)."""
        import pandas as pd
        rows = [dict(s, run=i) for i, r in enumerate(self.runs) for s in r.get("samples", [])]
        return pd.DataFrame(rows, columns=["run", "t_s", "anon_huge_bytes", "rss_bytes"])

    def __repr__(self) -> str:
        w = self.summary.get("wall_s") or {}
        return (f"RunResult({self.kind} {self.target!r}, plan={self.plan}, runs={len(self.runs)}, "
                f"wall median={w.get('median', float('nan')):.4f} s)")


def stop_in_steps(p: subprocess.Popen, steps, group: bool = False) -> None:
    """End a child we started, one step at a time: each step is (signal or
    None for none, seconds to wait for the exit or None for as long as it
    takes); the first exit ends it and reaps the child. ``group``: signal the
    child's process group (a child started in a session of its own)."""
    for sig, wait in steps:
        if sig is not None and (group or p.poll() is None):
            try:
                os.killpg(p.pid, sig) if group else p.send_signal(sig)
            except ProcessLookupError:
                pass
        try:
            p.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _stop_child(p: subprocess.Popen, signum: int) -> None:
    """Forward ``signum`` to our child's process group, give it ``STOP_GRACE_S``,
    then SIGKILL the group, and reap the child."""
    stop_in_steps(p, ((signum, STOP_GRACE_S), (signal.SIGKILL, None)), group=True)


def child_env() -> Dict[str, str]:
    """The environment of a Python child that must import this same package,
    also from a source checkout."""
    env = dict(os.environ)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["HUGESCOPE_PARENT_PID"] = str(os.getpid())
    return env


def _native_child(request: Dict[str, Any],
                  on_spawn: Optional[Callable[[subprocess.Popen], Callable[[], None]]] = None) -> Dict[str, Any]:
    """One repetition of a built-in workload in a fresh Python process. The child
    leads its own session, so its own process group and scheduler autogroup (a
    ``nice`` it sets then weighs against other sessions' programs, and ends with
    it), and dies with this process (PR_SET_PDEATHSIG, set
    by ``_run_native``); a SIGINT/SIGTERM here is forwarded to it and it is reaped
    before the interrupt propagates. A child that exits non-zero or is killed gives
    a record with that ``status`` (never averaged); bad input raises.

    ``on_spawn(process)``, if given, is called once the child exists (it waits for
    its request on stdin, so nothing has run yet) and returns a function called
    when the child has ended or been stopped (the daemon study starts and stops
    ``hugescope daemon`` on the child this way)."""
    p = subprocess.Popen([sys.executable, "-m", "hugescope._run_native"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(),
                         start_new_session=True)
    done: Optional[Callable[[], None]] = None
    try:
        if on_spawn is not None:
            done = on_spawn(p)
        stdout, stderr = p.communicate(json.dumps(request))
    except BaseException as e:
        _stop_child(p, e.signum if isinstance(e, Interrupted) else signal.SIGINT)
        raise
    finally:
        if done is not None:
            done()
    out = stdout.strip()
    try:
        data = json.loads(out.splitlines()[-1]) if out else None
    except json.JSONDecodeError:
        data = None
    if isinstance(data, dict) and "error" in data:
        raise HugescopeError(data["error"])
    if p.returncode == 0 and isinstance(data, dict):
        return dict(data, status="ok", status_detail="exit 0")
    if p.returncode < 0:
        status, detail = "killed", f"signal {-p.returncode} ({signal.Signals(-p.returncode).name})"
    else:
        why = (stderr or "").strip().splitlines()[-1:]
        status, detail = "failed", f"exit {p.returncode}" + (f": {why[0]}" if why else "")
    return {"status": status, "status_detail": detail, "exit_code": p.returncode if p.returncode >= 0 else None,
            "signal": -p.returncode if p.returncode < 0 else None}


def _plan_mode(plan: PlanArg) -> Tuple[str, Optional[str], str]:
    """(mode for the core, plan JSON or None, description)."""
    if plan is None:
        return "none", None, "none"
    if isinstance(plan, str) and plan == "all":
        return "all", None, "all"
    p = load_plan(plan)
    desc = os.fspath(plan) if isinstance(plan, (str, os.PathLike)) else f"{len(p['entries'])} entries"
    return "plan", json.dumps(p), desc


def run(target: Union[str, Sequence[str]], plan: PlanArg = None, repeat: int = 3, warmup: int = 1,
        sample_ms: int = 100, timeout: Optional[float] = None, start_timeout: float = 10.0,
        progress: Optional[Callable[[Dict[str, Any]], None]] = None, baseline: bool = False,
        cpu: Optional[int] = None, nice: Optional[int] = None, **params) -> RunResult:
    """Run a built-in workload (``target`` is its name, ``params`` its parameters)
    or any command (``target`` is an argument list) under ``plan``, ``warmup``
    times unmeasured and then ``repeat`` times measured.

    ``plan``: ``None`` = base pages (nothing collapsed; under THP ``madvise``
    unadvised memory stays in 4 KiB pages); ``"all"`` = the all-huge
    reference: every workload region collapsed as soon as it is populated, or
    for a command every private anonymous mapping, 2 MiB region by region as
    the command populates it, for as long as it runs; a plan file path, dict
    or list of entries.

    Built-in workloads run in a fresh child process per repetition; entries are
    applied with ``madvise(MADV_COLLAPSE)`` from inside the workload: ``start``
    entries and ``all`` when setup ends (retried at later progress points if the
    memory is not populated yet), ``progress`` entries at that progress label,
    ``time_s`` entries at the first progress point after that time. The collapse
    time is measured separately and not counted in ``wall_s``.

    Commands run with ASLR disabled for them only; ``start`` entries are applied
    with ``process_madvise`` from launch, ``time_s`` entries from that time
    after launch, each region by region (VMA by VMA) as the command populates
    its range, for up to ``start_timeout`` seconds (needs root). An entry not
    fully applied counts every region by what happened to it in its reason,
    and the run's ``warnings`` count such entries (``summary["plan_warnings"]``).
    ``timeout`` kills the command after that many seconds.

    ``progress`` is called after every run with ``{"run", "of", "warmup", "phase",
    "record"}``: warm-up and measured runs are counted separately (``run`` of
    ``of`` within its kind), ``phase`` is ``"base"`` or ``"plan"`` with ``baseline``.

    ``cpu`` (built-in workloads): each run's child process pins itself to
    that CPU (``sched_setaffinity``) before anything else, so it neither
    migrates nor competes with itself across cores. ``nice`` (built-in
    workloads): the child sets its own nice value to this before it starts
    (``noise.check_nice``; below 0 needs root), so co-running programs take
    less of its CPU; it dies with its run, so nothing is left changed.

    ``sample_ms``: the period of the huge-page and RSS samples (``samples``,
    ``peak_anon_huge_bytes``; a command's ``huge_bytes``); 0 takes none. A
    sample walks the process's page tables (``smaps_rollup``: about 10 ms for
    1 GiB of 4 KiB pages), so a built-in workload's sampler moves off a pinned
    ``cpu``, and measurements that need no samples (``validate --suite``,
    ``model fit``, ``advise``, ``calibrate``, ``daemon-study``) take none: even from another CPU the reads slowed GUPS over
    1 GiB of base pages by 4% and all-huge not at all.

    ``baseline=True`` (with a plan) first runs the same ``warmup`` + ``repeat``
    without a plan and sets ``result.baseline`` to them; ``summary["gain"]``
    then holds the measured gain (median wall time of the base runs / median
    under the plan) beside the simulator's estimate from the plan's header
    (``--emit-plan`` writes it), each with how it was obtained.

    A run that fails (non-zero exit, killed by a signal, ``timeout``) is kept with
    its ``status`` and left out of the summary; call ``.check()`` on the result to
    turn any failure into ``RunFailed``. Bad arguments raise ``ValueError`` (or
    ``HugescopeError`` from the core) before anything runs. SIGINT/SIGTERM stop the
    current run: the child is signalled, reaped, and the interrupt propagates.
    """
    _count("repeat", repeat, 1, RUNS_MAX)
    _count("warmup", warmup, 0, RUNS_MAX)
    sample_ms = _sample_ms(sample_ms)
    timeout = _seconds("timeout", timeout, positive=True)
    start_timeout = _seconds("start_timeout", start_timeout, positive=False)
    if baseline and plan is None:
        raise ValueError("baseline=True compares a plan with base pages: give a plan")
    if cpu is not None:
        from .noise import check_cpu
        check_cpu(cpu)
        if not isinstance(target, str):
            raise ValueError("cpu pins built-in workloads; run a command under taskset to pin it")
    if nice is not None:
        from .noise import check_nice
        check_nice(nice)
        if not isinstance(target, str):
            raise ValueError("nice sets built-in workloads' priority; run a command under nice to set its own")
    if baseline:
        # Checked before the base runs spend their time.
        _plan_mode(plan)

        def phase(name):
            return None if progress is None else (lambda ev: progress(dict(ev, phase=name)))
        kw = dict(repeat=repeat, warmup=warmup, sample_ms=sample_ms, timeout=timeout, start_timeout=start_timeout,
                  cpu=cpu, nice=nice)
        base = run(target, None, progress=phase("base"), **kw, **params)
        res = run(target, plan, progress=phase("plan"), **kw, **params)
        res.set_baseline(base)
        return res
    if isinstance(target, str):
        return _run_workload(target, plan, repeat, warmup, sample_ms, progress, params, cpu, nice)
    if not isinstance(target, (list, tuple)) or not all(isinstance(a, (str, os.PathLike)) for a in target):
        raise ValueError(f"target must be a workload name or a list of program arguments (strings), got {target!r}")
    argv = [os.fspath(a) for a in target]
    if not argv:
        raise ValueError("run needs a workload name or a non-empty command")
    if params:
        raise ValueError(f"workload parameters ({', '.join(sorted(params))}) make no sense for a command; "
                         "pass the command's own arguments in the list")
    mode, plan_json, desc = _plan_mode(plan)
    runs = _repeat(lambda: json.loads(_core.launch_command(argv, plan_json, sample_ms, start_timeout, timeout,
                                                           True, None, mode == "all")), repeat, warmup, progress)
    return RunResult("command", argv, {}, desc, repeat, warmup, runs, header=_header(plan_json))


def _repeat(once: Callable[[], Dict[str, Any]], repeat: int, warmup: int, progress) -> List[Dict[str, Any]]:
    """``warmup`` unmeasured runs, then ``repeat`` measured ones (kept). Each
    kind is counted on its own in the progress events ("warm-up 1/1", then
    "run 1/3"), not as one sequence ("run 2/4")."""
    runs = []
    for i in range(warmup + repeat):
        rec = once()
        is_warmup = i < warmup
        if progress:
            progress({"run": i + 1 if is_warmup else i - warmup + 1, "of": warmup if is_warmup else repeat,
                      "warmup": is_warmup, "record": rec})
        if not is_warmup:
            runs.append(rec)
    return runs


def _header(plan_json: Optional[str]) -> Optional[Dict[str, Any]]:
    return json.loads(plan_json).get("header") if plan_json else None


def _run_workload(name: str, plan: PlanArg, repeat: int, warmup: int, sample_ms: int, progress, params,
                  cpu: Optional[int] = None, nice: Optional[int] = None) -> RunResult:
    from . import workloads
    if name not in workloads.names():
        raise ValueError(f"unknown workload '{name}' (workloads: {', '.join(workloads.names())}); "
                         f"to run a program pass its argument list, e.g. run(['{name}'], plan=...)")
    clean = workloads._clean(params)
    # Validates the name and every parameter here, with the core's messages, before
    # any child process starts.
    layout = workloads.layout(name, **clean)
    mode, plan_json, desc = _plan_mode(plan)
    request = {"workload": name, "params": clean, "plan": mode, "plan_json": plan_json,
               "sample_ms": int(sample_ms), "cpu": cpu, "nice": nice}
    runs = _repeat(lambda: _native_child(request), repeat, warmup, progress)
    return RunResult("workload", name, layout["params"], desc, repeat, warmup, runs, footprint=layout["footprint"],
                     header=_header(plan_json))


def run_native_here(name: str, plan: PlanArg = None, sample_ms: int = 100, **params) -> Dict[str, Any]:
    """One native run of a built-in workload in *this* process (no repetition, no
    fresh process): the raw record. Peak RSS then includes everything this process
    did before."""
    from . import workloads
    mode, plan_json, _ = _plan_mode(plan)
    return json.loads(_core.run_native_workload(name, json.dumps(workloads._clean(params)), mode, plan_json,
                                                int(sample_ms)))


# ---------------------------------------------------------------- fragmenter

def fragment(share: float, seed: int = 0, margin: Union[None, str, int] = None, hold: bool = False,
             seconds: Optional[float] = None, on_ready: Optional[Callable[[Dict[str, Any]], None]] = None
             ) -> Dict[str, Any]:
    """Fragment free physical memory the PCC paper's way: one pinned, unmovable
    4 KiB page in ``share`` of the free 2 MiB blocks (chosen from ``seed``),
    leaving ``margin`` free (default max(1 GiB, 5% of memory)).

    ``on_ready(report)`` is called once memory is fragmented. Then, with
    ``hold``, the pins stay until SIGINT/SIGTERM; else for ``seconds`` (default:
    released at once). Every sysctl it changed is restored before it returns
    the report. Needs root; takes most of free memory while it runs.

    Settings are recorded in the state file before they change, so a fragmenter
    killed outright is repaired by the next ``repair_settings()``. A signal while
    fragmenting (or during ``seconds``) releases everything and re-raises; a hold
    ends with a signal by design and returns the report with ``stopped_by_signal``.
    """
    given = share
    try:
        share = float(share)
    except (TypeError, ValueError):
        raise ValueError(f"share '{given}' is not a number")
    if isinstance(given, bool) or not 0.0 <= share <= 1.0:
        raise ValueError(f"share {given!r} must be between 0 and 1 (the share of 2 MiB blocks to pin)")
    _count("seed", seed, 0)
    if seed >= 1 << 64:
        raise ValueError(f"seed must be below 2**64, got {seed!r}")
    if margin is not None:
        from . import units
        margin = str(units.parse_size(margin))
    seconds = _seconds("seconds", seconds, positive=False)
    if seconds is not None and hold:
        raise ValueError("hold and seconds exclude each other")
    if not _core.is_root():
        raise HugescopeError("the fragmenter needs root: it reads physical frame numbers from "
                             "/proc/self/pagemap, mlocks pages and sets vm.compact_unevictable_allowed")
    cb = None
    if on_ready is not None:
        def cb(text):
            on_ready(json.loads(text))
    return json.loads(_core.fragment_memory(share, seed, margin, bool(hold), seconds, cb))
