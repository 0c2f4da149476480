//! `[progress]`: judging differing failures by test metrics and
//! completion signals (`regression`, `no_progress`, `external_failure`).

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::check::at_least_one;

/// `[progress]`: judging failures by test metrics and completion signals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProgressConfig {
    /// In a task with no progress events at all, the differing failures in
    /// a row that make its first `no_progress` loop; each further one is
    /// another (default 3, ruling 13). With metrics reported, every
    /// differing failure that none moved before is a loop of its own.
    pub no_progress_failures: u32,
    /// External failures in a row in one task that escalate as a
    /// dependency problem (default 3, ruling 3).
    pub external_failures_before_escalation: u32,
}

impl Default for ProgressConfig {
    fn default() -> Self {
        ProgressConfig {
            no_progress_failures: 3,
            external_failures_before_escalation: 3,
        }
    }
}

impl ProgressConfig {
    /// Checks both counts.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        at_least_one("progress.no_progress_failures", self.no_progress_failures)?;
        at_least_one(
            "progress.external_failures_before_escalation",
            self.external_failures_before_escalation,
        )
    }
}
