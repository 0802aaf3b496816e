//! Combine traces into one multi-process trace, for the PCC paper's
//! multiprocess experiments (§5.3, Fig. 9: PageRank + mcf, PageRank + SSSP run
//! together and share one huge-page budget).
//!
//! The inputs are interleaved round robin in fixed-size slices (`slice`
//! accesses of the first, then of the second, ...; an input that ends drops out
//! and the others continue), which stands for concurrent processes making
//! progress at the same rate. Input `i` gets the pids after those of inputs
//! `0..i` (two single-process traces become pids 0 and 1); its regions keep
//! their addresses under the new pid, and its release markers (`free:PID:...`)
//! are rewritten to the new pid so the OS model frees the right address space.
//! Populate markers (`populate:PID:...`) are rewritten the same way. `combine`
//! and `Placement` hold this relabelling; the scheduler (`crate::sched`)
//! uses them too.
//! By default each input also gets its own cpus (cpu ids shifted past the
//! previous inputs'), as when the processes are pinned to different cores: each
//! keeps private TLBs (and a private PCC), and per-cpu walk counts of the
//! result separate the processes.

use super::hst::{HstReader, HstWriter, Layout, Marker};
use super::{free_label, parse_free_label, parse_populate_label, populate_label, Access, Region, TraceHeader, MAX_CPUS, MAX_PIDS};
use crate::{Error, Result};
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct MergeOptions {
    /// Accesses taken from one input before switching to the next.
    pub slice: u64,
    /// Give each input its own cpu ids (default); otherwise keep them, so the
    /// processes share cores (and TLBs) the way time-sharing would.
    pub separate_cpus: bool,
}

impl Default for MergeOptions {
    fn default() -> Self {
        MergeOptions { slice: 1 << 16, separate_cpus: true }
    }
}

/// What was written.
#[derive(Clone, Debug, Serialize)]
pub struct MergeReport {
    pub path: String,
    pub header: TraceHeader,
    pub summary: super::hst::TraceSummary,
}

/// Where one input lands among the combined processes and cpus: the pids
/// after those of the inputs before it, and (by default) its own cpu ids.
/// Shared by `merge` (a static interleaving written to a file) and the
/// scheduler (`crate::sched`, processes interleaved by their own time).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    pub pid_offset: u16,
    /// Processes of the input (pids `pid_offset..pid_offset + processes`).
    pub processes: u32,
    pub cpu_offset: u16,
    pub cpus: u32,
}

impl Placement {
    /// An access of the input as the combined run sees it.
    #[inline]
    pub fn access(&self, a: Access) -> Access {
        Access { pid: a.pid + self.pid_offset, cpu: a.cpu + self.cpu_offset, ..a }
    }

    /// A progress marker of the input under its new pids: populate and free
    /// markers name a pid and are rewritten (so the OS model acts on the
    /// right address space); other markers keep their label.
    pub fn label(&self, label: &str) -> String {
        if let Some((pid, start, len)) = parse_free_label(label) {
            return free_label(pid + self.pid_offset, start, len);
        }
        if let Some((pid, start, len)) = parse_populate_label(label) {
            return populate_label(pid + self.pid_offset, start, len);
        }
        // page contents: a declaration names a pid too (os/content.rs).
        if let Some(d) = super::parse_content_label(label) {
            return super::content_label(&super::ContentDecl { pid: d.pid + self.pid_offset, ..d });
        }
        label.to_string()
    }
}

/// One input trace being read into a combined run: its reader, its place,
/// its markers (already relabelled) and how far it has been read.
pub struct Input {
    pub path: String,
    pub reader: HstReader,
    pub placement: Placement,
    pub buf: Vec<u64>,
    pub pos: usize,
    /// Records of this input consumed so far.
    pub index: u64,
    /// Markers with their labels under the combined pids, in index order.
    pub markers: Vec<Marker>,
    pub next_marker: usize,
    pub done: bool,
}

impl Input {
    /// Open `path`; `verb` says what it is opened for in the error about a
    /// trace without footer (whose processes and cpus are not known).
    pub fn open(path: &str, verb: &str) -> Result<Input> {
        let reader = HstReader::open(path)?;
        if reader.summary().is_none() {
            return Err(Error::input(format!("{path}: no footer (truncated trace); cannot {verb} it")));
        }
        Ok(Input {
            path: path.to_string(),
            markers: reader.markers().to_vec(),
            reader,
            placement: Placement::default(),
            buf: Vec::new(),
            pos: 0,
            index: 0,
            next_marker: 0,
            done: false,
        })
    }

    /// Accesses in the input (from its footer).
    pub fn accesses(&self) -> u64 {
        self.reader.summary().map_or(0, |s| s.accesses)
    }

    /// Refill the buffer; false at the end of the input.
    pub fn fill(&mut self) -> Result<bool> {
        while self.pos >= self.buf.len() {
            match self.reader.next_chunk()? {
                Some(c) => {
                    self.buf.clear();
                    self.buf.extend_from_slice(c);
                    self.pos = 0;
                }
                None => return Ok(false),
            }
        }
        Ok(true)
    }

    /// Hand `f` each marker that sits at or before record `index`, in order
    /// (a marker at index k comes after k records, before record k).
    #[inline]
    pub fn markers_up_to(&mut self, index: u64, mut f: impl FnMut(&str)) {
        while self.next_marker < self.markers.len() && self.markers[self.next_marker].index <= index {
            f(&self.markers[self.next_marker].label);
            self.next_marker += 1;
        }
    }
}

/// The header of the combined run of `inputs`, named `kind(workloads)`, and
/// each input's placement (set on it; markers relabelled). Input `i` gets the
/// pids after those of inputs `0..i`; with `separate_cpus` also the cpus after
/// theirs. Regions keep their addresses under the new pid; the nominal rate is
/// the sum of the inputs' (None if one has none). The header's `inputs`
/// parameter describes each input.
pub fn combine(inputs: &mut [Input], separate_cpus: bool, kind: &str) -> Result<TraceHeader> {
    let mut header = TraceHeader::new(String::new());
    header.processes = 0;
    header.cpus = 0;
    let mut names = Vec::new();
    let mut described = Vec::new();
    let mut rate = Some(0.0);
    let (mut pid_offset, mut cpu_offset) = (0u32, 0u32);
    for input in inputs.iter_mut() {
        let path = &input.path;
        let h = input.reader.header().clone();
        let summary = input.reader.summary().cloned().expect("Input::open checked the footer");
        // Processes actually present: the header's count, or more if records or
        // regions name higher pids.
        let procs = (h.processes.max(1))
            .max(summary.per_pid.len() as u32)
            .max(h.regions.iter().map(|r| r.pid as u32 + 1).max().unwrap_or(0));
        let cpus = h.cpus.max(1).max(summary.per_cpu.len() as u32);
        if pid_offset + procs > MAX_PIDS {
            return Err(Error::input(format!("{path}: the combined run would need more than {MAX_PIDS} processes")));
        }
        let this_cpu_offset = if separate_cpus { cpu_offset } else { 0 };
        if this_cpu_offset + cpus > MAX_CPUS {
            return Err(Error::input(format!("{path}: the combined run would need more than {MAX_CPUS} cpus")));
        }
        for r in &h.regions {
            header.regions.push(Region { pid: r.pid + pid_offset as u16, ..r.clone() });
        }
        for p in 0..procs as usize {
            names.push(match h.process_names.get(p) {
                Some(n) => n.clone(),
                None if procs == 1 => h.workload.clone(),
                None => format!("{}#{p}", h.workload),
            });
        }
        rate = match (rate, h.accesses_per_second) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        described.push(serde_json::json!({
            "path": path, "workload": h.workload, "params": h.params, "accesses": summary.accesses,
            "pid_offset": pid_offset, "processes": procs, "cpu_offset": this_cpu_offset, "cpus": cpus,
        }));
        header.cpus = if separate_cpus { header.cpus + cpus } else { header.cpus.max(cpus) };
        let placement = Placement { pid_offset: pid_offset as u16, processes: procs, cpu_offset: this_cpu_offset as u16, cpus };
        for m in input.markers.iter_mut() {
            m.label = placement.label(&m.label);
        }
        input.placement = placement;
        pid_offset += procs;
        cpu_offset += cpus;
    }
    header.workload = format!(
        "{kind}({})",
        inputs.iter().map(|s| s.reader.header().workload.clone()).collect::<Vec<_>>().join(",")
    );
    header.processes = pid_offset;
    header.process_names = names;
    header.accesses_per_second = rate;
    header.params.insert("inputs".into(), serde_json::Value::Array(described));
    Ok(header)
}

/// Merge the traces at `inputs` (at least two) into `out`.
pub fn merge(inputs: &[&str], out: &str, opts: &MergeOptions) -> Result<MergeReport> {
    if inputs.len() < 2 {
        return Err(Error::input("merging needs at least two traces"));
    }
    if opts.slice == 0 {
        return Err(Error::input("merge slice must be at least one access"));
    }
    let mut sources = inputs.iter().map(|p| Input::open(p, "merge")).collect::<Result<Vec<_>>>()?;
    let mut header = combine(&mut sources, opts.separate_cpus, "merge")?;
    header.params.insert("merge_slice".into(), serde_json::json!(opts.slice));
    header.params.insert("separate_cpus".into(), serde_json::json!(opts.separate_cpus));

    let input_paths: Vec<&std::path::Path> = inputs.iter().map(std::path::Path::new).collect();
    let mut w = HstWriter::create_checked(out, &header, Layout::Planes, &input_paths)?;
    loop {
        let mut active = false;
        for s in sources.iter_mut() {
            if s.done {
                continue;
            }
            let mut left = opts.slice;
            while left > 0 {
                if !s.fill()? {
                    // Markers at the end of this input follow its last record.
                    s.markers_up_to(u64::MAX, |l| w.mark(l));
                    s.done = true;
                    break;
                }
                let take = ((s.buf.len() - s.pos) as u64).min(left) as usize;
                for k in 0..take {
                    let idx = s.index;
                    s.markers_up_to(idx, |l| w.mark(l));
                    w.write(s.placement.access(Access::unpack(s.buf[s.pos + k])))?;
                    s.index += 1;
                }
                s.pos += take;
                left -= take as u64;
            }
            active |= !s.done;
        }
        if !active {
            break;
        }
    }
    let summary = w.finish()?;
    Ok(MergeReport { path: out.to_string(), header, summary })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::hst::read_all;
    use crate::trace::AccessSink;

    fn write(path: &std::path::Path, name: &str, base: u64, n: u64, free_at: u64) {
        let mut h = TraceHeader::new(name);
        h.regions.push(Region::new("data", base, 1 << 21));
        h.accesses_per_second = Some(100.0);
        let mut w = HstWriter::create(path, &h).unwrap().with_chunk_records(3);
        w.mark("start");
        for i in 0..n {
            if i == free_at {
                w.free(0, base, 0x1000);
            }
            w.write(Access::read(base + i * 8)).unwrap();
        }
        w.mark("end");
        w.finish().unwrap();
    }

    #[test]
    fn round_robin_slices_pids_markers_and_regions() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, o) = (dir.path().join("a.hst"), dir.path().join("b.hst"), dir.path().join("ab.hst"));
        write(&a, "bfs", 0x1000_0000, 5, 3);
        write(&b, "mcf", 0x2000_0000, 9, 1);
        let opts = MergeOptions { slice: 2, separate_cpus: true };
        let rep = merge(&[a.to_str().unwrap(), b.to_str().unwrap()], o.to_str().unwrap(), &opts).unwrap();
        let (h, acc) = read_all(&o).unwrap();
        assert_eq!(h, rep.header);
        assert_eq!(h.processes, 2);
        assert_eq!(h.cpus, 2);
        assert_eq!(h.workload, "merge(bfs,mcf)");
        assert_eq!(h.process_names, vec!["bfs".to_string(), "mcf".to_string()]);
        assert_eq!(h.accesses_per_second, Some(200.0));
        assert_eq!(h.regions.iter().map(|r| (r.pid, r.base)).collect::<Vec<_>>(), vec![(0, 0x1000_0000), (1, 0x2000_0000)]);
        // a0 a1 b0 b1 a2 a3 b2 b3 a4 b4 b5 b6 b7 b8
        let order: Vec<(u16, u16, u64)> = acc.iter().map(|x| (x.pid, x.cpu, x.addr)).collect();
        let (pa, pb) = (|i: u64| (0u16, 0u16, 0x1000_0000 + i * 8), |i: u64| (1u16, 1u16, 0x2000_0000 + i * 8));
        let want = vec![pa(0), pa(1), pb(0), pb(1), pa(2), pa(3), pb(2), pb(3), pa(4), pb(4), pb(5), pb(6), pb(7), pb(8)];
        assert_eq!(order, want);
        let s = rep.summary;
        let markers: Vec<(u64, &str)> = s.markers.iter().map(|m| (m.index, m.label.as_str())).collect();
        let fb = free_label(1, 0x2000_0000, 0x1000);
        let fa = free_label(0, 0x1000_0000, 0x1000);
        assert_eq!(
            markers,
            vec![(0, "start"), (2, "start"), (3, fb.as_str()), (5, fa.as_str()), (9, "end"), (14, "end")]
        );
        assert_eq!(s.per_pid, vec![5, 9]);
    }

    #[test]
    fn placement_rewrites_pid_markers_only() {
        let pl = Placement { pid_offset: 2, processes: 1, cpu_offset: 3, cpus: 1 };
        assert_eq!(pl.label(&free_label(0, 0x1000, 0x2000)), free_label(2, 0x1000, 0x2000));
        assert_eq!(pl.label(&populate_label(0, 0x1000, 0x2000)), populate_label(2, 0x1000, 0x2000));
        let d = super::super::ContentDecl { pid: 0, start: 0x1000, len: 0x2000, stream: 3, first: 9 };
        assert_eq!(pl.label(&super::super::content_label(&d)), super::super::content_label(&super::super::ContentDecl { pid: 2, ..d }));
        assert_eq!(pl.label("phase:bfs"), "phase:bfs");
        let a = pl.access(Access::read(0x1234));
        assert_eq!((a.pid, a.cpu, a.addr), (2, 3, 0x1234));
    }

    #[test]
    fn shared_cpus_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, o) = (dir.path().join("a.hst"), dir.path().join("b.hst"), dir.path().join("ab.hst"));
        write(&a, "x", 0x1000_0000, 4, 99);
        write(&b, "y", 0x1000_0000, 4, 99);
        let (a, b, o) = (a.to_str().unwrap(), b.to_str().unwrap(), o.to_str().unwrap());
        let rep = merge(&[a, b], o, &MergeOptions { slice: 100, separate_cpus: false }).unwrap();
        assert_eq!(rep.header.cpus, 1);
        let (_, acc) = read_all(o).unwrap();
        assert!(acc.iter().all(|x| x.cpu == 0));
        assert_eq!(acc.iter().filter(|x| x.pid == 1).count(), 4);
        assert!(merge(&[a], o, &MergeOptions::default()).is_err());
        assert!(merge(&[a, b], o, &MergeOptions { slice: 0, separate_cpus: true }).is_err());
        assert!(merge(&[a, "/nonexistent/t.hst"], o, &MergeOptions::default()).is_err());
    }
}
