//! Orderings and the *shape* test: a claim that one series lies above (or
//! below) another holds only if the margin between the seed means is larger
//! than the seed spread, over at least 3 seeds (issue #33). Two equal series
//! never pass: a margin of 0 is not larger than a spread of 0.
//!
//! * margin = mean(lhs) - mean(rhs) for `>`, mean(rhs) - mean(lhs) for `<`;
//! * spread = the larger of the two series' ranges (max - min over seeds), so
//!   the ordering must hold by more than either side moves between seeds.
//!
//! The margin must also exceed the row's *resolution*: the difference the
//! default tolerance rule treats as no difference (0.02 for a speedup "x",
//! 2 points for a percentage), so a 0.001% gain or a 0.001-point gap between
//! two overheads that are both nearly zero is no ordering, however small the
//! spread of a deterministic model's seeds (`resolution`).
//!
//! A row states what its value is ordered against (`order` in the data):
//! `"> 1"` (a constant, e.g. a speedup above base pages), `"< row:ID"`
//! (another row's values, seed by seed, e.g. Table 4's 2MB cell below its
//! 4KB cell) or `"> other"` (a series the measurement carries beside the
//! row's value, e.g. HawkEye's speedup beside the PCC's).

use super::rule::fmt_num;
use crate::{Error, Result};

/// Fewest seeds a shape needs when the values come from a seeded workload.
pub const MIN_SEEDS: usize = 3;

/// What a row's value is ordered against.
#[derive(Clone, Debug, PartialEq)]
pub enum Against {
    Constant(f64),
    Row(String),
    Other,
}

/// A row's ordering: its value is above (`greater`) or below the reference.
#[derive(Clone, Debug, PartialEq)]
pub struct Order {
    pub greater: bool,
    pub against: Against,
}

impl Order {
    /// `"> 1"`, `"< row:ID"`, `"> other"`.
    pub fn parse(text: &str) -> Result<Order> {
        let t = text.trim();
        let bad = || Error::input(format!("order '{t}': expected '> X' or '< X' with X a number, 'row:ID' or 'other'"));
        let (greater, rest) = if let Some(r) = t.strip_prefix('>') {
            (true, r.trim())
        } else if let Some(r) = t.strip_prefix('<') {
            (false, r.trim())
        } else {
            return Err(bad());
        };
        let against = if rest == "other" {
            Against::Other
        } else if let Some(id) = rest.strip_prefix("row:") {
            if id.trim().is_empty() {
                return Err(bad());
            }
            Against::Row(id.trim().to_string())
        } else {
            match rest.parse::<f64>() {
                Ok(v) if v.is_finite() => Against::Constant(v),
                _ => return Err(bad()),
            }
        };
        Ok(Order { greater, against })
    }

    /// The ordering in words, with the reference's name.
    pub fn describe(&self, reference: &str) -> String {
        format!("{} {reference}", if self.greater { "above" } else { "below" })
    }
}

/// The smallest margin an ordering in `unit` can show: the floor of the
/// default tolerance rule (`rule.rs`: 0.02 of a speedup's gain, 2 points of
/// a percentage); 0 for other units, whose rows state their own rule.
pub fn resolution(unit: &str) -> f64 {
    match unit {
        "x" => 0.02,
        "%" | "points" => 2.0,
        _ => 0.0,
    }
}

/// Mean, min and max of a non-empty series.
pub fn stats(values: &[f64]) -> (f64, f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (mean, min, max)
}

/// The outcome of a shape test.
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    pub margin: f64,
    pub spread: f64,
    /// Seeds behind the test (the fewer of the two sides').
    pub seeds: usize,
    /// The values came from a seeded workload (a deterministic value needs
    /// one run: its spread is exactly 0).
    pub seeded: bool,
    /// The row's resolution (`resolution`): the margin must exceed it too.
    pub floor: f64,
    /// Size of the values compared (the larger mean), for rounding.
    pub scale: f64,
}

impl Shape {
    /// `lhs` ordered against `rhs` (`greater`: lhs above rhs). Both non-empty.
    pub fn test(lhs: &[f64], rhs: &[f64], greater: bool, seeded: bool) -> Shape {
        Shape::test_above(lhs, rhs, greater, seeded, 0.0)
    }

    /// As `test`, with a margin that must also exceed `floor` (`resolution`).
    pub fn test_above(lhs: &[f64], rhs: &[f64], greater: bool, seeded: bool, floor: f64) -> Shape {
        let (ml, lo_l, hi_l) = stats(lhs);
        let (mr, lo_r, hi_r) = stats(rhs);
        let margin = if greater { ml - mr } else { mr - ml };
        // A constant reference is one value: its range is 0.
        let spread = (hi_l - lo_l).max(hi_r - lo_r);
        let seeds = if rhs.len() == 1 { lhs.len() } else { lhs.len().min(rhs.len()) };
        Shape { margin, spread, seeds, seeded, floor, scale: ml.abs().max(mr.abs()) }
    }

    /// Enough seeds to call a shape (3, or 1 for a deterministic value).
    pub fn enough_seeds(&self) -> bool {
        !self.seeded || self.seeds >= MIN_SEEDS
    }

    /// The ordering holds with a margin larger than the spread and the
    /// resolution, on enough seeds. "Larger" by more than a rounding step
    /// (1e-9 of the values' size): 1.02 - 1.0 is 0.020000000000000018 in
    /// binary, which must not pass a floor of 0.02.
    pub fn holds(&self) -> bool {
        let eps = 1e-9 * self.scale.max(1.0);
        self.enough_seeds() && self.margin > self.spread + eps && self.margin > self.floor + eps
    }

    pub fn describe(&self) -> String {
        let floor = if self.floor > 0.0 { format!(", resolution {}", fmt_num(self.floor)) } else { String::new() };
        format!("margin {} vs seed spread {}{floor} ({} {})", fmt_num(self.margin), fmt_num(self.spread), self.seeds,
                if self.seeded { "seeds" } else { "run, deterministic" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_fail_a_strict_ordering() {
        let s = Shape::test(&[1.0, 1.0, 1.0], &[1.0], true, true);
        assert_eq!((s.margin, s.spread), (0.0, 0.0));
        assert!(!s.holds());
        // Deterministic equal values fail too.
        assert!(!Shape::test(&[0.0], &[0.0], false, false).holds());
    }

    #[test]
    fn the_margin_must_exceed_the_spread_of_either_side() {
        // lhs 1.10..1.14 (mean 1.12, range 0.04); rhs 1.05..1.07 (mean 1.06, range 0.02):
        // margin 0.06 > 0.04 holds.
        let s = Shape::test(&[1.10, 1.12, 1.14], &[1.05, 1.06, 1.07], true, true);
        assert!((s.margin - 0.06).abs() < 1e-12 && (s.spread - 0.04).abs() < 1e-12);
        assert!(s.holds());
        // lhs spread 0.08 > margin 0.06: fails although every seed is ordered.
        let s = Shape::test(&[1.08, 1.12, 1.16], &[1.05, 1.06, 1.07], true, true);
        assert!(!s.holds(), "{s:?}");
        // The margin equal to the spread is not larger.
        let s = Shape::test(&[2.0, 3.0, 4.0], &[2.0], true, true);
        assert_eq!((s.margin, s.spread), (1.0, 2.0));
        assert!(!s.holds());
        let s = Shape::test(&[3.0, 3.5, 4.0], &[2.0], true, true);
        assert_eq!((s.margin, s.spread), (1.5, 1.0));
        assert!(s.holds());
        // "below": the reference above the value.
        assert!(Shape::test(&[0.5, 0.6, 0.55], &[2.0, 2.1, 2.05], false, true).holds());
        assert!(!Shape::test(&[0.5, 0.6, 0.55], &[2.0, 2.1, 2.05], true, true).holds());
    }

    #[test]
    fn the_margin_must_exceed_the_resolution_too() {
        // A speedup of 1.0001x over three identical seeds: margin 0.0001 > spread 0,
        // but under the 0.02 resolution of a speedup: no ordering.
        let s = Shape::test_above(&[1.0001; 3], &[1.0], true, true, resolution("x"));
        assert!(s.margin > s.spread && !s.holds());
        // Exactly the resolution is not more than it; just above is.
        assert!(!Shape::test_above(&[1.02; 3], &[1.0], true, true, 0.02).holds());
        assert!(Shape::test_above(&[1.0201; 3], &[1.0], true, true, 0.02).holds());
        // Percentages: 2 points.
        assert!(!Shape::test_above(&[0.001; 3], &[1.9], false, true, resolution("%")).holds());
        assert!(Shape::test_above(&[0.001; 3], &[2.1], false, true, resolution("%")).holds());
        assert_eq!((resolution("refs/walk"), resolution("points")), (0.0, 2.0));
    }

    #[test]
    fn a_seeded_value_needs_three_seeds() {
        let two = Shape::test(&[1.5, 1.5], &[1.0], true, true);
        assert!(two.margin > two.spread && !two.holds());
        assert!(Shape::test(&[1.5, 1.5, 1.5], &[1.0], true, true).holds());
        // A deterministic value (no seed) is one run with a spread of exactly 0.
        assert!(Shape::test(&[1.5], &[1.0], true, false).holds());
        // Mismatched lengths count the fewer seeds.
        assert_eq!(Shape::test(&[1.0, 2.0, 3.0], &[0.0, 0.1], true, true).seeds, 2);
    }

    #[test]
    fn orders_parse() {
        assert_eq!(Order::parse("> 1").unwrap(), Order { greater: true, against: Against::Constant(1.0) });
        assert_eq!(Order::parse("<row:t4-cg-2mb").unwrap(),
                   Order { greater: false, against: Against::Row("t4-cg-2mb".into()) });
        assert_eq!(Order::parse(" > other ").unwrap(), Order { greater: true, against: Against::Other });
        for bad in ["", "1", ">", "> row:", ">= 1", "> nan", "~ other"] {
            assert!(Order::parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
