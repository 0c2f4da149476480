//! A task's saved state: what a durable store keeps per task beyond its
//! counters (the built-in detectors' state, the open cycle-log episode, the
//! extensions' own states), and how a stored record becomes the engine's
//! copy again.
//!
//! The JSON written here is saved-state format [`STATE_FORMAT`], frozen by
//! golden fixtures: renaming a field is a new format number and a new
//! fixture, and the old format is still read or refused by name.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use loopguard_detectors::BuiltinState;
use serde::{Deserialize, Serialize};

use super::Engine;
use crate::extension::{ArgumentMatcher, ExchangeMatcher, ExtensionError, TopicAssigner};
use crate::spend::TaskSpend;
use crate::store::{CycleEpisode, TaskRecord, TaskSnapshot};

/// The format of the detector state a durable store keeps per task. A
/// stored state of another format is not read: the task continues from its
/// counters, and the decision says so.
pub const STATE_FORMAT: u32 = 1;
/// The key of the topic assigner's state among the extensions' states.
const TOPICS_STATE: &str = "topics";
/// The key of the argument matcher's state among the extensions' states.
const ARGUMENTS_STATE: &str = "tool_arguments";
/// The key of the exchange matcher's state among the extensions' states.
const EXCHANGES_STATE: &str = "exchange_texts";

/// A task's state as a durable store keeps it (JSON text, written whole at
/// every commit).
#[derive(Serialize)]
pub(super) struct StoredStateOut<'a> {
    pub(super) format: u32,
    pub(super) builtin: &'a BuiltinState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) episode: Option<&'a CycleEpisode>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) extensions: &'a BTreeMap<String, serde_json::Value>,
    /// A shared store's writer marks (see [`WriterMark`]); none elsewhere.
    #[serde(skip_serializing_if = "<[WriterMark]>::is_empty")]
    pub(super) writers: &'a [WriterMark],
    /// The task's spend (ruling 18), once an event carried `usage`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) spend: Option<&'a TaskSpend>,
}

/// The mark an engine writing to a shared store leaves on a task's row
/// with each commit: which engine, and which of its commits. An engine
/// whose commit got no answer (the connection was cut during `COMMIT`)
/// reads it back to learn whether the commit landed. A row keeps the
/// newest [`WRITER_MARKS`] engines' marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct WriterMark {
    /// The engine (a random id per engine instance).
    pub(super) engine: u64,
    /// The engine's commit number (rising within the engine).
    pub(super) mark: u64,
    /// When it was written (Unix milliseconds), to drop the oldest.
    pub(super) at: i64,
}

/// Writer marks a row keeps, at most: engines that wrote the task lately.
pub(super) const WRITER_MARKS: usize = 16;

/// Sets `engine`'s mark in `marks` to `mark`, dropping the oldest marks
/// beyond [`WRITER_MARKS`].
pub(super) fn stamp(marks: &mut Vec<WriterMark>, mark: WriterMark) {
    marks.retain(|kept| kept.engine != mark.engine);
    marks.push(mark);
    if marks.len() > WRITER_MARKS {
        marks.sort_by_key(|kept| std::cmp::Reverse(kept.at));
        marks.truncate(WRITER_MARKS);
    }
}

/// [`StoredStateOut`] read back.
#[derive(Deserialize)]
struct StoredStateIn {
    format: u32,
    builtin: BuiltinState,
    #[serde(default)]
    episode: Option<Box<CycleEpisode>>,
    #[serde(default)]
    extensions: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    writers: Vec<WriterMark>,
    #[serde(default)]
    spend: TaskSpend,
}

/// A task read back from the store, to take the place of (or fill in for)
/// the engine's copy.
pub(super) struct Restored {
    pub(super) snapshot: TaskSnapshot,
    pub(super) version: u64,
    pub(super) builtin: BuiltinState,
    pub(super) episode: Option<Box<CycleEpisode>>,
    pub(super) writers: Vec<WriterMark>,
    pub(super) spend: TaskSpend,
}

impl Engine {
    /// Reads a stored record back: the built-in detectors' state, and the
    /// extensions' states handed back to them. A state that cannot be read
    /// leaves the counters (loop count, status, pivots) and says so.
    pub(super) async fn restore(
        &self,
        record: TaskRecord,
        line: u64,
        errors: &mut Vec<String>,
    ) -> Restored {
        let task = record.snapshot.task.clone();
        let state = match record
            .state
            .as_deref()
            .map(serde_json::from_str::<StoredStateIn>)
        {
            None => None,
            Some(Ok(state)) if state.format == STATE_FORMAT => Some(state),
            Some(Ok(state)) => {
                let message = format!(
                    "store: task {task}'s saved detector state has format {}, this loopguard reads {STATE_FORMAT}: continuing from its counters",
                    state.format
                );
                tracing::error!(task = %task, line, "{message}");
                errors.push(message);
                None
            }
            Some(Err(err)) => {
                let message = format!(
                    "store: task {task}'s saved detector state is unreadable ({err}): continuing from its counters"
                );
                tracing::error!(task = %task, line, "{message}");
                errors.push(message);
                None
            }
        };
        let (builtin, episode, mut extensions, writers, spend) = match state {
            Some(state) => (
                state.builtin,
                state.episode,
                state.extensions,
                state.writers,
                state.spend,
            ),
            None => (
                BuiltinState::restored(record.snapshot.pivots),
                None,
                BTreeMap::new(),
                Vec::new(),
                TaskSpend::default(),
            ),
        };
        for extension in &self.extensions {
            let result = match extensions.remove(extension.name()) {
                Some(state) => extension.import_task(&task, state).await,
                None => {
                    extension.reset_task(&task).await;
                    Ok(())
                }
            };
            if let Err(err) = result {
                // Whatever the detector kept of the task is not what the
                // store holds: it starts the task afresh.
                extension.reset_task(&task).await;
                tracing::error!(task = %task, line, detector = extension.name(), error = %err, "detector state not restored");
                errors.push(format!(
                    "detector {}: its saved state was not restored: {err}",
                    extension.name()
                ));
            }
        }
        for (key, seam) in self.seams() {
            let result = match extensions.remove(key) {
                Some(state) => seam.import(&task, state).await,
                None => {
                    seam.reset(&task).await;
                    Ok(())
                }
            };
            if let Err(err) = result {
                seam.reset(&task).await;
                let name = seam.name();
                tracing::error!(task = %task, line, error = %err, "{name}: state not restored");
                errors.push(format!("{name}: its saved state was not restored: {err}"));
            }
        }
        Restored {
            snapshot: record.snapshot,
            version: record.version,
            builtin,
            episode,
            writers,
            spend,
        }
    }

    /// Forgets what the extensions and the semantic seams hold of `task`:
    /// it has no stored record to continue from.
    pub(super) async fn forget_task_state(&self, task: &str) {
        for extension in &self.extensions {
            extension.reset_task(task).await;
        }
        for (_, seam) in self.seams() {
            seam.reset(task).await;
        }
    }

    /// The extensions' states of a task, for a durable store.
    pub(super) async fn export_extensions(
        &self,
        task: &str,
    ) -> BTreeMap<String, serde_json::Value> {
        let mut states = BTreeMap::new();
        for extension in &self.extensions {
            if let Some(state) = extension.export_task(task).await {
                states.insert(extension.name().to_owned(), state);
            }
        }
        for (key, seam) in self.seams() {
            if let Some(state) = seam.export(task).await {
                states.insert(key.to_owned(), state);
            }
        }
        states
    }
}

impl Engine {
    /// The engine's seams that keep per-task state (the topic assigner,
    /// the argument and exchange matchers), each with the key its state is
    /// saved under among the extensions' states.
    pub(super) fn seams(&self) -> Vec<(&'static str, &dyn SeamState)> {
        let mut seams: Vec<(&'static str, &dyn SeamState)> = Vec::new();
        if let Some(assigner) = &self.topics {
            seams.push((TOPICS_STATE, assigner));
        }
        if let Some(matcher) = &self.arguments {
            seams.push((ARGUMENTS_STATE, matcher));
        }
        if let Some(matcher) = &self.exchanges {
            seams.push((EXCHANGES_STATE, matcher));
        }
        seams
    }
}

/// What the engine does with a seam's per-task state, whichever seam it
/// is: the three seam traits have the same three methods.
#[async_trait]
pub(super) trait SeamState: Send + Sync {
    /// The seam, in messages ("topic assigner").
    fn name(&self) -> &'static str;
    /// Forgets the task.
    async fn reset(&self, task: &str);
    /// The task's state, for a durable store.
    async fn export(&self, task: &str) -> Option<serde_json::Value>;
    /// Puts back what `export` gave.
    async fn import(&self, task: &str, state: serde_json::Value) -> Result<(), ExtensionError>;
}

/// [`SeamState`] for an `Arc` of a seam trait, by forwarding.
macro_rules! seam_state {
    ($($seam:ident: $name:literal),+ $(,)?) => {$(
        #[async_trait]
        impl SeamState for Arc<dyn $seam> {
            fn name(&self) -> &'static str {
                $name
            }
            async fn reset(&self, task: &str) {
                self.reset_task(task).await;
            }
            async fn export(&self, task: &str) -> Option<serde_json::Value> {
                self.export_task(task).await
            }
            async fn import(
                &self,
                task: &str,
                state: serde_json::Value,
            ) -> Result<(), ExtensionError> {
                self.import_task(task, state).await
            }
        }
    )+};
}

seam_state!(
    TopicAssigner: "topic assigner",
    ArgumentMatcher: "argument matcher",
    ExchangeMatcher: "exchange matcher",
);
