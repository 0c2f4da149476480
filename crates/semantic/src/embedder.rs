//! The embedding model behind a trait, and the real one over fastembed.

use crate::error::Result;

/// A sentence-embedding model: text in, one unit-length vector out per text.
///
/// Implement this to plug in another model. The contract:
///
/// - [`Embedder::embed_batch`] returns exactly one vector per input text, in
///   order, each of [`Embedder::dimension`] finite floats;
/// - vectors are L2-normalized, so that a dot product is a cosine
///   ([`EmbeddingService`](crate::EmbeddingService) normalizes a vector that
///   is not, and rejects a zero or non-finite one);
/// - the same text gives the same vector, whatever else is in the batch.
///
/// Implementations are synchronous and may be slow; the service calls them
/// off the async reactor, one batch at a time.
pub trait Embedder: Send + Sync {
    /// A stable name for the model, e.g. `all-MiniLM-L6-v2-int8`: vectors of
    /// different models must never be compared.
    fn model_id(&self) -> &str;

    /// The length of every vector.
    fn dimension(&self) -> usize;

    /// Embeds `texts`, one vector per text, in order.
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;
}

impl<E: Embedder + ?Sized> Embedder for std::sync::Arc<E> {
    fn model_id(&self) -> &str {
        (**self).model_id()
    }

    fn dimension(&self) -> usize {
        (**self).dimension()
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        (**self).embed_batch(texts)
    }
}

#[cfg(feature = "fastembed")]
pub use self::fast::{
    FastEmbedder, FastEmbedderOptions, MINILM_DIMENSION, MINILM_MODEL_ID, ort_environment,
};

#[cfg(feature = "fastembed")]
mod fast {
    use std::path::Path;

    use fastembed::{
        InitOptionsUserDefined, Pooling, TextEmbedding, TokenizerFiles, UserDefinedEmbeddingModel,
    };
    use parking_lot::Mutex;

    use super::Embedder;
    use crate::error::{Result, SemanticError};
    use crate::provision::{MPNET_TUNED_MODEL_ID, ModelFiles, MpnetBase, TUNED_MODEL_ID};

    /// The id [`FastEmbedder`] reports for the pinned model.
    pub const MINILM_MODEL_ID: &str = "all-MiniLM-L6-v2-int8";

    /// The pinned model's vector length.
    pub const MINILM_DIMENSION: usize = 384;

    /// How [`FastEmbedder`] runs the model.
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[non_exhaustive]
    pub struct FastEmbedderOptions {
        /// Longest input in tokens; longer texts are truncated (default 256,
        /// what the model was trained with).
        pub max_length: usize,
        /// ONNX Runtime's intra-op threads; `None` uses every core.
        pub intra_threads: Option<usize>,
    }

    impl Default for FastEmbedderOptions {
        fn default() -> Self {
            Self {
                max_length: 256,
                intra_threads: None,
            }
        }
    }

    impl FastEmbedderOptions {
        /// The defaults: 256 tokens, every core.
        pub fn new() -> Self {
            Self::default()
        }

        /// Sets the longest input in tokens.
        #[must_use]
        pub fn max_length(mut self, tokens: usize) -> Self {
            self.max_length = tokens;
            self
        }

        /// Sets ONNX Runtime's intra-op threads.
        #[must_use]
        pub fn intra_threads(mut self, threads: usize) -> Self {
            self.intra_threads = Some(threads);
            self
        }
    }

    /// all-MiniLM-L6-v2 (int8) through fastembed and ONNX Runtime, from
    /// verified local files only.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use loopguard_semantic::{EmbeddingService, FastEmbedder, ModelFiles, ProvisionOptions, cosine};
    ///
    /// # async fn run() -> loopguard_semantic::Result<()> {
    /// // Fetches the ~53 MB of pinned files on first use, then finds them.
    /// let files = ModelFiles::ensure_with(&ProvisionOptions::new())?;
    /// let service = EmbeddingService::new(Arc::new(FastEmbedder::new(&files)?))?;
    /// let a = service.embed("Can you review this authentication code?").await?;
    /// let b = service.embed("Can you review this auth code again?").await?;
    /// assert!(cosine(&a, &b)? > 0.85); // 0.889 with this model
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// Loading takes a few hundred milliseconds and ~265 MB; share one
    /// instance (it is `Send + Sync`; calls are serialized by a mutex, since
    /// fastembed's `embed` takes `&mut self`).
    pub struct FastEmbedder {
        model: Mutex<TextEmbedding>,
        dimension: usize,
        model_id: &'static str,
    }

    impl std::fmt::Debug for FastEmbedder {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("FastEmbedder")
                .field("model_id", &self.model_id)
                .field("dimension", &self.dimension)
                .finish_non_exhaustive()
        }
    }

    impl FastEmbedder {
        /// Loads the model from `files` with the default options.
        pub fn new(files: &ModelFiles) -> Result<Self> {
            Self::with_options(files, &FastEmbedderOptions::default())
        }

        /// Loads the model from `files`.
        ///
        /// ONNX Runtime is loaded from [`ModelFiles::runtime`] on first use
        /// in the process; `ort` keeps the first library it loaded, so a
        /// second `FastEmbedder` reuses it.
        pub fn with_options(files: &ModelFiles, options: &FastEmbedderOptions) -> Result<Self> {
            Self::load(files, read(&files.model())?, MINILM_MODEL_ID, options)
        }

        /// Loads the tuned encoder ([`crate::TUNED_MODEL`], found and
        /// checked by [`ModelFiles::tuned_model`]) with the pinned
        /// tokenizer files of `files`: the calibrated judge's
        /// `tuned_cosine` reading. Its id is [`TUNED_MODEL_ID`].
        pub fn tuned(files: &ModelFiles, options: &FastEmbedderOptions) -> Result<Self> {
            let onnx = files.tuned_model()?.bytes()?;
            Self::load(files, onnx, TUNED_MODEL_ID, options)
        }

        /// Loads the larger tuned encoder (`[similarity] tuned_encoder =
        /// "mpnet"`): all-mpnet-base-v2's weights from `base` with the
        /// low-rank update read from its update directory
        /// ([`MpnetBase::update_dir`]), rebuilt into one model in memory
        /// ([`MpnetBase::tuned_model`]), read with all-mpnet-base-v2's
        /// tokenizer files; ONNX Runtime from `files`. Its id is
        /// [`MPNET_TUNED_MODEL_ID`]; its vectors have 768 dimensions.
        pub fn tuned_mpnet(
            files: &ModelFiles,
            base: &MpnetBase,
            options: &FastEmbedderOptions,
        ) -> Result<Self> {
            load_runtime(files)?;
            let tokenizer_files = tokenizer_files(base.dir())?;
            let onnx = base.tuned_model()?;
            Self::load_with(
                files,
                base.dir(),
                onnx,
                tokenizer_files,
                MPNET_TUNED_MODEL_ID,
                options,
            )
        }

        fn load(
            files: &ModelFiles,
            onnx: Vec<u8>,
            model_id: &'static str,
            options: &FastEmbedderOptions,
        ) -> Result<Self> {
            load_runtime(files)?;
            let tokenizer_files = tokenizer_files(files.dir())?;
            Self::load_with(files, files.dir(), onnx, tokenizer_files, model_id, options)
        }

        /// Loads `onnx` with `tokenizer_files` (read from `dir`, which an
        /// error names) on the runtime of `files`.
        fn load_with(
            files: &ModelFiles,
            dir: &Path,
            onnx: Vec<u8>,
            tokenizer_files: TokenizerFiles,
            model_id: &'static str,
            options: &FastEmbedderOptions,
        ) -> Result<Self> {
            let model_error = |detail: String| SemanticError::ModelLoad {
                dir: dir.to_path_buf(),
                detail,
            };
            let model =
                UserDefinedEmbeddingModel::new(onnx, tokenizer_files).with_pooling(Pooling::Mean);
            let mut init = InitOptionsUserDefined::new()
                .with_environment(ort_environment(files)?)
                .with_max_length(options.max_length);
            if let Some(threads) = options.intra_threads {
                init = init.with_intra_threads(threads);
            }
            let mut model = TextEmbedding::try_new_from_user_defined(model, init)
                .map_err(|e| model_error(e.to_string()))?;
            // Learn the dimension from the model rather than trusting a constant.
            let probe = model
                .embed(["dimension probe"], None)
                .map_err(|e| model_error(format!("the first inference failed: {e}")))?;
            let dimension = probe.first().map_or(0, Vec::len);
            if dimension == 0 {
                return Err(model_error("the model returned an empty vector".into()));
            }
            Ok(Self {
                model: Mutex::new(model),
                dimension,
                model_id,
            })
        }
    }

    impl Embedder for FastEmbedder {
        fn model_id(&self) -> &str {
            self.model_id
        }

        fn dimension(&self) -> usize {
            self.dimension
        }

        fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
            if texts.is_empty() {
                return Ok(Vec::new());
            }
            // fastembed already L2-normalizes each pooled vector; the
            // service only re-normalizes vectors that are not unit length.
            self.model
                .lock()
                .embed(texts, None)
                .map_err(|e| SemanticError::Inference {
                    model: self.model_id.to_string(),
                    texts: texts.len(),
                    detail: e.to_string(),
                })
        }
    }

    /// The process's ONNX Runtime environment, created on first use from
    /// the verified library in `files`.
    ///
    /// `ort` allows one environment per process; every [`FastEmbedder`]
    /// shares this one, and so must any other `ort` session in the process
    /// (pass it to `ort::session::Session::builder`).
    pub fn ort_environment(files: &ModelFiles) -> Result<ort::environment::Environment> {
        static ENVIRONMENT: Mutex<Option<ort::environment::Environment>> = Mutex::new(None);
        load_runtime(files)?;
        let mut slot = ENVIRONMENT.lock();
        if let Some(environment) = slot.as_ref() {
            return Ok(environment.clone());
        }
        let environment = ort::init()
            .with_name("loopguard")
            .with_telemetry(false)
            .build()
            .map_err(|e| SemanticError::Runtime {
                path: files.runtime().to_path_buf(),
                detail: format!("cannot create the ONNX Runtime environment: {e}"),
            })?;
        *slot = Some(environment.clone());
        Ok(environment)
    }

    /// The four tokenizer files a model directory holds under their usual
    /// names (`tokenizer.json`, `config.json`, `special_tokens_map.json`,
    /// `tokenizer_config.json`).
    fn tokenizer_files(dir: &Path) -> Result<TokenizerFiles> {
        Ok(TokenizerFiles {
            tokenizer_file: read(&dir.join("tokenizer.json"))?,
            config_file: read(&dir.join("config.json"))?,
            special_tokens_map_file: read(&dir.join("special_tokens_map.json"))?,
            tokenizer_config_file: read(&dir.join("tokenizer_config.json"))?,
        })
    }

    fn read(path: &Path) -> Result<Vec<u8>> {
        std::fs::read(path).map_err(|e| SemanticError::io("cannot read", path, e))
    }

    /// Loads ONNX Runtime from the verified library, once per process.
    ///
    /// `ort` panics when it has to find the library itself and cannot, so
    /// the file is checked here first and then handed to `ort` explicitly.
    fn load_runtime(files: &ModelFiles) -> Result<()> {
        files.check_runtime()?;
        let path = files.runtime();
        // Keeps the first library loaded; later paths are ignored by `ort`.
        let _builder = ort::init_from(path).map_err(|e| SemanticError::Runtime {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
        Ok(())
    }
}
