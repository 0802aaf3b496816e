//! Which trace-header region holds an address, for the regions' profile
//! (`region_profile`) and the notes of emitted plans (`plan::emit`): one
//! answer to "where does this lie", the first region in header order that
//! covers it (as `TraceHeader::region_of`), found by binary search.

use crate::trace::Region;
use std::collections::BTreeSet;

/// Which header region holds an address: disjoint pieces sorted by (pid,
/// start), each owned by the first region in header order that covers it
/// (as `TraceHeader::region_of` answers, overlapping regions included).
#[derive(Clone, Debug, Default)]
pub struct RegionIndex {
    /// (pid, start, end, index of the region in the header).
    pub(crate) pieces: Vec<(u16, u64, u64, usize)>,
}

impl RegionIndex {
    pub fn new(regions: &[Region]) -> RegionIndex {
        // A sweep over every region's two boundaries, per pid: between two
        // consecutive boundaries the set of covering regions is constant,
        // and its first (lowest header index) owns the piece.
        let mut events: Vec<(u16, u64, bool, usize)> = Vec::with_capacity(2 * regions.len());
        for (i, r) in regions.iter().enumerate().filter(|(_, r)| r.len > 0) {
            events.push((r.pid, r.base, true, i));
            events.push((r.pid, r.end(), false, i));
        }
        events.sort_unstable_by_key(|&(pid, at, _, i)| (pid, at, i));
        let mut pieces: Vec<(u16, u64, u64, usize)> = Vec::new();
        let mut active: BTreeSet<usize> = BTreeSet::new();
        let mut k = 0;
        while k < events.len() {
            let (pid, at) = (events[k].0, events[k].1);
            while k < events.len() && (events[k].0, events[k].1) == (pid, at) {
                let (_, _, opens, i) = events[k];
                if opens {
                    active.insert(i);
                } else {
                    active.remove(&i);
                }
                k += 1;
            }
            // The piece from `at` to the next boundary of the same pid.
            let (Some(&owner), Some(&(next_pid, next, _, _))) = (active.first(), events.get(k)) else { continue };
            debug_assert_eq!(next_pid, pid, "every region closes before the next pid opens");
            match pieces.last_mut() {
                Some(last) if last.0 == pid && last.2 == at && last.3 == owner => last.2 = next,
                _ => pieces.push((pid, at, next, owner)),
            }
        }
        RegionIndex { pieces }
    }

    /// The piece holding (`pid`, `addr`), as an index into `pieces`.
    #[inline]
    pub(crate) fn piece(&self, pid: u16, addr: u64) -> Option<usize> {
        let i = self.pieces.partition_point(|&(p, start, _, _)| (p, start) <= (pid, addr));
        let j = i.checked_sub(1)?;
        let (p, _, end, _) = self.pieces[j];
        (p == pid && addr < end).then_some(j)
    }

    /// The index in the header of the region holding (`pid`, `addr`).
    pub fn find(&self, pid: u16, addr: u64) -> Option<usize> {
        self.piece(pid, addr).map(|j| self.pieces[j].3)
    }

    /// The header indices of the regions owning some of [`start`, `end`) of
    /// `pid`, in address order, each once.
    pub fn overlapping(&self, pid: u16, start: u64, end: u64) -> Vec<usize> {
        // Pieces are disjoint and sorted, so their ends are sorted too.
        let first = self.pieces.partition_point(|&(p, _, e, _)| (p, e) <= (pid, start));
        let mut out: Vec<usize> = Vec::new();
        for &(_, _, _, owner) in self.pieces[first..].iter().take_while(|&&(p, s, _, _)| p == pid && s < end) {
            if !out.contains(&owner) {
                out.push(owner);
            }
        }
        out
    }

    /// The regions of [`start`, `end`) of `pid` in words, for a plan entry's
    /// note: "region NAME", "regions A, B, C", "regions A, B, C and 4 more";
    /// `None` outside every region.
    pub fn describe(&self, regions: &[Region], pid: u16, start: u64, end: u64) -> Option<String> {
        const SHOWN: usize = 3;
        let owners = self.overlapping(pid, start, end);
        let names: Vec<&str> = owners.iter().take(SHOWN).map(|&i| regions[i].name.as_str()).collect();
        match owners.len() {
            0 => None,
            1 => Some(format!("region {}", names[0])),
            n if n <= SHOWN => Some(format!("regions {}", names.join(", "))),
            n => Some(format!("regions {} and {} more", names.join(", "), n - SHOWN)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceHeader;

    #[test]
    fn the_index_answers_as_region_of_with_overlaps() {
        // Overlapping and nested regions, two pids, an empty one: the first
        // region in header order holding an address owns it.
        let mut h = TraceHeader::new("overlap");
        let mut q = Region::new("q", 0x3000, 0x2000);
        q.pid = 1;
        for r in [Region::new("outer", 0x1000, 0x8000), Region::new("inner", 0x2000, 0x1000), Region::new("tail", 0x8000, 0x4000),
                  Region::new("empty", 0x5000, 0), q, Region::new("far", 0x20000, 0x1000)] {
            h.regions.push(r);
        }
        let idx = RegionIndex::new(&h.regions);
        for pid in 0..3u16 {
            for addr in (0..0x22000u64).step_by(0x400) {
                let want = h.regions.iter().position(|r| r.contains(pid, addr));
                assert_eq!(idx.find(pid, addr), want, "pid {pid} addr {addr:#x}");
                assert_eq!(want.map(|i| &h.regions[i]), h.region_of(pid, addr));
            }
        }
        // `inner` lies wholly inside `outer`, which comes first: it owns nothing.
        assert_eq!(idx.find(0, 0x2000), Some(0));
        assert_eq!(idx.find(0, 0x9000), Some(2));
        // Ranges: owners in address order, each once.
        assert_eq!(idx.overlapping(0, 0x0, 0x1000), Vec::<usize>::new());
        assert_eq!(idx.overlapping(0, 0x0, 0x1001), vec![0]);
        assert_eq!(idx.overlapping(0, 0x8fff, 0x30000), vec![0, 2, 5]);
        assert_eq!(idx.overlapping(0, 0x9000, 0x30000), vec![2, 5]);
        assert_eq!(idx.overlapping(1, 0x0, 0x30000), vec![4]);
        assert_eq!(idx.describe(&h.regions, 0, 0x1000, 0x2000).as_deref(), Some("region outer"));
        assert_eq!(idx.describe(&h.regions, 0, 0x1000, 0x21000).as_deref(), Some("regions outer, tail, far"));
        assert_eq!(idx.describe(&h.regions, 0, 0xc000, 0x20000), None);
        let many: Vec<Region> = (0..5u64).map(|i| Region::new(format!("r{i}"), i << 12, 1 << 12)).collect();
        let idx = RegionIndex::new(&many);
        assert_eq!(idx.describe(&many, 0, 0, 5 << 12).as_deref(), Some("regions r0, r1, r2 and 2 more"));
    }
}
