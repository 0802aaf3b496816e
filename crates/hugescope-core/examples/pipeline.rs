//! The full-pipeline throughput of `hugescope bench` on one trace, without
//! Python: `cargo run --release -p hugescope-core --example pipeline --
//! [--artifact] TRACE [ROW...]` (rows: policy specs or "static 4k"; default
//! pcc, linux, static 4k on haswell-pcc). `--artifact`: the authors' model,
//! `pcc-artifact` with `bench::ARTIFACT_SETS`, default row
//! `bench::ARTIFACT_PCC_ROW` (one configuration, no base run).
use hugescope_core::bench::{pipeline_throughput_set, ARTIFACT_PCC_ROW, ARTIFACT_SETS, STATIC_ROW};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let artifact = args.first().is_some_and(|a| a == "--artifact");
    if artifact {
        args.remove(0);
    }
    let Some(path) = args.first() else {
        eprintln!("usage: pipeline [--artifact] TRACE [ROW...]");
        std::process::exit(2);
    };
    let mut rows: Vec<String> = args[1..].to_vec();
    let (preset, sets): (&str, Vec<String>) = if artifact {
        ("pcc-artifact", ARTIFACT_SETS.iter().map(|s| s.to_string()).collect())
    } else {
        ("haswell-pcc", Vec::new())
    };
    if rows.is_empty() {
        rows = if artifact { vec![ARTIFACT_PCC_ROW.into()] } else { vec!["pcc".into(), "linux".into(), STATIC_ROW.into()] };
    }
    let repeats = std::env::var("PIPELINE_REPEATS").ok().and_then(|s| s.parse().ok()).unwrap_or(5);
    let r = match pipeline_throughput_set(path, preset, &sets, &rows, repeats) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    println!("decode floor {:.1} M/s", r.decode_only.accesses_per_second / 1e6);
    for row in &r.rows {
        println!("{:>10}: {:6.1} M/s  ratio {:.3} (median {:.3})", row.what, row.simulate.accesses_per_second / 1e6, row.ratio, row.median_ratio);
    }
}
