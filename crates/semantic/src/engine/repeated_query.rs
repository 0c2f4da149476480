//! Repeated queries: an agent sent the same query again although nothing
//! new came of the last one (kind `repeated_query`, the planner ticket).
//!
//! A `handoff` to agent Y is a query: its `content`. It repeats an earlier
//! query when the same-request judge (`similarity.judge`) calls its
//! content the same as an earlier handoff's content to the same Y in the
//! same task, and the task showed **no new information** since that
//! earlier handoff. With the cosine judge, the same is a cosine strictly
//! above the request threshold (`similarity.request_threshold_for
//! (task_type)`); with the calibrated judge (the default), the judge's
//! score strictly above its threshold, asked only about the earlier
//! queries whose cosine is above its candidate floor.
//!
//! "No new information" means no `progress` event that changed a metric
//! (as [`loopguard_detectors::ProgressTracker`] judges it: a changed test
//! count or coverage, more dependencies, a higher `files_changed`) came
//! between the two. A progress event that changed something forgets the
//! task's earlier queries, so only queries since the last progress count.
//! Nor may Y have said anything new since (ruling 17): every handoff from
//! Y is also Y's reply, and one that the judge calls the same as none of
//! Y's earlier handoffs forgets the queries sent to Y (at most
//! [`SemanticLimits::rows_per_history`] distinct replies are kept per
//! sender, [`SemanticLimits::histories_per_task`] senders per task).
//!
//! The detection asks the orchestrator to `inject_context` (tell the agent
//! what the earlier query already returned). It is `low` for the first
//! repeat of a query and `medium` from the second on, where the repeats
//! are the earlier queries to Y judged the same since the last progress.
//! `count` is how many times the query was sent, evidence lists those
//! handoffs and this one, and `matched_line` the most similar (the highest
//! cosine, or the highest score with the calibrated judge). It never
//! adds to the task's loop count.
//!
//! With semantic matching off, only content whose normalized text equals an
//! earlier query's counts (similarity 1), and the reason says so.
//!
//! With a durable store, a task's metrics and queries survive a restart
//! ([`RepeatedQuery::export_task`](ExtensionDetector::export_task)).

use std::sync::Arc;

use async_trait::async_trait;
use loopguard_config::SimilarityConfig;
use loopguard_core_types::{
    Action, Detection, Event, EventKind, ProgressSnapshot, Severity, kinds,
};
use loopguard_detectors::{ObservedEvent, ProgressState, ProgressTracker};
use loopguard_host::{ExtensionDetector, ExtensionError};
use lru::LruCache;
use serde::{Deserialize, Serialize};

use super::history::{
    History, Matcher, Probe, SavedRow, Seen, TaskStates, import_error, parse_saved,
    restore_histories,
};
use super::judged::{best, deciding, judge_candidates};
use super::{
    EXACT_SUFFIX, STATE_FORMAT, SemanticLimits, extension_error, non_zero, ordinal, task_type,
};
use crate::judge::SameRequestJudge;

/// Per task: the progress metrics seen, and one history per recipient of
/// the queries since the last progress.
struct Queries {
    progress: ProgressState,
    recipients: LruCache<String, History<Seen>>,
    /// Per sender, the distinct texts it handed off (its replies): a text
    /// judged the same as none of them is new information from it.
    replies: LruCache<String, History<Seen>>,
}

/// [`Queries`] as a durable store keeps it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedQueries {
    format: u32,
    /// The latest value of each metric the task reported.
    metrics: SavedMetrics,
    /// The least recently used recipient first, as they are put back.
    recipients: Vec<SavedRecipient>,
    /// The least recently used sender first, with its distinct replies
    /// (absent in exports of an older format, which read as none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    replies: Vec<SavedSender>,
}

/// One sender's distinct replies, oldest first.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedSender {
    from: String,
    replies: Vec<SavedRow>,
}

/// One recipient's queries since the last progress, oldest first.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedRecipient {
    to: String,
    queries: Vec<SavedRow>,
}

/// A task's latest metrics. Coverage is kept as text (Rust's shortest
/// round-tripping form): a JSON number read back by `serde_json` without
/// its `float_roundtrip` feature may come back one unit in the last place
/// off, and a coverage that seems to move is "new information".
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedMetrics {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tests_total: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tests_failed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    coverage: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    files_changed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deps_added: Option<u64>,
}

impl SavedMetrics {
    fn of(latest: &ProgressSnapshot) -> SavedMetrics {
        SavedMetrics {
            tests_total: latest.tests_total,
            tests_failed: latest.tests_failed,
            coverage: latest.coverage.map(|coverage| coverage.to_string()),
            files_changed: latest.files_changed,
            deps_added: latest.deps_added,
        }
    }

    /// The tracker's state holding these metrics, or what is wrong.
    fn progress(&self) -> Result<ProgressState, String> {
        let coverage = match &self.coverage {
            Some(text) => Some(
                text.parse::<f64>()
                    .ok()
                    .filter(|coverage| coverage.is_finite())
                    .ok_or_else(|| format!("has a coverage that is not a number: {text:?}"))?,
            ),
            None => None,
        };
        let latest = ProgressSnapshot {
            tests_total: self.tests_total,
            tests_failed: self.tests_failed,
            coverage,
            files_changed: self.files_changed,
            deps_added: self.deps_added,
        };
        // The tracker's state is built the way it is filled: a first
        // snapshot sets every metric it reports.
        let mut progress = ProgressState::default();
        ProgressTracker.observe(
            &mut progress,
            &Event {
                task: String::new(),
                ts: None,
                id: None,
                kind: EventKind::Progress(latest),
                extra: serde_json::Map::new(),
            },
        );
        if *progress.latest() == latest {
            Ok(progress)
        } else {
            Err(format!(
                "has metrics the tracker does not keep as given: {latest:?}"
            ))
        }
    }
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
    judge: SameRequestJudge,
    similarity: SimilarityConfig,
    limits: SemanticLimits,
    tasks: TaskStates<Queries>,
}

impl RepeatedQuery {
    pub(crate) fn new(
        matcher: Matcher,
        similarity: SimilarityConfig,
        limits: SemanticLimits,
        judge: SameRequestJudge,
    ) -> RepeatedQuery {
        RepeatedQuery {
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

    fn fresh(&self) -> Queries {
        Queries {
            progress: ProgressState::default(),
            recipients: LruCache::new(non_zero(self.limits.histories_per_task)),
            replies: LruCache::new(non_zero(self.limits.histories_per_task)),
        }
    }

    /// Whether `content`, handed off by `from`, is new information from
    /// `from`: judged the same as none of its earlier replies. New
    /// information forgets the queries sent to `from` (they may be asked
    /// again, ruling 17), and the reply is kept.
    async fn reply_is_new(
        &self,
        event: &ObservedEvent<'_>,
        from: &str,
        content: &str,
        probe: &Probe,
    ) -> Result<bool, ExtensionError> {
        let task_type = task_type(event.event);
        let cosine_threshold = self.similarity.request_threshold_for(task_type);
        let deciding = deciding(&self.judge, &self.matcher, cosine_threshold.value);
        let (matcher, limits) = (&self.matcher, &self.limits);
        let candidates = self.tasks.with(
            &event.event.task,
            || self.fresh(),
            |state| {
                let history = state
                    .replies
                    .get_or_insert_mut_ref(from, || matcher.history(limits.rows_per_history));
                deciding.candidates(history, probe)
            },
        );
        let candidates =
            candidates.map_err(|err| extension_error("cannot compare the reply", &err))?;
        let repeated = match deciding.service {
            Some(service) => {
                let threshold = self.judge.threshold_for(&self.similarity, task_type);
                let thresholds = (threshold.value, cosine_threshold.value);
                !judge_candidates(&self.judge, service, content, candidates, thresholds)
                    .await
                    .map_err(|err| extension_error("cannot judge the reply", &err))?
                    .is_empty()
            }
            None => !candidates.is_empty(),
        };
        if repeated {
            return Ok(false);
        }
        let this = Seen {
            line: event.line,
            id: event.event.id.as_deref().map(Arc::from),
        };
        let kept = self.tasks.with(
            &event.event.task,
            || self.fresh(),
            |state| {
                state.recipients.pop(from);
                let history = state
                    .replies
                    .get_or_insert_mut_ref(from, || matcher.history(limits.rows_per_history));
                history.push(this, probe)
            },
        );
        kept.map_err(|err| extension_error("cannot keep the reply", &err))?;
        Ok(true)
    }

    /// [`ExtensionDetector::import_task`] without the clean-up on error.
    async fn restore(&self, task: &str, state: serde_json::Value) -> Result<(), ExtensionError> {
        let saved: SavedQueries = parse_saved(self.name(), task, state)?;
        let progress = saved
            .metrics
            .progress()
            .map_err(|problem| import_error(self.name(), task, &problem))?;
        let limits = (self.limits.histories_per_task, self.limits.rows_per_history);
        let restored = restore_histories(
            &self.matcher,
            &saved.recipients,
            |recipient| &recipient.queries,
            limits,
            (self.name(), task),
        )
        .await?;
        let replies = restore_histories(
            &self.matcher,
            &saved.replies,
            |sender| &sender.replies,
            limits,
            (self.name(), task),
        )
        .await?;
        let mut state = self.fresh();
        state.progress = progress;
        for (recipient, history) in restored {
            state.recipients.put(recipient.to.clone(), history);
        }
        for (sender, history) in replies {
            state.replies.put(sender.from.clone(), history);
        }
        self.tasks.insert(task, state);
        Ok(())
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
        // The handoff is also its sender's reply: new information from the
        // sender lets the queries sent to it be asked again (ruling 17).
        if let EventKind::Handoff { from, .. } = &event.event.kind
            && from != to
        {
            self.reply_is_new(event, from, content, &probe).await?;
        }
        let task_type = task_type(event.event);
        let cosine_threshold = self.similarity.request_threshold_for(task_type);
        let this = Seen {
            line: event.line,
            id: event.event.id.as_deref().map(Arc::from),
        };
        let (matcher, limits) = (&self.matcher, &self.limits);
        // With the calibrated judge: the candidates above its floor, with
        // their texts; otherwise every query above the cosine threshold.
        let deciding = deciding(&self.judge, &self.matcher, cosine_threshold.value);
        let candidates = self.tasks.with(
            &event.event.task,
            || self.fresh(),
            |state| {
                let history = state.recipients.get_or_insert_mut_ref(to.as_str(), || {
                    matcher.history(limits.rows_per_history)
                });
                let candidates = deciding.candidates(history, &probe)?;
                history.push(this.clone(), &probe)?;
                Ok::<_, crate::SemanticError>(candidates)
            },
        );
        let candidates =
            candidates.map_err(|err| extension_error("cannot compare the query", &err))?;
        let (earlier, best_match, verdict, threshold) = match deciding.service {
            Some(service) => {
                let threshold = self.judge.threshold_for(&self.similarity, task_type);
                let thresholds = (threshold.value, cosine_threshold.value);
                let judged =
                    judge_candidates(&self.judge, service, content, candidates, thresholds)
                        .await
                        .map_err(|err| extension_error("cannot judge the query", &err))?;
                let best_match = best(&judged).map(|b| (b.key.clone(), b.cosine));
                let verdict = best(&judged).map(|b| b.verdict.clone());
                let earlier: Vec<(Seen, f32)> = judged
                    .into_iter()
                    .map(|judged| (judged.key, judged.cosine))
                    .collect();
                (earlier, best_match, verdict, threshold)
            }
            None => {
                let earlier: Vec<(Seen, f32)> = candidates
                    .into_iter()
                    .map(|(query, cosine, _)| (query, cosine))
                    .collect();
                // The most similar earlier query; on a tie, the newest.
                let best_match = earlier
                    .iter()
                    .rev()
                    .fold(None::<&(Seen, f32)>, |best, candidate| match best {
                        Some(best) if best.1 >= candidate.1 => Some(best),
                        _ => Some(candidate),
                    })
                    .cloned();
                (earlier, best_match, None, cosine_threshold)
            }
        };
        let Some((best, similarity)) = best_match else {
            return Ok(Vec::new());
        };
        let repeats = u32::try_from(earlier.len()).unwrap_or(u32::MAX);
        let since = earlier.first().map_or(best.line, |(query, _)| query.line);
        let repeat = ordinal(repeats);
        let reason = if let Some(verdict) = &verdict {
            format!(
                "query to '{to}' is the same as line {}'s: {} (threshold {} from {}), its \
                 {repeat} repeat; no new information since line {since}",
                best.line,
                verdict.reason(),
                threshold.value,
                threshold.key
            )
        } else if self.matcher.is_semantic() {
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

    /// The task's latest metrics (what tells new information from none)
    /// and its recipients, the least recently used first, each with the
    /// queries sent to it since the last progress (line, id and text),
    /// oldest first: everything [`observe`](ExtensionDetector::observe)
    /// compares, counts and cites. Texts rather than vectors: the original
    /// text with semantic matching, the normalized text without. `None`
    /// for a task it holds nothing of.
    ///
    /// Not kept: where the task stands among the detector's other tasks
    /// (which one [`SemanticLimits::max_tasks`] forgets first), a property
    /// of the process, not of the task.
    async fn export_task(&self, task: &str) -> Option<serde_json::Value> {
        let saved = self.tasks.peek(task, |state| SavedQueries {
            format: STATE_FORMAT,
            metrics: SavedMetrics::of(state.progress.latest()),
            recipients: state
                .recipients
                .iter()
                .rev()
                .map(|(to, history)| SavedRecipient {
                    to: to.clone(),
                    queries: history.save(),
                })
                .collect(),
            replies: state
                .replies
                .iter()
                .rev()
                .map(|(from, history)| SavedSender {
                    from: from.clone(),
                    replies: history.save(),
                })
                .collect(),
        })?;
        serde_json::to_value(saved).ok()
    }

    /// Puts back what [`export_task`](ExtensionDetector::export_task)
    /// gave, replacing what the detector holds of the task, and embeds the
    /// queries again (one batched call; none for texts the service has
    /// cached). At most [`SemanticLimits::histories_per_task`] recipients
    /// of [`SemanticLimits::rows_per_history`] queries are read, the
    /// newest. An unknown format or malformed JSON is an error naming the
    /// detector, and the task starts afresh.
    async fn import_task(
        &self,
        task: &str,
        state: serde_json::Value,
    ) -> Result<(), ExtensionError> {
        let restored = self.restore(task, state).await;
        self.tasks.forget_on_error(task, restored)
    }
}
