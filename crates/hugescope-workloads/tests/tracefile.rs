//! Trace files of workloads (`tracefile::trace_to_file`, what `hugescope
//! trace` runs): with the encoder on a second thread the file is byte for
//! byte the one encoded on the generator's thread, and the one an `HstWriter`
//! fed directly by the generator writes; the cap and the progress hook behave
//! as documented. Small scales: these check bytes, not speed.

use hugescope_core::trace::hst::{read_all, summarize, HstWriter};
use hugescope_workloads::tracefile::{trace_to_file, FileOptions, PROGRESS_EVERY};
use hugescope_workloads::{header, trace, Params};
use serde_json::{json, Value};

fn params(v: Value) -> Params {
    v.as_object().cloned().unwrap()
}

/// GUPS over a table above the size that is mapped rather than allocated
/// (2 MiB), two simulated threads; bfs and pagerank on small graphs; a
/// key-value store with setup-time population markers.
fn cases() -> Vec<(&'static str, Params)> {
    vec![
        (
            "gups",
            params(json!({"size": "8MiB", "updates": 300_000, "threads": 2})),
        ),
        ("bfs", params(json!({"scale": 12}))),
        ("pagerank", params(json!({"scale": 10, "iterations": 2}))),
        ("kv", params(json!({"records": 20_000, "ops": 100_000}))),
    ]
}

#[test]
fn threaded_sequential_and_direct_files_are_identical() {
    let d = tempfile::tempdir().unwrap();
    for (name, p) in cases() {
        let thr = d.path().join(format!("{name}-thr.hst"));
        let seq = d.path().join(format!("{name}-seq.hst"));
        let direct = d.path().join(format!("{name}-direct.hst"));
        let a = trace_to_file(name, &p, &thr, FileOptions::default()).unwrap();
        let b = trace_to_file(
            name,
            &p,
            &seq,
            FileOptions {
                sequential: true,
                ..Default::default()
            },
        )
        .unwrap();
        // The writer fed straight by the generator, as before this path existed.
        let mut w = HstWriter::create(&direct, &header(name, &p).unwrap()).unwrap();
        let out = trace(name, &p, &mut w).unwrap();
        let sc = w.finish().unwrap();

        let bytes = std::fs::read(&thr).unwrap();
        assert!(
            bytes == std::fs::read(&seq).unwrap(),
            "{name}: threaded and sequential files differ"
        );
        assert!(
            bytes == std::fs::read(&direct).unwrap(),
            "{name}: threaded and direct files differ"
        );
        assert_eq!(a.summary, sc, "{name}");
        assert_eq!(b.summary, sc, "{name}");
        assert_eq!(
            a.output.result, out.result,
            "{name}: the workload's result changed"
        );
        assert_eq!(a.output.accesses, out.accesses);
        assert!(
            out.accesses > 10_000,
            "{name}: {} accesses is too small a case",
            out.accesses
        );
        // The file's records and footer agree (a full decode).
        let (h, s) = summarize(&thr, true).unwrap();
        assert_eq!((h, s.accesses), (a.header, out.accesses));
    }
}

#[test]
fn limit_caps_the_file_and_progress_is_reported_every_2_pow_20() {
    let d = tempfile::tempdir().unwrap();
    let p = params(json!({"size": "4MiB", "updates": 1_100_000}));
    let out = d.path().join("capped.hst");
    let mut seen = Vec::new();
    let mut hook = |n: u64| {
        seen.push(n);
        true
    };
    let w = trace_to_file(
        "gups",
        &p,
        &out,
        FileOptions {
            limit: Some(1_500_000),
            progress: Some(&mut hook),
            sequential: false,
        },
    )
    .unwrap();
    // The generator stops at the first access past the limit: 1.5M of the
    // 2.2M accesses generated and written, and no checksum of a whole run.
    assert_eq!(w.output.accesses, 1_500_000);
    assert_eq!(w.output.result, json!({"stopped_at_limit": 1_500_000}));
    assert_eq!(w.summary.accesses, 1_500_000);
    assert_eq!(seen, vec![PROGRESS_EVERY]);
    let (_, acc) = read_all(&out).unwrap();
    assert_eq!(acc.len(), 1_500_000);
    // The capped file is the uncapped one's prefix.
    let full = d.path().join("full.hst");
    trace_to_file("gups", &p, &full, FileOptions::default()).unwrap();
    assert_eq!(read_all(&full).unwrap().1[..1_500_000], acc[..]);
}

/// Issue #31: `--limit` bounds the work, not only the file: 2^64 - 1 updates
/// with a limit of 1000 finish at once.
#[test]
fn a_limit_stops_an_endless_generator() {
    let d = tempfile::tempdir().unwrap();
    let p = params(json!({"size": "4MiB", "updates": u64::MAX}));
    let out = d.path().join("endless.hst");
    let t0 = std::time::Instant::now();
    let w = trace_to_file("gups", &p, &out, FileOptions { limit: Some(1000), ..Default::default() }).unwrap();
    assert!(t0.elapsed() < std::time::Duration::from_secs(30));
    assert_eq!(w.summary.accesses, 1000);
    assert_eq!(read_all(&out).unwrap().1.len(), 1000);
}
