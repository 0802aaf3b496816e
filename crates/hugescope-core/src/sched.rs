//! Concurrent processes scheduled by their own virtual time.
//!
//! Ingens' fairness result (OSDI'16 §4 "Fairness", Fig. 5) is about finish
//! times: three identical processes started together under Linux finish at
//! very different times, because the one khugepaged scans first gets the huge
//! pages and runs faster. A static interleaving (`trace::merge`, fixed
//! slices) cannot show that: every process advances at the same rate of
//! accesses whatever its translation costs. Here each input trace is a
//! process with its own virtual time (`os::clock`: its accesses or cycles plus
//! the OS time on its own critical path), and the scheduler always runs the
//! runnable process that is furthest behind.
//!
//! The approximation (docs/assumptions.md, "Concurrent runs"): the processes
//! run on separate cores (each input gets its own cpu ids, so private TLBs),
//! and instead of advancing together they take turns of one quantum of their
//! own time. The scheduler picks the process with the lowest virtual time
//! (ties: the lowest pid) and runs it for one quantum or until its trace ends,
//! so no process is ever more than about one quantum (plus one access and the
//! OS work it triggered) ahead of a runnable one. Daemons are shared: while a
//! process runs, `Kernel::now()` is its time, and a timer fires when the
//! running process's time passes the timer's due time.
//!
//! An input that already holds several processes (a merged trace) is one
//! scheduling unit: its pids share its clock and its records keep their
//! recorded order, as in a single-trace run.
//!
//! Input `i` gets the pids after those of inputs `0..i` and its own cpus, with
//! its populate and free markers rewritten to the new pids (the relabelling of
//! `trace::merge::combine`, shared). Markers land at their exact index within
//! the process's own stream. Everything is deterministic: the choice depends
//! only on the processes' times and pids.

use crate::hw::{PageTable, SegmentUnit, Walker};
use crate::os::kernel::Kernel;
use crate::sim::Simulator;
use crate::trace::merge::Input;
use crate::trace::{Access, AccessSink};
use crate::{Error, Result};
use serde::Serialize;

/// Default quantum: 1 ms of the running process's virtual time, the order of
/// a Linux scheduler slice (CFS' minimum granularity is 0.75 ms), short
/// against the daemons' periods (khugepaged wakes every 10 s).
pub const DEFAULT_QUANTUM_MS: f64 = 1.0;
/// Accepted quanta: from 1 µs (a few thousand accesses) to 1 s.
pub const MIN_QUANTUM_MS: f64 = 1e-3;
pub const MAX_QUANTUM_MS: f64 = 1e3;

/// How a concurrent run is scheduled.
#[derive(Clone, Debug, Serialize)]
pub struct SchedOptions {
    /// Virtual time a process runs before the scheduler picks again, in ms.
    pub quantum_ms: f64,
}

impl Default for SchedOptions {
    fn default() -> Self {
        SchedOptions { quantum_ms: DEFAULT_QUANTUM_MS }
    }
}

impl SchedOptions {
    /// Refuse a quantum outside `[MIN_QUANTUM_MS, MAX_QUANTUM_MS]` (0 would
    /// switch after every access, a NaN would never switch).
    pub fn check(&self) -> Result<()> {
        let q = self.quantum_ms;
        if q.is_finite() && (MIN_QUANTUM_MS..=MAX_QUANTUM_MS).contains(&q) {
            Ok(())
        } else {
            Err(Error::input(format!(
                "quantum_ms={}: must be a number of milliseconds in [{MIN_QUANTUM_MS}, {MAX_QUANTUM_MS}]",
                crate::units::fmt_num(q)
            )))
        }
    }
}

/// What one input's process(es) did in a concurrent run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Finish {
    /// The input's virtual time when its trace ended (after its last markers).
    pub finish_seconds: f64,
    /// Accesses per process of the input, by its own pid (0 = its first).
    pub accesses: Vec<u64>,
}

/// What the scheduler needs of the page table: a clock per process context
/// (the kernel's, `os::clock`; tests use a recording one).
pub trait ProcessClock {
    /// Virtual seconds of process context `ctx`, running or not.
    fn seconds_of(&self, ctx: usize) -> f64;
    /// Make `ctx` the running context (once per quantum).
    fn switch_process(&mut self, ctx: usize);
    /// Virtual seconds of the running context.
    fn now(&self) -> f64;
    /// Context `ctx` starts `seconds` late (before it first runs).
    fn start_at(&mut self, _ctx: usize, _seconds: f64) {}
    /// The processes `pids` finished their traces and exit (page daemon:
    /// `exit_frees` frees their memory; nothing by default).
    fn exited(&mut self, _pids: std::ops::Range<u16>) {}
}

impl ProcessClock for Kernel {
    fn seconds_of(&self, ctx: usize) -> f64 {
        self.clock().seconds_of(ctx)
    }
    fn switch_process(&mut self, ctx: usize) {
        Kernel::switch_process(self, ctx)
    }
    #[inline]
    fn now(&self) -> f64 {
        self.clock().now()
    }
    fn start_at(&mut self, ctx: usize, seconds: f64) {
        self.start_process_at(ctx, seconds);
    }
    fn exited(&mut self, pids: std::ops::Range<u16>) {
        for pid in pids {
            self.exit_process(pid);
        }
    }
}

/// `run` with staggered starts: input `i` starts at `start_s[i]` seconds
/// (missing entries: 0), so a stream of processes can start one after
/// another (Navarro §6.5's short-lived processes). Its time begins there and
/// the scheduler reaches it once the others have caught up.
pub fn run_staggered<P: PageTable + ProcessClock, W: Walker, S: SegmentUnit>(
    sim: &mut Simulator<P, W, S>,
    inputs: &mut [Input],
    opts: &SchedOptions,
    start_s: &[f64],
    after_chunk: impl FnMut(&P) -> Result<()>,
) -> Result<Vec<Finish>> {
    check_starts(start_s, inputs.len())?;
    for (i, &s) in start_s.iter().enumerate().filter(|(_, s)| **s > 0.0) {
        sim.pt.start_at(i, s);
    }
    run(sim, inputs, opts, after_chunk)
}

/// Refuse start times that are not seconds in [0, MAX_DURATION_S], or more
/// of them than inputs.
pub fn check_starts(start_s: &[f64], inputs: usize) -> Result<()> {
    if start_s.len() > inputs {
        return Err(Error::input(format!("start_s: {} start times for {inputs} inputs", start_s.len())));
    }
    let max = crate::limits::MAX_DURATION_S;
    match start_s.iter().enumerate().find(|(_, s)| !(s.is_finite() && (0.0..=max).contains(*s))) {
        Some((i, s)) => Err(Error::input(format!(
            "start_s[{i}]={}: must be a number of seconds in [0, {}]",
            crate::units::fmt_num(*s),
            crate::units::fmt_num(max)
        ))),
        None => Ok(()),
    }
}

/// Run `inputs` (combined by `trace::merge::combine`, not yet read) as
/// concurrent processes through `sim`: input `i` is the kernel's process
/// context `i`. `after_chunk` is called after each chunk is read (the
/// model-memory check of inferred mappings); cancellation is polled per chunk
/// by the reader. Returns each input's finish.
pub fn run<P: PageTable + ProcessClock, W: Walker, S: SegmentUnit>(
    sim: &mut Simulator<P, W, S>,
    inputs: &mut [Input],
    opts: &SchedOptions,
    mut after_chunk: impl FnMut(&P) -> Result<()>,
) -> Result<Vec<Finish>> {
    opts.check()?;
    let quantum = opts.quantum_ms * 1e-3;
    let mut out: Vec<Finish> =
        inputs.iter().map(|i| Finish { finish_seconds: 0.0, accesses: vec![0; i.placement.processes as usize] }).collect();
    loop {
        // The runnable process furthest behind; ties go to the lower pid
        // (inputs are in pid order), so the choice is deterministic.
        let mut next: Option<(f64, usize)> = None;
        for (i, input) in inputs.iter().enumerate() {
            let t = sim.pt.seconds_of(i);
            if !input.done && next.is_none_or(|(best, _)| t < best) {
                next = Some((t, i));
            }
        }
        let Some((start, i)) = next else { break };
        sim.pt.switch_process(i);
        let until = start + quantum;
        let (input, fin) = (&mut inputs[i], &mut out[i]);
        'quantum: loop {
            if input.pos >= input.buf.len() {
                if !input.fill()? {
                    // Markers after the last record (a final free) are the
                    // process's own last work: its finish comes after them.
                    input.markers_up_to(u64::MAX, |l| sim.progress(l));
                    input.done = true;
                    fin.finish_seconds = sim.pt.now();
                    // A finished process exits (its memory is freed only
                    // under the page daemon's `exit_frees`).
                    let first = input.placement.pid_offset;
                    sim.pt.exited(first..first + input.placement.processes as u16);
                    break;
                }
                after_chunk(&sim.pt)?;
            }
            while input.pos < input.buf.len() {
                let index = input.index;
                input.markers_up_to(index, |l| sim.progress(l));
                let a = Access::unpack(input.buf[input.pos]);
                match fin.accesses.get_mut(a.pid as usize) {
                    Some(n) => *n += 1,
                    // A record naming a pid beyond the footer's count
                    // (combine sized the input from it): count it anyway.
                    None => {
                        fin.accesses.resize(a.pid as usize + 1, 0);
                        fin.accesses[a.pid as usize] = 1;
                    }
                }
                sim.step(input.placement.access(a));
                input.pos += 1;
                input.index += 1;
                // Checked per access (one division): a quantum ends on the
                // access that reaches it, so skew stays within one access.
                if sim.pt.now() >= until {
                    break 'quantum;
                }
            }
        }
    }
    Ok(out)
}
