//! Asking the same-request judge about a detector's candidates.
//!
//! A detector collects, under its task's lock, the earlier texts whose
//! cosine with the new one is above the judge's candidate floor (at most
//! its bounded history); then, outside the lock, [`judge_candidates`]
//! asks the judge about each, embedding at most the two short residual
//! texts of a pair (cached by the service).

use std::sync::Arc;

use super::history::{History, Matcher, Probe};
use crate::error::Result;
use crate::judge::{JudgeKind, SameRequestJudge, Verdict};
use crate::service::EmbeddingService;

/// An earlier text above the floor: its key, its cosine with the new text,
/// and the text.
pub(crate) type Candidate<K> = (K, f32, Arc<str>);

/// How a detector tells "the same request": with the calibrated judge and
/// embeddings, the judge is asked about every earlier text above its
/// candidate floor (`service` is set); otherwise the cosine (or, without
/// embeddings, exact text) above the cosine threshold decides alone.
pub(crate) struct Deciding<'a> {
    /// The service the judge embeds residual texts with, when it judges.
    pub(crate) service: Option<&'a EmbeddingService>,
    /// The similarity above which an earlier text is a candidate.
    pub(crate) floor: f32,
}

/// How `judge` decides over `matcher` with `cosine_threshold` (the request
/// threshold of the event's task type).
pub(crate) fn deciding<'a>(
    judge: &SameRequestJudge,
    matcher: &'a Matcher,
    cosine_threshold: f32,
) -> Deciding<'a> {
    match (judge.kind(), matcher.service()) {
        (JudgeKind::Calibrated, Some(service)) => Deciding {
            service: Some(service),
            floor: judge.candidate_floor(cosine_threshold),
        },
        _ => Deciding {
            service: None,
            floor: cosine_threshold,
        },
    }
}

impl Deciding<'_> {
    /// The entries of `history` above the floor, oldest first; with their
    /// texts when the judge needs them (an empty text otherwise).
    pub(crate) fn candidates<K: Clone + PartialEq>(
        &self,
        history: &History<K>,
        probe: &Probe,
    ) -> Result<Vec<Candidate<K>>> {
        match self.service {
            Some(_) => history.all_above_with_texts(probe, self.floor),
            None => Ok(history
                .all_above(probe, self.floor)?
                .into_iter()
                .map(|(key, cosine)| (key, cosine, Arc::from("")))
                .collect()),
        }
    }
}

/// A candidate the judge called the same request, with its verdict.
#[derive(Debug, Clone)]
pub(crate) struct Judged<K> {
    pub(crate) key: K,
    pub(crate) cosine: f32,
    /// The earlier text.
    pub(crate) text: Arc<str>,
    pub(crate) verdict: Verdict,
}

/// The candidates `judge` calls the same request as `text` at
/// `threshold`, in the candidates' order (oldest first).
///
/// Two texts that both read as statements
/// ([`crate::judge::lexical::reads_as_statement`]: what an agent found or
/// did, not what it asks) are the same only when their cosine is also
/// above `cosine_threshold` (the request threshold): the
/// judge was fitted on requests, and two replies on one subject that say
/// different things ("the 2023 revenue was $3.7B", "no restatement
/// found") share most of their words. A reply repeated as it was, the
/// same broken page again, stays far above it.
pub(crate) async fn judge_candidates<K>(
    judge: &SameRequestJudge,
    service: &EmbeddingService,
    text: &str,
    candidates: Vec<Candidate<K>>,
    (threshold, cosine_threshold): (f32, f32),
) -> Result<Vec<Judged<K>>> {
    let text_states = judge.read(text).reads_as_statement();
    let candidates: Vec<Candidate<K>> = candidates
        .into_iter()
        .filter(|(_, cosine, earlier)| {
            !(text_states
                && *cosine <= cosine_threshold
                && judge.read(earlier).reads_as_statement())
        })
        .collect();
    // With a tuned encoder the candidates reach down to its floor; those
    // it does not lift over the judge's floor are dropped before their
    // words are compared (they could only be "different").
    let over = {
        let earlier: Vec<(&str, f32)> = candidates
            .iter()
            .map(|(_, cosine, earlier)| (&**earlier, *cosine))
            .collect();
        judge.over_the_floor(text, &earlier).await?
    };
    let candidates: Vec<Candidate<K>> = candidates
        .into_iter()
        .zip(over)
        .filter_map(|(candidate, over)| over.then_some(candidate))
        .collect();
    let earlier: Vec<(&str, f32)> = candidates
        .iter()
        .map(|(_, cosine, earlier)| (&**earlier, *cosine))
        .collect();
    // One call to the embedder for every candidate's residual texts.
    let verdicts = judge.judge_many(service, text, &earlier, threshold).await?;
    Ok(candidates
        .into_iter()
        .zip(verdicts)
        .filter(|(_, verdict)| verdict.same)
        .map(|((key, cosine, earlier), verdict)| Judged {
            key,
            cosine,
            text: earlier,
            verdict,
        })
        .collect())
}

/// The judged candidate with the highest score; on a tie, the newest.
pub(crate) fn best<K>(judged: &[Judged<K>]) -> Option<&Judged<K>> {
    judged
        .iter()
        .rev()
        .fold(None, |best, candidate| match best {
            Some(best) if best.verdict.score >= candidate.verdict.score => Some(best),
            _ => Some(candidate),
        })
}
