//! Physical memory: buddy allocator, fragmentation, compaction (in progress).
