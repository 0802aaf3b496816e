//! Helpers shared by the real-kernel tests: skip checks and a memhold child.
#![allow(dead_code)]

use hugescope_core::plan::{PlanEntry, When};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};

pub const MIB: u64 = 1 << 20;
pub const PMD: u64 = 2 * MIB;

/// Why THP tests cannot run here, if they cannot.
pub fn thp_skip_reason() -> Option<String> {
    match hugescope_linux::ThpState::read() {
        Err(e) => Some(format!("no THP on this kernel: {e}")),
        Ok(s) if s.is_never() => Some("transparent_hugepage/enabled is 'never'".into()),
        Ok(s) if s.hpage_pmd_size != PMD => Some(format!("PMD size is {} bytes, not 2 MiB", s.hpage_pmd_size)),
        Ok(_) => None,
    }
}

/// Why tests on another process (process_madvise needs CAP_SYS_NICE) cannot run.
pub fn root_skip_reason() -> Option<String> {
    if !hugescope_linux::is_root() {
        return Some("not root: process_madvise(MADV_COLLAPSE) on another process needs CAP_SYS_NICE".into());
    }
    thp_skip_reason()
}

/// Print the reason and return true when the test must be skipped.
pub fn skip(test: &str, reason: Option<String>) -> bool {
    match reason {
        Some(r) => {
            eprintln!("SKIP {test}: {r}");
            true
        }
        None => false,
    }
}

pub struct Held {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
}

impl Held {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }
    /// Tell the child to exit and reap it.
    pub fn finish(mut self) {
        if let Some(mut s) = self.stdin.take() {
            let _ = writeln!(s);
        }
        let _ = self.child.wait();
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(mut s) = self.stdin.take() {
            let _ = writeln!(s);
        }
        let _ = self.child.wait();
    }
}

/// Start hugescope-memhold with `args` and wait for its "ready".
pub fn memhold(args: &[&str]) -> Held {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hugescope-memhold"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn hugescope-memhold");
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready", "memhold did not get ready (args {args:?})");
    let stdin = child.stdin.take();
    Held { child, stdin }
}

pub fn entry(start: u64, length: u64, when: When) -> PlanEntry {
    PlanEntry { start, length, page_size: PMD, when, pid: 0, note: None }
}

/// The smaps lines of the VMAs overlapping a range, for the test log.
pub fn show_smaps(pid: i32, start: u64, len: u64) -> String {
    let v = hugescope_linux::vmas(pid).unwrap();
    hugescope_linux::smaps::overlapping(&v, start, len)
        .iter()
        .map(|v| format!("{:#x}-{:#x} Rss {} kB AnonHugePages {} kB THPeligible {:?} VmFlags {}",
            v.start, v.end, v.rss >> 10, v.anon_huge_pages >> 10, v.thp_eligible, v.vm_flags.join(" ")))
        .collect::<Vec<_>>()
        .join("\n")
}
