//! Region names and kinds from `/proc/PID/maps`.
//!
//! A traced program's address space is described by the maps snapshots its
//! runtime wrote (at every buffer flush and at exit). Each mapping becomes a
//! trace region named after what it is:
//!
//! | kind | mapping | name |
//! | --- | --- | --- |
//! | `heap` | `[heap]` (brk) | `heap` |
//! | `stack` | `[stack]` | `stack` |
//! | `code` | file mapping with `x` | `code:FILE` |
//! | `data` | writable file mapping (`.data`, relro) | `data:FILE` |
//! | `bss` | anonymous mapping right after a file's writable one | `bss:FILE` |
//! | `file` | read-only file mapping (`.rodata`, a mapped file) | `file:FILE` |
//! | `anon` | any other anonymous mapping (large malloc, mmap) | `anon:0xSTART` |
//!
//! `FILE` is the file's base name; a name used twice gets `#2`, `#3`, ...
//! Kernel pages (`[vdso]`, `[vvar]`, `[vsyscall]`) are left out: a program
//! cannot place data there. The kind is the region's `kind` field.

use crate::trace::{Region, RegionKind};
use std::collections::HashMap;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapEntry {
    pub start: u64,
    pub end: u64,
    pub perms: String,
    /// Offset in the file of the mapping's first byte (0 for anonymous memory).
    pub offset: u64,
    pub path: String,
}

/// One line of `/proc/PID/maps`: `START-END PERMS OFFSET DEV INODE [PATH]`.
pub fn parse_line(line: &str) -> Option<MapEntry> {
    let mut it = line.split_ascii_whitespace();
    let (s, e) = it.next()?.split_once('-')?;
    let start = u64::from_str_radix(s, 16).ok()?;
    let end = u64::from_str_radix(e, 16).ok()?;
    let perms = it.next()?.to_string();
    let offset = u64::from_str_radix(it.next()?, 16).ok()?;
    // device, inode
    for _ in 0..2 {
        it.next()?;
    }
    // The path is the rest of the line and may contain spaces.
    let path = match line.find('/').or_else(|| line.find('[')) {
        Some(i) => line[i..].trim_end().to_string(),
        None => String::new(),
    };
    (start < end && perms.len() == 4).then_some(MapEntry { start, end, perms, offset, path })
}

pub fn kind(e: &MapEntry, prev: Option<&MapEntry>) -> Option<&'static str> {
    let w = e.perms.as_bytes()[1] == b'w';
    let x = e.perms.as_bytes()[2] == b'x';
    match e.path.as_str() {
        "[heap]" => Some("heap"),
        p if p.starts_with("[stack") => Some("stack"),
        "[vdso]" | "[vvar]" | "[vsyscall]" | "[vvar_vclock]" => None,
        p if p.starts_with('[') => Some("anon"),
        "" => match prev {
            // The loader maps a file's BSS as anonymous memory directly after
            // its writable data segment.
            Some(p) if p.end == e.start && p.path.starts_with('/') && p.perms.as_bytes()[1] == b'w' => Some("bss"),
            _ => Some("anon"),
        },
        _ if x => Some("code"),
        _ if w => Some("data"),
        _ => Some("file"),
    }
}

/// Remove the ranges in `holes` from `e` (the runtime's own buffers, which
/// the kernel may have merged with a neighbouring anonymous mapping).
fn subtract(e: &MapEntry, holes: &[(u64, u64)]) -> Vec<MapEntry> {
    let mut parts = vec![e.clone()];
    for &(hs, he) in holes {
        let mut next = Vec::new();
        for p in parts {
            if he <= p.start || hs >= p.end {
                next.push(p);
                continue;
            }
            if hs > p.start {
                next.push(MapEntry { end: hs, ..p.clone() });
            }
            if he < p.end {
                next.push(MapEntry { start: he, offset: p.offset + (he - p.start), ..p.clone() });
            }
        }
        parts = next;
    }
    parts
}

/// Regions of the address space from maps snapshots, the last first: the
/// parts of a mapping of an earlier snapshot that nothing already taken
/// covers are kept (an array freed before exit still gets its name, also
/// when the kernel had merged it with a neighbouring anonymous mapping that
/// outlived it: the survivor keeps its own range, the array the rest).
/// `holes` are left out. Returns the regions, sorted by address, and the
/// kind of each.
pub fn regions(snapshots: &[Vec<MapEntry>], holes: &[(u64, u64)]) -> Vec<Region> {
    // (mapping, kind, the file it belongs to)
    let mut taken: Vec<(MapEntry, &'static str, String)> = Vec::new();
    for snap in snapshots.iter().rev() {
        let mut sorted = snap.clone();
        sorted.sort_by_key(|e| e.start);
        // What newer snapshots hold: one snapshot's mappings are disjoint, so
        // its own pieces never need subtracting from each other.
        let covered: Vec<(u64, u64)> = taken.iter().map(|(t, _, _)| (t.start, t.end)).collect();
        for (i, e) in sorted.iter().enumerate() {
            let prev = i.checked_sub(1).map(|j| &sorted[j]);
            let Some(k) = kind(e, prev) else { continue };
            // A BSS mapping is named after the file whose data it follows.
            let owner = if k == "bss" { prev.map(|p| p.path.clone()).unwrap_or_default() } else { e.path.clone() };
            for part in subtract(e, holes) {
                if part.end > 1 << crate::trace::ADDR_BITS {
                    continue;
                }
                for free in subtract(&part, &covered) {
                    taken.push((free, k, owner.clone()));
                }
            }
        }
    }
    taken.sort_by_key(|(e, _, _)| e.start);
    let mut used: HashMap<String, u32> = HashMap::new();
    let mut out = Vec::with_capacity(taken.len());
    for (e, k, owner) in taken {
        let file = owner.rsplit('/').next().unwrap_or("");
        let base = match k {
            "heap" | "stack" => k.to_string(),
            "anon" if e.path.is_empty() => format!("anon:{:#x}", e.start),
            "anon" => format!("anon:{}", e.path),
            _ => format!("{k}:{file}"),
        };
        let n = used.entry(base.clone()).or_insert(0);
        *n += 1;
        let name = if *n == 1 { base } else { format!("{base}#{n}") };
        out.push(Region::new(name, e.start, e.end - e.start).with_kind(RegionKind::parse(k).unwrap_or_default()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
555555554000-555555555000 r--p 00000000 08:01 123 /opt/demo/prog
555555555000-555555556000 r-xp 00001000 08:01 123 /opt/demo/prog
555555557000-555555558000 rw-p 00003000 08:01 123 /opt/demo/prog
555555558000-555555559000 rw-p 00000000 00:00 0
555555559000-55555557a000 rw-p 00000000 00:00 0 [heap]
7ffff3c00000-7ffff7c00000 rw-p 00000000 00:00 0
7ffff7fc1000-7ffff7fc5000 r--p 00000000 00:00 0 [vvar]
7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0 [stack]
";

    fn snap(t: &str) -> Vec<MapEntry> {
        t.lines().filter_map(parse_line).collect()
    }

    #[test]
    fn names_and_kinds() {
        let r = regions(&[snap(MAPS)], &[]);
        let k: Vec<&str> = r.iter().map(|r| r.kind.name()).collect();
        let names: Vec<&str> = r.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["file:prog", "code:prog", "data:prog", "bss:prog", "heap", "anon:0x7ffff3c00000", "stack"]);
        assert_eq!(k, ["file", "code", "data", "bss", "heap", "anon", "stack"]);
        assert_eq!(r[5].len, 64 << 20);
    }

    #[test]
    fn buffers_are_cut_out_and_old_snapshots_fill_gaps() {
        let old = snap("7fff00000000-7fff00100000 rw-p 00000000 00:00 0\n");
        let r = regions(&[old, snap(MAPS)], &[(0x7ffff3c00000, 0x7ffff3e00000)]);
        let anon: Vec<(u64, u64)> = r.iter().filter(|r| r.name.starts_with("anon")).map(|r| (r.base, r.len)).collect();
        assert_eq!(anon, [(0x7fff00000000, 0x100000), (0x7ffff3e00000, (64 << 20) - (2 << 20))]);
    }

    #[test]
    fn an_array_merged_with_a_survivor_keeps_the_rest_of_the_merged_mapping() {
        // Before exit: a 64 MiB array merged by the kernel with the 12 KiB
        // anonymous mapping above it (one VMA); at exit, after free(), only
        // the 12 KiB remain. The array is the old VMA less the survivor.
        let before = snap("7ffff3dce000-7ffff7dd5000 rw-p 00000000 00:00 0\n");
        let exit = snap("7ffff7dd2000-7ffff7dd5000 rw-p 00000000 00:00 0\n");
        let r = regions(&[before, exit], &[]);
        let got: Vec<(&str, u64, u64)> = r.iter().map(|r| (r.name.as_str(), r.base, r.len)).collect();
        assert_eq!(got, [("anon:0x7ffff3dce000", 0x7ffff3dce000, 0x4004000), ("anon:0x7ffff7dd2000", 0x7ffff7dd2000, 0x3000)]);
    }
}
