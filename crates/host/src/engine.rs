//! The engine: per-task state, the detector pipeline and the action policy.

use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use compact_str::CompactString;
use foldhash::HashMap as FastHashMap;
use foldhash::fast::FixedState;
use loopguard_core_types::{
    Action, Config, Decision, Detection, Event, EventKind, Severity, TaskStatus, Timestamp, kinds,
};
use loopguard_detectors::{BuiltinDetectors, BuiltinState, ObservedEvent, pauses_task};
use parking_lot::Mutex;

use crate::HostError;
use crate::extension::{ExtensionDetector, TopicAssigner};
use crate::store::{CycleEpisode, MemoryStore, Resolution, Store, TaskSnapshot};

/// Shards of the task map: enough that tokio tasks working on different
/// loopguard tasks rarely wait for each other.
const SHARDS: usize = 64;
/// One shard is swept for idle tasks every this many events, so eviction
/// costs a bounded, amortized amount per event.
const SWEEP_EVERY: u64 = 1024;
/// Lines kept per cycle-log episode.
const EPISODE_LINES: usize = 64;

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
        Ok(LoopGuard {
            detectors: BuiltinDetectors::new(&self.config),
            config: Arc::new(self.config),
            extensions: self.extensions,
            topics: self.topics,
            store: self.store.unwrap_or_else(|| Arc::new(MemoryStore::new())),
            shards,
            sequence: AtomicU64::new(0),
            observed: AtomicU64::new(0),
            next_sweep: AtomicUsize::new(0),
            next_episode: AtomicU64::new(episode_id_seed()),
        })
    }
}

/// Everything that must reach the store after one event, gathered under the
/// task's lock and written after it is released.
#[derive(Default)]
struct Writes {
    episodes: Vec<CycleEpisode>,
    snapshot: Option<TaskSnapshot>,
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
        // A task the engine does not hold (new, evicted, or from before a
        // restart) continues from its stored snapshot: its loop count,
        // status and pivots survive; its windows start empty.
        let restored = if self.is_live(&event.task) {
            None
        } else {
            match self.store.load_task(&event.task).await {
                Ok(snapshot) => snapshot,
                Err(err) => {
                    tracing::error!(task = %event.task, line, error = %err, "task snapshot read failed");
                    errors.push(format!("store: {err}"));
                    None
                }
            }
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
        let now_ms = time.unwrap_or_else(Timestamp::now).as_millis();
        let (mut decision, writes) =
            self.decide(&observed, now_ms, restored, extension_detections, errors);
        decision.task = event.task;
        decision.id = event.id;
        self.write(writes).await;
        self.log(&decision);
        let count = self.observed.fetch_add(1, Ordering::Relaxed) + 1;
        if count % SWEEP_EVERY == 0 {
            let index = self.next_sweep.fetch_add(1, Ordering::Relaxed) % self.shards.len();
            self.sweep_shard(index, now_ms);
        }
        decision
    }

    /// The synchronous core: detectors, loop count, status, action, episode.
    fn decide(
        &self,
        observed: &ObservedEvent<'_>,
        now_ms: i64,
        restored: Option<TaskSnapshot>,
        extension_detections: Vec<Detection>,
        errors: Vec<String>,
    ) -> (Decision, Writes) {
        let event = observed.event;
        let mut detections = Vec::new();
        let mut writes = Writes::default();
        let mut shard = self.shard_of(&event.task).lock();
        let state = match shard.tasks.get_mut(event.task.as_str()) {
            Some(state) => state,
            None => shard
                .tasks
                .entry(CompactString::from(event.task.as_str()))
                .or_insert_with(|| match restored {
                    Some(snapshot) => TaskState {
                        builtin: BuiltinState::restored(snapshot.pivots),
                        loop_count: snapshot.loop_count,
                        status: snapshot.status,
                        ..TaskState::default()
                    },
                    None => TaskState::default(),
                }),
        };
        state.last_seen_ms = now_ms;
        if state.status == TaskStatus::Completed {
            // Ruling 1: more events after `completed` make the task active.
            state.status = TaskStatus::Active;
        }
        let before = (state.status, state.loop_count, state.builtin.pivots());

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

        // The gate holds until a human; an abort is terminal.
        if state.status == TaskStatus::AbortedStuck {
            action = Action::Abort;
        } else if state.status.is_gated() {
            action = action.max(Action::Escalate);
        }

        let time = Timestamp(now_ms);
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
        if (state.status, state.loop_count, pivots) != before {
            writes.snapshot = Some(TaskSnapshot {
                task: event.task.clone(),
                status: state.status,
                loop_count: state.loop_count,
                pivots,
                last_seen: time,
            });
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

    async fn write(&self, writes: Writes) {
        // A store that fails loses nothing already in memory; the failure is
        // logged with what it was about, and the pipeline goes on.
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
