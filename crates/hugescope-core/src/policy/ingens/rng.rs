//! The seeded generator behind Ingens' sampling (which frequent pages get
//! their accessed bit cleared, §5.2): a per-run SplitMix64 stream, so runs
//! are reproducible (ingens.md 7.10).

pub struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> SplitMix {
        SplitMix(seed ^ 0x1a6e_0516_cafe_f00d)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p >= 1.0 || (p > 0.0 && ((self.next() >> 11) as f64) < p * (1u64 << 53) as f64)
    }
}
