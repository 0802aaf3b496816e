//! A progress hook that answers "stop" cancels a trace being written to a
//! file (`tracefile::trace_to_file`): the generator unwinds at its next
//! poll and the writer, with its encoder thread, leaves no file. A binary of
//! its own: the cancellation request is process-wide.

use hugescope_core::{cancel, Error};
use hugescope_workloads::tracefile::{trace_to_file, FileOptions};
use hugescope_workloads::Params;
use serde_json::json;

#[test]
fn a_progress_hook_that_says_stop_cancels_and_leaves_no_file() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("stopped.hst");
    let p: Params = json!({"size": "4MiB", "updates": 4_000_000}).as_object().unwrap().clone();
    let mut calls = 0;
    let mut hook = |_n: u64| {
        calls += 1;
        false
    };
    let r = trace_to_file("gups", &p, &out, FileOptions { progress: Some(&mut hook), ..Default::default() });
    cancel::clear();
    assert!(matches!(r, Err(Error::Cancelled)), "{:?}", r.map(|w| w.output.accesses));
    assert_eq!(calls, 1, "the hook is not asked again once it said stop");
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0, "a file was left behind");
    // Without a stop the same run completes: 8M accesses, all written.
    let w = trace_to_file("gups", &p, &out, FileOptions::default()).unwrap();
    assert_eq!((w.output.accesses, w.summary.accesses), (8_000_000, 8_000_000));
}
