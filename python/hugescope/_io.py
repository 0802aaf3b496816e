"""The one output writer of hugescope: every result file goes through here.

``check_output`` refuses targets that must not be replaced (the rules live in
the Rust core, ``hugescope_core::output::check``, shared with the trace
writer): a device, FIFO, socket or directory; a symbolic link unless
following was asked for (``--follow-symlinks``, or ``follow_symlinks=True``);
the same file as an input; a file holding a different kind of hugescope output
(results JSON is never replaced by an HTML report); a missing or unwritable
directory. Commands call it for every output *before* their work starts.

``write_atomic`` checks again and writes through a temporary file in the same
directory, fsync and rename, so a failure or a signal never leaves a
half-written result under the final name (the temporary is removed), and the
file gets the normal mode 0666 & ~umask.

``-`` names standard output (``--json -``): ``is_stdout`` says so, and
``emit_json`` is the one place it bypasses the file checks and the writer, so
no command ever creates a file named ``-``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any, Iterable, Optional, Union

from . import _core

#: Follow symbolic links named as outputs (write to the link's target) instead
#: of refusing them. The CLI sets it for the duration of one command from the
#: top-level ``--follow-symlinks``; API callers may pass ``follow_symlinks=``.
FOLLOW_SYMLINKS = False

#: Output kinds the core recognises (see ``hugescope_core::output::Kind``).
KINDS = ("hst", "json", "csv", "html", "png", "svg", "pdf")

#: The output name meaning standard output (the Unix convention).
STDOUT = "-"

_HEAD = 512  # bytes of new content the kind is sniffed from (hugescope_core::output::SNIFF_BYTES)


def _follow(follow_symlinks: Optional[bool]) -> bool:
    return FOLLOW_SYMLINKS if follow_symlinks is None else bool(follow_symlinks)


def check_output(path, kind: Optional[str] = None, inputs: Iterable = (), follow_symlinks: Optional[bool] = None,
                 head: Optional[bytes] = None) -> str:
    """Refuse an output target that must not be replaced (raises
    ``HugescopeError`` naming the path and why); return the path the finished
    file must be renamed onto (the link's target when following links).
    ``kind``: one of ``KINDS``; without it, the kind is sniffed from ``head``
    (the first bytes of the new content)."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"output kind '{kind}' is not one of {', '.join(KINDS)}")
    return os.fspath(_core.check_output(os.fspath(path), kind, None if head is None else bytes(head[:_HEAD]),
                                        [os.fspath(p) for p in inputs if p is not None], _follow(follow_symlinks)))


def prepare_dir(path, follow_symlinks: Optional[bool] = None) -> str:
    """A results directory: created if missing (with its parents); refused
    when it, or a component of it, exists and is not a directory. The files
    written into it are checked one by one with ``check_output``."""
    path = os.fspath(path)
    if not path:
        raise _core.HugescopeError("output directory is empty")
    if os.path.islink(path) and not _follow(follow_symlinks):
        raise _core.HugescopeError(f"{path}: is a symbolic link; refusing to write into it "
                                   "(use --follow-symlinks to write to its target)")
    if os.path.exists(path) and not os.path.isdir(path):
        raise _core.HugescopeError(f"{path}: exists and is not a directory")
    try:
        os.makedirs(path, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise _core.HugescopeError(f"{path}: a component of the path is not a directory") from None
    return path


def _umask() -> int:
    # The only portable way to read the umask is to set it; set it back at once.
    m = os.umask(0o022)
    os.umask(m)
    return m


def write_atomic(path, data: Union[str, bytes], kind: Optional[str] = None, inputs: Iterable = (),
                 follow_symlinks: Optional[bool] = None, make_dirs: bool = False) -> str:
    """Write ``data`` (text or bytes) to ``path`` atomically after the checks
    of ``check_output`` (``kind`` sniffed from ``data`` when not given).
    A missing directory is an error (a mistyped path must not grow a tree of
    directories), unless ``make_dirs`` (for the tool's own places, such as
    its configuration directory). Returns the path written."""
    blob = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if make_dirs:
        prepare_dir(os.path.dirname(os.path.abspath(os.fspath(path))), follow_symlinks)
    target = check_output(path, kind, inputs, follow_symlinks, head=blob[:_HEAD])
    d = os.path.dirname(os.path.abspath(target))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(target) + ".", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            # mkstemp creates 0600; results are ordinary files (0666 less umask).
            os.fchmod(f.fileno(), 0o666 & ~_umask())
            f.write(blob)
            f.flush()
            # fsync before the rename, or a crash could leave the new name
            # pointing at blocks that never reached the disk.
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        # Any failure, Ctrl-C or SIGTERM included: no temporary left behind.
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return target


def write_json(path, data: Any, inputs: Iterable = (), follow_symlinks: Optional[bool] = None,
               make_dirs: bool = False) -> str:
    """``write_atomic`` of ``data`` as indented JSON (kind ``json``)."""
    return write_atomic(path, json.dumps(data, indent=2) + "\n", kind="json", inputs=inputs,
                        follow_symlinks=follow_symlinks, make_dirs=make_dirs)


def is_stdout(path) -> bool:
    """True for the output name ``-`` (standard output, never a file)."""
    return path is not None and os.fspath(path) == STDOUT


def emit_json(path, data: Any, inputs: Iterable = (), follow_symlinks: Optional[bool] = None) -> str:
    """``--json PATH``: ``write_json`` to a file, or print the same indented
    JSON to standard output when ``path`` is ``-``. Returns what was written."""
    if is_stdout(path):
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        sys.stdout.flush()
        return STDOUT
    return write_json(path, data, inputs=inputs, follow_symlinks=follow_symlinks)
