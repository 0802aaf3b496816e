"""``hugescope docs``: the documentation pages, from wherever this copy of
hugescope has them.

A wheel carries the pages as package data (``hugescope/_docs/*.md``, copied
from the repository's ``docs/`` while the wheel is built: ``make wheel`` and
the build backend ``scripts/hugescope_build.py``); a source checkout reads
its ``docs/`` directly, so it always shows the pages as edited. Help texts
cite a page as ``docs/NAME.md``; ``hugescope docs NAME`` prints it.
"""

from __future__ import annotations

import os
import re
from typing import List, Optional, Tuple

from ._core import HugescopeError

PACKAGE = os.path.dirname(os.path.abspath(__file__))
#: Where a wheel keeps the pages, and where a source checkout has them.
PACKAGED = os.path.join(PACKAGE, "_docs")
CHECKOUT = os.path.join(os.path.dirname(os.path.dirname(PACKAGE)), "docs")

#: How help texts cite a page, and how the CLI shows such a citation.
CITATION = re.compile(r"docs/([A-Za-z0-9_-]+)\.md")


def docs_dir() -> Optional[str]:
    """The directory of the pages: the source checkout's ``docs/`` when this
    is one (beside ``pyproject.toml``), else the packaged copy; None when
    neither is there."""
    if os.path.isfile(os.path.join(os.path.dirname(CHECKOUT), "pyproject.toml")) and os.path.isdir(CHECKOUT):
        return CHECKOUT
    return PACKAGED if os.path.isdir(PACKAGED) else None


def topics() -> List[Tuple[str, str]]:
    """(name, title) of every page, by name; the title is its first heading."""
    d = docs_dir()
    if d is None:
        return []
    out = []
    for f in sorted(os.listdir(d)):
        if f.endswith(".md"):
            with open(os.path.join(d, f), encoding="utf-8") as fh:
                title = next((ln.lstrip("#").strip() for ln in fh if ln.startswith("#")), "")
            out.append((f[:-3], title))
    return out


def topic_name(text: str) -> str:
    """``linux``, ``linux.md`` and ``docs/linux.md`` all name the page ``linux``."""
    t = text.strip()
    m = CITATION.fullmatch(t)
    if m:
        return m.group(1)
    return t[:-3] if t.endswith(".md") else t


def page(text: str) -> str:
    """The text of page ``text`` (a name as ``topic_name`` reads it); an
    unknown name is one error naming the pages there are."""
    name = topic_name(text)
    names = [n for n, _ in topics()]
    if not names:
        raise HugescopeError("no documentation pages found: this installation of hugescope has no docs "
                             "(neither a source checkout's docs/ nor the wheel's hugescope/_docs)")
    if name not in names:
        raise HugescopeError(f"no documentation page '{text}' (pages: {', '.join(names)})")
    with open(os.path.join(docs_dir(), name + ".md"), encoding="utf-8") as f:
        return f.read()


def cite_as_command(text: str) -> str:
    """A help text with each ``docs/NAME.md`` shown as the command that prints
    it, ``'hugescope docs NAME'``: what a user of an installed package has."""
    return CITATION.sub(lambda m: f"'hugescope docs {m.group(1)}'", text)
