"""Parsing sizes and counts the same way the core does ("1GiB", "50M").

The one rule for suffixes (docs/cli.md, "Sizes and counts"), shared with the
core's ``hugescope_core::units``:

- sizes are binary whatever the spelling: k, K, KB, KiB = 1024; M, MB, MiB =
  2^20; G, GB, GiB = 2^30; T = 2^40. "2MB" means 2 MiB, as "2MB huge page"
  does in the kernel's and the papers' usage, so a size copied from a paper
  or from /proc means what it meant there;
- counts (accesses, updates, keys) are decimal: 50M = 50,000,000.

Every size and count the Python layer accepts goes through ``parse_size`` /
``parse_count`` here.
"""

from __future__ import annotations

import re

_SUFFIX = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


def _parse(s, base: int, what: str) -> int:
    if isinstance(s, int):
        if s < 0:
            raise ValueError(f"invalid {what} {s}: negative")
        return s
    m = re.fullmatch(r"\s*([0-9_]+(?:\.[0-9]+)?)\s*([kmgtKMGT]?)(?:i?[bB])?\s*", str(s))
    if not m:
        raise ValueError(f"invalid {what} '{s}': expected a number with an optional suffix such as 4k, 2M, 1GiB")
    return int(round(float(m.group(1).replace("_", "")) * base ** _SUFFIX[m.group(2).lower()]))


def parse_size(s) -> int:
    """Bytes; suffixes are powers of 1024 (KB = KiB, MB = MiB: see above)."""
    return _parse(s, 1024, "size")


def parse_count(s) -> int:
    """A count; suffixes are powers of 1000 (50M = 50,000,000)."""
    return _parse(s, 1000, "count")


# ---------------------------------------------------------------- checked values
#
# One set of checks for the CLI (argparse ``type=`` functions) and the Python
# API, so both reject a bad value with the same message: the option or
# parameter name and the value exactly as given. Without them a negative seed
# reached the core as an OverflowError and NaN durations were accepted.

#: Largest value of the core's unsigned 64-bit seeds and counts.
U64_MAX = (1 << 64) - 1


def _shown(value) -> str:
    # Strings (CLI text) are quoted as typed; API values show as Python writes them.
    return f"'{value}'" if isinstance(value, str) else repr(value)


def _error(msg: str):
    from ._core import HugescopeError

    return HugescopeError(msg)


def check_int(value, what: str, lo: int = 0, hi: int = U64_MAX) -> int:
    """``value`` (an int or its decimal text) as an int in ``lo..=hi``; raises
    ``HugescopeError`` naming ``what`` and the value otherwise."""
    if isinstance(value, bool):
        raise _error(f"{what}: {_shown(value)} is not an integer")
    try:
        n = int(value.strip()) if isinstance(value, str) else int(value) if float(value) == int(value) else None
    except (TypeError, ValueError, OverflowError):
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
