//! loopguard's built-in structural detectors.
//!
//! Each module detects one loop pattern and cites the rule it implements
//! (the trace format's "Rulings" in `docs/spec/trace-format.md`). A
//! detector is a stateless set of limits taken from the [`Config`]; the
//! per-task state it needs lives in its [`Detector::State`], which the
//! engine keeps per task and resets on `completed` and `human`. Every state
//! is bounded: windows and histories have caps, so the cost of a check never
//! grows with a task's history.
//!
//! [`BuiltinDetectors`] runs them all in order over one event:
//!
//! ```
//! use loopguard_core_types::{Config, Event};
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
//!     let observed = ObservedEvent::new(line as u64 + 1, &event);
//!     detectors.observe(&mut state, &observed, &mut found);
//! }
//! assert_eq!(found.len(), 1);
//! assert_eq!(found[0].kind, "exact_failure");
//! assert_eq!(found[0].evidence, vec![1, 2]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub use agent_pair::AgentPair;
pub use edge_limit::EdgeLimit;
pub use evidence::{EvidenceRef, evidence_of, join_with_and};
pub use exact_failure::ExactFailure;
pub use failure_class::{ExternalKind, FailureClass, classify};
pub use multi_agent::MultiAgent;
pub use oscillation::Oscillation;
pub use phase_visits::{PhaseVisits, TransitionLimit};
pub use progress::{ProgressState, ProgressTracker};
pub use repeated_output::{
    DIRECTIVE_FIRST_PRINCIPLES, DIRECTIVE_IGNORE_PREVIOUS, RepeatedOutput, RepeatedOutputState,
    pauses_task,
};
pub use topic_cycle::{SemanticTopic, TopicCycle, normalize_topic};

pub mod agent_pair;
pub mod edge_limit;
mod evidence;
pub mod exact_failure;
pub mod failure_class;
pub mod multi_agent;
pub mod oscillation;
pub mod phase_visits;
pub mod progress;
pub mod repeated_output;
pub mod topic_cycle;

use loopguard_core_types::{Config, Detection, Event, Timestamp};

use crate::evidence::SharedEvidence;

/// One event as a detector sees it: the event, its input line, and what the
/// engine worked out before the detectors ran.
#[derive(Debug, Clone, Copy)]
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
    /// The topic a semantic topic assigner chose for this event's content,
    /// when one is configured. `topic_cycle` prefers it to normalized text.
    pub semantic_topic: Option<&'a SemanticTopic>,
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
            semantic_topic: None,
        }
    }

    /// The evidence reference for this event (line, time and id).
    pub fn evidence_ref(&self) -> EvidenceRef {
        EvidenceRef::timed(self.line, self.time, self.event.id.as_deref())
    }
}

/// A built-in detector: limits from the config, state per task.
pub trait Detector {
    /// What the detector remembers about one task. Bounded in size.
    type State: Default + Send;

    /// The detector's name, as reported in [`Detection::detector`].
    fn name(&self) -> &'static str;

    /// Looks at one event of a task and appends what it found to `out`.
    fn observe(&self, state: &mut Self::State, event: &ObservedEvent<'_>, out: &mut Vec<Detection>);
}

/// Every built-in detector, configured.
#[derive(Debug, Clone)]
pub struct BuiltinDetectors {
    progress: ProgressTracker,
    exact_failure: ExactFailure,
    agent_pair: AgentPair,
    multi_agent: MultiAgent,
    topic_cycle: TopicCycle,
    edge_limit: EdgeLimit,
    phase_visits: PhaseVisits,
    transition_limit: TransitionLimit,
    oscillation: Oscillation,
    repeated_output: RepeatedOutput,
}

/// Everything the built-in detectors remember about one task.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct BuiltinState {
    progress: ProgressState,
    exact_failure: <ExactFailure as Detector>::State,
    agent_pair: <AgentPair as Detector>::State,
    multi_agent: <MultiAgent as Detector>::State,
    topic_cycle: <TopicCycle as Detector>::State,
    edge_limit: <EdgeLimit as Detector>::State,
    phase_visits: <PhaseVisits as Detector>::State,
    transition_limit: <TransitionLimit as Detector>::State,
    oscillation: <Oscillation as Detector>::State,
    repeated_output: RepeatedOutputState,
}

impl BuiltinState {
    /// Pivots issued since the last reset.
    pub fn pivots(&self) -> u32 {
        self.repeated_output.pivots()
    }

    /// Forgets everything (on `completed` and `human`).
    pub fn reset(&mut self) {
        *self = BuiltinState::default();
    }

    /// A fresh state that remembers `pivots` pivots already spent: what a
    /// task's stored snapshot carries over a restart or an eviction (the
    /// windows and histories start empty).
    pub fn restored(pivots: u32) -> BuiltinState {
        let mut state = BuiltinState::default();
        state.repeated_output.restore_pivots(pivots);
        state
    }
}

impl BuiltinDetectors {
    /// All built-in detectors with the limits of `config`.
    pub fn new(config: &Config) -> BuiltinDetectors {
        BuiltinDetectors {
            progress: ProgressTracker,
            exact_failure: ExactFailure::new(config),
            agent_pair: AgentPair::new(config),
            multi_agent: MultiAgent::new(config),
            topic_cycle: TopicCycle::new(config),
            edge_limit: EdgeLimit::new(config),
            phase_visits: PhaseVisits::new(config),
            transition_limit: TransitionLimit::new(config),
            oscillation: Oscillation::new(config),
            repeated_output: RepeatedOutput::new(config),
        }
    }

    /// Runs every built-in detector over one event, in a fixed order.
    ///
    /// The progress tracker runs first and sets
    /// [`ObservedEvent::progressed`] for the detectors after it.
    pub fn observe(
        &self,
        state: &mut BuiltinState,
        event: &ObservedEvent<'_>,
        out: &mut Vec<Detection>,
    ) {
        let mut event = *event;
        event.progressed = self.progress.observe(&mut state.progress, event.event);
        // One evidence record for every detector that keeps this event.
        let at = SharedEvidence::new(&event);
        self.exact_failure
            .observe_shared(&mut state.exact_failure, &event, &at, out);
        self.agent_pair
            .observe_shared(&mut state.agent_pair, &event, &at, out);
        self.multi_agent
            .observe_shared(&mut state.multi_agent, &event, &at, out);
        self.topic_cycle
            .observe_shared(&mut state.topic_cycle, &event, &at, out);
        self.edge_limit
            .observe_shared(&mut state.edge_limit, &event, &at, out);
        self.phase_visits
            .observe_shared(&mut state.phase_visits, &event, &at, out);
        self.transition_limit
            .observe_shared(&mut state.transition_limit, &event, &at, out);
        self.oscillation
            .observe_shared(&mut state.oscillation, &event, &at, out);
        self.repeated_output
            .observe_shared(&mut state.repeated_output, &event, &at, out);
    }
}
