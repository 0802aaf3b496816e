//! Parsing and printing of sizes and counts ("1GiB", "2m", "50M").

use crate::{Error, Result};

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;

/// Parse a byte size: a plain integer, or an integer/decimal with a binary suffix
/// (k, kb, kib, m, mb, mib, g, gb, gib, t, ...; case-insensitive; all powers of 1024).
pub fn parse_size(s: &str) -> Result<u64> {
    parse_scaled(s, 1024, "size")
}

/// Parse a count: an integer with an optional decimal suffix (k = 1e3, m = 1e6, g/b = 1e9).
pub fn parse_count(s: &str) -> Result<u64> {
    parse_scaled(s, 1000, "count")
}

fn parse_scaled(s: &str, base: u64, what: &str) -> Result<u64> {
    let t = s.trim();
    let bad = || Error::input(format!("invalid {what} '{s}': expected a non-negative number with an optional suffix such as 4k, 2M, 1GiB"));
    if t.is_empty() || t.starts_with('-') {
        return Err(bad());
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let num: String = num.chars().filter(|&c| c != '_').collect();
    let suffix = suffix.trim().to_ascii_lowercase();
    let suffix = suffix
        .trim_end_matches('b')
        .trim_end_matches('i')
        .to_string();
    let mult: u64 = match suffix.as_str() {
        "" => 1,
        "k" => base,
        "m" => base.pow(2),
        "g" => base.pow(3),
        "t" => base.pow(4),
        // Peta: accepted so that `--memory 1PiB` is a size the memory
        // estimate refuses by name, not a parse error.
        "p" => base.pow(5),
        _ => return Err(bad()),
    };
    // A bare "b" suffix in a count means billions (e.g. "1B accesses").
    let mult = if what == "count" && t.to_ascii_lowercase().ends_with('b') && suffix.is_empty() {
        base.pow(3)
    } else {
        mult
    };
    if let Ok(n) = num.parse::<u64>() {
        return n.checked_mul(mult).ok_or_else(bad);
    }
    let f: f64 = num.parse().map_err(|_| bad())?;
    let v = f * mult as f64;
    if !v.is_finite() || v < 0.0 || v > u64::MAX as f64 {
        return Err(bad());
    }
    Ok(v.round() as u64)
}

/// Human-readable binary size: 4096 -> "4KiB", 2097152 -> "2MiB".
/// A number for an error message: plain when short, scientific when its plain
/// form would be long (`1e300`, not three hundred digits).
pub fn fmt_num(x: f64) -> String {
    let s = x.to_string();
    if s.len() > 16 {
        format!("{x:e}")
    } else {
        s
    }
}

pub fn fmt_size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [("TiB", 1 << 40), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)];
    for (name, unit) in UNITS {
        if bytes >= unit && bytes % unit == 0 {
            return format!("{}{}", bytes / unit, name);
        }
    }
    for (name, unit) in UNITS {
        if bytes >= unit {
            return format!("{:.1}{}", bytes as f64 / unit as f64, name);
        }
    }
    format!("{bytes}B")
}

/// Short page-size label used in tables and JSON keys: 4096 -> "4k", 2MiB -> "2m".
pub fn page_label(bytes: u64) -> String {
    fmt_size(bytes)
        .trim_end_matches("iB")
        .to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("2MiB").unwrap(), 2 * MIB);
        assert_eq!(parse_size("1GB").unwrap(), GIB);
        assert_eq!(parse_size("1.5g").unwrap(), 3 * GIB / 2);
        assert!(parse_size("-1").is_err());
        assert!(parse_size("12q").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("99999999999999999999t").is_err());
    }

    #[test]
    fn counts() {
        assert_eq!(parse_count("50M").unwrap(), 50_000_000);
        assert_eq!(parse_count("1_000").unwrap(), 1000);
        assert_eq!(parse_count("2k").unwrap(), 2000);
    }

    #[test]
    fn labels() {
        assert_eq!(page_label(4096), "4k");
        assert_eq!(page_label(2 * MIB), "2m");
        assert_eq!(page_label(GIB), "1g");
        assert_eq!(page_label(8192), "8k");
        assert_eq!(fmt_size(3 * MIB / 2), "1536KiB");
        assert_eq!(fmt_size(1_500_000), "1.4MiB");
    }
}
