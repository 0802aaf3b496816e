//! What a trace's footer records (`TraceSummary`: counts per cpu and pid,
//! the address range, the markers) and the running tally a writer or a
//! verifying reader keeps of the records it sees.

use super::{ADDR_MASK, MAX_CPUS, MAX_PIDS};
use serde::{Deserialize, Serialize};

/// A progress point of the generator: `index` accesses had been written when it
/// was reached (so it sits just before record `index`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Marker {
    pub index: u64,
    pub label: String,
}

/// Counts kept in the footer, so tools can describe a trace without decoding it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceSummary {
    pub accesses: u64,
    pub reads: u64,
    pub writes: u64,
    /// Accesses per cpu id; length = highest cpu id seen + 1 (empty if no accesses).
    pub per_cpu: Vec<u64>,
    /// Accesses per pid; length = highest pid seen + 1 (empty if no accesses).
    pub per_pid: Vec<u64>,
    pub chunks: u64,
    /// Sum of the zstd payload lengths (frame headers not included).
    pub compressed_bytes: u64,
    /// Lowest and highest address accessed (both 0 when there are no accesses).
    pub min_addr: u64,
    pub max_addr: u64,
    pub markers: Vec<Marker>,
}

/// Running tallies behind a [`TraceSummary`]; fixed arrays so the per-record
/// update is a few adds with no allocation and no bounds growth.
pub(super) struct Tally {
    accesses: u64,
    writes: u64,
    per_cpu: Box<[u64; MAX_CPUS as usize]>,
    per_pid: Box<[u64; MAX_PIDS as usize]>,
    min_addr: u64,
    max_addr: u64,
}

impl Tally {
    pub(super) fn new() -> Self {
        Tally {
            accesses: 0,
            writes: 0,
            per_cpu: Box::new([0; MAX_CPUS as usize]),
            per_pid: Box::new([0; MAX_PIDS as usize]),
            min_addr: u64::MAX,
            max_addr: 0,
        }
    }

    /// Count one packed record. Working on the packed form lets the verifying
    /// reader tally without unpacking, and the masks keep every index in range.
    #[inline(always)]
    pub(super) fn add_packed(&mut self, r: u64) {
        let addr = r & ADDR_MASK;
        self.accesses += 1;
        self.writes += r >> 63;
        self.per_cpu[((r >> 48) & 0xff) as usize] += 1;
        self.per_pid[((r >> 56) & 0x7f) as usize] += 1;
        self.min_addr = self.min_addr.min(addr);
        self.max_addr = self.max_addr.max(addr);
    }

    pub(super) fn summary(&self, chunks: u64, compressed_bytes: u64, markers: Vec<Marker>) -> TraceSummary {
        fn trim(v: &[u64]) -> Vec<u64> {
            let len = v.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
            v[..len].to_vec()
        }
        let empty = self.accesses == 0;
        TraceSummary {
            accesses: self.accesses,
            reads: self.accesses - self.writes,
            writes: self.writes,
            per_cpu: trim(&self.per_cpu[..]),
            per_pid: trim(&self.per_pid[..]),
            chunks,
            compressed_bytes,
            min_addr: if empty { 0 } else { self.min_addr },
            max_addr: if empty { 0 } else { self.max_addr },
            markers,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Access;

    #[test]
    fn tally_trims_and_handles_empty() {
        let t = Tally::new();
        let s = t.summary(0, 0, vec![]);
        assert_eq!(s, TraceSummary::default());
        let mut t = Tally::new();
        t.add_packed(Access::write(0x1000).on_cpu(3).in_pid(2).pack());
        t.add_packed(Access::read(0x500).pack());
        let s = t.summary(1, 10, vec![]);
        assert_eq!(s.per_cpu, vec![1, 0, 0, 1]);
        assert_eq!(s.per_pid, vec![1, 0, 1]);
        assert_eq!(
            (s.reads, s.writes, s.min_addr, s.max_addr),
            (1, 1, 0x500, 0x1000)
        );
    }
}
