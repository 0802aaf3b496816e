//! Physical memory of one simulated NUMA node: a binary buddy allocator
//! (`buddy`), the two fragmentation-injection methods of the papers
//! (`fragment`), and compaction (`compaction`).
//!
//! Model in one paragraph. Memory is `total_frames` base pages. Every frame
//! belongs to exactly one naturally aligned block of order `0..=max_order`,
//! free or allocated; free blocks are fully coalesced (Navarro §5.1, Linux
//! buddy). Allocation is best fit by order, then lowest address first, so the
//! same calls give the same frames. Allocated blocks carry a mobility (Linux
//! migratetype reduced to movable/unmovable) and an opaque owner tag the kernel
//! uses as its reverse map. A *pageblock* is the 2 MB-aligned block (order 9
//! with 4 KB pages, 8 with 8 KB pages, capped at `max_order`): it is the unit of
//! the PCC paper's fragmentation (§5.1.1), of Ingens' FMFI (§4.4) and of
//! "an unmovable page blocks its 2 MB block from compaction".
//!
//! Memory cost per frame: one state byte plus about two bits of free-list
//! bitsets over all orders. Owner tags cost 8 bytes per frame only in
//! pageblocks densely allocated in small blocks; free pageblocks, huge pages
//! and sparsely used pageblocks (the PCC fragmenter's one pinned page) cost
//! ~40 bytes per pageblock. Nothing is heap-allocated per frame
//! (`heap_bytes` reports the total).
//!
//! Misuse (freeing or splitting something that is not an allocated block of
//! that order, a frame beyond memory, ...) never panics: the `try_*` methods
//! return `Error::input`; the infallible forms required by the kernel interface
//! ignore the call and record it (`misuse_count`, `take_misuse`). Internal
//! invariants are `debug_assert`ed and fully checked by `check_invariants`.

mod buddy;
mod compaction;
// page daemon: the contiguity metric and the wired-allocation stream.
mod contiguity;
mod wired;
mod fragment;
mod freeset;
mod owners;
// memory tiers: allocation inside a frame range (one tier).
mod ranged;

pub use buddy::{BlockInfo, PhysMem};
pub use compaction::{CompactResult, Migration};
pub use fragment::{FragMethod, FragReport, IngensFragConfig};
pub use contiguity::Contiguity;
pub use wired::{WiredMode, WiredStream, WIRED_OWNER};

/// Frame number, in base pages from the start of memory.
pub type Pfn = u64;

/// Owner tag of the pages that the fragmentation injectors leave allocated.
/// They belong to no simulated process, so a kernel must not look them up in a
/// page table; compaction still reports their moves (Ingens' fragmenter is a
/// user program, so its pages are movable).
pub const FRAG_OWNER: u64 = u64::MAX;

/// Whether compaction may move an allocated block (Linux `MIGRATE_MOVABLE`
/// versus everything that is pinned: kernel, page tables, DMA).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mobility {
    Movable,
    Unmovable,
}
