//! The embedders a sweep can use, by name.

use std::sync::{Arc, OnceLock};

use loopguard_semantic::{
    Embedder, FastEmbedder, FastEmbedderOptions, FetchPlan, MINILM_DIMENSION, MINILM_MODEL_ID,
    MPNET_TUNED_MODEL_ID, ModelFiles, MpnetBase, ProvisionOptions, SemanticError, TUNED_MODEL_ID,
};

/// all-mpnet-base-v2's vector length.
const MPNET_DIMENSION: usize = 768;

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
    /// `crates/semantic/models/tuned-encoder/`): the calibrated judge's
    /// `tuned_cosine`.
    TunedMiniLm,
    /// The larger encoder tuned for "the same request?"
    /// (`FastEmbedder::tuned_mpnet`: all-mpnet-base-v2, fetched from PyPI,
    /// with the low-rank update in `models/tuned-encoder/mpnet-lora16/`).
    TunedMpnet,
}

impl EmbedderChoice {
    /// Every choice.
    pub const ALL: [EmbedderChoice; 4] = [
        EmbedderChoice::MiniLm,
        EmbedderChoice::Lexical,
        EmbedderChoice::TunedMiniLm,
        EmbedderChoice::TunedMpnet,
    ];

    /// The name it is chosen by: `minilm`, `lexical`.
    pub fn name(self) -> &'static str {
        match self {
            EmbedderChoice::MiniLm => "minilm",
            EmbedderChoice::Lexical => "lexical",
            EmbedderChoice::TunedMiniLm => "tuned-minilm",
            EmbedderChoice::TunedMpnet => "tuned-mpnet",
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
            EmbedderChoice::TunedMpnet => {
                "all-mpnet-base-v2 with a low-rank update tuned for \"the same request?\": the \
                 calibrated judge's tuned_cosine with tuned_encoder = \"mpnet\""
            }
        }
    }

    /// Whether its vectors are worth keeping on disk: a model's are, while
    /// the lexical baseline is faster to compute than to read back.
    pub fn caches(self) -> bool {
        match self {
            EmbedderChoice::MiniLm | EmbedderChoice::TunedMiniLm | EmbedderChoice::TunedMpnet => {
                true
            }
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
        let lazy = |model| {
            Arc::new(LazyModel {
                provision: provision.clone(),
                before_fetch,
                loaded: OnceLock::new(),
                model,
            })
        };
        match self {
            EmbedderChoice::MiniLm => lazy(Model::MiniLm),
            EmbedderChoice::TunedMiniLm => lazy(Model::TunedMiniLm),
            EmbedderChoice::TunedMpnet => lazy(Model::TunedMpnet),
            EmbedderChoice::Lexical => Arc::new(LexicalEmbedder::new()),
        }
    }
}

/// Which model a [`LazyModel`] loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Model {
    /// The pinned all-MiniLM-L6-v2.
    MiniLm,
    /// Its tuned copy.
    TunedMiniLm,
    /// The larger tuned encoder.
    TunedMpnet,
}

/// A model, provisioned and loaded on the first inference.
struct LazyModel {
    provision: ProvisionOptions,
    before_fetch: fn(&FetchPlan),
    loaded: OnceLock<FastEmbedder>,
    model: Model,
}

impl LazyModel {
    fn model(&self) -> loopguard_semantic::Result<&FastEmbedder> {
        if let Some(model) = self.loaded.get() {
            return Ok(model);
        }
        let resolved = self.provision.resolve();
        let files = ModelFiles::ensure_resolved_notify(&resolved, self.before_fetch)?;
        let options = FastEmbedderOptions::default();
        let model = match self.model {
            Model::MiniLm => FastEmbedder::new(&files)?,
            Model::TunedMiniLm => FastEmbedder::tuned(&files, &options)?,
            Model::TunedMpnet => {
                let base = MpnetBase::ensure_resolved_notify(&resolved, self.before_fetch)?;
                FastEmbedder::tuned_mpnet(&files, &base, &options)?
            }
        };
        if model.dimension() != self.dimension() {
            return Err(SemanticError::BadEmbedding {
                model: self.model_id().to_owned(),
                detail: format!(
                    "the model gives {} dimensions, not {}",
                    model.dimension(),
                    self.dimension()
                ),
            });
        }
        Ok(self.loaded.get_or_init(|| model))
    }
}

impl Embedder for LazyModel {
    fn model_id(&self) -> &str {
        match self.model {
            Model::MiniLm => MINILM_MODEL_ID,
            Model::TunedMiniLm => TUNED_MODEL_ID,
            Model::TunedMpnet => MPNET_TUNED_MODEL_ID,
        }
    }

    fn dimension(&self) -> usize {
        match self.model {
            Model::MiniLm | Model::TunedMiniLm => MINILM_DIMENSION,
            Model::TunedMpnet => MPNET_DIMENSION,
        }
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
