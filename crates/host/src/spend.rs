//! Spend per task and budgets (ruling 18).
//!
//! Every event's `usage` adds to its task's totals; its cost is its own
//! `cost_usd`, else its tokens at the configured price of its model
//! (`[pricing.MODEL]`), else none (tokens only). The events a loop
//! detection names as evidence add, once each, to the spend *in loops*.
//! The event that first takes a task past a `[budget]` limit gets a
//! `budget` detection (high, `escalate`) naming the limit, the spend and
//! the two loops that cost most; a `human` event grants a fresh allowance
//! of the same size.
//!
//! The work per event is bounded: the task keeps the last
//! [`PRICED_EVENTS_KEPT`] events that carried usage (to price a later
//! detection's evidence) and its two costliest loops, never its history.
//! Evidence older than that is not priced.

use std::collections::VecDeque;

use loopguard_config::{BudgetConfig, BudgetLimits, PricingConfig};
use loopguard_core_types::{
    Action, BudgetCrossing, Detection, Event, EventKind, LoopSpend, Severity, Spend, SpendTotals,
    Usage, kinds, usd,
};
use serde::{Deserialize, Serialize};

/// Events with usage a task keeps, newest last, to price the evidence of
/// its later loop detections.
pub const PRICED_EVENTS_KEPT: usize = 64;

/// Loops a `budget` detection names, costliest first.
const COSTLIEST_LOOPS: usize = 2;

/// The kinds whose evidence is spend in loops (ruling 18): the kinds that
/// feed the loop count and the cycle kinds (rulings 1, 4, 13, 15, 19).
pub const SPEND_LOOP_KINDS: [&str; 11] = [
    kinds::EXACT_FAILURE,
    kinds::COLLABORATION_LOOP,
    kinds::REGRESSION,
    kinds::NO_PROGRESS,
    kinds::AGENT_PAIR,
    kinds::MULTI_AGENT,
    kinds::TOPIC_CYCLE,
    kinds::TOOL_REPEAT,
    kinds::TOOL_CYCLE,
    kinds::TOOL_NO_NEW_INFO,
    kinds::TOOL_REPHRASE,
];

/// One task's spend, kept in its saved state so that a restart or another
/// replica continues the sums exactly. Dollars are summed as whole
/// nano-dollars, so that a sum does not depend on the order of its terms
/// and reads back as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct TaskSpend {
    /// Everything the task spent.
    total: Sums,
    /// What it spent on the events its loop detections name.
    in_loops: Sums,
    /// The spend when the current allowance was granted.
    #[serde(default, skip_serializing_if = "Granted::is_zero")]
    granted: Granted,
    /// The limits crossed under the current allowance, by config key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    crossed: Vec<String>,
    /// The last events with usage, oldest first.
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    recent: VecDeque<Priced>,
    /// The costliest loops so far, costliest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    costliest: Vec<LoopSpend>,
}

/// Tokens and nano-dollars; no dollars until an event had a cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
struct Sums {
    input_tokens: u64,
    output_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cost_nanos: Option<u64>,
}

impl Sums {
    fn add(&mut self, other: &Sums) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        if let Some(cost) = other.cost_nanos {
            let sum = self.cost_nanos.get_or_insert(0);
            *sum = sum.saturating_add(cost);
        }
    }

    fn tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    fn is_zero(&self) -> bool {
        *self == Sums::default()
    }

    fn totals(&self) -> SpendTotals {
        SpendTotals {
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cost_usd: self.cost_nanos.map(dollars),
        }
    }
}

/// Dollars as whole nano-dollars.
fn nanos(dollars: f64) -> u64 {
    // `as` saturates: a cost beyond u64 nano-dollars is held at the top.
    (dollars * 1e9).round() as u64
}

fn dollars(nanos: u64) -> f64 {
    nanos as f64 / 1e9
}

/// The spend at the grant of the current allowance.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
struct Granted {
    tokens: u64,
    cost_nanos: u64,
    loop_cost_nanos: u64,
}

impl Granted {
    fn is_zero(&self) -> bool {
        *self == Granted::default()
    }
}

/// One event's spend, kept to price a later detection's evidence. Saved
/// as a compact array, `[line, input, output, nano-dollars or null, in
/// loops]`: a task keeps up to [`PRICED_EVENTS_KEPT`] of them in every
/// commit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(from = "PricedRow", into = "PricedRow")]
struct Priced {
    line: u64,
    sums: Sums,
    /// Already added to the spend in loops.
    in_loops: bool,
}

/// [`Priced`] as saved.
#[derive(Serialize, Deserialize)]
struct PricedRow(u64, u64, u64, Option<u64>, bool);

impl From<PricedRow> for Priced {
    fn from(PricedRow(line, input_tokens, output_tokens, cost_nanos, in_loops): PricedRow) -> Self {
        Priced {
            line,
            sums: Sums {
                input_tokens,
                output_tokens,
                cost_nanos,
            },
            in_loops,
        }
    }
}

impl From<Priced> for PricedRow {
    fn from(priced: Priced) -> Self {
        let Sums {
            input_tokens,
            output_tokens,
            cost_nanos,
        } = priced.sums;
        PricedRow(
            priced.line,
            input_tokens,
            output_tokens,
            cost_nanos,
            priced.in_loops,
        )
    }
}

/// The settings spend accounting reads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpendRules<'a> {
    pub(crate) pricing: &'a PricingConfig,
    pub(crate) budget: &'a BudgetConfig,
}

impl TaskSpend {
    /// The task's spend, when any event carried usage.
    pub(crate) fn report(&self) -> Option<Spend> {
        (!self.total.is_zero() || !self.recent.is_empty()).then(|| Spend {
            total: self.total.totals(),
            in_loops: self.in_loops.totals(),
        })
    }

    /// Accounts for one event: its usage, the evidence of its loop
    /// detections, then the budget. Returns the `budget` detections of the
    /// limits this event takes the task past.
    pub(crate) fn observe(
        &mut self,
        event: &Event,
        line: u64,
        usage: Option<&Usage>,
        detections: &[Detection],
        rules: SpendRules<'_>,
    ) -> Vec<Detection> {
        if matches!(event.kind, EventKind::Human { .. }) {
            self.grant();
        }
        if let Some(usage) = usage {
            self.add_event(line, usage, rules.pricing);
        }
        for detection in detections {
            if SPEND_LOOP_KINDS.contains(&&*detection.kind) {
                self.add_loop(detection);
            }
        }
        let task_type = crate::extension::task_type_of(event);
        self.check_budget(line, task_type, rules.budget)
    }

    /// A fresh allowance of the same size: limits count from here.
    fn grant(&mut self) {
        self.granted = Granted {
            tokens: self.total.tokens(),
            cost_nanos: self.total.cost_nanos.unwrap_or(0),
            loop_cost_nanos: self.in_loops.cost_nanos.unwrap_or(0),
        };
        self.crossed.clear();
    }

    fn add_event(&mut self, line: u64, usage: &Usage, pricing: &PricingConfig) {
        let input_tokens = usage.input_tokens.unwrap_or(0);
        let output_tokens = usage.output_tokens.unwrap_or(0);
        let cost = usage.cost_usd.or_else(|| {
            let price = pricing.price_for(usage.model.as_deref()?)?;
            Some(price.cost_usd(input_tokens, output_tokens))
        });
        let sums = Sums {
            input_tokens,
            output_tokens,
            cost_nanos: cost.map(nanos),
        };
        self.total.add(&sums);
        if self.recent.len() == PRICED_EVENTS_KEPT {
            self.recent.pop_front();
        }
        self.recent.push_back(Priced {
            line,
            sums,
            in_loops: false,
        });
    }

    /// Adds the detection's evidence not counted before to the spend in
    /// loops, and keeps the loop if it is among the costliest.
    fn add_loop(&mut self, detection: &Detection) {
        let mut own = Sums::default();
        for line in &detection.evidence {
            // Lines rise, so the kept events are sorted by line.
            let Ok(index) = self.recent.binary_search_by_key(line, |priced| priced.line) else {
                continue;
            };
            let priced = &mut self.recent[index];
            own.add(&priced.sums);
            if !priced.in_loops {
                priced.in_loops = true;
                self.in_loops.add(&priced.sums);
            }
        }
        if own.is_zero() {
            return;
        }
        let spend = own.totals();
        // A later detection of the same loop (its kind, from the same first
        // line: the run grew) takes the place of the earlier one.
        let same_loop = self.costliest.iter_mut().find(|kept| {
            kept.kind == detection.kind && kept.evidence.first() == detection.evidence.first()
        });
        if let Some(kept) = same_loop {
            kept.evidence.clone_from(&detection.evidence);
            kept.spend = spend;
        } else if self.costliest.len() < COSTLIEST_LOOPS
            || self
                .costliest
                .last()
                .is_some_and(|cheapest| costlier(&spend, &cheapest.spend).is_gt())
        {
            self.costliest.push(LoopSpend {
                kind: detection.kind.to_string(),
                evidence: detection.evidence.clone(),
                spend,
            });
        } else {
            return;
        }
        self.costliest.sort_by(|a, b| costlier(&b.spend, &a.spend));
        self.costliest.truncate(COSTLIEST_LOOPS);
    }

    /// The `budget` detections of the limits this event takes the task
    /// past, each once per allowance.
    fn check_budget(
        &mut self,
        line: u64,
        task_type: Option<&str>,
        budget: &BudgetConfig,
    ) -> Vec<Detection> {
        let limits = budget.limits_for(task_type);
        if limits.is_empty() {
            return Vec::new();
        }
        let mut found = Vec::new();
        for (name, allowed, spent) in self.against(&limits).into_iter().flatten() {
            if spent <= allowed {
                continue;
            }
            let key = limit_key(task_type, budget, name);
            if !self.crossed.contains(&key) {
                found.push(self.crossing(line, key.clone(), allowed, spent));
                self.crossed.push(key);
            }
        }
        found
    }

    /// Each set limit, with what was spent against it under the current
    /// allowance.
    fn against(&self, limits: &BudgetLimits) -> [Option<(&'static str, f64, f64)>; 3] {
        let since_grant = |now: u64, granted: u64| dollars(now.saturating_sub(granted));
        let tokens = limits.max_tokens.map(|max| {
            let spent = self.total.tokens().saturating_sub(self.granted.tokens);
            ("max_tokens", max as f64, spent as f64)
        });
        let cost = limits
            .max_cost_usd
            .zip(self.total.cost_nanos)
            .map(|(max, cost)| {
                let spent = since_grant(cost, self.granted.cost_nanos);
                ("max_cost_usd", max, spent)
            });
        let loop_cost =
            limits
                .max_loop_cost_usd
                .zip(self.in_loops.cost_nanos)
                .map(|(max, cost)| {
                    let spent = since_grant(cost, self.granted.loop_cost_nanos);
                    ("max_loop_cost_usd", max, spent)
                });
        [tokens, cost, loop_cost]
    }

    fn crossing(&self, line: u64, limit: String, allowed: f64, spent: f64) -> Detection {
        let mut evidence: Vec<u64> = self
            .costliest
            .iter()
            .flat_map(|looped| looped.evidence.iter().copied())
            .filter(|&evidence| evidence < line)
            .collect();
        evidence.sort_unstable();
        evidence.dedup();
        evidence.push(line);
        let crossing = BudgetCrossing {
            limit,
            allowed,
            spent,
            usage: self.report().unwrap_or_default(),
            costliest_loops: self.costliest.clone(),
        };
        let mut detection = Detection::new(
            "budget",
            kinds::BUDGET,
            Severity::High,
            Action::Escalate,
            evidence,
            budget_reason(&crossing),
        );
        detection.budget = Some(Box::new(crossing));
        detection
    }
}

/// The spend in a task's saved state (the JSON a durable store keeps),
/// when it has one.
pub(crate) fn saved_spend(state: &str) -> Option<Spend> {
    saved_task_spend(state)?.report()
}

/// The spend part of a task's saved state, when it has one.
fn saved_task_spend(state: &str) -> Option<TaskSpend> {
    #[derive(Deserialize)]
    struct WithSpend {
        spend: Option<TaskSpend>,
    }
    let saved: WithSpend = serde_json::from_str(state).ok()?;
    saved.spend
}

/// One event's spend as a task's saved state keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EventSpend {
    /// The event's line.
    pub line: u64,
    /// What it spent.
    #[serde(flatten)]
    pub spend: SpendTotals,
    /// Whether a loop detection named it (it counts in the spend in loops).
    pub in_loops: bool,
}

/// What a task's saved state holds about its spend: its totals, its
/// costliest loops (at most two, costliest first) and its last
/// [`PRICED_EVENTS_KEPT`] events with usage (oldest first), for a host
/// that shows spend beside the audit log (a dashboard).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SavedSpend {
    /// The task's spend after its last event.
    pub usage: Spend,
    /// Its costliest loops so far.
    pub costliest_loops: Vec<LoopSpend>,
    /// Its last events with usage, oldest first.
    pub recent: Vec<EventSpend>,
}

/// The spend in a task's saved state ([`TaskRecord::state`](crate::TaskRecord::state)),
/// when an event of the task carried usage and the state is readable.
pub fn saved_spend_detail(state: &str) -> Option<SavedSpend> {
    let spend = saved_task_spend(state)?;
    Some(SavedSpend {
        usage: spend.report()?,
        costliest_loops: spend.costliest.clone(),
        recent: spend
            .recent
            .iter()
            .map(|priced| EventSpend {
                line: priced.line,
                spend: priced.sums.totals(),
                in_loops: priced.in_loops,
            })
            .collect(),
    })
}

/// Orders spends costliest first: by dollars where both have a cost, else
/// by tokens.
fn costlier(a: &SpendTotals, b: &SpendTotals) -> std::cmp::Ordering {
    match (a.cost_usd, b.cost_usd) {
        (Some(a), Some(b)) => a.total_cmp(&b),
        _ => a.tokens().cmp(&b.tokens()),
    }
}

/// The config key of a limit as it applies to a task of `task_type`: the
/// type's own when it sets this limit.
fn limit_key(task_type: Option<&str>, budget: &BudgetConfig, name: &str) -> String {
    let sets = |own: &BudgetLimits| match name {
        "max_tokens" => own.max_tokens.is_some(),
        "max_cost_usd" => own.max_cost_usd.is_some(),
        _ => own.max_loop_cost_usd.is_some(),
    };
    match task_type.filter(|task_type| budget.task_types.get(*task_type).is_some_and(sets)) {
        Some(task_type) => format!("budget.task_types.{task_type}.{name}"),
        None => format!("budget.{name}"),
    }
}

/// The reason a `budget` detection gives: the limit, the spend, and the
/// costliest loops with their lines.
fn budget_reason(crossing: &BudgetCrossing) -> String {
    let is_tokens = crossing.limit.ends_with("max_tokens");
    let amount = |value: f64| {
        if is_tokens {
            format!("{value:.0} tokens")
        } else {
            usd(value)
        }
    };
    let mut reason = format!(
        "the task spent {} against {} = {}",
        amount(crossing.spent),
        crossing.limit,
        amount(crossing.allowed)
    );
    let usage = &crossing.usage;
    if let Some(cost) = usage.total.cost_usd {
        let in_loops = usage.in_loops.cost_usd.unwrap_or(0.0);
        reason.push_str(&format!(
            "; in all {}, {} of it in loops",
            usd(cost),
            usd(in_loops)
        ));
    } else {
        reason.push_str(&format!(
            "; in all {} tokens, {} of them in loops",
            usage.total.tokens(),
            usage.in_loops.tokens()
        ));
    }
    for looped in &crossing.costliest_loops {
        reason.push_str(&format!(
            "; {} at lines {} cost {}",
            looped.kind,
            lines(&looped.evidence),
            spend_text(&looped.spend)
        ));
    }
    reason
}

fn spend_text(spend: &SpendTotals) -> String {
    match spend.cost_usd {
        Some(cost) => usd(cost),
        None => format!("{} tokens", spend.tokens()),
    }
}

fn lines(evidence: &[u64]) -> String {
    evidence
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saved_spend_detail_reads_the_totals_the_loops_and_the_kept_events() {
        let state = r#"{"spend":{
            "total":{"input_tokens":30,"output_tokens":6,"cost_nanos":3000},
            "in_loops":{"input_tokens":20,"output_tokens":4,"cost_nanos":2000},
            "recent":[
                [2, 10, 2, 1000, false],
                [5, 20, 4, 2000, true]],
            "costliest":[{"kind":"tool_repeat","evidence":[5],
                "input_tokens":20,"output_tokens":4,"cost_usd":0.000002}]}}"#;
        let saved = saved_spend_detail(state).expect("spend in the state");
        assert_eq!(saved.usage.total.input_tokens, 30);
        assert_eq!(saved.usage.in_loops.cost_usd, Some(0.000_002));
        assert_eq!(saved.costliest_loops.len(), 1);
        assert_eq!(saved.costliest_loops[0].evidence, vec![5]);
        let lines: Vec<(u64, bool)> = saved
            .recent
            .iter()
            .map(|event| (event.line, event.in_loops))
            .collect();
        assert_eq!(lines, vec![(2, false), (5, true)]);
        assert_eq!(saved.recent[1].spend.cost_usd, Some(0.000_002));
        assert_eq!(saved_spend(state), Some(saved.usage));
        assert!(saved_spend_detail(r#"{"detectors":{}}"#).is_none());
        assert!(saved_spend_detail("not json").is_none());
    }
}
