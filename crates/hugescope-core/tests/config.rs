//! Configuration as data (`config::Config`, `os::config`): TOML and JSON
//! round trips over generated configurations, one error naming key and file
//! for each kind of bad value, old machine-only files, and every declared OS
//! knob reachable by `--set` (the test walks the declarations, so a new knob
//! is covered without editing it).

use hugescope_core::config::{MachineConfig, PRESETS};

use hugescope_core::configuration::{Config, Source};
use hugescope_core::os::config::{os_knobs, KnobKind, OsSettings};
use proptest::prelude::*;

fn load(name: &str, text: &str) -> hugescope_core::Result<Config> {
    Config::load(None, Some(Source { name, text }), &[], &[])
}

fn err(name: &str, text: &str) -> String {
    load(name, text).err().unwrap_or_else(|| panic!("{name} loaded: {text}")).to_string()
}

/// A value override for one knob, drawn over its whole declared range.
fn knob_value(i: usize) -> BoxedStrategy<Option<String>> {
    let k = &os_knobs()[i];
    let some: BoxedStrategy<String> = match k.kind {
        KnobKind::Size { min, max } | KnobKind::Count { min, max } => (min..=max).prop_map(|n| n.to_string()).boxed(),
        KnobKind::Share => (0.0..=1.0f64).prop_map(decimal).boxed(),
        KnobKind::Real { min, max, .. } => {
            // Open lower bounds are never drawn: the smallest step above min.
            (0.0..=1.0f64).prop_map(move |t| decimal((min + t * (max - min)).max(min + 1e-9 * max))).boxed()
        }
        KnobKind::Choice(words) => proptest::sample::select(words.to_vec()).prop_map(str::to_string).boxed(),
    };
    // An optional knob may be left to auto; a knob with a default kept.
    proptest::option::of(some).boxed()
}

fn os_overrides() -> impl Strategy<Value = Vec<String>> {
    let per_knob: Vec<_> = (0..os_knobs().len()).map(knob_value).collect();
    per_knob.prop_map(|vals| {
        let mut out = Vec::new();
        let mut timed = false;
        for (k, v) in os_knobs().iter().zip(vals) {
            if let Some(v) = v {
                // duration and rate exclude each other: keep the first drawn.
                if k.name == "duration" || k.name == "rate" {
                    if timed {
                        continue;
                    }
                    timed = true;
                }
                out.push(format!("os.{}={v}", k.name));
            }
        }
        out
    })
}

/// A real as text of at most 12 significant digits, read exactly by both
/// parsers: serde_json without its `float_roundtrip` feature rounds numbers
/// of 16-17 digits by one ulp (a known limit, see docs/configuration.md).
fn decimal(x: f64) -> String {
    let s = format!("{x:.11e}");
    let back: f64 = s.parse().unwrap();
    format!("{back}")
}

const POLICIES: &[&str] = &[
    "pcc", "pcc:entries=64,demotion=true", "hawkeye", "linux:enabled=madvise", "linux:enabled=never+pcc", "base", "ideal",
];

fn configs() -> impl Strategy<Value = Config> {
    (
        proptest::sample::select(PRESETS.to_vec()),
        os_overrides(),
        proptest::option::of(1.0..1000.0f64),
        proptest::sample::subsequence(POLICIES.to_vec(), 0..=4),
    )
        .prop_map(|(preset, mut overrides, walk, policies)| {
            if let Some(w) = walk {
                overrides.push(format!("cost.walk_ref_cycles={}", decimal(w)));
            }
            let policies: Vec<String> = policies.iter().map(|s| s.to_string()).collect();
            Config::load(Some(preset), None, &overrides, &policies).expect("generated configuration is valid")
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn toml_and_json_round_trip(cfg in configs()) {
        let toml = cfg.to_toml().unwrap();
        prop_assert_eq!(&load("run.toml", &toml).unwrap(), &cfg, "{}", toml);
        let json = serde_json::to_string_pretty(&cfg.to_json()).unwrap();
        prop_assert_eq!(&load("run.json", &json).unwrap(), &cfg, "{}", json);
        // The kernel's configuration and the run's time base follow.
        let again = load("run.toml", &toml).unwrap();
        prop_assert_eq!(serde_json::to_string(&again.os.os_config()).unwrap(), serde_json::to_string(&cfg.os.os_config()).unwrap());
        prop_assert_eq!(again.run_options(true).duration_s, cfg.run_options(true).duration_s);
    }
}

#[test]
fn bad_values_give_one_error_naming_key_and_file() {
    for (name, text, needles) in [
        ("run.toml", "[os]\nbugdet = 0.1\n", &["run.toml", "os.bugdet", "unknown key"][..]),
        ("run.toml", "[os]\nseed = \"x\"\n", &["run.toml", "os.seed=x", "not a non-negative integer"]),
        ("run.toml", "[os]\nseed = 1.5\n", &["run.toml", "os.seed=1.5"]),
        ("run.toml", "[os]\nbudget = 2\n", &["run.toml", "os.budget=2", "out of range"]),
        ("run.toml", "[os]\nduration = 0\n", &["run.toml", "os.duration=0", "out of range"]),
        ("run.toml", "[os]\nfault_base_us = -1\n", &["run.toml", "os.fault_base_us=-1"]),
        ("run.toml", "[os]\nfrag_method = \"buddy\"\n", &["run.toml", "os.frag_method=buddy", "pcc, ingens"]),
        ("run.toml", "[os]\nduration = 10\nrate = 1e6\n", &["run.toml", "os.duration=10", "os.rate"]),
        ("run.toml", "[machine]\nfoo = 1\n", &["run.toml", "foo"]),
        ("run.toml", "[machine.l1.4k]\nentries = 63\n", &["run.toml", "l1.4k"]),
        ("run.toml", "[[policy]]\nname = \"pcc\"\nentries = \"x\"\n", &["run.toml", "policy[1]", "entries=x"]),
        ("run.toml", "[[policy]]\nname = \"pcc\"\nentrys = 8\n", &["run.toml", "policy[1]", "entrys"]),
        ("run.toml", "[[policy]]\nname = \"nosuch\"\n", &["run.toml", "policy[1]", "nosuch"]),
        ("run.toml", "[[policy]]\nentries = 8\n", &["run.toml", "policy[1]", "no name"]),
        ("run.toml", "[os]\n[oss]\n", &["run.toml", "oss"]),
        ("run.toml", "[os\n", &["run.toml", "TOML"]),
        ("run.json", "{\"os\": {\"budget\": \"abc\"}}", &["run.json", "os.budget=abc", "not a share"]),
        ("run.json", "{\"os\": {\"memory\": [1]}}", &["run.json", "os.memory=[1]", "not a size"]),
        ("run.json", "{\"os\": 3}", &["run.json", "os"]),
    ] {
        let e = err(name, text);
        assert!(!e.contains('\n'), "one line: {e}");
        for n in needles {
            assert!(e.contains(n), "{text:?}: '{n}' not in: {e}");
        }
    }
    // Overrides are named as such.
    let e = Config::load(None, None, &["os.budget=7%x".into()], &[]).unwrap_err().to_string();
    assert!(e.contains("override") && e.contains("os.budget=7%x"), "{e}");
    let e = Config::load(None, None, &["os.budget=0.1".into(), "os.budget=0.2".into()], &[]).unwrap_err().to_string();
    assert!(e.contains("os.budget given twice"), "{e}");
}

#[test]
fn machine_only_files_keep_their_meaning() {
    // The example of docs/config.md, with no sections: machine keys.
    let text = "preset = \"sandybridge-ds\"\npage_sizes = [\"4k\", \"2m\", \"1g\"]\n[cost]\nwalk_ref_cycles = 31.5\n[l2.\"4k\"]\nentries = 1024\n";
    let cfg = load("old.toml", text).unwrap();
    assert_eq!(cfg.machine, MachineConfig::load(None, Some(text), &[]).unwrap());
    assert_eq!(cfg.preset, "sandybridge-ds");
    assert_eq!(cfg.machine.cost.walk_ref_cycles, 31.5);
    assert_eq!(cfg.os, OsSettings::default());
    assert!(cfg.policies.is_empty());
    // The same keys under [machine] mean the same.
    let sectioned = "[machine]\npreset = \"sandybridge-ds\"\n[machine.cost]\nwalk_ref_cycles = 31.5\n[machine.l2.\"4k\"]\nentries = 1024\n";
    assert_eq!(load("new.toml", sectioned).unwrap(), cfg);
}

#[test]
fn every_declared_knob_is_settable_and_listed() {
    for k in os_knobs() {
        let cfg = Config::load(None, None, &[format!("os.{}={}", k.name, k.example())], &[])
            .unwrap_or_else(|e| panic!("os.{}={}: {e}", k.name, k.example()));
        let json = cfg.to_json();
        assert!(json["os"].get(k.name).is_some(), "{} missing from the JSON", k.name);
        assert!(!json["os"][k.name].is_null(), "{} not set", k.name);
        // And from a file's [os] table.
        let from_file = load("k.toml", &format!("[os]\n{} = \"{}\"\n", k.name, k.example())).unwrap();
        assert_eq!(from_file.os, cfg.os, "{}", k.name);
    }
}

#[test]
fn flags_and_file_give_the_same_run() {
    let flags = Config::load(
        Some("haswell-pcc"),
        None,
        &["os.budget=0.04".into(), "os.frag=0.5".into(), "os.duration=120".into(), "os.fault_base_us=2.5".into()],
        &["pcc:entries=64,demotion=true".into(), "linux:enabled=never+pcc".into()],
    )
    .unwrap();
    let file = load("run.toml", &flags.to_toml().unwrap()).unwrap();
    assert_eq!(file, flags);
    let labels = |c: &Config| c.specs().unwrap().iter().map(|s| s.label.clone()).collect::<Vec<_>>();
    assert_eq!(labels(&file), ["pcc:entries=64,demotion=true", "linux:enabled=never+pcc"]);
    // Flags replace the file's policies.
    let replaced = Config::load(None, Some(Source { name: "run.toml", text: &flags.to_toml().unwrap() }), &[], &["hawkeye".into()]).unwrap();
    assert_eq!(labels(&replaced), ["hawkeye"]);
}
