"""Hostile output targets, for every command that writes a file.

Run as root (as users do), the old writer replaced device nodes, followed
nothing and wrote over the input trace. Every target below must be refused
with one error line (exit 2) before any work starts (the core's work entry
points are replaced by a tripwire), and must be left exactly as it was.
"""

from __future__ import annotations

import glob
import hashlib
import os
import stat

import pytest

import hugescope as hs
from hugescope import _core, cli


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile-out")
    t, t2 = str(d / "t.hst"), str(d / "u.hst")
    hs.workloads.trace("gups", t, size="4MiB", updates=3000, seed=1)
    hs.workloads.trace("gups", t2, size="4MiB", updates=2000, seed=2)
    res = d / "results"
    assert cli.main(["curve", t, "--policies", "linux", "--budgets", "0,100", "--frag-points", "", "-o", str(res),
                     "--no-plots"]) == 0
    return {"t": t, "u": t2, "results": str(res)}


# Commands writing one file: name -> (argv builder, kind of the output).
FILE_WRITERS = {
    "simulate --json": (lambda k, o: ["simulate", k["t"], "--json", o], "json"),
    "simulate --emit-plan": (lambda k, o: ["simulate", k["t"], "--policy", "linux", "--emit-plan", o], "json"),
    "trace -o": (lambda k, o: ["trace", "gups", "--size", "4MiB", "--updates", "500", "-o", o], "hst"),
    "merge -o": (lambda k, o: ["merge", k["t"], k["u"], "-o", o], "hst"),
    "trace merge -o": (lambda k, o: ["trace", "merge", k["t"], k["u"], "-o", o], "hst"),
    "report -o": (lambda k, o: ["report", k["results"], "-o", o], "html"),
    "bench --json": (lambda k, o: ["bench", "--size", "4MiB", "--accesses", "2000", "--repeat", "1", "--workloads", "gups",
                                      "--no-rss", "--json", o],
                     "json"),
    "native --json": (lambda k, o: ["native", "gups", "--size", "4MiB", "--updates", "500", "--json", o], "json"),
}

# Commands writing a results directory: name -> (argv builder, the JSON they write in it).
DIR_WRITERS = {
    "curve": (lambda k, d: ["curve", k["t"], "--policies", "linux", "--budgets", "0,100", "--frag-points", "",
                            "-o", d], "curve-t.json"),
    "frag": (lambda k, d: ["frag", k["t"], "--policies", "linux", "--levels", "50", "-o", d], "frag-t.json"),
    "sensitivity": (lambda k, d: ["sensitivity", k["t"], "--pcc-sizes", "4..8", "-o", d], "sensitivity-t.json"),
    "reuse": (lambda k, d: ["reuse", k["t"], "--max-points", "50", "-o", d], "reuse-t.json"),
    "multi": (lambda k, d: ["multi", k["t"], "--budgets", "1", "-o", d], "multi-t.json"),
    "tlb-sizes": (lambda k, d: ["tlb-sizes", k["t"], "--entries", "128,256", "-o", d], "tlb-sizes-t.json"),
}

WORK = ("simulate_static", "simulate_tlb_sizes", "simulate_policies", "run_specs", "trace_workload", "merge_traces", "reuse_distance",
        "bench_file", "bench_pipeline", "native_workload")


@pytest.fixture
def no_work(monkeypatch):
    """Any simulation, tracing, merging or native run fails the test: the
    refusal must come before the work."""
    def tripwire(*a, **kw):
        raise AssertionError("work started before the output was checked")
    for name in WORK:
        monkeypatch.setattr(_core, name, tripwire)


def run(args, capsys):
    try:
        code = cli.main([str(a) for a in args])
    except SystemExit as e:  # argparse's usage errors and --help, as argparse does
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def sha(path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def leftovers(d) -> list:
    """Temporary or probe files of the writers (none may survive)."""
    return [p for p in glob.glob(os.path.join(str(d), "**", ".*"), recursive=True)
            if ".tmp" in os.path.basename(p) or "hugescope-probe" in p]


def assert_refused(code, err, *needles):
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    assert "Traceback" not in err
    for n in needles:
        assert n in err, err


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


# ---------------------------------------------------------------- one-file outputs

@pytest.mark.parametrize("writer", sorted(FILE_WRITERS))
@pytest.mark.parametrize("device", ["/dev/null", "/dev/full"])
def test_devices_stay_devices(writer, device, tiny, no_work, capsys):
    before = os.stat(device)
    code, _, err = run(FILE_WRITERS[writer][0](tiny, device), capsys)
    assert_refused(code, err, device, "character device")
    after = os.stat(device)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev


@pytest.mark.parametrize("writer", sorted(FILE_WRITERS))
def test_fifo_directory_missing_and_unwritable(writer, tiny, tmp_path, no_work, capsys):
    build = FILE_WRITERS[writer][0]
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    code, _, err = run(build(tiny, fifo), capsys)
    assert_refused(code, err, str(fifo), "FIFO")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    code, _, err = run(build(tiny, tmp_path), capsys)
    assert_refused(code, err, "a directory")
    code, _, err = run(build(tiny, tmp_path / "missing" / "out"), capsys)
    assert_refused(code, err, "does not exist")
    assert not (tmp_path / "missing").exists()
    # Root may write anywhere access() is asked about; /proc refuses new files to everyone.
    code, _, err = run(build(tiny, "/proc/hugescope-out"), capsys)
    assert_refused(code, err, "/proc", "cannot create files")
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("writer", sorted(FILE_WRITERS))
def test_symlink_refused_unless_followed(writer, tiny, tmp_path, capsys, monkeypatch):
    build, kind = FILE_WRITERS[writer]
    target = tmp_path / "target"
    link = tmp_path / "link"
    os.symlink("target", link)
    with monkeypatch.context() as m:
        for name in WORK:
            m.setattr(_core, name, lambda *a, **kw: pytest.fail("work started"))
        code, _, err = run(build(tiny, link), capsys)
    assert_refused(code, err, str(link), "symbolic link", "--follow-symlinks")
    assert os.path.islink(link) and not target.exists()
    code, _, err = run(["--follow-symlinks"] + build(tiny, link), capsys)
    assert code == 0, err
    assert os.path.islink(link) and os.readlink(link) == "target"
    assert target.is_file() and os.path.getsize(target) > 0
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o666 & ~_umask()
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("writer", ["simulate --json", "simulate --emit-plan", "merge -o", "trace merge -o"])
def test_output_equal_to_input_keeps_the_trace(writer, tiny, tmp_path, no_work, capsys):
    import shutil

    t = tmp_path / "t.hst"
    shutil.copy(tiny["t"], t)
    k = dict(tiny, t=str(t))
    before = sha(t)
    code, _, err = run(FILE_WRITERS[writer][0](k, t), capsys)
    assert_refused(code, err, str(t))
    assert "same file as the input" in err or "holds a hugescope trace" in err
    # A hard link is the same file under another name: compared by inode.
    os.link(t, tmp_path / "alias.hst")
    code, _, err = run(FILE_WRITERS[writer][0](k, tmp_path / "alias.hst"), capsys)
    assert code == 2 and "Traceback" not in err
    assert sha(t) == before


def test_emit_plan_over_the_replayed_plan_is_refused(tiny, tmp_path, capsys):
    plan = tmp_path / "p.json"
    plan.write_text("[]\n")
    code, _, err = run(["simulate", tiny["t"], "--policy", f"static:plan={plan}", "--emit-plan", plan], capsys)
    assert_refused(code, err, "same file as the input")
    assert plan.read_text() == "[]\n"


def test_trace_over_its_graph_file_is_refused(tmp_path, no_work, capsys):
    g = tmp_path / "g.el"
    g.write_text("0 1\n1 2\n")
    code, _, err = run(["trace", "bfs", "--file", g, "-o", g], capsys)
    assert_refused(code, err, "same file as the input")
    assert g.read_text() == "0 1\n1 2\n"


@pytest.mark.parametrize("writer", sorted(FILE_WRITERS))
def test_other_kind_of_output_is_not_replaced(writer, tiny, tmp_path, no_work, capsys):
    build, kind = FILE_WRITERS[writer]
    other = tmp_path / "other"
    # Results JSON for every writer of a non-JSON kind, an HTML page for JSON writers.
    other.write_text('{"hugescope_experiment": "curve"}\n' if kind != "json" else "<!DOCTYPE html><html></html>\n")
    before = sha(other)
    code, _, err = run(build(tiny, other), capsys)
    assert_refused(code, err, str(other), "refusing to replace it")
    assert sha(other) == before


def test_report_does_not_overwrite_results_json(tiny, capsys):
    res = os.path.join(tiny["results"], "curve-t.json")
    before = sha(res)
    code, _, err = run(["report", tiny["results"], "-o", res], capsys)
    assert_refused(code, err, "holds JSON", "HTML")
    assert sha(res) == before


@pytest.mark.parametrize("writer", sorted(FILE_WRITERS))
def test_modes_and_rerun_of_the_same_kind(writer, tiny, tmp_path, capsys):
    build, kind = FILE_WRITERS[writer]
    out = tmp_path / f"out.{kind}"
    for _ in range(2):  # the second run replaces the first (same kind)
        code, _, err = run(build(tiny, out), capsys)
        assert code == 0, err
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o666 & ~_umask()
    assert hs._io.check_output(out, kind) == str(out)  # the file holds what its kind says
    assert leftovers(tmp_path) == []


# ---------------------------------------------------------------- results directories

@pytest.mark.parametrize("writer", sorted(DIR_WRITERS))
def test_results_directory_outputs(writer, tiny, tmp_path, capsys, monkeypatch):
    build, json_name = DIR_WRITERS[writer]
    with monkeypatch.context() as m:
        for name in WORK:
            m.setattr(_core, name, lambda *a, **kw: pytest.fail("work started"))
        code, _, err = run(build(tiny, "/dev/null"), capsys)
        assert_refused(code, err, "/dev/null", "not a directory")
        code, _, err = run(build(tiny, tiny["t"]), capsys)
        assert_refused(code, err, "not a directory")
        d = tmp_path / "r"
        d.mkdir()
        os.symlink("/dev/null", d / json_name)
        code, _, err = run(build(tiny, d), capsys)
        assert_refused(code, err, json_name, "symbolic link")
        os.unlink(d / json_name)
        os.mkfifo(d / json_name.replace(".json", ".csv"))
        code, _, err = run(build(tiny, d), capsys)
        assert_refused(code, err, "FIFO")
        os.unlink(d / json_name.replace(".json", ".csv"))
        (d / json_name.replace(".json", ".png")).write_text("<!DOCTYPE html>\n")
        code, _, err = run(build(tiny, d), capsys)
        assert_refused(code, err, "holds HTML")
        os.unlink(d / json_name.replace(".json", ".png"))
    code, _, err = run(build(tiny, d), capsys)
    assert code == 0, err
    files = sorted(os.listdir(d))
    assert json_name in files and not any("checkpoint" in f for f in files), files
    kinds = {os.path.splitext(f)[1] for f in files}
    assert {".csv", ".json", ".png"} <= kinds
    mode = 0o666 & ~_umask()
    for f in files:
        assert stat.S_IMODE(os.stat(d / f).st_mode) == mode, f
    assert leftovers(d) == []


def test_demo_checks_its_outputs_first(tmp_path, no_work, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(["demo", "--quick", "--out", "/dev/null"], capsys)
    assert_refused(code, err, "/dev/null")
    os.symlink("/dev/full", tmp_path / "demo-report")
    code, _, err = run(["demo", "--quick", "--out", tmp_path / "o"], capsys)
    assert_refused(code, err, "demo-report", "symbolic link")
