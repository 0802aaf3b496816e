//! JSON text as Python's `json.dumps(value, indent=...)` writes it, for
//! result files written from the core's types (`record.rs`) that must stay
//! byte-identical to the files the Python side wrote before: separators
//! `", "` and `": "` (or a newline and `indent` spaces), floats in Python's
//! `repr` form (`1e-05`, `1e+16`, `100.0`), and every non-ASCII character as
//! a `\uXXXX` escape (`ensure_ascii`).

use std::io::{self, Write};

use serde::Serialize;
use serde_json::ser::Formatter;

use crate::err;

struct PyFormatter {
    indent: Option<usize>,
    level: usize,
    has_value: bool,
}

impl PyFormatter {
    fn newline<W: ?Sized + Write>(&self, w: &mut W) -> io::Result<()> {
        if let Some(n) = self.indent {
            w.write_all(b"\n")?;
            for _ in 0..n * self.level {
                w.write_all(b" ")?;
            }
        }
        Ok(())
    }

    fn begin_item<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if !first {
            w.write_all(if self.indent.is_some() { b"," } else { b", " })?;
        }
        self.newline(w)
    }

    fn end<W: ?Sized + Write>(&mut self, w: &mut W, close: &[u8]) -> io::Result<()> {
        self.level -= 1;
        if self.has_value {
            self.newline(w)?;
        }
        self.has_value = true;
        w.write_all(close)
    }
}

/// `repr(x)` of a finite Python float: the shortest digits that read back
/// as `x` (zmij's, as serde_json writes; the same digits Python picks), laid out as Python does:
/// positional for decimal exponents -4..16, else `d.ddde[+-]XX`.
pub fn py_float_repr(x: f64) -> String {
    let mut buf = zmij::Buffer::new();
    let s = buf.format_finite(x);
    let (neg, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let (mantissa, exp) = match s.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (s, 0),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all: String = format!("{int_part}{frac_part}");
    let lead = all.len() - all.trim_start_matches('0').len();
    let digits = all.trim_start_matches('0').trim_end_matches('0');
    let sign = if neg { "-" } else { "" };
    if digits.is_empty() {
        return format!("{sign}0.0");
    }
    // The value is 0.DIGITS x 10^(e10 + 1): e10 is the exponent of the
    // leading digit.
    let e10 = int_part.len() as i32 - 1 - lead as i32 + exp;
    let body = if (-4..16).contains(&e10) {
        if e10 >= 0 {
            let n = (e10 + 1) as usize;
            let int: String = if digits.len() >= n {
                digits[..n].to_string()
            } else {
                format!("{digits}{}", "0".repeat(n - digits.len()))
            };
            let frac = if digits.len() > n { &digits[n..] } else { "0" };
            format!("{int}.{frac}")
        } else {
            format!("0.{}{digits}", "0".repeat((-e10 - 1) as usize))
        }
    } else {
        let rest = if digits.len() > 1 { format!(".{}", &digits[1..]) } else { String::new() };
        let esign = if e10 < 0 { '-' } else { '+' };
        format!("{}{rest}e{esign}{:02}", &digits[..1], e10.abs())
    };
    format!("{sign}{body}")
}

/// What `ensure_ascii` escapes beyond JSON's own escapes: every character
/// outside printable ASCII (DEL included; serde_json escapes the controls).
fn needs_escape(c: char) -> bool {
    !c.is_ascii() || c == '\x7f'
}

impl Formatter for PyFormatter {
    fn write_f64<W: ?Sized + Write>(&mut self, w: &mut W, value: f64) -> io::Result<()> {
        w.write_all(py_float_repr(value).as_bytes())
    }

    fn write_f32<W: ?Sized + Write>(&mut self, w: &mut W, value: f32) -> io::Result<()> {
        self.write_f64(w, value as f64)
    }

    fn write_string_fragment<W: ?Sized + Write>(&mut self, w: &mut W, fragment: &str) -> io::Result<()> {
        for part in fragment.split_inclusive(needs_escape) {
            let mut chars = part.chars();
            let last = chars.next_back();
            w.write_all(chars.as_str().as_bytes())?;
            match last {
                Some(c) if needs_escape(c) => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        write!(w, "\\u{u:04x}")?;
                    }
                }
                Some(c) => write!(w, "{c}")?,
                None => {}
            }
        }
        Ok(())
    }

    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.level += 1;
        self.has_value = false;
        w.write_all(b"[")
    }

    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.end(w, b"]")
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.begin_item(w, first)
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.level += 1;
        self.has_value = false;
        w.write_all(b"{")
    }

    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.end(w, b"}")
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.begin_item(w, first)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

/// `value` as `json.dumps(value, indent=indent)` text.
pub fn to_string<T: Serialize + ?Sized>(value: &T, indent: Option<usize>) -> pyo3::PyResult<String> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PyFormatter { indent, level: 0, has_value: false });
    value.serialize(&mut ser).map_err(err)?;
    String::from_utf8(out).map_err(err)
}

/// `repr` of a float, exposed so the Python tests can check it against
/// Python's own on many values.
#[pyo3::pyfunction]
pub fn float_repr(x: f64) -> pyo3::PyResult<String> {
    if x.is_finite() {
        Ok(py_float_repr(x))
    } else {
        Err(err("float_repr: not a finite number"))
    }
}
