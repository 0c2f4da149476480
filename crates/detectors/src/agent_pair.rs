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
//! A window keeps at most [`WINDOW_CAP`] (16) exchanges, so counts saturate
//! at 16 and the reason reads "at least 16"; the config holds
//! `cycles.severity_critical` to 16 or less, so every severity is reached.
//! A task remembers at most [`MAX_PAIRS`] pairs; a pair whose exchanges
//! have all left the window is forgotten.
//!
//! This module also holds what the three exchange detectors
//! ([`AgentPair`], [`crate::MultiAgent`], [`crate::TopicCycle`]) share: the
//! time window of exchanges, a small least-recently-used table, and the
//! ladder from severity to action.
//!
//! ```
//! use loopguard_core_types::{Action, Event, Severity};
//! use loopguard_config::Config;
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

use std::hash::{Hash, Hasher};

use loopguard_config::{Config, CycleConfig};
use loopguard_core_types::{Action, Detection, EventKind, Severity, Timestamp, kinds};
use rustc_hash::FxHasher;

use crate::evidence::NO_TIME;
use crate::{Detector, EvidenceRef, ObservedEvent, evidence_of};

/// Most exchanges one window keeps (per pair, per topic, and per cycle of
/// up to 8 agents; a longer cycle keeps its two laps). Counts saturate
/// here, above the critical severity (12 by default, and the config allows
/// at most 16), so every severity is still reached.
pub const WINDOW_CAP: usize = 16;

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
/// pair, at most [`MAX_PAIRS`] pairs. A pair whose exchanges have all left
/// the window is forgotten (it would count from zero anyway).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct AgentPairState {
    pairs: LruTable<ExchangeWindow>,
    sweep: Sweep,
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
    const WINDOWED: bool = true;
    const CONFIG_SECTION: &'static str = "cycles";
    const KINDS: &'static [&'static str] = &[kinds::AGENT_PAIR];

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
        let (from_hash, to_hash) = (hash_str(from), hash_str(to));
        if !event.counts_for(|agent| agent == from_hash || agent == to_hash) {
            // News (ruling 4, trace format 1.2), or a hub's news (ruling
            // 17): work, not a cycle.
            return;
        }
        state
            .sweep
            .sweep_table(&mut state.pairs, event.time, self.window_ms);
        let key = pair_key_of(from_hash, to_hash);
        // The earlier exchanges this one repeats count too, once, each in
        // its own pair's window: the loop began there.
        for earlier in event.exchange.earlier() {
            if !(earlier.involves(from_hash) || earlier.involves(to_hash)) {
                continue;
            }
            let their_key = pair_key_of(earlier.from, earlier.to);
            if let Some(window) = state
                .pairs
                .entry(their_key, MAX_PAIRS, ExchangeWindow::default)
            {
                window.add_earlier(event.time, earlier.evidence.clone(), self.window_ms);
            }
        }
        let Some(window) = state.pairs.entry(key, MAX_PAIRS, ExchangeWindow::default) else {
            return;
        };
        let count = window.record(event.time, event.evidence_ref(), self.window_ms);
        state.sweep.note(event.time, self.window_ms);
        if count <= self.cycles.max_exchanges {
            return;
        }
        let reason = format!(
            "agents '{from}' and '{to}' exchanged work {} times{} (more than {})",
            count_text(count, WINDOW_CAP),
            within_text(event.time, &self.cycles),
            self.cycles.max_exchanges,
        );
        out.push(cycle_detection(
            self.name(),
            kinds::AGENT_PAIR,
            &self.cycles,
            window,
            (to, vec![from.to_owned(), to.to_owned()]),
            reason,
        ));
    }
}

/// The key of the unordered pair {a, b} of name hashes: the same for
/// `a -> b` and `b -> a`.
fn pair_key_of(a: u64, b: u64) -> u64 {
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
    (receiver, agents): (&str, Vec<String>),
    reason: String,
) -> Detection {
    let count = window.count();
    let severity = cycles.severity(count);
    let action = cycle_action(severity);
    let (lines, ids) = window.evidence();
    let mut detection =
        Detection::new(detector, kind, severity, action, lines, reason).with_agents(agents);
    detection.count = Some(count);
    detection.evidence_ids = ids;
    if action == Action::BreakCycle {
        detection.skip_agent = Some(receiver.to_owned());
    }
    detection
}

/// The count as the reason shows it: a window of `cap` exchanges is
/// saturated, so its count reads "at least 16".
pub(crate) fn count_text(count: u32, cap: usize) -> String {
    if usize::try_from(count).is_ok_and(|count| count >= cap) {
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

/// The exchanges of one pair, cycle or topic within the time window, oldest
/// first, at most a cap ([`WINDOW_CAP`] for pairs and topics). Each is a
/// shared [`EvidenceRef`] (a pointer), which carries the exchange's time.
///
/// A `Vec`, not a `VecDeque`: dropping the oldest of a few dozen pointers
/// is a tiny move, and a `Vec` is a word smaller, which counts with dozens
/// of windows per task.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct ExchangeWindow {
    entries: Vec<EvidenceRef>,
    /// The earliest time among the timed entries (`i64::MAX` when none), so
    /// that the usual case, nothing old enough to drop, is one comparison
    /// instead of a walk through every entry's record.
    oldest_ms: i64,
}

impl Default for ExchangeWindow {
    fn default() -> Self {
        ExchangeWindow {
            entries: Vec::new(),
            oldest_ms: i64::MAX,
        }
    }
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
        self.push(evidence, WINDOW_CAP);
        self.count()
    }

    /// Adds an earlier exchange that a repeat made count (ruling 4, trace
    /// format 1.2) in line order, once: nothing when the window holds it
    /// already. Expires old exchanges first, as [`ExchangeWindow::record`].
    pub(crate) fn add_earlier(
        &mut self,
        now: Option<Timestamp>,
        evidence: EvidenceRef,
        window_ms: i64,
    ) {
        self.add_earlier_capped(now, evidence, window_ms, WINDOW_CAP);
    }

    /// [`ExchangeWindow::add_earlier`] with a cap of `cap` exchanges.
    pub(crate) fn add_earlier_capped(
        &mut self,
        now: Option<Timestamp>,
        evidence: EvidenceRef,
        window_ms: i64,
        cap: usize,
    ) {
        self.expire(now, window_ms);
        let line = evidence.line();
        if self.entries.iter().any(|entry| entry.line() == line) {
            return;
        }
        let at = self
            .entries
            .iter()
            .position(|entry| entry.line() > line)
            .unwrap_or(self.entries.len());
        if at == 0 && self.entries.len() >= cap.max(1) {
            // Older than everything a full window holds.
            return;
        }
        self.entries.insert(at, evidence);
        if self.entries.len() > cap.max(1) {
            self.entries.remove(0);
        }
        self.oldest_ms = self.scan_oldest_ms();
    }

    /// Adds an exchange, dropping the oldest when `cap` are held. The
    /// buffer grows in small steps up to `cap`, never past it.
    pub(crate) fn push(&mut self, evidence: EvidenceRef, cap: usize) {
        let cap = cap.max(1);
        let mut drained = false;
        if self.entries.len() >= cap {
            let excess = self.entries.len() + 1 - cap;
            self.entries.drain(..excess);
            drained = true;
        }
        let len = self.entries.len();
        if len == self.entries.capacity() {
            self.entries.reserve_exact((len / 2).max(2).min(cap - len));
        }
        let at = evidence.at_ms();
        self.entries.push(evidence);
        if drained {
            // The oldest were dropped: recompute from what is left.
            self.oldest_ms = self.scan_oldest_ms();
        } else if at != NO_TIME {
            self.oldest_ms = self.oldest_ms.min(at);
        }
    }

    /// Drops timed exchanges more than `window_ms` before `now`. Untimed
    /// exchanges never expire, and nothing expires when `now` is unknown
    /// ("without timestamps the window does not apply"). Entries need not
    /// be in time order (timed and untimed events mix, clocks skew), so the
    /// whole window is checked; it holds a few dozen entries at most.
    pub(crate) fn expire(&mut self, now: Option<Timestamp>, window_ms: i64) {
        let Some(now) = now else {
            return;
        };
        let now = now.as_millis();
        if now.saturating_sub(self.oldest_ms) <= window_ms {
            return;
        }
        self.entries.retain(|entry| {
            let at = entry.at_ms();
            at == NO_TIME || now.saturating_sub(at) <= window_ms
        });
        self.oldest_ms = self.scan_oldest_ms();
        // Give memory back once exchanges have expired, so a quiet pair,
        // cycle or topic costs next to nothing; but only with 4 or more
        // spare slots, so a steady rate does not reallocate back and forth.
        let (len, capacity) = (self.entries.len(), self.entries.capacity());
        if len == 0 {
            self.entries = Vec::new();
        } else if capacity - len >= 4 {
            self.entries.shrink_to(len + 2);
        }
    }

    /// Exchanges in the window.
    pub(crate) fn count(&self) -> u32 {
        u32::try_from(self.entries.len()).unwrap_or(u32::MAX)
    }

    /// Whether the window holds no exchange.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The time of the oldest timed exchange, if any.
    fn oldest_ms(&self) -> Option<i64> {
        (self.oldest_ms != i64::MAX).then_some(self.oldest_ms)
    }

    /// The earliest time among the timed entries, by a walk through them.
    fn scan_oldest_ms(&self) -> i64 {
        self.entries
            .iter()
            .map(EvidenceRef::at_ms)
            .filter(|at| *at != NO_TIME)
            .min()
            .unwrap_or(i64::MAX)
    }

    /// Lines and ids of the exchanges, oldest first.
    pub(crate) fn evidence(&self) -> (Vec<u64>, Vec<String>) {
        evidence_of(&self.entries)
    }
}

/// When a task's windows (one per pair, topic or cycle) next hold an
/// exchange old enough to drop.
///
/// A window is expired exactly whenever it counts an exchange, so counts
/// never include stale exchanges. A window that goes quiet is not touched,
/// though, and would keep its stale exchanges: every so often all windows
/// are expired together to give that memory back. "Every so often" is once
/// an exchange somewhere is older than the window plus an eighth of it, so
/// a sweep happens at most about eight times per window length of stream
/// time, never once per event.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Sweep {
    /// Sweep once the time passes this; `i64::MAX` when nothing is timed.
    due_ms: i64,
}

impl Default for Sweep {
    fn default() -> Self {
        Sweep { due_ms: i64::MAX }
    }
}

impl Sweep {
    /// Whether the windows should be swept at `now`.
    pub(crate) fn is_due(&self, now: Option<Timestamp>) -> bool {
        now.is_some_and(|now| now.as_millis() > self.due_ms)
    }

    /// Takes an exchange at `at` into account (the one just recorded).
    pub(crate) fn note(&mut self, at: Option<Timestamp>, window_ms: i64) {
        if let Some(at) = at {
            self.note_ms(at.as_millis(), window_ms);
        }
    }

    /// Takes `window`'s oldest timed exchange into account.
    pub(crate) fn note_window(&mut self, window: &ExchangeWindow, window_ms: i64) {
        if let Some(oldest) = window.oldest_ms() {
            self.note_ms(oldest, window_ms);
        }
    }

    fn note_ms(&mut self, at_ms: i64, window_ms: i64) {
        let due = at_ms
            .saturating_add(window_ms)
            .saturating_add(window_ms / 8);
        self.due_ms = self.due_ms.min(due);
    }

    /// Starts over before noting every window of a sweep.
    pub(crate) fn restart(&mut self) {
        self.due_ms = i64::MAX;
    }

    /// If due, expires every window of `table` and forgets the empty ones
    /// (an empty window counts from zero, like a missing one).
    pub(crate) fn sweep_table(
        &mut self,
        table: &mut LruTable<ExchangeWindow>,
        now: Option<Timestamp>,
        window_ms: i64,
    ) {
        if !self.is_due(now) {
            return;
        }
        self.restart();
        table.retain(|window| {
            window.expire(now, window_ms);
            self.note_window(window, window_ms);
            !window.is_empty()
        });
    }
}

/// A small map from 64-bit keys to values that forgets the least recently
/// used key when full. Linear scans: it holds a few dozen entries at most,
/// where a scan of keys beats hashing and needs no extra memory.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct LruTable<V> {
    slots: Vec<LruSlot<V>>,
    clock: u64,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
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
                if self.slots.len() == self.slots.capacity() {
                    // Small steps up to the cap: a table holds a few
                    // entries more often than it holds its cap.
                    let grow = (self.slots.len() / 2).max(2).min(cap - self.slots.len());
                    self.slots.reserve_exact(grow);
                }
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

    /// Keeps the values for which `keep` returns `true`, and gives back
    /// the room of the others.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&mut V) -> bool) {
        self.slots.retain_mut(|slot| keep(&mut slot.value));
        let (len, capacity) = (self.slots.len(), self.slots.capacity());
        if capacity - len >= 4 {
            self.slots.shrink_to(len + 2);
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
    fn out_of_order_times_still_expire_exactly() {
        // The cached oldest time must follow entries that arrive out of
        // order and entries dropped at the cap.
        let at = |secs: i64| Timestamp(secs * 1000);
        let mut window = ExchangeWindow::default();
        window.push(EvidenceRef::timed(1, Some(at(1_000)), None), WINDOW_CAP);
        window.push(EvidenceRef::timed(2, Some(at(0)), None), WINDOW_CAP);
        window.push(EvidenceRef::timed(3, None, None), WINDOW_CAP);
        window.expire(Some(at(700)), 600_000);
        assert_eq!(window.evidence().0, [1, 3]);
        window.expire(Some(at(1_600)), 600_000);
        assert_eq!(window.evidence().0, [1, 3]);
        window.expire(Some(at(1_601)), 600_000);
        assert_eq!(window.evidence().0, [3]);
        let mut full = ExchangeWindow::default();
        full.push(EvidenceRef::timed(1, Some(at(0)), None), 2);
        full.push(EvidenceRef::timed(2, Some(at(500)), None), 2);
        full.push(EvidenceRef::timed(3, Some(at(900)), None), 2);
        // Line 1 fell off at the cap; 500 s is now the oldest, so at 1,000 s
        // nothing is old enough and at 1,101 s line 2 goes.
        full.expire(Some(at(1_100)), 600_000);
        assert_eq!(full.evidence().0, [2, 3]);
        full.expire(Some(at(1_101)), 600_000);
        assert_eq!(full.evidence().0, [3]);
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
        assert_eq!(last.count, Some(16));
        assert_eq!(last.evidence.len(), WINDOW_CAP);
        assert_eq!(last.evidence.first(), Some(&7));
        assert_eq!(last.evidence.last(), Some(&(WINDOW_CAP as u64 + 6)));
        assert!(last.reason.contains("at least 16 times"), "{}", last.reason);
        // 16 is still critical: the whole severity ladder fits in a window.
        assert_eq!(last.severity, Severity::Critical);
        assert_eq!(found[WINDOW_CAP - 2][0].count, Some(15));
        assert!(
            !found[WINDOW_CAP - 2][0].reason.contains("at least"),
            "{}",
            found[WINDOW_CAP - 2][0].reason
        );
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
        let at =
            |line: u64, secs: i64| EvidenceRef::timed(line, Some(Timestamp(secs * 1000)), None);
        let mut window = ExchangeWindow::default();
        for i in 0..40 {
            window.push(at(1, i), WINDOW_CAP);
        }
        // Never past the cap, and grown in steps to exactly the cap.
        assert_eq!(window.count(), 16);
        assert_eq!(window.entries.capacity(), WINDOW_CAP);
        assert_eq!(
            window.record(Some(Timestamp(639_000)), at(2, 639), 600_000),
            2
        );
        assert!(
            window.entries.capacity() <= 8,
            "{}",
            window.entries.capacity()
        );
        // Once everything has expired, nothing is held.
        window.expire(Some(Timestamp(5_000_000)), 600_000);
        assert_eq!((window.count(), window.entries.capacity()), (0, 0));
    }

    #[test]
    fn quiet_pairs_are_swept_and_forgotten() {
        // Ten pairs exchange once each, a minute apart; then one pair keeps
        // going. The quiet pairs' exchanges leave the window and, once a
        // sweep is due, the pairs are forgotten.
        let mut events: Vec<Event> = (0..10)
            .map(|i| handoff(&format!("x{i}"), "y", Some(i * 60)))
            .collect();
        events.extend((0..10).map(|i| handoff("a", "b", Some(1_300 + i))));
        let mut state = AgentPairState::default();
        run(&detector(), &mut state, 1, &events);
        assert_eq!(state.pairs(), 1);
        // Without timestamps nothing expires, so nothing is swept.
        let events: Vec<Event> = (0..10)
            .map(|i| handoff(&format!("x{i}"), "y", None))
            .collect();
        let mut state = AgentPairState::default();
        run(&detector(), &mut state, 1, &events);
        assert_eq!(state.pairs(), 10);
    }

    #[test]
    fn a_sweep_never_drops_what_is_still_in_the_window() {
        // Pair {a,b} at 0, 300, 599 s; pair {c,d} at 700 s sweeps (the
        // 0 s exchange is 700 s old, past 600 + 75): {a,b} keeps 300 and
        // 599, so its exchanges at 800 and 850 make four within 600 s.
        let events = [
            handoff("a", "b", Some(0)),
            handoff("b", "a", Some(300)),
            handoff("a", "b", Some(599)),
            handoff("c", "d", Some(700)),
            handoff("b", "a", Some(800)),
            handoff("a", "b", Some(850)),
        ];
        let found = run(&detector(), &mut AgentPairState::default(), 1, &events);
        assert!(found[..5].iter().all(Vec::is_empty), "{found:?}");
        assert_eq!(found[5][0].evidence, vec![2, 3, 5, 6]);
    }

    #[test]
    fn the_config_holds_critical_within_a_window() {
        let mut config = Config::default();
        config.cycles.severity_critical = WINDOW_CAP as u32;
        assert_eq!(config.validate(), Ok(()));
        config.cycles.severity_critical += 1;
        assert!(config.validate().is_err());
    }

    #[test]
    fn action_ladder_follows_ruling_4() {
        assert_eq!(cycle_action(Severity::Low), Action::BreakCycle);
        assert_eq!(cycle_action(Severity::Medium), Action::BreakCycle);
        assert_eq!(cycle_action(Severity::High), Action::InjectContext);
        assert_eq!(cycle_action(Severity::Critical), Action::Escalate);
        let key = |a, b| pair_key_of(hash_str(a), hash_str(b));
        assert_eq!(key("a", "b"), key("b", "a"));
        assert_ne!(key("a", "b"), key("a", "c"));
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
