//! Simulate a trace file with a static page map and print throughput:
//! `cargo run --release -p hugescope-core --example simfile -- TRACE [PAGES]`.
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).expect("usage: simfile TRACE [PAGES]");
    let pages = args.get(2).map(String::as_str).unwrap_or("4k");
    let cfg = hugescope_core::config::MachineConfig::preset("haswell-pcc").unwrap();
    let r = hugescope_core::bench::file_throughput(path, cfg, pages, 3).unwrap();
    println!("decode {:.1} M/s, simulate {:.1} M/s", r.decode_only.accesses_per_second / 1e6, r.simulate.accesses_per_second / 1e6);
}
