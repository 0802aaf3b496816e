"""The validation suite: noise floor and tie detection on hand-computed
values, interleaved order, the leave-one-workload-out split, Spearman over
ties, the cost-model stand-in's fit, and the whole suite's plumbing (plans,
measured speedups, outputs, scatter, report) on tiny workloads with
measurements injected, so nothing here is timed. One real native run checks
that a run is pinned to the CPU it was given."""

from __future__ import annotations

import json
import math
import os

import pytest

from hugescope import cost_model, linux, noise, report, validate_suite as vs
from conftest import run_cli

CPU = min(os.sched_getaffinity(0))


# ---------------------------------------------------------------- noise floor, ties, order

def test_noise_floor_is_the_largest_log_ratio_of_identical_runs():
    assert noise.noise_floor([(1.0, 1.1), (2.0, 2.0), (1.05, 1.0)]) == pytest.approx(math.log(1.1))
    assert noise.noise_floor([(1.0, 1.0)]) == 0.0
    with pytest.raises(ValueError, match="at least one pair"):
        noise.noise_floor([])
    with pytest.raises(ValueError, match="positive"):
        noise.noise_floor([(1.0, 0.0)])
    f = math.log(1.05)
    assert noise.above_floor(1.06, f) and noise.above_floor(1 / 1.06, f)
    assert not noise.above_floor(1.04, f) and not noise.above_floor(1 / 1.04, f)


def test_tie_groups_anchor_on_the_smallest_member():
    f = math.log(1.03)
    # 1.00 and 1.02 tie; 1.05 is 5% above the group's anchor; 1.30 and 1.31 tie.
    assert noise.tie_groups([1.30, 1.00, 1.05, 1.31, 1.02], f) == [2, 0, 1, 2, 0]
    assert noise.tied([1.30, 1.00, 1.05, 1.31, 1.02], f) == pytest.approx([1.305, 1.01, 1.05, 1.305, 1.01])
    # A slope of 2% steps does not chain into one group.
    assert noise.tie_groups([1.00, 1.02, 1.04, 1.06], f) == [0, 0, 1, 1]
    # A zero floor ties only equal values.
    assert noise.tie_groups([1.1, 1.2, 1.1], 0.0) == [0, 1, 0]


def test_interleaved_runs_base_plans_base_each_round_after_warmup():
    calls, preps = [], []

    def run_one(name):
        calls.append(name)
        return {"wall_s": 1.0 + len(calls) / 100}

    def prep():
        preps.append(1)
        return {"compacted": False, "seconds": 0.0}

    runs = noise.interleaved(["base", "a", "b", "base"], run_one, rounds=2, warmup=1, prepare=prep)
    assert calls == ["base"] + ["base", "a", "b", "base"] * 2
    assert len(preps) == len(calls)  # memory prepared before every run, warm-up included
    assert [(r["round"], r["position"], r["name"]) for r in runs] == [
        (0, 0, "base"), (0, 1, "a"), (0, 2, "b"), (0, 3, "base"), (1, 0, "base"), (1, 1, "a"), (1, 2, "b"),
        (1, 3, "base")]
    assert runs[0]["wall_s"] == pytest.approx(1.02)  # the warm-up's record is not kept
    with pytest.raises(ValueError, match="rounds"):
        noise.interleaved(["a"], run_one, rounds=0)
    with pytest.raises(ValueError, match="positive wall time"):
        noise.interleaved(["a"], lambda n: {"wall_s": 0}, rounds=1, warmup=0, prepare=prep)


def test_the_cpu_clock_times_runs_by_their_own_cpu_time_and_keeps_the_wall_time_beside_it():
    """A base run preempted for 0.5 s of its wall time (user + sys the same
    as the other's): on the wall clock the pair is 1.0 / 1.5 s apart, on the
    cpu clock 0.9 + 0.1 = 1.0 s each, and the floor is zero."""
    recs = iter([{"wall_s": 1.0, "user_s": 0.9, "sys_s": 0.1}, {"wall_s": 1.5, "user_s": 0.9, "sys_s": 0.1}] * 2)
    prep = lambda: {"compacted": False, "seconds": 0.0}
    by = {}
    for clock in ("wall", "cpu"):
        runs = noise.interleaved(["base", "base"], lambda n: next(recs), rounds=1, warmup=0, prepare=prep, clock=clock)
        assert [r["clock"] for r in runs] == [clock] * 2 and [r["wall_s"] for r in runs] == [1.0, 1.5]
        by[clock] = noise.noise_floor([[r["t_s"] for r in runs]])
    assert by["wall"] == pytest.approx(math.log(1.5)) and by["cpu"] == 0.0
    with pytest.raises(ValueError, match="user_s and sys_s"):
        noise.interleaved(["a"], lambda n: {"wall_s": 1.0}, rounds=1, warmup=0, prepare=prep, clock="cpu")
    with pytest.raises(ValueError, match="clock must be one of wall, cpu"):
        noise.interleaved(["a"], lambda n: {"wall_s": 1.0}, rounds=1, warmup=0, prepare=prep, clock="tsc")


def test_the_cpu_clock_reads_the_exact_runtime_before_the_tick_sampled_split():
    """``cpu_s`` (CLOCK_THREAD_CPUTIME_ID) is the cpu clock's time when a
    record has it: the rusage split beside it is sampled at the timer tick
    (here a 52.3 ms phase whose split reads 56 ms, one 4 ms tick high). A
    record from before ``cpu_s`` falls back to user + sys."""
    exact = {"wall_s": 0.0600, "user_s": 0.052, "sys_s": 0.004, "cpu_s": 0.0523}
    assert noise.measured_time(exact, "cpu") == 0.0523 and noise.cpu_time_of(exact) == 0.0523
    old = {"wall_s": 0.0600, "user_s": 0.052, "sys_s": 0.004}
    assert noise.measured_time(old, "cpu") == pytest.approx(0.056)
    assert noise.cpu_time_of({"wall_s": 1.0}) is None and noise.cpu_time_of({"cpu_s": True, "user_s": 1.0}) is None
    # The load record takes the run's own share out with the same time: one
    # CPU, 90 of 100 jiffies busy, the run's own 52.3 ms of its 60 ms wall.
    snaps = iter([{0: (0, 0)}, {0: (0, 0)}, {0: (10, 100)}])
    rec = noise.with_load(lambda name: exact, stat=lambda: next(snaps))("base")
    assert rec["others_busy_share"] == pytest.approx(0.9 - 0.0523 / 0.06)


def test_least_loaded_cpu_picks_the_most_idle():
    samples = iter([{0: (100, 200), 1: (100, 200), 2: (100, 200)},
                    {0: (110, 300), 1: (190, 300), 2: (190, 300)}])
    # cpu 1 and 2 were 90% idle, cpu 0 10%: the lower-numbered of the two.
    assert noise.least_loaded_cpu(0.0, allowed=[0, 1, 2], stat=lambda: next(samples)) == 1
    with pytest.raises(ValueError, match="not one this process may use"):
        noise.check_cpu(max(os.sched_getaffinity(0)) + 1)


# ---------------------------------------------------------------- plans and splits

def test_plan_ks_and_distinct_plans():
    assert vs.plan_ks(512, vs.DEFAULT_FRACTIONS) == [64, 128, 256]
    assert vs.plan_ks(512, [1 / 16, 0.125, 0.126]) == [32, 64, 65]
    assert vs.plan_ks(2, vs.DEFAULT_FRACTIONS) == [1]
    assert vs.plan_ks(1, vs.DEFAULT_FRACTIONS) == []  # k = 1 of 1 region is the all-huge plan
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        vs.plan_ks(8, [0.5, 1.0])
    cand = [0, 2, 4, 6]
    rank = {("pcc", 1): [4], ("oracle", 1): [4], ("hawkeye", 1): [], ("pcc", 2): [4, 0], ("oracle", 2): [2, 4],
            ("hawkeye", 2): [0, 2, 4, 6]}
    plans = vs.distinct_plans(rank, ["pcc", "oracle", "hawkeye"], cand)
    assert [(p["plan"], p["regions"], p["sources"]) for p in plans] == [
        ("base", [], ["hawkeye k=1"]),
        ("pcc k=1", [4], ["pcc k=1", "oracle k=1"]),
        ("pcc k=2", [0, 4], ["pcc k=2"]),
        ("oracle k=2", [2, 4], ["oracle k=2"]),
        ("all huge", [0, 2, 4, 6], ["hawkeye k=2"]),
    ]


def test_loo_split_holds_out_each_workload_once():
    assert vs.loo_splits(["a", "b", "c", "a"]) == [("a", ["b", "c"]), ("b", ["a", "c"]), ("c", ["a", "b"])]
    with pytest.raises(ValueError, match="at least two"):
        vs.loo_splits(["a"])


def _row(w, plan, measured, pred, ranked=True, floor=math.log(1.03)):
    return {"workload": w, "plan": plan, "measured": measured, "predicted_loo": pred, "ranked": ranked,
            "floor": floor}


def test_spearman_over_ties_and_ranked_plans_only():
    rows = [_row("w", "base", 1.0, 1.0, ranked=False),
            # 1.30 and 1.31 tie (within 3%): their order against the predictions does not count.
            _row("w", "a", 1.30, 1.5), _row("w", "b", 1.31, 1.4), _row("w", "c", 2.0, 2.2),
            # Within the floor of base: not ranked, its wild prediction changes nothing but the all-plans error.
            _row("w", "d", 1.01, 3.0, ranked=False)]
    s = vs.stats(rows, "predicted_loo")
    w = s["per_workload"]["w"]
    assert (w["plans"], w["ranked"], w["distinct"]) == (4, 3, 2)
    # ranks: predicted (2, 1, 3), measured tied (1.5, 1.5, 3): Pearson of those = sqrt(3)/2.
    assert w["spearman"] == pytest.approx(math.sqrt(3) / 2)
    assert s["spearman"] == pytest.approx(math.sqrt(3) / 2)
    # |1.5/1.3-1|=.1538, |1.4/1.31-1|=.0687, |2.2/2-1|=.1: median .1 ranked; with |3/1.01-1|=1.97
    # the four's median is (.1+.1538)/2.
    assert w["median_abs_error"] == pytest.approx(0.1)
    assert w["median_abs_error_all"] == pytest.approx((0.1 + 0.2 / 1.3) / 2)
    # Without the tie, the same plans would have counted as a rank inversion.
    rows[1]["floor"] = 0.0
    assert vs.stats(rows, "predicted_loo")["per_workload"]["w"]["spearman"] == pytest.approx(0.5)


# ---------------------------------------------------------------- the cost model through the suite

def _points(overlap, mem_ns):
    params = dict(cost_model.DEFAULT_PARAMS, overlap=overlap, walk_ref_mem_ns=mem_ns)
    huge = {"accesses": 1e8, "l1_hits": 1e8, "l2_hits": 1e5, "walks": 1e3, "walk_refs": 1e3, "walk_refs_llc": 1e3,
            "walk_refs_mem": 0.0, "pwc_hits": 0.0}
    pts = []
    for w, t_huge, refs in (("a", 0.5, [8e7, 4e7, 1e7]), ("b", 1.0, [2e7, 1e7, 1e6]), ("c", 0.2, [5e6, 2e6, 1e4])):
        for i, r in enumerate(refs):
            f = dict(huge, walk_refs=r, walk_refs_llc=r / 2, walk_refs_mem=r / 2, l2_hits=1e5 + r / 10)
            pt = {"workload": w, "plan": "base" if i == 0 else f"p{i}", "features": f, "features_huge": huge,
                  "t_huge": t_huge}
            pt["t"] = cost_model.predict_seconds(pt, params)
            pts.append(pt)
    return pts, params


def test_suite_predictions_come_back_from_times_the_model_made():
    pts, true = _points(0.6, 120.0)
    got = cost_model.fit(pts, dict(cost_model.DEFAULT_PARAMS))
    assert set(got) == set(cost_model.PARAM_UNITS)
    pred = vs.predict_all(pts, got)
    for p in pts:
        b = next(q for q in pts if q["workload"] == p["workload"] and q["plan"] == "base")
        assert pred[(p["workload"], p["plan"])] == pytest.approx(b["t"] / p["t"], rel=1e-4)
    # Trained on two workloads, the third's speedups come back (the parameters are shared).
    loo = cost_model.fit([p for p in pts if p["workload"] != "c"], dict(cost_model.DEFAULT_PARAMS))
    held = vs.predict_all([p for p in pts if p["workload"] == "c"], loo)
    assert held[("c", "p2")] == pytest.approx(pts[6]["t"] / pts[8]["t"], rel=1e-3)


def test_cost_model_fit_refuses_bad_points():
    pts, _ = _points(0.6, 120.0)
    bad = [dict(p, t=0.0) if p["plan"] == "p1" else p for p in pts]
    with pytest.raises(ValueError, match="not positive"):
        cost_model.fit(bad)
    with pytest.raises(ValueError, match="unknown parameters"):
        cost_model.fit(pts, dict(cost_model.DEFAULT_PARAMS), free=("walk_cycles",))


# ---------------------------------------------------------------- the suite, measurements injected

def _fake_runner(log):
    """Times made from the plan: each workload's base alternates 1.00 / 1.01 s
    (noise floor ln 1.01); a plan of n regions takes 1 / (1 + 0.1 n) s."""
    state = {}

    def runner(name, params, cpu):
        assert cpu == CPU

        def run(plan_json):
            n = 0 if plan_json is None else sum(int(e["length"], 16) // (2 << 20) for e in plan_json["entries"])
            if n == 0:
                state[name] = state.get(name, 0) + 1
                t = 1.0 if state[name] % 2 else 1.01
            else:
                t = 1.0 / (1 + 0.1 * n)
            log.append((name, n))
            return {"wall_s": t, "coverage": None, "collapsed": n, "result": "same"}
        return run
    return runner


def test_suite_plumbing_with_injected_measurements(tmp_path, capsys):
    log, preps = [], []
    df = vs.suite("tiny", fractions=[0.25, 0.5], policies=["pcc", "oracle"], rounds=2, warmup=1, cpu=CPU,
                  out=str(tmp_path), runner=_fake_runner(log),
                  prepare_memory=lambda: preps.append(1) or {"compacted": False, "seconds": 0.0})
    meta = df.attrs["meta"]
    meas = df[df["quantity"] == "measured"]
    gups = meas[meas["workload"] == "gups-16m"].set_index("plan")
    # 8 candidate regions of 16 MiB: k = 2 and 4, then all huge (8).
    assert gups.loc["all huge", "regions"] == 8
    base_t = math.sqrt(1.0 * 1.01)
    assert gups.loc["all huge", "speedup"] == pytest.approx(base_t * 1.8)
    for plan, r in gups.iterrows():
        if plan != "base":
            assert r["speedup"] == pytest.approx(base_t * (1 + 0.1 * r["regions"]))
            assert r["speedup_min"] == pytest.approx(r["speedup"])  # the same time in both rounds
            assert bool(r["ranked"])  # every plan is > 1% from base
    assert gups.loc["base", "floor"] == pytest.approx(math.log(1.01))
    # Every run of a round in order: warm-up base, then base, the plans (all huge last), base, twice.
    n_plans = len(gups)  # base included
    g_runs = [n for w, n in log if w == "gups"]
    assert len(g_runs) == 1 + 2 * (n_plans + 1)
    assert g_runs[:n_plans + 2] == [0, 0] + [int(gups.loc[p, "regions"]) for p in gups.index[1:]] + [0]
    assert g_runs[n_plans] == 8
    assert len(preps) == len(log)
    # Predictions: a row per plan and quantity; the model is fitted LOO and in-sample.
    assert set(df["quantity"]) == {"measured", "predicted_loo", "predicted_in"}
    assert set(meta["loo_params"]) == {"gups-16m", "kv-small"}
    assert meta["summary"]["loo"]["plans"] == len(meas) - 2
    for f in ("validate-suite.csv", "validate-suite.json", "validate-suite.png", "validate-suite-workloads.csv",
              "validate-suite-runs.csv"):
        assert os.path.getsize(tmp_path / f) > 0, f
    data = json.load(open(tmp_path / "validate-suite.json"))
    assert data["hugescope_experiment"] == "validate-suite" and len(data["runs"]) == len(log) - 2  # no warm-ups
    assert {r["workload"] for r in data["workloads"]} == {"gups-16m", "kv-small"}
    # The gap base - all huge over the simulated walk references, at this host's clock.
    from hugescope.calibrate import host_ghz
    g = next(r for r in data["workloads"] if r["workload"] == "gups-16m")
    refs = [r["sim_walk_refs"] for r in data["rows"] if r["workload"] == "gups-16m"
            and r["quantity"] == "predicted_in" and r["plan"] in ("base", "all huge")]
    if host_ghz():
        assert g["implied_cycles_per_walk_ref"] == pytest.approx(
            (base_t - base_t / (base_t * 1.8)) * host_ghz() * 1e9 / (refs[0] - refs[1]))
    html = open(report.build(str(tmp_path), str(tmp_path / "r.html"))).read()
    assert "Validation suite" in html and "leave-one-workload-out" in html and "walk_ref_cycles" in html


def test_suite_checks_outputs_and_arguments_before_any_work(tmp_path):
    ran = []

    def runner(name, params, cpu):
        ran.append(name)
        return lambda plan: {"wall_s": 1.0}

    (tmp_path / "validate-suite.json").mkdir()  # an output that cannot be written
    with pytest.raises(Exception, match="validate-suite.json"):
        vs.suite("tiny", cpu=CPU, out=str(tmp_path), runner=runner)
    for kw, words in ((dict(suite_name="nosuch"), "unknown suite"), (dict(suite_name=None), "no workloads"),
                      (dict(policies=["pcc", "bogus"]), "bogus"), (dict(fractions=[2]), "strictly between"),
                      (dict(rounds=0), "rounds"), (dict(workload_specs=["gups", "gups"], suite_name=None), "twice")):
        with pytest.raises(ValueError, match=words):
            vs.suite(**{"suite_name": "tiny", "cpu": CPU, "runner": runner, **kw})
    assert ran == []


def test_suite_cli_errors_are_one_line(tmp_path, capsys):
    for args, words in ((["--suite", "tiny", "--fractions", "0.5,x"], "not a number"),
                        (["--suite", "tiny", "--cpu", str(max(os.sched_getaffinity(0)) + 1)], "may use"),
                        (["--workload", "nosuch"], "unknown workload")):
        code, out, err = run_cli("validate", *args, "-o", tmp_path, capsys=capsys)
        assert code == 2 and err.strip().splitlines()[0].startswith("error:") and words in err, (args, err)
    # Options argparse refuses: one error line too (not the usage block), exit 2.
    for args, words in ((["--nice", "-21"], "at least -20"), (["--clock", "tsc"], "invalid choice"),
                        (["--rounds", "0"], "at least 1")):
        with pytest.raises(SystemExit) as e:
            run_cli("validate", "--suite", "tiny", *args, "-o", tmp_path)
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(err) == 1 and err[0].startswith("error:") and words in err[0], (args, err)


THP = linux.thp_state()


@pytest.mark.skipif(THP["pmd_mode"] != "madvise" or not THP["plans_applicable"],
                    reason="needs THP mode 'madvise' (a base-page baseline and MADV_COLLAPSE)")
def test_native_run_is_pinned_to_the_cpu_given():
    r = linux.run("gups", repeat=1, warmup=0, cpu=CPU, size="4MiB", updates="10k").check()
    assert r.runs[0]["cpus"] == [CPU]
    with pytest.raises(ValueError, match="taskset"):
        linux.run(["true"], cpu=CPU)


@pytest.mark.skipif(THP["pmd_mode"] != "madvise" or not THP["plans_applicable"],
                    reason="needs THP mode 'madvise' (a base-page baseline and MADV_COLLAPSE)")
def test_native_run_sets_its_own_nice_value_and_leaves_ours():
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    group = open("/proc/self/autogroup").read() if os.path.exists("/proc/self/autogroup") else None
    r = linux.run("gups", repeat=1, warmup=0, nice=min(19, ours + 3), size="4MiB", updates="10k").check()
    assert r.runs[0]["nice"] == min(19, ours + 3) and os.getpriority(os.PRIO_PROCESS, 0) == ours
    if group is not None:
        # Its own session's scheduler group took the value; ours did not.
        assert r.runs[0]["autogroup"].endswith(f"nice {min(19, ours + 3)}"), r.runs[0]["autogroup"]
        assert open("/proc/self/autogroup").read() == group
    for bad, words in ((20, "from -20 to 19"), (True, "from -20 to 19"), ("5", "from -20 to 19")):
        with pytest.raises(ValueError, match=words):
            linux.run("gups", repeat=1, warmup=0, nice=bad, size="4MiB", updates="10k")
    with pytest.raises(ValueError, match="under nice"):
        linux.run(["true"], nice=5)
    if os.geteuid() != 0:
        with pytest.raises(ValueError, match="needs root"):
            noise.check_nice(-1)
