//! The installed PCCs (one per cpu, PCC §3.2), updated on a second thread
//! when the process may use one.
//!
//! Why: on a scattered workload the walker feeds the PCC on every other
//! access, and that update (find the region's entry, or evict the LFU one
//! and insert) took about a fifth of a GUPS simulation's time under pcc (29
//! against 35 M accesses/s with the updates left out, on the 2-cpu test
//! VM). Nothing reads a PCC between its updates except a policy's read, a
//! shootdown and the end of the run, so the updates can run behind the
//! simulation: walks are recorded in a batch, and a full batch is applied to
//! the PCCs on a helper thread while the simulation records the next one.
//!
//! Results cannot change. The records are applied in walk order, one batch
//! after the other, and every way to the PCCs (`get`, `of_cpu`,
//! `take_pccs`, `install`, cloning the kernel) first waits for the batch in
//! flight and applies the walks recorded since, so whoever looks sees
//! exactly the state of feeding walk by walk. A simulation offloads when it
//! also decodes ahead (one cpu available, `HUGESCOPE_READAHEAD=0` or a sweep
//! running one simulation per cpu do neither: `run::uses_second_cpu`);
//! otherwise, and in every kernel built directly, each walk updates its PCC
//! at once.

use crate::hw::pcc_table::Pcc;
use crate::trace::ADDR_MASK;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Walks in one batch: large enough that a thread per batch costs nothing
/// next to the batch (about a millisecond of updates), small enough that a
/// read waiting for it waits little.
const BATCH: usize = 1 << 15;

/// One walk as a PCC sees it (`Pcc::on_walk`'s arguments and the cpu): what
/// the installed bank and the shared pass's riding banks (`members.rs`) record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct WalkRecord {
    pub addr: u64,
    pub pid: u16,
    pub cpu: u16,
    pub leaf_shift: u32,
    pub pmd_a_was_set: bool,
    pub pud_a_was_set: bool,
}

impl WalkRecord {
    /// The walk in eight bytes, as a batch holds it (half the memory traffic
    /// between the two cpus of 16-byte records): the address's page bits,
    /// the cpu and the pid in the top 16 bits, the leaf shift and the two A
    /// bits in the page-offset bits, which no PCC reads (it tags 2MB and 1GB
    /// regions). None if a field does not fit; a trace's accesses always do
    /// (48-bit addresses, 256 cpus, 128 processes: `trace::Access::pack`).
    fn pack(&self) -> Option<u64> {
        let fits = self.addr <= ADDR_MASK && self.cpu < 256 && self.pid < 256 && self.leaf_shift < 64;
        fits.then_some(
            (self.addr & !PAGE_BITS)
                | ((self.cpu as u64) << 48)
                | ((self.pid as u64) << 56)
                | self.leaf_shift as u64
                | (self.pmd_a_was_set as u64) << 6
                | (self.pud_a_was_set as u64) << 7,
        )
    }

    fn unpack(p: u64) -> WalkRecord {
        WalkRecord {
            addr: p & ADDR_MASK & !PAGE_BITS,
            cpu: (p >> 48) as u16 & 0xff,
            pid: (p >> 56) as u16,
            leaf_shift: (p & 63) as u32,
            pmd_a_was_set: p & (1 << 6) != 0,
            pud_a_was_set: p & (1 << 7) != 0,
        }
    }
}

/// The page-offset bits of a packed walk (4KB: the smallest base page).
const PAGE_BITS: u64 = 0xfff;

/// A batch on the helper thread: it owns the PCCs until joined, and gives
/// back the batch's buffer for the next one.
type Away = JoinHandle<(Vec<Pcc>, Vec<u64>)>;

#[derive(Default)]
struct Held {
    /// The PCCs by cpu; empty while a batch is away.
    pccs: Vec<Pcc>,
    away: Option<Away>,
    /// A drained buffer to record the next batch in.
    spare: Vec<u64>,
}

impl Held {
    /// Wait for the batch in flight, if any, and take the PCCs back.
    fn settle(&mut self) {
        if let Some(h) = self.away.take() {
            match h.join() {
                Ok((pccs, mut buf)) => {
                    self.pccs = pccs;
                    buf.clear();
                    self.spare = buf;
                }
                // The update panicked (a bug): raise it here, where the
                // simulation would have raised it walking.
                Err(e) => std::panic::resume_unwind(e),
            }
        }
    }
}

/// The installed PCCs and the walks not yet applied to them.
#[derive(Default)]
pub struct PccBank {
    held: Mutex<Held>,
    /// Walks recorded since the last batch left, oldest first (packed).
    pending: Vec<u64>,
    /// An empty PCC, what a cpu's first walk starts from; None: no PCC.
    template: Option<Pcc>,
    /// Batches may go to a helper thread (`allow_offload`); they do while a
    /// PCC is installed (`offloading`).
    may_offload: bool,
}

/// The held part, borrowed alone (the other fields stay free to borrow).
fn held(m: &mut Mutex<Held>) -> &mut Held {
    // Poisoned only by a batch's panic, which `settle` raised already.
    m.get_mut().unwrap_or_else(|e| e.into_inner())
}

/// The PCC of `cpu` in `pccs`, one made by `new` if the cpu has none yet.
#[inline]
fn pcc_of(pccs: &mut Vec<Pcc>, cpu: u16, new: impl FnOnce() -> Pcc) -> &mut Pcc {
    let c = cpu as usize;
    if c >= pccs.len() {
        pccs.resize(c + 1, new());
    }
    &mut pccs[c]
}

/// Feed walk `w` to its cpu's PCC in `pccs`, one made by `new` at the cpu's
/// first walk (the installed bank and the riding ones alike).
#[inline]
pub(super) fn feed(pccs: &mut Vec<Pcc>, new: impl FnOnce() -> Pcc, w: &WalkRecord) {
    pcc_of(pccs, w.cpu, new).on_walk(w.pid, w.addr, w.leaf_shift, w.pmd_a_was_set, w.pud_a_was_set);
}

/// `feed`, with new PCCs cloned from `template`.
#[inline]
fn apply(pccs: &mut Vec<Pcc>, template: &Pcc, w: &WalkRecord) {
    feed(pccs, || template.clone(), w);
}

/// Apply the packed walks of a batch, in order.
fn apply_batch(pccs: &mut Vec<Pcc>, template: &Pcc, batch: &[u64]) {
    for &p in batch {
        apply(pccs, template, &WalkRecord::unpack(p));
    }
}

impl PccBank {
    /// Install `pccs`, with `template` (an empty PCC) for cpus that have none
    /// yet; replaces what the bank held.
    pub(super) fn install(&mut self, template: Option<Pcc>, pccs: Vec<Pcc>) {
        self.take_pccs();
        self.template = template;
        self.reserve_batch();
        held(&mut self.held).pccs = pccs;
    }

    /// Let batches go to a helper thread (`on`) or apply every walk at once.
    pub(super) fn allow_offload(&mut self, on: bool) {
        self.get();
        self.may_offload = on;
        self.reserve_batch();
    }

    /// Whether batches go to a helper thread (else each walk is applied at
    /// once).
    #[inline]
    fn offloading(&self) -> bool {
        self.may_offload && self.template.is_some()
    }

    /// Offloading, allocate the first batch's buffer now, not by a walk's push.
    fn reserve_batch(&mut self) {
        if self.offloading() {
            self.pending.reserve_exact(BATCH);
        }
    }

    /// The PCCs by cpu (cpus that never walked may be missing), with every
    /// recorded walk applied.
    pub(super) fn get(&mut self) -> &mut Vec<Pcc> {
        let held = held(&mut self.held);
        held.settle();
        if let Some(template) = self.template.as_ref() {
            apply_batch(&mut held.pccs, template, &self.pending);
        }
        self.pending.clear();
        &mut held.pccs
    }

    /// The PCC of `cpu`, created if needed, with every walk applied; None
    /// without a PCC.
    pub(super) fn of_cpu(&mut self, cpu: u16) -> Option<&mut Pcc> {
        let template = self.template.clone()?;
        Some(pcc_of(self.get(), cpu, || template))
    }

    /// Take the PCCs out with every walk applied; the bank is left empty,
    /// without a PCC.
    pub(super) fn take_pccs(&mut self) -> Vec<Pcc> {
        let pccs = std::mem::take(self.get());
        self.template = None;
        pccs
    }

    /// Record a walk. Without offloading it is applied now; else a full
    /// batch goes to the helper thread.
    #[inline]
    pub(super) fn record(&mut self, w: WalkRecord) {
        if self.offloading() {
            if let Some(p) = w.pack() {
                self.pending.push(p);
                if self.pending.len() >= BATCH {
                    self.send_batch();
                }
                return;
            }
            // Not a trace's walk (see `pack`): applied now, after the pending ones.
            self.get();
        }
        if let Some(template) = self.template.as_ref() {
            apply(&mut held(&mut self.held).pccs, template, &w);
        }
    }

    /// Hand the pending walks and the PCCs to a helper thread, once the
    /// previous batch is back; apply them here if no thread can start.
    #[cold]
    #[inline(never)]
    fn send_batch(&mut self) {
        let template = self.template.clone().expect("offloading needs a PCC");
        let held = held(&mut self.held);
        held.settle();
        // The next batch's buffer is allocated here, once (later batches
        // reuse the one the helper gives back), never by a walk's push.
        let mut next = std::mem::take(&mut held.spare);
        next.reserve_exact(BATCH);
        let batch = std::mem::replace(&mut self.pending, next);
        // Through a shared slot, so that if no thread starts the PCCs and
        // the batch are still here.
        let slot = Arc::new(Mutex::new(Some((std::mem::take(&mut held.pccs), batch))));
        let job = slot.clone();
        let spawned = std::thread::Builder::new().name("pcc-updates".into()).spawn(move || {
            let work = job.lock().unwrap_or_else(|e| e.into_inner()).take();
            let (mut pccs, batch) = work.expect("the batch is handed over once");
            apply_batch(&mut pccs, &template, &batch);
            (pccs, batch)
        });
        match spawned {
            Ok(h) => held.away = Some(h),
            Err(_) => {
                // No thread (a process or memory limit): apply it here, and
                // stop offloading.
                let work = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
                let (mut pccs, mut batch) = work.expect("the thread never ran");
                apply_batch(&mut pccs, self.template.as_ref().expect("offloading needs a PCC"), &batch);
                held.pccs = pccs;
                batch.clear();
                held.spare = batch;
                self.may_offload = false;
            }
        }
    }
}

// A copy of the kernel (a shared pass copies it at a decision) has the same
// PCCs: the batch in flight is waited for first, and the walks still pending
// are copied as they are (the copy applies them when it is next looked at).
impl Clone for PccBank {
    fn clone(&self) -> Self {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.settle();
        PccBank {
            held: Mutex::new(Held { pccs: held.pccs.clone(), away: None, spare: Vec::new() }),
            pending: self.pending.clone(),
            template: self.template.clone(),
            may_offload: self.may_offload,
        }
    }
}

impl std::fmt::Debug for PccBank {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.settle();
        f.debug_struct("PccBank").field("pccs", &held.pccs).field("pending", &self.pending).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::pcc_table::PccConfig;

    /// A bank fed in batches on the helper thread, looked at and copied at
    /// odd points, ends with the PCCs of a bank fed walk by walk.
    #[test]
    fn batches_on_a_thread_give_the_walk_by_walk_pccs() {
        let cfg = PccConfig { entries: 16, ..PccConfig::default() };
        let template = Pcc::new(&cfg, 21, 30);
        let bank = |offload| {
            let mut b = PccBank::default();
            b.allow_offload(offload);
            b.install(Some(template.clone()), Vec::new());
            b
        };
        let (mut now, mut later) = (bank(false), bank(true));
        assert!(later.offloading() && !now.offloading());
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut copies = Vec::new();
        for i in 0..(3 * BATCH + 123) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let w = WalkRecord {
                // 64 regions of 2MB, so entries are hit, inserted and evicted.
                addr: 0x7f00_0000_0000 + (x % (128 << 20)),
                // Now and then a pid beyond a packed walk's (applied at once).
                pid: if i % 10_000 == 9_999 { 300 } else { (x >> 40) as u16 & 1 },
                cpu: (x >> 50) as u16 % 3,
                leaf_shift: 12,
                pmd_a_was_set: x & 7 != 0,
                pud_a_was_set: true,
            };
            now.record(w);
            later.record(w);
            if i == BATCH + 5 || i == 2 * BATCH + 77 {
                // A read in the middle of a batch (a policy's PCC read).
                assert_eq!(format!("{:?}", later.get()), format!("{:?}", now.get()));
            }
            if i == 2 * BATCH + 1 {
                // A copy while a batch is away (a shared pass at a decision).
                copies.push((later.clone(), now.clone()));
            }
        }
        assert!(held(&mut later.held).away.is_some() || !later.pending.is_empty(), "the test ends with walks not yet applied");
        assert_eq!(format!("{:?}", later.take_pccs()), format!("{:?}", now.take_pccs()));
        let (mut c_later, mut c_now) = copies.pop().expect("one copy");
        assert_eq!(format!("{:?}", c_later.get()), format!("{:?}", c_now.get()));
        assert!(later.template.is_none() && later.get().is_empty(), "taking empties the bank");
    }

    proptest::proptest! {
        /// A packed walk unpacks to itself, less the page offset no PCC reads.
        #[test]
        fn packed_walks_round_trip(addr in 0..=ADDR_MASK, cpu in 0u16..256, pid in 0u16..256,
                                   leaf_shift in 0u32..64, pmd_a: bool, pud_a: bool) {
            let w = WalkRecord { addr, pid, cpu, leaf_shift, pmd_a_was_set: pmd_a, pud_a_was_set: pud_a };
            let back = WalkRecord::unpack(w.pack().expect("fits"));
            proptest::prop_assert_eq!(back, WalkRecord { addr: addr & !PAGE_BITS, ..w });
        }

        #[test]
        fn walks_that_do_not_fit_are_not_packed(cpu in 256u16.., pid in 256u16..) {
            let w = WalkRecord { addr: 0, pid: 0, cpu: 0, leaf_shift: 12, pmd_a_was_set: true, pud_a_was_set: true };
            let (big_cpu, big_pid, big_addr) = (WalkRecord { cpu, ..w }, WalkRecord { pid, ..w }, WalkRecord { addr: ADDR_MASK + 1, ..w });
            proptest::prop_assert!(big_cpu.pack().is_none());
            proptest::prop_assert!(big_pid.pack().is_none());
            proptest::prop_assert!(big_addr.pack().is_none());
        }
    }
}
