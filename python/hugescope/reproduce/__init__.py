"""Reproduction tables: every quantitative result of a paper beside
hugescope's value, with a verdict (issue #33; ``docs/reproduction.md``).

The paper's side (figure, metric, value, tolerance rule) is data in the core
(``crates/hugescope-core/src/reproduce/papers/*.toml``), and so are the
verdicts: this package only runs the existing studies (``experiments``,
``ds_tables``) as building blocks, turns their tables into one measurement
per row (a value per seed, the sources of the inputs, the command), and
hands them to the core, which judges each row:

    from hugescope import reproduce
    r = reproduce.run(["pcc", "ds"], scale="ci", seeds=3)
    r.rows                     # DataFrame, one row per quantitative result
    r.save("results")          # reproduction.csv, .json, .html

Every hugescope value is an estimate of the cost model (``kind ==
"estimate"``); the paper's values are the papers' measurements.
"""
from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from .. import _core
from ..errors import HugescopeError

#: The papers, in the order ``reproduce all`` runs them.
PAPERS = tuple(_core.reproduce_papers())
SCALES = ("ci", "paper")
#: Seeds per seeded workload by default: a *shape* needs at least 3.
DEFAULT_SEEDS = 3
VERDICTS = ("reproduced", "shape", "not reproduced", "input", "not attempted")

#: Columns of ``reproduction.csv``, in order.
COLUMNS = ["paper", "figure", "section", "series", "metric", "unit", "paper_text", "value_text", "value", "value_min",
           "value_max", "n", "seeds", "tolerance", "verdict", "reason", "note", "reading", "sources", "command", "id",
           "paper_value", "paper_lo", "paper_hi", "accepted_lo", "accepted_hi", "values", "quote", "scale"]


def paper(name: str) -> Dict[str, Any]:
    """One paper's data (rows, workloads at the paper's scale), as the core
    holds it."""
    return json.loads(_core.reproduce_paper(name))


def evaluate(paper_name: str, scale: str, measured: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The core's verdict on every row of ``paper_name`` given these
    measurements (dicts of the core's ``Measured``: ``id``, ``values``,
    ``seeds``, ``sources``, ``command``, optional ``other``, ``input``,
    ``not_attempted``, ``note``). Rows without a measurement are *not
    attempted*."""
    try:
        text = json.dumps(measured, allow_nan=False)
    except ValueError:
        bad = [x.get("id") for x in measured if any(v != v or v in (float("inf"), float("-inf"))
                                                    for v in [*x.get("values", []), *x.get("other", [])])]
        raise HugescopeError(f"{paper_name}: row {', '.join(map(repr, bad))}: a value is not a finite number") from None
    return json.loads(_core.reproduce_evaluate(paper_name, scale, text))


def papers_arg(papers: Union[str, Sequence[str]]) -> List[str]:
    """``"all"``, one paper or a list, checked against ``PAPERS``."""
    names = list(PAPERS) if papers == "all" else ([papers] if isinstance(papers, str) else list(papers))
    for p in names:
        if p not in PAPERS:
            raise HugescopeError(f"paper {p!r}: not one of {', '.join(PAPERS)} or all")
    if not names:
        raise HugescopeError("no paper given (choose from " + ", ".join(PAPERS) + " or all)")
    return list(dict.fromkeys(names))


def seeds_arg(seeds: Union[int, Sequence[int]]) -> List[int]:
    """``N`` (seeds 1..N) or a list of seeds."""
    if isinstance(seeds, bool):
        raise HugescopeError(f"seeds: {seeds!r} is not a number of seeds")
    if isinstance(seeds, int):
        if not 1 <= seeds <= 64:
            raise HugescopeError(f"seeds: {seeds} is not between 1 and 64")
        return list(range(1, seeds + 1))
    out = [int(s) for s in seeds]
    if not out or len(set(out)) != len(out) or any(s < 0 for s in out):
        raise HugescopeError(f"seeds: {seeds!r} must be distinct non-negative seeds, at least one")
    return out


class Reproduction:
    """The table of a reproduction run: ``rows`` (DataFrame, ``COLUMNS``),
    ``meta`` (scale, seeds, papers), ``evidence`` (per paper, the study
    numbers each row was computed from)."""

    def __init__(self, rows, meta: Dict[str, Any], evidence: Dict[str, Any]):
        self.rows, self.meta, self.evidence = rows, meta, evidence

    def counts(self):
        """Rows per paper and verdict (DataFrame, papers as rows)."""
        import pandas as pd

        t = pd.crosstab(self.rows["paper"], self.rows["verdict"]).reindex(columns=list(VERDICTS), fill_value=0)
        return t.reindex([p for p in self.meta["papers"] if p in t.index])

    def to_dict(self) -> Dict[str, Any]:
        from ..experiments import _json_safe

        counts = {p: {v: int(n) for v, n in row.items()} for p, row in self.counts().iterrows()}
        return _json_safe({**self.meta, "counts": counts, "rows": self.rows.to_dict("records"),
                           "evidence": {p: df.to_dict("records") for p, df in self.evidence.items()}})

    def save(self, out: str, name: str = "reproduction") -> Dict[str, str]:
        """Write ``OUT/NAME.csv``, ``NAME.json`` and ``NAME.html`` (one
        self-contained page), each through the one safe writer."""
        from .._io import prepare_dir, write_atomic, write_json
        from . import render

        prepare_dir(out)
        csv = self.rows.copy()
        for c in ("seeds", "values"):
            csv[c] = csv[c].map(lambda v: " ".join(f"{x:g}" if isinstance(x, float) else str(x) for x in v))
        paths = {"csv": write_atomic(os.path.join(out, name + ".csv"), csv.to_csv(index=False), kind="csv")}
        data = self.to_dict()
        paths["json"] = write_json(os.path.join(out, name + ".json"), data)
        paths["html"] = write_atomic(os.path.join(out, name + ".html"), render.page(data), kind="html")
        return paths


def check_outputs(out: str, name: str = "reproduction") -> None:
    """Before any work: create ``out`` if needed and refuse any file
    :meth:`Reproduction.save` would write that must not be replaced."""
    from .._io import check_output, prepare_dir

    prepare_dir(out)
    for ext in ("csv", "json", "html"):
        check_output(os.path.join(out, f"{name}.{ext}"), ext)


def run(papers: Union[str, Sequence[str]] = "all", scale: str = "ci", seeds: Union[int, Sequence[int]] = DEFAULT_SEEDS,
        traces: Optional[str] = None, progress: Optional[Callable[[str, int, int], None]] = None,
        reuse: Optional[Dict[str, Any]] = None, kernels: Optional[Sequence[str]] = None,
        backend: str = "local", ray_address: Optional[str] = None) -> Reproduction:
    """Reproduce ``papers`` (``"all"``, a name or a list) at ``scale`` over
    ``seeds`` (a count, seeds 1..N, or a list). ``traces``: keep the
    generated traces there (default: a temporary directory, removed after).
    ``reuse``: per paper, results a caller already has (the demo's seed-1
    runs: ``{"pcc": {kernel: {seed: {"trace", "curve", "frag", "static",
    "params"}}}, "ds": {seed: DsTables}}``, ``static`` the ``summary()`` of a
    4k static run); ``kernels``: the PCC kernels to run (default
    BFS, SSSP and PageRank). ``backend``/``ray_address``: where the PCC
    paper's sweeps (curve, fragmentation, sizes) run, as for
    ``experiments.curve`` (``"ray"``: Ray tasks, on the cluster at
    ``ray_address``); the other papers' studies run locally. Results do not
    depend on it. ``progress(step, done, total)`` is called as
    each study finishes (``total`` is a running count: studies are found as
    they run)."""
    import pandas as pd

    from . import ds, pcc

    names = papers_arg(papers)
    if scale not in SCALES:
        raise HugescopeError(f"scale {scale!r}: not one of {', '.join(SCALES)}")
    seed_list = seeds_arg(seeds)
    done = [0]

    def step(what: str) -> None:
        done[0] += 1
        if progress:
            progress(what, done[0], done[0])

    reuse = reuse or {}
    # Ingens Table 3's runs per seed, shared by the ingens paper and the
    # virt section (the same rows in both tables: run once when both run).
    table3: Dict[int, Any] = {}
    rows: List[Dict[str, Any]] = []
    evidence: Dict[str, Any] = {}
    with (_keep(traces) if traces else tempfile.TemporaryDirectory(prefix="hugescope-reproduce-")) as tdir:
        for p in names:
            measured: List[Dict[str, Any]] = []
            if p == "pcc":
                measured += pcc.machine_rows()
                measured += pcc.policy_rows(pcc.pcc_settings(tdir))
                m, ev = pcc.measure(scale, seed_list, tdir, step, reuse.get("pcc"), kernels,
                                    {"backend": backend, "ray_address": ray_address})
                measured += m
                evidence[p] = ev
            elif p == "ds":
                measured += ds.machine_rows()
                m, ev = ds.measure(scale, seed_list, step, reuse.get("ds"))
                measured += m
                evidence[p] = ev
            elif p in ("ingens", "navarro"):
                # Their studies run at both scales (issue #34): paper scale is
                # the largest this machine runs in well under an hour.
                from . import ingens, navarro

                m, ev = (ingens.measure(scale, seed_list, step, reuse.get(p), keep=table3) if p == "ingens" else
                         navarro.measure(scale, seed_list, step, reuse.get(p)))
                measured += m
                evidence[p] = ev
            elif p == "fhpm":
                from . import fhpm

                m, ev = fhpm.measure(scale, seed_list, step, reuse.get(p))
                measured += m
                evidence[p] = ev
            elif p == "virt":
                # A section, not a paper: Ingens Table 3 (its rows, included
                # from ingens.toml) and direct segments in a VM (issue #35).
                from . import virt

                m, ev = virt.measure(scale, seed_list, step, table3=table3)
                measured += m
                evidence[p] = ev
            rows += evaluate(p, scale, measured)
    df = pd.DataFrame(rows)
    df = df[[c for c in COLUMNS if c in df.columns]]
    meta = {"hugescope_experiment": "reproduction", "hugescope_version": _core.version(), "kind": "estimate",
            "scale": scale, "seeds": seed_list, "papers": names,
            "kernels": list(kernels) if kernels is not None else None}
    return Reproduction(df, meta, evidence)


class _keep:
    """A caller's traces directory as a context (kept afterwards)."""

    def __init__(self, path: str):
        self.path = path

    def __enter__(self) -> str:
        from .._io import prepare_dir

        prepare_dir(self.path)
        return self.path

    def __exit__(self, *exc) -> None:
        return None
