//! Repeated output: the same failed output again and again, and the strategy
//! pivots it triggers (ruling 8).
//!
//! Only `turn` events count, and only failed ones feed the entropy count: a
//! failed turn whose trimmed output hashes (SHA-256) like the previous failed
//! turn's adds one, any other failed turn starts again from one. A
//! successful turn resets the count. Other event types neither count nor
//! break the row.
//!
//! When the count reaches `entropy.threshold` (default 3) the detector asks
//! for a pivot: a `directive` that tells the agent to drop its approach and
//! start from first principles. The directive never quotes the failed
//! output, which would anchor the agent on it. The count then restarts (the
//! hash is kept, so the same output again counts from one). Once
//! `entropy.max_pivots` (`MAX_PIVOTS`, default 2) pivots are spent, the next
//! time the count reaches the threshold the detector escalates instead and
//! the task is paused ([`pauses_task`]). A `human` event restores the budget:
//! the engine resets the whole state then.

use std::collections::VecDeque;

use loopguard_config::Config;
use loopguard_core_types::{Action, Detection, EventKind, Severity, kinds};

use crate::bounded::{hash128, push_bounded};
use crate::{Detector, EvidenceRef, ObservedEvent, evidence_of};

/// Part of the pivot directive: tells the agent to drop what it tried.
pub const DIRECTIVE_IGNORE_PREVIOUS: &str = "Ignore all previous implementation attempts";
/// Part of the pivot directive: tells the agent how to start again.
pub const DIRECTIVE_FIRST_PRINCIPLES: &str = "Reason from first principles";

/// Detects failed turns that keep producing the same output, and issues
/// pivots until the pivot budget is spent.
#[derive(Debug, Clone)]
pub struct RepeatedOutput {
    threshold: u32,
    max_pivots: u32,
}

/// A task's entropy count, its pivots and its failed turns.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct RepeatedOutputState {
    /// Hash of the trimmed output of the last failed turn, until a
    /// successful turn.
    last_output: Option<[u8; 16]>,
    /// Identical failed outputs in a row (the entropy count).
    count: u32,
    pivots: u32,
    /// Every failed turn of the task since the last reset.
    failed_turns: u32,
    /// The failed turns of the current row, at most `threshold`.
    row: VecDeque<EvidenceRef>,
}

impl RepeatedOutputState {
    /// Sets the pivots already spent (a task restored from a store).
    pub(crate) fn restore_pivots(&mut self, pivots: u32) {
        self.pivots = pivots;
    }

    /// Pivots issued since the last reset.
    pub fn pivots(&self) -> u32 {
        self.pivots
    }
}

/// Whether `detection` pauses its task: a `repeated_output` escalation,
/// issued when the pivot budget is spent (status `paused`, ruling 8).
pub fn pauses_task(detection: &Detection) -> bool {
    detection.kind == kinds::REPEATED_OUTPUT && detection.action == Action::Escalate
}

impl RepeatedOutput {
    /// The detector with the entropy settings of `config`.
    pub fn new(config: &Config) -> RepeatedOutput {
        RepeatedOutput {
            // An unvalidated threshold of 0 would fire on nothing in a row.
            threshold: config.entropy.threshold.max(1),
            max_pivots: config.entropy.max_pivots,
        }
    }

    /// The pivot directive. It names the failure count, never the output.
    fn directive(&self, failed_turns: u32) -> String {
        let times = if failed_turns == 1 { "time" } else { "times" };
        format!(
            "{DIRECTIVE_IGNORE_PREVIOUS}: this task has failed {failed_turns} {times}, and the \
             last {} failed attempts produced the same output. {DIRECTIVE_FIRST_PRINCIPLES}: \
             restate the goal and its constraints, then choose an approach that differs from \
             the ones already tried.",
            self.threshold
        )
    }
}

impl Detector for RepeatedOutput {
    type State = RepeatedOutputState;
    const CONFIG_SECTION: &'static str = "entropy";
    const KINDS: &'static [&'static str] = &[kinds::REPEATED_OUTPUT];

    fn name(&self) -> &'static str {
        "repeated_output"
    }

    fn observe(
        &self,
        state: &mut RepeatedOutputState,
        event: &ObservedEvent<'_>,
        out: &mut Vec<Detection>,
    ) {
        let EventKind::Turn {
            agent,
            output,
            success,
        } = &event.event.kind
        else {
            return;
        };
        if *success {
            state.count = 0;
            state.last_output = None;
            state.row.clear();
            return;
        }
        state.failed_turns = state.failed_turns.saturating_add(1);
        let hash = hash128(output.trim());
        if state.last_output == Some(hash) {
            state.count = state.count.saturating_add(1);
        } else {
            state.count = 1;
            state.row.clear();
        }
        state.last_output = Some(hash);
        // The row never outgrows the threshold: it restarts when reached.
        push_bounded(
            &mut state.row,
            event.evidence_ref(),
            usize::try_from(self.threshold).unwrap_or(usize::MAX),
        );
        if state.count < self.threshold {
            return;
        }
        let (lines, ids) = evidence_of(&state.row);
        let count = state.count;
        // Start a new row; the hash stays, so the same output counts from 1.
        state.count = 0;
        state.row.clear();
        let mut detection = if state.pivots < self.max_pivots {
            state.pivots += 1;
            let mut detection = Detection::new(
                self.name(),
                kinds::REPEATED_OUTPUT,
                Severity::for_loop(state.pivots),
                Action::Pivot,
                lines,
                format!(
                    "{count} failed turns in a row produced the same output: pivot {} of {}",
                    state.pivots, self.max_pivots
                ),
            );
            detection.directive = Some(self.directive(state.failed_turns));
            detection
        } else {
            Detection::new(
                self.name(),
                kinds::REPEATED_OUTPUT,
                Severity::High,
                Action::Escalate,
                lines,
                format!(
                    "{count} failed turns in a row produced the same output and the pivot \
                     budget is spent ({} of {}): the task is paused until a human intervenes",
                    state.pivots, self.max_pivots
                ),
            )
        };
        detection.count = Some(count);
        detection.agents = vec![agent.clone()];
        detection.evidence_ids = ids;
        out.push(detection);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopguard_core_types::Event;

    fn turn(output: &str, success: bool) -> String {
        format!(
            r#"{{"type":"turn","task":"T1","agent":"coder","output":"{output}","success":{success}}}"#
        )
    }

    fn failed(output: &str) -> String {
        turn(output, false)
    }

    /// Feeds lines into `state`, numbering them from `first_line`; returns
    /// (line, detection).
    fn feed(
        detector: &RepeatedOutput,
        state: &mut RepeatedOutputState,
        first_line: u64,
        lines: &[String],
    ) -> Vec<(u64, Detection)> {
        let mut found = Vec::new();
        for (index, text) in lines.iter().enumerate() {
            let event = Event::from_json(text).expect("valid event");
            let line = first_line + index as u64;
            let mut out = Vec::new();
            detector.observe(state, &ObservedEvent::new(line, &event), &mut out);
            found.extend(out.into_iter().map(|detection| (line, detection)));
        }
        found
    }

    fn run(lines: &[String]) -> (Vec<(u64, Detection)>, RepeatedOutputState) {
        let detector = RepeatedOutput::new(&Config::default());
        let mut state = RepeatedOutputState::default();
        let found = feed(&detector, &mut state, 1, lines);
        (found, state)
    }

    fn fired_lines(found: &[(u64, Detection)]) -> Vec<u64> {
        found.iter().map(|(line, _)| *line).collect()
    }

    #[test]
    fn third_identical_failed_output_pivots() {
        let (found, state) = run(&vec![failed("same"); 3]);
        assert_eq!(fired_lines(&found), vec![3]);
        let detection = &found[0].1;
        assert_eq!(detection.detector, "repeated_output");
        assert_eq!(detection.kind, kinds::REPEATED_OUTPUT);
        assert_eq!(detection.action, Action::Pivot);
        assert_eq!(detection.severity, Severity::Low);
        assert_eq!(detection.count, Some(3));
        assert_eq!(detection.evidence, vec![1, 2, 3]);
        assert_eq!(
            detection.reason,
            "3 failed turns in a row produced the same output: pivot 1 of 2"
        );
        let directive = detection.directive.as_deref().expect("directive");
        assert!(directive.contains(DIRECTIVE_IGNORE_PREVIOUS), "{directive}");
        assert!(
            directive.contains(DIRECTIVE_FIRST_PRINCIPLES),
            "{directive}"
        );
        assert!(directive.contains("failed 3 times"), "{directive}");
        assert!(!pauses_task(detection));
        assert_eq!(state.pivots(), 1);
    }

    #[test]
    fn two_pivots_then_the_task_is_paused() {
        let (found, state) = run(&vec![failed("same"); 10]);
        assert_eq!(fired_lines(&found), vec![3, 6, 9]);
        let actions: Vec<Action> = found.iter().map(|(_, d)| d.action).collect();
        assert_eq!(
            actions,
            vec![Action::Pivot, Action::Pivot, Action::Escalate]
        );
        let severities: Vec<Severity> = found.iter().map(|(_, d)| d.severity).collect();
        assert_eq!(
            severities,
            vec![Severity::Low, Severity::Medium, Severity::High]
        );
        // The count restarts after a pivot: the second row is lines 4-6.
        assert_eq!(found[1].1.evidence, vec![4, 5, 6]);
        assert!(
            found[1]
                .1
                .directive
                .as_deref()
                .expect("directive")
                .contains("failed 6 times")
        );
        let pause = &found[2].1;
        assert!(pauses_task(pause));
        assert_eq!(pause.directive, None);
        assert_eq!(pause.evidence, vec![7, 8, 9]);
        assert_eq!(
            pause.reason,
            "3 failed turns in a row produced the same output and the pivot budget is spent \
             (2 of 2): the task is paused until a human intervenes"
        );
        assert_eq!(state.pivots(), 2);
        assert_eq!(state.failed_turns, 10);
    }

    #[test]
    fn paused_task_keeps_being_watched() {
        let (found, _) = run(&vec![failed("same"); 12]);
        assert_eq!(fired_lines(&found), vec![3, 6, 9, 12]);
        assert!(pauses_task(&found[3].1));
    }

    #[test]
    fn directive_never_quotes_the_output() {
        let secret = "zq-FAILED-OUTPUT-7731 at parse_config";
        let (found, _) = run(&vec![failed(secret); 3]);
        let detection = &found[0].1;
        let directive = detection.directive.as_deref().expect("directive");
        assert!(!directive.contains("zq-FAILED-OUTPUT-7731"), "{directive}");
        assert!(!directive.contains("parse_config"), "{directive}");
        assert!(!detection.reason.contains("zq-FAILED-OUTPUT-7731"));
    }

    #[test]
    fn directive_counts_every_failed_turn_of_the_task() {
        let mut lines = vec![failed("a"), failed("b"), turn("ok", true), failed("c")];
        lines.extend(vec![failed("same"); 3]);
        let (found, _) = run(&lines);
        assert_eq!(fired_lines(&found), vec![7]);
        let directive = found[0].1.directive.as_deref().expect("directive");
        assert!(directive.contains("failed 6 times"), "{directive}");
    }

    #[test]
    fn output_is_compared_trimmed() {
        let lines = vec![failed("same"), failed("  same\\n"), failed("\\tsame ")];
        let (found, _) = run(&lines);
        assert_eq!(fired_lines(&found), vec![3]);
    }

    #[test]
    fn a_different_output_starts_a_new_row() {
        let lines = vec![
            failed("one"),
            failed("one"),
            failed("two"),
            failed("two"),
            failed("one"),
            failed("one"),
            failed("one"),
        ];
        let (found, _) = run(&lines);
        assert_eq!(fired_lines(&found), vec![7]);
        assert_eq!(found[0].1.evidence, vec![5, 6, 7]);
    }

    #[test]
    fn a_successful_turn_resets_the_count() {
        let lines = vec![
            failed("same"),
            failed("same"),
            turn("same", true),
            failed("same"),
            failed("same"),
        ];
        let (found, state) = run(&lines);
        assert!(found.is_empty());
        assert_eq!(state.count, 2);
        // A successful turn with the same output does not count either.
        let (found, _) = run(&vec![turn("same", true); 5]);
        assert!(found.is_empty());
    }

    #[test]
    fn other_events_do_not_break_the_row() {
        let lines = vec![
            failed("same"),
            r#"{"type":"failure","task":"T1","agent":"coder","error":"other"}"#.to_owned(),
            failed("same"),
            r#"{"type":"progress","task":"T1","tests_failed":0}"#.to_owned(),
            r#"{"type":"transition","task":"T1","from":"a","to":"b"}"#.to_owned(),
            failed("same"),
        ];
        let (found, _) = run(&lines);
        assert_eq!(fired_lines(&found), vec![6]);
        assert_eq!(found[0].1.evidence, vec![1, 3, 6]);
    }

    #[test]
    fn empty_outputs_repeat_like_any_other() {
        let lines = vec![failed(""), failed("   "), failed("")];
        let (found, _) = run(&lines);
        assert_eq!(fired_lines(&found), vec![3]);
    }

    #[test]
    fn ids_are_listed_in_evidence_ids() {
        let lines = vec![
            r#"{"type":"turn","task":"T1","id":"u1","agent":"a","output":"x","success":false}"#
                .to_owned(),
            failed("x"),
            r#"{"type":"turn","task":"T1","id":"u3","agent":"b","output":"x","success":false}"#
                .to_owned(),
        ];
        let (found, _) = run(&lines);
        assert_eq!(found[0].1.evidence_ids, vec!["u1", "u3"]);
    }

    #[test]
    fn default_state_restores_the_pivot_budget() {
        // What the engine does on `human`: a fresh state.
        let detector = RepeatedOutput::new(&Config::default());
        let mut state = RepeatedOutputState::default();
        let found = feed(&detector, &mut state, 1, &vec![failed("same"); 8]);
        assert_eq!(state.pivots(), 2);
        assert_eq!(found.len(), 2);
        state = RepeatedOutputState::default();
        assert_eq!(state.pivots(), 0);
        // The two failures before the reset are forgotten: three more are
        // needed, and they pivot again instead of pausing.
        let found = feed(&detector, &mut state, 9, &vec![failed("same"); 3]);
        assert_eq!(fired_lines(&found), vec![11]);
        assert_eq!(found[0].1.action, Action::Pivot);
        assert!(
            found[0]
                .1
                .directive
                .as_deref()
                .expect("directive")
                .contains("failed 3 times")
        );
    }

    #[test]
    fn settings_come_from_the_config() {
        let mut config = Config::default();
        config.entropy.threshold = 2;
        config.entropy.max_pivots = 0;
        let detector = RepeatedOutput::new(&config);
        let mut state = RepeatedOutputState::default();
        let found = feed(&detector, &mut state, 1, &vec![failed("same"); 4]);
        assert_eq!(fired_lines(&found), vec![2, 4]);
        assert!(found.iter().all(|(_, d)| pauses_task(d)));
        assert_eq!(found[0].1.evidence, vec![1, 2]);
        assert_eq!(state.pivots(), 0);
    }

    #[test]
    fn pauses_task_only_for_repeated_output_escalations() {
        let make = |kind: &'static str, action| {
            Detection::new("x", kind, Severity::High, action, vec![1], "r")
        };
        assert!(pauses_task(&make(kinds::REPEATED_OUTPUT, Action::Escalate)));
        assert!(!pauses_task(&make(kinds::REPEATED_OUTPUT, Action::Pivot)));
        assert!(!pauses_task(&make(kinds::PHASE_VISITS, Action::Escalate)));
    }

    #[test]
    fn row_evidence_stays_within_the_threshold() {
        let detector = RepeatedOutput::new(&Config::default());
        let mut state = RepeatedOutputState::default();
        for line in 1..=50 {
            let text = failed(if line % 2 == 0 { "a" } else { "b" });
            feed(&detector, &mut state, line, &[text]);
            assert!(state.row.len() <= 3);
        }
        assert_eq!(state.failed_turns, 50);
        assert_eq!(state.pivots(), 0);
    }
}
