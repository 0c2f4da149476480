//! Multi-agent cycles: work passed around three to six agents and back
//! (ruling 4).
//!
//! Only `handoff` events make cycles (a `collaboration` asks for help, it
//! does not pass the work on). A handoff `X -> Y` closes a cycle when the
//! handoffs just before it chain back from `X` to a handoff *from* `Y`
//! (`Y -> ..., ... -> X, X -> Y`) through 3 to `cycles.max_cycle_agents`
//! (6) distinct agents. A two-agent ping-pong is [`crate::AgentPair`]'s
//! business, never a multi-agent cycle. Direction matters:
//! `a -> b -> c -> a` and `a -> c -> b -> a` are different cycles.
//!
//! Each known cycle keeps a window of the handoffs along its directed
//! edges, seeded with the handoffs that closed it; every handoff along a
//! known cycle's edge counts one exchange for that cycle. A cycle of `k`
//! agents is a loop once the work has gone around it twice in full within
//! `cycles.window_secs` (600 s): at least `2k` handoffs along the cycle, and
//! more than `cycles.max_exchanges` (3). That is the pair rule of ruling 4
//! carried over: two agents are a cycle at their 4th exchange, which is two
//! full laps. One lap is an ordinary iteration of a pipeline (plan, code,
//! review, back to plan), so it never fires on its own. `a -> b -> c -> a`
//! therefore fires on the 6th handoff, and every further handoff along the
//! cycle in the window fires again with its count. Severity and action
//! follow the same ladder as [`crate::AgentPair`]; the detection never adds
//! to the task's loop count. Without timestamps the window does not apply.
//!
//! A cycle's window keeps at most [`crate::agent_pair::WINDOW_CAP`] (16)
//! handoffs, or its two laps when it has more than 8 agents (possible with
//! `cycles.max_cycle_agents` above 8), so every cycle followed can fire.
//!
//! ```
//! use loopguard_core_types::Event;
//! use loopguard_config::Config;
//! use loopguard_detectors::{Detector, MultiAgent, ObservedEvent};
//!
//! let detector = MultiAgent::new(&Config::default());
//! let mut state = Default::default();
//! let mut found = Vec::new();
//! let laps = [("a", "b"), ("b", "c"), ("c", "a"), ("a", "b"), ("b", "c"), ("c", "a")];
//! for (line, (from, to)) in laps
//!     .iter()
//!     .enumerate()
//! {
//!     let text = format!(r#"{{"type":"handoff","task":"T","from":"{from}","to":"{to}"}}"#);
//!     let event = Event::from_json(&text)?;
//!     detector.observe(&mut state, &ObservedEvent::new(line as u64 + 1, &event), &mut found);
//! }
//! assert_eq!(found.len(), 1);
//! assert_eq!(found[0].count, Some(6));
//! assert_eq!(found[0].skip_agent.as_deref(), Some("a"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::VecDeque;
use std::hash::Hasher;
use std::iter;
use std::sync::Arc;

use loopguard_config::{Config, CycleConfig};
use loopguard_core_types::{Detection, EventKind, Timestamp, kinds};
use rustc_hash::FxHasher;

use crate::agent_pair::{
    ExchangeWindow, LruTable, Sweep, WINDOW_CAP, count_text, cycle_detection, hash_str,
    window_millis, within_text,
};
use crate::{Detector, EarlierExchange, EvidenceRef, ObservedEvent};

/// Most cycles remembered per task; the least recently used is forgotten
/// first.
pub const MAX_CYCLES: usize = 8;

/// The bounds `cycles.max_cycle_agents` is held to (the config validates
/// the same range; a config built in code is clamped).
const AGENTS_RANGE: (usize, usize) = (3, 16);

/// Detects work going around a cycle of 3 or more agents (kind
/// `multi_agent`).
#[derive(Debug, Clone)]
pub struct MultiAgent {
    cycles: CycleConfig,
    window_ms: i64,
    max_agents: usize,
}

/// What [`MultiAgent`] remembers about one task: the last
/// `max_cycle_agents - 1` handoffs (the most a new cycle's closing handoff
/// chains back through), and at most [`MAX_CYCLES`] known cycles with their
/// windows.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct MultiAgentState {
    recent: VecDeque<RecentHandoff>,
    known: LruTable<KnownCycle>,
    sweep: Sweep,
}

impl MultiAgentState {
    /// How many cycles are remembered.
    pub fn cycles(&self) -> usize {
        self.known.len()
    }

    /// How many recent handoffs are remembered.
    pub fn recent_handoffs(&self) -> usize {
        self.recent.len()
    }
}

/// One recent handoff. Agents are compared by hash; only the sender's name
/// is kept, for the label of a cycle it may close (the receiver of one
/// handoff in a chain is the sender of the next). Names are shared between
/// the recent handoffs, so a team's names are held once.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct RecentHandoff {
    from: Arc<str>,
    from_hash: u64,
    to_hash: u64,
    /// Its line, time and id.
    evidence: EvidenceRef,
    /// The earlier exchanges of the same text it made count (ruling 4,
    /// trace format 1.2), for the window of a cycle it helps close.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    earlier: Vec<EarlierExchange>,
}

/// A cycle seen closing, in canonical order (starting at its smallest
/// agent name).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct KnownCycle {
    agents: Box<[u64]>,
    /// `'a' -> 'b' -> 'c' -> 'a'`, for the reason.
    label: Box<str>,
    window: ExchangeWindow,
}

impl KnownCycle {
    /// The cycle's agents in order, read back from its label (`'a' -> 'b'
    /// -> 'c' -> 'a'`: the first again at the end).
    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .label
            .split(" -> ")
            .map(|name| {
                name.strip_prefix('\'')
                    .and_then(|name| name.strip_suffix('\''))
                    .unwrap_or(name)
                    .to_owned()
            })
            .collect();
        names.pop();
        names
    }

    /// Counts the earlier exchanges along the cycle's edges that a repeat
    /// made count (ruling 4, trace format 1.2), once each.
    fn add_earlier(&mut self, earlier: &[EarlierExchange], now: Option<Timestamp>, window_ms: i64) {
        let cap = window_cap(&self.agents);
        for earlier in earlier {
            if self.has_edge(earlier.from, earlier.to) {
                self.window
                    .add_earlier_capped(now, earlier.evidence.clone(), window_ms, cap);
            }
        }
    }

    /// Whether `from -> to` is one of the cycle's directed edges.
    fn has_edge(&self, from: u64, to: u64) -> bool {
        let next = self.agents.iter().cycle().skip(1);
        self.agents
            .iter()
            .zip(next)
            .any(|(a, b)| *a == from && *b == to)
    }
}

impl MultiAgent {
    /// The detector with the `[cycles]` limits of `config`.
    pub fn new(config: &Config) -> MultiAgent {
        let (fewest, most) = AGENTS_RANGE;
        let max_agents = usize::try_from(config.cycles.max_cycle_agents)
            .unwrap_or(most)
            .clamp(fewest, most);
        MultiAgent {
            cycles: config.cycles.clone(),
            window_ms: window_millis(&config.cycles),
            max_agents,
        }
    }

    /// If `from -> to` closes a cycle with the recent handoffs, how many
    /// recent handoffs (the newest ones) it takes: `k - 1` for `k` agents.
    fn closing_steps(&self, recent: &VecDeque<RecentHandoff>, from: u64, to: u64) -> Option<usize> {
        // Walking back, each handoff must have gone to the agent the next
        // one came from.
        let mut expected = from;
        for (steps, handoff) in (1..).zip(recent.iter().rev().take(self.max_agents - 1)) {
            if handoff.to_hash != expected {
                return None;
            }
            if handoff.from_hash == to {
                // k = steps + 1 agents; two is a ping-pong, not a cycle.
                // Walking further would repeat `to`, so stop either way.
                return (steps >= 2).then_some(steps);
            }
            let repeated = handoff.from_hash == from
                || recent
                    .iter()
                    .rev()
                    .take(steps - 1)
                    .any(|later| later.from_hash == handoff.from_hash);
            if repeated {
                return None;
            }
            expected = handoff.from_hash;
        }
        None
    }
}

impl Detector for MultiAgent {
    type State = MultiAgentState;
    const WINDOWED: bool = true;
    const CONFIG_SECTION: &'static str = "cycles";
    const KINDS: &'static [&'static str] = &[kinds::MULTI_AGENT];

    fn name(&self) -> &'static str {
        "multi_agent"
    }

    fn observe(
        &self,
        state: &mut MultiAgentState,
        event: &ObservedEvent<'_>,
        out: &mut Vec<Detection>,
    ) {
        let EventKind::Handoff { from, to, .. } = &event.event.kind else {
            return;
        };
        if from == to {
            // Not an exchange between agents, and it does not break a chain.
            return;
        }
        if !event.counts_for(|_| true) {
            // News (ruling 4, trace format 1.2) for any cycle, or a hub's
            // news (ruling 17): work, not a cycle.
            return;
        }

        let (from_hash, to_hash) = (hash_str(from), hash_str(to));
        // Whether it counts between its own two agents: then it may chain
        // into a new cycle (both are agents of any cycle it closes).
        let counts_here = event.counts_for(|agent| agent == from_hash || agent == to_hash);
        let now = event.time;
        let evidence = event.evidence_ref();

        // Every known cycle with this edge counts the handoff. The one to
        // report: highest count, then fewest agents (the tightest loop), so
        // one handoff gives at most one detection. When a sweep is due, the
        // other cycles' windows are expired too, to give memory back.
        let mut best: Option<(u32, usize, u64)> = None;
        let sweep = state.sweep.is_due(now);
        if sweep {
            state.sweep.restart();
        }
        let window_ms = self.window_ms;
        state.known.visit_mut(|key, cycle| {
            let counts = cycle.has_edge(from_hash, to_hash)
                && event.counts_for(|agent| cycle.agents.contains(&agent));
            if counts || sweep {
                cycle.window.expire(now, window_ms);
            }
            if counts {
                let cap = window_cap(&cycle.agents);
                cycle.add_earlier(event.exchange.earlier(), now, window_ms);
                cycle.window.push(evidence.clone(), cap);
                let candidate = (cycle.window.count(), cycle.agents.len(), key);
                if best.is_none_or(|best| outranks(candidate, best)) {
                    best = Some(candidate);
                }
            }
            if sweep {
                state.sweep.note_window(&cycle.window, window_ms);
            }
            counts
        });
        state.sweep.note(now, window_ms);

        if !counts_here {
            out.extend(
                best.and_then(|(_, _, key)| state.known.get(key))
                    .and_then(|cycle| self.detection(cycle, now, to)),
            );
            return;
        }
        let earlier = event.exchange.earlier();
        let closed = self
            .closing_steps(&state.recent, from_hash, to_hash)
            .and_then(|steps| {
                self.new_cycle(state, steps, (from, from_hash), now, (&evidence, earlier))
            });

        if let Some((_, cycle)) = &closed {
            // Its seed may be older than anything noted so far.
            state.sweep.note_window(&cycle.window, window_ms);
        }
        let ring = self.max_agents - 1;
        if state.recent.len() >= ring {
            state.recent.pop_front();
        } else if state.recent.capacity() == 0 {
            // The ring's final size, not the next power of two.
            state.recent.reserve_exact(ring);
        }
        let from = intern(&state.recent, from);
        state.recent.push_back(RecentHandoff {
            from,
            from_hash,
            to_hash,
            evidence,
            earlier: earlier.to_vec(),
        });

        // Choose before registering the new cycle: registering may evict a
        // cycle this very handoff counted for.
        let new_wins = closed.as_ref().is_some_and(|(key, cycle)| {
            let candidate = (cycle.window.count(), cycle.agents.len(), *key);
            best.is_none_or(|best| outranks(candidate, best))
        });
        let chosen = if new_wins {
            closed.as_ref().map(|(_, cycle)| cycle)
        } else {
            best.and_then(|(_, _, key)| state.known.get(key))
        };
        out.extend(chosen.and_then(|cycle| self.detection(cycle, now, to)));
        if let Some((key, cycle)) = closed {
            // Absent, so this inserts (evicting the least recently used).
            let _ = state.known.entry(key, MAX_CYCLES, || cycle);
        }
    }
}

/// Most handoffs a cycle of `agents` keeps in its window: [`WINDOW_CAP`],
/// or its two full laps if a cycle is that long (more than 8 agents), so
/// that every cycle followed can fire.
fn window_cap(agents: &[u64]) -> usize {
    WINDOW_CAP.max(2 * agents.len())
}

/// The name held by a recent handoff equal to `name`, shared, or a new one.
fn intern(recent: &VecDeque<RecentHandoff>, name: &str) -> Arc<str> {
    recent
        .iter()
        .find(|handoff| *handoff.from == *name)
        .map_or_else(|| Arc::from(name), |handoff| Arc::clone(&handoff.from))
}

/// Whether cycle `a` is a better report than `b` (count, agents, key):
/// more handoffs, or as many along fewer agents.
fn outranks(a: (u32, usize, u64), b: (u32, usize, u64)) -> bool {
    a.0 > b.0 || (a.0 == b.0 && a.1 < b.1)
}

impl MultiAgent {
    /// The cycle closed by the newest `steps` recent handoffs and the
    /// handoff `from -> ...` now, with its key, if it is not known yet. Its
    /// window is seeded with those handoffs.
    fn new_cycle(
        &self,
        state: &MultiAgentState,
        steps: usize,
        (from, from_hash): (&str, u64),
        now: Option<Timestamp>,
        (evidence, earlier): (&EvidenceRef, &[EarlierExchange]),
    ) -> Option<(u64, KnownCycle)> {
        let recent = &state.recent;
        // The chain in order: the recent handoffs that form it, then this
        // one. Their senders are the cycle's agents, from `to` on.
        let skip = recent.len().saturating_sub(steps);
        let chain = || recent.iter().skip(skip);
        let agents = || {
            chain()
                .map(|handoff| (&*handoff.from, handoff.from_hash))
                .chain(iter::once((from, from_hash)))
        };
        let cap = WINDOW_CAP.max(2 * (steps + 1));
        let k = steps + 1;
        let start = agents()
            .enumerate()
            .min_by(|(_, a), (_, b)| a.0.cmp(b.0))
            .map_or(0, |(index, _)| index);
        let canonical = || agents().cycle().skip(start).take(k);
        let mut hasher = FxHasher::default();
        for (_, hash) in canonical() {
            hasher.write_u64(hash);
        }
        let key = hasher.finish();
        if state.known.get(key).is_some() {
            // Already counted this handoff along its edge.
            return None;
        }
        let mut window = ExchangeWindow::default();
        for handoff in chain() {
            window.push(handoff.evidence.clone(), cap);
        }
        window.push(evidence.clone(), cap);
        window.expire(now, self.window_ms);
        let names: Vec<&str> = canonical().map(|(name, _)| name).collect();
        let label = names
            .iter()
            .chain(names.first())
            .map(|name| format!("'{name}'"))
            .collect::<Vec<_>>()
            .join(" -> ");
        let mut cycle = KnownCycle {
            agents: canonical().map(|(_, hash)| hash).collect(),
            label: label.into(),
            window,
        };
        for handoff in chain() {
            cycle.add_earlier(&handoff.earlier, now, self.window_ms);
        }
        cycle.add_earlier(earlier, now, self.window_ms);
        Some((key, cycle))
    }

    /// The detection for `cycle` if the work went around it twice in full
    /// (and more than `max_exchanges` handoffs) in the window; `to`
    /// receives the work now.
    fn detection(&self, cycle: &KnownCycle, now: Option<Timestamp>, to: &str) -> Option<Detection> {
        let count = cycle.window.count();
        let laps = u32::try_from(cycle.agents.len().saturating_mul(2)).unwrap_or(u32::MAX);
        let needed = laps.max(self.cycles.max_exchanges.saturating_add(1));
        if count < needed {
            return None;
        }
        let reason = format!(
            "work went around {} twice: {} handoffs along the cycle{} (a loop from {})",
            cycle.label,
            count_text(count, window_cap(&cycle.agents)),
            within_text(now, &self.cycles),
            needed,
        );
        Some(cycle_detection(
            self.name(),
            kinds::MULTI_AGENT,
            &self.cycles,
            &cycle.window,
            (to, cycle.names()),
            reason,
        ))
    }
}

#[cfg(test)]
mod tests {
    use loopguard_core_types::{Action, Event, Severity};

    use super::*;
    use crate::agent_pair::tests::{handoff, run};

    fn detector() -> MultiAgent {
        MultiAgent::new(&Config::default())
    }

    /// Untimed handoffs along `hops` ("a>b").
    fn hops(hops: &[&str]) -> Vec<Event> {
        hops.iter()
            .map(|hop| {
                let (from, to) = hop.split_once('>').expect("a>b");
                handoff(from, to, None)
            })
            .collect()
    }

    fn fired(found: &[Vec<Detection>]) -> Vec<(usize, u32)> {
        found
            .iter()
            .enumerate()
            .flat_map(|(index, d)| d.iter().map(move |d| (index + 1, d.count.unwrap_or(0))))
            .collect()
    }

    #[test]
    fn three_agent_cycle_fires_on_the_sixth_handoff() {
        let mut state = MultiAgentState::default();
        let found = run(
            &detector(),
            &mut state,
            1,
            &hops(&["a>b", "b>c", "c>a", "a>b", "b>c", "c>a"]),
        );
        // One lap and more (4 and 5 handoffs along the cycle) is not a loop.
        assert!(found[..5].iter().all(Vec::is_empty), "{found:?}");
        let [detection] = found[5].as_slice() else {
            panic!("one detection: {found:?}");
        };
        assert_eq!(detection.detector, "multi_agent");
        assert_eq!(detection.kind, kinds::MULTI_AGENT);
        // 6 exchanges: medium on the ladder of ruling 4.
        assert_eq!(detection.severity, Severity::Medium);
        assert_eq!(detection.action, Action::BreakCycle);
        assert_eq!(detection.skip_agent.as_deref(), Some("a"));
        assert_eq!(detection.count, Some(6));
        assert_eq!(detection.evidence, vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(detection.loop_count, None);
        assert_eq!(
            detection.reason,
            "work went around 'a' -> 'b' -> 'c' -> 'a' twice: 6 handoffs along the cycle (a loop from 6)"
        );
        assert_eq!(state.cycles(), 1);
    }

    #[test]
    fn every_further_handoff_along_the_cycle_fires_up_the_ladder() {
        let lap = ["a>b", "b>c", "c>a"];
        let events = hops(&lap.repeat(5));
        let found = run(&detector(), &mut MultiAgentState::default(), 1, &events);
        let fired = fired(&found);
        assert_eq!(
            fired,
            (6..=15).map(|n| (n, n as u32)).collect::<Vec<_>>(),
            "from the 6th handoff on, each fires with its count"
        );
        let ladder: Vec<_> = found[5..]
            .iter()
            .map(|d| (d[0].severity, d[0].action))
            .collect();
        let medium = (Severity::Medium, Action::BreakCycle);
        let high = (Severity::High, Action::InjectContext);
        let critical = (Severity::Critical, Action::Escalate);
        assert_eq!(
            ladder,
            [
                medium, medium, high, high, high, high, critical, critical, critical, critical
            ]
        );
        let last = &found[14][0];
        assert_eq!(last.skip_agent, None);
        assert_eq!(found[7][0].skip_agent, None);
        assert_eq!(found[6][0].skip_agent.as_deref(), Some("b"));
        // The canonical name does not depend on where the cycle was entered.
        assert!(
            last.reason
                .starts_with("work went around 'a' -> 'b' -> 'c' -> 'a'")
        );
    }

    #[test]
    fn cycle_is_named_from_its_smallest_agent() {
        let found = run(
            &detector(),
            &mut MultiAgentState::default(),
            1,
            &hops(&[
                "tester>coder",
                "coder>planner",
                "planner>tester",
                "tester>coder",
                "coder>planner",
                "planner>tester",
            ]),
        );
        assert_eq!(fired(&found), vec![(6, 6)]);
        assert!(
            found[5][0]
                .reason
                .starts_with("work went around 'coder' -> 'planner' -> 'tester' -> 'coder' twice:"),
            "{}",
            found[5][0].reason
        );
        assert_eq!(found[5][0].skip_agent.as_deref(), Some("tester"));
    }

    #[test]
    fn ping_pong_is_never_a_multi_agent_cycle() {
        let events = hops(&["a>b", "b>a"].repeat(10));
        let mut state = MultiAgentState::default();
        let found = run(&detector(), &mut state, 1, &events);
        assert!(found.iter().all(Vec::is_empty));
        assert_eq!(state.cycles(), 0);
    }

    #[test]
    fn direction_matters() {
        // a->b->c->a and a->c->b->a: three handoffs each, neither fires.
        let mut state = MultiAgentState::default();
        let found = run(
            &detector(),
            &mut state,
            1,
            &hops(&["a>b", "b>c", "c>a", "a>c", "c>b", "b>a"]),
        );
        assert!(found.iter().all(Vec::is_empty), "{found:?}");
        assert_eq!(state.cycles(), 2);
        // The next lap of a->b->c->a is its 4th to 6th handoffs; none of
        // them is on a->c->b->a, which stays at 3.
        let found = run(&detector(), &mut state, 7, &hops(&["a>b", "b>c", "c>a"]));
        assert_eq!(fired(&found), vec![(3, 6)]);
        assert_eq!(found[2][0].evidence, vec![1, 2, 3, 7, 8, 9]);
        assert!(found[2][0].reason.contains("'a' -> 'b' -> 'c' -> 'a'"));
        assert_eq!(state.cycles(), 2);
    }

    #[test]
    fn one_detection_per_handoff_for_the_busiest_cycle() {
        // a->b->c->a closes (1-3) and gets a 4th handoff (4); a->b->d->a
        // closes with that a->b (4-6). Every a->b is on both cycles.
        let found = run(
            &detector(),
            &mut MultiAgentState::default(),
            1,
            &hops(&[
                "a>b", "b>c", "c>a", "a>b", "b>d", "d>a", "a>b", "b>c", "c>a", "a>b", "b>d", "d>a",
                "a>b",
            ]),
        );
        // a->b->c->a: 6 at line 8; a->b->d->a: 6 at line 11.
        assert_eq!(
            fired(&found),
            vec![(8, 6), (9, 7), (10, 8), (11, 6), (12, 7), (13, 9)]
        );
        assert!(found[10][0].reason.contains("'a' -> 'b' -> 'd' -> 'a'"));
        assert_eq!(found[10][0].evidence, vec![4, 5, 6, 7, 10, 11]);
        // Line 13 is the 9th handoff of a->b->c->a and the 8th of
        // a->b->d->a: one detection, for the busier cycle.
        assert_eq!(found[12].len(), 1);
        assert!(found[12][0].reason.contains("'a' -> 'b' -> 'c' -> 'a'"));
        assert_eq!(found[12][0].evidence, vec![1, 2, 3, 4, 7, 8, 9, 10, 13]);
    }

    #[test]
    fn repeated_agents_and_collaborations_make_no_cycle() {
        // y->p->q->p->x->y: p twice, not a cycle of distinct agents.
        let mut state = MultiAgentState::default();
        let found = run(
            &detector(),
            &mut state,
            1,
            &hops(&["y>p", "p>q", "q>p", "p>x", "x>y"]),
        );
        assert!(found.iter().all(Vec::is_empty), "{found:?}");
        assert_eq!(state.cycles(), 0);
        // The next y->p does close p->x->y->p, a cycle of distinct agents.
        run(&detector(), &mut state, 6, &hops(&["y>p"]));
        assert_eq!(state.cycles(), 1);
        // Collaborations do not pass the work on.
        let events: Vec<Event> = ["a>b", "b>c", "c>a", "a>b"]
            .iter()
            .map(|hop| {
                let (from, to) = hop.split_once('>').expect("a>b");
                Event::from_json(&format!(
                    r#"{{"type":"collaboration","task":"T","from":"{from}","to":"{to}","request":"r"}}"#
                ))
                .expect("valid")
            })
            .collect();
        let mut state = MultiAgentState::default();
        let found = run(&detector(), &mut state, 1, &events);
        assert!(found.iter().all(Vec::is_empty));
        assert_eq!((state.cycles(), state.recent_handoffs()), (0, 0));
    }

    #[test]
    fn self_handoffs_and_other_events_are_ignored() {
        let mut events = hops(&["a>b", "b>b", "b>c"]);
        events.push(
            Event::from_json(r#"{"type":"transition","task":"T","from":"c","to":"a"}"#)
                .expect("valid"),
        );
        events.extend(hops(&["c>a", "a>b", "c>c", "b>c", "c>a"]));
        let found = run(&detector(), &mut MultiAgentState::default(), 1, &events);
        assert_eq!(fired(&found), vec![(9, 6)]);
        assert_eq!(found[8][0].evidence, vec![1, 3, 5, 6, 8, 9]);
    }

    #[test]
    fn cycles_longer_than_the_limit_are_not_followed() {
        // 7 agents: longer than max_cycle_agents (6), never a cycle.
        let lap = ["a>b", "b>c", "c>d", "d>e", "e>f", "f>g", "g>a"];
        let mut state = MultiAgentState::default();
        let found = run(&detector(), &mut state, 1, &hops(&lap.repeat(3)));
        assert!(found.iter().all(Vec::is_empty));
        assert_eq!(state.cycles(), 0);
        assert_eq!(state.recent_handoffs(), 5);
        // With max_cycle_agents = 3, a 4-agent cycle is not followed either.
        let mut config = Config::default();
        config.cycles.max_cycle_agents = 3;
        let lap = ["a>b", "b>c", "c>d", "d>a"];
        let found = run(
            &MultiAgent::new(&config),
            &mut MultiAgentState::default(),
            1,
            &hops(&lap.repeat(3)),
        );
        assert!(found.iter().all(Vec::is_empty));
    }

    #[test]
    fn six_agent_cycle_fires_after_two_laps() {
        let lap = ["a>b", "b>c", "c>d", "d>e", "e>f", "f>a"];
        let found = run(
            &detector(),
            &mut MultiAgentState::default(),
            1,
            &hops(&lap.repeat(2)),
        );
        // Not when it first closes (6 handoffs, one lap): at the 12th.
        assert_eq!(fired(&found), vec![(12, 12)]);
        let detection = &found[11][0];
        assert_eq!(detection.severity, Severity::Critical);
        assert_eq!(detection.action, Action::Escalate);
        assert_eq!(detection.skip_agent, None);
        assert_eq!(detection.evidence, (1..=12).collect::<Vec<u64>>());
        assert!(
            detection
                .reason
                .ends_with("twice: 12 handoffs along the cycle (a loop from 12)"),
            "{}",
            detection.reason
        );
    }

    #[test]
    fn four_and_five_agent_cycles_fire_on_their_second_full_lap() {
        for (lap, at) in [
            (&["a>b", "b>c", "c>d", "d>a"][..], 8),
            (&["a>b", "b>c", "c>d", "d>e", "e>a"][..], 10),
        ] {
            let found = run(
                &detector(),
                &mut MultiAgentState::default(),
                1,
                &hops(&lap.repeat(3)),
            );
            let expected: Vec<_> = (at..=lap.len() * 3).map(|n| (n, n as u32)).collect();
            assert_eq!(fired(&found), expected, "{} agents", lap.len());
            let first = &found[at - 1][0];
            assert_eq!(first.severity, Severity::High, "{} agents", lap.len());
            assert_eq!(first.action, Action::InjectContext);
        }
    }

    #[test]
    fn a_higher_max_exchanges_is_needed_too() {
        // Two laps of three agents are 6 handoffs; with max_exchanges 7 the
        // cycle needs 8, as a pair would.
        let mut config = Config::default();
        config.cycles.max_exchanges = 7;
        config.cycles.severity_medium = 8;
        config.cycles.severity_high = 10;
        let lap = ["a>b", "b>c", "c>a"];
        let found = run(
            &MultiAgent::new(&config),
            &mut MultiAgentState::default(),
            1,
            &hops(&lap.repeat(3)),
        );
        assert_eq!(fired(&found), vec![(8, 8), (9, 9)]);
        assert!(found[7][0].reason.ends_with("(a loop from 8)"));
    }

    fn timed(hops: &[(&str, u64)]) -> Vec<Event> {
        hops.iter()
            .map(|(hop, secs)| {
                let (from, to) = hop.split_once('>').expect("a>b");
                handoff(from, to, Some(*secs))
            })
            .collect()
    }

    #[test]
    fn window_keeps_exactly_600_seconds() {
        let laps = |last: u64| {
            timed(&[
                ("a>b", 0),
                ("b>c", 100),
                ("c>a", 200),
                ("a>b", 300),
                ("b>c", 400),
                ("c>a", last),
            ])
        };
        let found = run(&detector(), &mut MultiAgentState::default(), 1, &laps(600));
        assert_eq!(fired(&found), vec![(6, 6)]);
        assert!(
            found[5][0]
                .reason
                .contains("6 handoffs along the cycle within 600 s")
        );
        // 601 s after the first, it has left the window: 5 handoffs.
        let found = run(&detector(), &mut MultiAgentState::default(), 1, &laps(601));
        assert!(found.iter().all(Vec::is_empty), "{found:?}");
    }

    #[test]
    fn a_cycle_closed_slowly_is_seeded_with_what_is_still_in_the_window() {
        // The chain closes, but its first handoff is already out of the
        // window: the cycle starts with 2 handoffs, not 3.
        let found = run(
            &detector(),
            &mut MultiAgentState::default(),
            1,
            &timed(&[
                ("a>b", 0),
                ("b>c", 500),
                ("c>a", 700),
                ("a>b", 800),
                ("b>c", 900),
                ("c>a", 1000),
                ("a>b", 1050),
            ]),
        );
        assert_eq!(fired(&found), vec![(7, 6)]);
        assert_eq!(found[6][0].evidence, vec![2, 3, 4, 5, 6, 7]);
    }

    #[test]
    fn ids_are_echoed_in_evidence_ids() {
        let events: Vec<Event> = ["a>b", "b>c", "c>a", "a>b", "b>c", "c>a"]
            .iter()
            .zip(["h1", "", "h3", "h4", "", "h6"])
            .map(|(hop, id)| {
                let (from, to) = hop.split_once('>').expect("a>b");
                let id = if id.is_empty() {
                    String::new()
                } else {
                    format!(r#","id":"{id}""#)
                };
                Event::from_json(&format!(
                    r#"{{"type":"handoff","task":"T","from":"{from}","to":"{to}"{id}}}"#
                ))
                .expect("valid")
            })
            .collect();
        let found = run(&detector(), &mut MultiAgentState::default(), 1, &events);
        assert_eq!(found[5][0].evidence, vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(found[5][0].evidence_ids, vec!["h1", "h3", "h4", "h6"]);
    }

    /// Closes cycle 0 (3 handoffs), then `others` other 3-agent cycles,
    /// then sends cycle 0 around a second time: whether its last handoff
    /// fires (the 6th if cycle 0 is remembered; a fresh cycle of 3 if not).
    fn fires_after_other_cycles(others: usize) -> (bool, usize) {
        let mut names = Vec::new();
        for i in 0..=others {
            let (a, b, c) = (format!("a{i}"), format!("b{i}"), format!("c{i}"));
            names.extend([format!("{a}>{b}"), format!("{b}>{c}"), format!("{c}>{a}")]);
        }
        names.extend(["a0>b0", "b0>c0", "c0>a0"].map(str::to_owned));
        let hops_text: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut state = MultiAgentState::default();
        let found = run(&detector(), &mut state, 1, &hops(&hops_text));
        (found.last().is_some_and(|d| !d.is_empty()), state.cycles())
    }

    #[test]
    fn cycles_are_capped_and_the_least_recently_used_is_forgotten() {
        assert_eq!(fires_after_other_cycles(MAX_CYCLES - 1), (true, MAX_CYCLES));
        assert_eq!(fires_after_other_cycles(MAX_CYCLES), (false, MAX_CYCLES));
    }

    #[test]
    fn registering_a_cycle_never_loses_the_detection_it_evicts() {
        // Eight cycles a->b->ci->a fill the table; each a->b counts for all
        // of them. Then a->b closes a ninth, a->b->c9->a: registering it
        // evicts a cycle this same a->b counted for, the busiest one.
        let mut text = Vec::new();
        for i in 1..=8 {
            text.extend(["a>b".to_owned(), format!("b>c{i}"), format!("c{i}>a")]);
        }
        text.extend(["b>c9".to_owned(), "c9>a".to_owned(), "a>b".to_owned()]);
        let text: Vec<&str> = text.iter().map(String::as_str).collect();
        let mut state = MultiAgentState::default();
        let found = run(&detector(), &mut state, 1, &hops(&text));
        let last = found.last().expect("events");
        assert_eq!(last.len(), 1, "{found:?}");
        // a->b->c1->a: 3 handoffs, 7 more a->b, and this one: 11, past the
        // 6 of two laps.
        assert_eq!(last[0].count, Some(11));
        assert!(last[0].reason.contains("'a' -> 'b' -> 'c1' -> 'a'"));
        assert_eq!(state.cycles(), MAX_CYCLES);
    }

    #[test]
    fn a_cycle_of_more_than_eight_agents_keeps_its_two_laps() {
        // Two laps of 9 agents are 18 handoffs, more than WINDOW_CAP.
        let mut config = Config::default();
        config.cycles.max_cycle_agents = 9;
        let names: Vec<String> = (0..9).map(|i| format!("a{i}>a{}", (i + 1) % 9)).collect();
        let lap: Vec<&str> = names.iter().map(String::as_str).collect();
        let found = run(
            &MultiAgent::new(&config),
            &mut MultiAgentState::default(),
            1,
            &hops(&lap.repeat(3)),
        );
        let fired = fired(&found);
        assert_eq!(fired.first(), Some(&(18, 18)), "{fired:?}");
        // The window saturates at two laps: 18 from then on.
        assert!(fired.iter().skip(1).all(|(_, count)| *count == 18));
        assert_eq!(fired.len(), 10);
        assert_eq!(found[17][0].evidence, (1..=18).collect::<Vec<u64>>());
        assert!(
            found[26][0]
                .reason
                .contains("at least 18 handoffs along the cycle"),
            "{}",
            found[26][0].reason
        );
    }

    #[test]
    fn quiet_cycles_give_their_windows_back() {
        // a->b->c->a closes at 0-2 s; then x->y->z->x goes around from
        // 1000 s on. a->b->c->a is still known, but a sweep has emptied its
        // window, and it counts from zero.
        let mut events = timed(&[("a>b", 0), ("b>c", 1), ("c>a", 2)]);
        for i in 0..6 {
            let (from, to) = [("x", "y"), ("y", "z"), ("z", "x")][i % 3];
            events.push(handoff(from, to, Some(1000 + i as u64)));
        }
        let mut state = MultiAgentState::default();
        run(&detector(), &mut state, 1, &events);
        assert_eq!(state.cycles(), 2);
        let mut held = Vec::new();
        state.known.visit_mut(|_, cycle| {
            held.push(cycle.window.count());
            false
        });
        held.sort_unstable();
        assert_eq!(held, [0, 6]);
        let found = run(
            &detector(),
            &mut state,
            10,
            &timed(&[("a>b", 1010), ("b>c", 1011), ("c>a", 1012)]),
        );
        assert!(found.iter().all(Vec::is_empty), "{found:?}");
    }

    #[test]
    fn recent_handoffs_are_capped() {
        let mut state = MultiAgentState::default();
        let events: Vec<Event> = (0..50)
            .map(|i| handoff(&format!("x{i}"), &format!("y{i}"), None))
            .collect();
        run(&detector(), &mut state, 1, &events);
        // A cycle of at most 6 agents closes through the 5 handoffs before.
        assert_eq!(state.recent_handoffs(), 5);
        assert_eq!(state.recent.capacity(), 5);
        let mut config = Config::default();
        config.cycles.max_cycle_agents = 100; // clamped to 16
        let mut state = MultiAgentState::default();
        run(&MultiAgent::new(&config), &mut state, 1, &events);
        assert_eq!(state.recent_handoffs(), 15);
    }
}
