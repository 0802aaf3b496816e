//! Reading real graphs: whitespace-separated edge lists (`u v [w]`, 0-based ids,
//! `#` or `%` comment lines, as SNAP and GAP's `.el`/`.wel` files) and Matrix
//! Market coordinate files (`%%MatrixMarket matrix coordinate ...`, 1-based, as
//! the SuiteSparse collection ships them).

use std::path::Path;

use hugescope_core::error::{shown, shown_path};
use hugescope_core::{Error, Result};

/// A token or line of the file as an error shows it: cut and escaped, so a
/// 3 GB line of NULs is no 3 GB message (the whole line used to be copied
/// into it).
fn tok_shown(t: &str) -> String {
    shown(t, 80)
}

/// A directed edge list. `w` holds weights when the file had them.
#[derive(Clone, Debug, Default)]
pub struct EdgeList {
    pub n: usize,
    pub src: Vec<u32>,
    pub dst: Vec<u32>,
    pub w: Option<Vec<u32>>,
    /// The file declared the matrix symmetric (store both directions).
    pub symmetric: bool,
}

impl EdgeList {
    pub fn len(&self) -> usize {
        self.src.len()
    }
    pub fn is_empty(&self) -> bool {
        self.src.is_empty()
    }
}

fn parse_id(tok: &str, path: &Path, line: usize, one_based: bool) -> Result<u32> {
    let bad = |why: &str| Error::input(format!("{}: line {line}: vertex id '{}' {why}", shown_path(path), tok_shown(tok)));
    let v: u64 = tok.parse().map_err(|_| bad("is not a non-negative integer"))?;
    let v = if one_based {
        v.checked_sub(1).ok_or_else(|| bad("is 0 in a 1-based Matrix Market file"))?
    } else {
        v
    };
    if v >= u32::MAX as u64 {
        return Err(bad("exceeds the 32-bit vertex id range"));
    }
    Ok(v as u32)
}

/// Weights become positive integers: |w| rounded, at least 1 (SSSP needs
/// positive weights; real-valued matrix entries are accepted this way).
fn parse_weight(tok: &str, path: &Path, line: usize) -> Result<u32> {
    let f: f64 = tok
        .parse()
        .map_err(|_| Error::input(format!("{}: line {line}: weight '{}' is not a number", shown_path(path), tok_shown(tok))))?;
    if !f.is_finite() {
        return Err(Error::input(format!("{}: line {line}: weight '{}' is not finite", shown_path(path), tok_shown(tok))));
    }
    Ok(f.abs().round().clamp(1.0, (u32::MAX / 4) as f64) as u32)
}

pub fn load(path: &Path) -> Result<EdgeList> {
    // A graph file is a workload parameter: a missing or unreadable one is
    // bad input (as before input.rs), not an I/O failure of the run.
    let text = hugescope_core::input::read_text(path, "graph file", hugescope_core::input::MAX_GRAPH_BYTES).map_err(|e| match e {
        Error::Io { source, .. } => Error::input(format!("cannot read graph file '{}': {source}", shown_path(path))),
        other => other,
    })?;
    parse(&text, path)
}

pub fn parse(text: &str, path: &Path) -> Result<EdgeList> {
    let mut el = EdgeList::default();
    let mut lines = text.lines().enumerate().peekable();
    let mut mm = false;
    let mut pattern = false;
    let mut declared_n: u64 = 0;
    if let Some((_, first)) = lines.peek() {
        let f = first.trim_start();
        if f.starts_with("%%MatrixMarket") {
            let toks: Vec<String> = f.split_whitespace().map(|t| t.to_ascii_lowercase()).collect();
            if toks.len() < 5 || toks[1] != "matrix" || toks[2] != "coordinate" {
                return Err(Error::input(format!(
                    "{}: line 1: only 'matrix coordinate' Matrix Market files are supported",
                    shown_path(path)
                )));
            }
            pattern = toks[3] == "pattern";
            el.symmetric = toks[4] == "symmetric" || toks[4] == "skew-symmetric" || toks[4] == "hermitian";
            mm = true;
            lines.next();
        }
    }
    let mut size_seen = !mm;
    let mut weights: Vec<u32> = Vec::new();
    let mut any_weight = false;
    let mut max_id: u64 = 0;
    for (i, line) in lines {
        let ln = i + 1;
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') || t.starts_with('%') {
            continue;
        }
        let mut toks = t.split_whitespace();
        if !size_seen {
            let nums: Vec<&str> = toks.collect();
            if nums.len() != 3 {
                return Err(Error::input(format!(
                    "{}: line {ln}: expected the Matrix Market size line 'rows cols entries'",
                    shown_path(path)
                )));
            }
            let rows: u64 = nums[0].parse().map_err(|_| Error::input(format!("{}: line {ln}: bad row count", shown_path(path))))?;
            let cols: u64 = nums[1].parse().map_err(|_| Error::input(format!("{}: line {ln}: bad column count", shown_path(path))))?;
            declared_n = rows.max(cols);
            if declared_n >= u32::MAX as u64 {
                return Err(Error::input(format!("{}: line {ln}: too many vertices for 32-bit ids", shown_path(path))));
            }
            size_seen = true;
            continue;
        }
        let (a, b) = match (toks.next(), toks.next()) {
            (Some(a), Some(b)) => (a, b),
            _ => {
                return Err(Error::input(format!(
                    "{}: line {ln}: expected an edge 'u v [weight]', got '{}'",
                    shown_path(path),
                    tok_shown(t)
                )))
            }
        };
        let u = parse_id(a, path, ln, mm)?;
        let v = parse_id(b, path, ln, mm)?;
        let w = match toks.next() {
            Some(tok) if !pattern => {
                any_weight = true;
                parse_weight(tok, path, ln)?
            }
            _ => 1,
        };
        max_id = max_id.max(u as u64).max(v as u64);
        el.src.push(u);
        el.dst.push(v);
        weights.push(w);
    }
    if mm && !size_seen {
        return Err(Error::input(format!("{}: Matrix Market file has no size line", shown_path(path))));
    }
    el.n = if el.src.is_empty() { declared_n as usize } else { (max_id + 1).max(declared_n) as usize };
    if el.n == 0 {
        return Err(Error::input(format!("{}: the graph file contains no edges", shown_path(path))));
    }
    if any_weight {
        el.w = Some(weights);
    }
    Ok(el)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edge_list_with_comments_and_weights() {
        let el = parse("# c\n% c\n0 1 5\n1 2 7.4\n\n2 0 1\n", Path::new("x.wel")).unwrap();
        assert_eq!(el.n, 3);
        assert_eq!(el.src, vec![0, 1, 2]);
        assert_eq!(el.dst, vec![1, 2, 0]);
        assert_eq!(el.w, Some(vec![5, 7, 1]));
        let el = parse("0 3\n3 1\n", Path::new("x.el")).unwrap();
        assert_eq!(el.n, 4);
        assert!(el.w.is_none());
    }

    #[test]
    fn matrix_market_is_one_based_and_symmetric() {
        let t = "%%MatrixMarket matrix coordinate pattern symmetric\n% x\n4 4 2\n2 1\n4 3\n";
        let el = parse(t, Path::new("g.mtx")).unwrap();
        assert_eq!(el.n, 4);
        assert!(el.symmetric);
        assert_eq!((el.src[0], el.dst[0]), (1, 0));
        assert!(el.w.is_none());
    }

    #[test]
    fn malformed_lines_name_the_line() {
        let e = parse("0 1\n1 x\n", Path::new("bad.el")).unwrap_err().to_string();
        assert!(e.contains("bad.el: line 2"), "{e}");
        let e = parse("0\n", Path::new("bad.el")).unwrap_err().to_string();
        assert!(e.contains("line 1"), "{e}");
        assert!(matches!(load(Path::new("/nonexistent/g.el")), Err(Error::Input(_))));
    }
}
