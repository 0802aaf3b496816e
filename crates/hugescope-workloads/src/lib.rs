//! Built-in workloads of hugescope, each written once against a memory interface
//! ([`mem::Mem`]) and run either in **trace mode** (every load and store of the
//! algorithm's data structures becomes an [`Access`](hugescope_core::trace::Access)
//! at a fixed virtual address) or in **native mode** (the same code at full speed
//! on memory `mmap`ed at the same addresses). See `docs/workloads.md`.
//!
//! Entry points: [`list`], [`plan`], [`header`], [`trace`], [`native`].

pub mod adversary;
pub mod bt;
pub mod btree;
pub mod canneal;
pub mod cg;
pub mod cmp;
pub mod dirtyfile;
pub mod fftw;
pub mod graph;
pub mod gups;
pub mod hotcold;
pub mod jemalloc;
pub mod kv;
pub mod layout;
pub mod mapdummy;
pub mod matrix;
pub mod mem;
pub mod microbench;
pub mod mysql;
pub mod pointer_chase;
pub mod process;
pub mod psr_bench;
pub mod rbtree;
pub mod registry;
pub mod rng;
pub mod seqtouch;
pub mod shadow;
pub mod sharemicro;
pub mod shape;
pub mod stream;
pub mod stride4m;
pub mod svm;
pub mod tracefile;
pub mod tracegen_bench;
pub mod web;
pub mod zipf;

pub use mem::NativeEvent;
pub use registry::{
    header, list, native, native_events, plan, thp_always, trace, NativeOptions, NativeReport, ParamSpec, Params, RunOutput,
    WorkloadInfo, WorkloadLayout,
};

/// Order-sensitive 64-bit hash of a sequence of words: result checksums that
/// trace and native runs must reproduce bit for bit.
pub(crate) fn hash_words(it: impl IntoIterator<Item = u64>) -> u64 {
    let mut h: u64 = 0x243f_6a88_85a3_08d3;
    for w in it {
        h = rng::mix64(h ^ w).wrapping_add(0x9e37_79b9);
    }
    h
}

/// A JSON-safe rendering of a 64-bit checksum (hex string: JSON numbers lose
/// precision above 2^53 in many readers).
pub(crate) fn hex(x: u64) -> String {
    format!("{x:#018x}")
}
