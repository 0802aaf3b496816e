//! Costs of the OS mechanisms, in microseconds. Defaults come from the papers
//! where they measured them (Ingens §3.1: 3.6 us per 4KB fault, 378 us per 2MB
//! fault, most of it zeroing); the rest are estimates documented in
//! `docs/assumptions.md`. All are knobs (`[os]` keys of a configuration,
//! `--set os.KEY=US`, or `--os KEY=US`).
//!
//! Each cost is declared once, in the `os_costs!` list below: its field, its
//! default and its help text. The macro derives the struct, its defaults, the
//! zero-cost variant and the knob rows that `os::config` lists, parses and
//! range-checks, so a new cost is one line here plus its use in the kernel.

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};

/// Largest OS cost accepted, in microseconds (one hour): bounds virtual time
/// (and so daemon firings) far above any measured cost (microseconds to
/// milliseconds).
pub const MAX_COST_US: f64 = 3.6e9;

macro_rules! os_costs {
    ($( $(#[doc = $doc:literal])* $name:ident = $default:expr; )*) => {
        #[derive(Clone, Debug, PartialEq, Deserialize)]
        #[serde(deny_unknown_fields, default)]
        pub struct OsCosts {
            $( $(#[doc = $doc])* pub $name: f64, )*
        }

        /// A result echoes every cost, in declaration order, except those
        /// of `ECHOED_IF_CHANGED` left at their defaults: costs of mechanisms
        /// added later (FHPM's companion pages) stay out of the results of
        /// runs that cannot use them unless set, so those results are
        /// byte-identical to what they were before the mechanism existed.
        impl Serialize for OsCosts {
            fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(None)?;
                $(
                    if !(ECHOED_IF_CHANGED.contains(&stringify!($name)) && self.$name == $default) {
                        m.serialize_entry(stringify!($name), &self.$name)?;
                    }
                )*
                m.end()
            }
        }

        impl Default for OsCosts {
            fn default() -> Self {
                OsCosts { $( $name: $default, )* }
            }
        }

        impl OsCosts {
            /// (name, default, help) of every cost, in declaration order (the
            /// order of the result JSON's `os.costs`); the help is the doc
            /// comment, with its leading space.
            pub const KNOBS: &'static [(&'static str, f64, &'static str)] =
                &[ $( (stringify!($name), $default, concat!($($doc),*)), )* ];

            /// Every cost zero: the OS model decides but takes no time, to study
            /// placement alone (and to make daemon timing exact in tests).
            pub fn zero() -> Self {
                OsCosts { $( $name: 0.0, )* }
            }

            /// The cost named `key`, if there is one.
            pub fn get(&self, key: &str) -> Option<f64> {
                match key {
                    $( stringify!($name) => Some(self.$name), )*
                    _ => None,
                }
            }

            /// Set the cost named `key`; false if there is no such cost.
            pub fn set(&mut self, key: &str, value: f64) -> bool {
                match key {
                    $( stringify!($name) => { self.$name = value; true } )*
                    _ => false,
                }
            }
        }
    };
}

/// Costs a result echoes only when set to other than their defaults (see
/// the `Serialize` of `OsCosts`).
const ECHOED_IF_CHANGED: &[&str] = &["companion_fill_us", "companion_restore_us"];

os_costs! {
    /// A base-page fault (trap, allocation, zeroing 4KB, PTE install). Ingens §3.1.
    fault_base_us = 3.6;
    /// Zeroing one base page inside a huge page: 378 us / 512 (Ingens §3.1: the 2MB fault is dominated by zeroing).
    zero_base_page_us = 378.0 / 512.0;
    /// Copying one present base page during a collapse.
    copy_base_page_us = 1.0;
    /// Migrating one base page during compaction (copy, unmap, remap).
    migrate_base_page_us = 1.5;
    /// A compaction that cannot reach its goal: its scanners cross the whole zone. Derived from Ingens §3.1: THP faults at FMFI 0.9 average 8.1 us against 3.6 us with 98% falling back, (8.1 - 3.6) x 512 / 0.98 = 2351 us per failed huge-page attempt.
    compact_fail_us = 2351.0;
    /// One TLB shootdown (IPIs to every cpu and their invalidations).
    shootdown_us = 4.0;
    /// Splitting a huge mapping into base-page mappings.
    split_us = 20.0;
    /// Scanning one PTE (khugepaged, access-bit sampling).
    scan_pte_us = 0.005;
    /// Writing one base PTE when a superpage made of replicated PTEs (Alpha's granularity hint) is promoted or demoted: Navarro §6.7 charges these per base page. Estimate.
    pte_write_us = 0.01;
    /// The protection fault taken by the first write to a clean superpage mapped read-only (Navarro §4.7), before its demotion. Estimate.
    wp_trap_us = 1.0;
    /// FHPM §4.2.2: redirecting a 2MB leaf through its companion page (allocate the 4KB table page, write its 512 PTEs, rewrite the PDE under the mmu lock). Estimate: 512 PTE writes at pte_write_us plus the PDE.
    companion_fill_us = 5.2;
    /// FHPM §4.2.2: restoring a redirected leaf (write the 2MB PDE back, recycle the companion page). Estimate: one PDE write plus the page's release.
    companion_restore_us = 0.5;
}

#[cfg(test)]
mod echo_tests {
    use super::*;

    #[test]
    fn later_costs_are_echoed_only_when_changed_and_round_trip() {
        let d = serde_json::to_value(OsCosts::default()).unwrap();
        assert!(d.get("companion_fill_us").is_none() && d.get("companion_restore_us").is_none());
        assert_eq!(d["fault_base_us"], 3.6);
        let mut c = OsCosts::default();
        assert!(c.set("companion_fill_us", 1.5));
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["companion_fill_us"], 1.5);
        assert!(v.get("companion_restore_us").is_none());
        let back: OsCosts = serde_json::from_value(v).unwrap();
        assert_eq!(back, c);
    }
}
