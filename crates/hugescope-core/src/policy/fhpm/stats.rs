//! What FHPM reports in the result file (spec §9): per monitoring period and
//! VM the hot set, the pressure and the pages demoted and promoted; per run
//! the split/collapse counts and failures, the companion pages held at
//! most, conflicts and lost stage-2 samples, and the histograms of Table 1
//! (PSR of the measured huge pages) and Table 4 (memory per normalized
//! frequency bin).

use super::frequency::{FREQ_BINS, FREQ_BIN_LABELS};
use super::page_skew::{PSR_BINS, PSR_BIN_LABELS};
use serde::Serialize;

/// Periods kept in the result (a 20 s period fills it after 55 hours).
const MAX_PERIODS: usize = 10_000;

/// One VM's monitoring period.
#[derive(Clone, Debug, Serialize)]
pub struct PeriodRecord {
    pub time_s: f64,
    pub pid: u16,
    pub s_hot_bytes: u64,
    pub s_tot_bytes: u64,
    /// HP before and after the decision (0 for the fixed thresholds).
    pub hp_start_bytes: f64,
    pub hp_end_bytes: f64,
    /// Huge pages measured by stage 2 (lost samples included).
    pub measured: u64,
    pub demoted: u64,
    pub promoted: u64,
}

#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub windows: u64,
    pub rounds: u64,
    pub leaves_scanned: u64,
    pub pages_demoted: u64,
    pub pages_promoted: u64,
    pub split_failures: u64,
    pub collapse_failures: u64,
    pub collapses_in_place: u64,
    pub peak_companion_pages: u64,
    pub host_remaps: u64,
    pub conflicts: u64,
    pub lost_samples: u64,
    /// Leaves FHPM-TMM's placements migrated between tiers.
    pub tier_migrations: u64,
    pub periods: Vec<PeriodRecord>,
    pub periods_dropped: u64,
    /// The last window's histograms, and the frequency one summed over windows.
    pub freq_last: [u64; FREQ_BINS],
    pub freq_sum: [u64; FREQ_BINS],
    pub psr_last: [u64; PSR_BINS],
}

fn mb(b: u64) -> f64 {
    b as f64 / (1u64 << 20) as f64
}

impl Stats {
    pub fn record(&mut self, r: PeriodRecord) {
        if self.periods.len() < MAX_PERIODS {
            self.periods.push(r);
        } else {
            self.periods_dropped += 1;
        }
    }

    pub fn close_window(&mut self, freq: [u64; FREQ_BINS], psr: [u64; PSR_BINS]) {
        self.windows += 1;
        self.freq_last = freq;
        for (s, f) in self.freq_sum.iter_mut().zip(freq) {
            *s += f;
        }
        self.psr_last = psr;
    }

    pub fn to_json(&self) -> serde_json::Value {
        let bins = |labels: &[&str], v: &[f64]| -> serde_json::Value {
            labels.iter().zip(v).map(|(l, x)| (l.to_string(), serde_json::json!(x))).collect::<serde_json::Map<_, _>>().into()
        };
        let w = self.windows.max(1) as f64;
        let freq_last: Vec<f64> = self.freq_last.iter().map(|&b| mb(b)).collect();
        let freq_mean: Vec<f64> = self.freq_sum.iter().map(|&b| mb(b) / w).collect();
        let psr_last: Vec<f64> = self.psr_last.iter().map(|&b| mb(b)).collect();
        let last = self.periods.last();
        serde_json::json!({
            "windows": self.windows,
            "rounds": self.rounds,
            "leaves_scanned": self.leaves_scanned,
            "s_hot_bytes": last.map_or(0, |p| p.s_hot_bytes),
            "hp_bytes": last.map_or(0.0, |p| p.hp_start_bytes),
            "pages_demoted": self.pages_demoted,
            "pages_promoted": self.pages_promoted,
            "split_failures": self.split_failures,
            "collapse_failures": self.collapse_failures,
            "collapses_in_place": self.collapses_in_place,
            "peak_companion_pages": self.peak_companion_pages,
            "host_remaps": self.host_remaps,
            "conflicts": self.conflicts,
            "lost_samples": self.lost_samples,
            "tier_migrations": self.tier_migrations,
            "freq_histogram_mb": bins(&FREQ_BIN_LABELS, &freq_last),
            "freq_histogram_mb_mean": bins(&FREQ_BIN_LABELS, &freq_mean),
            "psr_histogram_mb": bins(&PSR_BIN_LABELS, &psr_last),
            "periods": self.periods,
            "periods_dropped": self.periods_dropped,
        })
    }
}
