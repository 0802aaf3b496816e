"""L2 TLB size sensitivity in one pass (``hugescope tlb-sizes``,
``experiments.tlb_sizes``): each size's row is what ``simulate`` gives at
that size, the configured size is always there, and bad requests are one
clear error before any work."""

import json
import os
import subprocess
import sys

import pytest

import hugescope as hs
from hugescope import experiments as ex
from hugescope import workloads

HS = [sys.executable, "-m", "hugescope.cli"]


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    p = str(tmp_path_factory.mktemp("tlb") / "bfs.hst")
    workloads.trace("bfs", p, scale=13)
    return p


def test_each_size_is_its_own_simulation(trace, tmp_path):
    calls = []
    df = ex.tlb_sizes(trace, entries=[128, 512, 2048], progress=lambda d, t: calls.append((d, t)))
    # The configured 1024 entries (haswell-pcc's 8-way L2) are appended.
    assert list(df["entries"]) == [128, 512, 2048, 1024]
    assert list(df["ways"]) == [1, 4, 16, 8]
    assert list(df["configured"]) == [False, False, False, True]
    assert df.attrs["meta"]["options"]["sets"] == 128
    for _, row in df.iterrows():
        r = hs.simulate(trace, set=[f"l2.4k+2m.entries={row['entries']}", f"l2.4k+2m.ways={row['ways']}"]).to_dict()
        t = r["translation"]
        assert (row["l2_hits"], row["walks"], row["walk_refs"], row["pwc_hits"]) == \
            (t["l2_hits"], t["walks"], t["walk_refs"], t["pwc_hits"]), row["entries"]
        assert row["translation_cycles"] == r["cost"]["translation_cycles"]
    conf = df[df["configured"]].iloc[0]
    assert conf["speedup_vs_configured"] == 1.0
    walks = df.sort_values("entries")["walks"].tolist()
    assert walks == sorted(walks, reverse=True) and walks[0] > walks[-1]
    assert calls and calls[-1][0] == calls[-1][1] > 0


def test_cli_writes_table_and_figure_and_refuses_bad_sizes(trace, tmp_path):
    out = tmp_path / "res"
    p = subprocess.run(HS + ["tlb-sizes", trace, "--entries", "256..1024", "-o", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    data = json.loads((out / "tlb-sizes-bfs.json").read_text())
    assert [r["entries"] for r in data["rows"]] == [256, 512, 1024]
    assert data["kind"] == "estimate" and data["options"]["structure"] == "l2.4k+2m"
    assert (out / "tlb-sizes-bfs.csv").exists() and (out / "tlb-sizes-bfs.png").exists()
    for args, needle in ([["--entries", "100"], "not a multiple of the 128 sets"],
                         [["--structure", "l2.1g"], "has no L2 TLB '1g'"],
                         [["--preset", "alpha-21264", "--pages", "8k"], "has no L2 TLB to vary"],
                         [["--preset", "pcc-artifact", "--set", "l1_duplicate_fill=true"], "duplicate L1 fill"]):
        bad = tmp_path / ("bad" + str(len(needle)))
        p = subprocess.run(HS + ["tlb-sizes", trace, "-o", str(bad)] + args, capture_output=True, text=True)
        assert p.returncode == 2, p.stderr
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], p.stderr
        assert not os.path.exists(bad / "tlb-sizes-bfs.json")


def test_bench_measures_one_pass_against_separate_runs(trace):
    from hugescope import bench_sweeps

    m = bench_sweeps.measure_tlb_sizes(trace, repeat=1)
    # The default 1..16 ways (the configured 8 among them), identical to one
    # static run per size; the times are measurements, only their presence is checked.
    assert m["sizes"] == 7 and m["identical"] is True
    assert m["one_static_s"] > 0 and m["one_pass_ratio"] > 0 and m["separate_ratio"] > 0
    assert 0 < m["walks_priced"] <= m["size_walks"]
