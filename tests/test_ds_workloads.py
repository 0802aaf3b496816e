"""The direct-segments paper's workloads (ISCA'13 Tables 4/5): deterministic
traces, regions tagged with their kind, and one clear error for bad input.
The simulated shape (walks per page size, f_DS) is tested in Rust
(crates/hugescope-workloads/tests/ds_shape.rs), where no trace file is needed."""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st

import hugescope as hs
from hugescope.errors import HugescopeError
from conftest import run_cli

SMALL = {
    "graph500": {"scale": 10, "degree": 8, "threads": 2},
    "memcached": {"records": 2000, "ops": 4000, "threads": 2},
    "mysql": {"records": 5000, "ops": 2000, "file_size": "1MiB"},
    "npb-cg": {"rows": 2000, "nonzeros": 5, "iterations": 2},
    "npb-bt": {"grid": 8, "iterations": 2, "threads": 2},
}


def kinds(name, **params):
    regions = hs.workloads.layout(name, **params)["regions"]
    return Counter(r.get("kind", "anon") for r in regions), regions


@pytest.mark.parametrize("name", sorted(SMALL))
def test_same_seed_same_bytes(name, tmp_path):
    digests = []
    for i in range(2):
        out = tmp_path / f"{i}.hst"
        hs.workloads.trace(name, str(out), **SMALL[name])
        digests.append(hashlib.sha256(out.read_bytes()).hexdigest())
    assert digests[0] == digests[1]
    other = tmp_path / "seed2.hst"
    hs.workloads.trace(name, str(other), seed=2, **SMALL[name])
    assert hashlib.sha256(other.read_bytes()).hexdigest() != digests[0]


def test_mysql_has_256_stacks_bss_and_files():
    k, regions = kinds("mysql")
    assert k["stack"] >= 256 and k["bss"] == 1 and k["file"] == 2 and k["code"] == 1
    stacks = [r for r in regions if r.get("kind") == "stack"]
    assert all(r["len"] == 8 << 20 for r in stacks)
    # the buffer pool is the one anonymous region: what a segment would cover
    assert [r["name"] for r in regions if "kind" not in r] == ["pool"]
    assert hs.workloads.layout("mysql")["cpus"] == 1  # 256 threads on one core


def test_graph500_npb_cg_and_memcached_kinds():
    k, _ = kinds("graph500", scale=10)
    assert k["stack"] == 1 and k["code"] == 1 and k["bss"] == 1
    k, regions = kinds("npb-cg", rows=2000)
    arrays = [r for r in regions if "kind" not in r]
    assert len(arrays) == 8 and k["stack"] == 1
    assert len({r["base"] >> 30 for r in arrays}) == 8  # each array in its own 1GB page
    k, regions = kinds("npb-bt", grid=10)
    assert k["stack"] == 1 and k["code"] == 1 and k["bss"] == 1
    u = next(r for r in regions if r["name"] == "u")
    assert u["len"] == 10 * 10 * 4096  # every x-row padded to a 4KB page
    _, regions = kinds("memcached", threads=3)
    net = [r for r in regions if r["name"] == "netbuf"]
    assert net and net[0]["segment_opt_out"] is True
    assert sum(r.get("kind") == "stack" for r in regions) == 3


def test_existing_workloads_stay_untagged():
    for name in ("bfs", "cg", "kv", "btree", "gups"):
        regions = hs.workloads.layout(name)["regions"]
        assert all("kind" not in r and "segment_opt_out" not in r for r in regions), name


@pytest.mark.parametrize(
    "args, needle",
    [
        (["mysql", "--cpus", "300"], "cpus"),
        (["mysql", "--stack-touch", "16MiB"], "stack_touch"),
        (["mysql", "--write-ratio", "2"], "write_ratio"),
        (["memcached", "--get-ratio", "-1"], "get_ratio"),
        (["graph500", "--scale", "31"], "scale"),
        (["npb-cg", "--rows", "1"], "rows"),
    ],
)
def test_bad_parameters_give_one_error_line(args, needle, tmp_path, capsys):
    out = tmp_path / "t.hst"
    code, _, err = run_cli("trace", *args, "-o", str(out), capsys=capsys)
    lines = [l for l in err.splitlines() if l.strip()]
    assert code == 2 and len(lines) == 1 and needle in lines[0] and "Traceback" not in err, err
    assert not out.exists()


@settings(max_examples=40, deadline=None)
@given(
    threads=st.integers(min_value=-2, max_value=300),
    cpus=st.integers(min_value=-1, max_value=300),
    stack_touch=st.sampled_from(["0", "4KiB", "24KiB", "8MiB", "9MiB", "-1", "abc"]),
    stack_size=st.sampled_from(["4KiB", "8KiB", "64KiB", "8MiB", "1e3", ""]),
)
def test_mysql_parameter_vectors_plan_or_fail_cleanly(threads, cpus, stack_touch, stack_size):
    """Any parameter combination either plans (and then respects the
    invariants) or is refused with a HugescopeError naming a parameter."""
    try:
        lay = hs.workloads.layout(
            "mysql", records=1000, threads=threads, cpus=cpus, stack_touch=stack_touch, stack_size=stack_size
        )
    except HugescopeError as e:
        assert "\n" not in str(e) and "mysql" in str(e)
        return
    stacks = [r for r in lay["regions"] if r.get("kind") == "stack"]
    assert len(stacks) == threads and 1 <= lay["cpus"] <= threads
