//! How a command that ran to the end went: what `main` turns into an exit
//! code.

/// How a command that ran to the end went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Exit 0.
    Clean,
    /// `--strict` and some line had an error: exit 1.
    LineErrors,
    /// Some event's writes never reached the store: exit 1.
    LostWrites,
}
