//! The back half of the `.hst` writer: a filled chunk of packed records becomes
//! a frame on disk (tally, byte planes, zstd, CRC-32, the write), either on
//! the generator's thread or on a second one.
//!
//! Why a second thread: a generator emits 50-100 M accesses/s, and encoding a
//! chunk (planes, zstd level -1, CRC) costs about as much per record again, so
//! on one thread a trace file is written at well under half the generator's
//! speed. With the encoder on its own core the generator only packs records
//! into a buffer, and the two overlap (issue #16, trace generation). The frames
//! are the same bytes in the same order either way: chunks are cut by the
//! generator's thread at the same record counts, encoded by the same code one
//! after another, and written in the order they were sent.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::frames::{Layout, CHUNK_TAG, FRAME_HEADER_LEN, ZSTD_LEVEL};
use super::summary::Tally;
use crate::error::{Error, Result};

/// Encodes chunks into frames and appends them (and anything else) to the file.
pub(super) struct Encoder {
    /// The trace's final path: what an error (a full disk) names, rather
    /// than a temporary name the user never gave.
    tmp_path: PathBuf,
    out: BufWriter<File>,
    /// Bytes written so far (= offset of the next frame).
    pub(super) offset: u64,
    layout: Layout,
    /// The chunk's uncompressed payload, laid out for compression.
    raw: Vec<u8>,
    /// Reused compression output buffer.
    comp: Vec<u8>,
    compressor: zstd::bulk::Compressor<'static>,
    pub(super) tally: Tally,
    pub(super) chunks: u64,
    pub(super) compressed_bytes: u64,
}

impl Encoder {
    pub(super) fn new(tmp_path: PathBuf, file: File, layout: Layout) -> Result<Encoder> {
        let compressor =
            zstd::bulk::Compressor::new(ZSTD_LEVEL).map_err(|e| Error::io(&tmp_path, e))?;
        Ok(Encoder {
            tmp_path,
            out: BufWriter::with_capacity(1 << 16, file),
            offset: 0,
            layout,
            raw: Vec::new(),
            comp: Vec::new(),
            compressor,
            tally: Tally::new(),
            chunks: 0,
            compressed_bytes: 0,
        })
    }

    /// Append bytes. After an error the file is inconsistent: callers stop.
    pub(super) fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.out
            .write_all(bytes)
            .map_err(|e| Error::io(&self.tmp_path, e))?;
        self.offset += bytes.len() as u64;
        Ok(())
    }

    /// Count, lay out, compress and append one chunk's frame.
    pub(super) fn chunk(&mut self, recs: &[u64]) -> Result<()> {
        for &r in recs {
            self.tally.add_packed(r);
        }
        let records = recs.len();
        self.raw.resize(records * 8, 0);
        match self.layout {
            Layout::Planes => super::planes::to_planes(recs, &mut self.raw),
            Layout::Records => {
                for (b, r) in self.raw.chunks_exact_mut(8).zip(recs) {
                    b.copy_from_slice(&r.to_le_bytes());
                }
            }
        }
        let bound = zstd::zstd_safe::compress_bound(self.raw.len());
        if self.comp.capacity() < bound {
            self.comp.reserve_exact(bound - self.comp.len());
        }
        let n = self
            .compressor
            .compress_to_buffer(&self.raw[..], &mut self.comp)
            .map_err(|e| Error::io(&self.tmp_path, e))?;
        let mut fh = [0u8; FRAME_HEADER_LEN as usize];
        fh[0..4].copy_from_slice(&CHUNK_TAG);
        fh[4..8].copy_from_slice(&(records as u32).to_le_bytes());
        fh[8..12].copy_from_slice(&(n as u32).to_le_bytes());
        fh[12..16].copy_from_slice(&crc32fast::hash(&self.raw).to_le_bytes());
        self.put(&fh)?;
        let comp = std::mem::take(&mut self.comp);
        let r = self.put(&comp[..n]);
        self.comp = comp;
        r?;
        self.chunks += 1;
        self.compressed_bytes += n as u64;
        Ok(())
    }

    /// Flush the buffer and make the data durable; returns the file, still
    /// open (an unnamed file is linked under its name while open).
    pub(super) fn sync(self) -> Result<File> {
        let path = self.tmp_path;
        let file = self
            .out
            .into_inner()
            .map_err(|e| Error::io(&path, e.into_error()))?;
        // fsync before the caller renames, or a crash could leave the new
        // name pointing at a file whose blocks never reached the disk.
        file.sync_all().map_err(|e| Error::io(&path, e))?;
        Ok(file)
    }
}

/// Chunks in flight between the generator and the encoder thread: two let
/// the generator fill one while the encoder works on another, and bound the
/// memory (a chunk is at most 8 MiB).
const IN_FLIGHT: usize = 2;

/// An encoder on its own thread, fed filled chunks in order.
pub(super) struct Worker {
    /// Filled chunks to encode, in file order.
    to_encode: Option<SyncSender<Vec<u64>>>,
    /// Emptied chunk buffers coming back for reuse (no allocation per chunk).
    recycled: Receiver<Vec<u64>>,
    /// Asks the thread to drop what is queued (the trace is being abandoned).
    abandon: Arc<AtomicBool>,
    handle: Option<JoinHandle<(Encoder, Result<()>)>>,
}

/// Where filled chunks go: encoded at once, or handed to a worker thread.
pub(super) enum Pipeline {
    Inline(Encoder),
    Thread(Worker),
    /// After `finish` took the encoder back, or after the worker failed.
    Gone,
}

impl Pipeline {
    /// Move the encoder to a thread of its own. If the thread cannot be
    /// started, encoding stays on this thread (same bytes, only slower).
    pub(super) fn threaded(self) -> Pipeline {
        let enc = match self {
            Pipeline::Inline(enc) => enc,
            other => return other,
        };
        // The encoder is handed over once the thread runs, so a failed
        // spawn leaves it here.
        let (give, take) = mpsc::sync_channel::<Encoder>(1);
        let (to_encode, queue) = mpsc::sync_channel::<Vec<u64>>(IN_FLIGHT);
        let (recycle, recycled) = mpsc::channel::<Vec<u64>>();
        let abandon = Arc::new(AtomicBool::new(false));
        let stop = abandon.clone();
        let spawned = std::thread::Builder::new()
            .name("hst-encode".into())
            .spawn(move || {
                let mut enc = take
                    .recv()
                    .expect("the writer hands over its encoder right after the spawn");
                for recs in queue {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    if let Err(e) = enc.chunk(&recs) {
                        return (enc, Err(e));
                    }
                    let _ = recycle.send(recs);
                }
                (enc, Ok(()))
            });
        match spawned {
            Ok(handle) => {
                give.send(enc)
                    .expect("the encoder thread waits for its encoder");
                Pipeline::Thread(Worker {
                    to_encode: Some(to_encode),
                    recycled,
                    abandon,
                    handle: Some(handle),
                })
            }
            Err(_) => Pipeline::Inline(enc),
        }
    }

    /// Encode the chunk in `recs`, leaving `recs` empty (with capacity for
    /// `capacity` records) for the next one.
    pub(super) fn send(&mut self, recs: &mut Vec<u64>, capacity: usize) -> Result<()> {
        match self {
            Pipeline::Inline(enc) => {
                let r = enc.chunk(recs);
                recs.clear();
                r
            }
            Pipeline::Thread(w) => {
                let mut next = w
                    .recycled
                    .try_recv()
                    .unwrap_or_else(|_| Vec::with_capacity(capacity));
                next.clear();
                let full = std::mem::replace(recs, next);
                let sent = w
                    .to_encode
                    .as_ref()
                    .map(|tx| tx.send(full).is_ok())
                    .unwrap_or(false);
                if sent {
                    return Ok(());
                }
                // The thread stopped early, so it failed: its error says why.
                match self.take_encoder() {
                    Err(e) => Err(e),
                    Ok(_) => Err(Error::input(
                        "internal: the trace encoder thread stopped early",
                    )),
                }
            }
            Pipeline::Gone => Err(Error::input(
                "internal: trace chunk sent after the encoder was taken back",
            )),
        }
    }

    /// Wait for every sent chunk to be written and take the encoder back.
    pub(super) fn take_encoder(&mut self) -> Result<Encoder> {
        match std::mem::replace(self, Pipeline::Gone) {
            Pipeline::Inline(enc) => Ok(enc),
            Pipeline::Thread(mut w) => {
                drop(w.to_encode.take()); // ends the thread's loop once the queue is empty
                match w.handle.take().map(JoinHandle::join) {
                    Some(Ok((enc, Ok(())))) => Ok(enc),
                    Some(Ok((_, Err(e)))) => Err(e),
                    _ => Err(Error::input("internal: the trace encoder thread panicked")),
                }
            }
            Pipeline::Gone => Err(Error::input(
                "internal: the trace encoder was already taken back",
            )),
        }
    }
}

impl Drop for Worker {
    /// An abandoned trace (an error, a cancellation): the thread drops what
    /// is queued and ends before the writer removes its temporary file.
    fn drop(&mut self) {
        self.abandon.store(true, Ordering::Relaxed);
        drop(self.to_encode.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
