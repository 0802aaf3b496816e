//! The text importer (`hugescope trace import text`): see `hugescope_fuzz::import`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hugescope_fuzz::import(hugescope_core::trace::import::Format::Text, data));
