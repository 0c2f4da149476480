//! Workflow transitions: edges, phase visits, transition limits and
//! oscillation (rulings 5, 6 and 7).

use crate::support::*;

#[test]
fn edge_limit_aborts_at_the_6th_hop_without_progress_and_abort_is_terminal() {
    let decisions = replay_jsonl("edge_limit.jsonl", &[]);
    // plan -> search on lines 1, 3, 5, 7, 9 and 11.
    assert_eq!(lines_with(&decisions, "T1", "edge_limit"), [11]);
    let found = detection(&decisions, 11, "edge_limit");
    assert_eq!(found["action"], "abort");
    assert_eq!(found["severity"], "critical");
    assert_eq!(numbers(&found["evidence"]), [1, 3, 5, 7, 9, 11]);
    // Without progress, plan <-> search is also an oscillation from the 4th
    // hop on (ruling 7): those hops are blocked before the edge aborts.
    assert_eq!(
        lines_with(&decisions, "T1", "oscillation"),
        (4..=11).collect::<Vec<_>>()
    );
    assert_eq!(at(&decisions, 4)["action"], "block");
    assert_eq!(at(&decisions, 10)["action"], "block");
    let aborted = at(&decisions, 11);
    assert_eq!(aborted["action"], "abort");
    assert_eq!(aborted["status"], "aborted_stuck");

    // Not even a human brings an aborted task back.
    let human = at(&decisions, 12);
    assert_eq!(human["status"], "aborted_stuck");
    assert_eq!(human["action"], "abort");
    let report = replay_report("edge_limit.jsonl", &[]);
    assert_eq!(task(&report, "T1")["status"], "aborted_stuck");
}

#[test]
fn progress_that_changes_a_metric_resets_the_edge_counter() {
    let decisions = replay_jsonl("edge_limit_progress.jsonl", &[]);
    // The same six plan -> search hops, each followed by fewer failing
    // tests: no edge is stuck. The 6th occurrence still hits the
    // transition limit, which progress does not reset.
    assert!(lines_with(&decisions, "T1", "edge_limit").is_empty());
    // Progress clears the recent transitions too: plan <-> search with
    // fewer failing tests every round is no oscillation.
    assert!(lines_with(&decisions, "T1", "oscillation").is_empty());
    assert_eq!(lines_with(&decisions, "T1", "transition_limit"), [16]);
    let last = at(&decisions, 16);
    assert_eq!(last["status"], "escalated");
    assert_eq!(last["action"], "escalate");
}

#[test]
fn phase_visits_escalate_at_the_11th_entry() {
    let decisions = replay_jsonl("phase_visits.jsonl", &[]);
    // `test` is entered on line 1 and every odd line after it: the 11th
    // entry is line 21. No single transition repeats more than 3 times.
    assert_eq!(lines_with(&decisions, "T1", "phase_visits"), [21]);
    assert!(lines_with(&decisions, "T1", "transition_limit").is_empty());
    assert!(lines_with(&decisions, "T1", "oscillation").is_empty());
    let found = detection(&decisions, 21, "phase_visits");
    assert_eq!(found["action"], "escalate");
    assert_eq!(found["count"], 11);
    let evidence = numbers(&found["evidence"]);
    assert_eq!(evidence.last(), Some(&21));
    assert!(evidence.windows(2).all(|pair| pair[0] < pair[1]));
    assert!(evidence.iter().all(|line| line % 2 == 1), "{evidence:?}");
    let gated = at(&decisions, 21);
    assert_eq!(gated["action"], "escalate");
    assert_eq!(gated["status"], "escalated");
}

#[test]
fn a_config_file_overrides_one_phase_visit_limit() {
    let config = config("test_visits_3.toml");
    let config = config.to_str().expect("a UTF-8 path");
    let decisions = replay_jsonl("phase_visits.jsonl", &["--config", config]);
    // test = 3: the 4th entry (line 7) is the first one over the limit.
    let lines = lines_with(&decisions, "T1", "phase_visits");
    assert_eq!(lines.first(), Some(&7), "{lines:?}");
    assert_eq!(detection(&decisions, 7, "phase_visits")["count"], 4);
    assert_eq!(at(&decisions, 7)["status"], "escalated");
    assert_eq!(at(&decisions, 6)["status"], "active");
}

#[test]
fn transition_limit_escalates_the_6th_occurrence_of_one_transition() {
    let decisions = replay_jsonl("transition_limit.jsonl", &[]);
    // build -> test on lines 1, 5, 9, 13, 17 and 21, each followed by
    // progress, and back to build by a different phase each time.
    assert_eq!(lines_with(&decisions, "T1", "transition_limit"), [21]);
    assert!(lines_with(&decisions, "T1", "edge_limit").is_empty());
    assert!(lines_with(&decisions, "T1", "oscillation").is_empty());
    let found = detection(&decisions, 21, "transition_limit");
    assert_eq!(found["action"], "escalate");
    assert_eq!(found["count"], 6);
    let evidence = numbers(&found["evidence"]);
    assert_eq!(evidence.last(), Some(&21));
    assert!(
        evidence
            .iter()
            .all(|line| [1, 5, 9, 13, 17, 21].contains(line)),
        "{evidence:?}"
    );
    let gated = at(&decisions, 21);
    assert_eq!(gated["action"], "escalate");
    assert_eq!(gated["status"], "escalated");
    assert_eq!(gated["loop_count"], 0);
}

#[test]
fn oscillation_blocks_a_two_cycle_and_a_three_cycle_repeated_twice() {
    let decisions = replay_jsonl("oscillation.jsonl", &[]);
    // T1: draft -> review, review -> draft, twice.
    assert_eq!(lines_with(&decisions, "T1", "oscillation"), [4]);
    let two = detection(&decisions, 4, "oscillation");
    assert_eq!(two["action"], "block");
    assert_eq!(numbers(&two["evidence"]), [1, 2, 3, 4]);
    assert_eq!(at(&decisions, 4)["action"], "block");
    assert_eq!(at(&decisions, 4)["status"], "active");
    // T2: plan -> code -> test -> plan, twice.
    assert_eq!(lines_with(&decisions, "T2", "oscillation"), [10]);
    let three = detection(&decisions, 10, "oscillation");
    assert_eq!(three["action"], "block");
    assert_eq!(numbers(&three["evidence"]), [5, 6, 7, 8, 9, 10]);
}
