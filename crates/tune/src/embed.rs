//! Embedding every distinct text once: from the disk cache when it has
//! them, in batches through the model otherwise.

use std::collections::{HashMap, HashSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use loopguard_semantic::{Embedder, SemanticError, cosine};
use serde::Serialize;

use crate::cache::{EmbeddingCache, Key};
use crate::error::Result;

/// Texts per model call (what the embedding service batches too).
pub const DEFAULT_BATCH: usize = 64;

/// What embedding the texts of a sweep took.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct EmbedStats {
    /// Distinct texts.
    pub texts: usize,
    /// Of those, found in the disk cache.
    pub cached: usize,
    /// Of those, run through the model: the inferences.
    pub embedded: usize,
    /// Model calls.
    pub batches: usize,
    /// Problems with the disk cache (damaged, unwritable): reported once
    /// each, never fatal.
    pub cache_warnings: Vec<String>,
}

/// The unit vector of every text of a sweep, by text.
#[derive(Debug, Clone, Default)]
pub struct Vectors {
    model_id: String,
    dimension: usize,
    by_text: HashMap<String, Arc<[f32]>>,
}

impl Vectors {
    /// The model that made them.
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// Their length.
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// How many texts have a vector.
    pub fn len(&self) -> usize {
        self.by_text.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_text.is_empty()
    }

    /// The vector of `text`, if it was embedded.
    pub fn get(&self, text: &str) -> Option<&Arc<[f32]>> {
        self.by_text.get(text)
    }

    /// The cosine of two embedded texts, clamped to [-1, 1] as the
    /// detectors clamp it; `None` when either was not embedded.
    pub fn cosine(&self, a: &str, b: &str) -> Option<f32> {
        let (a, b) = (self.get(a)?, self.get(b)?);
        cosine(a, b).ok().map(|c| c.clamp(-1.0, 1.0))
    }
}

/// How [`embed_texts`] goes about it.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct EmbedOptions {
    /// Texts per model call (default [`DEFAULT_BATCH`]).
    pub batch: Option<usize>,
    /// Where vectors are kept between runs; `None` keeps none.
    pub cache: Option<EmbeddingCache>,
}

impl EmbedOptions {
    /// Batches of [`DEFAULT_BATCH`], no disk cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps vectors in `cache`.
    #[must_use]
    pub fn cache(mut self, cache: EmbeddingCache) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Sets the texts per model call (at least 1).
    #[must_use]
    pub fn batch(mut self, batch: usize) -> Self {
        self.batch = Some(batch.max(1));
        self
    }
}

/// Embeds every distinct text of `texts` once: the ones the disk cache
/// holds are read from it, the others go through `embedder` in batches and
/// are added to the cache. `progress(done, total)` is called with the
/// texts embedded so far out of those the model has to embed (first with
/// `done = 0`, then after each batch).
///
/// The cache never fails a run: a damaged or unwritable cache is reported
/// in [`EmbedStats::cache_warnings`] and the texts are embedded anyway.
pub fn embed_texts<'a>(
    embedder: &dyn Embedder,
    texts: impl IntoIterator<Item = &'a str>,
    options: &EmbedOptions,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(Vectors, EmbedStats)> {
    let model_id = embedder.model_id().to_owned();
    let dimension = embedder.dimension();
    let mut seen = HashSet::new();
    let distinct: Vec<&str> = texts.into_iter().filter(|t| seen.insert(*t)).collect();
    let mut stats = EmbedStats {
        texts: distinct.len(),
        ..EmbedStats::default()
    };
    let mut by_text: HashMap<String, Arc<[f32]>> = HashMap::with_capacity(distinct.len());

    let keys: Vec<Key> = distinct
        .iter()
        .map(|text| EmbeddingCache::key(&model_id, dimension, text))
        .collect();
    // One warning per run: a cache that cannot be read is not written.
    let mut cache_failed = false;
    if let Some(cache) = &options.cache {
        let wanted: HashSet<Key> = keys.iter().copied().collect();
        let loaded = cache.load(&model_id, dimension, &wanted);
        stats.cache_warnings.extend(loaded.warning);
        cache_failed = loaded.unreadable;
        for (text, key) in distinct.iter().zip(&keys) {
            if let Some(vector) = loaded.vectors.get(key)
                && usable(vector)
            {
                by_text.insert((*text).to_owned(), Arc::from(vector.as_slice()));
            }
        }
        stats.cached = by_text.len();
    }

    let todo: Vec<(&str, Key)> = distinct
        .iter()
        .zip(&keys)
        .filter(|(text, _)| !by_text.contains_key(**text))
        .map(|(text, key)| (*text, *key))
        .collect();
    let batch = options.batch.unwrap_or(DEFAULT_BATCH).max(1);
    progress(0, todo.len());
    for chunk in todo.chunks(batch) {
        let texts: Vec<&str> = chunk.iter().map(|(text, _)| *text).collect();
        let vectors = embed_chunk(embedder, &texts)?;
        stats.batches += 1;
        stats.embedded += texts.len();
        if let Some(cache) = options.cache.as_ref().filter(|_| !cache_failed) {
            let entries: Vec<(Key, &[f32])> = chunk
                .iter()
                .zip(&vectors)
                .map(|((_, key), vector)| (*key, vector.as_slice()))
                .collect();
            if let Err(err) = cache.append(&model_id, dimension, &entries) {
                stats
                    .cache_warnings
                    .push(format!("{err}; the embeddings of this run are not cached"));
                cache_failed = true;
            }
        }
        for (text, vector) in texts.iter().zip(vectors) {
            by_text.insert((*text).to_owned(), Arc::from(vector));
        }
        progress(stats.embedded, todo.len());
    }
    Ok((
        Vectors {
            model_id,
            dimension,
            by_text,
        },
        stats,
    ))
}

/// A cached vector is used only if it is finite and of unit length (a
/// record can pass its check and still be another writer's garbage).
fn usable(vector: &[f32]) -> bool {
    let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    vector.iter().all(|x| x.is_finite()) && (norm - 1.0).abs() < 1e-3
}

/// One model call, checked like the embedding service checks it: one
/// finite vector of the right length per text, normalized if it is not.
fn embed_chunk(embedder: &dyn Embedder, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
    let model = || embedder.model_id().to_owned();
    let vectors =
        catch_unwind(AssertUnwindSafe(|| embedder.embed_batch(texts))).map_err(|_| {
            SemanticError::BadEmbedding {
                model: model(),
                detail: "the embedder panicked".into(),
            }
        })??;
    if vectors.len() != texts.len() {
        return Err(SemanticError::BadEmbedding {
            model: model(),
            detail: format!("{} vectors for {} texts", vectors.len(), texts.len()),
        }
        .into());
    }
    let dimension = embedder.dimension();
    vectors
        .into_iter()
        .map(|mut v| {
            if v.len() != dimension {
                return Err(SemanticError::DimensionMismatch {
                    expected: dimension,
                    actual: v.len(),
                }
                .into());
            }
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            if !norm.is_finite() || norm == 0.0 {
                return Err(SemanticError::BadEmbedding {
                    model: model(),
                    detail: format!("a vector of length {norm} cannot be normalized"),
                }
                .into());
            }
            // As the service does: fix only a vector that is not unit
            // length, so no vector is scaled twice.
            if (norm - 1.0).abs() > 1e-4 {
                v.iter_mut().for_each(|x| *x /= norm);
            }
            Ok(v)
        })
        .collect()
}

/// An embedder answering from vectors made beforehand, falling back to the
/// model for a text it was not given (counted): the engines of a trace
/// sweep share it, so each text is embedded once for the whole sweep.
pub(crate) struct Prepared {
    pub(crate) vectors: Vectors,
    pub(crate) fallback: Arc<dyn Embedder>,
    pub(crate) misses: std::sync::atomic::AtomicUsize,
}

impl Embedder for Prepared {
    fn model_id(&self) -> &str {
        &self.vectors.model_id
    }

    fn dimension(&self) -> usize {
        self.vectors.dimension
    }

    fn embed_batch(&self, texts: &[&str]) -> loopguard_semantic::Result<Vec<Vec<f32>>> {
        let mut out = Vec::with_capacity(texts.len());
        for text in texts {
            match self.vectors.get(text) {
                Some(v) => out.push(v.to_vec()),
                None => {
                    self.misses
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let mut v = self.fallback.embed_batch(&[text])?;
                    out.push(v.pop().ok_or_else(|| SemanticError::BadEmbedding {
                        model: self.fallback.model_id().to_owned(),
                        detail: "no vector came back".into(),
                    })?);
                }
            }
        }
        Ok(out)
    }
}
