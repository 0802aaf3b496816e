"""One native run of a built-in workload, in a process of its own.

``hugescope.linux.run`` starts ``python -m hugescope._run_native`` once per
repetition, so that every run starts with fresh memory (its own page tables,
its own peak RSS) and its fixed-address regions free. The request comes as
JSON on stdin: ``{"workload", "params", "plan": "none"|"all"|"plan",
"plan_json", "sample_ms", "cpu", "nice"}`` (``cpu``: pin this process there first; ``nice``: its nice value,
set before the run); the run record goes to stdout as one JSON line,
or ``{"error": message}`` with exit status 3.

The child changes no machine setting, so it needs no cleanup: it dies with its
parent (``PR_SET_PDEATHSIG``) and SIGINT/SIGTERM end it at once (the default
actions), which is what the parent's forwarding of a stop relies on.
"""

from __future__ import annotations

import json
import os
import signal
import sys


AUTOGROUP = "/proc/self/autogroup"


def _set_nice(nice: int) -> None:
    """This process's nice value, before the workload starts. Under
    autogroup scheduling (``kernel.sched_autogroup_enabled``) a nice value
    only ranks a process within its session's group, and groups share the
    CPU equally whatever their members' nice: so the group's own nice is
    set too. The parent started this process in a session of its own
    (``linux._native_child``), so the group holds this run alone and ends
    with it; nothing else's priority changes."""
    os.setpriority(os.PRIO_PROCESS, 0, nice)
    if os.path.exists(AUTOGROUP) and os.getsid(0) == os.getpid():
        with open(AUTOGROUP, "w") as f:
            f.write(str(nice))


def main() -> int:
    # Python's SIGINT handler would only raise once the native call returned.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        from . import _core
        parent = int(os.environ.get("HUGESCOPE_PARENT_PID", "0") or 0)
        if not _core.die_with_parent(signal.SIGKILL, parent):
            return 1  # the parent is already gone: nobody wants this run
        req = json.loads(sys.stdin.read())
        if req.get("cpu") is not None:
            # Before the workload allocates or starts a thread: all of it runs there.
            os.sched_setaffinity(0, {int(req["cpu"])})
        if req.get("nice") is not None:
            _set_nice(int(req["nice"]))
        text = _core.run_native_workload(req["workload"], json.dumps(req.get("params") or {}),
                                         req.get("plan", "none"), req.get("plan_json"),
                                         int(req.get("sample_ms", 100)))
    except Exception as e:  # reported to the parent, which raises it as HugescopeError
        print(json.dumps({"error": str(e)}))
        return 3
    if req.get("cpu") is not None or req.get("nice") is not None:
        # The record says where the run ran (the affinity it had at its end)
        # and at what priority.
        text = json.dumps(dict(json.loads(text), cpus=sorted(os.sched_getaffinity(0)),
                               nice=os.getpriority(os.PRIO_PROCESS, 0), autogroup=_autogroup()))
    print(text)
    return 0


def _autogroup():
    try:
        with open(AUTOGROUP) as f:
            return f.read().strip()
    except OSError:
        return None


if __name__ == "__main__":
    sys.exit(main())
