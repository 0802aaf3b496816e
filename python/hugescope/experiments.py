"""Experiments of the PCC paper's evaluation (MICRO'23 §3.1 and §5), as tidy
tables. See ``docs/experiments.md`` for what each computes and every choice.

Each experiment decodes the trace as few times as possible: its
configurations (policy x budget x fragmentation) go to the core in batches of
``BATCH``; the core deals a batch over ``threads`` cores, each core decoding
the trace once and simulating its share side by side with ``base``. With a
``checkpoint`` file, each finished batch is saved there as it completes, so
an interrupted sweep keeps its finished points and ``resume=True`` continues
from them (the final tables are byte-identical to an uninterrupted run).
With Parquet among the result formats the batches stream to Parquet parts
instead (``sweep_parts``). ``backend="ray"`` runs the batches as Ray tasks
(``ray_backend``), with the same results in the same order.

Every experiment returns a pandas DataFrame with one row per configuration
(policy x point) and, with ``out=DIR``, writes ``DIR/<experiment>-<trace>.csv``
and ``.json`` atomically. Simulated numbers (walks, PTW rate, speedup) are
estimates of the model (``kind == "estimate"``); the reuse-distance tables are
exact statistics of the trace (``kind == "measurement"``).

    import hugescope.experiments as ex
    df = ex.curve("bfs.hst", policies=["pcc", "hawkeye", "oracle"], duration=120, out="results")
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

from . import _core, _io, sweep_parts
from ._core import HugescopeError
from ._io import check_output, note_written, write_atomic, write_json
from .configuration import OS_COSTS_KEYWORD, OS_KEYWORDS, check_keywords, os_overrides, source_args
from .results import SimResult
from .units import U64_MAX, check_float, check_int

#: The paper's N% limits (§4, utility curves): 9 points, "~100" = no effective cap.
DEFAULT_BUDGETS = [0, 1, 2, 4, 8, 16, 32, 64, 100]
DEFAULT_CURVE_POLICIES = ["pcc", "hawkeye", "oracle"]
#: Fig. 7: 4KB pages, Linux greedy THP, HawkEye, PCC, PCC with demotion.
DEFAULT_FRAG_POLICIES = ["base", "linux", "hawkeye", "pcc", "pcc:demotion=true"]
DEFAULT_FRAG_LEVELS = [50, 90]
#: Fig. 6: PCC entries 4 ... 1024 at a 32% limit.
DEFAULT_PCC_SIZES = [4, 8, 16, 32, 64, 128, 256, 512, 1024]
#: Figs. 8-9: the two multi-PCC promotion policies (1 = highest frequency, 0 = round robin).
DEFAULT_MULTI_POLICIES = ["pcc:promotion_policy=1", "pcc:promotion_policy=0"]
DEFAULT_MULTI_BUDGETS = [1, 2, 4, 8, 16, 32]

#: The OS keywords an experiment sets per configuration (its points), not
#: for the whole sweep; ``frag_mobility`` has no per-point form and is set by
#: a file's ``[os]`` or ``set=["os.frag_mobility=..."]``.
PER_POINT_KEYWORDS = ("budget", "frag", "frag_method", "frag_mobility")

#: Options shared by every experiment and passed to the core unchanged: the
#: machine source, the OS keywords (``configuration.OS_KEYWORDS``) less the
#: per-point ones, and the threads.
COMMON_OPTIONS = (("preset", "config", "set") + tuple(k for k in OS_KEYWORDS if k not in PER_POINT_KEYWORDS)
                  + (OS_COSTS_KEYWORD, "threads"))

#: Configurations per core call. Each batch costs one decoding pass per
#: thread, and is the unit a checkpoint keeps: 12 keeps the default curve
#: (31 configurations) at 3 passes instead of 1-2 while an interruption loses
#: at most one batch. Results do not depend on the grouping (each
#: configuration has its own kernel; base is deterministic; tested).
BATCH = 12

#: Most simulation threads accepted (each decodes the trace on its own).
MAX_THREADS = 256

#: Most pages kept for the reuse scatter plot (each is a row in memory and in
#: the points CSV).
MAX_REUSE_POINTS = 10_000_000

#: Format version of checkpoint files.
CHECKPOINT_VERSION = 1

KIND_LABEL = {"estimate": "estimate (cost model)", "measurement": "measurement"}


# ---------------------------------------------------------------- plumbing

def _check_common(common: Dict[str, Any]) -> Dict[str, Any]:
    unknown = sorted(set(common) - set(COMMON_OPTIONS))
    if unknown:
        raise HugescopeError(f"unknown option(s) {', '.join(unknown)}; known: {', '.join(COMMON_OPTIONS)}")
    out = {k: v for k, v in common.items() if v is not None}
    # The machine source: a preset, a file or a Config object (whose JSON
    # the core reads), with "calibrated" resolved to its saved file.
    if "preset" in out or "config" in out:
        src = source_args(out.pop("preset", None), out.pop("config", None))
        out.update({k: v for k, v in src.items() if v is not None})
    if "set" in out:
        out["overrides"] = out.pop("set")
    if "os_costs" in out:
        out["os_costs"] = [str(s) for s in _sequence(out["os_costs"], "os_costs")]
    if "overrides" in out:
        out["overrides"] = [str(s) for s in _sequence(out["overrides"], "set")]
    for k in ("memory", "footprint"):
        if k in out:
            out[k] = str(out[k])
    out = check_keywords(out)
    if "threads" in out:
        out["threads"] = check_int(out["threads"], "threads", 1, MAX_THREADS)
    return out


def _core_args(opts: Dict[str, Any]) -> Dict[str, Any]:
    """The checked common options as the core's configuration arguments:
    the machine source and one list of overrides, the OS options becoming
    ``os.KEY=VALUE`` (the same keys as a file's ``[os]``)."""
    out = {k: opts[k] for k in ("preset", "config", "config_text") if k in opts}
    out["overrides"] = list(opts.get("overrides", [])) + os_overrides(opts)
    return out



def _trace_path(trace) -> str:
    if not isinstance(trace, (str, os.PathLike)):
        raise HugescopeError(f"trace: expected a path, not {trace!r}")
    p = os.fspath(trace)
    if not os.path.exists(p):
        raise HugescopeError(f"{p}: no such trace file")
    return p


def trace_identity(path: str) -> Dict[str, Any]:
    """What identifies a trace file without reading all of it: its size and a
    SHA-256 of its header and footer counts and its last 64 KiB (which hold
    the footer and the last chunks; a whole-file hash would cost as much as a
    decoding pass). Checkpoints and the Ray backend's check that a node sees
    the same trace share it."""
    info = _core.trace_info(path, False)
    size = os.path.getsize(path)
    h = hashlib.sha256(info.encode())
    with open(path, "rb") as f:
        f.seek(max(0, size - 65536))
        h.update(f.read())
    return {"size": size, "sha256": h.hexdigest()}


def _fingerprint(path: str, configs: List[Dict[str, Any]], opts: Dict[str, Any]) -> Dict[str, Any]:
    """What a checkpoint's results depend on: the trace (``trace_identity``),
    the resolved machine configuration, the OS options, the configurations
    and the version. Threads and the backend are left out: they change how
    work is dealt, not results."""
    # The resolved configuration, so an [os] key set in a file counts as
    # much as one set by a flag.
    resolved = json.loads(_core.resolve_config(**_core_args(opts)))
    return {"version": _core.version(), "trace": trace_identity(path),
            "machine": resolved["machine"], "os": resolved["os"], "configs": configs}


def _refuse_other_run(where: str, saved: Any, fingerprint: Dict[str, Any]) -> None:
    """Raise unless ``saved`` (a checkpoint's or parts' fingerprint) is ``fingerprint``."""
    if saved != fingerprint:
        differ = [k for k in fingerprint if (saved if isinstance(saved, dict) else {}).get(k) != fingerprint[k]]
        raise HugescopeError(f"{where}: checkpoint of a different run ({', '.join(differ) or 'fingerprint'} "
                             "differ); refusing to mix its results in (delete it, or resume with the same inputs)")


def _load_checkpoint(checkpoint: str, fingerprint: Dict[str, Any]) -> Dict[int, Dict[str, Any]]:
    try:
        data = _io.read_json(checkpoint, "checkpoint")
    except (OSError, ValueError) as e:
        raise HugescopeError(f"{checkpoint}: cannot read the checkpoint ({e}); delete it to start over") from None
    if not isinstance(data, dict) or data.get("hugescope_checkpoint") != CHECKPOINT_VERSION:
        raise HugescopeError(f"{checkpoint}: not a hugescope checkpoint (version {CHECKPOINT_VERSION})")
    _refuse_other_run(checkpoint, data.get("fingerprint"), fingerprint)
    done = data.get("results")
    if not isinstance(done, dict):
        raise HugescopeError(f"{checkpoint}: checkpoint has no results table")
    try:
        kept = {int(k): v for k, v in done.items() if 0 <= int(k) < len(fingerprint["configs"])}
    except ValueError:
        kept = None
    if kept is None or not all(isinstance(v, dict) and "translation" in v for v in kept.values()):
        raise HugescopeError(f"{checkpoint}: checkpoint has a bad results table; delete it to start over")
    return kept


def checkpoint_path(out: str, name: str) -> str:
    """Where a sweep named ``name`` keeps its finished points in ``out``."""
    return os.path.join(out, f"{name}.checkpoint.json")


def remove_checkpoint(checkpoint: Optional[str]) -> None:
    """Delete a finished sweep's checkpoint and its Parquet parts (its
    results are saved)."""
    if checkpoint:
        try:
            os.unlink(checkpoint)
        except FileNotFoundError:
            pass
        sweep_parts.remove(sweep_parts.parts_path(checkpoint))


#: The rows a sweep streamed to Parquet parts so far (``sweep_parts``).
read_parts = sweep_parts.read_parts

#: Where a sweep's batches run: one after another here, or as Ray tasks.
BACKENDS = ("local", "ray")


def _check_backend(backend: str, ray_address: Optional[str], ray_trace_path: Optional[str]) -> str:
    if backend not in BACKENDS:
        raise HugescopeError(f"backend: '{backend}' is not one of {', '.join(BACKENDS)}")
    if backend == "ray":
        from . import ray_backend

        ray_backend.require()
        if ray_trace_path is not None and not isinstance(ray_trace_path, (str, os.PathLike)):
            raise HugescopeError(f"ray_trace_path: expected a path, not {ray_trace_path!r}")
    elif ray_address is not None or ray_trace_path is not None:
        raise HugescopeError("ray_address (--ray-address) and ray_trace_path apply to the ray backend only "
                             "(--backend ray)")
    return backend


def _run_batches(path: str, configs: List[Dict[str, Any]], todo: List[int], opts: Dict[str, Any], backend: str,
                 ray_address: Optional[str], ray_trace_path: Optional[str], share: bool = True):
    """(indices, results) per finished batch of ``todo``, in the order
    batches finish: core calls one after another (local), or Ray tasks.
    ``share``: the core's shared pass within each batch (results identical)."""
    core_args = dict(_core_args(opts), share=share)
    if backend == "ray":
        from . import ray_backend

        yield from ray_backend.run_batches(path, configs, todo, opts["threads"], core_args, BATCH,
                                           address=ray_address,
                                           node_path=None if ray_trace_path is None else os.fspath(ray_trace_path))
        return
    for b in range(0, len(todo), BATCH):
        idx = todo[b:b + BATCH]
        yield idx, _core.run_specs(path, json.dumps([configs[i] for i in idx]), threads=opts["threads"], **core_args)


def run_configs(trace, configs: Sequence[Dict[str, Any]], progress: Optional[Callable] = None,
                checkpoint: Optional[str] = None, resume: bool = False, row: Optional[Callable] = None,
                backend: str = "local", ray_address: Optional[str] = None, ray_trace_path: Optional[str] = None,
                share: bool = True,
                **common) -> List[SimResult]:
    """Simulate ``configs`` (dicts with ``policy`` and optional ``label``,
    ``budget`` (share 0..1), ``frag`` (share 0..1), ``frag_method``) over
    ``trace``; one ``SimResult`` per config, in order. ``progress(done, total)``
    is called with the number of configurations done after each core call.

    ``checkpoint``: a JSON file where each finished batch is saved as it
    completes (atomically). ``resume=True`` takes the finished configurations
    from it and simulates only the rest; a checkpoint made from another trace,
    machine, OS options or set of configurations is refused. Without
    ``resume`` an existing checkpoint is an error (it holds finished work).
    With Parquet among the result formats the batches are streamed instead to
    Parquet parts beside it (``sweep_parts``), each with the tidy row
    ``row(index, SimResult)`` of its configurations.

    ``backend``: ``"local"`` (core calls on this machine, ``threads`` cores)
    or ``"ray"`` (Ray tasks: ``ray_backend``; a local Ray instance, or the
    cluster at ``ray_address``; ``ray_trace_path``: the trace's path on the
    nodes when not the same). Results do not depend on the backend.

    ``share`` (default): configurations of one batch that differ only in what
    they decide (pcc sizes, budgets and selection knobs) run as one
    simulation until their decisions differ (the core's ``sweep``); the
    results are byte-identical to ``share=False``, which simulates each on
    its own."""
    path = _trace_path(trace)
    backend = _check_backend(backend, ray_address, ray_trace_path)
    opts = _check_common(common)
    opts.setdefault("threads", min(2, os.cpu_count() or 1))
    configs = list(configs)
    done: Dict[int, Any] = {}
    fingerprint = None
    parts = sweep_parts.streaming(checkpoint)
    inputs = [path] + ([opts["config"]] if opts.get("config") else [])
    if checkpoint:
        check_output(checkpoint, "json", inputs)
        if parts:
            sweep_parts.check(parts, inputs)
        fingerprint = _fingerprint(path, configs, opts)
        kept = [p for p in (checkpoint, parts) if p and os.path.lexists(p)]
        if kept and not resume:
            raise HugescopeError(f"{kept[0]}: an interrupted run left its finished points here; "
                                 "resume it (--resume) or delete it to start over")
        if os.path.lexists(checkpoint):
            done = _load_checkpoint(checkpoint, fingerprint)
        if parts and os.path.lexists(parts):
            done.update(sweep_parts.load(parts, fingerprint, len(configs),
                                         lambda where, saved: _refuse_other_run(where, saved, fingerprint)))
    done = {i: SimResult(d) for i, d in done.items()}  # the saved points, read back into the core's records
    writer = sweep_parts.PartWriter(parts, fingerprint, inputs) if parts else None
    todo = [i for i in range(len(configs)) if i not in done]
    if progress and done:
        progress(len(done), len(configs))
    with contextlib.closing(_run_batches(path, configs, todo, opts, backend, ray_address, ray_trace_path,
                                         bool(share))) as runs:
        for idx, results in runs:
            for i, d in zip(idx, results):
                done[i] = SimResult(d)
            if writer:
                writer.append([(i, done[i].to_dict(), row(i, done[i]) if row else None) for i in idx])
            elif checkpoint and len(done) < len(configs):
                write_json(checkpoint, {"hugescope_checkpoint": CHECKPOINT_VERSION, "fingerprint": fingerprint,
                                        "results": {str(i): done[i].to_dict() for i in sorted(done)}})
            if progress:
                progress(len(done), len(configs))
    return [done[i] for i in range(len(configs))]


def _sequence(values, what: str) -> list:
    """``values`` as a list; one string or a non-iterable is refused (a string
    would be split into characters)."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise HugescopeError(f"{what}: expected a list, not {values!r}")
    return list(values)


def _pct_list(values: Iterable, what: str) -> List[float]:
    out = [check_float(v, what, 0.0, 100.0) for v in _sequence(values, what)]
    if not out:
        raise HugescopeError(f"{what}: empty list")
    return out


def _policy_list(policies: Iterable[str]) -> List[str]:
    out = [str(p).strip() for p in _sequence(policies, "policies") if str(p).strip()]
    if not out:
        raise HugescopeError("no policy given")
    return out


def _row(r: SimResult, **extra) -> Dict[str, Any]:
    """The columns every simulated row has (all traceable to the core's
    result fields)."""
    d = r.record
    t = d.translation
    procs = getattr(d, "processes", [])
    fp = sum(p.footprint_bytes for p in procs) or getattr(d, "footprint_bytes", None) or 0
    huge = sum(p.huge_bytes for p in procs)
    params = d.label.partition(":")[2]
    row = {
        "policy": d.label,
        "policy_name": d.policy,
        "params": params,
        "accesses": t.accesses,
        "walks": t.walks,
        "ptw_rate": t.walks / t.accesses if t.accesses else 0.0,
        "walks_per_1k": t.walks_per_1k_accesses,
        "speedup_est": getattr(d, "speedup_vs_base", None),
        "xlat_speedup_est": getattr(d, "translation_speedup_vs_base", None),
        "walk_reduction": getattr(d, "walk_reduction_vs_base", None),
        "huge_bytes": huge,
        "huge_share": huge / fp if fp else 0.0,
        "huge_bytes_peak": getattr(d, "huge_bytes_peak", 0),
        "budget_bytes": getattr(d, "budget_bytes", None),
        "footprint_bytes": getattr(d, "footprint_bytes", None),
        "promotions": d.os_stats.promotions,
        "promotion_failures": sum(d.os_stats.promotion_failures._values()),
        "total_cycles_est": d.cost.total_cycles,
        "virtual_seconds": getattr(d, "virtual_seconds", None),
        "kind": "estimate",
    }
    row.update(extra)
    return row


def _frame(rows: List[Dict[str, Any]], meta: Dict[str, Any]):
    import pandas as pd

    df = pd.DataFrame(rows)
    df.attrs["meta"] = meta
    return df


def _meta(experiment: str, trace: str, results: List[SimResult], options: Dict[str, Any]) -> Dict[str, Any]:
    info = json.loads(_core.trace_info(trace, False))
    first = results[0].record if results else None
    h = info["header"]
    return {
        "hugescope_experiment": experiment,
        "hugescope_version": _core.version(),
        "kind": "estimate",
        "trace": {"path": trace, "workload": h["workload"], "params": h.get("params", {}),
                  "regions": h.get("regions", []), "cpus": h.get("cpus"), "processes": h.get("processes", 1),
                  "accesses": info["summary"]["accesses"]},
        "machine": _plain(getattr(first, "machine", None)),
        "os": _plain(getattr(first, "os", None)),
        "time_base": _plain(getattr(first, "time_base", None)),
        "memory_bytes": getattr(first, "memory_bytes", None),
        "options": options,
    }


def _plain(v):
    """A result field as plain data for a table's metadata (a record's
    sub-tree as a dict)."""
    return v.to_dict() if isinstance(v, _core.Record) else v


def _stem(trace: str) -> str:
    base = os.path.basename(trace)
    return base[:-4] if base.endswith(".hst") else base


def _json_safe(v):
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    if isinstance(v, dict):
        return {k: _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    if hasattr(v, "item"):  # numpy scalars
        return _json_safe(v.item())
    return v


def output_paths(out: str, name: str, extra: Iterable[str] = ()) -> Dict[str, tuple]:
    """The files ``save`` writes for ``name`` in ``out``: key -> (path, kind)."""
    paths = {"csv": (os.path.join(out, name + ".csv"), "csv")}
    for key in extra:
        paths[f"csv_{key}"] = (os.path.join(out, f"{name}-{key}.csv"), "csv")
    paths["json"] = (os.path.join(out, name + ".json"), "json")
    return paths


def check_outputs(out: str, name: str, extra: Iterable[str] = (), inputs: Iterable[str] = ()) -> None:
    """Before any work: create the results directory ``out`` if needed and
    refuse outputs that must not be replaced (see ``hugescope._io``)."""
    from ._io import prepare_dir

    prepare_dir(out)
    for path, kind in output_paths(out, name, extra).values():
        check_output(path, kind, inputs)


def save(df, out: str, name: Optional[str] = None, extra_tables: Optional[Dict[str, Any]] = None) -> Dict[str, str]:
    """Write ``df`` as ``OUT/NAME.csv`` and ``OUT/NAME.json`` (metadata from
    ``df.attrs["meta"]`` plus the rows, and any ``extra_tables`` as more row
    lists, each also as ``OUT/NAME-KEY.csv``). Atomic: each file appears whole or
    not at all. Returns the paths written."""
    meta = dict(df.attrs.get("meta", {}))
    name = name or f"{meta.get('hugescope_experiment', 'experiment')}-{_stem(meta.get('trace', {}).get('path', 'trace'))}"
    from ._io import prepare_dir

    prepare_dir(out)
    inputs = [meta["trace"]["path"]] if meta.get("trace", {}).get("path") else []
    where = output_paths(out, name, (extra_tables or {}).keys())
    paths = {}
    paths["csv"] = write_atomic(where["csv"][0], df.to_csv(index=False), kind="csv", inputs=inputs)
    data = dict(meta)
    data["rows"] = _json_safe(df.to_dict(orient="records"))
    for key, table in (extra_tables or {}).items():
        data[key] = _json_safe(table.to_dict(orient="records"))
        paths[f"csv_{key}"] = write_atomic(where[f"csv_{key}"][0], table.to_csv(index=False), kind="csv",
                                           inputs=inputs)
    paths["json"] = write_json(where["json"][0], _json_safe(data), inputs=inputs)
    return paths


def _sweep_checkpoint(experiment: str, path: str, out: Optional[str], checkpoint: Optional[str]) -> Optional[str]:
    """The checkpoint of a sweep: the one given, else NAME.checkpoint.json in
    ``out`` (when the sweep saves its results), else none."""
    if checkpoint:
        return os.fspath(checkpoint)
    return checkpoint_path(out, f"{experiment}-{_stem(path)}") if out else None


def _done(df, out: Optional[str], ckpt: Optional[str], extra_tables=None) -> None:
    # Results first, then the checkpoint goes: an interruption in between
    # leaves a checkpoint that resumes to the same files.
    if out:
        save(df, out, extra_tables=extra_tables)
        remove_checkpoint(ckpt)


def curve_configs(policies: List[str], budgets: List[float], frag_points: List[float], frag_policy: str = "linux"):
    """The configurations of a utility curve (``curve``) and each one's tags:
    each policy at each budget, ``base`` and ``ideal``, ``frag_policy`` at
    each fragmentation point."""
    configs, tags = [], []
    for p in policies:
        for b in budgets:
            configs.append({"policy": p, "budget": b / 100.0})
            tags.append({"role": "curve", "budget_pct": b, "frag_pct": 0.0})
    for ref in ("base", "ideal"):
        configs.append({"policy": ref})
        tags.append({"role": "reference", "budget_pct": None, "frag_pct": 0.0})
    for f in frag_points:
        configs.append({"policy": frag_policy, "frag": f / 100.0})
        tags.append({"role": "point", "budget_pct": None, "frag_pct": f})
    return configs, tags


# ---------------------------------------------------------------- Fig. 5

def curve(trace, policies: Sequence[str] = DEFAULT_CURVE_POLICIES, budgets: Sequence[float] = DEFAULT_BUDGETS,
          frag_points: Sequence[float] = (50, 90), frag_policy: str = "linux", out: Optional[str] = None,
          progress: Optional[Callable] = None,
          checkpoint: Optional[str] = None, resume: bool = False, **common):
    """Utility curves (PCC paper Fig. 5): estimated speedup and PTW rate
    (walks / accesses) of each policy with huge pages capped at N% of the
    footprint, N in ``budgets``; ``base`` and ``ideal`` (no cap) as reference
    lines (``role == "reference"``); ``frag_policy`` (Linux THP) with no cap on
    memory fragmented at each of ``frag_points`` percent (``role == "point"``).

    One row per configuration: columns ``policy``, ``role``, ``budget_pct``,
    ``frag_pct``, ``huge_share``, ``ptw_rate``, ``speedup_est``, ..."""
    path = _trace_path(trace)
    policies = _policy_list(policies)
    budgets = _pct_list(budgets, "budgets")
    frag_points = _pct_list(frag_points, "fragmentation levels") if frag_points else []
    configs, tags = curve_configs(policies, budgets, frag_points, frag_policy)
    ckpt = _sweep_checkpoint("curve", path, out, checkpoint)
    if out:
        check_outputs(out, f"curve-{_stem(path)}", (), [path])
    row = lambda i, r: _row(r, experiment="curve", **tags[i])  # noqa: E731 - streamed and final rows alike
    results = run_configs(path, configs, progress=progress, checkpoint=ckpt, resume=resume, row=row, **common)
    rows = [row(i, r) for i, r in enumerate(results)]
    df = _frame(rows, _meta("curve", path, results, {"policies": policies, "budgets_pct": budgets,
                                                        "frag_points_pct": list(frag_points), "frag_policy": frag_policy}))
    if out:
        _done(df, out, ckpt)
    return df


# ---------------------------------------------------------------- Fig. 7

def frag(trace, levels: Sequence[float] = DEFAULT_FRAG_LEVELS, policies: Sequence[str] = DEFAULT_FRAG_POLICIES,
         frag_method: str = "pcc", out: Optional[str] = None, progress: Optional[Callable] = None,
         checkpoint: Optional[str] = None, resume: bool = False, **common):
    """Fragmentation (PCC paper §5.1.1, Fig. 7): each policy, with no
    huge-page cap ("each scheme promotes as much as it can"), on memory where
    ``level``% of the 2MB blocks hold one unmovable page (``frag_method="pcc"``;
    ``"ingens"`` targets an FMFI instead). Speedup is over unfragmented base
    pages on the same accesses."""
    path = _trace_path(trace)
    policies = _policy_list(policies)
    levels = _pct_list(levels, "fragmentation levels")
    if frag_method not in ("pcc", "ingens"):
        raise HugescopeError(f"unknown fragmentation method '{frag_method}' (pcc, ingens)")
    configs, tags = [], []
    for lvl in levels:
        for p in policies:
            configs.append({"policy": p, "frag": lvl / 100.0, "frag_method": frag_method})
            tags.append({"role": "bar", "frag_pct": lvl, "frag_method": frag_method})
    ckpt = _sweep_checkpoint("frag", path, out, checkpoint)
    if out:
        check_outputs(out, f"frag-{_stem(path)}", (), [path])
    def row(i, r):
        fr = getattr(r.record, "fragmentation", None)
        return _row(r, experiment="frag", blocked_share=getattr(fr, "blocked_share", None),
                    fmfi=getattr(fr, "fmfi", None), **tags[i])

    results = run_configs(path, configs, progress=progress, checkpoint=ckpt, resume=resume, row=row, **common)
    rows = [row(i, r) for i, r in enumerate(results)]
    df = _frame(rows, _meta("frag", path, results, {"policies": policies, "levels_pct": levels, "frag_method": frag_method}))
    if out:
        _done(df, out, ckpt)
    return df


# ---------------------------------------------------------------- Fig. 6

def sensitivity_configs(sizes: List[int], budget_pct: float, policy: str = "pcc", param: str = "entries"):
    """The configurations of a size sensitivity (``sensitivity``) and each
    one's tags: ``policy:param=N`` for each N at ``budget_pct``, then
    ``base`` and ``ideal``. The pcc sizes form one share class: the core
    simulates them as one until their reads decide differently."""
    sep = "," if ":" in policy else ":"
    configs = [{"policy": f"{policy}{sep}{param}={n}", "budget": budget_pct / 100.0} for n in sizes]
    tags = [{"role": "curve", "size": n, "budget_pct": budget_pct} for n in sizes]
    for ref in ("base", "ideal"):
        configs.append({"policy": ref})
        tags.append({"role": "reference", "size": None, "budget_pct": None})
    return configs, tags


def sensitivity(trace, pcc_sizes: Sequence[int] = DEFAULT_PCC_SIZES, budget: float = 32, policy: str = "pcc",
                param: str = "entries", out: Optional[str] = None, progress: Optional[Callable] = None,
                checkpoint: Optional[str] = None, resume: bool = False, **common):
    """PCC size sensitivity (PCC paper §5.1, Fig. 6): ``policy:param=N`` (the
    pcc policy calls its number of PCC entries ``entries``) for
    each N in ``pcc_sizes`` with huge pages capped at ``budget``% of the
    footprint (32% in the paper), plus ``base``/``ideal`` references."""
    path = _trace_path(trace)
    sizes = []
    for s in _sequence(pcc_sizes, "PCC sizes"):
        sizes.append(check_int(s, "PCC sizes", 1, U64_MAX))
    if not sizes:
        raise HugescopeError("PCC sizes: empty list")
    (b,) = _pct_list([budget], "budget")
    configs, tags = sensitivity_configs(sizes, b, policy, param)
    ckpt = _sweep_checkpoint("sensitivity", path, out, checkpoint)
    if out:
        check_outputs(out, f"sensitivity-{_stem(path)}", (), [path])
    row = lambda i, r: _row(r, experiment="sensitivity", **tags[i])  # noqa: E731
    results = run_configs(path, configs, progress=progress, checkpoint=ckpt, resume=resume, row=row, **common)
    rows = [row(i, r) for i, r in enumerate(results)]
    df = _frame(rows, _meta("sensitivity", path, results, {"policy": policy, "param": param, "sizes": sizes,
                                                              "budget_pct": b}))
    if out:
        _done(df, out, ckpt)
    return df


def tlb_sizes(trace, entries: Optional[Sequence[int]] = None, pages: str = "4k", structure: Optional[str] = None,
              preset: Optional[str] = None, config=None, set: Optional[Iterable[str]] = None,
              out: Optional[str] = None, progress: Optional[Callable] = None):
    """L2 TLB size sensitivity over a static page map, every size from one
    simulation (LRU stack distances: ``docs/experiments.md``). ``entries``:
    sizes of the L2 structure ``structure`` (default: the machine's only
    one), multiples of its sets (default: 1, 2, 4, 6, 8, 12 and 16 ways).
    ``pages``: ``4k``, ``2m``, ``1g`` or a plan file, as ``simulate``. Each
    row is exactly what ``simulate`` gives at that size (cycles and speedups
    are estimates of the cost model); ``speedup_vs_configured`` compares with
    the machine's own size, simulated alongside when not listed."""
    path = _trace_path(trace)
    src = source_args(preset, None if config is None else os.fspath(config))
    overrides = [str(x) for x in ([set] if isinstance(set, str) else (set or []))]
    sizes = [] if entries is None else [check_int(e, "TLB entries", 1, U64_MAX) for e in _sequence(entries, "TLB entries")]
    if out:
        check_outputs(out, f"tlb-sizes-{_stem(path)}", (), [path])
    rep = _core.simulate_tlb_sizes(path, sizes, overrides=overrides, pages=str(pages), structure=structure,
                                   progress=progress, **src)
    configured = next(p for p in rep.points if p.entries == rep.configured_entries)
    ref = configured.result.cost.total_cycles
    rows = []
    for p in rep.points:
        r = p.result
        t, c = r.translation, r.cost
        rows.append({"experiment": "tlb-sizes", "structure": rep.structure, "sets": rep.sets,
                     "entries": p.entries, "ways": p.ways, "configured": p.entries == rep.configured_entries,
                     "pages": r.pages, "accesses": t.accesses, "l1_hits": t.l1_hits, "l2_hits": t.l2_hits,
                     "walks": t.walks, "walks_per_1k_accesses": t.walks_per_1k_accesses,
                     "walk_refs": t.walk_refs, "pwc_hits": t.pwc_hits,
                     "translation_cycles": c.translation_cycles, "translation_share": c.translation_share,
                     "speedup_vs_configured": ref / c.total_cycles if c.total_cycles else None,
                     "kind": "estimate"})
    df = _frame(rows, _meta("tlb-sizes", path, [SimResult(configured.result)],
                            {"structure": rep.structure, "sets": rep.sets, "entries": sizes, "pages": str(pages),
                             "configured_entries": rep.configured_entries,
                             "how": "one simulation; every size from the widest set's LRU stack distances (exact)"}))
    if out:
        _done(df, out, None)
    return df


# ---------------------------------------------------------------- Fig. 2

class ReuseResult:
    """Reuse-distance analysis: ``regions`` (one row per region x class),
    ``points`` (sampled 4KB pages for the scatter), ``report`` (the core's
    ``ReuseReport`` record)."""

    def __init__(self, regions, points, report: Dict[str, Any], meta: Dict[str, Any]):
        self.regions = regions
        self.points = points
        self.report = report
        self.meta = meta

    def summary(self):
        """One row per region: page shares of the three classes."""
        t = self.regions.pivot_table(index=["region", "pid"], columns="class", values="page_share", sort=False)
        return t.reset_index()


def reuse(trace, threshold: float = 1024, average: str = "ema", alpha: float = 0.9, max_points: int = 20000,
          seed: int = 1, out: Optional[str] = None):
    """Page reuse distance at 4KB and 2MB per 4KB page and the three classes
    of the PCC paper's Fig. 2 (TLB-friendly, HUB, low-reuse), per named region;
    see ``hugescope_core::reuse`` for the definitions. Exact statistics of the
    trace (``kind == "measurement"``), not estimates."""
    import pandas as pd

    path = _trace_path(trace)
    threshold = check_float(threshold, "threshold", positive=True)
    alpha = check_float(alpha, "alpha", 0.0, 1.0)
    max_points = check_int(max_points, "max_points", 0, MAX_REUSE_POINTS)
    seed = check_int(seed, "seed")
    if average not in ("ema", "mean"):
        raise HugescopeError(f"average: '{average}' is not one of ema, mean")
    if out:
        check_outputs(out, f"reuse-{_stem(path)}", ("points",), [path])
    rep = _core.reuse_distance(path, threshold=threshold, average=str(average), alpha=alpha, max_points=max_points,
                               seed=seed)
    rows = []
    names = [g.name for g in rep.regions]
    for g in rep.regions + [rep.total]:
        if g.pages == 0 and g.name != "(all)":
            continue
        for c in g.classes:
            rows.append({"experiment": "reuse", "region": g.name, "pid": g.pid, "region_bytes": g.len,
                         "pages": g.pages, "accesses": g.accesses, "single_access_pages": g.single_access_pages,
                         "mean_rd_4k": g.mean_rd_small, "mean_rd_2m": g.mean_rd_huge, "class": getattr(c, "class"),
                         "class_pages": c.pages, "class_accesses": c.accesses, "page_share": c.page_share,
                         "access_share": c.access_share, "kind": "measurement"})
    regions = pd.DataFrame(rows)
    points = pd.DataFrame([{"pid": p.pid, "addr": p.addr, "region": names[p.region], "rd_4k": p.rd_small,
                            "rd_2m": p.rd_huge, "class": getattr(p, "class"), "accesses": p.accesses}
                           for p in rep.points],
                          columns=["pid", "addr", "region", "rd_4k", "rd_2m", "class", "accesses"])
    info = json.loads(_core.trace_info(path, False))
    h = info["header"]
    meta = {"hugescope_experiment": "reuse", "hugescope_version": _core.version(), "kind": "measurement",
            "trace": {"path": path, "workload": h["workload"], "params": h.get("params", {}),
                      "regions": h.get("regions", []), "cpus": h.get("cpus"), "processes": h.get("processes", 1),
                      "accesses": info["summary"]["accesses"]},
            "options": rep.options.to_dict(), "points_total": rep.points_total, "points_kept": len(rep.points)}
    regions.attrs["meta"] = meta
    res = ReuseResult(regions, points, rep, meta)
    if out:
        save(regions, out, extra_tables={"points": points})
    return res


# ---------------------------------------------------------------- Figs. 8-9

def merge(inputs: Sequence[str], out: str, slice: int = 65536, separate_cpus: bool = True) -> Dict[str, Any]:
    """Interleave traces (round robin, ``slice`` accesses at a time) into one
    multi-process trace; input i gets the next pid(s) and, with
    ``separate_cpus``, its own cpus. Returns {path, header, summary}."""
    paths = [_trace_path(p) for p in _sequence(inputs, "inputs")]
    if len(paths) < 2:
        raise HugescopeError("merging needs at least two traces")
    slice = check_int(slice, "slice", 1, U64_MAX)
    # Checked here too so a followed symbolic link resolves before the core,
    # which never follows one.
    target = check_output(out, "hst", paths)
    s = json.loads(_core.merge_traces(paths, target, slice, bool(separate_cpus)))
    note_written(target)
    return s


def _process_cpus(header: Dict[str, Any]) -> Optional[Dict[int, range]]:
    """pid -> cpu ids, when a merged trace put each single-process input on
    its own cpus (then per-cpu walk counts separate the processes)."""
    params = header.get("params", {})
    if not params.get("separate_cpus") or "inputs" not in params:
        return None
    out = {}
    for inp in params["inputs"]:
        if inp["processes"] != 1:
            return None
        out[inp["pid_offset"]] = range(inp["cpu_offset"], inp["cpu_offset"] + inp["cpus"])
    return out


def multi(trace, policies: Sequence[str] = DEFAULT_MULTI_POLICIES, budgets: Sequence[float] = DEFAULT_MULTI_BUDGETS,
          timeline_samples: int = 200, out: Optional[str] = None, progress: Optional[Callable] = None,
          checkpoint: Optional[str] = None, resume: bool = False, **common):
    """Multithread / multiprocess comparison (PCC paper §5.2-5.3, Figs. 8-9)
    of promotion policies (default: PCC highest-frequency vs round robin) at
    huge-page limits ``budgets``% of the combined footprint, with ``ideal`` as
    reference. Returns ``(rows, per_process, timeline)``: per-configuration
    rows; one row per configuration x process (huge share and, when each
    process has its own cpus, its own walk reduction over base); and huge-page
    bytes per process over virtual time."""
    import pandas as pd

    path = _trace_path(trace)
    policies = _policy_list(policies)
    budgets = _pct_list(budgets, "budgets")
    info = json.loads(_core.trace_info(path, False))
    accesses = info["summary"]["accesses"]
    if "sample_every" not in common or common["sample_every"] is None:
        common["sample_every"] = max(1000, accesses // check_int(timeline_samples, "timeline_samples", 1))
    configs, tags = [], []
    for p in policies:
        for b in budgets:
            configs.append({"policy": p, "budget": b / 100.0})
            tags.append({"role": "curve", "budget_pct": b})
    configs.append({"policy": "ideal"})
    tags.append({"role": "reference", "budget_pct": None})
    ckpt = _sweep_checkpoint("multi", path, out, checkpoint)
    if out:
        check_outputs(out, f"multi-{_stem(path)}", ("processes", "timeline"), [path])
    results = run_configs(path, configs, progress=progress, checkpoint=ckpt, resume=resume,
                          row=lambda i, r: _row(r, experiment="multi", **tags[i]), **common)
    cpu_map = _process_cpus(info["header"])
    rows, per_proc, timeline = [], [], []
    for r, t in zip(results, tags):
        d = r.record
        rows.append(_row(r, experiment="multi", **t))
        walks = getattr(d.translation, "per_cpu_walks", [])
        cycles = getattr(d.cost, "per_cpu_cycles", [])
        base = getattr(d, "base", None)
        base_walks = [] if base is None else getattr(base.translation, "per_cpu_walks", [])
        base_cycles = [] if base is None else getattr(base.cost, "per_cpu_cycles", [])
        for p in getattr(d, "processes", []):
            wr = cyc = sp = None
            if cpu_map and p.pid in cpu_map:
                cpus = cpu_map[p.pid]
                w = sum(walks[c] for c in cpus if c < len(walks))
                bw = sum(base_walks[c] for c in cpus if c < len(base_walks))
                wr = 1.0 - w / bw if bw else None
                # The process's own cycles: its cpus' accesses and translation
                # (the core's per-cpu cost; OS time is the run's, not split).
                if cycles and base_cycles:
                    cyc = sum(cycles[c] for c in cpus if c < len(cycles))
                    bc = sum(base_cycles[c] for c in cpus if c < len(base_cycles))
                    sp = bc / cyc if cyc else None
            per_proc.append({"experiment": "multi", "policy": d.label, "budget_pct": t["budget_pct"],
                             "role": t["role"], "pid": p.pid, "process": p.name, "huge_bytes": p.huge_bytes,
                             "huge_share": p.huge_share, "footprint_bytes": p.footprint_bytes,
                             "walk_reduction": wr, "cycles_est": cyc, "speedup_est": sp, "kind": "estimate"})
        for smp in getattr(d, "timeline", []):
            for pid, h in enumerate(smp.huge_bytes):
                timeline.append({"policy": d.label, "budget_pct": t["budget_pct"], "role": t["role"],
                                 "time_s": smp.time_s, "accesses": smp.accesses, "pid": pid, "huge_bytes": h,
                                 "kind": "estimate"})
    meta = _meta("multi", path, results, {"policies": policies, "budgets_pct": budgets,
                                            "per_process_walks": cpu_map is not None})
    df = _frame(rows, meta)
    pp = pd.DataFrame(per_proc)
    tl = pd.DataFrame(timeline, columns=["policy", "budget_pct", "role", "time_s", "accesses", "pid", "huge_bytes", "kind"])
    if out:
        _done(df, out, ckpt, extra_tables={"processes": pp, "timeline": tl})
    return df, pp, tl


# ---------------------------------------------------------------- loading

def load(path: str) -> Dict[str, Any]:
    """Read one results JSON written by ``save``."""
    try:
        data = _io.read_json(path, "experiment result")
    except ValueError as e:
        raise HugescopeError(str(e)) from None
    if not isinstance(data, dict) or "hugescope_experiment" not in data:
        raise HugescopeError(f"{path}: not a hugescope experiment result")
    return data


def load_dir(directory: str) -> List[Dict[str, Any]]:
    """Every experiment result in ``directory`` (sorted by file name)."""
    if not os.path.isdir(directory):
        raise HugescopeError(f"{directory}: not a directory")
    out = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".json"):
            continue
        p = os.path.join(directory, name)
        try:
            data = _io.read_json(p, "experiment result")
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "hugescope_experiment" in data:
            data["_file"] = name
            out.append(data)
    return out
