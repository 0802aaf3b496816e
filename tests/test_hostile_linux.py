"""The real-Linux side under hostile or careless use: signals, kills, failing
programs, missing processes and bad arguments. Nothing is mocked: every test
starts real processes (the `hugescope` CLI in a subprocess where signals are
involved) and checks what is left on the machine afterwards: child processes,
kernel settings, the state file.

Every test that can change a kernel setting saves it first and puts it back in a
`finally` (the `sysctls` fixture), whatever the outcome, and skips with the reason
when the machine cannot do what it tests. The state file goes to a temporary
directory (HUGESCOPE_STATE_DIR), never /run/hugescope.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import hugescope as hs
from hugescope import linux
from conftest import run_cli

HUGESCOPE = os.path.join(os.path.dirname(sys.executable), "hugescope")
COMPACT = "/proc/sys/vm/compact_unevictable_allowed"
MAXMAP = "/proc/sys/vm/max_map_count"
# A bound, not a speed target: a stopped command must be gone well within this.
STOP_BOUND_S = 10

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the fragmenter needs root (pagemap frame numbers, "
                                                         "mlock, sysctl writes)")


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    d = tmp_path / "state"
    monkeypatch.setenv("HUGESCOPE_STATE_DIR", str(d))
    return d


def _read(path):
    with open(path) as f:
        return f.read().strip()


def _write(path, value):
    with open(path, "w") as f:
        f.write(value + "\n")


@pytest.fixture
def sysctls():
    """Save every sysctl the fragmenter may change and restore it, even on failure."""
    saved = {p: _read(p) for p in (COMPACT, MAXMAP) if os.path.exists(p)}
    try:
        yield saved
    finally:
        for p, v in saved.items():
            if _read(p) != v:
                _write(p, v)


def _cli(*args, **kw) -> subprocess.Popen:
    return subprocess.Popen([HUGESCOPE, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kw)


def _gone(pid: int) -> bool:
    """The process no longer exists (reaped), or is at most a zombie of someone else's."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except FileNotFoundError:
        return True
    return stat[stat.rfind(")") + 2] == "Z"


def _wait_for(cond, what: str, bound: float = STOP_BOUND_S):
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > bound:
            raise AssertionError(f"{what} did not happen within {bound} s")
        time.sleep(0.02)


def _children(pid: int):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except FileNotFoundError:
        return []


# ---------------------------------------------------------------- signals to run

def _stop(p, sig):
    """Send ``sig`` to the hugescope process ``p`` and wait for it to end within
    STOP_BOUND_S (killing it if it does not, so no test leaves it behind);
    returns its stderr."""
    p.send_signal(sig)
    try:
        _, err = p.communicate(timeout=STOP_BOUND_S)
    finally:
        p.kill()
        p.wait()
    return err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_run_program_stops_and_reaps_the_child(sig, tmp_path, state_dir):
    pidfile = tmp_path / "child.pid"
    # The measured program records its PID and then runs far longer than the test.
    p = _cli("run", "--repeat", "1", "--warmup", "0", "--", "sh", "-c", f"echo $$ > {pidfile}; exec sleep 60")
    try:
        _wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), "the program start")
        child = int(pidfile.read_text())
        assert not _gone(child)
    except BaseException:
        _stop(p, signal.SIGKILL)
        raise
    err = _stop(p, sig)
    assert p.returncode == 128 + sig, err
    assert _gone(child), f"the measured program {child} outlived hugescope"
    assert "Traceback" not in err and "interrupted" in err
    assert not (state_dir / "state.json").exists()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_run_workload_stops_and_reaps_the_child(sig, state_dir):
    # A workload that runs for seconds; its fresh child process is what must not outlive us.
    p = _cli("run", "gups", "--size", "64MiB", "--updates", "200M", "--repeat", "3", "--warmup", "0")
    try:
        _wait_for(lambda: _children(p.pid), "the workload child start")
        kids = _children(p.pid)
        time.sleep(0.3)
    except BaseException:
        _stop(p, signal.SIGKILL)
        raise
    err = _stop(p, sig)
    assert p.returncode == 128 + sig, err
    assert all(_gone(k) for k in kids), f"workload child {kids} outlived hugescope"
    assert "Traceback" not in err


def test_sigkill_of_hugescope_takes_the_program_with_it(tmp_path, state_dir):
    """PR_SET_PDEATHSIG: a SIGKILLed hugescope cannot forward anything, the kernel does."""
    pidfile = tmp_path / "child.pid"
    p = _cli("run", "--repeat", "1", "--warmup", "0", "--", "sh", "-c", f"echo $$ > {pidfile}; exec sleep 60")
    try:
        _wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), "the program start")
        child = int(pidfile.read_text())
        p.kill()
        p.wait(timeout=STOP_BOUND_S)
    finally:
        p.kill()
        p.wait()
    _wait_for(lambda: _gone(child), f"the end of the orphaned program {child}")


def test_sigkill_of_hugescope_takes_the_workload_child_with_it(state_dir):
    p = _cli("run", "gups", "--size", "64MiB", "--updates", "200M", "--repeat", "3", "--warmup", "0")
    try:
        _wait_for(lambda: _children(p.pid), "the workload child start")
        kids = _children(p.pid)
        p.kill()
        p.wait(timeout=STOP_BOUND_S)
    finally:
        p.kill()
        p.wait()
    _wait_for(lambda: all(_gone(k) for k in kids), f"the end of the orphaned workload child {kids}")


# ---------------------------------------------------------------- honest status

def _run_json(tmp_path, *program, extra=()):
    out = tmp_path / "run.json"
    p = subprocess.run([HUGESCOPE, "run", "--repeat", "2", "--warmup", "0", *extra, "--json", str(out), "--",
                        *program], capture_output=True, text=True, timeout=60)
    return p, json.loads(out.read_text())


@pytest.mark.parametrize("program,status,detail", [
    (["/bin/false"], "failed", "exit 1"),
    (["sh", "-c", "kill -9 $$"], "killed", "signal 9 (SIGKILL)"),
])
def test_failing_program_is_marked_failed_and_not_averaged(tmp_path, state_dir, program, status, detail):
    p, d = _run_json(tmp_path, *program)
    assert p.returncode == 1, p.stderr
    assert [(r["status"], r["status_detail"]) for r in d["runs"]] == [(status, detail)] * 2
    s = d["summary"]
    assert s["runs"] == 0 and s["wall_s"] is None and s["user_s"] is None
    assert [f["status"] for f in s["failed_runs"]] == [status, status]
    lines = p.stderr.strip().splitlines()
    assert lines[-1].startswith("error: 2 of 2 measured run(s)") and detail in lines[-1], p.stderr
    assert "Traceback" not in p.stderr and "median" not in p.stdout


def test_timeout_kill_is_marked_timeout(tmp_path, state_dir):
    p, d = _run_json(tmp_path, "sleep", "30", extra=("--timeout", "0.3"))
    assert p.returncode == 1, p.stderr
    assert [r["status"] for r in d["runs"]] == ["timeout", "timeout"]
    assert all(r["timed_out"] and r["wall_s"] < STOP_BOUND_S for r in d["runs"])
    assert d["summary"]["wall_s"] is None
    assert "timeout" in p.stderr.strip().splitlines()[-1]


def test_one_failed_run_is_left_out_of_the_summary(tmp_path, state_dir):
    marker = tmp_path / "ran-once"
    # The first run succeeds, the second fails.
    p, d = _run_json(tmp_path, "sh", "-c", f"test -e {marker} && exit 7; touch {marker}")
    assert p.returncode == 1
    assert [r["status"] for r in d["runs"]] == ["ok", "failed"]
    ok = d["runs"][0]["wall_s"]
    assert d["summary"]["runs"] == 1
    assert d["summary"]["wall_s"] == {"median": ok, "min": ok, "max": ok}
    assert "run 2: failed (exit 7)" in p.stderr


def _missing_pid() -> int:
    with open("/proc/sys/kernel/pid_max") as f:
        pid = int(f.read()) - 1
    while os.path.exists(f"/proc/{pid}"):
        pid -= 1
    return pid


def test_apply_to_a_missing_pid_fails_with_one_line(tmp_path, state_dir):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps([{"start": "0x7e0000000000", "length": "2MiB"}]))
    pid = _missing_pid()
    p = subprocess.run([HUGESCOPE, "apply", str(pid), str(plan)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [f"error: process {pid} does not exist"], p.stderr
    with pytest.raises(hs.HugescopeError, match=f"process {pid} does not exist"):
        linux.apply_plan(pid, str(plan))


def test_apply_to_a_target_that_has_exited_is_reported_per_entry(tmp_path, state_dir):
    """An exited, not yet reaped target (a zombie: its PID exists, its memory is gone)
    is what a target that exits during apply looks like to the later entries."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps([{"start": "0x7e0000000000", "length": "2MiB"},
                                {"start": "0x7e0000400000", "length": "2MiB"}]))
    out = tmp_path / "outcomes.json"
    zombie = subprocess.Popen(["true"])
    try:
        _wait_for(lambda: _gone(zombie.pid), "the target's exit")
        p = subprocess.run([HUGESCOPE, "apply", str(zombie.pid), str(plan), "--json", str(out)], capture_output=True,
                           text=True, timeout=60)
    finally:
        zombie.wait()
    assert p.returncode == 1, p.stderr
    outs = json.loads(out.read_text())
    assert [(o["status"], o["errno"]) for o in outs] == [("skipped", "ESRCH")] * 2
    assert p.stderr.strip().splitlines() == [f"error: process {zombie.pid} exited during apply: 2 of 2 entries "
                                             "not applied"]


# ---------------------------------------------------------------- settings survive a kill

@needs_root
def test_stale_setting_is_restored_by_the_next_invocation(tmp_path, state_dir, sysctls):
    """A record left by a dead owner for an allow-listed setting: the next
    invocation restores it and removes the record."""
    original = sysctls[MAXMAP]
    _write(MAXMAP, str(int(original) + 1))  # what the killed owner had set
    dead = subprocess.Popen(["true"])
    dead.wait()
    state_dir.mkdir(mode=0o700)
    f = state_dir / "state.json"
    f.write_text(json.dumps({"version": 1, "settings": [
        {"path": MAXMAP, "original": original, "owners": [{"pid": dead.pid, "start_ticks": 1}]}]}))
    f.chmod(0o600)
    p = subprocess.run([HUGESCOPE, "thp"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert _read(MAXMAP) == original
    assert not f.exists()
    notes = [line for line in p.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and f"restored {MAXMAP} to {original}" in notes[0] and str(dead.pid) in notes[0]
    # Nothing left: the next invocation says nothing.
    assert "note:" not in subprocess.run([HUGESCOPE, "thp"], capture_output=True, text=True).stderr


def _as_nobody(fn):
    """Run ``fn`` in a forked child that has dropped to uid/gid 65534."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            fn()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@needs_root
def test_a_state_file_forged_by_another_user_writes_nothing(tmp_path, sysctls):
    """Issue #31 case 1: HUGESCOPE_STATE_DIR names a world-writable directory in
    which another user plants state.json naming a root-owned file (and an
    allow-listed setting with a value of its choosing). The next root command
    refuses the journal in one line and writes nothing anywhere."""
    import tempfile
    open_dir = tempfile.mkdtemp(prefix="hugescope-forge-", dir="/tmp")
    try:
        os.chmod(open_dir, 0o777)
        victim = tmp_path / "root-owned.conf"
        victim.write_text("precious\n")
        before_maxmap = _read(MAXMAP)

        def plant():
            with open(os.path.join(open_dir, "state.json"), "w") as f:
                json.dump({"version": 1, "settings": [
                    {"path": str(victim), "original": "owned", "owners": [{"pid": 999999, "start_ticks": 1}]},
                    {"path": MAXMAP, "original": "65530", "owners": [{"pid": 999999, "start_ticks": 1}]}]}, f)
            os.chmod(os.path.join(open_dir, "state.json"), 0o600)
        _as_nobody(plant)
        env = dict(os.environ, HUGESCOPE_STATE_DIR=open_dir)
        for cmd in (["thp"], ["thp", "--json", "-"]):
            p = subprocess.run([HUGESCOPE, *cmd], capture_output=True, text=True, timeout=60, env=env)
            assert p.returncode == 2, p.stderr
            lines = p.stderr.strip().splitlines()
            assert len(lines) == 1 and "settings journal" in lines[0] and "nothing was restored" in lines[0], lines
            assert "Traceback" not in p.stderr
        assert victim.read_text() == "precious\n"
        assert _read(MAXMAP) == before_maxmap
        # The forged file is left for its owner; nothing was added beside it.
        assert sorted(os.listdir(open_dir)) == ["state.json"]

        # A root-only directory, but the state file belongs to another user.
        safe = tmp_path / "state"
        safe.mkdir(mode=0o700)
        f = safe / "state.json"
        f.write_text(json.dumps({"version": 1, "settings": [
            {"path": MAXMAP, "original": "65530", "owners": [{"pid": 999999, "start_ticks": 1}]}]}))
        f.chmod(0o600)
        os.chown(f, 65534, 65534)
        env = dict(os.environ, HUGESCOPE_STATE_DIR=str(safe))
        p = subprocess.run([HUGESCOPE, "thp"], capture_output=True, text=True, timeout=60, env=env)
        assert p.returncode == 2 and "owned by uid 65534" in p.stderr, p.stderr
        assert _read(MAXMAP) == before_maxmap
    finally:
        import shutil
        shutil.rmtree(open_dir, ignore_errors=True)


def _fragment_args():
    """A light fragmenter run: the margin leaves all but ~600 MiB of free memory alone."""
    with open("/proc/meminfo") as f:
        free = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemFree:"))
    if free < 2 << 30:
        pytest.skip(f"only {free >> 20} MiB free; the fragmenter test wants 2 GiB")
    return ["fragment", "--share", "0.5", "--seed", "3", "--margin", str(free - (600 << 20)), "--hold"]


def _start_holding(tmp_path):
    p = _cli(*_fragment_args())
    for line in p.stdout:
        if line.startswith("holding"):
            return p
    p.wait()
    pytest.fail(f"fragment exited {p.returncode} before holding: {p.stderr.read()[-500:]}")


@needs_root
def test_sigkilled_fragment_hold_is_repaired_by_the_next_invocation(tmp_path, state_dir, sysctls):
    original = sysctls[COMPACT]
    p = _start_holding(tmp_path)
    try:
        assert _read(COMPACT) == "0"
        rec = json.loads((state_dir / "state.json").read_text())["settings"]
        assert [(r["path"], r["original"], r["owners"][0]["pid"]) for r in rec] == [(COMPACT, original, p.pid)]
        p.kill()
        p.wait(timeout=STOP_BOUND_S)
    finally:
        p.kill()
        p.wait()
    # Killed outright: nothing could restore it yet.
    assert _read(COMPACT) == "0"
    q = subprocess.run([HUGESCOPE, "thp"], capture_output=True, text=True, timeout=60)
    assert q.returncode == 0, q.stderr
    assert _read(COMPACT) == original
    assert not (state_dir / "state.json").exists()
    assert f"restored {COMPACT} to {original}" in " ".join(q.stderr.split())


@needs_root
def test_sigterm_to_fragment_hold_restores_and_exits_143(tmp_path, state_dir, sysctls):
    p = _start_holding(tmp_path)
    try:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=STOP_BOUND_S)
    finally:
        p.kill()
        p.wait()
    assert p.returncode == 128 + signal.SIGTERM, err
    assert _read(COMPACT) == sysctls[COMPACT]
    assert not (state_dir / "state.json").exists()
    assert "released" in out and "Traceback" not in err


# ---------------------------------------------------------------- argument validation

BAD_OPTIONS = [
    (["run", "--repeat", "0", "--", "true"], "--repeat: 0:"),
    (["run", "--repeat", "-3", "--", "true"], "--repeat: -3:"),
    (["run", "--warmup", "-1", "--", "true"], "--warmup: -1:"),
    (["run", "--repeat", "1000001", "--", "true"], "--repeat: 1000001:"),
    (["run", "--sample-ms", "-1", "--", "true"], "--sample-ms: -1:"),
    (["run", "--sample-ms", "99999999999", "--", "true"], "--sample-ms: 99999999999:"),
    (["run", "--timeout", "0", "--", "true"], "--timeout: 0 "),
    (["run", "--timeout", "nan", "--", "true"], "--timeout: nan "),
    (["run", "--start-timeout", "-1", "--", "true"], "--start-timeout: -1 "),
    (["run", "gups", "--repeat", "-2"], "--repeat: -2:"),
    (["run", "gups", "--warmup", "x"], "--warmup: 'x'"),
    (["fragment", "--share", "1.5"], "--share: 1.5 "),
    (["fragment", "--share", "0.5", "--seed", "-1"], "--seed: -1 "),
    (["fragment", "--share", "0.5", "--seed", str(1 << 64)], f"--seed: {1 << 64} "),
    (["fragment", "--share", "0.5", "--seconds", "-2"], "--seconds: -2 "),
    (["fragment", "--share", "0.5", "--margin", "12Q"], "--margin"),
    (["apply", "-5", "plan.json"], "pid: '-5'"),
    (["coverage", "0"], "pid: '0'"),
    (["calibrate", "--repeat", "0"], "--repeat: 0:"),
    (["calibrate", "--warmup", "-1"], "--warmup: -1:"),
    (["validate", "gups", "--repeat", "0", "-o", "x"], "--repeat: 0:"),
    (["validate", "gups", "--duration", "-1", "-o", "x"], "--duration: -1 "),
]


@pytest.mark.parametrize("args,words", BAD_OPTIONS, ids=[" ".join(a) for a, _ in BAD_OPTIONS])
def test_bad_option_is_one_error_naming_it_and_the_value_given(args, words, capsys, state_dir):
    with pytest.raises(SystemExit) as e:
        run_cli(*args)
    err = capsys.readouterr().err
    assert e.value.code == 2
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and words in errors[0], err
    assert "Traceback" not in err


def test_bad_values_after_parsing_exit_2_with_one_line(capsys, state_dir):
    code, _, err = run_cli("coverage", str(1 << 40), capsys=capsys)
    assert code == 2 and str(1 << 40) in err and "Traceback" not in err
    code, _, err = run_cli("apply", str(1 << 40), "missing.json", capsys=capsys)
    assert code == 2 and "Traceback" not in err


# Values an API caller might pass by mistake: every one must be refused with
# ValueError (or HugescopeError), never a TypeError/OverflowError from the core.
JUNK = st.one_of(st.integers(max_value=0), st.integers(min_value=1 << 63), st.floats(allow_nan=True),
                 st.text(max_size=5), st.none(), st.booleans(), st.lists(st.integers(), max_size=2))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["repeat", "sample_ms", "timeout"]), value=JUNK)
def test_run_api_refuses_bad_numbers_with_value_error(name, value):
    # Values that are valid by accident (timeout=None or any positive number,
    # sample_ms=0: no samples) run /bin/true once.
    try:
        linux.run(["true"], **dict({"repeat": 1, "warmup": 0}, **{name: value}))
    except (ValueError, hs.HugescopeError) as e:
        assert name in str(e)
        return
    positive = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    no_samples = name == "sample_ms" and value == 0 and type(value) is int
    assert (name == "timeout" and (value is None or positive)) or no_samples, f"{name}={value!r} was accepted"


@pytest.mark.parametrize("target", [123, None, [1, 2], ("true", None), {"argv": ["true"]}])
def test_run_api_refuses_a_target_that_is_neither_name_nor_argv(target):
    with pytest.raises(ValueError, match="target"):
        linux.run(target, repeat=1, warmup=0)


def _names_a_pid(s: str) -> bool:
    """Text int() reads as a usable pid ("1", " 42", "\u0661"): a real process id."""
    try:
        return 0 < int(s) < linux.PID_MAX
    except ValueError:
        return False


@settings(max_examples=100, deadline=None)
@given(pid=st.one_of(st.integers(max_value=-1), st.integers(min_value=1 << 22),
                     st.text(max_size=4).filter(lambda s: not _names_a_pid(s)),
                     st.floats(), st.booleans(), st.none()))
def test_pid_api_refuses_non_pids_with_value_error(pid):
    with pytest.raises((ValueError, hs.HugescopeError)):
        linux.coverage(pid)
    with pytest.raises((ValueError, hs.HugescopeError)):
        linux.apply_plan(pid, [{"start": "0x7e0000000000", "length": "2MiB"}])


@settings(max_examples=60, deadline=None)
@given(share=st.one_of(st.floats(), st.text(max_size=4), st.none(), st.booleans()), seed=JUNK)
def test_fragment_api_refuses_bad_arguments_before_touching_memory(share, seed):
    valid_share = isinstance(share, float) and 0.0 <= share <= 1.0
    # Only ever called with at least one bad argument: it must refuse before starting.
    seed = seed if valid_share else 0
    if valid_share and isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed < 1 << 64:
        return
    with pytest.raises((ValueError, hs.HugescopeError)):
        linux.fragment(share, seed=seed)
