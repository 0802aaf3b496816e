//! Time the graph construction steps at a given scale (development aid).
use std::time::Instant;
fn main() {
    let scale: u32 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(22);
    let t = Instant::now();
    let el = hugescope_workloads::graph::kronecker::kronecker(scale, 16, 1);
    println!("kronecker scale {scale}: {} edges in {:.2} s", el.len(), t.elapsed().as_secs_f64());
    let mut p = hugescope_workloads::Params::new();
    p.insert("scale".into(), (scale as u64).into());
    let t = Instant::now();
    match hugescope_workloads::graph::prepare("bfs", &p) {
        Ok(g) => println!("generate + CSR (heap): {} entries in {:.2} s", g.csr.m(), t.elapsed().as_secs_f64()),
        Err(e) => eprintln!("error: {e}"),
    }
}
