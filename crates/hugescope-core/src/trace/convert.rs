//! `hugescope trace convert`: rewrite a trace of an older format version as the
//! current one. Versions 1 and 2 have no checksum over their version field
//! (`hst.rs`), so the reader refuses them unless asked; converting once, with
//! the user vouching for the file, gives a file every command reads. Records,
//! markers (progress points, frees, populates, contents) and the header are
//! carried over unchanged; only the container changes.

use std::path::Path;

use super::hst::{HstReader, HstWriter, Layout, TraceSummary};
use super::summary::Tally;
use super::Access;
use crate::{Error, Result};

/// Convert `input` (any readable version) into a version-`hst::VERSION` trace at
/// `output` (checked and written atomically like every output).
pub fn convert(input: &Path, output: &Path) -> Result<TraceSummary> {
    let mut r = HstReader::open_legacy(input)?;
    let header = r.header().clone();
    let markers = r.markers().to_vec();
    let footer = r.summary().cloned();
    let mut tally = Tally::new();
    let mut w = HstWriter::create_checked(output, &header, Layout::Planes, &[input])?;
    let mut next = markers.iter().peekable();
    let mut index = 0u64;
    while let Some(chunk) = r.next_chunk()? {
        for &rec in chunk {
            while let Some(m) = next.next_if(|m| m.index <= index) {
                w.mark(&m.label);
            }
            tally.add_packed(rec);
            w.write(Access::unpack(rec))?;
            index += 1;
        }
    }
    for m in next {
        w.mark(&m.label);
    }
    // A legacy version field is not checksummed: one edited from 2 to 1 (or
    // back) decodes every chunk in the other layout, and the chunk checksums
    // (over the stored bytes) still pass. The footer's counts, written from
    // the real records, do not: checked before the new file is committed.
    if let Some(f) = footer {
        let c = tally.summary(0, 0, Vec::new());
        let same = (c.accesses, c.writes, &c.per_cpu, &c.per_pid, c.min_addr, c.max_addr)
            == (f.accesses, f.writes, &f.per_cpu, &f.per_pid, f.min_addr, f.max_addr);
        if !same {
            return Err(Error::format(
                input,
                8,
                "the records do not match the footer's counts as this version decodes them (an edited version field?); not converted",
            ));
        }
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::hst::read_all;
    use crate::trace::{AccessSink, Region, TraceHeader};

    #[test]
    fn a_version_1_trace_converts_to_the_same_records_and_markers() {
        let d = tempfile::tempdir().unwrap();
        let (old, new) = (d.path().join("v1.hst"), d.path().join("v3.hst"));
        let mut h = TraceHeader::new("t");
        h.regions.push(Region::new("data", 0x1000_0000, 1 << 21));
        let mut w = HstWriter::create_with_layout(&old, &h, Layout::Records).unwrap().with_chunk_records(3);
        w.mark("start");
        for i in 0..10u64 {
            if i == 4 {
                w.free(0, 0x1000_0000, 0x1000);
            }
            w.write(Access::read(0x1000_0000 + i * 64).on_cpu((i % 2) as u16)).unwrap();
        }
        w.mark("end");
        w.finish().unwrap();
        let e = HstReader::open(&old).err().unwrap().to_string();
        assert!(e.contains("format version 1") && e.contains("trace convert"), "{e}");
        let s = convert(&old, &new).unwrap();
        assert_eq!(s.accesses, 10);
        let (a, b) = (HstReader::open_legacy(&old).unwrap(), HstReader::open(&new).unwrap());
        assert_eq!(a.markers(), b.markers());
        assert_eq!(a.header().regions, b.header().regions);
        assert_eq!(read_all(&old).err().is_some(), true, "read_all opens as a user does");
        let recs = |p: &Path, legacy: bool| {
            let mut r = if legacy { HstReader::open_legacy(p).unwrap() } else { HstReader::open(p).unwrap() };
            let mut v = Vec::new();
            r.for_each(|a| v.push(a.pack())).unwrap();
            v
        };
        assert_eq!(recs(&old, true), recs(&new, false));
        // The converted file's version field is covered: editing it is caught.
        let mut bytes = std::fs::read(&new).unwrap();
        bytes[8] = 2;
        std::fs::write(&new, &bytes).unwrap();
        assert!(HstReader::open(&new).err().unwrap().to_string().contains("format version 2"));
        bytes[8] = 1;
        std::fs::write(&new, &bytes).unwrap();
        assert!(HstReader::open_legacy(&new).err().unwrap().to_string().contains("checksum"));
    }

    /// Issue #31: a legacy file whose version field was edited (1 <-> 2)
    /// decodes as garbage whose chunk checksums still pass; the conversion
    /// refuses it (the footer's counts disagree) and writes nothing.
    #[test]
    fn a_legacy_file_with_an_edited_version_is_not_converted() {
        let d = tempfile::tempdir().unwrap();
        let old = d.path().join("v1.hst");
        let mut w = HstWriter::create_with_layout(&old, &TraceHeader::new("t"), Layout::Records).unwrap();
        for i in 0..1000u64 {
            w.write(Access::read(0x1000_0000 + i * 4096).on_cpu((i % 3) as u16)).unwrap();
        }
        w.finish().unwrap();
        let mut bytes = std::fs::read(&old).unwrap();
        assert_eq!(bytes[8], 1);
        bytes[8] = 2;
        let forged = d.path().join("forged.hst");
        std::fs::write(&forged, &bytes).unwrap();
        let out = d.path().join("out.hst");
        let e = convert(&forged, &out).unwrap_err().to_string();
        assert!(e.contains("do not match the footer"), "{e}");
        assert!(!out.exists());
        assert_eq!(convert(&old, &out).unwrap().accesses, 1000, "the genuine file converts");
    }
}
