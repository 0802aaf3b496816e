"""Progress of simulate and compare (docs/python-api.md, "Progress"): the
callback gets (done, total) accesses in the calling thread, never going
back, ending at (total, total); an exception it raises stops the run and
comes back unchanged; the results are the same with and without it."""

import threading

import pytest

import hugescope as hs
from hugescope.progress import progress_share

N = 400_000  # accesses of the session's gups trace (200,000 updates)


class Stop(Exception):
    pass


def recorder():
    calls = []
    main = threading.get_ident()

    def tick(done, total):
        assert threading.get_ident() == main, "progress called outside the calling thread"
        calls.append((done, total))
    return tick, calls


def check(calls, total):
    assert calls and calls[-1] == (total, total), calls
    assert all(t == total for _, t in calls), calls
    assert all(a[0] <= b[0] for a, b in zip(calls, calls[1:])), calls


def test_static_and_policy_runs_report_the_trace_count(gups_trace):
    tick, calls = recorder()
    r = hs.simulate(gups_trace, pages="4k", progress=tick)
    check(calls, N)
    assert r.to_dict() == hs.simulate(gups_trace, pages="4k").to_dict()
    tick, calls = recorder()
    with_cb = hs.compare(gups_trace, ["linux", "pcc"], duration=60, progress=tick)
    check(calls, N)  # the policies and base step through the trace together: one count
    plain = hs.compare(gups_trace, ["linux", "pcc"], duration=60)
    assert [x.to_dict()["translation"] for x in with_cb] == [x.to_dict()["translation"] for x in plain]


def test_concurrent_run_counts_every_trace_once_per_run(gups_trace):
    tick, calls = recorder()
    hs.compare([gups_trace, gups_trace], ["linux"], duration=60, progress=tick)
    check(calls, 2 * 2 * N)  # two traces, linux and base


def test_an_exception_in_the_callback_stops_the_run(gups_trace):
    def boom(done, total):
        raise Stop(done, total)

    with pytest.raises(Stop) as e:
        hs.compare(gups_trace, ["linux"], duration=60, progress=boom)
    assert e.value.args == (N, N)
    # Nothing left pending: the next call runs.
    assert hs.simulate(gups_trace, pages="4k").to_dict()["translation"]["accesses"] == N


def test_no_bar_and_no_callback_off_a_terminal(capsys):
    # pytest captures stderr: not a terminal, so the CLI passes no callback.
    with progress_share("simulating") as tick:
        assert tick is None


def test_bar_on_a_terminal_draws_unknown_and_known_totals(monkeypatch):
    import io
    import sys

    from rich.console import Console

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=120)
    with progress_share("simulating", console=console) as tick:
        tick(0, 0)  # total unknown yet: a spinner, no share
        tick(4_194_304, 8_000_000)
        tick(8_000_000, 8_000_000)
    # transient: the bar is erased at the end, but it was drawn with the count.
    assert "8,000,000/8,000,000 accesses" in buf.getvalue() or "4,194,304/8,000,000 accesses" in buf.getvalue()


def test_progress_stages_draws_a_bar_per_stage_on_a_terminal(monkeypatch):
    import io
    import sys
    from rich.console import Console
    from hugescope.progress import progress_stages

    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    with progress_stages(["trace", "simulate"]) as tell:
        assert tell is None  # not a terminal: no bar, no callback
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=100)
    with progress_stages(["trace", "simulate", "measure"], console=console) as tell:
        tell("trace", 1, 1)
        tell("simulate", 3, 5)
        console.print()  # let the live display draw once
        text = buf.getvalue()
    assert "trace" in text and "1/1" in text and "simulate" in text and "3/5" in text, text
