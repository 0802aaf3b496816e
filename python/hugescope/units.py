"""Parsing sizes and counts the same way the core does ("1GiB", "50M")."""

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
    """Bytes; suffixes are powers of 1024."""
    return _parse(s, 1024, "size")


def parse_count(s) -> int:
    """A count; suffixes are powers of 1000 (50M = 50,000,000)."""
    return _parse(s, 1000, "count")
