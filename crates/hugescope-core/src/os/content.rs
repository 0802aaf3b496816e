//! Page contents: what each base page holds, as far as page sharing needs to
//! know (FHPM §2.3, §5 "FHPM-Share"; spec fhpm.md §6). The simulator has no
//! data, only a *content word* per base page:
//!
//! - `ZERO` (0): the page was never written since it was mapped: it holds
//!   zeros (a fresh anonymous page; the pages of a huge page the program
//!   never wrote). The zero-page scan (THP shrinker) reclaims these.
//! - `PRIVATE`: the page was written and nobody declared its bytes: its
//!   content is its own and equals no other page's.
//! - a declared id: a workload said which data the page holds (a
//!   `content:` marker, `trace::ContentDecl`): element `e` of stream `s`
//!   has id `declared_id(s, e)`, so two processes (or VMs) that insert the
//!   same records in different orders hold pages with equal ids.
//!
//! Bit 63 (`MERGED`) marks a page whose frame is shared copy-on-write by
//! the same-page merger (`os/ksm.rs`); the id in the low bits stays.
//!
//! Events: a write makes a page `PRIVATE` (and breaks copy-on-write first
//! when it is merged); setup population (`populate:` markers: the program
//! initialised the data) makes it `PRIVATE`; a declaration sets ids; a free
//! returns the page to `ZERO`. Content is tracked only once a sharing policy
//! turns it on (`Kernel::enable_sharing`): the per-page words are not
//! allocated and writes are not trapped otherwise, so runs without sharing
//! are unchanged. A workload declares contents after it wrote the data (a
//! later write makes the page private again).

use super::kernel::Kernel;
use crate::trace::{Access, ContentDecl};

/// Never written since mapped: a zero-filled page. Zero, so content words
/// are allocated zeroed and cost no resident memory until written
/// (`aspace::grow_zeroed`).
pub const ZERO: u64 = 0;
const _: () = assert!(ZERO == 0);
/// The page's frame is shared copy-on-write (flag bit, `os/ksm.rs`).
pub const MERGED: u64 = 1 << 63;
/// Written, content its own: never equal to another page's.
pub const PRIVATE: u64 = MERGED - 1;
/// The content id without the flag bit.
pub const ID_MASK: u64 = MERGED - 1;

/// The content id of element `element` of declared stream `stream`: a
/// 62-bit mix of both (SplitMix64's finaliser), never `ZERO` or `PRIVATE`.
pub fn declared_id(stream: u64, element: u64) -> u64 {
    let mut z = stream.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ element.wrapping_add(0x632b_e59b_d9b4_e019);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    // Two flag-free bits below MERGED: ids never reach PRIVATE.
    (z >> 2) | 1
}

impl Kernel {
    /// Whether page contents are tracked (a sharing policy is on).
    #[inline(always)]
    pub fn content_tracked(&self) -> bool {
        self.sharing.is_some()
    }

    /// The content word of the base page at `va` of `pid` (flag included);
    /// `ZERO` for pages with no word yet (never written).
    pub fn content_word(&self, pid: u16, va: u64) -> u64 {
        let bs = self.shape.base_shift;
        let Some(sp) = self.spaces.get(pid as usize) else { return ZERO };
        let Some(vi) = sp.find(va) else { return ZERO };
        let v = &sp.vmas[vi];
        v.content.get(v.page_index(va, bs)).copied().unwrap_or(ZERO)
    }

    /// The content id of the base page at `va` (without the merged flag).
    pub fn content_of(&self, pid: u16, va: u64) -> u64 {
        self.content_word(pid, va) & ID_MASK
    }

    /// Set the content word of page `pi` of VMA `vi` of `pid`, allocating
    /// the VMA's words on first use (VMAs inferred later start empty).
    pub(super) fn set_content(&mut self, pid: u16, vi: usize, pi: usize, word: u64) {
        let v = &mut self.spaces[pid as usize].vmas[vi];
        if v.content.len() != v.flags.len() {
            super::aspace::grow_zeroed(&mut v.content, v.flags.len());
        }
        v.content[pi] = word;
    }

    /// Set the content of every page of [start, end) of `pid` to `f(page
    /// number within the range)`, keeping each page's merged flag (the
    /// callers act on unmerged pages only; a merged page's id is its frame's).
    fn set_range(&mut self, pid: u16, start: u64, end: u64, f: impl Fn(u64) -> u64) {
        let bs = self.shape.base_shift;
        let page = 1u64 << bs;
        let mut a = start & !(page - 1);
        while a < end {
            let Some(vi) = self.spaces.get(pid as usize).and_then(|sp| sp.find(a)) else {
                a += page;
                continue;
            };
            let pi = self.spaces[pid as usize].vmas[vi].page_index(a, bs);
            let old = self.content_word(pid, a);
            if old & MERGED == 0 {
                self.set_content(pid, vi, pi, f((a - (start & !(page - 1))) >> bs));
            }
            a += page;
        }
    }

    /// Zero-content base pages of [start, start + len) of `pid` (one VMA).
    pub fn zero_pages_in(&self, pid: u16, start: u64, len: u64) -> u64 {
        let bs = self.shape.base_shift;
        let Some(sp) = self.spaces.get(pid as usize) else { return 0 };
        let Some(vi) = sp.find(start) else { return 0 };
        let v = &sp.vmas[vi];
        let a = v.page_index(start, bs);
        let b = (a + (len >> bs) as usize).min(v.flags.len());
        (a..b).filter(|&i| v.flags[i] & super::aspace::PRESENT != 0 && v.content.get(i).copied().unwrap_or(ZERO) == ZERO).count() as u64
    }

    /// A `content:` marker: page j of the range holds element first + j of
    /// the stream. Ignored without content tracking.
    pub(super) fn declare_content(&mut self, d: &ContentDecl) {
        if !self.content_tracked() {
            return;
        }
        self.set_range(d.pid, d.start, d.start + d.len, |j| declared_id(d.stream, d.first + j));
    }

    /// Setup population wrote the range: its contents are private.
    pub(super) fn populated_content(&mut self, pid: u16, start: u64, len: u64) {
        if self.content_tracked() {
            self.set_range(pid, start, start + len, |_| PRIVATE);
        }
    }

    /// The write trap of content tracking (`Kernel::after_access`, only
    /// while tracking): a write breaks copy-on-write of a merged page, then
    /// makes the page's content private.
    pub(super) fn content_write(&mut self, a: &Access) {
        let shape = self.shape;
        let sp = &mut self.spaces[a.pid as usize];
        let vi = sp.vma_index(a.addr, &shape);
        let pi = sp.vmas[vi].page_index(a.addr, shape.base_shift);
        let word = sp.vmas[vi].content.get(pi).copied().unwrap_or(ZERO);
        if word == PRIVATE {
            return;
        }
        if word & MERGED != 0 {
            self.break_cow(a.pid, a.addr);
        }
        // A break that found no frame leaves the page merged (and counted).
        let still = self.content_word(a.pid, a.addr) & MERGED;
        self.set_content(a.pid, vi, pi, PRIVATE | still);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_ids_are_plain_ids() {
        let mut seen = std::collections::BTreeSet::new();
        for s in 0..4 {
            for e in 0..2000 {
                let id = declared_id(s, e);
                assert!(id != ZERO && id != PRIVATE && id & MERGED == 0);
                assert!(seen.insert(id), "ids collide at stream {s} element {e}");
            }
        }
        assert_eq!(declared_id(3, 77), declared_id(3, 77));
    }
}
