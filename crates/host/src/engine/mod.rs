//! The engine: per-task state and the pipeline one event goes through.
//!
//! [`LoopGuard::observe`] runs one event through named stages, each a
//! method of its own (`docs/architecture.md` walks them):
//!
//! 1. **load** the task's stored record when the engine does not hold the
//!    task, and [`restore`](saved) it; on a shared store (PostgreSQL, a
//!    fleet of engines) every event is instead applied to the task's
//!    newest stored row, under its lock, with the task's events that wait
//!    for the database (the [shared] path);
//! 2. **topic**, **arguments** and **exchanges**: the semantic assigner's
//!    topic for the event's text, a tool call's free-text arguments matched
//!    by meaning, and a handoff's text matched with its sender's earlier
//!    ones (for the hub tracker);
//! 3. **extensions**: plugins and the semantic and progress detectors
//!    (they may await, so they run before the task's lock is taken);
//! 4. **decide**, synchronously under the task's lock: install the
//!    restored state, run the built-in detectors (the [registry]), apply
//!    the [policy] (loop count, status, action, gate), journal the audit,
//!    track the cycle-log [episode], resolve and reset, and plan the
//!    [writes](crate::persistence);
//! 5. **write** the plan, then log and sweep idle tasks.
//!
//! [registry]: loopguard_detectors::registry
//! [policy]: crate::policy
//! [shared]: self::shared

mod episode;
mod saved;
mod shared;

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use compact_str::CompactString;
use foldhash::HashMap as FastHashMap;
use foldhash::fast::FixedState;
use loopguard_config::Config;
use loopguard_core_types::{
    Action, Decision, Detection, Event, EventKind, TaskStatus, Timestamp, kinds,
};
use loopguard_detectors::{
    BuiltinDetectors, BuiltinState, MatchedArgs, MatchedText, ObservedEvent, SemanticTopic,
};
use parking_lot::Mutex;

use self::episode::EpisodeEvent;
pub use self::saved::STATE_FORMAT;
use self::saved::{Restored, StoredStateOut, WriterMark};
use crate::HostError;
use crate::backlog::Backlog;
use crate::extension::{
    ArgumentMatcher, ExchangeMatcher, ExchangeRef, ExtensionDetector, ToolCallRef, TopicAssigner,
    topic_text,
};
use crate::persistence::{Journal, Persistence, Writes};
use crate::policy::{self, TaskCounts};
use crate::spend::{SpendRules, TaskSpend};
use crate::store::StoreError;
use crate::store::{CycleEpisode, MemoryStore, Store, TaskCommit, TaskRecord, TaskSnapshot};
use crate::writer::CommitQueue;

/// The note on a degraded decision (see [`Decision::degraded`]).
const DEGRADED_NOTE: &str = "degraded: decided on this engine's own copy of the task while \
     the shared store could not be written; another engine may have moved the task on, so \
     treat this decision as provisional until the store answers";

/// Shards of the task map: enough that tokio tasks working on different
/// loopguard tasks rarely wait for each other.
const SHARDS: usize = 64;
/// One shard is swept for idle tasks every this many events, so eviction
/// costs a bounded, amortized amount per event.
const SWEEP_EVERY: u64 = 1024;

/// The loopguard engine. Cheap to share (`Arc<LoopGuard>`); `observe` may be
/// called from many tokio tasks for many task ids at once.
///
/// ```
/// use loopguard_core_types::{Action, Event};
/// use loopguard_config::Config;
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
    engine: Arc<Engine>,
}

/// The engine's parts, shared with its background writer (see
/// [`LoopGuard::pending_writes`]).
#[derive(Debug)]
pub(crate) struct Engine {
    config: Arc<Config>,
    detectors: BuiltinDetectors,
    extensions: Vec<Arc<dyn ExtensionDetector>>,
    topics: Option<Arc<dyn TopicAssigner>>,
    arguments: Option<Arc<dyn ArgumentMatcher>>,
    exchanges: Option<Arc<dyn ExchangeMatcher>>,
    store: Arc<dyn Store>,
    shards: Box<[Mutex<Shard>]>,
    sequence: AtomicU64,
    observed: AtomicU64,
    next_sweep: AtomicUsize,
    next_episode: AtomicU64,
    persistence: Persistence,
    queue: OnceLock<CommitQueue>,
    /// A shared store's commits not written yet (see [`crate::backlog`]).
    backlog: Arc<Backlog>,
    /// Whether the backlog's background writer runs.
    flusher: OnceLock<()>,
    /// This engine's id in the writer marks it leaves on a shared store's
    /// rows.
    engine_id: u64,
    /// The number of this engine's next commit to a shared store.
    commit_seq: AtomicU64,
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
    counts: TaskCounts,
    last_seen_ms: i64,
    episode: Option<Box<CycleEpisode>>,
    /// The version of the task's stored record this state matches (durable
    /// stores only).
    version: u64,
    /// A shared store's writer marks, written back with the record.
    writers: Vec<WriterMark>,
    /// What the task spent (ruling 18); none until one of its events
    /// carries usage or a budget is set (boxed: most tasks have none).
    spend: Option<Box<TaskSpend>>,
}

impl TaskState {
    /// The task's state as a restored record left it.
    fn from_restored(restored: Restored) -> TaskState {
        TaskState {
            builtin: restored.builtin,
            counts: TaskCounts {
                loop_count: restored.snapshot.loop_count,
                status: restored.snapshot.status,
            },
            last_seen_ms: restored.snapshot.last_seen.as_millis(),
            episode: restored.episode,
            version: restored.version,
            writers: restored.writers,
            spend: restored
                .spend
                .report()
                .is_some()
                .then(|| Box::new(restored.spend)),
        }
    }

    /// Status, loop count and pivots: what a snapshot records.
    fn summary(&self) -> (TaskStatus, u32, u32) {
        (
            self.counts.status,
            self.counts.loop_count,
            self.builtin.pivots(),
        )
    }

    fn snapshot(&self, task: &str, time: Timestamp) -> TaskSnapshot {
        TaskSnapshot {
            task: task.to_owned(),
            status: self.counts.status,
            loop_count: self.counts.loop_count,
            pivots: self.builtin.pivots(),
            last_seen: time,
        }
    }
}

/// What the stages before [`Engine::decide`] worked out for one event.
struct Gathered {
    restored: Option<Restored>,
    extension_detections: Vec<Detection>,
    extension_states: BTreeMap<String, serde_json::Value>,
    errors: Vec<String>,
}

/// Builds a [`LoopGuard`] with a store and extension detectors.
#[derive(Debug)]
pub struct LoopGuardBuilder {
    config: Config,
    store: Option<Arc<dyn Store>>,
    extensions: Vec<Arc<dyn ExtensionDetector>>,
    topics: Option<Arc<dyn TopicAssigner>>,
    arguments: Option<Arc<dyn ArgumentMatcher>>,
    exchanges: Option<Arc<dyn ExchangeMatcher>>,
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

    /// Matches tool calls' free-text arguments by meaning for
    /// `tool_calls` (the semantic crate's matcher); without one, they
    /// compare as normalized text.
    pub fn arguments(mut self, matcher: Arc<dyn ArgumentMatcher>) -> Self {
        self.arguments = Some(matcher);
        self
    }

    /// Matches exchanges' texts by meaning for the hub tracker (ruling 17,
    /// the semantic crate's matcher); without one, they compare as
    /// normalized text.
    pub fn exchanges(mut self, matcher: Arc<dyn ExchangeMatcher>) -> Self {
        self.exchanges = Some(matcher);
        self
    }

    /// Validates the config and builds the engine.
    pub fn build(self) -> Result<LoopGuard, HostError> {
        self.config.validate()?;
        let shards = (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect();
        let store = self.store.unwrap_or_else(|| Arc::new(MemoryStore::new()));
        Ok(LoopGuard {
            engine: Arc::new(Engine {
                detectors: BuiltinDetectors::new(&self.config),
                config: Arc::new(self.config),
                extensions: self.extensions,
                topics: self.topics,
                arguments: self.arguments,
                exchanges: self.exchanges,
                persistence: Persistence::of(store.as_ref()),
                store,
                shards,
                sequence: AtomicU64::new(0),
                observed: AtomicU64::new(0),
                next_sweep: AtomicUsize::new(0),
                next_episode: AtomicU64::new(episode_id_seed()),
                queue: OnceLock::new(),
                backlog: Arc::new(Backlog::default()),
                flusher: OnceLock::new(),
                engine_id: crate::extension::id_seed(),
                commit_seq: AtomicU64::new(1),
            }),
        })
    }
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
            arguments: None,
            exchanges: None,
        }
    }

    /// The engine's configuration.
    pub fn config(&self) -> &Config {
        &self.engine.config
    }

    /// The engine's store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.engine.store
    }

    /// Observes one streamed event: an event without `ts` happened "now",
    /// and the decision's `line` is the engine's own sequence number.
    pub async fn observe(&self, event: Event) -> Decision {
        let line = self.engine.sequence.fetch_add(1, Ordering::Relaxed) + 1;
        let time = event.ts.unwrap_or_else(Timestamp::now);
        self.observe_inner(line, event, Some(time)).await
    }

    /// Observes one replayed event from input line `line`: an event without
    /// `ts` is timed by file order only, so time windows do not apply to it.
    pub async fn observe_line(&self, line: u64, event: Event) -> Decision {
        let time = event.ts;
        self.observe_inner(line, event, time).await
    }

    async fn observe_inner(&self, line: u64, event: Event, time: Option<Timestamp>) -> Decision {
        if self.engine.persistence.is_shared() {
            Engine::start_writer(&self.engine);
            self.engine.observe_shared(line, event, time).await
        } else {
            self.engine.observe_owned(line, event, time).await
        }
    }

    /// The live state of a task, if the engine holds it in memory.
    pub fn task(&self, task: &str) -> Option<TaskSnapshot> {
        let shard = self.engine.shard_of(task).lock();
        shard
            .tasks
            .get(task)
            .map(|state| state.snapshot(task, Timestamp(state.last_seen_ms)))
    }

    /// Number of tasks held in memory.
    pub fn live_tasks(&self) -> usize {
        self.engine
            .shards
            .iter()
            .map(|shard| shard.lock().tasks.len())
            .sum()
    }

    /// Evicts from memory every task idle for longer than the TTL as of
    /// `now`. The engine also does this on its own, one shard at a time, as
    /// events arrive. Returns how many tasks were evicted.
    pub fn evict_idle(&self, now: Timestamp) -> usize {
        (0..self.engine.shards.len())
            .map(|index| self.engine.sweep_shard(index, now.as_millis()))
            .sum()
    }

    /// Events of a shared store's tasks not yet written (the database did
    /// not answer when they were decided, see [`Decision::degraded`]).
    /// They are written in the background as the database answers again,
    /// and before each task's next event; each is applied to the task's
    /// newest stored row, never written over it.
    pub fn pending_writes(&self) -> usize {
        self.engine.backlog.len()
    }

    /// Writes the waiting events now (see [`LoopGuard::pending_writes`]),
    /// e.g. before shutting down. Returns how many still wait: 0 when all
    /// are written, else the store's error.
    pub async fn write_pending(&self) -> Result<usize, StoreError> {
        self.engine.write_waiting().await?;
        Ok(self.engine.backlog.len())
    }
}

impl Engine {
    fn sweep_shard(&self, index: usize, now_ms: i64) -> usize {
        let ttl_ms = i64::try_from(self.config.engine.task_ttl_secs.saturating_mul(1000))
            .unwrap_or(i64::MAX);
        let Some(shard) = self.shards.get(index) else {
            return 0;
        };
        let mut shard = shard.lock();
        let before = shard.tasks.len();
        // A task whose commits wait in the backlog stays: the engine's copy
        // is newer than the stored one.
        shard.tasks.retain(|task, state| {
            now_ms.saturating_sub(state.last_seen_ms) <= ttl_ms || self.backlog.holds(task)
        });
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

    /// One event on a memory or durable store (one engine owns the task):
    /// load, apply, write.
    async fn observe_owned(&self, line: u64, event: Event, time: Option<Timestamp>) -> Decision {
        let mut errors = Vec::new();
        let restored = self.load(&event.task, line, &mut errors).await;
        let (mut decision, writes) = self.apply(line, &event, time, restored, errors).await;
        decision.task = event.task;
        decision.id = event.id;
        if let Err(err) = writes.write(self.store.as_ref()).await {
            tracing::error!(task = %decision.task, line = decision.line, error = %err, "store commit failed");
            decision.errors.push(format!("store: {err}"));
        }
        self.finish(&decision, time);
        decision
    }

    /// Stages 2 to 4 for one event: its decision (without its task and id,
    /// which the caller moves in) and what it writes. `restored` is the
    /// task's stored record, installed before the event is decided.
    async fn apply(
        &self,
        line: u64,
        event: &Event,
        time: Option<Timestamp>,
        restored: Option<Restored>,
        mut errors: Vec<String>,
    ) -> (Decision, Writes) {
        let topic = self.assign_topic(event, line, &mut errors).await;
        let matched_args = self.match_arguments(event, line, &mut errors).await;
        let matched_text = self.match_exchange(event, line, &mut errors).await;
        let mut observed = ObservedEvent::new(line, event)
            .at(time)
            .with_topic(topic.as_ref())
            .with_matched_args(matched_args.as_ref())
            .with_matched_text(matched_text.as_ref());
        let extension_detections = self.run_extensions(&observed, &mut errors).await;
        let extension_states = if self.persistence.keeps_state() {
            self.export_extensions(&event.task).await
        } else {
            BTreeMap::new()
        };
        let now_ms = time.unwrap_or_else(Timestamp::now).as_millis();
        let gathered = Gathered {
            restored,
            extension_detections,
            extension_states,
            errors,
        };
        self.decide(&mut observed, now_ms, gathered)
    }

    /// Stage 5's bookkeeping: log the decision, and now and then sweep idle
    /// tasks.
    fn finish(&self, decision: &Decision, time: Option<Timestamp>) {
        self.log(decision);
        self.sweep_now_and_then(time.unwrap_or_else(Timestamp::now).as_millis());
    }

    /// Stage 1, load (memory and durable stores): the task's stored record,
    /// restored, when the engine does not hold the task (new, evicted, or
    /// from before a restart).
    async fn load(&self, task: &str, line: u64, errors: &mut Vec<String>) -> Option<Restored> {
        if self.is_live(task) {
            return None;
        }
        let stored = match self.store.load_record(task).await {
            Ok(record) => record,
            Err(err) => {
                tracing::error!(task = %task, line, error = %err, "task read failed");
                errors.push(format!("store: {err}"));
                None
            }
        };
        match stored {
            Some(record) => Some(self.restore(record, line, errors).await),
            None => None,
        }
    }

    /// Stage 2, topic: the topic a semantic assigner chooses for the
    /// event's free text (a handoff's content without an explicit topic, a
    /// collaboration's request), when one is configured.
    async fn assign_topic(
        &self,
        event: &Event,
        line: u64,
        errors: &mut Vec<String>,
    ) -> Option<SemanticTopic> {
        let (Some(assigner), Some(text)) = (&self.topics, topic_text(event)) else {
            return None;
        };
        let task_type = crate::extension::task_type_of(event);
        match assigner.assign(&event.task, task_type, line, text).await {
            Ok(topic) => topic,
            Err(err) => {
                tracing::error!(task = %event.task, line, error = %err, "topic assignment failed");
                errors.push(format!("topic assigner: {err}"));
                None
            }
        }
    }

    /// Stage 2, arguments: a successful tool call's free-text arguments
    /// matched by meaning, when a matcher is configured. A matcher that
    /// fails is reported on the decision; the call then compares by
    /// normalized text.
    async fn match_arguments(
        &self,
        event: &Event,
        line: u64,
        errors: &mut Vec<String>,
    ) -> Option<MatchedArgs> {
        let (Some(matcher), Some(call)) = (&self.arguments, ToolCallRef::of(event, line)) else {
            return None;
        };
        match matcher.match_args(call).await {
            Ok(matched) => matched,
            Err(err) => {
                tracing::error!(task = %event.task, line, error = %err, "argument matching failed");
                errors.push(format!("argument matcher: {err}"));
                None
            }
        }
    }

    /// Stage 2, exchanges: a handoff's or collaboration's text matched by
    /// meaning with its sender's earlier texts, when a matcher is
    /// configured. A matcher that fails is reported on the decision; the
    /// exchange then compares by normalized text.
    async fn match_exchange(
        &self,
        event: &Event,
        line: u64,
        errors: &mut Vec<String>,
    ) -> Option<MatchedText> {
        let (Some(matcher), Some(exchange)) = (&self.exchanges, ExchangeRef::of(event, line))
        else {
            return None;
        };
        match matcher.match_exchange(exchange).await {
            Ok(matched) => matched,
            Err(err) => {
                tracing::error!(task = %event.task, line, error = %err, "exchange matching failed");
                errors.push(format!("exchange matcher: {err}"));
                None
            }
        }
    }

    /// Stage 3, extensions: every extension detector in turn (they may
    /// await: plugins run off the reactor). A detector that fails is
    /// reported on the decision; the others go on. On `completed` and
    /// `human` each forgets the task afterwards, as the built-in state is
    /// reset.
    async fn run_extensions(
        &self,
        observed: &ObservedEvent<'_>,
        errors: &mut Vec<String>,
    ) -> Vec<Detection> {
        let event = observed.event;
        let mut found = Vec::new();
        for extension in &self.extensions {
            match extension.observe(observed).await {
                Ok(detections) => found.extend(detections),
                Err(err) => {
                    tracing::error!(task = %event.task, line = observed.line, detector = extension.name(), error = %err, "detector failed");
                    errors.push(format!("detector {}: {err}", extension.name()));
                }
            }
        }
        if matches!(event.kind, EventKind::Completed | EventKind::Human { .. }) {
            for extension in &self.extensions {
                extension.reset_task(&event.task).await;
            }
            for (_, seam) in self.seams() {
                seam.reset(&event.task).await;
            }
        }
        found
    }

    /// Stage 4, decide: everything synchronous, under the task's lock.
    fn decide(
        &self,
        observed: &mut ObservedEvent<'_>,
        now_ms: i64,
        gathered: Gathered,
    ) -> (Decision, Writes) {
        let Gathered {
            restored,
            extension_detections,
            extension_states,
            mut errors,
        } = gathered;
        let event = observed.event;
        let line = observed.line;
        let time = Timestamp(now_ms);
        let mut shard = self.shard_of(&event.task).lock();
        let state = self.install(&mut shard, &event.task, restored, now_ms);
        let before = state.summary();

        // Ruling 9: detectors run on every event, gated tasks included.
        let mut detections = Vec::new();
        let late = self
            .detectors
            .observe(&mut state.builtin, observed, &mut detections);
        detections.extend(extension_detections);
        let over_budget = self.account_spend(state, observed, &detections, &mut errors);
        detections.extend(over_budget);
        name_agents(&mut detections, event);

        let mut verdict = policy::apply(
            &mut state.counts,
            &mut detections,
            self.config.gate.loops_before_gate,
        );
        let mut journal = self.persistence.journal(&event.task, line, time);
        journal.detections(&detections, state.builtin.pivots());

        let mut episodes = Vec::new();
        let episode_changed = episode::track(
            &mut state.episode,
            || self.next_episode.fetch_add(1, Ordering::Relaxed),
            &EpisodeEvent {
                task: &event.task,
                line,
                time,
                detections: &detections,
                action: verdict.action,
                gated: state.counts.status.is_gated(),
            },
        );
        match policy::resolution(&event.kind, before.0, state.counts.status) {
            Some(resolution) => {
                episodes.extend(episode::close(&mut state.episode, resolution, time));
                if policy::resets_counters(resolution) {
                    journal.reset(
                        resolution,
                        state.counts.loop_count,
                        state.builtin.pivots(),
                        state.counts.status,
                    );
                    state.builtin.reset();
                    state.counts = TaskCounts {
                        loop_count: 0,
                        status: policy::status_after_reset(resolution),
                    };
                    verdict.action = Action::None;
                }
            }
            None => {
                if let Some(episode) = state.episode.as_deref()
                    && episode_changed
                {
                    episodes.push(episode.clone());
                }
            }
        }

        let writes = self.plan_writes(
            state,
            &event.task,
            time,
            before,
            journal,
            episodes,
            &extension_states,
            &mut errors,
        );
        let decision = Decision {
            usage: state.spend.as_deref().and_then(TaskSpend::report),
            line,
            // Filled in by the caller, which owns the event and moves its
            // task and id in rather than copying them.
            task: String::new(),
            action: verdict.action,
            loop_count: state.counts.loop_count,
            status: state.counts.status,
            pivots: state.builtin.pivots(),
            directive: verdict.directive,
            id: None,
            detections,
            errors,
            notes: late.into_iter().collect(),
            degraded: false,
        };
        (decision, writes)
    }

    /// Part of stage 4: the event's spend, the spend in loops its
    /// detections name, and the budget (ruling 18); the `budget`
    /// detections of the limits it crosses. A task that never had `usage`
    /// costs nothing here unless a budget is set.
    fn account_spend(
        &self,
        state: &mut TaskState,
        observed: &ObservedEvent<'_>,
        detections: &[Detection],
        errors: &mut Vec<String>,
    ) -> Vec<Detection> {
        let usage = observed.event.usage().unwrap_or_else(|err| {
            errors.push(format!("usage ignored: {err}"));
            None
        });
        if usage.is_none() && state.spend.is_none() && !self.config.budget.is_set() {
            return Vec::new();
        }
        let rules = SpendRules {
            pricing: &self.config.pricing,
            budget: &self.config.budget,
        };
        state.spend.get_or_insert_default().observe(
            observed.event,
            observed.line,
            usage.as_ref(),
            detections,
            rules,
        )
    }

    /// Part of stage 4: the engine's copy of the task, with a restored
    /// record installed. A shared store's newer record replaces the
    /// engine's copy; for the others, a copy made meanwhile by a concurrent
    /// event of the same task wins over the store's older record. Marks
    /// the task seen at `now_ms`, and active again after `completed`.
    fn install<'s>(
        &self,
        shard: &'s mut Shard,
        task: &str,
        restored: Option<Restored>,
        now_ms: i64,
    ) -> &'s mut TaskState {
        if let Some(restored) = restored
            && (self.persistence.is_shared() || !shard.tasks.contains_key(task))
        {
            shard.tasks.insert(
                CompactString::from(task),
                TaskState::from_restored(restored),
            );
        }
        let state = shard.tasks.entry(CompactString::from(task)).or_default();
        state.last_seen_ms = now_ms;
        state.counts.status = policy::status_on_new_event(state.counts.status);
        state
    }

    /// Part of stage 4: what this event writes, as the store's persistence
    /// asks. A durable store gets the whole record (every event changes
    /// some detector's state), one version up, with the journal and the
    /// episodes, queued while the task's lock is held so that two events of
    /// one task reach the store in the order they were decided; a memory
    /// store gets the episodes that changed and the snapshot when its
    /// counters changed.
    #[allow(clippy::too_many_arguments)]
    fn plan_writes(
        &self,
        state: &mut TaskState,
        task: &str,
        time: Timestamp,
        before: (TaskStatus, u32, u32),
        journal: Journal,
        episodes: Vec<CycleEpisode>,
        extension_states: &BTreeMap<String, serde_json::Value>,
        errors: &mut Vec<String>,
    ) -> Writes {
        let group_commit = match self.persistence {
            Persistence::Memory => {
                let snapshot = (state.summary() != before).then(|| state.snapshot(task, time));
                return Writes::Memory { episodes, snapshot };
            }
            Persistence::Durable { group_commit } => group_commit,
            Persistence::Shared => false,
        };
        let stored = match serde_json::to_string(&StoredStateOut {
            format: STATE_FORMAT,
            builtin: &state.builtin,
            episode: state.episode.as_deref(),
            extensions: extension_states,
            writers: &state.writers,
            spend: state
                .spend
                .as_deref()
                .filter(|spend| spend.report().is_some()),
        }) {
            Ok(text) => Some(text),
            Err(err) => {
                errors.push(format!(
                    "store: the detector state cannot be written: {err}"
                ));
                None
            }
        };
        state.version += 1;
        let commit = TaskCommit {
            line: journal.line(),
            record: TaskRecord {
                snapshot: state.snapshot(task, time),
                version: state.version,
                state: stored,
            },
            audit: journal.audit,
            pivots: journal.pivots,
            episodes,
        };
        if self.persistence.is_shared() {
            return Writes::Shared(Box::new(commit));
        }
        let queue = if group_commit {
            self.commit_queue()
        } else {
            None
        };
        match queue {
            Some(queue) => Writes::Queued(queue.push(commit)),
            None => Writes::Commit(Box::new(commit)),
        }
    }

    /// Stage 5's bookkeeping: every [`SWEEP_EVERY`] events, one shard is
    /// swept for idle tasks, so eviction costs a bounded, amortized amount
    /// per event.
    fn sweep_now_and_then(&self, now_ms: i64) {
        let count = self.observed.fetch_add(1, Ordering::Relaxed) + 1;
        if count % SWEEP_EVERY == 0 {
            let index = self.next_sweep.fetch_add(1, Ordering::Relaxed) % self.shards.len();
            self.sweep_shard(index, now_ms);
        }
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

/// Where this engine's episode ids start: a value no other engine writing
/// to the same store (another run, another replica) is likely to use, so
/// that one engine's cycle log never overwrites another's.
fn episode_id_seed() -> u64 {
    crate::extension::id_seed()
}

/// Gives every built-in detection that names no agents those of its event
/// (trace format 1.2's `agents`): a handoff's or collaboration's two
/// agents, a failure's, a turn's or a tool call's agent. Detectors that
/// know better (a cycle's agents) set their own; a plugin's kinds are the
/// plugin's to name; a phase kind is about phases, and stays without.
fn name_agents(detections: &mut [Detection], event: &Event) {
    if detections.is_empty() {
        return;
    }
    let agents: Vec<&str> = match &event.kind {
        EventKind::Handoff { from, to, .. } | EventKind::Collaboration { from, to, .. } => {
            vec![from.as_str(), to.as_str()]
        }
        EventKind::Turn { agent, .. } | EventKind::ToolCall { agent, .. } => vec![agent.as_str()],
        EventKind::Failure { agent, .. } => vec![agent.as_str()],
        _ => return,
    };
    for detection in detections {
        if detection.agents.is_empty() && kinds::ALL.contains(&detection.kind.as_ref()) {
            detection.agents = agents.iter().map(|agent| (*agent).to_owned()).collect();
        }
    }
}
