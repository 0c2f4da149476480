//! What the semantic detectors remember: texts as vectors (or as normalized
//! text when semantic matching is off), per task, bounded; and the form a
//! durable store keeps it in (texts, never vectors: they are embedded again
//! on import).

use std::collections::VecDeque;
use std::hash::{BuildHasher, Hasher};
use std::num::NonZeroUsize;
use std::sync::Arc;

use loopguard_core_types::truncate_to_char_boundary;
use loopguard_detectors::normalize_topic;
use loopguard_host::ExtensionError;
use lru::LruCache;
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::STATE_FORMAT;
use crate::error::Result;
use crate::service::{Embedding, EmbeddingService};
use crate::similarity::SimilarityIndex;

/// How texts are compared: cosine of embeddings, or exact normalized text.
/// Either way, at most `max_text_bytes` of a text is kept
/// (`limits.max_text_bytes`).
#[derive(Debug, Clone)]
pub(crate) enum Matcher {
    /// Embeddings from the model; similarity is their cosine.
    Semantic {
        service: Arc<EmbeddingService>,
        max_text_bytes: usize,
    },
    /// `semantic.enabled = false`: similarity is 1 for equal normalized
    /// texts and 0 otherwise.
    Exact { max_text_bytes: usize },
}

/// A text ready to be compared.
#[derive(Debug, Clone)]
pub(crate) enum Probe {
    /// Its unit vector, and the text it is the vector of (what an export
    /// keeps), cut to the limit.
    Vector { vector: Embedding, text: Kept },
    /// Its normalized form (never empty), cut to the limit with the hash
    /// of the whole (see [`exact_key`]).
    Text(String),
}

/// A text as a detector keeps it: at most `max_text_bytes` of it (cut on a
/// character boundary), and the length of the whole.
#[derive(Debug, Clone)]
pub(crate) struct Kept {
    /// The text, cut.
    pub(crate) text: Arc<str>,
    /// The whole text's length in bytes.
    pub(crate) len: usize,
}

impl Kept {
    /// `text`, cut to `max_bytes`.
    pub(crate) fn new(text: &str, max_bytes: usize) -> Kept {
        Kept {
            text: Arc::from(truncate_to_char_boundary(text, max_bytes)),
            len: text.len(),
        }
    }

    /// The whole text's length, when it was cut (what a saved row notes).
    fn cut_len(&self) -> Option<u64> {
        (self.len > self.text.len()).then_some(self.len as u64)
    }
}

/// Bytes an [`exact_key`] gives the hash of the whole text: a space and 16
/// hex digits.
const HASH_SUFFIX_BYTES: usize = 17;

/// What the exact matcher compares and keeps of a normalized text: the
/// text itself when it is at most `max_bytes` long; otherwise its first
/// `max_bytes - 17` bytes, a space and the 64-bit FNV-1a hash of the whole
/// in hex. Two texts that differ past the limit keep different keys, the
/// key is at most `max_bytes` long, and it is normalized text itself
/// (lowercase words and single spaces), so a saved key normalized again on
/// import is the same key.
pub(crate) fn exact_key(normalized: String, max_bytes: usize) -> String {
    if normalized.len() <= max_bytes {
        return normalized;
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in normalized.bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    let prefix =
        truncate_to_char_boundary(&normalized, max_bytes.saturating_sub(HASH_SUFFIX_BYTES))
            .trim_end();
    format!("{prefix} {hash:016x}")
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
            Matcher::Semantic {
                service,
                max_text_bytes,
            } => Ok(Some(Probe::Vector {
                vector: service.embed(text).await?,
                text: Kept::new(text, *max_text_bytes),
            })),
            Matcher::Exact { max_text_bytes } => {
                Ok(Some(Probe::Text(exact_key(normalized, *max_text_bytes))))
            }
        }
    }

    /// The probes of `texts`, in order, as [`Matcher::probe`] makes them,
    /// with every embedding asked for in one
    /// [`EmbeddingService::embed_many`] call (what an import does: at most
    /// one inference per text the cache does not hold).
    pub(crate) async fn probes(&self, texts: &[&str]) -> Result<Vec<Option<Probe>>> {
        let normalized: Vec<String> = texts.iter().map(|text| normalize_topic(text)).collect();
        let (service, max_text_bytes) = match self {
            Matcher::Semantic {
                service,
                max_text_bytes,
            } => (service, *max_text_bytes),
            Matcher::Exact { max_text_bytes } => {
                return Ok(normalized
                    .into_iter()
                    .map(|text| {
                        (!text.is_empty()).then(|| Probe::Text(exact_key(text, *max_text_bytes)))
                    })
                    .collect());
            }
        };
        let worded: Vec<&str> = texts
            .iter()
            .zip(&normalized)
            .filter(|(_, normalized)| !normalized.is_empty())
            .map(|(text, _)| *text)
            .collect();
        let mut vectors = service.embed_many(&worded).await?.into_iter();
        Ok(texts
            .iter()
            .zip(&normalized)
            .map(|(text, normalized)| {
                if normalized.is_empty() {
                    return None;
                }
                vectors.next().map(|vector| Probe::Vector {
                    vector,
                    text: Kept::new(text, max_text_bytes),
                })
            })
            .collect())
    }

    /// A history of this matcher's probes, keeping the last `capacity`.
    pub(crate) fn history<K: Clone>(&self, capacity: usize) -> History<K> {
        match self {
            Matcher::Semantic { service, .. } => History::Vectors {
                index: SimilarityIndex::new(service.dimension(), capacity),
                texts: VecDeque::new(),
            },
            Matcher::Exact { .. } => History::Texts {
                rows: VecDeque::new(),
                capacity,
            },
        }
    }

    /// The embedding service, when texts are compared by embeddings.
    pub(crate) fn service(&self) -> Option<&Arc<EmbeddingService>> {
        match self {
            Matcher::Semantic { service, .. } => Some(service),
            Matcher::Exact { .. } => None,
        }
    }

    /// Whether texts are compared by embeddings.
    pub(crate) fn is_semantic(&self) -> bool {
        matches!(self, Matcher::Semantic { .. })
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
    /// Vectors, searched by cosine; and the same entries' keys and texts,
    /// oldest first (the index keeps no texts and no order one can read,
    /// and an export needs both).
    Vectors {
        index: SimilarityIndex<K>,
        texts: VecDeque<(K, Kept)>,
    },
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
            (History::Vectors { index, .. }, Probe::Vector { vector, .. }) => Ok(index
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
            (History::Vectors { index, .. }, Probe::Vector { vector, .. }) => Ok(index
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

    /// Every entry strictly above `floor` with its kept text, oldest first
    /// (histories of vectors only: the same-request judge needs the texts
    /// and their embeddings).
    pub(crate) fn all_above_with_texts(
        &self,
        probe: &Probe,
        floor: f32,
    ) -> Result<Vec<(K, f32, Arc<str>)>>
    where
        K: PartialEq,
    {
        let History::Vectors { texts, .. } = self else {
            return Ok(Vec::new());
        };
        Ok(self
            .all_above(probe, floor)?
            .into_iter()
            .filter_map(|(key, cosine)| {
                texts
                    .iter()
                    .find(|(kept, _)| *kept == key)
                    .map(|(_, text)| (key, cosine, Arc::clone(&text.text)))
            })
            .collect())
    }

    /// Remembers `probe` under `key`, forgetting the oldest entry when full.
    pub(crate) fn push(&mut self, key: K, probe: &Probe) -> Result<()> {
        match (self, probe) {
            (History::Vectors { index, texts }, Probe::Vector { vector, text }) => {
                index.push(key.clone(), vector)?;
                if index.capacity() == 0 {
                    return Ok(());
                }
                if texts.len() == index.capacity() {
                    texts.pop_front();
                }
                texts.push_back((key, text.clone()));
                Ok(())
            }
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

impl<K: RowKey> History<K> {
    /// Its entries as a durable store keeps them, oldest first: each key
    /// with its text (the original text when semantic, the normalized text
    /// otherwise: what the history compares).
    pub(crate) fn save(&self) -> Vec<SavedRow> {
        match self {
            History::Vectors { texts, .. } => texts
                .iter()
                .map(|(key, text)| SavedRow {
                    len: text.cut_len(),
                    ..key.save(&text.text)
                })
                .collect(),
            History::Texts { rows, .. } => rows.iter().map(|(text, key)| key.save(text)).collect(),
        }
    }

    /// Pushes `rows` (oldest first), each with its probe from `probes`.
    pub(crate) fn restore(
        &mut self,
        rows: &[SavedRow],
        probes: &mut impl Iterator<Item = Probe>,
    ) -> Result<()> {
        for (row, probe) in rows.iter().zip(probes) {
            self.push(K::restore(row), &probe)?;
        }
        Ok(())
    }
}

/// An event remembered by its input line and its id, to be cited as
/// evidence.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Seen {
    pub(crate) line: u64,
    pub(crate) id: Option<Arc<str>>,
}

/// A history's key, as a durable store keeps it.
pub(crate) trait RowKey: Clone {
    /// The key with its entry's text.
    fn save(&self, text: &str) -> SavedRow;
    /// The key back from a saved row.
    fn restore(row: &SavedRow) -> Self;
}

impl RowKey for Seen {
    fn save(&self, text: &str) -> SavedRow {
        SavedRow {
            line: self.line,
            id: self.id.as_deref().map(str::to_owned),
            text: text.to_owned(),
            len: None,
        }
    }

    fn restore(row: &SavedRow) -> Seen {
        Seen {
            line: row.line,
            id: row.id.as_deref().map(Arc::from),
        }
    }
}

/// A line alone (a topic's members).
impl RowKey for u64 {
    fn save(&self, text: &str) -> SavedRow {
        SavedRow {
            line: *self,
            id: None,
            text: text.to_owned(),
            len: None,
        }
    }

    fn restore(row: &SavedRow) -> u64 {
        row.line
    }
}

/// One remembered text as a durable store keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SavedRow {
    /// The input line of the event it came from.
    pub(crate) line: u64,
    /// That event's id, if it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) id: Option<String>,
    /// The text: as the event gave it with semantic matching, normalized
    /// without (either way, what the detector compares once embedded or
    /// normalized again). At most `limits.max_text_bytes` long: a longer
    /// text is kept cut (see `len`), a longer normalized text as its
    /// [`exact_key`].
    pub(crate) text: String,
    /// The whole text's length in bytes, when `text` is a cut of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) len: Option<u64>,
}

/// The last `keep` items of `items`: what a bounded window holding at most
/// `keep` would have kept of them, so that an import never embeds more
/// than the detector's windows hold, whatever the saved state says.
pub(crate) fn newest<T>(items: &[T], keep: usize) -> &[T] {
    &items[items.len().saturating_sub(keep)..]
}

/// The probes of every saved row, in order, from one batched call:
/// `rows` of every history of a task, flattened.
pub(crate) async fn restore_probes(
    matcher: &Matcher,
    rows: &[&SavedRow],
) -> std::result::Result<Vec<Probe>, String> {
    let texts: Vec<&str> = rows.iter().map(|row| row.text.as_str()).collect();
    let probes = matcher
        .probes(&texts)
        .await
        .map_err(|err| format!("its texts cannot be embedded again ({err})"))?;
    rows.iter()
        .zip(probes)
        .map(|(row, probe)| {
            let mut probe =
                probe.ok_or_else(|| format!("line {}'s text has no words", row.line))?;
            // A text saved cut keeps the length of the whole it was cut from.
            if let (Probe::Vector { text, .. }, Some(len)) = (&mut probe, row.len) {
                text.len = text.len.max(usize::try_from(len).unwrap_or(usize::MAX));
            }
            Ok(probe)
        })
        .collect()
}

/// Each of the newest `groups_kept` of `groups` (a task's pairs,
/// recipients, topics or arguments, least recently used first) with its
/// newest `rows_kept` saved rows (`rows_of`) put back in a history of its
/// own: only what the windows can hold is embedded, in one batched call
/// (none for texts the service has cached). An error names `detector` and
/// `task`.
pub(crate) async fn restore_histories<'g, G, K: RowKey>(
    matcher: &Matcher,
    groups: &'g [G],
    rows_of: impl Fn(&G) -> &[SavedRow],
    (groups_kept, rows_kept): (usize, usize),
    (detector, task): (&str, &str),
) -> std::result::Result<Vec<(&'g G, History<K>)>, ExtensionError> {
    let groups = newest(groups, groups_kept.max(1));
    let rows: Vec<&SavedRow> = groups
        .iter()
        .flat_map(|group| newest(rows_of(group), rows_kept))
        .collect();
    let mut probes = restore_probes(matcher, &rows)
        .await
        .map_err(|problem| import_error(detector, task, &problem))?
        .into_iter();
    let mut restored = Vec::with_capacity(groups.len());
    for group in groups {
        let mut history = matcher.history(rows_kept);
        history
            .restore(newest(rows_of(group), rows_kept), &mut probes)
            .map_err(|err| import_error(detector, task, &err.to_string()))?;
        restored.push((group, history));
    }
    Ok(restored)
}

/// Reads a saved state of `detector`: a JSON object whose `format` is
/// [`STATE_FORMAT`], then the rest as `T`. The error names the detector,
/// the task and what is wrong.
pub(crate) fn parse_saved<T: DeserializeOwned>(
    detector: &str,
    task: &str,
    state: serde_json::Value,
) -> std::result::Result<T, ExtensionError> {
    let format = match state.get("format") {
        Some(format) => format.as_u64().ok_or_else(|| {
            import_error(
                detector,
                task,
                &format!("has a \"format\" that is not a version number: {format}"),
            )
        })?,
        None if state.is_object() => {
            return Err(import_error(detector, task, "has no \"format\""));
        }
        None => {
            return Err(import_error(
                detector,
                task,
                &format!("is not a JSON object: {}", brief(&state)),
            ));
        }
    };
    if format != u64::from(STATE_FORMAT) {
        return Err(import_error(
            detector,
            task,
            &format!("has format {format}, and this loopguard reads format {STATE_FORMAT}"),
        ));
    }
    serde_json::from_value(state)
        .map_err(|err| import_error(detector, task, &format!("is malformed: {err}")))
}

/// "`detector`: task `task`'s saved state `problem`; the task starts
/// afresh".
pub(crate) fn import_error(detector: &str, task: &str, problem: &str) -> ExtensionError {
    ExtensionError(format!(
        "{detector}: task '{task}'s saved state {problem}; the task starts afresh"
    ))
}

/// At most 80 characters of `value`'s JSON, for an error message.
fn brief(value: &serde_json::Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
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

    /// Runs `f` on the task's state if it is remembered, without marking
    /// the task as used (an export must not change which task is forgotten
    /// first).
    pub(crate) fn peek<R>(&self, task: &str, f: impl FnOnce(&S) -> R) -> Option<R> {
        self.shard(task).lock().peek(task).map(f)
    }

    /// Puts `state` in the place of the task's (an import).
    pub(crate) fn insert(&self, task: &str, state: S) {
        self.shard(task).lock().put(task.to_owned(), state);
    }

    /// Forgets a task.
    pub(crate) fn remove(&self, task: &str) {
        self.shard(task).lock().pop(task);
    }

    /// What an import gave, the task forgotten first when it failed: a
    /// state that cannot be read starts the task afresh, never half
    /// restored.
    pub(crate) fn forget_on_error<E>(&self, task: &str, restored: Result<(), E>) -> Result<(), E> {
        if restored.is_err() {
            self.remove(task);
        }
        restored
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
    fn exact_keys_are_bounded_normalized_and_keep_texts_apart() {
        let base = "word ".repeat(100);
        let (one, two) = (
            normalize_topic(&format!("{base} one")),
            normalize_topic(&format!("{base} two")),
        );
        let (key_one, key_two) = (exact_key(one.clone(), 64), exact_key(two, 64));
        assert_ne!(key_one, key_two);
        assert!(key_one.len() <= 64, "{key_one}");
        assert_eq!(normalize_topic(&key_one), key_one);
        assert_eq!(exact_key(one, 64), key_one);
        assert_eq!(exact_key("short text".into(), 64), "short text");
    }

    #[test]
    fn exact_history_matches_equal_normalized_text_only() -> Result<()> {
        let mut history: History<u64> = Matcher::Exact {
            max_text_bytes: 8192,
        }
        .history(2);
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
