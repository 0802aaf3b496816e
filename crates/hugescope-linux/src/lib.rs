//! hugescope-linux: the real-Linux side of hugescope.
//!
//! * `thp`: the system THP configuration;
//! * `smaps` and `pagemap`: where a process's huge pages are;
//! * `collapse`: applying a promotion plan with `MADV_COLLAPSE` / `process_madvise`;
//! * `fragment`: fragmenting physical memory the way the PCC paper did;
//! * `launch`: running a command with ASLR off, applying a plan over time, and
//!   measuring time, peak RSS and huge-page coverage;
//! * `sweep`: applying a launched program's entry (or `--plan all`) region by
//!   region as the program populates its memory;
//! * `settings`: every kernel setting hugescope changes, recorded in a state file
//!   and restored (also by the next invocation after a kill);
//! * `pidfd`: a handle on a process that survives pid reuse (rustix);
//! * `lifetime`: stopping on signals, and children that die with hugescope;
//! * `native`: running a built-in workload in this process with a plan applied at
//!   its progress points, measured the same way;
//! * `daemon`: a userspace huge-page daemon that runs a policy on live processes;
//! * `microbench`, `tlb_reach`, `cpu_tlbs`: the calibration's page-walk and TLB-reach
//!   microbenchmarks and the CPUID registers of this CPU.
//!
//! Everything here talks to the running kernel; nothing is simulated. See
//! `docs/linux.md` for requirements and how coverage is measured.

pub mod args;
pub mod collapse;
pub mod cpu_tlbs;
pub mod daemon;
pub mod error;
pub mod fragment;
pub mod launch;
pub mod lifetime;
pub mod microbench;
pub mod native;
pub mod pagemap;
pub mod pidfd;
pub mod settings;
pub mod site_watch;
pub mod smaps;
pub mod sweep;
pub mod thp;
pub mod tlb_reach;

pub use collapse::{apply, apply_with, Applier, ApplyOptions, CollapseOutcome, Status, Target};
pub use error::{Error, Result};
pub use fragment::{FragmentReport, Fragmenter};
pub use launch::{launch, repeat, LaunchOptions, RepeatSummary, RunRecord};
pub use smaps::{huge_bytes_in, vmas, Pid, Vma};
pub use thp::ThpState;

/// True when this process runs with effective uid 0.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}
