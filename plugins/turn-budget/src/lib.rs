//! `turn_budget`: a per-task event budget, like a graph's recursion limit.
//!
//! Every event of a task counts against its budget (`completed` and
//! `human` reset the count). The first event past the budget is a
//! `turn_budget` detection with action `escalate`: the task goes behind
//! the human gate, and the human's `human` event starts a fresh budget. It
//! fires once per budget, not on every later event.
//!
//! It shows how a plugin's config flows from loopguard's TOML: the
//! `config` table of the plugin's `[[plugins]]` entry arrives in
//! [`Detector::new`] as JSON, and a bad value stops loopguard at start-up
//! with a message naming the key.
//!
//! ```toml
//! [[plugins]]
//! path = "target/release/libloopguard_plugin_turn_budget.so"
//! config = { budget = 40 }   # events per task before escalating (default 25)
//! ```
//!
//! With a durable store, each task's count is exported after every event
//! and imported after a restart (`{"format":1,"events":...,"first_line":...}`),
//! so a restart does not refill a budget.
//!
//! ```
//! use loopguard_plugin_api::{Action, Event};
//! use loopguard_plugin_api::testing::Harness;
//! use loopguard_plugin_turn_budget::TurnBudget;
//!
//! let mut plugin = Harness::<TurnBudget>::new(r#"{"budget": 2}"#)?;
//! let hop = Event::from_json(r#"{"type":"transition","task":"T1","from":"plan","to":"act"}"#)?;
//! assert!(plugin.observe(1, &hop)?.is_empty());
//! assert!(plugin.observe(2, &hop)?.is_empty());
//! let found = plugin.observe(3, &hop)?;
//! assert_eq!((found[0].kind.as_ref(), found[0].action), ("turn_budget", Action::Escalate));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

use std::collections::HashMap;

use loopguard_plugin_api::serde::{Deserialize, Serialize};
use loopguard_plugin_api::serde_json::{self, Value};
use loopguard_plugin_api::{Action, Detection, Detector, Event, EventKind, Severity};

/// The detection kind this plugin reports.
pub const KIND: &str = "turn_budget";

/// The default budget: LangGraph's default recursion limit.
pub const DEFAULT_BUDGET: u64 = 25;

/// The budget detector: per task, the events seen since the last reset.
#[derive(Debug)]
pub struct TurnBudget {
    budget: u64,
    tasks: HashMap<String, Spent>,
}

/// The version of the task state [`Detector::export_task`] writes.
const STATE_FORMAT: u32 = 1;

/// What one task has spent.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(crate = "loopguard_plugin_api::serde", deny_unknown_fields)]
struct Spent {
    events: u64,
    first_line: u64,
}

/// The plugin's config table.
#[derive(Debug, Deserialize)]
#[serde(crate = "loopguard_plugin_api::serde", default, deny_unknown_fields)]
struct Config {
    budget: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            budget: DEFAULT_BUDGET,
        }
    }
}

impl Detector for TurnBudget {
    const NAME: &'static str = "turn_budget";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const KINDS: &'static [&'static str] = &[KIND];
    const DESCRIPTION: &'static str =
        "a per-task event budget (config `budget`, default 25); past it, escalate";

    fn new(config: Value) -> Result<Self, String> {
        let config: Config =
            serde_json::from_value(config).map_err(|err| format!("turn_budget config: {err}"))?;
        if config.budget == 0 {
            return Err(
                "turn_budget config: `budget` = 0 is not valid: must be at least 1".to_owned(),
            );
        }
        Ok(TurnBudget {
            budget: config.budget,
            tasks: HashMap::new(),
        })
    }

    fn observe(&mut self, line: u64, event: &Event) -> Vec<Detection> {
        if matches!(event.kind, EventKind::Completed | EventKind::Human { .. }) {
            // The reset itself is not spending; `reset_task` follows.
            return Vec::new();
        }
        let spent = match self.tasks.get_mut(&event.task) {
            Some(spent) => spent,
            None => self.tasks.entry(event.task.clone()).or_insert(Spent {
                events: 0,
                first_line: line,
            }),
        };
        spent.events = spent.events.saturating_add(1);
        if spent.events != self.budget.saturating_add(1) {
            return Vec::new();
        }
        let mut detection = Detection::new(
            Self::NAME,
            KIND,
            Severity::High,
            Action::Escalate,
            vec![spent.first_line, line],
            format!(
                "the task used its budget of {} events (since line {}) without completing",
                self.budget, spent.first_line
            ),
        );
        detection.count = Some(u32::try_from(spent.events).unwrap_or(u32::MAX));
        vec![detection]
    }

    fn reset_task(&mut self, task: &str) {
        self.tasks.remove(task);
    }

    fn export_task(&self, task: &str) -> Option<Value> {
        let spent = self.tasks.get(task)?;
        Some(serde_json::json!({
            "format": STATE_FORMAT,
            "events": spent.events,
            "first_line": spent.first_line,
        }))
    }

    fn import_task(&mut self, task: &str, mut state: Value) -> Result<(), String> {
        let unreadable =
            |why: String| format!("turn_budget: task {task}'s saved state is not readable: {why}");
        let format = state
            .as_object_mut()
            .and_then(|state| state.remove("format"));
        if format.as_ref().and_then(Value::as_u64) != Some(u64::from(STATE_FORMAT)) {
            return Err(unreadable(format!(
                "format {} (this version reads format {STATE_FORMAT})",
                format.map_or_else(|| "missing".to_owned(), |f| f.to_string())
            )));
        }
        let spent: Spent =
            serde_json::from_value(state).map_err(|err| unreadable(err.to_string()))?;
        self.tasks.insert(task.to_owned(), spent);
        Ok(())
    }
}

loopguard_plugin_api::export_detector!(TurnBudget);

#[cfg(test)]
mod tests {
    use super::*;
    use loopguard_plugin_api::testing::{CallError, Harness};

    fn event(json: &str) -> Event {
        Event::from_json(json).expect("a valid event")
    }

    fn hop(task: &str) -> Event {
        event(&format!(
            r#"{{"type":"handoff","task":"{task}","from":"a","to":"b"}}"#
        ))
    }

    #[test]
    fn the_first_event_past_the_budget_escalates_once() {
        let mut plugin = Harness::<TurnBudget>::new(r#"{"budget":3}"#).expect("created");
        let mut fired = Vec::new();
        for line in 1..=8 {
            for detection in plugin.observe(line, &hop("T")).expect("observes") {
                assert_eq!(detection.action, Action::Escalate);
                assert_eq!(detection.kind, KIND);
                fired.push((line, detection.evidence, detection.count));
            }
        }
        assert_eq!(fired, [(4, vec![1, 4], Some(4))]);
    }

    #[test]
    fn tasks_have_their_own_budgets_and_a_reset_refills_one() {
        let mut plugin = Harness::<TurnBudget>::new(r#"{"budget":2}"#).expect("created");
        let mut fired = Vec::new();
        let human = event(r#"{"type":"human","task":"T","note":"go on"}"#);
        let script: [(&Event, Option<&str>); 9] = [
            (&hop("T"), None),
            (&hop("U"), None),
            (&hop("T"), None),
            (&human, Some("T")),
            (&hop("T"), None),
            (&hop("U"), None),
            (&hop("T"), None),
            (&hop("U"), None),
            (&hop("T"), None),
        ];
        for (index, (event, reset)) in script.into_iter().enumerate() {
            let line = index as u64 + 1;
            for detection in plugin.observe(line, event).expect("observes") {
                fired.push((event.task.clone(), line, detection.evidence));
            }
            if let Some(task) = reset {
                plugin.reset_task(task).expect("resets");
            }
        }
        assert_eq!(
            fired,
            [
                ("U".to_owned(), 8, vec![2, 8]),
                ("T".to_owned(), 9, vec![5, 9])
            ]
        );
    }

    #[test]
    fn a_restart_does_not_refill_a_budget() {
        let mut first = Harness::<TurnBudget>::new(r#"{"budget":2}"#).expect("created");
        assert_eq!(first.export_task("T"), Ok(None));
        first.observe(4, &hop("T")).expect("observes");
        first.observe(5, &hop("T")).expect("observes");
        let state = first.export_task("T").expect("exports").expect("a count");
        assert_eq!(
            state,
            serde_json::json!({"format": 1, "events": 2, "first_line": 4})
        );
        let mut second = Harness::<TurnBudget>::new(r#"{"budget":2}"#).expect("created");
        second.import_task("T", &state).expect("imports");
        let found = second.observe(6, &hop("T")).expect("observes");
        assert_eq!(found[0].evidence, [4, 6]);
        for bad in [
            serde_json::json!({"format": 2, "events": 2, "first_line": 4}),
            serde_json::json!({"events": 2, "first_line": 4}),
            serde_json::json!({"format": 1, "events": -1, "first_line": 4}),
            serde_json::json!("nope"),
        ] {
            let err = second.import_task("T", &bad).expect_err("refused");
            assert!(
                matches!(&err, CallError::Error(message)
                    if message.starts_with("turn_budget: task T's saved state is not readable: ")),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn the_default_is_25_and_bad_config_names_the_key() {
        let mut plugin = Harness::<TurnBudget>::new("").expect("created");
        let fired: Vec<u64> = (1..=30)
            .filter(|line| {
                !plugin
                    .observe(*line, &hop("T"))
                    .expect("observes")
                    .is_empty()
            })
            .collect();
        assert_eq!(fired, [DEFAULT_BUDGET + 1]);
        for (bad, key) in [
            (r#"{"budget":0}"#, "`budget` = 0"),
            (r#"{"budget":-1}"#, "invalid value"),
            (r#"{"limit":5}"#, "unknown field `limit`"),
        ] {
            match Harness::<TurnBudget>::new(bad) {
                Err(CallError::Error(message)) => {
                    assert!(message.starts_with("turn_budget config"), "{message}");
                    assert!(message.contains(key), "{bad}: {message}");
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }
}
