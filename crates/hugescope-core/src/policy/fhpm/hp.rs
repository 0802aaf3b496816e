//! The decisions FHPM's monitoring feeds (pure functions, so the hand-worked
//! cases are tested directly):
//!
//! - the hot-page-pressure (HP) policy (FHPM §4.4, spec §4): HP = s_hot -
//!   s_tot x f_use. While HP > 0, demote hot huge pages by PSR descending,
//!   only PSR >= 0.5, each lowering HP by PSR x 2MB (its cold part leaves the
//!   hot set). While HP < 0, promote 4KB-mapped regions by PSR ascending,
//!   only PSR < 0.5 and only while HP + PSR x 2MB <= 0 (spec §11: the stop
//!   rule and the hysteresis against the 0.5 demotion bound);
//! - the fixed-threshold baselines of §6.3 (after HawkEye/Ingens): demote a
//!   measured huge page if Ns <= T, promote a region if Ns > T; cold huge
//!   pages (no Ns) are left as they are.

/// A measured 2MB region: its start, Ns and PSR.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    pub pid: u16,
    pub start: u64,
    pub ns: u32,
    pub psr: f64,
}

/// What a decision asks for, and the pressure before and after.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub demote: Vec<Measured>,
    pub promote: Vec<Measured>,
    /// HP before and after the plan, bytes (fixed thresholds: 0).
    pub hp_start: f64,
    pub hp_end: f64,
}

/// The PSR below which a huge page is never demoted and at or above which a
/// region is never promoted (FHPM §4.4; spec §11).
pub const PSR_BOUND: f64 = 0.5;

/// The HP policy for one VM. `hot_huge`: the hot huge pages with their
/// stage-2 PSR; `regions`: the 4KB-mapped regions eligible for promotion
/// (all base pages mapped) with their stage-1 PSR; `huge` the huge-page size.
pub fn hot_page_pressure(s_hot: u64, s_tot: u64, f_use: f64, hot_huge: &[Measured], regions: &[Measured], huge: u64) -> Plan {
    let hp0 = s_hot as f64 - s_tot as f64 * f_use;
    let mut hp = hp0;
    let mut plan = Plan { hp_start: hp0, ..Default::default() };
    let h = huge as f64;
    if hp > 0.0 {
        let mut c: Vec<Measured> = hot_huge.iter().copied().filter(|m| m.psr >= PSR_BOUND).collect();
        // Most skewed first; ties by address, so the order is deterministic.
        c.sort_by(|a, b| b.psr.total_cmp(&a.psr).then(a.pid.cmp(&b.pid)).then(a.start.cmp(&b.start)));
        for m in c {
            if hp <= 0.0 {
                break;
            }
            hp -= m.psr * h;
            plan.demote.push(m);
        }
    } else if hp < 0.0 {
        let mut c: Vec<Measured> = regions.iter().copied().filter(|m| m.psr < PSR_BOUND).collect();
        // Most accessed first.
        c.sort_by(|a, b| a.psr.total_cmp(&b.psr).then(a.pid.cmp(&b.pid)).then(a.start.cmp(&b.start)));
        for m in c {
            if hp + m.psr * h > 0.0 {
                break;
            }
            hp += m.psr * h;
            plan.promote.push(m);
        }
    }
    plan.hp_end = hp;
    plan
}

/// The fixed-threshold baseline with threshold `t` (FHPM §6.3; the "<=" is
/// what makes both T = 10 and T = 256 demote every page of the Fig 8
/// microbenchmark, where Ns = 10).
pub fn fixed_threshold(t: u32, hot_huge: &[Measured], regions: &[Measured]) -> Plan {
    Plan {
        demote: hot_huge.iter().copied().filter(|m| m.ns <= t).collect(),
        promote: regions.iter().copied().filter(|m| m.ns > t).collect(),
        ..Default::default()
    }
}
