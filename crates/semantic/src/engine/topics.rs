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
//! topic's id is never given to a new one.
//!
//! With semantic matching off there is no assigner: `topic_cycle` groups
//! topics by exact normalized text on its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use loopguard_core_types::SimilarityConfig;
use loopguard_detectors::SemanticTopic;
use loopguard_host::{ExtensionError, TopicAssigner};
use lru::LruCache;

use super::history::{History, Matcher, Probe, TaskStates};
use super::{SemanticLimits, extension_error, non_zero};
use crate::service::EmbeddingService;

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
    ) -> SemanticTopics {
        SemanticTopics {
            matcher: Matcher::Semantic(service),
            tasks: TaskStates::new(limits.max_tasks),
            similarity,
            limits,
            next_id: AtomicU64::new(1),
        }
    }

    /// How many tasks it remembers.
    pub fn tasks(&self) -> usize {
        self.tasks.len()
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
        let limits = &self.limits;
        let topic = self.tasks.with(
            task,
            || Topics {
                topics: LruCache::new(non_zero(limits.topics_per_task)),
            },
            |state| self.join_or_start(state, &probe, line, text, threshold.value),
        );
        topic
            .map(Some)
            .map_err(|err| extension_error("cannot compare the topic text", &err))
    }

    async fn reset_task(&self, task: &str) {
        self.tasks.remove(task);
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
