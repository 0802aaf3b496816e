//! hugescope-memhold: a tiny target process for the real-Linux tests and for trying
//! plans by hand. It maps anonymous memory at a fixed 2 MiB-aligned address, touches
//! every 4 KiB page (so the memory is resident in base pages), optionally marks a
//! sub-range MADV_NOHUGEPAGE, prints "ready", and then waits for a line on stdin or
//! exits after a delay.
//!
//! usage: hugescope-memhold --addr 0x7e0000000000 --size 16M
//!                          [--nohuge OFFSET:LEN] [--hugepage] [--exit-after SECONDS]

use hugescope_core::units::parse_size;
use std::io::{BufRead, Write};

const PMD: u64 = 2 << 20;

struct Args {
    addr: u64,
    size: u64,
    nohuge: Option<(u64, u64)>,
    hugepage: bool,
    exit_after: Option<f64>,
}

fn parse_num(s: &str, what: &str) -> Result<u64, String> {
    let t = s.trim();
    if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).map_err(|_| format!("{what}: '{s}' is not a hex number"))
    } else {
        parse_size(t).map_err(|e| format!("{what}: {e}"))
    }
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args { addr: 0, size: 0, nohuge: None, hugepage: false, exit_after: None };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{k} needs a value"));
        match k.as_str() {
            "--addr" => a.addr = parse_num(&val()?, "--addr")?,
            "--size" => a.size = parse_num(&val()?, "--size")?,
            "--nohuge" => {
                let v = val()?;
                let (o, l) = v.split_once(':').ok_or("--nohuge wants OFFSET:LEN")?;
                a.nohuge = Some((parse_num(o, "--nohuge offset")?, parse_num(l, "--nohuge length")?));
            }
            "--hugepage" => a.hugepage = true,
            "--exit-after" => {
                let v = val()?;
                let t: f64 = v.parse().map_err(|_| format!("--exit-after: '{v}' is not a number of seconds"))?;
                if !(t.is_finite() && t >= 0.0) {
                    return Err(format!("--exit-after: '{v}' must be a non-negative number"));
                }
                a.exit_after = Some(t);
            }
            "-h" | "--help" => {
                return Err("usage: hugescope-memhold --addr ADDR --size SIZE [--nohuge OFFSET:LEN] [--hugepage] [--exit-after SECONDS]".into())
            }
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    if a.addr == 0 || !a.addr.is_multiple_of(PMD) {
        return Err(format!("--addr {:#x} must be a non-zero multiple of 2 MiB", a.addr));
    }
    if a.size == 0 || !a.size.is_multiple_of(4096) {
        return Err(format!("--size {} must be a non-zero multiple of 4 KiB", a.size));
    }
    if let Some((o, l)) = a.nohuge {
        if o % 4096 != 0 || l % 4096 != 0 || o.checked_add(l).is_none_or(|e| e > a.size) {
            return Err(format!("--nohuge {o:#x}:{l:#x} must be page-aligned and inside the mapping"));
        }
    }
    Ok(a)
}

fn run(a: &Args) -> Result<(), String> {
    // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping; failure is checked.
    let p = unsafe {
        libc::mmap(a.addr as *mut libc::c_void, a.size as usize, libc::PROT_READ | libc::PROT_WRITE,
                   libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE, -1, 0)
    };
    if p == libc::MAP_FAILED {
        return Err(format!("mmap at {:#x} size {:#x}: {}", a.addr, a.size, std::io::Error::last_os_error()));
    }
    if p as u64 != a.addr {
        // Kernels before 4.17 treat the flag as a hint and may place it elsewhere.
        return Err(format!("mmap placed the mapping at {:#x}, not {:#x}", p as u64, a.addr));
    }
    if a.hugepage {
        // SAFETY: advising our own mapping.
        unsafe { libc::madvise(p, a.size as usize, libc::MADV_HUGEPAGE) };
    }
    if let Some((o, l)) = a.nohuge {
        // SAFETY: advising a sub-range of our own mapping, checked to be inside it.
        let r = unsafe { libc::madvise((a.addr + o) as *mut libc::c_void, l as usize, libc::MADV_NOHUGEPAGE) };
        if r != 0 {
            return Err(format!("madvise(MADV_NOHUGEPAGE): {}", std::io::Error::last_os_error()));
        }
    }
    // Touch every page so it is resident (in base pages unless THP faults are enabled here).
    let mut off = 0u64;
    while off < a.size {
        // SAFETY: inside our writable mapping.
        unsafe { std::ptr::write_volatile((a.addr + off) as *mut u8, (off / 4096) as u8 | 1) };
        off += 4096;
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready").map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())?;
    drop(out);
    match a.exit_after {
        Some(t) => std::thread::sleep(std::time::Duration::from_secs_f64(t)),
        None => {
            let mut line = String::new();
            let _ = std::io::stdin().lock().read_line(&mut line);
        }
    }
    Ok(())
}

fn main() {
    // A test target must never outlive whoever started it (a killed test run).
    hugescope_linux::lifetime::die_with_parent_from_env(libc::SIGKILL);
    let code = match parse_args().and_then(|a| run(&a)) {
        Ok(()) => 0,
        Err(msg) => {
            eprintln!("hugescope-memhold: {msg}");
            2
        }
    };
    std::process::exit(code);
}
