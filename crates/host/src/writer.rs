//! The durable store's writer: group commit in arrival order.
//!
//! Events queue their commits while they hold their task's lock, so one
//! task's commits arrive in the order they were decided. One writer task
//! takes everything queued so far (up to [`MAX_BATCH`]) and commits it in
//! one transaction, then answers every event of the batch: under load many
//! events share a transaction, and none is answered before its writes are
//! committed.
//!
//! A batch that fails is kept in a retry backlog (up to [`MAX_BACKLOG`]
//! commits) and written again, in its order, before anything newer: a
//! database that is down, or a disk that is full, for a while loses nothing
//! the engine decided meanwhile. Nothing is written ahead of the backlog,
//! so what is committed is always a prefix of what was decided (a task's
//! rows are never reordered, and the input line a run records as committed
//! has every event before it committed too). The backlog is retried before
//! each batch, at most every [`RETRY_EVERY`], and on that period while the
//! engine is idle; when the engine is dropped the writer keeps retrying for
//! [`FINAL_RETRIES`], then counts what is left as lost.
//!
//! When the backlog is full, the store stops accepting events: each new
//! commit is refused, its decision says why, the refusal is logged as an
//! error, and [`StoreHealth::accepting`] says so (for a readiness probe)
//! until the backlog is written. Nothing is dropped silently. Every count
//! (failed, written later, lost) is kept in the store's [`StoreHealth`].

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::store::{Store, StoreError, StoreHealth, TaskCommit};

/// Commits that share one transaction, at most.
const MAX_BATCH: usize = 256;
/// Failed commits kept for a retry, at most; beyond, new commits are
/// refused (and each decision says so) until the backlog is written.
pub(crate) const MAX_BACKLOG: usize = 100_000;
/// How often a backlog is retried, at most (and while idle, at least).
const RETRY_EVERY: Duration = Duration::from_millis(250);
/// How long the writer keeps retrying its backlog after the engine is
/// dropped, before it counts what is left as lost.
const FINAL_RETRIES: Duration = Duration::from_secs(2);

/// One event's commit, the input line it was decided on (when its run is
/// recorded), and where its answer goes.
struct Pending {
    commit: TaskCommit,
    line: Option<u64>,
    answer: oneshot::Sender<Result<(), StoreError>>,
}

/// A commit kept for a retry.
struct Kept {
    commit: TaskCommit,
    line: Option<u64>,
}

/// The sending side of the writer.
#[derive(Debug)]
pub(crate) struct CommitQueue {
    sender: mpsc::UnboundedSender<Pending>,
}

impl CommitQueue {
    /// Starts the writer on `runtime`. It stops when the queue is dropped
    /// and everything queued has been written (or given up, see the module
    /// documentation).
    pub(crate) fn start(runtime: &tokio::runtime::Handle, store: Arc<dyn Store>) -> CommitQueue {
        CommitQueue::start_with_backlog(runtime, store, MAX_BACKLOG)
    }

    /// [`CommitQueue::start`] with a backlog of at most `limit` commits.
    pub(crate) fn start_with_backlog(
        runtime: &tokio::runtime::Handle,
        store: Arc<dyn Store>,
        limit: usize,
    ) -> CommitQueue {
        let (sender, receiver) = mpsc::unbounded_channel();
        runtime.spawn(write_batches(store, receiver, limit));
        CommitQueue { sender }
    }

    /// Queues a commit; the receiver answers once it is written (or not).
    pub(crate) fn push(&self, commit: TaskCommit) -> oneshot::Receiver<Result<(), StoreError>> {
        let (answer, receiver) = oneshot::channel();
        let line = Some(commit.line);
        // A send fails only when the writer has stopped; the dropped answer
        // then tells the caller so.
        let _ = self.sender.send(Pending {
            commit,
            line,
            answer,
        });
        receiver
    }
}

async fn write_batches(
    store: Arc<dyn Store>,
    mut receiver: mpsc::UnboundedReceiver<Pending>,
    limit: usize,
) {
    let local = StoreHealth::new();
    let health = store.health().unwrap_or(&local);
    health.update(|health| {
        health.started = true;
        health.stopped = false;
    });
    let mut writer = Writer {
        store: store.as_ref(),
        health,
        backlog: VecDeque::new(),
        limit,
        last_retry: None,
        last_error: None,
    };
    let mut batch: Vec<Pending> = Vec::with_capacity(MAX_BATCH);
    loop {
        let next = if writer.backlog.is_empty() {
            receiver.recv().await
        } else {
            match tokio::time::timeout(RETRY_EVERY, receiver.recv()).await {
                Ok(next) => next,
                Err(_idle) => {
                    let _ = writer.retry(true).await;
                    continue;
                }
            }
        };
        let Some(first) = next else {
            break;
        };
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match receiver.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        writer.write(&mut batch).await;
    }
    let deadline = Instant::now() + FINAL_RETRIES;
    while !writer.backlog.is_empty() && Instant::now() < deadline {
        if writer.retry(true).await.is_err() {
            tokio::time::sleep(RETRY_EVERY).await;
        }
    }
    let lost = writer.backlog.len() as u64;
    if lost > 0 {
        tracing::error!(
            commits = lost,
            "store: commits that failed were still not written when the engine stopped; they are lost"
        );
    }
    health.update(|health| {
        health.lost += lost;
        health.backlog = 0;
        health.stopped = true;
    });
}

/// The writer's state between batches.
struct Writer<'a> {
    store: &'a dyn Store,
    health: &'a StoreHealth,
    backlog: VecDeque<Kept>,
    limit: usize,
    /// When the backlog was last retried (and failed).
    last_retry: Option<Instant>,
    /// The last failure of a commit.
    last_error: Option<StoreError>,
}

impl Writer<'_> {
    /// Writes the backlog, if any, in one transaction: `Ok` when it is
    /// empty afterwards. Unless `now`, a retry that failed less than
    /// [`RETRY_EVERY`] ago is not repeated (the backlog stays).
    async fn retry(&mut self, now: bool) -> Result<(), Option<StoreError>> {
        if self.backlog.is_empty() {
            return Ok(());
        }
        if !now
            && self
                .last_retry
                .is_some_and(|last| last.elapsed() < RETRY_EVERY)
        {
            return Err(None);
        }
        let commits: Vec<TaskCommit> = self
            .backlog
            .iter()
            .map(|kept| kept.commit.clone())
            .collect();
        let line = self.backlog.iter().filter_map(|kept| kept.line).max();
        match self.store.commit_at(&commits, line).await {
            Ok(()) => {
                let written = commits.len() as u64;
                tracing::info!(
                    commits = written,
                    "store: earlier failed writes are now committed"
                );
                self.backlog.clear();
                self.last_retry = None;
                self.health.update(|health| {
                    health.recovered += written;
                    health.backlog = 0;
                    health.not_accepting = None;
                });
                Ok(())
            }
            Err(err) => {
                tracing::error!(commits = commits.len(), error = %err, "store: earlier failed writes still fail");
                self.last_retry = Some(Instant::now());
                self.last_error = Some(err.clone());
                Err(Some(err))
            }
        }
    }

    /// Writes one batch after the backlog, and answers its events.
    async fn write(&mut self, batch: &mut Vec<Pending>) {
        let failure = match self.retry(false).await {
            Ok(()) => {
                let commits: Vec<TaskCommit> =
                    batch.iter().map(|pending| pending.commit.clone()).collect();
                let line = batch.iter().filter_map(|pending| pending.line).max();
                match self.store.commit_at(&commits, line).await {
                    Ok(()) => {
                        for pending in batch.drain(..) {
                            let _ = pending.answer.send(Ok(()));
                        }
                        return;
                    }
                    Err(err) => {
                        self.last_error = Some(err.clone());
                        err
                    }
                }
            }
            Err(Some(err)) => err,
            Err(None) => waiting_behind(self.backlog.len(), self.last_error.as_ref()),
        };
        self.keep(batch, failure);
    }

    /// Keeps a failed batch for a retry while the backlog has room, and
    /// refuses the rest: each event's answer says which.
    fn keep(&mut self, batch: &mut Vec<Pending>, err: StoreError) {
        let room = self.limit.saturating_sub(self.backlog.len());
        let failed = batch.len() as u64;
        let first_error = err.to_string();
        let mut refused: u64 = 0;
        for (index, pending) in batch.drain(..).enumerate() {
            if index < room {
                self.backlog.push_back(Kept {
                    commit: pending.commit,
                    line: pending.line,
                });
                let _ = pending.answer.send(Err(kept_for_retry(err.clone())));
            } else {
                refused += 1;
                let _ = pending
                    .answer
                    .send(Err(not_accepting(err.clone(), self.limit)));
            }
        }
        let backlog = self.backlog.len() as u64;
        let why = (refused > 0).then(|| not_accepting(err.clone(), self.limit).to_string());
        if let Some(why) = &why {
            tracing::error!(refused, backlog, "{why}");
        }
        self.health.update(|health| {
            health.failed += failed;
            health.lost += refused;
            health.backlog = backlog;
            if health.first_error.is_none() {
                health.first_error = Some(first_error);
            }
            if why.is_some() {
                health.not_accepting = why;
            }
        });
    }
}

/// The error for a commit not tried because earlier ones wait for a retry
/// (`last` failed last).
fn waiting_behind(backlog: usize, last: Option<&StoreError>) -> StoreError {
    let (backend, last) = match last {
        Some(StoreError::Backend { backend, message }) => (backend.clone(), message.clone()),
        None => ("writer".to_owned(), "unknown".to_owned()),
    };
    StoreError::Backend {
        backend,
        message: format!(
            "{backlog} earlier commits wait for a retry, this one behind them (the last \
             failure: {last})"
        ),
    }
}

/// A commit failure, saying that the writes are kept and retried.
fn kept_for_retry(err: StoreError) -> StoreError {
    match err {
        StoreError::Backend { backend, message } => StoreError::Backend {
            backend,
            message: format!(
                "{message} (the writes are kept in memory and retried before the next commit)"
            ),
        },
    }
}

/// A commit refused because the retry backlog is full.
fn not_accepting(err: StoreError, limit: usize) -> StoreError {
    match err {
        StoreError::Backend { backend, message } => StoreError::Backend {
            backend,
            message: format!(
                "not accepting events: {limit} failed commits wait for a retry (the retry \
                 backlog is full), so this event's writes are not kept; the failure: {message}"
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use async_trait::async_trait;

    use super::*;
    use crate::store::{CycleEpisode, MemoryStore, TaskRecord, TaskSnapshot};
    use crate::test_support::commit;

    /// A durable memory store whose commits fail while `down` is set.
    #[derive(Debug)]
    struct Flaky {
        inner: MemoryStore,
        down: AtomicBool,
        health: StoreHealth,
    }

    #[async_trait]
    impl Store for Flaky {
        fn durability(&self) -> crate::Durability {
            crate::Durability::Durable
        }
        async fn record_episode(&self, episode: &CycleEpisode) -> Result<(), StoreError> {
            self.inner.record_episode(episode).await
        }
        async fn save_task(&self, snapshot: &TaskSnapshot) -> Result<(), StoreError> {
            self.inner.save_task(snapshot).await
        }
        async fn load_task(&self, task: &str) -> Result<Option<TaskSnapshot>, StoreError> {
            self.inner.load_task(task).await
        }
        async fn tasks(&self) -> Result<Vec<TaskSnapshot>, StoreError> {
            self.inner.tasks().await
        }
        async fn episodes(&self, task: Option<&str>) -> Result<Vec<CycleEpisode>, StoreError> {
            self.inner.episodes(task).await
        }
        async fn load_record(&self, task: &str) -> Result<Option<TaskRecord>, StoreError> {
            self.inner.load_record(task).await
        }
        async fn commit(&self, commits: &[TaskCommit]) -> Result<(), StoreError> {
            if self.down.load(Ordering::Relaxed) {
                return Err(StoreError::Backend {
                    backend: "flaky".into(),
                    message: "database or disk is full".into(),
                });
            }
            self.inner.commit(commits).await
        }
        fn health(&self) -> Option<&StoreHealth> {
            Some(&self.health)
        }
    }

    fn flaky() -> Arc<Flaky> {
        Arc::new(Flaky {
            inner: MemoryStore::durable(),
            down: AtomicBool::new(true),
            health: StoreHealth::new(),
        })
    }

    /// A queue on `store` whose first commit (task T, version 1) failed.
    async fn queue_with_a_failed_commit(store: &Arc<Flaky>) -> CommitQueue {
        let queue = CommitQueue::start(
            &tokio::runtime::Handle::current(),
            Arc::clone(store) as Arc<dyn Store>,
        );
        assert!(
            queue
                .push(commit("T", 1))
                .await
                .expect("an answer")
                .is_err()
        );
        queue
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_backlog_refuses_new_commits_loudly_and_recovers() {
        let store = flaky();
        let queue = CommitQueue::start_with_backlog(
            &tokio::runtime::Handle::current(),
            Arc::clone(&store) as Arc<dyn Store>,
            3,
        );
        let mut answers = Vec::new();
        for version in 1..=5 {
            answers.push(queue.push(commit("T", version)).await.expect("an answer"));
        }
        // Three kept for a retry, two refused with the reason.
        assert!(answers.iter().all(Result::is_err));
        let refused = answers[4]
            .as_ref()
            .err()
            .map(ToString::to_string)
            .unwrap_or_default();
        assert!(refused.contains("not accepting events"), "{refused}");
        assert!(refused.contains("disk is full"), "{refused}");
        let health = store.health.current();
        assert_eq!((health.failed, health.lost, health.backlog), (5, 2, 3));
        assert!(store.health.accepting().is_err());

        // Space returns: the backlog is written (in order) before the next
        // commit, and the store accepts again.
        store.down.store(false, Ordering::Relaxed);
        tokio::time::advance(RETRY_EVERY * 2).await;
        assert!(queue.push(commit("T", 6)).await.expect("an answer").is_ok());
        let health = store.health.current();
        assert_eq!((health.recovered, health.backlog), (3, 0), "{health:?}");
        assert!(store.health.accepting().is_ok());
        let record = store.inner.load_record("T").await.expect("read");
        assert_eq!(record.map(|record| record.version), Some(6));
        drop(queue);
        let settled = store.health.settled(Duration::from_secs(5)).await;
        assert!(settled.stopped && settled.lost == 2, "{settled:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_backlog_left_when_the_engine_stops_is_counted_as_lost() {
        let store = flaky();
        let queue = queue_with_a_failed_commit(&store).await;
        drop(queue);
        let settled = store.health.settled(FINAL_RETRIES * 4).await;
        assert!(settled.stopped, "{settled:?}");
        assert_eq!((settled.failed, settled.lost), (1, 1), "{settled:?}");
        assert!(
            settled
                .first_error
                .is_some_and(|error| error.contains("full"))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_writer_retries_its_backlog() {
        let store = flaky();
        let queue = queue_with_a_failed_commit(&store).await;
        store.down.store(false, Ordering::Relaxed);
        tokio::time::sleep(RETRY_EVERY * 3).await;
        assert_eq!(store.health.current().recovered, 1);
        assert!(store.inner.load_record("T").await.expect("read").is_some());
        drop(queue);
    }
}
