//! What the engine writes after each event, decided once per store.
//!
//! A store's [`Durability`] becomes a [`Persistence`] when the engine is
//! built; from then on the engine asks it, not the store: whether to keep
//! an audit [`Journal`], and what one event's [`Writes`] are (a memory
//! store's changed snapshot and episodes; a durable store's whole
//! [`TaskCommit`], direct or through the group-commit queue).

use loopguard_core_types::{Action, Detection, TaskStatus, Timestamp};
use tokio::sync::oneshot;

use crate::store::{
    AuditEntry, AuditRecord, CycleEpisode, Durability, PivotRecord, Resolution, Store, StoreError,
    TaskCommit, TaskSnapshot,
};

/// How the engine persists, from the store's [`Durability`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Persistence {
    /// Counters and the cycle log only, written when they change.
    Memory,
    /// Everything, committed before the decision returns; `group_commit`
    /// when commits go through the writer queue.
    Durable {
        /// Whether commits share transactions through the writer.
        group_commit: bool,
    },
    /// Durable and shared by several engines: each event runs under its
    /// task's row lock and commits through it.
    Shared,
}

impl Persistence {
    /// The persistence a store asks for.
    pub(crate) fn of(store: &dyn Store) -> Persistence {
        match store.durability() {
            Durability::Memory => Persistence::Memory,
            Durability::Durable => Persistence::Durable {
                group_commit: store.group_commit(),
            },
            Durability::Shared => Persistence::Shared,
        }
    }

    /// Whether the store keeps each task's whole state, its audit log and
    /// pivot records.
    pub(crate) fn keeps_state(self) -> bool {
        self != Persistence::Memory
    }

    /// Whether the engine reads a task's record under its row lock on
    /// every event (another engine may have moved the task on).
    pub(crate) fn is_shared(self) -> bool {
        self == Persistence::Shared
    }

    /// An empty journal for one event: it records only when the store
    /// keeps an audit log.
    pub(crate) fn journal(self, task: &str, line: u64, at: Timestamp) -> Journal {
        let keeps = self.keeps_state();
        Journal {
            keeps,
            // A memory store's journal records nothing: no copy of the id
            // on its hot path.
            task: if keeps {
                task.to_owned()
            } else {
                String::new()
            },
            line,
            at,
            audit: Vec::new(),
            pivots: Vec::new(),
        }
    }
}

/// The audit rows and pivot records of one event (durable stores only; a
/// memory store's journal stays empty and costs nothing).
pub(crate) struct Journal {
    keeps: bool,
    task: String,
    line: u64,
    at: Timestamp,
    pub(crate) audit: Vec<AuditEntry>,
    pub(crate) pivots: Vec<PivotRecord>,
}

impl Journal {
    /// Records each detection (with its line), and a pivot record for each
    /// pivot; `pivots` is the task's pivot count after this event.
    pub(crate) fn detections(&mut self, detections: &[Detection], pivots: u32) {
        if !self.keeps {
            return;
        }
        for detection in detections {
            let mut recorded = detection.clone();
            recorded.line = Some(self.line);
            self.audit
                .push(self.entry(AuditRecord::Detection(Box::new(recorded))));
            if detection.action == Action::Pivot {
                self.pivots.push(PivotRecord {
                    task: self.task.clone(),
                    line: self.line,
                    at: self.at,
                    number: pivots,
                    directive: detection.directive.clone(),
                });
            }
        }
    }

    /// The input line of the event.
    pub(crate) fn line(&self) -> u64 {
        self.line
    }

    /// Records a reset and the counts it cleared.
    pub(crate) fn reset(
        &mut self,
        reason: Resolution,
        previous_loop_count: u32,
        previous_pivots: u32,
        previous_status: TaskStatus,
    ) {
        if !self.keeps {
            return;
        }
        let entry = self.entry(AuditRecord::Reset {
            reason,
            previous_loop_count,
            previous_pivots,
            previous_status,
        });
        self.audit.push(entry);
    }

    fn entry(&self, record: AuditRecord) -> AuditEntry {
        AuditEntry {
            task: self.task.clone(),
            line: self.line,
            at: self.at,
            record,
        }
    }
}

/// Everything one event writes, gathered under the task's lock and written
/// after it is released.
pub(crate) enum Writes {
    /// A memory store: the episodes that changed, and the snapshot when the
    /// counters changed.
    Memory {
        episodes: Vec<CycleEpisode>,
        snapshot: Option<TaskSnapshot>,
    },
    /// A durable store: the event's commit, written directly.
    Commit(Box<TaskCommit>),
    /// A shared store: the event's commit, merged with the task's other
    /// events and written through its row lock (see
    /// [`crate::engine`]'s shared path), never by [`Writes::write`].
    Shared(Box<TaskCommit>),
    /// A durable store with group commit: the queued commit's answer.
    Queued(oneshot::Receiver<Result<(), StoreError>>),
}

impl Writes {
    /// Writes them. A store that fails loses nothing already in memory: a
    /// failed episode or snapshot write is logged; a failed commit is
    /// returned, for the decision to report.
    pub(crate) async fn write(self, store: &dyn Store) -> Result<(), StoreError> {
        match self {
            Writes::Memory { episodes, snapshot } => {
                for episode in &episodes {
                    if let Err(err) = store.record_episode(episode).await {
                        tracing::error!(task = %episode.task, episode = episode.id, error = %err, "cycle log write failed");
                    }
                }
                if let Some(snapshot) = &snapshot
                    && let Err(err) = store.save_task(snapshot).await
                {
                    tracing::error!(task = %snapshot.task, error = %err, "task snapshot write failed");
                }
                Ok(())
            }
            Writes::Commit(commit) => store.commit(std::slice::from_ref(&commit)).await,
            Writes::Shared(commit) => store.commit(std::slice::from_ref(&commit)).await,
            Writes::Queued(answer) => match answer.await {
                Ok(outcome) => outcome,
                Err(_) => Err(StoreError::Backend {
                    backend: format!("{store:?}"),
                    message: "the store's writer stopped".into(),
                }),
            },
        }
    }
}
