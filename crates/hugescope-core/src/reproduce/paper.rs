//! A paper's quantitative results as data (`papers/*.toml`, one file per
//! paper): every row names where in the paper the number stands (figure,
//! table, section), what it measures, the paper's value, the tolerance rule
//! that judges hugescope's value and, where the claim is an ordering, what
//! the value is ordered against. The files are the record of what each
//! paper claims; they hold no hugescope number.
//!
//! A file also lists the paper's workloads at the paper's own scale
//! (footprint, input, run length) and what running them at that scale on
//! this machine still needs, so `--scale paper` can say per row why it is
//! not attempted yet.

use super::order::{Against, Order};
use super::rule::{Rule, Span};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The papers, in the order `reproduce all` runs them.
/// "virt" is a section, not a paper: the virtualization claims of Ingens
/// and direct segments side by side (issue #35), its Ingens rows included
/// from `ingens.toml` (`[[include]]`), not copied.
pub const PAPERS: &[&str] = &["pcc", "ds", "ingens", "navarro", "fhpm", "virt"];

fn source(paper: &str) -> Option<&'static str> {
    Some(match paper {
        "pcc" => include_str!("papers/pcc.toml"),
        "ds" => include_str!("papers/ds.toml"),
        "ingens" => include_str!("papers/ingens.toml"),
        "navarro" => include_str!("papers/navarro.toml"),
        "fhpm" => include_str!("papers/fhpm.toml"),
        "virt" => include_str!("papers/virt.toml"),
        _ => return None,
    })
}

/// A paper's value: one number, a range, or words (an ordering, or a claim
/// the paper gives no number for).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum PaperValue {
    Number(f64),
    Range([f64; 2]),
    Text(String),
}

impl PaperValue {
    /// The number or range a tolerance rule compares with (None for words).
    pub fn span(&self) -> Option<Span> {
        match self {
            PaperValue::Number(v) => Some(Span::One(*v)),
            PaperValue::Range([lo, hi]) => Some(Span::Range(*lo, *hi)),
            PaperValue::Text(_) => None,
        }
    }
}

/// One of the paper's workloads at the paper's scale.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PaperWorkload {
    /// hugescope's workload (or the paper's name when hugescope has none).
    pub name: String,
    /// The paper's name for it.
    pub paper_name: String,
    /// The input the paper ran it on.
    pub input: String,
    /// The paper's footprint.
    pub footprint: String,
    /// How long the paper ran it (trace length, run time), as the paper says.
    pub run: String,
    /// Where the paper says it (table, section).
    pub cite: String,
    /// What running it at the paper's scale on this machine still needs.
    pub needs: String,
}

/// One quantitative result of the paper.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PaperRow {
    /// Stable id, unique within the paper (the measurement names it).
    pub id: String,
    /// Figure or table ("Fig. 5", "Table 4") or "text".
    #[serde(rename = "where")]
    pub figure: String,
    /// Section of the paper.
    pub section: String,
    /// What the number is of (workload, configuration).
    pub series: String,
    /// What it measures.
    pub metric: String,
    /// "x" (speedup or ratio), "%", or a unit in words.
    #[serde(default)]
    pub unit: String,
    /// The paper's value.
    pub paper: PaperValue,
    /// How the paper states it, when the number alone misleads ("up to 2x").
    #[serde(default)]
    pub shown: Option<String>,
    /// The tolerance rule (`rule.rs`).
    pub rule: String,
    /// What the value is ordered against for a *shape* (`order.rs`).
    #[serde(default)]
    pub order: Option<String>,
    /// The paper's words.
    pub quote: String,
    /// The hugescope workload the row runs (for the paper-scale reason).
    #[serde(default)]
    pub workload: Option<String>,
    /// Set when the number was used to set a parameter: the row is *input*.
    #[serde(default)]
    pub input: Option<String>,
    /// Set when no scale attempts the row yet, with the reason.
    #[serde(default)]
    pub not_attempted: Option<String>,
    /// What the row needs at the paper's scale beyond its workload's needs.
    #[serde(default)]
    pub paper_scale: Option<String>,
    /// How the paper's words were read into the metric, where that is a choice.
    #[serde(default)]
    pub reading: Option<String>,
}

impl PaperRow {
    pub fn rule(&self) -> Result<Rule> {
        Rule::parse(&self.rule).map_err(|e| Error::input(format!("row '{}': {e}", self.id)))
    }

    pub fn order(&self) -> Result<Option<Order>> {
        self.order.as_deref().map(Order::parse).transpose().map_err(|e| Error::input(format!("row '{}': {e}", self.id)))
    }
}

/// Rows another paper's file defines that this file shows as well (a
/// section spanning papers): every row of `paper` whose id starts with one
/// of `rows`, with the workloads they run. One definition, two tables.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Include {
    pub paper: String,
    /// Row-id prefixes ("t3-" takes every Table 3 row).
    pub rows: Vec<String>,
}

/// A paper's data file.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PaperFile {
    /// Short name ("pcc").
    pub paper: String,
    /// Authors, title, venue.
    pub citation: String,
    /// The paper's text in the project (`shared/papers/...`).
    pub text: String,
    #[serde(default)]
    pub workload: Vec<PaperWorkload>,
    /// Rows taken from other papers' files (resolved by `load`, before the
    /// file's own rows).
    #[serde(default, skip_serializing)]
    pub include: Vec<Include>,
    #[serde(default)]
    pub row: Vec<PaperRow>,
}

impl PaperFile {
    /// Parse and check a paper's data (every rule and order valid, ids
    /// unique, every `row:` reference to a row of the file, a number or
    /// range wherever a rule compares magnitudes).
    pub fn parse(name: &str, text: &str) -> Result<PaperFile> {
        let f: PaperFile = toml::from_str(text).map_err(|e| Error::input(format!("papers/{name}.toml: {e}")))?;
        f.check().map_err(|e| Error::input(format!("papers/{name}.toml: {e}")))?;
        Ok(f)
    }

    fn check(&self) -> Result<()> {
        if self.row.is_empty() && self.include.is_empty() {
            return Err(Error::input("no [[row]] and no [[include]]".to_string()));
        }
        let mut ids = BTreeSet::new();
        for r in &self.row {
            if r.id.trim().is_empty() || !ids.insert(r.id.as_str()) {
                return Err(Error::input(format!("row id '{}' is empty or used twice", r.id)));
            }
        }
        let workloads: BTreeSet<&str> = self.workload.iter().map(|w| w.name.as_str()).collect();
        for r in &self.row {
            let rule = r.rule()?;
            for (what, v) in [("where", &r.figure), ("section", &r.section), ("series", &r.series),
                              ("metric", &r.metric), ("quote", &r.quote)] {
                if v.trim().is_empty() {
                    return Err(Error::input(format!("row '{}': '{what}' is empty", r.id)));
                }
            }
            match (&r.paper, rule) {
                (PaperValue::Text(_), Rule::Ordering) => {}
                (PaperValue::Text(t), _) => {
                    return Err(Error::input(format!(
                        "row '{}': rule '{}' compares a magnitude but the paper value is words ('{t}')", r.id, r.rule)))
                }
                (PaperValue::Range([lo, hi]), _) if !(lo.is_finite() && hi.is_finite() && lo <= hi) => {
                    return Err(Error::input(format!("row '{}': range [{lo}, {hi}] is not low..high", r.id)))
                }
                (PaperValue::Range(_), Rule::Above | Rule::Below) => {
                    return Err(Error::input(format!("row '{}': a bound ('{}') takes one number", r.id, r.rule)))
                }
                (PaperValue::Number(v), _) if !v.is_finite() => {
                    return Err(Error::input(format!("row '{}': paper value is not a number", r.id)))
                }
                _ => {}
            }
            let order = r.order()?;
            if rule == Rule::Ordering && order.is_none() {
                return Err(Error::input(format!("row '{}': an ordering row needs 'order'", r.id)));
            }
            if let Some(Order { against: Against::Row(id), .. }) = &order {
                if !ids.contains(id.as_str()) || id == &r.id {
                    return Err(Error::input(format!("row '{}': order refers to '{id}', not another row of the paper",
                                                    r.id)));
                }
            }
            if let Some(w) = &r.workload {
                if !workloads.contains(w.as_str()) {
                    return Err(Error::input(format!("row '{}': workload '{w}' is not in the file's [[workload]] list",
                                                    r.id)));
                }
            }
        }
        Ok(())
    }

    pub fn workload(&self, name: &str) -> Option<&PaperWorkload> {
        self.workload.iter().find(|w| w.name == name)
    }
}

/// The data of one paper (`PAPERS`), parsed and checked, with the rows it
/// includes from other papers (`Include`) placed first.
pub fn load(paper: &str) -> Result<PaperFile> {
    let mut f = parse_source(paper)?;
    resolve_includes(paper, &mut f, parse_source)?;
    Ok(f)
}

/// One paper's own file, parsed and checked (its includes not resolved).
fn parse_source(paper: &str) -> Result<PaperFile> {
    let text = source(paper)
        .ok_or_else(|| Error::input(format!("paper '{paper}': not one of {}", PAPERS.join(", "))))?;
    PaperFile::parse(paper, text)
}

/// Put the rows `f` includes (and the workloads they name) before its own
/// rows, and check the whole again (ids unique across both). `other` parses
/// an included paper; an included file's own includes are not followed
/// (one level: a section shows a paper's rows, it is not shown itself).
pub fn resolve_includes(name: &str, f: &mut PaperFile, other: impl Fn(&str) -> Result<PaperFile>) -> Result<()> {
    let mut rows = Vec::new();
    let mut workloads: Vec<PaperWorkload> = Vec::new();
    for inc in std::mem::take(&mut f.include) {
        if inc.paper == name {
            return Err(Error::input(format!("papers/{name}.toml: includes itself")));
        }
        let src = other(&inc.paper).map_err(|e| Error::input(format!("papers/{name}.toml: include: {e}")))?;
        for prefix in &inc.rows {
            let got: Vec<&PaperRow> = src.row.iter().filter(|r| r.id.starts_with(prefix.as_str())).collect();
            if prefix.is_empty() || got.is_empty() {
                return Err(Error::input(format!(
                    "papers/{name}.toml: include of '{}': no row id starts with '{prefix}'", inc.paper)));
            }
            for r in got {
                if let Some(w) = r.workload.as_deref().and_then(|w| src.workload(w)) {
                    if f.workload(&w.name).is_none() && !workloads.iter().any(|x| x.name == w.name) {
                        workloads.push(w.clone());
                    }
                }
                rows.push(r.clone());
            }
        }
    }
    rows.append(&mut f.row);
    f.row = rows;
    workloads.append(&mut f.workload);
    f.workload = workloads;
    f.check().map_err(|e| Error::input(format!("papers/{name}.toml: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_paper_file_parses_and_cites_its_rows() {
        for p in PAPERS {
            let f = load(p).unwrap_or_else(|e| panic!("{p}: {e}"));
            assert_eq!(&f.paper, p);
            assert!(!f.row.is_empty(), "{p}: no rows");
        }
    }

    const HEAD: &str = "paper = \"t\"\ncitation = \"c\"\ntext = \"x\"\n";

    fn row(extra: &str) -> String {
        format!("{HEAD}[[row]]\nid = \"a\"\nwhere = \"Fig. 1\"\nsection = \"§1\"\nseries = \"s\"\nmetric = \"m\"\n\
                 quote = \"q\"\n{extra}\n")
    }

    #[test]
    fn bad_rows_are_refused_with_the_row_named() {
        let cases = [
            ("paper = 1.2\nrule = \"gains\"", "row 'a'"),
            ("paper = \"faster\"\nrule = \"gain\"", "compares a magnitude"),
            ("paper = [2.0, 1.0]\nrule = \"gain\"", "not low..high"),
            ("paper = [1.0, 2.0]\nrule = \"below\"", "takes one number"),
            ("paper = \"a > b\"\nrule = \"ordering\"", "needs 'order'"),
            ("paper = 1.0\nrule = \"gain\"\norder = \"> row:zz\"", "not another row"),
            ("paper = 1.0\nrule = \"gain\"\norder = \"> row:a\"", "not another row"),
            ("paper = 1.0\nrule = \"gain\"\nworkload = \"bfs\"", "not in the file's"),
            ("paper = 1.0\nrule = \"gain\"\ncolour = \"red\"", "unknown field"),
        ];
        for (extra, want) in cases {
            let e = PaperFile::parse("t", &row(extra)).unwrap_err().to_string();
            assert!(e.contains(want), "{extra:?}: {e}");
        }
        let dup = format!("{}[[row]]\nid = \"a\"\nwhere = \"w\"\nsection = \"s\"\nseries = \"s\"\nmetric = \"m\"\n\
                           quote = \"q\"\npaper = 1.0\nrule = \"gain\"\n", row("paper = 1.0\nrule = \"gain\""));
        assert!(PaperFile::parse("t", &dup).unwrap_err().to_string().contains("used twice"));
        assert!(load("nope").unwrap_err().to_string().contains("not one of pcc, ds"));
    }

    /// A section includes another file's rows by id prefix, with the
    /// workloads they name, before its own; a prefix matching nothing, a
    /// self-include and an id defined in both are refused.
    #[test]
    fn includes_take_rows_by_prefix_with_their_workloads() {
        let src = format!("{HEAD}[[workload]]\nname = \"w\"\npaper_name = \"W\"\ninput = \"i\"\nfootprint = \"f\"\n\
                           run = \"r\"\ncite = \"c\"\nneeds = \"n\"\n{}{}",
                          row("paper = 1.1\nrule = \"gain\"\nworkload = \"w\"").replace(HEAD, "").replace("id = \"a\"", "id = \"t3-a\""),
                          row("paper = 2.0\nrule = \"gain\"").replace(HEAD, "").replace("id = \"a\"", "id = \"t4-b\""));
        let other = |p: &str| if p == "src" { PaperFile::parse("src", &src) } else { Err(Error::input("no such paper")) };
        let sec = |inc: &str, own: &str| -> Result<PaperFile> {
            let mut f = PaperFile::parse("sec", &format!("{HEAD}{inc}\n{own}"))?;
            resolve_includes("sec", &mut f, other)?;
            Ok(f)
        };
        let f = sec("[[include]]\npaper = \"src\"\nrows = [\"t3-\"]", &row("paper = 3.0\nrule = \"gain\"").replace(HEAD, "")).unwrap();
        assert_eq!(f.row.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["t3-a", "a"]);
        assert_eq!(f.workload.len(), 1);
        assert!(f.include.is_empty());
        let e = sec("[[include]]\npaper = \"src\"\nrows = [\"t9-\"]", "").unwrap_err().to_string();
        assert!(e.contains("no row id starts with 't9-'"), "{e}");
        let e = sec("[[include]]\npaper = \"sec\"\nrows = [\"a\"]", "").unwrap_err().to_string();
        assert!(e.contains("includes itself"), "{e}");
        let twice = row("paper = 3.0\nrule = \"gain\"").replace(HEAD, "").replace("id = \"a\"", "id = \"t4-b\"");
        let e = sec("[[include]]\npaper = \"src\"\nrows = [\"t4-\"]", &twice).unwrap_err().to_string();
        assert!(e.contains("used twice"), "{e}");
        // The virt section's included rows are ingens.toml's, field for field.
        let (virt, ingens) = (load("virt").unwrap(), load("ingens").unwrap());
        let t3 = ingens.row.iter().filter(|r| r.id.starts_with("t3-")).count();
        assert_eq!(t3, 27);
        for r in ingens.row.iter().filter(|r| r.id.starts_with("t3-") || r.id.starts_with("s24-")) {
            let v = virt.row.iter().find(|x| x.id == r.id).unwrap();
            assert_eq!(serde_json::to_string(v).unwrap(), serde_json::to_string(r).unwrap());
        }
    }
}
