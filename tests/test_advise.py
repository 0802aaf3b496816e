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
def test_advise_end_to_end_and_plan_collapses_exactly_its_regions(prog, tmp_path, capsys):
    out = tmp_path / "o"
    code, text, err = run_cli("advise", "--out", out, "--ks", "1,2", "--policies", "pcc,oracle", "--repeat", "1",
                              "--warmup", "0", "--duration", "10", "--", prog, "3000000", capsys=capsys)
    assert code == 0, err
    assert "estimate:" in text and "measured (wall clock" in text and "regions worth promoting" in text
    r = json.loads((out / "advise.json").read_text())
    assert len(r["rows"]) == 4 and sum(x["chosen"] for x in r["rows"]) == 1
    assert r["estimate"] >= 1.0 and r["measured"]["median"] > 0
    assert set(r["how"]) == {"estimate", "measured"}
    assert r["promote"] and all(p["region"].startswith("anon:") for p in r["promote"])
    plan = json.loads((out / "plan.json").read_text())
    starts = sorted(int(e["start"], 16) for e in plan["entries"])
    assert starts == sorted(int(p["start"], 16) for p in r["promote"])
    # The plan, from the trace, applied natively to the same binary: every entry
    # collapses, PAGEMAP_SCAN sees exactly that range huge, and the process's
    # AnonHugePages (smaps) peak is exactly the plan's bytes: no other region.
    run = linux.run([str(prog), "20000000"], plan=plan, repeat=1, warmup=0).check()
    outs = run.outcomes
    assert [int(o["start"]) for o in outs] == starts
    brief = [(o["status"], o.get("errno"), o.get("reason"), o.get("bytes_huge_after_exact")) for o in outs]
    assert all(o["status"] == "collapsed" and o["bytes_huge_after_exact"] == 2 * MIB for o in outs), brief
    assert run.runs[0]["peak_anon_huge_bytes"] == len(starts) * 2 * MIB


@pytest.mark.parametrize("argv,needle", [
    (["advise"], "give the program after '--'"),
    (["advise", "--ks", "0", "--", "/bin/true"], "--ks"),
    (["advise", "--ks", "a,b", "--", "/bin/true"], "--ks"),
    (["advise", "--repeat", "0", "--", "/bin/true"], "--repeat"),
    (["advise", "--policies", "nope", "--out", "{d}/o", "--", "/bin/true"], "nope"),
])
def test_advise_bad_input_one_error_line(tmp_path, capsys, argv, needle):
    try:
        code, _, err = run_cli(*[a.format(d=tmp_path) for a in argv], capsys=capsys)
    except SystemExit as e:
        code, err = e.code, capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and needle in err, err
