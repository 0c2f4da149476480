//! A shared store's path: several engines (a fleet of `serve` replicas, or
//! embedding hosts) on one PostgreSQL database.
//!
//! Every event of a task is applied to the task's **newest stored row**,
//! under the row's lock, and written in the same transaction:
//!
//! 1. the event joins the task's queue in the [backlog](crate::backlog)
//!    (this engine's writers of one task take turns);
//! 2. the row is locked and read; the engine's copy of the task is rebuilt
//!    from it (`rebase`), whatever this engine held before;
//! 3. the queue's events, oldest first, are applied to that copy, the new
//!    event last, and written as one commit over the row's version (the
//!    store refuses a commit over any other version: nothing is ever
//!    written over a newer row);
//! 4. the new event's decision is answered.
//!
//! A failure in 2 or 3 is retried for up to [`PATIENCE`] (a cut connection
//! is replaced by the pool at once). After that the event is decided on
//! the engine's own copy and answered with [`Decision::degraded`]; it stays
//! in the queue and is applied to the newest row when the database
//! answers: before the task's next event, or by the background writer.
//! Until then other engines decide without it, so a degraded decision is
//! provisional; every decision not marked degraded is written, and a later
//! one never undoes it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use loopguard_core_types::{Decision, Event, Timestamp};

use super::saved::{WriterMark, stamp};
use super::{DEGRADED_NOTE, Engine, TaskState};
use crate::backlog::{TaskTurn, Tried, WaitingEvent};
use crate::persistence::Writes;
use crate::store::{StoreError, TaskCommit, TaskRecord};

/// How long an event waits for the database (retrying) before it is
/// decided on the engine's own copy.
pub(crate) const PATIENCE: Duration = Duration::from_secs(2);
/// The first wait between two tries; it doubles up to [`BACKOFF_MAX`].
const BACKOFF_MIN: Duration = Duration::from_millis(10);
/// The longest wait between two tries.
const BACKOFF_MAX: Duration = Duration::from_millis(200);
/// The background writer's first wait after a failed attempt; it doubles
/// up to [`RETRY_MAX`].
const RETRY_MIN: Duration = Duration::from_millis(50);
/// The background writer's longest wait between attempts.
const RETRY_MAX: Duration = Duration::from_secs(1);

/// A try at writing a task's queue that failed.
struct TryFailed {
    err: StoreError,
    /// The decision of the queue's last event, when the try got as far as
    /// applying it.
    decision: Option<Decision>,
    /// Whether the row lock was taken (the database answered).
    locked: bool,
}

impl Engine {
    /// One event on a shared store (see the module's documentation).
    pub(super) async fn observe_shared(
        &self,
        line: u64,
        event: Event,
        time: Option<Timestamp>,
    ) -> Decision {
        let task = event.task.clone();
        let id = event.id.clone();
        let mut turn = self.backlog.turn(&task).await;
        let waiting = WaitingEvent { line, event, time };
        // The queue keeps the event from before the first wait on the
        // database, so it is written even when this call is dropped
        // midway; this copy decides on the engine's own copy of the task
        // when the database does not answer.
        if let Err(full) = turn.push(waiting.clone()) {
            let decision = self
                .apply_own_copy(&waiting, format!("store: {full}"))
                .await;
            return self.answered(decision, task, id, time);
        }
        let mut decided = None;
        let mut failure = None;
        if !self.backlog.unreachable() {
            let deadline = Instant::now() + PATIENCE;
            let mut wait = BACKOFF_MIN;
            loop {
                match self.write_turn(&mut turn, line).await {
                    Ok(written) => {
                        self.backlog.mark_reachable();
                        // Applied now, or carried by an earlier try whose
                        // answer was lost and which landed.
                        if let Some(decision) = written.or(decided.take()) {
                            return self.answered(decision, task, id, time);
                        }
                        break;
                    }
                    Err(failed) => {
                        tracing::warn!(task = %task, line, error = %failed.err, "store: a try at writing the task failed; trying again");
                        if failed.decision.is_some() {
                            decided = failed.decision;
                        }
                        let locked = failed.locked;
                        failure = Some(failed.err);
                        if Instant::now() + wait > deadline {
                            if let (false, Some(err)) = (locked, &failure) {
                                self.backlog.mark_unreachable(err);
                            }
                            break;
                        }
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(BACKOFF_MAX);
                    }
                }
            }
        }
        let why = match &failure {
            Some(err) => format!("store: {err} (decided on the engine's copy of the task)"),
            None => format!(
                "store: {} (decided on the engine's copy of the task)",
                self.backlog.last_failure()
            ),
        };
        let mut decision = match decided {
            Some(mut decision) => {
                decision.errors.push(why);
                decision
            }
            None => self.apply_own_copy(&waiting, why).await,
        };
        tracing::error!(task = %task, line, "store: the event waits for the database; its decision is degraded");
        decision.degraded = true;
        decision.notes.push(DEGRADED_NOTE.to_owned());
        drop(turn);
        self.backlog.wake();
        self.answered(decision, task, id, time)
    }

    /// The decision with its task and id, logged.
    fn answered(
        &self,
        mut decision: Decision,
        task: String,
        id: Option<String>,
        time: Option<Timestamp>,
    ) -> Decision {
        decision.task = task;
        decision.id = id;
        self.finish(&decision, time);
        decision
    }

    /// A degraded decision: `waiting` applied to the engine's own copy of
    /// its task, with `why` among its errors and the degraded note.
    async fn apply_own_copy(&self, waiting: &WaitingEvent, why: String) -> Decision {
        let (mut decision, _) = self
            .apply(waiting.line, &waiting.event, waiting.time, None, vec![why])
            .await;
        decision.degraded = true;
        if !decision.notes.iter().any(|note| note == DEGRADED_NOTE) {
            decision.notes.push(DEGRADED_NOTE.to_owned());
        }
        decision
    }

    /// One try at writing the task's queue: lock and read the row, rebuild
    /// the engine's copy from it, apply the queue's events and commit them
    /// over the row. Returns the decision of the queue's last event, or
    /// `None` when nothing was left to apply (an earlier try had landed).
    async fn write_turn(
        &self,
        turn: &mut TaskTurn<'_>,
        line: u64,
    ) -> Result<Option<Decision>, TryFailed> {
        let task = turn.task().to_owned();
        let lock = self.store.lock_task(&task).await.map_err(|err| TryFailed {
            err,
            decision: None,
            locked: false,
        })?;
        let mark = self
            .commit_seq
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut errors = Vec::new();
        let previous = self
            .rebase(&task, lock.record().cloned(), line, mark, &mut errors)
            .await;
        if let Some(tried) = turn.tried() {
            if previous >= tried.mark {
                tracing::info!(task = %task, events = tried.carried, "store: a commit whose answer was lost had landed");
                turn.written(tried.carried);
            }
            turn.set_tried(None);
        }
        // The waiting events are applied where they wait: a try copies none.
        let count = turn.events().len();
        if count == 0 {
            return Ok(None);
        }
        let (commits, last) = self.apply_waiting(turn.events(), errors).await;
        let Some(merged) = merge(commits) else {
            turn.written(count);
            return Ok(last);
        };
        match lock.commit(&merged).await {
            Ok(()) => {
                if count > 1 {
                    tracing::info!(task = %task, events = count - 1, "store: waiting events are now written");
                }
                turn.written(count);
                Ok(last)
            }
            Err(err) => {
                turn.set_tried(Some(Tried {
                    mark,
                    carried: count,
                }));
                Err(TryFailed {
                    err,
                    decision: last,
                    locked: true,
                })
            }
        }
    }

    /// Applies `events`, oldest first, to the engine's copy of their task,
    /// `errors` going with the last one's decision. Returns the commits
    /// they make and the last one's decision.
    async fn apply_waiting(
        &self,
        events: &[WaitingEvent],
        mut errors: Vec<String>,
    ) -> (Vec<TaskCommit>, Option<Decision>) {
        let mut commits = Vec::with_capacity(events.len());
        let mut last = None;
        for (index, waiting) in events.iter().enumerate() {
            let errors = if index + 1 == events.len() {
                std::mem::take(&mut errors)
            } else {
                Vec::new()
            };
            let (decision, writes) = self
                .apply(waiting.line, &waiting.event, waiting.time, None, errors)
                .await;
            if let Writes::Shared(commit) = writes {
                commits.push(*commit);
            }
            last = Some(decision);
        }
        (commits, last)
    }

    /// Rebuilds the engine's copy of `task` from its stored row (`None`: the
    /// task has none yet), stamped with this engine's writer mark `mark`
    /// for the commit to come. Returns the row's previous mark of this
    /// engine (0 for none).
    async fn rebase(
        &self,
        task: &str,
        record: Option<TaskRecord>,
        line: u64,
        mark: u64,
        errors: &mut Vec<String>,
    ) -> u64 {
        let restored = match record {
            Some(record) => Some(self.restore(record, line, errors).await),
            None => {
                self.forget_task_state(task).await;
                None
            }
        };
        let mut state = restored.map(TaskState::from_restored).unwrap_or_default();
        let previous = state
            .writers
            .iter()
            .find(|kept| kept.engine == self.engine_id)
            .map_or(0, |kept| kept.mark);
        stamp(
            &mut state.writers,
            WriterMark {
                engine: self.engine_id,
                mark,
                at: Timestamp::now().as_millis(),
            },
        );
        self.shard_of(task).lock().tasks.insert(task.into(), state);
        previous
    }

    /// Writes every task's waiting events (see [`Engine::write_turn`]);
    /// with nothing waiting but the store marked unreachable, probes it.
    /// Stops at the first failure.
    pub(super) async fn write_waiting(&self) -> Result<(), StoreError> {
        if self.backlog.len() == 0 {
            if self.backlog.unreachable() {
                drop(self.store.lock_task("").await?);
                self.backlog.mark_reachable();
            }
            return Ok(());
        }
        for task in self.backlog.waiting_tasks() {
            let mut turn = self.backlog.turn(&task).await;
            if turn.events().is_empty() && turn.tried().is_none() {
                continue;
            }
            let line = turn.events().first().map_or(0, |waiting| waiting.line);
            match self.write_turn(&mut turn, line).await {
                Ok(_) => self.backlog.mark_reachable(),
                Err(failed) => {
                    if !failed.locked {
                        self.backlog.mark_unreachable(&failed.err);
                    }
                    return Err(failed.err);
                }
            }
        }
        Ok(())
    }

    /// Starts the background writer, once, on the tokio runtime the engine
    /// is driven from (none outside one: waiting events are then written
    /// before each task's next event, or by
    /// [`LoopGuard::write_pending`](super::LoopGuard::write_pending)). It
    /// writes the waiting events whenever one is left waiting or the store
    /// is found unreachable, then keeps trying (50 ms, doubling up to 1 s)
    /// until nothing waits. It stops when the engine is dropped.
    pub(super) fn start_writer(engine: &Arc<Engine>) {
        if engine.flusher.get().is_some() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        engine.flusher.get_or_init(|| {
            let weak = Arc::downgrade(engine);
            let backlog = Arc::clone(&engine.backlog);
            runtime.spawn(async move {
                let mut wait = RETRY_MIN;
                loop {
                    if backlog.len() == 0 && !backlog.unreachable() {
                        wait = RETRY_MIN;
                        // Woken when an event is left waiting or the store
                        // is found unreachable; the timeout lets the loop
                        // notice a dropped engine.
                        backlog.woken(RETRY_MAX).await;
                        if weak.strong_count() == 0 {
                            return;
                        }
                        continue;
                    }
                    let Some(engine) = weak.upgrade() else {
                        return;
                    };
                    let outcome = engine.write_waiting().await;
                    drop(engine);
                    match outcome {
                        Ok(()) => tokio::time::sleep(RETRY_MIN).await,
                        Err(err) => {
                            tracing::warn!(error = %err, retry_in_ms = wait.as_millis() as u64, "store: still unreachable; events wait in memory");
                            tokio::time::sleep(wait).await;
                            wait = (wait * 2).min(RETRY_MAX);
                        }
                    }
                }
            });
        });
    }
}

/// Several commits of one task as one: their pivot records, audit rows and
/// episodes in order (a later episode with the same id replaces an earlier
/// one when written), and the newest record. `None` for no commits.
fn merge(commits: Vec<TaskCommit>) -> Option<TaskCommit> {
    let mut commits = commits.into_iter();
    let mut merged = commits.next()?;
    for commit in commits {
        // The run's committed line is the furthest one merged.
        merged.line = merged.line.max(commit.line);
        merged.audit.extend(commit.audit);
        merged.pivots.extend(commit.pivots);
        merged.episodes.extend(commit.episodes);
        if commit.record.version >= merged.record.version {
            merged.record = commit.record;
        }
    }
    Some(merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::commit;

    #[test]
    fn merged_commits_keep_their_order_and_the_newest_record() {
        // A commit of version `n` with pivot number `n` at line `n`.
        let with_pivot = |n: u64| {
            let mut commit = commit("T", n);
            commit.pivots.push(crate::store::PivotRecord {
                task: "T".into(),
                line: n,
                at: Timestamp(0),
                number: u32::try_from(n).unwrap_or(u32::MAX),
                directive: None,
            });
            commit
        };
        let merged = merge(vec![with_pivot(1), with_pivot(2)]).unwrap_or_else(|| commit("none", 0));
        assert_eq!(merged.record.version, 2);
        let lines: Vec<_> = merged.pivots.iter().map(|pivot| pivot.line).collect();
        assert_eq!(lines, [1, 2]);
        assert!(merge(Vec::new()).is_none());
    }
}
