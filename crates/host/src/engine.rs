//! The engine: per-task state, the detector pipeline and the action policy.

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use compact_str::CompactString;
use foldhash::HashMap as FastHashMap;
use foldhash::fast::FixedState;
use loopguard_core_types::{
    Action, Config, Decision, Detection, Event, EventKind, Severity, TaskStatus, Timestamp, kinds,
};
use loopguard_detectors::{BuiltinDetectors, BuiltinState, ObservedEvent, pauses_task};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::HostError;
use crate::extension::{ExtensionDetector, TopicAssigner};
use crate::store::{
    AuditEntry, AuditRecord, CycleEpisode, Durability, MemoryStore, PivotRecord, Resolution, Store,
    StoreError, TaskCommit, TaskLock, TaskRecord, TaskSnapshot,
};
use crate::writer::CommitQueue;

/// Shards of the task map: enough that tokio tasks working on different
/// loopguard tasks rarely wait for each other.
const SHARDS: usize = 64;
/// One shard is swept for idle tasks every this many events, so eviction
/// costs a bounded, amortized amount per event.
const SWEEP_EVERY: u64 = 1024;
/// Lines kept per cycle-log episode.
const EPISODE_LINES: usize = 64;
/// The format of the detector state a durable store keeps per task. A
/// stored state of another format is not read: the task continues from its
/// counters, and the decision says so.
pub const STATE_FORMAT: u32 = 1;
/// The key of the topic assigner's state among the extensions' states.
const TOPICS_STATE: &str = "topics";

/// The loopguard engine. Cheap to share (`Arc<LoopGuard>`); `observe` may be
/// called from many tokio tasks for many task ids at once.
///
/// ```
/// use loopguard_core_types::{Action, Config, Event};
/// use loopguard_host::LoopGuard;
///
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// let guard = LoopGuard::new(Config::default())?;
/// let failure = r#"{"type":"failure","task":"T1","agent":"coder","error":"E0308"}"#;
/// let mut last = None;
/// for _ in 0..4 {
///     last = Some(guard.observe(Event::from_json(failure)?).await);
/// }
/// let decision = last.expect("four decisions");
/// assert_eq!(decision.loop_count, 3);
/// assert_eq!(decision.action, Action::Escalate);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct LoopGuard {
    config: Arc<Config>,
    detectors: BuiltinDetectors,
    extensions: Vec<Arc<dyn ExtensionDetector>>,
    topics: Option<Arc<dyn TopicAssigner>>,
    store: Arc<dyn Store>,
    shards: Box<[Mutex<Shard>]>,
    sequence: AtomicU64,
    observed: AtomicU64,
    next_sweep: AtomicUsize,
    next_episode: AtomicU64,
    durability: Durability,
    queue: OnceLock<CommitQueue>,
}

#[derive(Debug, Default)]
struct Shard {
    /// Task ids up to 24 bytes are stored inline in the key, so a lookup
    /// compares against the table's own memory rather than chasing a
    /// pointer to a separate allocation.
    tasks: FastHashMap<CompactString, TaskState>,
}

/// What the engine keeps per live task.
#[derive(Debug, Default)]
struct TaskState {
    builtin: BuiltinState,
    loop_count: u32,
    status: TaskStatus,
    last_seen_ms: i64,
    episode: Option<Box<CycleEpisode>>,
    /// The version of the task's stored record this state matches (durable
    /// stores only).
    version: u64,
}

/// A task's state as a durable store keeps it (JSON text, written whole at
/// every commit).
#[derive(Serialize)]
struct StoredStateOut<'a> {
    format: u32,
    builtin: &'a BuiltinState,
    #[serde(skip_serializing_if = "Option::is_none")]
    episode: Option<&'a CycleEpisode>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    extensions: &'a BTreeMap<String, serde_json::Value>,
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
}

/// A task read back from the store, to take the place of (or fill in for)
/// the engine's copy.
struct Restored {
    snapshot: TaskSnapshot,
    version: u64,
    builtin: BuiltinState,
    episode: Option<Box<CycleEpisode>>,
}

/// Builds a [`LoopGuard`] with a store and extension detectors.
#[derive(Debug)]
pub struct LoopGuardBuilder {
    config: Config,
    store: Option<Arc<dyn Store>>,
    extensions: Vec<Arc<dyn ExtensionDetector>>,
    topics: Option<Arc<dyn TopicAssigner>>,
}

impl LoopGuardBuilder {
    /// Keeps task snapshots and the cycle log in `store` (default: a
    /// [`MemoryStore`]).
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// Adds a detector beyond the built-in ones (a plugin, a semantic
    /// detector). Its detections join the built-in ones in the policy.
    pub fn extension(mut self, detector: Arc<dyn ExtensionDetector>) -> Self {
        self.extensions.push(detector);
        self
    }

    /// Chooses topics by similarity for `topic_cycle` (the semantic
    /// crate's assigner); without one, topics are exact normalized text.
    pub fn topics(mut self, assigner: Arc<dyn TopicAssigner>) -> Self {
        self.topics = Some(assigner);
        self
    }

    /// Validates the config and builds the engine.
    pub fn build(self) -> Result<LoopGuard, HostError> {
        self.config.validate()?;
        let shards = (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect();
        let store = self.store.unwrap_or_else(|| Arc::new(MemoryStore::new()));
        Ok(LoopGuard {
            detectors: BuiltinDetectors::new(&self.config),
            config: Arc::new(self.config),
            extensions: self.extensions,
            topics: self.topics,
            durability: store.durability(),
            store,
            shards,
            sequence: AtomicU64::new(0),
            observed: AtomicU64::new(0),
            next_sweep: AtomicUsize::new(0),
            next_episode: AtomicU64::new(episode_id_seed()),
            queue: OnceLock::new(),
        })
    }
}

/// Everything that must reach the store after one event, gathered under the
/// task's lock and written after it is released.
#[derive(Default)]
struct Writes {
    /// Memory stores: episodes that changed.
    episodes: Vec<CycleEpisode>,
    /// Memory stores: the snapshot, when it changed.
    snapshot: Option<TaskSnapshot>,
    /// Durable stores: the event's commit, when it is not queued.
    commit: Option<TaskCommit>,
    /// Durable stores: the queued commit's answer.
    queued: Option<tokio::sync::oneshot::Receiver<Result<(), StoreError>>>,
}

impl LoopGuard {
    /// An engine with the built-in detectors and an in-memory store.
    pub fn new(config: Config) -> Result<LoopGuard, HostError> {
        LoopGuard::builder(config).build()
    }

    /// A builder, to add a store or extension detectors.
    pub fn builder(config: Config) -> LoopGuardBuilder {
        LoopGuardBuilder {
            config,
            store: None,
            extensions: Vec::new(),
            topics: None,
        }
    }

    /// The engine's configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The engine's store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Observes one streamed event: an event without `ts` happened "now",
    /// and the decision's `line` is the engine's own sequence number.
    pub async fn observe(&self, event: Event) -> Decision {
        let line = self.sequence.fetch_add(1, Ordering::Relaxed) + 1;
        let time = event.ts.unwrap_or_else(Timestamp::now);
        self.observe_inner(line, event, Some(time)).await
    }

    /// Observes one replayed event from input line `line`: an event without
    /// `ts` is timed by file order only, so time windows do not apply to it.
    pub async fn observe_line(&self, line: u64, event: Event) -> Decision {
        let time = event.ts;
        self.observe_inner(line, event, time).await
    }

    /// The live state of a task, if the engine holds it in memory.
    pub fn task(&self, task: &str) -> Option<TaskSnapshot> {
        let shard = self.shard_of(task).lock();
        shard.tasks.get(task).map(|state| TaskSnapshot {
            task: task.to_owned(),
            status: state.status,
            loop_count: state.loop_count,
            pivots: state.builtin.pivots(),
            last_seen: Timestamp(state.last_seen_ms),
        })
    }

    /// Number of tasks held in memory.
    pub fn live_tasks(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.lock().tasks.len())
            .sum()
    }

    /// Evicts from memory every task idle for longer than the TTL as of
    /// `now`. The engine also does this on its own, one shard at a time, as
    /// events arrive. Returns how many tasks were evicted.
    pub fn evict_idle(&self, now: Timestamp) -> usize {
        (0..self.shards.len())
            .map(|index| self.sweep_shard(index, now.as_millis()))
            .sum()
    }

    fn sweep_shard(&self, index: usize, now_ms: i64) -> usize {
        let ttl_ms = i64::try_from(self.config.engine.task_ttl_secs.saturating_mul(1000))
            .unwrap_or(i64::MAX);
        let Some(shard) = self.shards.get(index) else {
            return 0;
        };
        let mut shard = shard.lock();
        let before = shard.tasks.len();
        shard
            .tasks
            .retain(|_, state| now_ms.saturating_sub(state.last_seen_ms) <= ttl_ms);
        before - shard.tasks.len()
    }

    fn is_live(&self, task: &str) -> bool {
        self.shard_of(task).lock().tasks.contains_key(task)
    }

    fn shard_of(&self, task: &str) -> &Mutex<Shard> {
        // The shard's map hashes with the same function and takes its bucket
        // from the low bits, so the shard comes from the top bits of a
        // multiplicative remix: keys of one shard still spread over all of
        // its buckets.
        let hash = FixedState::default()
            .hash_one(task)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let index = ((hash >> 58) as usize) % self.shards.len().max(1);
        &self.shards[index]
    }

    async fn observe_inner(&self, line: u64, event: Event, time: Option<Timestamp>) -> Decision {
        let mut errors = Vec::new();
        // A shared store is read under the task's row lock on every event:
        // another engine may have moved the task on since this one saw it.
        let mut lock: Option<Box<dyn TaskLock>> = None;
        let stored = match self.durability {
            Durability::Shared => match self.store.lock_task(&event.task).await {
                Ok(held) => {
                    let stored = held.record().cloned();
                    lock = Some(held);
                    stored.filter(|record| self.held_version(&event.task) != Some(record.version))
                }
                Err(err) => {
                    tracing::error!(task = %event.task, line, error = %err, "task lock failed");
                    errors.push(format!("store: {err}"));
                    None
                }
            },
            // A task the engine does not hold (new, evicted, or from
            // before a restart) continues from its stored record.
            _ if self.is_live(&event.task) => None,
            _ => match self.store.load_record(&event.task).await {
                Ok(record) => record,
                Err(err) => {
                    tracing::error!(task = %event.task, line, error = %err, "task read failed");
                    errors.push(format!("store: {err}"));
                    None
                }
            },
        };
        let restored = match stored {
            Some(record) => Some(self.restore(record, line, &mut errors).await),
            None => None,
        };
        let semantic_topic = match (&self.topics, topic_text(&event)) {
            (Some(assigner), Some(text)) => {
                let task_type = event.extra.get("task_type").and_then(|v| v.as_str());
                match assigner.assign(&event.task, task_type, line, text).await {
                    Ok(topic) => topic,
                    Err(err) => {
                        tracing::error!(task = %event.task, line, error = %err, "topic assignment failed");
                        errors.push(format!("topic assigner: {err}"));
                        None
                    }
                }
            }
            _ => None,
        };
        let observed = ObservedEvent {
            line,
            event: &event,
            time,
            progressed: false,
            semantic_topic: semantic_topic.as_ref(),
        };
        // Extension detectors may await (plugins run off the reactor), so
        // they run before the task's lock is taken.
        let mut extension_detections = Vec::new();
        for extension in &self.extensions {
            match extension.observe(&observed).await {
                Ok(found) => extension_detections.extend(found),
                Err(err) => {
                    tracing::error!(task = %event.task, line, detector = extension.name(), error = %err, "detector failed");
                    errors.push(format!("detector {}: {err}", extension.name()));
                }
            }
        }
        let is_reset = matches!(event.kind, EventKind::Completed | EventKind::Human { .. });
        if is_reset {
            for extension in &self.extensions {
                extension.reset_task(&event.task).await;
            }
            if let Some(assigner) = &self.topics {
                assigner.reset_task(&event.task).await;
            }
        }
        let extension_states = if self.durability == Durability::Memory {
            BTreeMap::new()
        } else {
            self.export_extensions(&event.task).await
        };
        let now_ms = time.unwrap_or_else(Timestamp::now).as_millis();
        let (mut decision, writes) = self.decide(
            &observed,
            now_ms,
            restored,
            extension_detections,
            errors,
            &extension_states,
        );
        decision.task = event.task;
        decision.id = event.id;
        self.write(writes, lock, &mut decision).await;
        self.log(&decision);
        let count = self.observed.fetch_add(1, Ordering::Relaxed) + 1;
        if count % SWEEP_EVERY == 0 {
            let index = self.next_sweep.fetch_add(1, Ordering::Relaxed) % self.shards.len();
            self.sweep_shard(index, now_ms);
        }
        decision
    }

    /// The stored version of the task this engine holds, if it holds it.
    fn held_version(&self, task: &str) -> Option<u64> {
        self.shard_of(task)
            .lock()
            .tasks
            .get(task)
            .map(|state| state.version)
    }

    /// Reads a stored record back: the built-in detectors' state, and the
    /// extensions' states handed back to them. A state that cannot be read
    /// leaves the counters (loop count, status, pivots) and says so.
    async fn restore(&self, record: TaskRecord, line: u64, errors: &mut Vec<String>) -> Restored {
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
        let (builtin, episode, mut extensions) = match state {
            Some(state) => (state.builtin, state.episode, state.extensions),
            None => (
                BuiltinState::restored(record.snapshot.pivots),
                None,
                BTreeMap::new(),
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
        if let Some(assigner) = &self.topics {
            let result = match extensions.remove(TOPICS_STATE) {
                Some(state) => assigner.import_task(&task, state).await,
                None => {
                    assigner.reset_task(&task).await;
                    Ok(())
                }
            };
            if let Err(err) = result {
                assigner.reset_task(&task).await;
                tracing::error!(task = %task, line, error = %err, "topics not restored");
                errors.push(format!(
                    "topic assigner: its saved state was not restored: {err}"
                ));
            }
        }
        Restored {
            snapshot: record.snapshot,
            version: record.version,
            builtin,
            episode,
        }
    }

    /// The extensions' states of a task, for a durable store.
    async fn export_extensions(&self, task: &str) -> BTreeMap<String, serde_json::Value> {
        let mut states = BTreeMap::new();
        for extension in &self.extensions {
            if let Some(state) = extension.export_task(task).await {
                states.insert(extension.name().to_owned(), state);
            }
        }
        if let Some(assigner) = &self.topics
            && let Some(state) = assigner.export_task(task).await
        {
            states.insert(TOPICS_STATE.to_owned(), state);
        }
        states
    }

    /// The synchronous core: detectors, loop count, status, action, episode.
    fn decide(
        &self,
        observed: &ObservedEvent<'_>,
        now_ms: i64,
        restored: Option<Restored>,
        extension_detections: Vec<Detection>,
        mut errors: Vec<String>,
        extension_states: &BTreeMap<String, serde_json::Value>,
    ) -> (Decision, Writes) {
        let event = observed.event;
        let mut detections = Vec::new();
        let mut writes = Writes::default();
        let mut shard = self.shard_of(&event.task).lock();
        if let Some(restored) = restored {
            // A shared store's newer record replaces the engine's copy; for
            // the others, a copy made meanwhile by a concurrent event of the
            // same task wins over the store's older record.
            let replace = self.durability == Durability::Shared
                || !shard.tasks.contains_key(event.task.as_str());
            if replace {
                shard.tasks.insert(
                    CompactString::from(event.task.as_str()),
                    TaskState {
                        builtin: restored.builtin,
                        loop_count: restored.snapshot.loop_count,
                        status: restored.snapshot.status,
                        last_seen_ms: restored.snapshot.last_seen.as_millis(),
                        episode: restored.episode,
                        version: restored.version,
                    },
                );
            }
        }
        let state = match shard.tasks.get_mut(event.task.as_str()) {
            Some(state) => state,
            None => shard
                .tasks
                .entry(CompactString::from(event.task.as_str()))
                .or_default(),
        };
        state.last_seen_ms = now_ms;
        if state.status == TaskStatus::Completed {
            // Ruling 1: more events after `completed` make the task active.
            state.status = TaskStatus::Active;
        }
        let before = (state.status, state.loop_count, state.builtin.pivots());
        let durable = self.durability != Durability::Memory;
        let mut audit = Vec::new();
        let mut pivot_records = Vec::new();

        // Ruling 9: detectors run on every event, gated tasks included.
        self.detectors
            .observe(&mut state.builtin, observed, &mut detections);
        detections.extend(extension_detections);

        let gate = self.config.gate.loops_before_gate;
        let mut action = Action::None;
        let mut directive = None;
        for detection in &mut detections {
            if kinds::feeds_loop_count(&detection.kind) {
                state.loop_count = state.loop_count.saturating_add(1);
                apply_loop_policy(detection, state.loop_count, gate);
            }
            let implied = if detection.action == Action::Abort {
                TaskStatus::AbortedStuck
            } else if pauses_task(detection) {
                TaskStatus::Paused
            } else if detection.action == Action::Escalate {
                TaskStatus::Escalated
            } else {
                TaskStatus::Active
            };
            if implied.precedence() > state.status.precedence() {
                state.status = implied;
            }
            if directive.is_none() {
                directive.clone_from(&detection.directive);
            }
            action = action.max(detection.action);
        }
        let time = Timestamp(now_ms);
        if durable {
            for detection in &detections {
                let mut recorded = detection.clone();
                recorded.line = Some(observed.line);
                audit.push(AuditEntry {
                    task: event.task.clone(),
                    line: observed.line,
                    at: time,
                    record: AuditRecord::Detection(Box::new(recorded)),
                });
                if detection.action == Action::Pivot {
                    pivot_records.push(PivotRecord {
                        task: event.task.clone(),
                        line: observed.line,
                        at: time,
                        number: state.builtin.pivots(),
                        directive: detection.directive.clone(),
                    });
                }
            }
        }

        // The gate holds until a human; an abort is terminal.
        if state.status == TaskStatus::AbortedStuck {
            action = Action::Abort;
        } else if state.status.is_gated() {
            action = action.max(Action::Escalate);
        }

        // The episode is written when it opens and when it changes in a way
        // a reader of the log cares about (a new pattern, a stronger
        // intervention, the gate); further evidence lines ride along with
        // the next such write or the resolution.
        let mut episode_changed = false;
        if !detections.is_empty() {
            let episode = state.episode.get_or_insert_with(|| {
                episode_changed = true;
                Box::new(CycleEpisode {
                    id: self.next_episode.fetch_add(1, Ordering::Relaxed),
                    task: event.task.clone(),
                    opened_at: time,
                    patterns: Vec::new(),
                    intervention: Action::None,
                    escalated: false,
                    lines: Vec::new(),
                    resolution: None,
                    resolved_at: None,
                })
            });
            for detection in &detections {
                if !episode.patterns.iter().any(|kind| *kind == detection.kind) {
                    episode.patterns.push(detection.kind.to_string());
                    episode_changed = true;
                }
            }
            if action > episode.intervention {
                episode.intervention = action;
                episode_changed = true;
            }
            if state.status.is_gated() && !episode.escalated {
                episode.escalated = true;
                episode_changed = true;
            }
            if episode.lines.len() < EPISODE_LINES {
                episode.lines.push(observed.line);
            }
        }

        let resolution = match event.kind {
            _ if state.status == TaskStatus::AbortedStuck => {
                (before.0 != TaskStatus::AbortedStuck).then_some(Resolution::Aborted)
            }
            EventKind::Completed => Some(Resolution::Completed),
            EventKind::Human { .. } => Some(Resolution::Human),
            _ => None,
        };
        if let Some(resolution) = resolution {
            if let Some(mut episode) = state.episode.take() {
                episode.resolution = Some(resolution);
                episode.resolved_at = Some(time);
                writes.episodes.push(*episode);
            }
            if state.status != TaskStatus::AbortedStuck {
                // `completed` and `human` reset every counter; a human also
                // lifts the gate.
                if durable && matches!(resolution, Resolution::Completed | Resolution::Human) {
                    audit.push(AuditEntry {
                        task: event.task.clone(),
                        line: observed.line,
                        at: time,
                        record: AuditRecord::Reset {
                            reason: resolution,
                            previous_loop_count: state.loop_count,
                            previous_pivots: state.builtin.pivots(),
                            previous_status: state.status,
                        },
                    });
                }
                state.builtin.reset();
                state.loop_count = 0;
                state.status = if matches!(event.kind, EventKind::Completed) {
                    TaskStatus::Completed
                } else {
                    TaskStatus::Active
                };
                action = Action::None;
            }
        } else if let Some(episode) = &state.episode
            && episode_changed
        {
            writes.episodes.push((**episode).clone());
        }

        let pivots = state.builtin.pivots();
        let snapshot = || TaskSnapshot {
            task: event.task.clone(),
            status: state.status,
            loop_count: state.loop_count,
            pivots,
            last_seen: time,
        };
        if durable {
            // Every event changes some detector's state: the whole record is
            // written, one version up.
            let stored = match serde_json::to_string(&StoredStateOut {
                format: STATE_FORMAT,
                builtin: &state.builtin,
                episode: state.episode.as_deref(),
                extensions: extension_states,
            }) {
                Ok(text) => Some(text),
                Err(err) => {
                    errors.push(format!(
                        "store: the detector state cannot be written: {err}"
                    ));
                    None
                }
            };
            let commit = TaskCommit {
                record: TaskRecord {
                    snapshot: snapshot(),
                    version: state.version + 1,
                    state: stored,
                },
                audit,
                pivots: pivot_records,
                episodes: std::mem::take(&mut writes.episodes),
            };
            state.version += 1;
            // Queued while the task's lock is held, so two events of one
            // task reach the store in the order they were decided.
            match self.durability {
                Durability::Durable if self.store.group_commit() => match self.commit_queue() {
                    Some(queue) => writes.queued = Some(queue.push(commit)),
                    None => writes.commit = Some(commit),
                },
                _ => writes.commit = Some(commit),
            }
        } else if (state.status, state.loop_count, pivots) != before {
            writes.snapshot = Some(snapshot());
        }
        let decision = Decision {
            line: observed.line,
            // Filled in by the caller, which owns the event and moves its
            // task and id in rather than copying them.
            task: String::new(),
            action,
            loop_count: state.loop_count,
            status: state.status,
            pivots,
            directive,
            id: None,
            detections,
            errors,
        };
        (decision, writes)
    }

    /// The durable writer's queue, started on first use (on the tokio
    /// runtime the engine is driven from). `None` outside a tokio runtime:
    /// each event then commits on its own.
    fn commit_queue(&self) -> Option<&CommitQueue> {
        if let Some(queue) = self.queue.get() {
            return Some(queue);
        }
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        Some(
            self.queue
                .get_or_init(|| CommitQueue::start(&runtime, Arc::clone(&self.store))),
        )
    }

    async fn write(
        &self,
        writes: Writes,
        lock: Option<Box<dyn TaskLock>>,
        decision: &mut Decision,
    ) {
        // A store that fails loses nothing already in memory; the failure is
        // logged with what it was about, reported on the decision, and the
        // pipeline goes on.
        for episode in &writes.episodes {
            if let Err(err) = self.store.record_episode(episode).await {
                tracing::error!(task = %episode.task, episode = episode.id, error = %err, "cycle log write failed");
            }
        }
        if let Some(snapshot) = &writes.snapshot
            && let Err(err) = self.store.save_task(snapshot).await
        {
            tracing::error!(task = %snapshot.task, error = %err, "task snapshot write failed");
        }
        let outcome = match (writes.queued, writes.commit, lock) {
            (Some(answer), _, _) => match answer.await {
                Ok(outcome) => outcome,
                Err(_) => Err(StoreError::Backend {
                    backend: format!("{:?}", self.store),
                    message: "the store's writer stopped".into(),
                }),
            },
            (None, Some(commit), Some(lock)) => lock.commit(&commit).await,
            (None, Some(commit), None) => self.store.commit(std::slice::from_ref(&commit)).await,
            (None, None, _) => Ok(()),
        };
        if let Err(err) = outcome {
            tracing::error!(task = %decision.task, line = decision.line, error = %err, "store commit failed");
            decision.errors.push(format!("store: {err}"));
        }
    }

    fn log(&self, decision: &Decision) {
        for detection in &decision.detections {
            tracing::info!(
                task = %decision.task,
                line = decision.line,
                kind = %detection.kind,
                severity = %detection.severity,
                reason = %detection.reason,
                "loop detected"
            );
        }
        match decision.action {
            Action::None | Action::Warn => {}
            Action::Escalate | Action::Abort => tracing::error!(
                task = %decision.task,
                line = decision.line,
                action = %decision.action,
                status = %decision.status,
                loop_count = decision.loop_count,
                "task escalated"
            ),
            action => tracing::warn!(
                task = %decision.task,
                line = decision.line,
                action = %action,
                loop_count = decision.loop_count,
                "intervention"
            ),
        }
    }
}

/// The policy for loop-feeding kinds (rulings 1, 4, 11): the task's loop
/// count sets the severity, and the action climbs from a warning to context
/// injection to the human gate when the count reaches the gate.
fn apply_loop_policy(detection: &mut Detection, loop_count: u32, gate: u32) {
    detection.loop_count = Some(loop_count);
    detection.severity = Severity::for_loop(loop_count);
    detection.action = if loop_count >= gate {
        Action::Escalate
    } else if loop_count <= 1 {
        Action::Warn
    } else {
        Action::InjectContext
    };
}

/// The free text whose topic a [`TopicAssigner`] chooses: a handoff's
/// `content` when it has no explicit `topic`, a collaboration's `request`.
fn topic_text(event: &Event) -> Option<&str> {
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

/// Where this engine's episode ids start: a value unlikely to be used by any
/// other engine writing to the same store (another run, another replica),
/// so that one engine's cycle log never overwrites another's. Mixed from the
/// wall clock and the process id; kept below 2^62 so ids fit every
/// backend's signed 64-bit column with room to count up.
fn episode_id_seed() -> u64 {
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
