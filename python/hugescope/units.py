"""Sizes and counts ("1GiB", "50M") and the checks of every value the Python
layer accepts.

The one rule for suffixes (docs/cli.md, "Sizes and counts") is the core's
``hugescope_core::units``; ``parse_size`` and ``parse_count`` here call it,
so the command line, the Python API, ``--set``, configuration files, plans
and environment variables accept the same texts:

- sizes are binary whatever the spelling: k, K, KB, KiB = 1024; M, MB, MiB =
  2^20; G, GB, GiB = 2^30; T = 2^40. "2MB" means 2 MiB, as "2MB huge page"
  does in the kernel's and the papers' usage, so a size copied from a paper
  or from /proc means what it meant there;
- counts (accesses, updates, keys) are decimal: 50M = 50,000,000;
- hex (``0x200000``) is accepted; a fraction of one byte or item ("1.5") is
  not, a fraction of a unit ("1.5GiB") is rounded to a whole byte or item.
"""

from __future__ import annotations

from typing import Optional

from . import _core


def _parse(s, core_parse, what: str) -> int:
    if isinstance(s, bool):
        raise ValueError(f"invalid {what} {s!r}: not a number")
    if isinstance(s, int):
        if s < 0:
            raise ValueError(f"invalid {what} {s}: negative")
        return s
    try:
        return core_parse(str(s))
    except _core.HugescopeError as e:
        raise ValueError(str(e)) from None


def parse_size(s) -> int:
    """Bytes; suffixes are powers of 1024 (KB = KiB, MB = MiB: see above)."""
    return _parse(s, _core.parse_size, "size")


def parse_count(s) -> int:
    """A count; suffixes are powers of 1000 (50M = 50,000,000)."""
    return _parse(s, _core.parse_count, "count")


# ---------------------------------------------------------------- checked values
#
# One set of checks for the CLI (argparse ``type=`` functions) and the Python
# API, so both reject a bad value with the same message: the option or
# parameter name and the value exactly as given. Without them a negative seed
# reached the core as an OverflowError and NaN durations were accepted.

#: Largest value of the core's unsigned 64-bit seeds and counts.
U64_MAX = (1 << 64) - 1


def _shown(value) -> str:
    # Strings (CLI text) are quoted as typed; API values show as Python writes
    # them; both cut and escaped as every error shows a value (error::shown).
    return _core.shown(f"'{value}'" if isinstance(value, str) else repr(value))


def _error(msg: str):
    return _core.HugescopeError(msg)


def check_int(value, what: str, lo: int = 0, hi: int = U64_MAX) -> int:
    """``value`` (an int or its decimal text) as an int in ``lo..=hi``; raises
    ``HugescopeError`` naming ``what`` and the value otherwise."""
    if isinstance(value, bool):
        raise _error(f"{what}: {_shown(value)} is not an integer")
    try:
        if isinstance(value, str):
            n = int(value.strip())
        elif isinstance(value, int):
            n = int(value)  # exact: float(2**64 - 1) is 2**64, so an int is never compared as a float
        else:
            n = int(value) if float(value) == int(value) else None
    except (TypeError, ValueError, OverflowError):
        n = None
    if n is None and isinstance(value, str):
        # Past Python's own integer syntax, the core's count grammar (50M,
        # 0x10, 1e3 no): what --set and the files accept for a count.
        try:
            n = _core.parse_count(value)
        except _core.HugescopeError:
            n = None
    if n is None:
        raise _error(f"{what}: {_shown(value)} is not an integer")
    if not lo <= n <= hi:
        raise _error(f"{what}: {_shown(value)} is out of range (expected {lo}..{hi})")
    return n


def check_float(value, what: str, lo: float = None, hi: float = None, positive: bool = False) -> float:
    """``value`` as a finite float, at least ``lo`` / at most ``hi``, above 0
    when ``positive``; raises ``HugescopeError`` naming ``what`` and the value
    otherwise (NaN and infinity are never accepted)."""
    import math

    if isinstance(value, bool):
        raise _error(f"{what}: {_shown(value)} is not a number")
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise _error(f"{what}: {_shown(value)} is not a number") from None
    if not math.isfinite(x):
        raise _error(f"{what}: {_shown(value)} is not a finite number")
    if positive and x <= 0:
        raise _error(f"{what}: {_shown(value)} must be greater than 0")
    if (lo is not None and x < lo) or (hi is not None and x > hi):
        rng = f"{lo:g}..{hi:g}" if lo is not None and hi is not None else (f">= {lo:g}" if lo is not None else f"<= {hi:g}")
        raise _error(f"{what}: {_shown(value)} is out of range (expected {rng})")
    return x


def check_callable(value, what: str, called_with: str):
    """``value`` if it is None or callable; else ``HugescopeError`` naming
    ``what`` (a ``progress=5`` used to fail deep in the core as a TypeError)."""
    if value is not None and not callable(value):
        raise _error(f"{what}: expected a function called with {called_with}, or None, not {_shown(value)}")
    return value


def check_name(value, what: str, choices=None) -> Optional[str]:
    """``value`` if it is None or a string (one of ``choices`` when given);
    else ``HugescopeError`` naming ``what`` (``preset=123`` used to raise a
    TypeError from the bindings)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise _error(f"{what}: expected a name (a string), not {_shown(value)}")
    if choices is not None and value not in choices:
        raise _error(f"{what}: {_shown(value)} is not one of {', '.join(choices)}")
    return value


def int_arg(what: str, lo: int = 0, hi: int = U64_MAX):
    """An argparse ``type=`` that checks with ``check_int``."""
    def parse(text):
        return check_int(text, what, lo, hi)
    parse.__name__ = what
    return parse


def float_arg(what: str, lo: float = None, hi: float = None, positive: bool = False):
    """An argparse ``type=`` that checks with ``check_float``."""
    def parse(text):
        return check_float(text, what, lo, hi, positive)
    parse.__name__ = what
    return parse
