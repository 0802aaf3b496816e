//! The `virt` section of a machine configuration: the machine's nested-walk
//! caches and VM-exit cost in virtualized runs (`virt/`), as plain data.
//!
//! Cache defaults (Bhargava et al., ASPLOS'08 §4 describe a page-walk cache
//! over guest-virtual prefixes, one over guest-physical prefixes and a nested
//! TLB caching GPA -> HPA; their sizes here are ours, docs/assumptions.md
//! "Virtualization"): both page-walk caches default to the machine's native
//! `pwc` (one structure per level, as sized for native walks), and the nested
//! TLB to 16 fully associative entries.

use super::CacheConfig;
use crate::units::fmt_num;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Default entries of the nested TLB.
pub const NESTED_TLB_ENTRIES: usize = 16;
/// Guest-visible cost of one EPT-violation VM exit, in microseconds: FHPM
/// reference §11 "VM-exit cost" (about 0.7 us, derived from FHPM Fig. 9 and
/// Table 6).
pub const VM_EXIT_US: f64 = 0.7;

/// The `virt` section of a machine configuration. Every field is optional;
/// absent ones take the defaults above.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VirtMachineConfig {
    /// Page-walk cache over guest-virtual prefixes, keyed by level "l2".."l5"
    /// like `pwc`. Absent: the machine's `pwc`; `{}`: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_pwc: Option<BTreeMap<String, CacheConfig>>,
    /// Page-walk cache over guest-physical prefixes (host levels). Absent:
    /// the machine's `pwc`; `{}`: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_pwc: Option<BTreeMap<String, CacheConfig>>,
    /// Nested TLB (GPA -> HPA at the host leaf's size). Absent: 16 entries,
    /// fully associative; `entries = 0`: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested_tlb: Option<CacheConfig>,
    /// Guest-visible microseconds per VM exit. Absent: 0.7.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_exit_us: Option<f64>,
    /// Guest direct segment (extension: Basu et al., ISCA'13 §3.3 designs it,
    /// does not evaluate it): each guest process's primary region translates
    /// GVA -> GPA without the guest walk. Absent: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_segment: Option<Switch>,
    /// VMM direct segment (extension, ISCA'13 §3.3): the VM's whole GPA range
    /// translates GPA -> HPA without the host (EPT) walk. Absent: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmm_segment: Option<Switch>,
}

/// A hardware feature that is present or not: `on` or `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Switch {
    On,
    Off,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The `virt` section resolved against the machine: every value set.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VirtResolved {
    pub guest_pwc: BTreeMap<String, CacheConfig>,
    pub host_pwc: BTreeMap<String, CacheConfig>,
    pub nested_tlb: Option<CacheConfig>,
    pub vm_exit_us: f64,
    /// The direct segments of ISCA'13 §3.3 (extension); omitted when off so
    /// that runs without them report exactly as before.
    #[serde(skip_serializing_if = "is_false")]
    pub guest_segment: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub vmm_segment: bool,
}

impl VirtMachineConfig {
    /// Check the section against a machine with `levels` radix levels;
    /// `check_cache` is the machine's own structure check.
    pub fn validate(&self, levels: usize, check_cache: impl Fn(&str, &CacheConfig) -> Result<()>) -> Result<()> {
        for (name, map) in [("virt.guest_pwc", &self.guest_pwc), ("virt.host_pwc", &self.host_pwc)] {
            for (key, c) in map.iter().flatten() {
                let n: Option<usize> = key.strip_prefix('l').and_then(|d| d.parse().ok());
                if !n.is_some_and(|n| (2..=levels).contains(&n)) {
                    return Err(Error::config(format!("{name}.{key}: no such non-leaf level (l2..l{levels})")));
                }
                check_cache(&format!("{name}.{key}"), c)?;
            }
        }
        if let Some(c) = self.nested_tlb.as_ref().filter(|c| c.entries > 0) {
            check_cache("virt.nested_tlb", c)?;
        }
        if let Some(us) = self.vm_exit_us {
            if !(us.is_finite() && (0.0..=1e6).contains(&us)) {
                return Err(Error::config(format!("virt.vm_exit_us={}: must be between 0 and 1000000 microseconds", fmt_num(us))));
            }
        }
        Ok(())
    }

    /// Every value, defaults filled in from the machine's native `pwc`.
    pub fn resolve(&self, native_pwc: &BTreeMap<String, CacheConfig>) -> VirtResolved {
        VirtResolved {
            guest_pwc: self.guest_pwc.clone().unwrap_or_else(|| native_pwc.clone()),
            host_pwc: self.host_pwc.clone().unwrap_or_else(|| native_pwc.clone()),
            nested_tlb: match &self.nested_tlb {
                None => Some(CacheConfig { entries: NESTED_TLB_ENTRIES, ways: 0 }),
                Some(c) if c.entries == 0 => None,
                Some(c) => Some(c.clone()),
            },
            vm_exit_us: self.vm_exit_us.unwrap_or(VM_EXIT_US),
            guest_segment: self.guest_segment == Some(Switch::On),
            vmm_segment: self.vmm_segment == Some(Switch::On),
        }
    }
}
