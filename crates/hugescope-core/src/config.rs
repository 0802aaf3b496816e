//! The machine as plain data: page sizes, TLB hierarchy, page-walk caches,
//! radix walker geometry, cost-model latencies and the `virt` section
//! (`config/virt.rs`), with presets for the machines of the papers. A preset
//! is the starting point; a TOML or JSON file and `key=value` overrides are
//! merged on top (`docs/config.md`). Below everything it configures: it
//! imports nothing of the crate but its utilities. The whole configuration of
//! a run (machine, OS, policies) is `configuration.rs`.

pub mod presets;
pub mod virt;

pub use presets::PRESETS;

use crate::units::{fmt_num, page_label, parse_size};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
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
    /// Effective capacity, in 64-byte lines, of the data-cache share that
    /// page-table lines keep (`hw::ptcache`). 0 (the default) turns the
    /// page-table line cache off: every walk reference then costs
    /// `walk_ref_cycles`, and results carry no per-class counters.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub pt_cache_lines: u64,
    /// Cycles of a walk reference that misses the page-table line cache (a
    /// DRAM access); with `pt_cache_lines` > 0, `walk_ref_cycles` is then the
    /// price of a reference that hits (the last-level cache).
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub walk_ref_mem_cycles: f64,
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
    /// The PCC authors' simulator fills the base-page L1 TLB a second time
    /// after every page walk (pcc.md §7, `huge_page_reuse.h`): a 4KB miss
    /// leaves two entries of the page in its set (the older one dead, and its
    /// eviction unmaps the live one), so 4KB-only streams see half the L1;
    /// a walk to a larger page leaves one dead 4KB entry. Off by default;
    /// omitted from the serialized machine when off, so results keep their bytes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub l1_duplicate_fill: bool,
    /// Multi-size THP folio sizes (Linux mTHP, `hugepages-<size>kB`): page
    /// sizes between the base page and the PMD size that the OS maps as a
    /// naturally aligned run of base PTEs over one physical block. Unlike
    /// Alpha's granularity-hint sizes they are no TLB size of their own: what
    /// one TLB entry covers for them is `coalesce`'s decision. Empty on the
    /// older presets, and omitted from the serialized machine when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub folio_sizes: Vec<String>,
    /// What a TLB entry filled from a base-PTE-level leaf may cover
    /// (`os/coalesce.rs`): `none` (one base page), `contpte` (arm64's
    /// contiguous bit, set by the OS on folios of at least `coalesce_size`)
    /// or `amd` (aligned runs of `coalesce_size` present PTEs mapping
    /// contiguous frames, found by the walker without any hint).
    #[serde(default, skip_serializing_if = "Coalesce::is_none")]
    pub coalesce: Coalesce,
    /// The size one coalesced entry covers ("64k" for contpte with 4KB
    /// pages, "16k" for 4-page AMD-style coalescing). Needed unless
    /// `coalesce` is `none` (then ignored, so `coalesce=none` alone turns it off).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub coalesce_size: String,
    /// The 1GB (PUD-level) page size exists (x86 CPUID pdpe1gb). false: the
    /// 1g size is dropped from `page_sizes` and from every TLB key when the
    /// machine is resolved, so no leaf and no TLB entry of 1GB can exist.
    /// Omitted from the serialized machine when true, the older presets' case.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub gb_pages: bool,
    /// The largest page one TLB entry may cover ("4k"): a machine whose
    /// memory is backed by smaller pages one level down, as a KVM guest on
    /// a host that backs it with 4KB pages, keeps its 2MB pages' shorter
    /// walks but holds each as a TLB entry of the host's page (the nested
    /// entry covers the smaller of the two; Bhargava et al., ASPLOS'08 §2),
    /// so 2MB pages do not extend its TLB reach. `hugescope calibrate`
    /// writes it when the measured reach of 2MB pages is that of 4KB pages
    /// (issue #36). Empty: no cap; omitted from the serialized machine then.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tlb_max_page: String,
    /// virt: nested-walk caches and VM-exit cost of virtualized runs
    /// (`config/virt.rs`). Absent: the defaults there; omitted from the
    /// serialized machine when absent, so results keep their bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virt: Option<virt::VirtMachineConfig>,
}

/// TLB coalescing of base-PTE-level leaves (`MachineConfig::coalesce`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Coalesce {
    /// Each PTE is its own TLB entry (x86 without coalescing; arm64 with
    /// the contiguous bit ignored).
    #[default]
    None,
    /// arm64 contpte: a folio of at least `coalesce_size` is mapped with the
    /// contiguous bit, and one entry covers each aligned `coalesce_size` of it.
    Contpte,
    /// AMD-style: the walker itself checks that the aligned `coalesce_size`
    /// run around the address is all present PTEs on contiguous, aligned frames.
    Amd,
}

impl Coalesce {
    pub fn is_none(&self) -> bool {
        *self == Coalesce::None
    }
    /// The knob's value as written.
    pub fn label(&self) -> &'static str {
        match self {
            Coalesce::None => "none",
            Coalesce::Contpte => "contpte",
            Coalesce::Amd => "amd",
        }
    }
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

/// The 1GB page size `gb_pages=false` removes.
const GB: u64 = 1 << 30;

fn is_zero_u64(x: &u64) -> bool {
    *x == 0
}

fn is_zero_f64(x: &f64) -> bool {
    *x == 0.0
}

impl MachineConfig {
    /// TLB and page-walk-cache entries of one cpu's MMU (the model-memory
    /// estimate of `limits` charges each).
    pub fn cache_entries_per_cpu(&self) -> u64 {
        self.l1.values().chain(self.l2.values()).chain(self.pwc.values()).map(|c| c.entries as u64).sum::<u64>()
            + self.cost.pt_cache_lines
    }

    /// A preset, resolved (`gb_pages` applied) and validated.
    pub fn preset(name: &str) -> Result<MachineConfig> {
        let mut cfg = MachineConfig::preset_raw(name)?;
        cfg.apply_gb_pages();
        cfg.validate()?;
        Ok(cfg)
    }

    /// `gb_pages=false`: drop the 1GB size from `page_sizes`, `folio_sizes`
    /// and every TLB key (a structure left holding nothing goes). Done when
    /// the machine is resolved, after files and overrides, so turning the
    /// flag back on (`gb_pages=true`) restores the preset's 1GB structures.
    /// A key that the stripped one would duplicate (a saved configuration
    /// merged over its preset names both) keeps the explicit one.
    fn apply_gb_pages(&mut self) {
        if self.gb_pages {
            return;
        }
        let is_gb = |s: &str| parse_size(s).map(|b| b == GB).unwrap_or(false);
        self.page_sizes.retain(|s| !is_gb(s));
        self.folio_sizes.retain(|s| !is_gb(s));
        for map in [&mut self.l1, &mut self.l2] {
            let old = std::mem::take(map);
            let mut stripped = Vec::new();
            for (key, c) in old {
                let parts: Vec<&str> = key.split('+').filter(|p| !is_gb(p)).collect();
                if parts.len() == key.split('+').count() {
                    map.insert(key, c);
                } else if !parts.is_empty() {
                    stripped.push((parts.join("+"), c));
                }
            }
            for (key, c) in stripped {
                map.entry(key).or_insert(c);
            }
        }
    }

    /// The preset as its data file (`presets/NAME.toml`) writes it, before
    /// `gb_pages` is applied.
    fn preset_raw(name: &str) -> Result<MachineConfig> {
        let text = presets::text(name)
            .ok_or_else(|| Error::config(format!("unknown preset '{name}'; available: {}", PRESETS.join(", "))))?;
        toml::from_str(text).map_err(|e| Error::config(format!("preset {name}: {}", e.to_string().split_whitespace().collect::<Vec<_>>().join(" "))))
    }

    /// Byte sizes of `folio_sizes`, ascending as given.
    pub fn folio_size_bytes(&self) -> Result<Vec<u64>> {
        self.folio_sizes.iter().map(|s| parse_size(s).map_err(|e| Error::config(format!("folio_sizes: {e}")))).collect()
    }

    /// Bytes of `coalesce_size`, None when coalescing is off.
    pub fn coalesce_bytes(&self) -> Result<Option<u64>> {
        if self.coalesce.is_none() {
            return Ok(None);
        }
        if self.coalesce_size.is_empty() {
            return Err(Error::config(format!("coalesce={}: needs coalesce_size (e.g. 64k)", self.coalesce.label())));
        }
        parse_size(&self.coalesce_size)
            .map(Some)
            .map_err(|e| Error::config(format!("coalesce_size={}: {e}", self.coalesce_size)))
    }

    /// Check the mTHP knobs against the geometry: folio sizes and the
    /// coalesced size are page sizes of the base-PTE level (above the base
    /// page, below the next level's span), and 1GB is gone when `gb_pages`
    /// is off.
    fn validate_multi_size(&self, sizes: &[u64]) -> Result<()> {
        let w = &self.walker;
        // The span of one entry of the level above the leaf table: a size at
        // or above it is a leaf of that level, not a run of PTEs.
        let above = match w.level_shifts.len() {
            1 => u64::MAX,
            n => 1u64 << w.level_shifts[n - 2],
        };
        let pte_level = |what: &str, label: &str, b: u64| -> Result<()> {
            if !sizes.contains(&b) {
                return Err(Error::config(format!("{what} {label} is not in page_sizes")));
            }
            if b <= sizes[0] || b >= above {
                return Err(Error::config(format!(
                    "{what} {label}: must lie between the base page ({}) and the next level's {} (a run of base PTEs)",
                    page_label(sizes[0]),
                    page_label(above)
                )));
            }
            Ok(())
        };
        for (label, b) in self.folio_sizes.iter().zip(self.folio_size_bytes()?) {
            pte_level("folio_sizes:", label, b)?;
        }
        if let Some(b) = self.coalesce_bytes()? {
            pte_level(&format!("coalesce={}: coalesce_size", self.coalesce.label()), &self.coalesce_size, b)?;
        }
        if !self.gb_pages && sizes.contains(&GB) {
            return Err(Error::config("gb_pages=false: page_sizes lists 1g"));
        }
        Ok(())
    }

    /// Load: a preset, then a TOML file merged over it, then `key=value`
    /// overrides (dotted keys: `l2.4k+2m.entries=1536`, `cost.walk_ref_cycles=40`).
    /// A TOML file may name its own starting preset with `preset = "..."`.
    /// (The machine part of `Config::load`, for callers with no OS or policy.)
    pub fn load(preset: Option<&str>, toml_text: Option<&str>, overrides: &[String]) -> Result<MachineConfig> {
        let (file_preset, file_val) = match toml_text {
            Some(text) => {
                let v = parse_text(None, text, false)?;
                let mut obj = match v {
                    Value::Object(m) => m,
                    _ => return Err(Error::config("TOML: expected a table")),
                };
                (take_preset(&mut obj, "TOML")?, Some(Value::Object(obj)))
            }
            None => (None, None),
        };
        let overrides = split_overrides(overrides)?;
        let start = preset.map(str::to_string).or(file_preset).unwrap_or_else(|| DEFAULT_PRESET.into());
        resolve_machine(&start, file_val, &overrides)
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
        // The dead duplicates are tagged with the eighth size index (`hw::tlb::ghost`).
        if self.l1_duplicate_fill && sizes.len() >= 8 {
            return Err(Error::config(format!(
                "l1_duplicate_fill=true needs at most 7 page sizes, got {}", sizes.len())));
        }
        for w in sizes.windows(2) {
            if w[0] >= w[1] {
                return Err(Error::config("page_sizes must be strictly ascending"));
            }
        }
        if !self.tlb_max_page.is_empty() {
            let b = parse_size(&self.tlb_max_page)
                .map_err(|e| Error::config(format!("tlb_max_page: {e}")))?;
            if !sizes.contains(&b) {
                return Err(Error::config(format!(
                    "tlb_max_page = \"{}\" is not one of the machine's page sizes ({})",
                    self.tlb_max_page, self.page_sizes.join(", "))));
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
        self.validate_multi_size(&sizes)?;
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
        if let Some(v) = &self.virt {
            v.validate(w.level_shifts.len(), check_cache)?;
        }
        let c = &self.cost;
        for (k, v) in [
            ("base_cycles_per_access", c.base_cycles_per_access),
            ("l1_hit_cycles", c.l1_hit_cycles),
            ("l2_hit_cycles", c.l2_hit_cycles),
            ("walk_ref_cycles", c.walk_ref_cycles),
            ("pwc_hit_cycles", c.pwc_hit_cycles),
            ("walk_ref_mem_cycles", c.walk_ref_mem_cycles),
        ] {
            // Bounded so virtual time (cycles / clock) stays finite and
            // meaningful: no memory reference costs a million cycles.
            if !v.is_finite() || !(0.0..=MAX_CYCLES).contains(&v) {
                return Err(Error::config(format!("cost.{k}={}: must be between 0 and {MAX_CYCLES} cycles", fmt_num(v))));
            }
        }
        if c.pt_cache_lines > MAX_PT_CACHE_LINES {
            return Err(Error::config(format!(
                "cost.pt_cache_lines={}: at most {MAX_PT_CACHE_LINES} lines (a 256 MiB cache; 0 turns the model off)",
                c.pt_cache_lines
            )));
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
/// Largest page-table line cache (`cost.pt_cache_lines`): 4Mi lines of 64 B
/// model a 256 MiB cache, beyond any last-level cache; each cpu keeps a tag
/// per line.
const MAX_PT_CACHE_LINES: u64 = 1 << 22;
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

/// The preset a configuration starts from when none is named.
pub const DEFAULT_PRESET: &str = "haswell-pcc";

/// Parse a file's text (JSON or TOML) into one JSON value; `name` prefixes
/// errors. TOML's errors span lines (a snippet with a caret): joined into
/// one, as every error is one line.
pub(crate) fn parse_text(name: Option<&str>, text: &str, json: bool) -> Result<Value> {
    let at = name.map(|n| format!("{n}: ")).unwrap_or_default();
    if json {
        return crate::strict::parse_json(text).map_err(|e| Error::config(format!("{at}JSON: {e}")));
    }
    let t: toml::Value = toml::from_str(text).map_err(|e| {
        // TOML's message quotes the offending line under a caret: joined
        // into one line, and cut (a line may be megabytes long).
        let text = e.to_string();
        let msg: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        Error::config(format!("{at}TOML: {}", crate::error::shown(&msg.join(" "), 400)))
    })?;
    crate::strict::toml_to_json(t).map_err(|e| Error::config(format!("{at}{e}")))
}

/// Remove and return a table's `preset = "..."`.
pub(crate) fn take_preset(obj: &mut Map<String, Value>, name: &str) -> Result<Option<String>> {
    match obj.remove("preset") {
        None => Ok(None),
        Some(Value::String(p)) => Ok(Some(p)),
        Some(other) => Err(Error::config(format!("{name}: preset={other}: must be a string"))),
    }
}

/// Split `KEY=VALUE` overrides; a key given twice is refused rather than
/// letting the last one win silently (one of the two is a mistake).
/// `machine.KEY` names the same key as `KEY`.
pub(crate) fn split_overrides(overrides: &[String]) -> Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = Vec::with_capacity(overrides.len());
    for o in overrides {
        let (key, val) = o.split_once('=').ok_or_else(|| Error::config(format!("override '{o}' is not key=value")))?;
        let (key, val) = (key.trim(), val.trim());
        let key = key.strip_prefix("machine.").unwrap_or(key);
        if let Some((_, first)) = out.iter().find(|(k, _)| k == key) {
            return Err(Error::config(format!("override {key} given twice ({key}={first} and {key}={val})")));
        }
        out.push((key.to_string(), val.to_string()));
    }
    Ok(out)
}

/// The machine: the preset `start`, the file's machine keys merged over it,
/// then the overrides; validated.
pub(crate) fn resolve_machine(start: &str, file_val: Option<Value>, overrides: &[(String, String)]) -> Result<MachineConfig> {
    // The raw preset: `gb_pages` is applied once, after the file and the
    // overrides had their say (`gb_pages=true` restores the 1GB structures).
    let mut v = serde_json::to_value(MachineConfig::preset_raw(start)?).expect("config serializes");
    if let Some(mut f) = file_val {
        // `replace = ["l1", ...]`: tables the file gives whole. A merge can
        // add and change structures but never remove one, so a file whose
        // TLBs are keyed differently from the preset's (a calibration that
        // read AMD's per-size L2 TLBs over haswell-pcc's shared "4k+2m")
        // drops the preset's table first.
        if let Value::Object(fo) = &mut f {
            if let Some(r) = fo.remove("replace") {
                for t in replace_tables(&r)? {
                    if let Value::Object(vo) = &mut v {
                        vo.remove(t);
                    }
                }
            }
        }
        merge(&mut v, f);
    }
    for (key, val) in overrides {
        set_path(&mut v, key, parse_scalar(val))?;
    }
    let base = serde_json::to_value(MachineConfig::preset_raw(start)?).expect("config serializes");
    let mut cfg: MachineConfig = serde_json::from_value(v.clone()).map_err(|e| {
        // serde names no key: find the one whose value breaks the preset.
        let (key, e) = blame::<MachineConfig>(&base, &v).unwrap_or((String::new(), e));
        let at = if key.is_empty() { String::new() } else { format!("{key}: ") };
        Error::config(format!("invalid machine configuration: {at}{}", crate::strict::plain_message(&e.to_string())))
    })?;
    cfg.apply_gb_pages();
    cfg.validate()?;
    Ok(cfg)
}

/// Tables a machine file may replace whole (`replace = [...]`).
const REPLACEABLE: [&str; 3] = ["l1", "l2", "pwc"];

/// The table names of a `replace` value, each one of `REPLACEABLE`.
fn replace_tables(r: &Value) -> Result<Vec<&'static str>> {
    let bad = || Error::config(format!("replace={r}: must be a list of table names among {}", REPLACEABLE.join(", ")));
    let list = r.as_array().ok_or_else(bad)?;
    list.iter()
        .map(|x| x.as_str().and_then(|s| REPLACEABLE.iter().find(|t| **t == s).copied()).ok_or_else(bad))
        .collect()
}

/// The dotted key of `merged` whose value alone, put into the valid `base`,
/// makes it fail to deserialize as `T`, and that error. A key `base` lacks is
/// tried with its whole table (a new PWC level needs all its fields).
fn blame<T: serde::de::DeserializeOwned>(base: &Value, merged: &Value) -> Option<(String, serde_json::Error)> {
    fn walk<T: serde::de::DeserializeOwned>(
        base: &Value,
        b: Option<&Value>,
        m: &Value,
        path: &mut Vec<String>,
    ) -> Option<(String, serde_json::Error)> {
        if let (Some(Value::Object(bo)), Value::Object(mo)) = (b, m) {
            for (k, mv) in mo {
                path.push(k.clone());
                let found = walk::<T>(base, bo.get(k), mv, path);
                path.pop();
                if found.is_some() {
                    return found;
                }
            }
            return None;
        }
        if b == Some(m) {
            return None;
        }
        let mut candidate = base.clone();
        let mut cur = &mut candidate;
        for (i, p) in path.iter().enumerate() {
            let obj = cur.as_object_mut()?;
            if i + 1 == path.len() {
                obj.insert(p.clone(), m.clone());
                break;
            }
            cur = obj.entry(p.clone()).or_insert_with(|| Value::Object(Default::default()));
        }
        serde_json::from_value::<T>(candidate).err().map(|e| (path.join("."), e))
    }
    walk::<T>(base, Some(base), merged, &mut Vec::new())
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
    // NaN and infinities stay text ("nan", "inf", "1e400"): as JSON numbers
    // they would become null; as text a numeric key refuses them by name.
    if let Ok(f) = s.parse::<f64>().map_err(drop).and_then(|f| if f.is_finite() { Ok(f) } else { Err(()) }) {
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
    // An empty table: `virt.guest_pwc={}` turns a cache off (docs/config.md).
    if s.trim() == "{}" {
        return Value::Object(Default::default());
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
        let e = MachineConfig::preset("pentium").unwrap_err().to_string();
        assert!(e.contains("unknown preset 'pentium'; available: haswell-pcc, sandybridge-ds"), "{e}");
    }

    /// Each data file holds the numbers its source gives (the comments of
    /// `presets/*.toml` cite them): TLB entries and ways, and the clock.
    #[test]
    fn presets_hold_their_cited_values() {
        let tlbs = |m: &MachineConfig| -> Vec<(String, usize, usize)> {
            let mut v: Vec<_> = m.l1.iter().map(|(k, c)| (format!("l1.{k}"), c.entries, c.ways)).collect();
            v.extend(m.l2.iter().map(|(k, c)| (format!("l2.{k}"), c.entries, c.ways)));
            v
        };
        let t = |k: &str, e, w| (k.to_string(), e, w);
        // PCC paper Table 2 (Xeon E5-2667 v3, 3.20 GHz).
        let m = MachineConfig::preset("haswell-pcc").unwrap();
        assert_eq!(tlbs(&m), [t("l1.1g", 4, 4), t("l1.2m", 32, 4), t("l1.4k", 64, 4), t("l2.4k+2m", 1024, 8)]);
        assert_eq!(m.cost.cpu_ghz, 3.2);
        // The PCC artifact: 128 reachable sets of a 6-way L2, no PWC.
        let m = MachineConfig::preset("pcc-artifact").unwrap();
        assert_eq!(tlbs(&m), [t("l1.2m", 32, 4), t("l1.4k", 64, 4), t("l2.4k+2m", 768, 6)]);
        assert!(m.pwc.is_empty());
        // Direct segments Table 1 (Xeon E5-2430, 2.2 GHz): L2 for 4KB only.
        let m = MachineConfig::preset("sandybridge-ds").unwrap();
        assert_eq!(tlbs(&m), [t("l1.1g", 4, 0), t("l1.2m", 32, 4), t("l1.4k", 64, 4), t("l2.4k", 512, 4)]);
        assert_eq!(m.cost.cpu_ghz, 2.2);
        // Navarro §6.1: Alpha 21264 at 500 MHz, one 128-entry fully associative DTLB.
        let m = MachineConfig::preset("alpha-21264").unwrap();
        assert_eq!(tlbs(&m), [t("l1.8k+64k+512k+4m", 128, 0)]);
        assert_eq!((m.cost.cpu_ghz, m.walker.level_shifts.clone()), (0.5, vec![33, 23, 13]));
        // Cortex-A76 TRM §A5.2: 48-entry L1, 1280-entry 5-way L2, 3-cycle L2 hit.
        let m = MachineConfig::preset("arm64-mthp").unwrap();
        assert_eq!(tlbs(&m), [t("l1.4k+64k+2m", 48, 0), t("l2.4k+64k+2m", 1280, 5)]);
        assert_eq!((m.cost.l2_hit_cycles, m.cost.cpu_ghz, m.coalesce), (3.0, 2.5, Coalesce::Contpte));
        // x86-mthp: 1GB off as Linux THP has it, the folio sizes of its file.
        let m = MachineConfig::preset("x86-mthp").unwrap();
        assert!(!m.gb_pages && !m.page_sizes.contains(&"1g".to_string()) && m.folio_sizes == ["16k", "32k", "64k"]);
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

    /// `replace = ["l2"]`: the file's L2 table stands alone (the preset's
    /// "4k+2m" would otherwise hold 4k and 2m a second time); a bad list is
    /// refused by name.
    #[test]
    fn replace_drops_the_presets_table() {
        let toml = "preset = \"haswell-pcc\"\nreplace = [\"l2\"]\n[l2.4k]\nentries = 128\nways = 8\n[l2.2m]\nentries = 128\nways = 4\n";
        let c = MachineConfig::load(None, Some(toml), &[]).unwrap();
        assert_eq!(c.l2.keys().collect::<Vec<_>>(), ["2m", "4k"]);
        assert_eq!((c.l2["4k"].entries, c.l2["2m"].ways), (128, 4));
        assert_eq!(c.l1["4k"].entries, 64); // not replaced: the preset's
        let merged = toml.replace("replace = [\"l2\"]\n", "");
        let e = MachineConfig::load(None, Some(&merged), &[]).unwrap_err().to_string();
        assert!(e.contains("held by two structures"), "{e}");
        for bad in ["replace = [\"cost\"]\n", "replace = \"l2\"\n", "replace = [1]\n"] {
            let e = MachineConfig::load(None, Some(bad), &[]).unwrap_err().to_string();
            assert!(e.contains("replace=") && e.contains("l1, l2, pwc"), "{e}");
        }
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

    /// Issue #31: parser internals do not leak, the key is named, and NaN,
    /// infinities and duplicate keys are refused in every format.
    #[test]
    fn type_errors_name_the_key_in_plain_words() {
        use crate::configuration::{Config, Source};
        let load = |text: &str, name: &str| Config::load(None, Some(Source { name, text }), &[], &[]).unwrap_err().to_string();
        let e = load("[machine.l1.4k]\nentries = 1.5\n", "c.toml");
        assert!(e.contains("l1.4k.entries: invalid type: the number `1.5`, expected a whole number"), "{e}");
        assert!(!e.contains("usize") && !e.contains("column"), "{e}");
        let e = load(r#"{"machine": {"cost": {"cpu_ghz": "fast"}}}"#, "c.json");
        assert!(e.contains("cost.cpu_ghz: invalid type: string \"fast\", expected a number"), "{e}");
        let e = load("[machine.cost]\ncpu_ghz = nan\n", "c.toml");
        assert!(e.contains("cost.cpu_ghz = NaN: not a finite number"), "{e}");
        let e = load(r#"{"os": {"frag": 0.5, "frag": 0.9}}"#, "c.json");
        assert!(e.contains("\"frag\" given twice"), "{e}");
        for v in ["1e400", "inf", "nan"] {
            let e = MachineConfig::load(None, None, &[format!("cost.cpu_ghz={v}")]).unwrap_err().to_string();
            assert!(e.contains("cost.cpu_ghz") && e.contains(v) && !e.contains("null"), "{e}");
        }
        let e = MachineConfig::load(None, None, &[format!("l1.4k.entries={}", "9".repeat(1 << 20))]).unwrap_err().to_string();
        assert!(e.len() < 700, "{}", e.len());
    }
}

