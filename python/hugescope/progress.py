"""rich progress bars for anything that takes more than a second."""

from __future__ import annotations

import contextlib
import sys

from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn


@contextlib.contextmanager
def progress_counter(description: str, unit: str = "items"):
    """Yield a callback taking a running count; shows count and rate on a
    terminal, stays silent when output is not a terminal (CI, pipes)."""
    if not sys.stderr.isatty():
        yield lambda n: None
        return
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TextColumn("{task.completed:,} " + unit),
                  TimeElapsedColumn(), transient=True) as p:
        task = p.add_task(description, total=None)
        yield lambda n: p.update(task, completed=n)


@contextlib.contextmanager
def progress_steps(description: str, total: int):
    """Yield an ``advance(label)`` callback for a known number of steps."""
    if not sys.stderr.isatty():
        yield lambda label=None: None
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), transient=True) as p:
        task = p.add_task(description, total=total)

        def advance(label=None):
            if label:
                p.update(task, description=f"{description}: {label}")
            p.advance(task)

        yield advance


@contextlib.contextmanager
def progress_share(description: str, unit: str = "accesses", console=None):
    """Yield a ``tick(done, total)`` callback drawing a percentage bar with
    the count and the time left (a spinner while ``total`` is 0, unknown);
    ``None`` when stderr is not a terminal, so the caller passes no callback
    at all. The simulate calls of the core report every 2^22 accesses."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import TaskProgressColumn

    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(),
               TextColumn("{task.fields[count]}"), TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as p:
        task = p.add_task(description, total=None, count="")

        def tick(done: int, total: int) -> None:
            count = f"{done:,}/{total:,} {unit}" if total else f"{done:,} {unit}"
            p.update(task, completed=done, total=total or None, count=count)

        yield tick


@contextlib.contextmanager
def progress_stages(stages, console=None):
    """One bar per stage of a pipeline (``stages``: names in order), drawn
    while it runs: yields ``tell(stage, done, total)`` (``total`` None: a
    spinner while unknown). ``None`` when stderr is not a terminal."""
    if not sys.stderr.isatty():
        yield None
        return
    columns = (SpinnerColumn(), TextColumn("{task.description:<9}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as p:
        tasks = {name: p.add_task(name, total=None, start=False) for name in stages}

        def tell(stage: str, done: int, total) -> None:
            task = tasks[stage]
            p.start_task(task)
            # Drawn now: a stage's steps are seconds apart, not a stream.
            p.update(task, completed=done, total=total, refresh=True)

        yield tell
