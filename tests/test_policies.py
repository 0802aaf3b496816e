"""The OS model and the Linux baseline on real workload traces, at small
scale (issue: OS model, acceptance list)."""

from __future__ import annotations

import json

import hugescope as hs
from conftest import load, run_cli


def _walks(results):
    for r in results:
        assert r["warnings"] == [], r["warnings"]
    return {r["label"]: r.summary()["walks"] for r in results}


def test_ideal_fewest_walks_and_linux_close_with_free_memory(bfs_trace):
    res = hs.compare(bfs_trace, ["base", "ideal", "linux"])
    w = _walks(res)
    assert w["ideal"] <= w["linux"] < w["base"]
    assert w["ideal"] == min(w.values())
    # Enough free memory: Linux maps huge pages at fault time like ideal.
    assert w["linux"] <= 1.05 * w["ideal"] + 10


def test_linux_under_90pct_unmovable_fragmentation_is_close_to_base(bfs_trace):
    base = hs.compare(bfs_trace, ["base"])[0].summary()
    # Memory = footprint + 30% (the PCC setup leaves the footprint plus a
    # margin free), then one unmovable page in 90% of the 2MB blocks.
    fp = sum(r["len"] for r in hs.trace_info(bfs_trace)["header"]["regions"])
    mem = (int(fp * 1.3) // (2 << 20) + 1) * (2 << 20)
    frag = hs.compare(bfs_trace, ["linux:defrag=always"], frag=0.9, memory=mem)[0].summary()
    # PCC paper Fig. 1 shape: fragmented THP falls back to base pages.
    assert frag["fault_fallbacks"] > 0
    assert frag["huge_share"] < 0.25
    assert frag["walks"] > 0.6 * base["walks"]


def test_madvise_without_advice_equals_base(bfs_trace):
    res = hs.compare(bfs_trace, ["base", "linux:enabled=madvise"])
    a, b = (r.to_dict()["translation"] for r in res)
    assert a == b
    assert res[1].summary()["huge_bytes"] == 0


def test_kv_bloat_shape_of_ingens_table5(kv_bloat_trace):
    runs = hs.compare(kv_bloat_trace, ["linux", "base", "hawkeye:scan_pages=0", "pcc"], duration=10.0)
    assert all(r["warnings"] == [] for r in runs), [r["warnings"] for r in runs]
    res = {r["label"]: r.summary() for r in runs}
    assert res["linux"]["bloat"] > 1.3, res["linux"]
    assert res["base"]["bloat"] == 1.0


def test_budget_is_never_exceeded(bfs_trace):
    for pol in ("ideal", "linux"):
        r = hs.compare(bfs_trace, [pol], budget="10%")[0].to_dict()
        assert r["huge_bytes_peak"] <= r["budget_bytes"]
        assert r["os_stats"]["fault_failures"]["budget"] > 0
        for smp in r["timeline"]:
            assert sum(smp["huge_bytes"]) <= r["budget_bytes"]


def test_khugepaged_scan_speed_in_virtual_time(bfs_trace):
    # Fault-time huge pages off (enabled=always would map them at fault):
    # defrag=never under Ingens-style movable fragmentation makes faults fall
    # back, then khugepaged collapses at most 8 ranges per 10 s pass.
    r = hs.compare(bfs_trace, ["linux:defrag=never"], frag=0.95, frag_method="ingens", duration=100.0)[0].to_dict()
    promos = r["os_stats"]["promotions"]
    passes = int(r["virtual_seconds"] // 10) + 1
    assert 0 < promos <= 8 * passes
    kh = r["policy_params"]["khugepaged"]["stats"]
    assert kh["collapsed"] == promos


def test_emitted_plan_replays_to_the_same_walks(bfs_trace, tmp_path):
    plan = tmp_path / "ideal-plan.json"
    out = tmp_path / "ideal.json"
    assert run_cli("simulate", bfs_trace, "--policy", "ideal", "--emit-plan", plan, "--json", out, "-q")[0] == 0
    entries = load(plan)["entries"]
    assert entries and all(e["page_size"] == 2 << 20 for e in entries)
    replay = hs.compare(bfs_trace, [f"static:plan={plan}"])[0].summary()
    assert replay["walks"] == load(out)["translation"]["walks"]


def test_multi_process_accounting_per_pid(tmp_path):
    # Two traces merged into two processes: one address space each, accounted
    # separately, each with its own footprint.
    from hugescope import experiments

    a, b, ab = tmp_path / "a.hst", tmp_path / "b.hst", tmp_path / "ab.hst"
    hs.workloads.trace("stream", str(a), size="8MiB", seed=1)
    hs.workloads.trace("gups", str(b), size="16MiB", updates=20_000, seed=2)
    experiments.merge([str(a), str(b)], str(ab))
    r = hs.compare(str(ab), ["linux", "base"])
    procs = r[0]["processes"]
    assert [q["pid"] for q in procs] == [0, 1]
    fp = {q["pid"]: q["footprint_bytes"] for q in procs}
    assert fp[1] == 16 << 20 and fp[0] == 3 * (8 << 20)  # stream: arrays a, b, c
    assert all(q["huge_bytes"] > 0 for q in procs)
    assert all(q["huge_bytes"] == 0 and q["bloat"] == 1.0 for q in r[1]["processes"])
