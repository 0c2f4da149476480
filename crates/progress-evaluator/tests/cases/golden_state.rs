//! Golden saved state of the progress evaluator, format 1: checked-in
//! exports written by an earlier build, imported by this one.
//!
//! # What is frozen
//!
//! What `export_task` gives for a task and `import_task` reads back
//! (`src/saved.rs`, [`STATE_FORMAT`] 1): the latest metrics, the rising run,
//! the window since the previous failure, the recent failures' hashes, the
//! stalled and external runs with their evidence, and, with a judge, the
//! goal, the failures the judge is shown and its notes.
//!
//! Each fixture in `tests/fixtures/state/format-1/` holds every task's
//! export after the first `after_line` lines of a trace of the workspace's
//! `tests/traces/`, with or without a judge (a scripted one whose answer
//! depends only on the question). For each:
//!
//! - imported into a fresh evaluator, the rest of the trace must give the
//!   detections of one whole run, computed live here, never checked in:
//!   how loops are counted may change (ruling 13 of the trace format), the
//!   reading of the format may not;
//! - the export right after the import must have the fixture's key
//!   structure (same keys at every level);
//! - the same export with `"format": 99` is refused by name.
//!
//! # Changing the format
//!
//! Changing the format means a new format number and a new fixture; the
//! old one stays and must still be read or refused by name. Never edit or
//! regenerate a fixture of a format that has shipped.
//!
//! # Writing a fixture
//!
//! Missing fixtures are written (existing ones are never overwritten) by
//!
//! ```text
//! LOOPGUARD_WRITE_FIXTURES=1 cargo test -p loopguard-progress-evaluator --test tests golden_state
//! ```
//!
//! A normal run never writes; a missing fixture fails with that command.

#[path = "../../../../tests/support/golden_state.rs"]
mod golden;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use loopguard_config::Config;
use loopguard_core_types::Event;
use loopguard_host::ExtensionDetector;
use loopguard_progress_evaluator::{
    GoalJudge, JudgeError, JudgeRequest, Judgement, ProgressEvaluator, STATE_FORMAT, Verdict,
};
use serde_json::{Value, json};

use crate::support::{event, feed, workspace_file};
use golden::{Fixtures, Golden, never_filled};

/// The fixtures of this file: the format they were written in, and the
/// command that writes missing ones (with the environment variable).
const FIXTURES: Fixtures = Fixtures {
    format: 1,
    write_command: "cargo test -p loopguard-progress-evaluator --test tests golden_state",
    state: "the progress evaluator's saved state",
};

/// A judge whose answer depends only on the failure's message: the same
/// before and after a restart (its answers are not part of the state).
#[derive(Debug)]
struct Scripted;

#[async_trait]
impl GoalJudge for Scripted {
    async fn judge(&self, request: &JudgeRequest) -> Result<Judgement, JudgeError> {
        let error = request.current.error.as_str();
        let says = |verdict, reason: &str| {
            Ok(Judgement {
                verdict,
                reason: format!("{reason} (after {} failures)", request.history.len()),
            })
        };
        if error.contains("duplicate") || error.contains("third") {
            Err(JudgeError::Timeout(Duration::from_secs(20)))
        } else if error.contains("second") {
            says(Verdict::Regressive, "each fix breaks another case")
        } else if error.contains('=') {
            says(Verdict::NoProgress, "the same parser bug again")
        } else {
            says(Verdict::Progress, "closer")
        }
    }

    fn describe(&self) -> String {
        "model scripted".to_owned()
    }
}

/// One fixture, and whether the evaluator had a judge.
struct Case {
    golden: Golden,
    judged: bool,
}

/// The fixtures, each of a trace with every task exported after
/// `after_line`.
const CASES: [Case; 2] = [
    Case {
        golden: Golden {
            trace: "progress.jsonl",
            after_line: 20,
            holds: "metrics, a rising run, differing failures' hashes, an external run; three \
                    tasks (P, reset by completed, has nothing to export)",
        },
        judged: false,
    },
    Case {
        golden: Golden {
            trace: "progress_judge.jsonl",
            after_line: 9,
            holds: "a goal, the failures the judge is shown, a judge note, the window since \
                    the previous failure",
        },
        judged: true,
    },
];

impl Case {
    /// The trace's events (it has no blank lines: index + 1 is the line).
    fn events(&self) -> Vec<Event> {
        let Golden {
            trace, after_line, ..
        } = self.golden;
        let events: Vec<Event> = workspace_file(&format!("traces/{trace}"))
            .lines()
            .map(event)
            .collect();
        assert!(events.len() > after_line, "{trace}: events after the split");
        events
    }

    fn evaluator(&self) -> ProgressEvaluator {
        let evaluator = ProgressEvaluator::new(&Config::default());
        if self.judged {
            evaluator.with_judge(Arc::new(Scripted))
        } else {
            evaluator
        }
    }

    /// The checked-in fixture, written first if missing and writing is on.
    async fn fixture(&self) -> Value {
        FIXTURES.fixture(&self.golden, self.generate()).await
    }

    /// What this build exports after the first `after_line` lines.
    async fn generate(&self) -> Value {
        let events = self.events();
        let before = self.evaluator();
        feed(&before, 1, &events[..self.golden.after_line]).await;
        let tasks: BTreeSet<&str> = events.iter().map(|event| event.task.as_str()).collect();
        let mut states = Vec::new();
        for task in tasks {
            if let Some(state) = before.export_task(task).await {
                states.push(json!({"task": task, "state": state}));
            }
        }
        json!({
            "trace": self.golden.trace,
            "after_line": self.golden.after_line,
            "judge": self.judged.then_some("the scripted judge of golden_state.rs"),
            "holds": self.golden.holds,
            "states": states,
        })
    }
}

/// The fixture's exports: (task, state).
fn states_of(fixture: &Value) -> Vec<(String, Value)> {
    fixture["states"]
        .as_array()
        .unwrap_or_else(|| panic!("a fixture has states"))
        .iter()
        .map(|saved| {
            let task = saved["task"].as_str().unwrap_or_else(|| panic!("a task"));
            (task.to_owned(), saved["state"].clone())
        })
        .collect()
}

#[test]
fn the_fixtures_are_of_the_format_this_build_writes() {
    FIXTURES.assert_written_format(STATE_FORMAT);
}

#[tokio::test]
async fn exports_of_format_1_imported_continue_the_trace_like_one_whole_run() {
    for case in &CASES {
        let golden = &case.golden;
        let fixture = case.fixture().await;
        FIXTURES.assert_split(golden, &fixture);
        let events = case.events();
        let split = golden.after_line;
        let whole = feed(&case.evaluator(), 1, &events).await;
        let after = case.evaluator();
        for (task, state) in states_of(&fixture) {
            after
                .import_task(&task, state)
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", FIXTURES.path(golden).display()));
        }
        let continued = feed(&after, split as u64 + 1, &events[split..]).await;
        FIXTURES.assert_continues_like_one_run(golden, &continued, &whole[split..]);
    }
}

#[tokio::test]
async fn the_export_right_after_an_import_has_the_fixtures_keys_at_every_level() {
    for case in &CASES {
        let fixture = case.fixture().await;
        let after = case.evaluator();
        for (task, state) in states_of(&fixture) {
            after
                .import_task(&task, state.clone())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let again = after
                .export_task(&task)
                .await
                .unwrap_or_else(|| panic!("{}: {task} exported", case.golden.trace));
            FIXTURES.assert_same_structure(&case.golden, &format!("task {task}"), &state, &again);
        }
    }
}

#[tokio::test]
async fn an_export_of_an_unknown_format_is_refused_by_name() {
    for case in &CASES {
        let fixture = case.fixture().await;
        let after = case.evaluator();
        for (task, mut state) in states_of(&fixture) {
            state["format"] = json!(99);
            let error = after
                .import_task(&task, state)
                .await
                .expect_err("format 99 is refused");
            assert_eq!(
                error.to_string(),
                format!(
                    "progress: task '{task}'s saved state has format 99, and this loopguard \
                     reads format {STATE_FORMAT}; the task starts afresh"
                ),
                "{}",
                case.golden.trace
            );
        }
    }
}

#[tokio::test]
async fn together_the_fixtures_fill_every_part_of_the_export() {
    let mut states = Vec::new();
    for case in &CASES {
        states.extend(
            states_of(&case.fixture().await)
                .into_iter()
                .map(|(_, state)| state),
        );
    }
    let all: Vec<&Value> = states.iter().collect();
    let unfilled = never_filled(&all);
    assert!(
        unfilled.is_empty(),
        "parts of the export that no fixture fills: {unfilled:?}"
    );
    // The keys left out when empty appear somewhere too, so that renaming
    // one of them fails the structure test.
    let keys = |state: &Value, at: &str| -> BTreeSet<String> {
        state[at]
            .as_object()
            .into_iter()
            .flat_map(|map| map.keys().cloned())
            .collect()
    };
    let mut seen = BTreeSet::new();
    let mut metrics = BTreeSet::new();
    for state in &states {
        seen.extend(
            state
                .as_object()
                .into_iter()
                .flat_map(|map| map.keys().cloned()),
        );
        metrics.extend(keys(state, "metrics"));
    }
    for optional in [
        "goal",
        "previous_failure",
        "last_progress",
        "failures",
        "judge_notes",
    ] {
        assert!(
            seen.contains(optional),
            "no fixture holds {optional}: {seen:?}"
        );
    }
    for metric in ["tests_total", "tests_failed", "coverage"] {
        assert!(
            metrics.contains(metric),
            "no fixture holds metric {metric}: {metrics:?}"
        );
    }
}
