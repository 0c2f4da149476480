//! How sure a held-out figure is: bootstrap intervals of precision, recall
//! and F1.
//!
//! A judge scored on a few hundred labelled pairs gives one precision, one
//! recall and one F1; another few hundred pairs of the same kind would give
//! others. [`bootstrap_intervals`] says how far they would wander: it draws
//! the scored pairs again with replacement, as many pairs as there are,
//! [`BOOTSTRAP_RESAMPLES`] times (seeded: the same draws on every run), and
//! takes the 5th and 95th percentiles of each figure over the draws (the
//! percentile bootstrap). On the 421 held-out pairs of
//! `data/pairs/requests.jsonl` an interval is six to nine points wide
//! (`docs/tuning.md`, section 5): two judges or two settings whose
//! figures differ by a point or two there are not told apart by them.

use serde::Serialize;

use crate::Confusion;
use crate::random::SplitMix;

/// How many resamples [`bootstrap_intervals`] draws.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;

/// The share of the resampled figures each interval holds (from the 5th
/// to the 95th percentile).
pub const BOOTSTRAP_LEVEL: f64 = 0.9;

/// The seed of the resamples.
const BOOTSTRAP_SEED: u64 = 0x5EED_B007;

/// From the low to the high end of an interval; `None` when the figure is
/// undefined in every resample (no pair said the same, for a precision).
pub type Interval = Option<[f64; 2]>;

/// The bootstrap intervals of one judge's figures on a set of scored
/// pairs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Intervals {
    /// How many pairs were scored (and drawn in each resample).
    pub pairs: usize,
    /// How many resamples were drawn.
    pub resamples: usize,
    /// The share of the resampled figures each interval holds.
    pub level: f64,
    /// Precision's interval.
    pub precision: Interval,
    /// Recall's interval.
    pub recall: Interval,
    /// F1's interval.
    pub f1: Interval,
}

impl Intervals {
    /// "P 0.87-0.94 / R 0.83-0.91 / F1 0.86-0.92", "-" for an undefined
    /// interval.
    pub fn describe(&self) -> String {
        let range = |interval: Interval| {
            interval.map_or_else(
                || "-".to_owned(),
                |[low, high]| format!("{low:.2}-{high:.2}"),
            )
        };
        format!(
            "P {} / R {} / F1 {}",
            range(self.precision),
            range(self.recall),
            range(self.f1)
        )
    }
}

/// The bootstrap intervals of precision, recall and F1 of the verdicts
/// `said_same` against the labels `same` (one per scored pair, in the same
/// order; a longer slice's extra entries are not read); `None` when there
/// is no pair. A resample in which a figure is
/// undefined (no pair said the same, for a precision) leaves it out of
/// that figure's interval.
pub fn bootstrap_intervals(same: &[bool], said_same: &[bool]) -> Option<Intervals> {
    let outcomes: Vec<(bool, bool)> = same
        .iter()
        .copied()
        .zip(said_same.iter().copied())
        .collect();
    if outcomes.is_empty() {
        return None;
    }
    let mut random = SplitMix(BOOTSTRAP_SEED);
    let mut precision = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
    let mut recall = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
    let mut f1 = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
    for _ in 0..BOOTSTRAP_RESAMPLES {
        let mut counts = Confusion::of_pairs();
        for _ in 0..outcomes.len() {
            let (same, said_same) = outcomes[random.below(outcomes.len())];
            counts.record(same, said_same);
        }
        let metrics = counts.metrics();
        precision.extend(metrics.precision);
        recall.extend(metrics.recall);
        f1.extend(metrics.f1);
    }
    let tail = (1.0 - BOOTSTRAP_LEVEL) / 2.0;
    let interval = |mut values: Vec<f64>| -> Interval {
        values.sort_by(f64::total_cmp);
        Some([percentile(&values, tail)?, percentile(&values, 1.0 - tail)?])
    };
    Some(Intervals {
        pairs: outcomes.len(),
        resamples: BOOTSTRAP_RESAMPLES,
        level: BOOTSTRAP_LEVEL,
        precision: interval(precision),
        recall: interval(recall),
        f1: interval(f1),
    })
}

/// The `q` quantile (0..=1) of `sorted` values, interpolated linearly
/// between the two nearest ranks (numpy's default); `None` when empty.
fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let position = q.clamp(0.0, 1.0) * last as f64;
    let below = position.floor() as usize;
    let above = (below + 1).min(last);
    let fraction = position - below as f64;
    Some(sorted[below] + fraction * (sorted[above] - sorted[below]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `tp`, `fp`, `fn` and `tn` pairs as (label, verdict).
    fn outcomes(tp: usize, fp: usize, fn_: usize, tn: usize) -> (Vec<bool>, Vec<bool>) {
        let mut same = Vec::new();
        let mut said = Vec::new();
        for (count, label, verdict) in [
            (tp, true, true),
            (fp, false, true),
            (fn_, true, false),
            (tn, false, false),
        ] {
            same.extend(std::iter::repeat_n(label, count));
            said.extend(std::iter::repeat_n(verdict, count));
        }
        (same, said)
    }

    #[test]
    fn percentile_interpolates_between_ranks_as_numpy_does() {
        let values = [1.0, 2.0, 3.0, 4.0, 10.0];
        // numpy.percentile([1, 2, 3, 4, 10], [5, 50, 95]) = 1.2, 3.0, 8.8
        let at = |q| percentile(&values, q).map(|v| (v * 1e9).round() / 1e9);
        assert_eq!(at(0.05), Some(1.2));
        assert_eq!(at(0.5), Some(3.0));
        assert_eq!(at(0.95), Some(8.8));
        assert_eq!(at(0.0), Some(1.0));
        assert_eq!(at(1.0), Some(10.0));
        assert_eq!(percentile(&[], 0.5), None);
        assert_eq!(percentile(&[7.0], 0.95), Some(7.0));
    }

    #[test]
    fn a_judge_right_on_every_pair_is_sure_of_it() {
        let (same, said) = outcomes(30, 0, 0, 40);
        let intervals = bootstrap_intervals(&same, &said).expect("pairs");
        assert_eq!(intervals.precision, Some([1.0, 1.0]));
        assert_eq!(intervals.recall, Some([1.0, 1.0]));
        assert_eq!(intervals.f1, Some([1.0, 1.0]));
        assert_eq!(intervals.pairs, 70);
        assert_eq!(intervals.resamples, BOOTSTRAP_RESAMPLES);
        assert_eq!(
            intervals.describe(),
            "P 1.00-1.00 / R 1.00-1.00 / F1 1.00-1.00"
        );
    }

    #[test]
    fn the_interval_holds_the_figure_and_narrows_with_more_pairs() {
        // Precision 0.8, recall 0.8 on 100 pairs.
        let (same, said) = outcomes(40, 10, 10, 40);
        let small = bootstrap_intervals(&same, &said).expect("pairs");
        let [low, high] = small.precision.expect("defined");
        assert!(low < 0.8 && 0.8 < high, "{low} {high}");
        // The standard error of a precision of 0.8 on 50 flagged pairs is
        // about 0.057, so the 90% interval is about 0.19 wide.
        assert!((0.14..0.24).contains(&(high - low)), "{low} {high}");
        // The same outcomes ten times over: about sqrt(10) narrower.
        let (same, said) = outcomes(400, 100, 100, 400);
        let large = bootstrap_intervals(&same, &said).expect("pairs");
        let [large_low, large_high] = large.precision.expect("defined");
        assert!(large_low < 0.8 && 0.8 < large_high);
        let ratio = (high - low) / (large_high - large_low);
        assert!((2.4..4.0).contains(&ratio), "{ratio}");
        let [f1_low, f1_high] = large.f1.expect("defined");
        assert!(f1_low < 0.8 && 0.8 < f1_high);
    }

    #[test]
    fn the_same_pairs_draw_the_same_intervals() {
        let (same, said) = outcomes(12, 3, 5, 20);
        assert_eq!(
            bootstrap_intervals(&same, &said),
            bootstrap_intervals(&same, &said)
        );
    }

    #[test]
    fn an_undefined_figure_has_no_interval_and_no_pairs_none() {
        // Nothing said the same: no precision in any resample.
        let (same, said) = outcomes(0, 0, 5, 5);
        let intervals = bootstrap_intervals(&same, &said).expect("pairs");
        assert_eq!(intervals.precision, None);
        assert_eq!(intervals.recall, Some([0.0, 0.0]));
        assert!(intervals.describe().starts_with("P - / R 0.00-0.00"));
        assert_eq!(bootstrap_intervals(&[], &[]), None);
    }
}
