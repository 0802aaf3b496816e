//! Arrays whose addresses are traced but whose values are not kept.
//!
//! Where a workload's data never steers which addresses it touches (GUPS's
//! table: the index comes from the random stream, not from the table; STREAM's
//! arrays: the index is the loop counter), a trace needs the addresses only.
//! A [`Shadow`] is such an array: `ld`/`st` record the element's address at
//! its fixed virtual address (`region base + index x size_of::<T>()`, exactly
//! as [`Arr`](crate::mem::Arr) does) and hold no bytes, so a 32 GiB table of
//! the direct-segments paper's GUPS sweep (ISCA'13 Fig. 5) costs the trace
//! generator no host memory (issue #33: paper scale on one small machine).
//!
//! A workload offers this as a parameter (`values=false`) and keeps its
//! stored path for native runs and for results that read the data (a
//! checksum): the two paths produce the same access stream, which the
//! workloads' tests check access by access.

use std::marker::PhantomData;

use hugescope_core::trace::Region;
use hugescope_core::{Error, Result};

use crate::mem::{Mem, Pod};

/// `len` elements of `T` at `base`, addresses only.
#[derive(Clone, Copy, Debug)]
pub struct Shadow<T: Pod> {
    base: u64,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Pod> Shadow<T> {
    /// `n` elements placed at the start of `region` (which must hold them).
    pub fn new(region: &Region, n: usize) -> Result<Shadow<T>> {
        let fits = n.checked_mul(std::mem::size_of::<T>()).is_some_and(|b| b as u64 <= region.len);
        if !fits {
            return Err(Error::input(format!(
                "internal layout error: {n} elements do not fit region '{}' ({} bytes)",
                region.name, region.len
            )));
        }
        Ok(Shadow { base: region.base, len: n, _t: PhantomData })
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Virtual address of element `i` (the address traces carry).
    #[inline(always)]
    pub fn addr(&self, i: usize) -> u64 {
        debug_assert!(i < self.len);
        self.base + (i * std::mem::size_of::<T>()) as u64
    }
    /// Record a load of element `i`.
    #[inline(always)]
    pub fn ld<M: Mem>(&self, m: &mut M, i: usize) {
        m.touch(self.addr(i), false);
    }
    /// Record a store to element `i`.
    #[inline(always)]
    pub fn st<M: Mem>(&self, m: &mut M, i: usize) {
        m.touch(self.addr(i), true);
    }
    /// Tell the trace the whole array was initialised during setup (as
    /// [`Mem::populated`] does for a stored array).
    pub fn populated<M: Mem>(&self, m: &mut M) {
        if self.len > 0 {
            m.populated_span(self.base, (self.len * std::mem::size_of::<T>()) as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::Traced;
    use hugescope_core::trace::{Access, AccessSink};

    #[derive(Default)]
    struct Keep(Vec<Access>, Vec<(u64, u64)>);
    impl AccessSink for Keep {
        fn access(&mut self, a: Access) {
            self.0.push(a);
        }
        fn populate(&mut self, _pid: u16, base: u64, len: u64) {
            self.1.push((base, len));
        }
    }

    #[test]
    fn addresses_are_those_of_a_stored_array_and_no_memory_is_kept() {
        let r = Region::new("t", 0x7000_0000_0000, 64 << 30);
        // 64 GiB of u64: a stored array this size could not be allocated here.
        let s: Shadow<u64> = Shadow::new(&r, 8 << 30).unwrap();
        assert_eq!(std::mem::size_of_val(&s), 16);
        let mut k = Keep::default();
        let mut m = Traced::new(&mut k);
        s.populated(&mut m);
        s.ld(&mut m, 0);
        s.st(&mut m, (8 << 30) - 1);
        assert_eq!(k.1, vec![(0x7000_0000_0000, 64 << 30)]);
        let got: Vec<(u64, bool)> = k.0.iter().map(|a| (a.addr, a.write)).collect();
        assert_eq!(got, vec![(0x7000_0000_0000, false), (0x7000_0000_0000 + (64 << 30) - 8, true)]);
    }

    #[test]
    fn an_array_larger_than_its_region_is_refused() {
        let r = Region::new("t", 0x1000, 4096);
        assert!(Shadow::<u64>::new(&r, 512).is_ok());
        let e = Shadow::<u64>::new(&r, 513).unwrap_err().to_string();
        assert!(e.contains("do not fit region 't'"), "{e}");
    }
}
