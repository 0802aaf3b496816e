//! Building and taking apart `.hst` files byte by byte, from the layout in
//! docs/trace-format.md (independently of the reader): shared by the format
//! tests (`hst.rs`), the limit tests (`limits.rs`) and the fuzz harness.

use hugescope_core::trace::{Access, ADDR_MASK};

/// Deterministic pseudo-random accesses (xorshift), covering all fields.
pub fn accesses(n: usize, seed: u64) -> Vec<Access> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            Access {
                addr: x & ADDR_MASK,
                write: x >> 63 == 1,
                cpu: ((x >> 48) & 0xff) as u16,
                pid: ((x >> 56) & 0x7f) as u16,
            }
        })
        .collect()
}

pub fn u32_at(b: &[u8], at: u64) -> u32 {
    u32::from_le_bytes(b[at as usize..at as usize + 4].try_into().unwrap())
}

/// The header JSON of a file.
/// The version-3 preamble checksum: CRC-32 of the version, flags and header
/// length fields (bytes 8..16 of `pre`) followed by the header JSON.
pub fn preamble_crc(pre: &[u8], json: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&pre[8..16]);
    h.update(json);
    h.finalize()
}

pub fn header_json(bytes: &[u8]) -> &[u8] {
    &bytes[20..20 + u32_at(bytes, 12) as usize]
}

/// The same file with its header JSON replaced by `json`, with a valid
/// checksum, and the trailer's footer offset moved by the size difference:
/// a crafted header that every framing check accepts.
pub fn splice_header(bytes: &[u8], json: &[u8]) -> Vec<u8> {
    let data_start = 20 + u32_at(bytes, 12) as usize;
    let trailer = bytes.len() - 16;
    let footer = u64::from_le_bytes(bytes[trailer..trailer + 8].try_into().unwrap());
    let moved = footer as i64 + json.len() as i64 - (data_start as i64 - 20);
    let mut b = bytes[..12].to_vec();
    b.extend_from_slice(&(json.len() as u32).to_le_bytes());
    b.extend_from_slice(&preamble_crc(&b, json).to_le_bytes());
    b.extend_from_slice(json);
    b.extend_from_slice(&bytes[data_start..trailer]);
    b.extend_from_slice(&(moved as u64).to_le_bytes());
    b.extend_from_slice(&bytes[trailer + 8..]);
    b
}
