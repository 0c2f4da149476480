//! A task's spend as reports and decisions carry it (ruling 18): totals,
//! the part spent in loops, and what a `budget` detection names.

use serde::{Deserialize, Serialize};

/// Tokens and dollars: a task's total, its part in loops, or one loop's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SpendTotals {
    /// Input (prompt) tokens.
    pub input_tokens: u64,
    /// Output (completion) tokens.
    pub output_tokens: u64,
    /// US dollars: the events' own `cost_usd`, else their tokens at the
    /// configured price of their model. Absent when no event gave a cost
    /// and none could be priced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl SpendTotals {
    /// Adds one event's spend; `cost_usd` stays absent until some event has
    /// a cost.
    pub fn add(&mut self, input_tokens: u64, output_tokens: u64, cost_usd: Option<f64>) {
        self.input_tokens = self.input_tokens.saturating_add(input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(output_tokens);
        if let Some(cost) = cost_usd {
            *self.cost_usd.get_or_insert(0.0) += cost;
        }
    }

    /// Input plus output tokens.
    pub fn tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// Whether nothing was spent.
    pub fn is_zero(&self) -> bool {
        self.input_tokens == 0 && self.output_tokens == 0 && self.cost_usd.is_none()
    }
}

/// Dollars for people: cents from a dollar up, four decimals below (a
/// step's cost is often a fraction of a cent).
///
/// ```
/// use loopguard_core_types::usd;
/// assert_eq!(usd(4.1), "$4.10");
/// assert_eq!(usd(0.0645), "$0.0645");
/// ```
pub fn usd(value: f64) -> String {
    if value >= 1.0 {
        format!("${value:.2}")
    } else {
        format!("${value:.4}")
    }
}

/// A task's spend: the sum over its events since it was first seen
/// (resets do not clear it), and the part of it spent on the events its
/// loop detections name, each event counted once.
///
/// Written as the spec's report field `usage`:
///
/// ```
/// use loopguard_core_types::{Spend, SpendTotals};
/// let spend = Spend {
///     total: SpendTotals { input_tokens: 900, output_tokens: 100, cost_usd: Some(0.5) },
///     in_loops: SpendTotals { input_tokens: 300, output_tokens: 20, cost_usd: Some(0.125) },
/// };
/// assert_eq!(
///     serde_json::to_string(&spend)?,
///     r#"{"input_tokens":900,"output_tokens":100,"cost_usd":0.5,"in_loops":{"input_tokens":300,"output_tokens":20,"cost_usd":0.125}}"#
/// );
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    /// Everything the task spent.
    #[serde(flatten)]
    pub total: SpendTotals,
    /// What it spent on events its loop detections name.
    pub in_loops: SpendTotals,
}

/// One loop and what its events cost: a loop detection's kind, its
/// evidence lines, and the spend of those of them that carried `usage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoopSpend {
    /// The detection's kind.
    pub kind: String,
    /// Its evidence lines.
    pub evidence: Vec<u64>,
    /// What those events spent.
    #[serde(flatten)]
    pub spend: SpendTotals,
}

/// What a `budget` detection names (ruling 18): the limit crossed, the
/// spend against it, and the loops that cost most.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetCrossing {
    /// The config key of the limit, e.g. `budget.max_loop_cost_usd` or
    /// `budget.task_types.research.max_cost_usd`.
    pub limit: String,
    /// The limit's value (tokens, or US dollars).
    pub allowed: f64,
    /// What the task spent against it since its allowance was granted
    /// (when it was first seen, or at the last `human` event).
    pub spent: f64,
    /// The task's spend after this event.
    pub usage: Spend,
    /// The loops that cost most, costliest first (at most two).
    pub costliest_loops: Vec<LoopSpend>,
}
