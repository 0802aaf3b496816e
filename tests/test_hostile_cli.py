"""Random argument vectors thrown at the CLI (hypothesis).

Every non-Linux command (never one that runs programs or changes the machine:
run, apply, fragment, calibrate, validate, coverage, thp) with options drawn
from valid and hostile values: negative, zero, huge, NaN, empty, unicode, and
paths into the temp dir, /dev/null, /dev/full, a symbolic link, the input
trace itself, a directory, a missing directory. Asserted for every vector:
exit code 0 or 2; no traceback, no panic, no "internal error"; a usage error
is exactly one "error:" line; nothing written outside the temp directory (the
cwd), the input traces and /dev nodes unchanged, no temporary or probe file
left. Values are hostile but bounded where only the core could refuse them
(sizes of simulated memory, durations): those limits are tested by the core.

Cases per category are counted and printed (pytest -s) for the closing note.
"""

from __future__ import annotations

import collections
import contextlib
import glob
import hashlib
import io
import os
import shutil
import stat
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hugescope as hs
from hugescope import cli

COUNTS: "collections.Counter[str]" = collections.Counter()


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile-cli")
    inputs = d / "inputs"
    inputs.mkdir()
    t, u = str(inputs / "t.hst"), str(inputs / "u.hst")
    hs.workloads.trace("gups", t, size="4MiB", updates=1500, seed=1)
    hs.workloads.trace("bfs", u, scale=8, seed=1)
    res = d / "results"
    assert cli.main(["curve", t, "--policies", "linux", "--budgets", "0,100", "--frag-points", "", "-o", str(res),
                     "--no-plots"]) == 0
    # The report reads its own copy: sweeps drawn with -o results add results
    # (and figures to render) to the shared one as the test goes.
    shutil.copytree(res, d / "report-in")
    (d / "adir").mkdir()
    os.symlink("target.json", d / "link.json")
    pristine = d / "pristine"
    pristine.mkdir()
    for p in (t, u):
        shutil.copy(p, pristine)
    old = os.getcwd()
    repo_listing = sorted(os.listdir(old))
    os.chdir(d)
    yield {"dir": d, "t": t, "u": u, "results": str(res), "report_in": str(d / "report-in"), "pristine": pristine}
    os.chdir(old)
    assert sorted(os.listdir(old)) == repo_listing, "something was written into the cwd of the test run"
    if COUNTS:
        print("\nhostile CLI cases per category:")
        for k in sorted(COUNTS):
            print(f"  {k}: {COUNTS[k]}")


def sha(path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# ---------------------------------------------------------------- value strategies

UNICODE = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=6)
HOSTILE_NUM = st.sampled_from(["-1", "0", "nan", "inf", "-inf", "1e400", "", " ", "99999999999999999999999",
                               "0x10", "1_000", "½", "5%", "--"]) | UNICODE
PATHS = st.sampled_from(["out.json", "out.hst", "out.html", "/dev/null", "/dev/full", "link.json", "inputs/t.hst",
                         "adir", "missing/x.json", "", "ü.json", "results/curve-t.json"])
DIRS = st.sampled_from(["r1", "r2", "/dev/null", "/dev/full", "inputs/t.hst", "adir", "missing/deeper/r", "",
                        "link.json", "results"])


def opt(name, values):
    """``[name, value]`` or nothing."""
    return st.one_of(st.just([]), values.map(lambda v: [name, str(v)]))


def flag(name):
    return st.sampled_from([[], [name]])


def trace_arg(env):
    return st.sampled_from([env["t"], env["u"], "missing.hst", env["results"], "/dev/null", "adir", ""])


def concat(*parts):
    return st.tuples(*parts).map(lambda xs: [a for x in xs for a in x])


def simulate_argv(env):
    return concat(
        st.just(["simulate"]), trace_arg(env).map(lambda t: [t]),
        opt("--pages", st.sampled_from(["4k", "2m", "1g", "64k", "", "results/curve-t.json"])),
        st.lists(st.sampled_from(["linux", "pcc", "hawkeye", "ideal", "base", "pcc:entries=8", "linux:enabled=never",
                                  "linux:enabled=sometimes", "nosuch", "", "pcc:entries=-1", "pcc:entries=x"]) | UNICODE,
                 max_size=2).map(lambda ps: [a for p in ps for a in ("--policy", p)]),
        opt("--frag", st.sampled_from(["0.5", "0", "1", "1.5"]) | HOSTILE_NUM),
        opt("--frag-method", st.sampled_from(["pcc", "ingens", "x"])),
        opt("--budget", st.sampled_from(["4%", "0.5", "150%", "x%"]) | HOSTILE_NUM),
        opt("--memory", st.sampled_from(["64MiB", "256MiB", "0", "-1", "abc", ""])),
        opt("--footprint", st.sampled_from(["4MiB", "0", "-1", "x"])),
        opt("--duration", st.sampled_from(["10", "120", "0.001"]) | HOSTILE_NUM),
        opt("--rate", st.sampled_from(["1e6", "1"]) | HOSTILE_NUM),
        opt("--seed", st.sampled_from(["1", "7", "18446744073709551615", "18446744073709551616"]) | HOSTILE_NUM),
        opt("--os", st.sampled_from(["fault_base_us=2.5", "nosuch=1", "fault_base_us=-1", "", "="])),
        opt("--preset", st.sampled_from(["haswell-pcc", "nosuch", ""])),
        opt("--set", st.sampled_from(["l1.4k.entries=64", "junk", "l1.4k.entries=-1", ""])),
        flag("--no-base"), opt("--emit-plan", PATHS), opt("--json", PATHS), flag("-q"))


def simulate_valid_argv(env):
    """Mostly valid vectors (so the success path is exercised too)."""
    return concat(
        st.just(["simulate", env["t"]]),
        st.lists(st.sampled_from(["linux", "pcc", "hawkeye", "ideal", "pcc:entries=8"]), min_size=1, max_size=2)
        .map(lambda ps: [a for p in ps for a in ("--policy", p)]),
        st.sampled_from([[], ["--frag", "0.5"], ["--frag", "0.9", "--frag-method", "ingens", "--seed", "3"]]),
        opt("--budget", st.sampled_from(["4%", "0.5", "100%"])), opt("--duration", st.sampled_from(["10", "120"])),
        opt("--memory", st.sampled_from(["64MiB", "256MiB"])), flag("--no-base"),
        opt("--json", st.sampled_from(["s.json", "out.json", "link.json", "adir/s.json"])), flag("-q"))


def sweep_valid_argv(env):
    tr = st.sampled_from([env["t"], env["u"]]).map(lambda t: [t])
    out = st.sampled_from(["r1", "r2", "adir"]).map(lambda d: ["-o", d, "--no-plots"])
    return st.one_of(
        concat(st.just(["curve"]), tr, st.just(["--policies", "linux,pcc", "--budgets", "0,50"]),
               st.sampled_from([["--frag-points", ""], ["--frag-points", "50", "--seed", "4"]]), out),
        concat(st.just(["frag"]), tr, st.just(["--policies", "linux", "--levels", "50"]), out),
        concat(st.just(["sensitivity"]), tr, st.just(["--pcc-sizes", "4,8"]), out),
        concat(st.just(["reuse"]), tr, st.just(["--max-points", "20"]), out),
        concat(st.just(["multi"]), tr, st.just(["--budgets", "1,4"]), out))


def trace_argv(env):
    outs = st.sampled_from(["out.hst", "/dev/null", "/dev/full", "link.json", "adir", "missing/x.hst", "",
                            "results/curve-t.json", "ü.hst", "out.json"])
    gen = concat(st.just(["trace", "gups"]), opt("--size", st.sampled_from(["4MiB", "64KiB", "0", "-1", "x"])),
                 opt("--updates", st.sampled_from(["100", "0", "-5", "nan", "", "1.5"])),
                 opt("--accesses", st.sampled_from(["200", "0", "-1", "x"])),
                 opt("--limit", st.sampled_from(["50", "0", "-1", "1e400", "x", "18446744073709551616"])),
                 opt("--seed", HOSTILE_NUM | st.just("3")), opt("-o", outs))
    info = concat(st.just(["trace", "info"]), trace_arg(env).map(lambda t: [t]), flag("--verify"), flag("--json"))
    merge = concat(st.sampled_from([["trace", "merge"], ["merge"]]),
                   st.lists(trace_arg(env), max_size=3),
                   opt("-o", outs | st.sampled_from(["inputs/t.hst", "inputs/u.hst"])),
                   opt("--slice", st.sampled_from(["1", "1000", "0", "-1", "1e3", "x", "36893488147419103232"])),
                   flag("--shared-cpus"))
    helps = st.sampled_from([["trace"], ["trace", "--help"], ["trace", "info", "--help"], ["trace", "merge", "--help"],
                             ["trace", "gups", "--help"], ["trace", "nosuch"], ["trace", "info"], ["native", "--help"],
                             ["native", "gups", "--help"]])
    return st.one_of(gen, info, merge, helps)


def sweep_argv(env):
    lists = st.sampled_from(["0,100", "4", "", "nan", "-1", "1e3", "4..16", "3..9", "1,x", "100..1", ",,"]) | UNICODE
    common = concat(opt("-o", DIRS), opt("--threads", st.sampled_from(["1", "2", "0", "-1", "100000", "x", "nan"])),
                    opt("--duration", st.sampled_from(["30"]) | HOSTILE_NUM), opt("--rate", HOSTILE_NUM),
                    opt("--memory", st.sampled_from(["64MiB", "-1", "x"])), flag("--resume"),
                    st.sampled_from([["--no-plots"], ["--no-plots"], []]),
                    opt("--preset", st.sampled_from(["haswell-pcc", "nosuch"])))
    tr = trace_arg(env).map(lambda t: [t])
    curve = concat(st.just(["curve"]), tr, opt("--policies", st.sampled_from(["linux", "pcc,linux", "", "nosuch"])),
                   opt("--budgets", lists), opt("--frag-points", lists), opt("--frag-policy", st.sampled_from(["linux", "x"])),
                   opt("--seed", HOSTILE_NUM | st.just("2")), common)
    frag = concat(st.just(["frag"]), tr, opt("--levels", lists), opt("--policies", st.sampled_from(["linux", "base,pcc"])),
                  opt("--frag-method", st.sampled_from(["pcc", "ingens", "x"])), opt("--seed", HOSTILE_NUM), common)
    sens = concat(st.just(["sensitivity"]), tr, opt("--pcc-sizes", lists), opt("--budget", lists),
                  opt("--policy", st.sampled_from(["pcc", "linux", "nosuch"])),
                  opt("--param", st.sampled_from(["entries", "nosuch", ""])), common)
    multi = concat(st.just(["multi"]), st.lists(trace_arg(env), min_size=0, max_size=2),
                   opt("--policies", st.sampled_from(["pcc:promotion_policy=1", "linux", ""])),
                   opt("--budgets", lists), opt("--slice", st.sampled_from(["10", "0", "-1"])), flag("--shared-cpus"),
                   common)
    reuse = concat(st.just(["reuse"]), tr, opt("-o", DIRS), opt("--threshold", HOSTILE_NUM | st.just("64")),
                   opt("--average", st.sampled_from(["ema", "mean", "x"])), opt("--alpha", HOSTILE_NUM | st.just("0.5")),
                   opt("--max-points", st.sampled_from(["100", "0", "-1", "1000000000", "x"])),
                   opt("--seed", HOSTILE_NUM), flag("--no-plots"))
    return st.one_of(curve, frag, sens, multi, reuse)


def misc_argv(env):
    report = concat(st.just(["report"]),
                    st.sampled_from([env["report_in"], "adir", "missing", env["t"], "/dev/null", ""]).map(lambda d: [d]),
                    opt("-o", PATHS), opt("--title", UNICODE))
    bench = concat(st.just(["bench", "--size", "4MiB", "--workloads", "gups", "--no-rss"]),
                   st.sampled_from([["--accesses", "2000"], ["--accesses", "0"], ["--accesses", "-1"],
                                    ["--accesses", "x"], ["--accesses", "nan"]]),
                   st.sampled_from([["--repeat", "1"], ["--repeat", "0"], ["--repeat", "-1"], ["--repeat", "1000000"],
                                    ["--repeat", "x"]]), opt("--json", PATHS))
    # demo only with outputs it must refuse before any work (a real demo takes minutes).
    demo = st.sampled_from(["/dev/null", "/dev/full", "inputs/t.hst", "link.json", ""]).map(
        lambda o: ["demo", "--quick", "--out", o])
    simple = st.sampled_from([["policies"], ["workloads"], ["presets"], ["presets", "haswell-pcc"], ["presets", "nosuch"],
                              ["presets", ""], ["policies", "extra"], ["--version"], ["--help"], [], ["nosuch"],
                              ["simulate", "--help"], ["curve", "--help"], ["report", "--help"], ["bench", "--help"],
                              ["validate", "--help"], ["merge", "--help"], ["multi", "--help"], ["reuse", "--help"]])
    return st.one_of(report, bench, demo, simple)


# ---------------------------------------------------------------- the property

def leftovers(d) -> list:
    return [p for p in glob.glob(os.path.join(str(d), "**", ".*"), recursive=True)
            if ".tmp" in os.path.basename(p) or "hugescope-probe" in p]


DEVICES = {p: os.stat(p).st_rdev for p in ("/dev/null", "/dev/full")}


def check(env, argv, category):
    before = {p: sha(p) for p in (env["t"], env["u"])}
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(list(argv))
        except SystemExit as e:  # argparse's usage errors and --help, as argparse does
            code = 0 if e.code is None else e.code
    e = err.getvalue()
    COUNTS[f"{category} exit {code}"] += 1
    assert code in (0, 2), f"{argv}: exit {code}\n{e}"
    for bad in ("Traceback", "panicked", "internal error"):
        assert bad not in e, f"{argv}:\n{e}"
    if code == 2:
        lines = [ln for ln in e.splitlines() if "error:" in ln]
        assert len(lines) == 1, f"{argv}: expected one error line:\n{e}"
    for p, rdev in DEVICES.items():
        st_ = os.stat(p)
        assert stat.S_ISCHR(st_.st_mode) and st_.st_rdev == rdev, p
    for p, h in before.items():
        if sha(p) != h:
            # Only a trace writer told to write there (-o) may replace a trace,
            # and only one that does not read it.
            o = argv.index("-o") + 1 if "-o" in argv else None
            assert code == 0 and o is not None and os.path.abspath(argv[o]) == p, argv
            assert p not in [os.path.abspath(a) for i, a in enumerate(argv) if i != o], argv
            shutil.copy(os.path.join(env["pristine"], os.path.basename(p)), p)
    assert leftovers(env["dir"]) == [], argv
    assert os.getcwd() == str(env["dir"])


def bounded(n):
    """Settings of one category: ``n`` examples, no deadline (a sweep takes a
    second), derandomized so every run tries the same cases."""
    return settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                          HealthCheck.too_slow, HealthCheck.data_too_large],
                    derandomize=True, database=None)


@bounded(120)
@given(data=st.data())
def test_simulate_argv(env, data):
    argv = data.draw(st.tuples(flag("--follow-symlinks"), simulate_argv(env) | simulate_valid_argv(env))
                     .map(lambda x: x[0] + x[1]))
    check(env, argv, "simulate")


@bounded(100)
@given(data=st.data())
def test_trace_argv(env, data):
    check(env, data.draw(trace_argv(env)), "trace/merge")


@bounded(70)
@given(data=st.data())
def test_sweep_argv(env, data):
    check(env, data.draw(sweep_argv(env) | sweep_valid_argv(env)), "curve/frag/sensitivity/multi/reuse")


@bounded(50)
@given(data=st.data())
def test_misc_argv(env, data):
    check(env, data.draw(misc_argv(env)), "report/bench/demo/list/help")


# ---------------------------------------------------------------- subprocess spot checks

@pytest.mark.parametrize("argv, code, needle", [
    (["simulate", "{t}", "--policy", "linux", "--frag", "0.5", "--seed", "-1"], 2, "--seed: '-1'"),
    (["simulate", "{t}", "--frag", "0.5"], 2, "--frag applies to the OS model"),
    (["simulate", "{t}", "--json", "/dev/full"], 2, "character device"),
    (["curve", "{t}", "--threads", "nan"], 2, "--threads: 'nan'"),
    (["bench", "--repeat", "-1"], 2, "--repeat: '-1'"),
    (["trace", "info", "--help"], 0, ""),
    (["validate", "--help"], 0, ""),
])
def test_subprocess_spot_checks(env, argv, code, needle):
    argv = [a.format(t=env["t"]) for a in argv]
    r = subprocess.run([sys.executable, "-m", "hugescope"] + argv, capture_output=True, text=True, cwd=env["dir"])
    assert r.returncode == code, r.stderr
    assert "Traceback" not in r.stderr
    if code == 2:
        assert len(r.stderr.strip().splitlines()) == 1 and needle in r.stderr, r.stderr
