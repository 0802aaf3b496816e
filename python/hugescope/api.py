"""Functions of the Python API. Each calls into the Rust core once."""

from __future__ import annotations

import json
import os
from typing import Iterable, Optional

from . import _core
from .results import SimResult


def _overrides(set: Optional[Iterable[str]]) -> list:
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
        if os_options:
            raise TypeError(f"OS options {sorted(os_options)} need a policy")
        text = _core.simulate_static(_path(trace), preset, _path(config), _overrides(set), str(pages or "4k"))
        return SimResult(json.loads(text))
    if pages is not None:
        raise ValueError("pages= is a static map; with a policy use policy='static:plan=FILE'")
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
    opts = dict(os_options)
    if "budget" in opts and opts["budget"] is not None:
        opts["budget"] = _share(opts["budget"])
    if "frag" in opts and opts["frag"] is not None:
        opts["frag"] = _share(opts["frag"])
    for k in ("memory", "footprint"):
        if opts.get(k) is not None:
            opts[k] = str(opts[k])
    if "os_costs" in opts:
        opts["os_costs"] = _overrides(opts["os_costs"])
    text = _core.simulate_policies(_path(trace), [str(p) for p in policies], preset, _path(config), _overrides(set),
                                   with_base=with_base, **opts)
    return [SimResult(d) for d in json.loads(text)]


def policies() -> dict:
    """Registered policies: name -> description."""
    return dict(_core.policies())


def _share(x) -> float:
    """0.04, "0.04" or "4%" -> 0.04."""
    if isinstance(x, str) and x.strip().endswith("%"):
        return float(x.strip()[:-1]) / 100.0
    return float(x)


def trace_info(path: str, verify: bool = False) -> dict:
    """Header and counts of a trace. ``verify=True`` decodes every chunk and
    checks its checksum (slower); otherwise counts come from the footer."""
    return json.loads(_core.trace_info(_path(path), verify))


def _path(p):
    return None if p is None else os.fspath(p)
