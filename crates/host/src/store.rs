//! The store: where task state, the audit log and the cycle log outlive
//! the engine's memory.
//!
//! [`MemoryStore`] is the backend here; SQLite and PostgreSQL
//! (`loopguard-store-sqlx`) implement the same [`Store`] trait. A store's
//! [`Durability`] tells the engine what to write and when: a memory store
//! gets counters and the cycle log; a durable one also gets every task's
//! detector state, the audit log and the pivot records, committed before
//! the decision is returned; a shared one is also read under the task's
//! row lock on every event, so several engines can serve one task.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use loopguard_core_types::{Action, Detection, TaskStatus, Timestamp};
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};

/// What a store keeps, which decides what the engine writes to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Counters and the cycle log, in process memory (what `replay` uses):
    /// the detectors' state, the audit log and the pivot records are not
    /// written, so a replay pays nothing for them.
    #[default]
    Memory,
    /// Everything, kept by this engine alone: each event's writes (task
    /// state, audit rows, pivot records, episodes) commit in one
    /// transaction before its decision is returned; under load, the writes
    /// of many events share a transaction, in the order the events were
    /// decided.
    Durable,
    /// Durable, and shared by several engines (replicas): every event runs
    /// under its task's row lock, and an engine whose copy of a task is
    /// older than the stored one reloads it first, so counters stay exact
    /// when events of one task reach several engines at once.
    Shared,
}

/// How a detection episode ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    /// The task completed.
    Completed,
    /// A human intervened.
    Human,
    /// The task was aborted as stuck.
    Aborted,
}

/// One entry of the cycle log: a detection episode of one task, from its
/// first detection to its resolution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CycleEpisode {
    /// Unique within one engine (and, with a shared store, within the store).
    pub id: u64,
    /// The task.
    pub task: String,
    /// When the first detection happened (event time, else wall clock).
    pub opened_at: Timestamp,
    /// The detection kinds seen in this episode, in order of first sight.
    pub patterns: Vec<String>,
    /// The strongest action taken in this episode.
    pub intervention: Action,
    /// Whether the task went behind the human gate.
    pub escalated: bool,
    /// The lines of the events with detections (the first 64).
    pub lines: Vec<u64>,
    /// How the episode ended, if it has.
    pub resolution: Option<Resolution>,
    /// When it ended, if it has.
    pub resolved_at: Option<Timestamp>,
}

/// What the store keeps of a task between events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskSnapshot {
    /// The task id.
    pub task: String,
    /// Its status.
    pub status: TaskStatus,
    /// Its loop count.
    pub loop_count: u32,
    /// Its pivots since the last reset.
    pub pivots: u32,
    /// When its last event was seen.
    pub last_seen: Timestamp,
}

/// A task's durable record: its snapshot, a version that every commit of
/// the task raises, and its detectors' state.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    /// Status and counters.
    pub snapshot: TaskSnapshot,
    /// Raised by one on every commit of the task. An engine that holds an
    /// older version of the task reloads it from the store.
    pub version: u64,
    /// The detectors' state as JSON text (its format is versioned inside),
    /// when the store keeps it.
    pub state: Option<String>,
}

impl TaskRecord {
    /// What the task spent (ruling 18), read from its saved state; `None`
    /// when none of its events carried `usage` or the store keeps no state.
    pub fn spend(&self) -> Option<loopguard_core_types::Spend> {
        self.state.as_deref().and_then(crate::spend::saved_spend)
    }
}

/// One row of the audit log: what happened to a task, on which line, when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// The task.
    pub task: String,
    /// The input line (or stream sequence number) of the event.
    pub line: u64,
    /// The event's time (else the wall clock when it was observed).
    pub at: Timestamp,
    /// What happened.
    pub record: AuditRecord,
}

/// What an [`AuditEntry`] records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "entry", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AuditRecord {
    /// A detection, exactly as the decision reported it (with its line).
    Detection(Box<Detection>),
    /// The task's counters were reset (by `completed` or `human`, the only
    /// two events that reset them).
    Reset {
        /// Which event reset them.
        reason: Resolution,
        /// The loop count before the reset.
        previous_loop_count: u32,
        /// The pivots before the reset.
        previous_pivots: u32,
        /// The status before the reset.
        previous_status: TaskStatus,
    },
}

impl AuditRecord {
    /// The entry's name, as the `entry` column and field hold it:
    /// `detection` or `reset`.
    pub fn entry(&self) -> &'static str {
        match self {
            AuditRecord::Detection(_) => "detection",
            AuditRecord::Reset { .. } => "reset",
        }
    }
}

/// One task's detections in the audit log: how many, and the newest
/// ([`Store::detection_summaries`]).
#[derive(Debug, Clone, PartialEq)]
pub struct DetectionSummary {
    /// The task.
    pub task: String,
    /// How many detections the audit log holds for it.
    pub count: u64,
    /// The newest of them, as the decision reported it.
    pub last: Detection,
}

/// Each task's [`DetectionSummary`], in the order of the tasks' first
/// detections, from audit entries oldest first: what the default
/// [`Store::detection_summaries`] and the memory store compute.
pub fn summarize_detections<'a>(
    entries: impl IntoIterator<Item = &'a AuditEntry>,
) -> Vec<DetectionSummary> {
    // Each task's count and newest detection by reference; cloned once.
    let mut found: Vec<(&'a str, u64, &'a Detection)> = Vec::new();
    let mut index: HashMap<&'a str, usize> = HashMap::new();
    for entry in entries {
        let AuditRecord::Detection(detection) = &entry.record else {
            continue;
        };
        match index.get(entry.task.as_str()) {
            Some(&at) => {
                found[at].1 += 1;
                found[at].2 = detection;
            }
            None => {
                index.insert(entry.task.as_str(), found.len());
                found.push((entry.task.as_str(), 1, detection));
            }
        }
    }
    found
        .into_iter()
        .map(|(task, count, last)| DetectionSummary {
            task: task.to_owned(),
            count,
            last: last.clone(),
        })
        .collect()
}

/// A strategy pivot issued to a task: written in the same transaction as
/// the task's pivot count and its reset entropy count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PivotRecord {
    /// The task.
    pub task: String,
    /// The line of the event that caused it.
    pub line: u64,
    /// When.
    pub at: Timestamp,
    /// Which pivot since the last reset (1, 2, ...).
    pub number: u32,
    /// The directive given to the agent.
    pub directive: Option<String>,
}

/// Everything one event changed in the store, committed atomically: all of
/// it or none of it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskCommit {
    /// The input line of the event decided (the engine's sequence number
    /// when streamed): what a store recording runs marks committed.
    pub line: u64,
    /// The task's new record (its version one above the stored one).
    pub record: TaskRecord,
    /// New audit rows, in order.
    pub audit: Vec<AuditEntry>,
    /// New pivot records.
    pub pivots: Vec<PivotRecord>,
    /// Cycle-log episodes opened, changed or resolved.
    pub episodes: Vec<CycleEpisode>,
}

/// A task held under the store's row lock (see [`Store::lock_task`]): read
/// its record, decide, then commit or drop (which rolls back).
#[async_trait]
pub trait TaskLock: Send {
    /// The task's stored record, if it has one.
    fn record(&self) -> Option<&TaskRecord>;
    /// Writes `commit` and releases the lock.
    async fn commit(self: Box<Self>, commit: &TaskCommit) -> Result<(), StoreError>;
}

/// A store operation that failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The backend could not be reached or refused the operation.
    #[error("store {backend}: {message}")]
    Backend {
        /// Which backend (e.g. `sqlite:///var/lib/loopguard.db`).
        backend: String,
        /// What went wrong.
        message: String,
    },
}

/// What a durable store's writer has done with the commits it was given:
/// a snapshot of [`StoreHealth`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteHealth {
    /// Whether the writer has started (it starts with the first queued
    /// commit).
    pub started: bool,
    /// Whether it has stopped, after its last retry.
    pub stopped: bool,
    /// Commits whose first attempt failed.
    pub failed: u64,
    /// Of those, the commits a retry wrote later.
    pub recovered: u64,
    /// Commits waiting in the retry backlog now.
    pub backlog: u64,
    /// Commits never written: refused while the backlog was full, or still
    /// in the backlog when the writer stopped.
    pub lost: u64,
    /// The first commit error, as the decisions reported it.
    pub first_error: Option<String>,
    /// Why the store accepts no new events now (its retry backlog is
    /// full), when it does not.
    pub not_accepting: Option<String>,
}

/// A durable store's write health, shared by its writer (which updates it)
/// and whoever asks, e.g. a readiness probe: whether the store accepts new
/// events, and how many commits failed, were written later, or were lost.
#[derive(Debug)]
pub struct StoreHealth {
    state: tokio::sync::watch::Sender<WriteHealth>,
}

impl Default for StoreHealth {
    fn default() -> Self {
        StoreHealth {
            state: tokio::sync::watch::Sender::new(WriteHealth::default()),
        }
    }
}

impl StoreHealth {
    /// A healthy store's health: nothing written yet, nothing failed.
    pub fn new() -> StoreHealth {
        StoreHealth::default()
    }

    /// The health now.
    pub fn current(&self) -> WriteHealth {
        self.state.borrow().clone()
    }

    /// `Ok` while the store accepts new events; otherwise why not (its
    /// retry backlog is full: new events' writes are refused, and each
    /// decision says so, until the backlog is written).
    pub fn accepting(&self) -> Result<(), String> {
        match &self.state.borrow().not_accepting {
            Some(why) => Err(why.clone()),
            None => Ok(()),
        }
    }

    /// Waits until the writer has stopped (after its last retry) or, if it
    /// never started, returns at once; at most `limit`. The writer stops
    /// when the engine that queued its commits is dropped.
    pub async fn settled(&self, limit: Duration) -> WriteHealth {
        let mut changes = self.state.subscribe();
        let _ = tokio::time::timeout(
            limit,
            changes.wait_for(|health| !health.started || health.stopped),
        )
        .await;
        self.current()
    }

    /// Changes the health (the writer's side).
    pub fn update(&self, change: impl FnOnce(&mut WriteHealth)) {
        self.state.send_modify(change);
    }
}

/// One run of `replay` on a store, as the store records it: the input line
/// its numbering starts at and the last line whose event is committed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run's number in the store: 1, 2, ...
    pub run: u64,
    /// The number of the run's first input line.
    pub first_line: u64,
    /// The last input line whose event (and every event before it) is
    /// committed, or whose line error is stored; `None` before the first.
    pub last_line: Option<u64>,
    /// When the run started (wall clock).
    pub started_at: Timestamp,
}

/// A line of a run's input that was not a valid event, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredLineError {
    /// The run that read it.
    pub run: u64,
    /// The input line.
    pub line: u64,
    /// What was wrong with it.
    pub error: String,
}

/// An answer of the same-request judge's second opinion (an LLM), kept
/// so that the same pair of texts is never asked again: not after a
/// restart, and not by another engine that shares the store. The engine
/// that decided on an answer and one that reads it later decide alike.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptOpinion {
    /// What was asked, as 64 hex digits: a SHA-256 of who answers (the
    /// model and its instructions) and the two texts in order.
    pub key: String,
    /// Who answered, as reasons name it: "LLM qwen2.5-7b-instruct".
    pub by: String,
    /// Whether it called the texts the same request.
    pub same: bool,
    /// Its reason.
    pub reason: String,
    /// When it answered (wall clock).
    pub answered_at: Timestamp,
}

/// Where task state, the audit log and the cycle log are kept.
#[async_trait]
pub trait Store: Send + Sync + fmt::Debug {
    /// What the store keeps (default: [`Durability::Memory`]).
    fn durability(&self) -> Durability {
        Durability::Memory
    }
    /// Whether concurrent events' commits should share transactions (a
    /// queue and one writer, see [`Durability::Durable`]). Default: yes; a
    /// store whose commit costs no I/O says no and is written directly.
    fn group_commit(&self) -> bool {
        true
    }
    /// Inserts or replaces an episode (keyed by its id).
    async fn record_episode(&self, episode: &CycleEpisode) -> Result<(), StoreError>;
    /// Inserts or replaces a task's snapshot.
    async fn save_task(&self, snapshot: &TaskSnapshot) -> Result<(), StoreError>;
    /// A task's snapshot, if the store has one.
    async fn load_task(&self, task: &str) -> Result<Option<TaskSnapshot>, StoreError>;
    /// Every task's snapshot, ordered by task id.
    async fn tasks(&self) -> Result<Vec<TaskSnapshot>, StoreError>;
    /// The cycle log, oldest first, for one task or all.
    async fn episodes(&self, task: Option<&str>) -> Result<Vec<CycleEpisode>, StoreError>;

    /// A task's full record. The default has the snapshot only, at version 0.
    async fn load_record(&self, task: &str) -> Result<Option<TaskRecord>, StoreError> {
        Ok(self.load_task(task).await?.map(|snapshot| TaskRecord {
            snapshot,
            version: 0,
            state: None,
        }))
    }

    /// Writes the commits in order, each atomically; a store that can
    /// writes them all in one transaction. A task's record is replaced only
    /// by a higher version. The default writes episodes and snapshots one
    /// by one (not atomic): enough for a [`Durability::Memory`] store.
    async fn commit(&self, commits: &[TaskCommit]) -> Result<(), StoreError> {
        for commit in commits {
            for episode in &commit.episodes {
                self.record_episode(episode).await?;
            }
            self.save_task(&commit.record.snapshot).await?;
        }
        Ok(())
    }

    /// Takes the task's row lock (creating its row if needed) and reads
    /// its record: what a [`Durability::Shared`] store does for every
    /// event. Other stores need not implement it.
    async fn lock_task(&self, task: &str) -> Result<Box<dyn TaskLock>, StoreError> {
        let _ = task;
        Err(StoreError::Backend {
            backend: format!("{self:?}"),
            message: "this store cannot lock a task (it is not a shared store)".into(),
        })
    }

    /// The audit log, oldest first, for one task or all.
    async fn audit(&self, task: Option<&str>) -> Result<Vec<AuditEntry>, StoreError> {
        let _ = task;
        Ok(Vec::new())
    }

    /// The newest `limit` entries of the audit log, oldest first, for one
    /// task or all: what a view that must not grow with the log reads (the
    /// dashboard). The default reads the whole log and keeps its end; the
    /// database stores read only the newest rows.
    async fn audit_recent(
        &self,
        task: Option<&str>,
        limit: usize,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        let mut all = self.audit(task).await?;
        let older = all.len().saturating_sub(limit);
        all.drain(..older);
        Ok(all)
    }

    /// Each task's detections: how many the audit log holds and the
    /// newest, for every task that has one. What a listing of all tasks
    /// reads (`GET /v1/tasks`) instead of the whole log: the database
    /// stores count in the database and return one row per task. The
    /// default reads the whole log ([`summarize_detections`]).
    async fn detection_summaries(&self) -> Result<Vec<DetectionSummary>, StoreError> {
        Ok(summarize_detections(&self.audit(None).await?))
    }

    /// The pivot records, oldest first, for one task or all.
    async fn pivots(&self, task: Option<&str>) -> Result<Vec<PivotRecord>, StoreError> {
        let _ = task;
        Ok(Vec::new())
    }

    /// The store's write health, when a writer reports it (the SQL
    /// stores); the group-commit writer updates it. Default: none.
    fn health(&self) -> Option<&StoreHealth> {
        None
    }

    /// [`commit`](Store::commit), and, in the same transaction, that input
    /// `line` of the current run (see [`begin_run`](Store::begin_run)) is
    /// committed, with the run's line errors before it. The default
    /// ignores the line.
    async fn commit_at(&self, commits: &[TaskCommit], line: Option<u64>) -> Result<(), StoreError> {
        let _ = line;
        self.commit(commits).await
    }

    /// Starts recording a run of input lines numbered from `first_line`,
    /// or with `resume` continues the latest run. Returns the run, or
    /// `None` for a store that records no runs (the default).
    async fn begin_run(
        &self,
        first_line: u64,
        resume: bool,
    ) -> Result<Option<RunRecord>, StoreError> {
        let _ = (first_line, resume);
        Ok(None)
    }

    /// Notes a line of the current run that was not a valid event: stored
    /// with the next commit (or by [`finish_run`](Store::finish_run)).
    fn note_line_error(&self, line: u64, error: &str) {
        let _ = (line, error);
    }

    /// Ends the current run: stores the line errors still noted, and
    /// records `last_line` as its last committed line (call it only when
    /// every event before it is committed).
    async fn finish_run(&self, last_line: u64) -> Result<(), StoreError> {
        let _ = last_line;
        Ok(())
    }

    /// The runs the store recorded, oldest first.
    async fn runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        Ok(Vec::new())
    }

    /// The line errors the store recorded, by run and line.
    async fn line_errors(&self) -> Result<Vec<StoredLineError>, StoreError> {
        Ok(Vec::new())
    }

    /// The second opinion kept under `key` ([`KeptOpinion::key`]), if any.
    /// Default: none (a store that keeps none).
    async fn recall_opinion(&self, key: &str) -> Result<Option<KeptOpinion>, StoreError> {
        let _ = key;
        Ok(None)
    }

    /// Keeps `opinion` unless one is kept under its key already, and
    /// returns the one kept: the first answer wins, so engines that share
    /// the store and asked at the same moment go on with one answer.
    /// Default: keeps nothing and returns `opinion`.
    async fn keep_opinion(&self, opinion: &KeptOpinion) -> Result<KeptOpinion, StoreError> {
        Ok(opinion.clone())
    }

    /// Every kept second opinion, oldest answer first (then by key).
    /// Default: none.
    async fn opinions(&self) -> Result<Vec<KeptOpinion>, StoreError> {
        Ok(Vec::new())
    }

    /// Forgets the second opinions answered before `before` and returns
    /// how many it forgot: a pair whose answer is forgotten is asked again
    /// the next time it comes up. The store never forgets one by itself.
    /// Default: forgets nothing.
    async fn forget_opinions_before(&self, before: Timestamp) -> Result<u64, StoreError> {
        let _ = before;
        Ok(0)
    }

    /// Closes the store's connections once nothing more is written (a
    /// SQLite file then holds everything: its WAL is checkpointed into
    /// it). Default: nothing to close.
    async fn close(&self) {}
}

/// A store in process memory. Nothing survives the process.
///
/// [`MemoryStore::new`] is what `replay` uses: counters and the cycle log
/// only. [`MemoryStore::durable`] keeps everything a database would (the
/// detectors' state, the audit log, the pivot records), for tests and for
/// hosts that read the audit log in process.
#[derive(Debug, Default)]
pub struct MemoryStore {
    durability: Durability,
    tasks: RwLock<HashMap<String, TaskRecord>>,
    episodes: RwLock<Vec<CycleEpisode>>,
    episode_index: RwLock<HashMap<u64, usize>>,
    audit: RwLock<Vec<AuditEntry>>,
    pivots: RwLock<Vec<PivotRecord>>,
    opinions: RwLock<HashMap<String, KeptOpinion>>,
}

impl MemoryStore {
    /// An empty store that keeps counters and the cycle log.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    /// An empty store that keeps everything a durable store does.
    pub fn durable() -> MemoryStore {
        MemoryStore {
            durability: Durability::Durable,
            ..MemoryStore::default()
        }
    }

    fn upsert_episode(&self, episode: &CycleEpisode) {
        let mut episodes = self.episodes.write();
        let mut index = self.episode_index.write();
        match index.get(&episode.id) {
            Some(&at) if at < episodes.len() => episodes[at] = episode.clone(),
            _ => {
                index.insert(episode.id, episodes.len());
                episodes.push(episode.clone());
            }
        }
    }
}

#[async_trait]
impl Store for MemoryStore {
    fn durability(&self) -> Durability {
        self.durability
    }

    fn group_commit(&self) -> bool {
        false
    }

    async fn record_episode(&self, episode: &CycleEpisode) -> Result<(), StoreError> {
        self.upsert_episode(episode);
        Ok(())
    }

    async fn save_task(&self, snapshot: &TaskSnapshot) -> Result<(), StoreError> {
        let mut tasks = self.tasks.write();
        match tasks.get_mut(&snapshot.task) {
            Some(record) => record.snapshot = snapshot.clone(),
            None => {
                tasks.insert(
                    snapshot.task.clone(),
                    TaskRecord {
                        snapshot: snapshot.clone(),
                        version: 0,
                        state: None,
                    },
                );
            }
        }
        Ok(())
    }

    async fn load_task(&self, task: &str) -> Result<Option<TaskSnapshot>, StoreError> {
        Ok(self
            .tasks
            .read()
            .get(task)
            .map(|record| record.snapshot.clone()))
    }

    async fn tasks(&self) -> Result<Vec<TaskSnapshot>, StoreError> {
        let mut all: Vec<_> = self
            .tasks
            .read()
            .values()
            .map(|record| record.snapshot.clone())
            .collect();
        all.sort_by(|a, b| a.task.cmp(&b.task));
        Ok(all)
    }

    async fn episodes(&self, task: Option<&str>) -> Result<Vec<CycleEpisode>, StoreError> {
        Ok(self
            .episodes
            .read()
            .iter()
            .filter(|episode| task.is_none_or(|task| episode.task == task))
            .cloned()
            .collect())
    }

    async fn load_record(&self, task: &str) -> Result<Option<TaskRecord>, StoreError> {
        Ok(self.tasks.read().get(task).cloned())
    }

    async fn commit(&self, commits: &[TaskCommit]) -> Result<(), StoreError> {
        for commit in commits {
            for episode in &commit.episodes {
                self.upsert_episode(episode);
            }
            if self.durability != Durability::Memory {
                self.audit.write().extend(commit.audit.iter().cloned());
                self.pivots.write().extend(commit.pivots.iter().cloned());
            }
            let mut tasks = self.tasks.write();
            let task = &commit.record.snapshot.task;
            let newer = tasks
                .get(task)
                .is_none_or(|stored| commit.record.version >= stored.version);
            if newer {
                tasks.insert(task.clone(), commit.record.clone());
            }
        }
        Ok(())
    }

    async fn audit(&self, task: Option<&str>) -> Result<Vec<AuditEntry>, StoreError> {
        Ok(self
            .audit
            .read()
            .iter()
            .filter(|entry| task.is_none_or(|task| entry.task == task))
            .cloned()
            .collect())
    }

    async fn audit_recent(
        &self,
        task: Option<&str>,
        limit: usize,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        let audit = self.audit.read();
        let mut recent: Vec<AuditEntry> = audit
            .iter()
            .rev()
            .filter(|entry| task.is_none_or(|task| entry.task == task))
            .take(limit)
            .cloned()
            .collect();
        recent.reverse();
        Ok(recent)
    }

    async fn detection_summaries(&self) -> Result<Vec<DetectionSummary>, StoreError> {
        // No copy of the log: the summary is made under the read lock.
        Ok(summarize_detections(self.audit.read().iter()))
    }

    async fn pivots(&self, task: Option<&str>) -> Result<Vec<PivotRecord>, StoreError> {
        Ok(self
            .pivots
            .read()
            .iter()
            .filter(|pivot| task.is_none_or(|task| pivot.task == task))
            .cloned()
            .collect())
    }

    /// Kept only by a durable memory store, like the audit log.
    async fn recall_opinion(&self, key: &str) -> Result<Option<KeptOpinion>, StoreError> {
        Ok(self.opinions.read().get(key).cloned())
    }

    async fn keep_opinion(&self, opinion: &KeptOpinion) -> Result<KeptOpinion, StoreError> {
        if self.durability == Durability::Memory {
            return Ok(opinion.clone());
        }
        Ok(self
            .opinions
            .write()
            .entry(opinion.key.clone())
            .or_insert_with(|| opinion.clone())
            .clone())
    }

    async fn opinions(&self) -> Result<Vec<KeptOpinion>, StoreError> {
        let mut kept: Vec<KeptOpinion> = self.opinions.read().values().cloned().collect();
        kept.sort_by(|a, b| (a.answered_at, &a.key).cmp(&(b.answered_at, &b.key)));
        Ok(kept)
    }

    async fn forget_opinions_before(&self, before: Timestamp) -> Result<u64, StoreError> {
        let mut opinions = self.opinions.write();
        let count = opinions.len();
        opinions.retain(|_, opinion| opinion.answered_at >= before);
        Ok(u64::try_from(count - opinions.len()).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn episode(id: u64, task: &str) -> CycleEpisode {
        CycleEpisode {
            id,
            task: task.into(),
            opened_at: Timestamp(0),
            patterns: vec!["exact_failure".into()],
            intervention: Action::Warn,
            escalated: false,
            lines: vec![1],
            resolution: None,
            resolved_at: None,
        }
    }

    #[tokio::test]
    async fn episodes_are_upserted_by_id_and_filtered_by_task() {
        let store = MemoryStore::new();
        store.record_episode(&episode(1, "A")).await.expect("ok");
        store.record_episode(&episode(2, "B")).await.expect("ok");
        let mut resolved = episode(1, "A");
        resolved.resolution = Some(Resolution::Human);
        store.record_episode(&resolved).await.expect("ok");
        let all = store.episodes(None).await.expect("ok");
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].resolution, Some(Resolution::Human));
        assert_eq!(store.episodes(Some("B")).await.expect("ok").len(), 1);
    }

    #[tokio::test]
    async fn task_snapshots_round_trip() {
        let store = MemoryStore::new();
        let snapshot = TaskSnapshot {
            task: "T".into(),
            status: TaskStatus::Escalated,
            loop_count: 3,
            pivots: 1,
            last_seen: Timestamp(5),
        };
        store.save_task(&snapshot).await.expect("ok");
        assert_eq!(store.load_task("T").await.expect("ok"), Some(snapshot));
        assert_eq!(store.load_task("U").await.expect("ok"), None);
        assert_eq!(store.tasks().await.expect("ok").len(), 1);
    }

    fn opinion(key: &str, same: bool) -> KeptOpinion {
        opinion_at(key, same, 7)
    }

    fn opinion_at(key: &str, same: bool, answered_at: i64) -> KeptOpinion {
        KeptOpinion {
            key: key.into(),
            by: "model m".into(),
            same,
            reason: format!("said {same}"),
            answered_at: Timestamp(answered_at),
        }
    }

    #[tokio::test]
    async fn kept_opinions_are_listed_oldest_first_and_forgotten_by_age() {
        let store = MemoryStore::durable();
        for (key, at) in [("c", 30), ("a", 10), ("b", 20), ("d", 20)] {
            store
                .keep_opinion(&opinion_at(key, true, at))
                .await
                .expect("ok");
        }
        let keys = |kept: Vec<KeptOpinion>| kept.into_iter().map(|o| o.key).collect::<Vec<_>>();
        assert_eq!(
            keys(store.opinions().await.expect("ok")),
            ["a", "b", "d", "c"]
        );
        // Strictly before: the answers of 20 stay.
        assert_eq!(
            store
                .forget_opinions_before(Timestamp(20))
                .await
                .expect("ok"),
            1
        );
        assert_eq!(keys(store.opinions().await.expect("ok")), ["b", "d", "c"]);
        assert_eq!(store.recall_opinion("a").await.expect("ok"), None);
        // A forgotten pair is kept anew by its next answer.
        let again = opinion_at("a", false, 40);
        assert_eq!(store.keep_opinion(&again).await.expect("ok"), again);
        assert_eq!(
            store
                .forget_opinions_before(Timestamp(0))
                .await
                .expect("ok"),
            0
        );
        assert_eq!(
            store
                .forget_opinions_before(Timestamp(41))
                .await
                .expect("ok"),
            4
        );
        assert!(store.opinions().await.expect("ok").is_empty());
    }

    #[tokio::test]
    async fn a_durable_memory_store_keeps_the_first_opinion_per_key() {
        let store = MemoryStore::durable();
        assert_eq!(store.recall_opinion("k").await.expect("ok"), None);
        let first = opinion("k", true);
        assert_eq!(store.keep_opinion(&first).await.expect("ok"), first);
        // A later answer for the same key gets the first one back.
        assert_eq!(
            store.keep_opinion(&opinion("k", false)).await.expect("ok"),
            first
        );
        assert_eq!(store.recall_opinion("k").await.expect("ok"), Some(first));
        assert_eq!(store.recall_opinion("other").await.expect("ok"), None);
    }

    #[tokio::test]
    async fn a_counters_only_memory_store_keeps_no_opinion() {
        let store = MemoryStore::new();
        let answer = opinion("k", true);
        assert_eq!(store.keep_opinion(&answer).await.expect("ok"), answer);
        assert_eq!(store.recall_opinion("k").await.expect("ok"), None);
    }
}
