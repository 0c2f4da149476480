//! A shared store's commits that could not be written yet, kept in order
//! per task and written when the database answers again.
//!
//! On a [`Durability::Shared`](crate::Durability) store (PostgreSQL) every
//! event commits through its task's row lock. When that fails (the lock
//! cannot be taken, the connection is cut, the database is down) the
//! commit is not dropped: it waits here, ordered by the task's record
//! version, and is written
//!
//! - before that task's next commit, in the same transaction (under the
//!   task's lock, so in order), and
//! - in the background ([`Backlog::flush`], run by the engine's flusher) as
//!   soon as the database answers again.
//!
//! While a task has commits waiting, the engine keeps its own copy of the
//! task rather than reloading an older stored row. At most
//! [`MAX_BACKLOG`] commits wait; beyond, a commit is refused and the
//! refusal is logged and reported on the decision, never silent.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::store::{Store, StoreError, TaskCommit, TaskLock, TaskRecord};

/// Commits kept for a retry, at most (as the SQLite writer keeps). Beyond,
/// a new commit is refused, logged as an error and reported on its
/// decision.
pub(crate) const MAX_BACKLOG: usize = 100_000;
/// The flusher's first wait after a failed attempt; it doubles up to
/// [`RETRY_MAX`].
const RETRY_MIN: Duration = Duration::from_millis(50);
/// The flusher's longest wait between attempts.
const RETRY_MAX: Duration = Duration::from_secs(1);

/// Why a commit was not written.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum NotWritten {
    /// The store failed; the commit waits in the backlog.
    #[error("{0} (the writes are kept in memory and written when the database answers)")]
    Kept(StoreError),
    /// The store is unreachable; the commit waits in the backlog.
    #[error(
        "the database is unreachable: decided on the engine's copy of the task; the writes are kept in memory and written when it answers"
    )]
    Unreachable,
    /// An earlier commit of the task is being written; this one waits in
    /// the backlog behind it.
    #[error(
        "an earlier write of this task is being retried: the writes are kept in memory and written after it"
    )]
    Behind,
    /// The backlog is full: the commit is lost.
    #[error(
        "{max} writes already wait for the database: this event's writes are lost (its audit rows, pivot records and episodes; the task's next commit carries its state)",
        max = MAX_BACKLOG
    )]
    Full,
}

/// The commits waiting for the database, per task, ordered by version.
#[derive(Debug, Default)]
pub(crate) struct Backlog {
    inner: Mutex<Inner>,
    /// Commits waiting (also counted in `inner`; read without the lock on
    /// the fast path, when nothing waits).
    waiting: AtomicUsize,
    /// Set when the store failed to answer, cleared when it answers: while
    /// set, events do not wait for the database, they decide on the
    /// engine's copy and keep their commits here.
    unreachable: AtomicBool,
    /// The failure that made the store unreachable, for the decisions made
    /// meanwhile.
    last_failure: Mutex<Option<StoreError>>,
    wake: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct Inner {
    tasks: HashMap<String, BTreeMap<u64, TaskCommit>>,
    /// Tasks whose commits a writer has taken out (under the task's lock)
    /// and not yet written or put back.
    claimed: HashSet<String>,
}

impl Backlog {
    /// Commits waiting, all tasks.
    pub(crate) fn len(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// Whether the store failed to answer lately (see [`Backlog::flush`]).
    pub(crate) fn unreachable(&self) -> bool {
        self.unreachable.load(Ordering::Acquire)
    }

    /// Marks the store unreachable (a task's lock could not be taken: `err`)
    /// and wakes the flusher.
    pub(crate) fn mark_unreachable(&self, err: &StoreError) {
        *self.last_failure.lock() = Some(err.clone());
        self.unreachable.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    /// Marks the store reachable again.
    fn mark_reachable(&self) {
        self.unreachable.store(false, Ordering::Release);
    }

    /// What made the store unreachable, for a decision made without it.
    pub(crate) fn last_failure(&self) -> String {
        match self.last_failure.lock().as_ref() {
            Some(err) => err.to_string(),
            None => "the database did not answer".to_owned(),
        }
    }

    /// Whether commits of `task` wait (or are being written).
    pub(crate) fn holds(&self, task: &str) -> bool {
        if self.len() == 0 {
            return false;
        }
        let inner = self.inner.lock();
        inner.tasks.contains_key(task) || inner.claimed.contains(task)
    }

    /// Keeps `commit` for a retry; `Full` when [`MAX_BACKLOG`] commits
    /// already wait (the commit is then dropped, and the caller says so).
    pub(crate) fn keep(&self, commit: TaskCommit) -> Result<(), NotWritten> {
        let mut inner = self.inner.lock();
        if self.len() >= MAX_BACKLOG {
            drop(inner);
            tracing::error!(
                task = %commit.record.snapshot.task,
                version = commit.record.version,
                max = MAX_BACKLOG,
                "store: the backlog of unwritten commits is full: this commit is lost"
            );
            return Err(NotWritten::Full);
        }
        let task = commit.record.snapshot.task.clone();
        let version = commit.record.version;
        if inner
            .tasks
            .entry(task)
            .or_default()
            .insert(version, commit)
            .is_none()
        {
            self.waiting.fetch_add(1, Ordering::AcqRel);
        }
        drop(inner);
        self.wake.notify_one();
        Ok(())
    }

    /// Takes out every commit of `task`, in order, for a writer that holds
    /// the task's row lock; `None` when another writer has them (the task's
    /// commits then wait behind it). Give them back with
    /// [`Backlog::release`].
    fn claim(&self, task: &str) -> Option<Vec<TaskCommit>> {
        if self.len() == 0 {
            return Some(Vec::new());
        }
        let mut inner = self.inner.lock();
        if inner.claimed.contains(task) {
            return None;
        }
        let Some(commits) = inner.tasks.remove(task) else {
            return Some(Vec::new());
        };
        inner.claimed.insert(task.to_owned());
        Some(commits.into_values().collect())
    }

    /// Ends a claim of `task` (of `claimed` commits): `unwritten`, what the
    /// writer could not write (in any order), waits again.
    fn release(&self, task: &str, claimed: usize, unwritten: Vec<TaskCommit>) {
        let mut inner = self.inner.lock();
        inner.claimed.remove(task);
        self.waiting.fetch_sub(claimed, Ordering::AcqRel);
        for commit in unwritten {
            let version = commit.record.version;
            let slot = inner.tasks.entry(task.to_owned()).or_default();
            if slot.insert(version, commit).is_none() {
                self.waiting.fetch_add(1, Ordering::AcqRel);
            }
        }
    }

    /// The tasks with commits waiting (not being written).
    fn waiting_tasks(&self) -> Vec<String> {
        let inner = self.inner.lock();
        inner
            .tasks
            .keys()
            .filter(|task| !inner.claimed.contains(*task))
            .cloned()
            .collect()
    }

    /// Writes `commit` through the task's row lock, after the task's
    /// waiting commits, in one transaction. Without a lock (the store did
    /// not answer), or when another writer is writing the task's earlier
    /// commits, the commit waits here instead. A failed write keeps every
    /// commit it carried.
    pub(crate) async fn commit_through(
        &self,
        lock: Option<Box<dyn TaskLock>>,
        commit: TaskCommit,
    ) -> Result<(), NotWritten> {
        let Some(lock) = lock else {
            self.keep(commit)?;
            return Err(NotWritten::Unreachable);
        };
        let task = commit.record.snapshot.task.clone();
        let Some(earlier) = self.claim(&task) else {
            drop(lock);
            self.keep(commit)?;
            return Err(NotWritten::Behind);
        };
        let claimed = earlier.len();
        let earlier = catch_up(lock.record(), earlier);
        let written = if earlier.is_empty() {
            lock.commit(&commit).await
        } else {
            let mut all = earlier.clone();
            all.push(commit.clone());
            match merge(all) {
                Some(merged) => lock.commit(&merged).await,
                None => Ok(()),
            }
        };
        match written {
            Ok(()) => {
                self.release(&task, claimed, Vec::new());
                if claimed > 0 {
                    tracing::info!(task = %task, commits = claimed, "store: earlier failed writes are now committed");
                }
                self.mark_reachable();
                Ok(())
            }
            Err(err) => {
                self.release(&task, claimed, earlier);
                // The event's own commit is new to the backlog: it counts
                // against the bound; the earlier ones were counted already.
                // The database answered the lock: the next event tries it
                // again (the flusher, woken by `keep`, too).
                self.keep(commit)?;
                Err(NotWritten::Kept(err))
            }
        }
    }

    /// Writes every waiting commit, task by task, each under its task's
    /// row lock. Stops at the first failure (the database is still away).
    /// Returns whether nothing is left waiting.
    pub(crate) async fn flush(&self, store: &dyn Store) -> Result<bool, StoreError> {
        for task in self.waiting_tasks() {
            let lock = match store.lock_task(&task).await {
                Ok(lock) => lock,
                Err(err) => {
                    self.mark_unreachable(&err);
                    return Err(err);
                }
            };
            self.mark_reachable();
            let Some(earlier) = self.claim(&task) else {
                continue;
            };
            let claimed = earlier.len();
            let pending = catch_up(lock.record(), earlier);
            let Some(merged) = merge(pending.clone()) else {
                self.release(&task, claimed, Vec::new());
                continue;
            };
            match lock.commit(&merged).await {
                Ok(()) => {
                    tracing::info!(task = %task, commits = claimed, "store: earlier failed writes are now committed");
                    self.release(&task, claimed, Vec::new());
                }
                Err(err) => {
                    self.release(&task, claimed, pending);
                    return Err(err);
                }
            }
        }
        Ok(self.len() == 0)
    }

    /// Starts the flusher on `runtime`: it writes the backlog whenever a
    /// commit is kept or the store is found unreachable, then keeps trying
    /// (50 ms, doubling up to 1 s) until nothing waits. It stops when the
    /// engine (its backlog) is dropped.
    pub(crate) fn start_flusher(
        self: &Arc<Self>,
        runtime: &tokio::runtime::Handle,
        store: Arc<dyn Store>,
    ) {
        let backlog = Arc::downgrade(self);
        runtime.spawn(async move {
            let mut wait = RETRY_MIN;
            loop {
                let Some(strong) = backlog.upgrade() else {
                    return;
                };
                if strong.len() == 0 && !strong.unreachable() {
                    wait = RETRY_MIN;
                    // Woken by `keep` or `mark_unreachable`; the timeout
                    // lets the loop notice a dropped engine.
                    let _ = tokio::time::timeout(RETRY_MAX, strong.wake.notified()).await;
                    continue;
                }
                let outcome = if strong.len() == 0 {
                    // Nothing waits, yet the store did not answer: probe it
                    // with a lock of no task, so that events wait for it
                    // again once it answers.
                    match store.lock_task("").await {
                        Ok(lock) => {
                            drop(lock);
                            strong.mark_reachable();
                            Ok(true)
                        }
                        Err(err) => Err(err),
                    }
                } else {
                    strong.flush(store.as_ref()).await
                };
                drop(strong);
                match outcome {
                    Ok(true) => wait = RETRY_MIN,
                    Ok(false) => tokio::time::sleep(RETRY_MIN).await,
                    Err(err) => {
                        tracing::warn!(error = %err, retry_in_ms = wait.as_millis() as u64, "store: still unreachable; writes wait in memory");
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(RETRY_MAX);
                    }
                }
            }
        });
    }
}

/// The waiting commits of one task still to write, given the task's
/// stored record (read under its lock). Versions rise by one per commit
/// and a stored version never falls, so:
///
/// - a stored version below the first waiting one: none of them landed,
///   all are written;
/// - a stored record equal to a waiting commit's record: that commit (and
///   those before it) landed although its answer was lost (a connection
///   cut during `COMMIT`); the ones after it are written;
/// - otherwise another engine moved the task on meanwhile: the waiting
///   commits' audit rows, pivot records and episodes are still written
///   (they happened), with the stored record left as it is (the engine
///   reloads it, never softened, see `policy::counts_on_reload`).
fn catch_up(stored: Option<&TaskRecord>, waiting: Vec<TaskCommit>) -> Vec<TaskCommit> {
    let Some(stored) = stored else {
        return waiting;
    };
    let Some(first) = waiting.first() else {
        return waiting;
    };
    if stored.version < first.record.version {
        return waiting;
    }
    if let Some(landed) = waiting.iter().position(|commit| commit.record == *stored) {
        return waiting.into_iter().skip(landed + 1).collect();
    }
    tracing::error!(
        task = %stored.snapshot.task,
        stored_version = stored.version,
        first_waiting = first.record.version,
        "store: another engine moved the task on while this one could not write; its journal is written, the stored state kept"
    );
    waiting
        .into_iter()
        .map(|mut commit| {
            commit.record = stored.clone();
            commit
        })
        .collect()
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
    use loopguard_core_types::Timestamp;

    fn versions(commits: &[TaskCommit]) -> Vec<u64> {
        commits.iter().map(|commit| commit.record.version).collect()
    }

    #[test]
    fn commits_wait_in_version_order_and_a_claim_excludes_other_writers() {
        let backlog = Backlog::default();
        for version in [7, 5, 6] {
            assert!(backlog.keep(commit("T", version)).is_ok());
        }
        assert!(backlog.keep(commit("U", 1)).is_ok());
        assert_eq!(backlog.len(), 4);
        assert!(backlog.holds("T"));
        let claimed = backlog.claim("T").unwrap_or_default();
        assert_eq!(versions(&claimed), [5, 6, 7]);
        assert!(backlog.claim("T").is_none(), "one writer at a time");
        assert!(backlog.holds("T"), "claimed commits still count");
        assert_eq!(backlog.waiting_tasks(), ["U"]);
        // Written: 5 and 6; 7 and a newer 8 wait again.
        backlog.release("T", 3, vec![commit("T", 8), commit("T", 7)]);
        assert_eq!(backlog.len(), 3);
        assert!(backlog.claim("U").is_some());
        assert_eq!(versions(&backlog.claim("T").unwrap_or_default()), [7, 8]);
    }

    #[test]
    fn a_full_backlog_refuses_and_says_so() {
        let backlog = Backlog::default();
        backlog.waiting.store(MAX_BACKLOG, Ordering::Release);
        let refused = backlog.keep(commit("T", 1));
        assert!(matches!(refused, Err(NotWritten::Full)));
        let message = refused.err().map(|err| err.to_string()).unwrap_or_default();
        assert!(message.contains("lost"), "{message}");
    }

    #[test]
    fn catch_up_skips_what_landed_and_keeps_the_journal_of_a_conflict() {
        let waiting = || vec![commit("T", 4), commit("T", 5), commit("T", 6)];
        // Nothing landed.
        let older = commit("T", 3).record;
        assert_eq!(versions(&catch_up(Some(&older), waiting())), [4, 5, 6]);
        assert_eq!(versions(&catch_up(None, waiting())), [4, 5, 6]);
        // 4 and 5 landed, their answers lost.
        let landed = commit("T", 5).record;
        assert_eq!(versions(&catch_up(Some(&landed), waiting())), [6]);
        // Another engine wrote version 5: everything's journal, its record.
        let mut theirs = commit("T", 5).record;
        theirs.snapshot.loop_count = 99;
        let kept = catch_up(Some(&theirs), waiting());
        assert_eq!(kept.len(), 3);
        assert!(kept.iter().all(|commit| commit.record == theirs));
    }

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
        let (a, b) = (with_pivot(1), with_pivot(2));
        let merged = merge(vec![a, b]).unwrap_or_else(|| commit("none", 0));
        assert_eq!(merged.record.version, 2);
        let lines: Vec<_> = merged.pivots.iter().map(|pivot| pivot.line).collect();
        assert_eq!(lines, [1, 2]);
    }
}
