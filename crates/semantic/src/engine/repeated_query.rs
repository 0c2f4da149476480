//! Repeated queries: an agent sent the same query again although nothing
//! new came of the last one (kind `repeated_query`, the planner ticket).
//!
//! A `handoff` to agent Y is a query: its `content`. It repeats an earlier
//! query when its content is more similar than the request threshold
//! (`similarity.request_threshold_for(task_type)`, strictly exceeded) to
//! an earlier handoff's content to the same Y in the same task, and the
//! task showed **no new information** since that earlier handoff.
//!
//! "No new information" means no `progress` event that changed a metric
//! (as [`loopguard_detectors::ProgressTracker`] judges it: a changed test
//! count or coverage, more dependencies, a higher `files_changed`) came
//! between the two. A progress event that changed something forgets the
//! task's earlier queries, so only queries since the last progress count.
//!
//! The detection asks the orchestrator to `inject_context` (tell the agent
//! what the earlier query already returned). It is `low` for the first
//! repeat of a query and `medium` from the second on, where the repeats
//! are the earlier queries to Y above the threshold since the last progress.
//! `count` is how many times the query was sent, evidence lists those
//! handoffs and this one, and `matched_line` the most similar. It never
//! adds to the task's loop count.
//!
//! With semantic matching off, only content whose normalized text equals an
//! earlier query's counts (similarity 1), and the reason says so.

use std::sync::Arc;

use async_trait::async_trait;
use loopguard_core_types::{Action, Detection, EventKind, Severity, SimilarityConfig, kinds};
use loopguard_detectors::{ObservedEvent, ProgressState, ProgressTracker};
use loopguard_host::{ExtensionDetector, ExtensionError};
use lru::LruCache;

use super::history::{History, Matcher, TaskStates};
use super::{EXACT_SUFFIX, SemanticLimits, extension_error, non_zero, ordinal, task_type};

/// One remembered query: its line and its id.
#[derive(Debug, Clone)]
struct Query {
    line: u64,
    id: Option<Arc<str>>,
}

/// Per task: the progress metrics seen, and one history per recipient of
/// the queries since the last progress.
struct Queries {
    progress: ProgressState,
    recipients: LruCache<String, History<Query>>,
}

impl std::fmt::Debug for Queries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queries")
            .field("recipients", &self.recipients.len())
            .finish_non_exhaustive()
    }
}

/// Detects a query sent again with no new information since (kind
/// `repeated_query`). Made by [`SemanticDetectors`](super::SemanticDetectors).
#[derive(Debug)]
pub struct RepeatedQuery {
    matcher: Matcher,
    similarity: SimilarityConfig,
    limits: SemanticLimits,
    tasks: TaskStates<Queries>,
}

impl RepeatedQuery {
    pub(crate) fn new(
        matcher: Matcher,
        similarity: SimilarityConfig,
        limits: SemanticLimits,
    ) -> RepeatedQuery {
        RepeatedQuery {
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

    fn fresh(&self) -> Queries {
        Queries {
            progress: ProgressState::default(),
            recipients: LruCache::new(non_zero(self.limits.histories_per_task)),
        }
    }
}

#[async_trait]
impl ExtensionDetector for RepeatedQuery {
    fn name(&self) -> &str {
        kinds::REPEATED_QUERY
    }

    fn kinds(&self) -> Vec<String> {
        vec![kinds::REPEATED_QUERY.to_owned()]
    }

    async fn observe(&self, event: &ObservedEvent<'_>) -> Result<Vec<Detection>, ExtensionError> {
        let (to, content) = match &event.event.kind {
            EventKind::Progress(_) => {
                self.tasks.with(
                    &event.event.task,
                    || self.fresh(),
                    |state| {
                        if ProgressTracker.observe(&mut state.progress, event.event) {
                            // New information: earlier queries may be asked again.
                            state.recipients.clear();
                        }
                    },
                );
                return Ok(Vec::new());
            }
            EventKind::Handoff {
                to,
                content: Some(content),
                ..
            } => (to, content),
            _ => return Ok(Vec::new()),
        };
        let Some(probe) = self
            .matcher
            .probe(content)
            .await
            .map_err(|err| extension_error("cannot embed the query", &err))?
        else {
            return Ok(Vec::new());
        };
        let threshold = self
            .similarity
            .request_threshold_for(task_type(event.event));
        let this = Query {
            line: event.line,
            id: event.event.id.as_deref().map(Arc::from),
        };
        let (matcher, limits) = (&self.matcher, &self.limits);
        let earlier = self.tasks.with(
            &event.event.task,
            || self.fresh(),
            |state| {
                let history = state.recipients.get_or_insert_mut_ref(to.as_str(), || {
                    matcher.history(limits.rows_per_history)
                });
                let earlier = history.all_above(&probe, threshold.value)?;
                history.push(this.clone(), &probe)?;
                Ok::<_, crate::SemanticError>(earlier)
            },
        );
        let earlier = earlier.map_err(|err| extension_error("cannot compare the query", &err))?;
        // The most similar earlier query; on a tie, the newest.
        let Some((best, similarity)) = earlier
            .iter()
            .rev()
            .fold(None::<&(Query, f32)>, |best, candidate| match best {
                Some(best) if best.1 >= candidate.1 => Some(best),
                _ => Some(candidate),
            })
            .cloned()
        else {
            return Ok(Vec::new());
        };
        let repeats = u32::try_from(earlier.len()).unwrap_or(u32::MAX);
        let since = earlier.first().map_or(best.line, |(query, _)| query.line);
        let repeat = ordinal(repeats);
        let reason = if self.matcher.is_semantic() {
            format!(
                "query to '{to}' is {similarity:.3} similar to line {}'s (threshold {} from {}), \
                 its {repeat} repeat; no new information since line {since}",
                best.line, threshold.value, threshold.key
            )
        } else {
            format!(
                "query to '{to}' repeats line {}'s, its {repeat} repeat; no new information \
                 since line {since} {EXACT_SUFFIX}",
                best.line
            )
        };
        let severity = if repeats >= 2 {
            Severity::Medium
        } else {
            Severity::Low
        };
        let mut evidence = Vec::with_capacity(earlier.len() + 1);
        let mut evidence_ids = Vec::new();
        for query in earlier.iter().map(|(query, _)| query).chain([&this]) {
            evidence.push(query.line);
            if let Some(id) = &query.id {
                evidence_ids.push(id.to_string());
            }
        }
        let mut detection = Detection::new(
            kinds::REPEATED_QUERY,
            kinds::REPEATED_QUERY,
            severity,
            Action::InjectContext,
            evidence,
            reason,
        );
        detection.evidence_ids = evidence_ids;
        detection.count = Some(repeats.saturating_add(1));
        detection.similarity = Some(similarity);
        detection.threshold = Some(threshold.value);
        detection.matched_line = Some(best.line);
        Ok(vec![detection])
    }

    async fn reset_task(&self, task: &str) {
        self.tasks.remove(task);
    }
}
