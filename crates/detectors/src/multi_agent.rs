//! STUB: to be written (see the detectors brief).

use loopguard_core_types::{Config, Detection};

use crate::{Detector, ObservedEvent};

/// STUB.
#[derive(Debug, Clone)]
pub struct MultiAgent {}

impl MultiAgent {
    /// STUB.
    pub fn new(_config: &Config) -> MultiAgent {
        MultiAgent {}
    }
}

impl Detector for MultiAgent {
    type State = ();

    fn name(&self) -> &'static str {
        "multi_agent"
    }

    fn observe(&self, _state: &mut (), _event: &ObservedEvent<'_>, _out: &mut Vec<Detection>) {}
}
