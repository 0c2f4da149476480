//! An async front for any [`Embedder`]: an LRU cache by text, and one worker
//! thread that batches what concurrent callers ask for.

use std::collections::{HashMap, HashSet};
use std::num::NonZeroUsize;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

use lru::LruCache;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::embedder::Embedder;
use crate::error::{Result, SemanticError};
use crate::similarity::l2_norm;

/// What the model is given of `text`: its first [`EMBEDDING_INPUT_BYTES`]
/// bytes, cut on a character boundary, before it is tokenized.
///
/// The model (all-MiniLM-L6-v2) reads 256 tokens and drops the rest;
/// tokenizing a text of megabytes to keep 256 tokens costs seconds. Ordinary
/// text takes 4 to 5 bytes a token, so 4096 bytes (16 a token) hold all the
/// model reads; only a text whose first 4096 bytes make fewer than 256
/// tokens (words of dozens of letters, each one token) loses words the
/// model would have read. A text longer than the bound embeds exactly like
/// its prefix, and is cached as it.
///
/// ```
/// use loopguard_semantic::{EMBEDDING_INPUT_BYTES, embedding_input};
/// let long = "é".repeat(EMBEDDING_INPUT_BYTES);
/// assert_eq!(embedding_input(&long).len(), EMBEDDING_INPUT_BYTES);
/// assert_eq!(embedding_input("short"), "short");
/// ```
pub fn embedding_input(text: &str) -> &str {
    loopguard_core_types::truncate_to_char_boundary(text, EMBEDDING_INPUT_BYTES)
}

/// Most bytes of a text the model is given (see [`embedding_input`]), the
/// least `limits.max_text_bytes`.
pub use loopguard_core_types::EMBEDDING_INPUT_BYTES;

/// A vector from the service: shared, immutable, unit length.
pub type Embedding = Arc<[f32]>;

/// How an [`EmbeddingService`] caches and batches.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServiceOptions {
    /// Texts whose vectors are kept (default 10,000: about 15 MB of vectors
    /// at 384 dimensions, plus the texts). 0 disables the cache.
    pub cache_capacity: usize,
    /// Most texts per model call (default 64).
    pub max_batch: usize,
}

impl Default for ServiceOptions {
    fn default() -> Self {
        Self {
            cache_capacity: 10_000,
            max_batch: 64,
        }
    }
}

impl ServiceOptions {
    /// The defaults: 10,000 cached texts, batches of up to 64.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets how many texts' vectors are cached.
    #[must_use]
    pub fn cache_capacity(mut self, capacity: usize) -> Self {
        self.cache_capacity = capacity;
        self
    }

    /// Sets the most texts per model call (at least 1).
    #[must_use]
    pub fn max_batch(mut self, max: usize) -> Self {
        self.max_batch = max.max(1);
        self
    }
}

/// Counters since the service started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServiceStats {
    /// Texts asked for, through [`EmbeddingService::embed`] or
    /// [`EmbeddingService::embed_many`].
    pub requests: u64,
    /// Of those, answered from the cache without queuing.
    pub cache_hits: u64,
    /// Texts sent to the worker (cache misses, before de-duplication).
    pub queued: u64,
    /// Calls to [`Embedder::embed_batch`]: the inferences run.
    pub batches: u64,
    /// Texts run through the model, over all batches.
    pub texts_embedded: u64,
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    cache_hits: AtomicU64,
    queued: AtomicU64,
    batches: AtomicU64,
    texts_embedded: AtomicU64,
}

struct Shared {
    embedder: Arc<dyn Embedder>,
    cache: Mutex<Option<LruCache<String, Embedding>>>,
    counters: Counters,
}

struct Job {
    texts: Vec<String>,
    reply: oneshot::Sender<Result<Vec<Embedding>>>,
}

/// Embeddings for async callers: cached by text, computed off the reactor,
/// batched across callers.
///
/// A text seen before costs a cache lookup. Texts that miss go on a queue;
/// one worker thread takes everything waiting (up to
/// [`ServiceOptions::max_batch`] texts), runs one model call for the lot and
/// answers every caller. So 32 tasks asking at once cost a couple of batched
/// calls, not 32 single ones, and the async runtime never blocks on the
/// model. Dropping the service stops the worker once the queue is empty.
pub struct EmbeddingService {
    shared: Arc<Shared>,
    queue: mpsc::Sender<Job>,
}

impl std::fmt::Debug for EmbeddingService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddingService")
            .field("model_id", &self.shared.embedder.model_id())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl EmbeddingService {
    /// Starts a service over `embedder` with the default options.
    pub fn new(embedder: Arc<dyn Embedder>) -> Result<Self> {
        Self::with_options(embedder, ServiceOptions::default())
    }

    /// Starts a service over `embedder`, spawning its worker thread.
    pub fn with_options(embedder: Arc<dyn Embedder>, options: ServiceOptions) -> Result<Self> {
        let cache = NonZeroUsize::new(options.cache_capacity).map(LruCache::new);
        let shared = Arc::new(Shared {
            embedder,
            cache: Mutex::new(cache),
            counters: Counters::default(),
        });
        let (queue, jobs) = mpsc::channel();
        let worker = Arc::clone(&shared);
        let max_batch = options.max_batch.max(1);
        std::thread::Builder::new()
            .name("loopguard-embed".into())
            .spawn(move || worker.run(&jobs, max_batch))
            .map_err(SemanticError::Worker)?;
        Ok(Self { shared, queue })
    }

    /// The model's id.
    pub fn model_id(&self) -> &str {
        self.shared.embedder.model_id()
    }

    /// The model's vector length.
    pub fn dimension(&self) -> usize {
        self.shared.embedder.dimension()
    }

    /// The counters so far.
    pub fn stats(&self) -> ServiceStats {
        let c = &self.shared.counters;
        ServiceStats {
            requests: c.requests.load(Ordering::Relaxed),
            cache_hits: c.cache_hits.load(Ordering::Relaxed),
            queued: c.queued.load(Ordering::Relaxed),
            batches: c.batches.load(Ordering::Relaxed),
            texts_embedded: c.texts_embedded.load(Ordering::Relaxed),
        }
    }

    /// The cached vector of `text`, if any, without computing it.
    pub fn cached(&self, text: &str) -> Option<Embedding> {
        let text = embedding_input(text);
        self.shared
            .cache
            .lock()
            .as_mut()
            .and_then(|c| c.get(text).cloned())
    }

    /// The unit vector of `text`: that of its first
    /// [`EMBEDDING_INPUT_BYTES`] ([`embedding_input`]).
    pub async fn embed(&self, text: &str) -> Result<Embedding> {
        let mut vectors = self.embed_many(&[text]).await?;
        vectors.pop().ok_or_else(|| SemanticError::BadEmbedding {
            model: self.model_id().to_string(),
            detail: "no vector came back".into(),
        })
    }

    /// The unit vectors of `texts`, in order, each that of its
    /// [`embedding_input`]. Misses go to the worker as one job, so they
    /// share batches.
    pub async fn embed_many(&self, texts: &[&str]) -> Result<Vec<Embedding>> {
        // Cut before anything else: the cache, the queue and the tokenizer
        // see at most `EMBEDDING_INPUT_BYTES` of a text, however long.
        let texts: Vec<&str> = texts.iter().map(|text| embedding_input(text)).collect();
        let texts = &texts[..];
        let counters = &self.shared.counters;
        counters
            .requests
            .fetch_add(texts.len() as u64, Ordering::Relaxed);
        let mut found: Vec<Option<Embedding>> = Vec::with_capacity(texts.len());
        let mut misses: Vec<String> = Vec::new();
        {
            let mut cache = self.shared.cache.lock();
            for text in texts {
                let hit = cache.as_mut().and_then(|c| c.get(*text).cloned());
                if hit.is_none() && !misses.iter().any(|m| m == text) {
                    misses.push((*text).to_string());
                }
                found.push(hit);
            }
        }
        let hits = found.iter().filter(|f| f.is_some()).count();
        counters
            .cache_hits
            .fetch_add(hits as u64, Ordering::Relaxed);
        if misses.is_empty() {
            return Ok(found.into_iter().flatten().collect());
        }

        counters
            .queued
            .fetch_add(misses.len() as u64, Ordering::Relaxed);
        let (reply, answer) = oneshot::channel();
        let job = Job {
            texts: misses.clone(),
            reply,
        };
        self.queue
            .send(job)
            .map_err(|_| SemanticError::ServiceStopped)?;
        let computed = answer.await.map_err(|_| SemanticError::ServiceStopped)??;
        let computed: HashMap<&str, &Embedding> = misses
            .iter()
            .map(String::as_str)
            .zip(computed.iter())
            .collect();
        texts
            .iter()
            .zip(found)
            .map(|(text, hit)| match hit {
                Some(v) => Ok(v),
                None => computed
                    .get(*text)
                    .map(|v| Arc::clone(v))
                    .ok_or(SemanticError::ServiceStopped),
            })
            .collect()
    }
}

impl Shared {
    /// The worker: take what is waiting, run it as batches, answer.
    fn run(&self, jobs: &mpsc::Receiver<Job>, max_batch: usize) {
        while let Ok(first) = jobs.recv() {
            let mut taken = first.texts.len();
            let mut batch = vec![first];
            while taken < max_batch {
                match jobs.try_recv() {
                    Ok(job) => {
                        taken += job.texts.len();
                        batch.push(job);
                    }
                    Err(_) => break,
                }
            }
            self.answer(batch, max_batch);
        }
    }

    fn answer(&self, jobs: Vec<Job>, max_batch: usize) {
        // Unique texts not cached by now (an earlier batch may have done them).
        let mut done: HashMap<String, Embedding> = HashMap::new();
        let mut todo: Vec<String> = Vec::new();
        {
            let mut seen = HashSet::new();
            let mut cache = self.cache.lock();
            for text in jobs.iter().flat_map(|j| j.texts.iter()) {
                if !seen.insert(text.as_str()) {
                    continue;
                }
                match cache.as_mut().and_then(|c| c.get(text.as_str()).cloned()) {
                    Some(v) => {
                        done.insert(text.clone(), v);
                    }
                    None => todo.push(text.clone()),
                }
            }
        }

        let mut failed: HashMap<String, Option<SemanticError>> = HashMap::new();
        for chunk in todo.chunks(max_batch) {
            let texts: Vec<&str> = chunk.iter().map(String::as_str).collect();
            match self.embed_chunk(&texts) {
                Ok(vectors) => {
                    done.extend(chunk.iter().cloned().zip(vectors));
                }
                Err(e) if chunk.len() == 1 => {
                    failed.insert(chunk[0].clone(), Some(e));
                }
                Err(_) => {
                    // One bad text must not fail its neighbours: retry alone.
                    for text in chunk {
                        match self.embed_chunk(&[text.as_str()]) {
                            Ok(mut v) => {
                                if let Some(v) = v.pop() {
                                    done.insert(text.clone(), v);
                                }
                            }
                            Err(e) => {
                                failed.insert(text.clone(), Some(e));
                            }
                        }
                    }
                }
            }
        }

        if let Some(cache) = self.cache.lock().as_mut() {
            for (text, v) in &done {
                cache.put(text.clone(), Arc::clone(v));
            }
        }

        for job in jobs {
            let result = job
                .texts
                .iter()
                .map(|text| match done.get(text) {
                    Some(v) => Ok(Arc::clone(v)),
                    None => Err(match failed.get_mut(text.as_str()) {
                        // The first caller gets the error itself, later ones a copy.
                        Some(slot @ Some(_)) => {
                            slot.take().unwrap_or(SemanticError::ServiceStopped)
                        }
                        _ => SemanticError::Inference {
                            model: self.embedder.model_id().to_string(),
                            texts: 1,
                            detail: "failed in a shared batch (see the first caller's error)"
                                .into(),
                        },
                    }),
                })
                .collect();
            // A caller that stopped waiting is not an error.
            let _ = job.reply.send(result);
        }
    }

    /// One model call, with its result checked and normalized.
    fn embed_chunk(&self, texts: &[&str]) -> Result<Vec<Embedding>> {
        let model = || self.embedder.model_id().to_string();
        self.counters.batches.fetch_add(1, Ordering::Relaxed);
        self.counters
            .texts_embedded
            .fetch_add(texts.len() as u64, Ordering::Relaxed);
        let vectors = catch_unwind(AssertUnwindSafe(|| self.embedder.embed_batch(texts)))
            .map_err(|_| SemanticError::BadEmbedding {
                model: model(),
                detail: "the embedder panicked".into(),
            })??;
        if vectors.len() != texts.len() {
            return Err(SemanticError::BadEmbedding {
                model: model(),
                detail: format!("{} vectors for {} texts", vectors.len(), texts.len()),
            });
        }
        let dimension = self.embedder.dimension();
        vectors
            .into_iter()
            .map(|mut v| {
                if v.len() != dimension {
                    return Err(SemanticError::DimensionMismatch {
                        expected: dimension,
                        actual: v.len(),
                    });
                }
                let norm = l2_norm(&v);
                if !norm.is_finite() || norm == 0.0 {
                    return Err(SemanticError::BadEmbedding {
                        model: model(),
                        detail: format!("a vector of length {norm} cannot be normalized"),
                    });
                }
                // Embedders normalize already (fastembed does); only fix
                // one that does not, so no vector is scaled twice.
                if (norm - 1.0).abs() > 1e-4 {
                    v.iter_mut().for_each(|x| *x /= norm);
                }
                Ok(Embedding::from(v))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "engine")]
    #[test]
    fn the_model_reads_no_more_than_the_least_text_limit() {
        assert_eq!(
            EMBEDDING_INPUT_BYTES,
            loopguard_core_types::EMBEDDING_INPUT_BYTES
        );
    }

    #[test]
    fn shareable_across_tasks() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<EmbeddingService>();
        send_sync::<crate::SimilarityIndex<u64>>();
        #[cfg(feature = "fastembed")]
        send_sync::<crate::FastEmbedder>();
    }
}
