"""The Navarro studies (OSDI'02 Tables 1-3, §6.5, §6.7, and mTHP today):
arguments refused in one line, and the write-back study's claim on a real
run, with its files."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

import hugescope as hs
from hugescope import navarro_study as nav


def test_bad_arguments_are_one_line():
    with pytest.raises(hs.HugescopeError, match="study: 'tlb' is not one of"):
        nav.check_args(["tlb"], "ci")
    with pytest.raises(hs.HugescopeError, match="scale: 'huge'"):
        nav.check_args(None, "huge")
    with pytest.raises(hs.HugescopeError, match="study: empty list"):
        nav.check_args([], "ci")
    assert nav.check_args(["mthp", "sizes", "mthp"], "ci") == ["mthp", "sizes"]


def test_cli_refuses_an_unknown_study_before_any_work(tmp_path):
    p = subprocess.run([sys.executable, "-m", "hugescope", "navarro", "tlb", "-o", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "study: 'tlb'" in p.stderr
    assert not (tmp_path / "out").exists()


def test_writeback_study_shows_the_dirty_superpage_pathology(tmp_path):
    # §6.7: without demote-on-write every dirty 4MB superpage is written back
    # whole: a 100MB file with every 512th 8KB page written writes back
    # 25 x 4MB = 100 MiB; with the trap only the 25 written 8KB pages.
    r = nav.navarro_studies(["writeback"])
    rows = {x["config"]: x for x in r["writeback"].table.to_dict("records")}
    assert rows["no demote on write"]["writeback_bytes"] == 100 << 20
    assert rows["demote on write"]["writeback_bytes"] == 25 * 8192
    assert rows["demote on write"]["wp_traps"] == 25
    # Bytes and time: the flush waits os.writeback_us (5 ms) per 8KB page.
    assert rows["no demote on write"]["writeback_seconds"] == pytest.approx(12800 * 5e-3)
    assert [c["holds"] for c in r.checks()] == [True, True]
    paths = nav.save(r, str(tmp_path), plots=False)
    saved = json.load(open(paths["writeback_json"]))
    assert saved["hugescope_experiment"] == "navarro-writeback" and saved["kind"] == "estimate"


def test_preemption_study_preempts_one_reservation_every_seven_allocations():
    # §6.6 by hand: memory is one 4MB extent of 512 8KB frames; 64 touches
    # 4MB apart each want a 4MB reservation. Touch 1 gets the extent; touch 2
    # preempts it (7 empty 512KB children freed, one taken), touches 3-8 take
    # the other six; touch 9 preempts the oldest 512KB reservation (7 empty
    # 64KB children), and so every 7 touches: touches 2, 9, 16, ..., 58 are
    # the 9 preemptions; every touch after the first fails its 4MB preference.
    r = nav.navarro_studies(["preemption"])
    rows = {x["config"]: x for x in r["preemption"].table.to_dict("records")}
    n = rows["navarro"]
    assert (n["faults_base"], n["preemptions"], n["reservations"], n["preferred_failures"]) == (64, 9, 64, 63)
    assert rows["base pages"]["preemptions"] == 0
    assert [c["holds"] for c in r.checks()] == [True]


def test_writeback_penalty_is_the_models_disk_cost_per_page_written(tmp_path):
    # §6.7's time penalty: the flush waits os.writeback_us per base page it
    # writes. Without the trap 12800 8KB pages are written (100 MiB), with it
    # 25: the runs differ by (12800 - 25) pages x the cost, less the 25
    # traps and demotions the trap costs (microseconds), at any disk cost.
    from hugescope import api, workloads

    trace = str(tmp_path / "dirty.hst")
    workloads.trace("dirtyfile", trace, size="100MiB")
    extra = {}
    for us in (5000.0, 1000.0):
        wp, nowp = api.compare(trace, ["navarro", "navarro:wp=false"], preset="alpha-21264", with_base=False,
                               set=[f"os.writeback_us={us}"], os_costs=["shootdown_us=0.5"])
        a, b = wp.to_dict(), nowp.to_dict()
        assert (a["os_stats"]["writeback_bytes"], b["os_stats"]["writeback_bytes"]) == (25 * 8192, 100 << 20)
        extra[us] = b["virtual_seconds"] - a["virtual_seconds"]
        assert extra[us] == pytest.approx((12800 - 25) * us * 1e-6, abs=1e-3)
    # Everything but the write-back cancels between the two disk costs.
    assert extra[5000.0] - extra[1000.0] == pytest.approx((12800 - 25) * 4000e-6, rel=1e-9)
