//! Golden saved state of the semantic detectors, format 1: checked-in
//! exports written by an earlier build, imported by this one.
//!
//! # What is frozen
//!
//! What `export_task` gives for a task and `import_task` reads back
//! (`loopguard_semantic::engine::STATE_FORMAT` 1), for each part that keeps
//! per-task state: `collaboration_loop` (its pairs' request windows),
//! `repeated_query` (the task's metrics and its recipients' query windows)
//! and the topic assigner (`topics`: ids, labels and members). Texts, never
//! vectors: the embedder does not change the format, so the toy embedder of
//! `restart.rs` (`Words`) writes and reads these fixtures without the model.
//!
//! Each fixture in `tests/fixtures/state/format-1/` holds every export of
//! every task after the first `after_line` lines of a semantic trace of the
//! workspace's `tests/traces/` (or of `restart.rs`'s busy sequence, which
//! fills what the traces leave empty). For each:
//!
//! - imported into fresh detectors, the rest of the trace must give what one
//!   whole run gives, computed live here (behaviour may change; the reading
//!   of the format may not);
//! - the export right after the import must have the fixture's key
//!   structure (same keys at every level);
//! - the same export with `"format": 99` is refused by name (the detector,
//!   the task, the format, and that this loopguard reads format 1).
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
//! LOOPGUARD_WRITE_FIXTURES=1 cargo test -p loopguard-semantic --test tests golden_state
//! ```
//!
//! A normal run never writes; a missing fixture fails with that command.

#[path = "../../../tests/support/golden_state.rs"]
pub(crate) mod golden;

use std::collections::{BTreeSet, HashMap};

use loopguard_config::Config;
use loopguard_core_types::Event;
use loopguard_semantic::engine::STATE_FORMAT;
use loopguard_semantic::{SemanticDetectors, SemanticLimits};
use serde_json::{Value, json};

use crate::restart::{
    Said, busy_sequence, canonical, export_all, feed, import_one, json_of, trace, words_service,
};
use golden::{Fixtures, Golden, never_filled};

/// The fixtures of this file: the format they were written in, and the
/// command that writes missing ones (with the environment variable).
const FIXTURES: Fixtures = Fixtures {
    format: 1,
    write_command: "cargo test -p loopguard-semantic --test tests golden_state",
    state: "the semantic detectors' saved state",
};

/// The fixtures, each of a semantic trace with every task's state
/// exported after `after_line`.
const GOLDEN: [Golden; 4] = [
    Golden {
        trace: "semantic_collaboration.jsonl",
        after_line: 6,
        holds: "collaboration request windows with and without ids, two tasks; their topics",
    },
    Golden {
        trace: "semantic_topic_cycle.jsonl",
        after_line: 3,
        holds: "query windows of three recipients; one topic per handoff (toy embedder)",
    },
    Golden {
        trace: "repeated_query.jsonl",
        after_line: 5,
        holds: "query windows and the task's metrics (files_changed)",
    },
    Golden {
        trace: BUSY_SEQUENCE,
        after_line: 14,
        holds: "topics joined by reworded texts (several members), metrics with tests_failed \
                and a coverage, two tasks",
    },
];

/// Not a trace file: `restart.rs`'s `busy_sequence`, which fills the parts
/// the traces leave empty (joined topics, every metric).
const BUSY_SEQUENCE: &str = "busy_sequence";

/// The detectors of these fixtures: the toy embedder, default limits.
fn detectors() -> SemanticDetectors {
    SemanticDetectors::with_limits(
        &Config::default(),
        Some(words_service()),
        SemanticLimits::default(),
    )
}

impl Golden {
    fn events(&self) -> Vec<Event> {
        let events = if self.trace == BUSY_SEQUENCE {
            busy_sequence()
        } else {
            trace(self.trace)
        };
        assert!(
            events.len() > self.after_line,
            "{}: events after the split",
            self.trace
        );
        events
    }

    /// The checked-in fixture, written first if missing and writing is on.
    async fn fixture(&self) -> Value {
        FIXTURES.fixture(self, self.generate()).await
    }

    /// What this build exports after the first `after_line` lines.
    async fn generate(&self) -> Value {
        let events = self.events();
        let before = detectors();
        feed(&before, 1, &events[..self.after_line]).await;
        let tasks: BTreeSet<String> = events.iter().map(|event| event.task.clone()).collect();
        let states: Vec<Value> = export_all(&before, &tasks)
            .await
            .into_iter()
            .map(|(task, detector, state)| json!({"task": task, "detector": detector, "state": state}))
            .collect();
        json!({
            "trace": self.trace,
            "after_line": self.after_line,
            "embedder": "the toy bag of words of restart.rs (Words), default limits",
            "holds": self.holds,
            "states": states,
        })
    }
}

/// The fixture's exports: (task, detector, state).
pub(crate) fn states_of(fixture: &Value) -> Vec<(String, String, Value)> {
    fixture["states"]
        .as_array()
        .unwrap_or_else(|| panic!("a fixture has states"))
        .iter()
        .map(|saved| {
            let text = |key: &str| {
                saved[key]
                    .as_str()
                    .unwrap_or_else(|| panic!("a {key}"))
                    .to_owned()
            };
            (text("task"), text("detector"), saved["state"].clone())
        })
        .collect()
}

/// What the detectors said, as JSON, with each topic id replaced by the
/// index of the event where the id first appears in `said`: ids differ
/// between processes, and within a task they only tell topics apart.
fn comparable(said: &[Said]) -> Vec<Value> {
    json_of(&canonical(said, 0))
}

#[test]
fn the_fixtures_are_of_the_format_this_build_writes() {
    FIXTURES.assert_written_format(STATE_FORMAT);
}

#[tokio::test]
async fn exports_of_format_1_imported_continue_the_trace_like_one_whole_run() {
    for golden in &GOLDEN {
        let fixture = golden.fixture().await;
        FIXTURES.assert_split(golden, &fixture);
        let events = golden.events();
        let split = golden.after_line;
        let whole = feed(&detectors(), 1, &events).await;
        let after = detectors();
        for (task, detector, state) in states_of(&fixture) {
            import_one(&after, &detector, &task, state)
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", FIXTURES.path(golden).display()));
        }
        let continued = feed(&after, split as u64 + 1, &events[split..]).await;
        FIXTURES.assert_continues_like_one_run(
            golden,
            &comparable(&continued),
            &comparable(&whole[split..]),
        );
    }
}

#[tokio::test]
async fn the_export_right_after_an_import_has_the_fixtures_keys_at_every_level() {
    for golden in &GOLDEN {
        let fixture = golden.fixture().await;
        let saved = states_of(&fixture);
        let after = detectors();
        for (task, detector, state) in &saved {
            import_one(&after, detector, task, state.clone())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let tasks: BTreeSet<String> = saved.iter().map(|(task, _, _)| task.clone()).collect();
        let exported = export_all(&after, &tasks).await;
        for (task, detector, state) in &saved {
            let again = exported
                .iter()
                .find(|(t, d, _)| t == task && d == detector)
                .map(|(_, _, state)| state)
                .unwrap_or_else(|| panic!("{}: {detector} of {task} exported", golden.trace));
            FIXTURES.assert_same_structure(
                golden,
                &format!("{detector} of task {task}"),
                state,
                again,
            );
        }
    }
}

#[tokio::test]
async fn an_export_of_an_unknown_format_is_refused_by_name() {
    for golden in &GOLDEN {
        let fixture = golden.fixture().await;
        let after = detectors();
        for (task, detector, mut state) in states_of(&fixture) {
            state["format"] = json!(99);
            let error = import_one(&after, &detector, &task, state)
                .await
                .expect_err("format 99 is refused");
            assert_eq!(
                error.to_string(),
                format!(
                    "{detector}: task '{task}'s saved state has format 99, and this loopguard \
                     reads format {STATE_FORMAT}; the task starts afresh"
                ),
                "{}",
                golden.trace
            );
        }
    }
}

#[tokio::test]
async fn together_the_fixtures_fill_every_part_of_each_export() {
    let mut by_detector: HashMap<String, Vec<Value>> = HashMap::new();
    for golden in &GOLDEN {
        for (_, detector, state) in states_of(&golden.fixture().await) {
            by_detector.entry(detector).or_default().push(state);
        }
    }
    let mut names: Vec<String> = detectors()
        .extensions()
        .iter()
        .map(|extension| extension.name().to_owned())
        .collect();
    names.push("topics".to_owned());
    for name in names {
        let states = by_detector
            .get(&name)
            .unwrap_or_else(|| panic!("no fixture holds an export of {name}"));
        let all: Vec<&Value> = states.iter().collect();
        let unfilled = never_filled(&all);
        assert!(
            unfilled.is_empty(),
            "parts of {name}'s export that no fixture fills: {unfilled:?}"
        );
    }
}
