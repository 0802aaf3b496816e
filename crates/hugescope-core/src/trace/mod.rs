//! Memory-access streams: the record type every part of hugescope speaks, the
//! trace header, and the `.hst` on-disk format (see `docs/trace-format.md`).

mod encode;
pub mod convert;
pub mod frames;
pub mod hst;
pub mod import;
pub mod merge;
pub mod planes;
pub mod readahead;
pub mod summary;

use serde::{Deserialize, Serialize};

/// Highest virtual address bit a record can hold. x86-64 user space with 4-level
/// paging ends at 2^47, 5-level paging at 2^56; records keep 48 bits, which covers
/// 4-level user space (the paper machines) with one bit to spare.
pub const ADDR_BITS: u32 = 48;
pub const ADDR_MASK: u64 = (1 << ADDR_BITS) - 1;
/// Up to 256 simulated cpus and 128 processes per trace.
pub const MAX_CPUS: u32 = 256;
pub const MAX_PIDS: u32 = 128;

const CPU_SHIFT: u32 = 48;
const PID_SHIFT: u32 = 56;
const WRITE_BIT: u64 = 1 << 63;

/// One data access: a virtual address, whether it writes, which cpu issued it
/// and in which process (address space) it happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Access {
    pub addr: u64,
    pub write: bool,
    pub cpu: u16,
    pub pid: u16,
}

impl Access {
    #[inline]
    pub fn read(addr: u64) -> Self {
        Access { addr, write: false, cpu: 0, pid: 0 }
    }
    #[inline]
    pub fn write(addr: u64) -> Self {
        Access { addr, write: true, cpu: 0, pid: 0 }
    }
    #[inline]
    pub fn on_cpu(mut self, cpu: u16) -> Self {
        self.cpu = cpu;
        self
    }
    #[inline]
    pub fn in_pid(mut self, pid: u16) -> Self {
        self.pid = pid;
        self
    }

    /// Pack into the 64-bit record layout of `.hst` chunks:
    /// bits 0-47 address, 48-55 cpu, 56-62 pid, 63 write.
    /// Callers must have checked the ranges (`validate`); excess bits are masked.
    #[inline]
    pub fn pack(self) -> u64 {
        (self.addr & ADDR_MASK)
            | ((self.cpu as u64 & 0xff) << CPU_SHIFT)
            | ((self.pid as u64 & 0x7f) << PID_SHIFT)
            | if self.write { WRITE_BIT } else { 0 }
    }

    #[inline]
    pub fn unpack(r: u64) -> Self {
        Access {
            addr: r & ADDR_MASK,
            cpu: ((r >> CPU_SHIFT) & 0xff) as u16,
            pid: ((r >> PID_SHIFT) & 0x7f) as u16,
            write: r & WRITE_BIT != 0,
        }
    }

    /// Check that the record fits the packed layout.
    pub fn validate(&self) -> Result<(), String> {
        if self.addr > ADDR_MASK {
            return Err(format!("address {:#x} exceeds {} bits", self.addr, ADDR_BITS));
        }
        if self.cpu as u32 >= MAX_CPUS {
            return Err(format!("cpu id {} exceeds the maximum {}", self.cpu, MAX_CPUS - 1));
        }
        if self.pid as u32 >= MAX_PIDS {
            return Err(format!("pid {} exceeds the maximum {}", self.pid, MAX_PIDS - 1));
        }
        Ok(())
    }
}

/// A named memory region of a workload: a data structure placed at a fixed
/// virtual address (graph offsets, neighbours, property arrays, hash table, ...).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Region {
    pub name: String,
    pub base: u64,
    pub len: u64,
    /// Process the region belongs to (0 for single-process traces).
    #[serde(default)]
    pub pid: u16,
    /// The application asked for huge pages here (madvise(MADV_HUGEPAGE)).
    #[serde(default)]
    pub hugepage_advised: bool,
    /// What kind of memory this is (anonymous heap data, a thread stack, BSS, a
    /// file mapping, code). Direct segments cover only anonymous read-write
    /// memory, and classify the misses outside the segment by this kind
    /// (Basu et al. ISCA'13 §3, Table 5). Absent in a header = `anon`.
    #[serde(default, skip_serializing_if = "RegionKind::is_anon")]
    pub kind: RegionKind,
    /// The allocation asked to stay out of the primary region (the opt-out flag
    /// of direct segments' default placement, ISCA'13 §4.1). Paged, always.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub segment_opt_out: bool,
    /// Where a traced program allocated this region's memory (issue #38;
    /// `trace/import/sites.rs`). Absent for every other region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<Box<AllocSite>>,
}

/// The allocation site of a region of a traced program: the allocator call,
/// its call path and the key a plan names it by (`trace/import/sites.rs`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocSite {
    /// malloc, calloc, realloc, posix_memalign, aligned_alloc, memalign or mmap.
    pub call: String,
    /// Bytes asked for (summed over `count` allocations).
    pub size: u64,
    /// The call path, innermost first: "function file:line" (inlined calls
    /// as frames of their own), "function+0xOFF" without line tables.
    pub frames: Vec<String>,
    /// The frames in the program's own executable, up to `main`, joined by
    /// " < ": what a plan entry's `site` names.
    pub key: String,
    /// Allocations of this site the region holds.
    pub count: u32,
    /// Keys of other sites that allocated some of the same pages (memory
    /// freed and allocated again).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<String>,
}

/// The kind of memory a region holds, as `/proc/PID/maps` would show it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RegionKind {
    /// Anonymous read-write memory: large mallocs, `mmap(MAP_ANONYMOUS)`.
    #[default]
    Anon,
    /// The brk heap.
    Heap,
    /// A thread stack (with its guard page).
    Stack,
    /// Zero-initialised globals that follow a binary's data segment.
    Bss,
    /// Initialised writable data of a binary (`.data`, relro).
    Data,
    /// A mapped file (read-only data, a memory-mapped table or log).
    File,
    /// Executable text.
    Code,
}

impl RegionKind {
    pub const ALL: [RegionKind; 7] =
        [RegionKind::Anon, RegionKind::Heap, RegionKind::Stack, RegionKind::Bss, RegionKind::Data, RegionKind::File, RegionKind::Code];

    pub fn is_anon(&self) -> bool {
        *self == RegionKind::Anon
    }

    pub fn name(self) -> &'static str {
        match self {
            RegionKind::Anon => "anon",
            RegionKind::Heap => "heap",
            RegionKind::Stack => "stack",
            RegionKind::Bss => "bss",
            RegionKind::Data => "data",
            RegionKind::File => "file",
            RegionKind::Code => "code",
        }
    }

    pub fn parse(s: &str) -> Option<RegionKind> {
        RegionKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// Anonymous read-write memory that is not a stack: what the primary region
    /// of a direct segment holds by default (opt-out placement, ISCA'13 §4.1).
    pub fn is_primary_candidate(self) -> bool {
        matches!(self, RegionKind::Anon | RegionKind::Heap)
    }
}

impl Region {
    /// An anonymous region of process 0 with no flags set.
    pub fn new(name: impl Into<String>, base: u64, len: u64) -> Region {
        Region { name: name.into(), base, len, pid: 0, hugepage_advised: false, kind: RegionKind::Anon, segment_opt_out: false, site: None }
    }

    pub fn with_kind(mut self, kind: RegionKind) -> Region {
        self.kind = kind;
        self
    }

    /// Whether a direct segment's primary region holds this region: anonymous
    /// read-write non-stack memory not flagged out (opt-out placement,
    /// ISCA'13 §4.1). The one definition the segment unit, the OS model and
    /// the workloads' shape measurement share.
    pub fn in_primary(&self) -> bool {
        self.kind.is_primary_candidate() && !self.segment_opt_out
    }

    pub fn end(&self) -> u64 {
        self.base + self.len
    }
    pub fn contains(&self, pid: u16, addr: u64) -> bool {
        self.pid == pid && addr >= self.base && addr < self.end()
    }
}

/// Metadata at the start of every trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceHeader {
    /// Workload name ("bfs", "gups", "imported:lackey", ...).
    pub workload: String,
    /// Workload parameters as given (scale, size, seed, ...).
    #[serde(default)]
    pub params: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    pub regions: Vec<Region>,
    /// Number of simulated cpus the accesses are spread over.
    pub cpus: u32,
    /// Number of processes (address spaces) in the trace.
    #[serde(default = "one")]
    pub processes: u32,
    /// Nominal native access rate (accesses per second), used to map the papers'
    /// time intervals (e.g. PCC's 30 s) onto access counts. None if unknown.
    #[serde(default)]
    pub accesses_per_second: Option<f64>,
    /// Names of the processes, indexed by pid (optional).
    #[serde(default)]
    pub process_names: Vec<String>,
}

fn one() -> u32 {
    1
}

impl TraceHeader {
    pub fn new(workload: impl Into<String>) -> Self {
        TraceHeader {
            workload: workload.into(),
            params: Default::default(),
            regions: Vec::new(),
            cpus: 1,
            processes: 1,
            accesses_per_second: None,
            process_names: Vec::new(),
        }
    }

    /// Total bytes of all named regions (the declared footprint).
    pub fn footprint(&self) -> u64 {
        self.regions.iter().map(|r| r.len).sum()
    }

    /// Check every field that sizes something downstream (per-cpu MMUs,
    /// address spaces, VMAs) against the record layout and `crate::limits`.
    /// Returns the offending field and why, for the reader to place in the file.
    pub fn check(&self) -> Result<(), String> {
        use crate::limits::{MAX_HEADER_PARAMS, MAX_NAME_BYTES, MAX_RATE, MAX_REGIONS, MIN_RATE};
        // 0 is read as 1 (old writers); above the layout's maxima no record
        // could name the cpu or process, and per-cpu arrays would be sized by it.
        if self.cpus > MAX_CPUS {
            return Err(format!("cpus={}: exceeds the maximum {MAX_CPUS}", self.cpus));
        }
        if self.processes > MAX_PIDS {
            return Err(format!("processes={}: exceeds the maximum {MAX_PIDS}", self.processes));
        }
        if self.process_names.len() > MAX_PIDS as usize {
            return Err(format!("process_names: {} names exceed the maximum {MAX_PIDS}", self.process_names.len()));
        }
        if let Some(n) = self.process_names.iter().find(|n| n.len() > MAX_NAME_BYTES) {
            return Err(format!("process_names: a name of {} bytes exceeds the maximum {MAX_NAME_BYTES}", n.len()));
        }
        if self.params.len() > MAX_HEADER_PARAMS {
            return Err(format!("params: {} entries exceed the maximum {MAX_HEADER_PARAMS}", self.params.len()));
        }
        if self.regions.len() > MAX_REGIONS {
            return Err(format!("regions: {} regions exceed the maximum {MAX_REGIONS}", self.regions.len()));
        }
        for (i, r) in self.regions.iter().enumerate() {
            if r.pid as u32 >= MAX_PIDS {
                return Err(format!("regions[{i}].pid={}: exceeds the maximum {}", r.pid, MAX_PIDS - 1));
            }
            if r.name.len() > MAX_NAME_BYTES {
                return Err(format!("regions[{i}].name: {} bytes exceed the maximum {MAX_NAME_BYTES}", r.name.len()));
            }
            // Records hold 48-bit addresses: a region past 2^48 (or whose end
            // overflows) can never be accessed and breaks end() arithmetic.
            match r.base.checked_add(r.len) {
                Some(end) if end <= 1 << ADDR_BITS => {}
                _ => {
                    return Err(format!(
                        "regions[{i}] ({}): base={:#x} len={:#x} ends beyond the {ADDR_BITS}-bit address space",
                        r.name, r.base, r.len
                    ))
                }
            }
        }
        if let Some(r) = self.accesses_per_second {
            if !(r.is_finite() && (MIN_RATE..=MAX_RATE).contains(&r)) {
                return Err(format!("accesses_per_second={}: must be between {MIN_RATE} and {MAX_RATE}", crate::units::fmt_num(r)));
            }
        }
        Ok(())
    }

    /// The region holding an address, if any.
    pub fn region_of(&self, pid: u16, addr: u64) -> Option<&Region> {
        self.regions.iter().find(|r| r.contains(pid, addr))
    }
}

/// Anything that consumes an access stream: a trace writer, the simulator, a
/// counter. Workload generators are written against this trait so one generator
/// feeds a file or a simulation directly.
pub trait AccessSink {
    fn access(&mut self, a: Access);

    /// Called by generators at natural progress points (end of a BFS level, a
    /// PageRank iteration, N operations). `label` names the point ("level:3").
    fn progress(&mut self, _label: &str) {}

    /// The program released [start, start + len) of process `pid` to the OS
    /// (munmap, MADV_DONTNEED, an allocator purging freed pages). Recorded in
    /// traces as a marker labelled by `free_label`; the OS model frees the pages.
    fn free(&mut self, pid: u16, start: u64, len: u64) {
        self.progress(&free_label(pid, start, len));
    }

    /// The program initialised [start, start + len) during its setup, before
    /// the traced phase (graph construction, array initialisation). Recorded
    /// as a marker labelled by `populate_label`; the OS model faults those
    /// pages in first, in order, so physical memory is handed out as in the
    /// real run (it decides which data gets the scarce huge pages).
    fn populate(&mut self, pid: u16, start: u64, len: u64) {
        self.progress(&populate_label(pid, start, len));
    }
}

/// Marker label of setup-time population: "populate:PID:START:LEN" (hex).
pub fn populate_label(pid: u16, start: u64, len: u64) -> String {
    format!("populate:{pid}:{start:x}:{len:x}")
}

/// Parse a `populate_label`; None if `label` is not one.
pub fn parse_populate_label(label: &str) -> Option<(u16, u64, u64)> {
    parse_range_label(label.strip_prefix("populate:")?)
}

/// Marker label of a memory release: "free:PID:START:LEN" (hex start and length).
pub fn free_label(pid: u16, start: u64, len: u64) -> String {
    format!("free:{pid}:{start:x}:{len:x}")
}

/// Parse a `free_label`; None if `label` is not a release.
pub fn parse_free_label(label: &str) -> Option<(u16, u64, u64)> {
    parse_range_label(label.strip_prefix("free:")?)
}

/// What a content marker declares: page `j` of [start, start + len) of `pid`
/// holds element `first + j` of content stream `stream` (a workload's data
/// set, e.g. the records two VMs insert in different orders). Pages with equal
/// (stream, element) hold identical bytes, so a same-page merger (KSM,
/// `os/ksm.rs`) may share them; see `os/content.rs` for the content model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContentDecl {
    pub pid: u16,
    pub start: u64,
    pub len: u64,
    pub stream: u64,
    pub first: u64,
}

/// Marker label of a content declaration:
/// "content:PID:START:LEN:STREAM:FIRST" (hex numbers after the pid). A plain
/// progress marker in the `.hst` format (no format change: old traces read
/// unchanged, and older readers see an ordinary label).
pub fn content_label(d: &ContentDecl) -> String {
    format!("content:{}:{:x}:{:x}:{:x}:{:x}", d.pid, d.start, d.len, d.stream, d.first)
}

/// Parse a `content_label`; None if `label` is not one.
pub fn parse_content_label(label: &str) -> Option<ContentDecl> {
    let rest = label.strip_prefix("content:")?;
    let mut it = rest.split(':');
    let pid = it.next()?.parse().ok()?;
    let mut hex = || u64::from_str_radix(it.next()?, 16).ok();
    let (start, len, stream, first) = (hex()?, hex()?, hex()?, hex()?);
    it.next().is_none().then_some(ContentDecl { pid, start, len, stream, first })
}

fn parse_range_label(rest: &str) -> Option<(u16, u64, u64)> {
    let mut it = rest.split(':');
    let pid = it.next()?.parse().ok()?;
    let start = u64::from_str_radix(it.next()?, 16).ok()?;
    let len = u64::from_str_radix(it.next()?, 16).ok()?;
    it.next().is_none().then_some((pid, start, len))
}

/// Counts accesses; handy in tests.
#[derive(Default, Debug)]
pub struct CountingSink {
    pub reads: u64,
    pub writes: u64,
}

impl AccessSink for CountingSink {
    #[inline]
    fn access(&mut self, a: Access) {
        if a.write {
            self.writes += 1;
        } else {
            self.reads += 1;
        }
    }
}

/// Collects accesses into memory; for tests and small traces.
impl AccessSink for Vec<Access> {
    #[inline]
    fn access(&mut self, a: Access) {
        self.push(a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_labels_roundtrip() {
        let l = free_label(3, 0x1000_0020_0000, 0x3000);
        assert_eq!(parse_free_label(&l), Some((3, 0x1000_0020_0000, 0x3000)));
        assert_eq!(parse_free_label("level:3"), None);
        assert_eq!(parse_free_label("free:1:zz:10"), None);
        assert_eq!(parse_free_label("free:1:10:10:10"), None);
        assert_eq!(parse_populate_label(&populate_label(0, 0x2000, 0x1000)), Some((0, 0x2000, 0x1000)));
        assert_eq!(parse_populate_label(&free_label(0, 0x2000, 0x1000)), None);
    }

    #[test]
    fn content_labels_roundtrip() {
        let d = ContentDecl { pid: 2, start: 0x4000_0000, len: 0x20_0000, stream: 7, first: 0x1234 };
        assert_eq!(parse_content_label(&content_label(&d)), Some(d));
        assert_eq!(content_label(&d), "content:2:40000000:200000:7:1234");
        // Other markers are not content declarations, and malformed ones are refused.
        assert_eq!(parse_content_label(&free_label(0, 0x2000, 0x1000)), None);
        assert_eq!(parse_content_label("content:1:10:10:1"), None);
        assert_eq!(parse_content_label("content:1:10:10:1:2:3"), None);
        assert_eq!(parse_content_label("content:x:10:10:1:2"), None);
        assert_eq!(parse_free_label(&content_label(&d)), None);
    }

    #[test]
    fn pack_roundtrip_extremes() {
        for a in [
            Access::read(0),
            Access::write(ADDR_MASK).on_cpu(255).in_pid(127),
            Access::write(0x7fff_ffff_f000).on_cpu(3).in_pid(1),
        ] {
            assert!(a.validate().is_ok());
            assert_eq!(Access::unpack(a.pack()), a);
        }
        assert!(Access::read(1 << 48).validate().is_err());
        assert!(Access::read(0).on_cpu(256).validate().is_err());
        assert!(Access::read(0).in_pid(128).validate().is_err());
    }
}
