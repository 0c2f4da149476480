//! The crate's one error type, and the per-line problems that are reported
//! but do not stop a run.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// `Result` with [`TuneError`].
pub type Result<T, E = TuneError> = std::result::Result<T, E>;

/// What stops a sweep. Problems with single lines of an input are not
/// errors: they are [`LineIssue`]s, listed and skipped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TuneError {
    /// A file could not be read, created or written. The message names
    /// the file; the operating system's reason is its source, which a
    /// caller prints after it ("cannot read the pair file p.jsonl: No such
    /// file or directory (os error 2)").
    #[error("{action} {path}", path = path.display())]
    Io {
        /// What was being done, e.g. "cannot read the pair file".
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// The sweep's range is not usable (`--from`, `--to`, `--step`).
    #[error("bad threshold range: {0}")]
    Range(String),

    /// `--min-precision` is not a number in (0, 1].
    #[error("the precision floor must be a number above 0 and at most 1, not {0}")]
    PrecisionFloor(f64),

    /// `--kind` names no kind that traces can be scored on.
    #[error(
        "--kind {0:?} is not a kind of trace detection: use request (collaboration_loop and \
         repeated_query, similarity.request_threshold) or topic (topic_cycle, \
         similarity.topic_threshold), or leave it out for all three"
    )]
    Kind(String),

    /// The same-request judge could not be fitted or scored.
    #[error("judge: {0}")]
    Judge(String),

    /// Nothing is left to choose a threshold on.
    #[error("{0}")]
    NoData(String),

    /// A trace has no file of expected detections next to it.
    #[error(
        "{trace} has no expected detections: {sidecar} is missing (one JSON object a line, \
         {{\"line\": N, \"kind\": \"collaboration_loop\"}}; an empty file says none are expected)",
        trace = trace.display(),
        sidecar = sidecar.display()
    )]
    MissingSidecar {
        /// The trace.
        trace: PathBuf,
        /// The sidecar file looked for.
        sidecar: PathBuf,
    },

    /// The embedder could not be loaded or failed on a text.
    #[error(transparent)]
    Semantic(#[from] loopguard_semantic::SemanticError),

    /// The engine could not be built from the config (traces mode).
    #[error("the engine cannot start: {0}")]
    Engine(String),

    /// A file of tuned-encoder cosines (`--tuned-cosines`) is not usable.
    #[error(
        "tuned cosines {path}{at}: {message}",
        path = path.display(),
        at = line.map(|line| format!(", line {line}")).unwrap_or_default()
    )]
    TunedCosines {
        /// The file.
        path: PathBuf,
        /// The 1-based line at fault, when one is.
        line: Option<u64>,
        /// What is wrong.
        message: String,
    },

    /// Writing a picture failed.
    #[error("cannot draw {path}: {detail}", path = path.display())]
    Plot {
        /// The picture's file.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
}

impl TuneError {
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

/// One input line that was skipped, and why: printed as `FILE:LINE: what is
/// wrong`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LineIssue {
    /// The file.
    pub file: PathBuf,
    /// The 1-based line.
    pub line: u64,
    /// What is wrong with it.
    pub message: String,
}

impl LineIssue {
    pub(crate) fn new(file: &Path, line: u64, message: impl Into<String>) -> Self {
        Self {
            file: file.to_path_buf(),
            line,
            message: message.into(),
        }
    }
}

impl fmt::Display for LineIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
    }
}
