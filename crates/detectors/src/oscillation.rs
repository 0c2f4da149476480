//! STUB: to be written (see the detectors brief).

use loopguard_core_types::{Config, Detection};

use crate::{Detector, ObservedEvent};

/// STUB.
#[derive(Debug, Clone)]
pub struct Oscillation {}

impl Oscillation {
    /// STUB.
    pub fn new(_config: &Config) -> Oscillation {
        Oscillation {}
    }
}

impl Detector for Oscillation {
    type State = ();

    fn name(&self) -> &'static str {
        "oscillation"
    }

    fn observe(&self, _state: &mut (), _event: &ObservedEvent<'_>, _out: &mut Vec<Detection>) {}
}
