//! FHPM's split and collapse (§4.5, §4.6): the host's ordinary split or
//! collapse of the VM's 2MB page, followed, in the VM-friendly variant, by an
//! eager refill of the EPT (split: a table page from the vCPU's
//! mmu_page_cache with 512 PTEs; collapse: the 2MB PDE written back), so the
//! guest takes no EPT-violation exits. In the model both variants change the
//! host table the same way; the friendly one runs inside
//! `Ctx::with_eager_refill`, which marks its shootdowns `keeps_mapping`
//! (the hypervisor model then keeps the EPT instead of zapping it). Linux's
//! variant (`friendly = false`) leaves them `keeps_mapping = false`: one exit
//! per 4KB region touched afterwards, under the hypervisor.

use crate::os::Refusal;
use crate::os::AllocMode;
use crate::policy::Ctx;

fn variant<R>(k: &mut Ctx<'_>, friendly: bool, f: impl FnOnce(&mut Ctx<'_>) -> R) -> R {
    if friendly {
        k.with_eager_refill(f)
    } else {
        f(k)
    }
}

/// Split the huge page at `start` (its base pages keep their frames).
pub fn split(k: &mut Ctx<'_>, pid: u16, start: u64, friendly: bool) -> bool {
    variant(k, friendly, |k| k.demote(pid, start))
}

/// Collapse the region at `start` into a huge page of size index `size`: in
/// place when its frames are still one aligned extent (a page FHPM split
/// earlier), else by copy into a free block of that order, without
/// compaction (spec §11: promotion needs an order-9 block to be free).
/// Returns whether it collapsed in place.
pub fn collapse(k: &mut Ctx<'_>, pid: u16, start: u64, size: usize, friendly: bool) -> Result<bool, Refusal> {
    variant(k, friendly, |k| {
        if k.can_collapse_in_place(pid, start, size) {
            k.collapse_in_place(pid, start, size).map(|_| true)
        } else {
            k.promote(pid, start, size, AllocMode::FreeOnly).map(|_| false)
        }
    })
}
