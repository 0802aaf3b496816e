//! The configuration reader on a TOML file (`--config x.toml`): any text
//! gives a resolved, validated configuration or one short error line; an
//! accepted configuration writes back as TOML that loads to the same one.
#![no_main]
use hugescope_core::configuration::{Config, Source};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Config::load(None, Some(Source { name: "fuzz.toml", text }), &[], &[]) {
        Ok(c) => {
            let t = c.to_toml().expect("a loaded configuration writes as TOML");
            let again = Config::load(None, Some(Source { name: "again.toml", text: &t }), &[], &[])
                .expect("a written configuration loads");
            assert_eq!(again, c);
        }
        Err(e) => hugescope_fuzz::check_message(&e),
    }
});
