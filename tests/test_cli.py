"""The foundation end to end: trace generation, trace info, simulation with
static page maps, JSON output, determinism, and clear errors on bad input."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import hugescope as hs
from hugescope import cli
from hugescope import trace_reader
from conftest import load, run_cli


def test_trace_info_counts_match_generation(gups_trace, capsys):
    info = hs.trace_info(gups_trace, verify=True)
    assert info["summary"]["accesses"] == 400_000  # 2 per GUPS update
    assert info["summary"]["reads"] == info["summary"]["writes"] == 200_000
    assert info["header"]["workload"] == "gups"
    assert info["header"]["regions"][0]["len"] == 64 << 20
    code, out, _ = run_cli("trace", "info", gups_trace, capsys=capsys)
    assert code == 0 and "400,000" in out and "table" in out


def test_numpy_reader_agrees_with_the_footer(gups_trace):
    h = trace_reader.read_header(gups_trace)
    a = trace_reader.read_accesses(gups_trace)
    assert h["workload"] == "gups"
    assert len(a) == 400_000
    # Chunk by chunk (the writer's chunks hold at most 2^20 records): the
    # same accesses, and the writes the footer counts.
    parts = list(trace_reader.chunks(gups_trace))
    assert all(0 < len(c) <= 1 << 20 for c in parts)
    assert np.array_equal(np.concatenate(parts), a)
    assert int(a["write"].sum()) == hs.trace_info(gups_trace)["summary"]["writes"] == 200_000
    assert not a["cpu"].any() and not a["pid"].any()
    # GUPS: each update reads then writes the same 8-byte element of the table.
    assert np.array_equal(a["addr"][0::2], a["addr"][1::2])
    assert not a["write"][0::2].any() and a["write"][1::2].all()
    base = h["regions"][0]["base"]
    assert (a["addr"] >= base).all() and (a["addr"] < base + (64 << 20)).all()


def _rewrite_as_version_1(src, dst):
    """Re-encode a version-2 trace (byte planes) as version 1 (whole records),
    frame by frame, so the reader's version-1 path is exercised."""
    import zstandard

    data = src.read_bytes()
    hlen = struct.unpack_from("<I", data, 12)[0]
    at = 20 + hlen
    out = bytearray(data[:at])
    out[8:10] = struct.pack("<H", 1)
    # Version 1's checksum covers the header JSON alone.
    out[16:20] = struct.pack("<I", zlib.crc32(data[20:at]))
    while data[at : at + 4] == b"CHNK":
        count, clen, _ = struct.unpack_from("<III", data, at + 4)
        raw = zstandard.ZstdDecompressor().decompress(data[at + 16 : at + 16 + clen], max_output_size=count * 8)
        recs = np.ascontiguousarray(np.frombuffer(raw, np.uint8).reshape(8, count).T).tobytes()
        comp = zstandard.ZstdCompressor(level=1).compress(recs)
        out += b"CHNK" + struct.pack("<III", count, len(comp), zlib.crc32(recs)) + comp
        at += 16 + clen
    footer_offset = len(out)
    fh = bytearray(data[at : at + 16])
    flen = struct.unpack_from("<I", fh, 4)[0]
    footer = bytearray(data[at + 16 : at + 16 + flen])
    # The footer counts compressed bytes; recompute it for the new payloads.
    summary = json.loads(footer)
    summary["compressed_bytes"] = footer_offset - (20 + hlen) - 16 * summary["chunks"]
    footer = json.dumps(summary).encode()
    out += b"FOOT" + struct.pack("<III", len(footer), zlib.crc32(footer), 0) + footer
    out += struct.pack("<Q", footer_offset) + b"\x89HSTEND\n"
    dst.write_bytes(bytes(out))


def test_version_1_traces_are_refused_then_converted(gups_trace, tmp_path, capsys):
    v1 = tmp_path / "v1.hst"
    _rewrite_as_version_1(Path(gups_trace), v1)
    assert v1.read_bytes()[8:10] == b"\x01\x00"
    # Refused in one line that names the conversion (issue #31: a version
    # field cannot be trusted before version 3).
    code, _, err = run_cli("trace", "info", v1, capsys=capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "format version 1" in lines[0] and "trace convert" in lines[0], err
    v3 = tmp_path / "v3.hst"
    code, _, err = run_cli("trace", "convert", v1, "-o", v3, capsys=capsys)
    assert code == 0, err
    assert v3.read_bytes()[8:10] == b"\x03\x00"
    assert np.array_equal(trace_reader.read_accesses(str(v3)), trace_reader.read_accesses(gups_trace))
    # The Rust reader agrees: same walks for both files, and --verify passes.
    code, _, _ = run_cli("trace", "info", v3, "--verify", capsys=capsys)
    assert code == 0
    r1 = hs.simulate(str(v3), pages="4k").to_dict()["translation"]
    r2 = hs.simulate(gups_trace, pages="4k").to_dict()["translation"]
    assert r1 == r2
    # Converting refuses to write over its input.
    code, _, err = run_cli("trace", "convert", v1, "-o", v1, capsys=capsys)
    assert code == 2 and "same file as the input" in err


def test_simulate_4k_vs_2m_and_json(gups_trace, tmp_path, capsys):
    out4, out2 = tmp_path / "4k.json", tmp_path / "2m.json"
    code, printed, _ = run_cli("simulate", gups_trace, "--pages", "4k", "--json", out4, capsys=capsys)
    assert code == 0
    assert run_cli("simulate", gups_trace, "--pages", "2m", "--json", out2, "-q", capsys=capsys)[0] == 0
    r4, r2 = load(out4), load(out2)
    t4, t2 = r4["translation"], r2["translation"]
    assert t4["accesses"] == t2["accesses"] == 400_000
    # 64MiB = 32 huge pages: all fit the 2MB L1 + L2, so only cold walks.
    assert t2["walks"] == 32
    # 4KB: far beyond the 4MB L2 reach, nearly every read walks.
    assert t4["walks"] > 150_000
    assert r4["cost"]["kind"] == "estimate"
    assert 0 < r4["cost"]["translation_share"] < 1
    # The table printed is derived from the JSON counters.
    assert f"{t4['walks']:,}" in printed and f"{t4['walk_refs']:,}" in printed


def test_results_are_byte_identical_across_runs(gups_trace, tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for p in (a, b):
        assert run_cli("simulate", gups_trace, "--policy", "linux", "--frag", "0.5", "--json", p, "-q")[0] == 0
    assert a.read_bytes() == b.read_bytes()


def test_trace_generation_is_deterministic(tmp_path):
    a, b = tmp_path / "a.hst", tmp_path / "b.hst"
    for p in (a, b):
        hs.workloads.trace("bfs", str(p), scale=10, seed=5)
    assert a.read_bytes() == b.read_bytes()


def test_plan_file_as_static_map(gups_trace, tmp_path):
    base = hs.trace_info(gups_trace)["header"]["regions"][0]["base"]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps([{"start": hex(base), "length": "32MiB", "page_size": "2MiB"}]))
    half = hs.simulate(gups_trace, pages=str(plan)).summary()["walks"]
    all4k = hs.simulate(gups_trace, pages="4k").summary()["walks"]
    # Half of the footprint huge: roughly half the walks remain.
    assert 0.4 * all4k < half < 0.6 * all4k


def test_machine_overrides(gups_trace):
    small = hs.simulate(gups_trace, set=["l2.4k+2m.entries=64", "l2.4k+2m.ways=4"]).summary()["walks"]
    big = hs.simulate(gups_trace, set=["l2.4k+2m.entries=16384", "l2.4k+2m.ways=16"]).summary()["walks"]
    assert small > big
    cfg = hs.machine_config("alpha-21264")
    assert cfg["page_sizes"] == ["8k", "64k", "512k", "4m"]


@pytest.mark.parametrize(
    "args, needle",
    [
        (["simulate", "/nonexistent.hst"], "nonexistent.hst"),
        (["simulate", "{gups}", "--preset", "pentium"], "unknown preset"),
        (["simulate", "{gups}", "--set", "l1.4k.entries=63"], "l1.4k"),
        (["simulate", "{gups}", "--pages", "64k"], "not supported"),
        (["simulate", "{gups}", "--pages", "/no/plan.json"], "neither a page size"),
        (["simulate", "{gups}", "--policy", "nosuch"], "unknown policy"),
        (["simulate", "{gups}", "--policy", "linux:enabled=sometimes"], "enabled"),
        (["simulate", "{gups}", "--policy", "linux:colour=blue"], "unknown parameter"),
        (["trace", "nosuch", "-o", "x.hst"], "unknown workload"),
        (["trace", "gups", "--size", "-5", "-o", "{tmp}/x.hst"], "size"),
        (["trace", "bfs", "--scale", "40", "-o", "{tmp}/x.hst"], "scale"),
    ],
)
def test_bad_input_gives_one_clear_error(args, needle, gups_trace, tmp_path, capsys):
    args = [a.format(gups=gups_trace, tmp=tmp_path) for a in args]
    code, out, err = run_cli(*args, capsys=capsys)
    assert code == 2
    assert "error:" in err and needle in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "x.hst").exists()


def test_corrupted_trace_errors_name_file_and_offset(gups_trace, tmp_path, capsys):
    data = bytearray(open(gups_trace, "rb").read())
    bad = tmp_path / "bad.hst"
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    code, _, err = run_cli("simulate", bad, capsys=capsys)
    assert code == 2 and "bad.hst" in err and "byte" in err
    trunc = tmp_path / "trunc.hst"
    trunc.write_bytes(bytes(data[: len(data) // 3]))
    code, _, err = run_cli("trace", "info", trunc, "--verify", capsys=capsys)
    assert code == 2 and "trunc.hst" in err
    empty = tmp_path / "empty.hst"
    empty.write_bytes(b"")
    code, _, err = run_cli("simulate", empty, capsys=capsys)
    assert code == 2 and "empty.hst" in err
    # Read into numpy through the core's reader, the same files are refused
    # with the same one-line error naming the file.
    for p in (bad, trunc, empty):
        with pytest.raises(hs.HugescopeError, match=p.name):
            trace_reader.read_accesses(str(p))


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_numpy_reader_never_crashes_on_mutations(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("fuzz")
    src = d / "small.hst"
    if not src.exists():
        hs.workloads.trace("gups", str(src), size="1MiB", updates=3000, seed=1)
    raw = bytearray(src.read_bytes())
    n = data.draw(st.integers(min_value=1, max_value=8))
    for _ in range(n):
        i = data.draw(st.integers(min_value=0, max_value=len(raw) - 1))
        raw[i] = data.draw(st.integers(min_value=0, max_value=255))
    cut = data.draw(st.integers(min_value=0, max_value=len(raw)))
    p = d / "m.hst"
    p.write_bytes(bytes(raw[:cut]))
    try:
        trace_reader.read_accesses(str(p))
    except hs.HugescopeError:
        pass
    try:
        hs.trace_info(str(p), verify=True)
    except hs.HugescopeError:
        pass


# ---------------------------------------------------------------- issue #17: bad input is one error line

def _main(*args):
    try:
        return cli.main([str(a) for a in args])
    except SystemExit as e:  # argparse usage errors end as argparse does
        return e.code


@pytest.mark.parametrize("args, needle", [
    # Each was an OverflowError traceback (exit 1).
    (["simulate", "{t}", "--policy", "linux", "--frag", "0.5", "--seed", "-1"], "--seed: '-1' is out of range"),
    (["bench", "--repeat", "-1"], "--repeat: '-1' is out of range"),
    (["reuse", "{t}", "-o", "{tmp}/r", "--max-points", "-1"], "--max-points: '-1' is out of range"),
    (["reuse", "{t}", "-o", "{tmp}/r", "--seed", "-1"], "--seed: '-1'"),
    (["curve", "{t}", "-o", "{tmp}/r", "--seed", "-1"], "--seed: '-1'"),
    (["merge", "{t}", "{t}", "-o", "{tmp}/m.hst", "--slice", "36893488147419103232"], "--slice: '36893488147419103232'"),
    # Each was silently ignored (or silently ran the linux policy).
    (["simulate", "{t}", "--frag", "0.5"], "--frag applies to the OS model"),
    (["simulate", "{t}", "--budget", "4%"], "--budget applies to the OS model"),
    (["simulate", "{t}", "--policy", "linux", "--seed", "3"], "no effect without --frag"),
    (["simulate", "{t}", "--policy", "linux", "--frag-method", "ingens"], "no effect without --frag"),
    (["simulate", "{t}", "--policy", "linux", "--duration", "10", "--rate", "1e6"], "give one of them"),
    (["simulate", "{t}", "-q"], "no output"),
    (["curve", "{t}", "-o", "{tmp}/r", "--frag-points", "", "--seed", "2"], "no effect without --frag-points"),
    (["curve", "{t}", "-o", "{tmp}/r", "--frag-points", "", "--frag-policy", "pcc"], "no effect without --frag-points"),
    (["multi", "{t}", "-o", "{tmp}/r", "--slice", "5"], "one was given"),
    (["trace", "gups", "--accesses", "100", "--updates", "7", "-o", "{tmp}/x.hst"], "give one of them"),
    # Echoed as typed and naming the option.
    (["trace", "bfs", "--scale", "99999999999999999999", "-o", "{tmp}/x.hst"], "--scale: '99999999999999999999'"),
    (["trace", "bfs", "--direction-optimizing", "maybe", "-o", "{tmp}/x.hst"], "--direction-optimizing: 'maybe'"),
    (["simulate", "{t}", "--policy", "pcc", "--duration", "nan"], "--duration: 'nan' is not a finite number"),
    (["curve", "{t}", "-o", "{tmp}/r", "--budgets", "1e3"], "--budgets: '1e3' is out of range"),
    # Refused before the simulation (it used to fail after it).
    (["simulate", "{t}", "--policy", "pcc", "--policy", "linux", "--emit-plan", "{tmp}/p.json"], "exactly one --policy"),
    (["simulate", "{t}", "--nosuch"], "unrecognized arguments: --nosuch"),
    ([], "a command is required"),
])
def test_bad_values_and_ineffective_options_are_one_error(args, needle, gups_trace, tmp_path, capsys):
    code = _main(*[a.format(t=gups_trace, tmp=tmp_path) for a in args])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], err
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("args", [["validate", "--help"], ["trace", "info", "--help"], ["trace", "merge", "--help"],
                                  ["trace", "gups", "--help"], ["native", "gups", "--help"], ["curve", "--help"]])
def test_help_works_everywhere(args, capsys):
    assert _main(*args) in (0, None)
    assert "usage" in capsys.readouterr().out.lower()


def test_python_dash_m_hugescope_and_unwrapped_errors(gups_trace, tmp_path):
    long_path = str(tmp_path / ("d" * 120) / "x.json")  # longer than rich's 80 columns
    r = subprocess.run([sys.executable, "-m", "hugescope", "simulate", gups_trace, "--json", long_path],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and long_path in r.stderr, r.stderr
    r = subprocess.run([sys.executable, "-m", "hugescope", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("hugescope ")
