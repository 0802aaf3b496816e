//! Trace-generation throughput: BFS (GAP-style, direction-optimizing) at scale
//! 20 into a counting sink. The graph is built once; each iteration traces the
//! whole kernel. Throughput is reported in accesses per second (elements/s).
//! Target: at least 20 million accesses per second per core.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use hugescope_core::trace::CountingSink;
use hugescope_workloads::graph;
use hugescope_workloads::Params;

fn params(scale: u64, dobfs: bool) -> Params {
    let mut p = Params::new();
    p.insert("scale".into(), scale.into());
    p.insert("direction_optimizing".into(), dobfs.into());
    p
}

fn tracegen(c: &mut Criterion) {
    let mut group = c.benchmark_group("tracegen");
    group.sample_size(10);
    for dobfs in [true, false] {
        let prepared = graph::prepare("bfs", &params(20, dobfs)).expect("build scale-20 graph");
        let mut probe = CountingSink::default();
        let out = graph::trace_prepared(&prepared, &mut probe).expect("trace");
        group.throughput(Throughput::Elements(out.accesses));
        let name = if dobfs { "bfs_do_scale20" } else { "bfs_topdown_scale20" };
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut sink = CountingSink::default();
                let out = graph::trace_prepared(&prepared, &mut sink).expect("trace");
                assert_eq!(sink.reads + sink.writes, out.accesses);
                out.accesses
            })
        });
    }
    group.finish();
}

criterion_group!(benches, tracegen);
criterion_main!(benches);
