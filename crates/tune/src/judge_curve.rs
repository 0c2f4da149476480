//! The precision-recall curves of both same-request judges on the
//! held-out pairs: the cosine judge's (its threshold swept over the
//! cosine) and the calibrated judge's (swept over its score), each with
//! its operating point.

use loopguard_semantic::{Features, JudgeKind, JudgeWeights};
use serde::Serialize;

use crate::{PairSet, Split};

/// One point of a precision-recall curve.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CurvePoint {
    /// The threshold (strictly exceeded: "the same" above it).
    #[serde(serialize_with = "as_written")]
    pub threshold: f32,
    /// The share of flagged pairs that are the same.
    pub precision: f64,
    /// The share of the same pairs that are flagged.
    pub recall: f64,
}

/// One judge's curve and where it operates.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JudgeCurve {
    /// `cosine` or `calibrated`.
    pub judge: JudgeKind,
    /// The operating threshold.
    #[serde(serialize_with = "as_written")]
    pub threshold: f32,
    /// The curve at the operating threshold (`None` when nothing is
    /// flagged there, so precision is undefined).
    pub operating: Option<CurvePoint>,
    /// The curve, by rising threshold.
    pub points: Vec<CurvePoint>,
}

/// Both judges' curves on one set of pairs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JudgeCurves {
    /// Which pairs: `test` (the held-out split) or `all` (the file has no
    /// split).
    pub split: &'static str,
    /// How many pairs.
    pub pairs: usize,
    /// How many of them are labelled the same.
    pub same: usize,
    /// The cosine judge.
    pub cosine: JudgeCurve,
    /// The calibrated judge.
    pub calibrated: JudgeCurve,
}

/// An f32 as the number it reads as (0.85, not 0.8500000238418579).
fn as_written<S: serde::Serializer>(
    value: &f32,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    serializer.serialize_f64(format!("{value}").parse().unwrap_or(f64::from(*value)))
}

/// The precision-recall point at `threshold`: a pair is flagged when its
/// score is strictly above it. `None` when nothing is flagged or no pair
/// is labelled the same (precision or recall undefined).
pub fn pr_point(scores: &[f32], labels: &[bool], threshold: f32) -> Option<CurvePoint> {
    let (mut tp, mut fp, mut fn_) = (0u64, 0u64, 0u64);
    for (score, same) in scores.iter().zip(labels) {
        match (*score > threshold, *same) {
            (true, true) => tp += 1,
            (true, false) => fp += 1,
            (false, true) => fn_ += 1,
            (false, false) => {}
        }
    }
    if tp + fp == 0 || tp + fn_ == 0 {
        return None;
    }
    Some(CurvePoint {
        threshold,
        precision: tp as f64 / (tp + fp) as f64,
        recall: tp as f64 / (tp + fn_) as f64,
    })
}

/// The precision-recall curve of `scores` against `labels`: one point per
/// distinct score used as the threshold (every place the curve can move),
/// and one just below the lowest score (everything flagged), by rising
/// threshold. Points where nothing is flagged are left out.
pub fn pr_curve(scores: &[f32], labels: &[bool]) -> Vec<CurvePoint> {
    let mut thresholds: Vec<f32> = scores.iter().copied().filter(|s| s.is_finite()).collect();
    thresholds.sort_by(f32::total_cmp);
    thresholds.dedup();
    if let Some(&lowest) = thresholds.first() {
        thresholds.insert(0, lowest - 1e-3);
    }
    thresholds
        .into_iter()
        .filter_map(|threshold| pr_point(scores, labels, threshold))
        .collect()
}

/// Both judges' curves on the test split of `pairs` (every pair when none
/// is held out): the cosine judge operating at `cosine_threshold`, the
/// calibrated one scoring with `weights` at their own threshold.
/// `features` are the pairs' features, in the set's order.
pub fn judge_curves(
    pairs: &PairSet,
    features: &[Features],
    weights: &JudgeWeights,
    cosine_threshold: f32,
) -> JudgeCurves {
    let has_test = pairs.pairs.iter().any(|p| p.split == Split::Test);
    let kept: Vec<(bool, &Features)> = pairs
        .pairs
        .iter()
        .zip(features)
        .filter(|(pair, _)| !has_test || pair.split == Split::Test)
        .map(|(pair, features)| (pair.same, features))
        .collect();
    let labels: Vec<bool> = kept.iter().map(|(same, _)| *same).collect();
    let curve = |judge, scores: Vec<f32>, threshold| JudgeCurve {
        judge,
        threshold,
        operating: pr_point(&scores, &labels, threshold),
        points: pr_curve(&scores, &labels),
    };
    JudgeCurves {
        split: if has_test { "test" } else { "all" },
        pairs: kept.len(),
        same: labels.iter().filter(|same| **same).count(),
        cosine: curve(
            JudgeKind::Cosine,
            kept.iter().map(|(_, f)| f.cosine).collect(),
            cosine_threshold,
        ),
        calibrated: curve(
            JudgeKind::Calibrated,
            kept.iter().map(|(_, f)| weights.score(f)).collect(),
            weights.threshold,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_counts_strictly_above_the_threshold() {
        let scores = [0.9, 0.8, 0.7, 0.6];
        let labels = [true, false, true, false];
        let at = pr_point(&scores, &labels, 0.7).expect("two flagged");
        assert_eq!((at.precision, at.recall), (0.5, 0.5));
        let below = pr_point(&scores, &labels, 0.65).expect("three flagged");
        assert!((below.precision - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(below.recall, 1.0);
        assert_eq!(pr_point(&scores, &labels, 0.9), None, "nothing flagged");
        assert_eq!(
            pr_point(&scores, &[false; 4], 0.5),
            None,
            "nothing the same"
        );
    }

    #[test]
    fn the_curve_visits_every_distinct_score_from_all_flagged_up() {
        let scores = [0.9, 0.8, 0.8, 0.4];
        let labels = [true, true, false, false];
        let curve = pr_curve(&scores, &labels);
        let summary: Vec<(f64, f64)> = curve.iter().map(|p| (p.precision, p.recall)).collect();
        // All four flagged; then above 0.4: three; above 0.8: one; above
        // 0.9: none (left out).
        assert_eq!(
            summary,
            [(0.5, 1.0), (2.0 / 3.0, 1.0), (1.0, 0.5)],
            "{curve:?}"
        );
        assert!(curve.windows(2).all(|w| w[0].threshold < w[1].threshold));
        assert!(pr_curve(&[], &[]).is_empty());
    }

    #[test]
    fn the_curves_use_the_held_out_pairs_and_mark_each_operating_point() {
        let file = r#"
{"a": "x", "b": "y", "same": true, "split": "train"}
{"a": "x", "b": "y", "same": true, "split": "test"}
{"a": "x", "b": "y", "same": false, "split": "test"}
"#;
        let pairs =
            PairSet::parse(file.as_bytes(), std::path::Path::new("p.jsonl")).expect("pairs");
        let features: Vec<Features> = [0.3, 0.9, 0.6]
            .iter()
            .map(|&cosine| Features {
                cosine,
                contrast: loopguard_semantic::judge::compare("x", "y"),
                residuals: None,
                tuned_cosine: None,
            })
            .collect();
        let weights = JudgeWeights::shipped();
        let curves = judge_curves(&pairs, &features, &weights, 0.85);
        assert_eq!((curves.split, curves.pairs, curves.same), ("test", 2, 1));
        assert_eq!(curves.cosine.threshold, 0.85);
        // Above 0.85 only the 0.9 pair, which is the same.
        let operating = curves.cosine.operating.expect("one flagged");
        assert_eq!((operating.precision, operating.recall), (1.0, 1.0));
        assert_eq!(curves.calibrated.threshold, weights.threshold);
        assert_eq!(curves.calibrated.judge, JudgeKind::Calibrated);
    }

    #[test]
    fn a_separating_score_reaches_precision_and_recall_one() {
        let scores = [0.95, 0.9, 0.2, 0.1];
        let labels = [true, true, false, false];
        assert!(
            pr_curve(&scores, &labels)
                .iter()
                .any(|p| p.precision == 1.0 && p.recall == 1.0)
        );
    }
}
