"""Experiments, plots, report and trace merging (docs/experiments.md).

Small traces only (scale 10-14 graphs, a few hundred thousand accesses); the
policies used here are the ones every build has (base, ideal, linux), since the
experiments are generic over policy names.
"""

import json
import os
import re
import subprocess
import sys

import pytest

import hugescope as hs
from hugescope import experiments as ex
from hugescope import workloads

HS = [sys.executable, "-m", "hugescope.cli"]


def cli(*args, cwd=None):
    return subprocess.run(HS + [str(a) for a in args], capture_output=True, text=True, cwd=cwd)


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("exp")
    bfs = str(d / "bfs.hst")
    pr = str(d / "pr.hst")
    workloads.trace("bfs", bfs, scale=14)
    workloads.trace("pagerank", pr, scale=10, iterations=2)
    return {"dir": d, "bfs": bfs, "pr": pr}


CURVE_COLUMNS = {"experiment", "policy", "policy_name", "role", "budget_pct", "frag_pct", "accesses", "walks",
                 "ptw_rate", "speedup_est", "huge_share", "promotions", "kind"}


def test_curve_is_a_tidy_table_with_reference_lines(traces, tmp_path):
    budgets = [0, 50, 100]
    df = ex.curve(traces["bfs"], policies=["linux", "linux:max_ptes_none=0"], budgets=budgets, frag_points=[50, 90],
                  duration=30, out=str(tmp_path))
    assert CURVE_COLUMNS <= set(df.columns)
    # one row per policy x budget, plus base, ideal and two fragmentation points
    assert len(df) == 2 * len(budgets) + 2 + 2
    assert list(df["role"]).count("curve") == 6
    assert set(df[df.role == "reference"].policy) == {"base", "ideal"}
    assert sorted(df[df.role == "point"].frag_pct) == [50, 90]
    assert (df["kind"] == "estimate").all()
    base = df[df.policy == "base"].iloc[0]
    ideal = df[df.policy == "ideal"].iloc[0]
    assert base.speedup_est == pytest.approx(1.0)
    # every configuration lies between the base and ideal reference lines
    assert (df["walks"] <= base.walks).all()
    assert (df["walks"] >= ideal.walks * 0.999).all()
    assert ideal.speedup_est > 1.0 and ideal.walks < base.walks
    # a 0% limit is base pages; more budget never adds walks (monotone curve)
    for _, g in df[df.role == "curve"].groupby("policy"):
        g = g.sort_values("budget_pct")
        assert g.iloc[0].walks == base.walks and g.iloc[0].huge_share == 0
        assert list(g.walks) == sorted(g.walks, reverse=True)
        # the limit counts whole 2MB regions: floor(N% x ceil(footprint / 2MB))
        assert (g.huge_bytes <= g.budget_bytes).all()
    # saved CSV and JSON describe the same rows
    data = ex.load(str(tmp_path / "curve-bfs.json"))
    assert data["hugescope_experiment"] == "curve" and len(data["rows"]) == len(df)
    assert data["machine"]["name"] and data["trace"]["workload"] == "bfs"
    assert (tmp_path / "curve-bfs.csv").read_text().splitlines()[0].startswith("policy,")


def test_curve_is_deterministic_and_threads_agree(traces):
    a = ex.curve(traces["bfs"], policies=["linux"], budgets=[0, 100], frag_points=[90], threads=1)
    b = ex.curve(traces["bfs"], policies=["linux"], budgets=[0, 100], frag_points=[90], threads=2)
    assert a.drop(columns=["virtual_seconds"]).equals(b.drop(columns=["virtual_seconds"]))


def test_frag_and_sensitivity_shapes(traces):
    df = ex.frag(traces["bfs"], levels=[50, 90], policies=["base", "linux"])
    assert len(df) == 4 and set(df.frag_pct) == {50, 90}
    assert df[df.frag_pct == 90].blocked_share.min() >= 0.85
    s = ex.sensitivity(traces["bfs"], pcc_sizes=[4, 16], budget=32, policy="linux", param="pages_to_scan")
    assert list(s[s.role == "curve"].policy) == ["linux:pages_to_scan=4", "linux:pages_to_scan=16"]
    assert list(s[s.role == "curve"]["size"]) == [4, 16]


def test_bad_arguments_give_clear_errors(traces):
    with pytest.raises(hs.HugescopeError, match=r"budgets: 150 is out of range \(expected 0\.\.100\)"):
        ex.curve(traces["bfs"], policies=["linux"], budgets=[150])
    with pytest.raises(hs.HugescopeError, match="unknown policy"):
        ex.curve(traces["bfs"], policies=["nosuchpolicy"], budgets=[0], frag_points=[])
    with pytest.raises(hs.HugescopeError, match="no such trace"):
        ex.frag("/nonexistent.hst")
    r = cli("sensitivity", traces["bfs"], "--pcc-sizes", "3..9")
    assert r.returncode == 2 and "power of two" in r.stderr and "Traceback" not in r.stderr


def test_pcc_size_lists():
    from hugescope.cli_experiments import _policies, parse_numbers

    assert parse_numbers("4..1024", "x", integer=True) == [4, 8, 16, 32, 64, 128, 256, 512, 1024]
    assert parse_numbers("4..16,100", "x", integer=True) == [4, 8, 16, 100]
    assert _policies("pcc:entries=64,demotion=true,hawkeye") == ["pcc:entries=64,demotion=true", "hawkeye"]


def test_reuse_classification_through_the_cli(traces, tmp_path):
    r = cli("reuse", traces["bfs"], "-o", tmp_path, "--max-points", 200)
    assert r.returncode == 0, r.stderr
    assert "HUB" in r.stdout and "neighbors" in r.stdout
    data = ex.load(str(tmp_path / "reuse-bfs.json"))
    assert data["kind"] == "measurement"
    rows = data["rows"]
    regions = {x["region"] for x in rows}
    assert {"offsets", "neighbors", "parent", "(all)"} <= regions
    for reg in regions:
        shares = [x["page_share"] for x in rows if x["region"] == reg]
        assert len(shares) == 3 and sum(shares) == pytest.approx(1.0)
    total = {x["class"]: x for x in rows if x["region"] == "(all)"}
    assert total["hub"]["class_pages"] > 0
    assert data["points_total"] == total["hub"]["pages"] > 200  # "pages" = all pages of the region
    assert len(data["points"]) == 200
    assert os.path.exists(tmp_path / "reuse-bfs-points.csv") and os.path.exists(tmp_path / "reuse-bfs.png")
    # the frontier bitmaps and queue are swept sequentially: TLB-friendly
    q = {x["class"]: x["page_share"] for x in rows if x["region"] == "queue"}
    assert q["tlb_friendly"] == pytest.approx(1.0)


def test_merge_round_trip(traces, tmp_path):
    out = str(tmp_path / "ab.hst")
    r = cli("merge", traces["bfs"], traces["pr"], "-o", out, "--slice", 1000)
    assert r.returncode == 0, r.stderr
    a, b, m = (hs.trace_info(p) for p in (traces["bfs"], traces["pr"], out))
    h = m["header"]
    assert h["processes"] == 2 and h["cpus"] == 2 and h["process_names"] == ["bfs", "pagerank"]
    assert m["summary"]["per_pid"] == [a["summary"]["accesses"], b["summary"]["accesses"]]
    assert [r["pid"] for r in h["regions"]] == [0] * len(a["header"]["regions"]) + [1] * len(b["header"]["regions"])
    assert len(m["summary"]["markers"]) == len(a["summary"]["markers"]) + len(b["summary"]["markers"])
    # the stream itself: each pid's records are its input's, in order, on its own cpu
    from hugescope import trace_reader
    ra, rb, rm = (trace_reader.read_accesses(p) for p in (traces["bfs"], traces["pr"], out))
    assert (rm["pid"][:1000] == 0).all() and (rm["pid"][1000:2000] == 1).all()
    for pid, src in ((0, ra), (1, rb)):
        mine = rm[rm["pid"] == pid]
        assert (mine["addr"] == src["addr"]).all() and (mine["write"] == src["write"]).all()
        assert (mine["cpu"] == pid).all()
    # merged traces run through the multi-process experiment
    df, procs, tl = ex.multi(out, policies=["linux"], budgets=[0, 100], timeline_samples=20)
    assert len(df) == 3 and set(procs.pid) == {0, 1}
    assert procs[procs.role == "reference"].walk_reduction.notna().all()
    assert len(tl) and set(tl.pid) == {0, 1}
    # Each process's own cycles are its cpu's accesses and translation: they
    # add up to the run's base + translation cycles (OS time is the run's),
    # and its speedup is its base-page cycles over them.
    runs = hs.compare(out, ["linux"], preset="haswell-pcc")
    cost, base = runs[0].record.cost, runs[0].record.base.cost
    assert len(cost.per_cpu_cycles) == 2
    assert sum(cost.per_cpu_cycles) == pytest.approx(cost.base_cycles + cost.translation_cycles, rel=1e-12)
    ref = procs[procs.role == "reference"].set_index("pid")
    ideal = hs.compare(out, ["ideal"], preset="haswell-pcc")[0].record
    for pid in (0, 1):
        assert ref.loc[pid, "cycles_est"] == pytest.approx(ideal.cost.per_cpu_cycles[pid], rel=1e-12)
        assert ref.loc[pid, "speedup_est"] == pytest.approx(
            ideal.base.cost.per_cpu_cycles[pid] / ideal.cost.per_cpu_cycles[pid], rel=1e-12)
    assert base.per_cpu_cycles[0] > 0
    # A single-cpu trace's result carries no per-cpu prices.
    single = hs.compare(traces["bfs"], ["linux"], preset="haswell-pcc")[0].record
    assert "per_cpu_cycles" not in single.cost and "per_cpu" not in single.translation


def test_report_is_self_contained_and_has_every_figure(traces, tmp_path):
    res = tmp_path / "res"
    ex.curve(traces["bfs"], policies=["linux"], budgets=[0, 100], frag_points=[90], out=str(res))
    ex.frag(traces["bfs"], levels=[90], policies=["base", "linux"], out=str(res))
    ex.sensitivity(traces["bfs"], pcc_sizes=[4, 8], policy="linux", param="pages_to_scan", out=str(res))
    ex.reuse(traces["bfs"], max_points=300, out=str(res))
    merged = str(tmp_path / "ab.hst")
    ex.merge([traces["bfs"], traces["pr"]], merged, slice=5000)
    ex.multi(merged, policies=["linux"], budgets=[0, 100], timeline_samples=10, out=str(res))
    # a real-Linux result is labelled as a measurement
    (res / "native-bfs.json").write_text(json.dumps({
        "hugescope_experiment": "native", "kind": "measurement", "trace": {"workload": "bfs"},
        "rows": [{"policy": "thp", "seconds": 1.25}]}))
    out = tmp_path / "report.html"
    r = cli("report", res, "-o", out)
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    attrs = re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', text, flags=re.I)
    # A data: URI is inline content; its base64 can spell "hTtP" by chance
    # (about once per MB), so only the other addresses are looked at.
    assert attrs and not any("http" in v.lower() for v in attrs if not v.startswith("data:"))
    assert not re.search(r"<(script|link|iframe)\b", text, flags=re.I)
    assert "url(" not in text and "@import" not in text
    imgs = re.findall(r'<img [^>]*src="data:image/png;base64,', text)
    # curve 1, frag 1, sensitivity 1, reuse 2, multi 2
    assert len(imgs) == 7
    for title in ("Fig. 5", "Fig. 7", "Fig. 6", "Fig. 2", "Figs. 8-9"):
        assert title in text
    assert "estimate (cost model)" in text and "measurement" in text
    assert "haswell" in text  # machine preset in the configuration


def test_report_errors(tmp_path):
    r = cli("report", tmp_path)
    assert r.returncode == 2 and "no experiment results" in r.stderr


# ---------------------------------------------------------------- checkpoints and --resume

SWEEP = ["--policies", "linux,pcc", "--budgets", "0,4,32,100", "--frag-points", "50", "--duration", "60",
         "--no-plots", "--threads", "2"]


def _files(d):
    return {f: open(os.path.join(d, f), "rb").read() for f in sorted(os.listdir(d))}


def test_results_do_not_depend_on_grouping(traces, monkeypatch):
    # Each configuration has its own kernel and base is deterministic, so
    # batches of 1, 3 or all configurations give identical results.
    configs = [{"policy": p, "budget": b} for p in ("linux", "pcc", "hawkeye") for b in (0.0, 0.04, 1.0)]
    configs += [{"policy": "linux", "frag": 0.5}, {"policy": "ideal"}]
    runs = []
    for batch in (1, 3, 100):
        monkeypatch.setattr(ex, "BATCH", batch)
        runs.append([r.to_dict() for r in ex.run_configs(traces["bfs"], configs, duration=60, threads=2)])
    assert runs[0] == runs[1] == runs[2]


def test_shared_sweep_equals_separate_runs(tmp_path):
    # PCC sizes share one simulation until their reads decide differently
    # (the core's sweep.rs); the tables are identical to separate runs both
    # at the trace's own rate (no read: the sizes never split) and over 120
    # virtual seconds (reads at 30, 60, 90, 120 s tell the sizes apart).
    gups = str(tmp_path / "gups.hst")
    workloads.trace("gups", gups, size="16MiB", updates=100_000)  # 8 regions, all walked
    configs, _ = ex.sensitivity_configs([2, 4, 16], 100)
    for common in ({}, {"duration": 120}):
        shared = [r.to_dict() for r in ex.run_configs(gups, configs, threads=2, **common)]
        separate = [r.to_dict() for r in ex.run_configs(gups, configs, threads=2, share=False, **common)]
        assert shared == separate
    reads = [len(d["policy_params"]["intervals"]) for d in shared[:3]]
    assert reads == [4, 4, 4]  # at 30, 60, 90 and 120 s (the last access)
    # A 2-entry PCC promotes at most 2 regions per read: fewer in all (5 at
    # the time of writing) than the 4- and 16-entry ones, which take all 8.
    promos = [d["os_stats"]["promotions"] for d in shared[:3]]
    assert promos[0] < promos[1] == promos[2] == 8, promos


def _interrupt_after(monkeypatch, calls):
    """The core's sweep call raises Interrupted (as a SIGINT handler would)
    once ``calls`` batches have finished."""
    real = hs._core.run_specs
    seen = {"n": 0}

    def run_specs(*a, **kw):
        if seen["n"] == calls:
            raise hs.errors.Interrupted(2)
        seen["n"] += 1
        return real(*a, **kw)
    monkeypatch.setattr(hs._core, "run_specs", run_specs)


@pytest.mark.parametrize("cmd", ["curve", "frag", "sensitivity", "multi"])
def test_interrupted_sweep_resumes_to_identical_files(cmd, traces, tmp_path, monkeypatch, capsys):
    from hugescope import cli as hcli

    args = {"curve": SWEEP, "frag": ["--policies", "linux,pcc,hawkeye", "--levels", "50,90", "--no-plots"],
            "sensitivity": ["--pcc-sizes", "4..64", "--no-plots"],
            "multi": ["--policies", "pcc,linux", "--budgets", "1,4,16", "--no-plots"]}[cmd]
    whole, part = tmp_path / "whole", tmp_path / "part"
    monkeypatch.setattr(ex, "BATCH", 2)
    assert hcli.main([cmd, traces["bfs"], "-o", str(whole)] + args) == 0
    # The whole run's stderr (it may note reused cached reference runs) is
    # not the interrupted run's: read it away first.
    capsys.readouterr()
    with monkeypatch.context() as m:
        _interrupt_after(m, 2)
        assert hcli.main([cmd, traces["bfs"], "-o", str(part)] + args) == 130
    err = capsys.readouterr().err
    ckpt = part / f"{cmd}-bfs.checkpoint.json"
    assert "--resume" in err and str(ckpt) in err and len(err.strip().splitlines()) == 1, err
    assert os.listdir(part) == [ckpt.name]  # no result file, no temporary
    assert len(json.loads(ckpt.read_text())["results"]) == 4  # two batches of two kept
    # Without --resume the finished work is not thrown away silently.
    assert hcli.main([cmd, traces["bfs"], "-o", str(part)] + args) == 2
    assert "--resume" in capsys.readouterr().err
    calls = []
    real = hs._core.run_specs
    monkeypatch.setattr(hs._core, "run_specs", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    assert hcli.main([cmd, traces["bfs"], "-o", str(part), "--resume"] + args) == 0
    n = len(json.loads(open(whole / f"{cmd}-bfs.json").read())["rows"])
    assert len(calls) == -(-(n - 4) // 2)  # only the unfinished configurations ran
    assert _files(part) == _files(whole)  # byte-identical, checkpoint removed


def test_checkpoint_of_other_inputs_is_refused(traces, tmp_path, monkeypatch, capsys):
    from hugescope import cli as hcli

    monkeypatch.setattr(ex, "BATCH", 2)
    with monkeypatch.context() as m:
        _interrupt_after(m, 1)
        assert hcli.main(["curve", traces["bfs"], "-o", str(tmp_path)] + SWEEP) == 130
    ckpt = tmp_path / "curve-bfs.checkpoint.json"
    saved = ckpt.read_bytes()
    capsys.readouterr()
    other = [a if a != "60" else "90" for a in SWEEP]  # another --duration
    assert hcli.main(["curve", traces["bfs"], "-o", str(tmp_path), "--resume"] + other) == 2
    assert "different run" in capsys.readouterr().err
    # The same name for another trace (another workload at bfs.hst).
    d2 = tmp_path / "t2"
    d2.mkdir()
    workloads.trace("bfs", str(d2 / "bfs.hst"), scale=12)
    assert hcli.main(["curve", str(d2 / "bfs.hst"), "-o", str(tmp_path), "--resume"] + SWEEP) == 2
    assert "trace" in capsys.readouterr().err
    assert ckpt.read_bytes() == saved
    # A checkpoint with points deleted resumes them: same files as a whole run.
    data = json.loads(saved)
    del data["results"]["0"]
    ckpt.write_text(json.dumps(data))
    assert hcli.main(["curve", traces["bfs"], "-o", str(tmp_path), "--resume"] + SWEEP) == 0
    whole = tmp_path / "whole"
    assert hcli.main(["curve", traces["bfs"], "-o", str(whole)] + SWEEP) == 0
    assert (tmp_path / "curve-bfs.csv").read_bytes() == (whole / "curve-bfs.csv").read_bytes()
    assert not ckpt.exists()


@pytest.mark.parametrize("call, needle", [
    (lambda t: ex.curve(t, budgets=None), "budgets: expected a list"),
    (lambda t: ex.curve(t, policies=None), "policies: expected a list"),
    (lambda t: ex.curve(t, budgets=[float("nan")]), "budgets: nan is not a finite number"),
    (lambda t: ex.curve(t, budgets=[1], threads="x"), "threads: 'x' is not an integer"),
    (lambda t: ex.curve(t, budgets=[1], threads=10**6), "threads: 1000000 is out of range"),
    (lambda t: ex.curve(t, budgets=[1], seed=-1), "seed: -1 is out of range"),
    (lambda t: ex.curve(t, budgets=[1], duration=10, rate=5), "give one of them"),
    (lambda t: hs.api.simulate(t, seed=-1), "no effect without a policy"),
    (lambda t: hs.api.simulate(t, policy="linux", seed=-1), "seed: -1 is out of range"),
    (lambda t: hs.api.simulate(t, policy="linux", duration=float("inf")), "duration: inf is not a finite number"),
    (lambda t: hs.api.simulate(t, policy="linux", budget="150%"), "budget: '150%' is out of range"),
    (lambda t: hs.api.compare(t, None), "policies: expected a list"),
    (lambda t: hs.api.simulate(None), "trace: expected a path"),
    (lambda t: ex.reuse(t, max_points=-1), "max_points: -1 is out of range"),
    (lambda t: ex.reuse(t, alpha=float("nan")), "alpha: nan"),
    (lambda t: ex.merge([t, t], "m.hst", slice=-1), "slice: -1 is out of range"),
    (lambda t: ex.merge(t, "m.hst"), "inputs: expected a list"),
    (lambda t: ex.sensitivity(t, pcc_sizes=[-4]), "PCC sizes: -4 is out of range"),
    (lambda t: ex.multi(t, timeline_samples=0), "timeline_samples: 0 is out of range"),
    (lambda t: workloads.trace("gups", "x.hst", limit=-1), "limit: -1 is out of range"),
])
def test_python_api_raises_hugescope_error(call, needle, traces, tmp_path, monkeypatch):
    # Never an OverflowError or TypeError from inside: the documented type, one message.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(hs.HugescopeError) as e:
        call(traces["bfs"])
    assert needle in str(e.value)
    assert os.listdir(tmp_path) == []


def test_curve_table_cuts_no_value_on_an_80_column_terminal(monkeypatch):
    # Issue #38: an 80-column terminal cut the role "reference" to "refere...".
    import pandas as pd
    from rich.console import Console
    from hugescope import cli, cli_experiments

    df = pd.DataFrame([
        dict(policy="hawkeye", role="reference", budget_pct=None, frag_pct=0.0, huge_share=0.99, promotions=12345,
             ptw_rate=0.00123, speedup_est=1.234),
        dict(policy="pcc", role="limit", budget_pct=12.5, frag_pct=0.0, huge_share=0.5, promotions=123456,
             ptw_rate=0.0123, speedup_est=1.1)])
    cols = ["policy", "role", "budget_pct", "frag_pct", "huge_share", "promotions", "ptw_rate", "speedup_est"]
    for width in (80, 120):
        console = Console(width=width, record=True, file=open(os.devnull, "w"))
        monkeypatch.setattr(cli, "console", console)
        cli_experiments._print_table(df, cols, "utility curve")
        text = console.export_text()
        lines = text.splitlines()
        assert all(len(ln) <= width for ln in lines), text
        for value in ("reference", "hawkeye", "12.500", "123,456", "99.00%", "1.234x", "1.100x"):
            assert value in text, (width, value, text)
        assert "…" not in text, text
    # On a wide terminal each header stays on one line.
    assert "speedup (estimate)" in text and "huge share" in text
