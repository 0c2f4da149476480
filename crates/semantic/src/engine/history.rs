//! What the semantic detectors remember: texts as vectors (or as normalized
//! text when semantic matching is off), per task, bounded.

use std::collections::VecDeque;
use std::hash::{BuildHasher, Hasher};
use std::num::NonZeroUsize;
use std::sync::Arc;

use loopguard_detectors::normalize_topic;
use lru::LruCache;
use parking_lot::Mutex;

use crate::error::Result;
use crate::service::{Embedding, EmbeddingService};
use crate::similarity::SimilarityIndex;

/// How texts are compared: cosine of embeddings, or exact normalized text.
#[derive(Debug, Clone)]
pub(crate) enum Matcher {
    /// Embeddings from the model; similarity is their cosine.
    Semantic(Arc<EmbeddingService>),
    /// `semantic.enabled = false`: similarity is 1 for equal normalized
    /// texts and 0 otherwise.
    Exact,
}

/// A text ready to be compared.
#[derive(Debug, Clone)]
pub(crate) enum Probe {
    /// Its unit vector.
    Vector(Embedding),
    /// Its normalized form (never empty).
    Text(String),
}

impl Matcher {
    /// The probe of `text`, or `None` when the text has no words (it is
    /// never "the same" as anything). The embedding is awaited here, before
    /// any state is locked.
    pub(crate) async fn probe(&self, text: &str) -> Result<Option<Probe>> {
        let normalized = normalize_topic(text);
        if normalized.is_empty() {
            return Ok(None);
        }
        match self {
            Matcher::Semantic(service) => Ok(Some(Probe::Vector(service.embed(text).await?))),
            Matcher::Exact => Ok(Some(Probe::Text(normalized))),
        }
    }

    /// A history of this matcher's probes, keeping the last `capacity`.
    pub(crate) fn history<K: Clone>(&self, capacity: usize) -> History<K> {
        match self {
            Matcher::Semantic(service) => {
                History::Vectors(SimilarityIndex::new(service.dimension(), capacity))
            }
            Matcher::Exact => History::Texts {
                rows: VecDeque::new(),
                capacity,
            },
        }
    }

    /// Whether this is the embedding matcher.
    pub(crate) fn is_semantic(&self) -> bool {
        matches!(self, Matcher::Semantic(_))
    }
}

/// A cosine as reported and compared: float noise can put the cosine of a
/// text with itself a hair above 1, which must not beat a threshold of 1.
fn clamp(cosine: f32) -> f32 {
    cosine.clamp(-1.0, 1.0)
}

/// The last probes of one stream (one pair's requests, one recipient's
/// queries, one topic's members), each under a key.
#[derive(Debug, Clone)]
pub(crate) enum History<K> {
    /// Vectors, searched by cosine.
    Vectors(SimilarityIndex<K>),
    /// Normalized texts, oldest first.
    Texts {
        rows: VecDeque<(String, K)>,
        capacity: usize,
    },
}

impl<K: Clone> History<K> {
    /// The entry most similar to `probe` and its similarity; on a tie, the
    /// newest. `None` when empty (or, for texts, when no entry is equal).
    pub(crate) fn nearest(&self, probe: &Probe) -> Result<Option<(K, f32)>> {
        match (self, probe) {
            (History::Vectors(index), Probe::Vector(vector)) => Ok(index
                .nearest(vector)?
                .map(|found| (found.key, clamp(found.cosine)))),
            (History::Texts { rows, .. }, Probe::Text(text)) => Ok(rows
                .iter()
                .rev()
                .find(|(row, _)| row == text)
                .map(|(_, key)| (key.clone(), 1.0))),
            _ => Ok(None),
        }
    }

    /// The nearest entry if its similarity is strictly above `threshold`.
    pub(crate) fn best_above(&self, probe: &Probe, threshold: f32) -> Result<Option<(K, f32)>> {
        Ok(self
            .nearest(probe)?
            .filter(|(_, similarity)| *similarity > threshold))
    }

    /// Every entry strictly above `threshold`, oldest first.
    pub(crate) fn all_above(&self, probe: &Probe, threshold: f32) -> Result<Vec<(K, f32)>> {
        match (self, probe) {
            (History::Vectors(index), Probe::Vector(vector)) => Ok(index
                .all_above(vector, threshold)?
                .into_iter()
                .map(|found| (found.key, clamp(found.cosine)))
                .filter(|(_, similarity)| *similarity > threshold)
                .collect()),
            (History::Texts { rows, .. }, Probe::Text(text)) if 1.0 > threshold => Ok(rows
                .iter()
                .filter(|(row, _)| row == text)
                .map(|(_, key)| (key.clone(), 1.0))
                .collect()),
            _ => Ok(Vec::new()),
        }
    }

    /// Remembers `probe` under `key`, forgetting the oldest entry when full.
    pub(crate) fn push(&mut self, key: K, probe: &Probe) -> Result<()> {
        match (self, probe) {
            (History::Vectors(index), Probe::Vector(vector)) => index.push(key, vector),
            (History::Texts { rows, capacity }, Probe::Text(text)) => {
                if *capacity == 0 {
                    return Ok(());
                }
                if rows.len() == *capacity {
                    rows.pop_front();
                }
                rows.push_back((text.clone(), key));
                Ok(())
            }
            // A matcher makes one kind of probe and one kind of history.
            _ => Ok(()),
        }
    }
}

/// Shards of the per-task state, so that tasks on different shards never
/// wait for each other.
const SHARDS: usize = 16;

/// Per-task state of one detector: at most `max_tasks` tasks, the least
/// recently used forgotten first. Locks are held only for the bookkeeping
/// after an embedding, never across an `.await`.
pub(crate) struct TaskStates<S> {
    shards: Box<[Mutex<LruCache<String, S>>]>,
}

impl<S> std::fmt::Debug for TaskStates<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskStates")
            .field("tasks", &self.len())
            .finish_non_exhaustive()
    }
}

impl<S> TaskStates<S> {
    /// Room for `max_tasks` tasks (at least one per shard).
    pub(crate) fn new(max_tasks: usize) -> TaskStates<S> {
        let per_shard = NonZeroUsize::new(max_tasks.div_ceil(SHARDS)).unwrap_or(NonZeroUsize::MIN);
        TaskStates {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(LruCache::new(per_shard)))
                .collect(),
        }
    }

    fn shard(&self, task: &str) -> &Mutex<LruCache<String, S>> {
        // A fixed hash, so that which tasks are forgotten first does not
        // change from one process to the next.
        let mut hasher = std::hash::BuildHasherDefault::<Fnv>::default().build_hasher();
        hasher.write(task.as_bytes());
        let index = (hasher.finish() as usize) % self.shards.len();
        &self.shards[index]
    }

    /// Runs `f` on the task's state, made by `make` if the task is new.
    pub(crate) fn with<R>(
        &self,
        task: &str,
        make: impl FnOnce() -> S,
        f: impl FnOnce(&mut S) -> R,
    ) -> R {
        let mut shard = self.shard(task).lock();
        f(shard.get_or_insert_mut_ref(task, make))
    }

    /// Forgets a task.
    pub(crate) fn remove(&self, task: &str) {
        self.shard(task).lock().pop(task);
    }

    /// How many tasks are remembered.
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|shard| shard.lock().len()).sum()
    }
}

/// FNV-1a, 64 bits: small, fixed, good enough to spread task ids.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_history_matches_equal_normalized_text_only() -> Result<()> {
        let mut history: History<u64> = Matcher::Exact.history(2);
        let text = |t: &str| Probe::Text(normalize_topic(t));
        history.push(1, &text("Fix the parser"))?;
        history.push(2, &text("fix THE parser!"))?;
        assert_eq!(
            history.best_above(&text("fix the parser"), 0.85)?,
            Some((2, 1.0))
        );
        assert_eq!(
            history.all_above(&text("fix the parser"), 0.85)?,
            vec![(1, 1.0), (2, 1.0)]
        );
        assert_eq!(history.best_above(&text("fix the lexer"), 0.85)?, None);
        // A threshold of 1 is never exceeded, not even by equal text.
        assert_eq!(history.best_above(&text("fix the parser"), 1.0)?, None);
        assert!(history.all_above(&text("fix the parser"), 1.0)?.is_empty());
        // Full: the oldest goes.
        history.push(3, &text("other"))?;
        assert_eq!(
            history.all_above(&text("fix the parser"), 0.5)?,
            vec![(2, 1.0)]
        );
        Ok(())
    }

    #[test]
    fn task_states_are_bounded_and_forgettable() {
        let states: TaskStates<u32> = TaskStates::new(SHARDS);
        for n in 0..200 {
            states.with(&format!("task {n}"), || 0, |count| *count += 1);
        }
        assert!(states.len() <= SHARDS, "{}", states.len());
        states.with("kept", || 0, |count| *count += 5);
        assert_eq!(states.with("kept", || 0, |count| *count), 5);
        states.remove("kept");
        assert_eq!(states.with("kept", || 0, |count| *count), 0);
    }
}
