"""Plans as an interface between the simulator and real programs (issue #18).

The performance engineer's path at a small size: a C program built with
``hugescope cc`` is traced, a policy's plan is emitted with launch (``start``)
or ``seconds`` timing, and ``hugescope run --plan ... --baseline -- PROG``
applies every entry that comes due, samples coverage while it applies, counts
warm-up and measured runs separately, and prints the measured gain beside the
simulator's estimate. Needs clang, root and THP 'madvise'; skips with the
reason otherwise. The format tests (merging, hex, header, old plans) need none.
"""

from __future__ import annotations

import json

import pytest

import hugescope as hs
from hugescope import linux, tracing
from conftest import load, run_cli
from test_advise import PROGRAM, needs_madvise
from test_linux import needs_root, needs_thp

MIB = 1 << 20


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """The advise test's program (a 16 MiB array filled, then random reads),
    built and traced once."""
    try:
        tracing.find_clang()
    except hs.HugescopeError as e:
        pytest.skip(f"clang is needed to build the program ('make build' installs it as root): {e}")
    d = tmp_path_factory.mktemp("plans")
    (d / "fill.c").write_text(PROGRAM)
    assert tracing.cc(["-O1", str(d / "fill.c"), "-o", str(d / "fill")]) == 0
    assert run_cli("trace", "-o", d / "fill.hst", "--", d / "fill", "300000") == (0, "", "")
    return d / "fill", d / "fill.hst"


def _emit(trace, out, timing, *extra, capsys=None):
    code, _, err = run_cli("simulate", trace, "--policy", "linux", "--duration", "10", "-q",
                           "--emit-plan", out, "--timing", timing, *extra, capsys=capsys)
    assert code == 0, err
    return load(out)


def test_emitted_plans_are_merged_hex_and_say_how_they_were_timed(traced, tmp_path, capsys):
    _, trace = traced
    rec = _emit(trace, tmp_path / "a.json", "accesses", capsys=capsys)
    start = _emit(trace, tmp_path / "s.json", "start", capsys=capsys)
    secs = _emit(trace, tmp_path / "t.json", "seconds", capsys=capsys)
    # The linux policy faults each 2MB region of the array in huge, one by one:
    # a recorded entry per region, one range at launch.
    n = rec["header"]["recorded_entries"]
    assert n >= 7 and len(rec["entries"]) == n
    assert len(start["entries"]) == 1 and start["entries"][0]["when"] == "start"
    e = start["entries"][0]
    assert e["start"].startswith("0x") and int(e["length"], 16) == n * 2 * MIB
    # The note names the traced region the range lies in (issue #38).
    held = [r["name"] for r in hs.trace_info(trace)["header"]["regions"]
            if int(r["base"]) <= int(e["start"], 16) < int(r["base"]) + int(r["len"])]
    assert held and e["note"] == f"{n} recorded entries merged; region {held[0]}", e["note"]
    assert all("region " in x["note"] for p in (rec, secs) for x in p["entries"])
    # Seconds at the rate the simulation used (accesses / --duration), never
    # before the recorded access; the header says so.
    h = secs["header"]
    assert h["timing"] == "seconds" and h["rate_source"].endswith("--duration of the simulation")
    times = [x["when"]["time_s"] for x in secs["entries"] if isinstance(x["when"], dict)]
    positions = [x["when"]["accesses"] for x in rec["entries"] if isinstance(x["when"], dict)]
    assert times and all(t >= p / h["accesses_per_second"] for t, p in zip(sorted(times), sorted(positions)))
    assert all(t <= 10.0 for t in times)
    assert h["estimate"]["speedup_vs_base"] > 1.0 and "simulated" in h["estimate"]["how"]
    # The header names the machine the estimate used (issue #38).
    assert "cost model (preset haswell-pcc (the default))" in h["estimate"]["how"], h["estimate"]["how"]
    # Every emitted form loads as a plan, and the simulator replays the merged
    # launch-time plan (same regions huge from the start).
    for p in (rec, start, secs):
        assert len(linux.load_plan(p)["entries"]) == len(p["entries"])
    assert run_cli("simulate", trace, "--policy", f"static:plan={tmp_path / 's.json'}", "-q", "--json",
                   tmp_path / "r.json", capsys=capsys)[0] == 0


@pytest.mark.parametrize("argv,needle", [
    (["--timing", "seconds"], "--timing seconds times an emitted plan"),
    (["--timing", "weekly", "--emit-plan", "{d}/p.json"], "--timing"),
])
def test_timing_without_a_plan_or_with_a_bad_unit_is_one_error_line(traced, tmp_path, capsys, argv, needle):
    _, trace = traced
    argv = [a.replace("{d}", str(tmp_path)) for a in argv]
    try:
        code = run_cli("simulate", trace, "--policy", "linux", *argv)[0]
    except SystemExit as e:  # argparse's own refusals exit from the parser
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and needle in err and err.count("\n") == 1, err
    assert not (tmp_path / "p.json").exists()


def test_seconds_timing_needs_a_rate(traced, tmp_path, capsys):
    # A traced program's header has no nominal rate: without --rate or
    # --duration there is nothing to convert with, and nothing is written.
    _, trace = traced
    code, _, err = run_cli("simulate", trace, "--policy", "linux", "-q", "--emit-plan", tmp_path / "p.json",
                           "--timing", "seconds", capsys=capsys)
    assert code == 2 and "--rate or --duration" in err and err.count("\n") == 1, err
    assert not (tmp_path / "p.json").exists()


@needs_thp
@needs_root
@needs_madvise
def test_the_performance_engineers_path(traced, tmp_path, capsys):
    prog, trace = traced
    plan = tmp_path / "plan.json"
    p = _emit(trace, plan, "start", capsys=capsys)
    out = tmp_path / "run.json"
    code, text, err = run_cli("run", "--plan", plan, "--baseline", "--repeat", "2", "--warmup", "1",
                              "--json", out, "--", prog, "3000000", capsys=capsys)
    assert code == 0, err
    # Warm-up and measured runs are counted on their own, per phase.
    for line in ("base warm-up 1/1", "base run 1/2", "base run 2/2", "plan warm-up 1/1", "plan run 2/2"):
        assert line in err, err
    assert "run 3/" not in err
    # The gain: estimate and measurement side by side, each saying how.
    assert "estimate" in text and "measured" in text and "base-page run(s)" in text, text
    r = load(out)
    g = r["summary"]["gain"]
    assert g["estimate"] == pytest.approx(p["header"]["estimate"]["speedup_vs_base"]) and g["measured"] > 0
    assert r["baseline"]["plan"] == "none" and len(r["baseline"]["runs"]) == 2
    # Every entry came due and was applied in every measured run; the sampler
    # saw what was collapsed (issue #18: it said 0% while coverage saw 68 MiB).
    length = int(p["entries"][0]["length"], 16)
    for run in r["runs"]:
        assert [a["outcome"]["status"] for a in run["applied"]] == ["collapsed"], run["applied"]
        assert run["applied"][0]["outcome"]["bytes_huge_after_exact"] == length
        assert run["peak_anon_huge_bytes"] >= length
    # The base runs had nothing applied and stayed in base pages.
    assert all(not b["applied"] and b["peak_anon_huge_bytes"] == 0 for b in r["baseline"]["runs"])


@needs_thp
@needs_root
@needs_madvise
def test_seconds_entries_all_come_due_and_wait_for_their_range(traced, tmp_path, capsys):
    # At --duration 0.05 the recorded first touches fall within the first
    # 50 ms, while the program runs for longer: every entry comes due, and
    # one due before the program has touched its range waits for it. The
    # program gets 30M reads (about 0.35 s here), not the 3M it was traced
    # with (about 50 ms, as long as the plan's span: an entry due at its
    # end could find the program gone).
    prog, trace = traced
    plan = tmp_path / "plan.json"
    code, _, err = run_cli("simulate", trace, "--policy", "linux", "--duration", "0.05", "-q",
                           "--emit-plan", plan, "--timing", "seconds", capsys=capsys)
    assert code == 0, err
    p = load(plan)
    res = linux.run([str(prog), "30000000"], plan=plan, repeat=1, warmup=0).check()
    outs = res.outcomes
    assert len(outs) == len(p["entries"])
    assert all(o["status"] == "collapsed" for o in outs), [(o["status"], o["reason"]) for o in outs]
    assert res.runs[0]["peak_anon_huge_bytes"] == sum(int(e["length"], 16) for e in p["entries"])


@needs_thp
@needs_root
def test_a_progress_entry_given_to_a_program_says_how_to_time_it(traced, tmp_path):
    prog, _ = traced
    plan = [{"start": "0x7ffff6e00000", "length": "2MiB", "when": {"progress": "level:1"}},
            {"start": "0x7ffff7000000", "length": "2MiB", "when": {"accesses": 5}}]
    res = linux.run([str(prog), "1000"], plan=plan, repeat=1, warmup=0).check()
    reasons = [o["reason"] for o in res.outcomes]
    assert all("--timing seconds or --timing start" in r for r in reasons), reasons
