//! The store: where task snapshots and the cycle log outlive the engine's
//! memory.
//!
//! [`MemoryStore`] is the only backend here; SQLite and PostgreSQL
//! implement the same [`Store`] trait.

use std::collections::HashMap;
use std::fmt;

use async_trait::async_trait;
use loopguard_core_types::{Action, TaskStatus, Timestamp};
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};

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

/// A store operation that failed.
#[derive(Debug, thiserror::Error)]
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

/// Where task snapshots and the cycle log are kept.
#[async_trait]
pub trait Store: Send + Sync + fmt::Debug {
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
}

/// A store in process memory: what `replay` uses. Nothing survives the
/// process.
#[derive(Debug, Default)]
pub struct MemoryStore {
    tasks: RwLock<HashMap<String, TaskSnapshot>>,
    episodes: RwLock<Vec<CycleEpisode>>,
    episode_index: RwLock<HashMap<u64, usize>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn record_episode(&self, episode: &CycleEpisode) -> Result<(), StoreError> {
        let mut episodes = self.episodes.write();
        let mut index = self.episode_index.write();
        match index.get(&episode.id) {
            Some(&at) if at < episodes.len() => episodes[at] = episode.clone(),
            _ => {
                index.insert(episode.id, episodes.len());
                episodes.push(episode.clone());
            }
        }
        Ok(())
    }

    async fn save_task(&self, snapshot: &TaskSnapshot) -> Result<(), StoreError> {
        self.tasks
            .write()
            .insert(snapshot.task.clone(), snapshot.clone());
        Ok(())
    }

    async fn load_task(&self, task: &str) -> Result<Option<TaskSnapshot>, StoreError> {
        Ok(self.tasks.read().get(task).cloned())
    }

    async fn tasks(&self) -> Result<Vec<TaskSnapshot>, StoreError> {
        let mut all: Vec<_> = self.tasks.read().values().cloned().collect();
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
}
