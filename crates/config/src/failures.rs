//! `[failures]`: how many of a task's failures are kept and compared.

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::check::{at_least_one, invalid};

/// `[failures]`: failure history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FailureConfig {
    /// Failures kept per task and compared with a new one (default 10).
    pub history: u32,
}

impl Default for FailureConfig {
    fn default() -> Self {
        FailureConfig { history: 10 }
    }
}

impl FailureConfig {
    /// Checks `failures.history`: 1 to 1000.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        at_least_one("failures.history", self.history)?;
        if self.history > 1000 {
            return Err(invalid(
                "failures.history",
                self.history,
                "at most 1000 failures are kept per task",
            ));
        }
        Ok(())
    }
}
