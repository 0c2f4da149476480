//! `[budget]`: the most a task may spend, in all or in loops, before it is
//! gated (ruling 18). Global, and per task type as
//! `[budget.task_types.NAME]`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::check::invalid;

/// `[budget]`: limits on a task's spend; each is off unless set. The event
/// that first takes a task past one gets a `budget` detection (high,
/// `escalate`); a `human` event lifts the gate and grants a fresh
/// allowance of the same size.
///
/// ```
/// use loopguard_config::Config;
/// let config = Config::from_toml_str(
///     "[budget]\nmax_loop_cost_usd = 0.5\n[budget.task_types.research]\nmax_loop_cost_usd = 2.0\n",
/// )?;
/// assert_eq!(config.budget.limits_for(None).max_loop_cost_usd, Some(0.5));
/// assert_eq!(config.budget.limits_for(Some("research")).max_loop_cost_usd, Some(2.0));
/// assert_eq!(config.budget.limits_for(Some("research")).max_tokens, None);
/// # Ok::<(), loopguard_config::ConfigError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetConfig {
    /// Input plus output tokens a task may spend.
    pub max_tokens: Option<u64>,
    /// US dollars a task may spend.
    pub max_cost_usd: Option<f64>,
    /// US dollars a task may spend on the events its loop detections name.
    pub max_loop_cost_usd: Option<f64>,
    /// Limits for one task type, chosen by an event's `task_type` field; a
    /// key left out keeps the general limit.
    pub task_types: BTreeMap<String, BudgetLimits>,
}

/// One set of budget limits: `[budget]`'s own, or a task type's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetLimits {
    /// See [`BudgetConfig::max_tokens`].
    pub max_tokens: Option<u64>,
    /// See [`BudgetConfig::max_cost_usd`].
    pub max_cost_usd: Option<f64>,
    /// See [`BudgetConfig::max_loop_cost_usd`].
    pub max_loop_cost_usd: Option<f64>,
}

impl BudgetLimits {
    /// Whether no limit is set.
    pub fn is_empty(&self) -> bool {
        self.max_tokens.is_none() && self.max_cost_usd.is_none() && self.max_loop_cost_usd.is_none()
    }
}

impl BudgetConfig {
    /// The limits for a task of type `task_type`: the type's own where it
    /// sets them, the general ones elsewhere.
    pub fn limits_for(&self, task_type: Option<&str>) -> BudgetLimits {
        let own = task_type.and_then(|task_type| self.task_types.get(task_type));
        BudgetLimits {
            max_tokens: own.and_then(|own| own.max_tokens).or(self.max_tokens),
            max_cost_usd: own.and_then(|own| own.max_cost_usd).or(self.max_cost_usd),
            max_loop_cost_usd: own
                .and_then(|own| own.max_loop_cost_usd)
                .or(self.max_loop_cost_usd),
        }
    }

    /// Whether any limit is set, globally or for a task type.
    pub fn is_set(&self) -> bool {
        !self.limits_for(None).is_empty() || self.task_types.values().any(|own| !own.is_empty())
    }

    /// Checks every limit, general and per task type.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        validate_limits("budget", &self.limits_for(None))?;
        for (task_type, own) in &self.task_types {
            validate_limits(&format!("budget.task_types.{task_type}"), own)?;
        }
        Ok(())
    }
}

fn validate_limits(section: &str, limits: &BudgetLimits) -> Result<(), ConfigError> {
    if limits.max_tokens == Some(0) {
        return Err(invalid(
            &format!("{section}.max_tokens"),
            0,
            "must be at least 1 (leave it out for no limit)",
        ));
    }
    for (name, value) in [
        ("max_cost_usd", limits.max_cost_usd),
        ("max_loop_cost_usd", limits.max_loop_cost_usd),
    ] {
        if let Some(value) = value
            && !(value.is_finite() && value > 0.0)
        {
            return Err(invalid(
                &format!("{section}.{name}"),
                value,
                "must be a number of US dollars above 0 (leave it out for no limit)",
            ));
        }
    }
    Ok(())
}
