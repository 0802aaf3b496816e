"""The daemon study (`hugescope daemon-study`, issue #14's closing measurement) and
its workload `hotcold`. The plumbing is checked at small size (no timings: the
figures of a quick study mean nothing); the study itself needs root and THP
`madvise` and skips with the reason otherwise."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

import hugescope as hs
from hugescope import daemon_study, linux, trace_reader, workloads

from conftest import run_cli
from test_linux import THP, needs_root

MIB = 1 << 20
SMALL = dict(size="8MiB", hot_size="2MiB", hot_share=0.75, updates=200_000, seed=3)
needs_madvise = pytest.mark.skipif(THP.get("pmd_mode") != "madvise",
                                   reason=f"the study needs THP mode 'madvise' (it is {THP.get('pmd_mode')})")


def test_hotcold_layout_puts_cold_first_in_a_separate_mapping():
    lay = workloads.layout("hotcold", **SMALL)
    hot, cold = (next(r for r in lay["regions"] if r["name"] == n) for n in ("hot", "cold"))
    # An unmapped gap of at least 2 MiB: the kernel cannot merge the two VMAs.
    assert hot["base"] >= cold["base"] + cold["len"] + 2 * MIB
    assert [r["name"] for r in lay["regions"]] == ["cold", "hot"]
    assert (hot["len"], cold["len"]) == (2 * MIB, 8 * MIB)
    assert lay["footprint"] == 10 * MIB


def test_hotcold_trace_sends_the_hot_share_to_the_hot_table(tmp_path):
    out = tmp_path / "hc.hst"
    r = workloads.trace("hotcold", str(out), **SMALL)
    a = trace_reader.read_accesses(str(out))
    addr = np.asarray(a["addr"], dtype=np.uint64)
    lay = workloads.layout("hotcold", **SMALL)
    hot = next(x for x in lay["regions"] if x["name"] == "hot")
    in_hot = (addr >= hot["base"]) & (addr < hot["base"] + hot["len"])
    # One load and one store per update; the hot count is what the workload counted.
    assert len(addr) == 2 * SMALL["updates"]
    assert int(in_hot.sum()) == 2 * r["result"]["result"]["hot_updates"]
    assert r["result"]["result"]["hot_updates"] == pytest.approx(0.75 * SMALL["updates"], rel=0.01)
    assert np.asarray(a["write"]).sum() == SMALL["updates"]


def test_hotcold_native_matches_its_trace(tmp_path):
    traced = workloads.trace("hotcold", str(tmp_path / "hc.hst"), **SMALL)["result"]["result"]
    native = linux.run_native_here("hotcold", **SMALL)["result"]
    assert native["checksum"] == traced["checksum"] and native["hot_updates"] == traced["hot_updates"]


def test_hotcold_refuses_bad_parameters():
    for bad in (dict(hot_share=1.5), dict(hot_size=12), dict(size=0)):
        with pytest.raises(hs.HugescopeError, match="hotcold"):
            workloads.layout("hotcold", **bad)


def test_budget_is_whole_huge_pages_and_at_least_one():
    assert daemon_study.budget_bytes(1056 * MIB, 0.03) == 30 * MIB  # 31.68 MiB rounded down
    assert daemon_study.budget_bytes(10 * MIB, 0.01) == 2 * MIB
    assert daemon_study.budget_bytes(10 * MIB, None) is None  # --budget none: the daemon's default


def test_summaries_speedup_and_share_of_the_all_huge_gain():
    runs = [{"condition": c, "run_s": t} for c, ts in
            (("base", (2.0, 2.2, 1.9)), ("hawkeye", (1.5, 1.6, 1.4)), ("all", (1.0, 1.1, 0.9))) for t in ts]
    s = daemon_study._summaries(runs, "run_s", higher_better=False)
    assert s["base"]["median"] == 2.0 and (s["base"]["min"], s["base"]["max"]) == (1.9, 2.2)
    assert s["hawkeye"]["speedup"] == pytest.approx(2.0 / 1.5)
    # all-huge doubles the speed; hawkeye's 1.333x is a third of that gain.
    assert s["hawkeye"]["share_of_all_gain"] == pytest.approx((2.0 / 1.5 - 1) / (2.0 - 1))
    assert "pcc" not in s
    ops = daemon_study._summaries([{"condition": "base", "ops_s": 100.0}, {"condition": "all", "ops_s": 150.0}],
                                  "ops_s", higher_better=True)
    assert ops["all"]["speedup"] == pytest.approx(1.5) and ops["all"]["share_of_all_gain"] == pytest.approx(1.0)


def test_cli_refuses_bad_options(tmp_path, capsys):
    for args in (["--workloads", "nope"], ["--budget", "150%"], ["--repeat", "0"],
                 ["--config", str(tmp_path / "missing.toml")], ["--preset", "nosuch"]):
        try:
            code, _, err = run_cli("daemon-study", "--out", tmp_path / "o", *args, capsys=capsys)
        except SystemExit as e:  # argparse's own usage errors
            code, err = e.code, capsys.readouterr().err
        assert code == 2, args
        assert "error" in err.lower()
    assert not (tmp_path / "o" / "daemon-study.json").exists()


def _children() -> set:
    me = str(os.getpid())
    kids = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[1] == me:
                        kids.add(int(d))
            except (OSError, IndexError):
                pass
    return kids


@needs_root
@needs_madvise
def test_quick_study_runs_every_condition_and_leaves_nothing_behind(tmp_path):
    before = _children()
    thp = linux.thp_state()["enabled"]
    r = daemon_study.study(str(tmp_path), ["hotcold"], quick=True, repeat=1, redis=False, capture=False)
    w = r["workloads"]["hotcold"]
    assert [x["condition"] for x in w["runs"]] == list(daemon_study.CONDITIONS)
    runs = {x["condition"]: x for x in w["runs"]}
    fp = w["footprint"]
    assert w["budget"] == 2 * MIB  # 3% of 66 MiB, at least one huge page
    # Base pages: nothing huge (madvise mode, no advice); all huge: every byte.
    assert runs["base"]["huge_bytes_end"] == 0
    assert runs["all"]["huge_bytes_end"] == fp
    for p in daemon_study.POLICIES:
        # A quick run may end before the daemon's Python has started: then it says so.
        d = runs[p]["daemon"]
        if d is None:
            assert runs[p]["daemon_note"] == "the run ended before the daemon started watching it"
        else:
            assert d["steps"] >= 1 and d["cpu_s"] >= 0 and d["daemon_huge"] <= w["budget"]
            assert runs[p]["huge_bytes_end"] <= w["budget"]
    assert runs["base"]["daemon"] is None and runs["base"]["daemon_note"] is None
    assert set(w["simulated"]["speedup_est"]) == set(daemon_study.CONDITIONS)
    # The machine of the estimates is named (issue #38).
    assert w["simulated"]["machine"] == "preset haswell-pcc (the default)"
    assert w["simulated"]["speedup_est"]["all"] > 1.0
    # The estimate of each daemon's own choice: the regions it collapsed, per table.
    for p, c in w["simulated"]["daemon_choice"].items():
        assert sum(c["regions_by_table"].values()) * 2 * MIB <= w["budget"] and c["speedup_est"] > 0
    on_disk = json.loads((tmp_path / "daemon-study.json").read_text())
    assert on_disk["workloads"]["hotcold"]["budget"] == w["budget"]
    md = (tmp_path / "daemon-study.md").read_text()
    assert md.startswith("# Daemon study (quick") and "| hawkeye |" in md
    assert "estimates on preset haswell-pcc (the default)" in md
    # No daemon, workload or server left running; no setting changed.
    assert _children() <= before
    assert linux.thp_state()["enabled"] == thp


@needs_root
@needs_madvise
def test_quick_study_without_a_budget_counts_clear_refs(tmp_path, monkeypatch):
    # --budget none: the daemon at its default (no budget). khugepaged and ingens
    # read no access bits and never clear them. hawkeye and pcc clear once for the
    # baseline; their first snapshot ranks every region of the 64 MiB hotcold
    # (both tables are referenced in a 0.1 s interval) and the rate limit (8 a
    # second) leaves most of the 32 waiting, so no decision needs fresh bits while
    # the run lasts (about 2 s): one write, where they used to write one per step.
    # After the run the workload unmaps its tables; the ranking is gone with them,
    # and a collapse of the child's other memory (its Python heap) may start a new
    # epoch: one more write at most per such collapse. The run is long enough for
    # the daemon's start-up (about 0.5 s of Python).
    monkeypatch.setitem(daemon_study.QUICK, "hotcold",
                        dict(size="64MiB", hot_size="2MiB", hot_share=0.9, updates=150_000_000))
    r = daemon_study.study(str(tmp_path), ["hotcold"], quick=True, repeat=1, redis=False, capture=False,
                           sim=False, budget_share="none", interval=0.1, rate=8)
    w = r["workloads"]["hotcold"]
    assert w["budget"] is None and r["options"]["budget_share"] is None
    runs = {x["condition"]: x for x in w["runs"]}
    for p in daemon_study.POLICIES:
        d = runs[p]["daemon"]
        assert d is not None, runs[p]["daemon_note"]
        assert d["steps"] >= 5, d
        outside = [a for a in d["regions"] if not any(t["base"] <= a < t["base"] + t["len"] for t in w["regions"])]
        if p in ("khugepaged", "ingens"):
            assert d["clear_refs"] == 0, (p, d)
        else:
            assert 1 <= d["clear_refs"] <= 1 + len(outside), (p, d)
    md = (tmp_path / "daemon-study.md").read_text()
    assert "no budget (the daemon's default)" in md and "| clear_refs writes |" in md
    with pytest.raises(ValueError, match="or 'none'"):
        daemon_study.study(str(tmp_path / "o"), ["hotcold"], quick=True, budget_share="0%")


@needs_root
@needs_madvise
@pytest.mark.skipif(not shutil.which("redis-server") or not shutil.which("redis-benchmark"),
                    reason="redis-server/redis-benchmark not installed (the study installs them with apt-get; "
                           "this test does not install packages)")
def test_quick_redis_run_and_server_is_gone(tmp_path):
    before = _children()
    r = daemon_study.study(str(tmp_path), [], quick=True, repeat=1, capture=False, sim=False, redis_keys=20_000)
    w = r["workloads"]["redis"]
    runs = {x["condition"]: x for x in w["runs"]}
    assert all(x["ops_s"] > 0 for x in runs.values())
    assert runs["base"]["huge_bytes_end"] == 0 and runs["all"]["huge_bytes_end"] > 0
    assert runs["all"]["collapsed_before"] >= 1
    assert _children() <= before


@pytest.mark.skipif(not shutil.which("clang") or not shutil.which("valgrind"),
                    reason="the capture paths need clang ('make build' installs it as root) and valgrind")
def test_capture_costs_runs_each_path(tmp_path):
    seen = []
    c = daemon_study.capture_costs(str(tmp_path), steps=20_000, valgrind_steps=2_000, repeat=1, cpu=None,
                                   progress=seen.append)
    assert seen == [f"capture {k} 1/1" for k in ("native", "cc_trace", "native_small", "valgrind")]
    assert c["steps"] == {"cc_trace": 20_000, "valgrind": 2_000}
    for k in ("cc_trace", "valgrind"):
        assert c["slowdown"][k] > 0 and c[k]["n"] == 1
    # The traces were removed after each run; only the program and its builds remain.
    assert not (tmp_path / "capture.hst").exists()
