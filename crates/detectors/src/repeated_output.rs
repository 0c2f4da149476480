//! STUB: to be written (see the detectors brief).

use loopguard_core_types::{Config, Detection};

use crate::{Detector, ObservedEvent};

/// Part of the pivot directive: tells the agent to drop what it tried.
pub const DIRECTIVE_IGNORE_PREVIOUS: &str = "Ignore all previous implementation attempts";
/// Part of the pivot directive: tells the agent how to start again.
pub const DIRECTIVE_FIRST_PRINCIPLES: &str = "Reason from first principles";

/// STUB.
#[derive(Debug, Clone)]
pub struct RepeatedOutput {}

/// STUB.
#[derive(Debug, Default)]
pub struct RepeatedOutputState {
    pivots: u32,
}

impl RepeatedOutputState {
    /// Pivots issued since the last reset.
    pub fn pivots(&self) -> u32 {
        self.pivots
    }
}

impl RepeatedOutput {
    /// STUB.
    pub fn new(_config: &Config) -> RepeatedOutput {
        RepeatedOutput {}
    }
}

impl Detector for RepeatedOutput {
    type State = RepeatedOutputState;

    fn name(&self) -> &'static str {
        "repeated_output"
    }

    fn observe(
        &self,
        _state: &mut RepeatedOutputState,
        _event: &ObservedEvent<'_>,
        _out: &mut Vec<Detection>,
    ) {
    }
}
