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

use crate::units::parse_size;
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
    pub entries: Vec<PlanEntry>,
}

/// Largest plan file read (about 500000 entries of pretty-printed JSON).
pub const MAX_PLAN_BYTES: u64 = 64 << 20;

impl Plan {
    pub fn new(entries: Vec<PlanEntry>) -> Self {
        Plan { version: PLAN_VERSION, entries }
    }

    pub fn load(path: &Path) -> Result<Plan> {
        // Read at most one byte past the cap: a plan is a list of ranges, and
        // a multi-gigabyte "plan" (or /dev/zero) must not be read into memory.
        let mut text = String::new();
        let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        std::io::Read::read_to_string(&mut std::io::Read::take(f, MAX_PLAN_BYTES + 1), &mut text)
            .map_err(|e| Error::io(path, e))?;
        if text.len() as u64 > MAX_PLAN_BYTES {
            return Err(Error::format(path, MAX_PLAN_BYTES, format!("plan file larger than the {MAX_PLAN_BYTES}-byte limit")));
        }
        Plan::parse(&text).map_err(|e| match e {
            Error::Input(msg) => Error::format(path, 0, msg),
            other => other,
        })
    }

    /// Parse and validate a plan. Page sizes must be powers of two, ranges
    /// aligned to their page size, and no two ranges of one pid may overlap.
    pub fn parse(text: &str) -> Result<Plan> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| Error::input(format!("plan is not valid JSON: {e}")))?;
        let (version, list) = match &v {
            Value::Array(list) => (PLAN_VERSION, list.as_slice()),
            Value::Object(map) => {
                let version = map.get("version").and_then(Value::as_u64).unwrap_or(1) as u32;
                if version != PLAN_VERSION {
                    return Err(Error::input(format!(
                        "plan version {version} is not supported (this hugescope reads version {PLAN_VERSION})"
                    )));
                }
                match map.get("entries") {
                    Some(Value::Array(list)) => (version, list.as_slice()),
                    _ => return Err(Error::input("plan object has no \"entries\" list")),
                }
            }
            _ => return Err(Error::input("plan must be a JSON list of entries or an object with \"entries\"")),
        };
        let mut entries = Vec::with_capacity(list.len());
        for (i, e) in list.iter().enumerate() {
            entries.push(parse_entry(e).map_err(|m| Error::input(format!("plan entry {i}: {m}")))?);
        }
        let plan = Plan { version, entries };
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

    /// Total bytes the plan backs with huge pages.
    pub fn bytes(&self) -> u64 {
        self.entries.iter().map(|e| e.length).sum()
    }
}

fn num(v: &Value, what: &str) -> std::result::Result<u64, String> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| format!("{what} must be a non-negative integer, got {n}")),
        Value::String(s) => {
            let t = s.trim();
            if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                u64::from_str_radix(hex, 16).map_err(|_| format!("{what} '{s}' is not a hex number"))
            } else {
                parse_size(t).map_err(|e| format!("{what}: {e}"))
            }
        }
        other => Err(format!("{what} must be a number or string, got {other}")),
    }
}

fn parse_when(v: Option<&Value>) -> std::result::Result<When, String> {
    let Some(v) = v else { return Ok(When::Start) };
    match v {
        Value::Null => Ok(When::Start),
        Value::String(s) if s == "start" => Ok(When::Start),
        Value::String(s) => Ok(When::Progress(s.clone())),
        Value::Object(m) if m.len() == 1 => {
            let (k, x) = m.iter().next().unwrap();
            match k.as_str() {
                "start" => Ok(When::Start),
                "time_s" => x
                    .as_f64()
                    .filter(|t| t.is_finite() && *t >= 0.0)
                    .map(When::TimeS)
                    .ok_or_else(|| "when.time_s must be a non-negative number".into()),
                "accesses" => Ok(When::Accesses(num(x, "when.accesses")?)),
                "progress" => x
                    .as_str()
                    .map(|s| When::Progress(s.to_string()))
                    .ok_or_else(|| "when.progress must be a string".into()),
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
    let label = m
        .get("label")
        .and_then(Value::as_str)
        .ok_or("when.after_marker.label must be a string")?
        .to_string();
    let accesses = num(m.get("accesses").ok_or("when.after_marker: missing 'accesses'")?, "when.after_marker.accesses")?;
    Ok(When::AfterMarker { label, accesses })
}

fn parse_entry(v: &Value) -> std::result::Result<PlanEntry, String> {
    let m = v.as_object().ok_or("an entry must be a JSON object")?;
    for k in m.keys() {
        if !["start", "length", "size", "page_size", "when", "pid", "note"].contains(&k.as_str()) {
            return Err(format!("unknown field '{k}'"));
        }
    }
    let start = num(m.get("start").ok_or("missing 'start'")?, "start")?;
    let length = num(
        m.get("length").or_else(|| m.get("size")).ok_or("missing 'length'")?,
        "length",
    )?;
    let page_size = match m.get("page_size") {
        Some(v) => num(v, "page_size")?,
        None => 2 << 20,
    };
    let pid = match m.get("pid") {
        Some(v) => {
            let p = num(v, "pid")?;
            u16::try_from(p).map_err(|_| format!("pid {p} out of range"))?
        }
        None => 0,
    };
    Ok(PlanEntry {
        start,
        length,
        page_size,
        when: parse_when(m.get("when"))?,
        pid,
        note: m.get("note").and_then(Value::as_str).map(str::to_string),
    })
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
}
