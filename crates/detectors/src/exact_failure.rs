//! Exact failure: the same error message again (rulings 1 and 2).
//!
//! Each `failure` event is compared with the task's recent failures (the
//! last `failures.history`, default 10). A message exactly equal to one of
//! them is a repeat: the first occurrence is an attempt, every repeat is a
//! loop (ruling 1). The agent does not matter, so the counter survives agent
//! rotation, and an exact repeat counts even when test metrics improved in
//! between (ruling 2). Messages that differ never match here; judging those
//! is left to the progress-based detectors.
//!
//! External failures (network, timeout, authentication, dependency; see
//! [`crate::failure_class`]) are ignored entirely (ruling 3): they are never
//! a loop and never join the history, so a timeout between two identical
//! agent failures neither matches nor pushes an earlier failure out.
//!
//! `exact_failure` feeds the task's loop count, which the engine owns: it
//! rewrites the `severity`, `action` and `loop_count` of every loop-feeding
//! detection (rulings 4 and 11). This detector therefore reports a
//! placeholder severity `low`, action `warn` and no `loop_count`.
//!
//! Messages are kept as 128-bit hashes (SHA-256, truncated), not as text, so
//! a task's state stays small however long its error messages are.

use std::collections::VecDeque;
use std::fmt::Write as _;

use loopguard_config::Config;
use loopguard_core_types::{Action, Detection, FailureSignature, FailureView, Severity, kinds};
use sha2::{Digest, Sha256};

use crate::bounded::{hash128, push_bounded};
use crate::{Detector, EvidenceRef, ObservedEvent, evidence_of, join_with_and};

/// Detects a failure whose message exactly repeats one of the task's recent
/// failures.
#[derive(Debug, Clone)]
pub struct ExactFailure {
    history: usize,
}

/// The task's most recent failures, oldest first, at most `failures.history`.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct ExactFailureState {
    recent: VecDeque<SeenFailure>,
}

/// One remembered failure: its message hash and where it was.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct SeenFailure {
    message: [u8; 16],
    at: EvidenceRef,
}

impl ExactFailure {
    /// The detector with the failure history of `config`.
    pub fn new(config: &Config) -> ExactFailure {
        // An unvalidated config of 0 would remember nothing: keep at least one.
        let history = usize::try_from(config.failures.history.max(1)).unwrap_or(usize::MAX);
        ExactFailure { history }
    }
}

impl Detector for ExactFailure {
    type State = ExactFailureState;
    const CONFIG_SECTION: &'static str = "failures";
    const KINDS: &'static [&'static str] = &[kinds::EXACT_FAILURE];

    fn name(&self) -> &'static str {
        "exact_failure"
    }

    fn observe(
        &self,
        state: &mut ExactFailureState,
        event: &ObservedEvent<'_>,
        out: &mut Vec<Detection>,
    ) {
        // A `failure`, or a `tool_call` that failed (ruling 14).
        let Some(FailureView {
            agent,
            error,
            error_type,
            location,
            stack,
        }) = event.event.kind.failure()
        else {
            return;
        };
        if crate::failure_class::classify(error_type, error).is_external() {
            return;
        }
        let message = hash128(error);
        let current = event.evidence_ref();
        let same = |seen: &&SeenFailure| seen.message == message;
        if state.recent.iter().any(|seen| same(&seen)) {
            let (lines, ids) = evidence_of(
                state
                    .recent
                    .iter()
                    .filter(same)
                    .map(|seen| &seen.at)
                    .chain([&current]),
            );
            let earlier = lines.split_last().map_or(&[][..], |(_, earlier)| earlier);
            let noun = if earlier.len() == 1 { "line" } else { "lines" };
            let reason = format!("same error message as {noun} {}", join_with_and(earlier));
            let count = u32::try_from(lines.len()).ok();
            let mut detection = Detection::new(
                self.name(),
                kinds::EXACT_FAILURE,
                // Placeholders: the engine sets these from the task's loop count.
                Severity::Low,
                Action::Warn,
                lines,
                reason,
            );
            detection.count = count;
            detection.evidence_ids = ids;
            detection.signature = signature(error_type, location, stack);
            detection.agents = vec![agent.to_owned()];
            out.push(detection);
        }
        push_bounded(
            &mut state.recent,
            SeenFailure {
                message,
                at: current,
            },
            self.history,
        );
    }
}

/// The failure's signature for the report, or `None` when the event gave
/// neither a type, a location nor a stack (an empty signature says nothing).
fn signature(
    error_type: Option<&str>,
    location: Option<&str>,
    stack: Option<&str>,
) -> Option<FailureSignature> {
    if error_type.is_none() && location.is_none() && stack.is_none() {
        return None;
    }
    Some(FailureSignature {
        error_type: error_type.map(str::to_owned),
        location: location.map(str::to_owned),
        stack_hash: stack.map(stack_hash),
    })
}

/// The first 16 hex characters of the SHA-256 of a stack trace.
fn stack_hash(stack: &str) -> String {
    let digest = Sha256::digest(stack.as_bytes());
    let mut hex = String::with_capacity(16);
    for byte in digest.iter().take(8) {
        // Writing to a String cannot fail.
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopguard_core_types::Event;

    fn failure(agent: &str, error: &str) -> String {
        format!(r#"{{"type":"failure","task":"T1","agent":"{agent}","error":"{error}"}}"#)
    }

    /// Runs the lines through a fresh detector; returns (line, detection).
    fn run_with(config: &Config, lines: &[String]) -> Vec<(u64, Detection)> {
        let detector = ExactFailure::new(config);
        let mut state = ExactFailureState::default();
        let mut found = Vec::new();
        for (index, text) in lines.iter().enumerate() {
            let event = Event::from_json(text).expect("valid event");
            let line = index as u64 + 1;
            let mut out = Vec::new();
            detector.observe(&mut state, &ObservedEvent::new(line, &event), &mut out);
            found.extend(out.into_iter().map(|detection| (line, detection)));
        }
        found
    }

    fn run(lines: &[String]) -> Vec<(u64, Detection)> {
        run_with(&Config::default(), lines)
    }

    #[test]
    fn first_occurrence_is_an_attempt_and_each_repeat_is_detected() {
        let lines = vec![
            failure("coder", "E0308 mismatched types"),
            failure("coder", "E0308 mismatched types"),
            failure("coder", "E0308 mismatched types"),
        ];
        let found = run(&lines);
        assert_eq!(found.len(), 2);
        let (line, detection) = &found[0];
        assert_eq!(*line, 2);
        assert_eq!(detection.detector, "exact_failure");
        assert_eq!(detection.kind, kinds::EXACT_FAILURE);
        assert_eq!(detection.evidence, vec![1, 2]);
        assert_eq!(detection.count, Some(2));
        assert_eq!(detection.reason, "same error message as line 1");
        assert_eq!(found[1].1.evidence, vec![1, 2, 3]);
        assert_eq!(found[1].1.count, Some(3));
        assert_eq!(found[1].1.reason, "same error message as lines 1 and 2");
    }

    #[test]
    fn engine_owned_fields_are_placeholders() {
        let lines = vec![failure("a", "boom"), failure("a", "boom")];
        let found = run(&lines);
        let detection = &found[0].1;
        assert_eq!(detection.severity, Severity::Low);
        assert_eq!(detection.action, Action::Warn);
        assert_eq!(detection.loop_count, None);
    }

    #[test]
    fn spec_example_reason_lists_three_earlier_lines() {
        // Lines 2, 4, 7 and 9 fail the same way; the others differ.
        let same = "E0308 mismatched types";
        let lines = vec![
            r#"{"type":"transition","task":"T1","from":"plan","to":"build"}"#.to_owned(),
            failure("coder", same),
            failure("coder", "other 1"),
            failure("tester", same),
            failure("coder", "other 2"),
            r#"{"type":"turn","task":"T1","agent":"coder","output":"x","success":false}"#
                .to_owned(),
            failure("reviewer", same),
            failure("coder", "other 3"),
            failure("coder", same),
        ];
        let found = run(&lines);
        let lines_fired: Vec<u64> = found.iter().map(|(line, _)| *line).collect();
        assert_eq!(lines_fired, vec![4, 7, 9]);
        let last = &found[2].1;
        assert_eq!(last.evidence, vec![2, 4, 7, 9]);
        assert_eq!(last.count, Some(4));
        assert_eq!(last.reason, "same error message as lines 2, 4 and 7");
    }

    #[test]
    fn agent_rotation_does_not_reset_the_match() {
        let lines = vec![failure("coder", "boom"), failure("tester", "boom")];
        assert_eq!(run(&lines).len(), 1);
    }

    #[test]
    fn differing_messages_never_match() {
        let lines = vec![
            failure("a", "boom"),
            failure("a", "boom "),
            failure("a", "Boom"),
            failure("a", ""),
            failure("a", "bo om"),
        ];
        assert!(run(&lines).is_empty());
    }

    #[test]
    fn empty_message_repeats_like_any_other() {
        let found = run(&[failure("a", ""), failure("b", "")]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].1.evidence, vec![1, 2]);
    }

    #[test]
    fn external_failures_are_ignored_entirely() {
        // Ruling 3: identical timeouts are no loop, and they do not take the
        // place of earlier failures in the history.
        let mut config = Config::default();
        config.failures.history = 1;
        let lines = vec![
            failure("a", "boom"),
            failure("a", "request timed out"),
            failure("a", "request timed out"),
            r#"{"type":"failure","task":"T1","agent":"a","error":"E1","error_type":"network"}"#
                .to_owned(),
            r#"{"type":"failure","task":"T1","agent":"a","error":"E1","error_type":"network"}"#
                .to_owned(),
            failure("b", "boom"),
        ];
        let found = run_with(&config, &lines);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, 6);
        assert_eq!(found[0].1.evidence, vec![1, 6]);
    }

    #[test]
    fn other_event_types_are_ignored() {
        let lines = vec![
            r#"{"type":"turn","task":"T1","agent":"a","output":"boom","success":false}"#.to_owned(),
            r#"{"type":"handoff","task":"T1","from":"a","to":"b","content":"boom"}"#.to_owned(),
            failure("a", "boom"),
        ];
        assert!(run(&lines).is_empty());
    }

    #[test]
    fn progress_in_between_does_not_excuse_an_exact_repeat() {
        let lines = [
            failure("a", "boom"),
            r#"{"type":"progress","task":"T1","tests_failed":1,"files_changed":4}"#.to_owned(),
            failure("a", "boom"),
        ];
        let detector = ExactFailure::new(&Config::default());
        let tracker = crate::ProgressTracker;
        let mut progress = crate::ProgressState::default();
        let mut state = ExactFailureState::default();
        let mut out = Vec::new();
        for (index, text) in lines.iter().enumerate() {
            let event = Event::from_json(text).expect("valid event");
            let mut observed = ObservedEvent::new(index as u64 + 1, &event);
            observed.progressed = tracker.observe(&mut progress, &event);
            detector.observe(&mut state, &observed, &mut out);
        }
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].evidence, vec![1, 3]);
    }

    #[test]
    fn window_keeps_the_last_history_failures() {
        // Line 1 is followed by exactly `history` (10) other failures: it has
        // left the window when it repeats on line 12.
        let mut lines = vec![failure("a", "boom")];
        lines.extend((0..10).map(|n| failure("a", &format!("other {n}"))));
        lines.push(failure("a", "boom"));
        assert!(run(&lines).is_empty());

        // With only 9 in between it is still the 10th most recent.
        let mut lines = vec![failure("a", "boom")];
        lines.extend((0..9).map(|n| failure("a", &format!("other {n}"))));
        lines.push(failure("a", "boom"));
        let found = run(&lines);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].1.evidence, vec![1, 11]);
    }

    #[test]
    fn history_comes_from_the_config_and_is_capped() {
        let mut config = Config::default();
        config.failures.history = 2;
        let lines = vec![
            failure("a", "boom"),
            failure("a", "x"),
            failure("a", "y"),
            failure("a", "boom"),
            failure("a", "boom"),
        ];
        let found = run_with(&config, &lines);
        // Line 4 no longer sees line 1; line 5 sees line 4.
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, 5);
        assert_eq!(found[0].1.evidence, vec![4, 5]);

        let detector = ExactFailure::new(&config);
        let mut state = ExactFailureState::default();
        for (index, text) in lines.iter().enumerate() {
            let event = Event::from_json(text).expect("valid event");
            detector.observe(
                &mut state,
                &ObservedEvent::new(index as u64 + 1, &event),
                &mut Vec::new(),
            );
            assert!(state.recent.len() <= 2);
        }
    }

    #[test]
    fn ids_are_listed_in_evidence_ids() {
        let lines = vec![
            r#"{"type":"failure","task":"T1","id":"f1","agent":"a","error":"boom"}"#.to_owned(),
            failure("a", "boom"),
            r#"{"type":"failure","task":"T1","id":"f3","agent":"b","error":"boom"}"#.to_owned(),
        ];
        let found = run(&lines);
        assert_eq!(found[1].1.evidence, vec![1, 2, 3]);
        assert_eq!(found[1].1.evidence_ids, vec!["f1", "f3"]);
        assert_eq!(found[0].1.evidence_ids, vec!["f1"]);
    }

    #[test]
    fn signature_comes_from_the_current_event() {
        let lines = vec![
            r#"{"type":"failure","task":"T1","agent":"a","error":"boom","error_type":"Old"}"#
                .to_owned(),
            r#"{"type":"failure","task":"T1","agent":"a","error":"boom","error_type":"TypeError","location":"src/lib.rs:42","stack":"abc"}"#.to_owned(),
            failure("a", "boom"),
        ];
        let found = run(&lines);
        let signature = found[0].1.signature.clone().expect("signature");
        assert_eq!(signature.error_type.as_deref(), Some("TypeError"));
        assert_eq!(signature.location.as_deref(), Some("src/lib.rs:42"));
        // SHA-256("abc") = ba7816bf8f01cfea414140de5dae2223...
        assert_eq!(signature.stack_hash.as_deref(), Some("ba7816bf8f01cfea"));
        // Neither type, location nor stack: no signature.
        assert_eq!(found[1].1.signature, None);
    }

    #[test]
    fn reset_state_forgets_earlier_failures() {
        let detector = ExactFailure::new(&Config::default());
        let mut state = ExactFailureState::default();
        let event = Event::from_json(&failure("a", "boom")).expect("valid event");
        let mut out = Vec::new();
        detector.observe(&mut state, &ObservedEvent::new(1, &event), &mut out);
        state = ExactFailureState::default();
        detector.observe(&mut state, &ObservedEvent::new(2, &event), &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn join_with_and_reads_naturally() {
        assert_eq!(join_with_and(&[]), "");
        assert_eq!(join_with_and(&[2]), "2");
        assert_eq!(join_with_and(&[2, 4]), "2 and 4");
        assert_eq!(join_with_and(&[2, 4, 7]), "2, 4 and 7");
        assert_eq!(join_with_and(&[1, 2, 3, 4]), "1, 2, 3 and 4");
    }
}
