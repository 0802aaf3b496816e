//! The lackey importer (`hugescope trace import lackey`): any bytes give accesses
//! that fit the record layout, or one short error line, never a panic. The
//! first byte picks a window (skip, record) so that the sampler is fuzzed too.
#![no_main]
use hugescope_core::trace::import::{decode, Format, ImportOptions, Window};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&w, rest)) = data.split_first() else { return };
    let window = Window { skip: u64::from(w & 7), record: (w & 8 != 0).then_some(u64::from(w >> 4)) };
    let opts = ImportOptions { window, instructions: w & 1 != 0, cpu: 0 };
    let mut kept = 0u64;
    let r = decode(Format::Lackey, &mut &rest[..], std::path::Path::new("fuzz.in"), &opts, &mut |a| {
        a.validate().expect("an importer hands on only valid accesses");
        kept += 1;
        Ok(())
    });
    match r {
        Ok(seen) => {
            assert!(kept <= seen.saturating_sub(window.skip) || seen < window.skip);
            if let Some(m) = window.record {
                assert!(kept <= m);
            }
        }
        Err(e) => hugescope_fuzz::check_message(&e),
    }
});
