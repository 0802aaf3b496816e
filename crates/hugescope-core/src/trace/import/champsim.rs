//! ChampSim traces: a sequence of 64-byte `input_instr` records (ChampSim's
//! `inc/trace_instruction.h`), little-endian:
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 8 | ip |
//! | 8 | 1 | is_branch |
//! | 9 | 1 | branch_taken |
//! | 10 | 2 | destination_registers[2] |
//! | 12 | 4 | source_registers[4] |
//! | 16 | 16 | destination_memory[2] (stores) |
//! | 32 | 32 | source_memory[4] (loads) |
//!
//! An address of 0 means "no operand". Each instruction gives its loads
//! first, then its stores (an instruction reads its operands before it
//! writes its result).

use std::io::Read;

use super::{Loc, Feed, ImportOptions};
use crate::error::{Error, Result};
use crate::trace::Access;

pub const RECORD: usize = 64;

/// The data accesses of one record, in order: (address, write).
pub fn accesses(rec: &[u8; RECORD]) -> impl Iterator<Item = (u64, bool)> + '_ {
    let word = |i: usize| u64::from_le_bytes(rec[i..i + 8].try_into().unwrap());
    let loads = (0..4).map(move |k| (word(32 + 8 * k), false));
    let stores = (0..2).map(move |k| (word(16 + 8 * k), true));
    loads.chain(stores).filter(|&(a, _)| a != 0)
}

/// Build a record (for tests and tools that write ChampSim traces).
pub fn record(ip: u64, loads: &[u64], stores: &[u64]) -> [u8; RECORD] {
    assert!(loads.len() <= 4 && stores.len() <= 2);
    let mut r = [0u8; RECORD];
    r[0..8].copy_from_slice(&ip.to_le_bytes());
    for (k, a) in stores.iter().enumerate() {
        r[16 + 8 * k..24 + 8 * k].copy_from_slice(&a.to_le_bytes());
    }
    for (k, a) in loads.iter().enumerate() {
        r[32 + 8 * k..40 + 8 * k].copy_from_slice(&a.to_le_bytes());
    }
    r
}

pub fn parse(r: &mut dyn Read, feed: &mut Feed<'_>, opts: &ImportOptions) -> Result<()> {
    let mut buf = std::io::BufReader::with_capacity(1 << 16, r);
    let mut rec = [0u8; RECORD];
    let mut offset: u64 = 0;
    loop {
        // Fill one record; a partial one at the end means a truncated file.
        let mut got = 0;
        while got < RECORD {
            let n = buf.read(&mut rec[got..]).map_err(|e| Error::io(&feed.path, e))?;
            if n == 0 {
                break;
            }
            got += n;
        }
        if got == 0 {
            return Ok(());
        }
        // A record without memory operands gives no access, so `Feed::offer`
        // never checks for cancellation on a run of them: checked here too.
        if (offset / RECORD as u64).is_multiple_of(super::CANCEL_EVERY) {
            crate::cancel::check()?;
        }
        if got < RECORD {
            return Err(feed.error(
                offset,
                format!("record {}: only {got} of its {RECORD} bytes (truncated file, or not a ChampSim trace)", offset / RECORD as u64),
            ));
        }
        for (addr, write) in accesses(&rec) {
            if !feed.offer(Access { addr, write, cpu: opts.cpu, pid: 0 }, offset, Loc::Record(offset / RECORD as u64))? {
                return Ok(());
            }
        }
        offset += RECORD as u64;
    }
}
