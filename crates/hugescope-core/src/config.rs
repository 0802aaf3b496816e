//! Machine configuration: page sizes, TLB hierarchy, page-walk caches, radix
//! walker geometry and cost-model latencies, with presets for the machines of
//! the papers. Every number is a knob: a preset is the starting point, a TOML
//! file and `key=value` overrides are merged on top (see `docs/config.md`).

use crate::units::{fmt_num, page_label, parse_size};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// One TLB or page-walk-cache structure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    pub entries: usize,
    /// Associativity; 0 means fully associative.
    #[serde(default)]
    pub ways: usize,
}

/// Radix page-table geometry. `level_shifts` lists, from the root down, the
/// lowest virtual-address bit each level indexes: x86-64 4-level paging is
/// [39, 30, 21, 12] (PML4, PDPT, PD, PT). A page size is a leaf at the level
/// whose shift equals its log2; sizes between levels (Alpha's 64KB/512KB,
/// ARM's contiguous hint) are leaves at the next level below, replicated.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WalkerConfig {
    pub va_bits: u32,
    pub level_shifts: Vec<u32>,
}

/// Latencies and the per-access base cost that turn counters into cycles.
/// All values are estimates unless calibrated (`hugescope calibrate`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostConfig {
    /// Cycles an access costs apart from translation (its data-cache/memory time).
    pub base_cycles_per_access: f64,
    /// Extra cycles of an L1 TLB hit (0: hidden in the load pipeline).
    #[serde(default)]
    pub l1_hit_cycles: f64,
    /// Extra cycles of an L1 miss that hits the L2 TLB.
    pub l2_hit_cycles: f64,
    /// Cycles per page-table memory reference made by a walk.
    pub walk_ref_cycles: f64,
    /// Cycles per page-walk-cache hit (the reference it saves is not charged).
    pub pwc_hit_cycles: f64,
    /// Core clock, to turn cycles into seconds.
    pub cpu_ghz: f64,
    /// Where these numbers came from ("preset estimate", "calibrated on HOST ...").
    #[serde(default)]
    pub source: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineConfig {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Supported page sizes, smallest (the base page) first: "4k", "2m", "1g".
    pub page_sizes: Vec<String>,
    /// First-level TLBs, keyed by the page sizes each holds joined with '+'
    /// ("4k", "2m", or "8k+64k+512k+4m" for one structure holding four sizes).
    pub l1: BTreeMap<String, CacheConfig>,
    /// Second-level TLBs, same keys; looked up after every L1 misses.
    #[serde(default)]
    pub l2: BTreeMap<String, CacheConfig>,
    pub walker: WalkerConfig,
    /// Page-walk caches keyed by level name "l2".."l5" (x86: l2 = PDE cache,
    /// l3 = PDPTE cache, l4 = PML4E cache). A PWC caches non-leaf entries of
    /// its level; a hit skips every reference above and at that level.
    #[serde(default)]
    pub pwc: BTreeMap<String, CacheConfig>,
    pub cost: CostConfig,
}

pub const PRESETS: &[&str] = &["haswell-pcc", "sandybridge-ds", "alpha-21264", "modern-x86", "pcc-artifact"];

fn cc(entries: usize, ways: usize) -> CacheConfig {
    CacheConfig { entries, ways }
}

fn x86_walker() -> WalkerConfig {
    WalkerConfig { va_bits: 48, level_shifts: vec![39, 30, 21, 12] }
}

/// Intel does not document page-walk-cache sizes; these follow the sizes
/// reported by microbenchmark studies of Sandy Bridge/Haswell-era cores
/// (a 32-entry PDE cache, a few PDPTE and PML4E entries). Estimates.
fn intel_pwc() -> BTreeMap<String, CacheConfig> {
    BTreeMap::from([("l2".into(), cc(32, 4)), ("l3".into(), cc(4, 0)), ("l4".into(), cc(2, 0))])
}

fn default_cost(ghz: f64) -> CostConfig {
    CostConfig {
        base_cycles_per_access: 20.0,
        l1_hit_cycles: 0.0,
        l2_hit_cycles: 7.0,
        walk_ref_cycles: 50.0,
        pwc_hit_cycles: 1.0,
        cpu_ghz: ghz,
        source: "preset estimate (see docs/assumptions.md, 'Cost model')".into(),
    }
}

impl MachineConfig {
    /// TLB and page-walk-cache entries of one cpu's MMU (the model-memory
    /// estimate of `limits` charges each).
    pub fn cache_entries_per_cpu(&self) -> u64 {
        self.l1.values().chain(self.l2.values()).chain(self.pwc.values()).map(|c| c.entries as u64).sum()
    }

    pub fn preset(name: &str) -> Result<MachineConfig> {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let cfg = match name {
            // PCC paper, Table 2: Xeon E5-2667 v3 (Haswell) at 3.2 GHz.
            "haswell-pcc" => MachineConfig {
                name: name.into(),
                description: "Haswell Xeon E5-2667 v3 (PCC paper, MICRO'23, Table 2)".into(),
                page_sizes: s(&["4k", "2m", "1g"]),
                l1: BTreeMap::from([("4k".into(), cc(64, 4)), ("2m".into(), cc(32, 4)), ("1g".into(), cc(4, 4))]),
                l2: BTreeMap::from([("4k+2m".into(), cc(1024, 8))]),
                walker: x86_walker(),
                pwc: intel_pwc(),
                cost: default_cost(3.2),
            },
            // The PCC authors' simulator: 6-way L2 whose index uses 7 bits, so
            // only 128 of its 170 sets (768 entries) are reachable; no PWC, no 1GB TLB.
            "pcc-artifact" => MachineConfig {
                name: name.into(),
                description: "PCC authors' Pin simulator TLB model (768 reachable L2 entries, no PWC)".into(),
                page_sizes: s(&["4k", "2m"]),
                l1: BTreeMap::from([("4k".into(), cc(64, 4)), ("2m".into(), cc(32, 4))]),
                l2: BTreeMap::from([("4k+2m".into(), cc(768, 6))]),
                walker: x86_walker(),
                pwc: BTreeMap::new(),
                cost: default_cost(3.2),
            },
            // Direct segments paper, Table 1: Xeon E5-2430 (Sandy Bridge) at 2.2 GHz.
            // The L2 TLB holds 4KB translations only.
            "sandybridge-ds" => MachineConfig {
                name: name.into(),
                description: "Sandy Bridge Xeon E5-2430 (direct segments, ISCA'13, Table 1)".into(),
                page_sizes: s(&["4k", "2m", "1g"]),
                l1: BTreeMap::from([("4k".into(), cc(64, 4)), ("2m".into(), cc(32, 4)), ("1g".into(), cc(4, 0))]),
                l2: BTreeMap::from([("4k".into(), cc(512, 4))]),
                walker: x86_walker(),
                pwc: intel_pwc(),
                cost: default_cost(2.2),
            },
            // Navarro et al. OSDI'02: Alpha 21264, 8KB base pages, superpages of
            // 64KB, 512KB and 4MB, one 128-entry fully associative data TLB.
            // Three-level table of 10 index bits per level (43-bit VA).
            "alpha-21264" => MachineConfig {
                name: name.into(),
                description: "Alpha 21264 (Navarro et al., OSDI'02): 8KB base, 64KB/512KB/4MB superpages".into(),
                page_sizes: s(&["8k", "64k", "512k", "4m"]),
                l1: BTreeMap::from([("8k+64k+512k+4m".into(), cc(128, 0))]),
                l2: BTreeMap::new(),
                walker: WalkerConfig { va_bits: 43, level_shifts: vec![33, 23, 13] },
                pwc: BTreeMap::new(),
                cost: CostConfig { l2_hit_cycles: 0.0, ..default_cost(0.5) },
            },
            // A current core (Golden Cove class): larger L1 and STLB, a 1GB STLB.
            // Sizes from vendor optimization manuals, rounded; treat as estimates.
            "modern-x86" => MachineConfig {
                name: name.into(),
                description: "Recent x86 core (Golden Cove class, approximate)".into(),
                page_sizes: s(&["4k", "2m", "1g"]),
                l1: BTreeMap::from([("4k".into(), cc(96, 6)), ("2m".into(), cc(32, 4)), ("1g".into(), cc(8, 0))]),
                l2: BTreeMap::from([("4k+2m".into(), cc(2048, 16)), ("1g".into(), cc(1024, 8))]),
                walker: x86_walker(),
                pwc: intel_pwc(),
                cost: CostConfig { l2_hit_cycles: 8.0, ..default_cost(3.0) },
            },
            other => {
                return Err(Error::config(format!(
                    "unknown preset '{other}'; available: {}",
                    PRESETS.join(", ")
                )))
            }
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Load: a preset, then a TOML file merged over it, then `key=value`
    /// overrides (dotted keys: `l2.4k+2m.entries=1536`, `cost.walk_ref_cycles=40`).
    /// A TOML file may name its own starting preset with `preset = "..."`.
    pub fn load(preset: Option<&str>, toml_text: Option<&str>, overrides: &[String]) -> Result<MachineConfig> {
        let mut file_val: Option<Value> = None;
        let mut file_preset: Option<String> = None;
        if let Some(text) = toml_text {
            let t: toml::Value = toml::from_str(text).map_err(|e| Error::config(format!("TOML: {e}")))?;
            let mut v = serde_json::to_value(t).map_err(|e| Error::config(e.to_string()))?;
            if let Some(obj) = v.as_object_mut() {
                if let Some(p) = obj.remove("preset") {
                    file_preset = Some(p.as_str().ok_or_else(|| Error::config("'preset' must be a string"))?.to_string());
                }
            }
            file_val = Some(v);
        }
        let start = preset.map(str::to_string).or(file_preset).unwrap_or_else(|| "haswell-pcc".into());
        let mut v = serde_json::to_value(MachineConfig::preset(&start)?).expect("config serializes");
        if let Some(f) = file_val {
            merge(&mut v, f);
        }
        let mut seen: Vec<(&str, &str)> = Vec::with_capacity(overrides.len());
        for o in overrides {
            let (key, val) = o
                .split_once('=')
                .ok_or_else(|| Error::config(format!("override '{o}' is not key=value")))?;
            let (key, val) = (key.trim(), val.trim());
            // `--set k=1 --set k=2`: refuse rather than let the last one win
            // silently (one of the two is a mistake).
            if let Some((_, first)) = seen.iter().find(|(k, _)| *k == key) {
                return Err(Error::config(format!("override {key} given twice ({key}={first} and {key}={val})")));
            }
            seen.push((key, val));
            set_path(&mut v, key, parse_scalar(val))?;
        }
        let cfg: MachineConfig =
            serde_json::from_value(v).map_err(|e| Error::config(format!("invalid machine configuration: {e}")))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Page sizes in bytes, ascending.
    pub fn page_size_bytes(&self) -> Result<Vec<u64>> {
        self.page_sizes.iter().map(|s| parse_size(s).map_err(|e| Error::config(format!("page size: {e}")))).collect()
    }

    /// Index of a page size (bytes) in `page_sizes`.
    pub fn size_index(&self, bytes: u64) -> Option<usize> {
        self.page_size_bytes().ok()?.iter().position(|&b| b == bytes)
    }

    pub fn validate(&self) -> Result<()> {
        let sizes = self.page_size_bytes()?;
        if sizes.is_empty() || sizes.len() > 8 {
            return Err(Error::config("page_sizes must list between 1 and 8 sizes"));
        }
        for w in sizes.windows(2) {
            if w[0] >= w[1] {
                return Err(Error::config("page_sizes must be strictly ascending"));
            }
        }
        for &s in &sizes {
            if !s.is_power_of_two() || s < 1024 {
                return Err(Error::config(format!("page size {s} is not a power of two >= 1KiB")));
            }
        }
        let w = &self.walker;
        if w.level_shifts.is_empty() || w.level_shifts.len() > 6 || w.va_bits > 64 {
            return Err(Error::config("walker needs 1 to 6 levels and va_bits <= 64"));
        }
        for p in w.level_shifts.windows(2) {
            if p[0] <= p[1] {
                return Err(Error::config("walker.level_shifts must be strictly descending (root first)"));
            }
        }
        if *w.level_shifts.first().unwrap() >= w.va_bits {
            return Err(Error::config("walker: the root level's shift must be below va_bits"));
        }
        let leaf_shift = *w.level_shifts.last().unwrap();
        if sizes[0] != 1 << leaf_shift {
            return Err(Error::config(format!(
                "the base page ({}) must match the lowest walker level (shift {leaf_shift})",
                page_label(sizes[0])
            )));
        }
        for (lvl, map) in [("l1", &self.l1), ("l2", &self.l2)] {
            let mut seen = Vec::new();
            for (key, c) in map {
                for part in key.split('+') {
                    let b = parse_size(part).map_err(|e| Error::config(format!("{lvl}.{key}: {e}")))?;
                    if !sizes.contains(&b) {
                        return Err(Error::config(format!("{lvl}.{key}: page size {part} is not in page_sizes")));
                    }
                    if seen.contains(&b) {
                        return Err(Error::config(format!("{lvl}: page size {part} is held by two structures")));
                    }
                    seen.push(b);
                }
                check_cache(&format!("{lvl}.{key}"), c)?;
            }
        }
        for (key, c) in &self.pwc {
            let n: usize = key
                .strip_prefix('l')
                .and_then(|d| d.parse().ok())
                .ok_or_else(|| Error::config(format!("pwc.{key}: levels are named l2..l{}", w.level_shifts.len())))?;
            if n < 2 || n > w.level_shifts.len() {
                return Err(Error::config(format!("pwc.{key}: no such non-leaf level (l2..l{})", w.level_shifts.len())));
            }
            check_cache(&format!("pwc.{key}"), c)?;
        }
        let c = &self.cost;
        for (k, v) in [
            ("base_cycles_per_access", c.base_cycles_per_access),
            ("l1_hit_cycles", c.l1_hit_cycles),
            ("l2_hit_cycles", c.l2_hit_cycles),
            ("walk_ref_cycles", c.walk_ref_cycles),
            ("pwc_hit_cycles", c.pwc_hit_cycles),
        ] {
            // Bounded so virtual time (cycles / clock) stays finite and
            // meaningful: no memory reference costs a million cycles.
            if !v.is_finite() || !(0.0..=MAX_CYCLES).contains(&v) {
                return Err(Error::config(format!("cost.{k}={}: must be between 0 and {MAX_CYCLES} cycles", fmt_num(v))));
            }
        }
        if !(c.cpu_ghz.is_finite() && (MIN_GHZ..=MAX_GHZ).contains(&c.cpu_ghz)) {
            return Err(Error::config(format!("cost.cpu_ghz={}: must be between {MIN_GHZ} and {MAX_GHZ}", fmt_num(c.cpu_ghz))));
        }
        Ok(())
    }

    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_default()
    }
}

/// Largest cost of one event (an access, a hit, a walk reference), in cycles.
const MAX_CYCLES: f64 = 1e6;
/// Clock range of the cycle time base.
const MIN_GHZ: f64 = 0.001;
const MAX_GHZ: f64 = 1000.0;
/// Most entries of one TLB or page-walk cache (a per-cpu array of this size is
/// allocated for every simulated cpu and every policy of a run).
pub const MAX_CACHE_ENTRIES: usize = 1 << 20;

fn check_cache(what: &str, c: &CacheConfig) -> Result<()> {
    if c.entries == 0 || c.entries > MAX_CACHE_ENTRIES {
        return Err(Error::config(format!("{what}: entries={}: must be between 1 and {MAX_CACHE_ENTRIES}", c.entries)));
    }
    if c.ways > c.entries {
        return Err(Error::config(format!("{what}: ways={}: more ways than the {} entries", c.ways, c.entries)));
    }
    if c.ways != 0 && c.entries % c.ways != 0 {
        return Err(Error::config(format!("{what}: {} entries are not a multiple of {} ways", c.entries, c.ways)));
    }
    Ok(())
}

fn merge(dst: &mut Value, src: Value) {
    match (dst, src) {
        (Value::Object(d), Value::Object(s)) => {
            for (k, v) in s {
                match d.get_mut(&k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        d.insert(k, v);
                    }
                }
            }
        }
        (slot, v) => *slot = v,
    }
}

fn parse_scalar(s: &str) -> Value {
    if let Ok(i) = s.parse::<i64>() {
        return Value::from(i);
    }
    if let Ok(f) = s.parse::<f64>() {
        return Value::from(f);
    }
    if let Ok(b) = s.parse::<bool>() {
        return Value::from(b);
    }
    if s.starts_with('[') {
        if let Ok(v) = serde_json::from_str(s) {
            return v;
        }
    }
    Value::from(s.trim_matches('"'))
}

fn set_path(v: &mut Value, key: &str, val: Value) -> Result<()> {
    let parts: Vec<&str> = key.split('.').collect();
    let mut cur = v;
    for (i, p) in parts.iter().enumerate() {
        let obj = cur
            .as_object_mut()
            .ok_or_else(|| Error::config(format!("override '{key}': '{}' is not a table", parts[..i].join("."))))?;
        if i + 1 == parts.len() {
            obj.insert(p.to_string(), val);
            return Ok(());
        }
        // New structures (e.g. a PWC level) may be created by overrides.
        cur = obj.entry(p.to_string()).or_insert_with(|| Value::Object(Default::default()));
    }
    unreachable!("split always yields one part")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid() {
        for p in PRESETS {
            MachineConfig::preset(p).unwrap();
        }
        assert!(MachineConfig::preset("pentium").is_err());
    }

    #[test]
    fn toml_and_overrides_merge_over_preset() {
        let toml = "preset = \"sandybridge-ds\"\n[cost]\nwalk_ref_cycles = 31.5\n[l2.\"4k\"]\nentries = 1024\n";
        let c = MachineConfig::load(None, Some(toml), &["l1.4k.ways=8".into(), "pwc.l2.entries=64".into()]).unwrap();
        assert_eq!(c.name, "sandybridge-ds");
        assert_eq!(c.cost.walk_ref_cycles, 31.5);
        assert_eq!(c.l2["4k"].entries, 1024);
        assert_eq!(c.l1["4k"].ways, 8);
        assert_eq!(c.pwc["l2"].entries, 64);
        assert_eq!(c.l1["2m"].entries, 32);
    }

    #[test]
    fn bad_configs_are_refused_with_the_key() {
        let e = MachineConfig::load(Some("haswell-pcc"), None, &["l1.4k.entries=63".into()]).unwrap_err();
        assert!(e.to_string().contains("l1.4k"), "{e}");
        let e = MachineConfig::load(None, None, &["l1.16k.entries=8".into(), "l1.16k.ways=0".into()]).unwrap_err();
        assert!(e.to_string().contains("16k"), "{e}");
        let e = MachineConfig::load(None, None, &["cost.walk_ref_cycles=-1".into()]).unwrap_err();
        assert!(e.to_string().contains("walk_ref_cycles"), "{e}");
        assert!(MachineConfig::load(None, Some("[l1\n"), &[]).is_err());
        assert!(MachineConfig::load(None, None, &["nonsense".into()]).is_err());
        assert!(MachineConfig::load(None, None, &["pwc.l1.entries=4".into()]).is_err());
    }
}
