//! The dashboard's spend (trace format 1.2, ruling 18), read from the
//! tasks' saved state in the store, as the rest of the dashboard is.
//!
//! - `GET /v1/dashboard` carries `spend`: the tokens and dollars of the
//!   tasks it lists (at most [`MAX_TASKS`](crate::dashboard::MAX_TASKS),
//!   those with the latest activity), the part of it spent in loops, and
//!   the [`COSTLIEST_LOOPS`] loops that cost most among them (each task
//!   keeps its two costliest).
//! - `GET /v1/tasks/{task}` carries `spend` for a task whose events carried
//!   usage: its costliest loops and its last
//!   [`PRICED_EVENTS_KEPT`](loopguard_host::PRICED_EVENTS_KEPT) events with
//!   usage, each with the task's running totals after it (what the task
//!   page draws as spend over time).

use std::cmp::Ordering;

use loopguard_core_types::{LoopSpend, SpendTotals};
use loopguard_host::{EventSpend, SavedSpend, Store, StoreError, saved_spend_detail};
use serde::Serialize;

/// The loops `GET /v1/dashboard` lists, costliest first.
pub(crate) const COSTLIEST_LOOPS: usize = 10;

/// `GET /v1/dashboard`'s `spend`.
#[derive(Debug, Default, Serialize)]
pub(crate) struct SpendOverview {
    /// The listed tasks whose events carried usage (the sums are theirs).
    tasks: usize,
    /// What they spent.
    total: SpendTotals,
    /// What they spent on events their loop detections named.
    in_loops: SpendTotals,
    /// Their loops that cost most, costliest first.
    costliest_loops: Vec<TaskLoop>,
}

/// One loop of one task and what its events cost.
#[derive(Debug, Serialize)]
struct TaskLoop {
    task: String,
    #[serde(flatten)]
    spend: LoopSpend,
}

/// The spend of `tasks`, read from their saved state.
pub(crate) async fn overview(
    store: &dyn Store,
    tasks: &[String],
) -> Result<SpendOverview, StoreError> {
    let mut view = SpendOverview::default();
    for task in tasks {
        if let Some(saved) = saved(store, task).await? {
            view.add(task, saved);
        }
    }
    view.costliest_loops
        .sort_by(|a, b| costlier(&b.spend.spend, &a.spend.spend));
    view.costliest_loops.truncate(COSTLIEST_LOOPS);
    Ok(view)
}

impl SpendOverview {
    /// Adds one task's spend and its loops.
    fn add(&mut self, task: &str, saved: SavedSpend) {
        self.tasks += 1;
        add(&mut self.total, &saved.usage.total);
        add(&mut self.in_loops, &saved.usage.in_loops);
        self.costliest_loops
            .extend(saved.costliest_loops.into_iter().map(|spend| TaskLoop {
                task: task.to_owned(),
                spend,
            }));
    }
}

/// `GET /v1/tasks/{task}`'s `spend`.
#[derive(Debug, Serialize)]
pub(crate) struct TaskSpendView {
    /// The task's costliest loops (at most two), costliest first.
    costliest_loops: Vec<LoopSpend>,
    /// Its last events with usage, oldest first.
    events: Vec<SpendPoint>,
}

/// One event with usage and the task's totals after it.
#[derive(Debug, Serialize)]
struct SpendPoint {
    #[serde(flatten)]
    event: EventSpend,
    /// The task's spend after this event.
    cumulative: SpendTotals,
}

/// The task's spend over its last events, when its events carried usage.
pub(crate) async fn task_spend(
    store: &dyn Store,
    task: &str,
) -> Result<Option<TaskSpendView>, StoreError> {
    Ok(saved(store, task).await?.map(|saved| TaskSpendView {
        events: points(&saved),
        costliest_loops: saved.costliest_loops,
    }))
}

/// The kept events with the running totals: the totals before the first
/// kept event are the task's totals less what the kept events spent.
fn points(saved: &SavedSpend) -> Vec<SpendPoint> {
    let total = saved.usage.total;
    let mut kept = SpendTotals::default();
    for event in &saved.recent {
        add(&mut kept, &event.spend);
    }
    let mut running = SpendTotals {
        input_tokens: total.input_tokens.saturating_sub(kept.input_tokens),
        output_tokens: total.output_tokens.saturating_sub(kept.output_tokens),
        cost_usd: total
            .cost_usd
            .map(|cost| (cost - kept.cost_usd.unwrap_or(0.0)).max(0.0)),
    };
    saved
        .recent
        .iter()
        .map(|event| {
            add(&mut running, &event.spend);
            SpendPoint {
                event: *event,
                cumulative: running,
            }
        })
        .collect()
}

/// The spend in the task's saved state, if the store keeps one and the
/// task's events carried usage.
async fn saved(store: &dyn Store, task: &str) -> Result<Option<SavedSpend>, StoreError> {
    let record = store.load_record(task).await?;
    Ok(record
        .and_then(|record| record.state)
        .and_then(|state| saved_spend_detail(&state)))
}

/// Adds `more` to `sum`.
fn add(sum: &mut SpendTotals, more: &SpendTotals) {
    sum.add(more.input_tokens, more.output_tokens, more.cost_usd);
}

/// Orders spends costliest first: by dollars where both have a cost, else
/// by tokens.
fn costlier(a: &SpendTotals, b: &SpendTotals) -> Ordering {
    match (a.cost_usd, b.cost_usd) {
        (Some(a), Some(b)) => a.total_cmp(&b),
        _ => a.tokens().cmp(&b.tokens()),
    }
}

#[cfg(test)]
mod tests {
    use loopguard_core_types::Spend;

    use super::*;

    fn totals(input_tokens: u64, output_tokens: u64, cost: f64) -> SpendTotals {
        SpendTotals {
            input_tokens,
            output_tokens,
            cost_usd: Some(cost),
        }
    }

    #[test]
    fn the_running_totals_start_from_what_the_kept_events_did_not_spend() {
        let saved = SavedSpend {
            usage: Spend {
                total: totals(1000, 100, 1.0),
                in_loops: totals(200, 20, 0.25),
            },
            costliest_loops: Vec::new(),
            recent: vec![
                EventSpend {
                    line: 7,
                    spend: totals(200, 20, 0.25),
                    in_loops: true,
                },
                EventSpend {
                    line: 9,
                    spend: totals(300, 30, 0.25),
                    in_loops: false,
                },
            ],
        };
        let points = points(&saved);
        assert_eq!(points.len(), 2);
        assert_eq!(points[0].cumulative.input_tokens, 700);
        assert_eq!(points[1].cumulative.input_tokens, 1000);
        assert_eq!(points[1].cumulative.output_tokens, 100);
        let last = points[1].cumulative.cost_usd.unwrap_or_default();
        assert!((last - 1.0).abs() < 1e-9, "{last}");
    }
}
