//! STUB: to be written (see the detectors brief).

use loopguard_core_types::{Config, Detection};

use crate::{Detector, ObservedEvent};

/// STUB.
#[derive(Debug, Clone)]
pub struct PhaseVisits {}

impl PhaseVisits {
    /// STUB.
    pub fn new(_config: &Config) -> PhaseVisits {
        PhaseVisits {}
    }
}

impl Detector for PhaseVisits {
    type State = ();

    fn name(&self) -> &'static str {
        "phase_visits"
    }

    fn observe(&self, _state: &mut (), _event: &ObservedEvent<'_>, _out: &mut Vec<Detection>) {}
}

/// STUB.
#[derive(Debug, Clone)]
pub struct TransitionLimit {}

impl TransitionLimit {
    /// STUB.
    pub fn new(_config: &Config) -> TransitionLimit {
        TransitionLimit {}
    }
}

impl Detector for TransitionLimit {
    type State = ();

    fn name(&self) -> &'static str {
        "transition_limit"
    }

    fn observe(&self, _state: &mut (), _event: &ObservedEvent<'_>, _out: &mut Vec<Detection>) {}
}
