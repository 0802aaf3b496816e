//! `ideal`: every region that can hold a huge page gets one at first touch,
//! with compaction as needed and no budget of its own: the papers' "all 2MB"
//! upper line (PCC §5: "Ideal is all memory in 2MB pages with no memory pressure").

use super::{Ctx, Fault, FaultAction, Params, Policy};
use crate::os::AllocMode;
use crate::units::parse_size;
use crate::{Error, Result};

pub struct Ideal {
    /// Requested huge size in bytes (None: the PMD size).
    size_bytes: Option<u64>,
}

pub fn new(p: &mut Params) -> Result<Box<dyn Policy>> {
    let s = p.str("size", "pmd");
    let size_bytes = if s == "pmd" {
        None
    } else {
        // A size the machine lacks falls back to base pages at run time (the
        // machine is not known here), but one no machine can have is an error.
        Some(
            parse_size(&s)
                .ok()
                .filter(|b| b.is_power_of_two() && *b >= 4096)
                .ok_or_else(|| Error::input(format!("policy ideal: size={s}: expected 'pmd' or a page size (a power of two of at least 4KiB)")))?,
        )
    };
    Ok(Box::new(Ideal { size_bytes }))
}

impl Policy for Ideal {
    fn name(&self) -> &'static str {
        "ideal"
    }
    fn describe(&self) -> serde_json::Value {
        serde_json::json!({ "size": self.size_bytes.map_or("pmd".to_string(), crate::units::page_label) })
    }
    fn on_fault(&mut self, k: &mut Ctx<'_>, f: &Fault) -> FaultAction {
        let size = match self.size_bytes {
            None => k.pmd_size(),
            Some(b) => match k.geometry().size_index_of(b) {
                Some(s) => s,
                None => return FaultAction::Base,
            },
        };
        if size == 0 || !f.region_in_vma || !f.region_empty {
            return FaultAction::Base;
        }
        FaultAction::Huge { size, alloc: AllocMode::Compact { max_pages: u64::MAX } }
    }
}
