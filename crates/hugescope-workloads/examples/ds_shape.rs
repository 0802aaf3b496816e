//! Print the direct-segments shape of workloads on the `sandybridge-ds`
//! machine: walks per 1000 accesses with 4KB, 2MB and 1GB pages and the share
//! of 4KB walks outside the would-be primary region (docs/workloads.md,
//! "Direct-segments workloads").
//!
//! cargo run --release -p hugescope-workloads --example ds_shape -- mysql [key=value ...] [-- next ...]

use hugescope_core::config::MachineConfig;
use hugescope_workloads::{shape, Params};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let machine = MachineConfig::preset("sandybridge-ds").expect("preset");
    println!("{:<12} {:>10} {:>8} {:>8} {:>8} {:>9}  walks by kind (4k)", "workload", "accesses", "4k/1k", "2m/1k", "1g/1k", "outside%");
    for run in args.split(|a| a == "--") {
        let Some((name, kv)) = run.split_first() else { continue };
        let mut p = Params::new();
        for a in kv {
            let (k, v) = a.split_once('=').expect("key=value");
            p.insert(k.to_string(), serde_json::Value::String(v.to_string()));
        }
        match shape::measure(name, &p, &machine) {
            Ok(s) => println!(
                "{:<12} {:>10} {:>8.2} {:>8.2} {:>8.2} {:>9.3}  {:?}",
                name,
                s.accesses,
                s.per_1k("4k"),
                s.per_1k("2m"),
                s.per_1k("1g"),
                100.0 * s.outside_share,
                s.walks_4k_by_kind
            ),
            Err(e) => eprintln!("{name}: {e}"),
        }
    }
}
