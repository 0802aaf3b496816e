"""Traces of real programs (`hugescope cc` + `hugescope trace -- PROG`, and
`--valgrind`) and imports of other tools' traces (`hugescope trace import`).

The C program has a known access pattern: N random reads of a 64 MiB
malloc'd array (an anonymous mapping) and a read-modify-write of a 64 KiB
global (BSS) per step. It prints both addresses, so the test knows where the
accesses must land.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hugescope as hs
from hugescope import trace_reader, tracing

from conftest import run_cli

N = 50_000
BIG = 64 << 20
HOT = 64 << 10

PROGRAM = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static unsigned char hot[%(hot)d];

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : %(n)d;
    size_t words = %(big)dull / sizeof(uint64_t);
    uint64_t *big = malloc(words * sizeof *big);
    uint64_t x = 88172645463325252ull, sum = 0;
    for (long i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;   /* xorshift: registers only */
        sum += big[x %% words];                      /* 1 read in the 64 MiB array */
        hot[(i * 64) %% sizeof hot] += 1;            /* 1 read + 1 write in BSS */
    }
    printf("%%p %%p %%llu\n", (void *)big, (void *)hot, (unsigned long long)sum);
    return 0;
}
""" % {"hot": HOT, "n": N, "big": BIG}


@pytest.fixture(scope="module")
def prog(tmp_path_factory):
    try:
        tracing.find_clang()
    except hs.HugescopeError as e:
        pytest.skip(f"clang is needed to build the traced program and could not be found or installed "
                    f"('make build' installs it as root): {e}")
    d = tmp_path_factory.mktemp("prog")
    src = d / "pattern.c"
    src.write_text(PROGRAM)
    exe = d / "pattern"
    code = tracing.cc(["-O1", str(src), "-o", str(exe)])
    assert code == 0
    return exe


def _cli(*args, capsys=None):
    """run_cli, also for argparse's usage errors (which exit via SystemExit)."""
    try:
        return run_cli(*args, capsys=capsys)
    except SystemExit as e:
        out, err = capsys.readouterr() if capsys else ("", "")
        return e.code, out, err


def _addresses(out: str):
    big, hot, _ = out.split()
    return int(big, 16), int(hot, 16)


def _read(path):
    """A trace's header and its accesses as (addr, write, cpu), read by the
    Python reader (independent of the Rust writer)."""
    a = trace_reader.read_accesses(str(path))
    return trace_reader.read_header(str(path)), [(int(x), bool(w), int(c)) for x, w, c in zip(a["addr"], a["write"], a["cpu"])]


def test_instrumented_trace_counts_and_regions(prog, tmp_path, capfd):
    out = tmp_path / "p.hst"
    code, _, _ = run_cli("trace", "-o", out, "--", prog)
    assert code == 0
    printed = capfd.readouterr().out
    big, hot = _addresses(printed.splitlines()[0])
    info = hs.api.trace_info(str(out), verify=True)
    h, s = info["header"], info["summary"]
    assert h["workload"] == "program:pattern"
    # 3 accesses per step; main's own few (argc/argv) on top.
    assert 3 * N <= s["accesses"] <= 3 * N * 1.01
    assert s["writes"] == pytest.approx(N, rel=0.01)
    regions = {r["name"]: r for r in h["regions"]}
    # The 64 MiB array: an anonymous mapping (malloc used mmap), named by its
    # allocation site (the malloc line of main), its size plus malloc's header
    # page, at the address the program printed.
    arr = next(r for r in h["regions"] if r["base"] <= big < r["base"] + r["len"])
    assert tracing.region_kind(h, arr["name"]) == "anon"
    line = next(i for i, l in enumerate(PROGRAM.splitlines(), 1) if "= malloc(" in l)
    assert arr["name"] == f"alloc:main@pattern.c:{line}"
    assert (arr["site"]["call"], arr["site"]["size"]) == ("malloc", BIG)
    assert BIG <= arr["len"] <= BIG + (1 << 20)
    hot_r = next(r for r in h["regions"] if r["base"] <= hot < r["base"] + r["len"])
    assert tracing.region_kind(h, hot_r["name"]) in ("bss", "data")
    assert hot_r["name"].endswith(":pattern")
    for kind in ("heap", "stack"):
        assert kind in regions and tracing.region_kind(h, kind) == kind
    assert any(tracing.region_kind(h, n) == "code" for n in regions)
    # ASLR was off: a second untraced run prints the same addresses.
    r = subprocess.run(["setarch", "-R", str(prog), "10"], capture_output=True, text=True)
    if r.returncode == 0:
        assert _addresses(r.stdout.split("\n")[0]) == (big, hot)



def test_traced_addresses_hold_untraced_when_program_loads_early(prog, tmp_path, capfd):
    # With an argument the program loads argv[1] before its malloc, so the
    # runtime maps its first record buffer before the 64 MiB array: the buffer
    # must not move the array, or a plan from the trace misses the native run.
    out = tmp_path / "p.hst"
    code, _, _ = run_cli("trace", "-o", out, "--", prog, "1000")
    assert code == 0
    big, hot = _addresses(capfd.readouterr().out.splitlines()[0])
    r = subprocess.run(["setarch", "-R", str(prog), "10"], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"setarch -R is not usable here: {r.stderr.strip()}")
    assert _addresses(r.stdout.split("\n")[0]) == (big, hot)

def test_window_holds(prog, tmp_path, capfd):
    out = tmp_path / "w.hst"
    code, _, _ = run_cli("trace", "-o", out, "--skip", "1000", "--record", "5000", "--", prog)
    assert code == 0
    capfd.readouterr()
    info = hs.api.trace_info(str(out))
    assert info["summary"]["accesses"] == 5000
    p = info["header"]["params"]
    assert (p["skip"], p["record"]) == (1000, 5000)
    # The runtime still counted everything it skipped or dropped.
    assert 3 * N <= p["accesses_seen"] <= 3 * N * 1.01


def test_valgrind_path_matches_instrumented(prog, tmp_path, capfd):
    if not shutil.which("valgrind"):
        pytest.skip("valgrind is not installed (apt-get install valgrind)")
    n = 3000
    counts = {}
    for how in ("cc", "valgrind"):
        out = tmp_path / f"{how}.hst"
        extra = ["--valgrind"] if how == "valgrind" else []
        code, _, _ = run_cli("trace", "-o", out, *extra, "--", prog, n)
        assert code == 0
        big, hot = _addresses(capfd.readouterr().out.splitlines()[0])
        in_big = in_hot = 0
        for addr, _, _ in _read(out)[1]:
            if big <= addr < big + BIG:
                in_big += 1
            elif hot <= addr < hot + HOT:
                in_hot += 1
        counts[how] = (in_big, in_hot)
    # Both capture paths see the program's own accesses to both arrays.
    assert counts["cc"] == (n, 2 * n)
    assert counts["valgrind"][0] == pytest.approx(n, rel=0.05)
    assert counts["valgrind"][1] == pytest.approx(2 * n, rel=0.05)


def test_uninstrumented_program_is_refused(tmp_path, capsys):
    out = tmp_path / "t.hst"
    code, _, err = run_cli("trace", "-o", out, "--", "/bin/true", capsys=capsys)
    assert code == 2
    assert err.count("\n") == 1 and "wrote no trace records" in err and "hugescope cc" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv,needle", [
    (["trace", "-o", "{d}/t.hst"], "give the program after '--'"),
    (["trace", "-o", "{d}/t.hst", "--"], "give the program to run after '--'"),
    (["trace", "-o", "{d}/t.hst", "--", "{d}/missing"], "not found or not executable"),
    (["trace", "-o", "{d}/t.hst", "--skip", "x", "--", "/bin/true"], "--skip: 'x' is not a count"),
    (["trace", "-o", "{d}/t.hst", "--record", "0", "--", "/bin/true"], "--record: '0' is out of range"),
    (["trace", "-o", "{d}/t.hst", "--instructions", "--", "/bin/true"], "--instructions: only with --valgrind"),
    (["trace", "-o", "/dev/null", "--", "/bin/true"], "/dev/null"),
    (["trace", "import", "xml", "{d}/in.txt", "-o", "{d}/t.hst"], "invalid choice: 'xml'"),
    # A running process cannot be traced: one line saying why and what to use.
    (["trace", "--pid", "1", "-o", "{d}/t.hst"], "hugescope daemon --pid PID"),
    (["trace", "-o", "{d}/t.hst", "--pid=1", "--", "/bin/true"], "cannot be traced"),
    (["trace", "import", "text", "{d}/missing.txt", "-o", "{d}/t.hst"], "missing.txt"),
])
def test_bad_arguments_one_error_line(tmp_path, capsys, argv, needle):
    (tmp_path / "in.txt").write_text("0x1000\n")
    code, _, err = _cli(*[a.format(d=tmp_path) for a in argv], capsys=capsys)
    assert code == 2, err
    assert err.count("\n") == 1 and needle in err, err
    assert not (tmp_path / "t.hst").exists()


def test_import_text_and_lackey_exact(tmp_path, capsys):
    (tmp_path / "a.csv").write_text("addr,op,cpu\n0x1000,R,0\n8192,W,1\n0x3000\n")
    code, out, _ = run_cli("trace", "import", "text", tmp_path / "a.csv", "-o", tmp_path / "a.hst", capsys=capsys)
    assert code == 0 and "3 accesses" in out
    h, acc = _read(tmp_path / "a.hst")
    assert h["workload"] == "imported:text"
    assert acc == [(0x1000, False, 0), (0x2000, True, 1), (0x3000, False, 0)]
    (tmp_path / "l.txt").write_text("==1== lackey\nI  04017d80,3\n L 7ff000f68,8\n S 04232d18,8\n M 0421f8a8,4\n")
    code, _, _ = run_cli("trace", "import", "lackey", tmp_path / "l.txt", "-o", tmp_path / "l.hst")
    assert code == 0
    _, acc = _read(tmp_path / "l.hst")
    assert [(a, w) for a, w, _ in acc] == [(0x7ff000f68, False), (0x4232d18, True), (0x421f8a8, False), (0x421f8a8, True)]


def _champsim(loads, stores) -> bytes:
    rec = bytearray(64)
    rec[0:8] = (0x401000).to_bytes(8, "little")
    for k, a in enumerate(stores):
        rec[16 + 8 * k:24 + 8 * k] = a.to_bytes(8, "little")
    for k, a in enumerate(loads):
        rec[32 + 8 * k:40 + 8 * k] = a.to_bytes(8, "little")
    return bytes(rec)


def test_champsim_roundtrip_plain_and_xz(tmp_path):
    want, data = [], b""
    for i in range(2000):
        loads = [0x7f0000000000 + i * 4096 + 8 * k for k in range(i % 5)]
        stores = [0x600000 + i * 64 + 8 * k for k in range(i % 3)]
        data += _champsim(loads, stores)
        want += [(a, False) for a in loads] + [(a, True) for a in stores]
    plain = tmp_path / "t.champsim"
    plain.write_bytes(data)
    subprocess.run(["xz", "-k", str(plain)], check=True)
    for src in (plain, tmp_path / "t.champsim.xz"):
        out = tmp_path / (src.name + ".hst")
        code, _, _ = run_cli("trace", "import", "champsim", src, "-o", out)
        assert code == 0
        _, acc = _read(out)
        assert [(a, w) for a, w, _ in acc] == want


def test_bad_import_input_one_error_line(tmp_path, capsys):
    (tmp_path / "bad.csv").write_text("0x10\n0x20,Q\n")
    code, _, err = run_cli("trace", "import", "text", tmp_path / "bad.csv", "-o", tmp_path / "o.hst", capsys=capsys)
    assert code == 2
    assert err.count("\n") == 1
    assert "bad.csv: at byte 5: line 2: operation 'Q': expected R or W" in err
    assert not (tmp_path / "o.hst").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet="0123456789abcdefxXLSMIRW, \n#=-", max_size=300),
       fmt=st.sampled_from(["text", "lackey", "champsim"]))
def test_fuzz_import_never_crashes(tmp_path, text, fmt):
    src = tmp_path / "in.txt"
    src.write_text(text)
    out = tmp_path / "o.hst"
    if out.exists():
        out.unlink()
    try:
        tracing.import_trace(fmt, str(src), str(out))
    except hs.HugescopeError as e:
        assert str(e).startswith(str(src)), e
        assert not out.exists()


THREADS = r"""
#include <pthread.h>
#include <stdio.h>
static volatile long cells[8 * 64];
static void *work(void *p) {
    long k = (long)p;
    for (int i = 0; i < 1000; i++)
        cells[k * 64] += i;     /* volatile: 1 read + 1 write each time */
    return NULL;
}
int main(void) {
    for (long round = 0; round < 2; round++) {
        pthread_t t[4];
        for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, work, (void *)(round * 4 + i));
        for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    }
    printf("%ld\n", cells[0]);
    return 0;
}
"""


def test_threads_are_cpus(prog, tmp_path, capfd):
    """Each thread is a cpu of the trace; buffers of exited threads are reused
    and every record reaches the trace."""
    src = tmp_path / "thr.c"
    src.write_text(THREADS)
    exe = tmp_path / "thr"
    assert tracing.cc(["-O1", str(src), "-o", str(exe)]) == 0
    out = tmp_path / "thr.hst"
    assert run_cli("trace", "-o", out, "--", exe)[0] == 0
    capfd.readouterr()
    s = hs.api.trace_info(str(out))
    assert s["header"]["cpus"] == 9            # main + 2 rounds of 4
    # Threads are numbered in the order of their first traced access.
    per_cpu = sorted(s["summary"]["per_cpu"])
    assert per_cpu[1:] == [2000] * 8           # each worker: 1000 x (read + write)
    assert per_cpu[0] < 20                     # main's own few
    assert s["summary"]["accesses"] == sum(per_cpu)


FORKS = r"""
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static volatile long v[512];
int main(int argc, char **argv) {
    for (int i = 0; i < 100; i++) v[i] = i;          /* 100 writes, buffered at fork */
    pid_t p = fork();
    if (p == 0) {
        if (argc > 1)                                /* run the program again, untraced */
            execl(argv[0], argv[0], (char *)NULL);
        for (int i = 0; i < 300; i++) v[i] += 1;     /* a forked child: not traced */
        exit(0);                                     /* (atexit must not write records twice) */
    }
    waitpid(p, NULL, 0);
    return v[3] == 3 ? 3 : 4;                        /* a failing exit status */
}
"""


def test_children_are_not_traced_and_failure_is_reported(prog, tmp_path, capfd):
    src = tmp_path / "forks.c"
    src.write_text(FORKS)
    exe = tmp_path / "forks"
    assert tracing.cc(["-O1", str(src), "-o", str(exe)]) == 0
    out = tmp_path / "f.hst"
    code, _, _ = run_cli("trace", "-o", out, "--", exe, "again")
    err = capfd.readouterr().err
    # Exactly the parent's 100 writes (plus its few reads): the forked child's
    # and the re-executed program's accesses are not in the trace, and the
    # parent's buffered records were not written twice.
    s = hs.api.trace_info(str(out))["summary"]
    assert s["writes"] == 100 and s["accesses"] < 110
    assert code == 1 and "exited with status 3" in err and err.count("\n") == 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tokens=st.lists(st.sampled_from(["--skip", "--record", "-o", "{d}/x.hst", "--", "--instructions",
                                        "1", "0", "-5", "abc", "1M", "1e99", "/bin/true", "import", "text"]),
                       max_size=8))
def test_fuzz_trace_arguments(tmp_path, capsys, tokens):
    """Any argument vector of the new forms: success or one error line, never
    a traceback (the only program here is uninstrumented, so none traces)."""
    argv = ["trace", "-o", "{d}/y.hst"] + tokens if tokens[:1] != ["import"] else ["trace"] + tokens
    code, _, err = _cli(*[a.format(d=tmp_path) for a in argv], capsys=capsys)
    assert code in (0, 2), err
    if code == 2:
        assert err.count("\n") == 1 and err.startswith("error:"), err


@pytest.mark.parametrize("sig,code", [("SIGINT", 130), ("SIGTERM", 143)])
def test_signal_stops_tracing_and_leaves_nothing(prog, tmp_path, sig, code):
    import signal
    import sys
    import time

    out = tmp_path / "x.hst"
    p = subprocess.Popen([sys.executable, "-m", "hugescope", "trace", "-o", str(out), "--", str(prog), "100000000000"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        # Wait (bounded) until the program runs: its record directory exists.
        for _ in range(200):
            if any(tmp_path.iterdir()):
                break
            time.sleep(0.05)
        assert any(tmp_path.iterdir()), "the traced program never started"
        p.send_signal(getattr(signal, sig))
        _, err = p.communicate(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == code, err
    assert list(tmp_path.iterdir()) == []   # no trace, no record files left


def _descendants(pid: int) -> list:
    """Pids of every live process below ``pid`` (children, grandchildren)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                kids = [int(x) for x in f.read().split()]
        except OSError:
            kids = []
        out += kids
        todo += kids
    return out


def test_killing_hugescope_outright_ends_the_traced_program(prog, tmp_path):
    """SIGKILL gives hugescope no chance to clean up: the traced program must
    still die with it (PR_SET_PDEATHSIG), or it would write records forever."""
    import signal
    import sys
    import time

    p = subprocess.Popen([sys.executable, "-m", "hugescope", "trace", "-o", str(tmp_path / "x.hst"), "--",
                          str(prog), "100000000000"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        kids = []
        for _ in range(400):
            kids = _descendants(p.pid)
            if kids and any(tmp_path.iterdir()):
                break
            time.sleep(0.05)
        assert kids, "the traced program never started"
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=10)
        for _ in range(100):
            alive = [k for k in kids if os.path.exists(f"/proc/{k}") and
                     open(f"/proc/{k}/stat").read().split(")")[-1].split()[0] != "Z"]
            if not alive:
                break
            time.sleep(0.05)
        assert not alive, f"traced program(s) {alive} outlived a killed hugescope"
    finally:
        if p.poll() is None:
            p.kill()
        for k in _descendants(p.pid):
            os.kill(k, signal.SIGKILL)


def test_recording_stops_at_the_disk_reserve(prog, tmp_path, monkeypatch):
    """A reserve larger than the disk's free space: no record block is
    written, the trace says it was truncated, the command warns."""
    monkeypatch.setenv("HUGESCOPE_TRACE_RESERVE", str(1 << 62))
    out = tmp_path / "x.hst"
    s = tracing.trace_program([str(prog), "2000000"], str(out))
    assert s["truncated"] and s["exit_status"] == 0
    h = hs.api.trace_info(str(out))
    assert h["summary"]["accesses"] == 0
    assert "disk space" in h["header"]["params"]["truncated"]
    # Without the reserve's pressure the same run records its accesses.
    monkeypatch.delenv("HUGESCOPE_TRACE_RESERVE")
    s = tracing.trace_program([str(prog), "2000000"], str(tmp_path / "y.hst"))
    assert not s["truncated"]
    assert hs.api.trace_info(str(tmp_path / "y.hst"))["summary"]["accesses"] > 2_000_000
