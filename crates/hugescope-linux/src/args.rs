//! Argument parsing of the helper binaries (`hugescope-memhold`,
//! `hugescope-fragment`) with clap, keeping the project's convention for bad
//! input: exactly one line on stderr naming the binary, the option and the
//! value, exit status 2 (clap's own rendering adds a usage block and a hint).

use clap::error::ErrorKind;

/// Parse this process's arguments with `cmd`; on bad input print one line
/// `NAME: MESSAGE` and exit 2; `--help` prints the help and exits 0.
pub fn parse(cmd: clap::Command) -> clap::ArgMatches {
    let name = cmd.get_name().to_string();
    // "-1" is a value to refuse with its name, not an unknown flag.
    let cmd = cmd.mut_args(|a| if a.get_action().takes_values() { a.allow_negative_numbers(true) } else { a });
    match cmd.try_get_matches() {
        Ok(m) => m,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => e.exit(),
        Err(e) => {
            // clap's message runs until the blank line before its usage
            // block (a list of missing arguments spans lines): one line.
            let text = e.to_string();
            let msg: Vec<&str> = text.lines().take_while(|l| !l.trim().is_empty()).map(str::trim).collect();
            eprintln!("{name}: {}", msg.join(" ").trim_start_matches("error: "));
            std::process::exit(2)
        }
    }
}

/// A number given as hex (`0x...`) or a size (`16M`, `2MiB`), for addresses and lengths.
pub fn hex_or_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).map_err(|_| format!("'{s}' is not a hex number"))
    } else {
        hugescope_core::units::parse_size(t).map_err(|e| e.to_string())
    }
}

/// A non-negative, finite number of seconds.
pub fn seconds(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|t| t.is_finite() && *t >= 0.0)
        .ok_or_else(|| format!("'{s}' is not a non-negative number of seconds"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_and_refuse_with_the_value_named() {
        assert_eq!(hex_or_size("0x200000"), Ok(2 << 20));
        assert_eq!(hex_or_size("16M"), Ok(16 << 20));
        assert!(hex_or_size("0xzz").unwrap_err().contains("0xzz"));
        assert_eq!(seconds("1.5"), Ok(1.5));
        for bad in ["-1", "nan", "inf", "x"] {
            assert!(seconds(bad).unwrap_err().contains(bad), "{bad}");
        }
    }
}
