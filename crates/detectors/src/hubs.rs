//! Hubs (ruling 17): in a hub-and-spoke team one agent (an orchestrator, a
//! supervisor) sends every instruction and receives every reply. Its
//! exchanges with a worker are the protocol, not a cycle.
//!
//! The [`HubTracker`] runs before the exchange detectors (like the progress
//! tracker) and sets [`ObservedEvent::hub_protocol`](crate::ObservedEvent::hub_protocol) on an exchange (a
//! `handoff` or a `collaboration` between two agents) that involves a hub
//! and **brings something new**. `agent_pair`, `multi_agent` and
//! `topic_cycle` do not count such an exchange. An exchange with a hub that
//! brings nothing new counts as ruling 4 says:
//!
//! - the hub's instruction repeats an earlier instruction of the hub to that
//!   agent; or
//! - the agent's reply (to the hub) repeats an earlier reply of its own, to
//!   anyone.
//!
//! "Repeats" is the same text after normalization (case, spacing, and the
//! timestamps, ids and durations ruling 15 replaces with placeholders;
//! a handoff without content is the empty text), or judged the same by
//! meaning: with semantic matching on, the engine's exchange matcher
//! ([`ObservedEvent::matched_text`](crate::ObservedEvent::matched_text))
//! hands over the earlier text of the same sender that the same-request
//! judge called the same, and the tracker compares that text instead.
//!
//! A hub is an agent named in `cycles.hubs`, or (with
//! `cycles.recognize_hubs`) an agent that is one side of at least
//! `cycles.hub_share` (0.8) of the task's handoffs once there have been
//! `cycles.hub_after` (6), and that has dealt with at least 2 other agents.
//! Exchanges before a hub is recognized count as between peers. Exchanges
//! between two agents that are not hubs keep ruling 4 of trace format 1.1:
//! every one counts.
//!
//! The tracker runs only with `cycles.count = "every"` (trace format 1.1).
//! Since 1.2 ruling 4 asks of every exchange what ruling 17 asked of a
//! hub's ([`crate::ExchangeRepeats`]), so a hub needs no recognition to be
//! quiet.
//!
//! State is bounded: per task at most 64 agents (their handoff counts and up
//! to 8 partners each, as hashes) and, per agent, the hashes of its last 32
//! distinct texts to each of up to 16 recipients.

use std::collections::VecDeque;

use loopguard_config::Config;
use loopguard_core_types::{Event, EventKind};
use serde::{Deserialize, Serialize};

use crate::bounded::{AGENTS_PER_TASK, hash128, most_recent_mut, push_bounded};
use crate::tool_calls::normalize_text;

/// Partners remembered per agent: 2 make a hub.
const PARTNERS_KEPT: usize = 8;
/// Recipients remembered per sender.
const RECIPIENTS_KEPT: usize = 16;
/// Distinct texts remembered per sender and recipient.
const TEXTS_KEPT: usize = 32;

/// An exchange's text (a `handoff`'s content, a `collaboration`'s
/// request) judged the same as an earlier text of the same sender by a
/// semantic matcher (the engine's `ExchangeMatcher`): the hub tracker
/// compares the exchange as that text (ruling 17: "judged the same").
#[derive(Debug, Clone, PartialEq)]
pub struct MatchedText {
    /// The earlier text, as its sender wrote it.
    pub text: String,
    /// The input line it was first seen on.
    pub line: u64,
    /// The judge's verdict in words ("same request (score 0.93, cosine
    /// 0.88)").
    pub reason: String,
}

/// Tells hub exchanges that bring something new (ruling 17).
#[derive(Debug, Clone)]
pub struct HubTracker {
    named: Vec<String>,
    recognize: bool,
    share: f64,
    after: u64,
}

/// What the hub tracker remembers of one task.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct HubState {
    /// Handoffs between two different agents seen.
    handoffs: u64,
    /// The task's agents, the least recently active first.
    agents: VecDeque<AgentRecord>,
}

/// One agent of a task.
#[derive(Debug, Serialize, Deserialize)]
struct AgentRecord {
    agent: String,
    /// Handoffs it was a side of.
    sides: u64,
    /// The agents it dealt with (hashes), the first few.
    partners: Vec<[u8; 16]>,
    /// What it said to each recipient, the least recently addressed first.
    said: VecDeque<Said>,
}

/// What an agent said to one recipient: its distinct texts, hashed.
#[derive(Debug, Serialize, Deserialize)]
struct Said {
    to: String,
    texts: VecDeque<[u8; 16]>,
}

impl HubTracker {
    /// The tracker with the `[cycles]` hub settings of `config`.
    pub fn new(config: &Config) -> HubTracker {
        HubTracker {
            named: config.cycles.hubs.clone(),
            recognize: config.cycles.recognize_hubs,
            share: config.cycles.hub_share,
            after: u64::from(config.cycles.hub_after),
        }
    }

    /// Looks at one event: `true` when it is an exchange with a hub that
    /// brings something new (the protocol, not counted by the exchange
    /// detectors).
    pub fn observe(&self, state: &mut HubState, event: &Event) -> bool {
        self.observe_matched(state, event, None)
    }

    /// [`HubTracker::observe`], comparing the exchange's text as `matched`
    /// when a matcher judged it the same as that earlier text of its sender
    /// ([`MatchedText::text`]).
    pub fn observe_matched(
        &self,
        state: &mut HubState,
        event: &Event,
        matched: Option<&MatchedText>,
    ) -> bool {
        let (from, to, text, is_handoff) = match &event.kind {
            EventKind::Handoff {
                from, to, content, ..
            } => (from, to, content.as_deref().unwrap_or_default(), true),
            EventKind::Collaboration { from, to, request } => (from, to, request.as_str(), false),
            _ => return false,
        };
        if from == to {
            return false;
        }
        if is_handoff {
            state.handoffs = state.handoffs.saturating_add(1);
            state.agent_mut(from).met(to);
            state.agent_mut(to).met(from);
        }
        let text = hash128(&normalized(matched.map_or(text, |m| m.text.as_str())));
        let from_is_hub = self.is_hub(state, from);
        let to_is_hub = self.is_hub(state, to);
        // Remembered whatever it is, so that a later repeat is seen.
        let repeats_instruction = state.agent_mut(from).said_to(to, text);
        let repeats_reply = state.agent(from).is_some_and(|record| {
            record
                .said
                .iter()
                .filter(|said| said.to != *to)
                .any(|said| said.texts.contains(&text))
        });
        if from_is_hub {
            !repeats_instruction
        } else if to_is_hub {
            !(repeats_instruction || repeats_reply)
        } else {
            false
        }
    }

    /// Whether `agent` is a hub of the task: named, or recognized.
    fn is_hub(&self, state: &HubState, agent: &str) -> bool {
        if self.named.iter().any(|hub| hub == agent) {
            return true;
        }
        if !self.recognize || state.handoffs < self.after {
            return false;
        }
        state.agent(agent).is_some_and(|record| {
            record.partners.len() >= 2 && record.sides as f64 >= self.share * state.handoffs as f64
        })
    }
}

impl HubState {
    fn agent(&self, agent: &str) -> Option<&AgentRecord> {
        self.agents.iter().find(|record| record.agent == agent)
    }

    /// The record of `agent`, made the most recently active (created when
    /// new, forgetting the least recently active past the bound).
    fn agent_mut(&mut self, agent: &str) -> &mut AgentRecord {
        most_recent_mut(
            &mut self.agents,
            |record| record.agent == agent,
            || AgentRecord {
                agent: agent.to_owned(),
                sides: 0,
                partners: Vec::new(),
                said: VecDeque::new(),
            },
            AGENTS_PER_TASK,
        )
    }
}

impl AgentRecord {
    /// One more handoff with `partner`.
    fn met(&mut self, partner: &str) {
        self.sides = self.sides.saturating_add(1);
        let partner = hash128(partner);
        if self.partners.len() < PARTNERS_KEPT && !self.partners.contains(&partner) {
            self.partners.push(partner);
        }
    }

    /// Remembers `text` said to `to`: whether it was said to `to` before.
    fn said_to(&mut self, to: &str, text: [u8; 16]) -> bool {
        let said = most_recent_mut(
            &mut self.said,
            |said| said.to == to,
            || Said {
                to: to.to_owned(),
                texts: VecDeque::new(),
            },
            RECIPIENTS_KEPT,
        );
        if said.texts.contains(&text) {
            return true;
        }
        push_bounded(&mut said.texts, text, TEXTS_KEPT);
        false
    }
}

/// A text as compared: normalized as ruling 15 normalizes results, lower
/// case, spacing collapsed.
fn normalized(text: &str) -> String {
    normalize_text(text)
        .to_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handoff(from: &str, to: &str, content: &str) -> Event {
        Event::from_value(&serde_json::json!({
            "type": "handoff", "task": "T", "from": from, "to": to, "content": content
        }))
        .expect("a handoff")
    }

    fn run(config: &Config, events: &[Event]) -> Vec<bool> {
        let tracker = HubTracker::new(config);
        let mut state = HubState::default();
        events
            .iter()
            .map(|event| tracker.observe(&mut state, event))
            .collect()
    }

    #[test]
    fn a_recognized_hubs_new_exchanges_are_protocol_and_repeats_are_not() {
        let config = Config::default();
        let events = [
            handoff("orch", "web", "Search for the 2024 revenue of ACME"),
            handoff("web", "orch", "ACME's 2024 revenue was $4.1B per its 10-K"),
            handoff("orch", "coder", "Plot revenue by year"),
            handoff("coder", "orch", "Wrote plot.py; the chart is in out.png"),
            handoff("orch", "web", "Find the 2023 revenue too"),
            // The 6th handoff: orch is one side of all 6, with 2 partners.
            handoff("web", "orch", "ACME's 2023 revenue was $3.7B"),
            handoff("orch", "web", "Find the 2023 revenue too"),
            handoff("web", "orch", "ACME's 2023 revenue was $3.7B"),
            handoff("orch", "coder", "Add 2023 to the plot"),
        ];
        assert_eq!(
            run(&config, &events),
            [false, false, false, false, false, true, false, false, true],
            "before the 6th handoff peers; then new exchanges are protocol, repeats count"
        );
    }

    #[test]
    fn a_text_matched_by_meaning_is_compared_as_the_earlier_one() {
        let mut config = Config::default();
        config.cycles.hubs = vec!["orch".to_owned()];
        let tracker = HubTracker::new(&config);
        let mut state = HubState::default();
        let first = handoff("orch", "web", "Find ACME's 2024 revenue");
        let reworded = handoff("orch", "web", "Look up how much revenue ACME made in 2024");
        assert!(tracker.observe(&mut state, &first), "new: the protocol");
        let matched = MatchedText {
            text: "Find ACME's 2024 revenue".to_owned(),
            line: 1,
            reason: "same request (score 0.93, cosine 0.88)".to_owned(),
        };
        assert!(
            !tracker.observe_matched(&mut state, &reworded, Some(&matched)),
            "judged the same as line 1: it brings nothing new"
        );
        // Unmatched, the same rewording would have been news.
        let mut fresh = HubState::default();
        tracker.observe(&mut fresh, &first);
        assert!(tracker.observe(&mut fresh, &reworded));
    }

    #[test]
    fn a_named_hub_is_a_hub_from_the_start_and_peers_keep_ruling_4() {
        let mut config = Config::default();
        config.cycles.hubs = vec!["lead".to_owned()];
        let events = [
            handoff("lead", "a", "Draft the intro"),
            handoff("a", "lead", "Intro drafted"),
            handoff("a", "b", "Please review my intro"),
            handoff("b", "a", "Looks good"),
            handoff("a", "lead", "Intro drafted"),
        ];
        assert_eq!(
            run(&config, &events),
            [true, true, false, false, false],
            "the last reply repeats one of a's own"
        );
    }

    #[test]
    fn a_pair_of_two_agents_is_never_a_hub() {
        let config = Config::default();
        let events: Vec<Event> = (0..8)
            .map(|n| {
                if n % 2 == 0 {
                    handoff("coder", "reviewer", &format!("PR ready, round {n}"))
                } else {
                    handoff(
                        "reviewer",
                        "coder",
                        &format!("Changes requested, round {n}"),
                    )
                }
            })
            .collect();
        assert!(run(&config, &events).iter().all(|protocol| !protocol));
    }

    #[test]
    fn recognition_can_be_turned_off_and_normalization_ignores_clocks() {
        let mut config = Config::default();
        config.cycles.hubs = vec!["orch".to_owned()];
        let events = [
            handoff("orch", "w", "Status at 10:31:07?"),
            handoff("orch", "w", "status at 10:45:12?"),
        ];
        assert_eq!(run(&config, &events), [true, false]);
        config.cycles.hubs.clear();
        config.cycles.recognize_hubs = false;
        let many: Vec<Event> = (0..10)
            .map(|n| handoff("orch", &format!("w{}", n % 3), &format!("job {n}")))
            .collect();
        assert!(run(&config, &many).iter().all(|protocol| !protocol));
    }
}
