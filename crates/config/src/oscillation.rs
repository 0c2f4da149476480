//! `[oscillation]`: short cycles in a task's recent phase transitions.

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::check::invalid;

/// `[oscillation]`: short cycles in the recent transitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OscillationConfig {
    /// Longest cycle looked for (default 3; the shortest is 2).
    pub cycle_detection_length: u32,
    /// Recent transitions kept per task (default 10).
    pub history: u32,
}

impl Default for OscillationConfig {
    fn default() -> Self {
        OscillationConfig {
            cycle_detection_length: 3,
            history: 10,
        }
    }
}

impl OscillationConfig {
    /// Checks the cycle length, and that the history holds two cycles.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.cycle_detection_length < 2 {
            return Err(invalid(
                "oscillation.cycle_detection_length",
                self.cycle_detection_length,
                "must be at least 2 (the shortest oscillation is A->B, B->A)",
            ));
        }
        if self.history < 2 * self.cycle_detection_length || self.history > 256 {
            return Err(invalid(
                "oscillation.history",
                self.history,
                "must hold two full cycles (at least 2 x cycle_detection_length) and be at most 256",
            ));
        }
        Ok(())
    }
}
