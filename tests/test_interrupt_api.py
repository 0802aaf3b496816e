"""Long core calls stop within a second when a Python signal handler raises,
and the caller gets that same exception (docs/python-api.md, "Interruption").

A SIGALRM timer (signal.setitimer) fires 0.3 s into a call that would take
several seconds; its handler raises a test-only exception. The call must
raise exactly that exception within 1.5 s of the signal, leave no file or
temporary file behind, and the next call must work normally.
"""

import contextlib
import os
import signal
import threading
import time

import pytest

import hugescope as hs
from hugescope import _core
from hugescope import experiments as ex

#: Bound between the signal and the exception reaching the caller.
STOP_BOUND_S = 1.5
#: Policies for a call that takes several seconds on the trace below
#: (each policy is one simulation over the same accesses).
MANY = [f"pcc:entries={n}" for n in (64, 96, 128, 160, 192, 256, 384, 512)] + [
    "hawkeye", "linux", "random", "ideal", "oracle", "hawkeye:scan_pages=0", "linux:defrag=always"]


class Boom(Exception):
    """Raised by the test's signal handler: it must come back unchanged."""


@contextlib.contextmanager
def alarm(after_s):
    """SIGALRM after `after_s`; the handler records when it ran and raises Boom."""
    fired = {}

    def handler(signum, frame):
        fired["at"] = time.monotonic()
        raise Boom(signum)

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, after_s)
    try:
        yield fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def assert_stopped(fired, exc_info):
    now = time.monotonic()
    assert "at" in fired, "the signal never fired: the call ended too early to test"
    assert isinstance(exc_info.value, Boom) and exc_info.value.args == (signal.SIGALRM,)
    assert now - fired["at"] < STOP_BOUND_S, f"stopped {now - fired['at']:.2f} s after the signal"


@pytest.fixture(scope="module")
def gups(tmp_path_factory):
    p = tmp_path_factory.mktemp("intr") / "gups.hst"
    hs.workloads.trace("gups", str(p), size="64MiB", updates=2_000_000, seed=5)
    return str(p)


def test_module_declares_it_is_cancellable():
    assert _core.CANCELLABLE is True


def test_compare_stops_with_the_handlers_exception_and_the_next_call_works(gups):
    with alarm(0.3) as fired:
        with pytest.raises(Boom) as e:
            hs.compare(gups, MANY, duration=600)
    assert_stopped(fired, e)
    # The cancellation request was withdrawn: an ordinary call completes.
    r = hs.compare(gups, ["base"], duration=60)
    assert r[0].to_dict()["translation"]["accesses"] == 4_000_000


def test_sweep_stops(gups):
    configs = [{"policy": p} for p in MANY]
    with alarm(0.3) as fired:
        with pytest.raises(Boom) as e:
            ex.run_configs(gups, configs, duration=600)
    assert_stopped(fired, e)


def test_trace_generation_stops_and_leaves_no_file(tmp_path):
    out = tmp_path / "big.hst"
    with alarm(0.3) as fired:
        with pytest.raises(Boom) as e:
            hs.workloads.trace("gups", str(out), size="64MiB", updates=200_000_000, seed=1)
    assert_stopped(fired, e)
    assert os.listdir(tmp_path) == [], "no trace and no temporary file may remain"


def test_ctrl_c_is_a_keyboard_interrupt(gups):
    # The default SIGINT handler raises KeyboardInterrupt, as Ctrl-C does.
    t = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    start = time.monotonic()
    t.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            hs.compare(gups, MANY, duration=600)
    finally:
        t.cancel()
    assert time.monotonic() - start < 0.3 + STOP_BOUND_S
