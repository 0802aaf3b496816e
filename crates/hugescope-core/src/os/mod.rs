//! The operating-system memory model: mechanisms only (allocation, mapping,
//! promotion, demotion, compaction, shootdown). Policies live in `policy/`.

pub mod phys;
