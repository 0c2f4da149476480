//! The sweep: for each threshold, what it catches and what it wrongly
//! flags.

use serde::Serialize;

use crate::error::{Result, TuneError};

/// Most thresholds one sweep may have.
pub const MAX_THRESHOLDS: usize = 10_000;

/// The thresholds of a sweep: `from`, `from + step`, ... up to `to`
/// inclusive.
///
/// Each is computed as `from + i × step` and rounded to 9 decimals, so
/// 0.70 + 15 × 0.01 is 0.85 and not 0.8500000000000001; the detectors
/// compare in `f32`, and so does the sweep ([`ScoreTable::confusion_at`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Thresholds {
    from: f64,
    to: f64,
    step: f64,
    values: Vec<f64>,
}

impl Thresholds {
    /// The sweep from `from` to `to` by `step`. Both ends must be cosines
    /// (-1 to 1), `from < to`, `step > 0`, and at most [`MAX_THRESHOLDS`]
    /// thresholds.
    pub fn new(from: f64, to: f64, step: f64) -> Result<Thresholds> {
        let range = |why: String| Err(TuneError::Range(why));
        if !(from.is_finite() && to.is_finite() && step.is_finite()) {
            return range(format!(
                "--from {from}, --to {to} and --step {step} must be numbers"
            ));
        }
        if !(-1.0..=1.0).contains(&from) || !(-1.0..=1.0).contains(&to) {
            return range(format!(
                "--from {from} and --to {to} must be cosines, between -1 and 1"
            ));
        }
        if from >= to {
            return range(format!("--from {from} must be below --to {to}"));
        }
        if step <= 0.0 {
            return range(format!("--step {step} must be above 0"));
        }
        let steps = ((to - from) / step + 1e-9).floor();
        if steps + 1.0 > MAX_THRESHOLDS as f64 {
            return range(format!(
                "--step {step} from {from} to {to} makes {} thresholds; at most {MAX_THRESHOLDS}",
                steps + 1.0
            ));
        }
        let values = (0..=steps as usize)
            .map(|i| round9(from + i as f64 * step))
            .collect();
        Ok(Thresholds {
            from,
            to,
            step,
            values,
        })
    }

    /// Any thresholds, sorted and de-duplicated (at least one, each a
    /// cosine).
    pub fn from_values(values: impl IntoIterator<Item = f64>) -> Result<Thresholds> {
        let mut values: Vec<f64> = values.into_iter().map(round9).collect();
        if let Some(bad) = values.iter().find(|v| !(-1.0..=1.0).contains(*v)) {
            return Err(TuneError::Range(format!("{bad} is not a cosine (-1 to 1)")));
        }
        values.sort_by(f64::total_cmp);
        values.dedup();
        let (Some(&from), Some(&to)) = (values.first(), values.last()) else {
            return Err(TuneError::Range("no thresholds".into()));
        };
        Ok(Thresholds {
            from,
            to,
            step: 0.0,
            values,
        })
    }

    /// The thresholds, ascending.
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// The first threshold asked for.
    pub fn from(&self) -> f64 {
        self.from
    }

    /// The last threshold asked for.
    pub fn to(&self) -> f64 {
        self.to
    }

    /// The step (0 for [`Thresholds::from_values`]).
    pub fn step(&self) -> f64 {
        self.step
    }

    /// Decimals enough to print every threshold exactly (at least 2).
    pub fn decimals(&self) -> usize {
        self.values
            .iter()
            .map(|&v| decimals_of(v))
            .max()
            .unwrap_or(2)
            .max(2)
    }
}

/// `v` rounded to 9 decimals: float drift gone, any sane step kept.
fn round9(v: f64) -> f64 {
    (v * 1e9).round() / 1e9
}

/// The decimals `v` needs (up to 6).
pub(crate) fn decimals_of(v: f64) -> usize {
    (0..6)
        .find(|&d| {
            let scaled = v * 10f64.powi(d as i32);
            (scaled - scaled.round()).abs() < 1e-6
        })
        .unwrap_or(6)
}

/// Counts at one threshold: what was predicted "the same" (cosine strictly
/// above it) against the labels.
///
/// For traces there are no negatives to count: `tn` is `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Confusion {
    /// Same, and predicted same.
    pub tp: u64,
    /// Different, but predicted same: a false alarm.
    pub fp: u64,
    /// Different, and predicted different (`None` for traces).
    pub tn: Option<u64>,
    /// Same, but predicted different: a miss.
    #[serde(rename = "fn")]
    pub fn_: u64,
}

impl Confusion {
    /// No labelled pair counted yet (negatives are counted: `tn` is
    /// `Some(0)`).
    pub fn of_pairs() -> Confusion {
        Confusion {
            tn: Some(0),
            ..Confusion::default()
        }
    }

    /// Counts one labelled pair: its label `same` and the verdict
    /// `said_same`.
    pub fn record(&mut self, same: bool, said_same: bool) {
        match (same, said_same) {
            (true, true) => self.tp += 1,
            (false, true) => self.fp += 1,
            (true, false) => self.fn_ += 1,
            (false, false) => self.tn = Some(self.tn.unwrap_or(0) + 1),
        }
    }

    /// How many pairs are counted (`tn` included when there is one).
    pub fn total(&self) -> u64 {
        self.tp + self.fp + self.fn_ + self.tn.unwrap_or(0)
    }

    /// Precision, recall, F1 and the false-positive rate of these counts.
    pub fn metrics(&self) -> Metrics {
        let ratio = |num: u64, den: u64| (den > 0).then(|| num as f64 / den as f64);
        Metrics {
            precision: ratio(self.tp, self.tp + self.fp),
            recall: ratio(self.tp, self.tp + self.fn_),
            f1: ratio(2 * self.tp, 2 * self.tp + self.fp + self.fn_),
            fpr: self.tn.and_then(|tn| ratio(self.fp, self.fp + tn)),
        }
    }
}

/// The scores of one threshold. A ratio whose denominator is 0 is `None`
/// (`n/a` in tables and CSV, `null` in JSON), never a made-up 0 or 1.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Metrics {
    /// TP / (TP + FP): of the pairs flagged "the same", how many are. `None`
    /// when nothing is flagged.
    pub precision: Option<f64>,
    /// TP / (TP + FN): of the pairs that are the same, how many are flagged.
    /// `None` when no pair is the same.
    pub recall: Option<f64>,
    /// 2TP / (2TP + FP + FN), the harmonic mean of precision and recall
    /// (0 when either is 0). `None` when nothing is the same or flagged.
    pub f1: Option<f64>,
    /// FP / (FP + TN): of the pairs that differ, how many are wrongly
    /// flagged. `None` with no different pairs, and for traces.
    pub fpr: Option<f64>,
}

/// One threshold of a sweep: its counts and scores.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SweepRow {
    /// The threshold: "the same" means a cosine strictly above it.
    pub threshold: f64,
    /// The counts.
    #[serde(flatten)]
    pub confusion: Confusion,
    /// The scores.
    #[serde(flatten)]
    pub metrics: Metrics,
}

impl SweepRow {
    /// The row of `confusion` at `threshold`.
    pub fn new(threshold: f64, confusion: Confusion) -> SweepRow {
        SweepRow {
            threshold,
            confusion,
            metrics: confusion.metrics(),
        }
    }
}

/// Labelled cosines, sorted once so that any threshold is scored by two
/// binary searches: a sweep of `t` thresholds over `n` pairs costs
/// O((n + t) log n).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScoreTable {
    /// Cosines of the pairs labelled the same, ascending.
    same: Vec<f32>,
    /// Cosines of the pairs labelled different, ascending.
    different: Vec<f32>,
}

impl ScoreTable {
    /// The table of `(cosine, same)` pairs. A NaN cosine is never above
    /// any threshold.
    pub fn new(scored: impl IntoIterator<Item = (f32, bool)>) -> ScoreTable {
        let mut table = ScoreTable::default();
        for (cosine, same) in scored {
            let cosine = if cosine.is_nan() {
                f32::NEG_INFINITY
            } else {
                cosine
            };
            if same {
                table.same.push(cosine);
            } else {
                table.different.push(cosine);
            }
        }
        table.same.sort_by(f32::total_cmp);
        table.different.sort_by(f32::total_cmp);
        table
    }

    /// Pairs labelled the same.
    pub fn positives(&self) -> usize {
        self.same.len()
    }

    /// Pairs labelled different.
    pub fn negatives(&self) -> usize {
        self.different.len()
    }

    /// Whether it holds no pair.
    pub fn is_empty(&self) -> bool {
        self.same.is_empty() && self.different.is_empty()
    }

    /// The counts at `threshold`: a pair is predicted "the same" when its
    /// cosine is strictly greater than the threshold as an `f32`, the
    /// detectors' rule.
    pub fn confusion_at(&self, threshold: f64) -> Confusion {
        let t = threshold as f32;
        let at_most = |sorted: &[f32]| sorted.partition_point(|&c| c <= t) as u64;
        let (same_below, different_below) = (at_most(&self.same), at_most(&self.different));
        Confusion {
            tp: self.same.len() as u64 - same_below,
            fp: self.different.len() as u64 - different_below,
            tn: Some(different_below),
            fn_: same_below,
        }
    }

    /// One row per threshold.
    pub fn sweep(&self, thresholds: &Thresholds) -> Vec<SweepRow> {
        thresholds
            .values()
            .iter()
            .map(|&t| SweepRow::new(t, self.confusion_at(t)))
            .collect()
    }
}

/// The row with the highest F1; on a tie, the higher threshold (fewer
/// false alarms for the same F1). `None` when no row has an F1.
pub fn best_f1(rows: &[SweepRow]) -> Option<&SweepRow> {
    let mut best: Option<&SweepRow> = None;
    for row in rows {
        let Some(f1) = row.metrics.f1 else { continue };
        let better = match best.and_then(|b| b.metrics.f1.map(|bf| (b, bf))) {
            None => true,
            Some((b, bf)) => f1 > bf || (f1 == bf && row.threshold > b.threshold),
        };
        if better {
            best = Some(row);
        }
    }
    best
}

/// The lowest threshold whose precision is at least `floor`: of those that
/// meet the floor, the one that catches the most. `None` when none does
/// (a threshold that flags nothing has no precision, and meets no floor).
pub fn min_precision(rows: &[SweepRow], floor: f64) -> Option<&SweepRow> {
    rows.iter()
        .filter(|row| row.metrics.precision.is_some_and(|p| p >= floor - 1e-12))
        .min_by(|a, b| a.threshold.total_cmp(&b.threshold))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_do_not_drift() -> Result<()> {
        let t = Thresholds::new(0.70, 0.95, 0.01)?;
        assert_eq!(t.values().len(), 26);
        assert_eq!(t.values()[15], 0.85);
        assert_eq!(t.values()[25], 0.95);
        assert_eq!(t.decimals(), 2);
        let t = Thresholds::new(0.0, 1.0, 0.3)?;
        assert_eq!(t.values(), [0.0, 0.3, 0.6, 0.9]);
        assert_eq!(Thresholds::new(0.8, 0.9, 0.005)?.decimals(), 3);
        Ok(())
    }

    #[test]
    fn bad_ranges_are_refused() {
        for (from, to, step) in [
            (0.9, 0.8, 0.01),
            (0.8, 0.8, 0.01),
            (0.7, 0.9, 0.0),
            (0.7, 0.9, -0.1),
            (0.0, 1.0, 1e-6),
            (0.7, 1.5, 0.1),
            (f64::NAN, 0.9, 0.1),
        ] {
            assert!(
                Thresholds::new(from, to, step).is_err(),
                "{from} {to} {step}"
            );
        }
    }

    #[test]
    fn undefined_ratios_are_none() {
        let m = Confusion {
            tp: 0,
            fp: 0,
            tn: Some(3),
            fn_: 2,
        }
        .metrics();
        assert_eq!(m.precision, None);
        assert_eq!(m.recall, Some(0.0));
        assert_eq!(m.f1, Some(0.0));
        assert_eq!(m.fpr, Some(0.0));
        let m = Confusion::default().metrics();
        assert_eq!((m.precision, m.recall, m.f1), (None, None, None));
    }
}
