"""FHPM's tiered-memory study (Fig 2) and the pieces under it: the tier
knobs reach the result, HMM-v-Huge against HMM-v-Base on the PSR
microbenchmark at both ends of u shows the paper's crossing, and bad
arguments are one line."""
from __future__ import annotations

import json

import pytest

import hugescope as hs
from hugescope import fhpm_tmm as tmm
from hugescope.studies import Studies

#: A scale small enough for the test suite: 64 2MB pages, 6MiB of hot data
#: (3 pages balanced, about 30 unbalanced at u=1), a fast tier of 12MiB.
TINY = {"psr": {"footprint": "128MiB", "hot": "6MiB", "accesses": "400k", "cold": 0}, "fast": "12MiB",
        "duration": 10.0, "interval": 0.5, "rounds": 2}


def test_bad_arguments_are_one_line():
    with pytest.raises(hs.HugescopeError, match="study: 'fig9' is not one of"):
        tmm.check_args(["fig9"], "ci")
    with pytest.raises(hs.HugescopeError, match="scale: 'huge'"):
        tmm.run_tmm(scale="huge")


@pytest.mark.parametrize("virt", [True, False])
def test_tmm_shows_hot_bloat_huge_best_when_balanced_base_best_when_unbalanced(monkeypatch, tmp_path, virt):
    monkeypatch.setitem(tmm.SCALES, "tiny", TINY)
    r = tmm.run_tmm(scale="tiny", us=[0.0, 1.0], fhpm=False, virt=virt)
    rows = r.table.to_dict("records")
    by = {(x["u"], x["config"]): x for x in rows}
    # The baseline normalizes itself; every run is an estimate.
    assert all(by[(u, tmm.BASELINE)]["perf_norm"] == 1.0 for u in (0.0, 1.0))
    assert all(x["kind"] == "estimate" for x in rows)
    huge0, base0 = by[(0.0, "HMM-v-Huge")], by[(0.0, "HMM-v-Base")]
    huge1, base1 = by[(1.0, "HMM-v-Huge")], by[(1.0, "HMM-v-Base")]
    # u=0: HMM-v-Huge keeps 2MB TLB reach and all hot data fits fast.
    assert huge0["perf_norm"] > base0["perf_norm"]
    # u=1: ~30 hot 2MB pages against a fast tier of 6: HMM-v-Huge serves most
    # hot accesses from the slow tier; HMM-v-Base fits all hot 4KB regions.
    assert huge1["perf_norm"] < base1["perf_norm"]
    assert huge1["fast_access_share"] < 0.5 < base1["fast_access_share"]
    # The fast tier of HMM-v-Huge holds only huge leaves; HMM-v-Base's none.
    assert huge1["fast_huge_ratio"] == 1.0 and base1["fast_huge_ratio"] == 0.0
    assert huge1["promoted_mib"] > 0 and base1["recopied_mib"] > 0
    checks = {c["claim"][:30]: c["holds"] for c in r.checks()}
    assert list(checks.values())[0] is True and list(checks.values())[2] is True
    paths = Studies({"tmm": r}, {"kind": "estimate"}).save(str(tmp_path), plots=True)
    saved = json.load(open(paths["tmm_json"]))
    assert saved["hugescope_experiment"] == "fhpm-tmm" and saved["kind"] == "estimate"
    assert any(k.startswith("tmm_png") for k in paths)


def test_tier_knobs_reach_the_result_and_are_refused_out_of_range(tmp_path):
    t = str(tmp_path / "psr.hst")
    hs.workloads.trace("psr", t, footprint="16MiB", hot="2MiB", accesses=20000)
    (r,) = hs.compare(t, ["base"], preset="haswell-pcc", with_base=False, set=["os.tier_fast=4MiB"])
    d = r.to_dict()
    tiers = d["os_stats"]["tiers"]
    assert tiers["fast_bytes"] == 4 << 20 and tiers["kind"] == "estimate"
    assert tiers["fast_accesses"] + tiers["slow_accesses"] == 20000
    assert d["cost"]["memory_cycles"] > 0
    (r,) = hs.compare(t, ["base"], preset="haswell-pcc", with_base=False)
    assert "tiers" not in r.to_dict()["os_stats"] and "memory_cycles" not in r.to_dict()["cost"]
    with pytest.raises(hs.HugescopeError, match="os.tier_fast"):
        hs.compare(t, ["base"], preset="haswell-pcc", with_base=False, set=["os.tier_fast=3MiB"])
    with pytest.raises(hs.HugescopeError, match="tier_bandwidth"):
        hs.compare(t, ["base"], preset="haswell-pcc", with_base=False, set=["os.tier_bandwidth=0"])


def test_the_u0_claim_tells_translation_from_placement():
    """Issue #35: at u=0 FHPM-TMM trails HMM-v-Huge; the claim that says why
    holds only when the placement is the same and the DTLB misses differ."""
    huge = {"u": 0.0, "config": "HMM-v-Huge", "fast_access_share": 0.908, "memory_cycles": 6.99e8, "dtlb_misses": 252}
    fh = {"u": 0.0, "config": "FHPM-TMM", "fast_access_share": 0.908, "memory_cycles": 6.99e8, "dtlb_misses": 417_126}
    assert tmm.companion_cost([huge, fh]) is True
    assert tmm.companion_cost([huge, {**fh, "fast_access_share": 0.85}]) is False   # placed worse
    assert tmm.companion_cost([huge, {**fh, "memory_cycles": 7.2e8}]) is False      # more memory time
    assert tmm.companion_cost([huge, {**fh, "dtlb_misses": 300}]) is False           # no translation cost
    assert tmm.companion_cost([huge]) is None


def test_fhpm_tmm_beats_both_hmmv_where_fig2_says_and_trails_huge_at_u0_only_by_stage2():
    """Issue #35, at CI scale (seed 1): Fig 2's FHPM-TMM is best at every u
    with unbalanced pages, and places its hot data as well as HMM-v-Base
    (no huge promotion refused by a fast tier its splits fragmented: the
    tier compacts, os/tier.rs). At u=0 the paper's claim is a tie (HMM-v-Huge
    "optimal", FHPM-TMM "best"; §6.5: 1% apart, the companion pages'
    monitoring); this model does not reach it (the ratio is about 0.95, row
    f2-u0-fhpm-vs-huge), and what it trails by is only stage 2's 4KB
    translations: equal memory and OS time, the rest translation cycles."""
    r = tmm.run_tmm(scale="ci", seed=1, fhpm=True)
    by = {(x["u"], x["config"]): x for x in r.table.to_dict("records")}
    for u in tmm.US:
        fh, huge, base = by[(u, "FHPM-TMM")], by[(u, "HMM-v-Huge")], by[(u, "HMM-v-Base")]
        assert fh["migration_failures"] == 0, u
        # Placement at least HMM-v-Base's (which tracks 4KB exactly).
        assert fh["fast_access_share"] >= base["fast_access_share"] - 0.005, u
        assert fh["perf_norm"] > base["perf_norm"] + tmm.RESOLUTION, u
        if u > 0:
            assert fh["perf_norm"] > huge["perf_norm"] + tmm.RESOLUTION, u
    fh, huge = by[(0.0, "FHPM-TMM")], by[(0.0, "HMM-v-Huge")]
    assert abs(fh["memory_cycles"] - huge["memory_cycles"]) <= 0.01 * huge["memory_cycles"]
    gap = fh["total_cycles"] - huge["total_cycles"]
    extra_translation = fh["translation_cycles"] - huge["translation_cycles"]
    assert gap > 0 and abs(gap - extra_translation) <= 0.02 * gap, (gap, extra_translation)
    assert fh["perf_norm"] / huge["perf_norm"] > 0.9


def test_the_fig2_best_claim_needs_a_margin_above_the_resolution():
    """The "FHPM-TMM best at every u > 0" check fails when FHPM-TMM is ahead
    of a baseline by no more than the resolution (0.02): equal or nearly
    equal values are not an ordering."""
    def rows(fhpm_u1):
        perf = {("HMM-v-Huge", 0.5): 0.41, ("HMM-v-Base", 0.5): 0.61, ("FHPM-TMM", 0.5): 0.71,
                ("HMM-v-Huge", 1.0): 0.40, ("HMM-v-Base", 1.0): 0.688, ("FHPM-TMM", 1.0): fhpm_u1}
        return [{"u": u, "config": c, "perf_norm": p} for (c, u), p in perf.items()]

    def best(rs):
        (c,) = [c for c in tmm.shape_checks("tmm", rs) if c["claim"].startswith("FHPM-TMM beats both")]
        return c["holds"]

    assert best(rows(0.72)) is True                  # 0.032 above HMM-v-Base at u=1
    assert best(rows(0.706)) is False                # 0.018: the paper-scale margin, under the resolution
    assert best(rows(0.688)) is False                # equal
