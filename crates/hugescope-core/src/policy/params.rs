//! `key=value` parameters of a policy, with typed getters and a check that
//! every given key was used (a misspelt knob is an error, not a silent default).

use crate::units::{parse_count, parse_size};
use crate::{Error, Result};

pub struct Params {
    policy: String,
    items: Vec<(String, String, bool)>,
}

impl Params {
    pub fn new(policy: &str, items: &[(String, String)]) -> Params {
        Params { policy: policy.into(), items: items.iter().map(|(k, v)| (k.replace('-', "_"), v.clone(), false)).collect() }
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
