"""The real-Linux side from Python and the CLI: plans applied with MADV_COLLAPSE to
built-in workloads (in-process madvise) and to programs (process_madvise), coverage,
the THP state, and clear errors. These run on the live kernel; they skip, with the
reason, where the machine cannot do what they test (THP disabled, not root). The
fragmenter itself is not run here (the Rust integration test covers it: it takes
about a minute and most of free memory); only its argument handling is.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time

import pytest

import hugescope as hs
from hugescope import linux
from conftest import load, run_cli

MIB = 1 << 20
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GUPS = ["gups", "--size", "64MiB", "--updates", "2M"]
GUPS_PARAMS = {"size": "64MiB", "updates": "2M"}
# The address gups' table is mapped at (layout::BASE) and one nothing maps.
TABLE = 0x1000_0000_0000
UNMAPPED = 0x2000_0000_0000


def _thp():
    try:
        return linux.thp_state()
    except hs.HugescopeError as e:
        return {"error": str(e)}


THP = _thp()
NO_THP = ("THP is not available on this kernel: " + THP["error"]) if "error" in THP else (
    "transparent_hugepage/enabled is 'never': hugescope applies no plan there" if not THP["plans_applicable"] else None)
needs_thp = pytest.mark.skipif(NO_THP is not None, reason=NO_THP or "")
needs_root = pytest.mark.skipif(os.geteuid() != 0,
                                reason="process_madvise on another process needs CAP_SYS_NICE and ptrace access (root)")
needs_madvise_mode = pytest.mark.skipif(THP.get("pmd_mode") != "madvise",
                                        reason=f"a base-page baseline needs THP mode 'madvise' (it is {THP.get('pmd_mode')})")


@functools.lru_cache(maxsize=None)
def memhold() -> str:
    """The test helper program that maps memory at a fixed address and waits.
    Built from the current sources (a no-op when up to date): a binary left in
    target/ by an older build may lack the options the tests use."""
    if os.environ.get("HUGESCOPE_MEMHOLD"):
        return os.environ["HUGESCOPE_MEMHOLD"]
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
    r = subprocess.run(["cargo", "build", "-q", "-p", "hugescope-linux", "--bin", "hugescope-memhold"], cwd=REPO,
                       capture_output=True, text=True)
    p = os.path.join(target, "debug", "hugescope-memhold")
    if r.returncode != 0 or not os.access(p, os.X_OK):
        pytest.skip(f"cannot build hugescope-memhold: {r.stderr.strip()[-300:]}")
    return p


@pytest.fixture(scope="module")
def gups_all(tmp_path_factory):
    out = tmp_path_factory.mktemp("linux") / "all.json"
    code = run_cli("run", *GUPS, "--plan", "all", "--repeat", "1", "--warmup", "0", "--json", out)[0]
    assert code == 0
    return load(out)


@needs_thp
def test_plan_all_collapses_every_region(gups_all):
    d = gups_all
    assert d["kind"] == "workload" and d["plan"] == "all"
    run = d["runs"][0]
    assert run["footprint_bytes"] == 64 * MIB
    outs = [a["outcome"] for a in run["applied"]]
    assert len(outs) == 1  # gups has one region, the table
    assert outs[0]["status"] == "collapsed", outs[0]["reason"]
    assert outs[0]["regions"] == outs[0]["regions_collapsed"] == 32
    assert run["applied"][0]["point"] == "setup_done"
    # Coverage at the end of the algorithm, exact from PAGEMAP_SCAN: the whole table.
    assert run["huge_bytes_end"] == 64 * MIB, run["regions_end"]
    assert d["summary"]["coverage"]["median"] == pytest.approx(1.0)
    # Collapsing is measured apart from the algorithm, and every time says how it was taken.
    assert run["collapse_setup_s"] > 0 and run["run_s"] > 0
    assert "Instant" in d["how"]["wall_s"] and "hooks" in d["how"]["wall_s"]
    assert d["summary"]["wall_s"]["min"] <= d["summary"]["wall_s"]["median"] <= d["summary"]["wall_s"]["max"]
    # Coverage right after the start collapses, before the algorithm; the sampler's
    # figures over time depend on timing (the run is shorter than a sample period).
    assert run["huge_bytes_after_setup"] == 64 * MIB
    assert run["samples"] and all(s["rss_bytes"] > 0 for s in run["samples"])


@needs_thp
@needs_madvise_mode
def test_no_plan_is_base_pages(gups_all, capsys):
    r = linux.run("gups", repeat=1, warmup=0, **GUPS_PARAMS)
    run = r.runs[0]
    assert run["plan"] == "none" and run["applied"] == []
    assert run["huge_bytes_end"] == 0
    assert r.summary["coverage"]["median"] == 0
    # Same algorithm, same result: huge pages change the speed, not the answer.
    assert run["result"]["checksum"] == gups_all["runs"][0]["result"]["checksum"]
    df = r.to_frame()
    assert list(df["huge_bytes"]) == [0] and {"wall_s", "user_s", "sys_s", "cpu_s", "peak_rss_bytes"} <= set(df.columns)
    # The exact CPU clock: the thread cannot run longer than the phase's wall
    # time (hooks included), and it did run.
    assert 0 < run["cpu_s"] <= run["run_s_with_hooks"] + 1e-3


@needs_thp
def test_plan_entries_by_kind_and_unmapped_range(tmp_path):
    plan = {"version": 1, "entries": [
        {"start": hex(UNMAPPED), "length": "2MiB"},                                     # nothing there
        {"start": hex(TABLE), "length": "4MiB", "when": "updates:1048576"},             # a progress point
        {"start": hex(TABLE + 8 * MIB), "length": "2MiB", "when": {"progress": "level:9"}},  # never reached
        {"start": hex(TABLE + 16 * MIB), "length": "2MiB", "when": {"accesses": 1000}},
        {"start": hex(TABLE + 32 * MIB), "length": "2MiB", "when": "start"},
    ]}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    r = linux.run("gups", plan=str(path), repeat=1, warmup=0, **GUPS_PARAMS)
    o = r.outcomes
    assert [x["index"] for x in o] == [0, 1, 2, 3, 4]
    assert o[0]["status"] == "skipped" and o[0]["reason"].startswith("not mapped"), o[0]
    assert not o[0]["attempted"]
    assert o[1]["status"] == "collapsed" and o[1]["point"] == "progress:updates:1048576", o[1]
    assert o[1]["bytes_huge_after_exact"] == 4 * MIB
    assert o[2]["status"] == "skipped" and "never reached" in o[2]["reason"] and "updates:" in o[2]["reason"]
    assert o[3]["status"] == "skipped" and "counts no accesses" in o[3]["reason"]
    assert o[4]["status"] == "collapsed" and o[4]["point"] == "setup_done"
    run = r.runs[0]
    # The progress collapse happened during the algorithm and is not part of its time.
    assert run["collapse_run_s"] > 0 and run["run_s"] < run["run_s_with_hooks"]
    assert run["huge_bytes_end"] == 6 * MIB
    frame = r.outcomes_frame()
    assert list(frame["status"]) == ["skipped", "collapsed", "skipped", "skipped", "collapsed"]


@needs_thp
@needs_root
def test_run_command_with_time_plan(tmp_path, capsys):
    a = 0x7e40_0000_0000
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps([{"start": hex(a), "length": "4MiB", "when": {"time_s": 0.3}}]))
    out = tmp_path / "run.json"
    code, text, _ = run_cli("run", "--plan", plan, "--repeat", "1", "--warmup", "0", "--sample-ms", "50",
                            "--json", out, "--", memhold(), "--addr", hex(a), "--size", "8M", "--exit-after", "1",
                            capsys=capsys)
    assert code == 0
    d = load(out)
    run = d["runs"][0]
    assert d["kind"] == "command" and run["exit_code"] == 0 and run["aslr_disabled"]
    o = run["applied"][0]
    assert o["outcome"]["status"] == "collapsed", o["outcome"]["reason"]
    assert 0.3 <= o["t_s"] < 1.0
    assert o["outcome"]["bytes_huge_after_exact"] == 4 * MIB
    assert run["peak_anon_huge_bytes"] >= 4 * MIB
    assert "collapsed" in text and "wait4" in text


@needs_thp
def test_run_workload_with_sample_ms_0_takes_no_samples(tmp_path, capsys):
    # The API's sample_ms=0 (what the measured runs of validate and model fit
    # use) from the command line too; the default takes samples.
    out = tmp_path / "run.json"
    code, _, err = run_cli("run", "gups", "--size", "16MiB", "--updates", "50k", "--repeat", "1", "--warmup", "0",
                           "--sample-ms", "0", "--json", out, capsys=capsys)
    assert code == 0, err
    assert load(out)["runs"][0]["samples"] == []
    code, _, err = run_cli("run", "gups", "--size", "16MiB", "--updates", "50k", "--repeat", "1", "--warmup", "0",
                           "--json", out, capsys=capsys)
    assert code == 0, err
    assert len(load(out)["runs"][0]["samples"]) >= 1


@needs_thp
@needs_root
def test_run_program_plan_all_collapses_its_anonymous_memory(tmp_path, capsys):
    # Issue #38: 'run --plan all -- PROG' was refused. memhold maps 8 MiB at a
    # (2 MiB of it MADV_NOHUGEPAGE) and touches it: 3 regions must be huge.
    a = 0x7e44_0000_0000
    out = tmp_path / "run.json"
    code, text, err = run_cli("run", "--plan", "all", "--repeat", "1", "--warmup", "0", "--sample-ms", "50",
                              "--json", out, "--", memhold(), "--addr", hex(a), "--size", "8M", "--nohuge", "2M:2M",
                              "--exit-after", "1", capsys=capsys)
    assert code == 0, err
    d = load(out)
    run = d["runs"][0]
    (o,) = [x["outcome"] for x in run["applied"]]
    assert o["status"] == "collapsed" and o["regions_collapsed"] == o["regions"] >= 3, o["reason"]
    assert "in ineligible VMAs" in o["reason"] and "VM_NOHUGEPAGE" in o["reason"]
    assert run["peak_anon_huge_bytes"] >= 6 * MIB
    assert d["summary"]["plan_warnings"] == [] and "not fully applied" not in err
    assert "every anonymous mapping" in " ".join(text.split())


@needs_thp
@needs_root
def test_run_program_counts_an_entry_it_could_not_apply(tmp_path, capsys):
    # One entry over the program's 4 MiB plus 4 MiB never mapped: 2 of 4
    # regions huge, a counted warning, and a reason that says so.
    a = 0x7e48_0000_0000
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps([{"start": hex(a), "length": "8MiB"}]))
    out = tmp_path / "run.json"
    code, _, err = run_cli("run", "--plan", plan, "--repeat", "1", "--warmup", "0", "--start-timeout", "0.3",
                           "--json", out, "--", memhold(), "--addr", hex(a), "--size", "4M", "--exit-after", "1",
                           capsys=capsys)
    err = " ".join(err.split())
    assert code == 0
    d = load(out)
    o = d["runs"][0]["applied"][0]["outcome"]
    assert (o["status"], o["regions"], o["regions_collapsed"]) == ("partially_collapsed", 4, 2), o["reason"]
    assert "2 never mapped" in o["reason"] and "--start-timeout 0.3 s" in o["reason"]
    assert d["summary"]["plan_warnings"] == [
        "1 of 1 plan entries not fully applied: 2 of their 4 2 MiB regions stayed in base pages "
        "(each entry's reason says why)"]
    assert "warning: 1 of 1 plan entries not fully applied" in err


def test_run_reports_the_programs_peak_rss_not_the_launchers():
    # Issue #38: 16.8 MiB reported for a program /usr/bin/time measured at
    # 1.9 MB: ru_maxrss counted the forked copy of this Python process.
    ballast = bytearray(128 * MIB)
    ballast[::4096] = b"\x01" * (128 * MIB // 4096)
    r = linux.run(["sleep", "0.3"], repeat=1, warmup=0, sample_ms=20).check()
    assert sum(ballast[::4096]) == 128 * MIB // 4096
    run = r.runs[0]
    assert run["peak_rss_source"] == "vmhwm"
    assert 0 < run["peak_rss_bytes"] < 16 * MIB, run["peak_rss_bytes"]
    assert "VmHWM" in r.how["peak_rss_bytes"]


@needs_thp
@needs_root
def test_apply_plan_and_coverage_of_running_process(capsys):
    a = 0x7e50_0000_0000
    p = subprocess.Popen([memhold(), "--addr", hex(a), "--size", "6M"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        outs = linux.apply_plan(p.pid, [{"start": hex(a), "length": "4MiB"}, {"start": hex(UNMAPPED), "length": "2MiB"}])
        assert outs[0]["status"] == "collapsed" and outs[0]["bytes_huge_after_exact"] == 4 * MIB
        assert outs[1]["status"] == "skipped" and outs[1]["reason"].startswith("not mapped")
        cov = linux.coverage(p.pid)
        vma = [v for v in cov["vmas"] if v["start"] <= a < v["end"]]
        assert vma and vma[0]["anon_huge_bytes"] == 4 * MIB and vma[0]["pmd_mapped_bytes"] == 4 * MIB
        code, text, _ = run_cli("coverage", p.pid, capsys=capsys)
        assert code == 0 and "smaps_rollup" in text and "4 MiB" in text
    finally:
        p.stdin.close()
        p.wait(timeout=10)


def test_thp_command(capsys):
    if "error" in THP:
        pytest.skip(THP["error"])
    code, text, _ = run_cli("thp", capsys=capsys)
    assert code == 0 and "base-page baseline" in text and THP["enabled"]["selected"] in text


def cli(*args, capsys):
    """run_cli with the console's line wrapping undone."""
    code, out, err = run_cli(*args, capsys=capsys)
    return code, " ".join(out.split()), " ".join(err.split())


def test_run_and_coverage_errors_are_clear(capsys, tmp_path):
    run_cli = cli  # noqa: F811 - the same calls, unwrapped output
    code, _, err = run_cli("run", "./prog", "--x", capsys=capsys)
    assert code == 2 and "unknown workload './prog'" in err and "after '--'" in err
    code, _, err = run_cli("run", "gups", "--plan", tmp_path / "missing.json", capsys=capsys)
    assert code == 2 and "missing.json" in err and "does not exist" in err
    code, _, err = run_cli("run", "gups", "--size", "12x", capsys=capsys)
    assert code == 2 and "size" in err
    # Option values are checked by argparse (exit 2, the value as given echoed).
    with pytest.raises(SystemExit) as e:
        run_cli("run", "gups", "--repeat", "0", capsys=capsys)
    assert e.value.code == 2 and "--repeat: 0:" in capsys.readouterr().err
    code, _, err = run_cli("run", "--", capsys=capsys)
    assert code == 2 and "nothing after '--'" in err
    bad = tmp_path / "bad.json"
    bad.write_text('[{"start": 4096, "length": "2MiB"}]')
    code, _, err = run_cli("run", "gups", "--plan", bad, capsys=capsys)
    assert code == 2 and "not aligned" in err
    with pytest.raises(ValueError, match="a mode of run"):
        linux.load_plan("all")
    with pytest.raises(ValueError, match="repeat"):
        linux.run("gups", repeat=0)
    # A process that does not exist is named.
    code, _, err = run_cli("coverage", "4194305", capsys=capsys)
    assert code == 2 and "4194305" in err


def test_fragment_argument_errors(capsys, monkeypatch):
    for args, words in ((["--share", "1.5"], "between 0 and 1"), (["--share", "abc"], "not a number"),
                        ([], "--share"), (["--share", "0.5", "--hold", "--seconds", "3"], "not allowed with"),
                        (["--share", "0.5", "--margin", "12Q"], "invalid size"),
                        (["--share", "0.5", "--seed", "-1"], "negative")):
        with pytest.raises(SystemExit) as e:
            run_cli("fragment", *args)
        assert e.value.code == 2
        assert words in capsys.readouterr().err, args
    with pytest.raises(ValueError, match="between 0 and 1"):
        linux.fragment(2.0)
    # Without root it refuses before touching memory (checked by pretending not to be root).
    monkeypatch.setattr(linux._core, "is_root", lambda: False)
    code, _, err = cli("fragment", "--share", "0.5", "--hold", capsys=capsys)
    assert code == 2 and "needs root" in err
    with pytest.raises(hs.HugescopeError, match="needs root"):
        linux.fragment(0.5)


@needs_thp
@needs_madvise_mode
def test_sample_ms_0_takes_no_samples_and_a_pinned_run_samples_off_its_cpu():
    """The sampler's smaps_rollup reads walk the page tables: with ``sample_ms=0``
    there are none, and a run pinned to one CPU (of two or more) reads them
    from the other CPUs, which the record's ``how`` says."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    cpu = min(os.sched_getaffinity(0))
    none = linux.run("gups", repeat=1, warmup=0, sample_ms=0, cpu=cpu, **GUPS_PARAMS).check()
    assert none.runs[0]["samples"] == [] and none.runs[0]["peak_anon_huge_bytes"] == 0
    some = linux.run("gups", repeat=1, warmup=0, sample_ms=1, cpu=cpu, **GUPS_PARAMS).check()
    assert some.runs[0]["samples"] and "other than the workload's" in some.runs[0]["how"]["samples"]
    assert some.runs[0]["cpus"] == [cpu]
