//! The durable store's writer: group commit in arrival order.
//!
//! Events queue their commits while they hold their task's lock, so one
//! task's commits arrive in the order they were decided. One writer task
//! takes everything queued so far (up to [`MAX_BATCH`]) and commits it in
//! one transaction, then answers every event of the batch: under load many
//! events share a transaction, and none is answered before its writes are
//! committed.
//!
//! A batch that fails is kept (up to [`MAX_BACKLOG`] commits) and written
//! again, in its order, before the next batch: a database that is down for
//! a while loses nothing the engine decided meanwhile. Since a task's record
//! is replaced only by a higher version, an older commit written late never
//! overwrites a newer one.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use crate::store::{Store, StoreError, TaskCommit};

/// Commits that share one transaction, at most.
const MAX_BATCH: usize = 256;
/// Failed commits kept for a retry, at most; beyond, the oldest are dropped
/// (and logged).
const MAX_BACKLOG: usize = 100_000;

/// One event's commit and where its answer goes.
struct Pending {
    commit: TaskCommit,
    answer: oneshot::Sender<Result<(), StoreError>>,
}

/// The sending side of the writer.
#[derive(Debug)]
pub(crate) struct CommitQueue {
    sender: mpsc::UnboundedSender<Pending>,
}

impl CommitQueue {
    /// Starts the writer on `runtime`. It stops when the queue is dropped
    /// and everything queued has been written.
    pub(crate) fn start(runtime: &tokio::runtime::Handle, store: Arc<dyn Store>) -> CommitQueue {
        let (sender, receiver) = mpsc::unbounded_channel();
        runtime.spawn(write_batches(store, receiver));
        CommitQueue { sender }
    }

    /// Queues a commit; the receiver answers once it is written (or not).
    pub(crate) fn push(&self, commit: TaskCommit) -> oneshot::Receiver<Result<(), StoreError>> {
        let (answer, receiver) = oneshot::channel();
        // A send fails only when the writer has stopped; the dropped answer
        // then tells the caller so.
        let _ = self.sender.send(Pending { commit, answer });
        receiver
    }
}

async fn write_batches(store: Arc<dyn Store>, mut receiver: mpsc::UnboundedReceiver<Pending>) {
    let mut backlog: VecDeque<TaskCommit> = VecDeque::new();
    let mut batch: Vec<Pending> = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = receiver.recv().await {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match receiver.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        if !backlog.is_empty() {
            let retry: Vec<TaskCommit> = backlog.iter().cloned().collect();
            match store.commit(&retry).await {
                Ok(()) => {
                    tracing::info!(
                        commits = retry.len(),
                        "store: earlier failed writes are now committed"
                    );
                    backlog.clear();
                }
                Err(err) => {
                    tracing::error!(commits = retry.len(), error = %err, "store: earlier failed writes still fail");
                }
            }
        }
        let commits: Vec<TaskCommit> = batch.iter().map(|pending| pending.commit.clone()).collect();
        let outcome = store.commit(&commits).await;
        let outcome = match outcome {
            Ok(()) => Ok(()),
            Err(err) => {
                backlog.extend(commits);
                let dropped = backlog.len().saturating_sub(MAX_BACKLOG);
                if dropped > 0 {
                    backlog.drain(..dropped);
                    tracing::error!(
                        dropped,
                        "store: too many failed writes kept for a retry; the oldest are dropped"
                    );
                }
                Err(kept_for_retry(err))
            }
        };
        for pending in batch.drain(..) {
            let _ = pending.answer.send(outcome.clone());
        }
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
