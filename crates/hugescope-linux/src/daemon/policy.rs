//! The daemon's promotion policies, ported from the simulator's to the signals a
//! live process offers (`signals.rs`). Each policy says which regions are
//! candidates and in which order it wants them; the daemon (`mod.rs`) applies the
//! budget and the rate limit, so every policy is held to the same ones.

use super::signals::{RegionSample, PAGES_PER_REGION};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyKind {
    /// Linux's khugepaged, the baseline: scan each process in address order and
    /// collapse every region with at least `512 - max_ptes_none` present pages
    /// (mm/khugepaged.c, `hpage_collapse_scan_pmd`); no access information.
    Khugepaged,
    /// Ingens (OSDI'16, section 4): promote a region once its utilization reaches a
    /// threshold (90% of its base pages present by default), and share huge pages
    /// fairly: the next promotion goes to the watched process with the smallest
    /// share of its resident memory in daemon-made huge pages.
    Ingens,
    /// HawkEye (ASPLOS'19, section 3.2): regions sorted into ten buckets by access
    /// coverage (base pages accessed in the last interval), promoted from the
    /// highest bucket down, across processes.
    Hawkeye,
    /// PCC (HPCA'23): promote the regions whose translations are used most. The
    /// walk-frequency proxy (PEBS page-walk samples, or DAMON's per-region access
    /// frequency) is not available on this machine, so the frequency is an
    /// exponentially weighted count of the intervals in which the region's VMA was
    /// referenced, times the region's present pages (see docs/daemon.md).
    Pcc,
}

impl PolicyKind {
    pub fn parse(s: &str) -> Option<PolicyKind> {
        match s {
            "khugepaged" | "linux" => Some(PolicyKind::Khugepaged),
            "ingens" => Some(PolicyKind::Ingens),
            "hawkeye" => Some(PolicyKind::Hawkeye),
            "pcc" => Some(PolicyKind::Pcc),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::Khugepaged => "khugepaged",
            PolicyKind::Ingens => "ingens",
            PolicyKind::Hawkeye => "hawkeye",
            PolicyKind::Pcc => "pcc",
        }
    }

    pub const ALL: [&'static str; 4] = ["khugepaged", "ingens", "hawkeye", "pcc"];

    /// True when the policy needs the access signal (and so a first interval to
    /// establish it before deciding anything).
    pub fn uses_access(self) -> bool {
        matches!(self, PolicyKind::Hawkeye | PolicyKind::Pcc)
    }
}

/// What a policy knows about one candidate region.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// Index of the process in the daemon's watch list.
    pub proc: usize,
    pub region: RegionSample,
    /// PCC's frequency estimate for the region (see `PolicyKind::Pcc`).
    pub frequency: f64,
}

/// HawkEye's access-coverage bucket, 0..=9: the estimated accessed base pages of
/// the region in tenths of 512.
pub fn hawkeye_bucket(r: &RegionSample) -> u32 {
    let accessed = r.present as f64 * r.referenced;
    ((accessed * 10.0 / PAGES_PER_REGION as f64) as u32).min(9)
}

/// Thresholds a policy is run with.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PolicyParams {
    /// khugepaged's `max_ptes_none` (read from sysfs by the daemon).
    pub max_ptes_none: u32,
    /// Ingens's utilization threshold, a share of the 512 base pages (0..1].
    pub utilization: f64,
}

/// Whether `c` is a candidate at all under `kind`.
pub fn eligible(kind: PolicyKind, p: &PolicyParams, c: &Candidate) -> bool {
    let r = &c.region;
    if r.huge || r.present == 0 {
        return false;
    }
    match kind {
        PolicyKind::Khugepaged => r.present >= PAGES_PER_REGION.saturating_sub(p.max_ptes_none),
        PolicyKind::Ingens => r.present as f64 >= (p.utilization * PAGES_PER_REGION as f64).ceil(),
        PolicyKind::Hawkeye => r.present as f64 * r.referenced > 0.0,
        PolicyKind::Pcc => c.frequency > 0.0,
    }
}

/// Order candidates best-first for `kind` (ties broken by process, then address, so
/// a decision is reproducible from the same samples). Ingens's fairness depends on
/// what was promoted meanwhile, so the daemon re-picks its process each time
/// (`pick_fair`); the order here is the one within a process.
pub fn order(kind: PolicyKind, cands: &mut [Candidate]) {
    let key = |c: &Candidate| (c.proc, c.region.start);
    match kind {
        PolicyKind::Khugepaged | PolicyKind::Ingens => cands.sort_by_key(key),
        PolicyKind::Hawkeye => cands.sort_by(|a, b| {
            hawkeye_bucket(&b.region).cmp(&hawkeye_bucket(&a.region))
                .then(b.region.present.cmp(&a.region.present))
                .then(key(a).cmp(&key(b)))
        }),
        PolicyKind::Pcc => cands.sort_by(|a, b| {
            let (sa, sb) = (a.frequency * a.region.present as f64, b.frequency * b.region.present as f64);
            sb.total_cmp(&sa).then(key(a).cmp(&key(b)))
        }),
    }
}

/// Ingens's fairness: among processes that still have candidates, the one whose
/// daemon-made huge bytes are the smallest share of its resident bytes.
pub fn pick_fair(shares: &[(usize, f64)]) -> Option<usize> {
    shares.iter().min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0))).map(|x| x.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(proc: usize, start: u64, present: u32, referenced: f64, frequency: f64) -> Candidate {
        Candidate { proc, region: RegionSample { start, present, huge: false, referenced, vma_start: 0 }, frequency }
    }

    #[test]
    fn eligibility_follows_each_policy() {
        let p = PolicyParams { max_ptes_none: 511, utilization: 0.9 };
        let sparse = cand(0, 0, 10, 1.0, 0.0);
        let full_cold = cand(0, 0, 512, 0.0, 0.0);
        assert!(eligible(PolicyKind::Khugepaged, &p, &sparse));
        assert!(!eligible(PolicyKind::Ingens, &p, &sparse));
        assert!(eligible(PolicyKind::Ingens, &p, &full_cold));
        assert!(!eligible(PolicyKind::Hawkeye, &p, &full_cold));
        assert!(eligible(PolicyKind::Hawkeye, &p, &sparse));
        assert!(!eligible(PolicyKind::Pcc, &p, &full_cold));
        let p0 = PolicyParams { max_ptes_none: 0, ..p };
        assert!(!eligible(PolicyKind::Khugepaged, &p0, &sparse));
    }

    #[test]
    fn hawkeye_takes_highest_coverage_first_and_pcc_highest_frequency() {
        let mut c = vec![cand(0, 0, 512, 0.1, 0.2), cand(1, 4 << 20, 512, 0.9, 0.1), cand(0, 2 << 20, 100, 0.9, 0.9)];
        order(PolicyKind::Hawkeye, &mut c);
        assert_eq!(c[0].region.start, 4 << 20);
        order(PolicyKind::Pcc, &mut c);
        assert_eq!(c[0].region.start, 0, "0.2*512 beats 0.9*100 and 0.1*512");
        order(PolicyKind::Khugepaged, &mut c);
        assert_eq!(c.iter().map(|x| (x.proc, x.region.start)).collect::<Vec<_>>(), vec![(0, 0), (0, 2 << 20), (1, 4 << 20)]);
        assert_eq!(hawkeye_bucket(&cand(0, 0, 512, 1.0, 0.0).region), 9);
    }

    #[test]
    fn fairness_picks_the_poorest_process() {
        assert_eq!(pick_fair(&[(0, 0.5), (1, 0.1), (2, 0.1)]), Some(1));
        assert_eq!(pick_fair(&[]), None);
    }
}
