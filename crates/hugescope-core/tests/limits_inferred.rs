//! Model memory that grows with a trace's content: accesses outside every
//! declared region create inferred VMAs as the run goes. With random 47-bit
//! addresses each access costs a 2MB VMA (about 3 KB of model state); the run
//! must stop with a clear error at the limit instead of growing without bound.
//!
//! A test binary of its own: it sets the limit through the environment,
//! which would leak into other tests of a shared binary.

use hugescope_core::config::MachineConfig;
use hugescope_core::os::kernel::OsConfig;
use hugescope_core::run::{simulate_policies, PolicySpec, RunOptions};
use hugescope_core::trace::hst::HstWriter;
use hugescope_core::trace::{Access, TraceHeader};
use hugescope_core::Error;

#[test]
fn inferred_mappings_stop_at_the_model_memory_limit() {
    std::env::set_var(hugescope_core::limits::MEMORY_LIMIT_ENV, "64MiB");
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("random.hst");
    let mut w = HstWriter::create(&p, &TraceHeader::new("random-addresses")).unwrap();
    let mut x = 88_172_645_463_325_252u64;
    for _ in 0..200_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        w.write(Access::read(x & ((1 << 47) - 1) & !4095)).unwrap();
    }
    w.finish().unwrap();
    let m = MachineConfig::preset("haswell-pcc").unwrap();
    let specs = [PolicySpec::parse("base").unwrap()];
    let opts = RunOptions { duration_s: Some(10.0), with_base: false, ..Default::default() };
    match simulate_policies(p.to_str().unwrap(), &m, &OsConfig::default(), &specs, &opts) {
        Err(e @ Error::Input(_)) => {
            let s = e.to_string();
            // Stopped after the first chunk whose mappings passed 64 MiB
            // (about 21000 VMAs of 3 KB): the first or second chunk.
            assert!(s.contains("outside its declared regions") && s.contains("by access 65536"), "{s}");
        }
        other => panic!("expected the limit error, got {:?}", other.map(|r| r.len())),
    }
    // A trace inside its declared regions is unaffected (tests/limits.rs).
}
