//! valgrind lackey (`valgrind --tool=lackey --trace-mem=yes`) output:
//!
//! ```text
//! I  04017d80,3      instruction fetch (skipped unless asked for)
//!  L 7ff000f68,8     load
//!  S 04232d18,8      store
//!  M 0421f8a8,4      modify: a load and a store of the same bytes
//! ==1234== ...       valgrind's own messages (skipped)
//! ```
//!
//! Addresses are hex without a prefix; the size is decimal and only checked
//! (the simulator works on pages, so one access stands for the whole range).

use std::io::BufRead;

use super::{Loc, shown, Feed, ImportOptions, Lines};
use crate::error::Result;
use crate::trace::Access;

pub fn parse<R: BufRead>(r: R, feed: &mut Feed<'_>, opts: &ImportOptions) -> Result<()> {
    let mut lines = Lines::new(r);
    let path = feed.path.clone();
    while let Some((l, off, no)) = lines.next_line(&path)? {
        if l.is_empty() || l.starts_with(b"==") || l.starts_with(b"--") {
            continue;
        }
        let bad = |msg: String| feed.error(off, format!("line {no}: {msg}"));
        let text = std::str::from_utf8(l).map_err(|_| bad("not text (invalid UTF-8)".into()))?;
        let body = text.trim_start();
        let mut parts = body.splitn(2, [' ', '\t']);
        let op = parts.next().unwrap_or("");
        let operand = parts.next().unwrap_or("").trim();
        let kinds: &[bool] = match op {
            "L" => &[false],
            "S" => &[true],
            // A modify is a read followed by a write of the same location.
            "M" => &[false, true],
            "I" if opts.instructions => &[false],
            "I" => &[],
            _ => return Err(bad(format!("'{}': expected 'I', 'L', 'S' or 'M' then ADDR,SIZE", shown(l)))),
        };
        let (a, s) = operand
            .split_once(',')
            .ok_or_else(|| bad(format!("'{}': expected ADDR,SIZE after '{op}'", shown(l))))?;
        let addr = u64::from_str_radix(a, 16)
            .ok()
            .filter(|_| !a.is_empty() && !a.starts_with('+'))
            .ok_or_else(|| bad(format!("address '{}' is not hexadecimal", shown(a.as_bytes()))))?;
        match s.parse::<u32>() {
            Ok(n) if n >= 1 && !s.starts_with('+') => {}
            _ => return Err(bad(format!("size '{}' is not a positive number", shown(s.as_bytes())))),
        }
        for &write in kinds {
            let acc = Access { addr, write, cpu: opts.cpu, pid: 0 };
            if !feed.offer(acc, off, Loc::Line(no))? {
                return Ok(());
            }
        }
    }
    Ok(())
}
