//! CPUID TLB decoding (issue #36) on register values recorded on real CPUs.
//! Each recording says where it comes from, and each expected structure is
//! decoded by hand in the comments beside it, so the numbers are checkable
//! against the vendors' manuals without running anything.

use hugescope_core::cpuid::{decode, decode_amd, decode_leaf18, decode_leaf2, RawLeaves, TlbKind, TlbStructure};

/// (level, kind, pages, entries, ways) of each structure, in decoding order.
fn shape(s: &[TlbStructure]) -> Vec<(u8, TlbKind, String, u32, u32)> {
    s.iter().map(|t| (t.level, t.kind, t.pages.join("+"), t.entries, t.ways)).collect()
}

fn t(level: u8, kind: TlbKind, pages: &str, entries: u32, ways: u32) -> (u8, TlbKind, String, u32, u32) {
    (level, kind, pages.to_string(), entries, ways)
}

use TlbKind::*;

/// Intel Xeon Gold 6252 (Cascade Lake), leaf 2 as recorded in the test data
/// of the raw-cpuid crate (gz/rust-cpuid, src/tests/xeon_gold_6252.rs):
/// EAX=0x76036301 EBX=0x00f0b5ff ECX=0 EDX=0x00c30000. Every register has
/// bit 31 clear (valid); AL=0x01 is the iteration count. Descriptors, by the
/// SDM's leaf-2 table (Vol. 2A, Table 3-12):
/// - EAX 0x63: data TLB 2M/4M pages, 4-way, 32 entries, and a separate
///   1 GByte array, 4-way, 4 entries;
/// - EAX 0x03: data TLB 4K pages, 4-way, 64 entries;
/// - EAX 0x76: instruction TLB 2M/4M pages, fully associative, 8 entries;
/// - EBX 0xff: caches are in leaf 4 (no TLB); 0xb5: instruction TLB 4K,
///   8-way, 64 entries; 0xf0: 64-byte prefetching (no TLB);
/// - EDX 0xc3: shared 2nd-level TLB 4K/2M pages, 6-way, 1536 entries, and
///   1 GByte pages, 4-way, 16 entries.
#[test]
fn intel_leaf2_cascade_lake() {
    let (s, defers) = decode_leaf2([0x7603_6301, 0x00f0_b5ff, 0x0000_0000, 0x00c3_0000]);
    assert!(!defers);
    assert_eq!(
        shape(&s),
        [
            t(1, Data, "2m+4m", 32, 4),
            t(1, Data, "1g", 4, 4),
            t(1, Data, "4k", 64, 4),
            t(1, Instruction, "2m+4m", 8, 0),
            t(1, Instruction, "4k", 64, 8),
            t(2, Unified, "4k+2m", 1536, 6),
            t(2, Unified, "1g", 16, 4),
        ]
    );
    assert_eq!(s[0].source, "cpuid 0x2 eax descriptor 0x63");
    assert_eq!(s[5].source, "cpuid 0x2 edx descriptor 0xc3");
    // A register with bit 31 set holds nothing, whatever its bytes.
    let (s, _) = decode_leaf2([0x7603_6301, 0x80f0_b5ff, 0, 0x80c3_0000]);
    assert_eq!(s.len(), 4);
    // The whole decode picks leaf 2 for an Intel CPU without leaf 0x18.
    let raw = RawLeaves { vendor: "GenuineIntel".into(), leaf2: Some([0x7603_6301, 0x00f0_b5ff, 0, 0x00c3_0000]), ..Default::default() };
    let g = decode(&raw);
    assert_eq!((g.method.as_str(), g.structures.len(), g.hypervisor), ("leaf 0x2", 7, false));
    assert!(g.notes.iter().any(|n| n.contains("page-walk caches")), "{:?}", g.notes);
}

/// 12th Gen Intel Core i7-12700K (Alder Lake-S, a Golden Cove core), as
/// recorded with Todd Allen's `cpuid` tool in the raw-cpuid crate's test
/// data. Leaf 2: EAX=0x00feff01 EBX=0x000000f0: descriptors 0xff (caches
/// in leaf 4), 0xfe (TLBs in leaf 0x18), 0xf0 (prefetching).
/// Leaf 0x18 (SDM: EBX[3:0] = 4K/2M/4M/1G, EBX[31:16] = ways, ECX = sets,
/// EDX[4:0] = type 1 data / 2 instruction / 3 unified / 4 load / 5 store,
/// EDX[7:5] = level starting at 1, EDX[8] = fully associative):
/// - 0.0: EAX=8 (last sub-leaf), EDX type 0: no structure;
/// - 0.1: EBX=0x00080001 ECX=0x20 EDX=0x4022: 4K, 8 ways x 32 sets = 256,
///   instruction, level 1;
/// - 0.2: EBX=0x00080006 ECX=4 EDX=0x4022: 2M+4M, 8 x 4 = 32, instruction, L1;
/// - 0.3: EBX=0x0010000f ECX=1 EDX=0x4125: all four sizes, 16 x 1 = 16,
///   store, L1, fully associative (EDX bit 8);
/// - 0.4: EBX=0x00040001 ECX=0x10 EDX=0x4024: 4K, 4 x 16 = 64, load, L1;
/// - 0.5: EBX=0x00040006 ECX=8 EDX=0x4024: 2M+4M, 4 x 8 = 32, load, L1;
/// - 0.6: EBX=0x00080008 ECX=1 EDX=0x4124: 1G, 8 x 1 = 8, load, L1, fully;
/// - 0.7: EBX=0x00080007 ECX=0x80 EDX=0x4043: 4K+2M+4M, 8 x 128 = 1024,
///   unified, level 2 (EDX[7:5] = 0b010);
/// - 0.8: EBX=0x00080009 ECX=0x80 EDX=0x4043: 4K+1G, 8 x 128 = 1024, unified, L2.
const ADL_LEAF18: [[u32; 4]; 9] = [
    [0x0000_0008, 0x0000_0000, 0x0000_0000, 0x0000_0000],
    [0x0000_0000, 0x0008_0001, 0x0000_0020, 0x0000_4022],
    [0x0000_0000, 0x0008_0006, 0x0000_0004, 0x0000_4022],
    [0x0000_0000, 0x0010_000f, 0x0000_0001, 0x0000_4125],
    [0x0000_0000, 0x0004_0001, 0x0000_0010, 0x0000_4024],
    [0x0000_0000, 0x0004_0006, 0x0000_0008, 0x0000_4024],
    [0x0000_0000, 0x0008_0008, 0x0000_0001, 0x0000_4124],
    [0x0000_0000, 0x0008_0007, 0x0000_0080, 0x0000_4043],
    [0x0000_0000, 0x0008_0009, 0x0000_0080, 0x0000_4043],
];

#[test]
fn intel_leaf18_alder_lake() {
    assert_eq!(
        shape(&decode_leaf18(&ADL_LEAF18)),
        [
            t(1, Instruction, "4k", 256, 8),
            t(1, Instruction, "2m+4m", 32, 8),
            t(1, Store, "4k+2m+4m+1g", 16, 0),
            t(1, Load, "4k", 64, 4),
            t(1, Load, "2m+4m", 32, 4),
            t(1, Load, "1g", 8, 0),
            t(2, Unified, "4k+2m+4m", 1024, 8),
            t(2, Unified, "4k+1g", 1024, 8),
        ]
    );
    // Leaf 2 defers to leaf 0x18 (descriptor 0xfe) and has no TLB of its own.
    let (s, defers) = decode_leaf2([0x00fe_ff01, 0x0000_00f0, 0, 0]);
    assert!(defers && s.is_empty());
    let raw = RawLeaves {
        vendor: "GenuineIntel".into(),
        leaf2: Some([0x00fe_ff01, 0x0000_00f0, 0, 0]),
        leaf18: ADL_LEAF18.to_vec(),
        ..Default::default()
    };
    let g = decode(&raw);
    assert_eq!((g.method.as_str(), g.structures.len()), ("leaf 0x18", 8));
    assert_eq!(g.structures[6].source, "cpuid 0x18.7");
}

/// The development VM of this project: "AMD EPYC", family 0x1A model 2, a
/// KVM guest, read with `core::arch::x86_64::__cpuid_count` on 2026-11-29
/// (leaf 1 ECX=0xfffa3203: bit 31, a hypervisor).
/// - 0x80000005 EAX=0xff60ff40 (2M): data assoc 0xff (fully), entries 0x60
///   = 96; instruction assoc 0xff, entries 0x40 = 64. EBX=0xff60ff40 (4K):
///   the same. (ECX/EDX are the L1 caches, not decoded.)
/// - 0x80000006 EBX=0x60804040 (4K): data assoc code 6 = 8-way, entries
///   0x080 = 128; instruction code 4 = 4-way, entries 0x040 = 64.
///   EAX=0x40802040 (2M): data code 4 = 4-way, 0x080 = 128; instruction
///   code 2 = 2-way, 0x040 = 64.
/// - 0x80000019: all zero (the guest sees no 1 GiB TLB information).
/// Linux's own decoding at boot on the same VM agrees: "Last level dTLB
/// entries: 4KB 128, 2MB 128, 4MB 64, 1GB 0" and "Last level iTLB entries:
/// 4KB 64, 2MB 64, 4MB 32" (dmesg).
#[test]
fn amd_epyc_kvm_guest() {
    let ext5 = [0xff60_ff40, 0xff60_ff40, 0x300c_0140, 0x2008_0140];
    let ext6 = [0x4080_2040, 0x6080_4040, 0x0400_8140, 0x0c00_9140];
    let mut notes = Vec::new();
    let s = decode_amd(Some(ext5), Some(ext6), Some([0; 4]), &mut notes);
    assert_eq!(
        shape(&s),
        [
            t(1, Data, "4k", 96, 0),
            t(1, Instruction, "4k", 64, 0),
            t(1, Data, "2m", 96, 0),
            t(1, Instruction, "2m", 64, 0),
            t(2, Data, "4k", 128, 8),
            t(2, Instruction, "4k", 64, 4),
            t(2, Data, "2m", 128, 4),
            t(2, Instruction, "2m", 64, 2),
        ]
    );
    assert!(notes.iter().any(|n| n.contains("0x80000019") && n.contains("reports nothing")), "{notes:?}");
    let raw = RawLeaves {
        vendor: "AuthenticAMD".into(),
        hypervisor: true,
        ext5: Some(ext5),
        ext6: Some(ext6),
        ext19: Some([0; 4]),
        ..Default::default()
    };
    let g = decode(&raw);
    assert_eq!((g.method.as_str(), g.structures.len(), g.hypervisor), ("0x80000005/6/19", 8, true));
    assert!(g.notes.iter().any(|n| n.contains("hypervisor")), "{:?}", g.notes);
}

/// Hand-made registers for the AMD 1 GiB leaf and the encodings' edge cases.
#[test]
fn amd_1g_leaf_and_reserved_codes() {
    // 0x80000019 EAX = L1: data code 0xf (fully) 64 entries, instruction
    // code 0xf 64; EBX = L2: data code 6 (8-way) 2048, instruction off.
    let mut notes = Vec::new();
    let s = decode_amd(None, None, Some([0xf040_f040, 0x6800_0000, 0, 0]), &mut notes);
    assert_eq!(shape(&s), [t(1, Data, "1g", 64, 0), t(1, Instruction, "1g", 64, 0), t(2, Data, "1g", 2048, 8)]);
    assert!(notes.iter().any(|n| n.contains("0x80000005")) && notes.iter().any(|n| n.contains("0x80000006")));
    // Code 7 is reserved: the structure is left out and said.
    let mut notes = Vec::new();
    let s = decode_amd(None, Some([0, 0x7100_0000, 0, 0]), None, &mut notes);
    assert!(s.is_empty());
    assert!(notes.iter().any(|n| n.contains("reserved associativity")), "{notes:?}");
    // An unknown vendor decodes nothing and says so.
    let g = decode(&RawLeaves { vendor: "VIA VIA VIA ".into(), ..Default::default() });
    assert!(g.structures.is_empty() && g.method == "none");
    assert!(g.notes.iter().any(|n| n.contains("no TLB leaves")), "{:?}", g.notes);
}
