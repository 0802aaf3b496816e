"""Calibration and validation: the fit recovers known parameters exactly, the
saved preset loads as a machine configuration, validate's rankings give valid
plans, the Spearman function matches hand-computed values, and the CLI refuses
bad arguments with one clear line. Real native runs here are tiny (16 MiB
GUPS); the full runs are documented in docs/linux.md."""

from __future__ import annotations

import json
import math
import os

import pytest

import hugescope as hs
from hugescope import calibrate, linux, validate
from conftest import run_cli

START = hs.machine_config("haswell-pcc")["cost"]
MIB = 1 << 20


def _counts(accesses, l1, l2, refs, pwc):
    return {"accesses": accesses, "l1_hits": l1, "l2_hits": l2, "walk_refs": refs, "pwc_hits": pwc}


def _synthetic(b, w, ghz):
    """Measured times made from the model itself with known parameters."""
    cost = dict(START, base_cycles_per_access=b, walk_ref_cycles=w, cpu_ghz=ghz)
    counts = {  # GUPS-like (a walk per access) and BFS-like (few walks, many L2 hits)
        "gups": (_counts(80e6, 40e6, 0.15e6, 77e6, 40e6), _counts(80e6, 42.5e6, 37.5e6, 514, 511)),
        "bfs": (_counts(69e6, 47e6, 19.4e6, 2.7e6, 2.5e6), _counts(69e6, 69e6, 0.2e6, 71, 68)),
        "kv": (_counts(30e6, 20e6, 5e6, 9e6, 4e6), _counts(30e6, 29e6, 1e6, 100, 90)),
    }
    return [{"workload": n, "base": {"counts": c4, "time_s": calibrate.cycles(c4, cost) / (ghz * 1e9)},
             "huge": {"counts": c2, "time_s": calibrate.cycles(c2, cost) / (ghz * 1e9)}}
            for n, (c4, c2) in counts.items()]


@pytest.mark.parametrize("objective", ["speedup", "time"])
def test_fit_recovers_known_parameters(objective):
    pts = _synthetic(b=7.5, w=13.0, ghz=2.6)
    r = calibrate.fit(pts, START, objective=objective, ghz=2.6)
    assert r["cost"]["base_cycles_per_access"] == pytest.approx(7.5, rel=1e-9)
    assert r["cost"]["walk_ref_cycles"] == pytest.approx(13.0, rel=1e-9)
    for a in r["after"]:
        assert a["speedup_residual"] == pytest.approx(0.0, abs=1e-9)
        assert a["base_s_residual"] == pytest.approx(0.0, abs=1e-9)
    # The latencies that are not fitted are held at the preset's values.
    assert r["cost"]["l2_hit_cycles"] == START["l2_hit_cycles"]
    # The clock, fitted from absolute times, comes back too.
    r2 = calibrate.fit(pts, START, objective=objective, ghz=1.0, fit_ghz=True)
    if objective == "speedup":  # the speedup fit does not depend on the clock
        assert r2["cost"]["cpu_ghz"] == pytest.approx(2.6, rel=1e-9)


def test_fit_keeps_parameters_non_negative():
    # Huge pages measured *slower* than base pages: the unconstrained optimum has a
    # negative walk cost; the fit clamps it at zero.
    pts = _synthetic(b=7.5, w=13.0, ghz=2.6)
    for p in pts:
        p["base"]["time_s"], p["huge"]["time_s"] = p["huge"]["time_s"], p["base"]["time_s"] * 1.2
    for objective in ("speedup", "time"):
        c = calibrate.fit(pts, START, objective=objective, ghz=2.6)["cost"]
        assert c["base_cycles_per_access"] >= 0 and c["walk_ref_cycles"] >= 0


def test_nnls_by_hand():
    # y = 2x exactly in one unknown; the other would want to be negative.
    x, rss = calibrate.nnls([[1, -1], [2, -2.5], [3, -3]], [2, 4, 6])
    assert x == pytest.approx([2.0, 0.0]) and rss == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="objective"):
        calibrate.fit(_synthetic(1, 1, 1), START, objective="walks")


def test_saved_preset_loads_with_fitted_values(tmp_path):
    pts = _synthetic(b=7.5, w=13.0, ghz=2.6)
    for p in pts:
        p["label"] = p["workload"]
    cal = {"host": "testhost", "when": "2025-01-01 00:00 UTC", "preset": "haswell-pcc", "machine": "haswell-pcc",
           "host_ghz": 2.6, "how": "synthetic", "points": pts, "thp": {"enabled": "madvise"},
           "fit": calibrate.fit(pts, START, ghz=2.6)}
    # A fresh machine has no ~/.config/hugescope yet: saving creates it.
    path = calibrate.save_preset(cal, tmp_path / "fresh" / "hugescope" / "cal.toml")
    text = open(path).read()
    assert text.count('preset = "haswell-pcc"') == 1 and "[cost]" in text
    m = hs.machine_config(config=path)
    assert m["cost"]["base_cycles_per_access"] == pytest.approx(7.5, rel=1e-5)
    assert m["cost"]["walk_ref_cycles"] == pytest.approx(13.0, rel=1e-5)
    assert m["cost"]["cpu_ghz"] == pytest.approx(2.6, rel=1e-5)
    assert "testhost" in m["cost"]["source"] and "2025-01-01" in m["cost"]["source"]
    assert m["l2"] == hs.machine_config("haswell-pcc")["l2"]  # the rest is the starting preset


def test_preset_calibrated_resolves_to_the_saved_file(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert calibrate.machine_args("haswell-pcc") == {"preset": "haswell-pcc", "config": None}
    with pytest.raises(hs.HugescopeError, match="hugescope calibrate"):
        calibrate.machine_args("calibrated")
    os.makedirs(tmp_path / "hugescope")
    (tmp_path / "hugescope" / "calibrated.toml").write_text('preset = "haswell-pcc"\n[cost]\nwalk_ref_cycles = 9.5\n')
    args = calibrate.machine_args("calibrated")
    assert args["config"] == calibrate.default_path() and args["preset"] is None
    assert hs.machine_config(**args)["cost"]["walk_ref_cycles"] == 9.5


def test_spearman_hand_computed():
    assert validate.ranks([10, 20, 20, 30]) == [1, 2.5, 2.5, 4]
    assert validate.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert validate.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # No ties: 1 - 6 sum d^2 / (n (n^2 - 1)); d = (0, -1, 1, 0, 0) -> 1 - 12/120 = 0.9.
    assert validate.spearman([1, 2, 3, 4, 5], [1, 3, 2, 4, 5]) == pytest.approx(0.9)
    # Ties: ranks x = (1, 2.5, 2.5, 4), y = (1, 2, 3, 4); by hand: sxy = 4.5,
    # sxx = 4.5, syy = 5 -> 4.5 / sqrt(22.5) = 0.9486833.
    assert validate.spearman([1, 2, 2, 3], [5, 6, 7, 8]) == pytest.approx(4.5 / math.sqrt(22.5))
    assert validate.spearman([1, 1, 1], [1, 2, 3]) is None
    assert validate.spearman([1], [2]) is None


def test_rankings_give_valid_plans(gups_trace):
    layout = hs.workloads.layout("gups", size="64MiB", updates=200_000, seed=3)
    cand = validate.candidate_regions(layout)
    assert cand and all(a % (2 * MIB) == 0 for a in cand)
    assert len(cand) == 32  # a 64 MiB table at a 2 MiB-aligned base
    rank = validate.rankings(gups_trace, ["pcc", "oracle", "random"], [1, 2, 4], cand, layout["footprint"],
                             seed=7, duration=60.0)
    assert set(rank) == {(p, k) for p in ("pcc", "oracle", "random") for k in (1, 2, 4)}
    cset = set(cand)
    for (pol, k), regs in rank.items():
        assert len(regs) <= k and len(set(regs)) == len(regs)
        assert set(regs) <= cset, (pol, k)
        plan = validate.make_plan(regs)
        # The core's own plan validation accepts it; the entries (adjacent
        # regions merged by the plan emitter) cover exactly the chosen regions.
        p = linux.load_plan(plan)
        covered = [e["start"] + i for e in p["entries"] for i in range(0, e["length"], 2 * MIB)]
        assert sorted(covered) == sorted(regs), (pol, k)
        for e in p["entries"]:
            assert e["start"] % (2 * MIB) == 0 and e["length"] % (2 * MIB) == 0 and e["when"] == "start"
        assert validate.plan_regions(plan["entries"]) == sorted(regs)
    assert len(rank[("oracle", 4)]) == 4 and len(rank[("random", 4)]) == 4
    # The random ranking is seeded and nested.
    assert rank[("random", 2)] == rank[("random", 4)][:2]
    assert validate.random_ranking(cand, 7) == validate.random_ranking(cand, 7)
    assert validate.plan_regions([{"start": "0x100000000000", "length": "4MiB", "page_size": "2MiB"},
                                  {"start": 0x100000200000, "length": 2 * MIB, "page_size": 2 * MIB},
                                  {"start": 0x100040000000, "length": "1GiB", "page_size": "1GiB"}]) == \
        [0x100000000000, 0x100000200000]
    with pytest.raises(ValueError, match="aligned"):
        validate.make_plan([4096])


def refit_calibration(tmp_path, capsys):
    """'calibrate --measurements M --out TMP/c.toml' on synthetic measurements
    (no runs): (exit code, stdout, stderr); the file is TMP/c.toml. advise's
    test uses the file as its --config too."""
    pts = _synthetic(b=7.5, w=13.0, ghz=2.6)
    for p in pts:
        p["label"] = p["workload"]
    meas = {"host": "h", "when": "now", "preset": "haswell-pcc", "machine": "haswell-pcc", "start_cost": START,
            "host_ghz": 2.6, "how": "synthetic", "points": pts, "thp": {"enabled": "madvise"}}
    (tmp_path / "m.json").write_text(json.dumps(meas))
    return run_cli("calibrate", "--measurements", tmp_path / "m.json", "--out", tmp_path / "c.toml", capsys=capsys)


def test_calibrate_cli_refits_measurements(tmp_path, capsys):
    code, out, err = refit_calibration(tmp_path, capsys)
    assert code == 0, err
    assert "+0.0%" in out and "saved the calibrated preset" in out
    assert hs.machine_config(config=str(tmp_path / "c.toml"))["cost"]["walk_ref_cycles"] == pytest.approx(13.0, rel=1e-5)


def test_cli_refuses_bad_arguments(capsys, tmp_path):
    def one_error(*args, words):
        code, out, err = run_cli(*args, capsys=capsys)
        assert code == 2, (args, out, err)
        lines = [ln for ln in err.strip().splitlines() if ln.strip()]
        assert lines[0].startswith("error:") and words in " ".join(lines), (args, err)

    one_error("calibrate", "--workload", "nosuch", "--dry-run", words="unknown workload 'nosuch'")
    one_error("calibrate", "--workload", "gups:size", "--dry-run", words="not key=value")
    one_error("calibrate", "--workload", "gups:size=12x", "--dry-run", words="size")
    one_error("calibrate", "--ghz", "2", "--fit-ghz", words="--fit-ghz")
    one_error("calibrate", "--preset", "calibrated", words="paper preset")
    one_error("calibrate", "--measurements", tmp_path / "missing.json", words="missing.json")
    one_error("validate", "nosuch", "-o", tmp_path, words="unknown workload 'nosuch'")
    one_error("validate", "gups", "--size", "16MiB", "--ks", "0", "-o", tmp_path, words="ks")
    one_error("validate", "gups", "--size", "16MiB", "--policies", "pcc,bogus", "-o", tmp_path, words="bogus")
    one_error("validate", "gups", "--size", "16MiB", "--preset", "calibrated", "--config", tmp_path / "x.toml",
              "-o", tmp_path, words="calibrated")
    for args, words in ((["calibrate", "--repeat", "0"], "at least 1"), (["calibrate", "--objective", "x"], "invalid choice")):
        with pytest.raises(SystemExit) as e:
            run_cli(*args)
        assert e.value.code == 2 and words in capsys.readouterr().err


THP = linux.thp_state()


@pytest.mark.skipif(THP["pmd_mode"] != "madvise" or not THP["plans_applicable"],
                    reason="needs THP mode 'madvise' (a base-page baseline and MADV_COLLAPSE)")
def test_validate_tiny_end_to_end(tmp_path, capsys):
    code, out, err = run_cli("validate", "gups", "--size", "16MiB", "--updates", "200k", "--ks", "1,4",
                             "--policies", "oracle,random", "--repeat", "1", "--warmup", "0", "-o", tmp_path,
                             capsys=capsys)
    assert code == 0, err
    assert "Spearman" in out
    data = json.load(open(tmp_path / "validate-gups.json"))
    assert data["hugescope_experiment"] == "validate" and os.path.exists(tmp_path / "validate-gups.png")
    kinds = {(r["quantity"], r["kind"]) for r in data["rows"]}
    assert kinds == {("predicted", "estimate"), ("measured", "measurement")}
    assert len(data["rows"]) == 2 * 2 * 2
    for r in data["rows"]:
        assert r["speedup"] > 0
    from hugescope import report
    html_path = report.build(str(tmp_path), str(tmp_path / "r.html"))
    assert "Spearman" in open(html_path).read()


# The numbers the hand-written solvers gave (all-subsets NNLS, Pearson of
# averaged ranks) on fixed inputs, computed before the switch to scipy and
# pinned here: scipy's nnls and spearmanr must give the same answers.
PINNED_A = [[6.251, 8.972, 7.757], [2.252, 3.002, 8.736], [0.053, 8.212, 7.971], [4.679, 3.03, 2.784],
            [2.549, 4.451, 5.045], [5.535, 9.955, 7.927], [6.222, 9.89, 2.153], [1.602, 6.125, 0.439]]
PINNED_Y = [16.428, 8.816, 3.336, 10.588, 7.606, 15.067, 13.061, 3.28]


def test_scipy_nnls_matches_the_previous_solver():
    x, rss = calibrate.nnls(PINNED_A, PINNED_Y)
    assert x == pytest.approx([2.0031053643556214, 0.0, 0.47365463210529074], rel=1e-9, abs=1e-12)
    assert rss == pytest.approx(0.6501884758410451, rel=1e-9)
    # A case where the unconstrained optimum has a negative unknown.
    x, rss = calibrate.nnls([[1, 2], [2, 1], [3, 3], [4, 1]], [-1, 2, 0.5, 3])
    assert x == pytest.approx([0.55, 0.0], abs=1e-12)
    assert rss == pytest.approx(5.175, rel=1e-9)


def test_scipy_spearman_matches_the_previous_implementation():
    xs = [1.5, 2.0, 2.0, 3.1, 0.7, 4.4, 2.0, 5.0]
    ys = [1.02, 1.10, 1.05, 1.30, 0.99, 1.25, 1.11, 1.40]
    assert validate.spearman(xs, ys) == pytest.approx(0.9515025711248198, rel=1e-12)
    assert validate.ranks(xs) == [2, 4, 4, 6, 1, 7, 4, 8]


def test_machine_label_names_the_machine_actually_used(tmp_path, monkeypatch):
    # Issue #38: '--preset calibrated' printed "cost model (default preset)".
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert calibrate.machine_label() == "preset haswell-pcc (the default)"
    assert calibrate.machine_label("modern-x86") == "preset modern-x86"
    cfg = tmp_path / "cal.toml"
    cfg.write_text('preset = "modern-x86"\n[cost]\nwalk_ref_cycles = 20\n')
    assert calibrate.machine_label(None, str(cfg)) == f"config {cfg} (over preset modern-x86)"
    with pytest.raises(hs.HugescopeError, match="hugescope calibrate"):
        calibrate.machine_label("calibrated")
    os.makedirs(tmp_path / "hugescope")
    (tmp_path / "hugescope" / "calibrated.toml").write_text(cfg.read_text())
    path = calibrate.default_path()
    assert calibrate.machine_label("calibrated") == f"calibrated ({path}, over preset modern-x86)"


def test_calibrate_help_describes_what_it_runs_by_default(capsys):
    # Issue #38: the help described the workload fit, which runs only with
    # --workload; by default calibrate runs the walk microbenchmarks.
    with pytest.raises(SystemExit) as e:
        run_cli("calibrate", "--help", capsys=capsys)
    assert e.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    default, _, with_workload = text.partition("With --workload:")
    assert "By default: run pointer-chase microbenchmarks" in default and "walk_ref_mem_cycles" in default
    assert "base_cycles_per_access" not in default and "base_cycles_per_access" in with_workload
