"""What the paper studies (``ds-tables``, ``ingens``, ``navarro``) share: counting
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
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from . import api
from .errors import HugescopeError
from .experiments import _json_safe

MIB = 1 << 20


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


# ---------------------------------------------------------------- runs and their rows

def sum_huge(os_stats: Dict[str, Any]) -> int:
    return sum(n for _, n in os_stats.get("faults_huge", []))


def run_row(label: str, spec: str, d: Dict[str, Any]) -> Dict[str, Any]:
    """The counters of one run every study reads (all from the run's JSON):
    memory (RSS against base pages), huge pages, faults and their time,
    compaction, and the cost model's speedup over base pages."""
    o = d["os_stats"]
    procs = d.get("processes", [])
    rss = sum(p["rss_bytes"] for p in procs)
    base_rss = sum(p["base_rss_bytes"] for p in procs)
    faults = o["faults_base"] + sum_huge(o)
    frag = d.get("fragmentation") or {}
    stats = (d.get("policy_params") or {}).get("stats") or {}
    fault_s = o.get("fault_seconds")
    return {
        "config": label,
        "policy": spec,
        "speedup_est": d.get("speedup_vs_base"),
        "virtual_seconds": d.get("virtual_seconds"),
        "rss_bytes": rss,
        "base_rss_bytes": base_rss,
        "bloat": rss / base_rss if base_rss else None,
        "huge_bytes": sum(p["huge_bytes"] for p in procs),
        "huge_bytes_peak": d.get("huge_bytes_peak", 0),
        "huge_share": (sum(p["huge_bytes"] for p in procs) / sum(p["footprint_bytes"] for p in procs))
        if procs and sum(p["footprint_bytes"] for p in procs) else 0.0,
        "promotions": o["promotions"],
        "demotions": o["demotions"],
        "faults_base": o["faults_base"],
        "faults_huge": sum_huge(o),
        "fault_fallbacks": o["fault_fallbacks"],
        "fault_seconds": fault_s,
        "mean_fault_us": 1e6 * fault_s / faults if fault_s is not None and faults else None,
        "compactions": o["compactions"],
        "compaction_migrated_pages": o["compaction_migrated_pages"],
        # FMFI the fragmenter left before the run (None on free memory).
        "fmfi_start": frag.get("fmfi"),
        "compaction_rounds": stats.get("compaction_rounds"),
        "kind": "estimate",
    }


def groups(configs):
    """Configurations grouped by their OS options, in first-seen order: each
    group simulates in one decoding pass of the trace."""
    groups: List[Tuple[Dict[str, Any], List[Tuple[int, str, str]]]] = []
    for i, (label, spec, opts) in enumerate(configs):
        for g_opts, members in groups:
            if g_opts == opts:
                members.append((i, label, spec))
                break
        else:
            groups.append((opts, [(i, label, spec)]))
    return groups


def simulate_configs(paths, configs, preset: str, os_options: Dict[str, Any],
                     done: Callable[[str], None]) -> List[Dict[str, Any]]:
    """The result dict of each of ``configs`` (label, spec, OS options) on the
    trace(s) ``paths`` (several traces run as concurrent processes), in order."""
    out: List[Optional[Dict[str, Any]]] = [None] * len(configs)
    for opts, members in groups(configs):
        results = api.compare(paths, [spec for _, _, spec in members], preset=preset, **{**os_options, **opts})
        for (i, label, _), r in zip(members, results):
            out[i] = r.to_dict()
        done("; ".join(label for _, label, _ in members))
    return out


def with_paper(rows: List[Dict[str, Any]], paper: Dict[str, Any]) -> None:
    for r in rows:
        for k, v in (paper.get(r["config"]) or {}).items():
            r[f"paper_{k}"] = v


def timeline_rows(label: str, d: Dict[str, Any], **extra) -> List[Dict[str, Any]]:
    """One row per timeline sample and process: huge and resident bytes."""
    rows = []
    for s in d.get("timeline", []):
        base = s.get("base_rss_bytes") or [None] * len(s["huge_bytes"])
        for pid, (h, r, b) in enumerate(zip(s["huge_bytes"], s["rss_bytes"], base)):
            rows.append({"config": label, **extra, "time_s": s["time_s"], "pid": pid, "huge_bytes": h,
                         "rss_bytes": r, "base_rss_bytes": b, "fmfi": s.get("fmfi")})
    return rows


# ---------------------------------------------------------------- results

class StudyResult:
    """One study of a paper: ``table`` (DataFrame, one row per configuration,
    or per configuration and process), ``extra`` (more DataFrames, e.g.
    ``timeline``), ``meta`` and ``checks()`` (the paper's claims on this run,
    from the paper module's ``shape_checks``)."""

    def __init__(self, paper: str, study: str, table, extra: Dict[str, Any], meta: Dict[str, Any],
                 shape_checks: Callable[[str, List[Dict[str, Any]]], List[Dict[str, Any]]]):
        self.paper, self.study, self.table, self.extra, self.meta = paper, study, table, extra, meta
        self._shape_checks = shape_checks

    @property
    def experiment(self) -> str:
        return f"{self.paper}-{self.study}"

    def checks(self) -> List[Dict[str, Any]]:
        return self._shape_checks(self.study, self.table.to_dict("records"))

    def to_dict(self) -> Dict[str, Any]:
        """What :func:`save` writes as this study's JSON."""
        return _json_safe({**self.meta, "hugescope_experiment": self.experiment,
                           "rows": self.table.to_dict("records"),
                           **{k: v.to_dict("records") for k, v in self.extra.items()}, "checks": self.checks()})


class Studies:
    """The studies of one paper as run (``ingens_studies``,
    ``navarro_studies``): ``studies`` (name -> StudyResult, in the order run),
    ``meta``; ``checks()`` gives every claim with its study."""

    def __init__(self, studies: Dict[str, StudyResult], meta: Dict[str, Any]):
        self.studies, self.meta = studies, meta

    def __getitem__(self, study: str) -> StudyResult:
        return self.studies[study]

    def checks(self) -> List[Dict[str, Any]]:
        return [{"study": name, **c} for name, s in self.studies.items() for c in s.checks()]

    def to_dict(self) -> Dict[str, Any]:
        """Everything: the metadata, each study's content and all claims."""
        return _json_safe({**self.meta, "studies": {n: s.to_dict() for n, s in self.studies.items()},
                           "checks": self.checks()})

    def save(self, out: str, plots: bool = True) -> Dict[str, str]:
        """Write each study's ``OUT/EXPERIMENT.csv``, its extra tables
        (``-timeline.csv`` ...), ``-checks.csv``, ``.json`` and figures;
        returns every path, keyed ``STUDY_KIND``."""
        paths: Dict[str, str] = {}
        for name, s in self.studies.items():
            written = save_study(s.experiment, s.meta, s.table, out, s.experiment, s.extra, s.checks(), plots)
            paths.update({f"{name}_{k}": p for k, p in written.items()})
        return paths


def study_names(studies, allowed: List[str]) -> List[str]:
    """The studies asked for: all of ``allowed`` for None, else each name
    once in the order first given; a name not in ``allowed`` or an empty list
    is one error line."""
    if studies is None:
        return list(allowed)
    if isinstance(studies, str):
        studies = [studies]
    names = [str(s) for s in studies]
    for s in names:
        check_choice(s, "study", allowed)
    if not names:
        raise HugescopeError(f"study: empty list (choose from {', '.join(allowed)})")
    return list(dict.fromkeys(names))
