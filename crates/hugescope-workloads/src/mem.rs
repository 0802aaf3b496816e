//! The memory interface every workload is written against.
//!
//! A workload allocates its data structures as [`Arr`]s (one array per declared
//! [`Region`]) and reads/writes them through [`Arr::ld`] / [`Arr::st`], passing the
//! memory backend `m: &mut M` where `M: Mem`. Two backends exist:
//!
//! * [`Traced`] turns every `ld`/`st` into an [`Access`] at the element's fixed
//!   virtual address (`region base + index × size_of::<T>()`) and hands it to an
//!   [`AccessSink`]; the data itself lives in ordinary (zeroed) heap memory.
//! * [`Native`] maps every region with `mmap(MAP_FIXED_NOREPLACE)` at its fixed
//!   address and its `touch` is an empty inline function, so after monomorphization
//!   `ld`/`st` are plain (bounds-checked) loads and stores: native runs do not pay
//!   for tracing.
//!
//! Why fixed addresses: a promotion plan computed on a trace (a list of 2MB
//! virtual ranges) must apply unchanged to the native run (docs/architecture.md,
//! "Crates": a workload runs as a trace or natively at the same virtual
//! addresses; the PCC paper disables ASLR for the same reason, §4).
//!
//! Untraced initialisation (graph construction, table fills that the papers do
//! not measure) writes through `Deref`/`DerefMut` on the array directly.

use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::time::Instant;

use hugescope_core::trace::{Access, AccessSink, Region};
use hugescope_core::{Error, Result};

/// Plain-old-data element types that may live in a region. All-zero bytes must be
/// a valid value (regions start zero-filled in both backends).
///
/// # Safety
/// Implementors must be `Copy` types for which the all-zero bit pattern is valid.
pub unsafe trait Pod: Copy + Default + 'static {}
unsafe impl Pod for u8 {}
unsafe impl Pod for u16 {}
unsafe impl Pod for u32 {}
unsafe impl Pod for u64 {}
unsafe impl Pod for i32 {}
unsafe impl Pod for i64 {}
unsafe impl Pod for f32 {}
unsafe impl Pod for f64 {}

/// Who owns the bytes behind an [`Arr`]; dropping it releases them (RAII unmap).
enum Backing {
    None,
    Heap { ptr: NonNull<u8>, layout: std::alloc::Layout },
    Map { addr: *mut libc::c_void, len: usize },
}

impl Drop for Backing {
    fn drop(&mut self) {
        match *self {
            Backing::None => {}
            // SAFETY: allocated in `heap_zeroed` with exactly this layout.
            Backing::Heap { ptr, layout } => unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) },
            // SAFETY: mapped by `map_fixed` or `heap_zeroed` with exactly this length; nothing else
            // refers to the mapping once the owning Arr is dropped.
            Backing::Map { addr, len } => unsafe {
                libc::munmap(addr, len);
            },
        }
    }
}

/// An array of `T` placed at a fixed virtual address (`base`).
pub struct Arr<T: Pod> {
    base: u64,
    ptr: NonNull<T>,
    len: usize,
    _backing: Backing,
    _t: PhantomData<T>,
}

// The array exclusively owns its memory, like a Vec.
unsafe impl<T: Pod + Send> Send for Arr<T> {}

impl<T: Pod> Arr<T> {
    /// Virtual address of element `i` (the address traces carry).
    #[inline(always)]
    pub fn addr(&self, i: usize) -> u64 {
        self.base + (i * std::mem::size_of::<T>()) as u64
    }
    pub fn base(&self) -> u64 {
        self.base
    }
    /// The element range of the whole 4KiB pages inside [first, first + count),
    /// if there is at least one.
    pub fn page_range(&self, first: usize, count: usize) -> Option<(usize, usize)> {
        let sz = std::mem::size_of::<T>() as u64;
        let end = (first + count).min(self.len);
        let lo_b = (self.addr(first) + 4095) & !4095;
        let hi_b = self.addr(end) & !4095;
        if sz == 0 || hi_b <= lo_b || (lo_b - self.base) % sz != 0 || (hi_b - self.base) % sz != 0 {
            return None;
        }
        Some((((lo_b - self.base) / sz) as usize, ((hi_b - self.base) / sz) as usize))
    }
    /// Traced load of element `i`.
    #[inline(always)]
    pub fn ld<M: Mem>(&self, m: &mut M, i: usize) -> T {
        let v = self[i];
        if M::TRACING {
            m.touch(self.addr(i), false);
        }
        v
    }
    /// Trace elements [first, first + count) as one access per 64-byte line
    /// they cover, as a memcpy or a vectorised loop over a small block does
    /// (npb-bt's 5-word points and 5x5 blocks). The data is read or written
    /// through the slice; this records only the addresses.
    #[inline]
    pub fn touch_span<M: Mem>(&self, m: &mut M, first: usize, count: usize, write: bool) {
        if M::TRACING && count > 0 {
            let (lo, hi) = (self.addr(first) & !63, self.addr(first + count - 1) & !63);
            let mut a = lo;
            while a <= hi {
                m.touch(a, write);
                a += 64;
            }
        }
    }
    /// Traced store of element `i`.
    #[inline(always)]
    pub fn st<M: Mem>(&mut self, m: &mut M, i: usize, v: T) {
        self[i] = v;
        if M::TRACING {
            m.touch(self.addr(i), true);
        }
    }
}

impl<T: Pod> Deref for Arr<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: ptr is valid for len elements (zero-initialised) for the lifetime
        // of the backing, which self owns.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}
impl<T: Pod> DerefMut for Arr<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as above, and &mut self guarantees exclusivity.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

fn check_fits<T: Pod>(region: &Region, n: usize) -> Result<usize> {
    let bytes = n
        .checked_mul(std::mem::size_of::<T>())
        .filter(|&b| b as u64 <= region.len)
        .ok_or_else(|| {
            Error::input(format!(
                "internal layout error: {n} elements do not fit region '{}' ({} bytes)",
                region.name, region.len
            ))
        })?;
    Ok(bytes)
}

/// Arrays from this size up are mapped rather than taken from the allocator
/// (trace mode; see `heap_zeroed`).
const MAP_AT_LEAST: usize = 2 << 20;

/// Zeroed array in ordinary process memory (trace mode), at whatever address
/// the kernel picks: the trace carries the region's fixed address instead.
///
/// Large arrays are an anonymous mapping of their own: the kernel hands out
/// zero pages on first touch, where the allocator's `alloc_zeroed` at this
/// alignment writes every byte first (a 1 GiB GUPS table cost a full memset
/// before its own fill), and the mapping is advised for huge pages, which
/// makes a GUPS-like fill and its random updates fault and miss in the TLB
/// per 2 MiB instead of per 4 KiB (issue #16: table initialisation must not
/// dominate trace generation). Only the generator's own scratch memory is
/// advised; the traced program's pages are modelled, not these.
fn heap_zeroed<T: Pod>(region: &Region, n: usize) -> Result<Arr<T>> {
    let bytes = check_fits::<T>(region, n)?;
    if bytes == 0 {
        return Ok(Arr { base: region.base, ptr: NonNull::dangling(), len: 0, _backing: Backing::None, _t: PhantomData });
    }
    if bytes >= MAP_AT_LEAST {
        // SAFETY: a fresh private anonymous mapping at an address of the
        // kernel's choosing; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            // Advice only: where THP is off or unavailable it changes nothing.
            // SAFETY: madvise on our own fresh mapping.
            unsafe { libc::madvise(p, bytes, libc::MADV_HUGEPAGE) };
            let ptr = NonNull::new(p as *mut T).expect("mmap returned non-null");
            return Ok(Arr { base: region.base, ptr, len: n, _backing: Backing::Map { addr: p, len: bytes }, _t: PhantomData });
        }
        // Out of address space or refused: the allocator reports it below.
    }
    let layout = std::alloc::Layout::from_size_align(bytes, 64)
        .map_err(|e| Error::input(format!("region '{}': {e}", region.name)))?;
    // SAFETY: layout has non-zero size.
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    let ptr = NonNull::new(p).ok_or_else(|| {
        Error::input(format!("out of memory allocating {} bytes for region '{}'", bytes, region.name))
    })?;
    Ok(Arr { base: region.base, ptr: ptr.cast(), len: n, _backing: Backing::Heap { ptr, layout }, _t: PhantomData })
}

/// Map a region at its fixed address (native mode). Anonymous private memory; no
/// madvise unless `thp` (then `MADV_HUGEPAGE`). `MADV_NOHUGEPAGE` is never set:
/// the kernel refuses `MADV_COLLAPSE` on such VMAs, which would break the
/// real-system side that collapses ranges of a running workload.
fn map_fixed<T: Pod>(region: &Region, n: usize, thp: bool) -> Result<Arr<T>> {
    check_fits::<T>(region, n)?;
    let len = region.len as usize;
    if len == 0 {
        return Ok(Arr { base: region.base, ptr: NonNull::dangling(), len: 0, _backing: Backing::None, _t: PhantomData });
    }
    let want = region.base as *mut libc::c_void;
    // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping; we check
    // the result below.
    let p = unsafe {
        libc::mmap(
            want,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        let err = std::io::Error::last_os_error();
        let why = if err.raw_os_error() == Some(libc::EEXIST) {
            "the address range is already mapped in this process (another native run in progress, or a library mapped there)".to_string()
        } else {
            err.to_string()
        };
        return Err(Error::input(format!(
            "cannot map region '{}' at {:#x} ({} bytes): {}",
            region.name, region.base, region.len, why
        )));
    }
    if p != want {
        // Kernels before 4.17 treat the unknown flag as a plain hint.
        // SAFETY: p is a fresh mapping of len bytes.
        unsafe { libc::munmap(p, len) };
        return Err(Error::input(format!(
            "cannot map region '{}' at {:#x}: the kernel placed it at {:p} (MAP_FIXED_NOREPLACE unsupported or range taken)",
            region.name, region.base, p
        )));
    }
    let backing = Backing::Map { addr: p, len };
    if thp {
        // SAFETY: madvise on our own fresh mapping.
        let rc = unsafe { libc::madvise(p, len, libc::MADV_HUGEPAGE) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            drop(backing);
            return Err(Error::input(format!(
                "madvise(MADV_HUGEPAGE) on region '{}' at {:#x} failed: {err}",
                region.name, region.base
            )));
        }
    }
    Ok(Arr { base: region.base, ptr: NonNull::new(p as *mut T).expect("mmap returned non-null"), len: n, _backing: backing, _t: PhantomData })
}

/// The memory backend. `TRACING` is a constant so the native backend's trace
/// calls vanish at compile time.
pub trait Mem {
    const TRACING: bool;
    /// Record one access (no-op natively).
    fn touch(&mut self, addr: u64, write: bool);
    /// The simulated cpu issuing the following accesses.
    fn set_cpu(&mut self, cpu: usize);
    /// A natural progress point ("level:3", "iter:2", "ops:1000000").
    fn progress(&mut self, label: &str);
    /// End of setup (data construction); the measured algorithm phase starts.
    fn begin_run(&mut self);
    /// End of the algorithm phase.
    fn end_run(&mut self);
    /// Back a declared region with `n` zeroed elements of `T`.
    fn alloc<T: Pod>(&mut self, region: &Region, n: usize) -> Result<Arr<T>>;
    /// Return the whole pages inside elements [first, first + count) of `arr`
    /// to the OS, as an allocator purging freed memory does: natively
    /// MADV_DONTNEED (the pages read back as zero), in a trace a release event
    /// for the OS model. Both modes leave the elements zeroed.
    fn release<T: Pod>(&mut self, arr: &mut Arr<T>, first: usize, count: usize) {
        if let Some((lo, hi)) = arr.page_range(first, count) {
            self.release_pages(arr, lo, hi);
        }
    }
    /// `arr` was initialised during setup (before `begin_run`): its pages are
    /// resident when the measured phase starts. Natively this is already true;
    /// a trace records it so the OS model faults them in first, in this order.
    fn populated<T: Pod>(&mut self, arr: &Arr<T>) {
        if !arr.is_empty() {
            self.populated_span(arr.base(), arr.addr(arr.len()) - arr.base());
        }
    }
    /// `populated` for the `bytes` from `base` (an array held as addresses
    /// only, `shadow.rs`). Natively a no-op: the memory is resident.
    fn populated_span(&mut self, _base: u64, _bytes: u64) {}
    /// Backend part of `release`: [lo, hi) are page-aligned element indices.
    fn release_pages<T: Pod>(&mut self, arr: &mut Arr<T>, lo: usize, hi: usize);
}

/// Trace backend: forwards every access to a sink.
pub struct Traced<'a> {
    sink: &'a mut dyn AccessSink,
    cpu: u16,
    pub accesses: u64,
}

impl<'a> Traced<'a> {
    pub fn new(sink: &'a mut dyn AccessSink) -> Self {
        Traced { sink, cpu: 0, accesses: 0 }
    }
}

impl Mem for Traced<'_> {
    const TRACING: bool = true;
    #[inline(always)]
    fn touch(&mut self, addr: u64, write: bool) {
        self.accesses += 1;
        self.sink.access(Access { addr, write, cpu: self.cpu, pid: 0 });
        // Generators cannot return an error from deep inside an algorithm:
        // a cancelled trace unwinds to `registry::trace` (caught there).
        if self.accesses & 0xffff == 0 {
            hugescope_core::cancel::unwind_if_requested();
        }
    }
    #[inline(always)]
    fn set_cpu(&mut self, cpu: usize) {
        self.cpu = cpu as u16;
    }
    fn progress(&mut self, label: &str) {
        self.sink.progress(label);
    }
    fn begin_run(&mut self) {}
    fn end_run(&mut self) {}
    fn alloc<T: Pod>(&mut self, region: &Region, n: usize) -> Result<Arr<T>> {
        heap_zeroed(region, n)
    }
    fn release_pages<T: Pod>(&mut self, arr: &mut Arr<T>, lo: usize, hi: usize) {
        arr[lo..hi].fill(T::default());
        self.sink.free(0, arr.addr(lo), arr.addr(hi) - arr.addr(lo));
    }
    fn populated_span(&mut self, base: u64, bytes: u64) {
        self.sink.populate(0, base, bytes);
    }
}

/// What a native run tells a caller that wants more than progress labels. The
/// real-Linux side applies a promotion plan when setup ends (the data is populated
/// then) and reads huge-page coverage at `RunDone`, while the regions are still
/// mapped (they are unmapped when the workload returns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NativeEvent<'l> {
    /// Data construction is finished; the measured algorithm phase starts when the
    /// hook returns (time spent in this hook counts neither as setup nor as run).
    SetupDone,
    /// A progress point ("level:3"); time spent in the hook counts as run time.
    Progress(&'l str),
    /// The algorithm phase has ended (its time is taken); the regions are still mapped.
    RunDone,
}

/// The caller's hook: labels only (the original interface) or every event.
enum Hook<'a> {
    Labels(&'a mut dyn FnMut(&str)),
    Events(&'a mut dyn FnMut(NativeEvent<'_>)),
}

/// Native backend: real memory at the fixed addresses, timing, progress hook.
pub struct Native<'a> {
    thp: bool,
    hook: Hook<'a>,
    created: Instant,
    setup_end: Option<Instant>,
    run_start: Option<Instant>,
    run_end: Option<Instant>,
}

impl<'a> Native<'a> {
    pub fn new(thp: bool, hook: &'a mut dyn FnMut(&str)) -> Self {
        Self::with_hook(thp, Hook::Labels(hook))
    }
    /// A backend that reports [`NativeEvent`]s (setup done, progress, run done).
    pub fn with_events(thp: bool, hook: &'a mut dyn FnMut(NativeEvent<'_>)) -> Self {
        Self::with_hook(thp, Hook::Events(hook))
    }
    fn with_hook(thp: bool, hook: Hook<'a>) -> Self {
        Native { thp, hook, created: Instant::now(), setup_end: None, run_start: None, run_end: None }
    }
    /// (setup seconds, run seconds).
    pub fn times(&self) -> (f64, f64) {
        let now = Instant::now();
        let start = self.run_start.unwrap_or(now);
        let setup_end = self.setup_end.unwrap_or(start);
        let end = self.run_end.unwrap_or(now);
        (
            setup_end.duration_since(self.created).as_secs_f64(),
            end.saturating_duration_since(start).as_secs_f64(),
        )
    }
}

impl Mem for Native<'_> {
    const TRACING: bool = false;
    #[inline(always)]
    fn touch(&mut self, _addr: u64, _write: bool) {}
    #[inline(always)]
    fn set_cpu(&mut self, _cpu: usize) {}
    fn progress(&mut self, label: &str) {
        match &mut self.hook {
            Hook::Labels(f) => f(label),
            Hook::Events(f) => f(NativeEvent::Progress(label)),
        }
    }
    fn begin_run(&mut self) {
        self.setup_end = Some(Instant::now());
        if let Hook::Events(f) = &mut self.hook {
            f(NativeEvent::SetupDone);
        }
        self.run_start = Some(Instant::now());
    }
    fn end_run(&mut self) {
        self.run_end = Some(Instant::now());
        if let Hook::Events(f) = &mut self.hook {
            f(NativeEvent::RunDone);
        }
    }
    fn alloc<T: Pod>(&mut self, region: &Region, n: usize) -> Result<Arr<T>> {
        map_fixed(region, n, self.thp)
    }
    fn release_pages<T: Pod>(&mut self, arr: &mut Arr<T>, lo: usize, hi: usize) {
        let bytes = (hi - lo) * std::mem::size_of::<T>();
        let p = arr[lo..hi].as_mut_ptr() as *mut libc::c_void;
        // SAFETY: whole pages inside our own private anonymous mapping; after
        // MADV_DONTNEED they read back as zero, which is what the trace mode does.
        let rc = unsafe { libc::madvise(p, bytes, libc::MADV_DONTNEED) };
        if rc != 0 {
            // Purging is an optimisation of the program; failing it keeps the
            // data, so zero it to keep both modes' results identical.
            arr[lo..hi].fill(T::default());
        }
    }
}

/// A backend that records nothing and owns no memory: for untraced setup work
/// (e.g. bulk-loading an index) run with the same code as the traced phase.
pub struct Quiet;

impl Mem for Quiet {
    const TRACING: bool = false;
    #[inline(always)]
    fn touch(&mut self, _addr: u64, _write: bool) {}
    #[inline(always)]
    fn set_cpu(&mut self, _cpu: usize) {}
    fn progress(&mut self, _label: &str) {}
    fn begin_run(&mut self) {}
    fn end_run(&mut self) {}
    fn alloc<T: Pod>(&mut self, region: &Region, _n: usize) -> Result<Arr<T>> {
        Err(Error::input(format!("internal: region '{}' allocated without a backend", region.name)))
    }
    fn release_pages<T: Pod>(&mut self, arr: &mut Arr<T>, lo: usize, hi: usize) {
        arr[lo..hi].fill(T::default());
    }
}

// ---------------------------------------------------------------------------
// Work partitioning. The same helpers run in both modes, so both modes execute
// the iterations in the same order and produce identical results; in trace mode
// the cpu id tells which simulated thread issued each slice.

/// OpenMP `schedule(static)`: thread t owns the t-th contiguous block of `0..n`.
/// The trace interleaves the blocks in slices of `slice` iterations, round-robin
/// over the threads, a plausible interleaving of threads running in lockstep.
#[inline]
pub fn par_static<M: Mem>(m: &mut M, threads: usize, n: usize, slice: usize, mut f: impl FnMut(&mut M, usize, usize)) {
    if threads <= 1 {
        m.set_cpu(0);
        f(m, 0, n);
        return;
    }
    let per = n.div_ceil(threads);
    let slice = slice.max(1);
    let rounds = per.div_ceil(slice);
    for r in 0..rounds {
        for t in 0..threads {
            let block_end = ((t + 1) * per).min(n);
            let lo = t * per + r * slice;
            let hi = (lo + slice).min(block_end);
            if lo < hi {
                m.set_cpu(t);
                f(m, lo, hi);
            }
        }
    }
}

/// OpenMP `schedule(dynamic, chunk)` modelled deterministically: chunk k goes to
/// thread k mod threads (what a dynamic schedule does when threads run at equal
/// speed), in chunk order.
#[inline]
pub fn par_dynamic<M: Mem>(m: &mut M, threads: usize, n: usize, chunk: usize, mut f: impl FnMut(&mut M, usize, usize, usize)) {
    let chunk = chunk.max(1);
    let mut lo = 0;
    let mut k = 0usize;
    while lo < n {
        let hi = (lo + chunk).min(n);
        let t = if threads <= 1 { 0 } else { k % threads };
        m.set_cpu(t);
        f(m, t, lo, hi);
        lo = hi;
        k += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(name: &str, base: u64, len: u64) -> Region {
        Region::new(name, base, len)
    }

    #[test]
    fn traced_addresses_are_element_granular() {
        let mut sink: Vec<Access> = Vec::new();
        {
            let mut m = Traced::new(&mut sink);
            let mut a: Arr<u32> = m.alloc(&region("a", 0x1000_0000_0000, 4096), 10).unwrap();
            a.st(&mut m, 3, 7);
            m.set_cpu(2);
            assert_eq!(a.ld(&mut m, 3), 7);
            assert_eq!(m.accesses, 2);
        }
        assert_eq!(sink[0], Access::write(0x1000_0000_000c));
        assert_eq!(sink[1], Access::read(0x1000_0000_000c).on_cpu(2));
    }

    #[test]
    fn alloc_larger_than_region_is_an_error() {
        let mut sink: Vec<Access> = Vec::new();
        let mut m = Traced::new(&mut sink);
        assert!(m.alloc::<u64>(&region("a", 0x1000_0000_0000, 4096), 513).is_err());
    }

    #[test]
    fn static_partition_covers_each_index_once() {
        let mut sink: Vec<Access> = Vec::new();
        let mut m = Traced::new(&mut sink);
        let mut seen = vec![0u32; 1000];
        par_static(&mut m, 3, 1000, 7, |_, lo, hi| {
            for s in &mut seen[lo..hi] {
                *s += 1;
            }
        });
        assert!(seen.iter().all(|&s| s == 1));
        let mut seen = vec![0u32; 1000];
        par_dynamic(&mut m, 3, 1000, 64, |_, _, lo, hi| {
            for s in &mut seen[lo..hi] {
                *s += 1;
            }
        });
        assert!(seen.iter().all(|&s| s == 1));
    }
}
