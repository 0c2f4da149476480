//! `[entropy]`: repeated failed output and strategy pivots.

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::check::invalid;

/// `[entropy]`: repeated failed output and strategy pivots.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EntropyConfig {
    /// Identical failed outputs in a row that issue a pivot (default 3).
    pub threshold: u32,
    /// Pivots before the task is paused (`MAX_PIVOTS`, default 2).
    pub max_pivots: u32,
}

impl Default for EntropyConfig {
    fn default() -> Self {
        EntropyConfig {
            threshold: 3,
            max_pivots: 2,
        }
    }
}

impl EntropyConfig {
    /// Checks `entropy.threshold`.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.threshold < 2 {
            return Err(invalid(
                "entropy.threshold",
                self.threshold,
                "must be at least 2 (one output cannot repeat itself)",
            ));
        }
        Ok(())
    }
}
