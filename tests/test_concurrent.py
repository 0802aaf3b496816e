"""Concurrent processes scheduled by their own virtual time (``hugescope
simulate A B C --policy ...``, ``hugescope.simulate([a, b, c], ...)``): the
Ingens fairness setting (OSDI'16 §4, Fig. 5), where a process that gets huge
pages runs ahead of the others and finishes first."""

from __future__ import annotations

import math
import os

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import hugescope as hs
from hugescope import _core

from conftest import load, run_cli


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    d = tmp_path_factory.mktemp("concurrent")
    t = str(d / "g.hst")
    hs.workloads.trace("gups", t, size="16MiB", updates=60_000, seed=5)
    return t


def _one_error_line(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    assert "Traceback" not in err and "panicked" not in err
    return lines[0]


def test_identical_processes_under_fragmentation_finish_apart(small, tmp_path, capsys):
    # Three copies of one workload; 90% of 2MB blocks fragmented. Linux gives
    # the few free huge frames to the process that faults first, which then
    # runs faster on its own (cycle) time; base pages keep them together.
    out = tmp_path / "c.json"
    code, stdout, err = run_cli("simulate", small, small, small, "--policy", "linux", "--policy", "base",
                                "--frag", "0.9", "--json", out, capsys=capsys)
    assert code == 0, err
    assert "finish (s)" in stdout and "huge MB" in stdout
    linux, base = load(out)
    assert linux["time_base"]["kind"] == "cycles"  # the default of concurrent runs
    assert [p["pid"] for p in linux["processes"]] == [0, 1, 2]
    f = [p["finish_seconds"] for p in linux["processes"]]
    b = [p["finish_seconds"] for p in base["processes"]]
    assert all(p["accesses"] * 3 == linux["translation"]["accesses"] for p in linux["processes"])
    assert b[0] == b[1] == b[2]
    huge = [p["huge_bytes"] for p in linux["processes"]]
    assert huge[0] > 0 and huge[0] == max(huge)
    # The process with the huge pages is the fastest one, and faster than
    # under base pages; the run spans until the last process finishes.
    assert f[0] == min(f) < b[0]
    assert linux["virtual_seconds"] == max(f)


def test_api_lists_and_processes_frame(small, gups_trace):
    r = hs.simulate([small, gups_trace], policy="ideal")
    df = r.processes()
    assert list(df.columns) == ["pid", "name", "finish_seconds", "accesses", "huge_bytes", "rss_bytes",
                                "base_rss_bytes", "bloat"]
    assert list(df["pid"]) == [0, 1]
    info = [hs.trace_info(p)["summary"]["accesses"] for p in (small, gups_trace)]
    assert list(df["accesses"]) == info
    assert r["virtual_seconds"] == df["finish_seconds"].max()
    rs = hs.compare([small, small], ["linux", "ideal"], quantum_ms=0.5, duration=5)
    assert [x["label"] for x in rs] == ["linux", "ideal"]
    # Under an access rate a process's time moves with its accesses and its
    # own OS costs only: --duration gives the longest input the duration.
    assert rs[1]["time_base"]["kind"] == "access_rate"
    assert all(0 < p["finish_seconds"] < 5.1 for p in rs[1]["processes"])
    # A single-trace run has the frame too (no finish time).
    one = hs.simulate(small, policy="base").processes()
    assert len(one) == 1 and math.isnan(one["finish_seconds"][0]) and one["accesses"].isna().all()


def test_one_trace_in_a_list_is_the_single_trace_run(small):
    a = hs.compare([small], ["linux", "pcc"], duration=30)
    b = hs.compare(small, ["linux", "pcc"], duration=30)
    assert [x.to_json() for x in a] == [x.to_json() for x in b]
    assert "finish_seconds" not in a[0].to_json()


def test_deterministic(small, gups_trace, tmp_path):
    outs = []
    for i in range(2):
        out = tmp_path / f"r{i}.json"
        assert run_cli("simulate", small, gups_trace, "--policy", "linux", "--frag", "0.5", "--quantum-ms", "0.25",
                       "--json", out, "-q")[0] == 0
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]


@pytest.mark.parametrize("argv,needle", [
    (["--policy", "base", "--quantum-ms", "0"], "--quantum-ms: '0' is out of range"),
    (["--policy", "base", "--quantum-ms", "-1"], "--quantum-ms: '-1' is out of range"),
    (["--policy", "base", "--quantum-ms", "nan"], "--quantum-ms: 'nan' is not a finite number"),
    (["--policy", "base", "--quantum-ms", "soon"], "--quantum-ms: 'soon' is not a number"),
    ([], "which runs only with a policy"),
])
def test_bad_options_one_error_line(small, argv, needle, capsys):
    code, _, err = run_cli("simulate", small, small, *argv, capsys=capsys)
    assert code == 2
    assert needle in _one_error_line(err)


def test_bad_inputs(small, tmp_path, capsys):
    missing = tmp_path / "nope.hst"
    code, _, err = run_cli("simulate", small, missing, "--policy", "base", capsys=capsys)
    assert code == 2 and "nope.hst" in _one_error_line(err)
    # A trace given as the output: refused before any work, the trace intact.
    before = os.path.getsize(small)
    code, _, err = run_cli("simulate", small, small, "--policy", "base", "--json", small, capsys=capsys)
    assert code == 2 and _one_error_line(err)
    assert os.path.getsize(small) == before and hs.trace_info(small)["summary"]["accesses"] > 0
    # The quantum schedules concurrent processes only.
    code, _, err = run_cli("simulate", small, "--policy", "base", "--quantum-ms", "2", capsys=capsys)
    assert code == 2 and "--quantum-ms" in _one_error_line(err)
    with pytest.raises(hs.HugescopeError, match="quantum_ms"):
        hs.compare([small, small], ["base"], quantum_ms=0)
    with pytest.raises(hs.HugescopeError, match="policy"):
        hs.simulate([small, small])
    with pytest.raises(hs.HugescopeError, match="empty"):
        hs.compare([], ["base"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr),
                 st.text(max_size=8), st.sampled_from(["1e-3", "1000", "1e3", "0.0009", "1000.5", "-0", "1_0"])))
def test_quantum_argument_vectors(small, tmp_path, capsys, value):
    # argparse itself drops a lone "--" given as an option's value.
    assume(value != "--")
    # The output names a missing directory: a valid quantum gets past the
    # option check and fails on the output (before any work); an invalid one
    # fails on --quantum-ms. Either way exactly one error line, exit 2.
    lo, hi = _core.QUANTUM_MS_RANGE
    code, _, err = run_cli("simulate", small, small, "--policy", "base", f"--quantum-ms={value}",
                           "--json", tmp_path / "no" / "dir" / "o.json", capsys=capsys)
    assert code == 2
    line = _one_error_line(err)
    try:
        x = float(value)
        valid = math.isfinite(x) and lo <= x <= hi
    except ValueError:
        valid = False
    assert ("--quantum-ms" in line) != valid, (value, line)


def test_interrupt_stops_a_concurrent_run(small, tmp_path):
    # Cancellation is polled per chunk of each process's reader, as in a
    # single-trace run (docs/python-api.md, "Interruption").
    from test_interrupt_api import MANY, Boom, alarm, assert_stopped

    big = str(tmp_path / "big.hst")
    hs.workloads.trace("gups", big, size="64MiB", updates=1_000_000, seed=5)
    with alarm(0.3) as fired:
        with pytest.raises(Boom) as e:
            hs.compare([big, big, big], MANY, duration=600)
    assert_stopped(fired, e)
    assert hs.compare([small, small], ["base"])[0]["translation"]["accesses"] > 0
