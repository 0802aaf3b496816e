"""Functions of the Python API. Each calls into the Rust core once."""

from __future__ import annotations

import json
import os
from typing import Callable, Iterable, List, Optional

from . import _core, units
from .configuration import OS_COSTS_KEYWORD, OS_KEYWORDS, check_keywords, os_overrides, source_args
from .results import RegionProfile, SimResult


def _overrides(set: Optional[Iterable[str]], what: str = "set") -> list:
    if isinstance(set, (str, bytes)):
        set = [set]  # one override, not its characters
    return [str(s) for s in (set or [])]


def machine_config(preset: Optional[str] = None, config=None, set: Optional[Iterable[str]] = None) -> dict:
    """The resolved machine configuration: ``preset``, then the TOML or JSON
    file ``config`` (or a ``Config``) merged on top, then ``key=value``
    overrides from ``set``."""
    return json.loads(_core.machine_config(overrides=_overrides(set), **source_args(preset, _path(config, "config"))))


def simulate(
    trace,
    preset: Optional[str] = None,
    pages: Optional[str] = None,
    config=None,
    set: Optional[Iterable[str]] = None,
    policy: Optional[str] = None,
    quantum_ms: Optional[float] = None,
    host_policy: Optional[str] = None,
    guest_policy: Optional[str] = None,
    virt: bool = False,
    progress: Optional[Callable[[int, int], None]] = None,
    **os_options,
) -> SimResult:
    """Simulate ``trace`` (an ``.hst`` file) on a machine ``preset``.

    ``trace`` may be a list of traces: two or more run as concurrent
    processes of one run, each interleaved by its own virtual time (one
    quantum of ``quantum_ms`` ms, default 1, of the running process's time at
    a time; see ``docs/python-api.md``). A concurrent run needs a policy; its
    ``processes()`` frame has each process's ``finish_seconds``. The same file
    may be listed several times (each copy is its own process).

    Without ``policy``: a static page-size map, ``pages`` = ``"4k"`` (default),
    ``"2m"``, ``"1g"``, or the path of a plan file (JSON list of
    ``{start, length, page_size}``; the rest stays in base pages).

    With ``policy`` (``"linux"``, ``"ideal"``, ``"linux:enabled=madvise"``,
    ``"static:plan=p.json"``, ...), or a ``config`` (file or ``Config``) with
    ``[[policy]]`` entries: the OS model runs the policy, with ``base``
    simulated on the same pass for ``speedup_vs_base``. OS options (keywords,
    each setting the ``[os]`` key of the same name): ``memory``, ``frag``,
    ``frag_method`` ("pcc" or "ingens"), ``frag_mobility`` ("movable" or
    "unmovable": the pages the ingens fragmenter keeps), ``budget``, ``footprint``,
    ``duration``, ``rate``, ``seed``, ``os_costs`` (``["COST=US", ...]``),
    ``sample_every``.

    Virtualized (``host_policy=``, or ``virt=True`` for the default host
    policy ``linux``): each trace runs in its own VM; ``policy`` (or its
    alias ``guest_policy``) runs in the guest kernel, ``host_policy`` in the
    host (``base``, ``linux``, ``ingens``, ...). The result's ``virt`` entry
    has VM exits by cause, walks by (guest, host) page size and the host's
    counters; see ``docs/python-api.md``.

    ``progress(done, total)``, if given, is called from the calling thread
    about every 2^22 simulated accesses and once at the end (``total``: the
    trace's accesses; a concurrent run counts all traces' accesses once per
    run, each policy and ``base``; 0 when unknown); an exception it raises
    stops the run and propagates.

    Cycle and speedup figures are estimates of the cost model.
    """
    units.check_callable(progress, "progress", "(done, total)")
    policy, host_policy = _virt_args(policy, guest_policy, host_policy, virt)
    src = source_args(preset, _path(config, "config"))
    if host_policy is not None and policy is None and not _config_policies(src, set):
        raise _core.HugescopeError("a virtualized run needs a guest policy: give policy= (or guest_policy=)")
    if policy is None and pages is None and _config_policies(src, set):
        return compare(trace, None, preset=preset, config=config, set=set, quantum_ms=quantum_ms,
                       host_policy=host_policy, progress=progress, **os_options)[0]
    if policy is None:
        if quantum_ms is not None or (_concurrent(trace) and len(trace) > 1):
            raise _core.HugescopeError("several traces run as concurrent processes of the OS model, which runs "
                                       "only with a policy; give policy= (e.g. policy='linux')")
        trace = _single(trace)
        given = sorted(k for k, v in os_options.items() if v is not None)
        if given:
            raise _core.HugescopeError(f"OS options {', '.join(given)} have no effect without a policy "
                                       "(the OS model runs only with one)")
        return SimResult(_core.simulate_static(_trace(trace), overrides=_overrides(set), pages=str(pages or "4k"),
                                               progress=progress, **src))
    if pages is not None:
        raise _core.HugescopeError("pages= is a static map; with a policy use policy='static:plan=FILE'")
    return compare(trace, [policy], preset=preset, config=config, set=set, quantum_ms=quantum_ms,
                   host_policy=host_policy, progress=progress, **os_options)[0]


def region_profile(
    trace,
    preset: Optional[str] = None,
    pages: str = "4k",
    config=None,
    set: Optional[Iterable[str]] = None,
    progress: Optional[Callable[[int, int], None]] = None,
) -> RegionProfile:
    """Simulate ``trace`` under the static map ``pages`` (as ``simulate``
    without a policy) and split the run by the regions of the trace header:
    each region's accesses, TLB misses (walks), walk references and walk
    cycles, and its share of the run's walk cycles, plus the accesses outside
    every region. One pass: ``.result`` is the run ``simulate(trace,
    pages=pages)`` gives. ``progress(done, total)``: as in ``simulate``.
    Walk cycles are estimates of the cost model."""
    units.check_callable(progress, "progress", "(done, total)")
    src = source_args(preset, _path(config, "config"))
    return RegionProfile(_core.profile_regions(_trace(_single(trace)), overrides=_overrides(set), pages=str(pages),
                                               progress=progress, **src))


#: The host policy of ``virt=True`` / ``--virt`` without ``--host-policy``:
#: Linux THP (enabled=always), as KVM hosts commonly run.
DEFAULT_HOST_POLICY = "linux"


def _virt_args(policy, guest_policy, host_policy, virt):
    """(guest policy, host policy or None) of the virtualization arguments:
    ``guest_policy`` is ``policy``'s alias; ``virt`` without a host policy
    takes ``DEFAULT_HOST_POLICY``."""
    if guest_policy is not None:
        if policy is not None and str(policy) != str(guest_policy):
            raise _core.HugescopeError(f"policy={policy!r} and guest_policy={guest_policy!r}: give one of them")
        policy = guest_policy
    if host_policy is not None:
        if not isinstance(host_policy, str) or not host_policy.strip():
            raise _core.HugescopeError(f"host_policy: expected a policy name, not {host_policy!r}")
        return policy, host_policy
    return policy, (DEFAULT_HOST_POLICY if virt else None)


def _config_policies(src: dict, set) -> list:
    """The ``[[policy]]`` entries of a configuration (empty without a file)."""
    if src["config"] is None and src["config_text"] is None:
        return []
    return json.loads(_core.resolve_config(overrides=_overrides(set), **src))["policy"]


def compare(
    trace,
    policies: Optional[Iterable[str]] = None,
    preset: Optional[str] = None,
    config=None,
    set: Optional[Iterable[str]] = None,
    with_base: bool = True,
    quantum_ms: Optional[float] = None,
    start_s: Optional[Iterable[float]] = None,
    host_policy: Optional[str] = None,
    virt: bool = False,
    progress: Optional[Callable[[int, int], None]] = None,
    **os_options,
) -> list:
    """Simulate several policies over one decoding pass of ``trace``.
    Returns one ``SimResult`` per policy, each with its estimated speedup over
    ``base`` on the same accesses. ``policies`` replace the ``[[policy]]``
    entries of ``config`` (a file or ``Config``); without them the file's run.

    ``trace`` may be a list: two or more traces run as concurrent processes
    scheduled by their own virtual time (``quantum_ms``, default 1 ms), each
    policy (and ``base``) with its own interleaving. Without ``duration`` or
    ``rate`` a concurrent run uses the cost model's cycles as time, where a
    process with cheaper translation runs faster. ``start_s`` gives each
    concurrent trace its start time in seconds of virtual time (a stream of
    processes; default all at 0). ``progress(done, total)``: as in
    ``simulate``.

    ``host_policy`` (or ``virt=True``: ``linux``) runs the policies in
    guests: each trace in its own VM over a host kernel running
    ``host_policy``; the reference ``base`` is then base pages in guest and
    host."""
    _, host_policy = _virt_args(None, None, host_policy, virt)
    units.check_callable(progress, "progress", "(done, total)")
    src = source_args(preset, _path(config, "config"))
    if isinstance(policies, (str, bytes)):
        policies = [policies]
    from_config = _config_policies(src, set)
    if policies is None and from_config:
        policies = []
    if not hasattr(policies, "__iter__"):
        raise _core.HugescopeError(f"policies: expected a list of policy names, not {policies!r} "
                                   "(or a config with [[policy]] entries)")
    policies = [str(p) for p in policies]
    if not policies and not from_config:
        raise _core.HugescopeError("policies: empty list (and no [[policy]] entries in a configuration)")
    known = {*OS_KEYWORDS, OS_COSTS_KEYWORD}  # (not set(): `set` is a parameter here)
    unknown = sorted(k for k in os_options if k not in known)  # (`set` is a parameter here)
    if unknown:
        raise _core.HugescopeError(f"unknown OS option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    # Flag-style checks kept from before the keywords became [os] keys: they
    # name the keyword and accept "4%"; the core checks the key again.
    opts = check_keywords(os_options)
    if "budget" in opts:
        opts["budget"] = _share(opts["budget"], "budget")
    if "frag" in opts:
        opts["frag"] = _share(opts["frag"], "frag")
    overrides = _overrides(set) + os_overrides(opts)
    if _concurrent(trace) or quantum_ms is not None:
        traces = [_trace(t) for t in trace] if _concurrent(trace) else [_trace(trace)]
        if not traces:
            raise _core.HugescopeError("trace: empty list of traces")
        lo, hi = _core.QUANTUM_MS_RANGE
        q = _core.DEFAULT_QUANTUM_MS if quantum_ms is None else units.check_float(quantum_ms, "quantum_ms", lo, hi)
        starts = _start_times(start_s, len(traces))
        records = _core.simulate_concurrent(traces, policies, overrides=overrides, with_base=with_base, quantum_ms=q,
                                            start_s=starts, host_policy=host_policy, progress=progress, **src)
    else:
        if start_s is not None:
            raise _core.HugescopeError("start_s: start times are for concurrent runs (a list of traces)")
        records = _core.simulate_policies(_trace(trace), policies, overrides=overrides, with_base=with_base,
                                          host_policy=host_policy, progress=progress, **src)
    return [SimResult(r) for r in records]


def _start_times(start_s, n: int) -> List[float]:
    """Each concurrent input's start time: none given is all at 0; else one
    finite, non-negative number of seconds per trace."""
    if start_s is None:
        return []
    if isinstance(start_s, (str, bytes)) or not hasattr(start_s, "__iter__"):
        raise _core.HugescopeError(f"start_s: expected a list of seconds, one per trace, not {start_s!r}")
    # Up to the daemons' safety net of 10^7 s of virtual time.
    out = [units.check_float(v, "start_s", 0.0, 1e7) for v in start_s]
    if len(out) != n:
        raise _core.HugescopeError(f"start_s: {len(out)} start times for {n} traces (give one per trace)")
    return out


def _concurrent(trace) -> bool:
    """Whether ``trace`` is a list of traces (a concurrent run) rather than one path."""
    return isinstance(trace, (list, tuple))


def _single(trace):
    """One path from ``trace``: a path, or a list holding exactly one."""
    if _concurrent(trace):
        if len(trace) != 1:
            raise _core.HugescopeError(f"trace: expected one path here, not a list of {len(trace)}")
        return trace[0]
    return trace


def policies() -> dict:
    """Registered policies: name -> description."""
    return dict(_core.policies())


def _share(x, what: str = "share") -> float:
    """0.04, "0.04" or "4%" -> 0.04; a share outside 0..1 (0%..100%), NaN or
    text that is no number raises HugescopeError naming ``what`` and ``x``."""
    pct = isinstance(x, str) and x.strip().endswith("%")
    try:
        v = units.check_float(x.strip()[:-1] if pct else x, what)
    except _core.HugescopeError:
        raise _core.HugescopeError(f"{what}: {units._shown(x)} is not a finite number or percentage") from None
    if pct:
        v /= 100.0
    if not 0.0 <= v <= 1.0:
        raise _core.HugescopeError(f"{what}: {units._shown(x)} is out of range (expected a share 0..1 or 0%..100%)")
    return v


def trace_info(path: str, verify: bool = False) -> dict:
    """Header and counts of a trace. ``verify=True`` decodes every chunk and
    checks its checksum (slower); otherwise counts come from the footer."""
    return json.loads(_core.trace_info(_trace(path), bool(verify)))


def _trace(p) -> str:
    if p is None:
        raise _core.HugescopeError("trace: expected a path, not None")
    return _path(p, "trace")


def _path(p, what: str = "path"):
    from .configuration import Config

    if p is None or (isinstance(p, Config) and what == "config"):
        return p
    if not isinstance(p, (str, os.PathLike)):
        raise _core.HugescopeError(f"{what}: expected a file path, not {p!r}")
    return os.fspath(p)
