//! Decoding on a second thread (`trace::readahead`) hands the consumer
//! exactly what decoding inline does: the same records in the same chunks,
//! the same progress reports, the same error at the same point of a damaged
//! file, and a consumer's own error stops the pass at once.

use hugescope_core::progress::ProgressHook;
use hugescope_core::trace::hst::{HstReader, HstWriter};
use hugescope_core::trace::readahead::for_each_chunk_with;
use hugescope_core::trace::TraceHeader;
use hugescope_core::{Error, Result};
use std::path::Path;
use std::sync::{Arc, Mutex};

mod common;
use common::hstfile::accesses;

/// 1000 accesses in chunks of 100.
fn write(path: &Path) {
    let mut w = HstWriter::create(path, &TraceHeader::new("readahead")).unwrap().with_chunk_records(100);
    for a in accesses(1000, 11) {
        w.write(a).unwrap();
    }
    w.finish().unwrap();
}

/// Every chunk the consumer saw, the progress reports, and how the pass ended.
type Seen = (Vec<Vec<u64>>, Vec<(u64, u64)>, Result<()>);

fn pass(path: &Path, ahead: bool, stop_after: Option<usize>) -> Seen {
    let mut r = HstReader::open(path).unwrap();
    let reports = Arc::new(Mutex::new(Vec::new()));
    let sink = reports.clone();
    r.set_progress(ProgressHook::every(0, move |done, total| sink.lock().unwrap().push((done, total))));
    let mut chunks = Vec::new();
    let end = for_each_chunk_with(&mut r, ahead, |c| {
        chunks.push(c.to_vec());
        if stop_after == Some(chunks.len()) {
            return Err(Error::input("consumer stops"));
        }
        Ok(())
    });
    let reports = reports.lock().unwrap().clone();
    (chunks, reports, end)
}

#[test]
fn same_chunks_and_progress_as_inline() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("t.hst");
    write(&p);
    let (inline, inline_progress, end) = pass(&p, false, None);
    assert!(end.is_ok());
    let (ahead, ahead_progress, end) = pass(&p, true, None);
    assert!(end.is_ok());
    assert_eq!(inline.len(), 10);
    assert_eq!(ahead, inline);
    // Reported as consumed, every chunk (every 2^0 records crosses a step).
    let expected: Vec<(u64, u64)> = (1..=10).map(|i| (i * 100, 1000)).collect();
    assert_eq!(inline_progress, expected);
    assert_eq!(ahead_progress, expected);
}

#[test]
fn damage_is_reported_at_the_same_point() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("t.hst");
    write(&p);
    // Flip a byte in the middle of the data: some chunk's payload.
    let mut bytes = std::fs::read(&p).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x5a;
    std::fs::write(&p, &bytes).unwrap();
    let (inline, _, e_inline) = pass(&p, false, None);
    let (ahead, _, e_ahead) = pass(&p, true, None);
    let (e_inline, e_ahead) = (e_inline.unwrap_err(), e_ahead.unwrap_err());
    assert!(matches!(e_inline, Error::Format { .. }), "{e_inline}");
    assert_eq!(e_ahead.to_string(), e_inline.to_string());
    // The chunks before the damage arrived, the damaged one did not.
    assert!(!inline.is_empty() && inline.len() < 10, "{} chunks", inline.len());
    assert_eq!(ahead, inline);
}

#[test]
fn a_consumer_error_ends_the_pass() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("t.hst");
    write(&p);
    for ahead in [false, true] {
        let (chunks, progress, end) = pass(&p, ahead, Some(3));
        assert_eq!(chunks.len(), 3, "ahead={ahead}");
        assert_eq!(end.unwrap_err().to_string(), "consumer stops");
        // Reported as handed over, the failed chunk included, in both modes.
        assert_eq!(progress.last().map(|x| x.0), Some(300), "ahead={ahead}");
    }
}
