//! `[gate]`: when a task goes behind the human gate.

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::check::at_least_one;

/// `[gate]`: when a task goes behind the human gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GateConfig {
    /// Loops before the human gate (default 3: "after 3rd unresolved loop
    /// -> gate").
    pub loops_before_gate: u32,
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            loops_before_gate: 3,
        }
    }
}

impl GateConfig {
    /// Checks `gate.loops_before_gate`.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        at_least_one("gate.loops_before_gate", self.loops_before_gate)
    }
}
