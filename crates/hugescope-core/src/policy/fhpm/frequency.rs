//! Access frequency per 4KB region, from accessed-bit rounds (FHPM §4.2,
//! Table 4): a page's frequency is the number of scan rounds in which the
//! leaf mapping it had its A bit set. A huge leaf has one A bit, so all of
//! its pages share one count (the hot bloat of §3.1); a base leaf counts for
//! its own page. Normalized to 0..100 for reporting, binned as Table 4.

use crate::os::accessed::YoungLeaf;
use crate::policy::Ctx;

/// Table 4's normalized-frequency bins.
pub const FREQ_BINS: usize = 5;
pub const FREQ_BIN_LABELS: [&str; FREQ_BINS] = ["[0,20)", "[20,40)", "[40,60)", "[60,80)", "[80,100]"];

/// The Table 4 bin of `count` accessed rounds out of `rounds`: bin b holds
/// normalized frequencies 100 x count / rounds in [20b, 20b + 20), the last
/// bin [80, 100] closed. Exact in integers.
pub fn freq_bin(count: u32, rounds: u32) -> usize {
    if rounds == 0 {
        return 0;
    }
    ((count.min(rounds) as u64 * 5 / rounds as u64) as usize).min(FREQ_BINS - 1)
}

/// Per-page round counts of one VMA.
#[derive(Clone, Debug)]
struct VmaCounts {
    pid: u16,
    start: u64,
    end: u64,
    counts: Vec<u8>,
}

/// Round counts of every page of every VMA of the monitored processes, for
/// one monitoring window.
#[derive(Clone, Debug, Default)]
pub struct FreqMap {
    vmas: Vec<VmaCounts>,
    base_shift: u32,
    /// Index of the VMA the last lookup hit (scans visit leaves in order).
    cursor: usize,
}

impl FreqMap {
    /// Zero counts over the VMAs of every process of `k`.
    pub fn new(k: &Ctx<'_>) -> FreqMap {
        let v = k.view();
        let mut vmas = Vec::new();
        for pid in 0..v.processes() as u16 {
            for m in v.vmas(pid) {
                vmas.push(VmaCounts { pid, start: m.start(), end: m.end(), counts: vec![0; m.pages() as usize] });
            }
        }
        FreqMap { vmas, base_shift: k.shape().base_shift, cursor: 0 }
    }

    fn find(&mut self, pid: u16, addr: u64) -> Option<usize> {
        let hit = |m: &VmaCounts| m.pid == pid && addr >= m.start && addr < m.end;
        if self.vmas.get(self.cursor).is_some_and(hit) {
            return Some(self.cursor);
        }
        let i = self.vmas.iter().position(hit)?;
        self.cursor = i;
        Some(i)
    }

    /// One round's reading of one leaf: every page it maps gains a round if
    /// its A bit was set (saturating at 255 rounds).
    pub fn record(&mut self, pid: u16, leaf: &YoungLeaf) {
        if !leaf.accessed {
            return;
        }
        let bs = self.base_shift;
        if let Some(i) = self.find(pid, leaf.addr) {
            let m = &mut self.vmas[i];
            let a = ((leaf.addr - m.start) >> bs) as usize;
            let b = (a + leaf.pages as usize).min(m.counts.len());
            for c in &mut m.counts[a..b] {
                *c = c.saturating_add(1);
            }
        }
    }

    /// Rounds in which the page at `addr` was accessed (0 outside every VMA).
    pub fn count(&self, pid: u16, addr: u64) -> u32 {
        let bs = self.base_shift;
        self.vmas
            .iter()
            .find(|m| m.pid == pid && addr >= m.start && addr < m.end)
            .map_or(0, |m| m.counts[((addr - m.start) >> bs) as usize] as u32)
    }

    /// Every page: (pid, address, count), in VMA order.
    pub fn pages(&self) -> impl Iterator<Item = (u16, u64, u32)> + '_ {
        let bs = self.base_shift;
        self.vmas.iter().flat_map(move |m| m.counts.iter().enumerate().map(move |(j, &c)| (m.pid, m.start + ((j as u64) << bs), c as u32)))
    }

    /// Bytes of all monitored VMAs of `pid` (the VM's memory, s_tot).
    pub fn bytes_of(&self, pid: u16) -> u64 {
        self.vmas.iter().filter(|m| m.pid == pid).map(|m| m.end - m.start).sum()
    }

    /// The monitored processes, ascending.
    pub fn pids(&self) -> Vec<u16> {
        let mut p: Vec<u16> = self.vmas.iter().map(|m| m.pid).collect();
        p.dedup();
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_are_table_4s() {
        // 10 rounds: 0-1 -> [0,20), 2-3 -> [20,40), ..., 8-10 -> [80,100].
        let b: Vec<usize> = (0..=10).map(|c| freq_bin(c, 10)).collect();
        assert_eq!(b, vec![0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 4]);
        assert_eq!(freq_bin(5, 5), 4);
        assert_eq!(freq_bin(0, 0), 0);
    }
}
