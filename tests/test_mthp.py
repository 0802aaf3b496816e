"""Multi-size THP from the Python front: the presets, the `mthp` policy's
folios and their TLB reach under each coalescing mode, and the refusal of a
per-size knob the machine lacks (issue #12)."""

from __future__ import annotations

import hugescope as hs
from conftest import load, run_cli

MTHP_64K = "mthp:enabled=never,enabled_64k=always"


def _by_label(results):
    for r in results:
        assert r["warnings"] == [], r["warnings"]
    return {r["label"]: r for r in results}


def test_presets_list_the_multi_size_machines():
    assert {"x86-mthp", "arm64-mthp"} <= set(hs.presets())
    m = hs.machine_config("arm64-mthp")
    assert m["folio_sizes"] == ["16k", "32k", "64k", "128k", "256k"]
    assert (m["coalesce"], m["coalesce_size"]) == ("contpte", "64k")
    x = hs.machine_config("x86-mthp")
    assert x["gb_pages"] is False and "1g" not in x["page_sizes"]
    assert "1g" in hs.machine_config("x86-mthp", set=["gb_pages=true"])["page_sizes"]


def test_folios_buy_tlb_reach_only_through_coalescing(bfs_trace):
    # Without coalescing a 64KB folio is 16 base-page TLB entries: the TLBs
    # see exactly what a base-page run shows them, so the walks are equal.
    # With contpte each folio is one 64KB entry: far fewer walks.
    pols = ["linux:enabled=never", MTHP_64K]
    none = _by_label(hs.compare(bfs_trace, pols, preset="arm64-mthp", set=["coalesce=none"]))
    cont = _by_label(hs.compare(bfs_trace, pols, preset="arm64-mthp"))
    base_walks = none["linux:enabled=never"].summary()["walks"]
    assert none[MTHP_64K].summary()["walks"] == base_walks
    assert cont["linux:enabled=never"].summary()["walks"] == base_walks
    assert cont[MTHP_64K].summary()["walks"] < base_walks / 4
    # The folios are there either way, served at fault, and counted per size.
    faults = dict(cont[MTHP_64K]["os_stats"]["faults_huge"])
    assert faults["64k"] > 0 and faults["2m"] == 0
    sizes = cont[MTHP_64K]["policy_params"]["sizes"]
    assert sizes["64k"]["resolved"] == "always"
    assert sizes["64k"]["stats"]["anon_fault_alloc"] == faults["64k"]


def test_amd_style_coalescing_on_x86(bfs_trace):
    pols = ["linux:enabled=never"]
    plain = hs.compare(bfs_trace, pols, preset="x86-mthp")[0].summary()["walks"]
    amd = hs.compare(bfs_trace, pols, preset="x86-mthp", set=["coalesce=amd"])[0].summary()["walks"]
    # Base pages faulted in order get consecutive frames: runs of 4 coalesce.
    assert amd < plain


def test_a_size_the_machine_lacks_is_one_error_and_no_file(gups_trace, tmp_path, capsys):
    out = tmp_path / "r.json"
    code, so, err = run_cli("simulate", gups_trace, "--policy", "mthp:enabled_64k=always", "--json", out, capsys=capsys)
    assert code == 2
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    assert "enabled_64k=always" in err and "haswell-pcc" in err and "64k" in err
    assert "Traceback" not in err and not out.exists()
    code, so, err = run_cli("simulate", gups_trace, "--preset", "arm64-mthp", "--policy", "mthp:enabled_64k=often",
                            "--json", out, capsys=capsys)
    assert code == 2 and "enabled_64k=often" in err and not out.exists()


def test_mthp_runs_from_the_cli_with_its_knobs_in_the_result(gups_trace, tmp_path, capsys):
    out = tmp_path / "r.json"
    code, so, err = run_cli("simulate", gups_trace, "--preset", "arm64-mthp", "--policy", MTHP_64K + ",enabled_16k=inherit",
                            "--json", out, capsys=capsys)
    assert code == 0, err
    res = load(out)
    r = res[0] if isinstance(res, list) else res
    rows = r["results"] if "results" in r else [r]
    m = [x for x in rows if x["label"] == MTHP_64K + ",enabled_16k=inherit"][0]
    assert m["policy_params"]["sizes"]["16k"] == {"enabled": "inherit", "resolved": "never",
                                                   "stats": {"anon_fault_alloc": 0, "anon_fault_fallback": 0}}
    assert m["machine"]["coalesce"] == "contpte"
