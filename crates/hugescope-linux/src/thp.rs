//! The system-wide THP configuration under `/sys/kernel/mm/transparent_hugepage/`.
//!
//! Every real-Linux measurement records this, because the same plan means
//! different things under `always`, `madvise` and `never` (see the reference,
//! section A.1), and a result file without it cannot be interpreted later.

use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const THP_DIR: &str = "/sys/kernel/mm/transparent_hugepage";

/// A sysfs multiple-choice setting such as `always [madvise] never`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice {
    /// The selected value (the bracketed word).
    pub selected: String,
    /// Every value the kernel offers, in the kernel's order.
    pub options: Vec<String>,
}

/// Parse a sysfs choice line: exactly one word must be in brackets.
pub fn parse_choice(text: &str) -> std::result::Result<Choice, String> {
    let mut selected = None;
    let mut options = Vec::new();
    for word in text.split_whitespace() {
        if let Some(inner) = word.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
            if selected.is_some() {
                return Err(format!("more than one bracketed value in '{}'", text.trim()));
            }
            selected = Some(inner.to_string());
            options.push(inner.to_string());
        } else {
            options.push(word.to_string());
        }
    }
    match selected {
        Some(selected) => Ok(Choice { selected, options }),
        None => Err(format!("no bracketed (selected) value in '{}'", text.trim())),
    }
}

/// Snapshot of the THP controls.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThpState {
    pub enabled: Choice,
    pub defrag: Choice,
    /// PMD huge page size in bytes (2 MiB on x86-64 with 4 KiB base pages).
    pub hpage_pmd_size: u64,
    pub use_zero_page: Option<u64>,
    pub shrink_underused: Option<u64>,
    /// Every numeric file under `khugepaged/` (pages_to_scan, scan_sleep_millisecs, ...).
    pub khugepaged: BTreeMap<String, u64>,
    /// `enabled` of each multi-size THP directory (`hugepages-2048kB` -> "inherit").
    pub mthp_enabled: BTreeMap<String, String>,
}

impl ThpState {
    /// Read the live state from sysfs.
    pub fn read() -> Result<ThpState> {
        Self::read_from(Path::new(THP_DIR))
    }

    /// Read from another directory with the same layout (used by tests).
    pub fn read_from(dir: &Path) -> Result<ThpState> {
        let choice = |name: &str| -> Result<Choice> {
            let p = dir.join(name);
            let text = read_trimmed(&p)?;
            parse_choice(&text).map_err(|m| Error::parse(&p, 1, m))
        };
        let number = |p: PathBuf| -> Result<u64> {
            let text = read_trimmed(&p)?;
            text.parse::<u64>()
                .map_err(|_| Error::parse(&p, 1, format!("expected an integer, found '{text}'")))
        };
        let optional = |p: PathBuf| -> Option<u64> {
            std::fs::read_to_string(p).ok().and_then(|t| t.trim().parse().ok())
        };
        let mut khugepaged = BTreeMap::new();
        if let Ok(rd) = std::fs::read_dir(dir.join("khugepaged")) {
            for entry in rd.flatten() {
                let name = entry.file_name().to_string_lossy().to_string();
                if let Some(v) = optional(entry.path()) {
                    khugepaged.insert(name, v);
                }
            }
        }
        let mut mthp_enabled = BTreeMap::new();
        if let Ok(rd) = std::fs::read_dir(dir) {
            for entry in rd.flatten() {
                let name = entry.file_name().to_string_lossy().to_string();
                if name.starts_with("hugepages-") {
                    if let Ok(t) = std::fs::read_to_string(entry.path().join("enabled")) {
                        if let Ok(c) = parse_choice(&t) {
                            mthp_enabled.insert(name, c.selected);
                        }
                    }
                }
            }
        }
        Ok(ThpState {
            enabled: choice("enabled")?,
            defrag: choice("defrag")?,
            hpage_pmd_size: number(dir.join("hpage_pmd_size"))?,
            use_zero_page: optional(dir.join("use_zero_page")),
            shrink_underused: optional(dir.join("shrink_underused")),
            khugepaged,
            mthp_enabled,
        })
    }

    /// True when `enabled` is `never`: hugescope then refuses to apply plans
    /// (see `collapse`), because the user has asked this machine for 4 KiB only.
    pub fn is_never(&self) -> bool {
        self.enabled.selected == "never"
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

fn read_trimmed(p: &Path) -> Result<String> {
    std::fs::read_to_string(p)
        .map(|t| t.trim().to_string())
        .map_err(|e| Error::io(p, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bracketed_choice() {
        let c = parse_choice("always [madvise] never\n").unwrap();
        assert_eq!(c.selected, "madvise");
        assert_eq!(c.options, vec!["always", "madvise", "never"]);
        let d = parse_choice("always defer defer+madvise [madvise] never").unwrap();
        assert_eq!(d.selected, "madvise");
        assert_eq!(d.options.len(), 5);
        assert!(parse_choice("always madvise never").is_err());
        assert!(parse_choice("[always] [never]").is_err());
    }

    #[test]
    fn reads_fake_sysfs_tree() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("enabled"), "[always] madvise never\n").unwrap();
        std::fs::write(d.join("defrag"), "always [defer] defer+madvise madvise never\n").unwrap();
        std::fs::write(d.join("hpage_pmd_size"), "2097152\n").unwrap();
        std::fs::create_dir(d.join("khugepaged")).unwrap();
        std::fs::write(d.join("khugepaged/pages_to_scan"), "4096\n").unwrap();
        std::fs::create_dir(d.join("hugepages-2048kB")).unwrap();
        std::fs::write(d.join("hugepages-2048kB/enabled"), "always inherit madvise [never]\n").unwrap();
        let s = ThpState::read_from(d).unwrap();
        assert_eq!(s.enabled.selected, "always");
        assert_eq!(s.defrag.selected, "defer");
        assert_eq!(s.hpage_pmd_size, 2 << 20);
        assert_eq!(s.khugepaged["pages_to_scan"], 4096);
        assert_eq!(s.mthp_enabled["hugepages-2048kB"], "never");
        assert_eq!(s.use_zero_page, None);
        assert!(!s.is_never());
        let back: ThpState = serde_json::from_str(&s.to_json()).unwrap();
        assert_eq!(back, s);
        // A missing file is named in the error.
        std::fs::remove_file(d.join("defrag")).unwrap();
        let e = ThpState::read_from(d).unwrap_err().to_string();
        assert!(e.contains("defrag"), "{e}");
    }

    #[test]
    fn reads_live_sysfs_when_present() {
        if !Path::new(THP_DIR).exists() {
            eprintln!("skip: {THP_DIR} does not exist on this kernel");
            return;
        }
        let s = ThpState::read().unwrap();
        assert!(s.enabled.options.contains(&s.enabled.selected));
        assert!(s.hpage_pmd_size.is_power_of_two());
    }
}
