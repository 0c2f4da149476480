//! Golden saved state, format 1: checked-in task records that a durable
//! store holds, written by an earlier build, read by this one.
//!
//! # What is frozen
//!
//! The JSON text the engine hands a durable store as a task's detector
//! state (`TaskRecord::state`, `STATE_FORMAT` 1): `format`, `builtin` (the
//! private fields of the ten built-in detectors' per-task state, down to
//! every nested key), the open cycle-log `episode`, and the task snapshot
//! around it. Renaming a field, even one marked `#[serde(default)]`,
//! changes that format; a test where one build writes and reads the state
//! (the split replays of `host.rs`) cannot see it, these do.
//!
//! Each fixture in `tests/fixtures/state/format-1/` is every task record of
//! a durable store after the first `after_line` lines of a trace of the
//! workspace's `tests/traces/`, split in the middle of its loop. For each:
//!
//! - the records are put in a fresh store and the rest of the trace is
//!   replayed by a fresh engine: its decisions must be those of one whole
//!   run of the trace, computed live here (so detector behaviour may
//!   change; only the reading of the saved format is frozen);
//! - the first state the engine writes for each task after restoring it
//!   must have the fixture's key structure (same keys at every level);
//! - the same record with `"format": 99` is refused by name: the decision
//!   says which format it has and that this loopguard reads 1.
//!
//! Together the fixtures fill every part of the state (checked below), so
//! a renamed key anywhere in it fails a test.
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
//! LOOPGUARD_WRITE_FIXTURES=1 cargo test -p loopguard-host --test golden_state
//! ```
//!
//! A normal run never writes; a missing fixture fails with that command.

#[path = "../../../tests/support/golden_state.rs"]
mod golden;

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use loopguard_config::{Config, CycleCount};
use loopguard_core_types::Decision;
use loopguard_detectors::BuiltinState;
use loopguard_host::{
    CycleEpisode, Durability, LoopGuard, MemoryStore, ReplayItem, STATE_FORMAT, Store, StoreError,
    TaskCommit, TaskRecord, TaskSnapshot, replay_each_from,
};
use parking_lot::Mutex;
use serde_json::{Value, json};

use golden::{Fixtures, Golden, never_filled};

/// The fixtures of this file: the format they were written in, and the
/// command that writes missing ones (with the environment variable).
const FIXTURES: Fixtures = Fixtures {
    format: 1,
    write_command: "cargo test -p loopguard-host --test golden_state",
    state: "the saved state",
};

/// The fixtures, each of a trace of `tests/traces/` saved by a durable
/// store after `after_line`. Each split is in the middle of a loop, and every task in
/// the store has events after it (so the engine writes its state again).
const GOLDEN: [Golden; 14] = [
    Golden {
        trace: "exact_failure.jsonl",
        after_line: 5,
        holds: "recent failure hashes with ids, the progress metrics, an open episode",
    },
    Golden {
        trace: "human_gate.jsonl",
        after_line: 4,
        holds: "a task escalated at the gate, its open episode marked escalated",
    },
    Golden {
        trace: "agent_pair_window.jsonl",
        after_line: 4,
        holds: "timed pair, cycle and topic windows with their sweep times",
    },
    Golden {
        trace: "multi_agent.jsonl",
        after_line: 5,
        holds: "recent handoffs and a known multi-agent cycle",
    },
    Golden {
        trace: "topic_cycle.jsonl",
        after_line: 5,
        holds: "topic windows of explicit and normalized topics, two tasks",
    },
    Golden {
        trace: "phase_visits.jsonl",
        after_line: 10,
        holds: "phase visit counters, transition counts and edges",
    },
    Golden {
        trace: "oscillation.jsonl",
        after_line: 3,
        holds: "an oscillation's recent hops",
    },
    Golden {
        trace: "repeated_output.jsonl",
        after_line: 7,
        holds: "failed turns, the last output's hash and its evidence row, pivots spent",
    },
    Golden {
        trace: "edge_limit_progress.jsonl",
        after_line: 8,
        holds: "edge counts reset by progress, the latest metrics",
    },
    Golden {
        trace: "progress.jsonl",
        after_line: 3,
        holds: "the latest metrics with a coverage, failures between progress",
    },
    Golden {
        trace: "tester_run_numbers.jsonl",
        after_line: 5,
        holds: "exchanges' texts with their agents, a pair window with a repeat's earlier exchange",
    },
    Golden {
        trace: "tool_rephrase.jsonl",
        after_line: 7,
        holds: "each tool's previous query, a run of rephrases with its wordings and references, \
                a short result and a stale call",
    },
    Golden {
        trace: "spend_budget.jsonl",
        after_line: 10,
        holds: "spend totals and in loops, the priced recent events, the costliest loops, a \
                crossed budget, and an allowance granted by a human",
    },
    Golden {
        trace: "hub_team.jsonl",
        after_line: 8,
        holds: "a recognized hub's agents, partners and texts (trace format 1.1's counting)",
    },
];

/// The fixtures written since trace format 1.2: the others were written
/// when every exchange counted, and a state saved then holds no texts of
/// the exchanges before it, so it continues like one whole run only under
/// that counting (`cycles.count = "every"`).
const WRITTEN_SINCE_1_2: [&str; 3] = [
    "tester_run_numbers.jsonl",
    "tool_rephrase.jsonl",
    "spend_budget.jsonl",
];

/// The budget and price `spend_budget.jsonl` is replayed with.
const SPEND_CONFIG: &str = "[budget]\nmax_loop_cost_usd = 0.05\n\
                            [pricing.gpt-4o-mini]\ninput_per_mtok = 0.15\noutput_per_mtok = 0.6\n";

/// The config `golden` is replayed with: its fixture's counting.
fn config_of(golden: &Golden) -> Config {
    let mut config = Config::default();
    if !WRITTEN_SINCE_1_2.contains(&golden.trace) {
        config.cycles.count = CycleCount::Every;
    }
    if golden.trace == "spend_budget.jsonl" {
        config = Config::from_toml_str(SPEND_CONFIG).unwrap_or_else(|e| panic!("{e}"));
    }
    config
}

impl Golden {
    /// The trace's bytes: lines `1..=after_line`, and the rest.
    fn trace_halves(&self) -> (Vec<u8>, Vec<u8>) {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/traces")
            .join(self.trace);
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut cut = 0;
        for _ in 0..self.after_line {
            let newline = bytes[cut..]
                .iter()
                .position(|&b| b == b'\n')
                .unwrap_or_else(|| {
                    panic!("{} has fewer than {} lines", self.trace, self.after_line)
                });
            cut += newline + 1;
        }
        (bytes[..cut].to_vec(), bytes[cut..].to_vec())
    }

    /// The checked-in fixture, written first if missing and writing is on.
    async fn fixture(&self) -> Value {
        FIXTURES.fixture(self, self.generate()).await
    }

    /// What this build saves after the first half: every task record of a
    /// durable store, its state as parsed JSON (readable in review).
    async fn generate(&self) -> Value {
        let (first, _) = self.trace_halves();
        let store = Arc::new(RecordingStore::default());
        let decisions = replay(&store, &first, 1, &config_of(self)).await;
        assert!(
            !decisions.is_empty(),
            "{}: events before the split",
            self.trace
        );
        let mut records = Vec::new();
        for snapshot in store.inner.tasks().await.unwrap_or_else(|e| panic!("{e}")) {
            let record = store
                .inner
                .load_record(&snapshot.task)
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .unwrap_or_else(|| panic!("a record of {}", snapshot.task));
            let state: Value = serde_json::from_str(
                record
                    .state
                    .as_deref()
                    .unwrap_or_else(|| panic!("a durable state")),
            )
            .unwrap_or_else(|e| panic!("{e}"));
            records.push(json!({
                "snapshot": record.snapshot,
                "version": record.version,
                "state": state,
            }));
        }
        json!({
            "trace": self.trace,
            "after_line": self.after_line,
            "holds": self.holds,
            "records": records,
        })
    }
}

/// The fixture's task records, as a store keeps them (state as text),
/// with `edit` applied to each state first.
fn records_of(fixture: &Value, edit: impl Fn(&mut Value)) -> Vec<TaskRecord> {
    fixture["records"]
        .as_array()
        .unwrap_or_else(|| panic!("a fixture has records"))
        .iter()
        .map(|record| {
            let mut state = record["state"].clone();
            edit(&mut state);
            TaskRecord {
                snapshot: serde_json::from_value::<TaskSnapshot>(record["snapshot"].clone())
                    .unwrap_or_else(|e| panic!("snapshot: {e}")),
                version: record["version"]
                    .as_u64()
                    .unwrap_or_else(|| panic!("a version")),
                state: Some(state.to_string()),
            }
        })
        .collect()
}

/// A durable memory store that also keeps every state committed, in
/// order: (task, state) — to see what the engine writes after restoring.
#[derive(Debug)]
struct RecordingStore {
    inner: MemoryStore,
    written: Mutex<Vec<(String, Option<String>)>>,
}

impl Default for RecordingStore {
    fn default() -> Self {
        RecordingStore {
            inner: MemoryStore::durable(),
            written: Mutex::new(Vec::new()),
        }
    }
}

impl RecordingStore {
    /// A store holding `records`, as a restarted process finds it.
    async fn holding(records: Vec<TaskRecord>) -> Arc<RecordingStore> {
        let store = RecordingStore::default();
        let commits: Vec<TaskCommit> = records
            .into_iter()
            .map(|record| TaskCommit {
                line: 0,
                record,
                audit: Vec::new(),
                pivots: Vec::new(),
                episodes: Vec::new(),
            })
            .collect();
        store
            .inner
            .commit(&commits)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        Arc::new(store)
    }

    /// The first state written for `task`, as JSON.
    fn first_written(&self, task: &str) -> Option<Value> {
        let written = self.written.lock();
        let (_, state) = written.iter().find(|(name, _)| name == task)?;
        let text = state
            .as_deref()
            .unwrap_or_else(|| panic!("{task}: no state written"));
        Some(serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}")))
    }
}

#[async_trait]
impl Store for RecordingStore {
    fn durability(&self) -> Durability {
        Durability::Durable
    }

    fn group_commit(&self) -> bool {
        false
    }

    async fn record_episode(&self, episode: &CycleEpisode) -> Result<(), StoreError> {
        self.inner.record_episode(episode).await
    }

    async fn save_task(&self, snapshot: &TaskSnapshot) -> Result<(), StoreError> {
        self.inner.save_task(snapshot).await
    }

    async fn load_task(&self, task: &str) -> Result<Option<TaskSnapshot>, StoreError> {
        self.inner.load_task(task).await
    }

    async fn tasks(&self) -> Result<Vec<TaskSnapshot>, StoreError> {
        self.inner.tasks().await
    }

    async fn episodes(&self, task: Option<&str>) -> Result<Vec<CycleEpisode>, StoreError> {
        self.inner.episodes(task).await
    }

    async fn load_record(&self, task: &str) -> Result<Option<TaskRecord>, StoreError> {
        self.inner.load_record(task).await
    }

    async fn commit(&self, commits: &[TaskCommit]) -> Result<(), StoreError> {
        self.written.lock().extend(commits.iter().map(|commit| {
            (
                commit.record.snapshot.task.clone(),
                commit.record.state.clone(),
            )
        }));
        self.inner.commit(commits).await
    }
}

/// `input` (lines from `first_line`) through a fresh engine on `store`,
/// its decisions as JSON.
async fn replay(
    store: &Arc<RecordingStore>,
    input: &[u8],
    first_line: u64,
    config: &Config,
) -> Vec<Decision> {
    let guard = LoopGuard::builder(config.clone())
        .store(Arc::clone(store) as Arc<dyn Store>)
        .build()
        .unwrap_or_else(|e| panic!("engine: {e}"));
    let mut decisions = Vec::new();
    replay_each_from(&guard, input, first_line, |item| {
        if let ReplayItem::Decision(decision) = item {
            decisions.push(decision.clone());
        }
    })
    .await
    .unwrap_or_else(|e| panic!("replay: {e}"));
    decisions
}

fn as_json(decisions: &[Decision]) -> Vec<Value> {
    decisions
        .iter()
        .map(|decision| serde_json::to_value(decision).unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

/// The decisions of one whole run of the trace after the split line,
/// computed live by this build.
async fn whole_run_after_split(golden: &Golden) -> Vec<Value> {
    let (first, rest) = golden.trace_halves();
    let whole: Vec<u8> = [first, rest].concat();
    let decisions = replay(
        &Arc::new(RecordingStore::default()),
        &whole,
        1,
        &config_of(golden),
    )
    .await;
    let after: Vec<Decision> = decisions
        .into_iter()
        .filter(|decision| decision.line > golden.after_line as u64)
        .collect();
    as_json(&after)
}

/// `state` without the keys the format leaves out when empty (`episode`:
/// none open, `extensions`: none kept) when `other` does not have them:
/// the next event may open or resolve an episode. A renamed one still
/// shows, under its new name.
fn without_unshared_optional_keys(state: &Value, other: &Value) -> Value {
    let mut state = state.clone();
    if let Some(map) = state.as_object_mut() {
        for key in ["episode", "extensions"] {
            if other.get(key).is_none() {
                map.remove(key);
            }
        }
    }
    state
}

/// `written` without the built-in keys added after `saved` was written: a
/// detector added to the registry, or a key the registry lists in
/// `KEYS_ADDED_SINCE_FORMAT_1` (the task's clock). A format-1 state without
/// one reads as its fresh default, so an addition keeps the format. Any
/// other key the fixture lacks (a renamed field, a detector's reshaped
/// state) still shows.
fn without_detectors_added_since(written: &Value, saved: &Value) -> Value {
    let mut written = written.clone();
    if let (Some(builtin), Some(saved_builtin)) = (
        written.get_mut("builtin").and_then(Value::as_object_mut),
        saved.get("builtin").and_then(Value::as_object),
    ) {
        builtin.retain(|key, _| {
            saved_builtin.contains_key(key)
                || !(loopguard_detectors::REGISTERED
                    .iter()
                    .any(|(name, _, _)| name == key)
                    || loopguard_detectors::KEYS_ADDED_SINCE_FORMAT_1.contains(&key.as_str()))
        });
    }
    written
}

fn task_names(fixture: &Value) -> Vec<String> {
    records_of(fixture, |_| {})
        .into_iter()
        .map(|record| record.snapshot.task)
        .collect()
}

#[test]
fn the_fixtures_are_of_the_format_this_build_writes() {
    FIXTURES.assert_written_format(STATE_FORMAT);
}

#[tokio::test]
async fn a_saved_state_of_format_1_continues_the_trace_like_one_whole_run() {
    for golden in &GOLDEN {
        let fixture = golden.fixture().await;
        FIXTURES.assert_split(golden, &fixture);
        let store = RecordingStore::holding(records_of(&fixture, |_| {})).await;
        let (_, rest) = golden.trace_halves();
        let continued = replay(
            &store,
            &rest,
            golden.after_line as u64 + 1,
            &config_of(golden),
        )
        .await;
        let whole = whole_run_after_split(golden).await;
        assert!(
            !whole.is_empty(),
            "{}: events after the split",
            golden.trace
        );
        FIXTURES.assert_continues_like_one_run(golden, &as_json(&continued), &whole);
    }
}

#[tokio::test]
async fn the_state_written_after_restoring_has_the_fixtures_keys_at_every_level() {
    for golden in &GOLDEN {
        let fixture = golden.fixture().await;
        let store = RecordingStore::holding(records_of(&fixture, |_| {})).await;
        let (_, rest) = golden.trace_halves();
        replay(
            &store,
            &rest,
            golden.after_line as u64 + 1,
            &config_of(golden),
        )
        .await;
        for (task, record) in task_names(&fixture).iter().zip(
            fixture["records"]
                .as_array()
                .unwrap_or_else(|| panic!("records")),
        ) {
            let written = store.first_written(task).unwrap_or_else(|| {
                panic!(
                    "{}: task {task} has no event after line {}: choose another split",
                    golden.trace, golden.after_line
                )
            });
            let written = without_detectors_added_since(&written, &record["state"]);
            FIXTURES.assert_same_structure(
                golden,
                &format!("task {task}"),
                &without_unshared_optional_keys(&record["state"], &written),
                &without_unshared_optional_keys(&written, &record["state"]),
            );
        }
    }
}

#[tokio::test]
async fn a_saved_state_of_an_unknown_format_is_refused_by_name() {
    for golden in &GOLDEN {
        let fixture = golden.fixture().await;
        let store =
            RecordingStore::holding(records_of(&fixture, |state| state["format"] = json!(99)))
                .await;
        let (_, rest) = golden.trace_halves();
        let continued = replay(
            &store,
            &rest,
            golden.after_line as u64 + 1,
            &config_of(golden),
        )
        .await;
        for task in task_names(&fixture) {
            let first = continued
                .iter()
                .find(|decision| decision.task == task)
                .unwrap_or_else(|| panic!("{}: an event of {task} after the split", golden.trace));
            let refusal = format!(
                "store: task {task}'s saved detector state has format 99, this loopguard reads \
                 {STATE_FORMAT}: continuing from its counters"
            );
            assert!(
                first.errors.contains(&refusal),
                "{} task {task}: {:?}",
                golden.trace,
                first.errors
            );
        }
    }
}

#[tokio::test]
async fn together_the_fixtures_fill_every_part_of_the_saved_state() {
    let mut states = Vec::new();
    for golden in &GOLDEN {
        let fixture = golden.fixture().await;
        for record in fixture["records"]
            .as_array()
            .unwrap_or_else(|| panic!("records"))
        {
            states.push(record["state"].clone());
        }
    }
    // Every built-in detector's state differs from a fresh one somewhere.
    let fresh = serde_json::to_value(BuiltinState::default()).unwrap_or_else(|e| panic!("{e}"));
    let fresh = fresh.as_object().unwrap_or_else(|| panic!("an object"));
    for (detector, empty) in fresh {
        assert!(
            states
                .iter()
                .any(|state| &state["builtin"][detector] != empty),
            "no fixture holds any state of {detector}: add a trace that exercises it"
        );
    }
    assert!(
        states.iter().any(|state| state.get("episode").is_some()),
        "no fixture holds an open cycle-log episode"
    );
    // No array is empty in every fixture: each one's inner keys are frozen.
    let all: Vec<&Value> = states.iter().collect();
    let unfilled = never_filled(&all);
    assert!(
        unfilled.is_empty(),
        "parts of the saved state that no fixture fills: {unfilled:?}"
    );
}
