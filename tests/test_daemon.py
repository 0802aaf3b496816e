"""The userspace huge-page daemon (issue #14, section 3) on the live kernel.

A target with a known hot region (hugescope-memhold: an 8 MiB cold mapping touched
once, and a separate 2 MiB mapping a thread keeps reading) must get exactly the hot
region collapsed within a bounded time under a budget of one region, its output
(a checksum over both mappings) unchanged, and every kernel setting as it was.
These need root and MADV_COLLAPSE and skip with the reason otherwise.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings, strategies as st

from hugescope import daemon, linux
from test_linux import NO_THP, THP, memhold, needs_root, needs_thp

MIB = 1 << 20
COLD, HOT = 0x7e60_0000_0000, 0x7e70_0000_0000
COLD_SIZE, HOT_SIZE = 8 * MIB, 2 * MIB
needs_madvise = pytest.mark.skipif(THP.get("pmd_mode") != "madvise",
                                   reason=f"the daemon test needs THP mode 'madvise' (it is {THP.get('pmd_mode')})")
THP_FILES = ["/sys/kernel/mm/transparent_hugepage/enabled", "/sys/kernel/mm/transparent_hugepage/defrag"] + [
    os.path.join("/sys/kernel/mm/transparent_hugepage/khugepaged", f)
    for f in ("max_ptes_none", "pages_to_scan", "scan_sleep_millisecs", "defrag")]


def _expected_checksum() -> int:
    # memhold writes (page index mod 256) | 1 into the first byte of each page.
    return sum((i % 256) | 1 for i in range(COLD_SIZE // 4096)) + sum((i % 256) | 1 for i in range(HOT_SIZE // 4096))


def _settings() -> dict:
    return {f: open(f).read() for f in THP_FILES if os.path.exists(f)}


def _target(exit_after=None):
    args = [memhold(), "--addr", hex(COLD), "--size", str(COLD_SIZE), "--hot-addr", hex(HOT), "--hot-size", str(HOT_SIZE)]
    if exit_after is not None:
        args += ["--exit-after", str(exit_after)]
    p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def _daemon_cli(*args, env=None, **kw):
    return subprocess.Popen([sys.executable, "-m", "hugescope", "daemon", *map(str, args)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _run_on_target(out, *args) -> dict:
    """Run the daemon with ``args`` on a fresh target until it ends; its
    ``--json`` record (written to ``out``)."""
    p = _target()
    try:
        d = _daemon_cli(*args, "--pid", p.pid, "--json", out)
        _, stderr = d.communicate(timeout=60)
        assert d.returncode == 0, stderr
    finally:
        p.stdin.close()
        p.wait(timeout=10)
    return json.loads(out.read_text())


def _huge_by_vma(pid: int) -> dict:
    return {v["start"]: v["anon_huge_bytes"] for v in linux.coverage(pid)["vmas"] if v["start"] in (COLD, HOT)}


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    d = tmp_path / "state"
    monkeypatch.setenv("HUGESCOPE_STATE_DIR", str(d))
    return d


@needs_thp
@needs_root
@needs_madvise
@pytest.mark.parametrize("policy", ["hawkeye", "pcc"])
def test_hot_region_collapsed_exactly_under_one_region_budget(policy, tmp_path, state_dir):
    before = _settings()
    p = _target()
    out = tmp_path / "d.json"
    try:
        d = _daemon_cli("--policy", policy, "--pid", p.pid, "--budget", "2MiB", "--interval", "0.2",
                        "--duration", "2.5", "--json", out, env=dict(os.environ))
        stdout, stderr = d.communicate(timeout=60)
        assert d.returncode == 0, stderr
        huge = _huge_by_vma(p.pid)
    finally:
        p.stdin.write("\n")
        p.stdin.close()
        tail = p.stdout.read()
        p.wait(timeout=10)
    r = json.loads(out.read_text())
    collapsed = [x for x in r["decisions"] if x["outcome"] == "collapsed"]
    assert [x["start"] for x in collapsed] == [HOT], r["decisions"]
    # Bounded time: the first step only sets the access baseline, the second decides.
    assert collapsed[0]["t_s"] < 2.0
    assert r["final"]["processes"][0]["charged_regions"] == [HOT]
    assert huge == {COLD: 0, HOT: HOT_SIZE}, "smaps: exactly the hot region is huge"
    assert tail.strip() == f"checksum {_expected_checksum()}", "the target's data is unchanged"
    assert _settings() == before
    assert not (state_dir / "state.json").exists()
    assert r["cpu_s"] >= 0 and "collapsed 1" in stdout
    # clear_refs (what the target pays for most): the baseline clear at step 0, at
    # most one more per snapshot that collapsed nothing before the collapse, none
    # after it (the budget is spent: no decision needs fresh bits). Collapsed at
    # step 1 or 2 (the common case): exactly one write, in 10 or more steps that used
    # to write one each.
    first = collapsed[0]["step"]
    assert r["steps"] >= 10
    assert 1 <= r["final"]["clear_refs_total"] <= math.floor(math.log2(first + 1)), (first, r["final"])
    assert f"clear_refs writes {r['final']['clear_refs_total']}" in stdout


@needs_thp
@needs_root
@needs_madvise
@pytest.mark.parametrize("policy", ["hawkeye", "pcc", "ingens"])
def test_clear_refs_writes_are_bounded_without_a_budget(policy, tmp_path, state_dir):
    # No budget, 0.1 s interval, 3 s: about 30 steps. The cold mapping is touched
    # only before the baseline, so after the hot region's collapse no snapshot
    # changes a decision and the clears back off (docs/daemon.md): a stretch of L
    # steps without a collapse clears at its steps 0, 2, 6, 14, 30 (2^k - 2), at most
    # floor(log2(L + 1)) times, and each step with a collapse starts a new stretch.
    # The daemon used to write clear_refs at every step of hawkeye and pcc; ingens
    # reads no access bits and never writes it.
    r = _run_on_target(tmp_path / "c.json", "--policy", policy, "--interval", "0.1", "--duration", "3")
    steps, clears = r["steps"], r["final"]["clear_refs_total"]
    collapse_steps = {x["step"] for x in r["decisions"] if x["outcome"] == "collapsed"}
    assert steps >= 20, r["steps"]
    if policy == "ingens":
        assert clears == 0
        return
    assert HOT in {x["start"] for x in r["decisions"] if x["outcome"] == "collapsed"}
    bound = (len(collapse_steps) + 1) * math.floor(math.log2(steps + 1))
    assert 1 <= clears <= bound, (clears, bound, sorted(collapse_steps))
    assert clears <= steps // 3, "a third of the steps at most; it was every step"
    assert r["final"]["processes"][0]["clear_gap_steps"] >= 8, "backed off by the end"


@needs_thp
@needs_root
@needs_madvise
def test_khugepaged_baseline_ignores_access(tmp_path, state_dir):
    # The ported khugepaged collapses in address order, so with one region of
    # budget it takes the lowest (cold) region: the access signal is what the
    # other policies add.
    r = _run_on_target(tmp_path / "k.json", "--policy", "khugepaged", "--budget", "2MiB", "--interval", "0.2",
                       "--duration", "1")
    assert [x["start"] for x in r["decisions"] if x["outcome"] == "collapsed"] == [COLD]


@needs_thp
@needs_root
@needs_madvise
def test_daemon_ends_when_target_exits(state_dir):
    p = _target(exit_after=1)
    d = _daemon_cli("--policy", "ingens", "--pid", p.pid, "--interval", "0.1")
    p.wait(timeout=10)
    stdout, stderr = d.communicate(timeout=20)
    assert d.returncode == 0, stderr
    assert "exited" in stdout


@needs_thp
@needs_root
@needs_madvise
def test_sigterm_stops_daemon_and_leaves_target_alone(state_dir):
    before = _settings()
    p = _target()
    try:
        d = _daemon_cli("--policy", "pcc", "--pid", p.pid, "--interval", "0.1")
        time.sleep(1.5)
        d.send_signal(signal.SIGTERM)
        _, stderr = d.communicate(timeout=10)
        assert d.returncode == 128 + signal.SIGTERM, stderr
        assert p.poll() is None, "the target was never signalled"
    finally:
        p.stdin.write("\n")
        p.stdin.close()
        tail = p.stdout.read()
        p.wait(timeout=10)
    assert tail.strip() == f"checksum {_expected_checksum()}"
    assert _settings() == before


@pytest.mark.parametrize("args,needle", [
    (["--policy", "hawkeye", "--pid", "4194000"], "--pid"),
    (["--policy", "hawkeye", "--pid", "1", "--budget", "1MiB"], "--budget"),
    (["--policy", "hawkeye", "--pid", "1", "--rate", "0"], "--rate"),
    (["--policy", "hawkeye", "--pid", "1", "--rate", "nan"], "--rate"),
    (["--policy", "hawkeye", "--pid", "1", "--interval", "inf"], "--interval"),
    (["--policy", "hawkeye", "--pid", "1", "--utilization", "1.5"], "--utilization"),
    (["--policy", "hawkeye"], "--pid"),
    (["--policy", "hawkeye", "--cgroup", "/nonexistent"], "--cgroup"),
    (["--policy", "nope", "--pid", "1"], "--policy"),
])
def test_bad_input_is_one_error_line(args, needle):
    d = _daemon_cli(*args)
    _, stderr = d.communicate(timeout=30)
    lines = [x for x in stderr.splitlines() if x.strip()]
    assert d.returncode == 2, stderr
    assert any(needle in x for x in lines) and "Traceback" not in stderr, stderr
    assert len([x for x in lines if x.startswith("error") or "error:" in x]) == 1, stderr


@settings(max_examples=60, deadline=None)
@given(policy=st.one_of(st.sampled_from(daemon.POLICIES), st.text(max_size=8)),
       pids=st.lists(st.one_of(st.integers(-5, 1 << 23), st.booleans(), st.text(max_size=3)), max_size=3),
       budget=st.one_of(st.none(), st.integers(-1, 1 << 40), st.text(max_size=6)),
       rate=st.one_of(st.floats(allow_nan=True), st.integers(-3, 10), st.text(max_size=3)),
       utilization=st.one_of(st.floats(allow_nan=True), st.text(max_size=3)))
def test_config_accepts_or_names_the_field(policy, pids, budget, rate, utilization):
    try:
        c = daemon.config(policy, pids, None, budget, None, rate, utilization)
    except ValueError as e:
        assert str(e).split(":")[0] in ("--policy", "--pid", "--budget", "--rate", "--utilization",
                                        "--rate/--utilization", "daemon"), str(e)
        return
    assert c["policy"] in daemon.POLICIES and c["pids"] and 0 < c["rate"] and 0 < c["utilization"] <= 1
    assert c["budget_total"] is None or c["budget_total"] >= 2 * MIB
