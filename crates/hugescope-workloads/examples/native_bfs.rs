//! Run a built-in workload natively once and print the report (setup and run
//! times). Usage: `cargo run --release -p hugescope-workloads --example native_bfs -- [scale] [thp]`.

use hugescope_workloads::{native, NativeOptions, Params};

fn main() {
    let mut args = std::env::args().skip(1);
    let scale: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(22);
    let thp = args.next().map(|s| s == "thp").unwrap_or(false);
    let mut p = Params::new();
    p.insert("scale".into(), scale.into());
    let mut levels = 0;
    match native("bfs", &p, &NativeOptions { thp }, &mut |_l: &str| levels += 1) {
        Ok(r) => {
            println!("scale {scale} thp={thp}: setup {:.2} s, bfs {:.3} s, {levels} progress points", r.setup_seconds, r.run_seconds);
            println!("{}", serde_json::to_string_pretty(&r.result).unwrap_or_default());
            for w in r.warnings {
                println!("warning: {w}");
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
