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
    let mut share: Option<f64> = None;
    let mut seed = 0u64;
    let mut margin: Option<u64> = None;
    let mut hold = false;
    let mut seconds: Option<f64> = None;
    let mut it = std::env::args().skip(1);
    let fail = |m: String| -> ! {
        eprintln!("hugescope-fragment: {m}");
        std::process::exit(2)
    };
    while let Some(k) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| fail(format!("{k} needs a value")));
        match k.as_str() {
            "--share" => {
                let v = val();
                share = Some(v.parse().unwrap_or_else(|_| fail(format!("--share: '{v}' is not a number"))));
            }
            "--seed" => {
                let v = val();
                seed = v.parse().unwrap_or_else(|_| fail(format!("--seed: '{v}' is not an integer")));
            }
            "--margin" => margin = Some(parse_size(&val()).unwrap_or_else(|e| fail(format!("--margin: {e}")))),
            "--hold" => hold = true,
            "--seconds" => {
                let v = val();
                seconds = Some(v.parse().ok().filter(|t: &f64| t.is_finite() && *t >= 0.0)
                    .unwrap_or_else(|| fail(format!("--seconds: '{v}' is not a non-negative number"))));
            }
            other => fail(format!("unknown argument '{other}' (usage: --share X [--seed N] [--margin SIZE] [--hold | --seconds T])")),
        }
    }
    let share = share.unwrap_or_else(|| fail("--share is required".into()));
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
