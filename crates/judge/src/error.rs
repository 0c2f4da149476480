//! The crate's one error type.

/// `Result` with [`JudgeError`].
pub type Result<T, E = JudgeError> = std::result::Result<T, E>;

/// What can go wrong reading weights or weighing a pair. Every message
/// says what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JudgeError {
    /// A weights file that cannot be read, or is not weights.
    #[error("judge: {0}")]
    Weights(String),

    /// Two vectors of different lengths compared.
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
}
