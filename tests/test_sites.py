"""Allocation sites (issue #38): a traced program's regions are named by
where they were allocated, and a plan written by allocation site applies to
the program re-linked with another layout.

The C program allocates three arrays in three ways (malloc in a helper,
calloc, posix_memalign), each at its own source line, and prints their
addresses. The "moved" build links a second object first: its constructor
maps and touches 40 MiB and it adds 3 MiB of BSS, so every array lands
somewhere else (checked), while the program's own source lines are the same.
"""

from __future__ import annotations

import json
import os

import pytest

import hugescope as hs
from hugescope import linux, trace_reader, tracing
from conftest import run_cli
from test_linux import THP, needs_root, needs_thp

MIB = 1 << 20
N_WORDS = 3 * MIB // 8  # a: 3 MiB of doubles; b twice that, c three times

PROGRAM = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double *make_a(size_t n) {
    double *p = malloc(n * sizeof *p);                          /* LINE_A */
    memset(p, 1, n * sizeof *p);
    return p;
}

int main(int argc, char **argv) {
    size_t n = %(n)d;
    long steps = argc > 1 ? atol(argv[1]) : 100000;
    double *a = make_a(n);                                       /* CALL_A */
    double *b = calloc(2 * n, sizeof(double));                  /* LINE_B */
    double *c;
    if (posix_memalign((void **)&c, 4096, 3 * n * sizeof(double))) /* LINE_C */
        return 1;
    for (size_t i = 0; i < 3 * n; i++) c[i] = (double)i;
    for (size_t i = 0; i < 2 * n; i++) b[i] = (double)i;
    uint64_t x = 88172645463325252ull;
    double s = 0;
    for (long i = 0; i < steps; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        size_t j = x %% n;
        s += a[j] + b[2 * j] + c[3 * j];
    }
    printf("%%p %%p %%p %%g\n", (void *)a, (void *)b, (void *)c, s);
    return 0;
}
""" % {"n": N_WORDS}

# Linked first in the moved build: 40 MiB mapped and touched before main,
# and 3 MiB more BSS, so the heap and the mmap area both move.
PAD = r"""
#include <stdlib.h>
#include <string.h>
static char pad_bss[3 << 20];
char *volatile pad_keep; /* kept: an unused allocation would be optimised away */
__attribute__((constructor)) static void pad(void) {
    char *p = malloc(40 << 20);
    memset(p, 7, 40 << 20);
    pad_keep = p;
    pad_bss[1] = p[1];
}
"""


def _line(marker: str) -> int:
    return next(i for i, l in enumerate(PROGRAM.splitlines(), 1) if marker in l)


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    try:
        tracing.find_clang()
    except hs.HugescopeError as e:
        pytest.skip(f"clang is needed to build the program ('make build' installs it as root): {e}")
    d = tmp_path_factory.mktemp("sites")
    (d / "three.c").write_text(PROGRAM)
    (d / "pad.c").write_text(PAD)
    for src in ("three", "pad"):
        assert tracing.cc(["-O1", "-c", str(d / f"{src}.c"), "-o", str(d / f"{src}.o")]) == 0
    assert tracing.cc([str(d / "three.o"), "-o", str(d / "three")]) == 0
    assert tracing.cc([str(d / "pad.o"), str(d / "three.o"), "-o", str(d / "moved")]) == 0
    return d


def _trace(builds, capsys):
    out = builds / "three.hst"
    if not out.exists():
        code, _, err = run_cli("trace", "-o", out, "--", builds / "three", "2000", capsys=capsys)
        assert code == 0, err
    return str(out), hs.api.trace_info(str(out))["header"]


def test_regions_are_named_by_their_allocation_sites(builds, capsys):
    trace, header = _trace(builds, capsys)
    sited = {r["name"]: r for r in header["regions"] if r.get("site")}
    want = {f"alloc:make_a@three.c:{_line('LINE_A')}": ("malloc", 1 * N_WORDS * 8),
            f"alloc:main@three.c:{_line('LINE_B')}": ("calloc", 2 * N_WORDS * 8),
            f"alloc:main@three.c:{_line('LINE_C')}": ("posix_memalign", 3 * N_WORDS * 8)}
    assert set(sited) == set(want), sorted(sited)
    for name, (call, size) in want.items():
        s = sited[name]["site"]
        assert (s["call"], s["size"], s["count"]) == (call, size, 1)
        # The region holds the allocation's pages and nothing else.
        assert sited[name]["len"] >= size and sited[name]["len"] - size < 2 * 4096
        # The key ends at main's line that made the call.
        call_line = {"malloc": _line("CALL_A"), "calloc": _line("LINE_B"), "posix_memalign": _line("LINE_C")}[call]
        assert s["key"].split(" < ")[-1] == f"main three.c:{call_line}"
    # The helper's site names its caller too: one key per call path.
    a = sited[f"alloc:make_a@three.c:{_line('LINE_A')}"]["site"]
    assert a["key"].split(" < ")[0] == f"make_a three.c:{_line('LINE_A')}" and len(a["key"].split(" < ")) == 2
    # The three regions hold every access to the arrays: the program's random
    # reads (3 per step) and the fills (n + 2n + 3n writes, the memset not:
    # libc is not instrumented).
    counts = {name: 0 for name in want}
    bounds = [(sited[n]["base"], sited[n]["base"] + sited[n]["len"], n) for n in want]
    for chunk in trace_reader.chunks(trace):
        for lo, hi, n in bounds:
            counts[n] += int(((chunk["addr"] >= lo) & (chunk["addr"] < hi)).sum())
    assert counts[f"alloc:make_a@three.c:{_line('LINE_A')}"] == 2000
    assert counts[f"alloc:main@three.c:{_line('LINE_B')}"] == 2000 + 2 * N_WORDS
    assert counts[f"alloc:main@three.c:{_line('LINE_C')}"] == 2000 + 3 * N_WORDS


@needs_thp
@needs_root
@pytest.mark.skipif(THP.get("pmd_mode") != "madvise", reason="advise measures base pages: THP mode 'madvise'")
def test_advise_names_the_three_arrays_with_accesses_and_walks(builds, capsys, tmp_path):
    trace, _ = _trace(builds, capsys)
    out = tmp_path / "adv"
    # Linked from objects built with the hooks, 'three' has no plain build:
    # advise refuses to measure it unless told to measure the traced build.
    code, _, err = run_cli("advise", "--out", out, "--trace", trace, "--ks", "1", "--policies", "oracle",
                           "--repeat", "1", "--warmup", "0", "--", builds / "three", "2000", capsys=capsys)
    assert code == 2 and err.count("\n") == 1 and "has no plain build" in err and "--plain" in err, err
    code, text, err = run_cli("advise", "--out", out, "--trace", trace, "--ks", "1", "--policies", "oracle",
                              "--repeat", "1", "--warmup", "0", "--measure-instrumented", "--", builds / "three",
                              "2000", capsys=capsys)
    assert code == 0, err
    assert json.loads((out / "advise.json").read_text())["measured_program"] == [str(builds / "three"), "2000"]
    rows = {r["name"]: r for r in json.loads((out / "advise.json").read_text())["regions"]}
    want = {f"alloc:make_a@three.c:{_line('LINE_A')}": ("malloc", 1, 2000),
            f"alloc:main@three.c:{_line('LINE_B')}": ("calloc", 2, 2000 + 2 * N_WORDS),
            f"alloc:main@three.c:{_line('LINE_C')}": ("posix_memalign", 3, 2000 + 3 * N_WORDS)}
    for name, (call, mult, accesses) in want.items():
        r = rows[name]
        assert (r["site"]["call"], r["site"]["size"]) == (call, mult * N_WORDS * 8)
        # Every access to the array and at least one walk per 4 KiB page the
        # fill touched (a cold TLB, base pages).
        assert r["accesses"] == accesses
        assert r["walks"] >= mult * N_WORDS * 8 // 4096 if mult > 1 else r["walks"] > 0
        # Printed, with its site's call (the table folds long names).
        assert call in text
    assert "traced regions, base pages" in text


def test_site_plan_round_trips_and_simulates_like_the_address_plan(builds, capsys, tmp_path):
    trace, header = _trace(builds, capsys)
    c = next(r for r in header["regions"] if r.get("site", {}).get("call") == "posix_memalign")
    lo = (c["base"] + 2 * MIB - 1) // (2 * MIB) * (2 * MIB)
    hi = (c["base"] + c["len"]) // (2 * MIB) * (2 * MIB)
    by_addr = {"version": 1, "entries": [{"start": lo, "length": hi - lo, "page_size": 2 * MIB}]}
    (tmp_path / "addr.json").write_text(json.dumps(by_addr))
    by_site = json.loads(hs._core.plan_by_site(json.dumps(by_addr), trace))
    assert by_site["entries"] == [] and [s["site"] for s in by_site["sites"]] == [c["site"]["key"]]
    (tmp_path / "site.json").write_text(json.dumps(by_site))
    # As a static map the two plans are the same map: identical counters.
    r1 = hs.api.simulate(trace, pages=str(tmp_path / "addr.json"))
    r2 = hs.api.simulate(trace, pages=str(tmp_path / "site.json"))
    assert r1["translation"] == r2["translation"]
    # A site this trace does not have: one clear error.
    (tmp_path / "other.json").write_text(json.dumps({"version": 1, "sites": [{"site": "nowhere x.c:1"}]}))
    code, _, err = run_cli("simulate", trace, "--pages", tmp_path / "other.json", capsys=capsys)
    assert code != 0 and "no region of the trace was allocated at 'nowhere x.c:1'" in err and err.count("\n") == 1


def _lo(region) -> int:
    """The first 2 MiB boundary inside a region."""
    return (region["base"] + 2 * MIB - 1) // (2 * MIB) * (2 * MIB)


@needs_thp
@needs_root
@pytest.mark.skipif(THP.get("pmd_mode") not in ("madvise", "always"), reason="MADV_COLLAPSE needs THP enabled")
def test_site_plan_applies_to_the_relinked_program(builds, capsys, tmp_path):
    trace, header = _trace(builds, capsys)
    c = next(r for r in header["regions"] if r.get("site", {}).get("call") == "posix_memalign")
    plan = {"version": 1, "sites": [{"site": c["site"]["key"], "page_size": "2MiB", "when": "start"}]}
    res = linux.run([str(builds / "moved"), "5000000"], plan=plan, repeat=1, warmup=0)
    assert res.runs[0]["status"] == "ok"
    o = res.outcomes
    assert len(o) == 1, o
    # The re-linked program put the array elsewhere than the trace saw it ...
    assert o[0]["start"] != _lo(c)
    # ... and every whole 2 MiB page of it (9 MiB: 4 pages, or 3 or 4 when
    # not 2 MiB-aligned) became huge.
    assert o[0]["status"] == "collapsed" and o[0]["regions_collapsed"] == o[0]["regions"] >= 3, o
    assert res.summary["plan_warnings"] == []
    # By address, the trace's plan misses the moved array: it covers pages
    # the moved program does not have there (or only partly).
    by_addr = {"version": 1, "entries": [{"start": _lo(c), "length": 2 * MIB, "page_size": 2 * MIB}]}
    moved_c = (o[0]["start"], o[0]["start"] + o[0]["length"])
    assert not (moved_c[0] <= by_addr["entries"][0]["start"] < moved_c[1])


@needs_thp
@needs_root
def test_a_site_that_never_allocates_is_a_counted_warning(builds):
    res = linux.run([str(builds / "three"), "10"], plan={"version": 1, "sites": [{"site": "nowhere x.c:1"}]},
                    repeat=1, warmup=0)
    o = res.outcomes
    assert len(o) == 1 and o[0]["status"] == "skipped", o
    assert "no allocation of site 'nowhere x.c:1' was reported" in o[0]["reason"]
    assert len(res.summary["plan_warnings"]) == 1 and "1 of 1 plan entries not fully applied" in res.summary["plan_warnings"][0]


def test_apply_refuses_a_site_plan(tmp_path):
    with pytest.raises(hs.HugescopeError, match="allocation site"):
        linux.apply_plan(os.getpid(), {"version": 1, "sites": [{"site": "f a.c:1"}]})
