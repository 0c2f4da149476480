//! Collaboration loops: the same request from one agent to another, again
//! (Decision 74; kind `collaboration_loop`).
//!
//! A `collaboration` event whose `request` the same-request judge
//! (`similarity.judge`) calls the same as an earlier request of the same
//! task, from the same agent to the same agent, is one detection. With the
//! cosine judge, the same is a cosine strictly above the request threshold
//! (`similarity.request_threshold_for(task_type)`); with the calibrated
//! judge (the default), the judge's score strictly above its threshold
//! (`SameRequestJudge::threshold_for`), asked only about the earlier
//! requests whose cosine is above its candidate floor, outside the task's
//! lock. The engine counts it as one loop of
//! the task (a loop-feeding kind: ruling 4), and sets its severity and
//! action from the task's loop count (ruling 11): the 3rd loop takes the
//! task to the human gate.
//!
//! - Unrelated requests between the same pair never count, however many.
//! - The same request to another agent is another pair: not a repeat.
//! - The detection cites the best match (the highest cosine, or with the
//!   calibrated judge the highest score): `similarity` (the cosine),
//!   `threshold` (the cosine's or the judge's), `matched_line`, and
//!   evidence `[matched line, this line]` (with ids); the reason names the
//!   threshold's config key and, with the calibrated judge, its verdict.
//! - Per task, each ordered pair remembers its last
//!   [`SemanticLimits::rows_per_history`] requests, and a task its last
//!   [`SemanticLimits::histories_per_task`] pairs.
//!
//! With semantic matching off, only a request whose normalized text equals
//! an earlier one's counts (similarity 1), and the reason says so.
//!
//! With a durable store, a task's pairs survive a restart
//! ([`CollaborationLoop::export_task`](ExtensionDetector::export_task)).

use std::sync::Arc;

use async_trait::async_trait;
use loopguard_config::SimilarityConfig;
use loopguard_core_types::{Action, Detection, EventKind, Severity, kinds};
use loopguard_detectors::ObservedEvent;
use loopguard_host::{ExtensionDetector, ExtensionError};
use lru::LruCache;
use serde::{Deserialize, Serialize};

use super::history::{
    History, Matcher, Probe, SavedRow, Seen, TaskStates, parse_saved, restore_histories,
};
use super::judged::{best, deciding, judge_candidates};
use super::{EXACT_SUFFIX, STATE_FORMAT, SemanticLimits, extension_error, non_zero, task_type};
use crate::judge::SameRequestJudge;
use crate::service::EmbeddingService;

/// Per task: one history of requests per ordered pair (`from`, `to`), the
/// least recently used pair first to be forgotten.
struct PairHistories {
    pairs: LruCache<(String, String), History<Seen>>,
}

/// [`PairHistories`] as a durable store keeps it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedPairs {
    format: u32,
    /// The least recently used pair first, as they are put back.
    pairs: Vec<SavedPair>,
}

/// One pair's requests, oldest first.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedPair {
    from: String,
    to: String,
    requests: Vec<SavedRow>,
}

/// Detects the same collaboration request again (kind
/// `collaboration_loop`). Made by
/// [`SemanticDetectors`](super::SemanticDetectors).
#[derive(Debug)]
pub struct CollaborationLoop {
    matcher: Matcher,
    judge: SameRequestJudge,
    similarity: SimilarityConfig,
    limits: SemanticLimits,
    tasks: TaskStates<PairHistories>,
}

impl std::fmt::Debug for PairHistories {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PairHistories")
            .field("pairs", &self.pairs.len())
            .finish()
    }
}

impl CollaborationLoop {
    pub(crate) fn new(
        matcher: Matcher,
        similarity: SimilarityConfig,
        limits: SemanticLimits,
        judge: SameRequestJudge,
    ) -> CollaborationLoop {
        CollaborationLoop {
            tasks: TaskStates::new(limits.max_tasks),
            matcher,
            judge,
            similarity,
            limits,
        }
    }

    /// How many tasks it remembers.
    pub fn tasks(&self) -> usize {
        self.tasks.len()
    }

    fn fresh(&self) -> PairHistories {
        PairHistories {
            pairs: LruCache::new(non_zero(self.limits.histories_per_task)),
        }
    }

    /// `observe` with the calibrated judge: the earlier requests of the
    /// pair above the judge's candidate floor are collected under the
    /// task's lock, then judged outside it; the best one judged the same
    /// request is the match.
    async fn observe_judged(
        &self,
        event: &ObservedEvent<'_>,
        (from, to, request): (&str, &str, &str),
        probe: Probe,
        this: Seen,
        service: &EmbeddingService,
        floor: f32,
    ) -> Result<Vec<Detection>, ExtensionError> {
        let task_type = task_type(event.event);
        let threshold = self.judge.threshold_for(&self.similarity, task_type);
        let pair = (from.to_owned(), to.to_owned());
        let (matcher, limits) = (&self.matcher, &self.limits);
        let candidates = self.tasks.with(
            &event.event.task,
            || self.fresh(),
            |state| {
                let history = state
                    .pairs
                    .get_or_insert_mut(pair, || matcher.history(limits.rows_per_history));
                let candidates = history.all_above_with_texts(&probe, floor)?;
                history.push(this.clone(), &probe)?;
                Ok::<_, crate::SemanticError>(candidates)
            },
        );
        let candidates =
            candidates.map_err(|err| extension_error("cannot compare the request", &err))?;
        let cosine_threshold = self.similarity.request_threshold_for(task_type).value;
        let thresholds = (threshold.value, cosine_threshold);
        let judged = judge_candidates(&self.judge, service, request, candidates, thresholds)
            .await
            .map_err(|err| extension_error("cannot judge the request", &err))?;
        let Some(best) = best(&judged) else {
            return Ok(Vec::new());
        };
        let earlier = &best.key;
        let reason = format!(
            "request from '{from}' to '{to}' is the same as line {}'s: {} (threshold {} from {})",
            earlier.line,
            best.verdict.reason(),
            threshold.value,
            threshold.key
        );
        Ok(vec![loop_detection(
            earlier,
            this,
            reason,
            best.cosine,
            threshold.value,
        )])
    }

    /// [`ExtensionDetector::import_task`] without the clean-up on error.
    async fn restore(&self, task: &str, state: serde_json::Value) -> Result<(), ExtensionError> {
        let saved: SavedPairs = parse_saved(self.name(), task, state)?;
        let limits = (self.limits.histories_per_task, self.limits.rows_per_history);
        let restored = restore_histories(
            &self.matcher,
            &saved.pairs,
            |pair| &pair.requests,
            limits,
            (self.name(), task),
        )
        .await?;
        let mut state = self.fresh();
        for (pair, history) in restored {
            state
                .pairs
                .put((pair.from.clone(), pair.to.clone()), history);
        }
        self.tasks.insert(task, state);
        Ok(())
    }
}

/// The detection of a request that repeats `earlier`'s, citing both. Its
/// severity and action are the engine's: it counts the loop.
fn loop_detection(
    earlier: &Seen,
    this: Seen,
    reason: String,
    similarity: f32,
    threshold: f32,
) -> Detection {
    let mut detection = Detection::new(
        kinds::COLLABORATION_LOOP,
        kinds::COLLABORATION_LOOP,
        Severity::Low,
        Action::Warn,
        vec![earlier.line, this.line],
        reason,
    );
    detection.evidence_ids = [earlier.id.clone(), this.id]
        .into_iter()
        .flatten()
        .map(|id| id.to_string())
        .collect();
    detection.similarity = Some(similarity);
    detection.threshold = Some(threshold);
    detection.matched_line = Some(earlier.line);
    detection
}

#[async_trait]
impl ExtensionDetector for CollaborationLoop {
    fn name(&self) -> &str {
        kinds::COLLABORATION_LOOP
    }

    fn kinds(&self) -> Vec<String> {
        vec![kinds::COLLABORATION_LOOP.to_owned()]
    }

    async fn observe(&self, event: &ObservedEvent<'_>) -> Result<Vec<Detection>, ExtensionError> {
        let EventKind::Collaboration { from, to, request } = &event.event.kind else {
            return Ok(Vec::new());
        };
        let Some(probe) = self
            .matcher
            .probe(request)
            .await
            .map_err(|err| extension_error("cannot embed the request", &err))?
        else {
            return Ok(Vec::new());
        };
        let threshold = self
            .similarity
            .request_threshold_for(task_type(event.event));
        let this = Seen {
            line: event.line,
            id: event.event.id.as_deref().map(Arc::from),
        };
        let deciding = deciding(&self.judge, &self.matcher, threshold.value);
        if let Some(service) = deciding.service {
            return self
                .observe_judged(
                    event,
                    (from, to, request),
                    probe,
                    this,
                    service,
                    deciding.floor,
                )
                .await;
        }
        let pair = (from.clone(), to.clone());
        let (matcher, limits) = (&self.matcher, &self.limits);
        let best = self.tasks.with(
            &event.event.task,
            || self.fresh(),
            |state| {
                let history = state
                    .pairs
                    .get_or_insert_mut(pair, || matcher.history(limits.rows_per_history));
                let best = history.best_above(&probe, threshold.value)?;
                history.push(this.clone(), &probe)?;
                Ok::<_, crate::SemanticError>(best)
            },
        );
        let best = best.map_err(|err| extension_error("cannot compare the request", &err))?;
        let Some((earlier, similarity)) = best else {
            return Ok(Vec::new());
        };
        let reason = if self.matcher.is_semantic() {
            format!(
                "request from '{from}' to '{to}' is {similarity:.3} similar to line {}'s \
                 (threshold {} from {})",
                earlier.line, threshold.value, threshold.key
            )
        } else {
            format!(
                "request from '{from}' to '{to}' repeats line {}'s {EXACT_SUFFIX}",
                earlier.line
            )
        };
        Ok(vec![loop_detection(
            &earlier,
            this,
            reason,
            similarity,
            threshold.value,
        )])
    }

    async fn reset_task(&self, task: &str) {
        self.tasks.remove(task);
    }

    /// The task's pairs, the least recently used first, each with its
    /// remembered requests (line, id and text), oldest first: everything
    /// [`observe`](ExtensionDetector::observe) compares and cites. Texts
    /// rather than vectors: the original text with semantic matching, the
    /// normalized text without. `None` for a task it holds nothing of.
    ///
    /// Not kept: where the task stands among the detector's other tasks
    /// (which one [`SemanticLimits::max_tasks`] forgets first), a property
    /// of the process, not of the task.
    async fn export_task(&self, task: &str) -> Option<serde_json::Value> {
        let saved = self.tasks.peek(task, |state| SavedPairs {
            format: STATE_FORMAT,
            pairs: state
                .pairs
                .iter()
                .rev()
                .map(|((from, to), history)| SavedPair {
                    from: from.clone(),
                    to: to.clone(),
                    requests: history.save(),
                })
                .collect(),
        })?;
        serde_json::to_value(saved).ok()
    }

    /// Puts back what [`export_task`](ExtensionDetector::export_task)
    /// gave, replacing what the detector holds of the task, and embeds the
    /// requests again (one batched call; none for texts the service has
    /// cached). At most [`SemanticLimits::histories_per_task`] pairs of
    /// [`SemanticLimits::rows_per_history`] requests are read, the newest.
    /// An unknown format or malformed JSON is an error naming the detector,
    /// and the task starts afresh.
    async fn import_task(
        &self,
        task: &str,
        state: serde_json::Value,
    ) -> Result<(), ExtensionError> {
        let restored = self.restore(task, state).await;
        self.tasks.forget_on_error(task, restored)
    }
}
