//! The JSON report of a whole trace (`loopguard replay --format json`).

use serde::{Deserialize, Serialize};

use crate::{Detection, TaskStatus};

/// One report for a whole trace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Valid events read.
    pub events: u64,
    /// Lines that could not be read as events.
    pub errors: Vec<LineError>,
    /// Every task seen, in order of first appearance.
    pub tasks: Vec<TaskReport>,
}

/// A line that could not be read as an event, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineError {
    /// The 1-based input line.
    pub line: u64,
    /// What is wrong with it.
    pub error: String,
}

/// One task's outcome over the whole trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskReport {
    /// The task id.
    pub task: String,
    /// Its status after its last event.
    pub status: TaskStatus,
    /// Its loop count after its last event.
    pub loop_count: u32,
    /// Its pivots since its last reset.
    pub pivots: u32,
    /// Every detection on its events, each with its `line`. Detections are
    /// history: they survive resets.
    pub detections: Vec<Detection>,
}
