//! Phase visits and transition limits (ruling 6).
//!
//! Both count `transition` events of a task:
//!
//! - [`PhaseVisits`] counts entries into each phase (the `to` of a
//!   transition). An entry beyond `phases.max_visits` (default 10, with
//!   per-phase overrides) is detected: the 11th entry by default, and every
//!   later one.
//! - [`TransitionLimit`] counts occurrences of each `from`→`to`. An
//!   occurrence beyond `phases.max_transitions` (default 5) is detected: the
//!   6th by default, and every later one.
//!
//! Ruling 6 both blocks the transition and puts the task behind the human
//! gate. `escalate` is the stronger action of the two, so it is the one
//! reported. Neither counter resets on progress; only `completed` and
//! `human` reset them (the engine resets the whole state then).
//!
//! A task remembers at most 64 phases and 64 transitions; beyond that the
//! least recently used one is forgotten and starts counting again. Evidence
//! is the current transition and up to 4 earlier entries into the phase (or
//! occurrences of the transition) among the task's last 16 transitions.

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};

use loopguard_config::{Config, PhaseConfig};
use loopguard_core_types::{Action, Detection, EventKind, Severity, kinds};
use rustc_hash::FxHasher;

use crate::bounded::push_bounded;
use crate::{Detector, EvidenceRef, ObservedEvent, evidence_of};

/// Most phases (and most transitions) remembered per task.
const MAX_KEYS: usize = 64;
/// Recent transitions kept as evidence, for all phases (or transitions)
/// together.
const RECENT: usize = 16;
/// Evidence per detection: up to 4 earlier entries (or occurrences) and the
/// current one.
const EVIDENCE: usize = 5;

/// Detects a phase entered more often than its visit limit.
#[derive(Debug, Clone)]
pub struct PhaseVisits {
    config: PhaseConfig,
}

/// Entries into each phase of a task.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct PhaseVisitsState {
    phases: CounterTable<MAX_KEYS, RECENT>,
}

/// Detects the same `from`→`to` transition more often than
/// `phases.max_transitions`.
#[derive(Debug, Clone)]
pub struct TransitionLimit {
    max_transitions: u32,
}

/// Occurrences of each transition of a task.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct TransitionLimitState {
    transitions: CounterTable<MAX_KEYS, RECENT>,
}

impl PhaseVisits {
    /// The detector with the visit limits of `config`.
    pub fn new(config: &Config) -> PhaseVisits {
        PhaseVisits {
            config: config.phases.clone(),
        }
    }
}

impl Detector for PhaseVisits {
    type State = PhaseVisitsState;
    const CONFIG_SECTION: &'static str = "phases";
    const KINDS: &'static [&'static str] = &[kinds::PHASE_VISITS];

    fn name(&self) -> &'static str {
        "phase_visits"
    }

    fn observe(
        &self,
        state: &mut PhaseVisitsState,
        event: &ObservedEvent<'_>,
        out: &mut Vec<Detection>,
    ) {
        let EventKind::Transition { to, .. } = &event.event.kind else {
            return;
        };
        // One name only: the first half of the key stays empty.
        let hit = state.phases.hit("", to, event.evidence_ref());
        let limit = self.config.visit_limit_for(to);
        if hit.count <= limit {
            return;
        }
        let reason = format!(
            "Phase '{to}' exceeded max_visits ({limit}) with {} visits",
            hit.count
        );
        out.push(escalation(
            self.name(),
            kinds::PHASE_VISITS,
            hit.count,
            state.phases.evidence(hit, EVIDENCE),
            reason,
        ));
    }
}

impl TransitionLimit {
    /// The detector with the transition limit of `config`.
    pub fn new(config: &Config) -> TransitionLimit {
        TransitionLimit {
            max_transitions: config.phases.max_transitions,
        }
    }
}

impl Detector for TransitionLimit {
    type State = TransitionLimitState;
    const CONFIG_SECTION: &'static str = "phases";
    const KINDS: &'static [&'static str] = &[kinds::TRANSITION_LIMIT];

    fn name(&self) -> &'static str {
        "transition_limit"
    }

    fn observe(
        &self,
        state: &mut TransitionLimitState,
        event: &ObservedEvent<'_>,
        out: &mut Vec<Detection>,
    ) {
        let EventKind::Transition { from, to } = &event.event.kind else {
            return;
        };
        let hit = state.transitions.hit(from, to, event.evidence_ref());
        let limit = self.max_transitions;
        if hit.count <= limit {
            return;
        }
        let reason = format!(
            "Transition '{from}' -> '{to}' exceeded max_transitions ({limit}) with {} occurrences",
            hit.count
        );
        out.push(escalation(
            self.name(),
            kinds::TRANSITION_LIMIT,
            hit.count,
            state.transitions.evidence(hit, EVIDENCE),
            reason,
        ));
    }
}

/// Counters keyed by one or two names (a phase, or a `from`→`to` pair), and
/// the task's most recent hits of any key as evidence. Shared by
/// [`PhaseVisits`], [`TransitionLimit`] and [`crate::EdgeLimit`].
///
/// At most `KEYS` counters are kept; a new key in a full table replaces the
/// least recently used one. Evidence is one ring of the last `RECENT` hits
/// for all keys together, not a list per key: a key that loops recurs often,
/// so its recent hits are in the ring, and the evidence costs the same few
/// hundred bytes however many keys a workflow has. A key hit rarely may thus
/// show fewer earlier hits than its count.
///
/// The table is small, so a linear scan over precomputed hashes beats a map:
/// no allocation on a hit, and exact names on a hash match.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct CounterTable<const KEYS: usize, const RECENT: usize> {
    counters: Vec<Counter>,
    /// The last `RECENT` hits, oldest first, tagged with their key's hash.
    recent: VecDeque<(u64, EvidenceRef)>,
    /// Ticks on every hit; a counter's `last_used` orders eviction.
    clock: u64,
}

/// One key's count.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Counter {
    key: u64,
    /// Both names back to back; `split` is where the second begins.
    names: Box<str>,
    /// `u32`, not `usize`, to keep a counter at 40 bytes (an event line
    /// is never 4 GiB; a longer name would only never match).
    split: u32,
    count: u32,
    last_used: u64,
}

/// What [`CounterTable::hit`] reports about the key just hit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hit {
    key: u64,
    /// The key's hits since it was added, this one included (saturating).
    pub(crate) count: u32,
}

impl<const KEYS: usize, const RECENT: usize> CounterTable<KEYS, RECENT> {
    /// Counts one hit of the key (`first`, `second`) at `at`.
    pub(crate) fn hit(&mut self, first: &str, second: &str, at: EvidenceRef) -> Hit {
        self.clock = self.clock.wrapping_add(1);
        let clock = self.clock;
        let key = key_hash(first, second);
        let found = self
            .counters
            .iter_mut()
            .find(|counter| counter.key == key && counter.is(first, second));
        let count = match found {
            Some(counter) => {
                counter.count = counter.count.saturating_add(1);
                counter.last_used = clock;
                counter.count
            }
            None => {
                self.insert(Counter {
                    key,
                    names: [first, second].concat().into_boxed_str(),
                    split: u32::try_from(first.len()).unwrap_or(u32::MAX),
                    count: 1,
                    last_used: clock,
                });
                1
            }
        };
        push_bounded(&mut self.recent, (key, at), RECENT);
        Hit { key, count }
    }

    /// Adds a counter, replacing the least recently used one when full.
    fn insert(&mut self, counter: Counter) {
        let (len, cap) = (self.counters.len(), KEYS.max(1));
        if len < cap {
            if len == self.counters.capacity() {
                // Small steps up to the cap: most workflows have a few
                // phases and edges, not `KEYS`.
                self.counters.reserve_exact((len / 2).max(4).min(cap - len));
            }
            self.counters.push(counter);
        } else if let Some(oldest) = self
            .counters
            .iter_mut()
            .min_by_key(|counter| counter.last_used)
        {
            *oldest = counter;
        }
    }

    /// The lines and ids of the key's most recent hits in the ring, at most
    /// `most` and at most its count, oldest first (the hit itself last).
    ///
    /// Capping at the count keeps out hits from before the key was evicted
    /// and added again; those are older than all of its current hits.
    pub(crate) fn evidence(&self, hit: Hit, most: usize) -> (Vec<u64>, Vec<String>) {
        let most = most.min(usize::try_from(hit.count).unwrap_or(usize::MAX));
        let mut refs: Vec<&EvidenceRef> = self
            .recent
            .iter()
            .rev()
            .filter(|(key, _)| *key == hit.key)
            .map(|(_, at)| at)
            .take(most)
            .collect();
        refs.reverse();
        evidence_of(refs)
    }

    /// Forgets every key and every hit.
    pub(crate) fn clear(&mut self) {
        self.counters.clear();
        self.recent.clear();
    }

    /// How many keys the table holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.counters.len()
    }
}

impl Counter {
    /// Whether this counter's key is (`first`, `second`).
    fn is(&self, first: &str, second: &str) -> bool {
        let split = usize::try_from(self.split).unwrap_or(usize::MAX);
        self.names.split_at_checked(split) == Some((first, second))
    }
}

/// A high, escalating detection (ruling 6) with the count and evidence of a
/// hit.
fn escalation(
    detector: &'static str,
    kind: &'static str,
    count: u32,
    (lines, ids): (Vec<u64>, Vec<String>),
    reason: String,
) -> Detection {
    let mut detection = Detection::new(
        detector,
        kind,
        Severity::High,
        Action::Escalate,
        lines,
        reason,
    );
    detection.count = Some(count);
    detection.evidence_ids = ids;
    detection
}

fn key_hash(first: &str, second: &str) -> u64 {
    let mut hasher = FxHasher::default();
    // `str`'s Hash ends each name with a marker, so ("ab", "c") and
    // ("a", "bc") hash apart; `Counter::is` settles any collision anyway.
    first.hash(&mut hasher);
    second.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopguard_core_types::Event;

    fn transition(from: &str, to: &str) -> String {
        format!(r#"{{"type":"transition","task":"T1","from":"{from}","to":"{to}"}}"#)
    }

    /// Runs the lines through a fresh detector; returns (line, detection).
    fn run<D: Detector>(detector: &D, lines: &[String]) -> Vec<(u64, Detection)> {
        let mut state = D::State::default();
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

    fn fired_lines(found: &[(u64, Detection)]) -> Vec<u64> {
        found.iter().map(|(line, _)| *line).collect()
    }

    #[test]
    fn eleventh_entry_into_a_phase_is_detected_and_every_later_one() {
        // Enter "test" from alternating phases so no single transition
        // repeats more than 6 times.
        let lines: Vec<String> = (0..12)
            .map(|n| transition(if n % 2 == 0 { "build" } else { "lint" }, "test"))
            .collect();
        let found = run(&PhaseVisits::new(&Config::default()), &lines);
        assert_eq!(fired_lines(&found), vec![11, 12]);
        let detection = &found[0].1;
        assert_eq!(detection.detector, "phase_visits");
        assert_eq!(detection.kind, kinds::PHASE_VISITS);
        assert_eq!(detection.severity, Severity::High);
        assert_eq!(detection.action, Action::Escalate);
        assert_eq!(detection.count, Some(11));
        assert_eq!(
            detection.reason,
            "Phase 'test' exceeded max_visits (10) with 11 visits"
        );
        // Four earlier entries and the current one.
        assert_eq!(detection.evidence, vec![7, 8, 9, 10, 11]);
        assert_eq!(found[1].1.count, Some(12));
        assert_eq!(found[1].1.evidence, vec![8, 9, 10, 11, 12]);
    }

    #[test]
    fn per_phase_override_applies() {
        let mut config = Config::default();
        config.phases.visit_overrides.insert("test".into(), 5);
        let lines: Vec<String> = (0..6)
            .flat_map(|_| [transition("build", "test"), transition("test", "build")])
            .collect();
        let found = run(&PhaseVisits::new(&config), &lines);
        // "test" is entered on odd lines; its 6th entry is line 11. "build"
        // keeps the default limit of 10 and is entered only 6 times.
        assert_eq!(fired_lines(&found), vec![11]);
        assert_eq!(
            found[0].1.reason,
            "Phase 'test' exceeded max_visits (5) with 6 visits"
        );
        assert_eq!(found[0].1.evidence, vec![3, 5, 7, 9, 11]);
    }

    #[test]
    fn evidence_is_short_when_the_limit_is_low() {
        let mut config = Config::default();
        config.phases.max_visits = 1;
        let lines = vec![transition("a", "b"), transition("c", "b")];
        let found = run(&PhaseVisits::new(&config), &lines);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].1.evidence, vec![1, 2]);
    }

    #[test]
    fn phases_are_counted_apart_and_other_events_ignored() {
        let mut lines = Vec::new();
        for n in 0..10 {
            lines.push(transition("x", "a"));
            lines.push(transition("x", "b"));
            lines.push(format!(
                r#"{{"type":"progress","task":"T1","tests_failed":{n}}}"#
            ));
            lines.push(
                r#"{"type":"turn","task":"T1","agent":"a","output":"o","success":false}"#
                    .to_owned(),
            );
        }
        assert!(run(&PhaseVisits::new(&Config::default()), &lines).is_empty());
    }

    #[test]
    fn progress_does_not_reset_visits() {
        let mut lines = Vec::new();
        for n in 0..11 {
            lines.push(transition(&format!("p{n}"), "test"));
            lines.push(format!(
                r#"{{"type":"progress","task":"T1","files_changed":{n}}}"#
            ));
        }
        let detector = PhaseVisits::new(&Config::default());
        let tracker = crate::ProgressTracker;
        let mut progress = crate::ProgressState::default();
        let mut state = PhaseVisitsState::default();
        let mut out = Vec::new();
        for (index, text) in lines.iter().enumerate() {
            let event = Event::from_json(text).expect("valid event");
            let mut observed = ObservedEvent::new(index as u64 + 1, &event);
            observed.progressed = tracker.observe(&mut progress, &event);
            detector.observe(&mut state, &observed, &mut out);
        }
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].count, Some(11));
    }

    #[test]
    fn sixth_occurrence_of_a_transition_is_detected() {
        let lines: Vec<String> = (0..7)
            .flat_map(|_| [transition("build", "test"), transition("test", "build")])
            .collect();
        let found = run(&TransitionLimit::new(&Config::default()), &lines);
        // build->test on odd lines: its 6th is line 11, 7th line 13;
        // test->build on even lines: 6th is 12, 7th 14.
        assert_eq!(fired_lines(&found), vec![11, 12, 13, 14]);
        let detection = &found[0].1;
        assert_eq!(detection.detector, "transition_limit");
        assert_eq!(detection.kind, kinds::TRANSITION_LIMIT);
        assert_eq!(detection.severity, Severity::High);
        assert_eq!(detection.action, Action::Escalate);
        assert_eq!(detection.count, Some(6));
        assert_eq!(
            detection.reason,
            "Transition 'build' -> 'test' exceeded max_transitions (5) with 6 occurrences"
        );
        assert_eq!(detection.evidence, vec![3, 5, 7, 9, 11]);
        assert_eq!(
            found[1].1.reason,
            "Transition 'test' -> 'build' exceeded max_transitions (5) with 6 occurrences"
        );
    }

    #[test]
    fn direction_matters_for_transitions() {
        // a->b and b->a five times each: neither exceeds 5.
        let lines: Vec<String> = (0..5)
            .flat_map(|_| [transition("a", "b"), transition("b", "a")])
            .collect();
        assert!(run(&TransitionLimit::new(&Config::default()), &lines).is_empty());
    }

    #[test]
    fn names_that_concatenate_alike_are_different_keys() {
        let mut lines = Vec::new();
        for _ in 0..5 {
            lines.push(transition("ab", "c"));
            lines.push(transition("a", "bc"));
        }
        assert!(run(&TransitionLimit::new(&Config::default()), &lines).is_empty());
        lines.push(transition("a", "bc"));
        let found = run(&TransitionLimit::new(&Config::default()), &lines);
        assert_eq!(fired_lines(&found), vec![11]);
        assert_eq!(found[0].1.evidence, vec![4, 6, 8, 10, 11]);
    }

    #[test]
    fn ids_are_listed_in_evidence_ids() {
        let lines: Vec<String> = (1..=6)
            .map(|n| {
                format!(r#"{{"type":"transition","task":"T1","id":"t{n}","from":"a","to":"b"}}"#)
            })
            .collect();
        let found = run(&TransitionLimit::new(&Config::default()), &lines);
        assert_eq!(found[0].1.evidence_ids, vec!["t2", "t3", "t4", "t5", "t6"]);
    }

    #[test]
    fn empty_phase_names_are_counted_too() {
        let lines: Vec<String> = (0..6).map(|_| transition("", "")).collect();
        let found = run(&TransitionLimit::new(&Config::default()), &lines);
        assert_eq!(
            found[0].1.reason,
            "Transition '' -> '' exceeded max_transitions (5) with 6 occurrences"
        );
    }

    #[test]
    fn table_is_capped_and_evicts_the_least_recently_used_key() {
        let mut table = CounterTable::<3, 4>::default();
        let at = |line| EvidenceRef::new(line, None);
        table.hit("", "keep", at(1));
        table.hit("", "old", at(2));
        table.hit("", "x", at(3));
        // "keep" is used again, so "old" is the least recently used.
        table.hit("", "keep", at(4));
        table.hit("", "new", at(5));
        assert_eq!(table.len(), 3);
        assert_eq!(table.hit("", "keep", at(6)).count, 3);
        // "old" was forgotten: it starts again from 1, evicting "x".
        assert_eq!(table.hit("", "old", at(7)).count, 1);
        assert_eq!(table.hit("", "new", at(8)).count, 2);
        assert_eq!(table.len(), 3);
        table.clear();
        assert_eq!(table.len(), 0);
        assert!(table.recent.is_empty());
    }

    #[test]
    fn evidence_comes_from_the_ring_of_recent_hits() {
        let mut table = CounterTable::<8, 4>::default();
        let at = |line| EvidenceRef::new(line, None);
        table.hit("", "a", at(1));
        table.hit("", "b", at(2));
        table.hit("", "a", at(3));
        let hit = table.hit("", "a", at(4));
        assert_eq!(table.evidence(hit, 5).0, vec![1, 3, 4]);
        assert_eq!(table.evidence(hit, 2).0, vec![3, 4]);
        // Line 1 leaves the ring of 4.
        table.hit("", "b", at(5));
        let hit = table.hit("", "a", at(6));
        assert_eq!(hit.count, 4);
        assert_eq!(table.evidence(hit, 5).0, vec![3, 4, 6]);
        assert_eq!(table.recent.len(), 4);
    }

    #[test]
    fn evidence_skips_hits_from_before_an_eviction() {
        let mut table = CounterTable::<1, 8>::default();
        let at = |line| EvidenceRef::new(line, None);
        table.hit("", "a", at(1));
        table.hit("", "a", at(2));
        // "b" evicts "a"; "a" then starts again from 1.
        table.hit("", "b", at(3));
        let hit = table.hit("", "a", at(4));
        assert_eq!(hit.count, 1);
        assert_eq!(table.evidence(hit, 5).0, vec![4]);
    }

    #[test]
    fn sparse_entries_show_only_the_recent_ones() {
        let mut config = Config::default();
        config.phases.visit_overrides.insert("x".into(), 2);
        let mut lines = vec![
            transition("a", "x"),
            transition("x", "a"),
            transition("a", "x"),
        ];
        lines.extend((0..20).map(|n| transition(&format!("p{n}"), &format!("q{n}"))));
        lines.push(transition("a", "x"));
        let found = run(&PhaseVisits::new(&config), &lines);
        // The 3rd entry fires; the earlier two are no longer among the last 16
        // transitions.
        assert_eq!(fired_lines(&found), vec![24]);
        assert_eq!(found[0].1.count, Some(3));
        assert_eq!(found[0].1.evidence, vec![24]);
    }

    #[test]
    fn many_phases_stay_within_the_cap() {
        let detector = PhaseVisits::new(&Config::default());
        let mut state = PhaseVisitsState::default();
        let mut out = Vec::new();
        for n in 0..200 {
            let event =
                Event::from_json(&transition("start", &format!("phase{n}"))).expect("valid event");
            detector.observe(&mut state, &ObservedEvent::new(n + 1, &event), &mut out);
        }
        assert_eq!(state.phases.len(), MAX_KEYS);
        assert!(out.is_empty());
    }

    #[test]
    fn reset_state_starts_counting_again() {
        let detector = TransitionLimit::new(&Config::default());
        let event = Event::from_json(&transition("a", "b")).expect("valid event");
        let mut state = TransitionLimitState::default();
        let mut out = Vec::new();
        for line in 1..=5 {
            detector.observe(&mut state, &ObservedEvent::new(line, &event), &mut out);
        }
        state = TransitionLimitState::default();
        detector.observe(&mut state, &ObservedEvent::new(6, &event), &mut out);
        assert!(out.is_empty());
    }
}
