//! The `.hst` trace format: a versioned binary container for access streams.
//!
//! Layout in one breath (the byte-exact description is `docs/trace-format.md`):
//!
//! ```text
//! file    = preamble header_json frame* footer trailer
//! preamble= magic[8] version:u16 flags:u16 header_len:u32 preamble_crc:u32 (20 bytes)
//! frame   = "CHNK" records:u32 payload_len:u32 crc:u32  zstd_payload      (16 + payload)
//! payload = zstd(8 byte planes of the chunk's records)  (version 2; see `planes.rs`)
//! footer  = "FOOT" json_len:u32 json_crc:u32 reserved:u32  summary_json
//! trailer = footer_offset:u64 end_magic[8]                                  (16 bytes)
//! ```
//!
//! Every integer is little-endian. Chunks are independent zstd frames so a reader
//! holds one chunk at a time (bounded memory whatever the trace length), and each
//! carries a CRC-32 of its uncompressed bytes so corruption is caught where it is.
//! The footer holds the [`TraceSummary`] (counts, markers) and the trailer points to
//! it, so `summarize(path, false)` reads a few hundred bytes instead of the trace.
//!
//! Since version 3 the preamble's checksum covers the version, flags and
//! header length as well as the header JSON. Before, it covered the JSON
//! only, so a version field changed to another legal version (2 to 1) went
//! unnoticed and every chunk decoded, checksums and all, as garbage. Files of
//! versions 1 and 2 are therefore refused by [`HstReader::open`] with one line
//! naming `hugescope trace convert`, which reads them through
//! [`HstReader::open_legacy`] (the user vouching for the version) and writes
//! version 3.

use std::fs::File;
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::encode::{Encoder, Pipeline};
use super::readahead::{for_each_chunk, ChunkSource};
use super::summary::Tally;
use super::{Access, AccessSink, TraceHeader, ADDR_MASK, MAX_CPUS, MAX_PIDS};
use crate::error::{Error, Result};

// The container's fixed bytes and the footer's summary, under the names the
// rest of hugescope has always used for them (`hst::MAGIC`, `hst::TraceSummary`).
pub use super::frames::{
    Layout, CHUNK_TAG, END_MAGIC, FOOTER_TAG, FRAME_HEADER_LEN, LAST_UNCHECKED_VERSION, MAGIC, MIN_READ_VERSION, PREAMBLE_LEN, TRAILER_LEN, VERSION,
};
pub use super::summary::{Marker, TraceSummary};
use super::frames::preamble_crc;

/// Records per chunk written by default: 512 KiB uncompressed, large enough that
/// per-chunk costs (a syscall, a checksum finalisation, zstd frame setup) vanish,
/// small enough to stay in L2/L3 while it is decoded.
pub const DEFAULT_CHUNK_RECORDS: usize = 1 << 16;
/// Hard cap on records per chunk (8 MiB uncompressed). Readers reject larger
/// counts, so a corrupt count field cannot make them allocate gigabytes.
pub const MAX_CHUNK_RECORDS: usize = 1 << 20;
/// Caps on the JSON sections, for the same reason.
pub const MAX_HEADER_BYTES: usize = 16 << 20;
pub const MAX_FOOTER_BYTES: usize = 64 << 20;


fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

// ---------------------------------------------------------------------------
// Writer
// ---------------------------------------------------------------------------

/// Streams accesses into a `.hst` file. The data goes to a hidden temporary file
/// next to the target and is renamed into place by [`HstWriter::finish`]; dropping
/// the writer without finishing deletes the temporary, so a crash or an error never
/// leaves a half-written trace under the final name.
///
/// This front half validates and packs records and cuts them into chunks; the
/// chunks are encoded and written by an [`Encoder`](super::encode), on this
/// thread or on a second one ([`HstWriter::with_encoder_thread`]); the file's
/// bytes are the same either way.
pub struct HstWriter {
    path: PathBuf,
    /// The file being written, named only when finished.
    staged: crate::output::Staged,
    pipeline: Pipeline,
    chunk_records: usize,
    /// Packed records of the chunk being filled.
    recs: Vec<u64>,
    /// Accesses written so far.
    count: u64,
    markers: Vec<Marker>,
    /// First error seen through the `AccessSink` interface (which cannot return
    /// one), or an I/O failure after which the file is inconsistent.
    deferred: Option<Error>,
    /// Set when an I/O error hit mid-chunk: later writes must not pretend success.
    broken: bool,
    finished: bool,
}

impl HstWriter {
    /// Start a trace at `path` (written under a temporary name until `finish`).
    pub fn create(path: impl AsRef<Path>, header: &TraceHeader) -> Result<HstWriter> {
        Self::create_with_layout(path, header, Layout::Planes)
    }

    /// Start a trace in a given chunk layout: `Layout::Records` writes a
    /// version-1 file (for tools that only read version 1).
    pub fn create_with_layout(path: impl AsRef<Path>, header: &TraceHeader, layout: Layout) -> Result<HstWriter> {
        Self::create_checked(path, header, layout, &[])
    }

    /// Start a trace after refusing targets that must not be replaced (see
    /// [`crate::output::check`]): a device, FIFO, directory or symbolic link,
    /// a file holding another kind of output, the same file as one of
    /// `inputs`, or an unwritable directory. Runs before any access is traced,
    /// so a long generation never fails at the end for its output.
    pub fn create_checked(
        path: impl AsRef<Path>,
        header: &TraceHeader,
        layout: Layout,
        inputs: &[&Path],
    ) -> Result<HstWriter> {
        let path = crate::output::check(path, Some(crate::output::Kind::Trace), inputs, false)?;
        if path.file_name().is_none() {
            return Err(Error::input(format!("{}: not a file path", path.display())));
        }
        let json = serde_json::to_vec(header).map_err(|e| {
            Error::input(format!(
                "{}: cannot encode the trace header: {e}",
                path.display()
            ))
        })?;
        if json.len() > MAX_HEADER_BYTES {
            return Err(Error::input(format!(
                "{}: trace header is {} bytes of JSON, more than the format's {} limit",
                path.display(),
                json.len(),
                MAX_HEADER_BYTES
            )));
        }

        // Unnamed until finished (crate::output::Staged): a SIGKILL mid-write
        // leaves no temporary file behind.
        let (staged, file) = crate::output::Staged::create(&path)?;
        let mut w = HstWriter {
            path: path.clone(),
            staged,
            pipeline: Pipeline::Gone,
            chunk_records: DEFAULT_CHUNK_RECORDS,
            recs: Vec::new(),
            count: 0,
            markers: Vec::new(),
            deferred: None,
            broken: false,
            finished: false,
        };
        // From here on an error drops `w`, which removes the temporary file.
        w.pipeline = Pipeline::Inline(Encoder::new(path, file, layout)?);
        let mut pre = [0u8; PREAMBLE_LEN as usize];
        pre[0..8].copy_from_slice(&MAGIC);
        pre[8..10].copy_from_slice(&layout.version().to_le_bytes());
        pre[10..12].copy_from_slice(&0u16.to_le_bytes());
        pre[12..16].copy_from_slice(&(json.len() as u32).to_le_bytes());
        // Version 1 (records, written only by tests of the old layout) keeps
        // its own checksum rule so that it is exactly the old format.
        let crc = if layout == Layout::Records { crc32fast::hash(&json) } else { preamble_crc(&pre, &json) };
        pre[16..20].copy_from_slice(&crc.to_le_bytes());
        if let Pipeline::Inline(enc) = &mut w.pipeline {
            enc.put(&pre)?;
            enc.put(&json)?;
        }
        w.recs.reserve_exact(w.chunk_records);
        Ok(w)
    }

    /// Records per chunk (clamped to 1..=`MAX_CHUNK_RECORDS`). Call before writing.
    pub fn with_chunk_records(mut self, n: usize) -> Self {
        self.chunk_records = n.clamp(1, MAX_CHUNK_RECORDS);
        if self.recs.capacity() < self.chunk_records {
            self.recs.reserve_exact(self.chunk_records - self.recs.len());
        }
        self
    }

    /// Encode and write chunks on a second thread (`on`), so that a generator
    /// feeding this writer only packs records; the file is byte for byte the
    /// one written without it. Call before writing.
    pub fn with_encoder_thread(mut self, on: bool) -> Self {
        if on {
            self.pipeline = std::mem::replace(&mut self.pipeline, Pipeline::Gone).threaded();
        }
        self
    }

    /// Append one access. An access that does not fit the record layout is
    /// rejected (and not written) with an error naming its index.
    #[inline]
    pub fn write(&mut self, a: Access) -> Result<()> {
        if self.broken {
            return Err(self.broken_error());
        }
        // Range check inline; only the failure path builds a message.
        if a.addr > ADDR_MASK || a.cpu as u32 >= MAX_CPUS || a.pid as u32 >= MAX_PIDS {
            let why = a.validate().err().unwrap_or_default();
            return Err(Error::input(format!(
                "{}: record {}: {}",
                self.path.display(),
                self.count,
                why
            )));
        }
        self.recs.push(a.pack());
        self.count += 1;
        if self.recs.len() >= self.chunk_records {
            self.flush_chunk()?;
        }
        Ok(())
    }

    /// Record a progress marker at the current record index.
    pub fn mark(&mut self, label: &str) {
        self.markers.push(Marker {
            index: self.count,
            label: label.to_string(),
        });
    }

    /// Accesses written so far.
    pub fn records(&self) -> u64 {
        self.count
    }

    /// Write the last chunk, the footer and the trailer, make the data durable and
    /// rename the file into place. Returns the footer's summary.
    pub fn finish(mut self) -> Result<TraceSummary> {
        if let Some(e) = self.deferred.take() {
            return Err(e); // Drop removes the temporary file.
        }
        if self.broken {
            return Err(self.broken_error());
        }
        if !self.recs.is_empty() {
            self.flush_chunk()?;
        }
        let mut enc = self.pipeline.take_encoder().inspect_err(|_| self.broken = true)?;
        let summary = enc.tally.summary(
            enc.chunks,
            enc.compressed_bytes,
            std::mem::take(&mut self.markers),
        );
        let json = serde_json::to_vec(&summary).map_err(|e| {
            Error::input(format!(
                "{}: cannot encode the trace footer: {e}",
                self.path.display()
            ))
        })?;
        if json.len() > MAX_FOOTER_BYTES {
            return Err(Error::input(format!(
                "{}: footer is {} bytes of JSON (too many markers?), more than the format's {} limit",
                self.path.display(),
                json.len(),
                MAX_FOOTER_BYTES
            )));
        }
        let footer_offset = enc.offset;
        let mut fh = [0u8; FRAME_HEADER_LEN as usize];
        fh[0..4].copy_from_slice(&FOOTER_TAG);
        fh[4..8].copy_from_slice(&(json.len() as u32).to_le_bytes());
        fh[8..12].copy_from_slice(&crc32fast::hash(&json).to_le_bytes());
        enc.put(&fh)?;
        enc.put(&json)?;
        let mut tr = [0u8; TRAILER_LEN as usize];
        tr[0..8].copy_from_slice(&footer_offset.to_le_bytes());
        tr[8..16].copy_from_slice(&END_MAGIC);
        enc.put(&tr)?;
        let file = enc.sync()?;
        self.staged.commit(&file)?;
        self.finished = true;
        Ok(summary)
    }

    fn broken_error(&self) -> Error {
        Error::input(format!(
            "{}: an earlier write failed; the trace is incomplete and will not be finished",
            self.path.display()
        ))
    }

    /// Hand the filled chunk to the encoder. A failure leaves a partial
    /// file: the writer is marked broken so it can never be finished into a
    /// valid-looking one.
    fn flush_chunk(&mut self) -> Result<()> {
        let r = self.pipeline.send(&mut self.recs, self.chunk_records);
        if r.is_err() {
            self.broken = true;
        }
        r
    }
}

impl Drop for HstWriter {
    fn drop(&mut self) {
        if !self.finished {
            // Stops an encoder thread and closes the file first; dropping
            // `staged` then removes a named temporary file, if there is one.
            self.pipeline = Pipeline::Gone;
        }
    }
}

impl AccessSink for HstWriter {
    #[inline]
    fn access(&mut self, a: Access) {
        if let Err(e) = self.write(a) {
            if self.deferred.is_none() {
                self.deferred = Some(e);
            }
        }
    }
    fn progress(&mut self, label: &str) {
        self.mark(label);
    }
}

// ---------------------------------------------------------------------------
// Reader
// ---------------------------------------------------------------------------

/// Streams a `.hst` file chunk by chunk; memory stays bounded by one chunk.
pub struct HstReader {
    path: PathBuf,
    file: File,
    file_len: u64,
    header: TraceHeader,
    /// Offset of the next frame to read.
    pos: u64,
    /// Footer read through the trailer at open, if the file has one.
    footer: Option<TraceSummary>,
    footer_offset: Option<u64>,
    markers: Vec<Marker>,
    layout: Layout,
    comp: Vec<u8>,
    /// Uncompressed payload of the current chunk (byte planes).
    raw: Vec<u8>,
    /// Decoded records of the current chunk (its first `count` entries; the
    /// buffer keeps the largest chunk's length so it is not re-zeroed).
    records: Vec<u64>,
    decompressor: zstd::bulk::Decompressor<'static>,
    seen_records: u64,
    seen_chunks: u64,
    seen_compressed: u64,
    done: bool,
    /// Told the records decoded so far out of the footer's count
    /// (`set_progress`; none by default).
    progress: crate::progress::ProgressHook,
}

impl HstReader {
    /// Open a trace: check the preamble and header, and read the footer if the
    /// trailer says there is one. A file without a trailer opens (its chunks can
    /// be streamed) but reading it to the end reports the truncation.
    pub fn open(path: impl AsRef<Path>) -> Result<HstReader> {
        Self::open_versions(path.as_ref(), false)
    }

    /// [`open`](Self::open) that also reads versions 1 and 2, whose preamble
    /// checksum does not cover the version field: the caller (`hugescope trace
    /// convert`) takes the version as the file states it.
    pub fn open_legacy(path: impl AsRef<Path>) -> Result<HstReader> {
        Self::open_versions(path.as_ref(), true)
    }

    fn open_versions(path: &Path, legacy: bool) -> Result<HstReader> {
        let path = path.to_path_buf();
        // A FIFO, socket or device is refused before anything is read
        // (crate::input): an .hst reader needs a seekable regular file.
        let mut file = crate::input::open(&path, "trace")?;
        let meta = file.metadata().map_err(|e| Error::io(&path, e))?;
        let file_len = meta.len();
        if file_len == 0 {
            return Err(Error::format(&path, 0, "empty file, not an .hst trace"));
        }

        let mut pre = [0u8; PREAMBLE_LEN as usize];
        let have = file_len.min(PREAMBLE_LEN) as usize;
        read_exact_at(&mut file, &path, 0, &mut pre[..have])?;
        let magic_len = have.min(8);
        if pre[..magic_len] != MAGIC[..magic_len] {
            let hint = if pre[..have.min(4)] == [0x28, 0xb5, 0x2f, 0xfd][..have.min(4)] {
                " (this looks like a bare zstd stream)"
            } else {
                ""
            };
            return Err(Error::format(
                &path,
                0,
                format!("wrong magic number: not an .hst trace{hint}"),
            ));
        }
        if have < PREAMBLE_LEN as usize {
            return Err(Error::format(
                &path,
                file_len,
                format!("truncated header: file ends after {file_len} bytes, the preamble alone is {PREAMBLE_LEN}"),
            ));
        }
        let version = le_u16(&pre, 8);
        if !(MIN_READ_VERSION..=VERSION).contains(&version) {
            return Err(Error::format(
                &path,
                8,
                format!("unsupported .hst version {version} (this build reads version {VERSION}, and {MIN_READ_VERSION} to {LAST_UNCHECKED_VERSION} through 'hugescope trace convert')"),
            ));
        }
        if version <= LAST_UNCHECKED_VERSION && !legacy {
            return Err(Error::format(
                &path,
                8,
                format!("format version {version}, written by an older hugescope: its preamble has no checksum over the version, so an edited version cannot be told from a real one; convert it once with 'hugescope trace convert {} -o NEW.hst'",
                        crate::error::shown_path(&path)),
            ));
        }
        let flags = le_u16(&pre, 10);
        if flags != 0 {
            return Err(Error::format(
                &path,
                10,
                format!("unknown header flags {flags:#06x} (version {version} defines none)"),
            ));
        }
        let header_len = le_u32(&pre, 12) as u64;
        let header_crc = le_u32(&pre, 16);
        if header_len > MAX_HEADER_BYTES as u64 {
            return Err(Error::format(
                &path,
                12,
                format!("header length {header_len} exceeds the {MAX_HEADER_BYTES}-byte limit (corrupt file?)"),
            ));
        }
        if PREAMBLE_LEN + header_len > file_len {
            return Err(Error::format(
                &path,
                file_len,
                format!("truncated header: it declares {header_len} bytes of JSON but the file ends at byte {file_len}"),
            ));
        }
        let mut json = vec![0u8; header_len as usize];
        read_exact_at(&mut file, &path, PREAMBLE_LEN, &mut json)?;
        let crc = if version <= LAST_UNCHECKED_VERSION { crc32fast::hash(&json) } else { preamble_crc(&pre, &json) };
        if crc != header_crc {
            return Err(Error::format(
                &path,
                8,
                "preamble checksum mismatch: the version, flags, header length or header were changed (corrupt file)",
            ));
        }
        let header: TraceHeader = serde_json::from_slice(&json)
            .map_err(|e| Error::format(&path, PREAMBLE_LEN, format!("invalid header JSON: {e}")))?;
        // A valid checksum says the header is what the writer wrote, not that
        // it is sane: its counts size per-cpu and per-process state later.
        header
            .check()
            .map_err(|m| Error::format(&path, PREAMBLE_LEN, format!("invalid header field {m}")))?;
        let data_start = PREAMBLE_LEN + header_len;

        let decompressor = zstd::bulk::Decompressor::new().map_err(|e| Error::io(&path, e))?;
        let mut r = HstReader {
            path,
            file,
            file_len,
            header,
            pos: data_start,
            footer: None,
            footer_offset: None,
            markers: Vec::new(),
            layout: Layout::of_version(version),
            comp: Vec::new(),
            raw: Vec::new(),
            records: Vec::new(),
            decompressor,
            seen_records: 0,
            progress: Default::default(),
            seen_chunks: 0,
            seen_compressed: 0,
            done: false,
        };
        r.read_trailer(data_start)?;
        Ok(r)
    }

    pub fn header(&self) -> &TraceHeader {
        &self.header
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Progress markers from the footer (empty if the file has no footer).
    pub fn markers(&self) -> &[Marker] {
        &self.markers
    }

    /// The footer's summary, if the file has a trailer (read at open).
    pub fn summary(&self) -> Option<&TraceSummary> {
        self.footer.as_ref()
    }

    /// Decode the next chunk. `None` once the footer is reached and the stream
    /// has been cross-checked against it.
    pub fn next_chunk(&mut self) -> Result<Option<&[u64]>> {
        if self.done {
            return Ok(None);
        }
        // Every pass over a trace comes through here: the cancellation point
        // of simulate, profile, reuse, merge, verify and bench.
        crate::cancel::check()?;
        let at = self.pos;
        let remaining = self.file_len - at;
        if remaining == 0 {
            return Err(self.err(
                at,
                "file ends without a footer (truncated file, or the writer never finished)",
            ));
        }
        if remaining < FRAME_HEADER_LEN {
            return Err(self.err(
                self.file_len,
                format!("truncated frame header at byte {at}: only {remaining} bytes left, need {FRAME_HEADER_LEN}"),
            ));
        }
        let mut fh = [0u8; FRAME_HEADER_LEN as usize];
        read_exact_at(&mut self.file, &self.path, at, &mut fh)?;
        let tag = [fh[0], fh[1], fh[2], fh[3]];
        if tag == FOOTER_TAG {
            self.finish_stream(at, &fh)?;
            return Ok(None);
        }
        if tag != CHUNK_TAG {
            return Err(self.err(
                at,
                format!("expected a chunk or footer frame, found tag {:02x?}", tag),
            ));
        }
        let count = le_u32(&fh, 4) as u64;
        let clen = le_u32(&fh, 8) as u64;
        let crc = le_u32(&fh, 12);
        if count == 0 || count > MAX_CHUNK_RECORDS as u64 {
            return Err(self.err(
                at + 4,
                format!("chunk record count {count} outside 1..={MAX_CHUNK_RECORDS} (corrupt chunk header)"),
            ));
        }
        let raw_len = (count * 8) as usize;
        let bound = zstd::zstd_safe::compress_bound(raw_len) as u64;
        if clen == 0 || clen > bound {
            return Err(self.err(
                at + 8,
                format!("chunk payload length {clen} impossible for {count} records (max {bound}; corrupt chunk header)"),
            ));
        }
        let payload_at = at + FRAME_HEADER_LEN;
        if clen > self.file_len - payload_at {
            return Err(self.err(
                self.file_len,
                format!(
                    "truncated chunk at byte {at}: payload of {clen} bytes but only {} left",
                    self.file_len - payload_at
                ),
            ));
        }
        self.comp.resize(clen as usize, 0);
        read_exact_at(&mut self.file, &self.path, payload_at, &mut self.comp)?;

        // The zstd frame header records its content size: a disagreement with the
        // chunk's count is named as such rather than as a generic decode failure.
        if let Ok(Some(declared)) = zstd::zstd_safe::get_frame_content_size(&self.comp) {
            if declared != raw_len as u64 {
                return Err(self.err(
                    payload_at,
                    format!(
                        "record count mismatch in chunk at byte {at}: header says {count} records, payload holds {declared} bytes"
                    ),
                ));
            }
        }
        // Decompress into a buffer of exactly the declared size: a payload that
        // inflates beyond it fails instead of growing memory. Version 1 holds
        // whole records, so it decompresses straight into the record buffer.
        let count = count as usize;
        if self.records.len() < count {
            self.records.resize(count, 0);
        }
        let layout = self.layout;
        if layout == Layout::Planes && self.raw.len() < raw_len {
            self.raw.resize(raw_len, 0);
        }
        let bytes: &mut [u8] = match layout {
            Layout::Planes => &mut self.raw[..raw_len],
            Layout::Records => bytemuck::cast_slice_mut(&mut self.records[..count]),
        };
        let got = match self.decompressor.decompress_to_buffer(&self.comp[..], bytes) {
            Ok(n) => n,
            Err(e) => {
                return Err(self.err(
                    payload_at,
                    format!("chunk at byte {at} does not decompress ({e}): corrupt payload"),
                ))
            }
        };
        if got != raw_len {
            return Err(self.err(
                payload_at,
                format!("record count mismatch in chunk at byte {at}: header says {count} records, payload holds {got} bytes"),
            ));
        }
        let payload: &[u8] = match layout {
            Layout::Planes => &self.raw[..raw_len],
            Layout::Records => bytemuck::cast_slice(&self.records[..count]),
        };
        let actual = crc32fast::hash(payload);
        if actual != crc {
            return Err(self.err(
                payload_at,
                format!("checksum mismatch in chunk at byte {at} (stored {crc:#010x}, computed {actual:#010x}): corrupt data"),
            ));
        }
        match layout {
            Layout::Planes => super::planes::from_planes(&self.raw[..raw_len], &mut self.records[..count]),
            // Stored little-endian; a no-op on little-endian hosts.
            Layout::Records => {
                for r in self.records[..count].iter_mut() {
                    *r = u64::from_le(*r);
                }
            }
        }
        self.pos = payload_at + clen;
        let before = self.seen_records;
        self.seen_records += count as u64;
        self.progress.advanced(before, self.seen_records, self.footer.as_ref().map_or(0, |f| f.accesses));
        self.seen_chunks += 1;
        self.seen_compressed += clen;
        Ok(Some(&self.records[..count]))
    }

    /// Report the records decoded so far to `hook` as the reader goes (a
    /// progress bar over a whole pass: simulate, static).
    pub fn set_progress(&mut self, hook: crate::progress::ProgressHook) {
        self.progress = hook;
    }

    /// Records decoded so far.
    pub fn records_decoded(&self) -> u64 {
        self.seen_records
    }

    /// Call `f` on every remaining access; returns how many.
    pub fn for_each(&mut self, mut f: impl FnMut(Access)) -> Result<u64> {
        let mut n = 0u64;
        for_each_chunk(self, |chunk| {
            for &r in chunk {
                f(Access::unpack(r));
            }
            n += chunk.len() as u64;
            Ok(())
        })?;
        Ok(n)
    }

    /// Send every remaining access to `sink`, calling `sink.progress(label)` at each
    /// marker's position (before the record at `index`). Returns the access count.
    pub fn feed<S: AccessSink + ?Sized>(&mut self, sink: &mut S) -> Result<u64> {
        // A copy, because the chunk borrows the reader; markers are few.
        let markers = self.markers.clone();
        let mut mi = markers.partition_point(|m| m.index < self.seen_records);
        let mut idx = self.seen_records;
        let start = idx;
        for_each_chunk(self, |chunk| {
            let mut rest = chunk;
            loop {
                while mi < markers.len() && markers[mi].index <= idx {
                    sink.progress(&markers[mi].label);
                    mi += 1;
                }
                if rest.is_empty() {
                    break;
                }
                let take = match markers.get(mi) {
                    Some(m) => ((m.index - idx) as usize).min(rest.len()),
                    None => rest.len(),
                };
                for &r in &rest[..take] {
                    sink.access(Access::unpack(r));
                }
                idx += take as u64;
                rest = &rest[take..];
            }
            Ok(())
        })?;
        // Markers at the very end (index == total). A successful stream always had
        // its footer (and so its markers) at open: a footer first met while
        // streaming means the trailer was bad, and that is reported as an error.
        while mi < markers.len() {
            sink.progress(&markers[mi].label);
            mi += 1;
        }
        Ok(idx - start)
    }

    fn err(&self, offset: u64, msg: impl Into<String>) -> Error {
        Error::format(&self.path, offset, msg)
    }

    /// Read the trailer and, if present, the footer it points to.
    fn read_trailer(&mut self, data_start: u64) -> Result<()> {
        if self.file_len < data_start + FRAME_HEADER_LEN + TRAILER_LEN {
            return Ok(()); // too short to hold a footer: streaming reports it
        }
        let mut tr = [0u8; TRAILER_LEN as usize];
        let tr_at = self.file_len - TRAILER_LEN;
        read_exact_at(&mut self.file, &self.path, tr_at, &mut tr)?;
        if tr[8..16] != END_MAGIC {
            return Ok(()); // no trailer: truncated, reported when streaming ends
        }
        let foff = le_u64(&tr, 0);
        if foff < data_start || foff > tr_at - FRAME_HEADER_LEN {
            return Err(self.err(
                tr_at,
                format!("trailer points to a footer at byte {foff}, outside the data ({data_start}..{tr_at})"),
            ));
        }
        let mut fh = [0u8; FRAME_HEADER_LEN as usize];
        read_exact_at(&mut self.file, &self.path, foff, &mut fh)?;
        let summary = self.read_footer_frame(foff, &fh)?;
        self.markers = summary.markers.clone();
        self.footer = Some(summary);
        self.footer_offset = Some(foff);
        Ok(())
    }

    /// Parse and validate the footer frame at `at` whose 16-byte header is `fh`;
    /// also checks that the trailer follows it and ends the file.
    fn read_footer_frame(&mut self, at: u64, fh: &[u8; 16]) -> Result<TraceSummary> {
        if fh[0..4] != FOOTER_TAG {
            return Err(self.err(
                at,
                "trailer does not point to a footer frame (corrupt trailer)",
            ));
        }
        let len = le_u32(fh, 4) as u64;
        let crc = le_u32(fh, 8);
        if le_u32(fh, 12) != 0 {
            return Err(self.err(at + 12, "reserved footer field is not zero"));
        }
        if len > MAX_FOOTER_BYTES as u64 {
            return Err(self.err(
                at + 4,
                format!("footer length {len} exceeds the {MAX_FOOTER_BYTES}-byte limit"),
            ));
        }
        let json_at = at + FRAME_HEADER_LEN;
        let end = json_at + len;
        if end + TRAILER_LEN > self.file_len {
            return Err(self.err(
                self.file_len,
                format!("truncated footer: {len} bytes of JSON at byte {json_at} plus the trailer do not fit in the file"),
            ));
        }
        if end + TRAILER_LEN != self.file_len {
            return Err(self.err(
                end,
                format!(
                    "{} unexpected bytes between the footer and the trailer",
                    self.file_len - TRAILER_LEN - end
                ),
            ));
        }
        let mut json = vec![0u8; len as usize];
        read_exact_at(&mut self.file, &self.path, json_at, &mut json)?;
        if crc32fast::hash(&json) != crc {
            return Err(self.err(json_at, "footer checksum mismatch (corrupt footer)"));
        }
        let s: TraceSummary = serde_json::from_slice(&json)
            .map_err(|e| self.err(json_at, format!("invalid footer JSON: {e}")))?;
        let bad = |m: String| Err(self.err(json_at, format!("inconsistent footer: {m}")));
        if s.reads.checked_add(s.writes) != Some(s.accesses) {
            return bad(format!(
                "{} reads + {} writes != {} accesses",
                s.reads, s.writes, s.accesses
            ));
        }
        if s.per_cpu.len() > MAX_CPUS as usize || s.per_pid.len() > MAX_PIDS as usize {
            return bad("more cpu or pid counters than the record layout allows".into());
        }
        let sum = |v: &[u64]| v.iter().try_fold(0u64, |a, &b| a.checked_add(b));
        if sum(&s.per_cpu) != Some(s.accesses) || sum(&s.per_pid) != Some(s.accesses) {
            return bad("per-cpu or per-pid counts do not add up to the access count".into());
        }
        if s.chunks > s.accesses {
            return bad(format!("{} chunks for {} accesses", s.chunks, s.accesses));
        }
        let mut last = 0u64;
        for m in &s.markers {
            if m.index < last || m.index > s.accesses {
                return bad(format!(
                    "marker {:?} at index {} out of order or past the end",
                    m.label, m.index
                ));
            }
            last = m.index;
        }
        Ok(s)
    }

    /// The footer frame was met while streaming: validate it and the trailer, and
    /// check that the chunks seen match its counts.
    fn finish_stream(&mut self, at: u64, fh: &[u8; 16]) -> Result<()> {
        if let Some(foff) = self.footer_offset {
            if foff != at {
                return Err(self.err(
                    at,
                    format!("footer frame found at byte {at} but the trailer says {foff}"),
                ));
            }
        }
        let summary = match self.footer.take() {
            Some(s) => s,
            None => {
                // No valid trailer was found at open: read the footer now so the
                // error says what exactly is wrong.
                let s = self.read_footer_frame(at, fh)?;
                let len = le_u32(fh, 4) as u64;
                let tr_at = at + FRAME_HEADER_LEN + len;
                let mut tr = [0u8; TRAILER_LEN as usize];
                read_exact_at(&mut self.file, &self.path, tr_at, &mut tr)?;
                if tr[8..16] != END_MAGIC {
                    return Err(self.err(tr_at + 8, "wrong trailer magic (corrupt trailer)"));
                }
                if le_u64(&tr, 0) != at {
                    return Err(self.err(tr_at, "trailer does not point to the footer"));
                }
                self.markers = s.markers.clone();
                s
            }
        };
        let mismatch = if summary.accesses != self.seen_records {
            Some(format!(
                "footer says {} accesses, the chunks hold {}",
                summary.accesses, self.seen_records
            ))
        } else if summary.chunks != self.seen_chunks {
            Some(format!(
                "footer says {} chunks, the file holds {}",
                summary.chunks, self.seen_chunks
            ))
        } else if summary.compressed_bytes != self.seen_compressed {
            Some(format!(
                "footer says {} compressed bytes, the chunks hold {}",
                summary.compressed_bytes, self.seen_compressed
            ))
        } else {
            None
        };
        self.footer = Some(summary);
        self.footer_offset = Some(at);
        if let Some(m) = mismatch {
            return Err(self.err(at, m));
        }
        self.done = true;
        Ok(())
    }
}

// A pass over the reader may decode ahead of its consumer (`readahead.rs`).
impl ChunkSource for HstReader {
    fn next_chunk(&mut self) -> Result<Option<&[u64]>> {
        HstReader::next_chunk(self)
    }
    fn records_decoded(&self) -> u64 {
        self.seen_records
    }
    fn records_total(&self) -> u64 {
        self.summary().map_or(0, |s| s.accesses)
    }
    fn progress_mut(&mut self) -> &mut crate::progress::ProgressHook {
        &mut self.progress
    }
}

impl std::fmt::Debug for HstReader {
    // Manual: the buffers and the zstd context are noise in a debug print.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HstReader")
            .field("path", &self.path)
            .field("workload", &self.header.workload)
            .field("file_len", &self.file_len)
            .field("pos", &self.pos)
            .field("records_read", &self.seen_records)
            .field("has_footer", &self.footer.is_some())
            .finish()
    }
}

impl std::fmt::Debug for HstWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HstWriter")
            .field("path", &self.path)
            .field("records", &self.count)
            .finish()
    }
}

/// Read exactly `buf.len()` bytes at `offset`; a short file is a format error
/// (the file shrank, or a length check upstream was wrong), not an I/O error.
fn read_exact_at(file: &mut File, path: &Path, offset: u64, buf: &mut [u8]) -> Result<()> {
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| Error::io(path, e))?;
    match file.read_exact(buf) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::UnexpectedEof => Err(Error::format(
            path,
            offset,
            format!("unexpected end of file while reading {} bytes", buf.len()),
        )),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// What identifies a trace's content without decoding it: the file's
/// length and two hashes (CRC-32 and 64-bit FNV-1a) over its preamble and
/// header, every frame header (each carries the CRC-32 of its chunk's
/// records, so a changed record changes it) and the footer. Reads only the
/// frame headers (16 bytes per chunk), so it costs a few milliseconds even
/// for billions of accesses. The results cache keys reference runs on it.
pub fn content_identity(path: impl AsRef<Path>) -> Result<String> {
    let mut r = HstReader::open(path)?;
    let Some(foot) = r.footer_offset else {
        return Err(Error::format(&r.path, r.file_len, "no footer: the file is truncated or the writer never finished"));
    };
    let mut crc = crc32fast::Hasher::new();
    let mut fnv = crate::fnv::START;
    let mut add = |bytes: &[u8]| {
        crc.update(bytes);
        fnv = crate::fnv::update(fnv, bytes);
    };
    let mut head = vec![0u8; r.pos as usize];
    read_exact_at(&mut r.file, &r.path, 0, &mut head)?;
    add(&head);
    let mut at = r.pos;
    let mut fh = [0u8; FRAME_HEADER_LEN as usize];
    while at < foot {
        crate::cancel::check()?;
        read_exact_at(&mut r.file, &r.path, at, &mut fh)?;
        if fh[0..4] != CHUNK_TAG {
            return Err(r.err(at, format!("expected a chunk frame, found tag {:02x?}", &fh[0..4])));
        }
        add(&fh);
        at += FRAME_HEADER_LEN + le_u32(&fh, 8) as u64;
    }
    let mut tail = vec![0u8; (r.file_len - foot) as usize];
    read_exact_at(&mut r.file, &r.path, foot, &mut tail)?;
    add(&tail);
    Ok(format!("{}:{:08x}:{fnv:016x}", r.file_len, crc.finalize()))
}

/// Header and summary of a trace. `verify = false` reads only the footer (fast,
/// no decompression); `verify = true` decodes every chunk, recomputes the summary
/// and reports any disagreement with the footer.
pub fn summarize(path: impl AsRef<Path>, verify: bool) -> Result<(TraceHeader, TraceSummary)> {
    let mut r = HstReader::open(path)?;
    if !verify {
        return match r.footer.take() {
            Some(s) => Ok((r.header, s)),
            None => Err(Error::format(
                &r.path,
                r.file_len,
                "no footer: the file is truncated or the writer never finished",
            )),
        };
    }
    let mut t = Tally::new();
    while let Some(chunk) = r.next_chunk()? {
        for &x in chunk {
            t.add_packed(x);
        }
    }
    let footer = match r.footer.take() {
        Some(s) => s,
        None => return Err(Error::format(&r.path, r.file_len, "no footer")),
    };
    let computed = t.summary(r.seen_chunks, r.seen_compressed, footer.markers.clone());
    if computed != footer {
        let at = r.footer_offset.unwrap_or(r.file_len);
        let what = [
            ("reads", computed.reads != footer.reads),
            ("writes", computed.writes != footer.writes),
            ("per_cpu", computed.per_cpu != footer.per_cpu),
            ("per_pid", computed.per_pid != footer.per_pid),
            ("min_addr", computed.min_addr != footer.min_addr),
            ("max_addr", computed.max_addr != footer.max_addr),
        ]
        .iter()
        .filter(|(_, differs)| *differs)
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ");
        return Err(Error::format(
            &r.path,
            at,
            format!("footer disagrees with the records ({what})"),
        ));
    }
    Ok((r.header, footer))
}

/// Read a whole trace into memory (small traces and tests).
pub fn read_all(path: impl AsRef<Path>) -> Result<(TraceHeader, Vec<Access>)> {
    let mut r = HstReader::open(path)?;
    // The footer count is file content: cap the up-front reservation so a corrupt
    // count cannot trigger a huge allocation; the Vec grows normally past it.
    let hint = r.footer.as_ref().map_or(0, |s| s.accesses.min(1 << 22)) as usize;
    let mut v = Vec::with_capacity(hint);
    r.for_each(|a| v.push(a))?;
    Ok((r.header, v))
}
