//! `[semantic]`: the local embedding model behind the similarity
//! detectors.

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::check::invalid;

/// `[semantic]`: the local embedding model (all-MiniLM-L6-v2 on ONNX
/// Runtime, from pinned PyPI files).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SemanticConfig {
    /// Use embeddings (default true). When false, the similarity detectors
    /// fall back to exact normalized-text matching and every detection says
    /// so.
    pub enabled: bool,
    /// Where the model files are (default: `LOOPGUARD_MODEL_DIR`, else the
    /// user's cache directory, `$XDG_CACHE_HOME/loopguard/models` or
    /// `~/.cache/loopguard/models`; `models/cache/` of the checkout when
    /// loopguard runs from its checkout). Config wins over the environment.
    pub model_dir: Option<std::path::PathBuf>,
    /// The ONNX Runtime library (default: `ORT_DYLIB_PATH`, else the pinned
    /// copy in the model directory).
    pub ort_library: Option<std::path::PathBuf>,
    /// Whether missing files may be downloaded: `true` never downloads,
    /// `false` may even when `LOOPGUARD_OFFLINE=1` is set. Unset (the
    /// default): `LOOPGUARD_OFFLINE` decides, and without it files are
    /// fetched on first use.
    pub offline: Option<bool>,
    /// Embeddings cached by text (default 10000).
    pub cache_capacity: usize,
}

impl Default for SemanticConfig {
    fn default() -> Self {
        SemanticConfig {
            enabled: true,
            model_dir: None,
            ort_library: None,
            offline: None,
            cache_capacity: 10_000,
        }
    }
}

impl SemanticConfig {
    /// Checks `semantic.cache_capacity`.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.cache_capacity > 10_000_000 {
            return Err(invalid(
                "semantic.cache_capacity",
                self.cache_capacity,
                "at most 10000000 embeddings are cached",
            ));
        }
        Ok(())
    }
}
