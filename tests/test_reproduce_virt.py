"""The virtualization section of the reproduction table (issue #35,
``papers/virt.toml``): Ingens Table 3's rows included from ingens.toml (one
definition in both tables), the §2.4 walk shares, and direct segments in a
VM (ISCA'13 §3.3: 24 / 4 / 4 / 0 references per walk), judged by the core.

The verdict tests build the study tables by hand (the shape of
``ingens.table3`` and ``virt_study``'s ds-virt rows) and run them through the
same code the section runs, so a wrong column, workload or configuration
fails here; the counts themselves are checked by hand on the simulator in
crates/hugescope-core/tests/virt_segments.rs."""

from __future__ import annotations

from conftest import run_cli
from hugescope import reproduce
from hugescope.reproduce import ingens as ring
from hugescope.reproduce import virt as rvirt


def verdicts(measured, scale="ci"):
    return {r["id"]: r for r in reproduce.evaluate("virt", scale, measured)}


# ---------------------------------------------------------------- the section's data

def test_the_section_includes_ingens_table3_rows_not_copies():
    virt = {r["id"]: r for r in reproduce.paper("virt")["row"]}
    ing = {r["id"]: r for r in reproduce.paper("ingens")["row"]}
    t3 = [i for i in ing if i.startswith("t3-")]
    # 9 workloads x 3 configurations, each one the same definition in both.
    assert len(t3) == 27
    for i in t3 + ["s24-mcf-walks-base", "s24-mcf-walks-huge"]:
        assert virt[i] == ing[i], i
    # The §2.4 split and §3.3's counts are the section's own rows.
    for i in ("s24-mcf-walks-ept", "s24-mcf-walks-guest", "ds33-2d-max", "ds33-vmm-max", "ds33-guest-max",
              "ds33-both-max"):
        assert i in virt and i not in ing, i
    assert [virt[i]["paper"] for i in ("ds33-2d-max", "ds33-vmm-max", "ds33-guest-max", "ds33-both-max")] == [
        24, 4, 4, 0]
    # The workloads the included rows run come along (the web workload's needs at paper scale).
    assert {"canneal", "svm", "redis", "web", "virt-ds"} <= {w["name"] for w in reproduce.paper("virt")["workload"]}
    assert "virt" in reproduce.PAPERS


def test_rows_without_a_stand_in_say_why():
    rows = verdicts([])
    for i in ("t3-429mcf-hh-gh", "t3-mongodb-hb-gh", "s24-mcf-walks-base", "s24-mcf-walks-ept",
              "s24-mcf-walks-guest"):
        assert rows[i]["verdict"] == "not attempted" and rows[i]["reason"].startswith("no "), (i, rows[i]["reason"])
    # A row with a stand-in but no measurement is not attempted too, with the run's reason.
    assert rows["t3-svm-hh-gh"]["verdict"] == "not attempted"


# ---------------------------------------------------------------- verdicts from crafted study tables

def _nested(speedups):
    """One seed's ``ingens.table3``: per workload, per configuration, a row
    with the speedup asked and the counters the notes read (made up: 1000
    walks, 10% of 1e6 cycles in walks, none in the OS)."""
    out = {}
    for w, (bh, hb, hh) in speedups.items():
        out[w] = {}
        for cfg, sp in (("hB/gB", 1.0), ("hB/gH", bh), ("hH/gB", hb), ("hH/gH", hh)):
            total = 1e6 / sp
            out[w][cfg] = {"config": cfg, "speedup_est": sp, "total_cycles_est": total, "walk_cycles_est": total - 9e5,
                           "translation_cycles_est": total - 9e5, "os_cycles_est": 0.0, "vm_exits": 0,
                           "vm_exit_seconds": 0.0, "walks": 1000, "refs_per_walk": 6.0, "max_refs_per_walk": 24}
    return out


def test_table3_rows_are_judged_on_the_speedup_of_each_configuration():
    # Canneal's paper values 1.11 / 1.10 / 1.32 (gain rule: 0.11 +- 0.02 as
    # 0.11 < 0.10 is false -> 25%: 1.0825..1.1375; 1.10 -> 1.075..1.125;
    # 1.32 -> 1.24..1.40). The other workloads are far off.
    t3 = _nested({"svm": (1.0, 1.0, 1.0), "canneal": (1.1375, 1.075, 1.41), "redis": (3.0, 3.0, 3.0),
                  "olio": (1.43, 1.08, 1.46)})
    m = ring.table3_rows("ci", [1], [t3], "cmd", note=lambda w: rvirt.table3_note(w, t3[w], 1))
    rows = verdicts(m)
    assert rows["t3-canneal-hb-gh"]["verdict"] == "reproduced"
    assert rows["t3-canneal-hh-gb"]["verdict"] == "reproduced"
    assert rows["t3-canneal-hh-gh"]["verdict"] == "not reproduced"  # 1.41 > 1.40
    assert rows["t3-redis-hh-gh"]["verdict"] == "not reproduced"
    assert all(rows[f"t3-olio-{k}"]["verdict"] == "reproduced" for k in ("hb-gh", "hh-gb", "hh-gh"))
    # The note splits hB/gB's cycles (10% walks here) and gives the walks-only speedup:
    # hH/gH of canneal: total 1e6/1.41, walks 1e6/1.41 - 9e5 -> 1e6 / (9e5 + that).
    note = rows["t3-canneal-hh-gh"]["note"]
    assert "hB/gB: walks 10.0% of cycles" in note, note
    walks_only = 1e6 / (9e5 + 1e6 / 1.41 - 9e5)
    assert f"hH/gH: 1.410x ({walks_only:.3f}x from walks alone)" in note, note


def _ds(counts, cached=None):
    """One seed's ``ds_tables``: per machine (``uncached``, ``cached``), per
    workload and segment configuration, the most references (``counts[c]``,
    the guest-segment walks' for the segment machines) and the mean (equal
    uncached: every walk the same; half with the caches)."""
    def rows(counts, share):
        out = []
        for w in ("GUPS", "BFS", "KV"):
            for cfg, n in counts.items():
                seg = cfg in ("guest segment", "both")
                out.append({"workload": w, "config": cfg, "walks": 100, "refs_per_walk": n * share,
                            # walks outside the guest segment stay 2-D (24)
                            "max_refs_per_walk": 24 if cfg == "guest segment" else n,
                            "guest_segment_walks": 90 if seg else None,
                            "guest_segment_refs_per_walk": n * share if seg else None,
                            "guest_segment_max_refs": n if seg else None})
        return out
    return {"uncached": rows(counts, 1.0), "cached": rows(cached or counts, 0.5)}


def test_ds_rows_need_exactly_24_4_4_0_references():
    good = {"none": 24, "guest segment": 4, "VMM segment": 4, "both": 0}
    rows = verdicts(rvirt.ds_rows("ci", [1, 2, 3], [_ds(good)] * 3))
    for i in ("ds33-2d-max", "ds33-vmm-max", "ds33-guest-max", "ds33-both-max"):
        assert rows[i]["verdict"] == "reproduced", (i, rows[i]["reason"])
    # The guest-segment row reads the walks inside the segment, not the
    # machine's overall maximum (24 for the walks outside it).
    assert rows["ds33-guest-max"]["value"] == 4
    # The value is the uncached machine's; the cached one's (13 here) is evidence only.
    rows = verdicts(rvirt.ds_rows("ci", [1, 2, 3], [_ds(good, cached={**good, "none": 13})] * 3))
    assert rows["ds33-2d-max"]["verdict"] == "reproduced"
    assert "cached: GUPS 100 walks, most 13, mean 6.50" in rows["ds33-2d-max"]["note"], rows["ds33-2d-max"]["note"]
    # One reference off either way fails ('up to 24' read as exactly 24 at most).
    for bad, row in (({**good, "none": 23}, "ds33-2d-max"), ({**good, "VMM segment": 5}, "ds33-vmm-max"),
                     ({**good, "both": 1}, "ds33-both-max")):
        r = verdicts(rvirt.ds_rows("ci", [1, 2, 3], [_ds(bad)] * 3))[row]
        assert r["verdict"] == "not reproduced", (row, r["reason"])
    # The maximum is over workloads and per seed: one workload's 25 fails the row.
    worse = _ds(good)
    worse["uncached"][0]["max_refs_per_walk"] = 25
    assert verdicts(rvirt.ds_rows("ci", [1, 2, 3], [worse] * 3))["ds33-2d-max"]["verdict"] == "not reproduced"


def test_cli_knows_the_section(tmp_path, capsys, monkeypatch):
    import pandas as pd

    monkeypatch.setattr(rvirt, "measure", lambda scale, seeds, step, table3=None: ([], pd.DataFrame()))
    code, out, err = run_cli("reproduce", "virt", "-o", tmp_path, capsys=capsys)
    assert code == 0, err
    assert (tmp_path / "reproduction.csv").exists()
    assert "ds33-2d-max" in (tmp_path / "reproduction.csv").read_text()


def test_the_ds_counts_on_a_ci_run():
    """ds-virt at CI scale on haswell-pcc: with the nested caches off every
    walk of 4KB over 4KB makes 24 references (4 with a segment, 0 with both:
    worked out in crates/hugescope-core/tests/virt_segments.rs); with the
    caches no walk reaches 24 (its own host walks share the host PWC)."""
    d = rvirt.ds_tables("ci", 1)
    rows = verdicts(rvirt.ds_rows("ci", [1], [d]))
    assert {i: rows[i]["value"] for i in ("ds33-2d-max", "ds33-vmm-max", "ds33-guest-max", "ds33-both-max")} == {
        "ds33-2d-max": 24, "ds33-vmm-max": 4, "ds33-guest-max": 4, "ds33-both-max": 0}
    for r in d["uncached"]:
        if r["config"] == "none":
            assert (r["refs_per_walk"], r["max_refs_per_walk"]) == (24, 24), r
        # Host walks per TLB miss without caches: the 4 guest table pages and
        # the data (5); a guest segment leaves the data's (1); a VMM segment
        # none; no cache serves any.
        want = {"none": 5, "guest segment": 1, "VMM segment": 0, "both": 0}[r["config"]]
        assert r["host_walks_per_walk"] == want, r
        assert r["nested_tlb_hit_rate"] in (0, None) and r["host_pwc_hit_rate"] in (0, None), r
    cached = [r for r in d["cached"] if r["config"] == "none"]
    assert all(r["walks"] > 0 and r["max_refs_per_walk"] < 24 and r["refs_per_walk"] < 24 for r in cached), cached
