//! Pieces shared by the microbenchmarks of Navarro et al. (OSDI'02 §6.2,
//! §6.6-6.7): the matrix, tree, FFT, adversary, stride, cmp, dirty-file and
//! map-dummy programs. The paper runs each as one single-threaded process, and
//! several of them do the same few things: touch one word per page of a
//! region, and map a file whose contents exist before the program starts.

use hugescope_core::trace::{Region, RegionKind};
use hugescope_core::{Error, Result};

use crate::layout::Layout;
use crate::mem::{Arr, Mem};
use crate::registry::Resolved;

/// The largest superpage of the paper's Alpha (64KB, 512KB, 4MB; §6.1).
pub const SUPERPAGE_4M: u64 = 4 << 20;

/// Append a region on a 4MB boundary: a superpage maps only virtual ranges
/// aligned to its size (§4.1, and §5.3 on aligning mappings), and the layout's
/// usual 2MB boundary would leave every other region unable to hold a 4MB page
/// from its first byte on the alpha preset.
pub fn add_region(l: &mut Layout, name: &str, bytes: u64, kind: RegionKind) -> Result<()> {
    l.add_aligned(name, bytes, kind, SUPERPAGE_4M, 0).map(|_| ())
}

/// The paper's programs are single processes with one thread: a `threads`
/// other than 1 would declare cpus no access ever comes from, so it is refused
/// instead of silently ignored.
pub fn single_thread(r: &Resolved) -> Result<()> {
    let t = r.int("threads")?;
    if t != 1 {
        return Err(Error::input(format!(
            "{}: parameter 'threads' must be 1 (the paper's program is single-threaded), got {t}",
            r.workload
        )));
    }
    Ok(())
}

/// A byte stride that must be a positive multiple of 8 (one word per touch),
/// at most `limit` bytes (the region it steps over).
pub fn stride_param(r: &Resolved, name: &str, limit: u64) -> Result<u64> {
    let s = r.int(name)?;
    if s == 0 || s % 8 != 0 || s > limit {
        return Err(Error::input(format!(
            "{}: parameter '{name}' must be a positive multiple of 8 bytes, at most {limit}, got {s}",
            r.workload
        )));
    }
    Ok(s)
}

/// A region size that must be a positive multiple of 4KiB (a whole number of
/// base pages on every preset, so "every page" means the same on all of them).
pub fn size_param(r: &Resolved, name: &str) -> Result<u64> {
    let s = r.int(name)?;
    if s == 0 || s % 4096 != 0 {
        return Err(Error::input(format!("{}: parameter '{name}' must be a positive multiple of 4KiB, got {s}", r.workload)));
    }
    Ok(s)
}

/// Touch one word every `stride` bytes of `arr`, in address order, writing
/// `tag ^ k` at the k-th touch when `write` (else loading). Returns the sum of
/// the loaded words, which both modes must agree on. The adversary, the 4MB
/// stride program and the map dummy are this loop over different regions.
pub fn touch_every<M: Mem>(m: &mut M, arr: &mut Arr<u64>, stride: u64, write: bool, tag: u64) -> u64 {
    let step = (stride / 8) as usize;
    let mut sum = 0u64;
    for (k, i) in (0..arr.len()).step_by(step).enumerate() {
        if write {
            arr.st(m, i, tag ^ k as u64);
        } else {
            // black_box: natively the load must happen (its fault is the point).
            sum = sum.wrapping_add(std::hint::black_box(arr.ld(m, i)));
        }
    }
    sum
}

/// Touches `touch_every` makes over `bytes` at `stride`.
pub fn touches(bytes: u64, stride: u64) -> u64 {
    (bytes / 8).div_ceil(stride / 8)
}

/// Map a file region: its contents exist on disk before the program runs, so
/// they are written untraced here (word `i` of file `id` is a fixed function of
/// both). The pages are *not* declared populated: mapping a file populates
/// nothing, and the program's first access to each page faults (the page cache
/// itself is not modelled). Natively the region is anonymous memory filled
/// here, so a native run's faults happen in setup rather than in the run.
pub fn map_file<M: Mem>(m: &mut M, region: &Region, id: u64) -> Result<Arr<u64>> {
    let mut f: Arr<u64> = m.alloc(region, (region.len / 8) as usize)?;
    for (i, w) in f.iter_mut().enumerate() {
        *w = file_word(id, i as u64);
    }
    Ok(f)
}

/// Word `i` of file `id`: two files with one id have the same contents.
pub fn file_word(id: u64, i: u64) -> u64 {
    crate::rng::mix64(id.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i)
}
