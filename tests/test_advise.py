"""``hugescope advise`` end to end at a small size (issue #14, section 2): trace a
C program built with ``hugescope cc``, simulate policies at two budgets, write
the best plan, run the program natively under base pages and under the plan, and
report the measured speedup beside the estimate. The plan made from the trace
must collapse exactly its regions in the native run (PAGEMAP_SCAN per entry and
smaps AnonHugePages of the process). Needs clang, root and THP 'madvise'; skips
with the reason otherwise.
"""

from __future__ import annotations

import json
import math
import os

import pytest

import hugescope as hs
from hugescope import advise, linux, tracing
from conftest import run_cli
from test_linux import THP, needs_root, needs_thp

MIB = 1 << 20
# A 16 MiB array filled first (so every region is populated when the plan
# applies), then random reads: enough time for the launcher to collapse the
# plan's regions while the program runs.
PROGRAM = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000;
    size_t words = (16ull << 20) / sizeof(uint64_t);
    uint64_t *a = malloc(words * sizeof *a);
    for (size_t i = 0; i < words; i++) a[i] = i;
    uint64_t x = 88172645463325252ull, sum = 0;
    for (long i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        sum += a[x % words];
    }
    printf("%llu\n", (unsigned long long)sum);
    return 0;
}
"""
needs_madvise = pytest.mark.skipif(THP.get("pmd_mode") != "madvise",
                                   reason=f"a base-page baseline needs THP mode 'madvise' (it is {THP.get('pmd_mode')})")


def _calibration(tmp_path, capsys) -> str:
    """A preset file written by 'hugescope calibrate --out FILE' (refitting
    synthetic measurements, no runs)."""
    from test_calibrate import refit_calibration

    code, _, err = refit_calibration(tmp_path, capsys)
    assert code == 0, err
    return str(tmp_path / "c.toml")


@pytest.fixture(scope="module")
def prog(tmp_path_factory):
    try:
        tracing.find_clang()
    except hs.HugescopeError as e:
        pytest.skip(f"clang is needed to build the program ('make build' installs it as root): {e}")
    d = tmp_path_factory.mktemp("advise")
    (d / "fill.c").write_text(PROGRAM)
    assert tracing.cc(["-O1", str(d / "fill.c"), "-o", str(d / "fill")]) == 0
    return d / "fill"


@needs_thp
@needs_root
@needs_madvise
def test_advise_end_to_end_and_plan_collapses_exactly_its_regions(prog, tmp_path, capsys, monkeypatch):
    out = tmp_path / "o"
    # The machine of the estimates: a file 'calibrate --out FILE' wrote (issue
    # #38: advise had no --config, and named no preset it used).
    cal = _calibration(tmp_path, capsys)
    code, text, err = run_cli("advise", "--out", out, "--ks", "1,2", "--policies", "pcc,oracle", "--repeat", "1",
                              "--warmup", "0", "--duration", "10", "--config", cal, "--keep-trace", "--", prog,
                              "3000000", capsys=capsys)
    assert code == 0, err
    label = f"config {cal} (over preset haswell-pcc)"
    assert label in " ".join(text.split()), text
    flat = " ".join(text.split())
    assert "estimate:" in flat and "measured (median of 1 interleaved round(s))" in flat, text
    assert "regions worth promoting" in text
    r = json.loads((out / "advise.json").read_text())
    assert len(r["rows"]) == 4 and sum(x["chosen"] for x in r["rows"]) == 1
    assert r["estimate"] >= 1.0 and r["measured"]["median"] > 0
    assert set(r["how"]) == {"estimate", "estimate_whole", "recommended", "measured", "noise_floor", "load",
                             "stages_s", "regions"}
    # The measured build is the plain one 'hugescope cc' wrote beside the
    # program, and the plan from the instrumented trace applied to it (its
    # array is mmap-backed: the same address in both builds, ASLR off).
    assert r["measured_program"] == [f"{prog}.plain", "3000000"]
    assert r["plan_applied"]["collapsed"] == r["plan_applied"]["entries"] >= 1, r["collapse"]
    # Named by the array's allocation site (issue #38), not its mapping.
    line = next(i for i, l in enumerate(PROGRAM.splitlines(), 1) if "= malloc(" in l)
    assert r["promote"] and all(p["region"] == f"alloc:main@fill.c:{line}" for p in r["promote"])
    # Every traced region with its accesses, walks and share of walk cycles
    # in the base-page run (issue #38), from the same pass as the estimates:
    # they add up to that run, whose array takes most walk cycles.
    header = hs.trace_info(out / "trace.hst")["header"]
    base = hs.simulate(out / "trace.hst", pages="4k", config=cal).record.translation
    assert len(r["regions"]) == len(header["regions"]) + 1
    assert sum(x["accesses"] for x in r["regions"]) == base.accesses
    assert sum(x["walks"] for x in r["regions"]) == base.walks
    hot = r["regions"][0]
    assert hot["walk_cycle_share"] > 0.5 and hot["len"] >= 16 * MIB, r["regions"][:3]
    assert all(p["region"] == hot["name"] and (p["region_accesses"], p["region_walks"]) ==
               (hot["accesses"], hot["walks"]) for p in r["promote"]), r["promote"]
    assert "traced regions, base pages" in text and hot["name"] in text
    plan = json.loads((out / "plan.json").read_text())
    assert r["machine"] == label and f"cost model ({label})" in r["how"]["estimate"]
    assert f"cost model ({label})" in plan["header"]["estimate"]["how"]
    starts = sorted(int(e["start"], 16) for e in plan["entries"])
    assert starts == sorted(int(p["start"], 16) for p in r["promote"])
    # The plan, from the trace, applied natively to the same binary: every entry
    # collapses, PAGEMAP_SCAN sees exactly that range huge, and the process's
    # AnonHugePages (smaps) peak is exactly the plan's bytes: no other region.
    # Kept with --keep-trace, and reusable: a second advise on it skips the
    # trace stage (tracing would fail here) and advises the same.
    assert r["trace"] == str(out / "trace.hst") and (out / "trace.hst").exists()
    assert set(r["stages_s"]) == {"trace", "simulate", "measure"} and r["stages_s"]["trace"] > 0

    def no_tracing(*a, **k):
        raise AssertionError("advise --trace traced the program again")
    monkeypatch.setattr(tracing, "trace_program", no_tracing)
    again = tmp_path / "again"
    code, text2, err = run_cli("advise", "--out", again, "--ks", "1,2", "--policies", "pcc,oracle", "--repeat", "1",
                               "--warmup", "0", "--duration", "10", "--config", cal, "--trace", out / "trace.hst",
                               "--", prog, "3000000", capsys=capsys)
    assert code == 0, err
    r2 = json.loads((again / "advise.json").read_text())
    assert r2["stages_s"]["trace"] == 0 and "trace 0.0 s (reused trace)" in " ".join(text2.split())
    assert [(x["policy"], x["k"], x["regions"], x["estimate"]) for x in r2["rows"]] == \
        [(x["policy"], x["k"], x["regions"], x["estimate"]) for x in r["rows"]]
    assert r2["trace"] == str(out / "trace.hst") and (out / "trace.hst").exists()
    assert not (again / "trace.hst").exists()
    # A trace of other arguments is refused with one line.
    code, _, err = run_cli("advise", "--out", tmp_path / "other", "--trace", out / "trace.hst", "--", prog, "5",
                           capsys=capsys)
    assert code == 2 and err.count("\n") == 1 and "is a trace of" in err, err
    run = linux.run([str(prog), "20000000"], plan=plan, repeat=1, warmup=0).check()
    outs = run.outcomes
    assert [int(o["start"]) for o in outs] == starts
    brief = [(o["status"], o.get("errno"), o.get("reason"), o.get("bytes_huge_after_exact")) for o in outs]
    assert all(o["status"] == "collapsed" and o["bytes_huge_after_exact"] == 2 * MIB for o in outs), brief
    assert run.runs[0]["peak_anon_huge_bytes"] == len(starts) * 2 * MIB


@needs_thp
@needs_root
@needs_madvise
def test_advise_deletes_its_trace_unless_kept(prog, tmp_path, capsys, monkeypatch):
    import contextlib
    from hugescope import progress

    calls = []

    @contextlib.contextmanager
    def stages(names, console=None):
        assert names == ["trace", "simulate", "measure"]
        yield lambda stage, done, total: calls.append((stage, done, total))
    monkeypatch.setattr(progress, "progress_stages", stages)
    out = tmp_path / "o"
    code, text, err = run_cli("advise", "--out", out, "--policies", "oracle", "--repeat", "1", "--clock", "cpu",
                              "--warmup", "0", "--duration", "10", "--", prog, "3000000", capsys=capsys)
    assert code == 0, err
    r = json.loads((out / "advise.json").read_text())
    # The cpu clock: every run's time is the program's own CPU time, and the
    # collapses (hugescope's) are not charged to the estimate.
    assert r["clock"] == "cpu" and "measured runs (cpu clock" in " ".join(text.split())
    assert "collapses not charged (cpu clock" in " ".join(text.split())
    assert all(x["t_s"] == pytest.approx(x["user_s"] + x["sys_s"]) for x in r["runs"] if x["round"] is not None)
    assert r["estimate_whole"]["collapse_s"] == 0 and r["estimate_whole"]["collapse_s_per_region"] == 0
    # The default budgets are shares of the footprint, each k = share x
    # footprint / 2 MiB (at least 1); shares giving the same k share a row.
    fp, cand = r["footprint_bytes"], r["candidate_regions"]
    assert 16 * MIB <= fp < 24 * MIB and 7 <= cand <= 8
    want = {}
    for share, x in (("1%", 0.01), ("4%", 0.04), ("16%", 0.16), ("64%", 0.64), ("100%", 1.0)):
        want.setdefault(max(1, int(x * fp) // (2 * MIB)), []).append(share)
    assert {row["k"]: row["budget"] for row in r["rows"]} == {k: ", ".join(v) for k, v in want.items()}
    assert list(want)[:1] == [1] and ", ".join(want[1]) == "1%, 4%, 16%"
    for row in r["rows"]:
        if len(row["regions"]) < row["k"]:
            assert row["fewer_because"].endswith(f"the program has only {cand} whole 2 MiB regions that can be "
                                                 "collapsed") == (row["k"] > cand), row
        else:
            assert row["fewer_because"] == "" and len(row["regions"]) == row["k"]
    assert r["trace"] is None and not (out / "trace.hst").exists()
    assert sorted(p.name for p in out.iterdir()) == ["advise.json", "plan.json"]
    assert "the trace was deleted; --keep-trace keeps it" in " ".join(text.split())
    # A bar per stage, in order, each ending full: a simulated run per k,
    # the base run, an estimate per k; two measured runs.
    assert [c[0] for c in calls] == sorted((c[0] for c in calls), key=["trace", "simulate", "measure"].index)
    ends = {stage: (done, total) for stage, done, total in calls}
    n = len(r["rows"])
    # One warm-up base run (made even with --warmup 0: the whole run's base
    # time), one with every anonymous mapping collapsed (the collapse rate),
    # then one round of base, plan, base.
    assert ends == {"trace": (1, 1), "simulate": (2 * n + 1, 2 * n + 1), "measure": (5, 5)}, calls
    assert [(x["name"], x["round"]) for x in r["runs"]] == [
        ("base (warm-up)", None), ("all (collapse rate)", None), ("base", 0), ("plan", 0), ("base", 0)]


@pytest.mark.parametrize("argv,needle", [
    (["advise"], "give the program after '--'"),
    (["advise", "--ks", "0", "--", "/bin/true"], "--ks"),
    (["advise", "--ks", "a,b", "--", "/bin/true"], "--ks"),
    (["advise", "--budgets", "150%", "--", "/bin/true"], "--budgets"),
    (["advise", "--budgets", "4%", "--ks", "2", "--", "/bin/true"], "give one"),
    (["advise", "--repeat", "0", "--", "/bin/true"], "--repeat"),
    (["advise", "--policies", "nope", "--out", "{d}/o", "--", "/bin/true"], "nope"),
    (["advise", "--trace", "{d}/missing.hst", "--out", "{d}/o", "--", "/bin/true"], "no such trace file"),
    (["advise", "--trace", "{d}/missing.hst", "--keep-trace", "--out", "{d}/o", "--", "/bin/true"], "--keep-trace"),
    (["advise", "--tolerance", "1.5", "--", "/bin/true"], "--tolerance"),
    (["advise", "--clock", "tsc", "--", "/bin/true"], "--clock"),
    (["advise", "--plain", "{d}/missing", "--out", "{d}/o", "--", "/bin/true"], "--plain"),
    (["advise", "--plain", "/bin/true", "--measure-instrumented", "--out", "{d}/o", "--", "/bin/true"], "give one"),
])
def test_advise_bad_input_one_error_line(tmp_path, capsys, argv, needle):
    try:
        code, _, err = run_cli(*[a.format(d=tmp_path) for a in argv], capsys=capsys)
    except SystemExit as e:
        code, err = e.code, capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and needle in err, err


def test_budget_shares_and_why_a_row_holds_fewer_regions():
    from hugescope import advise

    # 672 MiB (the largest footprint) = 336 pages of 2 MiB.
    assert advise.budget_pages(advise.DEFAULT_BUDGETS, 672 * MIB) == {
        3: ["1%"], 13: ["4%"], 53: ["16%"], 215: ["64%"], 336: ["100%"]}
    assert advise.budget_pages(["1%", "0.5", "100%"], 8 * MIB) == {1: ["1%"], 2: ["0.5"], 4: ["100%"]}
    for bad in ("0%", "150%", "x", "-1"):
        with pytest.raises(ValueError, match="--budgets"):
            advise.parse_budget(bad)
    # hawkeye listing 2 of 64: its own rule stopped it, and it says so.
    why = advise.shortfall("hawkeye", 64, 2, 300, {"all": 3, "collapsible": 2}, 60.0)
    assert why == ("hawkeye promoted 3 regions in the simulated run (60 virtual s), below the budget: its own "
                   "promotion rule stopped it, not the budget; 1 of them lie outside the regions MADV_COLLAPSE "
                   "can make huge")
    assert advise.shortfall("oracle", 8, 7, 7, {"all": 7, "collapsible": 7}, 60.0) == \
        "the program has only 7 whole 2 MiB regions that can be collapsed"
    assert advise.shortfall("pcc", 4, 4, 300, {"all": 9, "collapsible": 9}, 60.0) == ""
    assert advise.shortfall("hawkeye", 8, 2, 7, {"all": 2, "collapsible": 2}, 10.0) == (
        "hawkeye promoted 2 regions in the simulated run (10 virtual s), below the budget: its own promotion rule "
        "stopped it, not the budget; the program has only 7 whole 2 MiB regions that can be collapsed")


# Not TLB-bound: a dependent multiply chain over one 4 KiB array, and a
# 16 MiB array written once (so the plan has 2 MiB regions to collapse, and
# nothing to gain from them after the fill).
IDLE_PROGRAM = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t small[512];

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000;
    size_t words = (16ull << 20) / sizeof(uint64_t);
    uint64_t *big = malloc(words * sizeof *big);
    for (size_t i = 0; i < words; i++) big[i] = i;
    uint64_t h = 1;
    for (long i = 0; i < n; i++) {
        uint64_t v = small[i & 511];
        for (int j = 0; j < 64; j++) h = h * 6364136223846793005ull + (v ^ (uint64_t)j);
        small[i & 511] = h;
    }
    printf("%llu\n", (unsigned long long)(h + big[h % words]));
    return 0;
}
"""


@needs_thp
@needs_root
@needs_madvise
def test_advise_on_a_program_huge_pages_cannot_help_reports_within_noise(tmp_path, capsys):
    try:
        tracing.find_clang()
    except hs.HugescopeError as e:
        pytest.skip(f"clang is needed to build the program: {e}")
    (tmp_path / "idle.c").write_text(IDLE_PROGRAM)
    prog = tmp_path / "idle"
    assert tracing.cc(["-O1", str(tmp_path / "idle.c"), "-o", str(prog)]) == 0
    assert tracing.is_instrumented(str(prog)) and not tracing.is_instrumented(str(prog) + ".plain")
    out = tmp_path / "o"
    code, text, err = run_cli("advise", "--out", out, "--ks", "1,4", "--policies", "oracle", "--repeat", "4",
                              "--warmup", "1", "--duration", "10", "--", prog, "4000000", capsys=capsys)
    assert code == 0, err
    r = json.loads((out / "advise.json").read_text())
    m = r["measured"]
    assert m["verdict"] == "within noise", (m, r["runs"])
    assert abs(math.log(m["median"])) <= m["noise_floor"]
    flat = " ".join(text.split())
    assert "within noise" in flat and "noise floor" in flat and "loadavg 1m" in flat and "collapses: estimated" in flat
    # The floor is the largest |ln| of a round's base pair, from the runs kept.
    pairs = [[x["wall_s"] for x in r["runs"] if x["name"] == "base" and x["round"] == rd] for rd in range(4)]
    assert m["noise_floor"] == pytest.approx(max(abs(math.log(a / b)) for a, b in pairs))
    # Every run with its wall time and the load at it: 1 warm-up, 1 with
    # every mapping collapsed, 4 rounds of base, plan, base; the plain build.
    assert [x["name"] for x in r["runs"]] == ["base (warm-up)", "all (collapse rate)"] + ["base", "plan", "base"] * 4
    for x in r["runs"]:
        assert x["wall_s"] > 0 and x["loadavg_1m"] >= 0 and 0 <= x["busy_share"] <= 1, x
        assert 0 <= x["others_busy_share"] <= x["busy_share"], x
    assert r["measured_program"][0] == f"{prog}.plain"
    # The estimate is whole-run: the plan's collapses are charged, and the
    # traced phase is at most the run.
    w = r["estimate_whole"]
    assert w["collapse_s"] == pytest.approx(w["regions"] * w["collapse_s_per_region"])
    # The rate: the collapse-rate run's time in process_madvise over the
    # regions it collapsed (the 16 MiB array's 7 or 8, and more mappings).
    every = r["runs"][1]
    n = r["collapse_rate"]["regions"]
    assert n >= 7 and w["collapse_rate_measured"]
    assert w["collapse_s_per_region"] == pytest.approx(every["collapse_s"] / n)
    assert 0 < w["phase_share"] <= 1 and w["base_s"] == r["runs"][0]["wall_s"]
    assert w["speedup"] == pytest.approx(advise.whole_run(r["estimate"], w["simulated_s"], w["base_s"], w["regions"],
                                                          w["collapse_s_per_region"])["speedup"])
    # Huge pages for an array written once buy next to nothing: k=4 buys
    # less than 1% over k=1, so the smaller budget is recommended; its plan
    # is real (regions of the array) and collapsed in the plain build.
    whole = {x["k"]: x["whole_run"] for x in r["rows"]}
    assert whole[4] < whole[1] * 1.01 and r["best"]["k"] == 1, r["rows"]
    assert r["best"]["pays"] == (whole[1] > 1)
    assert len(r["promote"]) == 1 and r["plan_applied"]["collapsed"] == r["plan_applied"]["entries"] == 1, r["collapse"]
    assert all(x["collapse_s"] > 0 for x in r["runs"] if x["name"] == "plan")


def test_whole_run_estimate_by_hand():
    from hugescope import advise

    # 2 s run, the simulated phase 0.5 s sped up 2x (0.25 s saved), 10
    # regions at 10 ms (0.1 s): 2 / (2 - 0.25 + 0.1).
    w = advise.whole_run(2.0, 0.5, 2.0, 10, 0.01)
    assert w["speedup"] == pytest.approx(2 / 1.85) and w["saved_s"] == pytest.approx(0.25)
    assert w["collapse_s"] == pytest.approx(0.1) and w["phase_share"] == pytest.approx(0.25)
    # A phase the model prices above the run is the whole run: 1 / (1 - 0.5).
    assert advise.whole_run(2.0, 5.0, 1.0, 0, 0.01)["speedup"] == pytest.approx(2.0)
    # Collapses can make a plan a loss: 1 / (1 - 0.01 + 0.1).
    assert advise.whole_run(1.02, 0.51, 1.0, 10, 0.01)["speedup"] == pytest.approx(1 / 1.09)
    with pytest.raises(ValueError, match="whole_run"):
        advise.whole_run(1.0, 0.5, 0.0, 1, 0.01)


def test_recommended_budget_is_the_smallest_within_tolerance_of_the_best():
    from hugescope import advise

    def rows(**by_k):
        return [{"policy": p, "k": int(k[1:]), "regions": 1, "whole": g} for k, gs in by_k.items()
                for p, g in gs.items()]
    pol = ["pcc", "oracle"]
    # Gains grow with k but k=64 adds 0.5% over k=16: k=16 (its best policy).
    pick = advise.recommend(rows(k1={"pcc": 1.02, "oracle": 1.03}, k16={"pcc": 1.20, "oracle": 1.25},
                                 k64={"pcc": 1.256, "oracle": 1.25}), pol)
    assert (pick["k"], pick["policy"]) == (16, "oracle")
    # A tolerance of 0 takes the best itself.
    assert advise.recommend(rows(k16={"pcc": 1.25}, k64={"pcc": 1.256}), pol, tolerance=0.0)["k"] == 64
    # More than 1% more: the larger budget.
    assert advise.recommend(rows(k16={"pcc": 1.25}, k64={"pcc": 1.30}), pol)["k"] == 64
    # Collapses outweigh every gain: the smallest budget, the cheapest.
    pick = advise.recommend(rows(k1={"pcc": 0.99, "oracle": 0.995}, k8={"pcc": 0.9}), pol)
    assert (pick["k"], pick["policy"]) == (1, "oracle")
    # A row promoting nothing is no advice, even at 1.0x over a loss.
    empty = rows(k1={"pcc": 1.0, "oracle": 0.99})
    empty[0]["regions"] = 0
    assert advise.recommend(empty, pol)["policy"] == "oracle"
    # A tie at a budget goes to the policy given first.
    assert advise.recommend(rows(k2={"pcc": 1.1, "oracle": 1.1}), pol)["policy"] == "pcc"
    with pytest.raises(ValueError, match="tolerance"):
        advise.recommend(rows(k2={"pcc": 1.1}), pol, tolerance=1.0)


def test_measured_build_is_the_plain_one(tmp_path):
    from hugescope import advise

    def exe(name, body=b"\x7fELF plain"):
        p = tmp_path / name
        p.write_bytes(body)
        p.chmod(0o755)
        return str(p)
    instr = exe("prog", b"\x7fELF ... HUGESCOPE_TRACE_OUT ...")
    with pytest.raises(hs.HugescopeError, match="has no plain build .*--plain BINARY"):
        advise.measured_build([instr, "1"])
    assert advise.measured_build([instr, "1"], instrumented=True)[0] == [instr, "1"]
    plain = exe("prog.plain")
    argv, how = advise.measured_build([instr, "1"])
    assert argv == [plain, "1"] and "plain build" in how
    other = exe("other")
    assert advise.measured_build([instr, "1"], plain=other)[0] == [other, "1"]
    with pytest.raises(hs.HugescopeError, match="tracing runtime"):
        advise.measured_build([instr, "1"], plain=instr)
    # A plain build older than the instrumented one is stale.
    os.utime(plain, (1, 1))
    with pytest.raises(hs.HugescopeError, match="older"):
        advise.measured_build([instr, "1"])
    # A program with no runtime is measured as given.
    assert advise.measured_build([other])[0] == [other]


def test_cc_writes_the_plain_build_only_from_sources(tmp_path):
    try:
        tracing.find_clang()
    except hs.HugescopeError as e:
        pytest.skip(f"clang is needed: {e}")
    (tmp_path / "p.c").write_text("int main(void) { return 0; }\n")
    assert tracing.cc(["-O1", str(tmp_path / "p.c"), "-o", str(tmp_path / "p")]) == 0
    assert tracing.is_instrumented(str(tmp_path / "p"))
    assert (tmp_path / "p.plain").exists() and not tracing.is_instrumented(str(tmp_path / "p.plain"))
    # Objects built with the hooks cannot be linked without the runtime: no plain build.
    assert tracing.cc(["-O1", "-c", str(tmp_path / "p.c"), "-o", str(tmp_path / "p.o")]) == 0
    assert tracing.cc([str(tmp_path / "p.o"), "-o", str(tmp_path / "q")]) == 0
    assert not (tmp_path / "q.plain").exists() and not (tmp_path / "p.o.plain").exists()


def test_load_at_each_run_from_proc_stat(monkeypatch):
    from hugescope import noise

    monkeypatch.setattr(noise.os, "getloadavg", lambda: (3.5, 2.0, 1.0))

    # Two CPUs; during the run 300 of 400 jiffies busy (75%), and the run
    # itself used 1 s of 2 s wall on 2 CPUs (25%): others 50%.
    snaps = iter([{0: (0, 0), 1: (0, 0)},            # the CPU count
                  {0: (100, 200), 1: (100, 200)},    # before: idle, total
                  {0: (150, 400), 1: (150, 400)}])   # after: +100 idle of +400
    run = noise.with_load(lambda name: {"wall_s": 2.0, "user_s": 0.75, "sys_s": 0.25}, stat=lambda: next(snaps))
    rec = run("base")
    assert rec["busy_share"] == pytest.approx(0.75) and rec["others_busy_share"] == pytest.approx(0.5)
    assert rec["loadavg_1m"] == 3.5 and rec["wall_s"] == 2.0


@needs_thp
def test_collapse_probe_times_real_collapses():
    from hugescope import collapse_cost

    r = collapse_cost.probe(2)
    assert r["measured"] and r["regions"] == 2 and 0 < r["s_per_region"] < 1, r
    assert r["how"].startswith("measured")
    with pytest.raises(ValueError, match="regions"):
        collapse_cost.probe(0)


def test_collapse_rate_from_the_run_with_every_mapping_collapsed():
    every = {"collapse_s": 0.03, "outcomes": [{"regions_collapsed": 7}, {"regions_collapsed": 3}]}
    r = advise.collapse_rate(every, lambda: pytest.fail("the probe ran though the run collapsed regions"))
    assert r["s_per_region"] == pytest.approx(0.003) and r["regions"] == 10 and r["measured"]
    # Nothing collapsed in the run: the probe's rate, saying why.
    probe = {"s_per_region": 0.001, "measured": True, "regions": 4, "how": "measured: probe"}
    r = advise.collapse_rate({"collapse_s": 0.0, "outcomes": [{"regions_collapsed": 0}]}, lambda: probe)
    assert r["s_per_region"] == 0.001 and r["how"].endswith("collapsed none")


@needs_thp
@needs_root
@needs_madvise
def test_advise_fit_prices_plans_with_the_programs_own_model(prog, tmp_path, capsys):
    out = tmp_path / "o"
    code, text, err = run_cli("advise", "--out", out, "--ks", "1,4", "--policies", "pcc,oracle", "--repeat", "1",
                              "--warmup", "0", "--duration", "10", "--fit", "4", "--", prog, "3000000",
                              capsys=capsys)
    assert code == 0, err
    r = json.loads((out / "advise.json").read_text())
    md = r["model"]
    assert md["layouts"] == 4 and md["kind"] == "estimate"
    # The collapse count is one of the model's counters: the measured runs include their collapses.
    assert "regions" in md["model"]["features"] and md["model"]["parameters"] == 1 + len(md["model"]["features"])
    assert "this program's model" in r["how"]["estimate_whole"]
    saved = json.loads((out / "model.json").read_text())
    assert saved["hugescope_experiment"] == "model" and len(saved["points"]) == 4
    assert saved["points"][0]["plan"] == "base" and saved["points"][-1]["plan"] == "all huge"
    rows = (out / "held-out.csv").read_text().splitlines()
    assert len(rows) == 1 + 4
    assert (out / "predicted-vs-measured.png").read_bytes()[:4] == b"\x89PNG"
    # Every layout ran once per round between the round's two base runs; then
    # the advice's own rounds.
    layout_runs = [x["name"] for x in r["runs"] if x["name"].startswith("layout: ")]
    assert layout_runs == ["layout: " + p["plan"] for p in saved["points"]] + ["layout: base"]
    assert all(x["loadavg_1m"] is not None for x in r["runs"])
    assert "--fit 4" in " ".join(text.split())


def test_advise_fit_needs_at_least_three_layouts(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        run_cli("advise", "--out", tmp_path / "o", "--fit", "2", "--", "/bin/true")
    assert e.value.code == 2 and "--fit must be at least 3" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
