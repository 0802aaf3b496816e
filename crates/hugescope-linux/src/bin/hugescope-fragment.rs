//! hugescope-fragment: fragment free physical memory (PCC paper §5.1.1) and hold it.
//!
//! usage: hugescope-fragment --share 0.5 [--seed N] [--margin SIZE] [--hold | --seconds T]
//!
//! Prints the fragmentation report as JSON, then holds the pins until SIGINT/SIGTERM
//! (`--hold`) or for T seconds, and restores every setting it changed. Needs root.
//! SIGINT, SIGTERM and SIGHUP stop it at any point (also while fragmenting), with
//! everything released and exit status 128 + signal; it gets SIGTERM when its
//! parent dies. A SIGKILL leaves the changed sysctl recorded in the state file,
//! where the next hugescope invocation finds and restores it.

use hugescope_core::units::parse_size;
use hugescope_linux::{lifetime, settings, Error, Fragmenter};
use std::io::Write;

fn main() {
    use clap::{Arg, ArgAction, Command};
    let fail = |m: String| -> ! {
        eprintln!("hugescope-fragment: {m}");
        std::process::exit(2)
    };
    let m = hugescope_linux::args::parse(
        Command::new("hugescope-fragment")
            .about("Fragment free physical memory (PCC paper §5.1.1) and hold it; needs root")
            .arg(Arg::new("share").long("share").required(true).value_name("X")
                .value_parser(|v: &str| v.parse::<f64>().map_err(|_| format!("--share: '{v}' is not a number")))
                .help("share of free 2 MiB blocks to pin a page in (0 to 1)"))
            .arg(Arg::new("seed").long("seed").value_name("N").default_value("0")
                .value_parser(|v: &str| v.parse::<u64>().map_err(|_| format!("--seed: '{v}' is not an integer"))))
            .arg(Arg::new("margin").long("margin").value_name("SIZE")
                .value_parser(|v: &str| parse_size(v).map_err(|e| format!("--margin: {e}")))
                .help("free memory to leave alone"))
            .arg(Arg::new("hold").long("hold").action(ArgAction::SetTrue).conflicts_with("seconds")
                .help("hold the pins until SIGINT/SIGTERM"))
            .arg(Arg::new("seconds").long("seconds").value_name("T").value_parser(hugescope_linux::args::seconds)
                .help("hold the pins for T seconds")),
    );
    let share = *m.get_one::<f64>("share").expect("required");
    let seed = *m.get_one::<u64>("seed").expect("defaulted");
    let margin = m.get_one::<u64>("margin").copied();
    let hold = m.get_flag("hold");
    let seconds = m.get_one::<f64>("seconds").copied();
    // SIGTERM (not SIGKILL) when the parent dies: it restores the settings on its way out.
    lifetime::die_with_parent_from_env(libc::SIGTERM);
    lifetime::install_stop_handlers();
    match settings::repair_stale() {
        Ok(r) => r.iter().for_each(|x| eprintln!("hugescope-fragment: {}", settings::describe(x))),
        Err(e) => fail(e.to_string()),
    }
    let mut stop = lifetime::stop_signal;
    let f = match Fragmenter::start_with_stop(share, seed, margin, &mut stop) {
        Ok(f) => f,
        Err(Error::Interrupted(sig)) => std::process::exit(128 + sig),
        Err(e) => fail(e.to_string()),
    };
    let print = |r: &hugescope_linux::FragmentReport| {
        let json = serde_json::to_string_pretty(r).unwrap_or_default();
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{json}");
        let _ = writeln!(out, "holding");
        let _ = out.flush();
    };
    if hold {
        let sig = f.hold_until_stopped(&mut stop, print);
        std::process::exit(128 + sig);
    }
    print(f.report());
    if let Some(t) = seconds {
        // Sleep in short steps so that a signal ends the hold at once.
        let until = std::time::Instant::now() + std::time::Duration::from_secs_f64(t);
        while std::time::Instant::now() < until {
            if let Some(sig) = stop() {
                drop(f);
                std::process::exit(128 + sig);
            }
            std::thread::sleep(std::time::Duration::from_millis(50).min(until - std::time::Instant::now()));
        }
    }
    drop(f);
}
