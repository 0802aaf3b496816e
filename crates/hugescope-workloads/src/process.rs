//! The memory of a process that is *not* its big anonymous data: executable
//! text, BSS/globals and thread stacks. Direct segments map only anonymous
//! read-write memory (the primary region); these stay paged, and the misses on
//! them are what keeps f_DS below 100% (Basu et al. ISCA'13 §3.2, Table 5:
//! "MySQL's out-of-segment misses come from hundreds of thread stacks,
//! BSS/globals and file mappings"). The direct-segments workloads (graph500,
//! memcached, mysql, npb-cg, npb-bt) add these regions, tagged with their
//! [`RegionKind`], after their data regions, and touch them through [`Image`].
//!
//! Traces hold data references only (the paper drops I-TLB overhead as
//! negligible, §5), so the `code` region is touched as read-only data: the
//! constants and jump tables a compiler puts in the text segment.

use hugescope_core::trace::RegionKind;
use hugescope_core::Result;

use crate::layout::{Layout, PAGE};
use crate::mem::{Arr, Mem};

/// Sizes of the non-data regions.
#[derive(Clone, Debug)]
pub struct ImageCfg {
    /// Thread stacks (one region each, `stack:T`).
    pub threads: usize,
    /// Bytes reserved per stack, its guard page (the lowest page, never touched) included.
    pub stack_size: u64,
    /// BSS/globals bytes (`bss`).
    pub bss: u64,
    /// Text bytes (`code`).
    pub code: u64,
}

/// Words written per frame (saved registers, return address, arguments).
const FRAME_WORDS: usize = 4;
const WORDS_PER_PAGE: usize = (PAGE / 8) as usize;
/// Words of BSS and text a compute kernel's step uses (one 4KB page's worth).
const HOT_WORDS: u64 = PAGE / 8;

impl ImageCfg {
    /// Append `code`, `bss` and `stack:0..threads` to the layout, in this order
    /// (after the data regions, so every data region keeps its address).
    pub fn add_regions(&self, l: &mut Layout) -> Result<()> {
        l.add_kind("code", self.code, RegionKind::Code)?;
        l.add_kind("bss", self.bss, RegionKind::Bss)?;
        for t in 0..self.threads {
            l.add_kind(format!("stack:{t}"), self.stack_size, RegionKind::Stack)?;
        }
        Ok(())
    }
}

/// The backed regions of an [`ImageCfg`].
pub struct Image {
    code: Arr<u64>,
    bss: Arr<u64>,
    stacks: Vec<Arr<u64>>,
    /// Folded loads, so the touches have a result both modes must agree on.
    pub acc: u64,
}

impl Image {
    pub fn alloc<M: Mem>(c: &ImageCfg, l: &Layout, m: &mut M) -> Result<Image> {
        let words = |r: &hugescope_core::trace::Region| (r.len / 8) as usize;
        let code_r = l.get("code")?;
        let bss_r = l.get("bss")?;
        let mut code: Arr<u64> = m.alloc(code_r, words(code_r))?;
        // Text is loaded from the executable: non-zero, resident before main().
        for (i, w) in code.iter_mut().enumerate() {
            *w = crate::rng::mix64(i as u64);
        }
        m.populated(&code);
        let bss = m.alloc(bss_r, words(bss_r))?;
        let mut stacks = Vec::with_capacity(c.threads);
        for t in 0..c.threads {
            let r = l.get(&format!("stack:{t}"))?;
            stacks.push(m.alloc(r, words(r))?);
        }
        Ok(Image { code, bss, stacks, acc: 0 })
    }

    /// A call chain `depth` bytes deep on thread `t`'s stack, and its return:
    /// every 4KB page of the chain gets one frame written on the way down and
    /// read back on the way up (frames are at most a page apart in a deep
    /// chain; denser frames hit the same TLB entry and add nothing here).
    /// Stacks grow down from the top of the region; the guard page at the
    /// bottom is never reached (`depth` is capped one page short of it).
    pub fn call<M: Mem>(&mut self, m: &mut M, t: usize, depth: u64, tag: u64) {
        let n = self.stacks.len();
        let s = &mut self.stacks[t % n];
        let usable = s.len().saturating_sub(WORDS_PER_PAGE) / WORDS_PER_PAGE;
        let pages = (depth.div_ceil(PAGE) as usize).clamp(1, usable.max(1));
        let top = s.len();
        for p in 0..pages {
            let f = top - p * WORDS_PER_PAGE - FRAME_WORDS;
            for w in 0..FRAME_WORDS {
                s.st(m, f + w, tag ^ (p * FRAME_WORDS + w) as u64);
            }
        }
        for p in (0..pages).rev() {
            let f = top - p * WORDS_PER_PAGE - FRAME_WORDS;
            for w in 0..FRAME_WORDS {
                self.acc = self.acc.wrapping_add(s.ld(m, f + w));
            }
        }
    }

    /// A read-modify-write of global word `i` (a lock word or a statistics counter).
    pub fn global<M: Mem>(&mut self, m: &mut M, i: u64) {
        let i = (i % self.bss.len() as u64) as usize;
        let v = self.bss.ld(m, i);
        self.bss.st(m, i, v.wrapping_add(1));
    }

    /// A load of text word `i` (a constant or jump-table entry).
    pub fn text<M: Mem>(&mut self, m: &mut M, i: u64) {
        let i = (i % self.code.len() as u64) as usize;
        self.acc = self.acc.wrapping_add(self.code.ld(m, i));
    }

    /// What a compute kernel does at each of its steps (a BFS level, a CG
    /// iteration, a BT line): call down a few frames, bump a global counter,
    /// read a constant. "Touched a little": the reference's graph500, CG and
    /// BT keep > 99.9% of their misses in the segment.
    pub fn step<M: Mem>(&mut self, m: &mut M, t: usize, k: u64) {
        self.call(m, t, PAGE, k);
        // A kernel's loop uses a few counters and the constants of one
        // function: the first page of each region, not all of it.
        self.global(m, k % HOT_WORDS);
        self.text(m, k % HOT_WORDS);
    }

    /// Sum of every global word (how many updates were made): part of results.
    pub fn globals_sum(&self) -> u64 {
        self.bss.iter().fold(0u64, |a, &w| a.wrapping_add(w))
    }
}

/// A memory backend that also steps an [`Image`] at every progress point of
/// the kernel it wraps, on the cpu that reached it: how graph500 and npb-cg
/// touch their stack, BSS and code without changing the shared BFS and CG code
/// (whose other users must keep byte-identical traces).
pub struct Stepping<'a, M: Mem> {
    pub inner: &'a mut M,
    pub image: Image,
    cpu: usize,
    steps: u64,
}

impl<'a, M: Mem> Stepping<'a, M> {
    pub fn new(inner: &'a mut M, image: Image) -> Self {
        Stepping { inner, image, cpu: 0, steps: 0 }
    }
}

impl<M: Mem> Mem for Stepping<'_, M> {
    const TRACING: bool = M::TRACING;
    #[inline(always)]
    fn touch(&mut self, addr: u64, write: bool) {
        self.inner.touch(addr, write)
    }
    #[inline(always)]
    fn set_cpu(&mut self, cpu: usize) {
        self.cpu = cpu;
        self.inner.set_cpu(cpu)
    }
    fn progress(&mut self, label: &str) {
        self.steps += 1;
        let (cpu, k) = (self.cpu, self.steps);
        self.image.step(self.inner, cpu, k);
        self.inner.progress(label)
    }
    fn begin_run(&mut self) {
        self.inner.begin_run()
    }
    fn end_run(&mut self) {
        self.inner.end_run()
    }
    fn alloc<T: crate::mem::Pod>(&mut self, region: &hugescope_core::trace::Region, n: usize) -> Result<Arr<T>> {
        self.inner.alloc(region, n)
    }
    fn populated_span(&mut self, base: u64, bytes: u64) {
        self.inner.populated_span(base, bytes)
    }
    fn release_pages<T: crate::mem::Pod>(&mut self, arr: &mut Arr<T>, lo: usize, hi: usize) {
        self.inner.release_pages(arr, lo, hi)
    }
}
