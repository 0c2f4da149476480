//! Topics by similarity (story 10.6): the [`TopicAssigner`] behind
//! `topic_cycle`.
//!
//! The engine asks for the topic of every `handoff` without an explicit
//! `topic` (its `content`) and every `collaboration` (its `request`).
//! Per task, topics are clustered incrementally: the text joins the topic
//! whose remembered member is the most similar to it, if that similarity is
//! strictly above the topic threshold (`similarity.topic_threshold_for
//! (task_type)`); otherwise it starts a new topic, labelled with its own
//! text (at most 60 characters). A topic remembers its last
//! [`SemanticLimits::rows_per_topic`] members, and a task its last
//! [`SemanticLimits::topics_per_task`] topics, the least recently joined
//! forgotten first. Topic ids are unique in the process, so a forgotten
//! topic's id is never given to a new one; they start at a value drawn per
//! process, so that ids of another run (kept in `topic_cycle`'s saved
//! windows of a task whose topics could not be restored) are unlikely to
//! come back either.
//!
//! With a durable store, a task's topics survive a restart, ids included
//! ([`SemanticTopics::export_task`](TopicAssigner::export_task)).
//!
//! With semantic matching off there is no assigner: `topic_cycle` groups
//! topics by exact normalized text on its own.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use loopguard_config::SimilarityConfig;
use loopguard_detectors::SemanticTopic;
use loopguard_host::{ExtensionError, TopicAssigner};
use lru::LruCache;
use serde::{Deserialize, Serialize};

use super::history::{
    History, Matcher, Probe, SavedRow, TaskStates, import_error, parse_saved, restore_histories,
};
use super::{STATE_FORMAT, SemanticLimits, extension_error, non_zero};
use crate::service::EmbeddingService;

/// The assigner's name in errors; also the engine's key for its state.
const NAME: &str = "topics";

/// Longest topic label, in characters.
pub const TOPIC_LABEL_CHARS: usize = 60;

/// One topic of a task: its label and its last members (by line).
#[derive(Debug)]
struct Topic {
    label: String,
    members: History<u64>,
}

/// Per task: its topics by id, most recently joined first.
struct Topics {
    topics: LruCache<u64, Topic>,
}

/// [`Topics`] as a durable store keeps it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedTopics {
    format: u32,
    /// The least recently joined topic first, as they are put back.
    topics: Vec<SavedTopic>,
}

/// One topic: its id, its label and its last members, oldest first.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedTopic {
    id: u64,
    label: String,
    members: Vec<SavedRow>,
}

impl std::fmt::Debug for Topics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Topics")
            .field("topics", &self.topics.len())
            .finish()
    }
}

/// Chooses each text's topic by embedding similarity. Made by
/// [`SemanticDetectors`](super::SemanticDetectors) when semantic matching
/// is on.
#[derive(Debug)]
pub struct SemanticTopics {
    matcher: Matcher,
    similarity: SimilarityConfig,
    limits: SemanticLimits,
    tasks: TaskStates<Topics>,
    next_id: AtomicU64,
}

impl SemanticTopics {
    pub(crate) fn new(
        service: Arc<EmbeddingService>,
        similarity: SimilarityConfig,
        limits: SemanticLimits,
        max_text_bytes: usize,
    ) -> SemanticTopics {
        SemanticTopics {
            matcher: Matcher::Semantic {
                service,
                max_text_bytes,
            },
            tasks: TaskStates::new(limits.max_tasks),
            similarity,
            limits,
            // Ids no other process uses: topics of two engines never clash.
            next_id: AtomicU64::new(loopguard_host::id_seed()),
        }
    }

    /// How many tasks it remembers.
    pub fn tasks(&self) -> usize {
        self.tasks.len()
    }

    fn fresh(&self) -> Topics {
        Topics {
            topics: LruCache::new(non_zero(self.limits.topics_per_task)),
        }
    }

    /// [`TopicAssigner::import_task`] without the clean-up on error.
    async fn restore(&self, task: &str, state: serde_json::Value) -> Result<(), ExtensionError> {
        let saved: SavedTopics = parse_saved(NAME, task, state)?;
        let (rows_kept, topics_kept) = (
            self.limits.rows_per_topic,
            self.limits.topics_per_task.max(1),
        );
        let mut ids = HashSet::new();
        if let Some(topic) = saved.topics.iter().find(|topic| !ids.insert(topic.id)) {
            return Err(import_error(
                NAME,
                task,
                &format!("has topic id {} twice", topic.id),
            ));
        }
        let restored = restore_histories(
            &self.matcher,
            &saved.topics,
            |topic| &topic.members,
            (topics_kept, rows_kept),
            (NAME, task),
        )
        .await?;
        let mut state = self.fresh();
        for (topic, members) in restored {
            state.topics.put(
                topic.id,
                Topic {
                    label: topic.label.clone(),
                    members,
                },
            );
        }
        // A new topic of this task must not take the id of one of its
        // earlier topics, which `topic_cycle`'s own saved windows may still
        // count under that id. The newest topic is never forgotten before a
        // newer one starts, so the task's largest saved id is the largest it
        // ever had, forgotten topics included (ids only grow).
        if let Some(largest) = saved.topics.iter().map(|topic| topic.id).max() {
            self.next_id
                .fetch_max(largest.saturating_add(1), Ordering::Relaxed);
        }
        self.tasks.insert(task, state);
        Ok(())
    }
}

#[async_trait]
impl TopicAssigner for SemanticTopics {
    async fn assign(
        &self,
        task: &str,
        task_type: Option<&str>,
        line: u64,
        text: &str,
    ) -> Result<Option<SemanticTopic>, ExtensionError> {
        let Some(probe) = self
            .matcher
            .probe(text)
            .await
            .map_err(|err| extension_error("cannot embed the topic text", &err))?
        else {
            return Ok(None);
        };
        let threshold = self.similarity.topic_threshold_for(task_type);
        let topic = self.tasks.with(
            task,
            || self.fresh(),
            |state| self.join_or_start(state, &probe, line, text, threshold.value),
        );
        topic
            .map(Some)
            .map_err(|err| extension_error("cannot compare the topic text", &err))
    }

    async fn reset_task(&self, task: &str) {
        self.tasks.remove(task);
    }

    /// The task's topics, the least recently joined first, each with its
    /// id, its label and its last members (line and original text), oldest
    /// first: everything [`assign`](TopicAssigner::assign) compares and
    /// reports. Texts rather than vectors. `None` for a task it holds
    /// nothing of.
    ///
    /// The id counter is the process's, not the task's, and is not kept:
    /// an import moves it past the task's largest id, which is all a new
    /// topic's id must respect (ids only have to differ within a task;
    /// they are never reported, `topic_cycle` keys its windows by them).
    /// Not kept either: where the task stands among the assigner's other
    /// tasks (which one [`SemanticLimits::max_tasks`] forgets first), a
    /// property of the process.
    async fn export_task(&self, task: &str) -> Option<serde_json::Value> {
        let saved = self.tasks.peek(task, |state| SavedTopics {
            format: STATE_FORMAT,
            topics: state
                .topics
                .iter()
                .rev()
                .map(|(id, topic)| SavedTopic {
                    id: *id,
                    label: topic.label.clone(),
                    members: topic.members.save(),
                })
                .collect(),
        })?;
        serde_json::to_value(saved).ok()
    }

    /// Puts back what [`export_task`](TopicAssigner::export_task) gave,
    /// replacing what the assigner holds of the task, and embeds the
    /// members again (one batched call; none for texts the service has
    /// cached). At most [`SemanticLimits::topics_per_task`] topics of
    /// [`SemanticLimits::rows_per_topic`] members are read, the newest. An
    /// unknown format, malformed JSON or a repeated id is an error naming
    /// the assigner (`topics`), and the task starts afresh.
    async fn import_task(
        &self,
        task: &str,
        state: serde_json::Value,
    ) -> Result<(), ExtensionError> {
        let restored = self.restore(task, state).await;
        self.tasks.forget_on_error(task, restored)
    }
}

impl SemanticTopics {
    fn join_or_start(
        &self,
        state: &mut Topics,
        probe: &Probe,
        line: u64,
        text: &str,
        threshold: f32,
    ) -> crate::Result<SemanticTopic> {
        // The best member over all topics; on a tie, the most recently
        // joined topic (iteration goes most recent first).
        let mut best: Option<(u64, u64, f32)> = None;
        for (id, topic) in state.topics.iter() {
            if let Some((member, similarity)) = topic.members.nearest(probe)?
                && best.is_none_or(|(_, _, b)| similarity > b)
            {
                best = Some((*id, member, similarity));
            }
        }
        if let Some((id, member, similarity)) = best.filter(|(_, _, s)| *s > threshold)
            && let Some(topic) = state.topics.get_mut(&id)
        {
            topic.members.push(line, probe)?;
            return Ok(SemanticTopic {
                id,
                label: topic.label.clone(),
                similarity: Some(similarity),
                threshold,
                matched_line: Some(member),
            });
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut members = self.matcher.history(self.limits.rows_per_topic);
        members.push(line, probe)?;
        let label = label(text);
        state.topics.push(
            id,
            Topic {
                label: label.clone(),
                members,
            },
        );
        Ok(SemanticTopic {
            id,
            label,
            similarity: None,
            threshold,
            matched_line: None,
        })
    }
}

/// `text` on one line, at most [`TOPIC_LABEL_CHARS`] characters, ending in
/// `…` when cut.
pub(crate) fn label(text: &str) -> String {
    let mut label = String::new();
    let mut chars = 0;
    for word in text.split_whitespace() {
        for c in (!label.is_empty())
            .then_some(' ')
            .into_iter()
            .chain(word.chars())
        {
            if chars == TOPIC_LABEL_CHARS {
                label.pop();
                label.push('…');
                return label;
            }
            label.push(c);
            chars += 1;
        }
    }
    label
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_one_line_and_at_most_60_characters() {
        assert_eq!(label("  Fix\nthe   login bug "), "Fix the login bug");
        let exact = "x".repeat(TOPIC_LABEL_CHARS);
        assert_eq!(label(&exact), exact);
        let long = label(&"word ".repeat(40));
        assert_eq!(long.chars().count(), TOPIC_LABEL_CHARS);
        assert!(long.ends_with('…'));
        let accents = label(&"é".repeat(100));
        assert_eq!(accents.chars().count(), TOPIC_LABEL_CHARS);
    }
}
