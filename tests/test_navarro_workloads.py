"""The Navarro paper's workloads (OSDI'02 §6.2, §6.5-6.7) from the front end:
listed with their descriptions, traced through the CLI, and the two TLB shapes
the paper's tables rest on, on the alpha-21264 preset with static page sizes
(Matrix: one DTLB miss per two accesses with base pages, none with
superpages; FFTW: only 4MB pages help). Event-level shapes (access counts,
addresses, frees, the msync label) are tested in
crates/hugescope-workloads/tests/navarro_workloads.rs."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

import hugescope as hs
from hugescope.errors import HugescopeError
from conftest import assert_workload_refused, run_cli

NAVARRO = ["matrix", "rbtree", "fftw", "adversary", "stride4m", "cmp", "dirtyfile", "mapdummy"]


def test_workloads_lists_each_with_a_description_citing_the_paper(capsys):
    code, out, _ = run_cli("workloads", "--json", "-", capsys=capsys)
    assert code == 0
    listed = {w["name"]: w for w in json.loads(out)}
    for name in NAVARRO:
        assert "Navarro OSDI'02 §6" in listed[name]["about"], name
        assert all(p["help"] for p in listed[name]["params"]), name


def walks_per_1k(tmp_path, capsys, trace, pages):
    out = tmp_path / f"{pages}.json"
    code, _, err = run_cli("simulate", trace, "--preset", "alpha-21264", "--pages", pages, "--json", out, capsys=capsys)
    assert code == 0, err
    return json.loads(out.read_text())["translation"]["walks_per_1k_accesses"]


def trace(tmp_path, capsys, name, *args):
    out = tmp_path / f"{name}.hst"
    code, _, err = run_cli("trace", name, *args, "-o", out, capsys=capsys)
    assert code == 0, err
    return out


def test_matrix_misses_every_other_access_with_8kb_pages_only(tmp_path, capsys):
    # n = 500: a column of b spans 244 8KB pages (> the 128-entry DTLB) and
    # two consecutive writes share a page, so about one walk per four accesses.
    t = trace(tmp_path, capsys, "matrix", "--n", "500", "--repetitions", "1")
    info = tmp_path / "info.json"
    assert run_cli("trace", "info", t, "--json", info, capsys=capsys)[0] == 0
    assert json.loads(info.read_text())["summary"]["accesses"] == 2 * 500 * 500
    assert walks_per_1k(tmp_path, capsys, t, "8k") > 200
    assert walks_per_1k(tmp_path, capsys, t, "512k") < 1


def test_fftw_is_helped_by_4mb_pages_and_not_by_64kb_or_512kb(tmp_path, capsys):
    t = trace(tmp_path, capsys, "fftw", "--lines", "0.002")
    w = {p: walks_per_1k(tmp_path, capsys, t, p) for p in ["8k", "64k", "512k", "4m"]}
    assert w["8k"] > 100 and w["512k"] > 0.9 * w["8k"] and w["64k"] > 0.9 * w["8k"], w
    assert w["4m"] < 0.01 * w["8k"], w


@pytest.mark.parametrize(
    "name,params,names",
    [
        ("matrix", {"threads": 2}, "threads"),
        ("fftw", {"lines": 0}, "lines"),
        ("stride4m", {"stride": 12}, "stride"),
        ("adversary", {"size": 5000}, "size"),
        ("dirtyfile", {"write_every": 0}, "write_every"),
        ("mapdummy", {"rate": 0}, "rate"),
        ("rbtree", {"nodes": 0}, "nodes"),
    ],
)
def test_bad_parameters_give_one_error_naming_them(name, params, names, capsys, tmp_path):
    assert_workload_refused(name, params, names, capsys, tmp_path)


SIZES = st.one_of(st.integers(min_value=-5, max_value=1 << 34), st.sampled_from(["4KiB", "4MiB", "8k", "0", "-1", "x", "1.5"]))


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(["stride4m", "adversary", "dirtyfile"]), size=SIZES, stride=SIZES, count=st.integers(min_value=-1, max_value=1 << 40))
def test_size_and_stride_parameters_plan_or_fail_cleanly(name, size, stride, count):
    # Each program's stride-like parameter and its count (passes, rounds, write_every).
    stride_key, count_key = {"stride4m": ("stride", "passes"), "adversary": ("page", "rounds"), "dirtyfile": ("page", "write_every")}[name]
    try:
        layout = hs.workloads.layout(name, size=size, **{stride_key: stride, count_key: count})
    except HugescopeError as e:
        assert "\n" not in str(e) and str(e).startswith(name)
        return
    p = layout["params"]
    (region,) = layout["regions"]
    assert region["len"] == p["size"] and p["size"] % 4096 == 0 and region["base"] % (4 << 20) == 0
    assert p[stride_key] % 8 == 0 and 0 < p[stride_key] <= p["size"] and p[count_key] >= 1
