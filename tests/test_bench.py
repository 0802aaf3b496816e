"""hugescope bench: the report's structure and its arithmetic (never its
speeds: those are measurements, not test outcomes)."""

import json
import os

import pytest

from hugescope import cli, workloads


def test_bench_rows_counts_and_ratios(tmp_path):
    out = tmp_path / "bench.json"
    assert cli.main(["bench", "--size", "4MiB", "--accesses", "3000", "--repeat", "2", "--workloads", "gups,kv",
                     "--rss-accesses", "2000", "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["kind"] == "measurement"
    assert [w["workload"] for w in r["workloads"]] == ["gups", "kv"]
    for w, g in zip(r["workloads"], r["tracegen"]):
        assert [row["what"] for row in w["rows"]] == ["pcc", "linux", "static 4k"]
        # Every row simulated exactly the accesses the trace holds (the cap).
        n = g["accesses"]
        assert n == 3000
        assert g["how"] == "wall time of one run"
        assert w["decode_only"]["accesses"] == n
        for row in w["rows"]:
            s = row["simulate"]
            assert s["accesses"] == n
            assert s["seconds"] <= s["median_seconds"]
            assert row["ratio"] == pytest.approx(s["accesses_per_second"] / w["decode_only"]["accesses_per_second"])
            assert row["median_ratio"] == pytest.approx(
                s["median_accesses_per_second"] / w["decode_only"]["median_accesses_per_second"])
    rss = r["rss"]
    assert [x["accesses"] for x in rss["runs"]] == [2000, 20000]
    small, big = rss["runs"]
    assert rss["ratio"] == pytest.approx(big["rss_kib_peak"] / small["rss_kib_peak"])
    assert all(x["rss_kib_peak"] >= x["rss_kib_after_import"] > 0 for x in rss["runs"])


def test_bench_rows_run_with_the_results_cache_off(tmp_path, monkeypatch):
    """An ``ideal`` row is a reference run the results cache keeps: the bench
    must time simulating it, so it neither reads nor stores it."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("HUGESCOPE_CACHE_DIR", str(cache))
    monkeypatch.delenv("HUGESCOPE_NO_CACHE", raising=False)
    out = tmp_path / "bench.json"
    assert cli.main(["bench", "--size", "4MiB", "--accesses", "3000", "--repeat", "2", "--workloads", "kv",
                     "--policy", "ideal", "--no-rss", "--json", str(out)]) == 0
    assert [row["what"] for row in json.loads(out.read_text())["workloads"][0]["rows"]] == ["ideal", "static 4k"]
    assert not list(cache.glob("*.entry")), "nothing stored"
    assert "HUGESCOPE_NO_CACHE" not in os.environ, "the setting ends with the command"


@pytest.mark.parametrize("argv, needle", [
    (["--workloads", "gups,nosuch"], "--workloads: 'gups,nosuch'"),
    (["--workloads", ""], "--workloads: ''"),
    (["--rss-accesses", "0"], "--rss-accesses: '0' is out of range"),
    (["--policy", "nosuch"], "unknown policy 'nosuch'"),
    (["--policy", "pcc:entries=0"], "entries"),
    (["--sweeps", "--workloads", "bfs"], "--sweeps measures on the GUPS trace"),
])
def test_bench_refuses_bad_lists(argv, needle, capsys, monkeypatch):
    # Refused before any work: tracing would trip this.
    monkeypatch.setattr(workloads, "trace", lambda *a, **k: pytest.fail("traced before refusing"))
    assert cli.main(["bench", *argv]) == 2
    assert needle in capsys.readouterr().err


def test_sweep_figures_are_the_least_cpu_time_of_their_runs(monkeypatch):
    # The clock reads 0, 5 | 10, 12 | 20, 27: runs of 5, 2 and 7 seconds.
    from hugescope import bench_sweeps

    ticks = iter([0.0, 5.0, 10.0, 12.0, 20.0, 27.0])
    monkeypatch.setattr(bench_sweeps.time, "process_time", lambda: next(ticks))
    results = iter(["a", "b", "c"])
    t, r = bench_sweeps._best(lambda: next(results), 3)
    assert (t, r) == (2.0, "c")
    # One run when asked for none.
    ticks = iter([1.0, 4.0])
    assert bench_sweeps._best(lambda: "x", 0) == (3.0, "x")
