"""The whole configuration of a run as one object: the machine, the OS and
the policies (``docs/configuration.md``).

Thin by design: the core parses, checks and resolves (``Config::load`` in
``hugescope-core/src/configuration.rs``); this module holds its answer. The fields of
``Config.os`` are not written here either: they are made from the core's knob
declarations (``os_knobs()`` in ``os/config.rs``), so a knob declared there
appears here with no edit.

    cfg = hugescope.config(preset="haswell-pcc", file="run.toml", set=["os.budget=4%"])
    cfg.os.budget, cfg.machine["cost"]["cpu_ghz"], cfg.policies
    hugescope.compare("bfs.hst", config=cfg)
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Dict, Iterable, List, Optional

from . import units, _core

#: Keyword and flag names that set an OS key (the sugar of the API keywords
#: and CLI flags); each maps to ``os.<name>``. The one list of them: the API's
#: check of its keywords (``api.compare``) reads it too.
OS_KEYWORDS = ("memory", "footprint", "budget", "frag", "frag_method", "frag_mobility", "duration", "rate", "seed",
               "sample_every")
#: The keyword whose ``COST=US`` entries map to ``os.COST`` (the OS costs).
OS_COSTS_KEYWORD = "os_costs"


def knobs() -> List[Dict[str, Any]]:
    """The OS knob declarations: name, type, unit, default, auto, range, help."""
    return json.loads(_core.os_knob_list())


def _os_class():
    # One frozen dataclass whose fields are the declared knobs, in order.
    global _OS_CLASS
    if _OS_CLASS is None:
        names = [k["name"] for k in knobs()]
        _OS_CLASS = dataclasses.make_dataclass(
            "OsSettings", [(n, Any) for n in names], frozen=True,
            namespace={"__getitem__": lambda self, k: getattr(self, k) if k in self.keys() else _missing(k),
                       "keys": lambda self: [f.name for f in dataclasses.fields(self)],
                       "to_dict": lambda self: dataclasses.asdict(self),
                       "__doc__": "The resolved [os] section (None: auto). Fields come from the core's declarations."})
    return _OS_CLASS


_OS_CLASS = None


def _missing(key):
    raise KeyError(key)


class Config:
    """A resolved configuration. ``machine`` (dict), ``os`` (dataclass view,
    also indexable by key), ``policies`` (list of dicts with ``name``, the
    policy's parameters and, where it differs from ``name:k=v,...``,
    ``label``). Pass it as ``config=`` to ``simulate``, ``compare`` and the
    experiments; ``to_toml()`` writes a file that loads to the same
    configuration."""

    def __init__(self, data: Dict[str, Any], toml: str):
        self._data = data
        # The core's TOML of the same configuration: what a Config passes back
        # to the core (exact: serde_json may round a 17-digit real by an ulp).
        self._toml = toml
        self.os = _os_class()(**data["os"])

    @property
    def machine(self) -> Dict[str, Any]:
        return json.loads(json.dumps(self._data["machine"]))  # a copy: the object stays as resolved

    @property
    def policies(self) -> List[Dict[str, Any]]:
        return [dict(p) for p in self._data["policy"]]

    def to_dict(self) -> Dict[str, Any]:
        """``{"machine": ..., "os": ..., "policy": [...]}`` (the JSON file format)."""
        return json.loads(json.dumps(self._data))

    def to_json(self) -> str:
        return json.dumps(self._data)

    def to_toml(self) -> str:
        """The configuration as TOML, written by the core (a ``--config`` file)."""
        return self._toml

    def __eq__(self, other) -> bool:
        return isinstance(other, Config) and self._data == other._data

    def __repr__(self) -> str:
        return (f"Config(machine={self._data['machine'].get('name')!r}, os={self.os!r}, "
                f"policies={[p.get('label', p['name']) for p in self._data['policy']]!r})")


def load(preset: Optional[str] = None, file=None, set: Optional[Iterable[str]] = None,
         policies: Optional[Iterable[str]] = None) -> Config:
    """Resolve a configuration: ``preset`` (default: the file's, else
    haswell-pcc), the TOML or JSON ``file`` (or a ``Config``), ``set``
    overrides (``os.KEY=VALUE`` for the OS, ``KEY=VALUE`` for the machine),
    and ``policies`` (``--policy`` texts, replacing the file's)."""
    args = dict(source_args(preset, file), overrides=_strings(set, "set"), policies=_strings(policies, "policies"))
    return Config(json.loads(_core.resolve_config(**args)), _core.resolve_config(toml=True, **args))


#: Both set the virtual time base; one would silently win over the other.
DURATION_AND_RATE = "duration and rate both set the virtual time base (rate = accesses / duration); give one of them"


def check_keywords(opts: Dict[str, Any]) -> Dict[str, Any]:
    """Check the OS keywords of ``opts`` (None values dropped) the way a flag
    is checked, naming the keyword: ``duration`` and ``rate`` positive and
    not both, ``seed`` an integer, ``sample_every`` at least 1. The core
    checks each ``os.KEY`` again; this only names the keyword."""
    out = {k: v for k, v in opts.items() if v is not None}
    for k in ("duration", "rate"):
        if k in out:
            out[k] = units.check_float(out[k], k, positive=True)
    if "duration" in out and "rate" in out:
        raise _core.HugescopeError(DURATION_AND_RATE)
    if "seed" in out:
        out["seed"] = units.check_int(out["seed"], "seed")
    if "sample_every" in out:
        out["sample_every"] = units.check_int(out["sample_every"], "sample_every", 1)
    return out


def source_args(preset: Optional[str], file) -> Dict[str, Any]:
    """The core's ``preset``/``config``/``config_text`` arguments for a
    preset and a file path or ``Config`` (the name "calibrated" resolves to
    the file ``hugescope calibrate`` saved)."""
    units.check_name(preset, "preset")
    if isinstance(file, Config):
        if preset is not None:
            raise _core.HugescopeError("preset: a Config object already names its machine; give one of them")
        return {"preset": None, "config": None, "config_text": file.to_toml()}
    if file is not None and not isinstance(file, (str, os.PathLike)):
        raise _core.HugescopeError(f"config: expected a file path or a hugescope Config, not {file!r}")
    from .calibrate import machine_args

    m = machine_args(preset, None if file is None else os.fspath(file))
    return {"preset": m["preset"], "config": m["config"], "config_text": None}


def _strings(values, what: str) -> List[str]:
    if values is None:
        return []
    if isinstance(values, (str, bytes)):
        return [str(values)]  # one item, not its characters
    if not hasattr(values, "__iter__"):
        raise _core.HugescopeError(f"{what}: expected a list, not {values!r}")
    return [str(v) for v in values]


def _text(v) -> str:
    # repr of a float is its shortest exact form, so the core reads back the
    # same number the keyword held.
    return repr(v) if isinstance(v, float) else str(v)


def os_overrides(options: Dict[str, Any]) -> List[str]:
    """API keywords / CLI flags -> ``os.KEY=VALUE`` overrides (the sugar:
    ``budget=0.04`` -> ``os.budget=0.04``, ``os_costs=["fault_base_us=2.5"]``
    -> ``os.fault_base_us=2.5``). Values are checked by the core."""
    out = []
    for k in OS_KEYWORDS:
        if options.get(k) is not None:
            out.append(f"os.{k}={_text(options[k])}")
    for c in _strings(options.get(OS_COSTS_KEYWORD), OS_COSTS_KEYWORD):
        key, eq, value = c.partition("=")
        if not eq or not key.strip():
            raise _core.HugescopeError(f"OS cost override '{c}' is not COST=US (e.g. fault_base_us=2.5)")
        out.append(f"os.{key.strip()}={value.strip()}")
    return out
