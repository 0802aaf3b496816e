"""The `ingens` policy through the Python API and the CLI at small scale
(issue #11): the bloat claim of Table 5/10, the result fields the studies
read, its place in sweeps, and one clear error per bad knob."""

from __future__ import annotations

import pytest

import hugescope as hs
from hugescope.errors import HugescopeError
from conftest import run_cli


def test_bloat_linux_over_1_3_and_ingens_90_at_most_1_05(kv_bloat_trace):
    runs = hs.compare(kv_bloat_trace, ["base", "linux", "ingens", "ingens:threshold=0.7"], duration=10.0)
    assert all(r["warnings"] == [] for r in runs), [r["warnings"] for r in runs]
    s = {r["label"]: r.summary() for r in runs}
    assert s["base"]["bloat"] == 1.0
    assert s["linux"]["bloat"] > 1.3, s["linux"]
    assert s["ingens"]["bloat"] <= 1.05, s["ingens"]
    # Ingens promoted during the load and demoted after the deletes.
    st = runs[2]["policy_params"]["stats"]
    assert st["promotions_high"] > 0 and st["demotions"] > 0 and st["reclaimed_pages"] > 0


def test_result_fields_the_studies_read(kv_bloat_trace):
    r = hs.compare(kv_bloat_trace, ["ingens"], duration=10.0)[0].to_dict()
    pp = r["policy_params"]
    for key in ("promotions_high", "promotions_scan", "demotions", "compaction_rounds", "tracking_passes",
                "abit_clears", "tracking_seconds", "promote_seconds", "compaction_seconds"):
        assert key in pp["stats"], key
    assert pp["stats"]["tracking_passes"] == 5  # every 2 s over 10 s
    assert pp["derived"]["promote_at_pages"] == 461
    assert [p["pid"] for p in pp["processes"]] == [0] and "cv" in pp["fairness"]
    assert r["os_stats"]["fault_seconds"] > 0
    last = r["timeline"][-1]
    assert last["base_rss_bytes"][0] == r["processes"][0]["base_rss_bytes"]


def test_ingens_under_a_budget_and_in_a_curve(bfs_trace, tmp_path):
    r = hs.compare(bfs_trace, ["ingens"], budget="10%", duration=30.0)[0].to_dict()
    assert r["warnings"] == []
    assert r["huge_bytes_peak"] <= r["budget_bytes"]
    code, out, err = run_cli("curve", bfs_trace, "--policies", "ingens", "--budgets", "0,100", "--frag-points", "",
                             "--duration", "30", "-o", str(tmp_path), "--no-plots")
    assert code == 0, err
    import pandas as pd
    df = pd.read_csv(tmp_path / "curve-bfs.csv")
    ing = df[df["policy"] == "ingens"].set_index("budget_pct")["huge_share"]
    assert ing[0.0] == 0.0 and ing[100.0] > 0.5


@pytest.mark.parametrize("spec, needle", [
    ("ingens:threshold=1.5", "threshold=1.5"),
    ("ingens:shares=1/x", "shares=1/x"),
    ("ingens:demote=later", "demote"),
    ("ingens:track_period_s=0", "track_period_s"),
    ("ingens:bogus=1", "bogus"),
])
def test_bad_knobs_give_one_clear_error(kv_bloat_trace, spec, needle):
    with pytest.raises(HugescopeError, match=needle):
        hs.compare(kv_bloat_trace, [spec])
