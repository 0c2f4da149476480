//! The registry: every built-in detector, listed once.
//!
//! `builtin_detectors!` turns the list at the bottom of this file into
//! [`BuiltinDetectors`] (each detector configured), [`BuiltinState`] (each
//! detector's per-task state, one field per line, saved whole by durable
//! stores) and the loop that runs them in order over one event. Adding a
//! built-in detector is its module plus one line here; the line's field
//! name is its key in the saved state, so it is never renamed (a new name
//! is a new saved-state format: `docs/architecture.md`).
//!
//! The progress, hub and exchange trackers are not in the list: they run
//! before every detector and set [`ObservedEvent::progressed`],
//! [`ObservedEvent::hub_protocol`] and [`ObservedEvent::exchange`] for
//! them.

use loopguard_config::Config;
use loopguard_core_types::Detection;

use crate::clock::TaskClock;
use crate::{
    AgentPair, Detector, EdgeLimit, ExactFailure, ExchangeRepeats, ExchangeRepeatsState, HubState,
    HubTracker, MultiAgent, ObservedEvent, Oscillation, PhaseVisits, ProgressState,
    ProgressTracker, RepeatedOutput, ToolCalls, ToolRephrase, TopicCycle, TransitionLimit,
};

/// Declares the built-in detectors: `field: Type` per detector, in the
/// order they run. Generates [`BuiltinDetectors`], [`BuiltinState`] and
/// [`REGISTERED`].
macro_rules! builtin_detectors {
    ($($field:ident: $detector:ty,)+) => {
        /// Every built-in detector, configured.
        #[derive(Debug, Clone)]
        pub struct BuiltinDetectors {
            progress: ProgressTracker,
            hubs: HubTracker,
            exchanges: ExchangeRepeats,
            window_ms: i64,
            $($field: $detector,)+
        }

        /// Everything the built-in detectors remember about one task.
        ///
        /// Its JSON form is what durable stores keep (saved-state format 1,
        /// with golden fixtures): one key per registered detector. A key
        /// missing from a saved state (a detector added since it was
        /// written) reads as that detector's fresh state, so adding a
        /// detector keeps the format; renaming a key does not.
        #[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
        #[serde(default)]
        pub struct BuiltinState {
            progress: ProgressState,
            clock: TaskClock,
            hubs: HubState,
            exchanges: ExchangeRepeatsState,
            $($field: <$detector as Detector>::State,)+
        }

        /// The registered detectors as `(name, config section, kinds)`, in
        /// the order they run.
        pub const REGISTERED: &[(&str, &str, &[&str])] = &[
            $((
                stringify!($field),
                <$detector as Detector>::CONFIG_SECTION,
                <$detector as Detector>::KINDS,
            ),)+
        ];

        impl BuiltinDetectors {
            /// All built-in detectors with the limits of `config`.
            pub fn new(config: &Config) -> BuiltinDetectors {
                BuiltinDetectors {
                    progress: ProgressTracker,
                    hubs: HubTracker::new(config),
                    exchanges: ExchangeRepeats::new(config),
                    window_ms: i64::try_from(config.cycles.window_secs.saturating_mul(1000))
                        .unwrap_or(i64::MAX),
                    $($field: <$detector>::new(config),)+
                }
            }

            /// Runs every built-in detector over one event, in registry
            /// order. The task's clock runs first (an event timed before
            /// the task's latest time is counted at that time, or not at
            /// all by windowed detectors when it is more than a window
            /// behind; the note returned says so: [`crate::clock`]); the
            /// progress tracker next, setting [`ObservedEvent::progressed`]
            /// for the detectors after it.
            pub fn observe(
                &self,
                state: &mut BuiltinState,
                event: &mut ObservedEvent<'_>,
                out: &mut Vec<Detection>,
            ) -> Option<String> {
                let (time, clamped) = state.clock.admit(event.time);
                if clamped.is_some() {
                    event.retime(time);
                }
                let too_late = clamped.is_some_and(|late| late.behind_ms() > self.window_ms);
                event.progressed = self.progress.observe(&mut state.progress, event.event);
                if self.exchanges.is_on() {
                    let (time, evidence) = (event.time, || event.evidence_ref());
                    event.exchange = self.exchanges.observe(
                        &mut state.exchanges,
                        event.event,
                        time,
                        evidence,
                        event.matched_text,
                    );
                } else {
                    event.hub_protocol =
                        self.hubs
                            .observe_matched(&mut state.hubs, event.event, event.matched_text);
                }
                $(
                    if !(too_late && <$detector as Detector>::WINDOWED) {
                        Detector::observe(&self.$field, &mut state.$field, event, out);
                    }
                )+
                clamped.map(|late| late.note(self.window_ms))
            }
        }
    };
}

builtin_detectors! {
    exact_failure: ExactFailure,
    agent_pair: AgentPair,
    multi_agent: MultiAgent,
    topic_cycle: TopicCycle,
    edge_limit: EdgeLimit,
    phase_visits: PhaseVisits,
    transition_limit: TransitionLimit,
    oscillation: Oscillation,
    repeated_output: RepeatedOutput,
    tool_calls: ToolCalls,
    tool_rephrase: ToolRephrase,
}

/// Keys of the saved built-in state added since format 1 beyond the
/// registered detectors: each reads as its default when a saved state lacks
/// it, so adding it kept the format.
pub const KEYS_ADDED_SINCE_FORMAT_1: &[&str] = &["clock", "hubs", "exchanges"];

impl BuiltinState {
    /// Pivots issued since the last reset.
    pub fn pivots(&self) -> u32 {
        self.repeated_output.pivots()
    }

    /// Forgets everything the detectors counted (on `completed` and
    /// `human`); the task's clock stays, since time does not reset.
    pub fn reset(&mut self) {
        *self = BuiltinState {
            clock: self.clock,
            ..BuiltinState::default()
        };
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

#[cfg(test)]
mod tests {
    use loopguard_config::DEFAULT_CONFIG_TOML;
    use loopguard_core_types::kinds;

    use super::*;

    #[test]
    fn every_registered_detector_has_its_config_section_in_default_toml() {
        for (name, section, _) in REGISTERED {
            let header = format!("\n[{section}]\n");
            assert!(
                DEFAULT_CONFIG_TOML.contains(&header),
                "config/default.toml has no [{section}] section for detector {name}"
            );
        }
    }

    #[test]
    fn every_registered_kind_is_a_contract_kind_reported_by_one_detector() {
        let mut seen = Vec::new();
        for (name, _, detector_kinds) in REGISTERED {
            assert!(!detector_kinds.is_empty(), "{name} reports no kind");
            for kind in *detector_kinds {
                assert!(
                    kinds::ALL.contains(kind),
                    "{name} reports {kind}, which the trace format does not list"
                );
                assert!(!seen.contains(kind), "{kind} is reported by two detectors");
                seen.push(*kind);
            }
        }
    }

    #[test]
    fn a_reset_forgets_the_counts_but_not_the_tasks_clock() {
        use loopguard_core_types::Timestamp;
        let mut state = BuiltinState::restored(2);
        state.clock.admit(Some(Timestamp(5_000)));
        state.reset();
        assert_eq!(state.pivots(), 0);
        assert_eq!(state.clock.latest(), Some(Timestamp(5_000)));
    }

    #[test]
    fn a_saved_state_without_a_detectors_key_reads_as_its_fresh_state() {
        let mut json = serde_json::to_value(BuiltinState::restored(2)).expect("serializes");
        let object = json.as_object_mut().expect("an object");
        object.remove("exact_failure");
        let state: BuiltinState = serde_json::from_value(json).expect("still reads");
        assert_eq!(state.pivots(), 2);
    }

    #[test]
    fn the_saved_state_has_one_key_per_registered_detector() {
        let json = serde_json::to_value(BuiltinState::default()).expect("serializes");
        let keys: Vec<&str> = json
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .collect();
        let mut expected: Vec<&str> = REGISTERED.iter().map(|(name, _, _)| *name).collect();
        expected.extend(["progress", "clock", "hubs", "exchanges"]);
        expected.sort_unstable();
        let mut keys = keys;
        keys.sort_unstable();
        assert_eq!(keys, expected);
    }
}
