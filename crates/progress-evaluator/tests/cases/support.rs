//! Helpers shared by the modules of this test binary.

use std::path::PathBuf;

use loopguard_core_types::{Detection, Event, EventKind};
use loopguard_detectors::ObservedEvent;
use loopguard_host::ExtensionDetector;
use loopguard_progress_evaluator::ProgressEvaluator;
use serde_json::Value;

/// One event of JSON text.
pub(crate) fn event(json: &str) -> Event {
    Event::from_json(json).unwrap_or_else(|e| panic!("{json}: {e}"))
}

/// The workspace's `tests/NAME`.
pub(crate) fn workspace_file(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Feeds `events` (input lines from `first`) to `evaluator` the way the
/// engine does, resetting a task on `completed` and `human`; the
/// detections of each event, as JSON.
pub(crate) async fn feed(
    evaluator: &ProgressEvaluator,
    first: u64,
    events: &[Event],
) -> Vec<Value> {
    let mut said = Vec::new();
    for (index, event) in events.iter().enumerate() {
        let line = first + index as u64;
        let found: Vec<Detection> = evaluator
            .observe(&ObservedEvent::new(line, event))
            .await
            .unwrap_or_else(|e| panic!("line {line}: {e}"));
        if matches!(event.kind, EventKind::Completed | EventKind::Human { .. }) {
            evaluator.reset_task(&event.task).await;
        }
        said.push(serde_json::to_value(&found).unwrap_or_else(|e| panic!("{e}")));
    }
    said
}
