//! The physical frame number of each base page of a VMA, stored so that a
//! fresh array is all zero bytes.
//!
//! A declared region may be far larger than what a run touches (a 64 GiB
//! heap of which a trace reads a few MiB). A zero-filled vector is allocated
//! zeroed (`vec![0; n]`: calloc, fresh anonymous pages for large sizes), and
//! the host kernel backs only the pages later written, so untouched memory
//! costs virtual address space, not resident memory (issue #16). "No frame"
//! (`NO_PFN`, all ones) must therefore be the zero of the storage: each
//! frame number is stored complemented. The complement is one XOR on every
//! read and write, no branch, on the translation path.

use std::ops::Range;

/// "No frame": the page is not mapped, or it lost its frame (evicted,
/// merged away, out of memory).
pub const NO_PFN: u32 = u32::MAX;

/// Frame numbers of `len()` base pages; a new array holds `NO_PFN` everywhere.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pfns {
    /// `pfn ^ NO_PFN` per page: 0 is NO_PFN.
    stored: Vec<u32>,
}

impl Pfns {
    /// `pages` pages without frames, none of them resident until written.
    pub fn new(pages: usize) -> Pfns {
        Pfns {
            stored: vec![0; pages],
        }
    }

    pub fn len(&self) -> usize {
        self.stored.len()
    }

    pub fn is_empty(&self) -> bool {
        self.stored.is_empty()
    }

    /// Frame of page `i` (`NO_PFN` if it has none).
    #[inline(always)]
    pub fn get(&self, i: usize) -> u32 {
        self.stored[i] ^ NO_PFN
    }

    /// Give page `i` frame `pfn` (`NO_PFN` takes its frame away).
    #[inline(always)]
    pub fn set(&mut self, i: usize, pfn: u32) {
        self.stored[i] = pfn ^ NO_PFN;
    }

    /// Frames of the pages in `r`, in order.
    pub fn iter(&self, r: Range<usize>) -> impl Iterator<Item = u32> + '_ {
        self.stored[r].iter().map(|&s| s ^ NO_PFN)
    }

    /// Frames of the pages in `r`, copied out.
    pub fn to_vec(&self, r: Range<usize>) -> Vec<u32> {
        self.iter(r).collect()
    }

    /// Give every page in `r` frame `pfn` (`NO_PFN`: take their frames away).
    pub fn fill(&mut self, r: Range<usize>, pfn: u32) {
        self.stored[r].fill(pfn ^ NO_PFN);
    }

    /// Map the `n` pages from page `a` to the consecutive frames from `first`
    /// (the pages of one physical block, in order).
    pub fn set_run(&mut self, a: usize, n: usize, first: u64) {
        for (j, s) in self.stored[a..a + n].iter_mut().enumerate() {
            *s = (first + j as u64) as u32 ^ NO_PFN;
        }
    }

    /// Copy the frames of every page of `from` onto the first `from.len()`
    /// pages here (a VMA rebuilt larger keeps its pages' frames).
    pub fn copy_prefix(&mut self, from: &Pfns) {
        self.stored[..from.stored.len()].copy_from_slice(&from.stored);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_storage_is_zero_bytes_and_reads_no_pfn() {
        let p = Pfns::new(1000);
        assert_eq!(p.len(), 1000);
        assert!(
            p.stored.iter().all(|&s| s == 0),
            "NO_PFN must be the zero of the storage"
        );
        assert!(p.iter(0..1000).all(|f| f == NO_PFN));
        assert!(Pfns::new(0).is_empty());
    }

    #[test]
    fn get_set_fill_and_runs_round_trip() {
        let mut p = Pfns::new(16);
        // Frame 0 and the largest real frame are ordinary values, distinct
        // from NO_PFN and from each other.
        p.set(0, 0);
        p.set(1, NO_PFN - 1);
        p.set(2, 77);
        assert_eq!(
            (p.get(0), p.get(1), p.get(2), p.get(3)),
            (0, NO_PFN - 1, 77, NO_PFN)
        );
        p.set(2, NO_PFN);
        assert_eq!(p.get(2), NO_PFN);
        assert_eq!(
            p.stored[2], 0,
            "a page whose frame was taken away stores zero again"
        );
        p.set_run(4, 4, 1000);
        assert_eq!(p.to_vec(3..9), vec![NO_PFN, 1000, 1001, 1002, 1003, NO_PFN]);
        p.fill(5..7, 9);
        assert_eq!(p.to_vec(4..8), vec![1000, 9, 9, 1003]);
        p.fill(4..8, NO_PFN);
        assert!(p.iter(2..16).all(|f| f == NO_PFN));
        assert_eq!(p.to_vec(0..2), vec![0, NO_PFN - 1]);
    }

    #[test]
    fn copy_prefix_keeps_frames_and_leaves_the_rest_unmapped() {
        let mut small = Pfns::new(3);
        small.set_run(0, 2, 40);
        let mut big = Pfns::new(6);
        big.copy_prefix(&small);
        assert_eq!(
            big.to_vec(0..6),
            vec![40, 41, NO_PFN, NO_PFN, NO_PFN, NO_PFN]
        );
    }
}
