//! Fitting and scoring the calibrated same-request judge on labelled pairs.
//!
//! [`judge_features`] computes every pair's [`Features`] (its cosine, its
//! lexical contrast and, where the judge needs it, the cosine of its
//! differing words, embedded once through the same disk cache as the
//! texts). [`fit_logistic`] fits the judge's weights on the train split
//! (plain logistic regression by gradient descent with a small L2 penalty:
//! a dozen features, a few hundred pairs). [`fit_and_score`] then sweeps
//! the decision threshold of the calibrated judge and of plain cosine,
//! picks each one's threshold on the train split, and scores both on the
//! test split. [`cross_validate`] fits and scores the judge on folds of the
//! train split, shuffle after shuffle.

use loopguard_semantic::{
    Embedder, FEATURE_NAMES, FEATURES, Features, FirstLook, JudgeKind, JudgeWeights, Residuals,
    SameRequestJudge, TUNED_FEATURE, TUNED_MODEL_ID,
};
use serde::Serialize;

use crate::random::SplitMix;
use crate::{
    Confusion, EmbedOptions, EmbedStats, Intervals, PairSet, Result, Split, TuneError, Vectors,
    bootstrap_intervals, embed_texts,
};

/// The features of every pair, in the pair set's order.
#[derive(Debug, Clone)]
pub struct PairFeatures {
    /// One per pair.
    pub features: Vec<Features>,
    /// What embedding the residual texts and templates cost.
    pub residual_stats: EmbedStats,
}

/// Computes each pair's features for the calibrated judge (`vectors` holds
/// the pairs' texts); the residual texts and templates are embedded with
/// `embedder` through `options`' cache.
pub fn judge_features(
    pairs: &PairSet,
    vectors: &Vectors,
    embedder: &dyn Embedder,
    options: &EmbedOptions,
) -> Result<PairFeatures> {
    // Weights do not matter for the features themselves.
    let judge = SameRequestJudge::calibrated(JudgeWeights::shipped());
    let mut looks = Vec::with_capacity(pairs.pairs.len());
    for pair in &pairs.pairs {
        let cosine = vectors.cosine(&pair.a, &pair.b).ok_or_else(|| {
            TuneError::Judge(format!("no vector for the pair on line {}", pair.line))
        })?;
        looks.push(judge.first_look(&pair.a, &pair.b, cosine, 0.5));
    }
    // Each pending pair's residual texts and templates.
    let residual_texts: Vec<String> = looks
        .iter()
        .filter_map(|look| match look {
            FirstLook::Pending(pending) => {
                let (ra, rb) = pending.residual_texts();
                let templates = pending.templates().into_iter();
                Some(
                    [ra, rb]
                        .into_iter()
                        .chain(templates.flat_map(|(ta, tb)| [ta.to_owned(), tb.to_owned()])),
                )
            }
            FirstLook::Decided(_) => None,
        })
        .flatten()
        .collect();
    let (residuals, residual_stats) = embed_texts(
        embedder,
        residual_texts.iter().map(String::as_str),
        options,
        &mut |_, _| {},
    )?;
    let features = looks
        .into_iter()
        .map(|look| match look {
            FirstLook::Decided(verdict) => verdict.features,
            FirstLook::Pending(pending) => {
                let (ra, rb) = pending.residual_texts();
                let (a, b) = pending.texts();
                let templates = match pending.templates() {
                    Some((ta, tb)) => match (residuals.get(ta), residuals.get(tb)) {
                        (Some(ta), Some(tb)) => Some(Some((&ta[..], &tb[..]))),
                        _ => None,
                    },
                    None => Some(None),
                };
                let found = (
                    (residuals.get(&ra), residuals.get(&rb)),
                    (vectors.get(a), vectors.get(b)),
                    templates,
                );
                let cosines = match found {
                    ((Some(ra), Some(rb)), (Some(a), Some(b)), Some(templates)) => {
                        Residuals::of((ra, rb), (a, b), templates).ok()
                    }
                    _ => None,
                };
                pending.finish(cosines).features
            }
        })
        .collect();
    Ok(PairFeatures {
        features,
        residual_stats,
    })
}

/// Sets each pair's `tuned_cosine` from `tuned` (the pairs' texts embedded
/// by the tuned encoder): the 15th feature, for a fit with the tuned
/// encoder.
pub fn add_tuned_cosines(
    pairs: &PairSet,
    features: &mut [Features],
    tuned: &Vectors,
) -> Result<()> {
    for (pair, features) in pairs.pairs.iter().zip(features.iter_mut()) {
        let cosine = tuned.cosine(&pair.a, &pair.b).ok_or_else(|| {
            TuneError::Judge(format!(
                "no tuned encoder vector for the pair on line {}",
                pair.line
            ))
        })?;
        features.tuned_cosine = Some(cosine);
    }
    Ok(())
}

/// Weights at threshold 0.5 from a fit; they name the tuned encoder when
/// they weigh its cosine (a fit whose pairs have no `tuned_cosine` leaves
/// that weight at 0: its column is all zeros).
fn fitted_weights(model: String, fitted_on: String, bias: f32, weights: Vec<f32>) -> JudgeWeights {
    let tuned = weights.get(TUNED_FEATURE).is_some_and(|w| *w != 0.0);
    JudgeWeights {
        format: 1,
        model,
        fitted_on,
        bias,
        weights,
        threshold: 0.5,
        tuned_encoder: tuned.then(|| TUNED_MODEL_ID.to_owned()),
        // The cut-offs the features were computed with (`judge_features`).
        cutoffs: JudgeWeights::shipped().cutoffs,
    }
}

/// Fits a logistic model to `rows` (feature vectors) and `labels` by
/// gradient descent on the mean log-loss plus `l2` times the squared
/// weights (not the bias). Returns the bias and the weights.
pub fn fit_logistic(rows: &[[f32; FEATURES]], labels: &[bool], l2: f64) -> (f32, Vec<f32>) {
    let n = rows.len().max(1) as f64;
    let mut bias = 0.0f64;
    let mut weights = [0.0f64; FEATURES];
    let rate = 1.0;
    for _ in 0..20_000 {
        let mut grad_bias = 0.0;
        let mut grad = [0.0f64; FEATURES];
        for (row, label) in rows.iter().zip(labels) {
            let z = bias
                + weights
                    .iter()
                    .zip(row)
                    .map(|(w, x)| w * f64::from(*x))
                    .sum::<f64>();
            let p = 1.0 / (1.0 + (-z).exp());
            let error = p - f64::from(u8::from(*label));
            grad_bias += error;
            for (g, x) in grad.iter_mut().zip(row) {
                *g += error * f64::from(*x);
            }
        }
        bias -= rate * grad_bias / n;
        for (w, g) in weights.iter_mut().zip(grad) {
            *w -= rate * (g / n + 2.0 * l2 * *w);
        }
    }
    (bias as f32, weights.iter().map(|w| *w as f32).collect())
}

/// The calibrated judge cross-validated on the train split: how well the
/// features and the fitting generalize, with less luck than one held-out
/// split of a hundred-odd pairs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CrossValidation {
    /// Folds per shuffle.
    pub folds: usize,
    /// Shuffles.
    pub repeats: usize,
    /// Train pairs.
    pub pairs: usize,
    /// The precision floor of the threshold choice.
    pub min_precision: f64,
    /// Per shuffle: the best F1 of the out-of-fold scores over the
    /// thresholds whose precision reaches the floor (the best F1 overall
    /// when none does).
    pub f1: Vec<f64>,
    /// Their mean.
    pub f1_mean: f64,
    /// Their standard deviation (over the shuffles).
    pub f1_sd: f64,
    /// Per shuffle: the threshold that best F1 was found at.
    pub thresholds: Vec<f32>,
    /// Per shuffle: the average precision of the out-of-fold scores
    /// ([`crate::average_precision`]), which no threshold choice moves.
    pub average_precision: Vec<f64>,
    /// Their mean.
    pub average_precision_mean: f64,
}

/// Cross-validates the calibrated judge on the train split of `pairs`:
/// `repeats` shuffles, each cut into `folds` folds with the same share of
/// same-request pairs; the judge is fitted as [`fit_and_score`] fits it on
/// all folds but one and scores the one left out (the candidate floor
/// applies). Each shuffle's figure is the best F1 of its out-of-fold
/// scores at a precision of at least `min_precision`.
pub fn cross_validate(
    pairs: &PairSet,
    features: &[Features],
    folds: usize,
    repeats: usize,
    min_precision: f64,
) -> Result<CrossValidation> {
    let train: Vec<usize> = (0..pairs.pairs.len())
        .filter(|&i| pairs.pairs[i].split == Split::Train)
        .collect();
    let same = train.iter().filter(|&&i| pairs.pairs[i].same).count();
    if folds < 2 || repeats == 0 || same < folds || train.len() - same < folds {
        return Err(TuneError::Judge(format!(
            "cross-validation needs at least 2 folds, 1 shuffle, and as many pairs of each \
             label in the train split as folds ({folds} folds; {same} same, {} different)",
            train.len() - same
        )));
    }
    let labels: Vec<bool> = train.iter().map(|&i| pairs.pairs[i].same).collect();
    let rows: Vec<[f32; FEATURES]> = train.iter().map(|&i| features[i].vector()).collect();
    let grid: Vec<f32> = (1..100).map(|i| i as f32 / 100.0).collect();
    let everything = vec![true; train.len()];
    let mut f1 = Vec::with_capacity(repeats);
    let mut thresholds = Vec::with_capacity(repeats);
    let mut average_precision = Vec::with_capacity(repeats);
    for repeat in 0..repeats {
        let mut random = SplitMix(repeat as u64 + 1);
        // Stratified: each label's pairs dealt round the folds in a
        // shuffled order.
        let mut fold_of = vec![0usize; train.len()];
        for label in [true, false] {
            let mut members: Vec<usize> =
                (0..train.len()).filter(|&k| labels[k] == label).collect();
            random.shuffle(&mut members);
            for (at, k) in members.into_iter().enumerate() {
                fold_of[k] = at % folds;
            }
        }
        let mut out_of_fold = vec![0.0f32; train.len()];
        for fold in 0..folds {
            let (fit_rows, fit_labels): (Vec<[f32; FEATURES]>, Vec<bool>) = (0..train.len())
                .filter(|&k| fold_of[k] != fold)
                .map(|k| (rows[k], labels[k]))
                .unzip();
            let (bias, weights) = fit_logistic(&fit_rows, &fit_labels, 1e-3);
            let fitted = fitted_weights(String::new(), String::new(), bias, weights);
            for k in (0..train.len()).filter(|&k| fold_of[k] == fold) {
                out_of_fold[k] = fitted.score(&features[train[k]]);
            }
        }
        let (threshold, _) =
            choose_threshold(&out_of_fold, &labels, &everything, &grid, min_precision);
        let metrics = confusion(&out_of_fold, &labels, &everything, threshold).metrics();
        f1.push(metrics.f1.unwrap_or(0.0));
        thresholds.push(threshold);
        // Every fold holds a same pair, so the train split has one.
        average_precision.push(crate::average_precision(&out_of_fold, &labels).unwrap_or(0.0));
    }
    let average_precision_mean =
        average_precision.iter().sum::<f64>() / average_precision.len() as f64;
    let mean = f1.iter().sum::<f64>() / f1.len() as f64;
    let sd = (f1.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / f1.len() as f64).sqrt();
    Ok(CrossValidation {
        folds,
        repeats,
        pairs: train.len(),
        min_precision,
        f1,
        f1_mean: mean,
        f1_sd: sd,
        thresholds,
        average_precision,
        average_precision_mean,
    })
}

/// One judge's scores on one pair set.
#[derive(Debug, Clone, Serialize)]
pub struct JudgeScore {
    /// `cosine` or `calibrated`.
    pub judge: JudgeKind,
    /// The decision threshold (chosen on the train split, or given).
    pub threshold: f32,
    /// Counts at that threshold on the train split (absent when a judge
    /// is only scored, `tune judge eval`); [`Confusion::metrics`] scores
    /// them.
    pub train: Option<Confusion>,
    /// Counts on the test split (or on every pair, when a judge is only
    /// scored on a file without splits).
    pub test: Confusion,
    /// How sure the test figures are: their 90% bootstrap intervals
    /// ([`bootstrap_intervals`]); absent when there is no test pair.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test_intervals: Option<Intervals>,
    /// Precision and recall at every swept threshold on the train split,
    /// for the PR curve.
    pub curve: Vec<(f32, f64, f64)>,
}

/// One labelled pair as a judge saw it: its verdict, its score and what
/// decided.
#[derive(Debug, Clone, Serialize)]
pub struct JudgedPair {
    /// Its line in the pairs file.
    pub line: u64,
    /// The first text.
    pub a: String,
    /// The second text.
    pub b: String,
    /// The label.
    pub same: bool,
    /// The pair's hard case (its `hard` field), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hard: Option<String>,
    /// The judge's verdict: the same request.
    pub said_same: bool,
    /// The judge's score (the cosine, for the cosine judge).
    pub score: f32,
    /// The cosine.
    pub cosine: f32,
    /// What the judge saw, in words.
    pub reason: String,
}

impl JudgedPair {
    /// Whether the verdict is not the label.
    pub fn is_mistake(&self) -> bool {
        self.same != self.said_same
    }
}

/// The counts of `judged`, hard case by hard case (the pairs' `hard`
/// field, `-` for pairs without one, first): empty when no pair has one.
pub fn judged_by_hard(judged: &[JudgedPair]) -> Vec<(String, Confusion)> {
    if judged.iter().all(|pair| pair.hard.is_none()) {
        return Vec::new();
    }
    let mut groups: std::collections::BTreeMap<&str, Confusion> = std::collections::BTreeMap::new();
    for pair in judged {
        groups
            .entry(pair.hard.as_deref().unwrap_or("-"))
            .or_insert_with(Confusion::of_pairs)
            .record(pair.same, pair.said_same);
    }
    let mut found: Vec<(String, Confusion)> = groups
        .into_iter()
        .map(|(hard, counts)| (hard.to_owned(), counts))
        .collect();
    // The pairs without a hard case first.
    found.sort_by_key(|(hard, _)| hard != "-");
    found
}

/// The mistakes among `judged`, worst first: the farthest from
/// `threshold` (a confident mistake before a near miss).
pub fn mistakes_worst_first<'a>(
    judged: impl IntoIterator<Item = &'a JudgedPair>,
    threshold: f32,
) -> Vec<&'a JudgedPair> {
    let mut mistakes: Vec<&JudgedPair> = judged
        .into_iter()
        .filter(|pair| pair.is_mistake())
        .collect();
    let distance = |pair: &JudgedPair| (pair.score - threshold).abs();
    mistakes.sort_by(|x, y| distance(y).total_cmp(&distance(x)));
    mistakes
}

/// The outcome of `loopguard tune judge fit`.
#[derive(Debug, Clone, Serialize)]
pub struct JudgeReport {
    /// The fitted weights (with their chosen threshold).
    pub weights: JudgeWeights,
    /// The calibrated judge.
    pub calibrated: JudgeScore,
    /// Plain cosine, for comparison.
    pub cosine: JudgeScore,
    /// The feature names, in the weights' order.
    pub feature_names: Vec<&'static str>,
    /// The calibrated judge's mistakes on the test split, worst first.
    pub mistakes: Vec<JudgedPair>,
    /// Every pair's line, label, split and features, for analysis.
    pub pairs: Vec<(u64, bool, bool, Vec<f32>)>,
    /// Train pair count.
    pub train_pairs: usize,
    /// Test pair counts.
    pub test_pairs: usize,
    /// Both judges on the test split, hard case by hard case (the pairs'
    /// `hard` field, `-` for pairs without one); empty when no pair says.
    pub held_out_by_hard: Vec<HardCaseScore>,
}

/// Both judges, at their thresholds, on the held-out pairs of one hard
/// case.
#[derive(Debug, Clone, Serialize)]
pub struct HardCaseScore {
    /// The pairs' `hard` value, `-` for pairs without one.
    pub hard: String,
    /// How many held-out pairs it has.
    pub pairs: usize,
    /// The calibrated judge's counts.
    pub calibrated: Confusion,
    /// The cosine judge's counts.
    pub cosine: Confusion,
}

/// The held-out pairs' counts for each hard case, both judges at their
/// thresholds; empty when no pair has a `hard` field.
fn held_out_by_hard(
    pairs: &PairSet,
    labels: &[bool],
    (calibrated, calibrated_threshold): (&[f32], f32),
    (cosine, cosine_threshold): (&[f32], f32),
) -> Vec<HardCaseScore> {
    if pairs.pairs.iter().all(|pair| pair.hard.is_none()) {
        return Vec::new();
    }
    // Each pair's group, `None` for a train pair.
    let group_of: Vec<Option<&str>> = pairs
        .pairs
        .iter()
        .map(|pair| (pair.split == Split::Test).then(|| pair.hard.as_deref().unwrap_or("-")))
        .collect();
    let mut groups: Vec<&str> = group_of
        .iter()
        .flatten()
        .copied()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    // The pairs without a hard case first.
    groups.sort_by_key(|name| *name != "-");
    groups
        .into_iter()
        .map(|name| {
            let keep: Vec<bool> = group_of.iter().map(|group| *group == Some(name)).collect();
            HardCaseScore {
                pairs: keep.iter().filter(|k| **k).count(),
                calibrated: confusion(calibrated, labels, &keep, calibrated_threshold),
                cosine: confusion(cosine, labels, &keep, cosine_threshold),
                hard: name.to_owned(),
            }
        })
        .collect()
}

/// The score of `features` under each judge: the cosine, and the
/// calibrated score under `weights`.
fn scores(features: &[Features], weights: &JudgeWeights) -> (Vec<f32>, Vec<f32>) {
    (
        features.iter().map(|f| f.cosine).collect(),
        features.iter().map(|f| weights.score(f)).collect(),
    )
}

/// The values `keep` selects, in order.
fn kept<T: Copy>(values: &[T], keep: &[bool]) -> Vec<T> {
    values
        .iter()
        .zip(keep)
        .filter(|(_, keep)| **keep)
        .map(|(value, _)| *value)
        .collect()
}

/// Counts at `threshold` (strictly exceeded) over the pairs `keep` selects.
fn confusion(scores: &[f32], labels: &[bool], keep: &[bool], threshold: f32) -> Confusion {
    let mut counts = Confusion::of_pairs();
    for ((score, label), keep) in scores.iter().zip(labels).zip(keep) {
        if *keep {
            counts.record(*label, *score > threshold);
        }
    }
    counts
}

/// The threshold with the best F1 among those whose precision reaches
/// `min_precision` (the best F1 overall when none does), over the pairs
/// `keep` selects, and the PR curve there.
fn choose_threshold(
    scores: &[f32],
    labels: &[bool],
    keep: &[bool],
    candidates: &[f32],
    min_precision: f64,
) -> (f32, Vec<(f32, f64, f64)>) {
    let mut curve = Vec::new();
    let mut best: Option<(bool, f64, f32)> = None;
    for &threshold in candidates {
        let metrics = confusion(scores, labels, keep, threshold).metrics();
        let (precision, recall, f1) = (
            metrics.precision.unwrap_or(0.0),
            metrics.recall.unwrap_or(0.0),
            metrics.f1.unwrap_or(0.0),
        );
        curve.push((threshold, precision, recall));
        let candidate = (precision >= min_precision, f1, threshold);
        let better = match best {
            None => true,
            Some((meets, f1, _)) => (candidate.0, candidate.1) > (meets, f1),
        };
        if better {
            best = Some(candidate);
        }
    }
    (best.map_or(0.5, |(_, _, threshold)| threshold), curve)
}

/// Fits the calibrated judge on the train split of `pairs` and scores it
/// next to plain cosine on the test split. Each judge's threshold is the
/// one with the best train F1 at a train precision of at least
/// `min_precision`.
pub fn fit_and_score(
    pairs: &PairSet,
    features: &[Features],
    model: &str,
    fitted_on: &str,
    min_precision: f64,
) -> Result<JudgeReport> {
    let labels: Vec<bool> = pairs.pairs.iter().map(|pair| pair.same).collect();
    let train: Vec<bool> = pairs
        .pairs
        .iter()
        .map(|p| p.split == Split::Train)
        .collect();
    let test: Vec<bool> = train.iter().map(|t| !t).collect();
    let rows: Vec<[f32; FEATURES]> = features
        .iter()
        .zip(&train)
        .filter(|(_, keep)| **keep)
        .map(|(f, _)| f.vector())
        .collect();
    let row_labels = kept(&labels, &train);
    if rows.is_empty() || !row_labels.iter().any(|l| *l) || row_labels.iter().all(|l| *l) {
        return Err(TuneError::Judge(
            "the train split needs pairs labelled the same and pairs labelled different".into(),
        ));
    }
    let (bias, weights) = fit_logistic(&rows, &row_labels, 1e-3);
    let mut fitted = fitted_weights(model.to_owned(), fitted_on.to_owned(), bias, weights);
    let (cosine_scores, calibrated_scores) = scores(features, &fitted);
    let score_grid: Vec<f32> = (1..100).map(|i| i as f32 / 100.0).collect();
    let (calibrated_threshold, calibrated_curve) = choose_threshold(
        &calibrated_scores,
        &labels,
        &train,
        &score_grid,
        min_precision,
    );
    fitted.threshold = calibrated_threshold;
    let cosine_grid: Vec<f32> = (30..100).map(|i| i as f32 / 100.0).collect();
    let (cosine_threshold, cosine_curve) =
        choose_threshold(&cosine_scores, &labels, &train, &cosine_grid, min_precision);
    let held_out_labels = kept(&labels, &test);
    let judge_score = |judge, scores: &[f32], threshold, curve| {
        let verdicts: Vec<bool> = kept(scores, &test)
            .into_iter()
            .map(|score| score > threshold)
            .collect();
        JudgeScore {
            judge,
            threshold,
            train: Some(confusion(scores, &labels, &train, threshold)),
            test: confusion(scores, &labels, &test, threshold),
            test_intervals: bootstrap_intervals(&held_out_labels, &verdicts),
            curve,
        }
    };
    let judge = SameRequestJudge::calibrated(fitted.clone());
    let judged: Vec<JudgedPair> = pairs
        .pairs
        .iter()
        .zip(features)
        .zip(&calibrated_scores)
        .filter(|((pair, _), score)| {
            pair.split == Split::Test && (**score > calibrated_threshold) != pair.same
        })
        .map(|((pair, features), score)| {
            judged_pair(pair, features, &judge, *score, calibrated_threshold)
        })
        .collect();
    let mistakes = mistakes_worst_first(&judged, calibrated_threshold)
        .into_iter()
        .cloned()
        .collect();
    let analysed = pairs
        .pairs
        .iter()
        .zip(features)
        .map(|(pair, f)| {
            (
                pair.line,
                pair.same,
                pair.split == Split::Test,
                f.vector().to_vec(),
            )
        })
        .collect();
    Ok(JudgeReport {
        pairs: analysed,
        mistakes,
        calibrated: judge_score(
            JudgeKind::Calibrated,
            &calibrated_scores,
            calibrated_threshold,
            calibrated_curve,
        ),
        cosine: judge_score(
            JudgeKind::Cosine,
            &cosine_scores,
            cosine_threshold,
            cosine_curve,
        ),
        held_out_by_hard: held_out_by_hard(
            pairs,
            &labels,
            (&calibrated_scores, calibrated_threshold),
            (&cosine_scores, cosine_threshold),
        ),
        weights: fitted,
        feature_names: FEATURE_NAMES.to_vec(),
        train_pairs: train.iter().filter(|t| **t).count(),
        test_pairs: test.iter().filter(|t| **t).count(),
    })
}

/// `pair` as `judge` scored it: `score` against `threshold`.
fn judged_pair(
    pair: &crate::Pair,
    features: &Features,
    judge: &SameRequestJudge,
    score: f32,
    threshold: f32,
) -> JudgedPair {
    JudgedPair {
        line: pair.line,
        a: pair.a.clone(),
        b: pair.b.clone(),
        same: pair.same,
        hard: pair.hard.clone(),
        said_same: score > threshold,
        score,
        cosine: features.cosine,
        reason: judge_reason(judge, features, score, threshold),
    }
}

/// The judge's reason for a pair it scored `score`.
fn judge_reason(
    judge: &SameRequestJudge,
    features: &Features,
    score: f32,
    threshold: f32,
) -> String {
    reason_in_full(&judge.verdict(features.clone(), score, threshold))
}

/// A verdict's reason and, for the calibrated judge, the residual and the
/// differing words it weighed.
pub(crate) fn reason_in_full(verdict: &loopguard_semantic::Verdict) -> String {
    if verdict.judge == JudgeKind::Cosine {
        return verdict.reason();
    }
    let features = &verdict.features;
    let residual = features.residuals.map_or_else(
        || "-".to_owned(),
        |r| format!("{:.2} (cross {:.2} {:.2})", r.between, r.a_to_b, r.b_to_a),
    );
    format!(
        "{}; residual {residual}; differing {:?} / {:?}",
        verdict.reason(),
        features.contrast.only_a,
        features.contrast.only_b
    )
}

/// The pairs an evaluation scores (the test split, or every pair when the
/// set has no test rows), in the file's order, as `judge` at `threshold`
/// sees them: verdict, score and reason. [`judged_score`] counts them.
pub fn judged_pairs(
    pairs: &PairSet,
    features: &[Features],
    judge: &SameRequestJudge,
    threshold: f32,
) -> Vec<JudgedPair> {
    let has_test = pairs.pairs.iter().any(|p| p.split == Split::Test);
    pairs
        .pairs
        .iter()
        .zip(features)
        .filter(|(pair, _)| !has_test || pair.split == Split::Test)
        .map(|(pair, features)| {
            judged_pair(pair, features, judge, judge.score(features), threshold)
        })
        .collect()
}

/// The score of `judge` at `threshold` over the pairs it judged
/// ([`judged_pairs`]), fitting nothing.
pub fn judged_score(judge: JudgeKind, threshold: f32, judged: &[JudgedPair]) -> JudgeScore {
    let mut test = Confusion::of_pairs();
    for pair in judged {
        test.record(pair.same, pair.said_same);
    }
    let labels: Vec<bool> = judged.iter().map(|pair| pair.same).collect();
    let verdicts: Vec<bool> = judged.iter().map(|pair| pair.said_same).collect();
    JudgeScore {
        judge,
        threshold,
        train: None,
        test,
        test_intervals: bootstrap_intervals(&labels, &verdicts),
        curve: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logistic_regression_separates_a_separable_set() {
        // Label = first feature above 0.5.
        let rows: Vec<[f32; FEATURES]> = (0..40)
            .map(|i| {
                let mut row = [0.0; FEATURES];
                row[0] = i as f32 / 40.0;
                row
            })
            .collect();
        let labels: Vec<bool> = rows.iter().map(|row| row[0] > 0.5).collect();
        let (bias, weights) = fit_logistic(&rows, &labels, 0.0);
        assert!(weights[0] > 0.0, "{weights:?}");
        let predicted: Vec<bool> = rows
            .iter()
            .map(|row| bias + weights[0] * row[0] > 0.0)
            .collect();
        let wrong = predicted
            .iter()
            .zip(&labels)
            .filter(|(p, l)| p != l)
            .count();
        assert!(wrong <= 2, "{wrong} wrong");
    }

    /// Features of a pair with nothing but its cosine to tell.
    fn cosine_only(cosine: f32) -> Features {
        Features {
            cosine,
            contrast: loopguard_semantic::judge::compare("x", "y"),
            residuals: None,
            tuned_cosine: None,
        }
    }

    /// The pairs of a pair file's text.
    fn parse(file: &str) -> PairSet {
        PairSet::parse(file.as_bytes(), std::path::Path::new("p.jsonl")).expect("pairs")
    }

    /// `n` train pairs with features that say the label through the
    /// cosine (`informative`) or not at all.
    fn pair_set(n: usize, informative: bool) -> (PairSet, Vec<Features>) {
        let mut file = String::new();
        let mut features = Vec::new();
        for i in 0..n {
            let same = i % 2 == 0;
            file.push_str(&format!(
                "{{\"a\": \"a{i}\", \"b\": \"b{i}\", \"same\": {same}, \"split\": \"train\"}}\n"
            ));
            // Above the candidate floor either way; the label decides the
            // cosine only when informative.
            let jitter = (i % 7) as f32 / 100.0;
            let cosine = match (informative, same) {
                (true, true) => 0.9 + jitter,
                (true, false) => 0.55 + jitter,
                (false, _) => 0.6 + ((i / 2) % 5) as f32 / 20.0,
            };
            features.push(cosine_only(cosine));
        }
        (parse(&file), features)
    }

    #[test]
    fn held_out_pairs_are_scored_hard_case_by_hard_case() {
        let (train, mut features) = pair_set(40, true);
        let mut file = String::new();
        for pair in &train.pairs {
            file.push_str(&format!(
                "{{\"a\": \"{}\", \"b\": \"{}\", \"same\": {}}}\n",
                pair.a, pair.b, pair.same
            ));
        }
        // Held out: 4 pairs with no hard case, read right by the cosine;
        // 4 "long" ones whose two different pairs look like repeats.
        for (i, (same, hard, cosine)) in [
            (true, None, 0.92),
            (true, None, 0.93),
            (false, None, 0.56),
            (false, None, 0.57),
            (true, Some("long"), 0.92),
            (true, Some("long"), 0.93),
            (false, Some("long"), 0.92),
            (false, Some("long"), 0.93),
        ]
        .into_iter()
        .enumerate()
        {
            let hard = hard.map_or_else(String::new, |h| format!(", \"hard\": \"{h}\""));
            file.push_str(&format!(
                "{{\"a\": \"t{i}\", \"b\": \"u{i}\", \"same\": {same}, \"split\": \"test\"{hard}}}\n"
            ));
            features.push(cosine_only(cosine));
        }
        let pairs = parse(&file);
        let report = fit_and_score(&pairs, &features, "m", "p", 0.9).expect("fitted");
        let cases: Vec<(&str, usize, u64, u64, u64)> = report
            .held_out_by_hard
            .iter()
            .map(|case| {
                let c = &case.calibrated;
                (case.hard.as_str(), case.pairs, c.tp, c.fp, c.fn_)
            })
            .collect();
        assert_eq!(
            cases,
            [("-", 4, 2, 0, 0), ("long", 4, 2, 2, 0)],
            "{report:?}"
        );
        // No pair names a hard case: no breakdown.
        let (mut plain, features) = pair_set(40, true);
        for pair in plain.pairs.iter_mut().take(8) {
            pair.split = Split::Test;
        }
        let report = fit_and_score(&plain, &features, "m", "p", 0.9).expect("fitted");
        assert!(report.held_out_by_hard.is_empty(), "{report:?}");
    }

    #[test]
    fn cross_validation_finds_a_telling_feature_and_not_a_mute_one() {
        let (pairs, features) = pair_set(40, true);
        let telling = cross_validate(&pairs, &features, 5, 3, 0.9).expect("cross-validated");
        assert_eq!((telling.folds, telling.repeats, telling.pairs), (5, 3, 40));
        assert_eq!(telling.f1, vec![1.0; 3], "{telling:?}");
        assert_eq!(telling.f1_sd, 0.0);
        // A feature that separates the labels ranks them perfectly.
        assert_eq!(telling.average_precision, vec![1.0; 3], "{telling:?}");
        assert_eq!(telling.average_precision_mean, 1.0);
        // One threshold per shuffle, on the grid the scores are swept on.
        assert_eq!(telling.thresholds.len(), 3, "{telling:?}");
        assert!(
            telling.thresholds.iter().all(|t| (0.01..=0.99).contains(t)),
            "{telling:?}"
        );
        let (pairs, features) = pair_set(40, false);
        let mute = cross_validate(&pairs, &features, 5, 3, 0.9).expect("cross-validated");
        assert!(mute.f1_mean < 0.8, "{mute:?}");
        assert!(mute.average_precision_mean < 0.8, "{mute:?}");
        // The same shuffles every run.
        assert_eq!(
            mute,
            cross_validate(&pairs, &features, 5, 3, 0.9).expect("again")
        );
    }

    #[test]
    fn cross_validation_needs_folds_and_pairs_of_each_label() {
        let (pairs, features) = pair_set(6, true);
        let err = cross_validate(&pairs, &features, 5, 1, 0.9).expect_err("3 of each, 5 folds");
        assert!(
            err.to_string().contains("5 folds; 3 same, 3 different"),
            "{err}"
        );
        assert!(cross_validate(&pairs, &features, 1, 1, 0.9).is_err());
    }
}
