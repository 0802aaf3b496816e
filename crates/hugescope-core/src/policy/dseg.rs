//! `dseg`: direct segments (Basu et al., ISCA'13). At start, each chosen
//! process gets a segment over its primary region, backed by contiguous
//! memory (`Ctx::create_segment`, os/segment.rs); addresses outside it stay paged and follow
//! whatever policy runs beside it (`dseg+linux`). A daemon grows a partial
//! segment in place when the frames after it become free, and the segment can
//! be reverted to paging at a given time (the swap-under-pressure case, §4.3).
//!
//! Knobs (defaults from reference §9): `size` (bytes requested per process,
//! default the whole primary region), `provision` (`boot` reservation or
//! `compaction`), `compaction_s_per_gb` (0.3, paper §4.2), `processes` (how
//! many processes, lowest pids first, get a segment; default 1), `grow_every`
//! (seconds between growth attempts, 0 = never; default 1), `revert_at`
//! (seconds; default never), `ipi_us` (IPI cost added to a revert's shootdown;
//! default 0, the paper gives none), `segment` (false: no segment, only the
//! f_DS accounting of the primary region, for the 4KB baseline run).

use super::{Ctx, Params, Policy};
use crate::os::segment::Provision;
use crate::Result;

const GROW_TIMER: u32 = 1;
const REVERT_TIMER: u32 = 2;

pub struct Dseg {
    size: Option<u64>,
    provision: Provision,
    processes: u64,
    grow_every: f64,
    revert_at: Option<f64>,
    ipi_us: f64,
    segment: bool,
    pids: Vec<u16>,
}

pub fn new(p: &mut Params) -> Result<Box<dyn Policy>> {
    let size = p.size("size", 0)?;
    let provision = p.choice("provision", "boot", &["boot", "compaction"])?;
    let per_gb = p.f64_in("compaction_s_per_gb", 0.3, 0.0, 1e3)?;
    let processes = p.u64_in("processes", 1, 1, crate::trace::MAX_PIDS as u64)?;
    let grow_every = p.f64_in("grow_every", 1.0, 0.0, 1e6)?;
    let revert_at = p.f64_in("revert_at", -1.0, -1.0, 1e9)?;
    let ipi_us = p.f64_in("ipi_us", 0.0, 0.0, 1e6)?;
    let segment = p.bool("segment", true)?;
    Ok(Box::new(Dseg {
        size: (size > 0).then_some(size),
        provision: if provision == "compaction" { Provision::Compaction { seconds_per_gb: per_gb } } else { Provision::Boot },
        processes,
        grow_every,
        revert_at: (revert_at >= 0.0).then_some(revert_at),
        ipi_us,
        segment,
        pids: Vec::new(),
    }))
}

impl Policy for Dseg {
    fn name(&self) -> &'static str {
        "dseg"
    }

    /// The segment registers of this OS model are the native MMU's; under
    /// virtualization the machine's own keys model both kinds of segment.
    fn refuses_virtualization(&self) -> Option<&'static str> {
        Some("the dseg OS model runs natively only; a virtualized run models direct segments with the machine keys virt.guest_segment=on and virt.vmm_segment=on")
    }

    fn describe(&self) -> serde_json::Value {
        let (provision, per_gb) = match self.provision {
            Provision::Boot => ("boot", 0.0),
            Provision::Compaction { seconds_per_gb } => ("compaction", seconds_per_gb),
        };
        serde_json::json!({
            "size": self.size.unwrap_or(0),
            "provision": provision,
            "compaction_s_per_gb": per_gb,
            "processes": self.processes,
            "grow_every": self.grow_every,
            "revert_at": self.revert_at.unwrap_or(-1.0),
            "ipi_us": self.ipi_us,
            "segment": self.segment,
        })
    }

    fn init(&mut self, k: &mut Ctx<'_>) {
        self.pids = (0..k.view().processes() as u16).take(self.processes as usize).collect();
        for &pid in &self.pids {
            if self.segment {
                k.create_segment(pid, self.size, self.provision);
            } else {
                k.account_segment(pid);
            }
        }
        if self.segment && self.grow_every > 0.0 {
            k.schedule_in(self.grow_every, GROW_TIMER);
        }
        if let (true, Some(t)) = (self.segment, self.revert_at) {
            k.schedule_at(t, REVERT_TIMER);
        }
    }

    fn on_timer(&mut self, k: &mut Ctx<'_>, id: u32) {
        match id {
            GROW_TIMER => {
                for &pid in &self.pids {
                    k.grow_segment(pid);
                }
                k.schedule_in(self.grow_every, GROW_TIMER);
            }
            REVERT_TIMER => {
                for &pid in &self.pids {
                    k.revert_segment(pid, self.ipi_us);
                }
            }
            _ => {}
        }
    }
}
