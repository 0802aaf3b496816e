"""The CLI's output conventions (docs/cli.md, "Output conventions"):
`--json FILE` with `-` for standard output (never a file named `-`),
`--format table|json|csv` on the listing commands, one unwrapped line per
error when stderr is a pipe, one file mode for every result file, and
`--help` text whose brackets survive on every command."""

import csv
import io
import json
import os
import re
import stat
import subprocess
import sys

import pytest

from conftest import run_cli
from hugescope import cli


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Run from an empty directory, so a stray file named '-' would show."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


# ---------------------------------------------------------------- --json -

@pytest.mark.parametrize("args", [
    ["simulate", "{t}", "--pages", "4k", "--json", "-"],
    ["simulate", "{t}", "--policy", "linux", "--duration", "1", "--json", "-"],
    ["trace", "info", "{t}", "--json", "-"],
    ["trace", "info", "{t}", "--json"],   # bare --json: '-'
    ["config", "--json"],
    ["config", "--json", "-"],
    ["presets", "haswell-pcc"],
    ["native", "gups", "--size", "4MiB", "--updates", "1000", "--json", "-"],
])
def test_json_dash_is_stdout_and_no_file(args, gups_trace, in_tmp, capsys):
    code, out, err = run_cli(*[a.format(t=gups_trace) for a in args], capsys=capsys)
    assert code == 0, err
    json.loads(out)  # stdout is the JSON alone: the tables went to stderr
    assert os.listdir(in_tmp) == [], "a file was written for '-'"


def test_json_dash_equals_the_file(gups_trace, in_tmp, capsys):
    args = ["simulate", gups_trace, "--pages", "2m"]
    assert run_cli(*args, "--json", "r.json", "-q", capsys=capsys)[0] == 0
    code, out, _ = run_cli(*args, "--json", "-", "-q", capsys=capsys)
    assert code == 0 and out == (in_tmp / "r.json").read_text()


def test_two_outputs_on_stdout_refused(gups_trace, in_tmp, capsys):
    code, _, err = run_cli("simulate", gups_trace, "--policy", "linux", "--json", "-", "--emit-plan", "-",
                           capsys=capsys)
    assert code == 2 and err.count("\n") == 1 and "standard output" in err, err
    assert os.listdir(in_tmp) == []


def test_trace_info_json_before_the_trace_says_so(gups_trace, capsys):
    # `trace info --json X.hst` takes X.hst as the output: refused with the fix.
    code, _, err = run_cli("trace", "info", "--json", gups_trace, capsys=capsys)
    assert code == 2 and err.count("\n") == 1 and "put the trace first" in err, err


# ---------------------------------------------------------------- --format

LISTINGS = [["workloads"], ["policies"], ["presets"], ["config", "--keys"]]


@pytest.mark.parametrize("cmd", LISTINGS)
def test_listing_formats(cmd, capsys, in_tmp):
    code, table, _ = run_cli(*cmd, capsys=capsys)
    assert code == 0 and table.strip()
    code, out, _ = run_cli(*cmd, "--format", "json", capsys=capsys)
    data = json.loads(out)
    assert code == 0 and isinstance(data, list) and data
    # --json is the shorthand, bare (stdout) or with a file.
    assert run_cli(*cmd, "--json", capsys=capsys)[1] == out
    assert run_cli(*cmd, "--json", "list.json", capsys=capsys)[0] == 0
    assert (in_tmp / "list.json").read_text() == out
    code, out, _ = run_cli(*cmd, "--format", "csv", capsys=capsys)
    rows = list(csv.reader(io.StringIO(out)))
    assert code == 0 and len(rows) >= 2 and all(len(r) == len(rows[0]) for r in rows)
    assert rows[0][0] in ("workload", "name", "key")


def test_listing_rows_match_between_formats(capsys):
    names = [p["name"] for p in json.loads(run_cli("policies", "--format", "json", capsys=capsys)[1])]
    rows = list(csv.reader(io.StringIO(run_cli("policies", "--format", "csv", capsys=capsys)[1])))
    assert [r[0] for r in rows[1:]] == names


@pytest.mark.parametrize("args,needle", [
    (["workloads", "--format", "csv", "--json"], "--format csv"),
    (["workloads", "--format", "xml"], "--format"),
    (["config", "--format", "csv"], "--keys"),
    (["presets", "--json", "haswell-pcc"], "presets haswell-pcc"),
])
def test_listing_bad_format_one_error(args, needle, capsys, in_tmp):
    code, err = _run(args, capsys)
    assert code == 2 and err.count("\n") == 1 and needle in err, err
    assert os.listdir(in_tmp) == []


def _run(args, capsys):
    """Exit code and stderr, also for argparse's own errors (SystemExit(2))."""
    try:
        code = cli.main(list(args))
    except SystemExit as e:
        code = e.code
    return code, capsys.readouterr().err


# ---------------------------------------------------------------- errors

def test_piped_error_is_one_unwrapped_line(tmp_path):
    bad = "nosuchpolicy" + "x" * 150  # far past rich's 80 columns
    r = subprocess.run([sys.executable, "-m", "hugescope", "config", "--policy", bad],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error:") and bad in r.stderr, r.stderr


# ---------------------------------------------------------------- file modes

def test_csv_json_png_share_one_mode(gups_trace, tmp_path, capsys):
    out = tmp_path / "r"
    assert run_cli("reuse", gups_trace, "-o", out, "--max-points", "200", capsys=capsys)[0] == 0
    sim = tmp_path / "sim.json"
    assert run_cli("simulate", gups_trace, "--json", sim, "-q", capsys=capsys)[0] == 0
    files = sorted(out.iterdir()) + [sim]
    kinds = {p.suffix for p in files}
    assert {".csv", ".json", ".png"} <= kinds, files
    umask = os.umask(0o022)
    os.umask(umask)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in files}
    assert set(modes.values()) == {0o666 & ~umask}, modes


# ---------------------------------------------------------------- --help

def _commands():
    sub = next(a for a in cli.build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    return sub.choices


# Commands whose help is written by hand (parsed outside argparse), and text
# with brackets each must show.
HAND_HELP = {
    ("trace", "--help"): ["[params]", "[--skip N]", "[--verify]", "{lackey,champsim,text}"],
    ("native", "--help"): ["[params]", "[--thp]", "[--json FILE]"],
    ("cc", "--help"): ["[clang arguments]"],
    ("validate", "--help"): ["[workload params]", "[--ks 1,2,4,8]", "[--trace FILE.hst | --trace-dir DIR]"],
}
NESTED = [["trace", "info", "--help"], ["trace", "import", "--help"], ["trace", "merge", "--help"],
          ["trace", "gups", "--help"], ["native", "gups", "--help"], ["run", "gups", "--help"],
          ["validate", "gups", "--help"]]


def _help(argv, capsys) -> str:
    try:
        code = cli.main(list(argv))
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr().out
    assert code in (0, None), (argv, out)
    return out


def _brackets(text: str):
    return set(re.findall(r"\[[^\[\]\n]+\]", text))


def test_every_help_keeps_its_brackets(capsys):
    top = _help(["--help"], capsys)
    subs = _commands()
    for name in subs:
        assert name in top  # every command is listed
    assert "[-h]" in top and "[--follow-symlinks]" in top
    for name, parser in subs.items():
        out = _help([name, "--help"], capsys)
        if (name, "--help") in HAND_HELP:
            missing = [b for b in HAND_HELP[(name, "--help")] if b not in out]
        else:
            # argparse's own rendering is the reference: every bracketed
            # piece of it must reach the terminal.
            missing = sorted(_brackets(parser.format_help()) - _brackets(out))
            assert _brackets(out), (name, out)
        assert not missing, (name, missing, out)
    for argv in NESTED:
        out = _help(argv, capsys)
        assert "usage:" in out and "[-h]" in out, (argv, out)
