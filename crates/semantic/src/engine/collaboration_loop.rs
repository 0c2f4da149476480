//! Collaboration loops: the same request from one agent to another, again
//! (Decision 74; kind `collaboration_loop`).
//!
//! A `collaboration` event whose `request` is more similar than the request
//! threshold (`similarity.request_threshold_for(task_type)`, strictly
//! exceeded) to an earlier request of the same task, from the same agent to
//! the same agent, is one detection. The engine counts it as one loop of
//! the task (a loop-feeding kind: ruling 4), and sets its severity and
//! action from the task's loop count (ruling 11): the 3rd loop takes the
//! task to the human gate.
//!
//! - Unrelated requests between the same pair never count, however many.
//! - The same request to another agent is another pair: not a repeat.
//! - The detection cites the best match: `similarity`, `threshold`,
//!   `matched_line`, and evidence `[matched line, this line]` (with ids).
//! - Per task, each ordered pair remembers its last
//!   [`SemanticLimits::rows_per_history`] requests, and a task its last
//!   [`SemanticLimits::histories_per_task`] pairs.
//!
//! With semantic matching off, only a request whose normalized text equals
//! an earlier one's counts (similarity 1), and the reason says so.

use std::sync::Arc;

use async_trait::async_trait;
use loopguard_core_types::{Action, Detection, EventKind, Severity, SimilarityConfig, kinds};
use loopguard_detectors::ObservedEvent;
use loopguard_host::{ExtensionDetector, ExtensionError};
use lru::LruCache;

use super::history::{History, Matcher, TaskStates};
use super::{EXACT_SUFFIX, SemanticLimits, extension_error, non_zero, task_type};

/// One remembered request: its line and its id.
#[derive(Debug, Clone)]
struct Request {
    line: u64,
    id: Option<Arc<str>>,
}

/// Per task: one history per ordered pair, keyed `from` NUL `to`.
struct PairHistories {
    pairs: LruCache<String, History<Request>>,
}

/// Detects the same collaboration request again (kind
/// `collaboration_loop`). Made by
/// [`SemanticDetectors`](super::SemanticDetectors).
#[derive(Debug)]
pub struct CollaborationLoop {
    matcher: Matcher,
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
    ) -> CollaborationLoop {
        CollaborationLoop {
            tasks: TaskStates::new(limits.max_tasks),
            matcher,
            similarity,
            limits,
        }
    }

    /// How many tasks it remembers.
    pub fn tasks(&self) -> usize {
        self.tasks.len()
    }
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
        let this = Request {
            line: event.line,
            id: event.event.id.as_deref().map(Arc::from),
        };
        let pair = format!("{from}\u{0}{to}");
        let (matcher, limits) = (&self.matcher, &self.limits);
        let best = self.tasks.with(
            &event.event.task,
            || PairHistories {
                pairs: LruCache::new(non_zero(limits.histories_per_task)),
            },
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
        // Severity and action are the engine's: it counts the loop.
        let mut detection = Detection::new(
            kinds::COLLABORATION_LOOP,
            kinds::COLLABORATION_LOOP,
            Severity::Low,
            Action::Warn,
            vec![earlier.line, this.line],
            reason,
        );
        detection.evidence_ids = [earlier.id, this.id]
            .into_iter()
            .flatten()
            .map(|id| id.to_string())
            .collect();
        detection.similarity = Some(similarity);
        detection.threshold = Some(threshold.value);
        detection.matched_line = Some(earlier.line);
        Ok(vec![detection])
    }

    async fn reset_task(&self, task: &str) {
        self.tasks.remove(task);
    }
}
