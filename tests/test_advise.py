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

import pytest

import hugescope as hs
from hugescope import linux, tracing
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
    assert "estimate:" in text and "measured (wall clock" in text and "regions worth promoting" in text
    r = json.loads((out / "advise.json").read_text())
    assert len(r["rows"]) == 4 and sum(x["chosen"] for x in r["rows"]) == 1
    assert r["estimate"] >= 1.0 and r["measured"]["median"] > 0
    assert set(r["how"]) == {"estimate", "measured", "stages_s", "regions"}
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
    code, text, err = run_cli("advise", "--out", out, "--policies", "oracle", "--repeat", "1",
                              "--warmup", "0", "--duration", "10", "--", prog, "3000000", capsys=capsys)
    assert code == 0, err
    r = json.loads((out / "advise.json").read_text())
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
    assert ends == {"trace": (1, 1), "simulate": (2 * n + 1, 2 * n + 1), "measure": (2, 2)}, calls


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
