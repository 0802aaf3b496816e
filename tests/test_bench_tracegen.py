"""The trace-generation rows of `hugescope bench`: one row per workload with
the generator alone and the end-to-end run over the same accesses, ratios
that are what they say, the bfs case sized like the GUPS one, and no trace
file left behind. Small sizes: these check the rows, not speed."""

import json

import pytest

from hugescope import _core, bench_tracegen, workloads


def test_bfs_scale_tracks_the_access_count():
    # 14.6 accesses per vertex: 2^20 vertices for about 15.3M accesses.
    assert bench_tracegen.bfs_scale(15_300_000) == 20
    assert bench_tracegen.bfs_scale(2_000) == 8  # clamped below
    assert bench_tracegen.bfs_scale(10**12) == 24  # clamped above
    assert bench_tracegen.cases("4MiB", 20_001) == [("gups", {"size": "4MiB", "updates": 10_000}),
                                                    ("bfs", {"scale": 10})]


def test_rows_measure_the_same_accesses_both_ways(tmp_path):
    rows = bench_tracegen.rows("4MiB", 20_000, 2, str(tmp_path))
    assert [r["workload"] for r in rows] == ["gups", "bfs"]
    gups, bfs = rows
    assert gups["generator"]["accesses"] == gups["end_to_end"]["accesses"] == 20_000
    # The bfs run's access count is that of its trace file.
    t = workloads.trace("bfs", str(tmp_path / "b.hst"), scale=10)
    assert bfs["generator"]["accesses"] == bfs["end_to_end"]["accesses"] == t["summary"]["accesses"]
    (tmp_path / "b.hst").unlink()
    for r in rows:
        g, e = r["generator"], r["end_to_end"]
        assert r["ratio"] == pytest.approx(e["accesses_per_second"] / g["accesses_per_second"])
        assert r["median_ratio"] == pytest.approx(e["median_accesses_per_second"] / g["median_accesses_per_second"])
        assert g["seconds"] <= g["median_seconds"] and e["seconds"] <= e["median_seconds"]
        assert 0 <= r["setup_seconds"] <= max(g["median_seconds"], g["seconds"])
        assert r["kind"] == "measurement" and "wall time" in r["how"] and r["repeats"] == 2
        assert r["file_bytes"] > 20 and not r["sequential"]
    assert list(tmp_path.iterdir()) == []  # the trace files are deleted


def test_bad_workload_is_one_clear_error(tmp_path):
    with pytest.raises(_core.HugescopeError, match="nosuch"):
        _core.bench_tracegen("nosuch", json.dumps({}), 1, str(tmp_path))
    assert list(tmp_path.iterdir()) == []
