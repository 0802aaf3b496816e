//! The Navarro paper's programs (OSDI'02 §6.2, §6.5-6.7): access counts,
//! addresses and region layouts worked out by hand from each program's
//! description, determinism, and one-line refusals of bad parameters. How the
//! reservation model reacts to them is the policy's tests' business.

use std::collections::HashSet;

use hugescope_core::trace::{Access, RegionKind};
use hugescope_workloads::{plan, trace, Params};

mod common;
use common::{params, Ev, Record};
use serde_json::{json, Value};

const BASE: u64 = 0x1000_0000_0000;
const MB4: u64 = 4 << 20;

fn record(name: &str, p: Value) -> (Vec<Ev>, Value) {
    let mut r = Record::default();
    let out = trace(name, &params(p), &mut r).unwrap();
    let n = r.0.iter().filter(|e| matches!(e, Ev::Access(_))).count() as u64;
    assert_eq!(n, out.accesses, "{name}");
    (r.0, out.result)
}

fn accesses(ev: &[Ev]) -> Vec<Access> {
    ev.iter().filter_map(|e| if let Ev::Access(a) = e { Some(*a) } else { None }).collect()
}

fn labels(ev: &[Ev]) -> Vec<&str> {
    ev.iter().filter_map(|e| if let Ev::Progress(l) = e { Some(l.as_str()) } else { None }).collect()
}

/// (name, base, len, kind) of every region.
fn regions(name: &str, p: Value) -> Vec<(String, u64, u64, RegionKind)> {
    plan(name, &params(p)).unwrap().regions.into_iter().map(|r| (r.name, r.base, r.len, r.kind)).collect()
}

fn input_err(name: &str, p: Value) -> String {
    match plan(name, &params(p)) {
        Ok(_) => panic!("{name}: accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn matrix_reads_a_row_and_writes_b_a_column_two_accesses_per_element() {
    let n = 100u64;
    // a: 80,000 bytes rounded to 20 pages; b on the next 4MB boundary.
    assert_eq!(
        regions("matrix", json!({"n": n})),
        [("a".into(), BASE, 81920, RegionKind::Anon), ("b".into(), BASE + MB4, 81920, RegionKind::Anon)]
    );
    let (ev, r) = record("matrix", json!({"n": n, "repetitions": 3}));
    let a = accesses(&ev);
    assert_eq!(a.len() as u64, 3 * 2 * n * n);
    // Element (i, j): read a + 8 (i n + j), then write b + 8 (j n + i).
    for (k, pair) in a.chunks(2).take((n * n) as usize).enumerate() {
        let (i, j) = (k as u64 / n, k as u64 % n);
        assert_eq!(pair[0], Access::read(BASE + 8 * (i * n + j)));
        assert_eq!(pair[1], Access::write(BASE + MB4 + 8 * (j * n + i)));
    }
    // a was initialised before the run: populated whole, before any access.
    assert_eq!(ev[0], Ev::Populate(BASE, 8 * n * n));
    assert_eq!(labels(&ev), ["rep:1", "rep:2", "rep:3"]);
    assert_eq!(r["valid"], true);
}

#[test]
fn stride4m_touches_exactly_one_word_per_4mb() {
    let (ev, r) = record("stride4m", json!({"size": "64MiB", "passes": 2}));
    let a = accesses(&ev);
    let want: Vec<Access> = (0..2).flat_map(|_| (0..16).map(|k| Access::write(BASE + k * MB4))).collect();
    assert_eq!(a, want);
    assert_eq!(r["touched_pages"], 16);
    assert_eq!(r["touches"], 32);
    // Nothing is populated or freed: every first-pass touch is a first fault.
    assert!(ev.iter().all(|e| matches!(e, Ev::Access(_) | Ev::Progress(_))));
    assert_eq!(labels(&ev), ["pass:1", "pass:2"]);
    // A stride that does not divide the size still touches ceil(size / stride) pages.
    let (ev, r) = record("stride4m", json!({"size": "10MiB", "write": false}));
    assert_eq!(accesses(&ev), (0..3).map(|k| Access::read(BASE + k * MB4)).collect::<Vec<_>>());
    assert_eq!(r["touched_pages"], 3);
}

#[test]
fn adversary_writes_each_page_once_then_frees_the_region_every_round() {
    let size = 1u64 << 20;
    let (ev, r) = record("adversary", json!({"size": size, "rounds": 3}));
    assert_eq!(regions("adversary", json!({"size": size})), [("region".into(), BASE, size, RegionKind::Anon)]);
    // Per round: 128 writes, one per 8KB page in address order, then the free.
    let round: Vec<Ev> = (0..size / 8192).map(|k| Ev::Access(Access::write(BASE + k * 8192))).chain([Ev::Free(BASE, size)]).collect();
    let body: Vec<Ev> = ev.iter().filter(|e| !matches!(e, Ev::Progress(_))).cloned().collect();
    assert_eq!(body, [round.clone(), round.clone(), round].concat());
    assert_eq!(r["touches"], 384);
    // With the x86 base page: every 4KB page once.
    let (ev, _) = record("adversary", json!({"size": size, "page": "4KiB", "rounds": 1}));
    assert_eq!(accesses(&ev).len(), 256);
}

#[test]
fn cmp_reads_both_files_word_by_word_side_by_side() {
    let size = 1u64 << 20;
    assert_eq!(
        regions("cmp", json!({"size": size})),
        [("file_a".into(), BASE, size, RegionKind::File), ("file_b".into(), BASE + MB4, size, RegionKind::File)]
    );
    let (ev, r) = record("cmp", json!({"size": size}));
    let a = accesses(&ev);
    assert_eq!(a.len() as u64, 2 * size / 8);
    for (i, pair) in a.chunks(2).enumerate() {
        assert_eq!(pair, [Access::read(BASE + 8 * i as u64), Access::read(BASE + MB4 + 8 * i as u64)]);
    }
    // Files are mapped, not populated: the first read of each page faults.
    assert!(!ev.iter().any(|e| matches!(e, Ev::Populate(..) | Ev::Free(..))));
    assert_eq!((r["identical"].clone(), r["bytes_compared"].clone()), (json!(true), json!(size)));
}

#[test]
fn dirtyfile_reads_every_line_writes_every_512th_page_then_msync() {
    let size = 8u64 << 20;
    assert_eq!(regions("dirtyfile", json!({"size": size})), [("file".into(), BASE, size, RegionKind::File)]);
    let (ev, r) = record("dirtyfile", json!({"size": size}));
    let a = accesses(&ev);
    // One load per 64-byte line, then one store per 512 x 8KB = 4MB: 2 of them.
    let lines = size / 64;
    assert_eq!(a.len() as u64, lines + 2);
    assert!(a[..lines as usize].iter().enumerate().all(|(i, x)| *x == Access::read(BASE + 64 * i as u64)));
    assert_eq!(a[lines as usize..], [Access::write(BASE), Access::write(BASE + MB4)]);
    assert_eq!(r["pages_written"], 2);
    // The flush label comes after the last write and is the last event.
    assert_eq!(labels(&ev), ["read", "msync"]);
    assert_eq!(ev.last(), Some(&Ev::Progress("msync".into())));
    // write_every counts in `page`s: 4KiB pages, every 64th: every 256KB.
    let (ev, r) = record("dirtyfile", json!({"size": size, "page": "4KiB", "write_every": 64}));
    assert_eq!(r["pages_written"], 32);
    assert_eq!(accesses(&ev).iter().filter(|a| a.write).count(), 32);
}

#[test]
fn mapdummy_touches_frees_and_polls_to_fill_its_period() {
    let size = 64u64 << 10;
    let p = json!({"size": size, "cycles": 3, "rate": 5, "access_rate": 1000});
    assert_eq!(
        regions("mapdummy", p.clone()),
        [("buffer".into(), BASE, size, RegionKind::Anon), ("clock".into(), BASE + MB4, 4096, RegionKind::Anon)]
    );
    let (ev, r) = record("mapdummy", p);
    // A period is 1000 / 5 = 200 accesses: 16 page writes, the free, 184 polls.
    let cycle: Vec<Ev> = (0..16)
        .map(|k| Ev::Access(Access::write(BASE + k * 4096)))
        .chain([Ev::Free(BASE, size)])
        .chain((0..184).map(|_| Ev::Access(Access::read(BASE + MB4))))
        .collect();
    let body: Vec<Ev> = ev.iter().filter(|e| !matches!(e, Ev::Progress(_))).cloned().collect();
    assert_eq!(body, [cycle.clone(), cycle.clone(), cycle].concat());
    assert_eq!(labels(&ev), ["cycle:1", "cycle:2", "cycle:3"]);
    assert_eq!(r["period_accesses"], 200);
    // A period shorter than the touches has no poll at all.
    let (ev, _) = record("mapdummy", json!({"size": size, "cycles": 2, "rate": 1000, "access_rate": 1000}));
    assert_eq!(accesses(&ev).len(), 32);
}

#[test]
fn fftw_butterflies_pair_elements_a_span_apart_along_each_axis() {
    let n = 8u64;
    assert_eq!(regions("fftw", json!({"n": n})), [("data".into(), BASE, 8192, RegionKind::Anon)]);
    let (ev, r) = record("fftw", json!({"n": n, "lines": 1}));
    // 3 passes of 4 butterflies per line, 64 lines per axis, 3 axes, 4 accesses each.
    assert_eq!(r["butterflies"], 3 * 64 * 12);
    let a = accesses(&ev);
    assert_eq!(a.len(), 4 * 3 * 64 * 12);
    // Each butterfly: load x, load y, store x, store y; y is span x axis stride away.
    let elem = |e: u64| BASE + 16 * e;
    assert_eq!(a[..4], [Access::read(elem(0)), Access::read(elem(1)), Access::write(elem(0)), Access::write(elem(1))]);
    let z = 2 * 64 * 12 * 4;
    assert_eq!(a[z..z + 2], [Access::read(elem(0)), Access::read(elem(n * n))]);
    // The last butterfly of the first z line's last pass (span 4): elements 3 and 7 along z.
    assert_eq!(a[z + 4 * 11 + 1], Access::read(elem(7 * n * n)));
    assert_eq!(labels(&ev), ["axis:0", "axis:1", "axis:2"]);
    // Not a power of two: n = 6 has 3 + 2 + 2 butterflies per line; a quarter
    // of the 36 lines of each axis is 9 lines.
    let (_, r) = record("fftw", json!({"n": 6, "lines": 0.25}));
    assert_eq!((r["lines_per_axis"].clone(), r["butterflies"].clone()), (json!(9), json!(3 * 9 * 7)));
}

#[test]
fn rbtree_mix_follows_the_paper_and_the_tree_stays_valid() {
    let p = json!({"nodes": 2000, "ops": 20000, "traverse": 10});
    // The sentinel's 8 words and room for 2 x 2000 pairs of 8 + 16 words, in whole pages.
    let heap = (8u64 * (8 + 2 * 2000 * 24)).div_ceil(4096) * 4096;
    assert_eq!(regions("rbtree", p.clone()), [("heap".into(), BASE, heap, RegionKind::Heap)]);
    let (ev, r) = record("rbtree", p.clone());
    assert_eq!(r["valid"], true);
    let ops = ["lookups", "inserts", "deletes", "traversals"].map(|k| r[k].as_u64().unwrap());
    assert_eq!(ops.iter().sum::<u64>(), 20000);
    for (got, share) in ops.iter().zip([0.50, 0.24, 0.24, 0.02]) {
        let f = *got as f64 / 20000.0;
        assert!((f - share).abs() < 0.015, "{ops:?}");
    }
    // Keys come from 0..2 x nodes, so about half the lookups find their key,
    // and the tree stays near its size as inserts and deletes balance.
    let found = r["found"].as_f64().unwrap() / r["lookups"].as_f64().unwrap();
    assert!((0.35..0.65).contains(&found), "{found}");
    let size = r["nodes"].as_u64().unwrap();
    assert_eq!(size, 2000 + r["inserted"].as_u64().unwrap() - r["deleted"].as_u64().unwrap());
    assert_eq!(r["heap_full"], 0);
    // Every access is inside the heap, below its bump pointer; the build
    // comes first (label `built`) and wrote at least a node and a record each.
    let used = r["heap_bytes_used"].as_u64().unwrap();
    assert!(used >= 64 + 2000 * 192);
    assert!(accesses(&ev).iter().all(|a| a.addr >= BASE && a.addr < BASE + used));
    assert_eq!(labels(&ev)[0], "built");
    // Same seed, same run; another seed, another run.
    assert_eq!(record("rbtree", p.clone()).0, ev);
    let mut q = p;
    q["seed"] = json!(2);
    assert_ne!(record("rbtree", q).0, ev);
}

#[test]
fn regions_sit_on_4mb_boundaries_and_defaults_plan() {
    for name in ["matrix", "rbtree", "fftw", "adversary", "stride4m", "cmp", "dirtyfile", "mapdummy"] {
        let l = plan(name, &Params::new()).unwrap();
        assert!(l.regions.iter().all(|r| r.base % MB4 == 0), "{name}");
        assert_eq!(l.cpus, 1, "{name}");
        let names: HashSet<&str> = l.regions.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names.len(), l.regions.len(), "{name}");
    }
    // The paper's sizes are the defaults.
    let d = |name: &str, k: &str| plan(name, &Params::new()).unwrap().params[k].clone();
    assert_eq!((d("matrix", "n"), d("rbtree", "nodes"), d("fftw", "n")), (json!(1000), json!(50000), json!(200)));
    assert_eq!((d("cmp", "size"), d("dirtyfile", "size")), (json!(100 << 20), json!(100 << 20)));
    assert_eq!((d("stride4m", "stride"), d("dirtyfile", "write_every"), d("mapdummy", "rate")), (json!(4 << 20), json!(512), json!(5.0)));
}

#[test]
fn bad_parameters_are_one_line_naming_the_parameter_and_value() {
    let cases = [
        ("matrix", json!({"threads": 2}), "'threads' must be 1"),
        ("matrix", json!({"n": 0}), "'n' must be at least 1, got 0"),
        ("fftw", json!({"lines": 0}), "'lines' (0) must select"),
        ("fftw", json!({"lines": 1.5}), "'lines' must be between 0 and 1, got 1.5"),
        ("stride4m", json!({"stride": 12}), "'stride' must be a positive multiple of 8 bytes"),
        ("stride4m", json!({"size": "1GiB", "stride": "2GiB"}), "at most 1073741824, got 2147483648"),
        ("adversary", json!({"size": 5000}), "'size' must be a positive multiple of 4KiB, got 5000"),
        ("cmp", json!({"size": "-1"}), "'size'"),
        ("dirtyfile", json!({"write_every": 0}), "'write_every' must be at least 1, got 0"),
        ("mapdummy", json!({"rate": 0}), "'rate' must be between 0.001 and 1000, got 0"),
        ("rbtree", json!({"traverse": 0}), "'traverse' must be at least 1, got 0"),
        ("rbtree", json!({"depth": 3}), "unknown parameter 'depth'"),
    ];
    for (name, p, want) in cases {
        let e = input_err(name, p.clone());
        assert!(e.contains(want) && e.starts_with(name) && !e.contains('\n'), "{name} {p}: {e}");
    }
}
