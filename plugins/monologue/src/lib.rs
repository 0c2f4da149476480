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
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};

use loopguard_plugin_api::serde::Deserialize;
use loopguard_plugin_api::serde_json::{self, Value};
use loopguard_plugin_api::{Action, Detection, Detector, Event, EventKind, Severity};

/// The detection kind this plugin reports.
pub const KIND: &str = "monologue";

/// Evidence lines kept per run: a long monologue lists its first ones and
/// the latest.
const MOST_LINES: usize = 32;

/// The monologue detector: per task, the current run of identical turns.
#[derive(Debug)]
pub struct Monologue {
    repeats: u32,
    hasher: RandomState,
    runs: HashMap<String, Run>,
}

/// One task's latest run of identical turns by one agent.
#[derive(Debug)]
struct Run {
    agent: String,
    /// Hash and length of the trimmed output.
    output: (u64, usize),
    count: u32,
    lines: Vec<u64>,
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
            hasher: RandomState::new(),
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
        let fingerprint = (self.hasher.hash_one(trimmed), trimmed.len());
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
