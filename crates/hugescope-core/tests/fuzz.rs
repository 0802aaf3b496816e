//! Fuzzing harness (proptest) for the two parsers that read user files: the
//! `.hst` trace reader and the plan parser. Each target asserts: never a
//! panic, every failure is an error naming the file (trace: `Error::Format`
//! with the path and a byte offset inside the file; plan: the file or the
//! entry/field), and memory stays bounded (resident set checked after each
//! case).
//!
//! `cargo test` runs a fixed number of cases per target (a few seconds in
//! all); `PROPTEST_CASES=N cargo test -p hugescope-core --test fuzz` runs N.
//! Crashes found are kept as regression cases in `fuzz.proptest-regressions`.

use std::path::Path;

use hugescope_core::plan::Plan;
use hugescope_core::trace::hst::{read_all, summarize, HstReader, HstWriter};
use hugescope_core::trace::{Access, Region, TraceHeader};
use hugescope_core::Error;
use proptest::prelude::*;

mod common;
use common::hstfile::{accesses, header_json, splice_header};

/// Resident memory may not grow past this while fuzzing (the reader holds one
/// chunk of at most 8 MiB plus a 16 MiB header or 64 MiB footer).
const RSS_BOUND_KB: u64 = 512 << 10;

fn cases(default: u32) -> ProptestConfig {
    // PROPTEST_CASES overrides the default count (proptest reads it into
    // ProptestConfig::default()).
    let env = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok());
    ProptestConfig { cases: env.unwrap_or(default), ..ProptestConfig::default() }
}

fn rss_kb() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()).unwrap_or(0)
}

/// A valid trace with markers, two processes and four chunks.
fn seed_file() -> Vec<u8> {
    thread_local! {
        static SEED: Vec<u8> = {
            let d = tempfile::tempdir().unwrap();
            let p = d.path().join("seed.hst");
            let mut h = TraceHeader::new("fuzz");
            h.cpus = 4;
            h.processes = 2;
            h.accesses_per_second = Some(1e8);
            h.process_names = vec!["a".into(), "b".into()];
            h.regions.push(Region { pid: 1, hugepage_advised: true, ..Region::new("r", 1 << 30, 1 << 22) });
            let mut w = HstWriter::create(&p, &h).unwrap().with_chunk_records(100);
            for (i, a) in accesses(350, 9).into_iter().enumerate() {
                if i % 120 == 0 {
                    w.mark(&format!("level:{i}"));
                }
                w.write(Access { cpu: a.cpu % 4, pid: a.pid % 2, ..a }).unwrap();
            }
            w.finish().unwrap();
            std::fs::read(&p).unwrap()
        };
    }
    SEED.with(|s| s.clone())
}

/// Everything a reader can be asked about a file; each failure must be a
/// format error naming `path` at an offset within the file (or at its end).
fn read_everything(path: &Path, len: u64) -> Result<(), TestCaseError> {
    let check = |e: Error| -> Result<(), TestCaseError> {
        match e {
            Error::Format { path: p, offset, msg } => {
                prop_assert_eq!(&p, path, "{}", msg);
                prop_assert!(offset <= len, "offset {} past the end {} ({})", offset, len, msg);
                prop_assert!(!msg.is_empty());
                Ok(())
            }
            other => Err(TestCaseError::fail(format!("not a format error: {other:?}"))),
        }
    };
    if let Err(e) = read_all(path) {
        check(e)?;
    }
    for verify in [false, true] {
        if let Err(e) = summarize(path, verify) {
            check(e)?;
        }
    }
    if let Ok(mut r) = HstReader::open(path) {
        // Header fields passed the limits: nothing downstream may be sized past them.
        prop_assert!(r.header().check().is_ok());
        loop {
            match r.next_chunk() {
                Ok(Some(c)) => prop_assert!(c.len() <= hugescope_core::trace::hst::MAX_CHUNK_RECORDS),
                Ok(None) => break,
                Err(e) => {
                    check(e)?;
                    break;
                }
            }
        }
    }
    prop_assert!(rss_kb() < RSS_BOUND_KB, "resident memory {} KiB", rss_kb());
    Ok(())
}

fn with_file(bytes: &[u8], f: impl FnOnce(&Path) -> Result<(), TestCaseError>) -> Result<(), TestCaseError> {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("f.hst");
    std::fs::write(&p, bytes).unwrap();
    f(&p)
}

/// A mutation of a valid file: byte flips, a cut, an inserted or removed run.
#[derive(Debug, Clone)]
enum Mutation {
    Flip(prop::sample::Index, u8),
    Cut(prop::sample::Index),
    Insert(prop::sample::Index, Vec<u8>),
    Remove(prop::sample::Index, usize),
    /// Overwrite 4 bytes with a u32 (lengths and counts are u32 fields).
    Word(prop::sample::Index, u32),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<prop::sample::Index>(), 1u8..).prop_map(|(i, x)| Mutation::Flip(i, x)),
        any::<prop::sample::Index>().prop_map(Mutation::Cut),
        (any::<prop::sample::Index>(), prop::collection::vec(any::<u8>(), 1..32)).prop_map(|(i, v)| Mutation::Insert(i, v)),
        (any::<prop::sample::Index>(), 1usize..64).prop_map(|(i, n)| Mutation::Remove(i, n)),
        (any::<prop::sample::Index>(), prop_oneof![Just(0u32), Just(u32::MAX), Just(1 << 20), Just((1 << 20) + 1), any::<u32>()])
            .prop_map(|(i, w)| Mutation::Word(i, w)),
    ]
}

fn apply(b: &mut Vec<u8>, m: &Mutation) {
    if b.is_empty() {
        return;
    }
    match m {
        Mutation::Flip(i, x) => {
            let k = i.index(b.len());
            b[k] ^= x;
        }
        Mutation::Cut(i) => b.truncate(i.index(b.len())),
        Mutation::Insert(i, v) => {
            let k = i.index(b.len() + 1);
            b.splice(k..k, v.iter().copied());
        }
        Mutation::Remove(i, n) => {
            let k = i.index(b.len());
            let end = (k + n).min(b.len());
            b.drain(k..end);
        }
        Mutation::Word(i, w) => {
            if b.len() >= 4 {
                let k = i.index(b.len() - 3);
                b[k..k + 4].copy_from_slice(&w.to_le_bytes());
            }
        }
    }
}

/// Header JSON values: numbers at and around every limit, wrong types.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::json;
    prop_oneof![
        any::<u64>().prop_map(|x| json!(x)),
        prop_oneof![Just(0u64), Just(1), Just(128), Just(129), Just(256), Just(257), Just(1 << 32), Just(1_000_000_000)].prop_map(|x| json!(x)),
        any::<f64>().prop_map(|x| json!(x)),
        prop_oneof![Just(-1i64), Just(i64::MIN)].prop_map(|x| json!(x)),
        ".{0,8}".prop_map(|s| json!(s)),
        Just(serde_json::Value::Null),
    ]
}

fn region() -> impl Strategy<Value = serde_json::Value> {
    (any::<u64>(), prop_oneof![any::<u64>(), 0u64..(1 << 30)], prop_oneof![0u64..4, any::<u64>()], any::<bool>())
        .prop_map(|(base, len, pid, adv)| serde_json::json!({"name": "r", "base": base, "len": len, "pid": pid, "hugepage_advised": adv}))
}

proptest! {
    #![proptest_config(cases(400))]

    /// Arbitrary bytes, with and without a valid preamble in front.
    #[test]
    fn trace_reader_arbitrary_bytes(body in prop::collection::vec(any::<u8>(), 0..600), magic in any::<bool>()) {
        let mut b = Vec::new();
        if magic {
            b.extend_from_slice(&seed_file()[..20]);
        }
        b.extend_from_slice(&body);
        let len = b.len() as u64;
        with_file(&b, |p| read_everything(p, len))?;
    }

    /// A valid file under up to six mutations.
    #[test]
    fn trace_reader_mutated_files(muts in prop::collection::vec(mutation(), 1..6)) {
        let mut b = seed_file();
        for m in &muts {
            apply(&mut b, m);
        }
        let len = b.len() as u64;
        with_file(&b, |p| read_everything(p, len))?;
    }

    /// Crafted headers with valid checksums: every field replaced by values at
    /// and past its limit, wrong types, many or absurd regions.
    #[test]
    fn trace_reader_crafted_headers(
        fields in prop::collection::vec((prop::sample::select(vec!["cpus", "processes", "accesses_per_second", "workload", "params", "process_names"]), json_value()), 0..4),
        regions in prop::option::of(prop::collection::vec(region(), 0..6)),
        names in prop::option::of(0usize..300),
    ) {
        let seed = seed_file();
        let mut h: serde_json::Value = serde_json::from_slice(header_json(&seed)).unwrap();
        for (k, v) in fields {
            h[k] = v;
        }
        if let Some(r) = regions {
            h["regions"] = serde_json::json!(r);
        }
        if let Some(n) = names {
            h["process_names"] = serde_json::json!((0..n).map(|i| i.to_string()).collect::<Vec<_>>());
        }
        let b = splice_header(&seed, &serde_json::to_vec(&h).unwrap());
        let len = b.len() as u64;
        with_file(&b, |p| read_everything(p, len))?;
    }
}

/// A plan's failure names the file (load) and, for content errors, the entry
/// or the JSON position.
fn load_plan(text: &[u8]) -> Result<(), TestCaseError> {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("plan.json");
    std::fs::write(&p, text).unwrap();
    match Plan::load(&p) {
        Ok(plan) => {
            prop_assert!(plan.validate().is_ok());
            // What loads round-trips.
            prop_assert_eq!(Plan::parse(&plan.to_json()).unwrap(), plan);
        }
        Err(Error::Format { path, msg, .. }) => {
            prop_assert_eq!(&path, &p);
            prop_assert!(msg.contains("plan") || msg.contains("entry") || msg.contains("JSON"), "{}", msg);
        }
        // Not UTF-8: an I/O error naming the file.
        Err(e @ Error::Io { .. }) => prop_assert!(e.to_string().contains("plan.json"), "{}", e),
        Err(e) => return Err(TestCaseError::fail(format!("unexpected error {e:?}"))),
    }
    prop_assert!(rss_kb() < RSS_BOUND_KB);
    Ok(())
}

fn plan_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::json;
    let num = prop_oneof![
        any::<u64>().prop_map(|x| json!(x)),
        prop_oneof![Just(0u64), Just(4096), Just(2 << 20), Just(1 << 30), Just(u64::MAX)].prop_map(|x| json!(x)),
        "(0x)?[0-9a-f]{1,20}(k|M|GiB)?".prop_map(|s| json!(s)),
        any::<f64>().prop_map(|x| json!(x)),
        any::<i64>().prop_map(|x| json!(x)),
    ];
    let when = prop_oneof![
        Just(json!(null)),
        Just(json!("start")),
        (0u64..1 << 40).prop_map(|x| json!({"accesses": x})),
        ".{0,6}".prop_map(|s| json!(s)),
        any::<f64>().prop_map(|x| json!({"seconds": x})),
    ];
    let entry = (num.clone(), num.clone(), prop::option::of(num.clone()), prop::option::of(when), prop::option::of(num), prop::option::of(".{0,4}"))
        .prop_map(|(s, l, ps, w, pid, extra)| {
            let mut e = json!({"start": s, "length": l});
            if let Some(x) = ps { e["page_size"] = x; }
            if let Some(x) = w { e["when"] = x; }
            if let Some(x) = pid { e["pid"] = x; }
            if let Some(k) = extra { e[k] = json!(1); }
            e
        });
    prop::collection::vec(entry, 0..8).prop_flat_map(|entries| {
        prop_oneof![
            Just(serde_json::Value::Array(entries.clone())),
            prop_oneof![Just(json!(1)), Just(json!(2)), Just(json!("x"))].prop_map(move |v| json!({"version": v, "entries": entries.clone()})),
        ]
    })
}

proptest! {
    #![proptest_config(cases(400))]

    #[test]
    fn plan_parser_arbitrary_bytes(b in prop::collection::vec(any::<u8>(), 0..300)) {
        load_plan(&b)?;
    }

    #[test]
    fn plan_parser_structured_and_mutated_json(v in plan_value(), muts in prop::collection::vec(mutation(), 0..3)) {
        let mut b = serde_json::to_vec(&v).unwrap();
        for m in &muts {
            apply(&mut b, m);
        }
        load_plan(&b)?;
    }
}

#[test]
fn plan_files_past_the_size_limit_are_refused_unread() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("big.json");
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(hugescope_core::plan::MAX_PLAN_BYTES + 10).unwrap();
    match Plan::load(&p) {
        Err(e @ Error::Input(_)) => assert!(e.to_string().contains("past the 64MiB limit for a plan"), "{e}"),
        other => panic!("{other:?}"),
    }
}
