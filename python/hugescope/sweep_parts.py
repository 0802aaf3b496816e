"""A sweep's finished points streamed to Parquet part files as they complete.

With Parquet among the result formats (``--results-format csv,parquet``, or
``_io.output_formats(results=["parquet"])`` from Python), a sweep keeps its
finished batches in the directory ``NAME.parts`` beside its checkpoint
(``OUT/NAME.parts``) instead of rewriting the JSON checkpoint after each batch:

- ``manifest.json``: the sweep's fingerprint (what its results depend on; see
  ``experiments._fingerprint``), written before the first part;
- ``part-NNNNN.parquet``: one file per finished batch, appended in the order
  batches finish (with the Ray backend that is not the configurations'
  order). Columns: ``config_index`` (the configuration's place in the sweep),
  the tidy row of each configuration (the columns of the final CSV) and
  ``result_json`` (the core's whole result, from which an interrupted sweep
  resumes). The schema metadata holds a digest of the fingerprint, so a part
  copied in from another run is refused rather than trusted.

Each part is written through ``_io``'s atomic writer (temporary file, fsync,
rename), so a kill at any moment, SIGKILL included, leaves whole parts and at
most a temporary file, which resuming ignores and deletes. Appending costs one
small file per batch, where the JSON checkpoint rewrites every finished point
after each batch (quadratic in the sweep's length).

``read_parts(DIR)`` gives the tidy table of the points finished so far, in
the configurations' order; once the sweep completes it equals the CSV
(tested), and the directory is removed with the checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import _io
from ._core import HugescopeError

PARTS_VERSION = 1
MANIFEST = "manifest.json"
#: Metadata key of a part's fingerprint digest.
DIGEST_KEY = b"hugescope_sweep_fingerprint"
INDEX, RESULT = "config_index", "result_json"

_PART = re.compile(r"^part-(\d{5,})\.parquet$")
# What _io's atomic writer names its temporaries: ".NAME.RANDOM.tmp".
_TEMPORARY = re.compile(r"^\.(part-\d{5,}\.parquet|manifest\.json)\..+\.tmp$")


def parts_path(checkpoint: str) -> str:
    """The part directory of the sweep whose JSON checkpoint is ``checkpoint``
    (``OUT/NAME.checkpoint.json`` -> ``OUT/NAME.parts``)."""
    checkpoint = os.fspath(checkpoint)
    stem = checkpoint[:-len(".checkpoint.json")] if checkpoint.endswith(".checkpoint.json") else checkpoint
    return stem + ".parts"


def streaming(checkpoint: Optional[str]) -> Optional[str]:
    """The part directory a sweep with this checkpoint writes to, or None: it
    streams when Parquet is among the result formats, or when an earlier run
    left parts there (so resuming never overlooks them)."""
    if not checkpoint:
        return None
    d = parts_path(checkpoint)
    return d if "parquet" in _io.RESULTS_FORMATS or os.path.lexists(d) else None


def digest(fingerprint: Dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()


def _pyarrow(directory: str):
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise HugescopeError(f"{directory}: streaming results as Parquet needs pyarrow, which is not installed: "
                             "pip install 'hugescope[parquet]'") from None
    return pyarrow


def check(directory: str, inputs: Sequence[str] = ()) -> None:
    """Before any work: the part directory, when it exists, must be a real
    directory (a symbolic link is refused unless links are followed), and its
    manifest a file the writer may replace; pyarrow must be importable."""
    _pyarrow(directory)
    if os.path.lexists(directory):
        _io.prepare_dir(directory)
        _io.check_output(os.path.join(directory, MANIFEST), "json", inputs)


def _parts(directory: str) -> List[Tuple[int, str]]:
    out = []
    for name in os.listdir(directory):
        m = _PART.match(name)
        if m:
            out.append((int(m.group(1)), os.path.join(directory, name)))
    return sorted(out)


def load(directory: str, fingerprint: Dict[str, Any], n_configs: int,
         refuse: Callable[[str, Any], None]) -> Dict[int, Dict[str, Any]]:
    """The finished results kept in ``directory``: config index -> result.
    ``refuse(where, saved_fingerprint)`` raises when the manifest belongs to
    another run. Temporaries of a killed writer are deleted; a part that
    cannot be read, or belongs to another run, is an error (never trusted)."""
    pa = _pyarrow(directory)
    import pyarrow.parquet as pq

    if not os.path.isdir(directory) or os.path.islink(directory):
        raise HugescopeError(f"{directory}: not a directory of sweep parts; delete it to start over")
    manifest = os.path.join(directory, MANIFEST)
    try:
        with open(manifest) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise HugescopeError(f"{manifest}: cannot read the parts' manifest ({e}); delete {directory} "
                             "to start over") from None
    if not isinstance(data, dict) or data.get("hugescope_sweep_parts") != PARTS_VERSION:
        raise HugescopeError(f"{manifest}: not a hugescope sweep manifest (version {PARTS_VERSION})")
    refuse(directory, data.get("fingerprint"))
    want = digest(fingerprint).encode()
    for name in os.listdir(directory):
        if _TEMPORARY.match(name):
            # A writer killed before its rename: the part never existed.
            os.unlink(os.path.join(directory, name))
    done: Dict[int, Dict[str, Any]] = {}
    for _, path in _parts(directory):
        try:
            table = pq.read_table(path)
        except (OSError, pa.ArrowException) as e:
            raise HugescopeError(f"{path}: unreadable part ({e}); delete {directory} to start over") from None
        if (table.schema.metadata or {}).get(DIGEST_KEY) != want:
            raise HugescopeError(f"{path}: a part of a different run; delete {directory} to start over")
        if INDEX not in table.column_names or RESULT not in table.column_names:
            raise HugescopeError(f"{path}: part without {INDEX}/{RESULT}; delete {directory} to start over")
        for i, text in zip(table.column(INDEX).to_pylist(), table.column(RESULT).to_pylist()):
            try:
                result = json.loads(text)
            except (TypeError, ValueError):
                result = None
            if not isinstance(i, int) or not 0 <= i < n_configs or not isinstance(result, dict) \
                    or "translation" not in result or i in done:
                raise HugescopeError(f"{path}: bad row for configuration {i!r}; delete {directory} to start over")
            done[i] = result
    return done


class PartWriter:
    """Appends finished batches to ``directory`` (created with its manifest
    on the first append, numbering after the parts already there)."""

    def __init__(self, directory: str, fingerprint: Dict[str, Any], inputs: Sequence[str] = ()):
        self.directory = directory
        self.fingerprint = fingerprint
        self.inputs = list(inputs)
        self.next = None

    def _start(self) -> None:
        _io.prepare_dir(self.directory)
        manifest = os.path.join(self.directory, MANIFEST)
        if not os.path.exists(manifest):
            _io.write_json(manifest, {"hugescope_sweep_parts": PARTS_VERSION, "fingerprint": self.fingerprint},
                           inputs=self.inputs)
        parts = _parts(self.directory)
        self.next = parts[-1][0] + 1 if parts else 0

    def append(self, batch: Sequence[Tuple[int, Dict[str, Any], Optional[Dict[str, Any]]]]) -> str:
        """Write one part: (config index, result, tidy row or None) per
        configuration. Returns the part's path."""
        pa = _pyarrow(self.directory)
        import pyarrow.parquet as pq

        if self.next is None:
            self._start()
        records = [{INDEX: i, **(row or {}), RESULT: json.dumps(result)} for i, result, row in batch]
        table = pa.Table.from_pylist(records)
        table = table.replace_schema_metadata({DIGEST_KEY: digest(self.fingerprint).encode()})
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        path = os.path.join(self.directory, f"part-{self.next:05d}.parquet")
        target = _io.check_output(path, None, self.inputs, head=b"PAR1")
        _io._write_file(target, sink.getvalue().to_pybytes())
        self.next += 1
        return path


def read_parts(directory: str):
    """The tidy rows streamed so far into ``directory``, as a DataFrame in
    the configurations' order (the columns of the experiment's CSV; the
    ``config_index`` and ``result_json`` columns left out). Rows are rebuilt
    from Python values, so column types are those of the final table."""
    import pandas as pd

    _pyarrow(directory)
    import pyarrow.parquet as pq

    if not os.path.isdir(directory):
        raise HugescopeError(f"{directory}: not a directory of sweep parts")
    rows = []
    for _, path in _parts(directory):
        rows.extend(pq.read_table(path).to_pylist())
    rows.sort(key=lambda r: r[INDEX])
    return pd.DataFrame([{k: v for k, v in r.items() if k not in (INDEX, RESULT)} for r in rows])


def remove(directory: Optional[str]) -> None:
    """Delete a finished sweep's parts: only the files this module writes,
    then the directory if nothing else is in it (a user's file stays)."""
    if not directory or not os.path.isdir(directory) or os.path.islink(directory):
        return
    for name in os.listdir(directory):
        if name == MANIFEST or _PART.match(name) or _TEMPORARY.match(name):
            try:
                os.unlink(os.path.join(directory, name))
            except FileNotFoundError:
                pass
    try:
        os.rmdir(directory)
    except OSError:
        pass
