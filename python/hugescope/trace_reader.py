"""Reading ``.hst`` traces into numpy, chunk by chunk, through the core's
reader (``hugescope_core::trace::hst::HstReader``; the format is
``docs/trace-format.md``).

The core decodes each chunk (zstd, checksums, byte planes) with the GIL
released and hands over its accesses as packed records; here they become a
numpy structured array of ``ACCESS_DTYPE`` (``addr`` uint64, ``write`` bool,
``cpu`` uint16, ``pid`` uint16) without another copy. Memory stays bounded by
one chunk (at most 2^20 accesses) while iterating ``chunks``; ``read_accesses``
keeps the whole trace and is meant for small ones (a plot, a test).

A damaged or truncated file raises ``HugescopeError`` naming the file and the
byte offset, exactly as ``hugescope simulate`` would refuse it.

    for a in hugescope.trace_reader.chunks("gups.hst"):
        writes += int(a["write"].sum())
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterator

from . import _core

__all__ = ["ACCESS_DTYPE", "chunks", "read_accesses", "read_header"]


def _access_dtype():
    import numpy as np

    dt = np.dtype([("addr", "<u8"), ("write", "?"), ("cpu", "<u2"), ("pid", "<u2")])
    assert dt.itemsize == _core.TRACE_RECORD_BYTES  # the core's record layout
    return dt


def __getattr__(name):
    # ACCESS_DTYPE is built lazily so read_header works without numpy.
    if name == "ACCESS_DTYPE":
        return _access_dtype()
    raise AttributeError(name)


def _open(path) -> Any:
    if not isinstance(path, (str, os.PathLike)):
        raise _core.HugescopeError(f"trace: expected a file path, not {path!r}")
    return _core.TraceReader(os.fspath(path))


def read_header(path) -> Dict[str, Any]:
    """The trace header (workload, params, regions, ...), as the core reads it."""
    return json.loads(_open(path).header_json())


def chunks(path) -> Iterator[Any]:
    """The accesses of ``path`` in trace order, one numpy array
    (``ACCESS_DTYPE``) per chunk of the file; the stream is checked against
    the footer's counts at the end."""
    import numpy as np

    dt = _access_dtype()
    reader = _open(path)
    while True:
        raw = reader.next_chunk()
        if raw is None:
            return
        yield np.frombuffer(raw, dtype=dt)


def read_accesses(path) -> Any:
    """Every access of ``path`` as one array (``ACCESS_DTYPE``), in trace order."""
    import numpy as np

    parts = list(chunks(path))
    return np.concatenate(parts) if parts else np.empty(0, dtype=_access_dtype())
