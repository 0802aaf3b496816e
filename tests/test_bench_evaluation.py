"""``hugescope bench --evaluation`` (``bench_evaluation``): the PCC
evaluation's stages run the project's experiments with their defaults, the
reference runs are simulated once (stage 1) and read back by every later
stage from a private results cache, and the user's cache is left alone. The
times it reports are measurements; nothing here checks a time."""

from __future__ import annotations

import json
import os

from hugescope import bench_evaluation

from conftest import run_cli


def test_the_evaluation_simulates_the_reference_runs_once_and_reads_them_back(bfs_trace, tmp_path, monkeypatch):
    user = tmp_path / "user-cache"
    monkeypatch.setenv("HUGESCOPE_CACHE_DIR", str(user))
    m = bench_evaluation.measure(bfs_trace, duration=120.0)
    assert [s["stage"] for s in m["stages"]] == ["reference runs", "budget sweep", "fragmentation", "PCC-size sweep"]
    # 2 references; curve 3 policies x 9 budgets + base, ideal + linux at
    # 2 fragmentation levels; frag 5 x 2; sensitivity 9 sizes + base, ideal.
    assert [s["configurations"] for s in m["stages"]] == [2, 31, 10, 11] and m["configurations"] == 54
    reused = [s["reused"] for s in m["stages"]]
    # Cold: nothing to read in stage 1. The curve's three batches each read
    # the base reference (the third as its requested base line) and ideal;
    # frag's batch its unfragmented reference; sensitivity base and ideal.
    assert reused == [{}, {"base": 3, "ideal": 1}, {"base": 1}, {"base": 1, "ideal": 1}], reused
    assert m["accesses"] > 0 and all(s["wall_s"] > 0 for s in m["stages"])
    # The private cache is gone and the user's was never written.
    assert os.environ["HUGESCOPE_CACHE_DIR"] == str(user) and not user.exists()


def test_bench_evaluation_cli(bfs_trace, tmp_path, capsys):
    code, _, err = run_cli("bench", "--evaluation", str(tmp_path / "none.hst"), capsys=capsys)
    assert code != 0 and "no such trace file" in err and len(err.strip().splitlines()) == 1, err
    out = tmp_path / "eval.json"
    code, _, _ = run_cli("bench", "--evaluation", bfs_trace, "--json", out, capsys=capsys)
    m = json.loads(out.read_text())
    assert code == 0 and m["kind"] == "measurement" and len(m["stages"]) == 4
