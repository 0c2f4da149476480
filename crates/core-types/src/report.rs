//! The JSON report of a whole trace (`loopguard replay --format json`).

use serde::{Deserialize, Serialize};

use crate::{Detection, Spend, TaskStatus};

/// One report for a whole trace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Valid events read.
    pub events: u64,
    /// Lines that could not be read as events.
    pub errors: Vec<LineError>,
    /// Every task seen, in order of first appearance.
    pub tasks: Vec<TaskReport>,
    /// What a reader should know about how the trace was judged, e.g. that
    /// semantic matching was off. Absent when there is nothing to say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
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
    /// What the task spent, in all and in loops (ruling 18), when any of its
    /// events carried `usage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Spend>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_written_only_when_there_are_some() {
        let mut report = Report::default();
        let json = serde_json::to_value(&report).expect("serializes");
        assert!(json.get("notes").is_none(), "{json}");
        // A report written before `notes` existed still reads.
        let old: Report =
            serde_json::from_str(r#"{"events":0,"errors":[],"tasks":[]}"#).expect("reads");
        assert_eq!(old, report);

        report.notes.push("semantic matching is off".into());
        let json = serde_json::to_value(&report).expect("serializes");
        assert_eq!(
            json["notes"],
            serde_json::json!(["semantic matching is off"])
        );
        let back: Report = serde_json::from_value(json).expect("reads");
        assert_eq!(back, report);
    }
}
