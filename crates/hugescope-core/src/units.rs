//! Parsing and printing of sizes and counts ("1GiB", "2m", "50M").

use crate::{Error, Result};

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;

/// Parse a byte size: a plain integer, a hex integer (`0x200000`, as plans
/// and `/proc/PID/maps` write addresses), or an integer/decimal with a binary
/// suffix (k, kb, kib, m, mb, mib, g, gb, gib, t, ...; case-insensitive; all
/// powers of 1024). This is the one grammar of sizes and counts: the command
/// line, `--set`, TOML and JSON text values, plans, environment variables
/// and the Python layer (`hugescope.units`) all read through it.
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
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16).map_err(|_| bad());
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
    if !v.is_finite() || v < 0.0 || v >= u64::MAX as f64 {
        return Err(bad());
    }
    // A fraction of a byte or of one item is no value: "1.5" (bytes or
    // accesses) is refused, as a JSON 1.5 is, instead of rounding to 2. A
    // fraction of a unit ("1.5GiB", "2.5M") is rounded to a whole byte or item.
    if mult == 1 && v.fract() != 0.0 {
        return Err(Error::input(format!("invalid {what} '{s}': not a whole number")));
    }
    Ok(v.round() as u64)
}

/// A size or count given as a JSON or TOML value: a non-negative whole number
/// (`1.0` is 1; `1.5`, negatives and 2^64 or more are not), or text read by
/// `parse_size` / `parse_count`. The one reader of such values in files, so
/// that the `[os]` knobs and plans accept what `--set` and the command line do.
pub fn whole_value(v: &serde_json::Value, sized: bool) -> Option<u64> {
    match v {
        serde_json::Value::Number(n) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|x| x.fract() == 0.0 && *x >= 0.0 && *x < u64::MAX as f64).map(|x| x as u64)),
        serde_json::Value::String(s) if sized => parse_size(s).ok(),
        serde_json::Value::String(s) => parse_count(s).ok(),
        _ => None,
    }
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
        assert_eq!(parse_size("0x200000").unwrap(), 2 * MIB);
        assert!(parse_size("0x").is_err() && parse_size("0x1g").is_err());
        // A fraction of a byte is refused; of a unit, rounded to a byte.
        assert!(parse_size("1.5").is_err() && parse_size("0.5").is_err());
        assert_eq!(parse_size("1.0").unwrap(), 1);
        assert_eq!(parse_size("0.5k").unwrap(), 512);
        assert!(parse_size("nan").is_err() && parse_size("inf").is_err() && parse_size("1e400").is_err());
        assert!(parse_size("18446744073709551616").is_err());
        assert!(parse_size("16e").is_err(), "no exabyte suffix");
    }

    #[test]
    fn whole_values() {
        use serde_json::json;
        assert_eq!(whole_value(&json!(4096), true), Some(4096));
        assert_eq!(whole_value(&json!(4096.0), true), Some(4096));
        assert_eq!(whole_value(&json!(1.5), false), None);
        assert_eq!(whole_value(&json!(-1), false), None);
        assert_eq!(whole_value(&json!(1.8446744073709552e19), false), None);
        assert_eq!(whole_value(&json!("1k"), true), Some(1024));
        assert_eq!(whole_value(&json!("1k"), false), Some(1000));
        assert_eq!(whole_value(&json!("1.5"), false), None);
        assert_eq!(whole_value(&json!(true), false), None);
    }

    #[test]
    fn counts() {
        assert_eq!(parse_count("50M").unwrap(), 50_000_000);
        assert_eq!(parse_count("1_000").unwrap(), 1000);
        assert_eq!(parse_count("2k").unwrap(), 2000);
        assert_eq!(parse_count("1.5k").unwrap(), 1500);
        assert!(parse_count("1.5").is_err(), "a count of 1.5 is no count (it used to round to 2)");
        assert_eq!(parse_count("18446744073709551615").unwrap(), u64::MAX);
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
