//! A plain address list, one access a line: `ADDR[,OP][,CPU]`.
//!
//! * `ADDR`: hex with a `0x` prefix, or decimal;
//! * `OP`: `R` (read, the default) or `W` (write), also `r`/`w`/`L`/`S`;
//! * `CPU`: decimal cpu id (default 0).
//!
//! Fields are separated by commas (spaces around them are ignored); blank lines
//! and lines starting with `#` are skipped, and a first line whose first field
//! is `addr` or `address` is taken as a CSV column header.

use std::io::BufRead;

use super::{Loc, parse_u64, shown, Feed, ImportOptions, Lines};
use crate::error::Result;
use crate::trace::Access;

pub fn parse<R: BufRead>(r: R, feed: &mut Feed<'_>, opts: &ImportOptions) -> Result<()> {
    let mut lines = Lines::new(r);
    let path = feed.path.clone();
    while let Some((l, off, no)) = lines.next_line(&path)? {
        let bad = |msg: String| feed.error(off, format!("line {no}: {msg}"));
        let text = std::str::from_utf8(l).map_err(|_| bad("not text (invalid UTF-8)".into()))?;
        let t = text.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let mut fields = t.split(',').map(str::trim);
        let a = fields.next().unwrap_or("");
        if no == 1 && (a.eq_ignore_ascii_case("addr") || a.eq_ignore_ascii_case("address")) {
            continue;
        }
        let addr = parse_u64(a, false)
            .ok_or_else(|| bad(format!("address '{}' is not a number (hex with 0x, or decimal)", shown(a.as_bytes()))))?;
        let write = match fields.next() {
            None | Some("R" | "r" | "L") => false,
            Some("W" | "w" | "S") => true,
            Some(o) => return Err(bad(format!("operation '{}': expected R or W", shown(o.as_bytes())))),
        };
        let cpu = match fields.next() {
            None => opts.cpu,
            Some(c) => match c.parse::<u16>() {
                Ok(n) if !c.starts_with('+') => n,
                _ => return Err(bad(format!("cpu '{}' is not a cpu number", shown(c.as_bytes())))),
            },
        };
        if let Some(extra) = fields.next() {
            return Err(bad(format!("unexpected fourth field '{}' (ADDR[,R|W][,CPU])", shown(extra.as_bytes()))));
        }
        if !feed.offer(Access { addr, write, cpu, pid: 0 }, off, Loc::Line(no))? {
            return Ok(());
        }
    }
    Ok(())
}
