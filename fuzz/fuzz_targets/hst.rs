//! The `.hst` trace reader: any bytes, written to a file, open and read to
//! the end (summary from the footer, every chunk decoded, and `--verify`'s
//! check against the footer) or give one short error line, never a panic and
//! never an allocation past the format's caps. The first byte asks the
//! harness to repair the preamble checksum (bit 0) and the footer's (bit 1)
//! after mutation, so that the fuzzer reaches the code behind them, and to
//! open with the legacy reader (bit 2).
#![no_main]
use hugescope_core::trace::hst::{summarize, HstReader};
use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;

fn path() -> PathBuf {
    thread_local! {
        static P: PathBuf = {
            let dir = std::env::var_os("HUGESCOPE_FUZZ_DIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
            dir.join(format!("hugescope-fuzz-{}.hst", std::process::id()))
        };
    }
    P.with(|p| p.clone())
}

fn repair(b: &mut [u8], mode: u8) {
    if mode & 1 != 0 && b.len() >= 20 {
        let hl = u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize;
        if hl <= b.len() - 20 {
            // docs/trace-format.md: version 3 on covers bytes 8..16 too.
            let mut h = crc32fast::Hasher::new();
            if u16::from_le_bytes([b[8], b[9]]) >= 3 {
                h.update(&b[8..16]);
            }
            h.update(&b[20..20 + hl]);
            let crc = h.finalize();
            b[16..20].copy_from_slice(&crc.to_le_bytes());
        }
    }
    if mode & 2 != 0 && b.len() >= 36 {
        let tr = b.len() - 16;
        let at = u64::from_le_bytes(b[tr..tr + 8].try_into().unwrap());
        let Some(at) = usize::try_from(at).ok().filter(|&a| a.checked_add(16).is_some_and(|e| e <= tr)) else { return };
        if &b[at..at + 4] == b"FOOT" {
            let jl = u32::from_le_bytes(b[at + 4..at + 8].try_into().unwrap()) as usize;
            if at + 16 + jl <= tr {
                let crc = crc32fast::hash(&b[at + 16..at + 16 + jl]);
                b[at + 8..at + 12].copy_from_slice(&crc.to_le_bytes());
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let mut b = rest.to_vec();
    repair(&mut b, mode);
    let p = path();
    std::fs::write(&p, &b).unwrap();
    // Bit 2: the legacy reader (versions 1 and 2, what `trace convert` reads).
    let opened = if mode & 4 != 0 { HstReader::open_legacy(&p) } else { HstReader::open(&p) };
    match opened {
        Ok(mut r) => loop {
            match r.next_chunk() {
                Ok(Some(chunk)) => assert!(!chunk.is_empty()),
                Ok(None) => break,
                Err(e) => {
                    hugescope_fuzz::check_message(&e);
                    break;
                }
            }
        },
        Err(e) => hugescope_fuzz::check_message(&e),
    }
    if let Err(e) = summarize(&p, true) {
        hugescope_fuzz::check_message(&e);
    }
});
