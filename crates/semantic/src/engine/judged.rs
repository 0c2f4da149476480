//! Asking the same-request judge about a detector's candidates.
//!
//! A detector collects, under its task's lock, the earlier texts whose
//! cosine with the new one is above the judge's candidate floor (at most
//! its bounded history); then, outside the lock, [`judge_candidates`]
//! asks the judge about each, embedding at most the two short residual
//! texts of a pair (cached by the service).

use std::sync::Arc;

use crate::error::Result;
use crate::judge::{SameRequestJudge, Verdict};
use crate::service::EmbeddingService;

/// An earlier text above the floor: its key, its cosine with the new text,
/// and the text.
pub(crate) type Candidate<K> = (K, f32, Arc<str>);

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
pub(crate) async fn judge_candidates<K>(
    judge: &SameRequestJudge,
    service: &EmbeddingService,
    text: &str,
    candidates: Vec<Candidate<K>>,
    threshold: f32,
) -> Result<Vec<Judged<K>>> {
    let mut same = Vec::new();
    for (key, cosine, earlier) in candidates {
        let verdict = judge
            .judge(service, &earlier, text, cosine, threshold)
            .await?;
        if verdict.same {
            same.push(Judged {
                key,
                cosine,
                text: earlier,
                verdict,
            });
        }
    }
    Ok(same)
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
