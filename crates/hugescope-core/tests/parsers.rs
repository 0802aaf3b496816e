//! Property tests of the text parsers a user feeds: plans, machine TOML,
//! sizes and counts, trace marker labels. Arbitrary input must give Ok or a
//! clear Err, never a panic; valid input must round-trip.

use hugescope_core::config::MachineConfig;
use hugescope_core::plan::{Plan, PlanEntry, When};
use hugescope_core::trace::{content_label, free_label, parse_content_label, parse_free_label, parse_populate_label, populate_label, ContentDecl};
use hugescope_core::units::{parse_count, parse_size};
use proptest::prelude::*;

fn json_fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("[".to_string()),
        Just("]".to_string()),
        Just("{".to_string()),
        Just("}".to_string()),
        Just(",".to_string()),
        Just(":".to_string()),
        Just("\"start\"".to_string()),
        Just("\"length\"".to_string()),
        Just("\"page_size\"".to_string()),
        Just("\"when\"".to_string()),
        Just("\"0x200000\"".to_string()),
        Just("\"2MiB\"".to_string()),
        Just("2097152".to_string()),
        Just("-1".to_string()),
        Just("1e400".to_string()),
        Just("{\"time_s\":-3}".to_string()),
        Just("{\"accesses\":\"zz\"}".to_string()),
        "[a-z0-9\"]{0,6}",
    ]
}

proptest! {
    #[test]
    fn plan_parser_never_panics(parts in proptest::collection::vec(json_fragment(), 0..24)) {
        let text = parts.concat();
        let _ = Plan::parse(&text);
    }

    #[test]
    fn plan_roundtrips(entries in proptest::collection::vec((0u64..1 << 20, 1u64..16, 0u16..4, 0u8..4, 0u64..1000), 0..12)) {
        let mut start = 0u64;
        let list: Vec<PlanEntry> = entries.iter().map(|&(gap, n, pid, kind, x)| {
            start += gap << 21;
            let e = PlanEntry {
                start,
                length: n << 21,
                page_size: 2 << 20,
                when: match kind { 0 => When::Start, 1 => When::TimeS(x as f64 / 8.0), 2 => When::Accesses(x), _ => When::Progress(format!("level:{x}")) },
                pid,
                note: None,
            };
            start += n << 21;
            e
        }).collect();
        let p = Plan::new(list);
        prop_assert_eq!(Plan::parse(&p.to_json()).unwrap(), p);
    }

    #[test]
    fn machine_toml_never_panics(key in "(l1|l2|pwc|cost|walker)\\.[a-z0-9+]{1,6}(\\.[a-z_]{1,12})?", value in "-?[0-9]{1,12}|[a-z]{1,5}|\\[[0-9, ]{0,12}\\]") {
        let _ = MachineConfig::load(Some("haswell-pcc"), None, &[format!("{key}={value}")]);
        let toml = format!("[{}]\nentries = {value}\n", key.split('.').next().unwrap_or("l1"));
        let _ = MachineConfig::load(None, Some(&toml), &[]);
    }

    #[test]
    fn sizes_and_counts_never_panic(s in "\\PC{0,12}") {
        let _ = parse_size(&s);
        let _ = parse_count(&s);
    }

    #[test]
    fn sizes_roundtrip(n in 0u64..1 << 40, unit in 0usize..4) {
        let (suffix, mult) = [("", 1u64), ("k", 1 << 10), ("MiB", 1 << 20), ("G", 1 << 30)][unit];
        let v = n >> (10 * unit as u32);
        prop_assert_eq!(parse_size(&format!("{v}{suffix}")).unwrap(), v * mult);
    }

    #[test]
    fn marker_labels_roundtrip(pid in 0u16..128, start in any::<u64>(), len in any::<u64>(), junk in "\\PC{0,20}") {
        prop_assert_eq!(parse_free_label(&free_label(pid, start, len)), Some((pid, start, len)));
        prop_assert_eq!(parse_populate_label(&populate_label(pid, start, len)), Some((pid, start, len)));
        let _ = parse_free_label(&junk);
        let _ = parse_populate_label(&format!("populate:{junk}"));
    }

    #[test]
    fn content_labels_roundtrip(pid in 0u16..128, start in any::<u64>(), len in any::<u64>(), stream in any::<u64>(), first in any::<u64>(), junk in "\\PC{0,30}") {
        let d = ContentDecl { pid, start, len, stream, first };
        prop_assert_eq!(parse_content_label(&content_label(&d)), Some(d));
        prop_assert_eq!(parse_free_label(&content_label(&d)), None);
        let _ = parse_content_label(&format!("content:{junk}"));
    }
}
