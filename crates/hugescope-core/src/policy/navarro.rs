//! `navarro`: reservation-based superpages with several sizes (Navarro,
//! Iyer, Druschel, Cox, OSDI'02; `shared/reference/navarro.md`).
//!
//! The policy only decides the preferred size at each fault (§4.2: the
//! largest aligned superpage holding the page that fits the object and
//! overlaps nothing, whatever free memory looks like); the kernel's
//! reservation mechanism (`os/reserv.rs`) reserves, fills, promotes in place
//! when a node is full (§4.5), preempts under contiguity pressure (§4.8) and
//! demotes a clean superpage on its first write (§4.7).
//!
//! Knobs:
//! - `sizes`: the superpage sizes used, '+'-separated (`sizes=64k` for the
//!   paper's single-size runs of Tables 2-3); default every size of the
//!   machine up to `max`;
//! - `max`: the largest reservation; default the PMD-level size (x86-64
//!   2MB, Alpha 4MB): 1GB only when asked (ref §10.13);
//! - `wp`: map clean superpages read-only and demote on the first write
//!   (§4.7, default true); false is the paper's "no demote-on-write"
//!   variant whose dirty superpages are written back whole (§6.7);
//!
//! Speculative demotion (§4.6) is the page daemon's: the OS knob
//! `spec_demote` (probability p, paper 1), applied only to kernels with
//! reservations.

use super::{Ctx, Fault, FaultAction, Params, Policy};
use crate::units::{page_label, parse_size};
use crate::{Error, Result};

pub struct Navarro {
    /// Sizes asked for, in bytes (None: every size up to `max`).
    sizes: Option<Vec<u64>>,
    /// Largest reservation in bytes (None: the PMD-level size).
    max: Option<u64>,
    wp: bool,
    /// The size indices in use, resolved against the machine at `init`.
    used: Vec<usize>,
    labels: Vec<String>,
    max_label: String,
}

pub fn new(p: &mut Params) -> Result<Box<dyn Policy>> {
    let raw = p.str("sizes", "");
    let sizes = if raw.is_empty() {
        None
    } else {
        let mut v = Vec::new();
        for part in raw.split('+') {
            let b = parse_size(part.trim())
                .map_err(|_| Error::input(format!("policy navarro: sizes={raw}: '{part}' is not a size (e.g. sizes=64k+512k)")))?;
            v.push(b);
        }
        Some(v)
    };
    let max_raw = p.str("max", "");
    let max = if max_raw.is_empty() {
        None
    } else {
        Some(parse_size(&max_raw).map_err(|_| Error::input(format!("policy navarro: max={max_raw}: not a size (e.g. max=1g)")))?)
    };
    let wp = p.bool("wp", true)?;
    Ok(Box::new(Navarro { sizes, max, wp, used: Vec::new(), labels: Vec::new(), max_label: String::new() }))
}

impl Policy for Navarro {
    fn name(&self) -> &'static str {
        "navarro"
    }

    fn describe(&self) -> serde_json::Value {
        serde_json::json!({ "sizes": self.labels, "max": self.max_label, "wp": self.wp })
    }

    fn init(&mut self, k: &mut Ctx<'_>) {
        let g = k.geometry().clone();
        let max = self.max.unwrap_or(g.sizes[k.pmd_size()]);
        self.max_label = page_label(max);
        let ok = |b: u64| b <= max && g.sizes[1..].contains(&b);
        self.used = match &self.sizes {
            None => (1..g.num_sizes()).filter(|&i| ok(g.sizes[i])).collect(),
            Some(v) => {
                // A size the machine lacks or above `max` cannot be reserved;
                // say so once rather than silently running another variant.
                for &b in v.iter().filter(|&&b| !ok(b)) {
                    k.note(format!("navarro: size {} is not a superpage size of this machine up to max {}; ignored", page_label(b), page_label(max)));
                }
                (1..g.num_sizes()).filter(|&i| v.contains(&g.sizes[i]) && ok(g.sizes[i])).collect()
            }
        };
        self.labels = self.used.iter().map(|&i| page_label(g.sizes[i])).collect();
        if self.used.is_empty() {
            k.note(format!("navarro: no superpage size up to max {} on this machine: base pages only", page_label(max)));
        }
        k.enable_reservations(&self.used, self.wp);
    }

    fn on_fault(&mut self, k: &mut Ctx<'_>, f: &Fault) -> FaultAction {
        FaultAction::Reserve { size: k.reservation_size(f.pid, f.addr) }
    }
}
