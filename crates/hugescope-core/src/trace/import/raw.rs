//! The record file written by hugescope's compiler runtime
//! (`tracer/hugescope_trace.c`) and the metadata file beside it.
//!
//! Records file: the 8-byte magic `HSTRAW1\n`, then little-endian `u64`
//! records: bits 0-47 address, 48-55 thread number (the trace's cpu id),
//! 56-58 log2 of the access size (0-4: 1 to 16 bytes), 63 store.
//!
//! Metadata file (text): `/proc/self/maps` snapshots, each introduced by a
//! line `# maps`, and `# KEY VALUE` lines: `buffer START END` (hex; the
//! runtime's own buffers, left out of the regions), `threads N`, `seen N`
//! (accesses seen including skipped ones), `exe PATH`, `truncated disk BYTES`
//! (recording stopped to keep BYTES of the file system free), `alloc CALL
//! SIZE START RET...` (an allocation site, `sites.rs`).

use std::io::{BufReader, Read};
use std::path::Path;

use super::maps::{self, MapEntry};
use super::sites;
use crate::error::{Error, Result};
use crate::trace::hst::{HstWriter, Layout, TraceSummary};
use crate::trace::{Access, TraceHeader, MAX_CPUS};

pub const MAGIC: &[u8; 8] = b"HSTRAW1\n";

/// What the metadata file says.
#[derive(Debug, Default)]
pub struct Meta {
    pub snapshots: Vec<Vec<MapEntry>>,
    pub buffers: Vec<(u64, u64)>,
    pub threads: Option<u32>,
    pub seen: Option<u64>,
    pub exe: Option<String>,
    /// The runtime stopped writing records because the disk was nearly full.
    pub truncated: bool,
    /// Allocation sites, in the order the program allocated.
    pub allocs: Vec<sites::AllocEvent>,
}

pub fn read_meta(path: &Path) -> Result<Meta> {
    let text = crate::input::read_text(path, "raw trace's metadata file", crate::input::MAX_TEXT_BYTES)?;
    let mut m = Meta::default();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            let (k, v) = rest.split_once(' ').unwrap_or((rest, ""));
            match k {
                "maps" => m.snapshots.push(Vec::new()),
                "buffer" => {
                    if let Some((s, e)) = v.split_once(' ') {
                        if let (Ok(s), Ok(e)) = (u64::from_str_radix(s, 16), u64::from_str_radix(e, 16)) {
                            m.buffers.push((s, e));
                        }
                    }
                }
                // Written at every new thread and at exit: the largest wins.
                "threads" => m.threads = m.threads.max(v.parse().ok()),
                "seen" => m.seen = v.parse().ok(),
                "exe" => m.exe = Some(v.to_string()),
                "truncated" => m.truncated = true,
                "alloc" => m.allocs.extend(sites::parse_alloc(v)),
                _ => {}
            }
        } else if let (Some(e), Some(s)) = (maps::parse_line(line), m.snapshots.last_mut()) {
            s.push(e);
        }
    }
    Ok(m)
}

#[inline]
pub fn decode(r: u64) -> Access {
    Access {
        addr: r & crate::trace::ADDR_MASK,
        cpu: ((r >> 48) & 0xff) as u16,
        pid: 0,
        write: r >> 63 != 0,
    }
}

/// Convert the runtime's record file `raw` and metadata `meta` into a trace.
/// `header` gives the workload name and parameters; regions (with their kinds)
/// and the cpu count are filled in here.
pub fn convert(raw: &Path, meta: &Path, output: &Path, mut header: TraceHeader) -> Result<TraceSummary> {
    let m = read_meta(meta)?;
    let regions = maps::regions(&m.snapshots, &m.buffers);
    let regions = sites::carve(regions, sites::sites(&m.allocs, &m.snapshots, m.exe.as_deref()));
    if m.truncated {
        header.params.insert("truncated".into(), "disk space: recording stopped to keep the file system's reserve free".into());
    }
    if let Some(seen) = m.seen {
        header.params.insert("accesses_seen".into(), seen.into());
    }
    header.regions = regions;
    header.cpus = m.threads.unwrap_or(1).clamp(1, MAX_CPUS);
    let f = crate::input::open(raw, "raw trace")?;
    let mut r = BufReader::with_capacity(1 << 20, f);
    let mut magic = [0u8; 8];
    r.read_exact(&mut magic).map_err(|_| Error::format(raw, 0, "shorter than the 8-byte magic"))?;
    if &magic != MAGIC {
        return Err(Error::format(raw, 0, "not a hugescope runtime record file (wrong magic)"));
    }
    let mut w = HstWriter::create_checked(output, &header, Layout::Planes, &[raw, meta])?;
    let mut buf = vec![0u8; 1 << 20];
    let mut offset = 8u64;
    let mut carry = 0usize;
    loop {
        let n = r.read(&mut buf[carry..]).map_err(|e| Error::io(raw, e))?;
        if n == 0 {
            break;
        }
        let have = carry + n;
        let whole = have / 8 * 8;
        for (i, rec) in buf[..whole].chunks_exact(8).enumerate() {
            // Threads past 255 share cpu ids (the runtime wraps them).
            let a = decode(u64::from_le_bytes(rec.try_into().unwrap()));
            if a.cpu as u32 >= header.cpus {
                return Err(Error::format(
                    raw,
                    offset + 8 * i as u64,
                    format!("record of thread {} but the metadata lists {} thread(s)", a.cpu, header.cpus),
                ));
            }
            w.write(a)?;
        }
        offset += whole as u64;
        buf.copy_within(whole..have, 0);
        carry = have - whole;
        crate::cancel::check()?;
    }
    if carry != 0 {
        return Err(Error::format(raw, offset, format!("ends inside a record ({carry} of 8 bytes)")));
    }
    w.finish()
}
