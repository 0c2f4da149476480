//! A shared store's events that are not written yet, kept in order per
//! task until the database takes them.
//!
//! On a [`Durability::Shared`](crate::Durability) store (PostgreSQL) every
//! event is applied to its task's newest stored row, under the row's lock,
//! and written in the same transaction. When that fails (the connection is
//! cut, the database is down) the *event* waits here, not the record it
//! produced: when the database answers again, the waiting events are
//! applied to the task's newest row (which another engine may have moved
//! on meanwhile) and written with it, so no increment is lost and nothing
//! is written over another engine's work. That happens
//!
//! - before the task's next event, in the same transaction, and
//! - in the background, as soon as the database answers again.
//!
//! A task's events are applied by one writer of this engine at a time: a
//! [`TaskTurn`] is that writer's exclusive hold on the task's queue.
//!
//! A commit whose answer was lost (a connection cut during `COMMIT`) may
//! have landed. The commit carries a mark of this engine's (see
//! `crate::engine`); the [`Tried`] entry remembers it, and the next writer
//! reads the row's mark to learn whether those events are already in it.
//!
//! At most [`MAX_BACKLOG`] events wait; beyond, an event is refused and the
//! refusal is logged and reported on its decision, never silent.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use loopguard_core_types::{Event, Timestamp};
use parking_lot::Mutex;

use crate::store::StoreError;

/// Events kept for a retry, at most: the bound the SQLite writer keeps
/// its commits to. Beyond, a new event is refused, logged as an error and
/// reported on its decision.
pub(crate) use crate::writer::MAX_BACKLOG;

/// Why an event was refused a place in the backlog.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "{max} events already wait for the database: this event is lost to the store (its decision stands; the task's next events carry on from the stored row)",
    max = MAX_BACKLOG
)]
pub(crate) struct BacklogFull;

/// An event decided without being written: what it takes to apply it
/// again to the task's newest stored row.
#[derive(Debug, Clone)]
pub(crate) struct WaitingEvent {
    /// Its input line (or the engine's sequence number when streamed).
    pub(crate) line: u64,
    pub(crate) event: Event,
    /// Its time as first decided (`None`: timed by file order only).
    pub(crate) time: Option<Timestamp>,
}

/// The last commit of a task's waiting events that got no answer: the
/// mark it wrote on the row, and how many of the leading waiting events it
/// carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tried {
    pub(crate) mark: u64,
    pub(crate) carried: usize,
}

/// One task's waiting events, oldest first.
#[derive(Debug, Default)]
pub(crate) struct TaskQueue {
    events: Vec<WaitingEvent>,
    tried: Option<Tried>,
}

/// The events waiting for the database, per task.
#[derive(Debug, Default)]
pub(crate) struct Backlog {
    /// A task's queue is here while events of it wait or a writer holds
    /// its turn.
    tasks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<TaskQueue>>>>,
    /// Events waiting, all tasks (read without a lock on the fast path).
    waiting: AtomicUsize,
    /// Set when the store failed to answer, cleared when it answers: while
    /// set, events do not wait for the database, they are decided on the
    /// engine's copy and wait here.
    unreachable: AtomicBool,
    /// The failure that made the store unreachable, for the decisions made
    /// meanwhile.
    last_failure: Mutex<Option<StoreError>>,
    /// Wakes the background writer.
    wake: tokio::sync::Notify,
}

impl Backlog {
    /// Events waiting, all tasks.
    pub(crate) fn len(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// Whether the store failed to answer lately.
    pub(crate) fn unreachable(&self) -> bool {
        self.unreachable.load(Ordering::Acquire)
    }

    /// Marks the store unreachable (it failed with `err`) and wakes the
    /// background writer.
    pub(crate) fn mark_unreachable(&self, err: &StoreError) {
        *self.last_failure.lock() = Some(err.clone());
        self.unreachable.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    /// Marks the store reachable again.
    pub(crate) fn mark_reachable(&self) {
        self.unreachable.store(false, Ordering::Release);
    }

    /// What made the store unreachable, for a decision made without it.
    pub(crate) fn last_failure(&self) -> String {
        match self.last_failure.lock().as_ref() {
            Some(err) => err.to_string(),
            None => "the database did not answer".to_owned(),
        }
    }

    /// Wakes the background writer: an event is left waiting.
    pub(crate) fn wake(&self) {
        self.wake.notify_one();
    }

    /// Waits until the background writer has something to do (or
    /// `timeout` passes).
    pub(crate) async fn woken(&self, timeout: std::time::Duration) {
        let _ = tokio::time::timeout(timeout, self.wake.notified()).await;
    }

    /// Whether events of `task` wait (or a writer holds its turn).
    pub(crate) fn holds(&self, task: &str) -> bool {
        self.tasks.lock().contains_key(task)
    }

    /// The tasks whose events wait, or whose turn a writer holds.
    pub(crate) fn waiting_tasks(&self) -> Vec<String> {
        self.tasks.lock().keys().cloned().collect()
    }

    /// This engine's exclusive hold on `task`'s queue, once the writer
    /// before has let go.
    pub(crate) async fn turn(&self, task: &str) -> TaskTurn<'_> {
        let queue = Arc::clone(self.tasks.lock().entry(task.to_owned()).or_default());
        TaskTurn {
            backlog: self,
            task: task.to_owned(),
            queue: queue.lock_owned().await,
        }
    }
}

/// A writer's exclusive hold on one task's waiting events (see
/// [`Backlog::turn`]). Dropped with nothing waiting, the task leaves the
/// backlog.
#[derive(Debug)]
pub(crate) struct TaskTurn<'a> {
    backlog: &'a Backlog,
    task: String,
    queue: tokio::sync::OwnedMutexGuard<TaskQueue>,
}

impl TaskTurn<'_> {
    /// The task.
    pub(crate) fn task(&self) -> &str {
        &self.task
    }

    /// The task's waiting events, oldest first.
    pub(crate) fn events(&self) -> &[WaitingEvent] {
        &self.queue.events
    }

    /// Adds `event` behind the others; refused when [`MAX_BACKLOG`] events
    /// already wait.
    pub(crate) fn push(&mut self, event: WaitingEvent) -> Result<(), BacklogFull> {
        if self.backlog.len() >= MAX_BACKLOG {
            tracing::error!(
                task = %self.task,
                line = event.line,
                max = MAX_BACKLOG,
                "store: the backlog of unwritten events is full: this event is not kept"
            );
            return Err(BacklogFull);
        }
        self.queue.events.push(event);
        self.backlog.waiting.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// The last commit of these events that got no answer.
    pub(crate) fn tried(&self) -> Option<Tried> {
        self.queue.tried
    }

    /// Remembers (or forgets) the commit that got no answer.
    pub(crate) fn set_tried(&mut self, tried: Option<Tried>) {
        self.queue.tried = tried;
    }

    /// Forgets the first `count` events: they are written.
    pub(crate) fn written(&mut self, count: usize) {
        let count = count.min(self.queue.events.len());
        self.queue.events.drain(..count);
        self.backlog.waiting.fetch_sub(count, Ordering::AcqRel);
    }
}

impl Drop for TaskTurn<'_> {
    fn drop(&mut self) {
        if !self.queue.events.is_empty() {
            return;
        }
        let mut tasks = self.backlog.tasks.lock();
        // The map's handle and this turn's: nobody else waits for the
        // queue (a new writer would take it under the map's lock, held
        // here), so it can go.
        if tasks
            .get(&self.task)
            .is_some_and(|queue| Arc::strong_count(queue) <= 2)
        {
            tasks.remove(&self.task);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(line: u64) -> WaitingEvent {
        let event = Event::from_json(r#"{"type":"failure","task":"T","agent":"a","error":"E"}"#)
            .unwrap_or_else(|err| panic!("{err}"));
        WaitingEvent {
            line,
            event,
            time: None,
        }
    }

    fn lines(turn: &TaskTurn<'_>) -> Vec<u64> {
        turn.events().iter().map(|event| event.line).collect()
    }

    #[tokio::test]
    async fn events_wait_in_order_and_leave_once_written() {
        let backlog = Backlog::default();
        {
            let mut turn = backlog.turn("T").await;
            for line in [1, 2, 3] {
                assert!(turn.push(waiting(line)).is_ok());
            }
            assert_eq!(backlog.len(), 3);
        }
        assert!(backlog.holds("T"), "waiting events keep the task");
        assert_eq!(backlog.waiting_tasks(), ["T"]);
        {
            let mut turn = backlog.turn("T").await;
            assert_eq!(lines(&turn), [1, 2, 3]);
            turn.written(2);
            assert_eq!(lines(&turn), [3]);
            turn.written(1);
        }
        assert_eq!(backlog.len(), 0);
        assert!(!backlog.holds("T"), "an empty queue leaves");
    }

    #[tokio::test]
    async fn one_writer_holds_a_task_at_a_time() {
        let backlog = Arc::new(Backlog::default());
        let first = backlog.turn("T").await;
        let second = {
            let backlog = Arc::clone(&backlog);
            tokio::spawn(async move {
                let mut turn = backlog.turn("T").await;
                assert!(turn.push(waiting(9)).is_ok());
            })
        };
        tokio::task::yield_now().await;
        assert!(!second.is_finished(), "the second writer waits");
        drop(first);
        assert!(second.await.is_ok());
        assert!(backlog.holds("T"), "its event waits: the queue stays");
        assert_eq!(backlog.len(), 1);
    }

    #[tokio::test]
    async fn a_full_backlog_refuses_and_says_so() {
        let backlog = Backlog::default();
        backlog.waiting.store(MAX_BACKLOG, Ordering::Release);
        let mut turn = backlog.turn("T").await;
        let refused = turn.push(waiting(1));
        let message = refused.err().map(|err| err.to_string()).unwrap_or_default();
        assert!(message.contains("lost"), "{message}");
    }
}
