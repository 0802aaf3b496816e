//! Members of a shared pass (`crate::sweep`): several configurations that
//! differ only in what they decide run on one kernel while their shared state
//! (page tables, physical memory, clock, counters) is identical.
//!
//! A member's own parts are its policies, its PCC hardware (size, counters,
//! replacement: PCC §3.2) and its huge-page budget (§4's N% limit, which only
//! a promotion reads). One member is installed in the kernel's
//! ordinary fields and acts; the others ride along as extra PCC banks that
//! the walker feeds and shootdowns invalidate exactly as the installed one
//! (PCC §3.2 and §3.3 step C), so each member's PCC holds what it would hold
//! in a run of its own. The kernel never reads a PCC itself (only a policy
//! does, at its reads), so the banks leave the shared state untouched.
//!
//! With `defer_timers` set, due daemons are not run inside the access but
//! flagged (`timers_due`): the sweep then runs them once per member on a
//! copy of the state and keeps members together only where the resulting
//! states are equal. Deferring to the end of the access changes nothing:
//! timers already ran last in it, and only MMU shootdowns (which the kernel
//! never reads) happen in between.
//!
//! The banks are fed in batches: a walk is recorded (`WalkRecord`) and every
//! bank replays the batch in order when it fills, before a shootdown reaches
//! the banks, before a member joins and before the banks are taken out (at a
//! decision or the end). Each bank sees the same walks and invalidations in
//! the same order as when fed walk by walk, so its state is the same; one
//! bank at a time stays in the cache while it replays, where feeding eight
//! banks on every walk of a scattered workload went through all of them.
//! A replay numbers each walk's region once (`hw::region_ids`); every bank
//! in the constant-time form then finds its slot by that number.

use super::kernel::Kernel;
use super::pcc_bank::{feed, WalkRecord};
use crate::hw::pcc_table::{Pcc, PccConfig, PccTable};
use crate::hw::pcc_buckets::{self, BucketTable};
use crate::hw::region_ids::RegionIds;
use crate::hw::Leaf;
use super::hooks::Policy;
use crate::trace::Access;

/// A kernel's policies in order. A slot is None while its policy's callback
/// runs. Cloning a kernel gives its shared state only: the copy's slots are
/// empty (policies belong to a member; the sweep installs them).
#[derive(Default)]
pub struct PolicySlots(pub(super) Vec<Option<Box<dyn Policy>>>);

impl Clone for PolicySlots {
    fn clone(&self) -> Self {
        PolicySlots(Vec::new())
    }
}

impl std::fmt::Debug for PolicySlots {
    // Members' parts are not shared state: left out of the comparison.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PolicySlots({})", self.0.len())
    }
}

impl std::ops::Deref for PolicySlots {
    type Target = Vec<Option<Box<dyn Policy>>>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for PolicySlots {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// One member's own parts, out of the kernel.
#[derive(Default)]
pub struct MemberParts {
    policies: PolicySlots,
    names: Vec<&'static str>,
    walkers: Vec<usize>,
    keep_huge_on_free: bool,
    pcc_cfg: Option<PccConfig>,
    pccs: Vec<Pcc>,
    /// The huge-page budget (PCC §4's N% limit): read only when a member
    /// promotes (`huge_memory::promote`) and in the end-of-run check, so
    /// members at different budgets share a pass until a read's outcome
    /// differs.
    budget_bytes: Option<u64>,
}

/// A riding member's PCCs, one per cpu: in the constant-time form when its
/// configuration allows (`hw::pcc_buckets`), else as the hardware model.
enum Tables {
    Buckets(Vec<BucketTable>),
    Plain(Vec<Pcc>),
}

/// One extra member's PCC bank.
struct Bank {
    cfg: PccConfig,
    tables: Tables,
    /// The member's other parts, kept with its bank.
    parts: MemberParts,
}

/// Walks recorded before the banks replay them.
const RIDING_BATCH: usize = 4096;

/// The kernel's shared-pass state: extra members and the timer deferral.
#[derive(Default)]
pub struct Members {
    extra: Vec<Bank>,
    /// Walks not yet fed to the banks (`feed_riding`), in order.
    pending: Vec<WalkRecord>,
    /// The numbers of the regions the constant-time banks have seen, and
    /// the number of each pending walk's region (a buffer of `flush_riding`).
    ids: RegionIds,
    pending_ids: Vec<u32>,
    pub(super) defer_timers: bool,
    pub(super) timers_due: bool,
}

impl Clone for Members {
    // Like `PolicySlots`: a clone is the shared state, without members.
    fn clone(&self) -> Self {
        Members {
            extra: Vec::new(),
            pending: Vec::new(),
            ids: RegionIds::default(),
            pending_ids: Vec::new(),
            defer_timers: self.defer_timers,
            timers_due: self.timers_due,
        }
    }
}

impl std::fmt::Debug for Members {
    // Riding members and the deferral are not shared state: a group and a
    // member's copy of it compare equal whatever rides along.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Members")
    }
}

impl Kernel {
    /// Take the installed member's parts out (policies, PCC hardware),
    /// leaving the shared state.
    pub fn take_member(&mut self) -> MemberParts {
        MemberParts {
            policies: std::mem::take(&mut self.policies),
            names: std::mem::take(&mut self.names),
            walkers: std::mem::take(&mut self.walkers),
            keep_huge_on_free: std::mem::replace(&mut self.keep_huge_on_free, false),
            pcc_cfg: self.pcc_cfg.take(),
            pccs: self.pccs.take_pccs(),
            budget_bytes: self.budget_bytes.take(),
        }
    }

    /// Install `m` as the acting member (the kernel has none installed).
    pub fn install_member(&mut self, m: MemberParts) {
        self.policies = m.policies;
        self.names = m.names;
        self.walkers = m.walkers;
        self.keep_huge_on_free = m.keep_huge_on_free;
        let template = m.pcc_cfg.as_ref().map(|c| self.empty_pcc(c));
        self.pccs.install(template, m.pccs);
        self.pcc_cfg = m.pcc_cfg;
        self.budget_bytes = m.budget_bytes;
    }

    /// Add `m` as a riding member: its PCC is fed, its policies wait. Only
    /// members whose policies act on timers alone may ride (the sweep checks).
    pub fn add_riding_member(&mut self, mut m: MemberParts) {
        // The walks so far belong to the members already riding.
        self.flush_riding();
        let cfg = m.pcc_cfg.take().expect("a riding member has a PCC");
        let pccs = std::mem::take(&mut m.pccs);
        let tables = if pcc_buckets::supports(&cfg) {
            Tables::Buckets(
                pccs.iter()
                    .map(|p| BucketTable::from_table(&p.pmd, &cfg, &mut self.members.ids))
                    .collect(),
            )
        } else {
            Tables::Plain(pccs)
        };
        self.members.extra.push(Bank {
            cfg,
            tables,
            parts: m,
        });
    }

    /// Take every riding member out, in the order they were added.
    pub fn take_riding_members(&mut self) -> Vec<MemberParts> {
        self.flush_riding();
        // No bank is left to read the region numbers: start afresh.
        self.members.ids = RegionIds::default();
        self.members
            .extra
            .drain(..)
            .map(|b| {
                let pccs = match b.tables {
                    Tables::Buckets(v) => v
                        .iter()
                        .map(|t| Pcc {
                            pmd: t.to_table(),
                            pud: None,
                        })
                        .collect(),
                    Tables::Plain(v) => v,
                };
                MemberParts {
                    pcc_cfg: Some(b.cfg),
                    pccs,
                    ..b.parts
                }
            })
            .collect()
    }

    /// Number of riding members.
    pub fn riding_members(&self) -> usize {
        self.members.extra.len()
    }

    /// Defer due daemons to `run_deferred_timers` (see the module comment).
    pub fn set_defer_timers(&mut self, on: bool) {
        self.members.defer_timers = on;
    }

    /// Whether daemons came due during the last access and wait.
    #[inline(always)]
    pub fn timers_due(&self) -> bool {
        self.members.timers_due
    }

    /// Run the daemons that came due while deferred.
    pub fn run_deferred_timers(&mut self) {
        if std::mem::replace(&mut self.members.timers_due, false) {
            self.run_timers();
        }
    }

    /// The riding members' walker update (PCC §3.2), as `feed_pcc` does for
    /// the installed one.
    pub(super) fn feed_riding(&mut self, a: &Access, leaf: &Leaf) {
        let w = self.walk_record(a, leaf);
        self.members.pending.push(w);
        if self.members.pending.len() >= RIDING_BATCH {
            self.flush_riding();
        }
    }

    /// Every bank replays the recorded walks, in order, one bank at a time.
    fn flush_riding(&mut self) {
        if self.members.pending.is_empty() {
            return;
        }
        let shifts = (self.shape.region_shift, self.shape.pud_shift);
        let m = &mut self.members;
        let pending = std::mem::take(&mut m.pending);
        // The region of every walk a 2MB table counts, numbered once for all
        // the constant-time banks (`Pcc::on_walk`: a walk to a leaf above
        // 2MB or with the PMD's A bit clear does not reach the table).
        let counted = |w: &WalkRecord| w.leaf_shift <= shifts.0 && w.pmd_a_was_set;
        m.pending_ids.clear();
        if m.extra.iter().any(|b| matches!(b.tables, Tables::Buckets(_))) {
            let ids = &mut m.ids;
            m.pending_ids
                .extend(pending.iter().map(|w| if counted(w) { ids.id(PccTable::key(w.pid, w.addr >> shifts.0)) } else { 0 }));
        }
        for b in m.extra.iter_mut() {
            match &mut b.tables {
                Tables::Plain(v) => pending.iter().for_each(|w| feed(v, || Pcc::new(&b.cfg, shifts.0, shifts.1), w)),
                Tables::Buckets(v) => {
                    for (w, &id) in pending.iter().zip(&m.pending_ids) {
                        // `Pcc::on_walk` for a 2MB table alone (`supports`: no 1GB table).
                        let c = w.cpu as usize;
                        if c >= v.len() {
                            v.resize(c + 1, BucketTable::new(&b.cfg, shifts.0));
                        }
                        if counted(w) {
                            v[c].touch(id, w.pid, w.addr);
                        } else if w.leaf_shift <= shifts.0 {
                            v[c].stats.filtered += 1;
                        }
                    }
                }
            }
        }
        // Keep the buffer's allocation for the next batch.
        m.pending = pending;
        m.pending.clear();
    }

    /// A shootdown reaches the riding members' PCCs too (PCC §3.3 step C).
    pub(super) fn invalidate_riding(&mut self, pid: u16, start: u64, end: u64) {
        // The walks before the shootdown reach the banks before it.
        self.flush_riding();
        for b in self.members.extra.iter_mut() {
            match &mut b.tables {
                Tables::Plain(v) => v.iter_mut().for_each(|p| {
                    p.invalidate(pid, start, end);
                }),
                Tables::Buckets(v) => v.iter_mut().for_each(|t| {
                    t.invalidate(pid, start, end);
                }),
            }
        }
    }
}
