//! Importers: turn access streams recorded by other tools (valgrind lackey,
//! ChampSim, a plain address list) and by hugescope's own compiler runtime
//! (`tracer/hugescope_trace.c`) into `.hst` traces.
//!
//! Every importer streams: it holds one input line (at most `MAX_LINE` bytes)
//! or one fixed-size record at a time, so memory does not grow with the input.
//! Bad input stops the import with one `Error::Format` naming the file, the
//! byte offset and (for text formats) the line; the output is then never
//! renamed into place (the writer removes its temporary file).

pub mod champsim;
pub mod lackey;
pub mod maps;
pub mod raw;
pub mod sites;
pub mod symbolize;
pub mod text;

use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::trace::hst::{HstWriter, Layout, TraceSummary};
use crate::trace::{Access, TraceHeader};

/// Longest text line an importer accepts. Lackey lines are ~20 bytes and an
/// address-list line well under 100; a longer line is not one of these
/// formats, and bounding it bounds the importer's memory.
pub const MAX_LINE: usize = 4096;

/// How many accesses pass between two checks of `cancel`: cheap enough to
/// vanish in the parsing cost, often enough that Ctrl-C stops an import at once.
pub(crate) const CANCEL_EVERY: u64 = 1 << 16;

/// The input formats `import` understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Lackey,
    ChampSim,
    Text,
}

impl Format {
    pub fn parse(s: &str) -> Result<Format> {
        match s {
            "lackey" => Ok(Format::Lackey),
            "champsim" => Ok(Format::ChampSim),
            "text" | "csv" => Ok(Format::Text),
            _ => Err(Error::input(format!("import format '{s}': unknown (lackey, champsim, text)"))),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Format::Lackey => "lackey",
            Format::ChampSim => "champsim",
            Format::Text => "text",
        }
    }
}

/// Which part of a stream to keep: skip the first `skip` accesses, then keep
/// at most `record` (all when None). Long runs are traced as a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Window {
    pub skip: u64,
    pub record: Option<u64>,
}

/// What the window says about the next access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    Skip,
    Keep,
    /// The window is full: the importer may stop reading.
    Done,
}

/// Counts accesses against a `Window`.
#[derive(Debug)]
pub struct Sampler {
    window: Window,
    seen: u64,
}

impl Sampler {
    pub fn new(window: Window) -> Self {
        Sampler { window, seen: 0 }
    }
    #[inline]
    pub fn admit(&mut self) -> Admit {
        let n = self.seen;
        if n < self.window.skip {
            self.seen += 1;
            return Admit::Skip;
        }
        match self.window.record {
            Some(m) if n - self.window.skip >= m => Admit::Done,
            _ => {
                self.seen += 1;
                Admit::Keep
            }
        }
    }
    /// Accesses seen in the input so far (skipped ones included).
    pub fn seen(&self) -> u64 {
        self.seen
    }
}

/// Options shared by the importers.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    pub window: Window,
    /// Lackey: also import instruction fetches (`I` lines) as reads.
    pub instructions: bool,
    /// The `cpu` every access gets when the format has none.
    pub cpu: u16,
}

/// Where in the input an access came from, for messages.
#[derive(Clone, Copy, Debug)]
pub enum Loc {
    Line(u64),
    Record(u64),
}

impl std::fmt::Display for Loc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Loc::Line(n) => write!(f, "line {n}"),
            Loc::Record(n) => write!(f, "record {n}"),
        }
    }
}

/// Where accesses go: the sampler decides, the callback stores. Returns
/// false when the window is full so the parser stops reading.
pub struct Feed<'a> {
    sampler: Sampler,
    out: &'a mut dyn FnMut(Access) -> Result<()>,
    /// Name of the input, for messages.
    pub path: PathBuf,
    /// Accesses handed to `out`.
    pub kept: u64,
}

impl<'a> Feed<'a> {
    pub fn new(path: &Path, window: Window, out: &'a mut dyn FnMut(Access) -> Result<()>) -> Self {
        Feed { sampler: Sampler::new(window), out, path: path.to_path_buf(), kept: 0 }
    }

    /// Offer one access read at byte `offset`, `loc` (line or record) of the
    /// input; `Ok(false)` means the window is full.
    #[inline]
    pub fn offer(&mut self, a: Access, offset: u64, loc: Loc) -> Result<bool> {
        match self.sampler.admit() {
            Admit::Skip => {}
            Admit::Done => return Ok(false),
            Admit::Keep => {
                // The record layout holds 48-bit addresses and 256 cpus: a
                // value beyond is the input's fault, reported where it is.
                a.validate().map_err(|m| self.error(offset, format!("{loc}: {m}")))?;
                (self.out)(a)?;
                self.kept += 1;
            }
        }
        if self.sampler.seen().is_multiple_of(CANCEL_EVERY) {
            crate::cancel::check()?;
        }
        Ok(true)
    }

    pub fn error(&self, offset: u64, msg: impl Into<String>) -> Error {
        Error::format(&self.path, offset, msg)
    }

    /// Accesses seen in the input (including skipped ones).
    pub fn seen(&self) -> u64 {
        self.sampler.seen()
    }
}

/// Reads a text input line by line with a bounded line length, tracking the
/// line number and byte offset for messages.
pub struct Lines<R: BufRead> {
    r: R,
    buf: Vec<u8>,
    /// Byte offset of the start of the current line.
    pub offset: u64,
    /// 1-based number of the current line.
    pub line: u64,
    next_offset: u64,
}

impl<R: BufRead> Lines<R> {
    pub fn new(r: R) -> Self {
        Lines { r, buf: Vec::with_capacity(128), offset: 0, line: 0, next_offset: 0 }
    }

    /// The next line without its line ending, with its byte offset and
    /// 1-based number, or None at the end.
    pub fn next_line(&mut self, path: &Path) -> Result<Option<(&[u8], u64, u64)>> {
        self.buf.clear();
        let n = (&mut self.r)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| Error::io(path, e))?;
        if n == 0 {
            return Ok(None);
        }
        // Lines that give no access (blank, comments, lackey's instruction
        // lines) never reach `Feed::offer`'s check: polled here as well.
        if self.line.is_multiple_of(CANCEL_EVERY) {
            crate::cancel::check()?;
        }
        self.offset = self.next_offset;
        self.next_offset += n as u64;
        self.line += 1;
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
        } else if n > MAX_LINE {
            return Err(Error::format(path, self.offset, format!("line {}: longer than {MAX_LINE} bytes", self.line)));
        }
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        Ok(Some((&self.buf, self.offset, self.line)))
    }
}

/// Parse an unsigned integer in hex (`0x` prefix, or `hex` forced) or decimal.
pub fn parse_u64(s: &str, hex: bool) -> Option<u64> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return u64::from_str_radix(h, 16).ok().filter(|_| !h.is_empty() && !h.starts_with('+'));
    }
    if s.is_empty() || s.starts_with('+') {
        return None;
    }
    if hex {
        u64::from_str_radix(s, 16).ok()
    } else {
        s.parse().ok()
    }
}

/// Shorten a piece of input for an error message, so one line stays short.
pub fn shown(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    if s.chars().count() > 60 {
        format!("{}...", s.chars().take(60).collect::<String>())
    } else {
        s.into_owned()
    }
}

/// Decode one input stream of `format` into `out`. Returns the number of
/// accesses seen in the input (before the window).
pub fn decode(
    format: Format,
    input: &mut dyn Read,
    path: &Path,
    opts: &ImportOptions,
    out: &mut dyn FnMut(Access) -> Result<()>,
) -> Result<u64> {
    let mut feed = Feed::new(path, opts.window, out);
    match format {
        Format::Lackey => lackey::parse(std::io::BufReader::with_capacity(1 << 16, input), &mut feed, opts)?,
        Format::Text => text::parse(std::io::BufReader::with_capacity(1 << 16, input), &mut feed, opts)?,
        Format::ChampSim => champsim::parse(input, &mut feed, opts)?,
    }
    Ok(feed.seen())
}

/// Import `input` (a file, or a stream such as a pipe from valgrind) into a
/// new trace at `output`. `header` names the workload; the output was checked
/// by `HstWriter::create_checked` before any input is read.
pub fn import(
    format: Format,
    input: &mut dyn Read,
    input_path: &Path,
    output: &Path,
    header: &TraceHeader,
    opts: &ImportOptions,
) -> Result<TraceSummary> {
    let inputs: Vec<&Path> = if input_path.exists() { vec![input_path] } else { vec![] };
    let mut w = HstWriter::create_checked(output, header, Layout::Planes, &inputs)?;
    decode(format, input, input_path, opts, &mut |a| w.write(a))?;
    w.finish()
}

/// Open an input file; ChampSim traces ending in `.xz` (as distributed) are
/// decompressed through the `xz` command as a stream (no pure-Rust xz decoder
/// is among this project's dependencies; see `docs/tracing.md`).
pub fn open_input(path: &Path) -> Result<Box<dyn Read + Send>> {
    let f = crate::input::open(path, "trace to import")?;
    if path.extension().is_some_and(|e| e == "xz") {
        return Ok(Box::new(xz::XzReader::spawn(f, path)?));
    }
    Ok(Box::new(f))
}

mod xz {
    //! `xz -dc` as a child process whose stdout is read as the stream; its
    //! exit status is checked at the end so a corrupt file is an error, not
    //! a silently short trace.
    use super::*;
    use std::process::{Child, ChildStdout, Command, Stdio};

    pub struct XzReader {
        child: Child,
        out: ChildStdout,
        path: PathBuf,
        done: bool,
    }

    impl XzReader {
        pub fn spawn(f: std::fs::File, path: &Path) -> Result<XzReader> {
            let mut child = Command::new("xz")
                .args(["-dc", "--single-stream"])
                .stdin(Stdio::from(f))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| Error::input(format!("{}: cannot run 'xz' to decompress it: {e}", path.display())))?;
            let out = child.stdout.take().expect("piped stdout");
            Ok(XzReader { child, out, path: path.to_path_buf(), done: false })
        }
    }

    impl Read for XzReader {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.out.read(buf)?;
            if n == 0 && !buf.is_empty() && !self.done {
                self.done = true;
                let mut err = String::new();
                if let Some(mut e) = self.child.stderr.take() {
                    let _ = (&mut e).take(4096).read_to_string(&mut err);
                }
                let st = self.child.wait()?;
                if !st.success() {
                    let msg = err.lines().next().unwrap_or("").trim().to_string();
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("xz could not decompress {} ({st}): {msg}", self.path.display()),
                    ));
                }
            }
            Ok(n)
        }
    }

    impl Drop for XzReader {
        fn drop(&mut self) {
            // Stopped early (a full window, an error): do not leave xz running.
            if !self.done {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampler_window() {
        let mut s = Sampler::new(Window { skip: 2, record: Some(3) });
        let got: Vec<Admit> = (0..7).map(|_| s.admit()).collect();
        use Admit::*;
        assert_eq!(got, vec![Skip, Skip, Keep, Keep, Keep, Done, Done]);
        let mut all = Sampler::new(Window::default());
        assert!((0..10).all(|_| all.admit() == Keep));
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_u64("0x10", false), Some(16));
        assert_eq!(parse_u64("10", true), Some(16));
        assert_eq!(parse_u64("10", false), Some(10));
        assert_eq!(parse_u64("0x", false), None);
        assert_eq!(parse_u64("+5", false), None);
        assert_eq!(parse_u64("0x+5", false), None);
    }
}
