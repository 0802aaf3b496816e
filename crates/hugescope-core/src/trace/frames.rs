//! The fixed parts of a `.hst` file (`docs/trace-format.md`): its magic
//! numbers and versions, the tags and header lengths of its frames, how a
//! chunk's payload lays out its records and the zstd level it is written at.
//! The reader and writer (`hst.rs`), the chunk encoder (`encode.rs`) and the
//! output checks that recognise a trace by its first bytes (`output.rs`)
//! share them.

/// First eight bytes of every `.hst` file. The high-bit byte and the CR LF / ^Z / LF
/// sequence (the trick PNG uses) make a text-mode transfer or a 7-bit channel
/// visibly corrupt the magic instead of silently mangling the records.
pub const MAGIC: [u8; 8] = *b"\x89HST\r\n\x1a\n";
/// Last eight bytes of a complete file: its presence means `finish()` ran.
pub const END_MAGIC: [u8; 8] = *b"\x89HSTEND\n";
/// Format version written by this code; readers reject versions they do not know.
/// Version 3 is version 2 (each chunk's records as byte planes) with the
/// preamble checksum over the version, flags and header length too; version 1
/// stored records whole, one after another. Versions 1 and 2 are read only on
/// request (`HstReader::open_legacy`, `hugescope trace convert`).
pub const VERSION: u16 = 3;
/// Oldest version this code reads (on request: see `VERSION`).
pub const MIN_READ_VERSION: u16 = 1;
/// The last version whose preamble checksum covers the header JSON alone.
pub const LAST_UNCHECKED_VERSION: u16 = 2;

/// The preamble checksum of version 3 on: CRC-32 of the version, flags and
/// header length fields (bytes 8..16) followed by the header JSON.
pub(super) fn preamble_crc(pre: &[u8], json: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&pre[8..16]);
    h.update(json);
    h.finalize()
}

/// How a chunk's uncompressed payload holds its records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Version 1: each record's 8 little-endian bytes in turn.
    Records,
    /// Versions 2 and 3: byte p of every record, for p = 0..8 (see `planes.rs`).
    Planes,
}

impl Layout {
    pub(super) fn of_version(v: u16) -> Layout {
        if v == MIN_READ_VERSION {
            Layout::Records
        } else {
            Layout::Planes
        }
    }
    pub(super) fn version(self) -> u16 {
        match self {
            Layout::Records => MIN_READ_VERSION,
            Layout::Planes => VERSION,
        }
    }
}

pub const CHUNK_TAG: [u8; 4] = *b"CHNK";
pub const FOOTER_TAG: [u8; 4] = *b"FOOT";

/// Bytes before the header JSON.
pub const PREAMBLE_LEN: u64 = 20;
/// Bytes of a chunk or footer frame header.
pub const FRAME_HEADER_LEN: u64 = 16;
/// Bytes of the trailer.
pub const TRAILER_LEN: u64 = 16;

/// zstd level -1, the first of zstd's fast levels. Traces are written once and
/// read by every simulation pass (a utility curve reads its trace dozens of
/// times), so decoding speed matters most. Fast levels store literals raw
/// instead of Huffman-coding them; the varying low bytes of addresses are
/// nearly random and gain little from Huffman coding, while decoding it was
/// the largest cost left. Measured against level 1 on byte planes (one
/// thread): decode 1.5-1.8x faster (GUPS 289 -> 516M records/s, bfs 237 ->
/// 361M), files 6-8% larger, compression no slower.
pub(super) const ZSTD_LEVEL: i32 = -1;
