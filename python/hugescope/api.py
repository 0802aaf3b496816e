"""Functions of the Python API. Each calls into the Rust core once."""

from __future__ import annotations

import json
import os
from typing import Iterable, Optional

from . import _core, units
from .results import SimResult


def _overrides(set: Optional[Iterable[str]], what: str = "set") -> list:
    if isinstance(set, (str, bytes)):
        set = [set]  # one override, not its characters
    return [str(s) for s in (set or [])]


def _machine(preset: Optional[str], config: Optional[str]) -> tuple:
    """(preset, config) with the name "calibrated" resolved to the file
    `hugescope calibrate` saved for this machine."""
    from .calibrate import machine_args

    m = machine_args(preset, None if config is None else os.fspath(config))
    return m["preset"], m["config"]


def machine_config(preset: Optional[str] = None, config: Optional[str] = None, set: Optional[Iterable[str]] = None) -> dict:
    """The resolved machine configuration: ``preset``, then the TOML file
    ``config`` merged on top, then ``key=value`` overrides from ``set``."""
    preset, config = _machine(preset, config)
    return json.loads(_core.machine_config(preset, _path(config), _overrides(set)))


def simulate(
    trace: str,
    preset: Optional[str] = None,
    pages: Optional[str] = None,
    config: Optional[str] = None,
    set: Optional[Iterable[str]] = None,
    policy: Optional[str] = None,
    **os_options,
) -> SimResult:
    """Simulate ``trace`` (an ``.hst`` file) on a machine ``preset``.

    Without ``policy``: a static page-size map, ``pages`` = ``"4k"`` (default),
    ``"2m"``, ``"1g"``, or the path of a plan file (JSON list of
    ``{start, length, page_size}``; the rest stays in base pages).

    With ``policy`` (``"linux"``, ``"ideal"``, ``"linux:enabled=madvise"``,
    ``"static:plan=p.json"``, ...): the OS model runs the policy, with ``base``
    simulated on the same pass for ``speedup_vs_base``. OS options (keywords):
    ``memory``, ``frag``, ``frag_method`` ("pcc" or "ingens"), ``budget``,
    ``footprint``, ``duration``, ``rate``, ``seed``, ``os_costs``,
    ``sample_every``.

    Cycle and speedup figures are estimates of the cost model.
    """
    preset, config = _machine(preset, config)
    if policy is None:
        given = sorted(k for k, v in os_options.items() if v is not None)
        if given:
            raise _core.HugescopeError(f"OS options {', '.join(given)} have no effect without a policy "
                                       "(the OS model runs only with one)")
        text = _core.simulate_static(_trace(trace), preset, _path(config), _overrides(set), str(pages or "4k"))
        return SimResult(json.loads(text))
    if pages is not None:
        raise _core.HugescopeError("pages= is a static map; with a policy use policy='static:plan=FILE'")
    return compare(trace, [policy], preset=preset, config=config, set=set, **os_options)[0]


def compare(
    trace: str,
    policies: Iterable[str],
    preset: Optional[str] = None,
    config: Optional[str] = None,
    set: Optional[Iterable[str]] = None,
    with_base: bool = True,
    **os_options,
) -> list:
    """Simulate several policies over one decoding pass of ``trace``.
    Returns one ``SimResult`` per policy, each with its estimated speedup over
    ``base`` on the same accesses."""
    preset, config = _machine(preset, config)
    if isinstance(policies, (str, bytes)):
        policies = [policies]
    if not hasattr(policies, "__iter__"):
        raise _core.HugescopeError(f"policies: expected a list of policy names, not {policies!r}")
    policies = [str(p) for p in policies]
    if not policies:
        raise _core.HugescopeError("policies: empty list")
    known = {"memory", "frag", "frag_method", "budget", "footprint", "duration", "rate", "seed", "os_costs",
             "sample_every"}
    unknown = sorted(k for k in os_options if k not in known)  # (`set` is a parameter here)
    if unknown:
        raise _core.HugescopeError(f"unknown OS option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    opts = {k: v for k, v in os_options.items() if v is not None}
    if "budget" in opts:
        opts["budget"] = _share(opts["budget"], "budget")
    if "frag" in opts:
        opts["frag"] = _share(opts["frag"], "frag")
    for k in ("duration", "rate"):
        if k in opts:
            opts[k] = units.check_float(opts[k], k, positive=True)
    if "duration" in opts and "rate" in opts:
        from .experiments import DURATION_AND_RATE
        raise _core.HugescopeError(DURATION_AND_RATE)
    if "seed" in opts:
        opts["seed"] = units.check_int(opts["seed"], "seed")
    if "sample_every" in opts:
        opts["sample_every"] = units.check_int(opts["sample_every"], "sample_every", 1)
    for k in ("memory", "footprint"):
        if opts.get(k) is not None:
            opts[k] = str(opts[k])
    if "os_costs" in opts:
        opts["os_costs"] = _overrides(opts["os_costs"])
    text = _core.simulate_policies(_trace(trace), policies, preset, _path(config), _overrides(set),
                                   with_base=with_base, **opts)
    return [SimResult(d) for d in json.loads(text)]


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
    if p is None:
        return None
    if not isinstance(p, (str, os.PathLike)):
        raise _core.HugescopeError(f"{what}: expected a file path, not {p!r}")
    return os.fspath(p)
