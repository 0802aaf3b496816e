//! Owner tags (the kernel's reverse map key) of allocated blocks.
//!
//! A dense `u64` per frame would cost 8 bytes per frame even for free memory.
//! Tags are stored only at the first frame of an allocated block, grouped by
//! pageblock ("chunk"): a chunk wholly covered by one block of pageblock order
//! or more keeps a single tag; a chunk holding a few smaller blocks keeps a
//! short sorted list (the PCC fragmenter's one pinned page per 2 MB, §5.1.1,
//! costs 16 bytes, not 4 KB); a chunk holding many gets an array of tags; a
//! chunk that is entirely free holds nothing. So free memory, huge pages and
//! sparsely used pageblocks cost ~32 bytes per 2 MB, and only pageblocks
//! densely allocated in small blocks cost 8 bytes per frame.

use super::Pfn;

#[derive(Clone, Debug)]
enum Chunk {
    /// No allocated block starts in this chunk.
    Empty,
    /// The chunk's first frame heads a block of chunk order or more.
    Whole(u64),
    /// Up to `SPARSE_MAX` blocks smaller than a chunk: (offset, tag), sorted.
    Sparse(Vec<(u16, u64)>),
    /// Blocks smaller than a chunk; tag of the block headed at each frame.
    Pages(Box<[u64]>),
}

/// Above this many small blocks a chunk switches to a dense array (at 64
/// entries the list already uses a quarter of the 4 KB array).
const SPARSE_MAX: usize = 64;

#[derive(Clone, Debug)]
pub(crate) struct OwnerTable {
    chunk_order: u32,
    chunks: Vec<Chunk>,
}

impl OwnerTable {
    pub(crate) fn new(total_frames: u64, chunk_order: u32) -> OwnerTable {
        let n = total_frames.div_ceil(1u64 << chunk_order) as usize;
        let mut chunks = Vec::with_capacity(n);
        chunks.resize_with(n, || Chunk::Empty);
        OwnerTable {
            chunk_order,
            chunks,
        }
    }

    fn mask(&self) -> u64 {
        (1u64 << self.chunk_order) - 1
    }

    /// Tag of the allocated block headed at `head` with `order`.
    pub(crate) fn get(&self, head: Pfn, order: u32) -> u64 {
        match &self.chunks[(head >> self.chunk_order) as usize] {
            Chunk::Whole(v) if order >= self.chunk_order => *v,
            Chunk::Pages(b) if order < self.chunk_order => b[(head & self.mask()) as usize],
            Chunk::Sparse(v) if order < self.chunk_order => {
                let off = (head & self.mask()) as u16;
                match v.binary_search_by_key(&off, |e| e.0) {
                    Ok(i) => v[i].1,
                    Err(_) => {
                        debug_assert!(false, "no owner recorded for frame {head}");
                        0
                    }
                }
            }
            _ => {
                debug_assert!(
                    false,
                    "owner table out of sync at frame {head} order {order}"
                );
                0
            }
        }
    }

    /// Record the tag of the allocated block headed at `head` with `order`.
    pub(crate) fn set(&mut self, head: Pfn, order: u32, owner: u64) {
        let frames = 1usize << self.chunk_order;
        let mask = self.mask();
        let c = &mut self.chunks[(head >> self.chunk_order) as usize];
        if order >= self.chunk_order {
            *c = Chunk::Whole(owner);
            return;
        }
        let off = head & mask;
        match c {
            Chunk::Pages(b) => b[off as usize] = owner,
            Chunk::Sparse(v) => match v.binary_search_by_key(&(off as u16), |e| e.0) {
                Ok(i) => v[i].1 = owner,
                Err(i) if v.len() < SPARSE_MAX => v.insert(i, (off as u16, owner)),
                Err(_) => {
                    let mut b = vec![0u64; frames].into_boxed_slice();
                    for &(o, t) in v.iter() {
                        b[o as usize] = t;
                    }
                    b[off as usize] = owner;
                    *c = Chunk::Pages(b);
                }
            },
            // A chunk that was free, or one whole block now being split.
            Chunk::Empty | Chunk::Whole(_) => *c = Chunk::Sparse(vec![(off as u16, owner)]),
        }
    }

    /// The block headed at `head` with `order` was freed.
    pub(crate) fn on_free(&mut self, head: Pfn, order: u32) {
        let mask = self.mask();
        let c = &mut self.chunks[(head >> self.chunk_order) as usize];
        if order >= self.chunk_order {
            // Only the head chunk carries the tag; the other chunks the block
            // covers are already `Empty`.
            *c = Chunk::Empty;
        } else if let Chunk::Sparse(v) = c {
            // A dense array may keep stale tags; a list must not grow with them.
            if let Ok(i) = v.binary_search_by_key(&((head & mask) as u16), |e| e.0) {
                v.remove(i);
            }
            if v.is_empty() {
                *c = Chunk::Empty;
            }
        }
    }

    /// The chunk holding `pfn` became entirely free: drop its array.
    pub(crate) fn release_chunk(&mut self, pfn: Pfn) {
        self.chunks[(pfn >> self.chunk_order) as usize] = Chunk::Empty;
    }

    /// True when nothing is stored for the chunk holding `pfn` (invariant check).
    pub(crate) fn chunk_is_empty(&self, pfn: Pfn) -> bool {
        matches!(
            self.chunks[(pfn >> self.chunk_order) as usize],
            Chunk::Empty
        )
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        let arrays: usize = self
            .chunks
            .iter()
            .map(|c| match c {
                Chunk::Pages(b) => b.len() * 8,
                Chunk::Sparse(v) => v.capacity() * std::mem::size_of::<(u16, u64)>(),
                _ => 0,
            })
            .sum();
        self.chunks.len() * std::mem::size_of::<Chunk>() + arrays
    }
}
