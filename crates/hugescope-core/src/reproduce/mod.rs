//! Reproduction tables: each quantitative result of a paper beside
//! hugescope's value, with a verdict computed here and nowhere else
//! (issue #33; `docs/reproduction.md`).
//!
//! The paper's side is data (`paper.rs`, `papers/*.toml`). hugescope's side
//! is a [`Measured`] per row, filled by whoever ran the studies (the Python
//! `hugescope.reproduce` package): one value per seed, the sources of the
//! inputs, the command that regenerates it, and optionally a reason the row
//! is an input or was not attempted. [`evaluate`] joins the two and judges
//! every row:
//!
//! 1. *input*: the paper's number (or the table it stands in) was used to
//!    set a parameter of the run. Such a row is never *reproduced*, however
//!    close its value.
//! 2. *not attempted*: no value, with the reason.
//! 3. *reproduced*: the mean over seeds is within the row's tolerance rule
//!    (`rule.rs`; the default for a speedup or overhead: its gain within 25%,
//!    or 2 points under 10%).
//! 4. *shape*: outside the tolerance (or an ordering row, which has no
//!    magnitude), but the row's ordering holds with a margin larger than the
//!    seed spread over at least 3 seeds, and larger than the row's
//!    resolution (0.02 of a speedup, 2 points of a percentage; `order.rs`).
//! 5. *not reproduced*: neither.
//!
//! An ordering row whose seeded values come from fewer than 3 seeds cannot
//! be judged, and is *not attempted* with that reason.

pub mod order;
pub mod paper;
pub mod rule;

use order::{resolution, stats, Against, Shape, MIN_SEEDS};
pub use paper::{load, PaperFile, PaperRow, PaperValue, PaperWorkload, PAPERS};
use rule::{fmt_num, Rule};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::{Error, Result};

/// The scale a reproduction runs at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// Footprints that finish in minutes (tests, the demo).
    Ci,
    /// The paper's footprints and run lengths.
    Paper,
}

impl Scale {
    pub fn parse(s: &str) -> Result<Scale> {
        match s {
            "ci" => Ok(Scale::Ci),
            "paper" => Ok(Scale::Paper),
            _ => Err(Error::input(format!("scale '{s}': not one of ci, paper"))),
        }
    }
}

/// The verdict of one row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    #[serde(rename = "reproduced")]
    Reproduced,
    #[serde(rename = "shape")]
    Shape,
    #[serde(rename = "not reproduced")]
    NotReproduced,
    #[serde(rename = "input")]
    Input,
    #[serde(rename = "not attempted")]
    NotAttempted,
}

impl Verdict {
    pub const ALL: [Verdict; 5] =
        [Verdict::Reproduced, Verdict::Shape, Verdict::NotReproduced, Verdict::Input, Verdict::NotAttempted];

    pub fn name(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::Shape => "shape",
            Verdict::NotReproduced => "not reproduced",
            Verdict::Input => "input",
            Verdict::NotAttempted => "not attempted",
        }
    }
}

/// hugescope's side of one row.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Measured {
    /// The row's id in the paper's data.
    pub id: String,
    /// One value per seed (one value for a deterministic quantity).
    #[serde(default)]
    pub values: Vec<f64>,
    /// The workload seeds behind `values` (empty: the value has no seed).
    #[serde(default)]
    pub seeds: Vec<u64>,
    /// The compared series of an `order = "> other"` row, per seed.
    #[serde(default)]
    pub other: Vec<f64>,
    /// What `other` is ("hawkeye at 4%").
    #[serde(default)]
    pub other_label: Option<String>,
    /// Where each input of the run comes from (workload parameters, machine,
    /// cost constants).
    #[serde(default)]
    pub sources: String,
    /// The command that regenerates the row.
    #[serde(default)]
    pub command: String,
    /// The run set a parameter from this number (the row is *input*).
    #[serde(default)]
    pub input: Option<String>,
    /// Why the row was not attempted by this run.
    #[serde(default)]
    pub not_attempted: Option<String>,
    /// Evidence for the verdict: counters, geometry, what the paper's machine had.
    #[serde(default)]
    pub note: Option<String>,
}

/// One row of the reproduction table: the paper's number, hugescope's, the
/// rule and the verdict.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub paper: String,
    pub id: String,
    /// Figure or table ("Fig. 5", "Table 4", "text").
    pub figure: String,
    pub section: String,
    pub series: String,
    pub metric: String,
    pub unit: String,
    /// The paper's value as a number, or its range's ends.
    pub paper_value: Option<f64>,
    pub paper_lo: Option<f64>,
    pub paper_hi: Option<f64>,
    /// The paper's value as the table shows it.
    pub paper_text: String,
    /// The mean over seeds, and its range.
    pub value: Option<f64>,
    pub value_min: Option<f64>,
    pub value_max: Option<f64>,
    /// Values behind the mean (seeds, or 1 for a deterministic value).
    pub n: usize,
    pub seeds: Vec<u64>,
    pub values: Vec<f64>,
    /// hugescope's value as the table shows it, with its spread.
    pub value_text: String,
    pub tolerance: String,
    /// The interval the rule accepts (bounds: one end infinite; None for orderings).
    pub accepted_lo: Option<f64>,
    pub accepted_hi: Option<f64>,
    pub verdict: Verdict,
    /// Why the verdict: the comparison the code made.
    pub reason: String,
    /// Evidence from the run (counters, geometry) for the verdict.
    pub note: String,
    pub reading: String,
    pub quote: String,
    /// Where each input came from.
    pub sources: String,
    pub command: String,
    pub scale: Scale,
}

/// A value with its row's unit.
pub fn with_unit(v: f64, unit: &str) -> String {
    match unit {
        "x" => format!("{}x", fmt_num(v)),
        "%" => format!("{}%", fmt_num(v)),
        "" => fmt_num(v),
        u => format!("{} {u}", fmt_num(v)),
    }
}

fn paper_text(r: &PaperRow) -> String {
    if let Some(s) = &r.shown {
        return s.clone();
    }
    match &r.paper {
        PaperValue::Number(v) => with_unit(*v, &r.unit),
        PaperValue::Range([lo, hi]) => format!("{}..{}", fmt_num(*lo), with_unit(*hi, &r.unit)),
        PaperValue::Text(t) => t.clone(),
    }
}

fn value_text(values: &[f64], seeded: bool, unit: &str) -> String {
    if values.is_empty() {
        return "-".into();
    }
    let (mean, min, max) = stats(values);
    if !seeded {
        return with_unit(mean, unit);
    }
    if values.len() == 1 {
        return format!("{} (1 seed)", with_unit(mean, unit));
    }
    format!("{} ({}..{}, {} seeds)", with_unit(mean, unit), fmt_num(min), fmt_num(max), values.len())
}

/// Why a row has no value: the data's own reason, the run's, or at paper
/// scale what the paper-scale work still needs.
fn missing_reason(file: &PaperFile, r: &PaperRow, m: Option<&Measured>, scale: Scale) -> String {
    if let Some(why) = m.and_then(|m| m.not_attempted.clone()) {
        return why;
    }
    if scale == Scale::Paper {
        let mut why = "paper scale not run yet".to_string();
        if let Some(w) = r.workload.as_deref().and_then(|w| file.workload(w)) {
            why += &format!(": {} ({}; footprint {}) needs {}", w.paper_name, w.input, w.footprint, w.needs);
        }
        if let Some(extra) = &r.paper_scale {
            why += if r.workload.is_some() { "; " } else { ": " };
            why += extra;
        }
        return why;
    }
    "this run measured no value for the row".into()
}

/// The reference values of a row's ordering, and their name.
fn reference(order: &order::Order, m: &Measured, by_id: &BTreeMap<&str, &Measured>, rows: &BTreeMap<&str, &PaperRow>)
             -> Option<(Vec<f64>, bool, String)> {
    match &order.against {
        Against::Constant(c) => Some((vec![*c], false, fmt_num(*c))),
        Against::Other => (!m.other.is_empty())
            .then(|| (m.other.clone(), !m.seeds.is_empty(), m.other_label.clone().unwrap_or_else(|| "the other series".into()))),
        Against::Row(id) => {
            let o = by_id.get(id.as_str())?;
            (!o.values.is_empty()).then(|| {
                let name = rows.get(id.as_str()).map(|r| r.series.clone()).unwrap_or_else(|| id.clone());
                (o.values.clone(), !o.seeds.is_empty(), format!("{name} ({id})"))
            })
        }
    }
}

/// Join a paper's rows with hugescope's measurements and judge each one.
/// Every measurement must name a row of the paper, once; values must be
/// finite. Rows without a measurement are *not attempted*.
pub fn evaluate(file: &PaperFile, scale: Scale, measured: &[Measured]) -> Result<Vec<Row>> {
    let rows: BTreeMap<&str, &PaperRow> = file.row.iter().map(|r| (r.id.as_str(), r)).collect();
    let mut by_id: BTreeMap<&str, &Measured> = BTreeMap::new();
    for m in measured {
        if !rows.contains_key(m.id.as_str()) {
            return Err(Error::input(format!("{}: measurement for '{}', which is not a row of the paper", file.paper, m.id)));
        }
        if by_id.insert(m.id.as_str(), m).is_some() {
            return Err(Error::input(format!("{}: row '{}' measured twice", file.paper, m.id)));
        }
        if m.values.iter().chain(&m.other).any(|v| !v.is_finite()) {
            return Err(Error::input(format!("{}: row '{}': a value is not a finite number", file.paper, m.id)));
        }
        if !m.seeds.is_empty() && m.seeds.len() != m.values.len() {
            return Err(Error::input(format!("{}: row '{}': {} values for {} seeds", file.paper, m.id, m.values.len(),
                                            m.seeds.len())));
        }
    }
    file.row.iter().map(|r| judge(file, r, by_id.get(r.id.as_str()).copied(), &by_id, &rows, scale)).collect()
}

fn judge(file: &PaperFile, r: &PaperRow, m: Option<&Measured>, by_id: &BTreeMap<&str, &Measured>,
         rows: &BTreeMap<&str, &PaperRow>, scale: Scale) -> Result<Row> {
    let rule = r.rule()?;
    let order = r.order()?;
    let span = r.paper.span();
    let accepted = span.and_then(|s| rule.accepted(s));
    let values = m.map(|m| m.values.clone()).unwrap_or_default();
    let seeded = m.is_some_and(|m| !m.seeds.is_empty());
    let (verdict, reason) = if let Some(why) = r.input.clone().or_else(|| m.and_then(|m| m.input.clone())) {
        (Verdict::Input, format!("input: {why}"))
    } else if let Some(why) = &r.not_attempted {
        (Verdict::NotAttempted, why.clone())
    } else if values.is_empty() || m.is_some_and(|m| m.not_attempted.is_some()) {
        (Verdict::NotAttempted, missing_reason(file, r, m, scale))
    } else {
        let m = m.expect("values come from a measurement");
        let (mean, _, _) = stats(&values);
        let shape = order.as_ref().map(|o| {
            reference(o, m, by_id, rows).map(|(rhs, rhs_seeded, name)| {
                (Shape::test_above(&values, &rhs, o.greater, seeded || rhs_seeded, resolution(&r.unit)),
                 o.describe(&name))
            })
        });
        let shape_words = |s: &Option<Option<(Shape, String)>>| -> String {
            match s {
                None => String::new(),
                Some(None) => "; its ordering's reference was not measured".into(),
                Some(Some((sh, what))) if sh.holds() => format!("; {what} holds: {}", sh.describe()),
                Some(Some((sh, what))) if !sh.enough_seeds() => {
                    format!("; {what} not testable: {} seed{}, {MIN_SEEDS} needed", sh.seeds, if sh.seeds == 1 { "" } else { "s" })
                }
                Some(Some((sh, what))) => format!("; {what} does not hold: {}", sh.describe()),
            }
        };
        match (rule, span.and_then(|s| rule.accepts(s, mean))) {
            (Rule::Ordering, _) | (_, None) => match &shape {
                Some(Some((sh, what))) if sh.holds() => (Verdict::Shape, format!("{what}: {}", sh.describe())),
                Some(Some((sh, what))) if !sh.enough_seeds() => (
                    Verdict::NotAttempted,
                    format!("{what} needs {MIN_SEEDS} seeds to compare its margin with the seed spread; this run has {} \
                             (run with --seeds {MIN_SEEDS})", sh.seeds),
                ),
                Some(Some((sh, what))) => (Verdict::NotReproduced, format!("{what} does not hold: {}", sh.describe())),
                _ => (Verdict::NotAttempted, "the ordering's reference was not measured".into()),
            },
            (_, Some(true)) => {
                let (lo, hi) = accepted.expect("a rule that accepts has an interval");
                let mut why = format!("{} within {}", with_unit(mean, &r.unit), interval(lo, hi, &r.unit));
                // A paper value smaller than its tolerance: the rule cannot
                // tell it from nothing, and the reader should know.
                if lo <= 0.0 && hi > 0.0 && !matches!(rule, Rule::Below) && r.unit != "x" {
                    why += " (the interval holds 0: this rule cannot tell the paper's value from none)";
                }
                (Verdict::Reproduced, why)
            }
            (_, Some(false)) => {
                let (lo, hi) = accepted.expect("a rule that refuses has an interval");
                let base = format!("{} outside {}", with_unit(mean, &r.unit), interval(lo, hi, &r.unit));
                match &shape {
                    Some(Some((sh, _))) if sh.holds() => (Verdict::Shape, base + &shape_words(&shape)),
                    _ => (Verdict::NotReproduced, base + &shape_words(&shape)),
                }
            }
        }
    };
    let (value, value_min, value_max) = if values.is_empty() {
        (None, None, None)
    } else {
        let (a, b, c) = stats(&values);
        (Some(a), Some(b), Some(c))
    };
    let (paper_value, paper_lo, paper_hi) = match &r.paper {
        PaperValue::Number(v) => (Some(*v), Some(*v), Some(*v)),
        PaperValue::Range([lo, hi]) => (None, Some(*lo), Some(*hi)),
        PaperValue::Text(_) => (None, None, None),
    };
    let mut tolerance = rule.describe();
    if let Some((lo, hi)) = accepted {
        tolerance += &format!(": accepts {}", interval(lo, hi, &r.unit));
    }
    if let Some(o) = &order {
        let what = match &o.against {
            Against::Constant(c) => fmt_num(*c),
            Against::Row(id) => format!("row {id}"),
            Against::Other => m.and_then(|m| m.other_label.clone()).unwrap_or_else(|| "the other series".into()),
        };
        let floor = resolution(&r.unit);
        let floor = if floor > 0.0 { format!(" and > {}", with_unit(floor, &r.unit)) } else { String::new() };
        tolerance += &format!("; shape: {} with margin > seed spread{floor}", o.describe(&what));
    }
    Ok(Row {
        paper: file.paper.clone(),
        id: r.id.clone(),
        figure: r.figure.clone(),
        section: r.section.clone(),
        series: r.series.clone(),
        metric: r.metric.clone(),
        unit: r.unit.clone(),
        paper_value,
        paper_lo,
        paper_hi,
        paper_text: paper_text(r),
        value,
        value_min,
        value_max,
        n: values.len(),
        seeds: m.map(|m| m.seeds.clone()).unwrap_or_default(),
        values: values.clone(),
        value_text: value_text(&values, seeded, &r.unit),
        tolerance,
        accepted_lo: accepted.map(|a| a.0).filter(|v| v.is_finite()),
        accepted_hi: accepted.map(|a| a.1).filter(|v| v.is_finite()),
        verdict,
        reason,
        note: m.and_then(|m| m.note.clone()).unwrap_or_default(),
        reading: r.reading.clone().unwrap_or_default(),
        quote: r.quote.clone(),
        sources: m.map(|m| m.sources.clone()).unwrap_or_default(),
        command: m.map(|m| m.command.clone()).unwrap_or_default(),
        scale,
    })
}

fn interval(lo: f64, hi: f64, unit: &str) -> String {
    match (lo.is_finite(), hi.is_finite()) {
        (true, true) => format!("{}..{}", fmt_num(lo), with_unit(hi, unit)),
        (true, false) => format!("> {}", with_unit(lo, unit)),
        (false, true) => format!("< {}", with_unit(hi, unit)),
        (false, false) => "any value".into(),
    }
}

/// Rows per verdict, in `Verdict::ALL` order.
pub fn counts(rows: &[Row]) -> Vec<(Verdict, usize)> {
    Verdict::ALL.iter().map(|v| (*v, rows.iter().filter(|r| r.verdict == *v).count())).collect()
}

#[cfg(test)]
mod tests;
