//! Fragmenting real physical memory the way the PCC paper does (§5.1.1): one
//! unmovable base page in a chosen share of the 2 MiB blocks of free memory, so that
//! those blocks can never become a huge page while the fragmenter runs.
//!
//! How: allocate most of free memory in base pages, learn each page's physical frame
//! from /proc/self/pagemap (root only), group frames by 2 MiB block (pfn >> 9), keep
//! one page `mlock`ed in `share` of the blocks (chosen from a seed), and give every
//! other page back. An mlocked page is unevictable, and with
//! `vm.compact_unevictable_allowed = 0` compaction may not migrate it either, so the
//! block stays broken; the other 511 pages are ordinary free memory that base-page
//! allocations can still use. Every sysctl is changed through `settings`, which
//! records its old value in the state file first; dropping the `Fragmenter` (also
//! after a stop request, see `lifetime`) restores it, and if the process is killed
//! outright the next hugescope invocation does (`settings::repair_stale`).
//!
//! Note what this leaves: the unpinned `1 - share` of the blocks and the safety margin
//! that was never allocated are whole free 2 MiB blocks. On a machine with much free
//! memory, `1 - share` of it can be several GiB of huge-page-capable memory.

use crate::lifetime::{self, Stop};
use crate::settings;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const PAGE: u64 = 4096;
const BLOCK_PAGES_SHIFT: u32 = 9;
const CHUNK: u64 = 256 << 20;
const MADV_POPULATE_WRITE: libc::c_int = 23;

const COMPACT_SYSCTL: &str = "/proc/sys/vm/compact_unevictable_allowed";
const MAXMAP_SYSCTL: &str = "/proc/sys/vm/max_map_count";
// One fragmenter per process: two would each pin blocks the other needs whole.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Free 2 MiB-capable blocks from /proc/buddyinfo: each order-k free block (k >= 9)
/// counts as 2^(k-9) blocks of 2 MiB.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BuddySnapshot {
    /// Zone name ("Node 0 Normal") -> free counts per order.
    pub zones: Vec<(String, Vec<u64>)>,
    /// Sum over zones of free blocks of order >= 9, in 2 MiB units.
    pub free_2m_blocks: u64,
}

pub fn parse_buddyinfo(text: &str) -> std::result::Result<BuddySnapshot, String> {
    let mut snap = BuddySnapshot::default();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        // "Node 0, zone   Normal    265     74 ..."
        let (head, rest) = line
            .split_once("zone")
            .ok_or_else(|| format!("line {}: no 'zone' in '{line}'", i + 1))?;
        let mut toks = rest.split_whitespace();
        let zone = toks.next().ok_or_else(|| format!("line {}: no zone name", i + 1))?;
        let counts: Vec<u64> = toks
            .map(|t| t.parse::<u64>().map_err(|_| format!("line {}: '{t}' is not a count", i + 1)))
            .collect::<std::result::Result<_, _>>()?;
        for (order, c) in counts.iter().enumerate() {
            if order >= 9 {
                snap.free_2m_blocks += c << (order - 9);
            }
        }
        let node = head.trim().trim_end_matches(',');
        snap.zones.push((format!("{node} {zone}"), counts));
    }
    Ok(snap)
}

pub fn read_buddyinfo() -> Result<BuddySnapshot> {
    let p = Path::new("/proc/buddyinfo");
    let text = std::fs::read_to_string(p).map_err(|e| Error::io(p, e))?;
    parse_buddyinfo(&text).map_err(|m| Error::parse(p, 0, m))
}

/// Free blocks of order >= 9 per migrate type, summed over zones, from
/// /proc/pagetypeinfo (root only).
pub fn read_pagetypeinfo() -> Option<HashMap<String, u64>> {
    Some(parse_pagetypeinfo(&std::fs::read_to_string("/proc/pagetypeinfo").ok()?))
}

pub fn parse_pagetypeinfo(text: &str) -> HashMap<String, u64> {
    let mut out: HashMap<String, u64> = HashMap::new();
    for line in text.lines() {
        // "Node    0, zone   Normal, type    Movable     12 ... "
        if !line.starts_with("Node") {
            continue;
        }
        let Some((_, rest)) = line.split_once(", type") else { continue };
        let mut toks = rest.split_whitespace();
        let Some(ty) = toks.next() else { continue };
        let counts: Vec<u64> = toks.filter_map(|t| t.parse().ok()).collect();
        let blocks: u64 = counts.iter().enumerate().filter(|(o, _)| *o >= 9).map(|(o, c)| c << (o - 9)).sum();
        *out.entry(ty.to_string()).or_insert(0) += blocks;
    }
    out
}

/// `MemTotal` and `MemFree` in bytes.
pub fn meminfo() -> Result<(u64, u64)> {
    let p = Path::new("/proc/meminfo");
    let text = std::fs::read_to_string(p).map_err(|e| Error::io(p, e))?;
    let get = |key: &str| -> Result<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(key).and_then(|r| r.trim_start_matches(':').split_whitespace().next()))
            .and_then(|n| n.parse::<u64>().ok())
            .map(|kb| kb * 1024)
            .ok_or_else(|| Error::parse(p, 0, format!("no '{key}' line")))
    };
    Ok((get("MemTotal")?, get("MemFree")?))
}

/// The default safety margin: max(1 GiB, 5% of MemTotal).
pub fn default_margin(mem_total: u64) -> u64 {
    (1u64 << 30).max(mem_total / 20)
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FragmentReport {
    pub share: f64,
    pub seed: u64,
    pub margin_bytes: u64,
    pub mem_total: u64,
    pub mem_free_before: u64,
    pub mem_free_after: u64,
    /// Bytes the fragmenter allocated (and touched) before releasing.
    pub bytes_allocated: u64,
    /// 2 MiB physical blocks that held at least one of our pages.
    pub blocks_touched: u64,
    /// ... of which we held all 512 pages (they were entirely free before).
    pub blocks_whole: u64,
    pub blocks_pinned: u64,
    /// Pinned pages whose frame changed between the pagemap read and the mlock
    /// (migrated by compaction meanwhile); those blocks may not be broken.
    pub pins_moved: u64,
    /// Pins no longer present on their frame after the release (should be 0).
    pub pins_lost: u64,
    pub bytes_pinned: u64,
    pub free_2m_blocks_before: u64,
    pub free_2m_blocks_after: u64,
    /// Free order >= 9 blocks per migrate type, when /proc/pagetypeinfo is readable.
    pub pagetype_free_2m_before: Option<HashMap<String, u64>>,
    pub pagetype_free_2m_after: Option<HashMap<String, u64>>,
    pub compact_unevictable_allowed_was: i64,
    pub max_map_count_raised_from: Option<i64>,
    pub seconds: f64,
}

/// Holds the pins (and the changed settings) until dropped.
pub struct Fragmenter {
    pins: Vec<u64>,
    report: FragmentReport,
    /// Settings this fragmenter changed through `settings::change`, released on drop.
    changed: Vec<&'static str>,
}

fn read_sysctl(path: &str) -> Result<i64> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    text.trim()
        .parse::<i64>()
        .map_err(|_| Error::parse(path, 1, format!("expected an integer, found '{}'", text.trim())))
}

/// splitmix64: a tiny, well-mixed generator so the block choice depends on the seed only.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Choose `round(share * n)` of the indices 0..n, deterministically from `seed`.
pub fn choose_blocks(n: usize, share: f64, seed: u64) -> Vec<usize> {
    let k = ((share * n as f64).round() as usize).min(n);
    let mut idx: Vec<usize> = (0..n).collect();
    let mut s = seed;
    // Partial Fisher-Yates: the first k slots are a uniform sample.
    for i in 0..k {
        let j = i + (splitmix(&mut s) % (n - i) as u64) as usize;
        idx.swap(i, j);
    }
    idx.truncate(k);
    idx.sort_unstable();
    idx
}

struct Chunk {
    addr: u64,
    len: u64,
}

/// The memory taken while fragmenting; given back on every early return (an
/// error or a stop request) by dropping it.
struct Chunks(Vec<Chunk>);

impl Drop for Chunks {
    fn drop(&mut self) {
        for c in &self.0 {
            // SAFETY: each chunk is a mapping this fragmenter made.
            unsafe { libc::munmap(c.addr as *mut libc::c_void, c.len as usize) };
        }
    }
}

fn check(stop: &mut Stop) -> Result<()> {
    match stop() {
        Some(sig) => Err(Error::Interrupted(sig)),
        None => Ok(()),
    }
}

impl Fragmenter {
    /// Fragment free memory. `share` in [0, 1]; `margin` bytes are left free during
    /// the allocation (default `default_margin`).
    pub fn start(share: f64, seed: u64, margin: Option<u64>) -> Result<Fragmenter> {
        Self::start_with_stop(share, seed, margin, &mut lifetime::never())
    }

    /// `start`, asking `stop` between steps (at least every few hundred ms) whether
    /// to give up: then every page and setting is released and the result is
    /// `Error::Interrupted(signal)`.
    pub fn start_with_stop(share: f64, seed: u64, margin: Option<u64>, mut stop: Stop) -> Result<Fragmenter> {
        if !(0.0..=1.0).contains(&share) {
            return Err(Error::input(format!("fragment share {share} must be between 0 and 1")));
        }
        if !crate::is_root() {
            return Err(Error::permission(
                "the fragmenter needs root: it reads physical frame numbers from /proc/self/pagemap, mlocks pages and sets vm.compact_unevictable_allowed",
            ));
        }
        if ACTIVE.swap(true, Ordering::SeqCst) {
            return Err(Error::refused("a fragmenter is already active in this process"));
        }
        let t0 = Instant::now();
        // On an error the half-built Fragmenter (if any) has been dropped, which
        // released the settings; errors before it existed still need ACTIVE cleared.
        let r = Self::start_inner(share, seed, margin, t0, &mut stop);
        if r.is_err() {
            ACTIVE.store(false, Ordering::SeqCst);
        }
        r
    }

    /// Change a setting through the state file, and remember to release it.
    fn set(&mut self, path: &'static str, value: i64) -> Result<i64> {
        let old = settings::change(path, &value.to_string())?;
        self.changed.push(path);
        old.parse::<i64>().map_err(|_| Error::parse(path, 1, format!("expected an integer, found '{old}'")))
    }

    fn start_inner(share: f64, seed: u64, margin: Option<u64>, t0: Instant, stop: &mut Stop) -> Result<Fragmenter> {
        let (mem_total, mem_free_before) = meminfo()?;
        let margin = margin.unwrap_or_else(|| default_margin(mem_total));
        if mem_free_before <= margin + CHUNK {
            return Err(Error::refused(format!(
                "only {} MiB free and the safety margin is {} MiB: nothing left to fragment safely",
                mem_free_before >> 20, margin >> 20
            )));
        }
        let buddy_before = read_buddyinfo()?;
        let pagetype_before = read_pagetypeinfo();

        let mut me = Fragmenter { pins: Vec::new(), changed: Vec::new(), report: FragmentReport {
            share, seed, margin_bytes: margin, mem_total, mem_free_before, mem_free_after: 0,
            bytes_allocated: 0, blocks_touched: 0, blocks_whole: 0, blocks_pinned: 0, pins_moved: 0, pins_lost: 0,
            bytes_pinned: 0, free_2m_blocks_before: buddy_before.free_2m_blocks, free_2m_blocks_after: 0,
            pagetype_free_2m_before: pagetype_before, pagetype_free_2m_after: None,
            compact_unevictable_allowed_was: -1, max_map_count_raised_from: None, seconds: 0.0,
        } };
        // Change the sysctl before allocating so that no pin is ever migratable. A
        // process that exits without dropping the Fragmenter (exit(), a kill) leaves
        // the record in the state file, and the next invocation restores it.
        me.report.compact_unevictable_allowed_was = me.set(COMPACT_SYSCTL, 0)?;

        // Allocate in chunks, re-reading MemFree each time: other programs on the
        // machine may be allocating too, and the margin is what keeps them alive.
        let mut chunks = Chunks(Vec::new());
        loop {
            check(stop)?;
            let (_, free) = meminfo()?;
            let want = free.saturating_sub(margin).min(CHUNK) / (2 << 20) * (2 << 20);
            if want < (2 << 20) {
                break;
            }
            // SAFETY: a fresh private anonymous mapping; failure is checked.
            let p = unsafe {
                libc::mmap(std::ptr::null_mut(), want as usize, libc::PROT_READ | libc::PROT_WRITE,
                           libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE, -1, 0)
            };
            if p == libc::MAP_FAILED {
                break;
            }
            // Base pages only: a THP would hand us whole blocks we would have to split.
            // SAFETY: advising and populating our own fresh mapping.
            let ok = unsafe {
                libc::madvise(p, want as usize, libc::MADV_NOHUGEPAGE);
                libc::madvise(p, want as usize, MADV_POPULATE_WRITE) == 0
            };
            if !ok {
                // SAFETY: our mapping.
                unsafe { libc::munmap(p, want as usize) };
                break;
            }
            chunks.0.push(Chunk { addr: p as u64, len: want });
            me.report.bytes_allocated += want;
        }
        if chunks.0.is_empty() {
            return Err(Error::refused("could not allocate any memory above the safety margin"));
        }

        // Physical block of every page: block -> (pages we hold, lowest pfn, its vaddr).
        let pm_path = PathBuf::from("/proc/self/pagemap");
        let pm = File::open(&pm_path).map_err(|e| Error::io(&pm_path, e))?;
        let mut blocks: HashMap<u64, (u32, u64, u64)> = HashMap::new();
        for c in &chunks.0 {
            let npages = (c.len / PAGE) as usize;
            let mut done = 0usize;
            while done < npages {
                check(stop)?;
                let n = (npages - done).min(1 << 16);
                let start = c.addr + done as u64 * PAGE;
                let entries = crate::pagemap::read_entries_from(&pm, &pm_path, start, n)?;
                for (i, e) in entries.iter().enumerate() {
                    if e & crate::pagemap::PM_PRESENT == 0 {
                        continue;
                    }
                    let pfn = e & crate::pagemap::PM_PFN_MASK;
                    if pfn == 0 {
                        return Err(Error::permission(
                            "/proc/self/pagemap shows no frame numbers (needs CAP_SYS_ADMIN); cannot find physical blocks",
                        ));
                    }
                    let va = start + i as u64 * PAGE;
                    let b = blocks.entry(pfn >> BLOCK_PAGES_SHIFT).or_insert((0, pfn, va));
                    b.0 += 1;
                    if pfn < b.1 {
                        b.1 = pfn;
                        b.2 = va;
                    }
                }
                done += n;
            }
        }
        let mut keys: Vec<u64> = blocks.keys().copied().collect();
        keys.sort_unstable();
        me.report.blocks_touched = keys.len() as u64;
        me.report.blocks_whole = blocks.values().filter(|b| b.0 == 512).count() as u64;
        let chosen = choose_blocks(keys.len(), share, seed);
        let mut pins: Vec<(u64, u64)> = chosen.iter().map(|&i| { let b = blocks[&keys[i]]; (b.2, b.1) }).collect();
        pins.sort_unstable();
        drop(blocks);

        // Each pin becomes its own VMA; make sure the map count allows it.
        let maxmap = read_sysctl(MAXMAP_SYSCTL)?;
        let need = pins.len() as i64 * 2 + 4096;
        if need > maxmap {
            me.report.max_map_count_raised_from = Some(me.set(MAXMAP_SYSCTL, need)?);
        }
        for (i, &(va, _)) in pins.iter().enumerate() {
            if i % 4096 == 0 {
                check(stop)?;
            }
            // SAFETY: one page inside our mapping.
            if unsafe { libc::mlock(va as *const libc::c_void, PAGE as usize) } != 0 {
                return Err(Error::last_os(format!("mlock of a pin page at {va:#x}")));
            }
        }
        // Did any pin move between the pagemap read and the mlock?
        for &(va, pfn) in &pins {
            if let Ok(e) = crate::pagemap::read_entries_from(&pm, &pm_path, va, 1) {
                if e[0] & crate::pagemap::PM_PFN_MASK != pfn {
                    me.report.pins_moved += 1;
                }
            }
        }
        // Release everything except the pins: unmap the gaps between them. Both lists
        // must be in address order (mmap hands out chunks top-down).
        // From here the chunks are released piecewise: the guard must not unmap the pins.
        let mut chunks = std::mem::take(&mut chunks.0);
        chunks.sort_unstable_by_key(|c| c.addr);
        let mut pi = 0usize;
        for c in &chunks {
            let mut cur = c.addr;
            let end = c.addr + c.len;
            while pi < pins.len() && pins[pi].0 < end {
                let va = pins[pi].0;
                if va > cur {
                    // SAFETY: [cur, va) is inside our chunk and holds no pin.
                    unsafe { libc::munmap(cur as *mut libc::c_void, (va - cur) as usize) };
                }
                cur = va + PAGE;
                pi += 1;
            }
            if end > cur {
                // SAFETY: the tail of our chunk after the last pin.
                unsafe { libc::munmap(cur as *mut libc::c_void, (end - cur) as usize) };
            }
        }
        // Check the result: every pin still mapped, on the frame it was chosen for.
        for &(va, pfn) in &pins {
            let ok = crate::pagemap::read_entries_from(&pm, &pm_path, va, 1)
                .map(|e| e[0] & crate::pagemap::PM_PRESENT != 0 && e[0] & crate::pagemap::PM_PFN_MASK == pfn)
                .unwrap_or(false);
            if !ok {
                me.report.pins_lost += 1;
            }
        }
        me.pins = pins.iter().map(|p| p.0).collect();
        me.report.blocks_pinned = me.pins.len() as u64;
        me.report.bytes_pinned = me.pins.len() as u64 * PAGE;
        // Freed pages pass through per-cpu lists before they merge; give it a moment.
        std::thread::sleep(Duration::from_millis(200));
        me.report.free_2m_blocks_after = read_buddyinfo()?.free_2m_blocks;
        me.report.pagetype_free_2m_after = read_pagetypeinfo();
        me.report.mem_free_after = meminfo()?.1;
        me.report.seconds = t0.elapsed().as_secs_f64();
        Ok(me)
    }

    pub fn report(&self) -> &FragmentReport {
        &self.report
    }

    /// Virtual addresses of the pinned pages.
    pub fn pins(&self) -> &[u64] {
        &self.pins
    }

    /// Hold the pins until `stop` asks to stop (polled every 100 ms), calling
    /// `ready` first (the CLI prints its report there, so a script that signals as
    /// soon as it reads the report cannot race the hold). Releases the pins and
    /// every setting, and returns the signal that ended the hold.
    pub fn hold_until_stopped(self, stop: Stop, ready: impl FnOnce(&FragmentReport)) -> i32 {
        ready(&self.report);
        let sig = loop {
            if let Some(sig) = stop() {
                break sig;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        drop(self);
        sig
    }
}

impl Drop for Fragmenter {
    fn drop(&mut self) {
        for &va in &self.pins {
            // SAFETY: each pin is a one-page mapping this fragmenter kept.
            unsafe { libc::munmap(va as *mut libc::c_void, PAGE as usize) };
        }
        self.pins.clear();
        for path in self.changed.drain(..) {
            if let Err(e) = settings::release(path) {
                // Drop cannot fail; the record stays and the next invocation retries.
                eprintln!("hugescope: could not restore {path}: {e}");
            }
        }
        ACTIVE.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buddyinfo_counts_2m_blocks() {
        let t = "Node 0, zone      DMA      0      0      0      0      0      0      0      0      1      1      3 \n\
                 Node 0, zone   Normal    265     74     81   1043    984    709    456    267    165     87    105 \n";
        let s = parse_buddyinfo(t).unwrap();
        assert_eq!(s.zones.len(), 2);
        assert_eq!(s.zones[1].0, "Node 0 Normal");
        // DMA: 1 order-9 + 3 order-10 (= 6) = 7; Normal: 87 + 210 = 297.
        assert_eq!(s.free_2m_blocks, 7 + 297);
        assert!(parse_buddyinfo("Node 0, zone Normal 1 x\n").is_err());
        assert!(parse_buddyinfo("nonsense\n").is_err());
    }

    #[test]
    fn pagetypeinfo_counts_per_type() {
        let t = "Page block order: 9\nPages per block:  512\n\n\
Free pages count per migrate type at order       0      1      2      3      4      5      6      7      8      9     10 \n\
Node    0, zone    DMA32, type    Unmovable      1      0      0      0      0      0      0      0      0      0      0 \n\
Node    0, zone    DMA32, type      Movable      2      2      4      2      5      4      3      3      4      2    752 \n\
Node    0, zone   Normal, type      Movable      0      0      0      0      0      0      0      0      0      1      1 \n\
\nNumber of blocks type     Unmovable      Movable  Reclaimable \nNode 0, zone    DMA32            1         1526            0 \n";
        let m = parse_pagetypeinfo(t);
        assert_eq!(m["Movable"], 2 + 752 * 2 + 1 + 2);
        assert_eq!(m["Unmovable"], 0);
        assert_eq!(m.len(), 2, "{m:?}");
    }

    #[test]
    fn block_choice_is_deterministic_and_sized() {
        let a = choose_blocks(1000, 0.9, 42);
        assert_eq!(a.len(), 900);
        assert_eq!(a, choose_blocks(1000, 0.9, 42));
        assert_ne!(choose_blocks(1000, 0.5, 1), choose_blocks(1000, 0.5, 2));
        assert!(a.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(choose_blocks(10, 0.0, 1).len(), 0);
        assert_eq!(choose_blocks(10, 1.0, 1).len(), 10);
    }

    #[test]
    fn bad_share_is_refused() {
        assert!(Fragmenter::start(1.5, 0, None).is_err());
        assert!(Fragmenter::start(f64::NAN, 0, None).is_err());
    }
}
