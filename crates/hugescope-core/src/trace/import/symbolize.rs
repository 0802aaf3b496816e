//! Return addresses of a traced program to "function file:line", from the
//! DWARF line tables of the binaries its `/proc/PID/maps` names (issue #38:
//! regions named by their allocation sites).
//!
//! A run address is first turned into the address the ELF file itself uses
//! (its "stated" address): the mapping holding it gives the file and the
//! file offset, and the file's `PT_LOAD` program header holding that offset
//! gives the stated address, `pc - map.start + map.offset - p_offset +
//! p_vaddr`. This holds for position-independent executables and libraries
//! (loaded anywhere) and for fixed-address executables alike.
//!
//! A frame with line tables reads `function file:line` (the file's base
//! name), with inlined calls as frames of their own, innermost first (what
//! `addr2line -i` prints); without them `function+0xOFF` from the symbol
//! table; with neither `FILE+0xOFF`. `hugescope cc` compiles with
//! `-gline-tables-only`, which adds line tables and no other debug data.

use super::maps::MapEntry;
use std::collections::HashMap;
use std::io::Read;

/// One `PT_LOAD` program header: file offset, stated address, size in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Load {
    pub offset: u64,
    pub vaddr: u64,
    pub filesz: u64,
}

/// The `PT_LOAD` headers of a 64-bit little-endian ELF file's first 64 KiB
/// (program headers sit near the start), or None for anything else.
pub fn elf_loads(head: &[u8]) -> Option<Vec<Load>> {
    // Offsets come from the file: checked, so a hostile header reads as None.
    let bytes = |o: usize, n: usize| head.get(o..o.checked_add(n)?);
    let u16_at = |o: usize| bytes(o, 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |o: usize| bytes(o, 4).map(|b| u32::from_le_bytes(b.try_into().unwrap()));
    let u64_at = |o: usize| bytes(o, 8).map(|b| u64::from_le_bytes(b.try_into().unwrap()));
    // "\x7fELF", class 2 (64-bit), data 1 (little-endian).
    if head.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let phoff = usize::try_from(u64_at(0x20)?).ok()?;
    let phentsize = u16_at(0x36)? as usize;
    let phnum = u16_at(0x38)? as usize;
    if phentsize < 56 {
        return None;
    }
    let mut loads = Vec::new();
    for i in 0..phnum {
        let h = phoff.checked_add(i.checked_mul(phentsize)?)?;
        if u32_at(h)? == 1 {
            loads.push(Load { offset: u64_at(h.checked_add(8)?)?, vaddr: u64_at(h.checked_add(16)?)?, filesz: u64_at(h.checked_add(32)?)? });
        }
    }
    Some(loads)
}

/// The stated address of run address `pc` in the mapping `m` of a file with
/// program headers `loads`.
pub fn stated_address(pc: u64, m: &MapEntry, loads: &[Load]) -> Option<u64> {
    let off = pc.checked_sub(m.start)?.checked_add(m.offset)?;
    let l = loads.iter().find(|l| off >= l.offset && off < l.offset.saturating_add(l.filesz))?;
    (off - l.offset).checked_add(l.vaddr)
}

struct Binary {
    loader: Option<addr2line::Loader>,
    loads: Vec<Load>,
}

/// Symbolizes return addresses against maps snapshots, opening each binary
/// once.
#[derive(Default)]
pub struct Symbolizer {
    binaries: HashMap<String, Option<Binary>>,
}

/// One frame of a call path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// "function file:line", "function+0xOFF" or "FILE+0xOFF".
    pub text: String,
    /// The binary the address lies in (its path in the maps).
    pub binary: String,
}

impl Symbolizer {
    fn binary(&mut self, path: &str) -> Option<&Binary> {
        self.binaries
            .entry(path.to_string())
            .or_insert_with(|| {
                let mut head = Vec::new();
                std::fs::File::open(path).ok()?.take(64 << 10).read_to_end(&mut head).ok()?;
                let loads = elf_loads(&head)?;
                Some(Binary { loader: addr2line::Loader::new(path).ok(), loads })
            })
            .as_ref()
    }

    /// The frames (inlined calls first) of return address `ret` of a program
    /// whose mappings were `maps`; empty when no file mapping holds it.
    pub fn frames(&mut self, ret: u64, maps: &[MapEntry]) -> Vec<Frame> {
        // A return address points after the call: the call is the byte before.
        let pc = ret.saturating_sub(1);
        let Some(m) = maps.iter().find(|m| pc >= m.start && pc < m.end && m.path.starts_with('/')) else {
            return Vec::new();
        };
        let path = m.path.clone();
        let base = path.rsplit('/').next().unwrap_or(&path).to_string();
        let off_in_file = pc - m.start + m.offset;
        let Some(b) = self.binary(&path) else {
            return vec![Frame { text: format!("{base}+{off_in_file:#x}"), binary: path }];
        };
        let Some(addr) = stated_address(pc, m, &b.loads) else {
            return vec![Frame { text: format!("{base}+{off_in_file:#x}"), binary: path }];
        };
        let mut out = Vec::new();
        if let Some(loader) = &b.loader {
            if let Ok(mut it) = loader.find_frames(addr) {
                while let Ok(Some(f)) = it.next() {
                    let func = f.function.as_ref().and_then(|n| n.demangle().ok()).map(|s| s.to_string());
                    let loc = f.location.as_ref().and_then(|l| {
                        let file = l.file?.rsplit('/').next()?.to_string();
                        Some(format!("{file}:{}", l.line?))
                    });
                    match (func, loc) {
                        (Some(fun), Some(loc)) => out.push(Frame { text: format!("{fun} {loc}"), binary: path.clone() }),
                        (None, Some(loc)) => out.push(Frame { text: format!("? {loc}"), binary: path.clone() }),
                        _ => {}
                    }
                }
            }
            if out.is_empty() {
                if let Some(s) = loader.find_symbol_info(addr) {
                    let name = addr2line::demangle_auto(s.name().into(), None).to_string();
                    out.push(Frame { text: format!("{name}+{:#x}", addr - s.address()), binary: path.clone() });
                }
            }
        }
        if out.is_empty() {
            out.push(Frame { text: format!("{base}+{off_in_file:#x}"), binary: path });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(start: u64, end: u64, offset: u64) -> MapEntry {
        MapEntry { start, end, perms: "r-xp".into(), offset, path: "/bin/prog".into() }
    }

    #[test]
    fn stated_addresses_of_pie_and_fixed_executables() {
        // A PIE: text at file offset 0x1000, stated 0x1000, loaded at 0x555555554000.
        let pie = [Load { offset: 0, vaddr: 0, filesz: 0x800 }, Load { offset: 0x1000, vaddr: 0x1000, filesz: 0x2000 }];
        let m = map(0x555555555000, 0x555555557000, 0x1000);
        assert_eq!(stated_address(0x555555555123, &m, &pie), Some(0x1123));
        // A fixed-address executable: text offset 0x1000 stated 0x401000, run there.
        let fixed = [Load { offset: 0x1000, vaddr: 0x401000, filesz: 0x2000 }];
        let m = map(0x401000, 0x403000, 0x1000);
        assert_eq!(stated_address(0x401abc, &m, &fixed), Some(0x401abc));
        // Outside every load: none.
        assert_eq!(stated_address(0x405000, &map(0x405000, 0x406000, 0x8000), &fixed), None);
    }

    #[test]
    fn elf_headers_are_read_and_garbage_is_not() {
        assert_eq!(elf_loads(b"not an elf file at all"), None);
        assert_eq!(elf_loads(b""), None);
        // A header that claims program headers past its end: none, no panic.
        let mut h = vec![0u8; 64];
        h[..6].copy_from_slice(b"\x7fELF\x02\x01");
        h[0x20..0x28].copy_from_slice(&u64::MAX.to_le_bytes());
        h[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        h[0x38..0x3a].copy_from_slice(&3u16.to_le_bytes());
        assert_eq!(elf_loads(&h), None);
        // This test binary itself has loads.
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let loads = elf_loads(&exe[..exe.len().min(64 << 10)]).unwrap();
        assert!(!loads.is_empty());
    }

    #[test]
    fn symbolizes_a_function_of_this_binary() {
        // The address of a function of this test binary, through its own maps.
        let text = std::fs::read_to_string("/proc/self/maps").unwrap();
        let maps: Vec<MapEntry> = text.lines().filter_map(super::super::maps::parse_line).collect();
        let f = elf_loads as *const () as u64;
        let frames = Symbolizer::default().frames(f + 1, &maps);
        assert!(!frames.is_empty());
        assert!(frames[0].text.contains("elf_loads"), "{:?}", frames);
        // An address in no mapping: no frames.
        assert!(Symbolizer::default().frames(8, &maps).is_empty());
    }
}
