//! What an exchange counts (ruling 4, trace format 1.2): an exchange
//! between two agents counts toward `agent_pair`, `multi_agent` and
//! `topic_cycle` only when it brings nothing new.
//!
//! The [`ExchangeRepeats`] tracker runs before the exchange detectors (like
//! the progress tracker) and tells each exchange (a `handoff` or a
//! `collaboration` between two different agents) one of:
//!
//! - [`ExchangeNews::Textless`]: it carries no text (an orchestrator that
//!   records only who handed to whom). It counts, as in trace format 1.1.
//! - [`ExchangeNews::New`]: its text was not exchanged in this task within
//!   the window. A new request, a new revision, a new question or a new
//!   answer is news, however often the pair has talked: it does not count.
//! - [`ExchangeNews::Repeats`]: its text was exchanged before in this task
//!   within the window, by these agents. Each detector counts it when one
//!   of them is an agent of its scope (the pair, the cycle, the topic). The
//!   earlier exchanges repeated here for the first time are listed: the
//!   detectors count them too, once (the loop began there).
//!
//! "The same text" is the same after normalization: ruling 15's
//! placeholders (timestamps, clock times, ids, durations, "N minutes
//! ago"), numbers that only label a run, round, attempt, retry, build or
//! iteration ("run 4813", "attempt 3", "round 2", "retry #5"), case and
//! spacing. With semantic matching on, the engine's exchange matcher
//! ([`ObservedEvent::matched_text`](crate::ObservedEvent::matched_text))
//! hands over an earlier text the same-request judge called the same, and
//! the tracker compares that text instead.
//!
//! ```text
//! coder -> reviewer  "Revision 1 of the parser is up for review"   new
//! reviewer -> coder  "Two comments: handle empty input"            new
//! coder -> reviewer  "Revision 2 handles empty input"              new
//! reviewer -> coder  "Two comments: handle empty input"            repeats line 2
//! ```
//!
//! With `cycles.count = "every"` the tracker does not run: every exchange
//! counts except a hub's that brings something new (trace format 1.1,
//! rulings 4 and 17, [`crate::HubTracker`]).
//!
//! State is bounded: per task the last [`TEXTS_KEPT`] exchanges with text
//! (a hash of the text, the two agents' hashes, the evidence and whether it
//! was repeated yet), those older than the window dropped; an exchange
//! looks at most at the [`EARLIER_REPORTED`] most recent earlier ones. An
//! exchange costs a scan of those records and no allocation unless it
//! repeats an exchange for the first time.

use std::collections::VecDeque;
use std::sync::OnceLock;

use loopguard_config::{Config, CycleCount};
use loopguard_core_types::{Event, EventKind, Timestamp};
use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::agent_pair::{hash_str, window_millis};
use crate::bounded::{hash128, push_bounded};
use crate::evidence::NO_TIME;
use crate::tool_calls::normalize_text;
use crate::{EvidenceRef, MatchedText};

/// Exchanges with text remembered per task.
pub const TEXTS_KEPT: usize = 64;

/// Earlier exchanges of the same text an exchange looks at (the most
/// recent).
pub const EARLIER_REPORTED: usize = 8;

/// What an exchange brings (ruling 4, trace format 1.2), as the exchange
/// detectors read it.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum ExchangeNews {
    /// Not judged: not an exchange, or `cycles.count = "every"`. Every
    /// exchange counts (except a hub's news: [`crate::HubTracker`]).
    #[default]
    Unjudged,
    /// An exchange without text: it counts, as in trace format 1.1.
    Textless,
    /// An exchange whose text is new in the task within the window: it
    /// does not count.
    New,
    /// An exchange whose text was exchanged before within the window.
    Repeats {
        /// The agents of those earlier exchanges (name hashes).
        agents: EarlierAgents,
        /// Those repeated for the first time, oldest first: they count
        /// too, once.
        first: Vec<EarlierExchange>,
    },
}

/// The agents of the earlier exchanges of a text, as name hashes: a small
/// set kept inline (at most two an exchange).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EarlierAgents {
    hashes: [u64; 2 * EARLIER_REPORTED],
    len: usize,
}

impl EarlierAgents {
    /// Adds an agent (once).
    fn add(&mut self, agent: u64) {
        if !self.contains(agent) && self.len < self.hashes.len() {
            self.hashes[self.len] = agent;
            self.len += 1;
        }
    }

    /// Whether `agent` (a name hash) is among them.
    pub fn contains(&self, agent: u64) -> bool {
        self.hashes[..self.len].contains(&agent)
    }

    /// The agents' hashes.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.hashes[..self.len].iter().copied()
    }
}

/// An earlier exchange of the same text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EarlierExchange {
    /// The sender's name hash (as the exchange detectors hash names).
    pub from: u64,
    /// The recipient's name hash.
    pub to: u64,
    /// Its line, time and id.
    pub evidence: EvidenceRef,
}

impl EarlierExchange {
    /// Whether `agent` (a name hash) was a side of it.
    pub fn involves(&self, agent: u64) -> bool {
        self.from == agent || self.to == agent
    }
}

impl ExchangeNews {
    /// Whether the exchange counts for a scope of agents (`in_scope` says
    /// whether a name hash belongs to it): unjudged or textless, or
    /// repeating an earlier exchange one of whose agents is in scope.
    pub fn counts_for(&self, in_scope: impl Fn(u64) -> bool) -> bool {
        match self {
            ExchangeNews::Unjudged | ExchangeNews::Textless => true,
            ExchangeNews::New => false,
            ExchangeNews::Repeats { agents, .. } => agents.iter().any(in_scope),
        }
    }

    /// The earlier exchanges it repeats for the first time (none unless it
    /// repeats): the detectors count them too, once.
    pub fn earlier(&self) -> &[EarlierExchange] {
        match self {
            ExchangeNews::Repeats { first, .. } => first,
            _ => &[],
        }
    }
}

/// Tells exchanges that bring nothing new (ruling 4, trace format 1.2).
#[derive(Debug, Clone)]
pub struct ExchangeRepeats {
    on: bool,
    window_ms: i64,
}

/// What the tracker remembers of one task: its last exchanges with text,
/// oldest first.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ExchangeRepeatsState {
    texts: VecDeque<TextRecord>,
}

impl ExchangeRepeatsState {
    /// How many exchanges with text are remembered.
    pub fn texts(&self) -> usize {
        self.texts.len()
    }
}

/// One exchange with text.
#[derive(Debug, Serialize, Deserialize)]
struct TextRecord {
    text: [u8; 16],
    from: u64,
    to: u64,
    evidence: EvidenceRef,
    /// Whether a later exchange repeated it (it then counted, once).
    repeated: bool,
}

impl ExchangeRepeats {
    /// The tracker for `config`: on when `cycles.count` is `"repeats"`.
    pub fn new(config: &Config) -> ExchangeRepeats {
        ExchangeRepeats {
            on: config.cycles.counting() == CycleCount::Repeats,
            window_ms: window_millis(&config.cycles),
        }
    }

    /// Whether it judges exchanges (`cycles.count = "repeats"`).
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// Looks at one event at `time` with its evidence record: what it
    /// brings, if it is an exchange. `matched` is an earlier text of the
    /// sender a semantic matcher judged the same; the exchange is compared
    /// as that text.
    pub fn observe(
        &self,
        state: &mut ExchangeRepeatsState,
        event: &Event,
        time: Option<Timestamp>,
        evidence: impl FnOnce() -> EvidenceRef,
        matched: Option<&MatchedText>,
    ) -> ExchangeNews {
        if !self.on {
            return ExchangeNews::Unjudged;
        }
        let (from, to, text) = match &event.kind {
            EventKind::Handoff {
                from, to, content, ..
            } => (from, to, content.as_deref().unwrap_or_default()),
            EventKind::Collaboration { from, to, request } => (from, to, request.as_str()),
            _ => return ExchangeNews::Unjudged,
        };
        if from == to {
            return ExchangeNews::Unjudged;
        }
        let compared = exchange_text(matched.map_or(text, |m| m.text.as_str()));
        if compared.is_empty() {
            return ExchangeNews::Textless;
        }
        state.expire(time, self.window_ms);
        let text = hash128(&compared);
        // The most recent ones, newest first while looking, oldest first
        // as reported.
        let mut agents = EarlierAgents::default();
        let mut first = Vec::new();
        let mut found = 0;
        for record in state.texts.iter_mut().rev() {
            if found == EARLIER_REPORTED {
                break;
            }
            if record.text != text {
                continue;
            }
            found += 1;
            agents.add(record.from);
            agents.add(record.to);
            if !record.repeated {
                record.repeated = true;
                first.push(EarlierExchange {
                    from: record.from,
                    to: record.to,
                    evidence: record.evidence.clone(),
                });
            }
        }
        first.reverse();
        push_bounded(
            &mut state.texts,
            TextRecord {
                text,
                from: hash_str(from),
                to: hash_str(to),
                evidence: evidence(),
                repeated: false,
            },
            TEXTS_KEPT,
        );
        if found == 0 {
            ExchangeNews::New
        } else {
            ExchangeNews::Repeats { agents, first }
        }
    }
}

impl ExchangeRepeatsState {
    /// Drops the exchanges more than `window_ms` before `now` (the task's
    /// clock keeps times from going backwards, so the oldest are in front;
    /// untimed ones never expire).
    fn expire(&mut self, now: Option<Timestamp>, window_ms: i64) {
        let Some(now) = now else {
            return;
        };
        let now = now.as_millis();
        while let Some(front) = self.texts.front() {
            let at = front.evidence.at_ms();
            if at == NO_TIME || now.saturating_sub(at) <= window_ms {
                break;
            }
            self.texts.pop_front();
        }
    }
}

/// An exchange's text as compared: ruling 15's placeholders, numbers that
/// label a run, round, attempt, retry, build or iteration, lower case,
/// spacing collapsed. Empty when the text has nothing but spacing.
pub fn exchange_text(text: &str) -> String {
    static LABEL: OnceLock<Option<Regex>> = OnceLock::new();
    let label = LABEL.get_or_init(|| {
        Regex::new(
            r"(?i)\b(runs?|rounds?|attempts?|retry|retries|builds?|iterations?)\s*(?:#|no\.|number)?\s*\d+\b",
        )
        .ok()
    });
    let normalized = normalize_text(text).to_lowercase();
    let labelled = match label {
        Some(label) => label.replace_all(&normalized, "$1 <n>"),
        // The pattern is a constant; it compiles.
        None => normalized.as_str().into(),
    };
    labelled.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handoff(from: &str, to: &str, content: Option<&str>) -> Event {
        let mut value =
            serde_json::json!({ "type": "handoff", "task": "T", "from": from, "to": to });
        if let Some(content) = content {
            value["content"] = content.into();
        }
        Event::from_value(&value).expect("a handoff")
    }

    /// The verdicts on untimed events, as "new", "textless" or the lines
    /// repeated.
    fn run(config: &Config, events: &[Event]) -> Vec<String> {
        let tracker = ExchangeRepeats::new(config);
        let mut state = ExchangeRepeatsState::default();
        events
            .iter()
            .zip(1..)
            .map(|(event, line)| {
                match tracker.observe(
                    &mut state,
                    event,
                    None,
                    || EvidenceRef::new(line, None),
                    None,
                ) {
                    ExchangeNews::Unjudged => "unjudged".to_owned(),
                    ExchangeNews::Textless => "textless".to_owned(),
                    ExchangeNews::New => "new".to_owned(),
                    ExchangeNews::Repeats { first, .. } => {
                        let lines: Vec<String> = first
                            .iter()
                            .map(|e| e.evidence.line().to_string())
                            .collect();
                        format!("repeats [{}]", lines.join(","))
                    }
                }
            })
            .collect()
    }

    #[test]
    fn ruling_4_new_revisions_are_news_and_the_same_comments_again_are_not() {
        let events = [
            handoff("coder", "reviewer", Some("Revision 1 of the parser")),
            handoff(
                "reviewer",
                "coder",
                Some("Two comments: handle empty input"),
            ),
            handoff("coder", "reviewer", Some("Revision 2 handles empty input")),
            handoff(
                "reviewer",
                "coder",
                Some("two comments:  handle EMPTY input"),
            ),
            handoff("coder", "reviewer", None),
        ];
        assert_eq!(
            run(&Config::default(), &events),
            ["new", "new", "new", "repeats [2]", "textless"]
        );
    }

    #[test]
    fn ruling_4_run_and_round_numbers_are_placeholders() {
        let events = [
            handoff(
                "tester",
                "dev",
                Some("CI run #4812: test_refund FAILED, expected 10.00 got 9.99"),
            ),
            handoff("dev", "tester", Some("Fixed rounding in refund()")),
            handoff(
                "tester",
                "dev",
                Some("CI run #4813: test_refund FAILED, expected 10.00 got 9.99"),
            ),
            handoff("planner", "coder", Some("Round 2: implement the parser")),
            handoff("planner", "coder", Some("Round 3: implement the parser")),
            // A number that is not a label is content.
            handoff("tester", "dev", Some("3 tests failed")),
            handoff("tester", "dev", Some("4 tests failed")),
        ];
        assert_eq!(
            run(&Config::default(), &events),
            [
                "new",
                "new",
                "repeats [1]",
                "new",
                "repeats [4]",
                "new",
                "new"
            ]
        );
        assert_eq!(
            exchange_text("Attempt 3: retry #5 after build 1234, iteration 7"),
            "attempt <n>: retry <n> after build <n>, iteration <n>"
        );
    }

    #[test]
    fn the_window_forgets_old_texts_and_every_turns_the_tracker_off() {
        let tracker = ExchangeRepeats::new(&Config::default());
        let mut state = ExchangeRepeatsState::default();
        let event = handoff("a", "b", Some("Please look at the flaky test"));
        let at = |secs: i64| Some(Timestamp(secs * 1000));
        let first = tracker.observe(
            &mut state,
            &event,
            at(0),
            || EvidenceRef::timed(1, at(0), None),
            None,
        );
        assert_eq!(first, ExchangeNews::New);
        let late = tracker.observe(
            &mut state,
            &event,
            at(601),
            || EvidenceRef::timed(2, at(601), None),
            None,
        );
        assert_eq!(late, ExchangeNews::New, "601 s later: outside the window");
        let mut every = Config::default();
        every.cycles.count = CycleCount::Every;
        assert_eq!(run(&every, &[event.clone(), event]), ["unjudged"; 2]);
    }

    #[test]
    fn state_is_bounded() {
        let events: Vec<Event> = (0..200)
            .map(|n| handoff("a", "b", Some(&format!("job {n} is ready"))))
            .collect();
        let tracker = ExchangeRepeats::new(&Config::default());
        let mut state = ExchangeRepeatsState::default();
        for (event, line) in events.iter().zip(1..) {
            tracker.observe(
                &mut state,
                event,
                None,
                || EvidenceRef::new(line, None),
                None,
            );
        }
        assert_eq!(state.texts(), TEXTS_KEPT);
    }

    #[test]
    fn ruling_4_an_earlier_exchange_counts_once_at_its_first_repeat() {
        let events: Vec<Event> = (0..5)
            .map(|_| handoff("a", "b", Some("same thing again")))
            .collect();
        assert_eq!(
            run(&Config::default(), &events),
            [
                "new",
                "repeats [1]",
                "repeats [2]",
                "repeats [3]",
                "repeats [4]"
            ]
        );
        // The agents of every earlier exchange are known, counted once or
        // not: a repeat by a third agent is in the scope of each of them.
        let tracker = ExchangeRepeats::new(&Config::default());
        let mut state = ExchangeRepeatsState::default();
        let ask = |from: &str, to: &str| handoff(from, to, Some("Which currency for EU totals?"));
        for (event, line) in [ask("a", "b"), ask("b", "c")].iter().zip(1..) {
            tracker.observe(
                &mut state,
                event,
                None,
                || EvidenceRef::new(line, None),
                None,
            );
        }
        let news = tracker.observe(
            &mut state,
            &ask("c", "a"),
            None,
            || EvidenceRef::new(3, None),
            None,
        );
        for agent in ["a", "b", "c"] {
            assert!(news.counts_for(|hash| hash == hash_str(agent)), "{agent}");
        }
        assert!(!news.counts_for(|hash| hash == hash_str("d")));
        let first: Vec<u64> = news.earlier().iter().map(|e| e.evidence.line()).collect();
        assert_eq!(first, [2], "line 1 counted at its first repeat, line 2");
    }
}
