"""What the papers' measurement modules share: one row's measurement (the
core's ``Measured``), aggregates over workloads, and the text of a run's
inputs and commands.

A measurement carries one value per seed. Aggregates over workloads (a
geomean of speedups, a mean of PTW rates) are taken per seed first, so the
spread of the aggregate is the spread over seeds of the same statistic the
paper reports.
"""
from __future__ import annotations

import math
import re
import shlex
from typing import Any, Dict, Iterable, List, Optional, Sequence


def measured(row_id: str, values: Sequence[float], seeds: Sequence[int], sources: str, command: str,
             other: Optional[Sequence[float]] = None, other_label: Optional[str] = None,
             note: Optional[str] = None, not_attempted: Optional[str] = None,
             input: Optional[str] = None) -> Dict[str, Any]:  # noqa: A002 - the core's field name
    """One row's measurement, as the core's ``Measured`` reads it. ``seeds``
    empty: a deterministic value (a machine's geometry), which has no spread."""
    out: Dict[str, Any] = {"id": row_id, "values": [float(v) for v in values], "seeds": [int(s) for s in seeds],
                           "sources": sources, "command": command}
    if other is not None:
        out["other"] = [float(v) for v in other]
        out["other_label"] = other_label
    for key, v in (("note", note), ("not_attempted", not_attempted), ("input", input)):
        if v is not None:
            out[key] = v
    return out


def missing(row_id: str, why: str, sources: str = "", command: str = "") -> Dict[str, Any]:
    """A row this run could not give a value, with the reason."""
    return measured(row_id, [], [], sources, command, not_attempted=why)


def geomean(values: Iterable[float]) -> float:
    vs = list(values)
    return math.exp(sum(math.log(v) for v in vs) / len(vs))


def mean(values: Iterable[float]) -> float:
    vs = list(values)
    return sum(vs) / len(vs)


def word(v: str) -> str:
    """One shell word: as is when it holds only safe characters (``$S``, the
    seed of a command's loop, must stay unquoted to expand), else quoted."""
    return v if re.fullmatch(r"[\w.$/:=,+-]+", v) else shlex.quote(v)


def cli_params(params: Dict[str, Any]) -> str:
    """Workload parameters as ``hugescope trace`` options (``--scale 21``)."""
    parts = []
    for k, v in params.items():
        v = str(v).lower() if isinstance(v, bool) else str(v)
        parts += [f"--{k.replace('_', '-')}", word(v)]
    return " ".join(parts)


def trace_command(workload: str, params: Dict[str, Any], out: str) -> str:
    return f"hugescope trace {workload} {cli_params(params)} -o {word(out)}"


def study_command(paper: str, scale: str, seeds: List[int], study: str) -> str:
    """The commands that regenerate a row read from one of a paper's studies
    (``hugescope PAPER STUDY``): the whole reproduction, then the study per seed."""
    return (f"hugescope reproduce {paper} --scale {scale} --seeds {len(seeds)}; one study: for S in "
            f"{' '.join(map(str, seeds))}; do hugescope {paper} {study} --scale {scale} --seed $S; done")


def seeds_word(seeds: List[int]) -> str:
    if not seeds:
        return "no seed (deterministic)"
    if seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2:
        return f"seeds {seeds[0]}..{seeds[-1]}"
    return "seed" + ("s " if len(seeds) > 1 else " ") + ", ".join(map(str, seeds))


def mib(b: float) -> str:
    return f"{b / 2**20:,.0f} MiB" if b >= 2**20 else f"{b / 2**10:,.0f} KiB"


def run_studies(paper: str, studies: List[str], seeds: List[int], run, step, reuse=None):
    """Each seed's run of a paper's ``studies`` (``run(studies, seed)`` ->
    ``Studies``; ``reuse``: per seed, a run a caller already has with all of
    them), as (runs: per seed ``{study: StudyResult}``, tables: per study one
    list of row dicts per seed, evidence: one DataFrame row per study row and
    seed)."""
    import pandas as pd

    runs: List[Dict[str, Any]] = []
    for s in seeds:
        have = (reuse or {}).get(s)
        r = have if have is not None and all(st in have.studies for st in studies) else run(studies, s)
        runs.append({st: r[st] for st in studies})
        step(f"{paper} seed {s}")
    tables = {st: [x[st].table.to_dict("records") for x in runs] for st in studies}
    evidence = pd.DataFrame([{**x, "study": st, "seed": s} for st in studies for s, rows in zip(seeds, tables[st])
                             for x in rows])
    return runs, tables, evidence


class StudyRows:
    """The measurements of a paper whose rows read its studies' tables
    (Ingens, Navarro): ``tables[study]`` holds one list of row dicts per
    seed; ``sources(study)`` and ``command(study)`` say where a study's
    numbers come from and how to regenerate them."""

    def __init__(self, seeds: List[int], tables: Dict[str, List[List[Dict[str, Any]]]], sources, command):
        self.seeds, self.tables, self.sources, self.command = seeds, tables, sources, command
        self.out: List[Dict[str, Any]] = []

    def per(self, study: str, f) -> List[float]:
        """``f`` of each seed's table of ``study``."""
        return [f(rows) for rows in self.tables[study]]

    def add(self, row_id: str, study: str, values: Sequence[float], note: str = "", **kw) -> None:
        self.out.append(measured(row_id, values, self.seeds, self.sources(study), self.command(study),
                                 note=note or None, **kw))
