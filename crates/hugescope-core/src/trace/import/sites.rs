//! Allocation sites of a traced program, and the regions they name (issue
//! #38: "regions named by what lives there", as valgrind's DHAT names heap
//! blocks by their allocation stacks).
//!
//! The runtime (`tracer/hugescope_trace.c`) writes a line
//! `# alloc CALL SIZE START RET1 RET2 ...` (hex) for every allocation of at
//! least `HUGESCOPE_SITE_MIN` bytes. Here each becomes an `AllocSite`: its
//! return addresses symbolized (`symbolize.rs`) and a *key*, the frames that
//! lie in the program's own executable (innermost first, at most
//! `KEY_FRAMES`, up to `main`), joined by `" < "`. The key holds function
//! names and source lines only, so it stays the same when the program is
//! re-linked with another layout: a plan written by site (`PlanEntry::site`)
//! applies to the new binary.
//!
//! Each allocation's pages are carved out of the maps region holding them
//! (one anonymous mapping often holds several arrays: the kernel merges
//! neighbouring `mmap`s) and become a region of their own named
//! `alloc:FUNCTION@FILE:LINE`. Allocations of one site whose pages touch (a
//! loop of allocations) form one region; allocations of different sites at
//! the same pages (memory freed and allocated again) share a region named by
//! the lowest-addressed one, the others listed in `AllocSite::also`.

use super::maps::MapEntry;
use super::symbolize::Symbolizer;
use crate::trace::{AllocSite, Region, RegionKind};
use std::collections::HashMap;

/// Frames of the program's executable a key holds: enough to tell apart a
/// helper's callers, few enough that a key reads on one line.
pub const KEY_FRAMES: usize = 4;
const PAGE: u64 = 4096;

/// One `# alloc` line of the runtime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllocEvent {
    pub call: String,
    pub size: u64,
    pub start: u64,
    pub rets: Vec<u64>,
}

/// The rest of an `# alloc` line after "alloc " (None when malformed: the
/// runtime writes whole lines, and a torn one is dropped, not guessed at).
pub fn parse_alloc(v: &str) -> Option<AllocEvent> {
    let mut it = v.split_ascii_whitespace();
    let call = it.next()?;
    if call.is_empty() || call.len() > 32 || !call.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return None;
    }
    let size = u64::from_str_radix(it.next()?, 16).ok()?;
    let start = u64::from_str_radix(it.next()?, 16).ok()?;
    let rets: Option<Vec<u64>> = it.take(64).map(|t| u64::from_str_radix(t, 16).ok()).collect();
    (size > 0 && start.checked_add(size).is_some_and(|e| e <= 1 << crate::trace::ADDR_BITS))
        .then_some(AllocEvent { call: call.to_string(), size, start, rets: rets? })
}

/// The key of a call path: the frames in `exe`, innermost first, up to and
/// including `main`, at most `KEY_FRAMES`; the first frames of any binary
/// when none lies in `exe`.
pub fn key_of(frames: &[super::symbolize::Frame], exe: Option<&str>) -> String {
    let own: Vec<&str> = frames.iter().filter(|f| Some(f.binary.as_str()) == exe).map(|f| f.text.as_str()).collect();
    let chosen: Vec<&str> = if own.is_empty() { frames.iter().map(|f| f.text.as_str()).collect() } else { own };
    let mut key = Vec::new();
    for f in chosen.into_iter().take(KEY_FRAMES) {
        key.push(f);
        if f.starts_with("main ") {
            break;
        }
    }
    key.join(" < ")
}

/// Symbolized sites of `events`; `maps` are the program's snapshots (the
/// last holds the code mappings of exit time), `exe` its executable.
pub fn sites(events: &[AllocEvent], snapshots: &[Vec<MapEntry>], exe: Option<&str>) -> Vec<(u64, u64, AllocSite)> {
    // Newest snapshot first; a mapping seen again is listed once.
    let mut maps: Vec<MapEntry> = Vec::new();
    for snap in snapshots.iter().rev() {
        for e in snap {
            if e.path.starts_with('/') && !maps.iter().any(|m| m.start == e.start && m.end == e.end && m.path == e.path) {
                maps.push(e.clone());
            }
        }
    }
    let mut sym = Symbolizer::default();
    let mut cache: HashMap<u64, Vec<super::symbolize::Frame>> = HashMap::new();
    events
        .iter()
        .map(|ev| {
            let frames: Vec<super::symbolize::Frame> =
                ev.rets.iter().flat_map(|&r| cache.entry(r).or_insert_with(|| sym.frames(r, &maps)).clone()).collect();
            let site = AllocSite {
                call: ev.call.clone(),
                size: ev.size,
                key: key_of(&frames, exe),
                frames: frames.into_iter().map(|f| f.text).collect(),
                count: 1,
                also: Vec::new(),
            };
            (ev.start, ev.start + ev.size, site)
        })
        .collect()
}

/// The region name of a site: `alloc:FUNCTION@FILE:LINE` from the key's
/// innermost frame (parameters of a C++ name left out).
pub fn site_name(s: &AllocSite) -> String {
    let first = s.key.split(" < ").next().unwrap_or("");
    let (func, loc) = first.split_once(' ').unwrap_or((first, ""));
    let func = func.split('(').next().unwrap_or(func);
    match (func.is_empty(), loc.is_empty()) {
        (true, _) => format!("alloc:{}", s.call),
        (false, true) => format!("alloc:{func}"),
        (false, false) => format!("alloc:{func}@{loc}"),
    }
}

/// Allocations (page-rounded) merged as the module comment says, by address.
fn pieces(mut allocs: Vec<(u64, u64, AllocSite)>) -> Vec<(u64, u64, AllocSite)> {
    for a in allocs.iter_mut() {
        a.0 &= !(PAGE - 1);
        a.1 = a.1.div_ceil(PAGE) * PAGE;
    }
    // Stable: equal starts keep the order of allocation.
    allocs.sort_by_key(|a| a.0);
    let mut out: Vec<(u64, u64, AllocSite)> = Vec::new();
    for (s, e, site) in allocs {
        if let Some(last) = out.last_mut() {
            let same = last.2.key == site.key && last.2.call == site.call;
            if s < last.1 || (same && s == last.1) {
                last.1 = last.1.max(e);
                if same {
                    last.2.count += 1;
                    last.2.size += site.size;
                } else if !last.2.also.contains(&site.key) {
                    last.2.also.push(site.key);
                }
                continue;
            }
        }
        out.push((s, e, site));
    }
    out
}

/// `regions` with every allocation carved out of the anonymous or heap
/// region holding it (see the module comment). Other regions are unchanged.
pub fn carve(regions: Vec<Region>, allocs: Vec<(u64, u64, AllocSite)>) -> Vec<Region> {
    if allocs.is_empty() {
        return regions;
    }
    let pieces = pieces(allocs);
    let mut out = Vec::with_capacity(regions.len() + pieces.len());
    for r in regions {
        let inside: Vec<&(u64, u64, AllocSite)> = pieces
            .iter()
            .filter(|p| matches!(r.kind, RegionKind::Anon | RegionKind::Heap) && p.0 < r.end() && p.1 > r.base)
            .collect();
        if inside.is_empty() {
            out.push(r);
            continue;
        }
        let gap = |out: &mut Vec<Region>, s: u64, e: u64| {
            if e > s {
                let name = if s == r.base { r.name.clone() } else { format!("{}+{:#x}", r.name, s - r.base) };
                out.push(Region { name, base: s, len: e - s, site: None, ..r.clone() });
            }
        };
        let mut at = r.base;
        for p in inside {
            let (s, e) = (p.0.max(r.base), p.1.min(r.end()));
            gap(&mut out, at, s);
            out.push(Region { name: site_name(&p.2), base: s, len: e - s, site: Some(Box::new(p.2.clone())), ..r.clone() });
            at = e;
        }
        gap(&mut out, at, r.end());
    }
    // Two regions of one site name (the site allocated twice, apart): #2, #3.
    let mut used: HashMap<String, u32> = HashMap::new();
    for r in out.iter_mut().filter(|r| r.site.is_some()) {
        let n = used.entry(r.name.clone()).or_insert(0);
        *n += 1;
        if *n > 1 {
            r.name = format!("{}#{n}", r.name);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(key: &str) -> AllocSite {
        AllocSite { call: "malloc".into(), size: 0, key: key.into(), frames: vec![key.into()], count: 1, also: vec![] }
    }

    /// An allocation of [s, e) from the site keyed `key`.
    fn alloc(s: u64, e: u64, key: &str) -> (u64, u64, AllocSite) {
        (s, e, AllocSite { size: e - s, ..site(key) })
    }

    #[test]
    fn alloc_lines_parse_and_torn_ones_do_not() {
        let e = parse_alloc("malloc 1000 7ffff7800010 555555556720 7ffff7dfc24a").unwrap();
        assert_eq!((e.call.as_str(), e.size, e.start, e.rets.len()), ("malloc", 0x1000, 0x7ffff7800010, 2));
        assert_eq!(parse_alloc("malloc 1000"), None);
        assert_eq!(parse_alloc("malloc 10zz 7000"), None);
        assert_eq!(parse_alloc("mal;loc 1000 7000"), None);
        assert_eq!(parse_alloc("malloc 0 7000"), None);
        assert_eq!(parse_alloc("malloc ffffffffffffffff 7000"), None);
        assert_eq!(parse_alloc("malloc 1000 7000 55x"), None);
    }

    proptest::proptest! {
        /// Any text after "# alloc " (the metadata is the traced program's
        /// to write): parsed or refused, never a panic, and what parses is
        /// a non-empty range inside the address space.
        #[test]
        fn alloc_lines_never_panic(v in "\\PC{0,200}", hex in proptest::collection::vec(0u64.., 0..6)) {
            let _ = parse_alloc(&v);
            let line = hex.iter().map(|h| format!("{h:x}")).collect::<Vec<_>>().join(" ");
            if let Some(e) = parse_alloc(&format!("mmap {line}")) {
                proptest::prop_assert!(e.size > 0 && e.start + e.size <= 1 << crate::trace::ADDR_BITS);
            }
        }
    }

    #[test]
    fn keys_keep_the_executables_frames_up_to_main() {
        use super::super::symbolize::Frame;
        let f = |t: &str, b: &str| Frame { text: t.into(), binary: b.into() };
        let frames = [
            f("operator new(unsigned long)+0x1c", "/usr/lib/libstdc++.so.6"),
            f("make prog.c:4", "/p/prog"),
            f("main prog.c:9", "/p/prog"),
            f("__libc_start_call_main+0x7a", "/usr/lib/libc.so.6"),
        ];
        assert_eq!(key_of(&frames, Some("/p/prog")), "make prog.c:4 < main prog.c:9");
        // No frame in the executable: the first frames of any binary.
        assert_eq!(key_of(&frames[..1], Some("/p/prog")), "operator new(unsigned long)+0x1c");
        assert_eq!(site_name(&site("make prog.c:4 < main prog.c:9")), "alloc:make@prog.c:4");
        assert_eq!(site_name(&site("ns::f(int) a.cc:3")), "alloc:ns::f@a.cc:3");
        assert_eq!(site_name(&site("")), "alloc:malloc");
    }

    #[test]
    fn allocations_are_carved_out_of_their_mapping() {
        // One 16-page anonymous mapping holding two arrays (pages 2-5 and
        // 8-11), a third array of the second's site right after it (pages
        // 12-13: one region), and the heap untouched.
        let base = 0x7000_0000_0000;
        let p = |n: u64| base + n * PAGE;
        let regions = vec![Region::new("heap", 0x1000_0000, 8 * PAGE).with_kind(RegionKind::Heap), Region::new(format!("anon:{base:#x}"), base, 16 * PAGE)];
        let allocs = vec![
            alloc(p(2) + 16, p(6) - 100, "a x.c:1"),
            alloc(p(8) + 16, p(12) - 8, "b x.c:2"),
            alloc(p(12) + 16, p(14) - 8, "b x.c:2"),
        ];
        let r = carve(regions, allocs);
        let got: Vec<(String, u64, u64)> = r.iter().map(|r| (r.name.clone(), r.base.wrapping_sub(base) / PAGE, r.len / PAGE)).collect();
        let names: Vec<&str> = got.iter().map(|g| g.0.as_str()).collect();
        assert_eq!(names, ["heap", "anon:0x700000000000", "alloc:a@x.c:1", "anon:0x700000000000+0x6000", "alloc:b@x.c:2", "anon:0x700000000000+0xe000"]);
        assert_eq!(got[1..].iter().map(|g| (g.1, g.2)).collect::<Vec<_>>(), [(0, 2), (2, 4), (6, 2), (8, 6), (14, 2)]);
        let b = r[4].site.as_ref().unwrap();
        assert_eq!((b.count, b.size), (2, (p(12) - 8 - p(8) - 16) + (p(14) - 8 - p(12) - 16)));
        // Bytes are conserved: the pieces tile the mapping.
        assert_eq!(r[1..].iter().map(|r| r.len).sum::<u64>(), 16 * PAGE);
    }

    #[test]
    fn reused_pages_are_shared_and_repeated_sites_numbered() {
        let base = 0x7000_0000_0000;
        let regions = vec![Region::new("anon:x", base, 64 * PAGE)];
        let allocs = vec![
            alloc(base, base + 8 * PAGE, "a x.c:1"),
            alloc(base + 4 * PAGE, base + 10 * PAGE, "c x.c:3"),
            alloc(base + 20 * PAGE, base + 22 * PAGE, "a x.c:1"),
        ];
        let r = carve(regions, allocs);
        let names: Vec<&str> = r.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["alloc:a@x.c:1", "anon:x+0xa000", "alloc:a@x.c:1#2", "anon:x+0x16000"]);
        assert_eq!(r[0].len, 10 * PAGE);
        assert_eq!(r[0].site.as_ref().unwrap().also, ["c x.c:3"]);
    }
}
