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

Formats (the top-level ``--results-format`` and ``--plot-format``, or
``output_formats`` from Python): every CSV written here gets a Parquet twin
(``NAME.parquet``, the same table read back by pandas) when ``parquet`` is
among ``RESULTS_FORMATS``, and ``plots.save_figures`` writes each figure in
every one of ``PLOT_FORMATS``. ``check_output`` of a CSV or PNG checks those
twins too, so a command's checks before its work cover them.

``-`` names standard output (``--json -``): ``is_stdout`` says so, and
``emit_json`` is the one place it bypasses the file checks and the writer, so
no command ever creates a file named ``-``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any, Iterable, Optional, Union

from . import _core

#: Follow symbolic links named as outputs (write to the link's target) instead
#: of refusing them. The CLI sets it for the duration of one command from the
#: top-level ``--follow-symlinks``; API callers may pass ``follow_symlinks=``.
FOLLOW_SYMLINKS = False

#: Output kinds the core recognises (see ``hugescope_core::output::Kind``).
KINDS = ("hst", "json", "csv", "html", "png", "svg", "pdf", "elf")

#: The output name meaning standard output (the Unix convention).
STDOUT = "-"

#: Table formats of result files: CSV always; "parquet" adds a twin per CSV.
RESULTS_FORMATS = ("csv",)
#: Figure formats: each figure is written once per format, ``STEM.FORMAT``.
PLOT_FORMATS = ("png",)
TABLE_FORMAT_CHOICES = ("csv", "parquet")
PLOT_FORMAT_CHOICES = ("png", "svg", "pdf")

_HEAD = 512  # bytes of new content the kind is sniffed from (hugescope_core::output::SNIFF_BYTES)

#: Every output completed (renamed onto its name) since ``written.clear()``:
#: the CLI clears it when a command starts, so that an interruption after a
#: result was written says that it was (and where), not "no result".
written: list = []


def note_written(path) -> None:
    """Record a complete output (``write_atomic`` does; so do the callers of
    the core's trace writers, which stage and rename on their own)."""
    written.append(os.fspath(path))


def _no_duplicate_keys(pairs):
    """json object hook: a key given twice is an error, never 'the last wins'."""
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"key {_core.shown(k)!s} appears twice in one object")
        out[k] = v
    return out


def _no_constants(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def read_json(path, what: str, limit: str = "result") -> Any:
    """An input JSON file (results, checkpoints, measurements) read the way every
    input is: a FIFO, socket or device refused before reading, at most the size
    limit ``limit`` (``hugescope_core::input``), no duplicate keys, no NaN or
    infinities. Errors are ``ValueError`` with one line naming the file."""
    text = _core.read_input(os.fspath(path), what, limit)
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constants)
    except ValueError as e:
        raise ValueError(f"{_core.shown(os.fspath(path))}: {what} is not valid JSON ({_core.shown(str(e))})") from None


def _follow(follow_symlinks: Optional[bool]) -> bool:
    return FOLLOW_SYMLINKS if follow_symlinks is None else bool(follow_symlinks)


def parse_formats(text: str, choices: Iterable[str], what: str) -> tuple:
    """``"png,svg"`` as a tuple of formats, each one of ``choices``, in the
    order given, without repeats; raises ``HugescopeError`` naming ``what``."""
    choices = tuple(choices)
    out = []
    for f in str(text).split(","):
        f = f.strip().lower()
        if f not in choices:
            where = "" if f == str(text) else f" (in '{text}')"
            raise _core.HugescopeError(f"{what}: '{f}' is not a format{where}; expected a comma-separated list of "
                                       f"{', '.join(choices)}")
        if f not in out:
            out.append(f)
    return tuple(out)


@contextlib.contextmanager
def output_formats(results: Optional[Iterable[str]] = None, plots: Optional[Iterable[str]] = None):
    """Within the block, result tables are written in ``results`` (CSV always
    included) and figures in ``plots``; the previous formats come back after."""
    global RESULTS_FORMATS, PLOT_FORMATS
    old = RESULTS_FORMATS, PLOT_FORMATS
    try:
        if results is not None:
            RESULTS_FORMATS = tuple(dict.fromkeys(("csv",) + parse_formats(",".join(results), TABLE_FORMAT_CHOICES,
                                                                           "--results-format")))
        if plots is not None:
            PLOT_FORMATS = parse_formats(",".join(plots), PLOT_FORMAT_CHOICES, "--plot-format")
        yield
    finally:
        RESULTS_FORMATS, PLOT_FORMATS = old


def twin(path, fmt: str) -> str:
    """``path`` with its extension replaced by ``fmt`` (``a/b.csv`` -> ``a/b.parquet``)."""
    return os.path.splitext(os.fspath(path))[0] + "." + fmt


def _twins(path, kind: Optional[str]) -> list:
    """(path, kind) of the files written beside an output of ``kind``."""
    if kind == "csv" and "parquet" in RESULTS_FORMATS:
        return [(twin(path, "parquet"), None)]  # Parquet is no kind the core sniffs: any non-hugescope file
    if kind == "png":
        return [(twin(path, f), f) for f in PLOT_FORMATS if f != "png"]
    return []


def check_output(path, kind: Optional[str] = None, inputs: Iterable = (), follow_symlinks: Optional[bool] = None,
                 head: Optional[bytes] = None) -> str:
    """Refuse an output target that must not be replaced (raises
    ``HugescopeError`` naming the path and why); return the path the finished
    file must be renamed onto (the link's target when following links).
    ``kind``: one of ``KINDS``; without it, the kind is sniffed from ``head``
    (the first bytes of the new content). The twins of a CSV or PNG in the
    other formats asked for are checked too."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"output kind '{kind}' is not one of {', '.join(KINDS)}")
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise _core.HugescopeError(f"output: expected a file path, not {_core.shown(repr(path))}")
    inputs = [p for p in inputs if p is not None]
    for other, other_kind in _twins(path, kind):
        if other_kind is None:
            _require_pyarrow(other)  # before the work, not after it
        _check_one(other, other_kind, inputs, follow_symlinks, None)
    return _check_one(path, kind, inputs, follow_symlinks, head)


def _check_one(path, kind, inputs, follow_symlinks, head) -> str:
    return os.fspath(_core.check_output(os.fspath(path), kind, None if head is None else bytes(head[:_HEAD]),
                                        [os.fspath(p) for p in inputs], _follow(follow_symlinks)))


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


def write_atomic(path, data: Union[str, bytes], kind: Optional[str] = None, inputs: Iterable = (),
                 follow_symlinks: Optional[bool] = None, make_dirs: bool = False) -> str:
    """Write ``data`` (text or bytes) to ``path`` atomically after the checks
    of ``check_output`` (``kind`` sniffed from ``data`` when not given).
    A missing directory is an error (a mistyped path must not grow a tree of
    directories), unless ``make_dirs`` (for the tool's own places, such as
    its configuration directory). Returns the path written."""
    blob = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    inputs = list(inputs)
    if make_dirs:
        prepare_dir(os.path.dirname(os.path.abspath(os.fspath(path))), follow_symlinks)
    target = check_output(path, kind, inputs, follow_symlinks, head=blob[:_HEAD])
    _write_file(target, blob)
    if kind == "csv" and "parquet" in RESULTS_FORMATS:
        # The twin is made from the CSV itself, so both files always hold the
        # same table whichever code wrote it (types as pandas reads the CSV).
        _write_file(_check_one(twin(path, "parquet"), None, inputs, follow_symlinks, b"PAR1"),
                    _parquet(blob, twin(path, "parquet")))
    return target


def _require_pyarrow(path) -> None:
    try:
        import pyarrow  # noqa: F401 - pandas writes Parquet through it
    except ImportError:
        raise _core.HugescopeError(f"{path}: Parquet output needs pyarrow, which is not installed: "
                                   "pip install 'hugescope[parquet]'") from None


def _parquet(csv_blob: bytes, path: str) -> bytes:
    import io

    import pandas as pd

    _require_pyarrow(path)
    buf = io.BytesIO()
    df = pd.read_csv(io.BytesIO(csv_blob)) if csv_blob.strip() else pd.DataFrame()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


def _write_file(target: str, blob: bytes) -> None:
    # The core's staged writer (hugescope_core::output::Staged): the file is
    # unnamed (O_TMPFILE) until fsync'd and renamed onto the target, so a
    # failure, a signal or even SIGKILL leaves no temporary behind; mode
    # 0666 less umask; errors (a full disk) name the target.
    _core.write_staged(os.fspath(target), blob)
    note_written(target)
    return target


def dumps(data: Any) -> str:
    """``data`` as indented JSON. A simulation result (``SimResult``,
    ``RegionProfile``) or a
    list of them is written by the core from its typed records
    (``Record.to_json``; the same bytes ``json.dumps`` gives their dicts)."""
    from .results import RegionProfile, SimResult

    if isinstance(data, (SimResult, RegionProfile)):
        return data.to_json(2)
    if isinstance(data, list) and data and all(isinstance(r, SimResult) for r in data):
        return _core.records_to_json([r.record for r in data], 2)
    return json.dumps(data, indent=2)


def write_json(path, data: Any, inputs: Iterable = (), follow_symlinks: Optional[bool] = None,
               make_dirs: bool = False) -> str:
    """``write_atomic`` of ``data`` as indented JSON (kind ``json``; ``dumps``)."""
    return write_atomic(path, dumps(data) + "\n", kind="json", inputs=inputs,
                        follow_symlinks=follow_symlinks, make_dirs=make_dirs)


def is_stdout(path) -> bool:
    """True for the output name ``-`` (standard output, never a file)."""
    return path is not None and os.fspath(path) == STDOUT


def emit_json(path, data: Any, inputs: Iterable = (), follow_symlinks: Optional[bool] = None) -> str:
    """``--json PATH``: ``write_json`` to a file, or print the same indented
    JSON to standard output when ``path`` is ``-``. Returns what was written."""
    if is_stdout(path):
        sys.stdout.write(dumps(data) + "\n")
        sys.stdout.flush()
        return STDOUT
    return write_json(path, data, inputs=inputs, follow_symlinks=follow_symlinks)
