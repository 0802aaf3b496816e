"""Small I/O helpers shared by the CLI and experiments."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any


def write_atomic(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename, so a
    failure never leaves a half-written result under the final name."""
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=d)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        # mkstemp creates 0600; results are ordinary files (0666 less umask).
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_json(path: str, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2) + "\n")
