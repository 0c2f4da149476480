//! What a streamed replay keeps: counts per task, not the detections.
//!
//! The JSON report keeps every detection (they are history); the `jsonl`
//! and `text` formats stream them instead, so that a long trace of a stuck
//! task (a detection on every line) replays in bounded memory.

use std::collections::HashMap;

use loopguard_core_types::{Spend, TaskStatus};
use loopguard_host::ReplayItem;

/// Counts over a whole trace.
#[derive(Debug, Default)]
pub(crate) struct Summary {
    /// Valid events read.
    pub(crate) events: u64,
    /// Lines that were not events, and detector errors (as in the report's
    /// `errors`).
    pub(crate) errors: u64,
    /// Detections, all tasks.
    pub(crate) detections: u64,
    /// Every task seen, in order of first appearance.
    pub(crate) tasks: Vec<TaskSummary>,
    index: HashMap<String, usize>,
}

/// One task's outcome.
#[derive(Debug)]
pub(crate) struct TaskSummary {
    /// The task id.
    pub(crate) task: String,
    /// Its status after its last event.
    pub(crate) status: TaskStatus,
    /// Its loop count after its last event.
    pub(crate) loop_count: u32,
    /// Its pivots since its last reset.
    pub(crate) pivots: u32,
    /// Detections by kind, in order of first appearance.
    pub(crate) by_kind: Vec<(String, u64)>,
    /// What it spent (ruling 18), when any of its events carried `usage`.
    pub(crate) usage: Option<Spend>,
}

impl Summary {
    /// Counts one input line's answer.
    pub(crate) fn add(&mut self, item: ReplayItem<'_>) {
        let decision = match item {
            ReplayItem::Decision(decision) => decision,
            ReplayItem::Error(_) => {
                self.errors += 1;
                return;
            }
        };
        self.events += 1;
        self.errors += decision.errors.len() as u64;
        let at = match self.index.get(&decision.task) {
            Some(&at) => at,
            None => {
                self.index.insert(decision.task.clone(), self.tasks.len());
                self.tasks.push(TaskSummary {
                    task: decision.task.clone(),
                    status: decision.status,
                    loop_count: 0,
                    pivots: 0,
                    by_kind: Vec::new(),
                    usage: None,
                });
                self.tasks.len() - 1
            }
        };
        let Some(task) = self.tasks.get_mut(at) else {
            return;
        };
        task.status = decision.status;
        task.loop_count = decision.loop_count;
        task.pivots = decision.pivots;
        if decision.usage.is_some() {
            task.usage = decision.usage;
        }
        for detection in &decision.detections {
            self.detections += 1;
            match task
                .by_kind
                .iter_mut()
                .find(|(kind, _)| *kind == detection.kind)
            {
                Some((_, count)) => *count += 1,
                None => task.by_kind.push((detection.kind.to_string(), 1)),
            }
        }
    }

    /// What every task spent together, when any task's events carried
    /// `usage`.
    pub(crate) fn spend(&self) -> Option<Spend> {
        let mut spent = self.tasks.iter().filter_map(|task| task.usage).peekable();
        spent.peek()?;
        Some(spent.fold(Spend::default(), |mut sum, task| {
            let (total, in_loops) = (task.total, task.in_loops);
            sum.total
                .add(total.input_tokens, total.output_tokens, total.cost_usd);
            sum.in_loops.add(
                in_loops.input_tokens,
                in_loops.output_tokens,
                in_loops.cost_usd,
            );
            sum
        }))
    }

    /// Whether any task had a detection of `kind`.
    pub(crate) fn has_kind(&self, kind: &str) -> bool {
        self.tasks
            .iter()
            .any(|task| task.by_kind.iter().any(|(seen, _)| seen == kind))
    }
}
