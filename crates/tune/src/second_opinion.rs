//! Scoring the calibrated judge with its second opinion on labelled pairs:
//! what an LLM (or any [`loopguard_semantic::SecondOpinion`]) adds on the
//! pairs the judge is unsure of, next to the judge alone.

use futures_util::StreamExt;
use loopguard_semantic::{Features, SameRequestJudge, SecondOpinionStats, Verdict};
use serde::Serialize;

use crate::{Confusion, JudgedPair, PairSet, Split};

/// Second opinions asked at once.
const CONCURRENT_ASKS: usize = 4;

/// The judge alone and with its second opinion, on the same pairs.
#[derive(Debug, Clone, Serialize)]
pub struct SecondOpinionScore {
    /// Who gave the second opinion.
    pub by: String,
    /// The pairs scored (the test split, or every pair).
    pub pairs: u64,
    /// The judge alone.
    pub judge_alone: Confusion,
    /// The judge, with the second opinion deciding the pairs it was asked
    /// about and answered.
    pub with_second_opinion: Confusion,
    /// How often it was wanted, answered, failed, and turned a verdict
    /// over.
    #[serde(skip)]
    pub stats: SecondOpinionStats,
    /// The first failure's message, when any pair got no answer.
    pub first_error: Option<String>,
    /// Every pair scored, in the file's order, with the final verdict and
    /// its reason (which names who decided and what the judge had said).
    #[serde(skip)]
    pub judged: Vec<JudgedPair>,
}

/// Scores `judge` (which has a second opinion, and is calibrated) at
/// `threshold` on `pairs` (on the test split, or on every pair when the
/// set has none), alone and with its second opinion. A pair the second
/// opinion fails on keeps the judge's verdict in both counts, as it would
/// in a running engine.
pub async fn evaluate_with_second_opinion(
    pairs: &PairSet,
    features: &[Features],
    judge: &SameRequestJudge,
    threshold: f32,
) -> SecondOpinionScore {
    let has_test = pairs.pairs.iter().any(|p| p.split == Split::Test);
    let kept: Vec<(&crate::Pair, &Features)> = pairs
        .pairs
        .iter()
        .zip(features)
        .filter(|(pair, _)| !has_test || pair.split == Split::Test)
        .collect();
    let reviews = kept.iter().map(|&(pair, features)| {
        let verdict = judge.verdict(features.clone(), judge.score(features), threshold);
        async move {
            let alone = verdict.same;
            let reviewed = judge.review(&pair.a, &pair.b, verdict).await;
            (pair, alone, reviewed)
        }
    });
    let results: Vec<(&crate::Pair, bool, Verdict)> = futures_util::stream::iter(reviews)
        .buffered(CONCURRENT_ASKS)
        .collect()
        .await;
    let mut judge_alone = Confusion::of_pairs();
    let mut with_second_opinion = judge_alone;
    let mut first_error = None;
    for (pair, alone, reviewed) in &results {
        judge_alone.record(pair.same, *alone);
        with_second_opinion.record(pair.same, reviewed.same);
        if let Some(loopguard_semantic::SecondOpinionOutcome::Failed { error, .. }) =
            &reviewed.second_opinion
        {
            first_error.get_or_insert_with(|| error.clone());
        }
    }
    SecondOpinionScore {
        by: judge
            .second_opinion()
            .map(|(by, _)| by)
            .unwrap_or_else(|| "no second opinion".to_owned()),
        pairs: results.len() as u64,
        judge_alone,
        with_second_opinion,
        stats: judge.second_opinion_stats().unwrap_or_default(),
        first_error,
        judged: results
            .iter()
            .map(|(pair, _, reviewed)| JudgedPair {
                line: pair.line,
                a: pair.a.clone(),
                b: pair.b.clone(),
                same: pair.same,
                hard: pair.hard.clone(),
                said_same: reviewed.same,
                score: reviewed.score,
                cosine: reviewed.features.cosine,
                reason: crate::judge_fit::reason_in_full(reviewed),
            })
            .collect(),
    }
}
