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
