//! STUB: to be written (see the detectors brief).

use loopguard_core_types::{Config, Detection};

use crate::{Detector, ObservedEvent};

/// STUB.
#[derive(Debug, Clone)]
pub struct ExactFailure {}

impl ExactFailure {
    /// STUB.
    pub fn new(_config: &Config) -> ExactFailure {
        ExactFailure {}
    }
}

impl Detector for ExactFailure {
    type State = ();

    fn name(&self) -> &'static str {
        "exact_failure"
    }

    fn observe(&self, _state: &mut (), _event: &ObservedEvent<'_>, _out: &mut Vec<Detection>) {}
}
