"""The Ray backend on a real multi-node cluster (issue #37 item 4).

A cluster of three Ray nodes (a head and two workers, each its own raylet,
object store and worker processes: Ray's ``cluster_utils.Cluster``, the same
processes ``ray start --head`` and ``ray start --address`` start) runs on
this machine with one logical CPU and a 100 MB object store each, so it fits
two cores and little memory. On it:

- a ``curve`` sweep, from the CLI in another process connecting with
  ``--ray-address``, writes the same files as the local backend;
- a trace present only on the driver (the nodes are told to look for it at
  a path that does not exist on them: on one machine every node shares the
  driver's file system, so this is how a node without the file is made) is
  shipped through the object store, with the same results;
- a worker node killed (no graceful shutdown: its raylet and workers die as
  in a crash) while a sweep's tasks run on it: the sweep finishes, its lost
  tasks retried on the surviving nodes, with the same results;
- a ``reproduce pcc`` sweep (CI scale's studies, on a small BFS graph so the
  whole file stays near a minute) gives the same measurements as locally.

How to run the same on a cloud cluster: docs/cluster.md.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hugescope import experiments as ex
from hugescope import ray_backend, workloads

from test_experiments import _files  # the sweep tests' helper, shared

#: Per node: one logical CPU, a 100 MB object store (Ray's floor is 75 MB).
NODE = dict(num_cpus=1, object_store_memory=100 << 20)
KW = dict(policies=["linux", "pcc"], budgets=[0, 4, 32, 100], frag_points=[50], duration=60, threads=1)


def _ray_or_skip():
    try:
        import ray
        from ray.cluster_utils import Cluster
    except ImportError as e:
        pytest.skip(f"ray cannot be imported ({e}); 'make build' installs it (extra 'ray')")
    return ray, Cluster


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("cluster") / "bfs.hst")
    workloads.trace("bfs", path, scale=14)
    return path


@pytest.fixture(scope="module")
def cluster():
    ray, Cluster = _ray_or_skip()
    if ray.is_initialized():
        ray.shutdown()
    c = Cluster(initialize_head=True, head_node_args=dict(NODE, include_dashboard=False))
    workers = [c.add_node(**NODE) for _ in range(2)]
    c.wait_for_nodes()
    try:
        ray.init(address=c.address, log_to_driver=False)
        assert len([n for n in ray.nodes() if n["Alive"]]) == 3
        yield c, workers
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.fixture(scope="module")
def local(trace):
    return ex.curve(trace, **KW)


def test_cluster_curve_from_the_cli_writes_the_local_files(cluster, trace, tmp_path):
    c, _ = cluster
    args = ["curve", trace, "--policies", "linux,pcc", "--budgets", "0,4,32,100", "--frag-points", "50",
            "--duration", "60", "--threads", "1", "--no-plots"]
    env = dict(os.environ, HUGESCOPE_NO_CACHE="1")
    here = subprocess.run([sys.executable, "-m", "hugescope"] + args + ["-o", str(tmp_path / "local")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert here.returncode == 0, here.stderr
    # Another driver process connecting to the cluster by its address.
    there = subprocess.run([sys.executable, "-m", "hugescope"] + args + ["-o", str(tmp_path / "ray"), "--backend",
                           "ray", "--ray-address", c.address], env=env, capture_output=True, text=True, timeout=300)
    assert there.returncode == 0, there.stderr
    assert _files(tmp_path / "ray") == _files(tmp_path / "local")


def test_a_trace_only_on_the_driver_is_shipped(cluster, trace, local, tmp_path):
    absent = str(tmp_path / "not-on-the-nodes.hst")
    shipped = ex.curve(trace, backend="ray", ray_trace_path=absent, **KW)
    assert shipped.to_csv(index=False) == local.to_csv(index=False)
    assert local["huge_share"].max() > 0  # the points differ: a real comparison
    copy = ray_backend._copy_path(ex.trace_identity(trace))
    assert not os.path.exists(copy), "the shipped copies are removed after the sweep"


def _workers(node) -> dict:
    """The worker processes of ``node`` (its raylet's children): pid -> the
    title Ray gives a worker (``ray::simulate_batch`` while it runs a task)."""
    raylets = {p.pid for kind, p in node.live_processes() if kind == "raylet"}
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                title = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid in raylets:
            out[int(pid)] = title
    return out


def _running_tasks(node) -> int:
    return sum(t.startswith(b"ray::simulate_batch") for t in _workers(node).values())


def _crash(cluster, node) -> None:
    """Kill ``node`` as a machine failure would: its raylet and object store
    without a graceful shutdown, and its workers with SIGKILL (a worker
    whose raylet died would otherwise still finish its task and report it)."""
    import signal

    workers = _workers(node)
    cluster.remove_node(node, allow_graceful=False)
    for pid in workers:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_worker_node_killed_mid_sweep_loses_nothing(cluster, tmp_path_factory, monkeypatch):
    import time

    c, workers = cluster
    # Tasks of about a second each (a larger graph, one configuration per
    # task): 11 tasks over 3 one-CPU nodes.
    path = str(tmp_path_factory.mktemp("kill") / "bfs20.hst")
    workloads.trace("bfs", path, scale=20, limit=6_000_000)
    # Every configuration simulated, none answered from the results cache
    # (the local run would fill it, and cached reference tasks end at once,
    # leaving the victim idle when it is killed).
    monkeypatch.setenv("HUGESCOPE_NO_CACHE", "1")
    local = ex.curve(path, **KW)
    monkeypatch.setattr(ex, "BATCH", 1)
    killed = []

    def progress(done, total):
        if killed or done < 1:
            return
        # Kill a worker node while it runs a task: whichever has one first
        # (10 tasks are left for 3 nodes; the scheduler need not give one to
        # a given node, so waiting for one node could outlast the sweep).
        deadline = time.monotonic() + 20
        busy = []
        while not busy and time.monotonic() < deadline:
            busy = [w for w in workers if _running_tasks(w)]
            if not busy:
                time.sleep(0.02)
        if busy:
            killed.append((busy[0], _running_tasks(busy[0])))
            _crash(c, busy[0])

    df = ex.curve(path, backend="ray", progress=progress, **KW)
    assert killed and killed[0][1] >= 1, "a worker node was running a sweep task when it was killed"
    assert not killed[0][0].any_processes_alive(), "its raylet and object store are gone"
    assert df.to_csv(index=False) == local.to_csv(index=False)


def test_reproduce_on_the_cluster_measures_what_it_measures_locally(cluster, monkeypatch):
    from hugescope import reproduce as rp
    from hugescope.reproduce import pcc

    # CI scale's studies (curve, fragmentation, PCC sizes, static) on a
    # smaller graph: the comparison, not the paper's numbers, is the point.
    monkeypatch.setitem(pcc.SCALE_PARAMS, "ci", {**pcc.SCALE_PARAMS["ci"], "bfs": {"scale": 13,
                                                                                  "direction_optimizing": False}})
    here = rp.run(["pcc"], scale="ci", seeds=[1], kernels=["bfs"])
    tasks = []
    real = ray_backend.run_batches
    monkeypatch.setattr(ray_backend, "run_batches", lambda *a, **kw: (tasks.append(1), real(*a, **kw))[1])
    there = rp.run(["pcc"], scale="ci", seeds=[1], kernels=["bfs"], backend="ray")
    assert len(tasks) == 3 + len(pcc.MT_THREADS), \
        "the curve, fragmentation and sizes sweeps and the multi-threaded runs (Fig. 8) ran on the cluster"
    assert there.rows.to_csv(index=False) == here.rows.to_csv(index=False)
    assert there.evidence["pcc"].to_csv(index=False) == here.evidence["pcc"].to_csv(index=False)


def test_no_cache_reaches_the_nodes(cluster, trace, local, monkeypatch):
    # The nodes were started from this process: they share its cache
    # directory (conftest), so what they store shows here.
    from hugescope import _core

    d = os.environ["HUGESCOPE_CACHE_DIR"]
    _core.cache_clear()
    monkeypatch.setenv("HUGESCOPE_NO_CACHE", "1")
    off = ex.curve(trace, backend="ray", **KW)
    assert not [f for f in os.listdir(d) if f.endswith(".entry")], "--no-cache: the nodes stored nothing"
    monkeypatch.delenv("HUGESCOPE_NO_CACHE")
    on = ex.curve(trace, backend="ray", **KW)
    assert [f for f in os.listdir(d) if f.endswith(".entry")], "without it the nodes store the reference"
    assert off.to_csv(index=False) == on.to_csv(index=False) == local.to_csv(index=False)
