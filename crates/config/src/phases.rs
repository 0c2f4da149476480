//! `[phases]`: visits per phase and repeats per transition.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::check::at_least_one;

/// `[phases]`: visits per phase and repeats per transition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PhaseConfig {
    /// Entries into one phase before further entries are blocked
    /// (default 10).
    pub max_visits: u32,
    /// Occurrences of one from→to before further ones are blocked
    /// (default 5).
    pub max_transitions: u32,
    /// Per-phase visit limits, keyed by phase name.
    pub visit_overrides: BTreeMap<String, u32>,
}

impl Default for PhaseConfig {
    fn default() -> Self {
        PhaseConfig {
            max_visits: 10,
            max_transitions: 5,
            visit_overrides: BTreeMap::new(),
        }
    }
}

impl PhaseConfig {
    /// The visit limit for `phase`.
    pub fn visit_limit_for(&self, phase: &str) -> u32 {
        self.visit_overrides
            .get(phase)
            .copied()
            .unwrap_or(self.max_visits)
    }
}

impl PhaseConfig {
    /// Checks the limits and every per-phase override.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        at_least_one("phases.max_visits", self.max_visits)?;
        at_least_one("phases.max_transitions", self.max_transitions)?;
        for (phase, limit) in &self.visit_overrides {
            at_least_one(&format!("phases.visit_overrides.\"{phase}\""), *limit)?;
        }
        Ok(())
    }
}
