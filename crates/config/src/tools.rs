//! `[tools]`: stale tool calls (ruling 15) and rephrased calls
//! (ruling 19), with per-tool settings.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::check::{at_least_one, invalid};

/// `[tools]`: stale tool calls (ruling 15). A successful call is stale when
/// it brings nothing new: a result already returned to its agent in its
/// task, or, without an informative result, the same call again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolsConfig {
    /// The stale call of a run that is the first detection, an
    /// `inject_context` (default 2: for one call repeated, its third
    /// occurrence).
    pub nudge_after: u32,
    /// The stale call of a run from which every one `escalate`s (default
    /// 4).
    pub escalate_after: u32,
    /// Characters a normalized result needs to be informative (default 16).
    pub min_result_chars: u32,
    /// Argument keys ignored when comparing calls (request ids, timestamps),
    /// at any depth of the arguments.
    pub volatile_args: Vec<String>,
    /// Calls and results remembered per task and agent, the least recently
    /// seen forgotten first (default 256).
    pub history: u32,
    /// The rephrase of a run that is the first `tool_rephrase` detection
    /// (ruling 19; default 3: a query and three rewordings of it).
    pub rephrase_after: u32,
    /// The cosine from which a reworded free-text argument is about the
    /// same thing as the previous call's (ruling 19; default 0.70). Without
    /// semantic matching, the same content words for at least half of the
    /// shorter text.
    pub rephrase_similarity: f64,
    /// Settings for one tool (`[tools.per_tool.NAME]`).
    pub per_tool: BTreeMap<String, PerToolConfig>,
}

/// `[tools.per_tool.NAME]`: one tool's own settings; a key left out keeps
/// the `[tools]` one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PerToolConfig {
    /// Overrides `tools.nudge_after` (a polling tool may allow 20).
    pub nudge_after: Option<u32>,
    /// Overrides `tools.escalate_after`.
    pub escalate_after: Option<u32>,
    /// Overrides `tools.min_result_chars`.
    pub min_result_chars: Option<u32>,
    /// Overrides `tools.rephrase_after`.
    pub rephrase_after: Option<u32>,
    /// Argument keys ignored for this tool, besides `tools.volatile_args`.
    pub volatile_args: Vec<String>,
    /// Calls of this tool are never stale nor rephrased, and never end a
    /// run.
    pub exclude: bool,
}

/// The settings that apply to one tool's calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolLimits {
    /// See [`ToolsConfig::nudge_after`].
    pub nudge_after: u32,
    /// See [`ToolsConfig::escalate_after`].
    pub escalate_after: u32,
    /// See [`ToolsConfig::min_result_chars`].
    pub min_result_chars: u32,
    /// See [`ToolsConfig::rephrase_after`].
    pub rephrase_after: u32,
    /// See [`PerToolConfig::exclude`].
    pub exclude: bool,
}

impl ToolsConfig {
    /// The settings for calls of `tool`.
    pub fn limits_for(&self, tool: &str) -> ToolLimits {
        let own = self.per_tool.get(tool);
        ToolLimits {
            nudge_after: own.and_then(|t| t.nudge_after).unwrap_or(self.nudge_after),
            escalate_after: own
                .and_then(|t| t.escalate_after)
                .unwrap_or(self.escalate_after),
            min_result_chars: own
                .and_then(|t| t.min_result_chars)
                .unwrap_or(self.min_result_chars),
            rephrase_after: own
                .and_then(|t| t.rephrase_after)
                .unwrap_or(self.rephrase_after),
            exclude: own.is_some_and(|t| t.exclude),
        }
    }

    /// Whether `key` is ignored in the arguments of `tool`.
    pub fn is_volatile(&self, tool: &str, key: &str) -> bool {
        self.volatile_args.iter().any(|k| k == key)
            || self
                .per_tool
                .get(tool)
                .is_some_and(|t| t.volatile_args.iter().any(|k| k == key))
    }
}

impl Default for ToolsConfig {
    fn default() -> Self {
        ToolsConfig {
            nudge_after: 2,
            escalate_after: 4,
            min_result_chars: 16,
            volatile_args: Vec::new(),
            history: 256,
            rephrase_after: 3,
            rephrase_similarity: 0.70,
            per_tool: BTreeMap::new(),
        }
    }
}

impl ToolsConfig {
    /// Checks the history, the rephrase similarity and the ladder of
    /// `[tools]` and of every `[tools.per_tool.NAME]`.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        at_least_one("tools.history", self.history)?;
        if self.history > 100_000 {
            return Err(invalid(
                "tools.history",
                self.history,
                "at most 100000 calls are remembered per agent",
            ));
        }
        if !(self.rephrase_similarity > 0.0 && self.rephrase_similarity <= 1.0) {
            return Err(invalid(
                "tools.rephrase_similarity",
                self.rephrase_similarity,
                "must be above 0 and at most 1",
            ));
        }
        validate_ladder("tools", self.limits_for(""))?;
        for tool in self.per_tool.keys() {
            validate_ladder(&format!("tools.per_tool.{tool}"), self.limits_for(tool))?;
        }
        Ok(())
    }
}

/// One tool's (or the general) ladder: nudge and rephrase from 1, the
/// escalation no earlier than the nudge.
fn validate_ladder(section: &str, limits: ToolLimits) -> Result<(), ConfigError> {
    at_least_one(&format!("{section}.nudge_after"), limits.nudge_after)?;
    at_least_one(&format!("{section}.rephrase_after"), limits.rephrase_after)?;
    if limits.escalate_after < limits.nudge_after {
        return Err(invalid(
            &format!("{section}.escalate_after"),
            limits.escalate_after,
            "must be at least nudge_after",
        ));
    }
    Ok(())
}
