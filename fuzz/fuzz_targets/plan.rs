//! The plan parser (`--pages plan.json`, `run --plan`): any text gives a
//! validated plan or one short error line, never a panic; a plan it accepts
//! writes back and parses to the same plan.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match hugescope_core::plan::Plan::parse(text) {
        Ok(p) => {
            let again = hugescope_core::plan::Plan::parse(&p.to_json()).expect("a written plan parses");
            assert_eq!(again, p);
        }
        Err(e) => hugescope_fuzz::check_message(&e),
    }
});
