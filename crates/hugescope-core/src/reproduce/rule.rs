//! Tolerance rules: when a hugescope value counts as the paper's number.
//!
//! The default rule for a speedup or an overhead (issue #33): the *gain* (a
//! speedup's x - 1, or an overhead's percentage) lies within 25% of the
//! paper's gain, relative, or within 2 percentage points when the paper's
//! gain is under 10%. Any other rule is named in the row's data, so the
//! reader sees which one judged it:
//!
//! | rule          | the paper's value p (or each end of a range) accepts v when |
//! |---------------|--------------------------------------------------------------|
//! | `gain`        | \|(v-1) - (p-1)\| <= 0.25 \|p-1\|, or <= 0.02 when \|p-1\| < 0.10 |
//! | `percent`     | \|v - p\| <= 0.25 \|p\|, or <= 2 (points) when \|p\| < 10    |
//! | `relative:R`  | \|v - p\| <= R \|p\|                                          |
//! | `absolute:A`  | \|v - p\| <= A                                                |
//! | `above`       | v > p (a bound the paper states: "more than 75%")            |
//! | `below`       | v < p ("below 0.5%")                                         |
//! | `ordering`    | no magnitude: only the row's `order` is judged (a *shape*)   |
//!
//! A range [lo, hi] accepts lo - tol(lo) ..= hi + tol(hi). Boundaries are
//! inclusive: a value exactly 25% off is within (a relative slack of 1e-9
//! absorbs the rounding of x - 1 in binary floating point).

use crate::{Error, Result};

/// Slack of an inclusive boundary, relative to the size of the numbers
/// compared: 1.5 - 1 = 0.5 and 1.4 - 1 = 0.39999999999999991, so a gain
/// exactly 25% off would otherwise fall out by one rounding step.
const SLACK: f64 = 1e-9;

/// How a row's hugescope value is compared with the paper's value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rule {
    /// Speedup (x): the gain x - 1 within 25% relative, 0.02 when under 0.10.
    Gain,
    /// Percentage: within 25% relative, 2 points when under 10.
    Percent,
    /// Within this share of the paper's value.
    Relative(f64),
    /// Within this distance of the paper's value, in the row's unit.
    Absolute(f64),
    /// Strictly above the paper's bound.
    Above,
    /// Strictly below the paper's bound.
    Below,
    /// No magnitude to compare: only the row's ordering is judged.
    Ordering,
}

/// What a row's paper value is: one number or a range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Span {
    One(f64),
    Range(f64, f64),
}

impl Rule {
    /// The rule named in a paper's data file.
    pub fn parse(text: &str) -> Result<Rule> {
        let t = text.trim();
        let (name, arg) = match t.split_once(':') {
            Some((n, a)) => (n.trim(), Some(a.trim())),
            None => (t, None),
        };
        let number = |what: &str| -> Result<f64> {
            let a = arg.ok_or_else(|| Error::input(format!("rule '{t}': {what} needs a value ('{what}:0.25')")))?;
            match a.parse::<f64>() {
                Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
                _ => Err(Error::input(format!("rule '{t}': '{a}' is not a non-negative number"))),
            }
        };
        let rule = match name {
            "gain" => Rule::Gain,
            "percent" => Rule::Percent,
            "relative" => Rule::Relative(number("relative")?),
            "absolute" => Rule::Absolute(number("absolute")?),
            "above" => Rule::Above,
            "below" => Rule::Below,
            "ordering" => Rule::Ordering,
            _ => {
                return Err(Error::input(format!(
                    "rule '{t}': not one of gain, percent, relative:R, absolute:A, above, below, ordering"
                )))
            }
        };
        if arg.is_some() && !matches!(rule, Rule::Relative(_) | Rule::Absolute(_)) {
            return Err(Error::input(format!("rule '{t}': '{name}' takes no value")));
        }
        Ok(rule)
    }

    /// Half-width of the accepted interval around the paper's value `p`
    /// (None for bounds and orderings, which have no interval).
    pub fn tolerance(self, p: f64) -> Option<f64> {
        match self {
            // The gain of a speedup p is p - 1; the interval on the gain is
            // the same interval on the speedup.
            Rule::Gain => Some(if (p - 1.0).abs() < 0.10 { 0.02 } else { 0.25 * (p - 1.0).abs() }),
            Rule::Percent => Some(if p.abs() < 10.0 { 2.0 } else { 0.25 * p.abs() }),
            Rule::Relative(r) => Some(r * p.abs()),
            Rule::Absolute(a) => Some(a),
            Rule::Above | Rule::Below | Rule::Ordering => None,
        }
    }

    /// The values this rule accepts for the paper's `span`, as (low, high):
    /// an interval for the tolerance rules, an open bound for `above` and
    /// `below` (the other end infinite), None for `ordering`.
    pub fn accepted(self, span: Span) -> Option<(f64, f64)> {
        let (lo, hi) = match span {
            Span::One(p) => (p, p),
            Span::Range(lo, hi) => (lo, hi),
        };
        match self {
            Rule::Above => Some((hi, f64::INFINITY)),
            Rule::Below => Some((f64::NEG_INFINITY, lo)),
            Rule::Ordering => None,
            _ => Some((lo - self.tolerance(lo)?, hi + self.tolerance(hi)?)),
        }
    }

    /// Whether `v` is within the rule for the paper's `span` (None for an
    /// ordering, which has no magnitude).
    pub fn accepts(self, span: Span, v: f64) -> Option<bool> {
        let (lo, hi) = self.accepted(span)?;
        let slack = SLACK * lo.abs().max(hi.abs()).max(v.abs()).max(1.0);
        Some(match self {
            // Bounds are strict: a value on the bound is not "above" it.
            Rule::Above => v > lo,
            Rule::Below => v < hi,
            _ => v >= lo - slack && v <= hi + slack,
        })
    }

    /// The rule in words, as the table shows it.
    pub fn describe(self) -> String {
        match self {
            Rule::Gain => "gain (x - 1) within 25% of the paper's, or 0.02 when the paper's gain is under 0.10".into(),
            Rule::Percent => "within 25% of the paper's value, or 2 points when it is under 10%".into(),
            Rule::Relative(r) => format!("within {}% of the paper's value", fmt_num(100.0 * r)),
            Rule::Absolute(a) => format!("within {} of the paper's value", fmt_num(a)),
            Rule::Above => "above the paper's bound".into(),
            Rule::Below => "below the paper's bound".into(),
            Rule::Ordering => "ordering only: the margin of the seed means must exceed the seed spread (3+ seeds)".into(),
        }
    }
}

/// A number with up to 4 significant digits and no trailing zeros.
pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return if v > 0.0 { "inf".into() } else if v < 0.0 { "-inf".into() } else { "nan".into() };
    }
    if v == 0.0 {
        return "0".into();
    }
    let digits = (4 - 1 - v.abs().log10().floor() as i32).clamp(0, 9) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gain_is_25_percent_of_x_minus_1_boundary_inclusive() {
        // Paper 1.40x: gain 0.40, tolerance 0.10 -> 1.30 ..= 1.50.
        let r = Rule::Gain;
        assert_eq!(r.accepts(Span::One(1.40), 1.50), Some(true));
        assert_eq!(r.accepts(Span::One(1.40), 1.30), Some(true));
        assert_eq!(r.accepts(Span::One(1.40), 1.5001), Some(false));
        assert_eq!(r.accepts(Span::One(1.40), 1.2999), Some(false));
        // A gain of 0.20 (paper 1.20x) accepts 1.15 ..= 1.25 (0.05 = 25% of 0.20).
        assert_eq!(r.accepts(Span::One(1.20), 1.25), Some(true));
        assert_eq!(r.accepts(Span::One(1.20), 1.2501), Some(false));
    }

    #[test]
    fn gain_under_ten_percent_is_two_points() {
        // Paper 1.07x: gain 0.07 < 0.10 -> 1.05 ..= 1.09 (not 25% of 0.07 = 0.0175).
        let r = Rule::Gain;
        assert_eq!(r.accepts(Span::One(1.07), 1.09), Some(true));
        assert_eq!(r.accepts(Span::One(1.07), 1.05), Some(true));
        assert_eq!(r.accepts(Span::One(1.07), 1.0901), Some(false));
        // Exactly 10% is the relative rule: 1.10 accepts 1.075 ..= 1.125.
        assert_eq!(r.tolerance(1.10), Some(0.025000000000000022));
        assert_eq!(r.accepts(Span::One(1.10), 1.125), Some(true));
        assert_eq!(r.accepts(Span::One(1.10), 1.126), Some(false));
        // A slowdown gain (0.95x) is judged on its size: 2 points.
        assert_eq!(r.accepts(Span::One(0.95), 0.97), Some(true));
        assert_eq!(r.accepts(Span::One(0.95), 0.9701), Some(false));
    }

    #[test]
    fn percent_rule_switches_at_ten_points() {
        let r = Rule::Percent;
        // 51.1%: 25% relative = 12.775 points.
        assert_eq!(r.accepts(Span::One(51.1), 51.1 + 12.775), Some(true));
        assert_eq!(r.accepts(Span::One(51.1), 51.1 - 12.776), Some(false));
        // 9.9%: 2 points (more than 25% of 9.9 = 2.475? no: less) -> 7.9 ..= 11.9.
        assert_eq!(r.accepts(Span::One(9.9), 11.9), Some(true));
        assert_eq!(r.accepts(Span::One(9.9), 11.95), Some(false));
        // 0.06%: 2 points -> anything up to 2.06.
        assert_eq!(r.accepts(Span::One(0.06), 2.06), Some(true));
        assert_eq!(r.accepts(Span::One(0.06), 2.07), Some(false));
        // Exactly 10%: the relative rule (2.5 points).
        assert_eq!(r.accepts(Span::One(10.0), 12.5), Some(true));
        assert_eq!(r.accepts(Span::One(10.0), 12.51), Some(false));
    }

    #[test]
    fn ranges_widen_each_end_by_its_own_tolerance() {
        // 1.19..1.33x: 1.19 - 0.0475 ..= 1.33 + 0.0825.
        let (lo, hi) = Rule::Gain.accepted(Span::Range(1.19, 1.33)).unwrap();
        assert!((lo - 1.1425).abs() < 1e-12 && (hi - 1.4125).abs() < 1e-12, "{lo} {hi}");
        assert_eq!(Rule::Gain.accepts(Span::Range(1.19, 1.33), 1.26), Some(true));
        assert_eq!(Rule::Gain.accepts(Span::Range(1.19, 1.33), 1.42), Some(false));
        assert_eq!(Rule::Gain.accepts(Span::Range(1.19, 1.33), 1.14), Some(false));
    }

    #[test]
    fn bounds_are_strict_and_orderings_have_no_magnitude() {
        assert_eq!(Rule::Below.accepts(Span::One(0.5), 0.4999), Some(true));
        assert_eq!(Rule::Below.accepts(Span::One(0.5), 0.5), Some(false));
        assert_eq!(Rule::Above.accepts(Span::One(75.0), 75.0), Some(false));
        assert_eq!(Rule::Above.accepts(Span::One(75.0), 75.01), Some(true));
        assert_eq!(Rule::Ordering.accepts(Span::One(1.0), 1.0), None);
        assert_eq!(Rule::Relative(0.25).accepts(Span::One(3.0), 3.75), Some(true));
        assert_eq!(Rule::Relative(0.25).accepts(Span::One(3.0), 3.76), Some(false));
        assert_eq!(Rule::Absolute(0.1).accepts(Span::One(99.99), 99.89), Some(true));
        assert_eq!(Rule::Absolute(0.1).accepts(Span::One(99.99), 99.88), Some(false));
    }

    #[test]
    fn parse_names_each_rule_and_refuses_others() {
        assert_eq!(Rule::parse("gain").unwrap(), Rule::Gain);
        assert_eq!(Rule::parse(" relative: 0.1 ").unwrap(), Rule::Relative(0.1));
        assert_eq!(Rule::parse("absolute:2").unwrap(), Rule::Absolute(2.0));
        for bad in ["", "gains", "relative", "relative:-1", "absolute:x", "gain:0.3", "relative:nan"] {
            assert!(Rule::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn numbers_print_with_four_significant_digits() {
        assert_eq!(fmt_num(1.33), "1.33");
        assert_eq!(fmt_num(0.000123456), "0.0001235");
        assert_eq!(fmt_num(51.1), "51.1");
        assert_eq!(fmt_num(83.0), "83");
        assert_eq!(fmt_num(12345.0), "12345");
    }
}
