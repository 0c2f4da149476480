//! STUB: to be written (see the detectors brief).

use loopguard_core_types::{Config, Detection};

use crate::{Detector, ObservedEvent};

/// STUB.
#[derive(Debug, Clone)]
pub struct EdgeLimit {}

impl EdgeLimit {
    /// STUB.
    pub fn new(_config: &Config) -> EdgeLimit {
        EdgeLimit {}
    }
}

impl Detector for EdgeLimit {
    type State = ();

    fn name(&self) -> &'static str {
        "edge_limit"
    }

    fn observe(&self, _state: &mut (), _event: &ObservedEvent<'_>, _out: &mut Vec<Detection>) {}
}
