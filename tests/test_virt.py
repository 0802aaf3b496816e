"""Virtualization (issue #13): the hypervisor from Python and the CLI, the
nested study's files and claims, and one-line refusals."""
from __future__ import annotations

import json

import pytest

import hugescope as hs
from hugescope import virt_study as vs

from conftest import run_cli


def test_a_virtualized_run_reports_exits_and_walks_by_page_size_pair(gups_trace):
    r = hs.simulate(gups_trace, policy="linux", host_policy="base", duration=5.0).to_dict()
    v = r["virt"]
    assert v["host_policy"] == "base"
    # Every guest-physical page the guest touched exited once on first touch.
    assert v["vm_exits"]["total"] == v["vm_exits"]["ept_violation_first_touch"] > 0
    assert v["vm_exits"]["ept_violation_after_zap"] == 0
    # Guest 2MB over host 4KB: the TLB holds 4KB entries; walks by pair add up.
    assert sum(p["walks"] for p in v["walks_by_pair"]) == r["translation"]["walks"]
    assert {p["host"] for p in v["walks_by_pair"]} == {"4k"}
    assert v["guest_huge_bytes"] > 0 and v["host_huge_bytes"] == 0
    # The reference is base in guest and host: a guest 2MB page cuts walk references.
    assert r["base"]["translation"]["walk_refs"] > r["translation"]["walk_refs"]
    res = hs.simulate(gups_trace, policy="linux", host_policy="base", duration=5.0)
    assert res.summary()["vm_exits"] == v["vm_exits"]["total"] and res.summary()["host_policy"] == "base"
    assert res.walks_by_pair()["walks"].sum() == r["translation"]["walks"]
    # A native run carries no virt entry.
    assert "virt" not in hs.simulate(gups_trace, policy="linux", duration=5.0).to_dict()


def test_two_traces_are_two_vms(gups_trace):
    r = hs.compare([gups_trace, gups_trace], ["base"], host_policy="linux", duration=5.0, with_base=False)[0].to_dict()
    vms = r["virt"]["vms"]
    assert [v["vm"] for v in vms] == [1, 2] and [v["host_pid"] for v in vms] == [0, 1]
    # The same workload in each VM: the same guest-physical pages exit once each.
    assert vms[0]["vm_exits"]["ept_violation_first_touch"] == vms[1]["vm_exits"]["ept_violation_first_touch"] > 0
    assert all(v["host_huge_bytes"] > 0 for v in vms)
    assert [p["pid"] for p in r["processes"]] == [0, 1]


def test_bad_host_policy_is_one_error_line(gups_trace, capsys):
    code, _, err = run_cli("simulate", gups_trace, "--guest-policy", "linux", "--host-policy", "nope", capsys=capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:"), err
    assert "--host-policy" in lines[0] and "unknown policy 'nope'" in lines[0]
    code, _, err = run_cli("simulate", gups_trace, "--virt", capsys=capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "needs a guest policy" in err
    with pytest.raises(hs.HugescopeError, match="the dseg OS model runs natively only"):
        hs.simulate(gups_trace, policy="dseg", host_policy="base")


def test_nested_study_at_tiny_scale_writes_its_files_and_its_claims_hold(tmp_path, capsys):
    out = tmp_path / "out"
    code, stdout, err = run_cli("virt", "nested", "--scale", "tiny", "-o", out, capsys=capsys)
    assert code == 0, err
    for f in ("virt-nested.csv", "virt-nested-checks.csv", "virt-nested.json", "virt-nested.png"):
        assert (out / f).exists(), f
    data = json.load(open(out / "virt-nested.json"))
    assert data["hugescope_experiment"] == "virt-nested" and data["kind"] == "estimate"
    rows = data["rows"]
    assert {r["config"] for r in rows} == {"hB/gB", "hB/gH", "hH/gB", "hH/gH"}
    assert [c["holds"] for c in data["checks"]] == [True] * 9, data["checks"]
    # hB/gB is the reference of the speedups.
    assert all(r["speedup_est"] == 1.0 for r in rows if r["config"] == "hB/gB")


def test_ds_virt_study_at_tiny_scale_cuts_walks_as_isca13_s33_expects(tmp_path, capsys):
    """Direct segments in a VM (ISCA'13 §3.3, extension): both < either < none."""
    out = tmp_path / "out"
    code, stdout, err = run_cli("virt", "ds-virt", "--scale", "tiny", "-o", out, capsys=capsys)
    assert code == 0, err
    for f in ("virt-ds-virt.csv", "virt-ds-virt-checks.csv", "virt-ds-virt.json", "virt-ds-virt.png"):
        assert (out / f).exists(), f
    data = json.load(open(out / "virt-ds-virt.json"))
    assert data["hugescope_experiment"] == "virt-ds-virt" and data["kind"] == "estimate" and "extension" in data
    rows = data["rows"]
    assert {r["config"] for r in rows} == {"none", "guest segment", "VMM segment", "both"}
    assert [c["holds"] for c in data["checks"]] == [True] * 6, data["checks"]
    for r in rows:
        rpw = r["refs_per_walk"]
        # Without segments at most 24 per walk; one segment leaves a 1-D
        # walk (at most 4); both leave only the misses outside the guest
        # segment's primary region, each a guest walk of at most 4.
        assert rpw <= (24 if r["config"] == "none" else 4), r
        frac = r["guest_segment_walk_fraction"]
        assert (frac == 0.0) if r["config"] in ("none", "VMM segment") else (0.5 < frac <= 1.0), r
    assert all(r["speedup_est"] == 1.0 for r in rows if r["config"] == "none")


def test_segment_knob_bad_value_is_one_error(gups_trace):
    with pytest.raises(hs.HugescopeError, match="expected `on` or `off`"):
        hs.simulate(gups_trace, policy="base", host_policy="base", set=["virt.guest_segment=maybe"])


def test_bad_study_or_scale_is_one_line():
    with pytest.raises(hs.HugescopeError, match="study: 'x' is not one of nested"):
        vs.check_args(["x"], "ci")
    with pytest.raises(hs.HugescopeError, match="scale: 'big'"):
        vs.check_args(None, "big")


@pytest.mark.parametrize("guest,host", [("ingens", "linux"), ("linux", "ingens"), ("ingens", "ingens")])
def test_ingens_runs_in_guest_and_host(gups_trace, guest, host):
    r = hs.compare(gups_trace, [guest], host_policy=host, duration=5.0, with_base=False)[0]
    d = r.to_dict()
    assert not [w for w in d["warnings"] if "invariant" in w], d["warnings"]
    assert d["virt"]["host_policy"] == host and d["policy"] == guest
    assert d["translation"]["walks"] > 0
