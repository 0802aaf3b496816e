"""This machine's TLBs in the calibrated preset (issue #36): the steps of a
reach curve found by hand-checkable rules, CPUID's geometry set against
them (agree, disagree, a lower bound, nothing reported), the preset's L1/L2
tables with where each number comes from, and the calibrated preset as the
default machine of the real-machine estimates."""

from __future__ import annotations

import os

import pytest

import hugescope as hs
from hugescope import calibrate, linux, tlbcal

# The development VM's AMD registers (see crates/hugescope-core/tests/cpuid.rs
# for their hand decoding): L1 data 96 entries fully associative for 4K and
# for 2M; L2 data 128 entries, 8-way (4K) and 4-way (2M); no 1G leaf.
AMD = {"vendor": "AuthenticAMD", "hypervisor": True, "leaf2": [0, 0, 0, 0], "leaf18": [],
       "ext5": [0xff60ff40, 0xff60ff40, 0x300c0140, 0x20080140],
       "ext6": [0x40802040, 0x60804040, 0x04008140, 0x0c009140], "ext19": [0, 0, 0, 0]}
# Cascade Lake's leaf 2 (same test file): L1 data 4K 64/4-way, 2M 32/4-way,
# 1G 4/4-way; STLB 4K+2M 1536/6-way and 1G 16/4-way.
CLX = {"vendor": "GenuineIntel", "leaf2": [0x76036301, 0x00f0b5ff, 0, 0x00c30000]}
PAGES = [8, 10, 13, 16, 20, 25, 32, 40, 51, 64, 81, 102, 128, 161, 203, 256]
HASWELL = hs.machine_config("haswell-pcc")


def _steps(curve):
    return [(k["pages_before"], k["pages_at"], k["ns_before"], k["ns_after"]) for k in tlbcal.knees(curve)]


def test_knees_by_hand():
    # 1 ns up to 81 pages, 2.6 ns from 102, 10 ns from 203: two steps.
    ns = [1.0] * 11 + [2.6] * 3 + [10.0] * 2
    assert _steps(list(zip(PAGES, ns))) == [(81, 102, 1.0, 2.6), (161, 203, 2.6, 10.0)]
    # One high pass not confirmed by the next point is no step.
    noisy = [5.0 if n == 40 else 1.0 for n in PAGES]
    assert _steps(list(zip(PAGES, noisy))) == []
    # A rise below 25% of the level (or below 0.5 ns) is no step.
    assert _steps(list(zip(PAGES, [1.0] * 11 + [1.2] * 5))) == []
    assert _steps(list(zip(PAGES[:3], [1, 2, 3]))) == []
    # A step on the last point needs no confirmation; order does not matter.
    assert _steps(list(reversed(list(zip(PAGES, [1.0] * 15 + [3.0]))))) == [(203, 256, 1.0, 3.0)]


def test_a_step_where_the_lines_fill_a_data_cache_is_no_reach():
    caches = {"L1d": 48 * 1024, "L2": 1 << 20}
    st = tlbcal.classify([{"pages_before": 645, "pages_at": 813}, {"pages_before": 81, "pages_at": 102}], caches)
    # 645..813 lines of 64 B = 40..51 KiB: the 48 KiB L1d; 81..102 lines: 5..6.4 KiB, no cache.
    assert [(s["kind"], s["cache"]) for s in st] == [("data cache", "L1d"), ("reach", None)]


def _reach(splintered=False):
    """A bare-metal-like machine: 4 KiB pages step at 96 (L1 TLB), at 768
    lines (L1d), at 2048 pages (walks); 2 MiB pages at 96; the 2 MiB-backed
    4K series steps only at the L1d (or like 4 KiB pages when splintered)."""
    c4 = [8, 16, 32, 64, 81, 102, 128, 256, 512, 645, 813, 1024, 1625, 2048, 2580, 3251, 4096]

    def t4(n):
        return 1.0 + (1.6 if n > 96 else 0) + (2.3 if n > 768 else 0) + (6.0 if n > 2300 else 0)

    def t2(n):
        return 1.0 + (2.3 if n > 768 else 0)

    pts = [{"series": "4k", "backing": "4k", "pages": n, "ns_per_access": t4(n), "huge_fraction": 0.0} for n in c4]
    pts += [{"series": "4k", "backing": "2m", "pages": n, "ns_per_access": t4(n) if splintered else t2(n),
             "huge_fraction": 1.0} for n in c4]
    pts += [{"series": "2m", "backing": "2m", "pages": n, "ns_per_access": 1.0 + (1.6 if n > 96 else 0),
             "huge_fraction": 1.0} for n in [2, 4, 8, 16, 32, 64, 81, 102, 128, 256, 406, 512]]
    return {"points": pts, "how": "synthetic"}


def test_analyse_sets_cpuid_against_the_measured_steps():
    g = tlbcal.cpu_geometry(AMD)
    a = tlbcal.analyse(g, _reach(), {"L1d": 48 * 1024}, ghz=2.5)
    rows = {(r["level"], r["page"]): r for r in a["levels"]}
    assert rows[(1, "4k")]["verdict"] == "agree" and rows[(1, "4k")]["used"]["entries"] == 96
    assert rows[(1, "4k")]["measured"]["cycles_before"] == pytest.approx(2.5)
    # CPUID's 128-entry L2 against walks from 2580 pages: the measurement is used.
    assert rows[(2, "4k")]["verdict"] == "disagree"
    assert rows[(2, "4k")]["used"]["entries"] == 2048 and "CPUID says 128" in rows[(2, "4k")]["used"]["from"]
    assert rows[(1, "2m")]["verdict"] == "agree"
    # No second step up to 512 pages of 2 MiB: 128 would have shown one; 512 is a lower bound.
    assert rows[(2, "2m")]["verdict"].startswith("no step up to 512 pages")
    assert rows[(2, "2m")]["used"]["entries"] == 512 and "lower bound" in rows[(2, "2m")]["used"]["from"]
    assert not a["splintered"]
    tables, notes = tlbcal.machine_tables(a, g, HASWELL)
    assert {k: (v["entries"], v["ways"]) for k, v in tables["l1"].items()} == {"4k": (96, 0), "2m": (96, 0), "1g": (4, 4)}
    assert {k: (v["entries"], v["ways"]) for k, v in tables["l2"].items()} == {"4k": (2048, 8), "2m": (512, 4)}
    assert tables["l1"]["1g"]["why"].startswith("default: haswell-pcc's l1.1g")
    assert any("l1 1g" in n and "a default" in n for n in notes)
    # A 2 MiB page that steps where 4 KiB pages do covers 4 KiB in the TLB.
    a = tlbcal.analyse(g, _reach(splintered=True), {"L1d": 48 * 1024}, ghz=None)
    assert a["splintered"] and any("covers only 4 KiB" in n for n in a["notes"])
    # A "2 MiB" buffer the kernel left small (THP never) measures nothing of 2 MiB pages.
    r = _reach(splintered=True)
    for p in r["points"]:
        if p["backing"] == "2m":
            p["huge_fraction"] = 0.0
    a = tlbcal.analyse(g, r, {"L1d": 48 * 1024}, ghz=None)
    rows = {(x["level"], x["page"]): x for x in a["levels"]}
    assert not a["splintered"] and rows[(1, "2m")]["verdict"] == "not measured"
    assert rows[(1, "2m")]["used"]["entries"] == 96 and rows[(1, "4k")]["verdict"] == "agree"
    assert sum("0% huge (smaps): its steps are not used" in n for n in a["notes"]) == 2


def test_intel_shared_stlb_stays_one_structure_and_loads(tmp_path):
    g = tlbcal.cpu_geometry(CLX)
    a = tlbcal.analyse(g, None, {}, ghz=None)
    assert all(r["verdict"] == "not measured" for r in a["levels"])
    tables, notes = tlbcal.machine_tables(a, g, HASWELL)
    assert {k: (v["entries"], v["ways"]) for k, v in tables["l1"].items()} == {"4k": (64, 4), "2m": (32, 4), "1g": (4, 4)}
    assert {k: (v["entries"], v["ways"]) for k, v in tables["l2"].items()} == {"4k+2m": (1536, 6), "1g": (16, 4)}
    assert notes == []
    # The preset text replaces the starting preset's TLBs and loads.
    t = {"geometry": g, "analysis": a, "tables": tables, "notes": g["notes"], "how": None}
    text = "\n".join(['preset = "haswell-pcc"'] + calibrate._tlb_toml(t, "haswell-pcc")) + "\n"
    assert 'replace = ["l1", "l2"]' in text and "# note: page-walk caches" in text
    (tmp_path / "c.toml").write_text(text)
    m = hs.machine_config(config=str(tmp_path / "c.toml"))
    assert m["l2"] == {"4k+2m": {"entries": 1536, "ways": 6}, "1g": {"entries": 16, "ways": 4}}
    assert m["l1"]["2m"] == {"entries": 32, "ways": 4}
    assert m["pwc"] == HASWELL["pwc"]  # not reported by CPUID: the defaults stay


def test_this_cpu_decodes():
    g = tlbcal.cpu_geometry()
    assert g["raw"]["vendor"] and g["method"]
    assert any("page-walk caches" in n for n in g["notes"])


def test_the_calibrated_preset_is_the_default_machine_of_estimates(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    # No calibration saved: what was given, the paper preset by default.
    assert calibrate.estimate_machine() == (None, None, "preset haswell-pcc (the default)")
    os.makedirs(tmp_path / "hugescope")
    (tmp_path / "hugescope" / "calibrated.toml").write_text('preset = "haswell-pcc"\n[cost]\nwalk_ref_cycles = 9.5\n')
    path = calibrate.default_path()
    preset, config, label = calibrate.estimate_machine()
    assert (preset, config) == ("calibrated", None)
    assert label == f"calibrated ({path}, over preset haswell-pcc), the default: no --preset/--config given"
    # An explicit choice wins, and a label that did not go through it says a calibration was left unused.
    assert calibrate.estimate_machine("modern-x86")[:2] == ("modern-x86", None)
    (tmp_path / "x.toml").write_text('preset = "modern-x86"\n')
    assert calibrate.estimate_machine(None, str(tmp_path / "x.toml"))[:2] == (None, str(tmp_path / "x.toml"))
    assert "was not used" in calibrate.machine_label()
    # run records whether the plan's estimate was made on it.
    def gain(how):
        r = linux.RunResult("command", ["true"], {}, "plan.json", 1, 0, [],
                            header={"estimate": {"speedup_vs_base": 1.2, "how": how}})
        return r.summary["gain"]
    g = gain("cost model (preset haswell-pcc (the default))")
    assert g["calibrated_preset"] == path and g["estimate_on_calibrated"] is False
    assert gain(f"cost model (calibrated ({path}, over preset haswell-pcc))")["estimate_on_calibrated"] is True
    assert gain(f"cost model (config {path} (over preset haswell-pcc))")["estimate_on_calibrated"] is True
    assert gain(f"cost model ({calibrate.machine_label()})")["estimate_on_calibrated"] is False


def _microbench():
    """Walk microbenchmark rows of a made-up machine (4 KiB slower than 2 MiB
    past 1 MiB), enough for the walk fit to run."""
    rows = []
    for f, t4, t2 in ((16 << 10, 2.0, 2.0), (1 << 20, 3.0, 2.5), (16 << 20, 30.0, 10.0), (256 << 20, 150.0, 60.0),
                      (1 << 30, 200.0, 80.0)):
        for mode, scale in (("chase", 1.0), ("random", 0.1)):
            for pages, t, huge in (("4k", t4, 0.0), ("2m", t2, 1.0)):
                rows.append({"footprint": f, "pages": pages, "mode": mode, "ns_per_access": t * scale,
                             "ns_min": t * scale, "ns_max": t * scale, "huge_fraction": huge, "how": "synthetic"})
    return rows


def test_calibrated_preset_carries_the_tlbs_and_says_why(tmp_path, capsys):
    from conftest import run_cli
    import json
    m = {"kind": "microbench", "when": "now", "cpu_model": "test", "kernel": "k", "host": "h", "preset": "haswell-pcc",
         "config": None, "machine": "haswell-pcc", "start_cost": HASWELL["cost"], "host_ghz": 2.5,
         "tlb": {"cpuid": AMD, "caches": {"L1d": 48 * 1024}, "reach": _reach(splintered=True)},
         "microbench": _microbench()}
    (tmp_path / "m.json").write_text(json.dumps(m))
    code, out, err = run_cli("calibrate", "--measurements", tmp_path / "m.json", "--out", tmp_path / "c.toml",
                             capsys=capsys)
    assert code == 0, err
    text = " ".join(out.split())
    assert "TLBs CPUID reports (AuthenticAMD" in text and "TLB reach, measured" in text
    assert "disagree" in text and "covers only 4 KiB" in text and "page-walk caches" in text
    toml = (tmp_path / "c.toml").read_text()
    assert '[l2."4k"]  # measurement (step between 2048 and 2580 pages; CPUID says 128)' in toml
    assert '[l1."1g"]  # default: haswell-pcc' in toml and "# pwc: no CPUID leaf reports" in toml
    c = hs.machine_config(config=str(tmp_path / "c.toml"))
    assert c["l1"] == {"4k": {"entries": 96, "ways": 0}, "2m": {"entries": 96, "ways": 0}, "1g": {"entries": 4, "ways": 4}}
    assert c["l2"] == {"4k": {"entries": 2048, "ways": 8}, "2m": {"entries": 512, "ways": 4}}
    # The splintered reach (2 MiB pages step where 4 KiB pages do) caps what a TLB entry holds.
    assert c["tlb_max_page"] == "4k" and 'tlb_max_page = "4k"' in toml
    # Measurements from before issue #36 carry no TLB record: the preset keeps the starting one's TLBs.
    del m["tlb"]
    (tmp_path / "m.json").write_text(json.dumps(m))
    code, out, err = run_cli("calibrate", "--measurements", tmp_path / "m.json", "--out", tmp_path / "d.toml",
                             capsys=capsys)
    assert code == 0, err
    assert "carry no TLB record" in " ".join(out.split())
    d = hs.machine_config(config=str(tmp_path / "d.toml"))
    assert d["l2"] == HASWELL["l2"] and "tlb_max_page" not in d
    # --no-tlb-reach belongs to the microbenchmarks.
    code, out, err = run_cli("calibrate", "--workload", "gups:size=16MiB", "--no-tlb-reach", "--dry-run", capsys=capsys)
    assert code == 2 and "--no-tlb-reach" in err
