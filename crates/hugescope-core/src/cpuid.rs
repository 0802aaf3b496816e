//! The TLB geometry an x86 CPU reports about itself, decoded from raw CPUID
//! register values (issue #36): a pure function from the registers to typed
//! structures (level, instruction / data / unified / load / store, page
//! sizes, entries, ways), so it is tested on recorded values of real CPUs
//! and never needs the CPU it describes. Reading the registers of the live
//! CPU is `hugescope_linux::cpu_tlbs`; turning the structures into a machine
//! preset (and checking them against measured reach) is the calibration's.
//!
//! Sources, by vendor:
//! - Intel leaf 2: one-byte descriptors (Intel SDM Vol. 2A, CPUID, "Encoding
//!   of CPUID Leaf 2 Descriptors"); only the TLB descriptors are decoded.
//!   Descriptor 0xFE says the TLBs are described by leaf 0x18 instead.
//! - Intel leaf 0x18 ("Deterministic Address Translation Parameters"): one
//!   structure per sub-leaf, entries = ways x sets.
//! - AMD 0x80000005 (L1 TLBs), 0x80000006 (L2 TLBs), 0x80000019 (1 GiB
//!   TLBs), AMD APM Vol. 3, Appendix E.
//!
//! What no leaf reports is said in `notes`, never guessed: page-walk-cache
//! sizes (no x86 leaf has them), whether AMD's per-size L1 entries are one
//! shared array, and, under a hypervisor, whether the values are the host
//! CPU's at all.

use serde::{Deserialize, Serialize};

/// EAX, EBX, ECX, EDX of one CPUID leaf (and sub-leaf).
pub type Regs = [u32; 4];

/// The raw registers the decoding reads, as recorded on a CPU. Leaves the
/// CPU does not have (above its maximum leaf) are `None` / empty.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLeaves {
    /// The vendor string of leaf 0 ("GenuineIntel", "AuthenticAMD", ...).
    pub vendor: String,
    /// Leaf 1 ECX bit 31: a hypervisor answers CPUID.
    #[serde(default)]
    pub hypervisor: bool,
    #[serde(default)]
    pub leaf2: Option<Regs>,
    /// Leaf 0x18, sub-leaves 0..=EAX of sub-leaf 0.
    #[serde(default)]
    pub leaf18: Vec<Regs>,
    #[serde(default)]
    pub ext5: Option<Regs>,
    #[serde(default)]
    pub ext6: Option<Regs>,
    #[serde(default)]
    pub ext19: Option<Regs>,
}

/// What a TLB structure translates for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TlbKind {
    Instruction,
    Data,
    /// Instructions and data (a second-level, "shared" TLB).
    Unified,
    /// Data loads only (Intel leaf 0x18 type 4).
    Load,
    /// Data stores only (Intel leaf 0x18 type 5).
    Store,
}

/// One TLB structure as the CPU reports it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TlbStructure {
    /// 1 = first level.
    pub level: u8,
    pub kind: TlbKind,
    /// Page sizes it holds: "4k", "2m", "4m", "1g".
    pub pages: Vec<String>,
    pub entries: u32,
    /// Associativity; 0 = fully associative (the machine config's convention).
    pub ways: u32,
    /// The leaf, register and field it came from.
    pub source: String,
}

/// The decoded geometry: every structure reported, and what was not.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TlbGeometry {
    pub vendor: String,
    pub hypervisor: bool,
    /// Which leaves the structures come from ("leaf 0x18", "leaf 0x2",
    /// "0x80000005/6/19", or "none").
    pub method: String,
    pub structures: Vec<TlbStructure>,
    /// What the CPU did not report, or may not report truthfully.
    pub notes: Vec<String>,
}

const PWC_NOTE: &str = "page-walk caches: no CPUID leaf reports their sizes (Intel and AMD document none)";
const VM_NOTE: &str = "a hypervisor answers CPUID here: the values are what it chooses to report (the host's, zeros, or a \
                       model of its own), and each guest walk is itself translated by the host's page table, whose page \
                       size (not reported) caps what a guest 2 MiB page covers";

/// Decode whatever `raw` reports, by vendor.
pub fn decode(raw: &RawLeaves) -> TlbGeometry {
    let mut notes = vec![PWC_NOTE.to_string()];
    if raw.hypervisor {
        notes.push(VM_NOTE.to_string());
    }
    let (method, structures) = match raw.vendor.as_str() {
        "GenuineIntel" => {
            let (from2, defers) = raw.leaf2.map(decode_leaf2).unwrap_or_default();
            let from18 = decode_leaf18(&raw.leaf18);
            if !from18.is_empty() && (defers || from2.is_empty()) {
                ("leaf 0x18".to_string(), from18)
            } else if !from2.is_empty() {
                ("leaf 0x2".to_string(), from2)
            } else {
                notes.push("neither leaf 0x2 nor leaf 0x18 describes a TLB".into());
                ("none".to_string(), Vec::new())
            }
        }
        "AuthenticAMD" | "HygonGenuine" => {
            let s = decode_amd(raw.ext5, raw.ext6, raw.ext19, &mut notes);
            ("0x80000005/6/19".to_string(), s)
        }
        other => {
            notes.push(format!("vendor '{other}': no TLB leaves are decoded for it"));
            ("none".to_string(), Vec::new())
        }
    };
    if structures.is_empty() {
        notes.push("the CPU reported no TLB structure".into());
    }
    TlbGeometry { vendor: raw.vendor.clone(), hypervisor: raw.hypervisor, method, structures, notes }
}

fn pages(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// One leaf-2 TLB descriptor: (kind, level, page sizes, entries, ways).
type Descriptor = (TlbKind, u8, &'static [&'static str], u32, u32);

/// The TLB descriptors of the SDM's leaf-2 table. "Fully associative" is
/// ways 0; a descriptor with no associativity stated is taken as fully
/// associative (those are the small Atom/Pentium 4 arrays). DTLB0 (a
/// micro-TLB in front of the main one) is level 1 like the main DTLB; the
/// calibration keeps the larger of two same-level structures.
fn descriptor(d: u8) -> &'static [Descriptor] {
    use TlbKind::*;
    const K4: &[&str] = &["4k"];
    const M2M4: &[&str] = &["2m", "4m"];
    const M4: &[&str] = &["4m"];
    const K4M2M4: &[&str] = &["4k", "2m", "4m"];
    const K4M4: &[&str] = &["4k", "4m"];
    const K4M2: &[&str] = &["4k", "2m"];
    const G1: &[&str] = &["1g"];
    match d {
        0x01 => &[(Instruction, 1, K4, 32, 4)],
        0x02 => &[(Instruction, 1, M4, 2, 0)],
        0x03 => &[(Data, 1, K4, 64, 4)],
        0x04 => &[(Data, 1, M4, 8, 4)],
        0x05 => &[(Data, 1, M4, 32, 4)],
        0x0b => &[(Instruction, 1, M4, 4, 4)],
        0x4f => &[(Instruction, 1, K4, 32, 0)],
        0x50 => &[(Instruction, 1, K4M2M4, 64, 0)],
        0x51 => &[(Instruction, 1, K4M2M4, 128, 0)],
        0x52 => &[(Instruction, 1, K4M2M4, 256, 0)],
        0x55 => &[(Instruction, 1, M2M4, 7, 0)],
        0x56 => &[(Data, 1, M4, 16, 4)],
        0x57 => &[(Data, 1, K4, 16, 4)],
        0x59 => &[(Data, 1, K4, 16, 0)],
        0x5a => &[(Data, 1, M2M4, 32, 4)],
        0x5b => &[(Data, 1, K4M4, 64, 0)],
        0x5c => &[(Data, 1, K4M4, 128, 0)],
        0x5d => &[(Data, 1, K4M4, 256, 0)],
        0x61 => &[(Instruction, 1, K4, 48, 0)],
        0x63 => &[(Data, 1, M2M4, 32, 4), (Data, 1, G1, 4, 4)],
        0x64 => &[(Data, 1, K4, 512, 4)],
        0x6a => &[(Data, 1, K4, 64, 8)],
        0x6b => &[(Data, 1, K4, 256, 8)],
        0x6c => &[(Data, 1, M2M4, 128, 8)],
        0x6d => &[(Data, 1, G1, 16, 0)],
        0x76 => &[(Instruction, 1, M2M4, 8, 0)],
        0xa0 => &[(Data, 1, K4, 32, 0)],
        0xb0 => &[(Instruction, 1, K4, 128, 4)],
        0xb1 => &[(Instruction, 1, &["2m"], 8, 4)],
        0xb2 => &[(Instruction, 1, K4, 64, 4)],
        0xb3 => &[(Data, 1, K4, 128, 4)],
        0xb4 => &[(Data, 1, K4, 256, 4)],
        0xb5 => &[(Instruction, 1, K4, 64, 8)],
        0xb6 => &[(Instruction, 1, K4, 128, 8)],
        0xba => &[(Data, 1, K4, 64, 4)],
        0xc0 => &[(Data, 1, K4M4, 8, 4)],
        0xc1 => &[(Unified, 2, K4M2, 1024, 8)],
        0xc2 => &[(Data, 1, K4M2, 16, 4)],
        0xc3 => &[(Unified, 2, K4M2, 1536, 6), (Unified, 2, G1, 16, 4)],
        0xc4 => &[(Data, 1, M2M4, 32, 4)],
        0xca => &[(Unified, 2, K4, 512, 4)],
        _ => &[],
    }
}

/// Intel leaf 2: the TLB structures of its descriptors, and whether it
/// defers the TLBs to leaf 0x18 (descriptor 0xFE). AL (the low byte of EAX)
/// is an iteration count, not a descriptor; a register with bit 31 set holds
/// no descriptors.
pub fn decode_leaf2(regs: Regs) -> (Vec<TlbStructure>, bool) {
    const REG: [&str; 4] = ["eax", "ebx", "ecx", "edx"];
    let mut out = Vec::new();
    let mut defers = false;
    for (r, &v) in regs.iter().enumerate() {
        if v & 0x8000_0000 != 0 {
            continue;
        }
        for byte in 0..4 {
            if r == 0 && byte == 0 {
                continue;
            }
            let d = (v >> (8 * byte)) as u8;
            if d == 0xfe {
                defers = true;
            }
            for &(kind, level, p, entries, ways) in descriptor(d) {
                out.push(TlbStructure {
                    level,
                    kind,
                    pages: pages(p),
                    entries,
                    ways,
                    source: format!("cpuid 0x2 {} descriptor {d:#04x}", REG[r]),
                });
            }
        }
    }
    (out, defers)
}

/// Intel leaf 0x18: one structure per valid sub-leaf (EDX[4:0] = type, 0 =
/// none). EBX[3:0] = 4K, 2M, 4M, 1G; EBX[31:16] = ways; ECX = sets; EDX[7:5]
/// = level (starting at 1); EDX[8] = fully associative.
pub fn decode_leaf18(subleaves: &[Regs]) -> Vec<TlbStructure> {
    let mut out = Vec::new();
    for (i, &[_, ebx, ecx, edx]) in subleaves.iter().enumerate() {
        let kind = match edx & 0x1f {
            1 => TlbKind::Data,
            2 => TlbKind::Instruction,
            3 => TlbKind::Unified,
            4 => TlbKind::Load,
            5 => TlbKind::Store,
            _ => continue,
        };
        let p: Vec<String> = ["4k", "2m", "4m", "1g"]
            .iter()
            .enumerate()
            .filter(|(b, _)| ebx & (1 << b) != 0)
            .map(|(_, s)| s.to_string())
            .collect();
        let ways = ebx >> 16;
        let entries = ways.saturating_mul(ecx);
        if p.is_empty() || entries == 0 {
            continue;
        }
        let fully = edx & (1 << 8) != 0;
        out.push(TlbStructure {
            level: ((edx >> 5) & 7) as u8,
            kind,
            pages: p,
            entries,
            ways: if fully { 0 } else { ways },
            source: format!("cpuid 0x18.{i}"),
        });
    }
    out
}

/// AMD's 8-bit associativity (0x80000005): 1 = direct mapped, 0xFF = fully,
/// n otherwise; 0 is reserved.
fn amd_assoc8(v: u32) -> Option<u32> {
    match v {
        0 => None,
        0xff => Some(0),
        n => Some(n),
    }
}

/// AMD's 4-bit associativity (0x80000006, 0x80000019; APM Vol. 3 Table E-4).
fn amd_assoc4(v: u32) -> Option<u32> {
    match v {
        1 => Some(1),
        2 => Some(2),
        3 => Some(3),
        4 => Some(4),
        5 => Some(6),
        6 => Some(8),
        8 => Some(16),
        0xa => Some(32),
        0xb => Some(48),
        0xc => Some(64),
        0xd => Some(96),
        0xe => Some(128),
        0xf => Some(0),
        _ => None,
    }
}

/// AMD 0x80000005 (L1, 8-bit fields: assoc 31:24, entries 23:16 for data;
/// 15:8, 7:0 for instructions), 0x80000006 (L2, assoc 31:28, entries 27:16
/// for data; 15:12, 11:0 for instructions) and 0x80000019 (1 GiB: EAX L1,
/// EBX L2, 4-bit fields as 0x80000006). A field with 0 entries (or, for the
/// 4-bit ones, associativity 0: "disabled") is no structure.
pub fn decode_amd(ext5: Option<Regs>, ext6: Option<Regs>, ext19: Option<Regs>, notes: &mut Vec<String>) -> Vec<TlbStructure> {
    let mut out = Vec::new();
    let mut push = |level: u8, kind: TlbKind, p: &[&str], entries: u32, ways: Option<u32>, source: String, notes: &mut Vec<String>| {
        if entries == 0 {
            return;
        }
        match ways {
            Some(ways) => out.push(TlbStructure { level, kind, pages: pages(p), entries, ways, source }),
            None => notes.push(format!("{source}: {entries} entries with a reserved associativity code: left out")),
        }
    };
    let mut none = Vec::new();
    match ext5 {
        Some([eax, ebx, _, _]) if eax | ebx != 0 => {
            for (reg, v, p) in [("ebx", ebx, &["4k"][..]), ("eax", eax, &["2m"][..])] {
                push(1, TlbKind::Data, p, (v >> 16) & 0xff, amd_assoc8(v >> 24), format!("cpuid 0x80000005 {reg}[31:16]"), notes);
                push(1, TlbKind::Instruction, p, v & 0xff, amd_assoc8((v >> 8) & 0xff), format!("cpuid 0x80000005 {reg}[15:0]"), notes);
            }
            notes.push("AMD reports its L1 TLBs per page size: whether the 4 KiB and 2 MiB entries are one shared array is \
                        not reported (taken as separate arrays)"
                .into());
        }
        _ => none.push("0x80000005 (L1 TLBs)"),
    }
    match ext6 {
        Some([eax, ebx, _, _]) if eax | ebx != 0 => {
            for (reg, v, p) in [("ebx", ebx, &["4k"][..]), ("eax", eax, &["2m"][..])] {
                let (dw, iw) = ((v >> 28) & 0xf, (v >> 12) & 0xf);
                if dw != 0 {
                    push(2, TlbKind::Data, p, (v >> 16) & 0xfff, amd_assoc4(dw), format!("cpuid 0x80000006 {reg}[31:16]"), notes);
                }
                if iw != 0 {
                    push(2, TlbKind::Instruction, p, v & 0xfff, amd_assoc4(iw), format!("cpuid 0x80000006 {reg}[15:0]"), notes);
                }
            }
        }
        _ => none.push("0x80000006 (L2 TLBs)"),
    }
    match ext19 {
        Some([eax, ebx, _, _]) if eax | ebx != 0 => {
            for (level, reg, v) in [(1u8, "eax", eax), (2, "ebx", ebx)] {
                let (dw, iw) = ((v >> 28) & 0xf, (v >> 12) & 0xf);
                if dw != 0 {
                    push(level, TlbKind::Data, &["1g"], (v >> 16) & 0xfff, amd_assoc4(dw), format!("cpuid 0x80000019 {reg}[31:16]"), notes);
                }
                if iw != 0 {
                    push(level, TlbKind::Instruction, &["1g"], v & 0xfff, amd_assoc4(iw), format!("cpuid 0x80000019 {reg}[15:0]"), notes);
                }
            }
        }
        _ => none.push("0x80000019 (1 GiB TLBs)"),
    }
    for leaf in none {
        notes.push(format!("cpuid {leaf} reports nothing (absent or all zero)"));
    }
    out
}
