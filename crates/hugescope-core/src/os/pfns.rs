//! The physical frame number of each base page of a VMA, kept sparse: only
//! the chunks of pages that ever got a frame hold storage.
//!
//! A declared region may be far larger than what a run touches (a 64 GiB
//! heap of which a trace reads a few MiB; the 32 GiB GUPS table of the
//! direct-segments paper's Fig. 5). A flat array cost 4 bytes per base page
//! of every declared byte (issue #33), resident or not. Here a directory
//! holds one pointer per chunk of `CHUNK` pages (one PMD-level region of
//! x86-64, 2 MiB): a chunk is allocated when a page in it first gets a frame,
//! and a chunk never allocated reads `NO_PFN` everywhere. An untouched
//! region costs 8 bytes per 2 MiB (the directory), a touched chunk 2 KiB.
//!
//! Reads happen on TLB misses and in the OS model, never on a TLB hit, so the
//! simulator's hot path does not see the extra indirection. Inside a chunk,
//! each frame number is stored complemented so that a fresh (zeroed) chunk
//! reads "no frame": one XOR per read and write, no branch.

use std::ops::Range;

/// "No frame": the page is not mapped, or it lost its frame (evicted,
/// merged away, out of memory).
pub const NO_PFN: u32 = u32::MAX;

/// Base pages per chunk (2 MiB of 4 KiB pages).
const CHUNK_BITS: u32 = 9;
const CHUNK: usize = 1 << CHUNK_BITS;

type Chunk = Box<[u32; CHUNK]>;

/// Frame numbers of `len()` base pages; a new array holds `NO_PFN` everywhere.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pfns {
    /// Per chunk: `pfn ^ NO_PFN` per page (0 is NO_PFN), or None when no page
    /// of the chunk ever had a frame.
    chunks: Vec<Option<Chunk>>,
    len: usize,
}

impl Pfns {
    /// `pages` pages without frames: no chunk allocated.
    pub fn new(pages: usize) -> Pfns {
        Pfns { chunks: vec![None; pages.div_ceil(CHUNK)], len: pages }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of chunk storage allocated (the directory aside): what the
    /// pages that ever had a frame cost.
    pub fn chunk_bytes(&self) -> usize {
        self.chunks.iter().filter(|c| c.is_some()).count() * std::mem::size_of::<[u32; CHUNK]>()
    }

    /// Frame of page `i` (`NO_PFN` if it has none).
    #[inline(always)]
    pub fn get(&self, i: usize) -> u32 {
        // The directory's own bounds check refuses every page past the last
        // chunk; one inside the last chunk's tail is caught in debug builds.
        debug_assert!(i < self.len, "page {i} out of {} pages", self.len);
        match &self.chunks[i >> CHUNK_BITS] {
            Some(c) => c[i & (CHUNK - 1)] ^ NO_PFN,
            None => NO_PFN,
        }
    }

    /// The chunk holding page `i`, allocated (zeroed: no frames) if needed.
    #[inline(always)]
    fn chunk_mut(&mut self, i: usize) -> &mut [u32; CHUNK] {
        assert!(i < self.len, "page {i} out of {} pages", self.len);
        self.chunks[i >> CHUNK_BITS].get_or_insert_with(|| Box::new([0; CHUNK]))
    }

    /// Give page `i` frame `pfn` (`NO_PFN` takes its frame away).
    #[inline(always)]
    pub fn set(&mut self, i: usize, pfn: u32) {
        if pfn == NO_PFN && self.chunks.get(i >> CHUNK_BITS).is_some_and(|c| c.is_none()) {
            assert!(i < self.len, "page {i} out of {} pages", self.len);
            return; // already no frame; allocate nothing
        }
        self.chunk_mut(i)[i & (CHUNK - 1)] = pfn ^ NO_PFN;
    }

    /// Frames of the pages in `r`, in order.
    pub fn iter(&self, r: Range<usize>) -> impl Iterator<Item = u32> + '_ {
        r.map(move |i| self.get(i))
    }

    /// Frames of the pages in `r`, copied out.
    pub fn to_vec(&self, r: Range<usize>) -> Vec<u32> {
        self.iter(r).collect()
    }

    /// Give every page in `r` frame `pfn` (`NO_PFN`: take their frames away).
    pub fn fill(&mut self, r: Range<usize>, pfn: u32) {
        for i in r {
            self.set(i, pfn);
        }
    }

    /// Map the `n` pages from page `a` to the consecutive frames from `first`
    /// (the pages of one physical block, in order).
    pub fn set_run(&mut self, a: usize, n: usize, first: u64) {
        for j in 0..n {
            self.set(a + j, (first + j as u64) as u32);
        }
    }

    /// Copy the frames of every page of `from` onto the first `from.len()`
    /// pages here (a VMA rebuilt larger keeps its pages' frames).
    pub fn copy_prefix(&mut self, from: &Pfns) {
        assert!(from.len <= self.len, "copy of {} pages into {}", from.len, self.len);
        for (k, c) in from.chunks.iter().enumerate() {
            if let Some(c) = c {
                let last = (from.len - k * CHUNK).min(CHUNK);
                let dst = self.chunks[k].get_or_insert_with(|| Box::new([0; CHUNK]));
                dst[..last].copy_from_slice(&c[..last]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_storage_is_zero_bytes_and_reads_no_pfn() {
        let p = Pfns::new(1000);
        assert_eq!(p.len(), 1000);
        assert_eq!(p.chunk_bytes(), 0, "a fresh array allocates no chunk");
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

    #[test]
    fn untouched_memory_allocates_nothing_and_chunks_are_independent() {
        // 1 TiB of 4 KiB pages: the directory only.
        let pages = 1usize << 28;
        let mut p = Pfns::new(pages);
        assert_eq!((p.len(), p.chunk_bytes()), (pages, 0));
        // Taking away a frame that was never given allocates nothing.
        p.set(12345, NO_PFN);
        p.fill(0..2000, NO_PFN);
        assert_eq!(p.chunk_bytes(), 0);
        // A page in the last chunk and one in the first: two chunks.
        p.set(pages - 1, 7);
        p.set(0, 9);
        assert_eq!(p.chunk_bytes(), 2 * CHUNK * 4);
        assert_eq!((p.get(pages - 1), p.get(0), p.get(1), p.get(pages - 2)), (7, 9, NO_PFN, NO_PFN));
        assert_eq!(p.get(CHUNK), NO_PFN);
        // A run across a chunk boundary lands in both chunks, in order.
        p.set_run(CHUNK - 2, 4, 100);
        assert_eq!(p.to_vec(CHUNK - 3..CHUNK + 3), vec![NO_PFN, 100, 101, 102, 103, NO_PFN]);
        assert_eq!(p.chunk_bytes(), 3 * CHUNK * 4);
    }

    #[test]
    fn a_partial_last_chunk_is_bounded_and_copied() {
        let mut small = Pfns::new(CHUNK + 3);
        small.set(CHUNK + 2, 5);
        let mut big = Pfns::new(3 * CHUNK);
        big.copy_prefix(&small);
        assert_eq!(big.get(CHUNK + 2), 5);
        assert_eq!(big.chunk_bytes(), CHUNK * 4, "the empty first chunk stays unallocated");
        let r = std::panic::catch_unwind(|| small.get(2 * CHUNK));
        assert!(r.is_err(), "a page past the last chunk must not read as unmapped");
        if cfg!(debug_assertions) {
            let r = std::panic::catch_unwind(|| small.get(CHUNK + 3));
            assert!(r.is_err(), "a page in the last chunk's tail must not read as unmapped");
        }
    }
}
