//! A workload's trace written to a `.hst` file: the one path behind
//! `hugescope trace WORKLOAD -o FILE.hst` and the end-to-end row of
//! `hugescope bench`'s trace generation, so the bench measures what the
//! command runs.

use std::path::Path;

use hugescope_core::trace::hst::{HstWriter, TraceSummary};
use hugescope_core::trace::{Access, AccessSink, TraceHeader};
use hugescope_core::Result;

use crate::registry::{header, trace, Params, RunOutput};

/// How often the caller's progress hook is told the accesses generated.
pub const PROGRESS_EVERY: u64 = 1 << 20;

/// Called with the accesses generated so far (every `PROGRESS_EVERY`);
/// returning false asks the generator to stop (a cancellation request).
pub type ProgressFn<'a> = &'a mut (dyn FnMut(u64) -> bool + Send);

/// Options of a trace file beyond the workload's own parameters.
#[derive(Default)]
pub struct FileOptions<'a> {
    /// Write at most this many accesses. The generator stops at the first
    /// access past it (a run of 2^64 updates with a limit of 1000 takes as
    /// long as 1000), so the workload's own result (a checksum) is absent:
    /// `result` says where the run was stopped.
    pub limit: Option<u64>,
    pub progress: Option<ProgressFn<'a>>,
    /// Encode and compress chunks on the calling thread instead of a second
    /// one (same bytes; for tests and for measuring the difference).
    pub sequential: bool,
}

/// What a finished trace file holds.
pub struct Written {
    pub header: TraceHeader,
    pub output: RunOutput,
    pub summary: TraceSummary,
}

/// Forwards accesses to the writer up to the cap and reports progress.
struct FileSink<'a> {
    writer: HstWriter,
    limit: u64,
    seen: u64,
    progress: Option<ProgressFn<'a>>,
    stopped: bool,
}

/// Unwind payload that stops a generator at the access limit (raised with
/// `resume_unwind`, which prints nothing; caught in `trace_to_file`).
struct LimitReached;

impl AccessSink for FileSink<'_> {
    #[inline]
    fn access(&mut self, a: Access) {
        if self.seen >= self.limit {
            // The first access past the limit: every marker up to it is
            // written; stop the generator rather than generate the rest.
            std::panic::resume_unwind(Box::new(LimitReached));
        }
        self.writer.access(a);
        self.seen += 1;
        if self.seen % PROGRESS_EVERY == 0 {
            self.report();
        }
    }
    fn progress(&mut self, label: &str) {
        if self.seen <= self.limit {
            self.writer.progress(label);
        }
    }
}

impl FileSink<'_> {
    #[cold]
    fn report(&mut self) {
        if let (Some(f), false) = (self.progress.as_mut(), self.stopped) {
            if !f(self.seen.min(self.limit)) {
                // The generator polls the request and unwinds; the temporary
                // file goes when the writer is dropped.
                self.stopped = true;
                hugescope_core::cancel::request();
            }
        }
    }
}

/// Generate workload `name`'s trace into `out`. The output target is checked
/// before any work (`HstWriter::create`), and on any error or cancellation
/// no file is left under `out`.
pub fn trace_to_file(
    name: &str,
    params: &Params,
    out: &Path,
    opts: FileOptions<'_>,
) -> Result<Written> {
    let header = header(name, params)?;
    let writer = HstWriter::create(out, &header)?.with_encoder_thread(!opts.sequential);
    let mut sink = FileSink {
        writer,
        limit: opts.limit.unwrap_or(u64::MAX),
        seen: 0,
        progress: opts.progress,
        stopped: false,
    };
    let output = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| trace(name, params, &mut sink))) {
        Ok(r) => r?,
        Err(p) if p.is::<LimitReached>() => RunOutput {
            result: serde_json::json!({ "stopped_at_limit": sink.limit }),
            accesses: sink.seen,
        },
        Err(p) => std::panic::resume_unwind(p),
    };
    let summary = sink.writer.finish()?;
    Ok(Written {
        header,
        output,
        summary,
    })
}
