//! The configuration reader on a JSON file (`--config x.json`) and on
//! `--set KEY=VALUE` overrides: the first line of the input is split at ';'
//! into overrides, the rest is the file. Any input gives a configuration or
//! one short error line; an accepted one writes back as JSON that loads to it.
#![no_main]
use hugescope_core::configuration::{Config, Source};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (first, file) = text.split_once('\n').unwrap_or((text, ""));
    let overrides: Vec<String> = first.split(';').filter(|s| !s.is_empty()).map(str::to_string).collect();
    let source = (!file.is_empty()).then_some(Source { name: "fuzz.json", text: file });
    match Config::load(None, source, &overrides, &[]) {
        Ok(c) => {
            let j = c.to_json().to_string();
            let again = Config::load(None, Some(Source { name: "again.json", text: &j }), &[], &[])
                .expect("a written configuration loads");
            assert_eq!(again, c);
        }
        Err(e) => hugescope_fuzz::check_message(&e),
    }
});
