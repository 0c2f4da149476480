//! `monologue`: one agent talking to itself.
//!
//! The same agent emits identical `turn` output (after trimming) three
//! times in a row, with no other event of the task in between: no handoff,
//! no failure, no progress, no other agent's turn. Success or failure does
//! not matter (the built-in `repeated_output` only looks at failed turns).
//! Kind `monologue`, action `inject_context`: the agent needs to be told
//! that it is repeating itself. Every further identical turn reports again,
//! with the run's lines as evidence.
//!
//! With a durable store, each task's run is exported after every event and
//! imported after a restart (`{"format":1,"agent":...,"output_hash":...,
//! "output_len":...,"count":...,"lines":[...]}`; a hash of the output, never
//! the text), so a run split by a restart is still one run.
//!
//! Config (`[[plugins]]` `config` table; every key optional):
//!
//! ```toml
//! [[plugins]]
//! path = "target/release/libloopguard_plugin_monologue.so"
//! config = { repeats = 3 }   # identical turns in a row that make a monologue (at least 2)
//! ```
//!
//! ```
//! use loopguard_plugin_api::Event;
//! use loopguard_plugin_api::testing::Harness;
//! use loopguard_plugin_monologue::Monologue;
//!
//! let mut plugin = Harness::<Monologue>::new("")?;
//! let turn = Event::from_json(
//!     r#"{"type":"turn","task":"T1","agent":"writer","output":"Draft v1.","success":true}"#,
//! )?;
//! assert!(plugin.observe(1, &turn)?.is_empty());
//! assert!(plugin.observe(2, &turn)?.is_empty());
//! let found = plugin.observe(3, &turn)?;
//! assert_eq!(found[0].kind, "monologue");
//! assert_eq!(found[0].evidence, [1, 2, 3]);
//!
//! // With a durable store, a restart continues the run (ABI 1.2):
//! let state = plugin.export_task("T1")?.expect("a run");
//! let mut restarted = Harness::<Monologue>::new("")?;
//! restarted.import_task("T1", &state)?;
//! assert_eq!(restarted.observe(4, &turn)?[0].evidence, [1, 2, 3, 4]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

use std::collections::HashMap;

use loopguard_plugin_api::serde::{Deserialize, Serialize};
use loopguard_plugin_api::serde_json::{self, Value};
use loopguard_plugin_api::{Action, Detection, Detector, Event, EventKind, Severity};

/// The detection kind this plugin reports.
pub const KIND: &str = "monologue";

/// Evidence lines kept per run: a long monologue lists its first ones and
/// the latest.
const MOST_LINES: usize = 32;

/// The version of the task state [`Detector::export_task`] writes.
const STATE_FORMAT: u32 = 1;

/// The monologue detector: per task, the current run of identical turns.
#[derive(Debug)]
pub struct Monologue {
    repeats: u32,
    runs: HashMap<String, Run>,
}

/// One task's latest run of identical turns by one agent.
#[derive(Debug, Clone, PartialEq)]
struct Run {
    agent: String,
    /// Hash and length of the trimmed output.
    output: (u64, usize),
    count: u32,
    lines: Vec<u64>,
}

/// A task's run as it is exported: versioned, the hash as hex (JSON
/// numbers past 2^53 do not survive every reader).
#[derive(Debug, Serialize, Deserialize)]
#[serde(crate = "loopguard_plugin_api::serde", deny_unknown_fields)]
struct RunState {
    format: u32,
    agent: String,
    output_hash: String,
    output_len: usize,
    count: u32,
    lines: Vec<u64>,
}

impl Run {
    fn to_state(&self) -> RunState {
        RunState {
            format: STATE_FORMAT,
            agent: self.agent.clone(),
            output_hash: format!("{:016x}", self.output.0),
            output_len: self.output.1,
            count: self.count,
            lines: self.lines.clone(),
        }
    }

    fn from_state(state: Value) -> Result<Run, String> {
        let format = state.get("format").and_then(Value::as_u64);
        if format != Some(u64::from(STATE_FORMAT)) {
            return Err(format!(
                "format {} (this version reads format {STATE_FORMAT})",
                format.map_or_else(|| "missing".to_owned(), |f| f.to_string())
            ));
        }
        let state: RunState = serde_json::from_value(state).map_err(|err| err.to_string())?;
        let hash = u64::from_str_radix(&state.output_hash, 16)
            .map_err(|err| format!("output_hash {:?}: {err}", state.output_hash))?;
        if state.count == 0 || state.lines.is_empty() || state.lines.len() > MOST_LINES {
            return Err(format!(
                "a run of {} turns with {} lines",
                state.count,
                state.lines.len()
            ));
        }
        Ok(Run {
            agent: state.agent,
            output: (hash, state.output_len),
            count: state.count,
            lines: state.lines,
        })
    }
}

/// FNV-1a, 64 bits: a hash that is the same in every process and build, so
/// that an exported run matches the turns after a restart (std's hashers
/// are seeded per process, or may change between Rust releases).
fn stable_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The plugin's config table.
#[derive(Debug, Deserialize)]
#[serde(crate = "loopguard_plugin_api::serde", default, deny_unknown_fields)]
struct Config {
    repeats: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config { repeats: 3 }
    }
}

impl Detector for Monologue {
    const NAME: &'static str = "monologue";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const KINDS: &'static [&'static str] = &[KIND];
    const DESCRIPTION: &'static str =
        "the same agent emits identical turn output 3 times in a row, nothing else in between";

    fn new(config: Value) -> Result<Self, String> {
        let config: Config =
            serde_json::from_value(config).map_err(|err| format!("monologue config: {err}"))?;
        if config.repeats < 2 {
            return Err(format!(
                "monologue config: `repeats` = {} is not valid: must be at least 2",
                config.repeats
            ));
        }
        Ok(Monologue {
            repeats: config.repeats,
            runs: HashMap::new(),
        })
    }

    fn observe(&mut self, line: u64, event: &Event) -> Vec<Detection> {
        let EventKind::Turn { agent, output, .. } = &event.kind else {
            // Any other event of the task ends the run.
            self.runs.remove(&event.task);
            return Vec::new();
        };
        let trimmed = output.trim();
        let fingerprint = (stable_hash(trimmed), trimmed.len());
        let run = match self.runs.get_mut(&event.task) {
            Some(run) if run.agent == *agent && run.output == fingerprint => {
                run.count = run.count.saturating_add(1);
                if run.lines.len() == MOST_LINES {
                    run.lines.remove(MOST_LINES / 2);
                }
                run.lines.push(line);
                run
            }
            _ => {
                let fresh = Run {
                    agent: agent.clone(),
                    output: fingerprint,
                    count: 1,
                    lines: vec![line],
                };
                self.runs.insert(event.task.clone(), fresh);
                return Vec::new();
            }
        };
        if run.count < self.repeats {
            return Vec::new();
        }
        let mut detection = Detection::new(
            Self::NAME,
            KIND,
            if run.count > self.repeats {
                Severity::High
            } else {
                Severity::Medium
            },
            Action::InjectContext,
            run.lines.clone(),
            format!(
                "{} emitted the same output {} times in a row with nothing else happening in \
                 the task",
                run.agent, run.count
            ),
        );
        detection.count = Some(run.count);
        vec![detection]
    }

    fn reset_task(&mut self, task: &str) {
        self.runs.remove(task);
    }

    fn export_task(&self, task: &str) -> Option<Value> {
        let run = self.runs.get(task)?;
        serde_json::to_value(run.to_state()).ok()
    }

    fn import_task(&mut self, task: &str, state: Value) -> Result<(), String> {
        if state.is_null() {
            self.runs.remove(task);
            return Ok(());
        }
        let run = Run::from_state(state).map_err(|err| {
            format!("monologue: task {task}'s saved state is not readable: {err}")
        })?;
        self.runs.insert(task.to_owned(), run);
        Ok(())
    }
}

loopguard_plugin_api::export_detector!(Monologue);

#[cfg(test)]
mod tests {
    use super::*;
    use loopguard_plugin_api::testing::{CallError, Harness};

    fn event(json: &str) -> Event {
        Event::from_json(json).expect("a valid event")
    }

    fn turn(task: &str, agent: &str, output: &str) -> Event {
        event(&format!(
            r#"{{"type":"turn","task":"{task}","agent":"{agent}","output":"{output}","success":true}}"#
        ))
    }

    fn fired(plugin: &mut Harness<Monologue>, events: &[Event]) -> Vec<(u64, Vec<u64>)> {
        let mut found = Vec::new();
        for (index, event) in events.iter().enumerate() {
            let line = index as u64 + 1;
            for detection in plugin.observe(line, event).expect("observes") {
                assert_eq!(detection.kind, KIND);
                assert_eq!(detection.action, Action::InjectContext);
                assert_eq!(detection.detector, "monologue");
                found.push((line, detection.evidence));
            }
        }
        found
    }

    #[test]
    fn the_third_identical_turn_in_a_row_is_a_monologue() {
        let mut plugin = Harness::<Monologue>::new("").expect("created");
        let same = turn("T", "writer", "Here is the plan.");
        let found = fired(
            &mut plugin,
            &[
                same.clone(),
                turn("T", "writer", "  Here is the plan. "),
                same.clone(),
                same,
            ],
        );
        assert_eq!(found, [(3, vec![1, 2, 3]), (4, vec![1, 2, 3, 4])]);
    }

    #[test]
    fn anything_else_in_the_task_breaks_the_run() {
        let mut plugin = Harness::<Monologue>::new("").expect("created");
        let same = turn("T", "writer", "again");
        let found = fired(
            &mut plugin,
            &[
                same.clone(),
                same.clone(),
                event(r#"{"type":"progress","task":"T","tests_failed":1}"#),
                same.clone(),
                same.clone(),
                turn("T", "editor", "again"),
                same.clone(),
                same.clone(),
                turn("T", "writer", "different"),
                same.clone(),
                // Another task's events do not interrupt this one.
                turn("U", "writer", "again"),
                same.clone(),
                same,
            ],
        );
        assert_eq!(found, [(13, vec![10, 12, 13])]);
    }

    #[test]
    fn repeats_come_from_the_config_and_are_validated() {
        let mut plugin = Harness::<Monologue>::new(r#"{"repeats":2}"#).expect("created");
        let same = turn("T", "a", "x");
        assert_eq!(fired(&mut plugin, &[same.clone(), same]), [(2, vec![1, 2])]);
        for bad in [r#"{"repeats":1}"#, r#"{"repeat":3}"#, r#"{"repeats":"3"}"#] {
            let err = Harness::<Monologue>::new(bad).expect_err(bad);
            assert!(
                matches!(&err, CallError::Error(message) if message.starts_with("monologue config")),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn a_run_split_by_a_restart_is_still_one_run() {
        let mut first = Harness::<Monologue>::new("").expect("created");
        let same = turn("T", "writer", "Here is the plan.");
        assert_eq!(first.export_task("T"), Ok(None), "no run yet");
        first.observe(1, &same).expect("observes");
        first
            .observe(2, &turn("U", "a", "other task"))
            .expect("observes");
        first.observe(3, &same).expect("observes");
        let state = first.export_task("T").expect("exports").expect("a run");
        assert_eq!(state["format"], 1);
        assert_eq!(state["lines"], serde_json::json!([1, 3]));
        assert_eq!(state["output_hash"].as_str().map(str::len), Some(16));
        let mut second = Harness::<Monologue>::new("").expect("created");
        second.import_task("T", &state).expect("imports");
        let found = second.observe(4, &same).expect("observes");
        assert_eq!(found[0].evidence, [1, 3, 4]);
        assert_eq!(found[0].count, Some(3));
        // The other task was not handed over: it starts afresh.
        assert_eq!(second.export_task("U"), Ok(None));
        // A different output after the restart does not continue the run.
        let mut third = Harness::<Monologue>::new("").expect("created");
        third.import_task("T", &state).expect("imports");
        assert!(
            third
                .observe(4, &turn("T", "writer", "Another plan."))
                .expect("observes")
                .is_empty()
        );
        // Exported state reads back as it was.
        let again = second.export_task("T").expect("exports").expect("a run");
        let mut fourth = Harness::<Monologue>::new("").expect("created");
        fourth.import_task("T", &again).expect("imports");
        assert_eq!(fourth.export_task("T"), Ok(Some(again)));
    }

    #[test]
    fn a_state_it_cannot_read_is_an_error_naming_the_plugin() {
        let mut plugin = Harness::<Monologue>::new("").expect("created");
        let good = serde_json::json!({
            "format": 1, "agent": "a", "output_hash": "00000000000000ff",
            "output_len": 1, "count": 1, "lines": [1]
        });
        plugin.import_task("T", &good).expect("imports");
        let mut bad_cases = Vec::new();
        for (key, value) in [
            ("format", serde_json::json!(2)),
            ("output_hash", serde_json::json!("not hex")),
            ("count", serde_json::json!(0)),
            ("lines", serde_json::json!([])),
            ("agent", serde_json::json!(7)),
            ("extra", serde_json::json!(true)),
        ] {
            let mut bad = good.clone();
            bad[key] = value;
            bad_cases.push(bad);
        }
        bad_cases.push(serde_json::json!([1, 2]));
        for bad in bad_cases {
            let err = plugin.import_task("T", &bad).expect_err("refused");
            assert!(
                matches!(&err, CallError::Error(message)
                    if message.starts_with("monologue: task T's saved state is not readable: ")),
                "{bad}: {err}"
            );
        }
        // The refused states left the good one in place.
        assert_eq!(plugin.export_task("T"), Ok(Some(good)));
    }

    #[test]
    fn the_output_hash_is_the_same_in_every_process() {
        // FNV-1a test vectors: a stored hash must match after a restart.
        assert_eq!(stable_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(stable_hash("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(stable_hash("foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn a_reset_forgets_the_run_and_long_runs_keep_bounded_evidence() {
        let mut plugin = Harness::<Monologue>::new("").expect("created");
        let same = turn("T", "a", "x");
        plugin.observe(1, &same).expect("observes");
        plugin.observe(2, &same).expect("observes");
        plugin.reset_task("T").expect("resets");
        assert!(plugin.observe(3, &same).expect("observes").is_empty());
        let mut last = Vec::new();
        for line in 4..=200 {
            last = plugin.observe(line, &same).expect("observes");
        }
        let evidence = &last[0].evidence;
        assert_eq!(evidence.len(), MOST_LINES);
        assert_eq!((evidence[0], evidence[MOST_LINES - 1]), (3, 200));
        assert_eq!(last[0].count, Some(198));
    }
}
