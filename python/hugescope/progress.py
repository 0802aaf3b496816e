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
