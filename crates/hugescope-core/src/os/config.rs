//! The OS configuration: the `OsConfig` the kernel model runs with, and the
//! `[os]` section of a configuration file that produces it.
//!
//! Every OS knob is declared once, as a row of `os_knobs()` (the OS costs come
//! from the `os_costs!` list in `costs.rs`): its name, type, unit, default,
//! range and help. Everything else derives from that row: parsing of a file's
//! `[os]` table and of `--set os.KEY=VALUE`, the range check and its error
//! (naming the key, the value and where it came from), the `hugescope config`
//! listing, and the fields of the Python `Config.os` view. Adding a knob is
//! one row here plus its use in `OsSettings::os_config` (or the kernel).

use super::clock::TimeBase;
use super::costs::{OsCosts, MAX_COST_US};
use super::phys::WiredMode;
use crate::limits::{MAX_DURATION_S, MAX_RATE, MIN_RATE};
use crate::units::{fmt_num, whole_value};
use crate::{Error, Result};
// Deserialize: a result echoes its OS configuration, and a reference run's
// result is read back from the results cache (`result_cache`).
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::OnceLock;

/// How hard an allocation of a huge frame may try.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AllocMode {
    /// Take a free block of the order if one exists; never compact.
    FreeOnly,
    /// Direct compaction, migrating at most this many base pages, then retry.
    Compact { max_pages: u64 },
}

/// How physical memory is fragmented before the run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum Fragmentation {
    /// PCC paper §5.1.1: one unmovable page in `share` of the 2MB blocks.
    Pcc { share: f64 },
    /// Ingens §6.3: allocate, then free parts until FMFI reaches the target.
    /// `pinned`: the pages the fragmenting program keeps are unmovable
    /// (kernel memory left by prior activity) instead of movable anonymous
    /// memory, so no compaction can undo the fragmentation.
    Ingens {
        fmfi: f64,
        #[serde(skip_serializing_if = "std::ops::Not::not", default)]
        pinned: bool,
    },
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OsConfig {
    /// Physical memory; None: 1.3 x footprint + 8MiB (at least 64MiB).
    pub memory_bytes: Option<u64>,
    pub fragmentation: Option<Fragmentation>,
    /// Maximum huge-page memory as a share of the footprint (0..=1); None: no cap.
    pub budget: Option<f64>,
    /// Footprint the budget refers to; None: the trace's declared regions.
    pub footprint_bytes: Option<u64>,
    /// None: the trace's nominal access rate if it has one, else cost-model cycles.
    pub time: Option<TimeBase>,
    pub costs: OsCosts,
    pub seed: u64,
    /// Timeline sample period, in accesses.
    pub sample_every: u64,
    // page daemon: memory pressure, wired pages, process exit (os/pagedaemon.rs).
    #[serde(rename = "pagedaemon", skip_serializing_if = "DaemonConfig::is_default", default)]
    pub daemon: DaemonConfig,
    // memory tiers (os/tier.rs): off unless a fast tier is configured.
    #[serde(skip_serializing_if = "TierConfig::is_off", default)]
    pub tiers: TierConfig,
}

impl Default for OsConfig {
    fn default() -> Self {
        OsConfig {
            memory_bytes: None,
            fragmentation: None,
            budget: None,
            footprint_bytes: None,
            time: None,
            costs: OsCosts::default(),
            seed: 1,
            sample_every: 1 << 20,
            daemon: DaemonConfig::default(),
            tiers: TierConfig::default(),
        }
    }
}

impl OsConfig {
    /// Simulated physical memory for a footprint: `memory_bytes`, or the
    /// default described in `Kernel::new`. Shared with the memory estimate
    /// made before any run allocates (`run::check_memory`).
    pub fn memory_for(&self, footprint: u64) -> u64 {
        match self.memory_bytes {
            Some(m) => m,
            None => {
                // Saturating: a footprint near 2^64 is refused by the estimate,
                // not by an overflow.
                let m = footprint.saturating_add(footprint.saturating_mul(3) / 10).saturating_add(8 << 20).div_ceil(2 << 20).max(32).saturating_mul(2 << 20);
                if matches!(self.fragmentation, Some(Fragmentation::Ingens { .. })) { m.saturating_mul(2) } else { m }
            }
        }
    }
}

// page daemon (os/pagedaemon.rs): its part of the configuration.
/// Which daemon runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DaemonMode {
    /// No daemon: an allocation that finds no frame counts `out_of_memory`.
    Off,
    /// FreeBSD's daemon: evict in approximate-LRU order.
    Alru,
    /// Navarro's contiguity-aware daemon (§5).
    Contiguity,
}

/// The memory-pressure part of the OS configuration (`[os]` keys
/// `pagedaemon`, `free_min`, `free_target`, `spec_demote`, `pagein_us`,
/// `soft_refault_us`, `writeback_us`, `wired`, `wired_rate`, `wired_share`,
/// `exit_frees`). Left out of the result's `os` when every field has its
/// default, so results of runs without it are unchanged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DaemonConfig {
    pub mode: DaemonMode,
    /// Low watermark: the daemon wakes below this share of memory free + cache.
    pub free_min: f64,
    /// The daemon works until this share of memory is free + cache.
    pub free_target: f64,
    /// Probability of a speculative demotion when the daemon clears the
    /// reference bit of a page inside a superpage (§4.6: 1).
    pub spec_demote: f64,
    /// Reading an evicted page back from disk (hard refault), us.
    pub pagein_us: f64,
    /// Taking a page back from the cache (soft refault), us.
    pub soft_refault_us: f64,
    /// Writing one dirty base page back before eviction, us.
    pub writeback_us: f64,
    pub wired: WiredMode,
    /// Wired frames per base-page fault of the program.
    pub wired_rate: f64,
    /// The wired stream stops at this share of memory.
    pub wired_share: f64,
    /// In a concurrent run, a process whose trace ends exits and frees its memory.
    pub exit_frees: bool,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            mode: DaemonMode::Off,
            free_min: 0.02,
            free_target: 0.05,
            spec_demote: 1.0,
            pagein_us: 5000.0,
            soft_refault_us: 2.0,
            writeback_us: 5000.0,
            wired: WiredMode::None,
            wired_rate: 0.01,
            wired_share: 0.05,
            exit_frees: false,
        }
    }
}

impl DaemonConfig {
    /// Every field at its default: nothing of this model runs.
    pub fn is_default(&self) -> bool {
        *self == DaemonConfig::default()
    }
}

// memory tiers (os/tier.rs): their part of the configuration.
/// The tier configuration (`os.tier_*` knobs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TierConfig {
    /// Bytes of the fast tier; None: one tier (no tier model runs).
    pub fast_bytes: Option<u64>,
    /// Memory time of an access to a fast frame, ns (DRAM; spec §11: 90).
    pub fast_ns: f64,
    /// Memory time of an access to a slow frame, ns (PMem; spec §11: 300).
    pub slow_ns: f64,
    /// Migration copy bandwidth per direction, GB/s (spec §11: 2).
    pub bandwidth_gbs: f64,
    /// One page-table (EPT) entry update per migrated leaf, us. Estimate.
    pub remap_us: f64,
}

impl Default for TierConfig {
    fn default() -> Self {
        TierConfig { fast_bytes: None, fast_ns: 90.0, slow_ns: 300.0, bandwidth_gbs: 2.0, remap_us: 0.1 }
    }
}

impl TierConfig {
    /// No fast tier configured: nothing of this model runs.
    pub fn is_off(&self) -> bool {
        self.fast_bytes.is_none()
    }
}

/// What values a knob takes, with its accepted range.
#[derive(Clone, Copy, Debug)]
pub enum KnobKind {
    /// Bytes: an integer, or text with a binary suffix ("64MiB").
    Size { min: u64, max: u64 },
    /// A non-negative integer, or text with a decimal suffix ("20M").
    Count { min: u64, max: u64 },
    /// A share 0..=1, or text "N%" (0%..100%).
    Share,
    /// A real number in `min..=max` (`min` excluded when `min_open`).
    Real { min: f64, min_open: bool, max: f64 },
    /// One of these words.
    Choice(&'static [&'static str]),
}

/// A knob's value once parsed. Choices are the declaration's own words.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KnobValue {
    Int(u64),
    Real(f64),
    Word(&'static str),
}

/// One OS knob: the single declaration everything else derives from.
#[derive(Clone, Debug)]
pub struct Knob {
    pub name: &'static str,
    pub kind: KnobKind,
    /// Unit of the value ("bytes", "us", "s", ...; "" for none).
    pub unit: &'static str,
    /// None: the knob is optional and its absence means `auto`.
    pub default: Option<KnobValue>,
    /// What the model does when an optional knob is unset ("" if required).
    pub auto: &'static str,
    pub help: &'static str,
}

/// The OS knobs, in the order `hugescope config` lists them.
pub fn os_knobs() -> &'static [Knob] {
    static KNOBS: OnceLock<Vec<Knob>> = OnceLock::new();
    KNOBS.get_or_init(|| {
        let size = KnobKind::Size { min: 0, max: u64::MAX };
        let mut k = vec![
            Knob { name: "memory", kind: size, unit: "bytes", default: None,
                auto: "1.3 x footprint + 8MiB, at least 64MiB (twice that for ingens fragmentation)",
                help: "simulated physical memory (checked against the model-memory limit before a run)" },
            Knob { name: "footprint", kind: size, unit: "bytes", default: None,
                auto: "the trace's declared regions",
                help: "footprint the budget (and the experiments' N% limits) refer to" },
            Knob { name: "budget", kind: KnobKind::Share, unit: "share", default: None, auto: "no cap",
                help: "cap on huge-page memory as a share of the footprint (PCC paper §4: the N% limit)" },
            Knob { name: "frag", kind: KnobKind::Share, unit: "share", default: None, auto: "unfragmented",
                help: "fragment memory first: share of 2MB blocks with an unmovable page (pcc, PCC §5.1.1) or target FMFI (ingens, Ingens §6.3)" },
            Knob { name: "frag_method", kind: KnobKind::Choice(&["pcc", "ingens"]), unit: "",
                default: Some(KnobValue::Word("pcc")), auto: "", help: "how memory is fragmented when frag is set" },
            Knob { name: "frag_mobility", kind: KnobKind::Choice(&["movable", "unmovable"]), unit: "",
                default: Some(KnobValue::Word("movable")), auto: "",
                help: "pages the ingens-method fragmenter keeps: movable (a user program's; compaction can undo it) or unmovable (kernel memory: it cannot)" },
            Knob { name: "seed", kind: KnobKind::Count { min: 0, max: u64::MAX }, unit: "",
                default: Some(KnobValue::Int(1)), auto: "", help: "seed of the fragmentation injector" },
            Knob { name: "sample_every", kind: KnobKind::Count { min: 1, max: u64::MAX }, unit: "accesses",
                default: Some(KnobValue::Int(1 << 20)), auto: "", help: "timeline sample period" },
            Knob { name: "duration", kind: KnobKind::Real { min: 0.0, min_open: true, max: MAX_DURATION_S }, unit: "s",
                default: None, auto: "the trace header's access rate, else cost-model cycles",
                help: "treat the whole trace as this many seconds of virtual time (sets the access rate)" },
            Knob { name: "rate", kind: KnobKind::Real { min: MIN_RATE, min_open: false, max: MAX_RATE }, unit: "accesses/s",
                default: None, auto: "the trace header's access rate, else cost-model cycles",
                help: "nominal accesses per second of the virtual time base (instead of duration)" },
        ];
        // page daemon (os/pagedaemon.rs; Navarro §4.4, §5): off by default.
        // Its costs are declared here, not in `os_costs!`, so the result's
        // `os.costs` of runs without a daemon keeps its fields.
        let d = DaemonConfig::default();
        let us = KnobKind::Real { min: 0.0, min_open: false, max: MAX_COST_US };
        k.extend([
            Knob { name: "pagedaemon", kind: KnobKind::Choice(&["off", "alru", "contiguity"]), unit: "",
                default: Some(KnobValue::Word("off")), auto: "",
                help: "page daemon under memory pressure: off, alru (FreeBSD's A-LRU eviction) or contiguity (Navarro §5: also wakes on a failed huge allocation and evicts pages that free whole extents)" },
            Knob { name: "free_min", kind: KnobKind::Share, unit: "share", default: Some(KnobValue::Real(d.free_min)), auto: "",
                help: "low watermark: the daemon wakes when free + cache memory falls below this share" },
            Knob { name: "free_target", kind: KnobKind::Share, unit: "share", default: Some(KnobValue::Real(d.free_target)), auto: "",
                help: "the daemon evicts until free + cache memory reaches this share" },
            Knob { name: "spec_demote", kind: KnobKind::Share, unit: "probability", default: Some(KnobValue::Real(d.spec_demote)), auto: "",
                help: "probability of demoting a superpage when the daemon clears its reference bit (Navarro §4.6: 1)" },
            Knob { name: "pagein_us", kind: us, unit: "us", default: Some(KnobValue::Real(d.pagein_us)), auto: "",
                help: "hard refault: reading an evicted page back from disk" },
            Knob { name: "soft_refault_us", kind: us, unit: "us", default: Some(KnobValue::Real(d.soft_refault_us)), auto: "",
                help: "soft refault: taking an evicted page back from the cache" },
            Knob { name: "writeback_us", kind: us, unit: "us", default: Some(KnobValue::Real(d.writeback_us)), auto: "",
                help: "writing one dirty base page back before its eviction" },
            Knob { name: "wired", kind: KnobKind::Choice(&["none", "scattered", "pooled"]), unit: "",
                default: Some(KnobValue::Word("none")), auto: "",
                help: "wired kernel allocations: none, scattered (anywhere) or pooled (from contiguous pools; Navarro §5.2)" },
            Knob { name: "wired_rate", kind: KnobKind::Real { min: 0.0, min_open: false, max: 1e6 }, unit: "frames/fault",
                default: Some(KnobValue::Real(d.wired_rate)), auto: "", help: "wired frames allocated per page fault of the program" },
            Knob { name: "wired_share", kind: KnobKind::Share, unit: "share", default: Some(KnobValue::Real(d.wired_share)), auto: "",
                help: "the wired stream stops at this share of memory" },
            Knob { name: "exit_frees", kind: KnobKind::Choice(&["false", "true"]), unit: "", default: Some(KnobValue::Word("false")), auto: "",
                help: "concurrent runs: a process whose trace ends exits and frees all its memory" },
        ]);
        // memory tiers (os/tier.rs; FHPM §5, §6.5; spec §11 defaults): off by default.
        let t = TierConfig::default();
        k.extend([
            Knob { name: "tier_fast", kind: KnobKind::Size { min: 2 << 20, max: u64::MAX }, unit: "bytes", default: None, auto: "one tier (no tier model)",
                help: "memory tiers: bytes of the fast tier (a multiple of 2MB); the rest of memory is the slow tier, allocated after the fast one (FHPM §6.1)" },
            Knob { name: "tier_fast_ns", kind: KnobKind::Real { min: 0.0, min_open: false, max: 1e6 }, unit: "ns", default: Some(KnobValue::Real(t.fast_ns)), auto: "",
                help: "memory tiers: memory time of an access to a fast-tier frame (DRAM; estimate)" },
            Knob { name: "tier_slow_ns", kind: KnobKind::Real { min: 0.0, min_open: false, max: 1e6 }, unit: "ns", default: Some(KnobValue::Real(t.slow_ns)), auto: "",
                help: "memory tiers: memory time of an access to a slow-tier frame (Optane PMem; estimate)" },
            Knob { name: "tier_bandwidth", kind: KnobKind::Real { min: 0.0, min_open: true, max: 1e4 }, unit: "GB/s", default: Some(KnobValue::Real(t.bandwidth_gbs)), auto: "",
                help: "memory tiers: migration copy bandwidth per direction, in the background" },
            Knob { name: "tier_remap_us", kind: us, unit: "us", default: Some(KnobValue::Real(t.remap_us)), auto: "",
                help: "memory tiers: one page-table (EPT) entry update per migrated page (estimate)" },
        ]);
        // The OS costs, declared in `costs.rs` (one line each there).
        k.extend(OsCosts::KNOBS.iter().map(|&(name, default, help)| Knob {
            name,
            kind: KnobKind::Real { min: 0.0, min_open: false, max: MAX_COST_US },
            unit: "us",
            default: Some(KnobValue::Real(default)),
            auto: "",
            help: help.trim(),
        }));
        k
    })
}

/// The knob named `key`.
pub fn knob(key: &str) -> Option<&'static Knob> {
    os_knobs().iter().find(|k| k.name == key)
}

/// How a value is shown in an error: text as typed, anything else as JSON.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl Knob {
    /// Parse a value from a file (TOML or JSON) or an override (text). None:
    /// unset (`auto`, or JSON null), allowed for optional knobs only. The
    /// error is the reason alone; `OsSettings::set` adds the key and where.
    pub fn parse(&self, v: &Value) -> std::result::Result<Option<KnobValue>, String> {
        let auto = matches!(v, Value::Null) || v.as_str().is_some_and(|s| s.trim() == "auto");
        if auto {
            return match self.default {
                None => Ok(None),
                Some(_) => Err("has no 'auto' value; give a value".into()),
            };
        }
        match self.kind {
            KnobKind::Size { min, max } | KnobKind::Count { min, max } => {
                let sized = matches!(self.kind, KnobKind::Size { .. });
                let n = whole_value(v, sized);
                let n = n.ok_or_else(|| if sized { "not a size (bytes, or text such as 64MiB)".to_string() } else { "not a non-negative integer".to_string() })?;
                if n < min || n > max {
                    return Err(format!("out of range {min}..={max}"));
                }
                Ok(Some(KnobValue::Int(n)))
            }
            KnobKind::Share => {
                let x = match v {
                    Value::Number(n) => n.as_f64(),
                    Value::String(s) => match s.trim().strip_suffix('%') {
                        Some(p) => p.trim().parse::<f64>().ok().map(|x| x / 100.0),
                        None => s.trim().parse::<f64>().ok(),
                    },
                    _ => None,
                };
                match x {
                    Some(x) if x.is_finite() && (0.0..=1.0).contains(&x) => Ok(Some(KnobValue::Real(x))),
                    Some(x) if x.is_finite() => Err("out of range (a share 0..1 or 0%..100%)".into()),
                    _ => Err("not a share (0..1 or 0%..100%)".into()),
                }
            }
            KnobKind::Real { min, min_open, max } => {
                let x = match v {
                    Value::Number(n) => n.as_f64(),
                    Value::String(s) => s.trim().parse::<f64>().ok(),
                    _ => None,
                };
                let x = x.filter(|x| x.is_finite()).ok_or_else(|| "not a finite number".to_string())?;
                let low_ok = if min_open { x > min } else { x >= min };
                if !low_ok || x > max {
                    let open = if min_open { "(" } else { "[" };
                    let unit = if self.unit.is_empty() { String::new() } else { format!(" {}", self.unit) };
                    return Err(format!("out of range {open}{min}, {max}]{unit}"));
                }
                Ok(Some(KnobValue::Real(x)))
            }
            // A TOML or JSON boolean is the word true/false (page daemon: exit_frees).
            KnobKind::Choice(words) => match v.as_bool().map(|b| if b { "true" } else { "false" }).or(v.as_str()).and_then(|s| words.iter().find(|w| **w == s.trim())) {
                Some(w) => Ok(Some(KnobValue::Word(w))),
                None => Err(format!("expected one of {}", words.join(", "))),
            },
        }
    }

    /// The type of the knob in words (listing, docs, Python).
    pub fn type_name(&self) -> &'static str {
        match self.kind {
            KnobKind::Size { .. } => "size",
            KnobKind::Count { .. } => "integer",
            KnobKind::Share => "share",
            KnobKind::Real { .. } => "real",
            KnobKind::Choice(_) => "choice",
        }
    }

    /// The accepted range in words.
    pub fn range_text(&self) -> String {
        match self.kind {
            KnobKind::Size { min, max } | KnobKind::Count { min, max } => format!("{min}..={max}"),
            KnobKind::Share => "0..=1 (or 0%..100%)".into(),
            KnobKind::Real { min, min_open, max } => format!("{}{}, {}]", if min_open { "(" } else { "[" }, fmt_num(min), fmt_num(max)),
            KnobKind::Choice(words) => words.join(", "),
        }
    }

    /// A valid value as override text (the smallest accepted, or the first
    /// choice): lets tests exercise every knob without knowing it.
    pub fn example(&self) -> String {
        match self.kind {
            KnobKind::Size { min, .. } | KnobKind::Count { min, .. } => min.to_string(),
            KnobKind::Share => "0.5".into(),
            KnobKind::Real { min, min_open, max } => fmt_num(if min_open { max / 2.0 } else { min }),
            KnobKind::Choice(words) => words[0].into(),
        }
    }

    /// The declaration as JSON (for `hugescope config --keys` and Python).
    pub fn describe(&self) -> Value {
        serde_json::json!({
            "name": self.name, "type": self.type_name(), "unit": self.unit,
            "default": self.default.map(value_json).unwrap_or(Value::Null), "auto": self.auto,
            "range": self.range_text(), "help": self.help, "example": self.example(),
        })
    }
}

fn value_json(v: KnobValue) -> Value {
    match v {
        KnobValue::Int(n) => Value::from(n),
        KnobValue::Real(x) => Value::from(x),
        KnobValue::Word(w) => Value::from(w),
    }
}

/// The `[os]` section, resolved: one value per knob of `os_knobs()` (None:
/// an optional knob left to `auto`).
#[derive(Clone, Debug, PartialEq)]
pub struct OsSettings {
    values: Vec<Option<KnobValue>>,
}

impl Default for OsSettings {
    fn default() -> Self {
        OsSettings { values: os_knobs().iter().map(|k| k.default).collect() }
    }
}

impl OsSettings {
    /// Set `key` from a value; `origin` says where it came from for the
    /// error ("run.toml", "--set"). Unknown keys list the known ones.
    pub fn set(&mut self, key: &str, v: &Value, origin: &str) -> Result<()> {
        let i = os_knobs().iter().position(|k| k.name == key).ok_or_else(|| {
            let known: Vec<&str> = os_knobs().iter().map(|k| k.name).collect();
            Error::config(format!("{origin}: os.{key}: unknown key; known: {}", known.join(", ")))
        })?;
        let k = &os_knobs()[i];
        self.values[i] = k.parse(v).map_err(|why| Error::config(format!("{origin}: os.{key}={}: {why}", shown(v))))?;
        Ok(())
    }

    /// Set every key of a file's `[os]` table.
    pub fn set_table(&mut self, table: &Map<String, Value>, origin: &str) -> Result<()> {
        for (k, v) in table {
            self.set(k, v, origin)?;
        }
        Ok(())
    }

    pub fn get(&self, key: &str) -> Option<KnobValue> {
        let i = os_knobs().iter().position(|k| k.name == key).expect("a declared OS knob");
        self.values[i]
    }

    fn real(&self, key: &str) -> Option<f64> {
        match self.get(key) {
            Some(KnobValue::Real(x)) => Some(x),
            _ => None,
        }
    }

    fn int(&self, key: &str) -> Option<u64> {
        match self.get(key) {
            Some(KnobValue::Int(n)) => Some(n),
            _ => None,
        }
    }

    /// Checks across knobs, after every source was applied.
    pub fn check(&self, origin: &str) -> Result<()> {
        if let (Some(d), Some(r)) = (self.duration(), self.rate()) {
            return Err(Error::config(format!(
                "{origin}: os.duration={} and os.rate={} both set the virtual time base (rate = accesses / duration); give one of them",
                fmt_num(d),
                fmt_num(r)
            )));
        }
        Ok(())
    }

    /// Virtual seconds the trace spans (`RunOptions::duration_s`).
    pub fn duration(&self) -> Option<f64> {
        self.real("duration")
    }

    /// Accesses per second (`RunOptions::accesses_per_second`).
    pub fn rate(&self) -> Option<f64> {
        self.real("rate")
    }

    /// The kernel's configuration. The time base stays None: duration and
    /// rate reach the run through `RunOptions`, which applies them to every
    /// policy of the run (and knows the trace's length).
    pub fn os_config(&self) -> OsConfig {
        let fragmentation = self.real("frag").map(|x| match self.get("frag_method") {
            Some(KnobValue::Word("ingens")) => {
                Fragmentation::Ingens { fmfi: x, pinned: matches!(self.get("frag_mobility"), Some(KnobValue::Word("unmovable"))) }
            }
            _ => Fragmentation::Pcc { share: x },
        });
        let mut costs = OsCosts::default();
        for &(name, _, _) in OsCosts::KNOBS {
            costs.set(name, self.real(name).expect("every OS cost has a value"));
        }
        OsConfig {
            memory_bytes: self.int("memory"),
            fragmentation,
            budget: self.real("budget"),
            footprint_bytes: self.int("footprint"),
            time: None,
            costs,
            seed: self.int("seed").expect("seed has a default"),
            sample_every: self.int("sample_every").expect("sample_every has a default"),
            daemon: self.daemon_config(),
            tiers: self.tier_config(),
        }
    }

    // memory tiers: the tier knobs as the kernel's configuration.
    fn tier_config(&self) -> TierConfig {
        let real = |key: &str| self.real(key).expect("a tier knob has a default");
        TierConfig {
            fast_bytes: self.int("tier_fast"),
            fast_ns: real("tier_fast_ns"),
            slow_ns: real("tier_slow_ns"),
            bandwidth_gbs: real("tier_bandwidth"),
            remap_us: real("tier_remap_us"),
        }
    }

    // page daemon: the memory-pressure knobs as the kernel's configuration.
    fn daemon_config(&self) -> DaemonConfig {
        let word = |key: &str| match self.get(key) {
            Some(KnobValue::Word(w)) => w,
            _ => "",
        };
        let real = |key: &str| self.real(key).expect("a daemon knob has a default");
        DaemonConfig {
            mode: match word("pagedaemon") {
                "alru" => DaemonMode::Alru,
                "contiguity" => DaemonMode::Contiguity,
                _ => DaemonMode::Off,
            },
            free_min: real("free_min"),
            free_target: real("free_target"),
            spec_demote: real("spec_demote"),
            pagein_us: real("pagein_us"),
            soft_refault_us: real("soft_refault_us"),
            writeback_us: real("writeback_us"),
            wired: match word("wired") {
                "scattered" => WiredMode::Scattered,
                "pooled" => WiredMode::Pooled,
                _ => WiredMode::None,
            },
            wired_rate: real("wired_rate"),
            wired_share: real("wired_share"),
            exit_frees: word("exit_frees") == "true",
        }
    }

    /// Every knob with its value (null: auto), in declaration order.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        for (k, v) in os_knobs().iter().zip(&self.values) {
            m.insert(k.name.to_string(), v.map(value_json).unwrap_or(Value::Null));
        }
        Value::Object(m)
    }

    /// The set knobs as a TOML table (TOML has no null: auto knobs are left
    /// out; integers past i64 are written as text, which `parse` accepts).
    pub fn to_toml(&self) -> toml::Table {
        let mut t = toml::Table::new();
        for (k, v) in os_knobs().iter().zip(&self.values) {
            let tv = match v {
                None => continue,
                Some(KnobValue::Int(n)) => i64::try_from(*n).map(toml::Value::Integer).unwrap_or_else(|_| toml::Value::String(n.to_string())),
                Some(KnobValue::Real(x)) => toml::Value::Float(*x),
                Some(KnobValue::Word(w)) => toml::Value::String(w.to_string()),
            };
            t.insert(k.name.to_string(), tv);
        }
        t
    }
}

/// Parse one OS cost override value (the `--os KEY=US` flag) through its
/// declaration, with the old message shape (`OS cost KEY=VALUE: ...`).
pub fn parse_cost(key: &str, val: &str) -> Result<f64> {
    let k = knob(key).ok_or_else(|| Error::config(format!("unknown OS cost '{key}'")))?;
    match k.parse(&Value::from(val.trim())) {
        Ok(Some(KnobValue::Real(x))) => Ok(x),
        Ok(_) => Err(Error::config(format!("OS cost {key}={val}: not a number of microseconds"))),
        Err(why) => Err(Error::config(format!("OS cost {key}={val}: {why}"))),
    }
}

// Here, not in costs.rs: a cost override is parsed through its knob declaration.
impl OsCosts {
    /// Apply `key=value` overrides (microseconds), e.g. `fault_base_us=2.5`:
    /// the `--os` flag, read through the same knob declarations as `[os]`.
    pub fn with_overrides(&self, overrides: &[String]) -> crate::Result<OsCosts> {
        let mut out = self.clone();
        let mut seen: Vec<&str> = Vec::new();
        for o in overrides {
            let (k, val) = o
                .split_once('=')
                .ok_or_else(|| crate::Error::config(format!("OS cost override '{o}' is not key=value")))?;
            let k = k.trim();
            if seen.contains(&k) {
                return Err(crate::Error::config(format!("OS cost {k} given twice")));
            }
            seen.push(k);
            if out.get(k).is_none() {
                let known: Vec<&str> = Self::KNOBS.iter().map(|c| c.0).collect();
                return Err(crate::Error::config(format!("unknown OS cost '{k}'; known: {}", known.join(", "))));
            }
            let x = parse_cost(k, val)?;
            out.set(k, x);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_give_the_default_os_config() {
        let o = OsSettings::default().os_config();
        let d = OsConfig::default();
        assert_eq!(serde_json::to_string(&o).unwrap(), serde_json::to_string(&d).unwrap());
    }

    #[test]
    fn every_knob_example_is_accepted() {
        for k in os_knobs() {
            let mut s = OsSettings::default();
            s.set(k.name, &Value::from(k.example()), "--set").unwrap_or_else(|e| panic!("{}: {e}", k.name));
        }
    }
}
