"""Sweep backends, Parquet streaming and resuming after a kill (issue #16,
docs/experiments.md "Backends" and "Interrupting and resuming").

The Ray tests use a local Ray instance of 2 CPUs, started once for the
module; they are skipped, with the reason, only when Ray cannot be imported
('make build' installs it: the 'ray' extra is in the Makefile's EXTRAS).
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import hugescope as hs
from hugescope import cli as hcli
from hugescope import experiments as ex
from hugescope import ray_backend, sweep_parts, workloads
from test_experiments import _files, _interrupt_after  # the sweep tests' helpers, shared

ARGS = ["--policies", "linux,pcc", "--budgets", "0,4,32,100", "--frag-points", "50", "--duration", "60",
        "--no-plots", "--threads", "1"]
N_CONFIGS = 2 * 4 + 2 + 1  # policies x budgets, base and ideal, one fragmentation point


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep")
    path = str(d / "bfs.hst")
    workloads.trace("bfs", path, scale=14)
    return path


def _ray_or_skip():
    try:
        import ray
    except ImportError as e:
        pytest.skip(f"ray cannot be imported ({e}); 'make build' installs it (extra 'ray')")
    return ray


# ---------------------------------------------------------------- errors (no Ray started)

def test_backend_ray_without_ray_is_one_clear_error(trace, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError, as when not installed
    assert hcli.main(["curve", trace, "-o", str(tmp_path / "o"), "--backend", "ray"] + ARGS) == 2
    err = capsys.readouterr().err
    assert "needs Ray" in err and "pip install 'hugescope[ray]'" in err and len(err.strip().splitlines()) == 1, err
    assert not os.path.exists(tmp_path / "o" / "curve-bfs.csv")
    with pytest.raises(hs.HugescopeError, match=r"hugescope\[ray\]"):
        ex.curve(trace, budgets=[4], backend="ray")
    with pytest.raises(hs.HugescopeError, match="not one of local, ray"):
        ex.curve(trace, budgets=[4], backend="dask")


@pytest.mark.parametrize("address, needle", [
    ("127.0.0.1:1", "cannot reach a Ray cluster there"),  # nothing listens on port 1: refused at once
    ("nonsense", "expected HOST:PORT"),
    ("127.0.0.1:99999", "expected HOST:PORT"),
])
def test_bad_ray_address_is_a_clear_error(address, needle, trace, tmp_path, monkeypatch, capsys):
    ray = _ray_or_skip()
    # Checked before Ray starts: no instance may be left behind.
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda *a, **kw: pytest.fail("ray.init reached with a bad address"))
    assert hcli.main(["curve", trace, "-o", str(tmp_path), "--backend", "ray", "--ray-address", address] + ARGS) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert os.listdir(tmp_path) == []  # nothing written


def test_ray_address_needs_the_ray_backend(trace, tmp_path, capsys):
    assert hcli.main(["curve", trace, "-o", str(tmp_path), "--ray-address", "127.0.0.1:6379"] + ARGS) == 2
    assert "--backend ray" in capsys.readouterr().err
    with pytest.raises(hs.HugescopeError, match="ray backend only"):
        ex.curve(trace, budgets=[4], ray_address="127.0.0.1:6379")


def test_batches_fill_the_cluster_and_keep_every_configuration():
    # 11 configurations, 1 thread per task on 4 CPUs: 4 tasks of at most 3.
    b = ray_backend.batches(list(range(11)), 1, 4, 4, 12)
    assert b == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10]]
    # 2 threads per task on 2 CPUs: one slot, so the checkpoint unit (12) bounds a task.
    assert ray_backend.batches(list(range(31)), 2, 2, 2, 12) == [list(range(0, 12)), list(range(12, 24)),
                                                                  list(range(24, 31))]
    # More threads than the largest node has: a task takes the whole node (one slot on 8 CPUs), so
    # both configurations go to one task; indices are kept as given.
    assert ray_backend.batches([5, 7], 64, 8, 8, 12) == [[5, 7]]
    assert ray_backend.batches([5, 7], 64, 16, 8, 12) == [[5], [7]]


# ---------------------------------------------------------------- Parquet parts

def test_streamed_parts_equal_the_csv(trace, tmp_path, monkeypatch):
    monkeypatch.setattr(ex, "BATCH", 3)
    kept = []
    # Keep the parts a finished sweep would delete, to compare them with the CSV.
    monkeypatch.setattr(sweep_parts, "remove", lambda d: kept.append(d))
    assert hcli.main(["--results-format", "csv,parquet", "curve", trace, "-o", str(tmp_path)] + ARGS) == 0
    parts = tmp_path / "curve-bfs.parts"
    assert kept == [str(parts)]
    names = sorted(os.listdir(parts))
    assert names == ["manifest.json"] + [f"part-{i:05d}.parquet" for i in range(4)]  # 11 configurations in 3s
    table = sweep_parts.read_parts(str(parts))
    assert table.to_csv(index=False).encode() == (tmp_path / "curve-bfs.csv").read_bytes()
    import pandas as pd

    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "curve-bfs.parquet"),
                                  pd.read_csv(tmp_path / "curve-bfs.csv"))


def test_parts_resume_and_refuse_what_they_cannot_trust(trace, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ex, "BATCH", 2)
    whole, part = tmp_path / "whole", tmp_path / "part"
    top = ["--results-format", "csv,parquet"]
    assert hcli.main(top + ["curve", trace, "-o", str(whole)] + ARGS) == 0
    with monkeypatch.context() as m:
        _interrupt_after(m, 2)
        assert hcli.main(top + ["curve", trace, "-o", str(part)] + ARGS) == 130
    parts = part / "curve-bfs.parts"
    err = capsys.readouterr().err
    assert str(parts) in err and "--resume" in err, err
    assert os.listdir(part) == [parts.name]  # no result file, no JSON checkpoint
    assert len(sweep_parts.read_parts(str(parts))) == 4
    # Without --resume: refused; with it but without Parquet: the parts are still found.
    assert hcli.main(top + ["curve", trace, "-o", str(part)] + ARGS) == 2
    assert "--resume" in capsys.readouterr().err
    # A killed writer's temporary is no part: ignored and deleted.
    (parts / ".part-00002.parquet.x1y2.tmp").write_bytes(b"PAR1 half a file")
    # A corrupt part under a final name is an error, never trusted.
    (parts / "part-00002.parquet").write_bytes(b"PAR1 not parquet")
    assert hcli.main(top + ["curve", trace, "-o", str(part), "--resume"] + ARGS) == 2
    assert "unreadable part" in capsys.readouterr().err
    os.unlink(parts / "part-00002.parquet")
    # Another run's fingerprint in the manifest: refused, as a checkpoint is.
    other = [a if a != "60" else "90" for a in ARGS]
    assert hcli.main(top + ["curve", trace, "-o", str(part), "--resume"] + other) == 2
    assert "different run" in capsys.readouterr().err
    calls = []
    real = hs._core.run_specs
    monkeypatch.setattr(hs._core, "run_specs", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    assert hcli.main(["curve", trace, "-o", str(part), "--resume"] + ARGS) == 0
    assert len(calls) == -(-(N_CONFIGS - 4) // 2)  # only the unfinished configurations ran
    files = _files(part)
    assert files == {k: v for k, v in _files(whole).items() if not k.endswith(".parquet")}  # parts removed


KILLABLE = """
import sys, time
import hugescope._core as core
from hugescope import cli, experiments
experiments.BATCH = 2
real, calls = core.run_specs, [0]
def run_specs(*a, **kw):
    if calls[0] == 1:
        time.sleep(3600)  # the second batch never finishes: the test kills the process here
    calls[0] += 1
    return real(*a, **kw)
core.run_specs = run_specs
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.mark.parametrize("fmt", ["csv", "csv,parquet"])
def test_killed_sweep_resumes_to_identical_files(fmt, trace, tmp_path, monkeypatch):
    whole, part = tmp_path / "whole", tmp_path / "part"
    top = ["--results-format", fmt]
    monkeypatch.setattr(ex, "BATCH", 2)
    assert hcli.main(top + ["curve", trace, "-o", str(whole)] + ARGS) == 0
    kept = part / ("curve-bfs.parts/part-00000.parquet" if "parquet" in fmt else "curve-bfs.checkpoint.json")
    proc = subprocess.Popen([sys.executable, "-c", KILLABLE] + top + ["curve", trace, "-o", str(part)] + ARGS,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        # Not a timing: a bound on waiting for the first batch, which takes well under a second.
        deadline = time.monotonic() + 300
        while not kept.exists():
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the first batch was never kept"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not (part / "curve-bfs.csv").exists()
    calls = []
    real = hs._core.run_specs
    monkeypatch.setattr(hs._core, "run_specs", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    assert hcli.main(top + ["curve", trace, "-o", str(part), "--resume"] + ARGS) == 0
    assert len(calls) == -(-(N_CONFIGS - 2) // 2)  # the first batch was not run again
    assert _files(part) == _files(whole)  # byte-identical; checkpoint or parts removed


RAY_HELD = """
import sys, time
from hugescope import cli, ray_backend
real = ray_backend._collect
def collect(ray, pending, submit, path, copies, caught):
    # A batch of no configurations that never finishes: once the real ones are
    # kept, the driver waits inside Ray's C++ wait, where the signal arrives.
    pending[ray.remote(lambda: time.sleep(3600)).remote()] = []
    yield from real(ray, pending, submit, path, copies, caught)
ray_backend._collect = collect
sys.exit(cli.main(sys.argv[1:]))
"""


def test_sigterm_stops_a_ray_sweep_as_sigterm(trace, tmp_path):
    # Ray installs its own SIGTERM handler (sys.exit) and turns a signal in
    # its wait into a bare KeyboardInterrupt; the sweep must still stop as the
    # CLI promises: exit 143, one line naming what was kept.
    _ray_or_skip()
    out = tmp_path / "o"
    proc = subprocess.Popen([sys.executable, "-c", RAY_HELD, "--results-format", "csv,parquet", "curve", trace,
                             "-o", str(out), "--backend", "ray"] + ARGS,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    parts = out / "curve-bfs.parts"
    try:
        deadline = time.monotonic() + 300  # a bound on waiting, not a timing
        while not (parts.exists() and len(sweep_parts.read_parts(str(parts))) == N_CONFIGS):
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "the sweep's batches were never all kept"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=120)[1]
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.strip().splitlines() == [f"interrupted by SIGTERM; finished points kept in {parts}; "
                                        "run the same command with --resume to continue"], err


# ---------------------------------------------------------------- Ray (local instance)

@pytest.fixture(scope="module")
def ray_local():
    ray = _ray_or_skip()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def test_ray_backend_gives_the_local_results_in_the_same_order(ray_local, trace, monkeypatch):
    # Batches of 2 over 2 CPUs: tasks finish in any order; rows must not.
    monkeypatch.setattr(ex, "BATCH", 2)
    kw = dict(policies=["linux", "pcc"], budgets=[0, 4, 100], frag_points=[50], duration=60, threads=1)
    local = ex.curve(trace, **kw)
    ray = ex.curve(trace, backend="ray", **kw)
    assert local.to_csv(index=False) == ray.to_csv(index=False)
    assert local.attrs["meta"] == ray.attrs["meta"]
    assert local["huge_share"].max() > 0  # the points differ from each other: a real comparison
    # A node that does not see the trace at the path gets it shipped once, same results, copy removed after.
    shipped = ex.curve(trace, backend="ray", ray_trace_path=os.path.join(os.path.dirname(trace), "absent.hst"),
                       **kw)
    assert shipped.to_csv(index=False) == local.to_csv(index=False)
    copy = ray_backend._copy_path(ex.trace_identity(trace))
    assert not os.path.exists(copy) and not os.path.exists(os.path.dirname(copy))


def test_ray_cli_matches_local_and_resumes_local_parts(ray_local, trace, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ex, "BATCH", 2)
    top = ["--results-format", "csv,parquet"]
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert hcli.main(top + ["curve", trace, "-o", str(whole)] + ARGS) == 0
    with monkeypatch.context() as m:
        _interrupt_after(m, 1)
        assert hcli.main(top + ["curve", trace, "-o", str(part)] + ARGS) == 130
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    assert hcli.main(top + ["curve", trace, "-o", str(part), "--resume", "--backend", "ray"] + ARGS) == 0
    assert {s: signal.getsignal(s) for s in handlers} == handlers
    assert _files(part) == _files(whole)
    assert json.loads((part / "curve-bfs.json").read_text())["rows"][0]["experiment"] == "curve"
