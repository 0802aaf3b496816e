//! The Ingens experiments' workloads (redis, svm, seqtouch, web): the same
//! seed gives the same event stream, and each has the shape its experiment
//! relies on (what is populated, what faults, what is freed and when). How the
//! OS model reacts to them (faults, bloat) is tested in
//! `tests/test_ingens_workloads.py` through the simulator.

use std::collections::HashSet;

use hugescope_workloads::{plan, trace};

mod common;
use common::{params, Ev, Record};
use serde_json::{json, Value};

fn record(name: &str, p: &Value) -> (Vec<Ev>, Value) {
    let mut r = Record::default();
    let out = trace(name, &params(p.clone()), &mut r).unwrap();
    (r.0, out.result)
}

fn region(name: &str, p: &Value, region: &str) -> (u64, u64) {
    let l = plan(name, &params(p.clone())).unwrap();
    let r = l.regions.iter().find(|r| r.name == region).unwrap();
    (r.base, r.end())
}

fn frees(ev: &[Ev]) -> Vec<(u64, u64)> {
    ev.iter().filter_map(|e| if let Ev::Free(s, l) = e { Some((*s, *l)) } else { None }).collect()
}

#[test]
fn same_seed_same_events_other_seed_other_events() {
    let cases = [
        ("redis", json!({"records": 3000, "ops": 3000, "threads": 2})),
        ("svm", json!({"features": 50000, "rows": 2000, "nnz_per_row": 12, "threads": 2})),
        ("seqtouch", json!({"size": "8MiB", "threads": 3})),
        ("web", json!({"requests": 30, "heap": "8MiB", "table": "2MiB", "threads": 2})),
    ];
    for (name, p) in cases {
        let (a, ra) = record(name, &p);
        let (b, rb) = record(name, &p);
        assert!(a == b && ra == rb, "{name}: two runs with one seed differ");
        let mut q = p.clone();
        q["seed"] = json!(7);
        let (c, _) = record(name, &q);
        // seqtouch has no random choice: its trace is the same for every seed.
        assert_eq!(a == c, name == "seqtouch", "{name}");
    }
}

#[test]
fn seqtouch_touches_every_page_once_in_order_with_nothing_populated() {
    let p = json!({"size": "6MiB"});
    let (ev, res) = record("seqtouch", &p);
    let (base, end) = region("seqtouch", &p, "mapping");
    let addrs: Vec<u64> = ev.iter().filter_map(|e| if let Ev::Access(a) = e { Some(a.addr) } else { None }).collect();
    let want: Vec<u64> = (base..end).step_by(4096).collect();
    assert_eq!(addrs, want);
    assert!(!ev.iter().any(|e| matches!(e, Ev::Populate(..) | Ev::Free(..))));
    assert_eq!(res["touched_pages"], 6 * 256);
    // Two threads each touch their own half, every page still exactly once.
    let (ev, _) = record("seqtouch", &json!({"size": "6MiB", "threads": 2, "write": true}));
    let mut pages: Vec<u64> = ev.iter().filter_map(|e| if let Ev::Access(a) = e { Some(a.addr) } else { None }).collect();
    assert!(ev.iter().all(|e| !matches!(e, Ev::Access(a) if !a.write)));
    pages.sort_unstable();
    assert_eq!(pages, want);
}

#[test]
fn web_frees_every_buffer_it_allocated_and_faults_through_fresh_pages() {
    let p = json!({"requests": 60, "buf_min": "64KiB", "buf_max": "1MiB", "heap": "8MiB", "table": "1MiB", "rows_per_request": 16});
    let (ev, res) = record("web", &p);
    let (hb, he) = region("web", &p, "heap");
    let (tb, te) = region("web", &p, "table");
    let fr = frees(&ev);
    assert_eq!(fr.len(), 60, "one release per request");
    let released: u64 = fr.iter().map(|f| f.1).sum();
    assert_eq!(released, res["allocated_bytes"].as_u64().unwrap());
    assert!(fr.iter().all(|&(s, l)| s % 4096 == 0 && l % 4096 == 0 && s >= hb && s + l <= he));
    // Only the table is populated; the heap is first touched in the run.
    let pops: Vec<(u64, u64)> = ev.iter().filter_map(|e| if let Ev::Populate(s, l) = e { Some((*s, *l)) } else { None }).collect();
    assert_eq!(pops, vec![(tb, te - tb)]);
    // Between two releases, heap accesses fall inside the buffer freed next,
    // and every page of it is written: so every request faults its buffer in.
    let mut seen = HashSet::new();
    let mut k = 0;
    for e in &ev {
        match e {
            Ev::Access(a) if a.addr >= hb && a.addr < he => {
                let (s, l) = fr[k];
                assert!(a.addr >= s && a.addr < s + l && a.write);
                seen.insert(a.addr / 4096);
            }
            Ev::Free(s, l) => {
                assert_eq!(seen.len() as u64, l / 4096, "request {k}: every buffer page written");
                assert_eq!(seen.iter().min().copied(), Some(s / 4096));
                seen.clear();
                k += 1;
            }
            _ => {}
        }
    }
    // The heap wraps: 60 requests of 64KiB-1MiB need more than its 8MiB, so
    // later buffers reuse (and fault again on) released addresses.
    assert!(res["allocated_bytes"].as_u64().unwrap() > 8 << 20);
    let starts: HashSet<u64> = fr.iter().map(|f| f.0).collect();
    assert!(starts.contains(&hb) && fr.iter().filter(|f| f.0 == hb).count() >= 2);
}

#[test]
fn svm_footprint_matches_its_parameters_and_data_is_read_in_during_the_run() {
    let (rows, k, features) = (3000u64, 16u64, 100_000u64);
    let p = json!({"rows": rows, "nnz_per_row": k, "features": features, "epochs": 2});
    let l = plan("svm", &params(p.clone())).unwrap();
    let page = |b: u64| b.div_ceil(4096) * 4096;
    let sizes: Vec<(&str, u64)> = l.regions.iter().map(|r| (r.name.as_str(), r.len)).collect();
    assert_eq!(
        sizes,
        vec![
            ("row_ptr", page(8 * (rows + 1))),
            ("feat", page(4 * rows * k)),
            ("vals", page(4 * rows * k)),
            ("labels", page(4 * rows)),
            ("weights", page(8 * features)),
        ]
    );
    assert_eq!(l.footprint, sizes.iter().map(|s| s.1).sum::<u64>());
    let (ev, res) = record("svm", &p);
    assert_eq!(res["nnz"], rows * k);
    assert!(!ev.iter().any(|e| matches!(e, Ev::Populate(..) | Ev::Free(..))), "nothing populated or freed");
    // Every data page is first touched by a write (read in), and the data is
    // read in gradually: the last feature page is first written after the
    // first weight is updated.
    let (fb, fe) = region("svm", &p, "feat");
    let (wb, we) = region("svm", &p, "weights");
    let mut first: std::collections::HashMap<u64, (usize, bool)> = Default::default();
    let mut first_weight_write = None;
    for (i, e) in ev.iter().enumerate() {
        if let Ev::Access(a) = e {
            first.entry(a.addr / 4096).or_insert((i, a.write));
            if a.write && a.addr >= wb && a.addr < we && first_weight_write.is_none() {
                first_weight_write = Some(i);
            }
        }
    }
    let feat_pages: Vec<(usize, bool)> = (fb / 4096..fe / 4096).map(|pg| first[&pg]).collect();
    assert!(feat_pages.iter().all(|&(_, w)| w));
    assert!(feat_pages.last().unwrap().0 > first_weight_write.unwrap());
    // Weight reads spread over the whole vector (Zipf ids scrambled): more
    // than half of its pages are touched.
    let w_pages = (wb / 4096..we / 4096).filter(|pg| first.contains_key(pg)).count() as u64;
    assert!(w_pages * 2 > (we - wb) / 4096, "{w_pages}");
}

#[test]
fn redis_releases_deleted_values_as_whole_pages_before_serving_the_rest() {
    let records = 4000u64;
    // Redis's allocator (the default): 10 KiB values two per 5-page run, a
    // run returned whole when both its values are deleted (0.7^2 of them).
    let (ev, _) = record("redis", &json!({"records": records, "ops": 100}));
    let (vb, _) = region("redis", &json!({"records": records, "ops": 100}), "values");
    let fr = frees(&ev);
    assert!(fr.iter().all(|&(s, l)| (s - vb) % 20480 == 0 && l % 20480 == 0), "whole runs only");
    let runs = fr.iter().map(|f| f.1).sum::<u64>() / 20480;
    assert!(runs as f64 > 0.44 * 2000.0 && (runs as f64) < 0.54 * 2000.0, "{runs} of 2000 runs returned");
    // The exact model: each value in its own two pages.
    let p = json!({"records": records, "ops": 8000, "allocator": "exact"});
    let (ev, res) = record("redis", &p);
    let (vb, ve) = region("redis", &p, "values");
    let fr = frees(&ev);
    let deleted = (records as f64 * 0.7).round() as u64;
    assert_eq!(res["deletes"], deleted);
    // 8KB values are two whole pages: every deleted value goes back to the OS.
    assert!(fr.iter().all(|&(s, l)| s >= vb && (s - vb) % 8192 == 0 && l % 8192 == 0));
    assert_eq!(fr.iter().map(|f| f.1).sum::<u64>(), deleted * 8192);
    // The frees come before the run phase, which then reads surviving values
    // only (never a released page) and reaches most of them.
    let last_free = ev.iter().rposition(|e| matches!(e, Ev::Free(..))).unwrap();
    let released: HashSet<u64> = fr.iter().flat_map(|&(s, l)| (s / 4096..(s + l) / 4096).collect::<Vec<_>>()).collect();
    let mut live_values = HashSet::new();
    for e in &ev[last_free..] {
        if let Ev::Access(a) = e {
            if a.addr >= vb && a.addr < ve {
                assert!(!released.contains(&(a.addr / 4096)), "run phase touched a released page");
                live_values.insert((a.addr - vb) / 8192);
            }
        }
    }
    let live = res["live_keys"].as_u64().unwrap();
    assert_eq!(live, records - deleted);
    assert!(live_values.len() as u64 * 10 > live * 7, "{} of {live} live values read", live_values.len());
    // redis-benchmark's uniform GETs over the whole key space: most miss.
    let (hits, misses) = (res["read_hits"].as_u64().unwrap(), res["read_misses"].as_u64().unwrap());
    assert!(hits > 0 && misses > hits, "{hits} hits, {misses} misses");
}
