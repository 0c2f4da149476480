//! Agent pairs: two agents handing work back and forth (ruling 4).
//!
//! Every `handoff` and `collaboration` between two different agents of a
//! task counts one exchange for the *unordered* pair {from, to}:
//! `planner -> coder` and `coder -> planner` both count for
//! {planner, coder}. More than `cycles.max_exchanges` (3) exchanges of one
//! pair within `cycles.window_secs` (600 s) is a cycle, so the 4th exchange
//! is the first detection, and every further exchange in the window fires
//! again with its count. Severity follows the count (low 4, medium 5–7,
//! high 8–11, critical 12+), and the action follows the severity: low and
//! medium break the cycle by skipping the agent receiving the work now,
//! high injects context, critical escalates. Without timestamps the window
//! does not apply. Cycle detections never add to the task's loop count; the
//! engine only counts the loop-feeding kinds (ruling 4).
//!
//! A handoff from an agent to itself is not an exchange between two agents
//! and is ignored.
//!
//! This module also holds what the three exchange detectors
//! ([`AgentPair`], [`crate::MultiAgent`], [`crate::TopicCycle`]) share: the
//! time window of exchanges, a small least-recently-used table, and the
//! ladder from severity to action.
//!
//! ```
//! use loopguard_core_types::{Action, Config, Event, Severity};
//! use loopguard_detectors::{AgentPair, Detector, ObservedEvent};
//!
//! let detector = AgentPair::new(&Config::default());
//! let mut state = Default::default();
//! let mut found = Vec::new();
//! for (line, (from, to)) in [("a", "b"), ("b", "a"), ("a", "b"), ("b", "a")]
//!     .iter()
//!     .enumerate()
//! {
//!     let text = format!(r#"{{"type":"handoff","task":"T","from":"{from}","to":"{to}"}}"#);
//!     let event = Event::from_json(&text)?;
//!     detector.observe(&mut state, &ObservedEvent::new(line as u64 + 1, &event), &mut found);
//! }
//! assert_eq!(found.len(), 1);
//! assert_eq!(found[0].severity, Severity::Low);
//! assert_eq!(found[0].action, Action::BreakCycle);
//! assert_eq!(found[0].skip_agent.as_deref(), Some("a"));
//! assert_eq!(found[0].evidence, vec![1, 2, 3, 4]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};

use loopguard_core_types::{
    Action, Config, CycleConfig, Detection, EventKind, Severity, Timestamp, kinds,
};
use rustc_hash::FxHasher;

use crate::{Detector, EvidenceRef, ObservedEvent, evidence_of};

/// Most exchanges one window keeps (per pair, per cycle, per topic). Counts
/// saturate here, well above the critical severity (12 by default).
pub const WINDOW_CAP: usize = 64;

/// Most agent pairs remembered per task; the least recently used is
/// forgotten first.
pub const MAX_PAIRS: usize = 32;

/// Detects two agents exchanging work too often (kind `agent_pair`).
#[derive(Debug, Clone)]
pub struct AgentPair {
    cycles: CycleConfig,
    window_ms: i64,
}

/// What [`AgentPair`] remembers about one task: one exchange window per
/// pair, at most [`MAX_PAIRS`] pairs.
#[derive(Debug, Default)]
pub struct AgentPairState {
    pairs: LruTable<ExchangeWindow>,
}

impl AgentPairState {
    /// How many pairs are remembered.
    pub fn pairs(&self) -> usize {
        self.pairs.len()
    }
}

impl AgentPair {
    /// The detector with the `[cycles]` limits of `config`.
    pub fn new(config: &Config) -> AgentPair {
        AgentPair {
            cycles: config.cycles.clone(),
            window_ms: window_millis(&config.cycles),
        }
    }
}

impl Detector for AgentPair {
    type State = AgentPairState;

    fn name(&self) -> &'static str {
        "agent_pair"
    }

    fn observe(
        &self,
        state: &mut AgentPairState,
        event: &ObservedEvent<'_>,
        out: &mut Vec<Detection>,
    ) {
        let (from, to) = match &event.event.kind {
            EventKind::Handoff { from, to, .. } | EventKind::Collaboration { from, to, .. } => {
                (from.as_str(), to.as_str())
            }
            _ => return,
        };
        if from == to {
            return;
        }
        let key = pair_key(from, to);
        let Some(window) = state.pairs.entry(key, MAX_PAIRS, ExchangeWindow::default) else {
            return;
        };
        let count = window.record(event.time, event.evidence_ref(), self.window_ms);
        if count <= self.cycles.max_exchanges {
            return;
        }
        let reason = format!(
            "agents '{from}' and '{to}' exchanged work {} times{} (more than {})",
            count_text(count),
            within_text(event.time, &self.cycles),
            self.cycles.max_exchanges,
        );
        out.push(cycle_detection(
            self.name(),
            kinds::AGENT_PAIR,
            &self.cycles,
            window,
            to,
            reason,
        ));
    }
}

/// The key of the unordered pair {a, b}: the same for `a -> b` and `b -> a`.
fn pair_key(a: &str, b: &str) -> u64 {
    let (a, b) = (hash_str(a), hash_str(b));
    let mut hasher = FxHasher::default();
    hasher.write_u64(a.min(b));
    hasher.write_u64(a.max(b));
    hasher.finish()
}

// ---------------------------------------------------------------------------
// Shared by the exchange detectors (agent_pair, multi_agent, topic_cycle).
// ---------------------------------------------------------------------------

/// A 64-bit hash of a name. Detectors keep hashes rather than strings to
/// keep per-task state small; with a few dozen live keys per task a
/// collision is vanishingly unlikely.
pub(crate) fn hash_str(text: &str) -> u64 {
    let mut hasher = FxHasher::default();
    text.hash(&mut hasher);
    hasher.finish()
}

/// The window in milliseconds, saturating rather than overflowing on
/// absurd settings.
pub(crate) fn window_millis(cycles: &CycleConfig) -> i64 {
    i64::try_from(cycles.window_secs.saturating_mul(1000)).unwrap_or(i64::MAX)
}

/// The action ladder of cycle detections (ruling 4): low and medium break
/// the cycle, high injects context, critical escalates.
pub(crate) fn cycle_action(severity: Severity) -> Action {
    match severity {
        Severity::Low | Severity::Medium => Action::BreakCycle,
        Severity::High => Action::InjectContext,
        Severity::Critical => Action::Escalate,
    }
}

/// A cycle detection of `kind` over the exchanges in `window` (oldest
/// first, the current one last). `receiver` is the agent receiving the work
/// now, skipped when the action is `break_cycle`.
pub(crate) fn cycle_detection(
    detector: &'static str,
    kind: &'static str,
    cycles: &CycleConfig,
    window: &ExchangeWindow,
    receiver: &str,
    reason: String,
) -> Detection {
    let count = window.count();
    let severity = cycles.severity(count);
    let action = cycle_action(severity);
    let (lines, ids) = window.evidence();
    let mut detection = Detection::new(detector, kind, severity, action, lines, reason);
    detection.count = Some(count);
    detection.evidence_ids = ids;
    if action == Action::BreakCycle {
        detection.skip_agent = Some(receiver.to_owned());
    }
    detection
}

/// The count as the reason shows it: "64" is a saturated window, so it
/// reads "at least 64".
pub(crate) fn count_text(count: u32) -> String {
    if usize::try_from(count).is_ok_and(|count| count >= WINDOW_CAP) {
        format!("at least {count}")
    } else {
        count.to_string()
    }
}

/// " within 600 s" when the event is timed (the window applies), else "".
pub(crate) fn within_text(time: Option<Timestamp>, cycles: &CycleConfig) -> String {
    match time {
        Some(_) => format!(" within {} s", cycles.window_secs),
        None => String::new(),
    }
}

/// `WindowEntry::at_ms` of an exchange without a time. No RFC 3339 time
/// (years 0000–9999) maps to it, so it cannot be confused with a real one.
const NO_TIME: i64 = i64::MIN;

/// One exchange in a window. The time is kept as bare milliseconds with a
/// sentinel (not `Option<Timestamp>`) to keep entries at 32 bytes.
#[derive(Debug, Clone)]
struct WindowEntry {
    at_ms: i64,
    evidence: EvidenceRef,
}

/// The exchanges of one pair, cycle or topic within the time window, oldest
/// first, at most [`WINDOW_CAP`].
#[derive(Debug, Default)]
pub(crate) struct ExchangeWindow {
    entries: VecDeque<WindowEntry>,
}

impl ExchangeWindow {
    /// Expires old exchanges, adds this one, and returns the count.
    pub(crate) fn record(
        &mut self,
        now: Option<Timestamp>,
        evidence: EvidenceRef,
        window_ms: i64,
    ) -> u32 {
        self.expire(now, window_ms);
        self.push(now, evidence);
        self.count()
    }

    /// Adds an exchange, dropping the oldest when the window is full.
    pub(crate) fn push(&mut self, at: Option<Timestamp>, evidence: EvidenceRef) {
        if self.entries.len() >= WINDOW_CAP {
            self.entries.pop_front();
        }
        self.entries.push_back(WindowEntry {
            at_ms: at.map_or(NO_TIME, Timestamp::as_millis),
            evidence,
        });
    }

    /// Drops timed exchanges more than `window_ms` before `now`. Untimed
    /// exchanges never expire, and nothing expires when `now` is unknown
    /// ("without timestamps the window does not apply"). Entries need not
    /// be in time order (timed and untimed events mix, clocks skew), so the
    /// whole window is checked; it holds at most [`WINDOW_CAP`] entries.
    pub(crate) fn expire(&mut self, now: Option<Timestamp>, window_ms: i64) {
        let Some(now) = now else {
            return;
        };
        let now = now.as_millis();
        self.entries
            .retain(|entry| entry.at_ms == NO_TIME || now.saturating_sub(entry.at_ms) <= window_ms);
        // A burst grows the buffer; give most of it back once the burst has
        // expired, so a quiet task keeps a small state. Only when a third
        // full or less, so a steady rate does not reallocate back and forth.
        let (len, capacity) = (self.entries.len(), self.entries.capacity());
        if capacity > 8 && len * 3 <= capacity {
            self.entries.shrink_to((len * 2).max(4));
        }
    }

    /// Exchanges in the window.
    pub(crate) fn count(&self) -> u32 {
        u32::try_from(self.entries.len()).unwrap_or(u32::MAX)
    }

    /// Lines and ids of the exchanges, oldest first.
    pub(crate) fn evidence(&self) -> (Vec<u64>, Vec<String>) {
        evidence_of(self.entries.iter().map(|entry| &entry.evidence))
    }
}

/// A small map from 64-bit keys to values that forgets the least recently
/// used key when full. Linear scans: it holds a few dozen entries at most,
/// where a scan of keys beats hashing and needs no extra memory.
#[derive(Debug)]
pub(crate) struct LruTable<V> {
    slots: Vec<LruSlot<V>>,
    clock: u64,
}

#[derive(Debug)]
struct LruSlot<V> {
    key: u64,
    used: u64,
    value: V,
}

impl<V> Default for LruTable<V> {
    fn default() -> Self {
        LruTable {
            slots: Vec::new(),
            clock: 0,
        }
    }
}

impl<V> LruTable<V> {
    /// The value under `key`, marked as just used; inserted with `make` if
    /// absent, replacing the least recently used value when `cap` keys are
    /// already held. `None` only when `cap` is 0.
    pub(crate) fn entry(
        &mut self,
        key: u64,
        cap: usize,
        make: impl FnOnce() -> V,
    ) -> Option<&mut V> {
        self.clock += 1;
        let used = self.clock;
        let found = self.slots.iter().position(|slot| slot.key == key);
        let slot = match found {
            Some(index) => self.slots.get_mut(index)?,
            None if self.slots.len() < cap => {
                self.slots.push(LruSlot {
                    key,
                    used,
                    value: make(),
                });
                self.slots.last_mut()?
            }
            None => {
                let slot = self.slots.iter_mut().min_by_key(|slot| slot.used)?;
                *slot = LruSlot {
                    key,
                    used,
                    value: make(),
                };
                slot
            }
        };
        slot.used = used;
        Some(&mut slot.value)
    }

    /// The value under `key`, if held (not marked as used).
    pub(crate) fn get(&self, key: u64) -> Option<&V> {
        self.slots
            .iter()
            .find(|slot| slot.key == key)
            .map(|slot| &slot.value)
    }

    /// Calls `visit` on every held value; those for which it returns `true`
    /// are marked as just used.
    pub(crate) fn visit_mut(&mut self, mut visit: impl FnMut(u64, &mut V) -> bool) {
        self.clock += 1;
        let used = self.clock;
        for slot in &mut self.slots {
            if visit(slot.key, &mut slot.value) {
                slot.used = used;
            }
        }
    }

    /// How many keys are held.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use loopguard_core_types::Event;

    use super::*;

    /// `ts` for `secs` seconds (and `millis`) after 2026-11-22T10:00:00Z.
    pub(crate) fn ts_at(secs: u64, millis: u64) -> String {
        format!(
            "2026-11-22T{:02}:{:02}:{:02}.{:03}Z",
            10 + secs / 3600,
            secs / 60 % 60,
            secs % 60,
            millis
        )
    }

    /// A handoff line, with a `ts` `secs` seconds in when given.
    pub(crate) fn handoff(from: &str, to: &str, secs: Option<u64>) -> Event {
        let ts = secs
            .map(|secs| format!(r#","ts":"{}""#, ts_at(secs, 0)))
            .unwrap_or_default();
        Event::from_json(&format!(
            r#"{{"type":"handoff","task":"T","from":"{from}","to":"{to}"{ts}}}"#
        ))
        .expect("valid handoff")
    }

    /// Runs `detector` over `events` as lines 1, 2, ... and returns each
    /// line's detections.
    pub(crate) fn run<D: Detector>(
        detector: &D,
        state: &mut D::State,
        first_line: u64,
        events: &[Event],
    ) -> Vec<Vec<Detection>> {
        events
            .iter()
            .zip(first_line..)
            .map(|(event, line)| {
                let mut out = Vec::new();
                detector.observe(state, &ObservedEvent::new(line, event), &mut out);
                out
            })
            .collect()
    }

    fn ping_pong(n: usize, secs: impl Fn(usize) -> Option<u64>) -> Vec<Event> {
        (0..n)
            .map(|i| {
                let (from, to) = if i % 2 == 0 { ("a", "b") } else { ("b", "a") };
                handoff(from, to, secs(i))
            })
            .collect()
    }

    fn detector() -> AgentPair {
        AgentPair::new(&Config::default())
    }

    #[test]
    fn fourth_exchange_of_a_pair_is_the_first_detection() {
        let found = run(
            &detector(),
            &mut AgentPairState::default(),
            1,
            &ping_pong(4, |_| None),
        );
        assert!(found[..3].iter().all(Vec::is_empty), "{found:?}");
        let [detection] = found[3].as_slice() else {
            panic!("one detection on the 4th exchange: {found:?}");
        };
        assert_eq!(detection.detector, "agent_pair");
        assert_eq!(detection.kind, kinds::AGENT_PAIR);
        assert_eq!(detection.severity, Severity::Low);
        assert_eq!(detection.action, Action::BreakCycle);
        // The 4th handoff is b -> a: a receives the work now.
        assert_eq!(detection.skip_agent.as_deref(), Some("a"));
        assert_eq!(detection.count, Some(4));
        assert_eq!(detection.evidence, vec![1, 2, 3, 4]);
        assert!(detection.evidence_ids.is_empty());
        assert_eq!(detection.loop_count, None);
        assert_eq!(
            detection.reason,
            "agents 'b' and 'a' exchanged work 4 times (more than 3)"
        );
    }

    #[test]
    fn every_further_exchange_fires_up_the_severity_ladder() {
        let found = run(
            &detector(),
            &mut AgentPairState::default(),
            1,
            &ping_pong(13, |_| None),
        );
        let ladder: Vec<_> = found
            .iter()
            .map(|d| d.first().map(|d| (d.count, d.severity, d.action)))
            .collect();
        let expected: Vec<_> = (1..=13u32)
            .map(|n| match n {
                1..=3 => None,
                4 => Some((Some(n), Severity::Low, Action::BreakCycle)),
                5..=7 => Some((Some(n), Severity::Medium, Action::BreakCycle)),
                8..=11 => Some((Some(n), Severity::High, Action::InjectContext)),
                _ => Some((Some(n), Severity::Critical, Action::Escalate)),
            })
            .collect();
        assert_eq!(ladder, expected);
        // Only break_cycle names an agent to skip.
        assert_eq!(found[4][0].skip_agent.as_deref(), Some("b"));
        assert_eq!(found[8][0].skip_agent, None);
        assert_eq!(found[12][0].skip_agent, None);
        assert!(found.iter().all(|d| d.len() <= 1));
    }

    #[test]
    fn collaborations_count_with_handoffs_for_the_unordered_pair() {
        let events = [
            handoff("planner", "coder", None),
            Event::from_json(
                r#"{"type":"collaboration","task":"T","from":"coder","to":"planner","request":"help"}"#,
            )
            .expect("valid"),
            handoff("coder", "planner", None),
            Event::from_json(
                r#"{"type":"collaboration","task":"T","from":"planner","to":"coder","request":"again"}"#,
            )
            .expect("valid"),
        ];
        let found = run(&detector(), &mut AgentPairState::default(), 1, &events);
        assert_eq!(found[3].len(), 1);
        assert_eq!(found[3][0].skip_agent.as_deref(), Some("coder"));
        assert!(
            found[3][0]
                .reason
                .starts_with("agents 'planner' and 'coder'")
        );
    }

    #[test]
    fn self_handoffs_other_pairs_and_other_event_types_do_not_count() {
        let mut events = vec![
            handoff("a", "b", None),
            handoff("a", "a", None),
            handoff("b", "b", None),
            handoff("a", "c", None),
            handoff("c", "b", None),
        ];
        for line in [
            r#"{"type":"transition","task":"T","from":"a","to":"b"}"#,
            r#"{"type":"failure","task":"T","agent":"a","error":"boom"}"#,
            r#"{"type":"turn","task":"T","agent":"b","output":"x","success":false}"#,
            r#"{"type":"completed","task":"T"}"#,
        ] {
            events.push(Event::from_json(line).expect("valid"));
        }
        events.push(handoff("b", "a", None));
        events.push(handoff("a", "b", None));
        let mut state = AgentPairState::default();
        let found = run(&detector(), &mut state, 1, &events);
        assert!(found.iter().all(Vec::is_empty), "{found:?}");
        // {a,b}, {a,c}, {b,c}: self-handoffs make no pair.
        assert_eq!(state.pairs(), 3);
        // The 4th {a,b} exchange fires, with only {a,b} lines as evidence.
        let more = run(&detector(), &mut state, 12, &[handoff("b", "a", None)]);
        assert_eq!(more[0][0].evidence, vec![1, 10, 11, 12]);
    }

    #[test]
    fn window_keeps_exactly_600_seconds() {
        // 0, 200, 400, 600: the first is exactly 600 s old, still in.
        let found = run(
            &detector(),
            &mut AgentPairState::default(),
            1,
            &ping_pong(4, |i| Some(i as u64 * 200)),
        );
        assert_eq!(found[3].len(), 1);
        assert_eq!(found[3][0].count, Some(4));
        assert_eq!(
            found[3][0].reason,
            "agents 'b' and 'a' exchanged work 4 times within 600 s (more than 3)"
        );
        // 0, 200, 400, 601: the first has expired.
        let found = run(
            &detector(),
            &mut AgentPairState::default(),
            1,
            &ping_pong(4, |i| Some(if i == 3 { 601 } else { i as u64 * 200 })),
        );
        assert!(found.iter().all(Vec::is_empty), "{found:?}");
    }

    #[test]
    fn window_is_strict_to_the_millisecond() {
        let at = |millis: u64| {
            Event::from_json(&format!(
                r#"{{"type":"handoff","task":"T","from":"a","to":"b","ts":"{}"}}"#,
                ts_at(600, millis)
            ))
            .expect("valid")
        };
        let first = ping_pong(3, |i| Some(i as u64));
        let mut state = AgentPairState::default();
        run(&detector(), &mut state, 1, &first);
        // 600.000 s after the first: in; 600.001 s: out.
        assert_eq!(run(&detector(), &mut state, 4, &[at(0)])[0].len(), 1);
        let mut state = AgentPairState::default();
        run(&detector(), &mut state, 1, &first);
        assert!(run(&detector(), &mut state, 4, &[at(1)])[0].is_empty());
    }

    #[test]
    fn untimed_exchanges_never_expire() {
        // Three untimed exchanges, then a timed one hours later: the untimed
        // ones are still in the window.
        let events = ping_pong(4, |i| (i == 3).then_some(7200));
        let found = run(&detector(), &mut AgentPairState::default(), 1, &events);
        assert_eq!(found[3].len(), 1, "{found:?}");
        assert_eq!(found[3][0].count, Some(4));
        // Timed exchanges an hour apart each expire the one before.
        let events = ping_pong(5, |i| Some(i as u64 * 3600));
        let found = run(&detector(), &mut AgentPairState::default(), 1, &events);
        assert!(found.iter().all(Vec::is_empty), "{found:?}");
    }

    #[test]
    fn ids_are_echoed_in_evidence_ids() {
        let events: Vec<Event> = (0..4)
            .map(|i| {
                let id = if i == 1 {
                    String::new()
                } else {
                    format!(r#","id":"e{i}""#)
                };
                let (from, to) = if i % 2 == 0 { ("a", "b") } else { ("b", "a") };
                Event::from_json(&format!(
                    r#"{{"type":"handoff","task":"T","from":"{from}","to":"{to}"{id}}}"#
                ))
                .expect("valid")
            })
            .collect();
        let found = run(&detector(), &mut AgentPairState::default(), 1, &events);
        assert_eq!(found[3][0].evidence, vec![1, 2, 3, 4]);
        assert_eq!(found[3][0].evidence_ids, vec!["e0", "e2", "e3"]);
    }

    #[test]
    fn window_saturates_at_its_cap() {
        let found = run(
            &detector(),
            &mut AgentPairState::default(),
            1,
            &ping_pong(WINDOW_CAP + 6, |_| None),
        );
        let last = &found[WINDOW_CAP + 5][0];
        assert_eq!(last.count, Some(64));
        assert_eq!(last.evidence.len(), WINDOW_CAP);
        assert_eq!(last.evidence.first(), Some(&7));
        assert_eq!(last.evidence.last(), Some(&(WINDOW_CAP as u64 + 6)));
        assert!(last.reason.contains("at least 64 times"), "{}", last.reason);
    }

    /// Three exchanges of {a,b}, then one exchange each of `others` pairs,
    /// then the 4th {a,b} exchange: whether it fires.
    fn fires_after_other_pairs(others: usize) -> (bool, usize) {
        let mut events = ping_pong(3, |_| None);
        events.extend((0..others).map(|i| handoff(&format!("x{i}"), "y", None)));
        events.push(handoff("a", "b", None));
        let mut state = AgentPairState::default();
        let found = run(&detector(), &mut state, 1, &events);
        let fired = found.last().is_some_and(|d| !d.is_empty());
        (fired, state.pairs())
    }

    #[test]
    fn pairs_are_capped_and_the_least_recently_used_is_forgotten() {
        // 31 other pairs fit next to {a,b}.
        assert_eq!(fires_after_other_pairs(MAX_PAIRS - 1), (true, MAX_PAIRS));
        // One more evicts {a,b}, the least recently used: it starts over.
        assert_eq!(fires_after_other_pairs(MAX_PAIRS), (false, MAX_PAIRS));
        // A pair used recently survives evictions of older ones.
        let mut events = ping_pong(3, |_| None);
        events.extend((0..MAX_PAIRS - 1).map(|i| handoff(&format!("x{i}"), "y", None)));
        events.push(handoff("b", "a", None)); // {a,b}: 4th exchange, now fresh
        events.extend((0..5).map(|i| handoff(&format!("z{i}"), "y", None)));
        events.push(handoff("a", "b", None));
        let found = run(&detector(), &mut AgentPairState::default(), 1, &events);
        assert_eq!(found.last().map(|d| d[0].count), Some(Some(5)));
    }

    #[test]
    fn lru_table_replaces_the_least_recently_used_and_rejects_cap_zero() {
        let mut table = LruTable::default();
        for key in 0..3 {
            *table.entry(key, 3, || 0).expect("cap 3") += 1;
        }
        *table.entry(0, 3, || 0).expect("held") += 1; // 1 is now the oldest
        *table.entry(9, 3, || 0).expect("cap 3") += 10;
        assert_eq!(table.get(0), Some(&2));
        assert_eq!(table.get(1), None);
        assert_eq!(table.get(2), Some(&1));
        assert_eq!(table.get(9), Some(&10));
        assert_eq!(table.len(), 3);
        assert!(LruTable::<u8>::default().entry(1, 0, || 0).is_none());
    }

    #[test]
    fn window_gives_memory_back_after_a_burst() {
        let mut window = ExchangeWindow::default();
        for i in 0..40 {
            window.push(Some(Timestamp(i)), EvidenceRef::new(1, None));
        }
        assert!(window.entries.capacity() >= 40);
        let later = Some(Timestamp(700_000));
        assert_eq!(window.record(later, EvidenceRef::new(2, None), 600_000), 1);
        assert!(
            window.entries.capacity() <= 8,
            "{}",
            window.entries.capacity()
        );
    }

    #[test]
    fn action_ladder_follows_ruling_4() {
        assert_eq!(cycle_action(Severity::Low), Action::BreakCycle);
        assert_eq!(cycle_action(Severity::Medium), Action::BreakCycle);
        assert_eq!(cycle_action(Severity::High), Action::InjectContext);
        assert_eq!(cycle_action(Severity::Critical), Action::Escalate);
        assert_eq!(pair_key("a", "b"), pair_key("b", "a"));
        assert_ne!(pair_key("a", "b"), pair_key("a", "c"));
    }

    #[test]
    fn absurd_window_saturates() {
        let mut config = Config::default();
        config.cycles.window_secs = u64::MAX;
        assert_eq!(window_millis(&config.cycles), i64::MAX);
        let detector = AgentPair::new(&config);
        // Events far apart still count with an (effectively) endless window.
        let found = run(
            &detector,
            &mut AgentPairState::default(),
            1,
            &ping_pong(4, |i| Some(i as u64 * 3000)),
        );
        assert_eq!(found[3].len(), 1);
    }
}
