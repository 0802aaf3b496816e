//! Costs of the OS mechanisms, in microseconds. Defaults come from the papers
//! where they measured them (Ingens §3.1: 3.6 us per 4KB fault, 378 us per 2MB
//! fault, most of it zeroing); the rest are estimates documented in
//! `docs/assumptions.md`. All are knobs (`--os key=value`).

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OsCosts {
    /// A base-page fault (trap, allocation, zeroing 4KB, PTE install). Ingens §3.1.
    pub fault_base_us: f64,
    /// Zeroing one base page inside a huge page: 378 us / 512 (Ingens §3.1:
    /// the 2MB fault is dominated by zeroing), so a 2MB fault costs 3.6 + 512 x 0.73.
    pub zero_base_page_us: f64,
    /// Copying one present base page during a collapse.
    pub copy_base_page_us: f64,
    /// Migrating one base page during compaction (copy, unmap, remap).
    pub migrate_base_page_us: f64,
    /// One TLB shootdown (IPIs to every cpu and their invalidations).
    pub shootdown_us: f64,
    /// Splitting a huge mapping into base-page mappings.
    pub split_us: f64,
    /// Scanning one PTE (khugepaged, access-bit sampling).
    pub scan_pte_us: f64,
}

impl Default for OsCosts {
    fn default() -> Self {
        OsCosts {
            fault_base_us: 3.6,
            zero_base_page_us: 378.0 / 512.0,
            copy_base_page_us: 1.0,
            migrate_base_page_us: 1.5,
            shootdown_us: 4.0,
            split_us: 20.0,
            scan_pte_us: 0.005,
        }
    }
}

/// Largest OS cost override, in microseconds (one hour).
const MAX_COST_US: f64 = 3.6e9;

impl OsCosts {
    /// Every cost zero: the OS model decides but takes no time, to study
    /// placement alone (and to make daemon timing exact in tests).
    pub fn zero() -> Self {
        OsCosts {
            fault_base_us: 0.0,
            zero_base_page_us: 0.0,
            copy_base_page_us: 0.0,
            migrate_base_page_us: 0.0,
            shootdown_us: 0.0,
            split_us: 0.0,
            scan_pte_us: 0.0,
        }
    }

    /// Apply `key=value` overrides (microseconds), e.g. `fault_base_us=2.5`.
    pub fn with_overrides(&self, overrides: &[String]) -> crate::Result<OsCosts> {
        let mut v = serde_json::to_value(self).expect("costs serialize");
        let mut seen: Vec<&str> = Vec::new();
        for o in overrides {
            let (k, val) = o
                .split_once('=')
                .ok_or_else(|| crate::Error::config(format!("OS cost override '{o}' is not key=value")))?;
            if seen.contains(&k.trim()) {
                return Err(crate::Error::config(format!("OS cost {} given twice", k.trim())));
            }
            seen.push(k.trim());
            // An hour per event bounds virtual time (and so daemon firings)
            // far above any measured cost (microseconds to milliseconds).
            let x: f64 = val
                .trim()
                .parse()
                .ok()
                .filter(|x: &f64| x.is_finite() && (0.0..=MAX_COST_US).contains(x))
                .ok_or_else(|| crate::Error::config(format!("OS cost {k}={val}: not a number of microseconds in 0..={MAX_COST_US}")))?;
            let obj = v.as_object_mut().expect("object");
            if !obj.contains_key(k.trim()) {
                return Err(crate::Error::config(format!(
                    "unknown OS cost '{k}'; known: {}",
                    obj.keys().cloned().collect::<Vec<_>>().join(", ")
                )));
            }
            obj.insert(k.trim().to_string(), serde_json::Value::from(x));
        }
        serde_json::from_value(v).map_err(|e| crate::Error::config(e.to_string()))
    }
}
