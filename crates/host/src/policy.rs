//! The action policy: what a detection means for its task.
//!
//! Detectors say what they found (a kind, the evidence, the action their
//! own rule asks for); this module says what that does to the task: the
//! loop count and its severity ladder, the status each detection implies
//! and which status wins, the strongest action, the human gate, and what
//! `completed` and `human` reset. Every function is pure and named for the
//! ruling of `docs/spec/trace-format.md` it implements; the engine calls
//! [`apply`] once per event and [`resolution`] / [`status_after_reset`]
//! when an event ends an episode.

use loopguard_core_types::{Action, Detection, EventKind, Severity, TaskStatus, kinds};

use crate::store::Resolution;

/// The kinds that add one loop to the task's loop count (ruling 4); every
/// other kind (cycles, limits, plugins' own kinds) leaves it alone.
pub const LOOP_FEEDING_KINDS: [&str; 4] = [
    kinds::EXACT_FAILURE,
    kinds::COLLABORATION_LOOP,
    kinds::REGRESSION,
    kinds::NO_PROGRESS,
];

/// Whether a detection of `kind` adds to the task's loop count (ruling 4).
pub fn feeds_loop_count(kind: &str) -> bool {
    LOOP_FEEDING_KINDS.contains(&kind)
}

/// The ladder of a loop-feeding detection (rulings 1 and 11): the task's
/// loop count after it sets the severity (1 low, 2 medium, 3 and more
/// high), and the action climbs from a warning (the first loop) to context
/// injection to the human gate once the count reaches `loops_before_gate`.
pub fn loop_ladder(loop_count: u32, loops_before_gate: u32) -> (Severity, Action) {
    let action = if loop_count >= loops_before_gate {
        Action::Escalate
    } else if loop_count <= 1 {
        Action::Warn
    } else {
        Action::InjectContext
    };
    (Severity::for_loop(loop_count), action)
}

/// Whether `detection` pauses its task (ruling 8): a `repeated_output`
/// escalation, which that detector issues when the pivot budget is spent.
pub fn pauses_task(detection: &Detection) -> bool {
    detection.kind == kinds::REPEATED_OUTPUT && detection.action == Action::Escalate
}

/// The status one detection implies: an abort is `aborted_stuck`, a spent
/// pivot budget `paused` (ruling 8), any other escalation `escalated`
/// (the human gate), anything milder leaves the task `active`.
pub fn implied_status(detection: &Detection) -> TaskStatus {
    if detection.action == Action::Abort {
        TaskStatus::AbortedStuck
    } else if pauses_task(detection) {
        TaskStatus::Paused
    } else if detection.action == Action::Escalate {
        TaskStatus::Escalated
    } else {
        TaskStatus::Active
    }
}

/// The stronger of two statuses (ruling 10: `aborted_stuck` over `paused`
/// over `escalated` over `active`/`completed`); on a tie the current one
/// stays.
pub fn stronger_status(current: TaskStatus, implied: TaskStatus) -> TaskStatus {
    if implied.precedence() > current.precedence() {
        implied
    } else {
        current
    }
}

/// The status of a task when a new event arrives (ruling 1): more events
/// after `completed` make the task `active` again; every other status
/// holds.
pub fn status_on_new_event(status: TaskStatus) -> TaskStatus {
    if status == TaskStatus::Completed {
        TaskStatus::Active
    } else {
        status
    }
}

/// The action the task answers with, whatever its detections asked
/// (rulings 9 and 10): an aborted task answers `abort` (terminal); a task
/// behind the gate (escalated or paused) answers at least `escalate` until
/// a `human` event.
pub fn gated_action(status: TaskStatus, action: Action) -> Action {
    if status == TaskStatus::AbortedStuck {
        Action::Abort
    } else if status.is_gated() {
        action.max(Action::Escalate)
    } else {
        action
    }
}

/// What one event's detections did to the task's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TaskCounts {
    /// The task's loop count.
    pub loop_count: u32,
    /// The task's status.
    pub status: TaskStatus,
}

/// The policy's answer for one event, before any reset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The strongest action of all detections, then gated.
    pub action: Action,
    /// The first directive any detection carried (a pivot's, a tool
    /// call's), for the decision.
    pub directive: Option<String>,
}

/// Applies the policy to one event's detections, in order: each
/// loop-feeding detection adds one loop and takes its place on the ladder
/// ([`loop_ladder`], setting its `severity`, `action` and `loop_count`);
/// each detection may raise the status ([`implied_status`],
/// [`stronger_status`]); the strongest action wins and the gate holds
/// ([`gated_action`]).
pub fn apply(
    counts: &mut TaskCounts,
    detections: &mut [Detection],
    loops_before_gate: u32,
) -> Verdict {
    let mut action = Action::None;
    let mut directive = None;
    for detection in detections.iter_mut() {
        if feeds_loop_count(&detection.kind) {
            counts.loop_count = counts.loop_count.saturating_add(1);
            let (severity, ladder_action) = loop_ladder(counts.loop_count, loops_before_gate);
            detection.loop_count = Some(counts.loop_count);
            detection.severity = severity;
            detection.action = ladder_action;
        }
        counts.status = stronger_status(counts.status, implied_status(detection));
        if directive.is_none() {
            directive.clone_from(&detection.directive);
        }
        action = action.max(detection.action);
    }
    Verdict {
        action: gated_action(counts.status, action),
        directive,
    }
}

/// Whether this event ends the task's detection episode, and how
/// (rulings 1 and 9): the task aborted on this event; else `completed`;
/// else a `human` event. An abort is terminal: once aborted, later events
/// resolve nothing.
pub fn resolution(
    event: &EventKind,
    status_before: TaskStatus,
    status_now: TaskStatus,
) -> Option<Resolution> {
    if status_now == TaskStatus::AbortedStuck {
        return (status_before != TaskStatus::AbortedStuck).then_some(Resolution::Aborted);
    }
    match event {
        EventKind::Completed => Some(Resolution::Completed),
        EventKind::Human { .. } => Some(Resolution::Human),
        _ => None,
    }
}

/// Whether a resolution resets the task's counters (ruling 1: `completed`
/// and `human` reset every counter and lift the gate; an abort does not).
pub fn resets_counters(resolution: Resolution) -> bool {
    matches!(resolution, Resolution::Completed | Resolution::Human)
}

/// The status after a reset (rulings 1 and 9): `completed` after
/// `completed`, `active` after `human` (the gate lifts).
pub fn status_after_reset(resolution: Resolution) -> TaskStatus {
    if resolution == Resolution::Completed {
        TaskStatus::Completed
    } else {
        TaskStatus::Active
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detection(kind: &'static str, action: Action) -> Detection {
        Detection::new("test", kind, Severity::Low, action, vec![1], "why")
    }

    fn counts() -> TaskCounts {
        TaskCounts {
            loop_count: 0,
            status: TaskStatus::Active,
        }
    }

    #[test]
    fn ruling_4_only_failure_and_request_loops_feed_the_loop_count() {
        for kind in LOOP_FEEDING_KINDS {
            assert!(feeds_loop_count(kind), "{kind}");
        }
        for kind in [
            kinds::AGENT_PAIR,
            kinds::MULTI_AGENT,
            kinds::TOPIC_CYCLE,
            kinds::REPEATED_QUERY,
            kinds::EDGE_LIMIT,
            kinds::PHASE_VISITS,
            kinds::TRANSITION_LIMIT,
            kinds::OSCILLATION,
            kinds::REPEATED_OUTPUT,
            kinds::EXTERNAL_FAILURE,
            "a_plugins_own_kind",
        ] {
            assert!(!feeds_loop_count(kind), "{kind}");
        }
        // A cycle detection leaves the count alone.
        let mut task = counts();
        apply(
            &mut task,
            &mut [detection(kinds::AGENT_PAIR, Action::BreakCycle)],
            3,
        );
        assert_eq!(task.loop_count, 0);
    }

    #[test]
    fn ruling_11_severity_climbs_with_the_loop_count() {
        assert_eq!(loop_ladder(1, 3).0, Severity::Low);
        assert_eq!(loop_ladder(2, 3).0, Severity::Medium);
        assert_eq!(loop_ladder(3, 3).0, Severity::High);
        assert_eq!(loop_ladder(7, 3).0, Severity::High);
    }

    #[test]
    fn ruling_1_the_gate_fires_when_the_count_reaches_it() {
        assert_eq!(loop_ladder(1, 3).1, Action::Warn);
        assert_eq!(loop_ladder(2, 3).1, Action::InjectContext);
        assert_eq!(loop_ladder(3, 3).1, Action::Escalate);
        assert_eq!(loop_ladder(1, 1).1, Action::Escalate);
        // Through apply: the 4th identical failure (3rd loop) escalates.
        let mut task = counts();
        let mut actions = Vec::new();
        for _ in 0..3 {
            let mut found = [detection(kinds::EXACT_FAILURE, Action::Warn)];
            let verdict = apply(&mut task, &mut found, 3);
            assert_eq!(found[0].loop_count, Some(task.loop_count));
            actions.push(verdict.action);
        }
        assert_eq!(
            actions,
            [Action::Warn, Action::InjectContext, Action::Escalate]
        );
        assert_eq!(task.status, TaskStatus::Escalated);
    }

    #[test]
    fn ruling_8_a_repeated_output_escalation_pauses_and_a_pivot_does_not() {
        assert!(pauses_task(&detection(
            kinds::REPEATED_OUTPUT,
            Action::Escalate
        )));
        assert!(!pauses_task(&detection(
            kinds::REPEATED_OUTPUT,
            Action::Pivot
        )));
        assert!(!pauses_task(&detection(
            kinds::PHASE_VISITS,
            Action::Escalate
        )));
        assert_eq!(
            implied_status(&detection(kinds::REPEATED_OUTPUT, Action::Escalate)),
            TaskStatus::Paused
        );
        assert_eq!(
            implied_status(&detection(kinds::REPEATED_OUTPUT, Action::Pivot)),
            TaskStatus::Active
        );
    }

    #[test]
    fn ruling_10_the_stronger_status_wins_whatever_the_order() {
        use TaskStatus::*;
        let statuses = [Active, Escalated, Paused, AbortedStuck];
        for (rank, weaker) in statuses.iter().enumerate() {
            for stronger in &statuses[rank..] {
                assert_eq!(stronger_status(*weaker, *stronger), *stronger);
                assert_eq!(stronger_status(*stronger, *weaker), *stronger);
            }
        }
        // An abort and a pause on one event: aborted, in either order.
        for order in [
            [Action::Abort, Action::Escalate],
            [Action::Escalate, Action::Abort],
        ] {
            let mut task = counts();
            let mut found = [
                detection(
                    if order[0] == Action::Abort {
                        kinds::EDGE_LIMIT
                    } else {
                        kinds::REPEATED_OUTPUT
                    },
                    order[0],
                ),
                detection(
                    if order[1] == Action::Abort {
                        kinds::EDGE_LIMIT
                    } else {
                        kinds::REPEATED_OUTPUT
                    },
                    order[1],
                ),
            ];
            let verdict = apply(&mut task, &mut found, 3);
            assert_eq!(task.status, AbortedStuck);
            assert_eq!(verdict.action, Action::Abort);
        }
    }

    #[test]
    fn ruling_9_a_gated_task_answers_escalate_until_a_human() {
        assert_eq!(
            gated_action(TaskStatus::Escalated, Action::None),
            Action::Escalate
        );
        assert_eq!(
            gated_action(TaskStatus::Paused, Action::Warn),
            Action::Escalate
        );
        assert_eq!(
            gated_action(TaskStatus::AbortedStuck, Action::Warn),
            Action::Abort
        );
        assert_eq!(gated_action(TaskStatus::Active, Action::Warn), Action::Warn);
        let mut task = TaskCounts {
            loop_count: 3,
            status: TaskStatus::Escalated,
        };
        let verdict = apply(&mut task, &mut [], 3);
        assert_eq!(verdict.action, Action::Escalate);
        // Detectors still run: a cycle on a gated task is recorded, the
        // answer stays escalate.
        let verdict = apply(
            &mut task,
            &mut [detection(kinds::AGENT_PAIR, Action::BreakCycle)],
            3,
        );
        assert_eq!(verdict.action, Action::Escalate);
    }

    #[test]
    fn the_strongest_action_wins_and_the_first_directive_is_kept() {
        let mut pivot = detection(kinds::REPEATED_OUTPUT, Action::Pivot);
        pivot.directive = Some("first".into());
        let mut later = detection(kinds::OSCILLATION, Action::Block);
        later.directive = Some("second".into());
        let mut task = counts();
        let verdict = apply(&mut task, &mut [pivot, later], 3);
        assert_eq!(verdict.action, Action::Block);
        assert_eq!(verdict.directive.as_deref(), Some("first"));
    }

    #[test]
    fn ruling_1_completed_then_more_events_make_the_task_active() {
        assert_eq!(
            status_on_new_event(TaskStatus::Completed),
            TaskStatus::Active
        );
        assert_eq!(
            status_on_new_event(TaskStatus::Escalated),
            TaskStatus::Escalated
        );
        assert_eq!(
            status_after_reset(Resolution::Completed),
            TaskStatus::Completed
        );
        assert_eq!(status_after_reset(Resolution::Human), TaskStatus::Active);
        assert!(resets_counters(Resolution::Completed));
        assert!(resets_counters(Resolution::Human));
        assert!(!resets_counters(Resolution::Aborted));
    }

    #[test]
    fn an_abort_is_terminal_and_resolves_once() {
        use TaskStatus::*;
        let human = EventKind::Human { note: None };
        assert_eq!(
            resolution(&EventKind::Completed, Active, AbortedStuck),
            Some(Resolution::Aborted)
        );
        // Already aborted: a human event resolves nothing (no revival).
        assert_eq!(resolution(&human, AbortedStuck, AbortedStuck), None);
        assert_eq!(
            resolution(&human, Escalated, Escalated),
            Some(Resolution::Human)
        );
        assert_eq!(
            resolution(&EventKind::Completed, Active, Active),
            Some(Resolution::Completed)
        );
        assert_eq!(
            resolution(
                &EventKind::Transition {
                    from: "a".into(),
                    to: "b".into()
                },
                Active,
                Escalated
            ),
            None
        );
    }
}
