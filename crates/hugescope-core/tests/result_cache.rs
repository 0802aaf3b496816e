//! The results cache (`result_cache`): a `base` reference read back from the
//! cache gives results byte-identical to simulating it; a corrupt, forged or
//! untrusted entry or directory is never used; a sweep batch reuses it too.
//!
//! One test function: the cache directory is process-wide (environment).

mod common;

use common::machine;
use hugescope_core::configuration::Config;
use hugescope_core::os::clock::TimeBase;
use hugescope_core::os::kernel::OsConfig;
use hugescope_core::result_cache;
use hugescope_core::run::{simulate_policies, PolicySpec, RunOptions};
use hugescope_core::sweep_batch::{run_points, SweepPoint};
use std::os::unix::fs::PermissionsExt;

fn trace(dir: &std::path::Path, name: &str, seed: u64) -> String {
    common::cache_test_trace(dir, name, seed)
}

fn os() -> OsConfig {
    OsConfig { time: Some(TimeBase::AccessRate { accesses_per_second: 1e6 }), budget: Some(0.5), ..Default::default() }
}

fn run(path: &str) -> String {
    let specs = vec![PolicySpec::parse("pcc").unwrap(), PolicySpec::parse("linux").unwrap()];
    let opts = RunOptions { with_base: true, ..Default::default() };
    serde_json::to_string(&simulate_policies(path, &machine(), &os(), &specs, &opts).unwrap()).unwrap()
}

fn entries(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    common::cache_entries(dir)
}

#[test]
fn cached_references_give_byte_identical_results_and_bad_entries_are_never_used() {
    let t = tempfile::tempdir().unwrap();
    let cache = t.path().join("cache");
    let path = trace(t.path(), "a.hst", 0x5eed);

    // Without the cache: the reference result.
    std::env::set_var(result_cache::NO_CACHE_ENV, "1");
    std::env::set_var(result_cache::CACHE_DIR_ENV, &cache);
    let uncached = run(&path);
    assert!(!cache.exists(), "--no-cache creates nothing");
    std::env::remove_var(result_cache::NO_CACHE_ENV);

    // Cold: base simulated and stored (one entry, mode 0600, dir 0700).
    let h0 = result_cache::hits();
    assert!(run(&path) == uncached);
    assert_eq!(result_cache::hits(), h0, "a cold cache has nothing to read");
    let e = entries(&cache);
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(std::fs::metadata(&e[0]).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::metadata(&cache).unwrap().permissions().mode() & 0o777, 0o700);

    // Warm: the reference is read back, results byte for byte the same.
    assert!(run(&path) == uncached);
    assert_eq!(result_cache::hits(), h0 + 1);

    // The entry is used, not ignored: a forged reference with a recomputed
    // checksum that round-trips would change the speedups (this is what the
    // checksum and the trust checks guard; a user's own cache is trusted).
    let text = std::fs::read_to_string(&e[0]).unwrap();
    let (_, body) = text.split_once('\n').unwrap();
    let forged_body = body.replacen("\"walks\":", "\"walks\":1", 1);
    std::fs::write(&e[0], format!("{:08x}\n{forged_body}", crc32fast::hash(forged_body.as_bytes()))).unwrap();
    assert!(run(&path) != uncached, "a valid entry is what the run reads");

    // Corrupt (a changed digit, checksum kept): ignored, replaced by a good one.
    std::fs::write(&e[0], text.replacen("\"accesses\":", "\"accesses\":9", 1)).unwrap();
    let h1 = result_cache::hits();
    assert!(run(&path) == uncached);
    assert_eq!(result_cache::hits(), h1, "a corrupt entry is not a hit");
    assert_eq!(std::fs::read_to_string(&e[0]).unwrap(), text, "the corrupt entry was replaced");

    // Half written (truncated): ignored and replaced.
    std::fs::write(&e[0], &text[..text.len() / 3]).unwrap();
    assert!(run(&path) == uncached);
    assert_eq!(std::fs::read_to_string(&e[0]).unwrap(), text);

    // An entry others can write (mode 0666) is not trusted.
    std::fs::set_permissions(&e[0], std::fs::Permissions::from_mode(0o666)).unwrap();
    let h2 = result_cache::hits();
    assert!(run(&path) == uncached);
    assert_eq!(result_cache::hits(), h2);
    assert_eq!(std::fs::metadata(&e[0]).unwrap().permissions().mode() & 0o777, 0o600, "replaced by a private one");

    // An entry that is a symbolic link (planted) is not followed.
    let elsewhere = t.path().join("elsewhere");
    std::fs::write(&elsewhere, &text).unwrap();
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::remove_file(&e[0]).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &e[0]).unwrap();
    let h3 = result_cache::hits();
    assert!(run(&path) == uncached);
    assert_eq!(result_cache::hits(), h3);
    assert!(!std::fs::symlink_metadata(&e[0]).unwrap().file_type().is_symlink(), "the link was replaced (rename)");
    assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), text, "its target untouched");

    // Another trace (same shape, other accesses): another key.
    let other = trace(t.path(), "b.hst", 0xbeef);
    let h4 = result_cache::hits();
    run(&other);
    assert_eq!(result_cache::hits(), h4);
    assert_eq!(entries(&cache).len(), 2);

    // A cache directory that is a symbolic link, or writable by others: not
    // used at all (nothing read, nothing written), results unchanged.
    let link = t.path().join("cache-link");
    std::os::unix::fs::symlink(&cache, &link).unwrap();
    std::env::set_var(result_cache::CACHE_DIR_ENV, &link);
    let h5 = result_cache::hits();
    assert!(run(&path) == uncached);
    assert_eq!(result_cache::hits(), h5);
    assert!(result_cache::status().unwrap().contains("symbolic link"), "{:?}", result_cache::status());
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::env::set_var(result_cache::CACHE_DIR_ENV, &cache);
    assert!(run(&path) == uncached);
    assert_eq!(result_cache::hits(), h5);
    assert!(result_cache::status().unwrap().contains("mode 0777"), "{:?}", result_cache::status());
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).unwrap();

    // A sweep batch (two threads, shared pass) reuses the entry and gives
    // the same results as without the cache.
    let cfg = Config::load(Some("haswell-pcc"), None, &["os.rate=1e6".to_string()], &[]).unwrap();
    let points: Vec<SweepPoint> = ["pcc", "linux", "ideal"]
        .iter()
        .map(|p| SweepPoint { policy: p.to_string(), budget: Some(0.25), ..Default::default() })
        .collect();
    let sweep = |p: &str| serde_json::to_string(&run_points(p, &cfg, &points, 2, true).unwrap()).unwrap();
    std::env::set_var(result_cache::NO_CACHE_ENV, "1");
    let sweep_uncached = sweep(&path);
    std::env::remove_var(result_cache::NO_CACHE_ENV);
    sweep(&path); // stores this configuration's reference
    let h6 = result_cache::hits();
    assert!(sweep(&path) == sweep_uncached);
    // The batch read the base reference once (one unit for both threads),
    // and `ideal`'s run (a reference run at the point's budget).
    assert_eq!(result_cache::hits(), h6 + 2);

    // Bounded: with room for about one entry, storing a new one evicts the
    // least recently used others and keeps the new one.
    let size = entries(&cache).iter().map(|p| std::fs::metadata(p).unwrap().len()).max().unwrap();
    assert!(entries(&cache).len() >= 2);
    std::env::set_var(result_cache::MAX_BYTES_ENV, (size + size / 2).to_string());
    let third = trace(t.path(), "c.hst", 0xc0ffee);
    let before = entries(&cache);
    run(&third);
    std::env::remove_var(result_cache::MAX_BYTES_ENV);
    let after = entries(&cache);
    assert_eq!(after.len(), 1, "{after:?}");
    assert!(!before.contains(&after[0]), "the new entry is the one kept");

    // clear removes the entries and nothing else.
    std::fs::write(cache.join("notes.txt"), "mine").unwrap();
    assert!(result_cache::clear().unwrap() >= 1);
    assert!(entries(&cache).is_empty());
    assert!(cache.join("notes.txt").exists());
}
