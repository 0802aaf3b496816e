//! 64-bit FNV-1a: a fast, stable content hash for the results cache's keys
//! (`result_cache`, `trace::hst::content_identity`). Paired there with a
//! CRC-32 over the same bytes; neither is a defence against a forger (the
//! cache's entries are trusted only as files of this user, `trusted_dir`).

/// FNV-1a's offset basis: the hash of no bytes.
pub const START: u64 = 0xcbf2_9ce4_8422_2325;

/// `h` extended by `bytes`.
pub fn update(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_values() {
        // The published FNV-1a 64 test vectors.
        assert_eq!(super::update(super::START, b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(super::update(super::START, b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(super::update(super::update(super::START, b"foo"), b"bar"), super::update(super::START, b"foobar"));
    }
}
