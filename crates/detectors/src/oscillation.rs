//! Oscillation: the recent transitions repeating one short cycle (ruling 7).
//!
//! The task's last `oscillation.history` (default 10) transitions are kept.
//! After each one, the detector looks for the shortest cycle length `L`, from
//! 2 to `oscillation.cycle_detection_length` (default 3), such that the last
//! `2L` transitions are one cycle of `L` distinct phases taken twice in full:
//! A→B, B→A, A→B, B→A (L = 2) or A→B, B→C, C→A, A→B, B→C, C→A (L = 3). Such
//! a transition is blocked. Each further transition that continues the cycle
//! is blocked again, since the last `2L` transitions still form it.
//!
//! Self-loops (A→A) are never an oscillation: the phases of a cycle must be
//! distinct. They are left to the edge and transition limits.
//!
//! Progress clears the recent transitions ([`ObservedEvent::progressed`]: a
//! `progress` event that changed a metric, or more `files_changed`), so the
//! two laps must come without progress in between. This extends ruling 7
//! the way ruling 5 treats edges: a build→test→build→test cycle whose tests
//! improve on every round is the work getting done, not a loop, and
//! blocking it would stop a task that is converging. A `progress` event
//! that changed nothing does not clear them, and neither does any other
//! event. The transition limits (ruling 6) still bound such a cycle.

use std::collections::VecDeque;
use std::sync::Arc;

use loopguard_config::Config;
use loopguard_core_types::{Action, Detection, EventKind, Severity, kinds};

use crate::bounded::push_bounded;
use crate::{Detector, EvidenceRef, ObservedEvent, evidence_of};

/// Detects recent transitions that repeat one short cycle twice in a row.
#[derive(Debug, Clone)]
pub struct Oscillation {
    history: usize,
    longest_cycle: usize,
}

/// A task's most recent transitions, oldest first.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct OscillationState {
    recent: VecDeque<Hop>,
}

/// One remembered transition.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Hop {
    /// Phase names are shared with earlier hops where they match, so a task
    /// cycling through a few phases holds each name once.
    from: Arc<str>,
    to: Arc<str>,
    at: EvidenceRef,
}

impl Oscillation {
    /// The detector with the oscillation settings of `config`.
    pub fn new(config: &Config) -> Oscillation {
        let as_usize = |value: u32| usize::try_from(value).unwrap_or(usize::MAX);
        let longest_cycle = as_usize(config.oscillation.cycle_detection_length);
        Oscillation {
            // Two full cycles of the longest length must fit, whatever an
            // unvalidated config says.
            history: as_usize(config.oscillation.history).max(longest_cycle.saturating_mul(2)),
            longest_cycle,
        }
    }

    /// The smallest cycle length the last transitions repeat twice, if any.
    fn cycle_length(&self, recent: &VecDeque<Hop>) -> Option<usize> {
        (2..=self.longest_cycle)
            .take_while(|length| length.saturating_mul(2) <= recent.len())
            .find(|&length| repeats_cycle(recent, length))
    }
}

/// Whether the last `2 * length` hops are one cycle of `length` distinct
/// phases taken twice in full.
///
/// At most one length can pass: a shorter closed cycle at the end would
/// repeat a phase of the longer one.
fn repeats_cycle(recent: &VecDeque<Hop>, length: usize) -> bool {
    let Some(start) = recent.len().checked_sub(length.saturating_mul(2)) else {
        return false;
    };
    let cycle = recent.range(start + length..);
    let same_twice = || {
        recent
            .range(start..start + length)
            .zip(cycle.clone())
            .all(|(a, b)| a.from == b.from && a.to == b.to)
    };
    // Each hop leads into the next, and the last back to the first.
    let closed_chain = || {
        cycle
            .clone()
            .zip(cycle.clone().cycle().skip(1))
            .all(|(hop, next)| hop.to == next.from)
    };
    let distinct = || {
        cycle.clone().enumerate().all(|(index, hop)| {
            cycle
                .clone()
                .skip(index + 1)
                .all(|later| later.from != hop.from)
        })
    };
    same_twice() && closed_chain() && distinct()
}

impl Detector for Oscillation {
    type State = OscillationState;
    const CONFIG_SECTION: &'static str = "oscillation";
    const KINDS: &'static [&'static str] = &[kinds::OSCILLATION];

    fn name(&self) -> &'static str {
        "oscillation"
    }

    fn observe(
        &self,
        state: &mut OscillationState,
        event: &ObservedEvent<'_>,
        out: &mut Vec<Detection>,
    ) {
        if event.progressed {
            state.recent.clear();
            return;
        }
        let EventKind::Transition { from, to } = &event.event.kind else {
            return;
        };
        let hop = Hop {
            from: intern(&state.recent, from),
            to: intern(&state.recent, to),
            at: event.evidence_ref(),
        };
        push_bounded(&mut state.recent, hop, self.history);
        let Some(length) = self.cycle_length(&state.recent) else {
            return;
        };
        let cycle_start = state.recent.len().saturating_sub(length);
        let mut phases: Vec<&str> = state
            .recent
            .range(cycle_start..)
            .map(|hop| &*hop.from)
            .collect();
        // Close the cycle where it began.
        if let Some(first) = phases.first().copied() {
            phases.push(first);
        }
        let reason = format!(
            "transitions repeat the cycle '{}' twice in a row",
            phases.join("' -> '")
        );
        let (lines, ids) = evidence_of(
            state
                .recent
                .range(cycle_start.saturating_sub(length)..)
                .map(|hop| &hop.at),
        );
        let mut detection = Detection::new(
            self.name(),
            kinds::OSCILLATION,
            Severity::Medium,
            Action::Block,
            lines,
            reason,
        );
        detection.count = u32::try_from(length).ok();
        detection.evidence_ids = ids;
        out.push(detection);
    }
}

/// The kept name equal to `name`, shared, or a new one.
fn intern(recent: &VecDeque<Hop>, name: &str) -> Arc<str> {
    recent
        .iter()
        .rev()
        .flat_map(|hop| [&hop.to, &hop.from])
        .find(|kept| ***kept == *name)
        .cloned()
        .unwrap_or_else(|| Arc::from(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ProgressState, ProgressTracker};
    use loopguard_core_types::Event;

    fn transition(from: &str, to: &str) -> String {
        format!(r#"{{"type":"transition","task":"T1","from":"{from}","to":"{to}"}}"#)
    }

    /// Transitions along a path of phases: "abab" gives a->b, b->a, a->b.
    fn path(phases: &str) -> Vec<String> {
        let names: Vec<String> = phases.chars().map(String::from).collect();
        names
            .windows(2)
            .map(|pair| transition(&pair[0], &pair[1]))
            .collect()
    }

    /// Runs the lines through a fresh detector, with progress worked out as
    /// the built-in detectors do; returns (line, detection).
    fn run_with(config: &Config, lines: &[String]) -> Vec<(u64, Detection)> {
        let detector = Oscillation::new(config);
        let mut state = OscillationState::default();
        let mut progress = ProgressState::default();
        let mut found = Vec::new();
        for (index, text) in lines.iter().enumerate() {
            let event = Event::from_json(text).expect("valid event");
            let line = index as u64 + 1;
            let mut observed = ObservedEvent::new(line, &event);
            observed.progressed = ProgressTracker.observe(&mut progress, &event);
            let mut out = Vec::new();
            detector.observe(&mut state, &observed, &mut out);
            assert!(out.len() <= 1, "at most one detection per transition");
            found.extend(out.into_iter().map(|detection| (line, detection)));
        }
        found
    }

    fn run(lines: &[String]) -> Vec<(u64, Detection)> {
        run_with(&Config::default(), lines)
    }

    fn fired_lines(found: &[(u64, Detection)]) -> Vec<u64> {
        found.iter().map(|(line, _)| *line).collect()
    }

    #[test]
    fn two_phase_cycle_fires_on_the_fourth_transition() {
        let found = run(&path("ababa"));
        assert_eq!(fired_lines(&found), vec![4]);
        let detection = &found[0].1;
        assert_eq!(detection.detector, "oscillation");
        assert_eq!(detection.kind, kinds::OSCILLATION);
        assert_eq!(detection.severity, Severity::Medium);
        assert_eq!(detection.action, Action::Block);
        assert_eq!(detection.count, Some(2));
        assert_eq!(detection.evidence, vec![1, 2, 3, 4]);
        assert_eq!(
            detection.reason,
            "transitions repeat the cycle 'a' -> 'b' -> 'a' twice in a row"
        );
    }

    #[test]
    fn continuing_the_cycle_fires_again() {
        let found = run(&path("ababab"));
        assert_eq!(fired_lines(&found), vec![4, 5]);
        assert_eq!(found[1].1.evidence, vec![2, 3, 4, 5]);
        assert_eq!(
            found[1].1.reason,
            "transitions repeat the cycle 'b' -> 'a' -> 'b' twice in a row"
        );
    }

    #[test]
    fn three_phase_cycle_fires_on_the_sixth_transition() {
        let found = run(&path("abcabca"));
        assert_eq!(fired_lines(&found), vec![6]);
        let detection = &found[0].1;
        assert_eq!(detection.count, Some(3));
        assert_eq!(detection.evidence, vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(
            detection.reason,
            "transitions repeat the cycle 'a' -> 'b' -> 'c' -> 'a' twice in a row"
        );
    }

    #[test]
    fn a_broken_cycle_does_not_fire() {
        assert!(run(&path("abac")).is_empty());
        assert!(run(&path("abcab")).is_empty());
        assert!(run(&path("abacab")).is_empty());
    }

    #[test]
    fn cycles_longer_than_the_setting_do_not_fire() {
        assert!(run(&path("abcdabcda")).is_empty());
        let mut config = Config::default();
        config.oscillation.cycle_detection_length = 4;
        let found = run_with(&config, &path("abcdabcda"));
        assert_eq!(fired_lines(&found), vec![8]);
        assert_eq!(found[0].1.count, Some(4));
    }

    #[test]
    fn a_longer_setting_still_reports_the_two_phase_cycle() {
        // With length 4 allowed, the last 8 hops of a-b-a-b-... are also
        // "abab" twice, but not of distinct phases: the 2-cycle is reported.
        let mut config = Config::default();
        config.oscillation.cycle_detection_length = 4;
        let found = run_with(&config, &path("abababababa"));
        assert!(
            found
                .iter()
                .all(|(_, detection)| detection.count == Some(2))
        );
        assert_eq!(fired_lines(&found), (4..=10).collect::<Vec<u64>>());
    }

    #[test]
    fn self_loops_are_not_oscillation() {
        assert!(run(&path("aaaaaaa")).is_empty());
        // a->a, b->b repeated does not chain either.
        let lines = vec![
            transition("a", "a"),
            transition("b", "b"),
            transition("a", "a"),
            transition("b", "b"),
        ];
        assert!(run(&lines).is_empty());
    }

    #[test]
    fn unchained_transitions_that_repeat_do_not_fire() {
        // a->b, c->d twice: the halves match but the hops do not chain.
        let lines = vec![
            transition("a", "b"),
            transition("c", "d"),
            transition("a", "b"),
            transition("c", "d"),
        ];
        assert!(run(&lines).is_empty());
    }

    #[test]
    fn a_cycle_through_a_repeated_phase_does_not_fire() {
        // a->b, b->a, a->a: a three-hop loop whose phases are not distinct.
        let lines: Vec<String> = (0..2)
            .flat_map(|_| {
                [
                    transition("a", "b"),
                    transition("b", "a"),
                    transition("a", "a"),
                ]
            })
            .collect();
        assert!(run(&lines).is_empty());
    }

    fn tests_failed(failed: u32) -> String {
        format!(r#"{{"type":"progress","task":"T1","tests_total":40,"tests_failed":{failed}}}"#)
    }

    #[test]
    fn progress_in_between_clears_the_transitions() {
        // build -> test, test -> build, tests improve, then the same again.
        let mut lines = vec![tests_failed(9)];
        lines.extend(path("btb"));
        lines.push(tests_failed(7));
        lines.extend(path("btb"));
        assert!(run(&lines).is_empty(), "{:?}", run(&lines));
        // Every round improving: never an oscillation.
        let mut lines = Vec::new();
        for failed in (0..8).rev() {
            lines.extend(path("btb"));
            lines.push(tests_failed(failed));
        }
        assert!(run(&lines).is_empty());
    }

    #[test]
    fn progress_that_changed_nothing_does_not_clear_them() {
        let mut lines = vec![tests_failed(9)];
        lines.extend(path("btb"));
        lines.push(tests_failed(9));
        lines.extend(path("btb"));
        let found = run(&lines);
        assert_eq!(fired_lines(&found), vec![6]);
        assert_eq!(found[0].1.evidence, vec![2, 3, 5, 6]);
        // An empty progress event reports nothing, so changes nothing.
        let mut lines = path("btb");
        lines.push(r#"{"type":"progress","task":"T1"}"#.to_owned());
        lines.extend(path("btb"));
        assert_eq!(fired_lines(&run(&lines)), vec![5]);
    }

    #[test]
    fn the_cycle_counts_again_from_progress() {
        // The transition before progress (line 1) does not count towards the
        // laps after it: the 4th transition after progress fires (line 6),
        // not the 3rd (line 5, which would complete b->t, t->b twice).
        let mut lines = path("bt");
        lines.push(tests_failed(3));
        lines.extend(path("tbtbt"));
        let found = run(&lines);
        assert_eq!(fired_lines(&found), vec![6]);
        assert_eq!(found[0].1.evidence, vec![3, 4, 5, 6]);
    }

    #[test]
    fn other_events_do_not_break_the_cycle() {
        let mut lines = path("ababa");
        // A first progress event that reports no metric is no progress.
        lines.insert(2, r#"{"type":"progress","task":"T1"}"#.to_owned());
        lines.insert(
            1,
            r#"{"type":"handoff","task":"T1","from":"x","to":"y"}"#.to_owned(),
        );
        let found = run(&lines);
        assert_eq!(fired_lines(&found), vec![6]);
        assert_eq!(found[0].1.evidence, vec![1, 3, 5, 6]);
    }

    #[test]
    fn history_is_capped_and_old_hops_do_not_count() {
        let config = Config::default();
        let detector = Oscillation::new(&config);
        let mut state = OscillationState::default();
        let mut out = Vec::new();
        for (index, text) in path("abcdefghijklmnopqrstuvwxyz").iter().enumerate() {
            let event = Event::from_json(text).expect("valid event");
            detector.observe(
                &mut state,
                &ObservedEvent::new(index as u64 + 1, &event),
                &mut out,
            );
            assert!(state.recent.len() <= 10);
        }
        assert!(out.is_empty());
    }

    #[test]
    fn names_are_shared_between_hops() {
        let detector = Oscillation::new(&Config::default());
        let mut state = OscillationState::default();
        for (index, text) in path("abab").iter().enumerate() {
            let event = Event::from_json(text).expect("valid event");
            detector.observe(
                &mut state,
                &ObservedEvent::new(index as u64 + 1, &event),
                &mut Vec::new(),
            );
        }
        let first = &state.recent[0];
        let second = &state.recent[1];
        assert!(Arc::ptr_eq(&first.to, &second.from));
        assert!(Arc::ptr_eq(&first.from, &state.recent[2].from));
    }

    #[test]
    fn ids_are_listed_in_evidence_ids() {
        let lines = vec![
            r#"{"type":"transition","task":"T1","id":"t1","from":"a","to":"b"}"#.to_owned(),
            transition("b", "a"),
            r#"{"type":"transition","task":"T1","id":"t3","from":"a","to":"b"}"#.to_owned(),
            r#"{"type":"transition","task":"T1","id":"t4","from":"b","to":"a"}"#.to_owned(),
        ];
        let found = run(&lines);
        assert_eq!(found[0].1.evidence_ids, vec!["t1", "t3", "t4"]);
    }

    #[test]
    fn empty_phase_names_are_phases_too() {
        let found = run(&[
            transition("", "b"),
            transition("b", ""),
            transition("", "b"),
            transition("b", ""),
        ]);
        assert_eq!(fired_lines(&found), vec![4]);
        assert_eq!(
            found[0].1.reason,
            "transitions repeat the cycle '' -> 'b' -> '' twice in a row"
        );
    }
}
