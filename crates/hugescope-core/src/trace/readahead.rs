//! Decoding a trace one step ahead of the simulation, on a second thread.
//!
//! Reading, decompressing, checking and unpacking a chunk (`HstReader::
//! next_chunk`) is 10-30% of a simulation pass, and it does not depend on
//! the simulation: with a second core it can run while the previous chunk is
//! simulated. The decoding thread owns the reader for the pass and sends
//! decoded chunks, in order, through a channel holding at most `DEPTH` of
//! them; their buffers come back to it for reuse, so a pass allocates
//! `DEPTH + 2` chunk buffers and no more, whatever the trace's length.
//!
//! Results cannot change: the consumer sees the same records in the same
//! order, and an error (a corrupt chunk, a cancellation) arrives at the
//! point of the stream where it happened, after every chunk before it. The
//! progress hook is called by the consumer as it takes each chunk, so a bar
//! shows what reached the simulation, not what was decoded ahead of it. With one cpu available (or
//! `HUGESCOPE_READAHEAD=0`) the chunks are decoded inline, as before.

use crate::progress::ProgressHook;
use crate::{Error, Result};
use std::sync::mpsc;

/// What a pass decodes ahead from: chunks of packed records in order, how
/// many were decoded so far and in all, and the progress hook the consumer
/// reports to while decoding runs ahead of it (`HstReader`, `hst.rs`).
pub trait ChunkSource: Send {
    /// The next chunk, None at the end.
    fn next_chunk(&mut self) -> Result<Option<&[u64]>>;
    /// Records decoded so far.
    fn records_decoded(&self) -> u64;
    /// Records of the whole stream (0 if not known).
    fn records_total(&self) -> u64;
    fn progress_mut(&mut self) -> &mut ProgressHook;
}

/// Decoded chunks waiting for the consumer at most.
const DEPTH: usize = 2;

/// Whether a pass decodes on a second thread: when this process may run on
/// more than one cpu, unless `HUGESCOPE_READAHEAD=0` asks for one thread
/// (e.g. a sweep that already keeps every core busy with its own processes).
pub fn enabled() -> bool {
    if std::env::var_os("HUGESCOPE_READAHEAD").is_some_and(|v| v == "0") {
        return false;
    }
    std::thread::available_parallelism().map_or(false, |n| n.get() > 1)
}

/// Call `f` on every remaining chunk of `r`, in order, decoding ahead on a
/// second thread when `enabled()`. Stops at the first error of either side.
pub fn for_each_chunk(r: &mut impl ChunkSource, f: impl FnMut(&[u64]) -> Result<()>) -> Result<()> {
    for_each_chunk_with(r, enabled(), f)
}

/// `for_each_chunk`, decoding on a second thread if `ahead`, inline if not.
pub fn for_each_chunk_with(r: &mut impl ChunkSource, ahead: bool, mut f: impl FnMut(&[u64]) -> Result<()>) -> Result<()> {
    if !ahead {
        while let Some(chunk) = r.next_chunk()? {
            f(chunk)?;
        }
        return Ok(());
    }
    // Progress is reported by the consumer, as it takes each chunk.
    let progress = std::mem::take(r.progress_mut());
    let total = r.records_total();
    let mut done = r.records_decoded();
    let reader = &mut *r;
    let result = std::thread::scope(|s| {
        let (full_tx, full_rx) = mpsc::sync_channel::<Result<Option<Vec<u64>>>>(DEPTH);
        let (empty_tx, empty_rx) = mpsc::channel::<Vec<u64>>();
        let decoder = std::thread::Builder::new().name("hst-readahead".into()).spawn_scoped(s, move || loop {
            let mut buf = empty_rx.try_recv().unwrap_or_default();
            let item = match reader.next_chunk() {
                Ok(Some(chunk)) => {
                    buf.clear();
                    buf.extend_from_slice(chunk);
                    Ok(Some(buf))
                }
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            };
            let last = !matches!(item, Ok(Some(_)));
            // A closed channel: the consumer stopped (its own error); so do we.
            if full_tx.send(item).is_err() || last {
                return;
            }
        });
        // A process at its thread limit: one clear error, not a panic.
        if let Err(e) = decoder {
            return Err(Error::input(format!(
                "could not start the trace decoding thread ({e}); HUGESCOPE_READAHEAD=0 decodes on one thread"
            )));
        }
        loop {
            match full_rx.recv() {
                Ok(Ok(Some(buf))) => {
                    // Reported as the chunk is handed over, as inline decoding does.
                    let before = done;
                    done += buf.len() as u64;
                    progress.advanced(before, done, total);
                    f(&buf)?;
                    // The decoder may have finished already: nothing to hand back to.
                    let _ = empty_tx.send(buf);
                }
                Ok(Ok(None)) => return Ok(()),
                Ok(Err(e)) => return Err(e),
                // The decoding thread ended without a last message: it
                // panicked, and the scope re-raises that panic on return.
                Err(_) => return Err(Error::input("the trace decoding thread stopped unexpectedly")),
            }
        }
    });
    *r.progress_mut() = progress;
    result
}
