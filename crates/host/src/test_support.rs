//! Helpers shared by the unit tests of the writer and its backlog.

use loopguard_core_types::{TaskStatus, Timestamp};

use crate::store::{TaskCommit, TaskRecord, TaskSnapshot};

/// An active task's commit at `version` (its line and its loop count too),
/// with nothing else in it.
pub(crate) fn commit(task: &str, version: u64) -> TaskCommit {
    TaskCommit {
        line: version,
        record: TaskRecord {
            snapshot: TaskSnapshot {
                task: task.into(),
                status: TaskStatus::Active,
                loop_count: u32::try_from(version).unwrap_or(u32::MAX),
                pivots: 0,
                last_seen: Timestamp(0),
            },
            version,
            state: None,
        },
        audit: Vec::new(),
        pivots: Vec::new(),
        episodes: Vec::new(),
    }
}
