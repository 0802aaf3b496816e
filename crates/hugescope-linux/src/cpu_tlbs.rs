//! The CPUID registers the TLB decoding reads, from the CPU this runs on
//! (issue #36). Only reading: the decoding is `hugescope_core::cpuid`, a pure
//! function tested on recorded values. Every leaf is read only when the
//! CPU's maximum (extended) leaf covers it; on another architecture nothing
//! is read and the vendor is empty.

use hugescope_core::cpuid::{RawLeaves, Regs};

#[cfg(target_arch = "x86_64")]
fn leaf(eax: u32, ecx: u32) -> Regs {
    // Safe on every x86_64 CPU (CPUID is part of the architecture); the
    // `unsafe` is for the toolchains that still mark the intrinsic unsafe.
    #[allow(unused_unsafe)]
    let r = unsafe { core::arch::x86_64::__cpuid_count(eax, ecx) };
    [r.eax, r.ebx, r.ecx, r.edx]
}

/// The raw leaves of this CPU.
#[cfg(target_arch = "x86_64")]
pub fn read() -> RawLeaves {
    let l0 = leaf(0, 0);
    let vendor: Vec<u8> = [l0[1], l0[3], l0[2]].iter().flat_map(|r| r.to_le_bytes()).collect();
    let max = l0[0];
    let max_ext = leaf(0x8000_0000, 0)[0];
    let ext = |l: u32| (max_ext >= l).then(|| leaf(l, 0));
    let mut leaf18 = Vec::new();
    if max >= 0x18 {
        // Sub-leaf 0's EAX is the last sub-leaf; bounded so a bogus value
        // (a hypervisor's) cannot make this loop long.
        let last = leaf(0x18, 0)[0].min(63);
        leaf18 = (0..=last).map(|s| leaf(0x18, s)).collect();
    }
    RawLeaves {
        vendor: String::from_utf8_lossy(&vendor).into_owned(),
        hypervisor: max >= 1 && leaf(1, 0)[2] & (1 << 31) != 0,
        leaf2: (max >= 2).then(|| leaf(2, 0)),
        leaf18,
        ext5: ext(0x8000_0005),
        ext6: ext(0x8000_0006),
        ext19: ext(0x8000_0019),
    }
}

#[cfg(not(target_arch = "x86_64"))]
pub fn read() -> RawLeaves {
    RawLeaves::default()
}
