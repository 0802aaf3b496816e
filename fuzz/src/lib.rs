//! What every fuzz target asserts of a parser's error: one line, and short
//! (a value from the input is shown cut, never echoed whole), so that no
//! input can flood or drive the user's terminal through an error message.

/// Longest error message a parser may produce (the CLI cuts its line at 600
/// characters; a core message stays well under this).
pub const MAX_MESSAGE: usize = 2048;

/// Panic (a crash to libFuzzer) if `e` is not one short line.
pub fn check_message(e: &hugescope_core::Error) {
    let m = e.to_string();
    assert!(!m.contains('\n') && !m.contains('\r'), "error spans lines: {m:?}");
    assert!(m.chars().count() <= MAX_MESSAGE, "error of {} characters: {:?}...", m.len(), &m[..200.min(m.len())]);
}

/// One importer target: any bytes give accesses that fit the record layout,
/// within the window, or one short error line, never a panic. The first byte
/// picks the window (skip 0..7, record 0..15 or all) and lackey's
/// `--instructions`, so that the sampler is fuzzed too.
pub fn import(format: hugescope_core::trace::import::Format, data: &[u8]) {
    use hugescope_core::trace::import::{decode, ImportOptions, Window};
    let Some((&w, rest)) = data.split_first() else { return };
    let window = Window { skip: u64::from(w & 7), record: (w & 8 != 0).then_some(u64::from(w >> 4)) };
    let opts = ImportOptions { window, instructions: w & 1 != 0, cpu: 0 };
    let mut kept = 0u64;
    let r = decode(format, &mut &rest[..], std::path::Path::new("fuzz.in"), &opts, &mut |a| {
        a.validate().expect("an importer hands on only valid accesses");
        kept += 1;
        Ok(())
    });
    match r {
        Ok(seen) => {
            assert!(kept <= seen.saturating_sub(window.skip));
            if let Some(m) = window.record {
                assert!(kept <= m);
            }
        }
        Err(e) => check_message(&e),
    }
}
