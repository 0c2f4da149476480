//! The host's errors.

use loopguard_config::ConfigError;

/// What can go wrong building or driving the engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// The configuration is not valid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The trace could not be read.
    #[error("cannot read the trace: {0}")]
    Read(#[from] std::io::Error),
}
