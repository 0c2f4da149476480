//! STUB: to be written (see the detectors brief).

use loopguard_core_types::{Config, Detection};

use crate::{Detector, ObservedEvent};

/// STUB.
#[derive(Debug, Clone)]
pub struct AgentPair {}

impl AgentPair {
    /// STUB.
    pub fn new(_config: &Config) -> AgentPair {
        AgentPair {}
    }
}

impl Detector for AgentPair {
    type State = ();

    fn name(&self) -> &'static str {
        "agent_pair"
    }

    fn observe(&self, _state: &mut (), _event: &ObservedEvent<'_>, _out: &mut Vec<Detection>) {}
}
