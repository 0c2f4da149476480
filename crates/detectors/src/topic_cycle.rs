//! STUB: to be written (see the detectors brief).

use loopguard_core_types::{Config, Detection};

use crate::{Detector, ObservedEvent};

/// A topic chosen by a semantic topic assigner (the semantic crate): the
/// engine passes it in [`ObservedEvent::semantic_topic`].
#[derive(Debug, Clone, PartialEq)]
pub struct SemanticTopic {
    /// A stable id for the topic within its task.
    pub id: u64,
    /// A short label (the text that started the topic).
    pub label: String,
    /// The cosine similarity to the topic, when this event joined an earlier
    /// one (`None` when it started a new topic).
    pub similarity: Option<f32>,
    /// The threshold that was compared with.
    pub threshold: f32,
    /// The earlier line this event's content matched, if it joined a topic.
    pub matched_line: Option<u64>,
}

/// Normalizes free text into a topic key: lowercase, punctuation dropped,
/// whitespace collapsed.
pub fn normalize_topic(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
    {
        if !out.is_empty() {
            out.push(' ');
        }
        out.extend(word.chars().flat_map(char::to_lowercase));
    }
    out
}

/// STUB.
#[derive(Debug, Clone)]
pub struct TopicCycle {}

impl TopicCycle {
    /// STUB.
    pub fn new(_config: &Config) -> TopicCycle {
        TopicCycle {}
    }
}

impl Detector for TopicCycle {
    type State = ();

    fn name(&self) -> &'static str {
        "topic_cycle"
    }

    fn observe(&self, _state: &mut (), _event: &ObservedEvent<'_>, _out: &mut Vec<Detection>) {}
}
