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

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;

    fn m(start: u64, psr: f64) -> Measured {
        Measured { pid: 0, start, ns: ((1.0 - psr) * 512.0).round() as u32, psr }
    }

    fn starts(v: &[Measured]) -> Vec<u64> {
        v.iter().map(|m| m.start).collect()
    }

    #[test]
    fn demotion_goes_by_psr_descending_from_0_5_and_stops_at_hp_0() {
        // HP = 10MB - 16MB x 0.5 = 2MB. Candidates >= 0.5: d 0.95, a 0.9,
        // c 0.6, e 0.5 (b 0.3 never). d: 2 - 1.9 = 0.1MB > 0; a: 0.1 - 1.8
        // = -1.7MB <= 0: stop. c and e stay huge.
        let hot = [m(1, 0.9), m(2, 0.3), m(3, 0.6), m(4, 0.95), m(5, 0.5)];
        let p = hot_page_pressure(10 * MB, 16 * MB, 0.5, &hot, &[m(9, 0.0)], 2 * MB);
        assert_eq!(starts(&p.demote), vec![4, 1]);
        assert!(p.promote.is_empty());
        assert_eq!(p.hp_start, 2.0 * MB as f64);
        assert!((p.hp_end + 1.7 * MB as f64).abs() < 1.0);
        // More pressure: every candidate from 0.5 up, in order, never b.
        let p = hot_page_pressure(16 * MB, 16 * MB, 0.0, &hot, &[], 2 * MB);
        assert_eq!(starts(&p.demote), vec![4, 1, 3, 5]);
        // No pressure: nothing either way.
        let p = hot_page_pressure(8 * MB, 16 * MB, 0.5, &hot, &[m(9, 0.0)], 2 * MB);
        assert_eq!(p, Plan { hp_start: 0.0, hp_end: 0.0, ..Default::default() });
    }

    #[test]
    fn promotion_goes_by_psr_ascending_below_0_5_while_hp_stays_at_most_0() {
        // HP = 7MB - 16MB x 0.5 = -1MB. Eligible (< 0.5): 0.0, 0.1, 0.3,
        // 0.45; 0.6 never. -1 + 0 = -1; + 0.2 = -0.8; + 0.6 = -0.2; + 0.9 =
        // 0.7 > 0: stop before 0.45.
        let regions = [m(1, 0.45), m(2, 0.1), m(3, 0.6), m(4, 0.3), m(5, 0.0)];
        let p = hot_page_pressure(7 * MB, 16 * MB, 0.5, &[m(8, 0.99)], &regions, 2 * MB);
        assert_eq!(starts(&p.promote), vec![5, 2, 4]);
        assert!(p.demote.is_empty());
        assert!((p.hp_end + 0.2 * MB as f64).abs() < 1.0);
    }

    #[test]
    fn fixed_thresholds_compare_ns_with_less_or_equal() {
        let hot = [Measured { pid: 0, start: 1, ns: 10, psr: 0.98 }, Measured { pid: 0, start: 2, ns: 300, psr: 0.41 }];
        let regions = [Measured { pid: 0, start: 3, ns: 11, psr: 0.97 }, Measured { pid: 0, start: 4, ns: 256, psr: 0.5 }];
        let p = fixed_threshold(10, &hot, &regions);
        assert_eq!((starts(&p.demote), starts(&p.promote)), (vec![1], vec![3, 4]));
        let p = fixed_threshold(256, &hot, &regions);
        assert_eq!((starts(&p.demote), starts(&p.promote)), (vec![1], vec![]));
    }
}
