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
import os
import statistics
import subprocess
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import _core
from ._core import HugescopeError

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
    try:
        p = int(pid)
    except (TypeError, ValueError):
        raise ValueError(f"'{pid}' is not a process id")
    if p < 0:
        raise ValueError(f"{p} is not a process id")
    return p


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
            raise ValueError("plan 'all' is a mode of run() for built-in workloads, not a plan file")
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
    return json.loads(_core.apply_plan(pid, json.dumps(p), bool(precheck)))


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
    "peak_rss_bytes": "ru_maxrss of the child from wait4",
    "huge_bytes": "largest AnonHugePages of the child sampled from /proc/PID/smaps_rollup every sample_ms",
    "collapse_s": "wall clock spent in process_madvise(MADV_COLLAPSE) by hugescope (in the parent, "
                  "concurrently with the child)",
}


class RunResult:
    """Measured runs of one workload or command under one plan.

    ``summary`` holds median/min/max over the measured runs of ``wall_s``,
    ``user_s``, ``sys_s``, ``peak_rss_bytes``, ``huge_bytes`` and ``collapse_s``;
    ``how`` says how each was measured; ``runs`` are the raw records (one per
    measured run; warm-up runs are not kept); ``outcomes`` the collapse outcome of
    every plan entry in the first measured run.
    """

    def __init__(self, kind: str, target, params: Dict[str, Any], plan: str, repeat: int, warmup: int,
                 runs: List[Dict[str, Any]], footprint: Optional[int] = None):
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

    # Per-run figures under common names, whatever the kind.
    def _row(self, i: int, r: Dict[str, Any]) -> Dict[str, Any]:
        applied = r.get("applied", [])
        collapse_s = sum(a["outcome"].get("collapse_us", 0) for a in applied) / 1e6
        if self.kind == "workload":
            huge = r.get("huge_bytes_end")
            return {
                "run": i, "wall_s": r["run_s"], "user_s": r["user_s"], "sys_s": r["sys_s"],
                "peak_rss_bytes": r["peak_rss_bytes"], "huge_bytes": huge,
                "coverage": None if huge is None or not r["footprint_bytes"] else huge / r["footprint_bytes"],
                "collapse_s": r["collapse_setup_s"] + r["collapse_run_s"], "setup_s": r["setup_s"],
                "process_wall_s": r["wall_s"], "checksum": (r.get("result") or {}).get("checksum"),
            }
        huge = r.get("peak_anon_huge_bytes")
        return {
            "run": i, "wall_s": r["wall_s"], "user_s": r["user_s"], "sys_s": r["sys_s"],
            "peak_rss_bytes": r["peak_rss_bytes"], "huge_bytes": huge,
            "coverage": (huge / r["peak_rss_bytes"]) if r["peak_rss_bytes"] else None,
            "collapse_s": collapse_s, "exit_code": r.get("exit_code"), "signal": r.get("signal"),
            "aslr_disabled": r.get("aslr_disabled"),
        }

    def _summarise(self) -> Dict[str, Any]:
        rows = [self._row(i, r) for i, r in enumerate(self.runs)]
        keys = ["wall_s", "user_s", "sys_s", "peak_rss_bytes", "huge_bytes", "coverage", "collapse_s"]
        if self.kind == "workload":
            keys += ["setup_s", "process_wall_s"]
        s = {k: _spread([row[k] for row in rows]) for k in keys}
        s["runs"] = len(rows)
        statuses = [tuple(a["outcome"]["status"] for a in r.get("applied", [])) for r in self.runs]
        s["outcomes_consistent"] = len(set(statuses)) <= 1
        if self.kind == "workload":
            # The workload's whole result (checksums, counts): a plan changes speed, not answers.
            results = {json.dumps(r.get("result"), sort_keys=True) for r in self.runs}
            s["results_agree"] = len(results) <= 1
            s["footprint_bytes"] = self.footprint
        return s

    @property
    def outcomes(self) -> List[Dict[str, Any]]:
        if not self.runs:
            return []
        return [dict(a["outcome"], t_s=a.get("t_s"), point=a.get("point"), attempts=a.get("attempts"))
                for a in self.runs[0].get("applied", [])]

    def __getitem__(self, k):
        return self.to_dict()[k]

    def to_dict(self) -> Dict[str, Any]:
        thp = self.runs[0].get("thp") if self.runs else None
        return {
            "kind": self.kind, "target": self.target, "params": self.params, "plan": self.plan,
            "repeat": self.repeat, "warmup": self.warmup, "summary": self.summary, "how": self.how,
            "thp": thp, "runs": self.runs,
        }

    def to_frame(self):
        """One row per measured run: wall_s, user_s, sys_s, peak_rss_bytes,
        huge_bytes, coverage, collapse_s (and setup/checksum or exit code)."""
        import pandas as pd
        df = pd.DataFrame([self._row(i, r) for i, r in enumerate(self.runs)])
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


def _native_child(request: Dict[str, Any]) -> Dict[str, Any]:
    """One repetition of a built-in workload in a fresh Python process."""
    env = dict(os.environ)
    # The child must import this same package, also from a source checkout.
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    p = subprocess.run([sys.executable, "-m", "hugescope._run_native"], input=json.dumps(request),
                       capture_output=True, text=True, env=env)
    out = p.stdout.strip()
    try:
        data = json.loads(out.splitlines()[-1]) if out else None
    except json.JSONDecodeError:
        data = None
    if isinstance(data, dict) and "error" in data:
        raise HugescopeError(data["error"])
    if p.returncode != 0 or not isinstance(data, dict):
        why = (p.stderr or "").strip().splitlines()[-1:] or [f"exit status {p.returncode}"]
        if p.returncode < 0:
            why = [f"killed by signal {-p.returncode}"]
        raise HugescopeError(f"the native run of '{request['workload']}' failed in its child process: {why[0]}")
    return data


def _plan_mode(plan: PlanArg, for_workload: bool) -> Tuple[str, Optional[str], str]:
    """(mode for the core, plan JSON or None, description)."""
    if plan is None:
        return "none", None, "none"
    if isinstance(plan, str) and plan == "all":
        if not for_workload:
            raise ValueError("plan='all' needs a built-in workload (a command's memory regions are not known "
                             "in advance); give a plan file with the command's ranges")
        return "all", None, "all"
    p = load_plan(plan)
    desc = os.fspath(plan) if isinstance(plan, (str, os.PathLike)) else f"{len(p['entries'])} entries"
    return "plan", json.dumps(p), desc


def run(target: Union[str, Sequence[str]], plan: PlanArg = None, repeat: int = 3, warmup: int = 1,
        sample_ms: int = 100, timeout: Optional[float] = None, start_timeout: float = 10.0,
        progress: Optional[Callable[[Dict[str, Any]], None]] = None, **params) -> RunResult:
    """Run a built-in workload (``target`` is its name, ``params`` its parameters)
    or any command (``target`` is an argument list) under ``plan``, ``warmup``
    times unmeasured and then ``repeat`` times measured.

    ``plan``: ``None`` = base pages (nothing collapsed; under THP ``madvise``
    unadvised memory stays in 4 KiB pages); ``"all"`` = every workload region
    collapsed as soon as it is populated (the all-huge reference, workloads only);
    a plan file path, dict or list of entries.

    Built-in workloads run in a fresh child process per repetition; entries are
    applied with ``madvise(MADV_COLLAPSE)`` from inside the workload: ``start``
    entries and ``all`` when setup ends (retried at later progress points if the
    memory is not populated yet), ``progress`` entries at that progress label,
    ``time_s`` entries at the first progress point after that time. The collapse
    time is measured separately and not counted in ``wall_s``.

    Commands run with ASLR disabled for them only; ``start`` entries are applied
    with ``process_madvise`` as soon as the range is mapped and populated,
    ``time_s`` entries at that time after launch (needs root). ``timeout`` kills
    the command after that many seconds.

    ``progress`` is called after every run with ``{"run", "of", "warmup", "record"}``.
    """
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"repeat must be a positive integer, got {repeat!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be a non-negative integer, got {warmup!r}")
    if isinstance(target, str):
        return _run_workload(target, plan, repeat, warmup, sample_ms, progress, params)
    argv = [os.fspath(a) for a in target]
    if not argv:
        raise ValueError("run needs a workload name or a non-empty command")
    if params:
        raise ValueError(f"workload parameters ({', '.join(sorted(params))}) make no sense for a command; "
                         "pass the command's own arguments in the list")
    mode, plan_json, desc = _plan_mode(plan, for_workload=False)
    runs = []
    total = warmup + repeat
    for i in range(total):
        rec = json.loads(_core.launch_command(argv, plan_json, int(sample_ms), float(start_timeout),
                                              None if timeout is None else float(timeout), True, None))
        if progress:
            progress({"run": i + 1, "of": total, "warmup": i < warmup, "record": rec})
        if i >= warmup:
            runs.append(rec)
    return RunResult("command", argv, {}, desc, repeat, warmup, runs)


def _run_workload(name: str, plan: PlanArg, repeat: int, warmup: int, sample_ms: int, progress, params) -> RunResult:
    from . import workloads
    if name not in workloads.names():
        raise ValueError(f"unknown workload '{name}' (workloads: {', '.join(workloads.names())}); "
                         f"to run a program pass its argument list, e.g. run(['{name}'], plan=...)")
    clean = workloads._clean(params)
    # Validates the name and every parameter here, with the core's messages, before
    # any child process starts.
    layout = workloads.layout(name, **clean)
    mode, plan_json, desc = _plan_mode(plan, for_workload=True)
    request = {"workload": name, "params": clean, "plan": mode, "plan_json": plan_json,
               "sample_ms": int(sample_ms)}
    runs = []
    total = warmup + repeat
    for i in range(total):
        rec = _native_child(request)
        if progress:
            progress({"run": i + 1, "of": total, "warmup": i < warmup, "record": rec})
        if i >= warmup:
            runs.append(rec)
    return RunResult("workload", name, layout["params"], desc, repeat, warmup, runs, footprint=layout["footprint"])


def run_native_here(name: str, plan: PlanArg = None, sample_ms: int = 100, **params) -> Dict[str, Any]:
    """One native run of a built-in workload in *this* process (no repetition, no
    fresh process): the raw record. Peak RSS then includes everything this process
    did before."""
    from . import workloads
    mode, plan_json, _ = _plan_mode(plan, for_workload=True)
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
    """
    try:
        share = float(share)
    except (TypeError, ValueError):
        raise ValueError(f"share '{share}' is not a number")
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share {share} must be between 0 and 1 (the share of 2 MiB blocks to pin)")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    if margin is not None:
        from . import units
        margin = str(units.parse_size(margin))
    if seconds is not None and (hold or seconds < 0):
        raise ValueError("seconds must be non-negative, and hold and seconds exclude each other")
    if not _core.is_root():
        raise HugescopeError("the fragmenter needs root: it reads physical frame numbers from "
                             "/proc/self/pagemap, mlocks pages and sets vm.compact_unevictable_allowed")
    cb = None
    if on_ready is not None:
        def cb(text):
            on_ready(json.loads(text))
    return json.loads(_core.fragment_memory(share, seed, margin, bool(hold), seconds, cb))
