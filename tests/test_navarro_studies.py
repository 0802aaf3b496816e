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
    assert [c["holds"] for c in r.checks()] == [True]
    paths = nav.save(r, str(tmp_path), plots=False)
    saved = json.load(open(paths["writeback_json"]))
    assert saved["hugescope_experiment"] == "navarro-writeback" and saved["kind"] == "estimate"
