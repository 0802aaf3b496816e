//! `key=value` parameters of a policy, with typed getters and a check that
//! every given key was used (a misspelt knob is an error, not a silent default).
//!
//! Every knob that sizes an allocation, a loop or a period is read through a
//! ranged getter (`u64_in`, `f64_in`): the knob states its accepted range where
//! it is read, and a value outside it is one error naming the policy, the key,
//! the value and the range (never a clamp, an abort on allocation or a hang).

use crate::units::{parse_count, parse_size};
use crate::{Error, Result};

/// Shortest period of any daemon or timer driven by a policy knob, in seconds
/// of virtual time. A period of 0 would fire forever without advancing the
/// clock (`linux:scan_sleep_ms=0` never ended); 10 ms is far below every
/// period the papers use (PCC 30 s, HawkEye 1 s, khugepaged 10 s) and bounds
/// the firings of one daemon by `MAX_DURATION_S / 0.01`.
pub const MIN_PERIOD_S: f64 = 0.01;
/// Longest period accepted (a period longer than the run simply never fires).
pub const MAX_PERIOD_S: f64 = 1e9;
/// Shortest period counted in accesses (`interval_accesses`, `window_accesses`).
pub const MIN_PERIOD_ACCESSES: u64 = 100;
pub const MAX_PERIOD_ACCESSES: u64 = 1 << 50;
/// Cap on base pages one direct compaction may migrate (a count, no allocation:
/// 2^40 pages is 4 PiB, more than any simulated memory).
pub const MAX_COMPACT_PAGES: u64 = 1 << 40;
/// Cap on regions a policy may try to promote per round (loops are bounded by
/// the candidates anyway; this only refuses nonsense).
pub const MAX_PROMOTIONS_PER_ROUND: u64 = 1 << 32;

pub struct Params {
    policy: String,
    items: Vec<(String, String, bool)>,
}

impl Params {
    /// Parameters of `policy`. A key given twice (`entries=8,entries=16`, or
    /// `scan-sleep-ms` and `scan_sleep_ms`) is refused: which one should win
    /// is a guess, and the getters would silently read only the first.
    pub fn new(policy: &str, items: &[(String, String)]) -> Result<Params> {
        let mut out: Vec<(String, String, bool)> = Vec::with_capacity(items.len());
        for (k, v) in items {
            let key = k.replace('-', "_");
            if let Some((_, first, _)) = out.iter().find(|(seen, _, _)| *seen == key) {
                return Err(Error::input(format!(
                    "policy {policy}: parameter {key} given twice ({key}={first} and {key}={v})"
                )));
            }
            out.push((key, v.clone(), false));
        }
        Ok(Params { policy: policy.into(), items: out })
    }

    fn take(&mut self, key: &str) -> Option<String> {
        self.items.iter_mut().find(|(k, _, _)| k == key).map(|(_, v, used)| {
            *used = true;
            v.clone()
        })
    }

    fn bad(&self, key: &str, v: &str, what: &str) -> Error {
        Error::input(format!("policy {}: {key}={v}: {what}", self.policy))
    }

    pub fn str(&mut self, key: &str, default: &str) -> String {
        self.take(key).unwrap_or_else(|| default.to_string())
    }

    pub fn choice(&mut self, key: &str, default: &str, allowed: &[&str]) -> Result<String> {
        let v = self.str(key, default);
        if allowed.contains(&v.as_str()) {
            Ok(v)
        } else {
            Err(self.bad(key, &v, &format!("expected one of {}", allowed.join(", "))))
        }
    }

    pub fn f64(&mut self, key: &str, default: f64) -> Result<f64> {
        match self.take(key) {
            None => Ok(default),
            Some(v) => v.parse::<f64>().ok().filter(|x| x.is_finite()).ok_or_else(|| self.bad(key, &v, "not a number")),
        }
    }

    pub fn u64(&mut self, key: &str, default: u64) -> Result<u64> {
        match self.take(key) {
            None => Ok(default),
            Some(v) => parse_count(&v).map_err(|_| self.bad(key, &v, "not a non-negative integer")),
        }
    }

    /// An integer knob accepted in `min..=max` (inclusive).
    pub fn u64_in(&mut self, key: &str, default: u64, min: u64, max: u64) -> Result<u64> {
        let x = self.u64(key, default)?;
        if (min..=max).contains(&x) {
            Ok(x)
        } else {
            Err(self.bad(key, &x.to_string(), &format!("out of range {min}..={max}")))
        }
    }

    /// A real knob accepted in `min..=max` (inclusive; non-finite values are
    /// refused by `f64` already).
    pub fn f64_in(&mut self, key: &str, default: f64, min: f64, max: f64) -> Result<f64> {
        let x = self.f64(key, default)?;
        if x >= min && x <= max {
            Ok(x)
        } else {
            Err(self.bad(key, &crate::units::fmt_num(x), &format!("out of range {min}..={max}")))
        }
    }

    /// An integer knob where 0 means "off" and any other value must lie in
    /// `min..=max` (access-count periods: 0 selects the time-based period).
    pub fn u64_off_or_in(&mut self, key: &str, default: u64, min: u64, max: u64) -> Result<u64> {
        let x = self.u64(key, default)?;
        if x == 0 || (min..=max).contains(&x) {
            Ok(x)
        } else {
            Err(self.bad(key, &x.to_string(), &format!("must be 0 (off) or in {min}..={max}")))
        }
    }

    pub fn size(&mut self, key: &str, default: u64) -> Result<u64> {
        match self.take(key) {
            None => Ok(default),
            Some(v) => parse_size(&v).map_err(|_| self.bad(key, &v, "not a size")),
        }
    }

    pub fn bool(&mut self, key: &str, default: bool) -> Result<bool> {
        match self.take(key).as_deref() {
            None => Ok(default),
            Some("1" | "true" | "yes" | "on") => Ok(true),
            Some("0" | "false" | "no" | "off") => Ok(false),
            Some(v) => Err(self.bad(key, v, "expected true or false")),
        }
    }

    /// Error on any parameter no getter asked for.
    pub fn finish(&self) -> Result<()> {
        let unused: Vec<&str> = self.items.iter().filter(|(_, _, u)| !u).map(|(k, _, _)| k.as_str()).collect();
        if unused.is_empty() {
            Ok(())
        } else {
            Err(Error::input(format!("policy {}: unknown parameter(s): {}", self.policy, unused.join(", "))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn duplicated_key_is_its_own_error() {
        let e = Params::new("pcc", &kv(&[("entries", "8"), ("entries", "16")])).err().unwrap().to_string();
        assert!(e.contains("entries given twice") && e.contains("entries=8") && e.contains("entries=16"), "{e}");
        // Dashes and underscores name the same key.
        let e = Params::new("linux", &kv(&[("scan-sleep-ms", "1"), ("scan_sleep_ms", "2")])).err().unwrap().to_string();
        assert!(e.contains("scan_sleep_ms given twice"), "{e}");
    }

    #[test]
    fn ranged_getters_name_policy_key_value_and_range() {
        let mut p = Params::new("pcc", &kv(&[("entries", "4000000000"), ("x", "0.5"), ("n", "0")])).unwrap();
        let e = p.u64_in("entries", 128, 1, 16384).unwrap_err().to_string();
        assert_eq!(e, "policy pcc: entries=4000000000: out of range 1..=16384");
        let e = p.f64_in("x", 0.9, 0.0, 0.25).unwrap_err().to_string();
        assert_eq!(e, "policy pcc: x=0.5: out of range 0..=0.25");
        assert_eq!(p.u64_off_or_in("n", 5, 100, 1000).unwrap(), 0);
        let mut p = Params::new("hawkeye", &kv(&[("window_s", "0")])).unwrap();
        let e = p.f64_in("window_s", 1.0, 0.01, 1e9).unwrap_err().to_string();
        assert_eq!(e, "policy hawkeye: window_s=0: out of range 0.01..=1000000000");
        // Defaults are not checked against the caller's own range twice: in range.
        let mut p = Params::new("x", &[]).unwrap();
        assert_eq!(p.u64_in("k", 7, 1, 10).unwrap(), 7);
    }
}
