//! `[edges]`: hops along one transition edge without progress
//! (`edge_limit`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::check::{at_least_one, invalid};

/// `[edges]`: hops along one transition edge without progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EdgeConfig {
    /// Hops of one edge without progress before the task aborts
    /// (`MAX_LOOP_EDGE`, default 5).
    pub max_loop_edge: u32,
    /// Per-edge limits, keyed `"from->to"`.
    pub overrides: BTreeMap<String, u32>,
}

impl Default for EdgeConfig {
    fn default() -> Self {
        EdgeConfig {
            max_loop_edge: 5,
            overrides: BTreeMap::new(),
        }
    }
}

impl EdgeConfig {
    /// The hop limit for the edge `from->to`.
    pub fn limit_for(&self, from: &str, to: &str) -> u32 {
        if self.overrides.is_empty() {
            return self.max_loop_edge;
        }
        self.overrides
            .get(&format!("{from}->{to}"))
            .copied()
            .unwrap_or(self.max_loop_edge)
    }
}

impl EdgeConfig {
    /// Checks the limit and every override's `"from->to"` key and limit.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        at_least_one("edges.max_loop_edge", self.max_loop_edge)?;
        for (edge, limit) in &self.overrides {
            let key = format!("edges.overrides.\"{edge}\"");
            match edge.split_once("->") {
                Some((from, to)) if !from.is_empty() && !to.is_empty() && !to.contains("->") => {}
                _ => {
                    return Err(invalid(
                        &key,
                        limit,
                        "edge keys are written \"from->to\", e.g. \"planner->researcher\"",
                    ));
                }
            }
            at_least_one(&key, *limit)?;
        }
        Ok(())
    }
}
