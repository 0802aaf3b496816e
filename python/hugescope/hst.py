"""Pure-Python reader for hugescope ``.hst`` trace files.

Meant for small traces: inspecting a header, loading a few million accesses into
numpy for a plot or a test. Long traces should go through the Rust reader (the
simulator or the PyO3 bindings), which streams at over 100 million records/s.

The byte layout is specified in ``docs/trace-format.md``. In short::

    preamble   magic[8] version:u16 flags:u16 header_len:u32 preamble_crc:u32
               (version 3: CRC-32 of bytes 8..16 and the header JSON)
    header     JSON (TraceHeader)
    chunk*     "CHNK" records:u32 payload_len:u32 crc32:u32  zstd(payload)
               payload = 8 byte planes of the records (versions 2, 3) or the
               records themselves, 8 bytes each (version 1)
    footer     "FOOT" json_len:u32 json_crc:u32 reserved:u32  JSON (TraceSummary)
    trailer    footer_offset:u64 b"\\x89HSTEND\\n"

Every problem with the file's content raises ``ValueError`` whose message names
the file and the byte offset (``"PATH: at byte N: what"``), like the Rust
reader's ``Error::Format``. Missing files and permissions raise ``OSError``.

Public functions:

* ``read_header(path) -> dict``: the header JSON (workload, params, regions, ...).
* ``read_summary(path) -> dict``: the footer JSON (counts, markers), read
  through the trailer without decompressing anything.
* ``read_accesses(path) -> numpy.ndarray``: every access, as a structured array
  with fields ``addr`` (uint64), ``write`` (bool), ``cpu`` (uint16) and
  ``pid`` (uint16), in trace order.
"""

from __future__ import annotations

import json
import os
import struct
import zlib

__all__ = [
    "ACCESS_DTYPE",
    "VERSION",
    "read_accesses",
    "read_header",
    "read_summary",
]

MAGIC = b"\x89HST\r\n\x1a\n"
END_MAGIC = b"\x89HSTEND\n"
VERSION = 3
MIN_READ_VERSION = 3
CHUNK_TAG = b"CHNK"
FOOTER_TAG = b"FOOT"
PREAMBLE_LEN = 20
FRAME_HEADER_LEN = 16
TRAILER_LEN = 16
MAX_CHUNK_RECORDS = 1 << 20
MAX_HEADER_BYTES = 16 << 20
MAX_FOOTER_BYTES = 64 << 20
ADDR_MASK = (1 << 48) - 1


def _compress_bound(n: int) -> int:
    # ZSTD_COMPRESSBOUND from zstd.h: the largest payload a valid chunk of n
    # uncompressed bytes can have; anything larger is a corrupt length field.
    margin = ((128 << 10) - n) >> 11 if n < (128 << 10) else 0
    return n + (n >> 8) + margin


def _access_dtype():
    import numpy as np

    return np.dtype(
        [("addr", np.uint64), ("write", np.bool_), ("cpu", np.uint16), ("pid", np.uint16)]
    )


def __getattr__(name):
    # ACCESS_DTYPE is built lazily so read_header/read_summary work without numpy.
    if name == "ACCESS_DTYPE":
        return _access_dtype()
    raise AttributeError(name)


class _File:
    """An open trace with bounds-checked reads that raise ValueError."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self.f = open(self.path, "rb")
        try:
            self.size = os.fstat(self.f.fileno()).st_size
        except BaseException:
            self.f.close()
            raise

    def close(self):
        self.f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def error(self, offset, msg):
        return ValueError(f"{self.path}: at byte {offset}: {msg}")

    def read_at(self, offset, n):
        self.f.seek(offset)
        b = self.f.read(n)
        if len(b) != n:
            raise self.error(offset, f"unexpected end of file while reading {n} bytes")
        return b

    def header(self):
        """Check the preamble; return (header dict, offset of the first frame)."""
        if self.size == 0:
            raise self.error(0, "empty file, not an .hst trace")
        have = min(self.size, PREAMBLE_LEN)
        pre = self.read_at(0, have)
        m = min(have, 8)
        if pre[:m] != MAGIC[:m]:
            hint = " (this looks like a bare zstd stream)" if pre[:4] == b"\x28\xb5\x2f\xfd" else ""
            raise self.error(0, "wrong magic number: not an .hst trace" + hint)
        if have < PREAMBLE_LEN:
            raise self.error(
                self.size,
                f"truncated header: file ends after {self.size} bytes, "
                f"the preamble alone is {PREAMBLE_LEN}",
            )
        version, flags, hlen, hcrc = struct.unpack_from("<HHII", pre, 8)
        if version in (1, 2):
            raise self.error(8, f"format version {version}, written by an older hugescope: convert it once with "
                                "'hugescope trace convert FILE -o NEW.hst'")
        if not MIN_READ_VERSION <= version <= VERSION:
            raise self.error(8, f"unsupported .hst version {version} (this reader reads version {VERSION})")
        if flags != 0:
            raise self.error(10, f"unknown header flags {flags:#06x} (version {version} defines none)")
        self.version = version
        if hlen > MAX_HEADER_BYTES:
            raise self.error(12, f"header length {hlen} exceeds the {MAX_HEADER_BYTES}-byte limit (corrupt file?)")
        if PREAMBLE_LEN + hlen > self.size:
            raise self.error(
                self.size,
                f"truncated header: it declares {hlen} bytes of JSON but the file ends at byte {self.size}",
            )
        raw = self.read_at(PREAMBLE_LEN, hlen)
        # Version 3: the checksum covers the version, flags and header length too.
        if zlib.crc32(raw, zlib.crc32(pre[8:16])) != hcrc:
            raise self.error(8, "preamble checksum mismatch: the version, flags, header length or header "
                                "were changed (corrupt file)")
        try:
            header = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise self.error(PREAMBLE_LEN, f"invalid header JSON: {e}") from None
        if not isinstance(header, dict) or not isinstance(header.get("workload"), str):
            raise self.error(PREAMBLE_LEN, "invalid header JSON: not an object with a 'workload' string")
        return header, PREAMBLE_LEN + hlen

    def footer_at(self, at):
        """Parse and check the footer frame at `at` and the trailer after it."""
        fh = self.read_at(at, FRAME_HEADER_LEN)
        if fh[:4] != FOOTER_TAG:
            raise self.error(at, "trailer does not point to a footer frame (corrupt trailer)")
        jlen, jcrc, reserved = struct.unpack_from("<III", fh, 4)
        if reserved != 0:
            raise self.error(at + 12, "reserved footer field is not zero")
        if jlen > MAX_FOOTER_BYTES:
            raise self.error(at + 4, f"footer length {jlen} exceeds the {MAX_FOOTER_BYTES}-byte limit")
        json_at = at + FRAME_HEADER_LEN
        end = json_at + jlen
        if end + TRAILER_LEN > self.size:
            raise self.error(
                self.size,
                f"truncated footer: {jlen} bytes of JSON at byte {json_at} plus the trailer do not fit in the file",
            )
        if end + TRAILER_LEN != self.size:
            raise self.error(end, f"{self.size - TRAILER_LEN - end} unexpected bytes between the footer and the trailer")
        raw = self.read_at(json_at, jlen)
        if zlib.crc32(raw) != jcrc:
            raise self.error(json_at, "footer checksum mismatch (corrupt footer)")
        trailer = self.read_at(end, TRAILER_LEN)
        if trailer[8:] != END_MAGIC:
            raise self.error(end + 8, "wrong trailer magic (corrupt trailer)")
        if struct.unpack_from("<Q", trailer)[0] != at:
            raise self.error(end, "trailer does not point to the footer")
        try:
            s = json.loads(raw.decode("utf-8"))
            accesses = int(s["accesses"])
            ok = (
                int(s["reads"]) + int(s["writes"]) == accesses
                and sum(s["per_cpu"]) == accesses
                and sum(s["per_pid"]) == accesses
            )
        except (UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
            raise self.error(json_at, f"invalid footer JSON: {e}") from None
        if not ok:
            raise self.error(json_at, "inconsistent footer: counts do not add up")
        return s


def read_header(path) -> dict:
    """Return the trace header (a dict) after checking the preamble and checksum."""
    with _File(path) as f:
        return f.header()[0]


def read_summary(path) -> dict:
    """Return the footer summary (a dict) without decompressing any chunk.

    Raises ValueError for a truncated file (no trailer).
    """
    with _File(path) as f:
        _, data_start = f.header()
        if f.size >= data_start + FRAME_HEADER_LEN + TRAILER_LEN:
            trailer = f.read_at(f.size - TRAILER_LEN, TRAILER_LEN)
            if trailer[8:] == END_MAGIC:
                at = struct.unpack_from("<Q", trailer)[0]
                if at < data_start or at > f.size - TRAILER_LEN - FRAME_HEADER_LEN:
                    raise f.error(f.size - TRAILER_LEN, f"trailer points to a footer at byte {at}, outside the data")
                return f.footer_at(at)
        raise f.error(f.size, "no footer: the file is truncated or the writer never finished")


def read_accesses(path):
    """Return every access of the trace as a numpy structured array.

    Fields: ``addr`` (uint64), ``write`` (bool), ``cpu`` (uint16), ``pid``
    (uint16). The whole trace is held in memory: use it for small traces.
    """
    import numpy as np
    import zstandard

    dctx = zstandard.ZstdDecompressor()
    parts = []
    with _File(path) as f:
        _, at = f.header()
        records = chunks = compressed = 0
        while True:
            left = f.size - at
            if left == 0:
                raise f.error(at, "file ends without a footer (truncated file, or the writer never finished)")
            if left < FRAME_HEADER_LEN:
                raise f.error(f.size, f"truncated frame header at byte {at}: only {left} bytes left")
            fh = f.read_at(at, FRAME_HEADER_LEN)
            tag = fh[:4]
            if tag == FOOTER_TAG:
                s = f.footer_at(at)
                for key, seen in (("accesses", records), ("chunks", chunks), ("compressed_bytes", compressed)):
                    if int(s[key]) != seen:
                        raise f.error(at, f"footer says {s[key]} {key}, the chunks hold {seen}")
                break
            if tag != CHUNK_TAG:
                raise f.error(at, f"expected a chunk or footer frame, found tag {tag!r}")
            count, clen, crc = struct.unpack_from("<III", fh, 4)
            if not 1 <= count <= MAX_CHUNK_RECORDS:
                raise f.error(at + 4, f"chunk record count {count} outside 1..={MAX_CHUNK_RECORDS}")
            raw_len = count * 8
            if not 1 <= clen <= _compress_bound(raw_len):
                raise f.error(at + 8, f"chunk payload length {clen} impossible for {count} records")
            payload_at = at + FRAME_HEADER_LEN
            if clen > f.size - payload_at:
                raise f.error(
                    f.size, f"truncated chunk at byte {at}: payload of {clen} bytes but only {f.size - payload_at} left"
                )
            payload = f.read_at(payload_at, clen)
            try:
                # max_output_size bounds memory even if the frame lies about its size.
                raw = dctx.decompress(payload, max_output_size=raw_len)
            except zstandard.ZstdError as e:
                raise f.error(payload_at, f"chunk at byte {at} does not decompress ({e}): corrupt payload") from None
            if len(raw) != raw_len:
                raise f.error(
                    payload_at,
                    f"record count mismatch in chunk at byte {at}: header says {count} records, "
                    f"payload holds {len(raw)} bytes",
                )
            if zlib.crc32(raw) != crc:
                raise f.error(payload_at, f"checksum mismatch in chunk at byte {at}: corrupt data")
            if f.version >= 2:
                # Byte planes (plane p = byte p of every record): back to records.
                planes = np.frombuffer(raw, dtype=np.uint8).reshape(8, count)
                parts.append(np.ascontiguousarray(planes.T).view("<u8").reshape(count))
            else:
                parts.append(np.frombuffer(raw, dtype="<u8"))
            records += count
            chunks += 1
            compressed += clen
            at = payload_at + clen

    packed = np.concatenate(parts) if parts else np.zeros(0, dtype="<u8")
    out = np.empty(packed.shape[0], dtype=_access_dtype())
    out["addr"] = packed & np.uint64(ADDR_MASK)
    out["cpu"] = (packed >> np.uint64(48)) & np.uint64(0xFF)
    out["pid"] = (packed >> np.uint64(56)) & np.uint64(0x7F)
    out["write"] = (packed >> np.uint64(63)) != 0
    return out
