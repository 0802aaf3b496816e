//! The accessed-bit scanner every monitor shares (FHPM §4.2.1; Table 4's
//! scanners differ only in what is mapped how while they scan, not here):
//! one round reads every leaf of a VM's memory and clears the A bits that
//! were set, then invalidates those leaves in the TLBs with one batched
//! flush (a TLB-resident translation would never set a cleared bit again,
//! spec §2; `Ctx::scan_young` marks the flush `keeps_mapping`). Cost:
//! one entry read/write per leaf (`scan_pte_us`), charged to the daemon.

use super::frequency::FreqMap;
use crate::policy::Ctx;

/// Leaves visited by one round over `pid`'s memory, recording into `freq`
/// if given (None: the round only arms the bits at a window's start).
pub fn round(k: &mut Ctx<'_>, pid: u16, mut freq: Option<&mut FreqMap>) -> u64 {
    let mut leaves = 0u64;
    k.scan_young(pid, 0, u64::MAX, true, &mut |l| {
        leaves += 1;
        if let Some(f) = freq.as_deref_mut() {
            f.record(pid, &l);
        }
        l.accessed
    });
    k.charge_policy_us(leaves as f64 * k.os_costs().scan_pte_us);
    leaves
}

/// Stage 2's single read of a redirected leaf at its window's end (FHPM
/// §4.2.2): the companion PTEs' A bits as a bitmap over the leaf's pages
/// (bit j: page j accessed). No clear, no flush: the restore flushes.
pub fn read_companion(k: &mut Ctx<'_>, pid: u16, start: u64) -> Vec<u64> {
    let bs = k.shape().base_shift;
    let pages = (k.region_bytes() >> bs) as usize;
    let mut bits = vec![0u64; pages.div_ceil(64)];
    k.scan_young(pid, start, start + k.region_bytes(), false, &mut |l| {
        if l.accessed {
            for j in 0..l.pages as usize {
                let p = ((l.addr - start) >> bs) as usize + j;
                bits[p / 64] |= 1 << (p % 64);
            }
        }
        false
    });
    k.charge_policy_us(pages as f64 * k.os_costs().scan_pte_us);
    bits
}

/// Whether page `j` is set in a companion bitmap.
pub fn bit(bits: &[u64], j: usize) -> bool {
    bits[j / 64] >> (j % 64) & 1 == 1
}

/// Pages set in a companion bitmap (Ns).
pub fn ones(bits: &[u64]) -> u32 {
    bits.iter().map(|w| w.count_ones()).sum()
}
