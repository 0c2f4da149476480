//! loopguard's built-in structural detectors.
//!
//! Each module detects one loop pattern and cites the rule it implements
//! (the trace format's "Rulings" in `docs/spec/trace-format.md`). A
//! detector is a stateless set of limits taken from the
//! [`Config`](loopguard_config::Config); the
//! per-task state it needs lives in its [`Detector::State`], which the
//! engine keeps per task and resets on `completed` and `human`. Every state
//! is bounded: windows and histories have caps, so the cost of a check never
//! grows with a task's history.
//!
//! A detector says what it found; what that means for the task (the loop
//! count, the severity ladder, the gate) is the host's policy. The built-in
//! detectors are listed once, in [`registry`]: adding one is a module here
//! and one line there (`docs/architecture.md` has the checklist).
//!
//! [`BuiltinDetectors`] runs them all in order over one event:
//!
//! ```
//! use loopguard_core_types::Event;
//! use loopguard_config::Config;
//! use loopguard_detectors::{BuiltinDetectors, BuiltinState, ObservedEvent};
//!
//! let detectors = BuiltinDetectors::new(&Config::default());
//! let mut state = BuiltinState::default();
//! let mut found = Vec::new();
//! for (line, text) in [
//!     r#"{"type":"failure","task":"T","agent":"coder","error":"E0308"}"#,
//!     r#"{"type":"failure","task":"T","agent":"tester","error":"E0308"}"#,
//! ]
//! .iter()
//! .enumerate()
//! {
//!     let event = Event::from_json(text)?;
//!     let mut observed = ObservedEvent::new(line as u64 + 1, &event);
//!     detectors.observe(&mut state, &mut observed, &mut found);
//! }
//! assert_eq!(found.len(), 1);
//! assert_eq!(found[0].kind, "exact_failure");
//! assert_eq!(found[0].evidence, vec![1, 2]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub use agent_pair::AgentPair;
pub use bounded::{hash128, most_recent_mut, push_bounded};
pub use clock::{Clamped, TaskClock};
pub use edge_limit::EdgeLimit;
pub use evidence::{Evidence, EvidenceRef, evidence_of, join_with_and};
pub use exact_failure::ExactFailure;
pub use exchange_repeats::{
    EarlierExchange, ExchangeNews, ExchangeRepeats, ExchangeRepeatsState, exchange_text,
};
pub use failure_class::{ExternalKind, FailureClass, classify};
pub use hubs::{HubState, HubTracker, MatchedText};
pub use multi_agent::MultiAgent;
pub use oscillation::Oscillation;
pub use phase_visits::{PhaseVisits, TransitionLimit};
pub use progress::{ProgressState, ProgressTracker};
pub use registry::{BuiltinDetectors, BuiltinState, KEYS_ADDED_SINCE_FORMAT_1, REGISTERED};
pub use repeated_output::{
    DIRECTIVE_FIRST_PRINCIPLES, DIRECTIVE_IGNORE_PREVIOUS, RepeatedOutput, RepeatedOutputState,
};
pub use tool_calls::{ArgMatch, MatchedArgs, RelatedArg, ToolCalls, ToolCallsState, is_free_text};
pub use tool_rephrase::{ToolRephrase, ToolRephraseState};
pub use topic_cycle::{SemanticTopic, TopicCycle, normalize_topic};

pub mod agent_pair;
mod bounded;
pub mod clock;
pub mod edge_limit;
mod evidence;
pub mod exact_failure;
pub mod exchange_repeats;
pub mod failure_class;
pub mod hubs;
pub mod multi_agent;
pub mod oscillation;
pub mod phase_visits;
pub mod progress;
pub mod registry;
pub mod repeated_output;
pub mod tool_calls;
pub mod tool_rephrase;
pub mod topic_cycle;

use std::sync::OnceLock;

use loopguard_core_types::{Detection, Event, Timestamp};

/// One event as a detector sees it: the event, its input line, and what the
/// engine worked out before the detectors ran.
#[derive(Debug, Clone)]
pub struct ObservedEvent<'a> {
    /// The 1-based input line (or the engine's sequence number).
    pub line: u64,
    /// The event itself.
    pub event: &'a Event,
    /// The event's time for windows: its `ts`, or "now" when streamed;
    /// `None` in a replay without timestamps (windows do not apply).
    pub time: Option<Timestamp>,
    /// Whether this event showed progress (a `progress` event that changed a
    /// metric, or a higher `files_changed`). Set by [`ProgressTracker`].
    pub progressed: bool,
    /// Whether this event is an exchange with a hub that brings something
    /// new: the protocol of a hub-and-spoke team, not a cycle (ruling 17,
    /// with `cycles.count = "every"`). Set by [`HubTracker`];
    /// `agent_pair`, `multi_agent` and `topic_cycle` do not count it.
    pub hub_protocol: bool,
    /// What this exchange brings (ruling 4, trace format 1.2): whether its
    /// text repeats earlier exchanges of the task, and which. Set by
    /// [`ExchangeRepeats`]; `agent_pair`, `multi_agent` and `topic_cycle`
    /// count it only when it brings nothing new ([`ObservedEvent::counts_for`]).
    pub exchange: ExchangeNews,
    /// The topic a semantic topic assigner chose for this event's content,
    /// when one is configured. `topic_cycle` prefers it to normalized text.
    pub semantic_topic: Option<&'a SemanticTopic>,
    /// A `tool_call`'s arguments with the free-text ones a semantic
    /// argument matcher judged the same as earlier values replaced by
    /// those, when one is configured. `tool_calls` compares calls by them.
    pub matched_args: Option<&'a MatchedArgs>,
    /// A `handoff`'s or `collaboration`'s text judged the same as an
    /// earlier text of its sender, when a semantic exchange matcher is
    /// configured. The [`HubTracker`] compares the exchange as that text.
    pub matched_text: Option<&'a MatchedText>,
    /// Whether this `tool_call` was stale under ruling 15, as `tool_calls`
    /// found (unset when it did not look: another event, a failing call,
    /// an excluded tool). `tool_rephrase`, after it, does not count a stale
    /// call as a rephrase.
    pub stale_call: OnceLock<bool>,
    /// The event's evidence record, made by the first detector that keeps
    /// the event and shared with every other one.
    evidence: OnceLock<EvidenceRef>,
}

impl<'a> ObservedEvent<'a> {
    /// An event at `line`, timed by its own `ts`, with no progress seen and
    /// no semantic topic.
    pub fn new(line: u64, event: &'a Event) -> ObservedEvent<'a> {
        ObservedEvent {
            line,
            event,
            time: event.ts,
            progressed: false,
            hub_protocol: false,
            exchange: ExchangeNews::Unjudged,
            semantic_topic: None,
            matched_args: None,
            matched_text: None,
            stale_call: OnceLock::new(),
            evidence: OnceLock::new(),
        }
    }

    /// The same event timed at `time` instead (`None`: untimed).
    pub fn at(mut self, time: Option<Timestamp>) -> ObservedEvent<'a> {
        self.time = time;
        self
    }

    /// Gives the event another time (its task's clock clamped it), and
    /// forgets an evidence record made with the old one.
    pub fn retime(&mut self, time: Option<Timestamp>) {
        self.time = time;
        self.evidence = OnceLock::new();
    }

    /// The same event with the arguments a semantic argument matcher
    /// matched.
    pub fn with_matched_args(mut self, matched: Option<&'a MatchedArgs>) -> ObservedEvent<'a> {
        self.matched_args = matched;
        self
    }

    /// The same event with the earlier text a semantic exchange matcher
    /// judged its text the same as.
    pub fn with_matched_text(mut self, matched: Option<&'a MatchedText>) -> ObservedEvent<'a> {
        self.matched_text = matched;
        self
    }

    /// The same event with the topic a semantic assigner chose.
    pub fn with_topic(mut self, topic: Option<&'a SemanticTopic>) -> ObservedEvent<'a> {
        self.semantic_topic = topic;
        self
    }

    /// Whether this exchange counts toward a cycle whose agents `in_scope`
    /// tells (by name hash): not a hub's news (ruling 17), and bringing
    /// nothing new to that scope (ruling 4, trace format 1.2).
    pub fn counts_for(&self, in_scope: impl Fn(u64) -> bool) -> bool {
        !self.hub_protocol && self.exchange.counts_for(in_scope)
    }

    /// The evidence reference for this event (line, time and id): one
    /// record, made on first use, shared by every detector that keeps the
    /// event, so an event held in several windows costs one allocation.
    pub fn evidence_ref(&self) -> EvidenceRef {
        self.evidence
            .get_or_init(|| EvidenceRef::timed(self.line, self.time, self.event.id.as_deref()))
            .clone()
    }
}

/// A built-in detector: limits from the config (its `new(&Config)`), state
/// per task.
///
/// The engine calls [`Detector::observe`] directly, through the
/// [`registry`]; a detector reports what it found, and the host's policy
/// decides what that means for the task.
pub trait Detector {
    /// What the detector remembers about one task. Bounded in size; saved
    /// whole by durable stores, so its serialized form is part of the saved
    /// state format.
    type State: Default + Send + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned;

    /// The config section its limits come from (`failures`, `cycles`, ...),
    /// documented in `config/default.toml`.
    const CONFIG_SECTION: &'static str;

    /// The detection kinds it reports (the trace format's `kind`s).
    const KINDS: &'static [&'static str];

    /// Whether it counts events in time windows (`cycles.window_secs`): such
    /// a detector does not see an event that arrives more than a window
    /// behind its task's latest time ([`clock`]).
    const WINDOWED: bool = false;

    /// The detector's name, as reported in [`Detection::detector`].
    fn name(&self) -> &'static str;

    /// Looks at one event of a task and appends what it found to `out`.
    fn observe(&self, state: &mut Self::State, event: &ObservedEvent<'_>, out: &mut Vec<Detection>);
}
