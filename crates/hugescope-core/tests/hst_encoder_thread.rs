//! The writer's encoder thread (`HstWriter::with_encoder_thread`): a trace
//! written with chunks encoded on a second thread is byte for byte the one
//! encoded on the generator's thread, whatever the chunk size, layout and
//! markers; an abandoned threaded writer leaves no file.

use std::path::Path;

use hugescope_core::trace::hst::{read_all, HstReader, HstWriter, Layout, TraceSummary};
use hugescope_core::trace::{Access, AccessSink, TraceHeader};
use proptest::prelude::*;

mod common;
use common::hstfile::accesses;

fn header() -> TraceHeader {
    let mut h = TraceHeader::new("threaded");
    h.cpus = 256;
    h.processes = 128;
    h
}

/// Write `acc` with a marker before every record index in `marks`.
fn write(
    path: &Path,
    acc: &[Access],
    chunk: usize,
    layout: Layout,
    marks: &[usize],
    threaded: bool,
) -> TraceSummary {
    let mut w = HstWriter::create_with_layout(path, &header(), layout)
        .unwrap()
        .with_chunk_records(chunk)
        .with_encoder_thread(threaded);
    for (i, &a) in acc.iter().enumerate() {
        for _ in marks.iter().filter(|&&m| m == i) {
            w.progress(&format!("at:{i}"));
        }
        w.access(a);
    }
    if marks.contains(&acc.len()) {
        w.progress("end");
    }
    w.finish().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn threaded_file_equals_sequential_byte_for_byte(
        n in 0usize..3000,
        seed in any::<u64>(),
        chunk in 1usize..400,
        planes in any::<bool>(),
        marks in proptest::collection::vec(0usize..3001, 0..6),
    ) {
        let d = tempfile::tempdir().unwrap();
        let acc = accesses(n, seed);
        let layout = if planes { Layout::Planes } else { Layout::Records };
        let (a, b) = (d.path().join("seq.hst"), d.path().join("thr.hst"));
        let sa = write(&a, &acc, chunk, layout, &marks, false);
        let sb = write(&b, &acc, chunk, layout, &marks, true);
        prop_assert_eq!(&sa, &sb);
        prop_assert_eq!(sb.chunks as usize, n.div_ceil(chunk));
        prop_assert!(std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(), "files differ");
        // Version-1 files (the records layout) are read on request only.
        let mut r = HstReader::open_legacy(&b).unwrap();
        let mut back = Vec::new();
        r.for_each(|x| back.push(x)).unwrap();
        prop_assert_eq!(back, acc);
    }
}

#[test]
fn large_chunks_in_flight_are_equal_too() {
    // Many full default-size chunks, so the generator runs ahead of the
    // encoder and buffers are recycled: still the same bytes.
    let d = tempfile::tempdir().unwrap();
    let acc = accesses(700_000, 11);
    let (a, b) = (d.path().join("seq.hst"), d.path().join("thr.hst"));
    let sa = write(
        &a,
        &acc,
        1 << 16,
        Layout::Planes,
        &[0, 65_536, 699_999],
        false,
    );
    let sb = write(
        &b,
        &acc,
        1 << 16,
        Layout::Planes,
        &[0, 65_536, 699_999],
        true,
    );
    assert_eq!(sa, sb);
    assert_eq!(sb.chunks, 11); // 10 full chunks of 65,536 and one of 44,640
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
}

#[test]
fn abandoned_threaded_writer_leaves_nothing() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("gone.hst");
    let mut w = HstWriter::create(&p, &header())
        .unwrap()
        .with_chunk_records(100)
        .with_encoder_thread(true);
    for a in accesses(10_050, 3) {
        w.write(a).unwrap();
    }
    drop(w);
    assert!(!p.exists());
    assert_eq!(
        std::fs::read_dir(d.path()).unwrap().count(),
        0,
        "a temporary file was left behind"
    );
}

#[test]
fn bad_records_are_refused_by_index_on_the_threaded_path() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("bad.hst");
    let mut w = HstWriter::create(&p, &header())
        .unwrap()
        .with_chunk_records(4)
        .with_encoder_thread(true);
    for a in accesses(9, 5) {
        w.write(a).unwrap();
    }
    let e = w
        .write(Access::read(0).on_cpu(300))
        .unwrap_err()
        .to_string();
    assert!(e.contains("record 9") && e.contains("cpu id 300"), "{e}");
    w.write(Access::write(7)).unwrap();
    assert_eq!(w.finish().unwrap().accesses, 10);
    assert_eq!(read_all(&p).unwrap().1.len(), 10);
}
