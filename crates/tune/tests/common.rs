//! Toy embedders with exactly known cosines, and a counting wrapper.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use loopguard_semantic::{Embedder, SemanticError};
use loopguard_tune::PairSet;

/// A file under the workspace's `data/pairs/`.
pub(crate) fn shipped_pairs(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../data/pairs")
        .join(name)
}

/// The unit vector at cosine `c` from `[1, 0]`: its cosine with
/// [`BASE`]'s vector is `c` exactly in `f32` (`c × 1 + s × 0`).
pub(crate) fn at_cosine(c: f32) -> Vec<f32> {
    vec![c, (1.0 - c * c).sqrt()]
}

/// The text whose vector is `[1, 0]`.
pub(crate) const BASE: &str = "base";

/// Texts named by their cosine with [`BASE`]: `"cos 0.85"` is
/// [`at_cosine`]`(0.85)`, `"base"` is `[1, 0]`; any other text is an
/// error.
#[derive(Debug, Default)]
pub(crate) struct Toy {
    extra: HashMap<String, Vec<f32>>,
}

impl Toy {
    /// The toy, knowing `extra` texts too.
    pub(crate) fn with(extra: &[(&str, Vec<f32>)]) -> Toy {
        Toy {
            extra: extra
                .iter()
                .map(|(text, v)| ((*text).to_owned(), v.clone()))
                .collect(),
        }
    }

    fn vector(&self, text: &str) -> Option<Vec<f32>> {
        if text == BASE {
            return Some(vec![1.0, 0.0]);
        }
        if let Some(v) = self.extra.get(text) {
            return Some(v.clone());
        }
        let c: f32 = text.strip_prefix("cos ")?.split(' ').next()?.parse().ok()?;
        Some(at_cosine(c))
    }
}

impl Embedder for Toy {
    fn model_id(&self) -> &str {
        "toy-2d"
    }

    fn dimension(&self) -> usize {
        2
    }

    fn embed_batch(&self, texts: &[&str]) -> loopguard_semantic::Result<Vec<Vec<f32>>> {
        texts
            .iter()
            .map(|text| {
                self.vector(text)
                    .ok_or_else(|| SemanticError::BadEmbedding {
                        model: "toy-2d".into(),
                        detail: format!("unknown text {text:?}"),
                    })
            })
            .collect()
    }
}

/// Counts what goes through an embedder: texts and calls.
#[derive(Debug, Default)]
pub(crate) struct Counting<E> {
    pub(crate) inner: E,
    texts: AtomicUsize,
    calls: AtomicUsize,
}

impl<E> Counting<E> {
    pub(crate) fn new(inner: E) -> Self {
        Self {
            inner,
            texts: AtomicUsize::new(0),
            calls: AtomicUsize::new(0),
        }
    }

    /// Texts embedded so far: the inferences.
    pub(crate) fn texts(&self) -> usize {
        self.texts.load(Ordering::SeqCst)
    }

    /// Calls of `embed_batch` so far.
    pub(crate) fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl<E: Embedder> Embedder for Counting<E> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    fn embed_batch(&self, texts: &[&str]) -> loopguard_semantic::Result<Vec<Vec<f32>>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        self.inner.embed_batch(texts)
    }
}

/// A pair line: `BASE` against the text at cosine `c`.
pub(crate) fn pair(c: f32, same: bool, split: &str) -> String {
    format!(r#"{{"a": "{BASE}", "b": "cos {c}", "same": {same}, "split": "{split}"}}"#)
}

/// Parses pair lines.
pub(crate) fn pairs(lines: &[String]) -> PairSet {
    let text = lines.join("\n");
    PairSet::parse(text.as_bytes(), Path::new("pairs.jsonl")).expect("in-memory pairs parse")
}
