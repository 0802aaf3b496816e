"""The calibrated cost model (issue #15): hand-computed predictions, a fit that
recovers known parameters from measurements made by the model itself, the
analytic walk counts of the microbenchmark fit, the microbenchmark's code
paths on small footprints (no timings asserted), and the preset it saves."""

from __future__ import annotations

import json
import math

import pytest

import hugescope as hs
from hugescope import calibrate, cost_model, linux, walkcal
from conftest import run_cli

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
HASWELL = hs.machine_config("haswell-pcc")


def _feat(l2, llc, mem, pwc=0.0):
    return {"accesses": 1e6, "l1_hits": 0.0, "l2_hits": float(l2), "walks": 0.0, "walk_refs": float(llc + mem),
            "walk_refs_llc": float(llc), "walk_refs_mem": float(mem), "pwc_hits": float(pwc), "classified": 1.0}


P = {"l2_hit_ns": 2.0, "pwc_hit_ns": 0.5, "walk_ref_llc_ns": 20.0, "walk_ref_mem_ns": 100.0, "overlap": 0.25}


def test_every_parameter_has_a_unit_and_bounds():
    assert set(cost_model.PARAM_UNITS) == set(cost_model.BOUNDS) == set(cost_model.DEFAULT_PARAMS)
    assert all(cost_model.PARAM_UNITS.values())


def test_prediction_by_hand():
    huge = _feat(1e3, 0, 0)
    p = {"workload": "w", "plan": "base", "features": _feat(1e5, 2e6, 1e6, 4e5), "features_huge": huge, "t_huge": 1.0}
    # X(base) = 1e5*2 + 4e5*0.5 + 2e6*20 + 1e6*100 ns = 140.4e6 ns; X(huge) = 2e3 ns.
    dx = (1e5 * 2 + 4e5 * 0.5 + 2e6 * 20 + 1e6 * 100 - 1e3 * 2) * 1e-9
    assert cost_model.predict_seconds(p, P) == pytest.approx(1.0 + 0.75 * dx, rel=1e-12)
    # The all-huge plan predicts exactly the measured all-huge time.
    assert cost_model.predict_seconds(dict(p, features=huge), P) == 1.0


def test_features_without_the_split_count_every_reference_as_a_hit():
    sim = {"translation": {"accesses": 10, "l1_hits": 5, "l2_hits": 2, "walks": 3, "walk_refs": 7, "pwc_hits": 1}}
    f = cost_model.features(sim)
    assert (f["walk_refs_llc"], f["walk_refs_mem"], f["classified"]) == (7.0, 0.0, 0.0)
    sim["translation"].update(walk_refs_llc=4, walk_refs_mem=3)
    f = cost_model.features(sim)
    assert (f["walk_refs_llc"], f["walk_refs_mem"], f["classified"]) == (4.0, 3.0, 1.0)
    with pytest.raises(ValueError, match="translation"):
        cost_model.features({"cost": {}})


def test_bad_parameters_are_refused():
    p = {"workload": "w", "plan": "x", "features": _feat(0, 0, 0), "features_huge": _feat(0, 0, 0), "t_huge": 1.0}
    with pytest.raises(ValueError, match="overlap"):
        cost_model.predict_seconds(p, dict(P, overlap=1.5))
    with pytest.raises(ValueError, match="missing"):
        cost_model.predict_seconds(p, {"overlap": 0.1})


def _points(truth):
    """Two workloads, a base plan and two partial plans each, timed by the model itself."""
    pts = []
    for w, t_huge, scale in (("gups", 1.0, 1.0), ("bfs", 0.5, 0.2)):
        huge = _feat(1e3, 10, 0)
        for plan, frac in (("base", 1.0), ("top2", 0.5), ("top8", 0.1)):
            f = _feat(4e6 * scale * frac, 5e6 * scale * frac, 3e6 * scale * frac ** 2)
            pt = {"workload": w, "plan": plan, "features": f, "features_huge": huge, "t_huge": t_huge}
            pt["t"] = cost_model.predict_seconds(pt, truth)
            pts.append(pt)
    return pts


def test_fit_recovers_overlap_and_dram_latency():
    truth = dict(P, overlap=0.4, walk_ref_mem_ns=80.0)
    got = cost_model.fit(_points(truth), start=dict(P, overlap=0.0, walk_ref_mem_ns=30.0))
    assert got["overlap"] == pytest.approx(0.4, abs=1e-6)
    assert got["walk_ref_mem_ns"] == pytest.approx(80.0, rel=1e-5)
    # Held parameters are the start's; every one is within bounds.
    assert got["walk_ref_llc_ns"] == P["walk_ref_llc_ns"]
    assert all(0 <= got[k] <= cost_model.BOUNDS[k] for k in cost_model.PARAM_UNITS)
    assert max(abs(r) for r in cost_model.residuals(_points(truth), got)) < 1e-6


def test_fit_keeps_parameters_in_bounds():
    # Measured gains larger than any overlap can explain: overlap stops at 0.
    pts = _points(dict(P, overlap=0.0))
    for p in pts:
        if p["plan"] != "base":
            p["t"] *= 0.5
    got = cost_model.fit(pts, start=P, free=("overlap",))
    assert 0.0 <= got["overlap"] <= 1.0
    with pytest.raises(ValueError, match="unknown"):
        cost_model.fit(pts, free=("nonsense",))
    with pytest.raises(ValueError, match="no points"):
        cost_model.fit([])


def test_params_from_a_calibrated_cost_table():
    cost = {"cpu_ghz": 2.0, "l2_hit_cycles": 8.0, "pwc_hit_cycles": 2.0, "walk_ref_cycles": 40.0,
            "walk_ref_mem_cycles": 300.0, "pt_cache_lines": 4096}
    p = cost_model.params_from_cost(cost, overlap=0.3)
    assert p == {"l2_hit_ns": 4.0, "pwc_hit_ns": 1.0, "walk_ref_llc_ns": 20.0, "walk_ref_mem_ns": 150.0,
                 "overlap": 0.3}
    # Model off: a missing reference costs what a hit does.
    assert cost_model.params_from_cost(dict(cost, pt_cache_lines=0))["walk_ref_mem_ns"] == 20.0


# ---------------------------------------------------------------- walk microbenchmarks


def test_analytic_walk_counts_by_hand():
    # 4 KiB pages over 64 KiB: 16 pages, inside the 64-entry L1 TLB: no misses.
    w = walkcal.walk_counts(64 * KIB, "4k", HASWELL, 1024)
    assert (w["l2_hits"], w["walks"], w["refs"]) == (0.0, 0.0, 0.0)
    # 4 KiB pages over 16 GiB (4Mi pages): walks on 1 - 1088/4Mi of accesses;
    # PDE cache covers 64 MiB, PDPTE cache 4 GiB: refs = 1 + (1 - 1/256) + (1 - 1/256)(1 - 1/4).
    w = walkcal.walk_counts(16 * GIB, "4k", HASWELL, 1 << 30)
    walk = 1 - (64 + 1024) / (4 << 20)
    refs = 1 + (1 - 1 / 256) * (1 + 0.75)
    assert w["walks"] == pytest.approx(walk)
    assert w["refs"] == pytest.approx(walk * refs)
    # A cache larger than every line hits everything.
    assert (w["llc"], w["mem"]) == (pytest.approx(walk * refs), 0.0)
    # A tiny cache misses nearly every PTE line (512Ki of them).
    w = walkcal.walk_counts(16 * GIB, "4k", HASWELL, 64)
    assert w["mem"] > 0.9 * w["walks"]


def test_che_approximation_fills_exactly_c_lines():
    lines, rate = {"pte": 1000.0, "pde": 10.0}, {"pte": 1.0, "pde": 1.0}
    h = walkcal._che_hits(lines, rate, 100.0)
    assert sum(lines[k] * h[k] for k in lines) == pytest.approx(100.0, rel=1e-6)
    assert h["pde"] > h["pte"]  # hotter lines stay


#: The default footprints and two larger ones (synthetic data needs no memory),
#: so the capacity is pinned by several footprints beyond it.
FOOTPRINTS = walkcal.DEFAULT_FOOTPRINTS + [16 * GIB, 64 * GIB]


def _synthetic_ms(l2, llc, mem, c):
    """Chase measurements made from the model with known parameters (2m at a flat 100 ns)."""
    out = []
    for f in FOOTPRINTS:
        w4, w2 = walkcal.walk_counts(f, "4k", HASWELL, c), walkcal.walk_counts(f, "2m", HASWELL, c)
        d = sum((w4[k] - w2[k]) * v for k, v in (("l2_hits", l2), ("llc", llc), ("mem", mem)))
        for pages, ns in (("4k", 100.0 + d), ("2m", 100.0)):
            out.append({"footprint": f, "pages": pages, "mode": "chase", "ns_per_access": ns, "huge_fraction":
                        1.0 if pages == "2m" else 0.0})
            out.append({"footprint": f, "pages": pages, "mode": "random", "ns_per_access": 20 + (ns - 100) * 0.3,
                        "huge_fraction": 1.0 if pages == "2m" else 0.0})
    return out


def test_walk_fit_recovers_known_latencies_and_capacity():
    c = walkcal.C_GRID[36]
    f = walkcal.fit(_synthetic_ms(3.0, 25.0, 110.0, c), HASWELL)
    assert f["pt_cache_lines"] == c
    assert (f["l2_hit_ns"], f["walk_ref_llc_ns"], f["walk_ref_mem_ns"]) == (
        pytest.approx(3.0, rel=1e-4), pytest.approx(25.0, rel=1e-4), pytest.approx(110.0, rel=1e-4))
    assert f["overlap_random"] == pytest.approx(0.7)
    for r in f["table"]:
        assert r["delta_fit_ns"] == pytest.approx(r["delta_ns"], abs=1e-6)


def test_walk_fit_leaves_out_buffers_that_were_not_huge_and_refuses_too_few_points():
    ms = _synthetic_ms(3.0, 25.0, 110.0, 4096)
    for m in ms:
        if m["pages"] == "2m" and m["footprint"] == 1 * GIB:
            m["huge_fraction"] = 0.3
    f = walkcal.fit(ms, HASWELL)
    assert f["excluded"] == [{"footprint": GIB, "huge_fraction_2m": 0.3}]
    assert GIB not in [r["footprint"] for r in f["table"]] and len(f["table"]) == len(FOOTPRINTS) - 1
    with pytest.raises(hs.HugescopeError, match="3 or more"):
        walkcal.fit(ms[:4], HASWELL)
    for m in ms:
        if m["pages"] == "2m":
            m["huge_fraction"] = 0.0
    with pytest.raises(hs.HugescopeError, match="never"):
        walkcal.fit(ms, HASWELL)


def test_microbenchmark_runs_on_small_footprints_and_the_preset_loads(tmp_path):
    # Real runs, tiny: the code paths (mapping, madvise, smaps, pinning), not the timings.
    fps = [64 * KIB, 4 * MIB, 16 * MIB]
    ms = walkcal.measure(fps, accesses=4096, repeats=1)
    assert [(m["footprint"], m["mode"], m["pages"]) for m in ms] == [
        (f, m, p) for f in fps for m in walkcal.MODES for p in walkcal.PAGES]
    for m in ms:
        assert m["ns_min"] <= m["ns_per_access"] <= m["ns_max"] and m["accesses"] == 4096
        if m["pages"] == "4k":
            assert m["huge_fraction"] == 0.0
    thp = linux.thp_state()
    if not thp["plans_applicable"]:
        pytest.skip("THP disabled: no 2 MiB buffers")
    assert all(m["huge_fraction"] >= 0.9 for m in ms if m["pages"] == "2m")
    cal = calibrate.calibrate_walks(measurements={
        "kind": "microbench", "when": "now", "cpu_model": "test cpu", "kernel": "test", "host": "h",
        "preset": "haswell-pcc", "config": None, "machine": "haswell-pcc", "start_cost": HASWELL["cost"],
        "host_ghz": 2.0, "microbench": ms})
    out = tmp_path / "cal.toml"
    calibrate.save_preset(cal, str(out))
    m = hs.machine_config(config=str(out))
    c = m["cost"]
    assert c["pt_cache_lines"] == cal["fit"]["pt_cache_lines"] > 0
    assert c["cpu_ghz"] == 2.0 and "test cpu" in c["source"]


def test_microbenchmark_refuses_absurd_sizes():
    from hugescope import _core
    for spec in ({"footprint": 1 << 50}, {"footprint": 1 << 20, "pages": ["1g"]},
                 {"footprint": 1 << 20, "modes": ["stream"]}):
        with pytest.raises(Exception, match="footprint|pages|modes"):
            _core.microbench(json.dumps(spec))


def test_cli_refits_saved_measurements(tmp_path, capsys):
    ms = _synthetic_ms(3.0, 25.0, 110.0, 4096)
    meas = {"kind": "microbench", "when": "now", "cpu_model": "test cpu", "kernel": "k", "host": "h",
            "preset": "haswell-pcc", "config": None, "machine": "haswell-pcc", "start_cost": HASWELL["cost"],
            "host_ghz": 2.5, "microbench": ms}
    src = tmp_path / "m.json"
    src.write_text(json.dumps(meas))
    out = tmp_path / "p.toml"
    code, so, se = run_cli("calibrate", "--measurements", str(src), "--out", str(out), capsys=capsys)
    assert code == 0, se
    assert "walk cost vs footprint" in so
    assert "pt_cache_lines = 4096" in out.read_text()
    assert math.isclose(hs.machine_config(config=str(out))["cost"]["cpu_ghz"], 2.5)
    # Options of the workload fit are refused here, with one line.
    code, so, se = run_cli("calibrate", "--measurements", str(src), "--fit-ghz", "--dry-run", capsys=capsys)
    assert code == 2 and "--workload" in se
