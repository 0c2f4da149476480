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
    /// The area under the curve as [`average_precision`] takes it: how
    /// well the judge ranks the pairs, whatever threshold it runs at
    /// (`None` when no pair is labelled the same).
    pub average_precision: Option<f64>,
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

/// The average precision of `scores` against `labels`: the precision
/// reached at each distinct score, taken as the lowest score flagged,
/// weighted by the share of the same pairs it adds (pairs of equal score
/// enter together). 1.0 when every same pair scores above every other
/// one; the share of same pairs when the scores tell nothing. It does not
/// depend on a threshold, so two judges, or two feature sets, compare by
/// it without the luck of where each one's threshold fell. The same
/// figure as scikit-learn's `average_precision_score`. A score that is
/// not a number counts as the lowest. `None` when no pair is the same.
/// One sort, so it costs what the pairs' count does, unlike a sweep of
/// [`pr_point`] over every distinct score.
pub fn average_precision(scores: &[f32], labels: &[bool]) -> Option<f64> {
    // Only pairs with both a score and a label count.
    let pairs = scores.len().min(labels.len());
    let same = labels[..pairs].iter().filter(|same| **same).count();
    if same == 0 {
        return None;
    }
    let score = |at: usize| {
        let score = scores[at];
        if score.is_nan() {
            f32::NEG_INFINITY
        } else {
            score
        }
    };
    let mut order: Vec<usize> = (0..pairs).collect();
    order.sort_by(|&x, &y| score(y).total_cmp(&score(x)));
    let (mut flagged, mut found, mut sum) = (0usize, 0usize, 0.0f64);
    let mut at = 0;
    while at < order.len() {
        let mut next = at;
        let mut found_here = 0;
        while next < order.len() && score(order[next]) == score(order[at]) {
            found_here += usize::from(labels[order[next]]);
            next += 1;
        }
        flagged += next - at;
        found += found_here;
        sum += found_here as f64 * (found as f64 / flagged as f64);
        at = next;
    }
    Some(sum / same as f64)
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
        average_precision: average_precision(&scores, &labels),
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
        // The same pair has the higher cosine of the two held out.
        assert_eq!(curves.cosine.average_precision, Some(1.0));
    }

    #[test]
    fn average_precision_weighs_each_precision_by_the_recall_it_adds() {
        // Ranked: same, different, same, different. The first same pair
        // is found at precision 1, the second at 2/3: (1 + 2/3) / 2.
        let scores = [0.9, 0.8, 0.7, 0.6];
        let labels = [true, false, true, false];
        let ap = average_precision(&scores, &labels).expect("same pairs");
        assert!((ap - 5.0 / 6.0).abs() < 1e-12, "{ap}");
        // The order of the input does not matter, only the ranking.
        let ap_shuffled =
            average_precision(&[0.7, 0.6, 0.9, 0.8], &[true, false, true, false]).expect("same");
        assert!((ap_shuffled - ap).abs() < 1e-12);
        // Separated: 1, whatever the scale.
        assert_eq!(
            average_precision(&[0.3, 0.2, 0.1, 0.0], &[true, true, false, false]),
            Some(1.0)
        );
        // Reversed: the same pairs come last, at precision 1/3 and 2/4.
        let reversed = average_precision(&[0.0, 0.1, 0.2, 0.3], &[true, true, false, false])
            .expect("same pairs");
        assert!(
            (reversed - (1.0 / 3.0 + 0.5) / 2.0).abs() < 1e-12,
            "{reversed}"
        );
        // Nothing the same: undefined.
        assert_eq!(average_precision(&scores, &[false; 4]), None);
        // A label without a score does not count: the one same pair
        // scored is ranked first.
        assert_eq!(
            average_precision(&[0.9, 0.1], &[true, false, true]),
            Some(1.0)
        );
    }

    #[test]
    fn pairs_of_equal_score_enter_together_and_nan_counts_as_lowest() {
        // All tied: the precision of the whole set, the share of same pairs.
        let tied = average_precision(&[0.5; 4], &[true, false, false, false]).expect("one same");
        assert!((tied - 0.25).abs() < 1e-12, "{tied}");
        // A tie of a same and a different pair at the top enters at 1/2,
        // then the other same pair at 2/3: (1/2 + 2/3) / 2. (scikit-learn's
        // average_precision_score gives 0.5833 for these.)
        let ap = average_precision(&[0.9, 0.9, 0.5], &[true, false, true]).expect("same pairs");
        assert!((ap - (0.5 + 2.0 / 3.0) / 2.0).abs() < 1e-12, "{ap}");
        // A score that is not a number is ranked below every other.
        let with_nan =
            average_precision(&[f32::NAN, 0.1, 0.2], &[false, true, true]).expect("same pairs");
        assert_eq!(with_nan, 1.0);
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
