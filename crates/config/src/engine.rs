//! `[engine]`: the engine's own bookkeeping.

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::check::invalid;

/// `[engine]`: the engine's own bookkeeping.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineConfig {
    /// Seconds a task may stay idle before its in-memory state is evicted
    /// (default 86400, 24 h).
    pub task_ttl_secs: u64,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            task_ttl_secs: 86_400,
        }
    }
}

impl EngineConfig {
    /// Checks `engine.task_ttl_secs`.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.task_ttl_secs == 0 {
            return Err(invalid("engine.task_ttl_secs", 0, "must be at least 1"));
        }
        Ok(())
    }
}
