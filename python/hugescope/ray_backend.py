"""Sweeps on Ray (issue #16): the batches of a sweep as Ray tasks, on the
local cores (a local Ray instance, the default) or on a cluster
(``--ray-address HOST:PORT``).

The engine stays thin: a task is one call of the core's ``run_specs`` on one
batch of configurations over the whole trace, exactly what the local backend
runs in a loop, so results are the same numbers (each configuration has its
own kernel and base is deterministic: grouping does not change results,
tested). Tasks are never (trace chunk, configurations): the simulated kernel's
state at an access depends on every access before it (promotions, PCC
counters, daemons' clocks), so a chunk cannot be simulated without its
prefix (docs/assumptions.md).

The trace: a task first looks for it at the driver's path on its node
(shared storage) and checks it is the same trace (size and the digest of its
header, footer and last 64 KiB; ``experiments.trace_identity``). Where it is
missing or different, the task says so, and the driver ships the file once
through Ray's object store; each node keeps one copy in a private temporary
directory for the rest of the sweep, removed when the sweep ends.

Rows come back in completion order; ``experiments.run_configs`` puts each
result at its configuration's place, so tables are in the same order as with
the local backend. Every node must run the same hugescope version (checked:
a task reports its version).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import signal
import socket
import sys
import tempfile
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from . import _core
from ._core import HugescopeError
from .errors import Interrupted, RunFailed

INSTALL = "pip install 'hugescope[ray]'"
#: Seconds the driver waits for a TCP connection to --ray-address before
#: calling the address unreachable (Ray itself retries for minutes).
CONNECT_TIMEOUT_S = 5.0
#: ray.wait's timeout: the driver's loop returns to Python this often, so
#: SIGINT/SIGTERM are handled within a second.
WAIT_S = 1.0


def require():
    """The ray module, or one clear error saying how to install it."""
    try:
        import ray
    except ImportError:
        raise HugescopeError(f"--backend ray needs Ray, which is not installed: {INSTALL}") from None
    return ray


def check_address(address: Optional[str]) -> Optional[str]:
    """``--ray-address``: None (start a local instance), ``auto`` (a cluster
    started on this machine with ``ray start``), ``ray://HOST:PORT`` (Ray
    Client) or ``HOST:PORT`` (a cluster's head), reachable within
    ``CONNECT_TIMEOUT_S``. Raises HugescopeError naming the address."""
    if address is None:
        return None
    addr = str(address).strip()
    if addr == "auto" or addr.startswith("ray://"):
        return addr
    host, sep, port = addr.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise HugescopeError(f"--ray-address '{address}': expected HOST:PORT of a Ray head (e.g. 10.0.0.5:6379), "
                             "ray://HOST:PORT or auto")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as e:
        reason = e.strerror or str(e) or type(e).__name__
        raise HugescopeError(f"--ray-address {addr}: cannot reach a Ray cluster there ({reason}); start one with "
                             "'ray start --head', or leave --ray-address out for a local instance") from None
    return addr


@contextlib.contextmanager
def session(address: Optional[str] = None, num_cpus: Optional[int] = None):
    """Ray for the duration of the block: the caller's, when Ray is already
    initialised (left running); else a local instance (``address`` None) or a
    connection to ``address``, shut down after. Ray installs its own SIGTERM
    handler and excepthook; both are put back, so the CLI's signal handling
    (docs/cli.md) holds while Ray runs and after."""
    ray = require()
    if ray.is_initialized():
        yield ray
        return
    addr = check_address(address)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    hook = sys.excepthook
    try:
        try:
            kwargs = {"num_cpus": num_cpus} if addr is None else {}
            ray.init(address=addr or "local", include_dashboard=False, log_to_driver=False,
                     logging_level=logging.ERROR, **kwargs)
        except (ConnectionError, ValueError, RuntimeError, TimeoutError) as e:
            where = f"--ray-address {addr}" if addr else "a local Ray instance"
            raise HugescopeError(f"{where}: Ray could not start or connect ({' '.join(str(e).split())})") from None
        finally:
            _restore(handlers, hook)
        yield ray
    finally:
        try:
            if ray.is_initialized():
                ray.shutdown()
        finally:
            _restore(handlers, hook)


def _restore(handlers, hook) -> None:
    import threading

    if threading.current_thread() is threading.main_thread():
        for s, h in handlers.items():
            if h is not None:
                signal.signal(s, h)
    sys.excepthook = hook


# ---------------------------------------------------------------- on a node

def _cache_dir(create: bool = False) -> str:
    """This user's private directory for shipped traces on a node (0700, not
    a link, owned by us: another user cannot plant a file we would read).
    Created only when a copy is to be written."""
    import stat

    d = os.path.join(tempfile.gettempdir(), f"hugescope-ray-{os.getuid()}")
    if create:
        os.makedirs(d, mode=0o700, exist_ok=True)
    try:
        st = os.lstat(d)
    except FileNotFoundError:
        return d
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise HugescopeError(f"{d}: not a private directory of this user; refusing to keep a trace there")
    return d


def _copy_path(identity: Dict[str, Any], create: bool = False) -> str:
    return os.path.join(_cache_dir(create), identity["sha256"] + ".hst")


def _same_trace(path: str, identity: Dict[str, Any]) -> bool:
    from .experiments import trace_identity

    try:
        return os.path.isfile(path) and trace_identity(path) == identity
    except (HugescopeError, OSError):
        return False


def _node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()


def simulate_batch(path: str, identity: Dict[str, Any], shipped: Optional[list], configs_json: str, threads: int,
                   core_args: Dict[str, Any], no_cache: bool = False) -> Dict[str, Any]:
    """One task: ``run_specs`` on the trace as this node sees it. Returns
    {"results": JSON text, "version", "copy_on": node id when it used a shipped
    copy}, {"need_trace": True} when the node lacks the trace and none was
    shipped yet, or {"error": message} for bad input (a HugescopeError).
    ``no_cache``: the driver ran with ``--no-cache``; the node's results
    cache is left alone for this task (a worker process serves many tasks,
    so the setting is put back after)."""
    with _no_cache(no_cache):
        return _simulate_batch(path, identity, shipped, configs_json, threads, core_args)


@contextlib.contextmanager
def _no_cache(on: bool):
    key = "HUGESCOPE_NO_CACHE"
    old = os.environ.get(key)
    if on:
        os.environ[key] = "1"
    try:
        yield
    finally:
        if on:
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


def _simulate_batch(path, identity, shipped, configs_json, threads, core_args) -> Dict[str, Any]:
    try:
        local, copy = path, False
        if not _same_trace(path, identity):
            local, copy = _copy_path(identity), True
            if not _same_trace(local, identity):
                if shipped is None:
                    return {"need_trace": True}
                import ray

                from ._io import _write_file

                _write_file(_copy_path(identity, create=True), ray.get(shipped[0]))
        records = _core.run_specs(local, configs_json, threads=threads, **core_args)
        # The results travel as the JSON the core writes from its records.
        text = "[" + ", ".join(r.to_json() for r in records) + "]"
        return {"results": text, "version": _core.version(), "copy_on": _node_id() if copy else None}
    except HugescopeError as e:
        return {"error": str(e)}


def drop_copy(identity: Dict[str, Any]) -> None:
    """Remove this node's shipped copy of a trace (and the directory when empty)."""
    p = _copy_path(identity)
    try:
        os.unlink(p)
    except FileNotFoundError:
        pass
    try:
        os.rmdir(os.path.dirname(p))
    except OSError:
        pass


# ---------------------------------------------------------------- the driver

def _cpus(ray) -> Tuple[int, int]:
    """(CPUs of the cluster, CPUs of its largest node)."""
    per_node = [int(n.get("Resources", {}).get("CPU", 0)) for n in ray.nodes() if n.get("Alive")]
    total = int(ray.cluster_resources().get("CPU", 0)) or sum(per_node) or 1
    return total, max(per_node, default=total) or 1


def batches(todo: Sequence[int], threads: int, total_cpus: int, largest: int, batch: int) -> List[List[int]]:
    """Configurations per task: at most ``batch`` (the checkpoint unit), and
    few enough that every slot of ``threads`` CPUs of the cluster gets one
    (a 31-point curve on 32 CPUs runs as 16 tasks of 2 configurations
    instead of 3 of 12)."""
    per_task = max(1, min(threads, largest))
    slots = max(1, total_cpus // per_task)
    size = max(1, min(batch, math.ceil(len(todo) / slots)))
    return [list(todo[b:b + size]) for b in range(0, len(todo), size)]


def run_batches(path: str, configs: Sequence[Dict[str, Any]], todo: Sequence[int], threads: int,
                core_args: Dict[str, Any], batch: int, address: Optional[str] = None,
                node_path: Optional[str] = None) -> Iterator[Tuple[List[int], List[Dict[str, Any]]]]:
    """Run ``configs[i]`` for i in ``todo`` as Ray tasks; yield (indices,
    results) per task as each finishes. ``node_path``: where the nodes find
    the trace if not at ``path`` (shared storage mounted elsewhere).
    Unfinished tasks are cancelled when the caller stops early (an error, a
    signal), and shipped copies are removed from the nodes."""
    from .experiments import trace_identity

    with session(address) as ray:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        total, largest = _cpus(ray)
        per_task = max(1, min(threads, largest))
        task = ray.remote(simulate_batch).options(num_cpus=per_task, max_retries=1)
        identity = trace_identity(path)
        copies: set = set()
        # The nodes' processes do not inherit the driver's environment.
        no_cache = os.environ.get("HUGESCOPE_NO_CACHE", "") not in ("", "0")

        def submit(idx, ship):
            return task.remote(node_path or path, identity, ship, json.dumps([configs[i] for i in idx]), threads,
                               core_args, no_cache)

        pending = {submit(idx, None): idx for idx in batches(todo, threads, total, largest, batch)}
        try:
            with _signals_kept() as caught:
                yield from _collect(ray, pending, submit, path, copies, caught)
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)
            cleanup = [ray.remote(drop_copy).options(
                num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(identity)
                for node in copies]
            if cleanup:
                ray.wait(cleanup, num_returns=len(cleanup), timeout=30)


@contextlib.contextmanager
def _signals_kept():
    """Record which of SIGINT/SIGTERM arrives while Ray waits: Ray's C++ wait
    turns the handler's ``Interrupted(signum)`` into a bare KeyboardInterrupt,
    which would make the CLI report SIGTERM as SIGINT (exit 130, not 143)."""
    import threading

    caught: List[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def record(signum, frame):
        caught.append(signum)
        h = old[signum]
        if callable(h):
            h(signum, frame)
        elif h != signal.SIG_IGN:
            raise Interrupted(signum)

    try:
        for s in old:
            signal.signal(s, record)
        yield caught
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _collect(ray, pending, submit, path, copies, caught):
    """Yield (indices, results) as tasks finish; a task whose node lacks the
    trace is sent again with the trace shipped (put once in the object store)."""
    shipped = None
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=WAIT_S)
            for ref in ready:
                idx = pending.pop(ref)
                try:
                    out = ray.get(ref)
                except ray.exceptions.RayError as e:
                    raise RunFailed(f"a Ray task failed: {' '.join(str(e).split())[:500]}") from None
                if "error" in out:
                    raise HugescopeError(out["error"])
                if out.get("need_trace"):
                    if shipped is None:
                        # Wrapped in a list so Ray passes the reference and
                        # the task fetches the bytes only when it needs them.
                        with open(path, "rb") as f:
                            shipped = [ray.put(f.read())]
                    pending[submit(idx, shipped)] = idx
                    continue
                if out["version"] != _core.version():
                    raise HugescopeError(f"a Ray node runs hugescope {out['version']}, this one "
                                         f"{_core.version()}: install the same version on every node")
                if out.get("copy_on"):
                    copies.add(out["copy_on"])
                yield idx, json.loads(out["results"])
    except KeyboardInterrupt as e:
        if caught and not isinstance(e, Interrupted):
            raise Interrupted(caught[-1]) from None
        raise
