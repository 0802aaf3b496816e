//! `values=false` (arrays held as addresses only, `shadow.rs`): the trace is
//! the stored run's, access for access (and populate event for populate
//! event), its header records the choice only when it was given, and a table
//! far larger than this machine's memory can be traced.

use hugescope_core::trace::{Access, AccessSink};
use hugescope_workloads::{header, trace, Params};
use serde_json::{json, Value};

#[derive(Default)]
struct Keep {
    accesses: Vec<(u64, bool, u16)>,
    events: Vec<String>,
}

impl AccessSink for Keep {
    fn access(&mut self, a: Access) {
        self.accesses.push((a.addr, a.write, a.cpu));
    }
    fn progress(&mut self, label: &str) {
        self.events.push(format!("progress {label} at {}", self.accesses.len()));
    }
    fn populate(&mut self, pid: u16, start: u64, len: u64) {
        self.events.push(format!("populate {pid} {start:#x} {len} at {}", self.accesses.len()));
    }
}

fn run(name: &str, p: Value) -> (Keep, Value) {
    let p: Params = p.as_object().unwrap().clone();
    let mut k = Keep::default();
    let out = trace(name, &p, &mut k).unwrap();
    (k, out.result)
}

fn same_trace(name: &str, p: Value) {
    let mut elided = p.clone();
    elided["values"] = json!(false);
    let (stored, rs) = run(name, p);
    let (shadow, re) = run(name, elided);
    assert!(stored.accesses.len() > 1000, "{name}: {} accesses", stored.accesses.len());
    assert_eq!(stored.accesses, shadow.accesses, "{name}: the address-only trace differs");
    assert_eq!(stored.events, shadow.events, "{name}: progress/populate events differ");
    assert_eq!(re["values"], json!(false), "{name}: {re}");
    assert!(rs.get("values").is_none(), "{name}: {rs}");
}

#[test]
fn gups_addresses_only_is_the_stored_trace() {
    same_trace("gups", json!({"size": "1MiB", "updates": 20000, "threads": 2, "seed": 7}));
}

#[test]
fn stream_addresses_only_is_the_stored_trace() {
    same_trace("stream", json!({"size": "40KiB", "iterations": 2, "threads": 3}));
}

#[test]
fn values_enters_the_header_only_when_given() {
    let p = |v: Value| -> Params { v.as_object().unwrap().clone() };
    let h = header("gups", &p(json!({"size": "1MiB"}))).unwrap();
    assert!(!h.params.contains_key("values"), "{:?}", h.params);
    let h = header("gups", &p(json!({"size": "1MiB", "values": false}))).unwrap();
    assert_eq!(h.params.get("values"), Some(&json!(false)));
    let e = header("gups", &p(json!({"size": "1MiB", "values": "maybe"}))).unwrap_err().to_string();
    assert!(e.contains("'values'") && e.contains("true or false"), "{e}");
}

#[test]
fn a_table_beyond_this_machines_memory_traces_without_its_values() {
    // 4 TiB: refused with its values (the memory check), traced without.
    let big = json!({"size": "4TiB", "updates": 1000});
    let p: Params = big.as_object().unwrap().clone();
    let e = header("gups", &p).unwrap_err().to_string();
    assert!(e.contains("90% of this machine's memory"), "{e}");
    let mut big = big;
    big["values"] = json!(false);
    let (k, _) = run("gups", big);
    assert_eq!(k.accesses.len(), 2000);
    let base = k.accesses.iter().map(|a| a.0).min().unwrap();
    let top = k.accesses.iter().map(|a| a.0).max().unwrap();
    assert!(top - base > 1 << 40, "updates spread over the 4 TiB table: {:#x}", top - base);
}
