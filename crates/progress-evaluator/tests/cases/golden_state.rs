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
//! LOOPGUARD_WRITE_FIXTURES=1 cargo test -p loopguard-progress-evaluator --test golden_state
//! ```
//!
//! A normal run never writes; a missing fixture fails with that command.

#[path = "../../../../tests/support/golden_state.rs"]
mod golden;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use loopguard_core_types::{Config, Detection, Event, EventKind};
use loopguard_detectors::ObservedEvent;
use loopguard_host::ExtensionDetector;
use loopguard_progress_evaluator::{
    GoalJudge, JudgeError, JudgeRequest, Judgement, ProgressEvaluator, STATE_FORMAT, Verdict,
};
use serde_json::{Value, json};

use golden::{never_filled, read_fixture, should_write, structure_differences, write_fixture};

/// The format the fixtures of this file were written in.
const FIXTURE_FORMAT: u32 = 1;

/// The command that writes missing fixtures (with the environment variable).
const WRITE_COMMAND: &str = "cargo test -p loopguard-progress-evaluator --test golden_state";

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

/// One fixture: a trace, the line after which every task was exported,
/// whether the evaluator had a judge, and what the exports hold there.
struct Golden {
    trace: &'static str,
    after_line: usize,
    judged: bool,
    holds: &'static str,
}

const GOLDEN: [Golden; 2] = [
    Golden {
        trace: "progress.jsonl",
        after_line: 20,
        judged: false,
        holds: "metrics, a rising run, differing failures' hashes, an external run; three \
                tasks (P, reset by completed, has nothing to export)",
    },
    Golden {
        trace: "progress_judge.jsonl",
        after_line: 9,
        judged: true,
        holds: "a goal, the failures the judge is shown, a judge note, the window since the \
                previous failure",
    },
];

impl Golden {
    fn fixture_path(&self) -> PathBuf {
        let stem = self.trace.trim_end_matches(".jsonl");
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/state")
            .join(format!("format-{FIXTURE_FORMAT}"))
            .join(format!("{stem}.after-line-{}.json", self.after_line))
    }

    /// The trace's events (it has no blank lines: index + 1 is the line).
    fn events(&self) -> Vec<Event> {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/traces")
            .join(self.trace);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let events: Vec<Event> = text
            .lines()
            .map(|line| Event::from_json(line).unwrap_or_else(|e| panic!("{line}: {e}")))
            .collect();
        assert!(
            events.len() > self.after_line,
            "{}: events after the split",
            self.trace
        );
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
        let path = self.fixture_path();
        if should_write(&path) {
            write_fixture(&path, &self.generate().await);
        }
        read_fixture(&path, WRITE_COMMAND)
    }

    /// What this build exports after the first `after_line` lines.
    async fn generate(&self) -> Value {
        let events = self.events();
        let before = self.evaluator();
        feed(&before, 1, &events[..self.after_line]).await;
        let tasks: BTreeSet<&str> = events.iter().map(|event| event.task.as_str()).collect();
        let mut states = Vec::new();
        for task in tasks {
            if let Some(state) = before.export_task(task).await {
                states.push(json!({"task": task, "state": state}));
            }
        }
        json!({
            "trace": self.trace,
            "after_line": self.after_line,
            "judge": self.judged.then_some("the scripted judge of golden_state.rs"),
            "holds": self.holds,
            "states": states,
        })
    }
}

/// Feeds `events` (input lines from `first`) to `evaluator` the way the
/// engine does, resetting a task on `completed` and `human`; the detections
/// of each event, as JSON.
async fn feed(evaluator: &ProgressEvaluator, first: u64, events: &[Event]) -> Vec<Value> {
    let mut said = Vec::new();
    for (index, event) in events.iter().enumerate() {
        let line = first + index as u64;
        let found: Vec<Detection> = evaluator
            .observe(&ObservedEvent::new(line, event))
            .await
            .unwrap_or_else(|e| panic!("line {line}: {e}"));
        if matches!(event.kind, EventKind::Completed | EventKind::Human { .. }) {
            evaluator.reset_task(&event.task).await;
        }
        said.push(serde_json::to_value(&found).unwrap_or_else(|e| panic!("{e}")));
    }
    said
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
    assert_eq!(
        STATE_FORMAT, FIXTURE_FORMAT,
        "the progress evaluator's saved-state format is now {STATE_FORMAT}: add fixtures of \
         format {STATE_FORMAT} and keep the format-{FIXTURE_FORMAT} ones, which must still be \
         read or be refused by name"
    );
}

#[tokio::test]
async fn exports_of_format_1_imported_continue_the_trace_like_one_whole_run() {
    for golden in &GOLDEN {
        let fixture = golden.fixture().await;
        assert_eq!(
            fixture["after_line"],
            json!(golden.after_line),
            "{}",
            golden.trace
        );
        let events = golden.events();
        let split = golden.after_line;
        let whole = feed(&golden.evaluator(), 1, &events).await;
        let after = golden.evaluator();
        for (task, state) in states_of(&fixture) {
            after
                .import_task(&task, state)
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", golden.fixture_path().display()));
        }
        let continued = feed(&after, split as u64 + 1, &events[split..]).await;
        assert_eq!(
            continued,
            whole[split..],
            "{} imported from {} detects otherwise than one whole run",
            golden.trace,
            golden.fixture_path().display()
        );
    }
}

#[tokio::test]
async fn the_export_right_after_an_import_has_the_fixtures_keys_at_every_level() {
    for golden in &GOLDEN {
        let fixture = golden.fixture().await;
        let after = golden.evaluator();
        for (task, state) in states_of(&fixture) {
            after
                .import_task(&task, state.clone())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let again = after
                .export_task(&task)
                .await
                .unwrap_or_else(|| panic!("{}: {task} exported", golden.trace));
            let differences = structure_differences(&state, &again);
            assert!(
                differences.is_empty(),
                "{} task {task}: the export of {} and this build's export after importing it \
                 differ in structure (a renamed or added field is a new format):\n{}",
                golden.trace,
                golden.fixture_path().display(),
                differences.join("\n")
            );
        }
    }
}

#[tokio::test]
async fn an_export_of_an_unknown_format_is_refused_by_name() {
    for golden in &GOLDEN {
        let fixture = golden.fixture().await;
        let after = golden.evaluator();
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
                golden.trace
            );
        }
    }
}

#[tokio::test]
async fn together_the_fixtures_fill_every_part_of_the_export() {
    let mut states = Vec::new();
    for golden in &GOLDEN {
        states.extend(
            states_of(&golden.fixture().await)
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
