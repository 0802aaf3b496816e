//! hugescope-memhold: a tiny target process for the real-Linux tests and for trying
//! plans by hand. It maps anonymous memory at a fixed 2 MiB-aligned address, touches
//! every 4 KiB page (so the memory is resident in base pages), optionally marks a
//! sub-range MADV_NOHUGEPAGE, prints "ready", and then waits for a line on stdin or
//! exits after a delay.
//!
//! With `--hot-addr`/`--hot-size` it maps a second region there that a thread reads
//! page by page for as long as the process lives (the daemon test's known hot
//! region: a VMA of its own, since the access signal is per VMA), and at the end it
//! prints `checksum N` over both regions, so a test can see its data unchanged.
//!
//! usage: hugescope-memhold --addr 0x7e0000000000 --size 16M
//!                          [--nohuge OFFSET:LEN] [--hugepage] [--exit-after SECONDS]
//!                          [--hot-addr ADDR --hot-size SIZE]

use std::io::{BufRead, Write};

const PMD: u64 = 2 << 20;

struct Args {
    addr: u64,
    size: u64,
    nohuge: Option<(u64, u64)>,
    hugepage: bool,
    exit_after: Option<f64>,
    hot: Option<(u64, u64)>,
}

fn parse_args() -> Result<Args, String> {
    use clap::{Arg, ArgAction, Command};
    use hugescope_linux::args::{hex_or_size, seconds};
    let num = |id: &'static str| Arg::new(id).long(id).value_parser(hex_or_size);
    let m = hugescope_linux::args::parse(
        Command::new("hugescope-memhold")
            .about("Map anonymous memory at a fixed address, touch it, print 'ready', wait for a line on stdin")
            .arg(num("addr").required(true).value_name("ADDR").help("2 MiB-aligned address (hex or size)"))
            .arg(num("size").required(true).value_name("SIZE").help("bytes to map, a multiple of 4 KiB"))
            .arg(Arg::new("nohuge").long("nohuge").value_name("OFFSET:LEN").help("mark this sub-range MADV_NOHUGEPAGE")
                .value_parser(|v: &str| -> Result<(u64, u64), String> {
                    let (o, l) = v.split_once(':').ok_or("--nohuge wants OFFSET:LEN")?;
                    Ok((hex_or_size(o).map_err(|e| format!("offset: {e}"))?, hex_or_size(l).map_err(|e| format!("length: {e}"))?))
                }))
            .arg(Arg::new("hugepage").long("hugepage").action(ArgAction::SetTrue).help("MADV_HUGEPAGE the mapping"))
            .arg(Arg::new("exit-after").long("exit-after").value_name("SECONDS").value_parser(seconds)
                .help("exit after this many seconds instead of waiting for stdin"))
            .arg(num("hot-addr").value_name("ADDR").requires("hot-size").help("a second region read by a thread"))
            .arg(num("hot-size").value_name("SIZE").requires("hot-addr").help("length of the hot region")),
    );
    let a = Args {
        addr: *m.get_one::<u64>("addr").expect("required"),
        size: *m.get_one::<u64>("size").expect("required"),
        nohuge: m.get_one::<(u64, u64)>("nohuge").copied(),
        hugepage: m.get_flag("hugepage"),
        exit_after: m.get_one::<f64>("exit-after").copied(),
        hot: None,
    };
    let (hot_addr, hot_size) = (m.get_one::<u64>("hot-addr").copied(), m.get_one::<u64>("hot-size").copied());
    let mut a = a;
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
    match (hot_addr, hot_size) {
        (None, None) => {}
        (Some(h), Some(l)) => {
            if h == 0 || !h.is_multiple_of(PMD) || l == 0 || !l.is_multiple_of(4096) {
                return Err(format!("--hot-addr {h:#x} must be a non-zero multiple of 2 MiB and --hot-size {l} a multiple of 4 KiB"));
            }
            a.hot = Some((h, l));
        }
        _ => return Err("--hot-addr and --hot-size go together".into()),
    }
    Ok(a)
}

/// Map `size` bytes of private anonymous memory at exactly `addr` and touch every page.
fn map_fixed(addr: u64, size: u64) -> Result<(), String> {
    // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping; failure is checked.
    let p = unsafe {
        libc::mmap(addr as *mut libc::c_void, size as usize, libc::PROT_READ | libc::PROT_WRITE,
                   libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE, -1, 0)
    };
    if p == libc::MAP_FAILED {
        return Err(format!("mmap at {addr:#x} size {size:#x}: {}", std::io::Error::last_os_error()));
    }
    if p as u64 != addr {
        // Kernels before 4.17 treat the flag as a hint and may place it elsewhere.
        return Err(format!("mmap placed the mapping at {:#x}, not {addr:#x}", p as u64));
    }
    Ok(())
}

/// Write each page's first byte, so every page is resident with known contents.
fn touch(addr: u64, size: u64) {
    let mut off = 0u64;
    while off < size {
        // SAFETY: inside a writable mapping of this process.
        unsafe { std::ptr::write_volatile((addr + off) as *mut u8, (off / 4096) as u8 | 1) };
        off += 4096;
    }
}

/// Sum of every byte of `[addr, addr+size)`, read volatile so the reads happen.
fn checksum(addr: u64, size: u64) -> u64 {
    (0..size).map(|o| {
        // SAFETY: inside a readable mapping of this process.
        unsafe { std::ptr::read_volatile((addr + o) as *const u8) as u64 }
    }).sum()
}

fn run(a: &Args) -> Result<(), String> {
    map_fixed(a.addr, a.size)?;
    let p = a.addr as *mut libc::c_void;
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
    touch(a.addr, a.size);
    if let Some((h, l)) = a.hot {
        map_fixed(h, l)?;
        touch(h, l);
        // The hot loop reads one byte per page, over and over, for the process's life.
        std::thread::spawn(move || loop {
            let mut off = 0u64;
            while off < l {
                // SAFETY: inside the hot mapping, never unmapped.
                unsafe { std::ptr::read_volatile((h + off) as *const u8) };
                off += 4096;
            }
            // A pause per pass keeps it hot without taking a whole core.
            std::thread::sleep(std::time::Duration::from_millis(1));
        });
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
    if let Some((h, l)) = a.hot {
        println!("checksum {}", checksum(a.addr, a.size) + checksum(h, l));
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
