//! Promotion plans: which virtual ranges to back with which page size, and when.
//!
//! One format serves three uses: a static page-size map for a simulation
//! (`--pages plan.json`), the record of what a simulated policy actually did
//! (`--emit-plan`), and the instructions the real-Linux side replays with
//! `MADV_COLLAPSE`. See `docs/plan-format.md`.
//!
//! Accepted JSON: either `{"version": 1, "entries": [...]}` or a bare list of
//! entries. An entry is `{"start": A, "length": L, "page_size": P, "when": W,
//! "pid": N}` where numbers may be integers or strings ("0x7f0000000000",
//! "2MiB"); `size` is accepted for `length`; `when` defaults to "start".

use crate::units::{parse_count, parse_size, whole_value};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;

pub const PLAN_VERSION: u32 = 1;

/// When an entry is to be applied.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum When {
    /// Before the program runs (or as soon as the range is populated).
    Start,
    /// At a virtual time in seconds (simulation) or wall time since start (real runs).
    TimeS(f64),
    /// After this many accesses of the trace.
    Accesses(u64),
    /// At a named progress point of a built-in workload ("level:3", "iter:2").
    Progress(String),
    /// This many accesses after the first time the trace reaches progress
    /// point `label`. What `--emit-plan` records for a promotion a policy made
    /// between two progress points, so that replay acts where the policy did
    /// (a bare `Progress` would act at the marker, earlier). A native run,
    /// which counts no accesses, applies it at the next progress point after
    /// `label`: the nearest point at or after the recorded one.
    AfterMarker { label: String, accesses: u64 },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanEntry {
    pub start: u64,
    pub length: u64,
    pub page_size: u64,
    pub when: When,
    #[serde(default)]
    pub pid: u16,
    /// Which policy decided this entry and anything it wants to note (score, rank).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl PlanEntry {
    pub fn end(&self) -> u64 {
        self.start + self.length
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct Plan {
    pub version: u32,
    /// Where the plan came from and how its times were made (written by
    /// `--emit-plan`; absent in hand-written and older plans).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<PlanHeader>,
    pub entries: Vec<PlanEntry>,
    /// Entries by allocation site rather than address (issue #38): each
    /// applies to the memory a traced program's allocation site returned,
    /// wherever it lands in this run (see `SiteEntry`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sites: Vec<SiteEntry>,
}

/// A plan entry naming an allocation site instead of a range: "back what
/// `site` allocates with `page_size` pages". `site` is an `AllocSite::key`
/// (`trace/import/sites.rs`): function names and source lines of the
/// program's own frames, so it survives a re-link that moves every address.
/// A launched program built with `hugescope cc` reports its allocations;
/// each one of this site becomes a range entry, applied region by region as
/// it is populated. A simulation resolves it against the trace's regions
/// (`Plan::resolve_sites`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SiteEntry {
    pub site: String,
    pub page_size: u64,
    pub when: When,
    #[serde(default)]
    pub pid: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl SiteEntry {
    /// The range entry for one allocation of this site at `[start, end)`:
    /// the whole pages of `page_size` inside it (None when it holds none).
    pub fn range_entry(&self, start: u64, end: u64) -> Option<PlanEntry> {
        let s = start.checked_next_multiple_of(self.page_size)?;
        let e = end / self.page_size * self.page_size;
        (e > s).then(|| self.entry_over(s, e - s))
    }

    /// This entry over `[start, start + length)` as it stands (unaligned,
    /// or empty): what an outcome records for an allocation of this site
    /// that could not be applied.
    pub fn entry_over(&self, start: u64, length: u64) -> PlanEntry {
        PlanEntry {
            start,
            length,
            page_size: self.page_size,
            when: self.when.clone(),
            pid: self.pid,
            note: Some(format!("site {}", self.site)),
        }
    }
}

/// The unit a plan's entries are timed in, chosen for the target that will
/// honour it: the simulator counts accesses, a launched program has a clock,
/// a built-in workload run natively reports progress labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Timing {
    /// As recorded: accesses, progress points and `after_marker` (simulation replay).
    Accesses,
    /// Seconds since launch, converted from access counts at the header's rate.
    Seconds,
    /// The workload progress point at or after each recorded position.
    Progress,
    /// Everything at launch (`"start"`: as soon as the range is populated).
    Start,
}

impl Timing {
    pub fn parse(s: &str) -> Result<Timing> {
        match s {
            "accesses" => Ok(Timing::Accesses),
            "seconds" => Ok(Timing::Seconds),
            "progress" => Ok(Timing::Progress),
            "start" => Ok(Timing::Start),
            other => Err(Error::input(format!("--timing '{other}' is not one of start, seconds, progress, accesses"))),
        }
    }
}

/// The simulator's estimate for the plan, carried in its header so that a
/// native run can print the measured gain beside it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanEstimate {
    /// Base-page cycles / the policy's cycles, OS work on the program's path included.
    #[serde(default)]
    pub speedup_vs_base: Option<f64>,
    /// The same from address translation alone.
    #[serde(default)]
    pub translation_speedup_vs_base: Option<f64>,
    #[serde(default)]
    pub how: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanHeader {
    pub timing: Timing,
    /// The policy that made the plan and the trace it ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// Accesses per second used to turn access counts into seconds, and where it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accesses_per_second: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_source: Option<String>,
    /// Converted times are rounded up to this many seconds (never earlier than recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution_s: Option<f64>,
    /// Entries of the recorded plan before merging.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_entries: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<PlanEstimate>,
}

/// Largest plan file read (about 500000 entries of pretty-printed JSON).
pub const MAX_PLAN_BYTES: u64 = crate::input::MAX_PLAN_BYTES;

impl Plan {
    pub fn new(entries: Vec<PlanEntry>) -> Self {
        Plan { version: PLAN_VERSION, header: None, entries, sites: Vec::new() }
    }

    pub fn load(path: &Path) -> Result<Plan> {
        // A plan is a list of ranges: a multi-gigabyte "plan", a FIFO or
        // /dev/zero is refused before it is read into memory.
        let text = crate::input::read_text(path, "plan", MAX_PLAN_BYTES)?;
        Plan::parse(&text).map_err(|e| match e {
            Error::Input(msg) => Error::format(path, 0, msg),
            other => other,
        })
    }

    /// Parse and validate a plan. Page sizes must be powers of two, ranges
    /// aligned to their page size, and no two ranges of one pid may overlap.
    pub fn parse(text: &str) -> Result<Plan> {
        let v: Value = crate::strict::parse_json(text)
            .map_err(|e| Error::input(format!("plan is not valid JSON: {e}")))?;
        let mut header = None;
        let (version, list) = match &v {
            Value::Array(list) => (PLAN_VERSION, list.as_slice()),
            Value::Object(map) => {
                let version = map.get("version").and_then(Value::as_u64).unwrap_or(1) as u32;
                if version != PLAN_VERSION {
                    return Err(Error::input(format!(
                        "plan version {version} is not supported (this hugescope reads version {PLAN_VERSION})"
                    )));
                }
                // The header only informs (estimate, rate); a malformed one is
                // still refused so that a typo is not silently dropped.
                if let Some(h) = map.get("header") {
                    let h = serde_json::from_value::<PlanHeader>(h.clone())
                        .map_err(|e| Error::input(format!("plan header: {e}")))?;
                    let how = h.estimate.as_ref().map(|e| e.how.as_str());
                    for (what, text) in [("policy", h.policy.as_deref()), ("trace", h.trace.as_deref()),
                                         ("rate_source", h.rate_source.as_deref()), ("estimate.how", how)] {
                        plan_text(text.unwrap_or(""), &format!("header.{what}")).map_err(|e| Error::input(format!("plan {e}")))?;
                    }
                    header = Some(h);
                }
                match (map.get("entries"), map.get("sites")) {
                    (Some(Value::Array(list)), _) => (version, list.as_slice()),
                    // A plan of sites only.
                    (None, Some(Value::Array(_))) => (version, &[][..]),
                    (None, Some(_)) => return Err(Error::input("plan \"sites\" must be a list")),
                    _ => return Err(Error::input("plan object has no \"entries\" list")),
                }
            }
            _ => return Err(Error::input("plan must be a JSON list of entries or an object with \"entries\"")),
        };
        let mut entries = Vec::with_capacity(list.len());
        for (i, e) in list.iter().enumerate() {
            entries.push(parse_entry(e).map_err(|m| Error::input(format!("plan entry {i}: {m}")))?);
        }
        let mut sites = Vec::new();
        if let Some(Value::Object(map)) = Some(&v) {
            match map.get("sites") {
                None => {}
                Some(Value::Array(list)) => {
                    for (i, e) in list.iter().enumerate() {
                        sites.push(parse_site(e).map_err(|m| Error::input(format!("plan site entry {i}: {m}")))?);
                    }
                }
                Some(_) => return Err(Error::input("plan \"sites\" must be a list")),
            }
        }
        let plan = Plan { version, header, entries, sites };
        plan.validate()?;
        Ok(plan)
    }

    pub fn validate(&self) -> Result<()> {
        for (i, e) in self.entries.iter().enumerate() {
            if !e.page_size.is_power_of_two() || e.page_size < 4096 {
                return Err(Error::input(format!(
                    "plan entry {i}: page size {} is not a power of two of at least 4096",
                    e.page_size
                )));
            }
            if e.length == 0 || e.start % e.page_size != 0 || e.length % e.page_size != 0 {
                return Err(Error::input(format!(
                    "plan entry {i}: range {:#x}+{:#x} is empty or not aligned to its page size {:#x}",
                    e.start, e.length, e.page_size
                )));
            }
            if e.start.checked_add(e.length).is_none() {
                return Err(Error::input(format!("plan entry {i}: range overflows the address space")));
            }
        }
        let mut sorted: Vec<&PlanEntry> = self.entries.iter().collect();
        sorted.sort_by_key(|e| (e.pid, e.start));
        for w in sorted.windows(2) {
            if w[0].pid == w[1].pid && w[1].start < w[0].end() && w[0].when == w[1].when {
                return Err(Error::input(format!(
                    "plan ranges {:#x}+{:#x} and {:#x}+{:#x} overlap",
                    w[0].start, w[0].length, w[1].start, w[1].length
                )));
            }
        }
        Ok(())
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("plans always serialize")
    }

    /// The plan as a person reads and edits it: addresses and lengths as hex
    /// strings, which line up with `/proc/PID/maps` (the parser reads them
    /// back exactly); the page size stays a number, the one field tools
    /// compare arithmetically.
    pub fn to_json_hex(&self) -> String {
        let hex = |n: u64| Value::String(format!("{n:#x}"));
        let entries: Vec<Value> = self
            .entries
            .iter()
            .map(|e| {
                let mut m = serde_json::Map::new();
                m.insert("start".into(), hex(e.start));
                m.insert("length".into(), hex(e.length));
                m.insert("page_size".into(), e.page_size.into());
                m.insert("when".into(), serde_json::to_value(&e.when).expect("when serializes"));
                m.insert("pid".into(), e.pid.into());
                if let Some(n) = &e.note {
                    m.insert("note".into(), n.clone().into());
                }
                Value::Object(m)
            })
            .collect();
        let mut top = serde_json::Map::new();
        top.insert("version".into(), self.version.into());
        if let Some(h) = &self.header {
            top.insert("header".into(), serde_json::to_value(h).expect("headers serialize"));
        }
        top.insert("entries".into(), Value::Array(entries));
        if !self.sites.is_empty() {
            top.insert("sites".into(), serde_json::to_value(&self.sites).expect("site entries serialize"));
        }
        serde_json::to_string_pretty(&Value::Object(top)).expect("plans always serialize")
    }

    /// Total bytes the plan backs with huge pages.
    pub fn bytes(&self) -> u64 {
        self.entries.iter().map(|e| e.length).sum()
    }
}

/// An address, length or page size (`sized`: text with binary suffixes) or an
/// access count (decimal suffixes, as every count): read by the one reader of
/// sizes and counts (`units::whole_value`), so a plan accepts what `--set`
/// and the command line do.
fn num(v: &Value, what: &str, sized: bool) -> std::result::Result<u64, String> {
    match v {
        Value::Number(n) => whole_value(v, sized).ok_or_else(|| format!("{what} must be a non-negative integer, got {n}")),
        Value::String(s) => {
            let t = s.trim();
            if sized { parse_size(t) } else { parse_count(t) }.map_err(|e| format!("{what}: {e}"))
        }
        other => Err(format!("{what} must be a number or string, got {}", crate::error::shown(&other.to_string(), 80))),
    }
}

fn parse_when(v: Option<&Value>) -> std::result::Result<When, String> {
    let Some(v) = v else { return Ok(When::Start) };
    match v {
        Value::Null => Ok(When::Start),
        Value::String(s) if s == "start" => Ok(When::Start),
        Value::String(s) => Ok(When::Progress(plan_text(s, "when")?)),
        Value::Object(m) if m.len() == 1 => {
            let (k, x) = m.iter().next().unwrap();
            match k.as_str() {
                "start" => Ok(When::Start),
                "time_s" => x
                    .as_f64()
                    .filter(|t| t.is_finite() && *t >= 0.0)
                    .map(When::TimeS)
                    .ok_or_else(|| "when.time_s must be a non-negative number".into()),
                "accesses" => Ok(When::Accesses(num(x, "when.accesses", false)?)),
                "progress" => match x.as_str() {
                    Some(s) => Ok(When::Progress(plan_text(s, "when.progress")?)),
                    None => Err("when.progress must be a string".into()),
                },
                "after_marker" => parse_after_marker(x),
                other => Err(format!("unknown 'when' kind '{other}' (start, time_s, accesses, progress, after_marker)")),
            }
        }
        other => Err(format!("cannot read 'when' from {other}")),
    }
}

/// `{"label": "level:3", "accesses": N}`: both fields required, no others.
fn parse_after_marker(x: &Value) -> std::result::Result<When, String> {
    let m = x.as_object().ok_or("when.after_marker must be an object {\"label\": ..., \"accesses\": ...}")?;
    if let Some(k) = m.keys().find(|k| !["label", "accesses"].contains(&k.as_str())) {
        return Err(format!("when.after_marker: unknown field '{k}' (label, accesses)"));
    }
    let label = plan_text(
        m.get("label").and_then(Value::as_str).ok_or("when.after_marker.label must be a string")?,
        "when.after_marker.label",
    )?;
    let accesses = num(m.get("accesses").ok_or("when.after_marker: missing 'accesses'")?, "when.after_marker.accesses", false)?;
    Ok(When::AfterMarker { label, accesses })
}

/// An entry's `page_size` (default 2 MiB), as range and site entries read it.
fn page_size_of(m: &serde_json::Map<String, Value>) -> std::result::Result<u64, String> {
    match m.get("page_size") {
        Some(v) => num(v, "page_size", true),
        None => Ok(2 << 20),
    }
}

/// An entry's `pid` (default 0).
fn pid_of(m: &serde_json::Map<String, Value>) -> std::result::Result<u16, String> {
    match m.get("pid") {
        Some(v) => {
            let p = num(v, "pid", false)?;
            u16::try_from(p).map_err(|_| format!("pid {p} out of range"))
        }
        None => Ok(0),
    }
}

fn parse_site(v: &Value) -> std::result::Result<SiteEntry, String> {
    let m = v.as_object().ok_or("a site entry must be a JSON object")?;
    for k in m.keys() {
        if !["site", "page_size", "when", "pid", "note"].contains(&k.as_str()) {
            return Err(format!("unknown field '{k}'"));
        }
    }
    let site = m.get("site").and_then(Value::as_str).ok_or("missing 'site' (an allocation site's key, text)")?;
    if site.trim().is_empty() {
        return Err("'site' is empty".into());
    }
    let page_size = page_size_of(m)?;
    if !page_size.is_power_of_two() || page_size < 4096 {
        return Err(format!("page size {page_size} is not a power of two of at least 4096"));
    }
    let pid = pid_of(m)?;
    Ok(SiteEntry {
        site: plan_text(site, "site")?,
        page_size,
        when: parse_when(m.get("when"))?,
        pid,
        note: m.get("note").and_then(Value::as_str).map(|n| plan_text(n, "note")).transpose()?,
    })
}

fn parse_entry(v: &Value) -> std::result::Result<PlanEntry, String> {
    let m = v.as_object().ok_or("an entry must be a JSON object")?;
    for k in m.keys() {
        if !["start", "length", "size", "page_size", "when", "pid", "note"].contains(&k.as_str()) {
            return Err(format!("unknown field '{k}'"));
        }
    }
    let start = num(m.get("start").ok_or("missing 'start'")?, "start", true)?;
    let length = num(
        m.get("length").or_else(|| m.get("size")).ok_or("missing 'length'")?,
        "length",
        true,
    )?;
    let page_size = page_size_of(m)?;
    let pid = pid_of(m)?;
    Ok(PlanEntry {
        start,
        length,
        page_size,
        when: parse_when(m.get("when"))?,
        pid,
        note: m.get("note").and_then(Value::as_str).map(|n| plan_text(n, "note")).transpose()?,
    })
}

/// Longest text a plan carries (a progress label, a note, a header field):
/// the real ones are a few words. A 10 MB label used to be printed into the
/// run's table, which then spun for minutes after the result was written.
pub const MAX_PLAN_TEXT_BYTES: usize = crate::limits::MAX_NAME_BYTES;

/// A plan's text field, refused past `MAX_PLAN_TEXT_BYTES`.
fn plan_text(s: &str, what: &str) -> std::result::Result<String, String> {
    if s.len() > MAX_PLAN_TEXT_BYTES {
        return Err(format!("{what} is {} bytes long, more than the {MAX_PLAN_TEXT_BYTES} a plan's text may be", s.len()));
    }
    Ok(s.to_string())
}


/// Round converted times up to this (seconds): entries recorded within one
/// step come due together and merge, and none is applied before its access.
pub const SECONDS_RESOLUTION: f64 = 0.001;

/// What the recorded plan's access positions are measured against: the
/// trace's progress markers (first occurrence of each label) and its rate.
pub struct Timeline<'a> {
    /// `(access index, label)` in trace order.
    pub markers: &'a [(u64, String)],
    /// Accesses per second, for `Timing::Seconds`.
    pub accesses_per_second: Option<f64>,
}

impl Timeline<'_> {
    fn first(&self, label: &str) -> Option<u64> {
        self.markers.iter().find(|(_, l)| l == label).map(|(i, _)| *i)
    }

    /// The access at which a recorded entry acted (the simulator's clock).
    fn position(&self, w: &When) -> std::result::Result<u64, String> {
        match w {
            When::Start => Ok(0),
            When::Accesses(n) => Ok(*n),
            When::Progress(l) => self.first(l).ok_or_else(|| format!("progress point '{l}' is not in the trace")),
            When::AfterMarker { label, accesses } => self
                .first(label)
                .map(|i| i.saturating_add(*accesses))
                .ok_or_else(|| format!("progress point '{label}' is not in the trace")),
            When::TimeS(_) => Err("a time_s entry has no access position".into()),
        }
    }

    /// `w` in the unit of `timing`.
    fn retime(&self, w: &When, timing: Timing) -> std::result::Result<When, String> {
        if matches!(w, When::TimeS(_)) || timing == Timing::Accesses {
            return Ok(w.clone());
        }
        let at = self.position(w)?;
        Ok(match timing {
            Timing::Accesses => unreachable!("returned above"),
            Timing::Start => When::Start,
            _ if at == 0 => When::Start,
            Timing::Seconds => {
                let rate = self.accesses_per_second.ok_or("no access rate to convert accesses to seconds")?;
                let steps = (at as f64 / rate / SECONDS_RESOLUTION).ceil();
                // Printed with the resolution's digits, so 0.1 is written 0.1.
                When::TimeS((steps * SECONDS_RESOLUTION * 1e3).round() / 1e3)
            }
            // The nearest point at or after the recorded one, never earlier
            // (a native run has no finer clock than its progress points).
            Timing::Progress => match w {
                When::Progress(l) => When::Progress(l.clone()),
                _ => match self.markers.iter().find(|(i, _)| *i >= at) {
                    Some((_, l)) => When::Progress(l.clone()),
                    None => return Err(format!("no progress point at or after access {at}")),
                },
            },
        })
    }
}

impl Plan {
    /// The recorded plan retimed for a target (`timing`) and merged
    /// (`merged`). Entries that cannot be placed in the unit are an error
    /// naming the entry.
    pub fn retimed(&self, timing: Timing, timeline: &Timeline) -> Result<Plan> {
        let mut entries = Vec::with_capacity(self.entries.len());
        for (i, e) in self.entries.iter().enumerate() {
            let when = timeline.retime(&e.when, timing).map_err(|m| Error::input(format!("plan entry {i}: {m}")))?;
            entries.push(PlanEntry { when, ..e.clone() });
        }
        Ok(Plan { entries, ..self.clone() }.merged())
    }

    /// Entries of one pid, page size and time that touch or overlap become
    /// one (their union): one collapse call instead of one per 2MB region,
    /// and a range promoted twice at the same time (after retiming to
    /// `start`, say) is listed once. Groups keep the order in which their
    /// first entry was recorded (the order of the policy's decisions); inside
    /// a group, entries go by address.
    pub fn merged(&self) -> Plan {
        // `When` holds an f64 and so no Hash: its JSON text is the key.
        let mut index: std::collections::HashMap<(u16, u64, String), usize> = std::collections::HashMap::new();
        let mut groups: Vec<Vec<&PlanEntry>> = Vec::new();
        for e in &self.entries {
            let key = (e.pid, e.page_size, serde_json::to_string(&e.when).expect("when serializes"));
            let g = *index.entry(key).or_insert_with(|| {
                groups.push(Vec::new());
                groups.len() - 1
            });
            groups[g].push(e);
        }
        let mut entries = Vec::new();
        for mut v in groups {
            v.sort_by_key(|e| e.start);
            let mut cur: Option<(PlanEntry, usize)> = None;
            for e in v {
                match &mut cur {
                    Some((c, n)) if e.start <= c.end() => {
                        let end = c.end().max(e.end());
                        c.length = end - c.start;
                        *n += 1;
                        if c.note != e.note {
                            c.note = None;
                        }
                    }
                    _ => {
                        entries.extend(cur.take().map(|(c, n)| merged_note(c, n)));
                        cur = Some((e.clone(), 1));
                    }
                }
            }
            entries.extend(cur.map(|(c, n)| merged_note(c, n)));
        }
        Plan { entries, ..self.clone() }
    }
}

/// What `--emit-plan` knows besides the recorded entries.
#[derive(Clone, Debug, Default)]
pub struct EmitOptions {
    /// The trace the plan was recorded on (markers and rate; needed for
    /// `seconds` and `progress`).
    pub trace: Option<std::path::PathBuf>,
    /// `--rate` of the simulation, else `--duration` (rate = accesses / duration),
    /// else the trace header's rate.
    pub accesses_per_second: Option<f64>,
    pub duration_s: Option<f64>,
    pub policy: Option<String>,
    pub estimate: Option<PlanEstimate>,
}

/// The plan `--emit-plan` writes: the simulator's record retimed for the
/// target, merged, with a header that says how its times were made.
pub fn emit(recorded: &Plan, timing: Timing, o: &EmitOptions) -> Result<Plan> {
    let mut markers = Vec::new();
    let mut rate = None;
    let reader = o.trace.as_ref().map(crate::trace::hst::HstReader::open).transpose()?;
    if matches!(timing, Timing::Seconds | Timing::Progress) {
        let (path, r) = o.trace.as_ref().zip(reader.as_ref()).ok_or_else(|| Error::input("--timing seconds and progress need the trace the plan was recorded on"))?;
        // First occurrence of each label: what the simulator's replay arms on.
        for m in r.markers() {
            if !markers.iter().any(|(_, l): &(u64, String)| *l == m.label) {
                markers.push((m.index, m.label.clone()));
            }
        }
        let accesses = r.summary().map(|s| s.accesses);
        rate = match (o.accesses_per_second, o.duration_s, r.header().accesses_per_second, accesses) {
            (Some(x), _, _, _) => Some((x, "--rate of the simulation")),
            (None, Some(d), _, Some(n)) if d > 0.0 => Some((n as f64 / d, "the trace's accesses / --duration of the simulation")),
            (None, _, Some(x), _) if x > 0.0 => Some((x, "the trace header's accesses_per_second")),
            _ => None,
        };
        if timing == Timing::Seconds && rate.is_none() {
            return Err(Error::input(format!(
                "--timing seconds needs an access rate: the trace {} has none in its header; give --rate or --duration",
                path.display())));
        }
    }
    let timeline = Timeline { markers: &markers, accesses_per_second: rate.map(|r| r.0) };
    let mut plan = recorded.retimed(timing, &timeline)?;
    if let Some(r) = &reader {
        name_regions(&mut plan, &r.header().regions);
    }
    let seconds = timing == Timing::Seconds;
    plan.header = Some(PlanHeader {
        timing,
        policy: o.policy.clone(),
        trace: o.trace.as_ref().map(|p| p.display().to_string()),
        accesses_per_second: rate.filter(|_| seconds).map(|r| r.0),
        rate_source: rate.filter(|_| seconds).map(|r| r.1.to_string()),
        resolution_s: seconds.then_some(SECONDS_RESOLUTION),
        recorded_entries: Some(recorded.entries.len()),
        estimate: o.estimate.clone(),
    });
    Ok(plan)
}

/// Each entry's note names the trace regions it lies in (issue #38: the
/// engineer reads which allocation a plan promotes), after what the policy
/// noted.
fn name_regions(plan: &mut Plan, regions: &[crate::trace::Region]) {
    let index = crate::region_index::RegionIndex::new(regions);
    for e in plan.entries.iter_mut() {
        if let Some(names) = index.describe(regions, e.pid, e.start, e.end()) {
            e.note = Some(match e.note.take() {
                Some(n) => format!("{n}; {names}"),
                None => names,
            });
        }
    }
}

/// A merged entry keeps its note when all its parts had the same one, else
/// says how many recorded entries it stands for.
fn merged_note(mut e: PlanEntry, parts: usize) -> PlanEntry {
    if parts > 1 && e.note.is_none() {
        e.note = Some(format!("{parts} recorded entries merged"));
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bare_list_with_strings() {
        let p = Plan::parse(r#"[{"start":"0x200000","size":"4MiB","page_size":"2MiB"}]"#).unwrap();
        assert_eq!(p.entries[0].start, 0x200000);
        assert_eq!(p.entries[0].length, 4 << 20);
        assert_eq!(p.entries[0].when, When::Start);
    }

    #[test]
    fn roundtrip() {
        let p = Plan::new(vec![PlanEntry {
            start: 1 << 30,
            length: 2 << 20,
            page_size: 2 << 20,
            when: When::Accesses(1000),
            pid: 1,
            note: Some("pcc".into()),
        }]);
        assert_eq!(Plan::parse(&p.to_json()).unwrap(), p);
    }

    #[test]
    fn after_marker_roundtrips_and_rejects_bad_fields() {
        let p = Plan::new(vec![PlanEntry {
            start: 1 << 30,
            length: 2 << 20,
            page_size: 2 << 20,
            when: When::AfterMarker { label: "level:3".into(), accesses: 4096 },
            pid: 0,
            note: None,
        }]);
        let text = p.to_json();
        assert!(text.contains("\"after_marker\""), "{text}");
        assert_eq!(Plan::parse(&text).unwrap(), p);
        let e = |w: &str| Plan::parse(&format!(r#"[{{"start":0,"length":2097152,"when":{w}}}]"#));
        assert!(e(r#"{"after_marker":{"label":"a","accesses":"0x10"}}"#).is_ok());
        for bad in [
            r#"{"after_marker":{"label":"a"}}"#,
            r#"{"after_marker":{"accesses":3}}"#,
            r#"{"after_marker":{"label":1,"accesses":3}}"#,
            r#"{"after_marker":{"label":"a","accesses":-1}}"#,
            r#"{"after_marker":{"label":"a","accesses":3,"x":1}}"#,
            r#"{"after_marker":"a"}"#,
        ] {
            let err = e(bad).unwrap_err().to_string();
            assert!(err.contains("after_marker"), "{bad}: {err}");
        }
    }

    #[test]
    fn rejects_misaligned_and_overlap_and_unknown() {
        assert!(Plan::parse(r#"[{"start":4096,"length":2097152}]"#).is_err());
        assert!(Plan::parse(r#"[{"start":0,"length":4194304},{"start":2097152,"length":2097152}]"#).is_err());
        assert!(Plan::parse(r#"[{"start":0,"length":2097152,"colour":1}]"#).is_err());
        assert!(Plan::parse(r#"{"version":9,"entries":[]}"#).is_err());
        assert!(Plan::parse("nope").is_err());
    }

    fn e2(start: u64, when: When) -> PlanEntry {
        PlanEntry { start, length: 2 << 20, page_size: 2 << 20, when, pid: 0, note: Some("pcc".into()) }
    }

    #[test]
    fn adjacent_regions_at_one_time_merge_and_others_do_not() {
        let m = 2u64 << 20;
        let p = Plan::new(vec![
            e2(4 * m, When::Start),
            e2(0, When::Start),
            e2(m, When::Start),
            e2(2 * m, When::Accesses(7)),
            e2(3 * m, When::Accesses(8)),
            // The same region twice at one time (after retiming): listed once.
            e2(m, When::Start),
        ])
        .merged();
        let got: Vec<(u64, u64)> = p.entries.iter().map(|e| (e.start, e.length)).collect();
        assert_eq!(got, vec![(0, 2 * m), (4 * m, m), (2 * m, m), (3 * m, m)]);
        assert_eq!(p.entries[0].note.as_deref(), Some("pcc"));
        p.validate().unwrap();
    }

    #[test]
    fn retiming_converts_positions_and_never_moves_earlier() {
        let m = 2u64 << 20;
        let markers = vec![(1000, "level:1".to_string()), (5000, "level:2".to_string())];
        let tl = Timeline { markers: &markers, accesses_per_second: Some(1000.0) };
        let p = Plan::new(vec![
            e2(0, When::Start),
            e2(m, When::Accesses(1500)),
            e2(2 * m, When::Progress("level:1".into())),
            e2(3 * m, When::AfterMarker { label: "level:1".into(), accesses: 1 }),
        ]);
        let s = p.retimed(Timing::Seconds, &tl).unwrap();
        let whens: Vec<When> = s.entries.iter().map(|e| e.when.clone()).collect();
        assert_eq!(whens, vec![When::Start, When::TimeS(1.5), When::TimeS(1.0), When::TimeS(1.001)]);
        let g = p.retimed(Timing::Progress, &tl).unwrap();
        let whens: Vec<When> = g.entries.iter().map(|e| e.when.clone()).collect();
        // Grouped by time in order of first decision: both level:2 entries
        // (not adjacent, so not merged), then level:1.
        assert_eq!(whens, vec![When::Start, When::Progress("level:2".into()), When::Progress("level:2".into()),
                               When::Progress("level:1".into())]);
        let st = p.retimed(Timing::Start, &tl).unwrap();
        assert_eq!(st.entries.len(), 1);
        assert_eq!((st.entries[0].start, st.entries[0].length), (0, 4 * m));
        assert_eq!(p.retimed(Timing::Accesses, &tl).unwrap().entries.len(), 4);
        let no_rate = Timeline { markers: &markers, accesses_per_second: None };
        assert!(p.retimed(Timing::Seconds, &no_rate).unwrap_err().to_string().contains("entry 1"));
        let late = Plan::new(vec![e2(0, When::Accesses(9000))]);
        assert!(late.retimed(Timing::Progress, &tl).unwrap_err().to_string().contains("no progress point"));
    }

    #[test]
    fn hex_plans_with_a_header_read_back_and_old_plans_still_load() {
        let mut p = Plan::new(vec![e2(0x7f00_0000_0000, When::TimeS(0.25))]);
        p.header = Some(PlanHeader {
            timing: Timing::Seconds, policy: Some("pcc".into()), trace: None, accesses_per_second: Some(1e6),
            rate_source: Some("trace header".into()), resolution_s: Some(SECONDS_RESOLUTION), recorded_entries: Some(1),
            estimate: Some(PlanEstimate { speedup_vs_base: Some(1.2), translation_speedup_vs_base: None, how: "x".into() }),
        });
        let text = p.to_json_hex();
        assert!(text.contains("\"0x7f0000000000\"") && text.contains("\"0x200000\"") && text.contains("2097152"), "{text}");
        assert_eq!(Plan::parse(&text).unwrap(), p);
        // A version-1 plan of before headers (decimal numbers) reads as it did.
        let old = Plan::parse(r#"{"version": 1, "entries": [{"start": 2097152, "length": 2097152, "page_size": 2097152, "when": {"accesses": 3}, "pid": 0}]}"#).unwrap();
        assert!(old.header.is_none() && old.entries[0].when == When::Accesses(3));
        assert!(Plan::parse(r#"{"version": 1, "header": {"timing": "weekly"}, "entries": []}"#).unwrap_err().to_string().contains("plan header"));
    }

    /// Issue #31: a 10 MB label, a key given twice and a long value in an
    /// error; each is one short error.
    #[test]
    fn long_texts_and_duplicate_keys_are_refused_with_a_short_message() {
        let big = "x".repeat(10 << 20);
        for when in [format!(r#""{big}""#), format!(r#"{{"progress": "{big}"}}"#),
                     format!(r#"{{"after_marker": {{"label": "{big}", "accesses": 1}}}}"#)] {
            let e = Plan::parse(&format!(r#"[{{"start": 0, "length": 2097152, "when": {when}}}]"#)).unwrap_err().to_string();
            assert!(e.contains("10485760 bytes long") && e.len() < 600, "{}", &e[..200.min(e.len())]);
        }
        let e = Plan::parse(&format!(r#"[{{"start": 0, "length": 2097152, "note": "{big}"}}]"#)).unwrap_err();
        assert!(e.to_string().contains("note is 10485760 bytes"));
        let e = Plan::parse(&format!(r#"{{"version": 1, "header": {{"timing": "start", "policy": "{big}"}}, "entries": []}}"#));
        assert!(e.unwrap_err().to_string().contains("header.policy"));
        let ok = "y".repeat(MAX_PLAN_TEXT_BYTES);
        assert!(Plan::parse(&format!(r#"[{{"start": 0, "length": 2097152, "note": "{ok}"}}]"#)).is_ok());
        let e = Plan::parse(r#"[{"start": 0, "length": 2097152, "length": 4194304}]"#).unwrap_err().to_string();
        assert!(e.contains("\"length\" given twice"), "{e}");
        let e = Plan::parse(&format!(r#"[{{"start": "{big}", "length": 2097152}}]"#)).unwrap_err().to_string();
        assert!(e.len() < 600, "{}", e.len());
    }
}
