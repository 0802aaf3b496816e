//! Simulated-annealing placement: the stand-in for PARSEC canneal (Bienia et
//! al.), which minimises the routing cost of a chip netlist by swapping element
//! locations. Its memory behaviour, random element pairs whose fan-in/fan-out
//! neighbours' locations are then read, is what makes it TLB-hostile (PCC paper
//! Table 1 lists canneal with an 860MB footprint).
//!
//! Netlist: `elements` elements on a square grid; each element is wired to
//! `fanout` random others (mirrored, so every element has fan-in and fan-out
//! lists, stored together as one CSR: `net_offsets`, `net_elems`). Locations
//! are packed (x << 32 | y) in `locations`. Each swap picks two random elements,
//! reads both locations and all their neighbours' locations to compute the
//! change in Manhattan wire length, and accepts it if it lowers the cost or with
//! probability exp(-delta / T); canneal's schedule divides T by 1.5 after every
//! `swaps_per_temp` swaps, for `temp_steps` steps.

use serde_json::{json, Value};

use hugescope_core::{Error, Result};

use crate::layout::Layout;
use crate::mem::{Arr, Mem};
use crate::registry::{common, p, Resolved, WorkloadInfo};
use crate::rng::Rng;

pub fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "canneal",
        about: "simulated-annealing element swaps over a netlist (PARSEC canneal stand-in)",
        params: common(vec![
            p("elements", "int", "400000", "netlist elements (canneal's native input has 2.5M)"),
            p("fanout", "int", "4", "random connections generated per element (mirrored into fan-in lists)"),
            p("swaps_per_temp", "int", "15000", "swap attempts per temperature step (canneal's default)"),
            p("temp_steps", "int", "128", "temperature steps"),
            p("start_temp", "float", "2000", "initial temperature (canneal's default)"),
        ]),
    }
}

pub struct Cfg {
    pub elements: u64,
    pub fanout: u64,
    pub swaps_per_temp: u64,
    pub temp_steps: u64,
    pub start_temp: f64,
    pub seed: u64,
    pub threads: usize,
}

pub fn config(r: &Resolved) -> Result<Cfg> {
    let elements = r.int_min("elements", 2)?;
    if elements > (1 << 31) {
        return Err(Error::input("canneal: parameter 'elements' must be at most 2^31"));
    }
    let fanout = r.int_min("fanout", 1)?;
    if fanout > 1000 {
        return Err(Error::input("canneal: parameter 'fanout' must be at most 1000"));
    }
    let start_temp = r.float("start_temp")?;
    if start_temp <= 0.0 {
        return Err(Error::input("canneal: parameter 'start_temp' must be positive"));
    }
    Ok(Cfg {
        elements,
        fanout,
        swaps_per_temp: r.int_min("swaps_per_temp", 1)?,
        temp_steps: r.int_min("temp_steps", 1)?,
        start_temp,
        seed: r.int("seed")?,
        threads: r.threads()?,
    })
}

pub fn layout(c: &Cfg) -> Result<Layout> {
    let mut l = Layout::new();
    l.add("locations", c.elements * 8)?;
    l.add("net_offsets", (c.elements + 1) * 8)?;
    l.add("net_elems", c.elements * c.fanout * 2 * 4)?;
    Ok(l)
}

pub fn temp_bytes(c: &Cfg) -> u64 {
    c.elements * c.fanout * 8 + c.elements * 16
}

const CHUNK: u64 = 64;

#[inline]
fn dist(a: u64, b: u64) -> i64 {
    let (ax, ay) = ((a >> 32) as i64, (a & 0xffff_ffff) as i64);
    let (bx, by) = ((b >> 32) as i64, (b & 0xffff_ffff) as i64);
    (ax - bx).abs() + (ay - by).abs()
}

/// Routing cost of element `e` if it sat at `at` (traced reads of its nets and
/// of every neighbour's location).
#[inline]
fn cost<M: Mem>(m: &mut M, off: &Arr<u64>, nets: &Arr<u32>, loc: &Arr<u64>, e: usize, at: u64) -> i64 {
    let s = off.ld(m, e) as usize;
    let t = off.ld(m, e + 1) as usize;
    let mut c = 0;
    for k in s..t {
        let nb = nets.ld(m, k) as usize;
        c += dist(at, loc.ld(m, nb));
    }
    c
}

fn total_cost(off: &Arr<u64>, nets: &Arr<u32>, loc: &Arr<u64>, n: usize) -> i64 {
    (0..n)
        .map(|e| (off[e] as usize..off[e + 1] as usize).map(|k| dist(loc[e], loc[nets[k] as usize])).sum::<i64>())
        .sum::<i64>()
        / 2
}

pub fn run<M: Mem>(c: &Cfg, l: &Layout, m: &mut M) -> Result<Value> {
    let n = c.elements as usize;
    let k = c.fanout as usize;
    let mut rng = Rng::stream(c.seed, 40);
    // Netlist (untraced construction, like canneal's file parse).
    let mut src = Vec::with_capacity(n * k);
    let mut dst = Vec::with_capacity(n * k);
    for e in 0..n as u32 {
        for _ in 0..k {
            let mut o = rng.below(n as u64 - 1) as u32;
            if o >= e {
                o += 1;
            }
            src.push(e);
            dst.push(o);
        }
    }
    let mut off: Arr<u64> = m.alloc(l.get("net_offsets")?, n + 1)?;
    let mut deg = vec![0u64; n];
    for (&a, &b) in src.iter().zip(&dst) {
        deg[a as usize] += 1;
        deg[b as usize] += 1;
    }
    let mut acc = 0;
    for e in 0..n {
        off[e] = acc;
        acc += deg[e];
    }
    off[n] = acc;
    let mut nets: Arr<u32> = m.alloc(l.get("net_elems")?, acc as usize)?;
    let mut cur: Vec<u64> = off[..n].to_vec();
    for (&a, &b) in src.iter().zip(&dst) {
        nets[cur[a as usize] as usize] = b;
        cur[a as usize] += 1;
        nets[cur[b as usize] as usize] = a;
        cur[b as usize] += 1;
    }
    drop((src, dst, cur, deg));
    // Initial placement: a random permutation of grid slots.
    let side = (n as f64).sqrt().ceil() as u64;
    let mut slots: Vec<u64> = (0..n as u64).collect();
    for i in (1..n).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        slots.swap(i, j);
    }
    let mut loc: Arr<u64> = m.alloc(l.get("locations")?, n)?;
    for e in 0..n {
        loc[e] = ((slots[e] % side) << 32) | (slots[e] / side);
    }
    drop(slots);
    let initial = total_cost(&off, &nets, &loc, n);
    m.populated(&off);
    m.populated(&nets);
    m.populated(&loc);
    m.begin_run();
    let mut temp = c.start_temp;
    let (mut accepted, mut rejected, mut swap_no) = (0u64, 0u64, 0u64);
    for step in 0..c.temp_steps {
        for _ in 0..c.swaps_per_temp {
            if swap_no % CHUNK == 0 {
                m.set_cpu(((swap_no / CHUNK) % c.threads as u64) as usize);
            }
            swap_no += 1;
            let a = rng.below(n as u64) as usize;
            let mut b = rng.below(n as u64 - 1) as usize;
            if b >= a {
                b += 1;
            }
            let la = loc.ld(m, a);
            let lb = loc.ld(m, b);
            let before = cost(m, &off, &nets, &loc, a, la) + cost(m, &off, &nets, &loc, b, lb);
            let after = cost(m, &off, &nets, &loc, a, lb) + cost(m, &off, &nets, &loc, b, la);
            let delta = after - before;
            let take = delta < 0 || rng.f64() < (-(delta as f64) / temp).exp();
            if take {
                loc.st(m, a, lb);
                loc.st(m, b, la);
                accepted += 1;
            } else {
                rejected += 1;
            }
        }
        temp /= 1.5;
        m.progress(&format!("temp:{}", step + 1));
    }
    m.end_run();
    let final_cost = total_cost(&off, &nets, &loc, n);
    Ok(json!({
        "elements": n, "initial_cost": initial, "final_cost": final_cost,
        "accepted": accepted, "rejected": rejected,
        "locations_hash": crate::hex(crate::hash_words(loc.iter().copied())),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::Traced;
    use hugescope_core::trace::CountingSink;

    #[test]
    fn annealing_lowers_the_routing_cost() {
        let c = Cfg { elements: 2000, fanout: 3, swaps_per_temp: 2000, temp_steps: 20, start_temp: 50.0, seed: 3, threads: 2 };
        let l = layout(&c).unwrap();
        let mut sink = CountingSink::default();
        let mut m = Traced::new(&mut sink);
        let res = run(&c, &l, &mut m).unwrap();
        let (i, f) = (res["initial_cost"].as_i64().unwrap(), res["final_cost"].as_i64().unwrap());
        assert!(f < i * 9 / 10, "initial {i} final {f}");
        assert!(res["accepted"].as_u64().unwrap() > 0);
    }
}
