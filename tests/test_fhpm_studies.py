"""The FHPM studies (Table 4's monitors, Fig 8's HP policy): arguments
refused in one line, and both studies' claims on a real CI-scale run, with
their files."""
from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile

import pytest

import hugescope as hs
from hugescope import fhpm_study as fh


def test_bad_arguments_are_one_line():
    with pytest.raises(hs.HugescopeError, match="study: 'pebs' is not one of"):
        fh.check_args(["pebs"], "ci")
    with pytest.raises(hs.HugescopeError, match="scale: 'huge'"):
        fh.check_args(None, "huge")
    assert fh.check_args(["hp-policy", "monitoring", "hp-policy"], "ci") == ["hp-policy", "monitoring"]


def test_cli_refuses_an_unknown_study_before_any_work(tmp_path):
    p = subprocess.run([sys.executable, "-m", "hugescope", "fhpm", "pebs", "-o", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "study: 'pebs'" in p.stderr
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def studies():
    return fh.fhpm_studies()


def test_hp_policy_fixed_thresholds_demote_all_and_fhpm_keeps_some(studies):
    rows = {r["config"]: r for r in studies["hp-policy"].table.to_dict("records")}
    # 32 huge pages, 10 regions each (PSR 0.98): T=10 and T=256 split all.
    assert rows["T=10"]["huge_pages_left"] == 0 and rows["T=256"]["huge_pages_left"] == 0
    assert rows["huge pages only"]["huge_pages_left"] == 32
    # s_hot = s_tot = 64MB: HP = 64MB x (1 - f_use), each demotion takes
    # 0.98 x 2MB off: f_use 1.0 keeps all 32, 0.95 demotes 2, 0.85 5, 0.5 17.
    assert [rows[f"FHPM f_use={f}"]["pages_demoted"] for f in (1.0, 0.95, 0.85, 0.5)] == [0, 2, 5, 17]
    assert rows["FHPM f_use=0.85"]["hp_mb"] == pytest.approx(64 * 0.15)
    assert all(c["holds"] for c in studies["hp-policy"].checks())


def test_monitoring_huge_scan_overstates_fhpm_does_not(studies):
    rows = {r["monitor"]: r for r in studies["monitoring"].table.to_dict("records")}
    assert rows["huge scan"]["hot_mb"] > 2 * rows["base scan"]["hot_mb"] > 0
    # Table 4 (issue #35): FHPM under full monitoring finds the true hot set,
    # within 10% (the paper's 0.92x); the interval design's single stage-2
    # read gave 12x here (2.96 MB against 0.24 MB).
    assert abs(rows["FHPM"]["hot_mb"] - rows["base scan"]["hot_mb"]) <= 0.1 * rows["base scan"]["hot_mb"]
    assert "full=true" in rows["FHPM"]["policy"]
    # Every monitor accounts for the same memory (the VM's).
    totals = {round(r["total_mb"], 6) for r in rows.values()}
    assert len(totals) == 1
    checks = studies["monitoring"].checks()
    assert [c["holds"] for c in checks] == [True] * len(checks), checks


def test_monitoring_reads_one_window_of_30_rounds_and_its_hot_bin_is_the_store_table(studies):
    """Table 4 (issue #35): full monitoring is one window of 30 one-second
    rounds (§3's 30 scans of Redis), and the base scan's [60,100] holds the
    kv store's hash table and nothing else: 8192 keys at a load factor of at
    most 0.5 take 16384 slots of 16 bytes, 64 pages (0.25 MiB), each with
    about 128 keys (2.6 lookups per second: touched in 92% of rounds); seed 1
    puts 63 of them in [80,100] and one in [60,80). A value is touched at
    0.08 per second at most (0.02 per key, 80% of operations on 20% of the
    keys): in 7.7% of rounds, never 24 of 30."""
    rows = {r["monitor"]: r for r in studies["monitoring"].table.to_dict("records")}
    page = 4096 / (1 << 20)
    for r in rows.values():
        assert r["rounds"] == 30 and r["windows"] == 1
    base = rows["base scan"]
    assert base["hot_mb"] == pytest.approx(63 * page) and base["mb_[60,80)"] == pytest.approx(page)
    assert base["mb_[40,60)"] == 0
    # [20,40) is the binomial tail of the hot values: touched in 6..11 of 30
    # rounds, each with p = 1 - exp(-0.08): 2.5% of them, 0.49% of memory
    # (with 10 rounds, 2..3 of 10: 17%, 3.4%, the run before issue #35's fix).
    p = 1 - math.exp(-0.08)
    tail = sum(math.comb(30, k) * p ** k * (1 - p) ** (30 - k) for k in range(6, 12))
    assert base["mb_[20,40)"] / base["total_mb"] == pytest.approx(0.2 * tail, rel=0.3)


def test_split_collapse_reads_and_writes_apart_one_window():
    """Table 6's two columns at paper scale's settings, on 16 MiB: every
    huge page split once at 8 s (after the first pass populated the working
    set) and collapsed at 18 s; Linux's exits are one per 4KB touched after
    the split plus one per 2MB after the collapse, the VM-friendly's none."""
    cfg = {"wss_mib": [16], "passes": 10, "duration": 20.5, "start_s": 8, "period_s": 60, "access": ["read", "write"]}
    steps: list = []
    with tempfile.TemporaryDirectory() as d:
        rows, _ = fh.RUNNERS["split-collapse"].run(cfg, d, 1, steps.append)
    assert len(steps) == fh.RUNNERS["split-collapse"].steps(cfg) == 4
    got = {(r["access"], r["config"]): r for r in rows}
    assert sorted(got) == [("read", "Linux"), ("read", "VM-friendly"), ("write", "Linux"), ("write", "VM-friendly")]
    for access in ("read", "write"):
        lin, fr = got[(access, "Linux")], got[(access, "VM-friendly")]
        assert lin["host_splits"] == fr["host_splits"] >= 8
        assert lin["vm_exits_after_zap"] == pytest.approx(4096 + 8, abs=8)
        assert fr["vm_exits_after_zap"] == 0


def test_files(studies, tmp_path):
    paths = fh.save(studies, str(tmp_path), plots=False)
    saved = json.load(open(paths["hp-policy_json"]))
    assert saved["hugescope_experiment"] == "fhpm-hp-policy" and saved["kind"] == "estimate"
    assert (tmp_path / "fhpm-monitoring-checks.csv").exists()


def test_split_collapse_linux_exits_per_4kb_friendly_none(studies):
    rows = studies["split-collapse"].table.to_dict("records")
    lin = {r["wss_mib"]: r for r in rows if r["config"] == "Linux"}
    fr = {r["wss_mib"]: r for r in rows if r["config"] == "VM-friendly"}
    assert sorted(lin) == sorted(fr) == [16, 32, 64]
    for w in lin:
        # One exit per 4KB touched after the split, one per 2MB after the
        # collapse (a few pages are not touched again before the collapse).
        pages = w * 256
        assert lin[w]["vm_exits_after_zap"] == pytest.approx(pages + pages / 512, rel=0.05)
        assert lin[w]["host_splits"] == fr[w]["host_splits"] >= w // 2
        assert fr[w]["vm_exits_after_zap"] == 0
    assert all(c["holds"] for c in studies["split-collapse"].checks())


def test_consumers_tmm_and_share_claims_hold(studies):
    """Issue #13's acceptance on the consumers: FHPM-TMM beats both HMM-v
    baselines when unbalanced pages are common; FHPM-Share saves several
    times what Ingens-style sharing saves at a small slowdown, and KSM saves
    most but loses most huge pages (Table 2's ordering)."""
    for name in ("tmm", "sharing"):
        checks = studies[name].checks()
        assert checks and all(c["holds"] is True for c in checks), [c for c in checks if c["holds"] is not True]
    rows = {r["config"]: r for r in studies["sharing"].table.to_dict("records")}
    assert rows["fhpm-share"]["huge_a"] > rows["ksm"]["huge_a"]
    tmm = studies["tmm"].table
    assert set(tmm["config"]) >= {"FHPM-TMM", "HMM-v-Huge", "HMM-v-Base"}


def test_reproduce_fhpm_judges_the_rows_from_the_studies(studies):
    """Issue #35: ``reproduce fhpm`` reads its rows from the FHPM studies
    (here the fixture's seed-1 run, reused): Table 4's hot bins against the
    base scan's, Table 2, Table 6 per 4KB and Fig 8's microbenchmark are
    judged; Fig 2's orderings need 3 seeds; the rest say why not."""
    from hugescope import reproduce

    r = reproduce.run("fhpm", scale="ci", seeds=[1], reuse={"fhpm": {1: studies}})
    rows = r.rows.set_index("id")
    assert len(rows) == len(reproduce.paper("fhpm")["row"])
    v = lambda i: rows.loc[i, "verdict"]  # noqa: E731
    # FHPM's hot bin is the base scan's (the paper's 0.92x); huge scan's is
    # all of memory: over 100x where the paper's Redis shows 17.7x.
    assert v("t4-fhpm-hot-vs-base") == "reproduced" and abs(rows.loc["t4-fhpm-hot-vs-base", "value"] - 1) <= 0.1
    assert v("t4-split-hot-vs-base") == "reproduced"
    assert v("t4-huge-hot-vs-base") == "not reproduced" and rows.loc["t4-huge-hot-vs-base", "value"] > 100
    # Hand-counted sharing (tests/test_fhpm_share.py): KSM 50%, FHPM-Share 37.5%, Ingens 12.5%.
    assert rows.loc["t2-ksm-saved", "value"] == 50.0 and v("t2-ksm-saved") == "reproduced"
    assert rows.loc["t2-fhpm-share-saved", "value"] == 37.5 and v("t2-fhpm-share-saved") == "not reproduced"
    assert rows.loc["t2-ingens-saved", "value"] == 12.5 and v("t2-ingens-saved") == "not reproduced"
    assert v("t6-linux-exits-per-4kb") == "reproduced" and rows.loc["t6-friendly-exits-per-4kb", "value"] == 0
    # Table 6's cells: Linux's need the paper's working sets (--scale paper);
    # the VM-friendly ones are background exits the model does not have.
    assert v("t6-2gb-linux-read") == "not attempted" and "--scale paper" in rows.loc["t6-2gb-linux-read", "reason"]
    assert v("t6-16gb-friendly-write") == "not attempted" and "background" in rows.loc["t6-16gb-friendly-write", "reason"]
    assert v("f8-micro-t10-demoted") == v("f8-micro-t256-demoted") == "reproduced"
    # One seed: no ordering can be called a shape.
    assert v("f2-u05-fhpm-vs-huge") == "not attempted" and "seed" in rows.loc["f2-u05-fhpm-vs-huge", "reason"]
    assert v("t5-redis-conflicts") == "not attempted" and "input" in rows.loc["t5-redis-conflicts", "reason"]
    assert "full=true" in rows.loc["t4-fhpm-80-100", "note"]
