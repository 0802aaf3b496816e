"""What the paper studies (``ds-tables``, ``ingens``) share: counting
progress, a directory for the generated traces, the claims of a paper checked
on a run, and saving a study's tables, claims and figures through the one
safe writer (``hugescope._io``), with the same files checked before any work.

A study is a named experiment (``hugescope_experiment`` in its JSON) whose
main table is one DataFrame, with extra tables beside it (each also a CSV) and
its claims (``checks``, one row per claim: ``claim``, ``holds``, ``detail``).
"""
from __future__ import annotations

import contextlib
import math
import os
import tempfile
from typing import Any, Callable, Dict, Iterator, List, Optional

from .errors import HugescopeError


class Steps:
    """Counts finished steps of a study and reports each one as
    ``progress(what, done, total)`` (nothing without a callback)."""

    def __init__(self, total: int, progress: Optional[Callable[[str, int, int], None]] = None):
        self.total, self.done, self.progress = total, 0, progress

    def __call__(self, what: str) -> None:
        self.done += 1
        if self.progress:
            self.progress(what, self.done, self.total)


@contextlib.contextmanager
def trace_dir(traces: Optional[str], prefix: str) -> Iterator[str]:
    """``traces`` when given (the caller keeps the traces there), else a
    temporary directory removed when the block ends, also on error."""
    if traces is not None:
        yield traces
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        yield tmp


def check_choice(value: str, what: str, allowed) -> str:
    """``value`` if it is one of ``allowed``, else the one-line error naming
    ``what`` and the value (quoted by ``repr`` so a control character in it,
    such as a newline, cannot split the line)."""
    if value not in allowed:
        raise HugescopeError(f"{what}: {value!r} is not one of {', '.join(allowed)}")
    return value


def num(v) -> Optional[float]:
    """A number from a row, None for a missing value (None or pandas' NaN)."""
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def claim(out: List[Dict[str, Any]], text: str, ok, detail: str) -> None:
    """Append one claim of a paper to ``out``: ``holds`` is True/False, or None
    when this run cannot test it (``ok`` is None)."""
    out.append({"claim": text, "holds": None if ok is None else bool(ok), "detail": detail})


#: How a claim's outcome is printed (CLI) and shown (report).
VERDICT = {True: "PASS", False: "FAIL", None: "not testable"}


def save_study(experiment: str, meta: Dict[str, Any], table, out: str, name: str,
               extra_tables: Optional[Dict[str, Any]] = None, checks: Optional[List[Dict[str, Any]]] = None,
               plots: bool = True) -> Dict[str, str]:
    """Write ``OUT/NAME.csv`` (``table``), ``OUT/NAME-KEY.csv`` per extra table
    (and ``NAME-checks.csv`` for the claims), ``OUT/NAME.json`` (all of it,
    ``meta`` on top) and, with ``plots``, the experiment's figures as
    ``NAME.png``, ``NAME-2.png``, ...; returns the paths written."""
    import pandas as pd

    from . import experiments

    df = table.copy()
    df.attrs["meta"] = {**meta, "hugescope_experiment": experiment}
    extra = dict(extra_tables or {})
    if checks is not None:
        extra["checks"] = pd.DataFrame(checks, columns=["claim", "holds", "detail"])
    paths = experiments.save(df, out, name=name, extra_tables=extra)
    if plots:
        from . import plots as _plots

        pngs = _plots.save_figures(experiments.load(paths["json"]), os.path.join(out, name))
        paths.update({f"png{i}": p for i, p in enumerate(pngs)})
    return paths


def check_study_outputs(experiment: str, out: str, name: str, extra=(), plots: bool = True) -> None:
    """Before any work: create ``out`` if needed and refuse any file
    :func:`save_study` would write there that must not be replaced."""
    from . import experiments

    experiments.check_outputs(out, name, tuple(extra))
    if plots:
        from . import plots as _plots
        from ._io import check_output

        for p in _plots.figure_paths({"hugescope_experiment": experiment}, os.path.join(out, name)):
            check_output(p, "png")
