//! A workload generator stops on a cancellation request (it polls every
//! 65536 accesses and unwinds to `trace`, which returns `Error::Cancelled`),
//! and the trace writer it fed leaves no file. A binary of its own: the
//! request is process-wide.

use hugescope_core::cancel;
use hugescope_core::trace::hst::HstWriter;
use hugescope_core::Error;
use hugescope_workloads::{header, trace, Params};
use serde_json::json;

#[test]
fn generation_stops_and_leaves_no_file() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("g.hst");
    let p: Params = json!({"size": "4MiB", "updates": 1_000_000}).as_object().unwrap().clone();
    let h = header("gups", &p).unwrap();
    let mut w = HstWriter::create(&out, &h).unwrap();
    cancel::request();
    let r = trace("gups", &p, &mut w);
    cancel::clear();
    assert!(matches!(r, Err(Error::Cancelled)), "{:?}", r.map(|o| o.accesses));
    drop(w);
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0, "a file was left behind");
    // Without a request the same generation completes.
    let mut w = HstWriter::create(&out, &h).unwrap();
    assert_eq!(trace("gups", &p, &mut w).unwrap().accesses, 2_000_000);
    w.finish().unwrap();
}
