//! Progress: whether an event shows the task moving (ruling 5).
//!
//! A `progress` event shows progress when it changes any metric the task
//! reported before (tests run, tests failing, coverage, dependencies
//! added), or when the task's running total of `files_changed` grows. The
//! first `progress` event of a task shows progress when it reports any
//! metric at all (a metric moves from "unknown") or a non-zero
//! `files_changed`. Progress resets the planner's edge counters ([`crate::EdgeLimit`]).

use loopguard_core_types::{Event, EventKind, ProgressSnapshot};

/// Computes [`crate::ObservedEvent::progressed`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ProgressTracker;

/// The last value of each metric a task reported.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub struct ProgressState {
    last: ProgressSnapshot,
}

impl ProgressState {
    /// The latest value of each metric the task reported (a metric never
    /// reported is `None`).
    pub fn latest(&self) -> &ProgressSnapshot {
        &self.last
    }
}

impl ProgressTracker {
    /// Updates the task's metrics and says whether this event showed
    /// progress.
    pub fn observe(&self, state: &mut ProgressState, event: &Event) -> bool {
        let EventKind::Progress(snapshot) = &event.kind else {
            return false;
        };
        let last = &mut state.last;
        let mut changed = false;
        fn merge<T: PartialEq + Copy>(slot: &mut Option<T>, new: Option<T>, changed: &mut bool) {
            if let Some(value) = new {
                if *slot != Some(value) {
                    *changed = true;
                }
                *slot = Some(value);
            }
        }
        merge(&mut last.tests_total, snapshot.tests_total, &mut changed);
        merge(&mut last.tests_failed, snapshot.tests_failed, &mut changed);
        merge(&mut last.coverage, snapshot.coverage, &mut changed);
        merge(&mut last.deps_added, snapshot.deps_added, &mut changed);
        // files_changed is a running total: only growth is progress.
        if let Some(files) = snapshot.files_changed {
            let before = last.files_changed.unwrap_or(0);
            if files > before {
                changed = true;
            }
            last.files_changed = Some(files.max(before));
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(json: &str) -> Event {
        Event::from_json(&format!(r#"{{"type":"progress","task":"T"{json}}}"#)).expect("valid")
    }

    #[test]
    fn changed_metric_is_progress_and_unchanged_is_not() {
        let tracker = ProgressTracker;
        let mut state = ProgressState::default();
        assert!(tracker.observe(&mut state, &progress(r#","tests_failed":3"#)));
        assert!(!tracker.observe(&mut state, &progress(r#","tests_failed":3"#)));
        assert!(tracker.observe(&mut state, &progress(r#","tests_failed":2"#)));
        assert!(tracker.observe(&mut state, &progress(r#","coverage":0.4"#)));
        assert!(!tracker.observe(&mut state, &progress("")));
    }

    #[test]
    fn files_changed_counts_only_when_it_grows() {
        let tracker = ProgressTracker;
        let mut state = ProgressState::default();
        assert!(tracker.observe(&mut state, &progress(r#","files_changed":2"#)));
        assert!(!tracker.observe(&mut state, &progress(r#","files_changed":2"#)));
        assert!(!tracker.observe(&mut state, &progress(r#","files_changed":1"#)));
        assert!(tracker.observe(&mut state, &progress(r#","files_changed":3"#)));
        assert_eq!(state.latest().files_changed, Some(3));
    }

    #[test]
    fn other_events_are_not_progress() {
        let event = Event::from_json(r#"{"type":"completed","task":"T"}"#).expect("valid");
        assert!(!ProgressTracker.observe(&mut ProgressState::default(), &event));
    }
}
