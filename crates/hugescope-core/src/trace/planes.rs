//! Byte-plane layout of a chunk's records (`.hst` version 2).
//!
//! A chunk of n packed 64-bit records is stored as eight planes of n bytes:
//! plane p holds byte p (little-endian) of every record. Addresses of one
//! region share their high bytes and ids change rarely, so those planes are
//! long runs that zstd stores as a few matches, while the varying low bytes
//! become plain literals. Record by record, the same data costs zstd one short
//! match per record, and decoding those sequences, not the bytes, was what
//! limited trace reading (GUPS ~140M records/s, bfs ~90M records/s); planes
//! roughly double it (measurement in `docs/trace-format.md`).
//!
//! Both directions are an 8x8 byte-matrix transpose per group of eight
//! records (8 records x 8 bytes <-> 8 planes x 8 bytes), done in registers
//! with the three-stage swap of 4x4, 2x2 and 1x1 blocks.

/// Transpose an 8x8 byte matrix held as eight little-endian rows:
/// byte j of `w[i]` becomes byte i of `w[j]`. Its own inverse.
///
/// Written out step by step rather than as a loop over the three stages:
/// whether the compiler unrolled the loop depended on the build's inlining
/// (with fat LTO and one codegen unit it did not, and decoding ran at half
/// speed with the rows spilled to the stack).
#[inline(always)]
fn transpose8(w: &mut [u64; 8]) {
    // Swap the upper-right and lower-left 4x4 blocks, then 2x2, then 1x1.
    const M32: u64 = 0x0000_0000_ffff_ffff;
    const M16: u64 = 0x0000_ffff_0000_ffff;
    const M8: u64 = 0x00ff_00ff_00ff_00ff;
    swap(w, 0, 4, 32, M32);
    swap(w, 1, 5, 32, M32);
    swap(w, 2, 6, 32, M32);
    swap(w, 3, 7, 32, M32);
    swap(w, 0, 2, 16, M16);
    swap(w, 1, 3, 16, M16);
    swap(w, 4, 6, 16, M16);
    swap(w, 5, 7, 16, M16);
    swap(w, 0, 1, 8, M8);
    swap(w, 2, 3, 8, M8);
    swap(w, 4, 5, 8, M8);
    swap(w, 6, 7, 8, M8);
}

/// Exchange the `mask` bits of `w[b]` with the bits `shift` above them in `w[a]`.
#[inline(always)]
fn swap(w: &mut [u64; 8], a: usize, b: usize, shift: u32, mask: u64) {
    let t = ((w[a] >> shift) ^ w[b]) & mask;
    w[b] ^= t;
    w[a] ^= t << shift;
}

/// Write `records` as eight byte planes into `out` (length 8 x records).
pub fn to_planes(records: &[u64], out: &mut [u8]) {
    let n = records.len();
    assert_eq!(out.len(), n * 8, "plane buffer size");
    let whole = n / 8 * 8;
    for (g, group) in records[..whole].chunks_exact(8).enumerate() {
        let i = g * 8;
        let mut w: [u64; 8] = group.try_into().expect("8 records");
        transpose8(&mut w);
        for (p, v) in w.iter().enumerate() {
            out[p * n + i..p * n + i + 8].copy_from_slice(&v.to_le_bytes());
        }
    }
    for (i, r) in records.iter().enumerate().skip(whole) {
        for (p, b) in r.to_le_bytes().iter().enumerate() {
            out[p * n + i] = *b;
        }
    }
}

/// Read eight byte planes (`planes`, length 8 x `out.len()`) back into records.
pub fn from_planes(planes: &[u8], out: &mut [u64]) {
    let n = out.len();
    assert_eq!(planes.len(), n * 8, "plane buffer size");
    let whole = n / 8 * 8;
    let plane: [&[u8]; 8] = std::array::from_fn(|p| &planes[p * n..p * n + whole]);
    for (g, group) in out[..whole].chunks_exact_mut(8).enumerate() {
        let i = g * 8;
        let mut w: [u64; 8] =
            std::array::from_fn(|p| u64::from_le_bytes(plane[p][i..i + 8].try_into().expect("8 bytes")));
        transpose8(&mut w);
        group.copy_from_slice(&w);
    }
    for (i, r) in out.iter_mut().enumerate().skip(whole) {
        let mut b = [0u8; 8];
        for (p, x) in b.iter_mut().enumerate() {
            *x = planes[p * n + i];
        }
        *r = u64::from_le_bytes(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The layout by definition, one byte at a time.
    fn naive(records: &[u64]) -> Vec<u8> {
        let n = records.len();
        let mut out = vec![0u8; n * 8];
        for (i, r) in records.iter().enumerate() {
            for p in 0..8 {
                out[p * n + i] = (r >> (8 * p)) as u8;
            }
        }
        out
    }

    #[test]
    fn hand_worked_planes() {
        let recs = [0x0807_0605_0403_0201u64, 0x1817_1615_1413_1211, 0xff];
        let mut out = vec![0u8; 24];
        to_planes(&recs, &mut out);
        assert_eq!(&out[0..3], &[0x01, 0x11, 0xff]); // plane 0: low bytes
        assert_eq!(&out[3..6], &[0x02, 0x12, 0x00]);
        assert_eq!(&out[21..24], &[0x08, 0x18, 0x00]); // plane 7: high bytes
    }

    proptest! {
        #[test]
        fn matches_definition_and_round_trips(recs in proptest::collection::vec(any::<u64>(), 0..70)) {
            let mut planes = vec![0u8; recs.len() * 8];
            to_planes(&recs, &mut planes);
            prop_assert_eq!(&planes, &naive(&recs));
            let mut back = vec![0u64; recs.len()];
            from_planes(&planes, &mut back);
            prop_assert_eq!(back, recs);
        }
    }
}
