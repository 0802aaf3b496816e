//! Simulation throughput (accesses per second) on the haswell-pcc preset:
//! an in-memory GUPS stream, a GUPS `.hst` file, and the decode-only floor of
//! the same file, so the ratio shows what the MMU model costs. Two more runs
//! price the direct-segment unit: loaded but disabled (what `4k+primary`
//! pays), and with a segment over half the table.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use hugescope_core::config::MachineConfig;
use hugescope_core::pagemap::StaticMap;
use hugescope_core::hw::segment::ProcessSegment;
use hugescope_core::hw::{DirectSegment, RadixWalker, SegmentUnit, Segments};
use hugescope_core::sim::Simulator;
use hugescope_core::trace::hst::{HstReader, HstWriter};
use hugescope_core::trace::{Access, Region, TraceHeader};

const BASE: u64 = 0x7e00_0000_0000;
const FOOTPRINT: u64 = 1 << 30;
const UPDATES: u64 = 2_000_000;

fn gups_stream() -> Vec<Access> {
    let mut x = 0x1234_5678_9abc_def0u64;
    let mut v = Vec::with_capacity(2 * UPDATES as usize);
    for _ in 0..UPDATES {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let a = BASE + (x % (FOOTPRINT / 8)) * 8;
        v.push(Access::read(a));
        v.push(Access::write(a));
    }
    v
}

fn bench(c: &mut Criterion) {
    let stream = gups_stream();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gups.hst");
    let mut h = TraceHeader::new("gups");
    h.regions.push(Region::new("table", BASE, FOOTPRINT));
    let mut w = HstWriter::create(&path, &h).unwrap();
    for &a in &stream {
        w.write(a).unwrap();
    }
    w.finish().unwrap();

    let cfg = MachineConfig::preset("haswell-pcc").unwrap();
    let mut g = c.benchmark_group("haswell-pcc gups 1GiB");
    g.throughput(Throughput::Elements(stream.len() as u64));
    g.sample_size(10);
    for (label, pages) in [("4k", 0usize), ("2m", 1)] {
        g.bench_function(format!("in-memory stream, {label} pages"), |b| {
            b.iter(|| {
                let mut s = Simulator::new(cfg.clone(), 1, StaticMap::Uniform(pages)).unwrap();
                for &a in &stream {
                    s.step(a);
                }
                s.counters().walks
            })
        });
    }
    for (label, covered) in [("segment unit, no segment", 0), ("segment over half", FOOTPRINT / 2)] {
        g.bench_function(format!("in-memory stream, 4k pages, {label}"), |b| {
            b.iter(|| {
                let mut s: Simulator<StaticMap, RadixWalker, Segments> =
                    Simulator::with_unit(cfg.clone(), 1, StaticMap::Uniform(0)).unwrap();
                let regs = DirectSegment::new(BASE, BASE + covered, 0).unwrap();
                s.seg.update(ProcessSegment { pid: 0, primary: (BASE, BASE + FOOTPRINT), regs, ..Default::default() });
                for &a in &stream {
                    s.step(a);
                }
                s.counters().walks
            })
        });
    }
    g.bench_function(".hst file, 4k pages", |b| {
        b.iter(|| {
            let mut r = HstReader::open(&path).unwrap();
            let mut s = Simulator::new(cfg.clone(), 1, StaticMap::Uniform(0)).unwrap();
            s.run_reader(&mut r).unwrap();
            s.counters().walks
        })
    });
    g.bench_function(".hst file, decode only (floor)", |b| {
        b.iter(|| {
            let mut r = HstReader::open(&path).unwrap();
            let mut acc = 0u64;
            while let Some(chunk) = r.next_chunk().unwrap() {
                for &rec in chunk {
                    acc = acc.wrapping_add(Access::unpack(rec).addr);
                }
            }
            acc
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
