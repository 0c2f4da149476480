//! The seam for detectors beyond the built-in ones: dynamic plugins and the
//! semantic detectors implement [`ExtensionDetector`].

use async_trait::async_trait;
use loopguard_core_types::{Detection, Event, EventKind};
use loopguard_detectors::{MatchedArgs, MatchedText, ObservedEvent, SemanticTopic};

/// Why an extension detector could not judge an event.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ExtensionError(pub String);

/// A detector the engine calls for every event, next to the built-in ones.
///
/// Unlike the built-in detectors it keeps its own per-task state (keyed by
/// `event.event.task`) and may await (a plugin runs off the reactor, a
/// semantic detector waits for an embedding). Its detections join the
/// built-in ones in the action policy; a detection of a loop-feeding kind
/// (`collaboration_loop`, ...) adds to the task's loop count. An error is
/// reported on the decision and logged; the other detectors go on.
#[async_trait]
pub trait ExtensionDetector: Send + Sync + std::fmt::Debug {
    /// The detector's name, as reported in detections and errors.
    fn name(&self) -> &str;

    /// The detection kinds it reports.
    fn kinds(&self) -> Vec<String>;

    /// Looks at one event.
    async fn observe(&self, event: &ObservedEvent<'_>) -> Result<Vec<Detection>, ExtensionError>;

    /// Forgets a task's state (on `completed` and `human`).
    async fn reset_task(&self, task: &str) {
        let _ = task;
    }

    /// The task's state as JSON, for a durable store to keep with the
    /// task (asked after every event when the store is durable). `None`
    /// (the default): nothing to keep, so after a restart the detector
    /// starts the task afresh.
    async fn export_task(&self, task: &str) -> Option<serde_json::Value> {
        let _ = task;
        None
    }

    /// Puts back a task's state that [`export_task`](Self::export_task)
    /// gave, when the engine reloads the task from the store (after a
    /// restart, an eviction, or another replica's events). The default
    /// ignores it.
    async fn import_task(
        &self,
        task: &str,
        state: serde_json::Value,
    ) -> Result<(), ExtensionError> {
        let _ = (task, state);
        Ok(())
    }
}

/// Chooses the topic of an event's free text by similarity (the seam the
/// semantic crate fills). The engine asks it for every `handoff` without an
/// explicit `topic` (its `content`) and every `collaboration` (its
/// `request`), and passes the answer to `topic_cycle` as
/// [`ObservedEvent::semantic_topic`]. Without an assigner, topics are exact
/// normalized text.
#[async_trait]
pub trait TopicAssigner: Send + Sync + std::fmt::Debug {
    /// The topic of `text` in `task` (seen on input line `line`), joining
    /// the most similar earlier topic above the threshold or starting a new
    /// one. `None` when the text has no topic (empty).
    async fn assign(
        &self,
        task: &str,
        task_type: Option<&str>,
        line: u64,
        text: &str,
    ) -> Result<Option<SemanticTopic>, ExtensionError>;

    /// Forgets a task's topics (on `completed` and `human`).
    async fn reset_task(&self, task: &str) {
        let _ = task;
    }

    /// The task's topics as JSON, for a durable store (see
    /// [`ExtensionDetector::export_task`]). Default: nothing to keep.
    async fn export_task(&self, task: &str) -> Option<serde_json::Value> {
        let _ = task;
        None
    }

    /// Puts back what [`export_task`](Self::export_task) gave. Default:
    /// ignored.
    async fn import_task(
        &self,
        task: &str,
        state: serde_json::Value,
    ) -> Result<(), ExtensionError> {
        let _ = (task, state);
        Ok(())
    }
}

/// Matches a `tool_call`'s free-text arguments by meaning (the seam the
/// semantic crate fills, ruling 15). The engine asks it about every
/// successful `tool_call` and passes the answer to `tool_calls` as
/// [`ObservedEvent::matched_args`]: the arguments with each free-text value
/// judged the same as an earlier value of the same argument (same task,
/// agent and tool) replaced by that value. Without a matcher, free-text
/// arguments compare as normalized text.
#[async_trait]
pub trait ArgumentMatcher: Send + Sync + std::fmt::Debug {
    /// The call's arguments with the matched values replaced; `None` when
    /// nothing matched (or nothing was free text).
    async fn match_args(
        &self,
        call: ToolCallRef<'_>,
    ) -> Result<Option<MatchedArgs>, ExtensionError>;

    /// Forgets a task's argument values (on `completed` and `human`).
    async fn reset_task(&self, task: &str) {
        let _ = task;
    }

    /// The task's argument values as JSON, for a durable store (see
    /// [`ExtensionDetector::export_task`]). Default: nothing to keep.
    async fn export_task(&self, task: &str) -> Option<serde_json::Value> {
        let _ = task;
        None
    }

    /// Puts back what [`export_task`](Self::export_task) gave. Default:
    /// ignored.
    async fn import_task(
        &self,
        task: &str,
        state: serde_json::Value,
    ) -> Result<(), ExtensionError> {
        let _ = (task, state);
        Ok(())
    }
}

/// Matches an exchange's text by meaning with its sender's earlier texts
/// (ruling 17: a hub's instruction or a worker's reply "judged the same";
/// the seam the semantic crate fills). The engine asks it about every
/// `handoff` with content and every `collaboration` between two agents, and
/// passes the answer to the hub tracker as
/// [`ObservedEvent::matched_text`]. Without a matcher, exchanges compare as
/// normalized text.
#[async_trait]
pub trait ExchangeMatcher: Send + Sync + std::fmt::Debug {
    /// The earlier text of the same sender (in the same task) that the
    /// exchange's text is judged the same as; `None` when there is none
    /// (the text is then remembered as new).
    async fn match_exchange(
        &self,
        exchange: ExchangeRef<'_>,
    ) -> Result<Option<MatchedText>, ExtensionError>;

    /// Forgets a task's texts (on `completed` and `human`).
    async fn reset_task(&self, task: &str) {
        let _ = task;
    }

    /// The task's texts as JSON, for a durable store (see
    /// [`ExtensionDetector::export_task`]). Default: nothing to keep.
    async fn export_task(&self, task: &str) -> Option<serde_json::Value> {
        let _ = task;
        None
    }

    /// Puts back what [`export_task`](Self::export_task) gave. Default:
    /// ignored.
    async fn import_task(
        &self,
        task: &str,
        state: serde_json::Value,
    ) -> Result<(), ExtensionError> {
        let _ = (task, state);
        Ok(())
    }
}

/// The exchange an [`ExchangeMatcher`] is asked about.
#[derive(Debug, Clone, Copy)]
pub struct ExchangeRef<'a> {
    /// The task.
    pub task: &'a str,
    /// The event's `task_type`, if it has one (for per-type thresholds).
    pub task_type: Option<&'a str>,
    /// The input line.
    pub line: u64,
    /// The sender.
    pub from: &'a str,
    /// The recipient.
    pub to: &'a str,
    /// What was sent: a handoff's `content`, a collaboration's `request`.
    pub text: &'a str,
}

impl<'a> ExchangeRef<'a> {
    /// The exchange of `event` (seen on line `line`): a `handoff` with
    /// content or a `collaboration`, between two different agents, with
    /// text that is not blank; `None` otherwise.
    pub fn of(event: &'a Event, line: u64) -> Option<ExchangeRef<'a>> {
        let (from, to, text) = match &event.kind {
            EventKind::Handoff {
                from,
                to,
                content: Some(content),
                ..
            } => (from, to, content.as_str()),
            EventKind::Collaboration { from, to, request } => (from, to, request.as_str()),
            _ => return None,
        };
        (from != to && !text.trim().is_empty()).then(|| ExchangeRef {
            task: &event.task,
            task_type: task_type_of(event),
            line,
            from,
            to,
            text,
        })
    }
}

/// The call an [`ArgumentMatcher`] is asked about.
#[derive(Debug, Clone, Copy)]
pub struct ToolCallRef<'a> {
    /// The task.
    pub task: &'a str,
    /// The event's `task_type`, if it has one (for per-type thresholds).
    pub task_type: Option<&'a str>,
    /// The input line.
    pub line: u64,
    /// The calling agent.
    pub agent: &'a str,
    /// The tool.
    pub tool: &'a str,
    /// The arguments.
    pub args: &'a serde_json::Value,
}

impl<'a> ToolCallRef<'a> {
    /// The successful `tool_call` of `event` (seen on line `line`); `None`
    /// for other events and for failing calls (they are failures, ruling
    /// 14).
    pub fn of(event: &'a Event, line: u64) -> Option<ToolCallRef<'a>> {
        match &event.kind {
            EventKind::ToolCall {
                agent,
                tool,
                args,
                error: None,
                ..
            } => Some(ToolCallRef {
                task: &event.task,
                task_type: task_type_of(event),
                line,
                agent,
                tool,
                args,
            }),
            _ => None,
        }
    }
}

/// The free text whose topic a [`TopicAssigner`] is asked about: a
/// handoff's `content` when it has no explicit `topic`, a collaboration's
/// `request`; `None` for other events and for blank text.
pub fn topic_text(event: &Event) -> Option<&str> {
    match &event.kind {
        EventKind::Handoff {
            topic: None,
            content: Some(content),
            ..
        } => Some(content.as_str()),
        EventKind::Collaboration { request, .. } => Some(request.as_str()),
        _ => None,
    }
    .filter(|text| !text.trim().is_empty())
}

/// A seed for ids that must not collide with another process's (episode
/// ids in a shared store, topic ids): mixed from the wall clock and the
/// process id, below 2^62 so that ids fit every backend's signed 64-bit
/// column with room to count up, and never 0.
pub fn id_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or_default();
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(nanos);
    hasher.write_u32(std::process::id());
    (hasher.finish() >> 2).max(1)
}

/// The event's `task_type` field, when it is a string (for per-type
/// thresholds).
pub(crate) fn task_type_of(event: &Event) -> Option<&str> {
    event.extra.get("task_type").and_then(|v| v.as_str())
}
