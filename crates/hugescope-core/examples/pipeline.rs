//! The full-pipeline throughput of `hugescope bench` on one trace, without
//! Python: `cargo run --release -p hugescope-core --example pipeline -- TRACE
//! [ROW...]` (rows: policy specs or "static 4k"; default pcc, linux, static 4k).
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: pipeline TRACE [ROW...]");
        std::process::exit(2);
    };
    let mut rows: Vec<String> = args[1..].to_vec();
    if rows.is_empty() {
        rows = vec!["pcc".into(), "linux".into(), hugescope_core::bench::STATIC_ROW.into()];
    }
    let r = match hugescope_core::bench::pipeline_throughput(path, "haswell-pcc", &rows, 5) {
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
