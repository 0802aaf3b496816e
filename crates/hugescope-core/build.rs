//! The model's identity for the results cache (`src/result_cache.rs`): a
//! hash over every source file of this crate, so that a cached reference run
//! is never read back by a build whose model differs, even when the version
//! number was not bumped (a development build, another branch).

use std::path::Path;

fn visit(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            visit(&p, files);
        } else if p.extension().is_some_and(|x| x == "rs" || x == "toml") {
            files.push(p);
        }
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    visit(&root.join("src"), &mut files);
    visit(&root.join("presets"), &mut files);
    // The crate's manifest sets features and versions.
    files.push(root.join("Cargo.toml"));
    files.sort();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut add = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for f in &files {
        add(f.strip_prefix(root).unwrap_or(f).to_string_lossy().as_bytes());
        add(&[0]);
        add(&std::fs::read(f).unwrap_or_default());
        add(&[0]);
    }
    println!("cargo:rustc-env=HUGESCOPE_MODEL_HASH={h:016x}");
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=presets");
    println!("cargo:rerun-if-changed=Cargo.toml");
}
