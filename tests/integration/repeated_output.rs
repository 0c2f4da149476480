//! Repeated failed output and strategy pivots (ruling 8).

use crate::support::*;

#[test]
fn three_identical_failed_outputs_pivot_twice_then_pause() {
    let decisions = replay_jsonl("repeated_output.jsonl", &[]);
    // Nine failed turns whose outputs differ only in surrounding whitespace.
    assert_eq!(lines_with(&decisions, "T1", "repeated_output"), [3, 6, 9]);

    for (line, pivots) in [(3, 1), (6, 2)] {
        let decision = at(&decisions, line);
        assert_eq!(decision["action"], "pivot", "line {line}");
        assert_eq!(decision["pivots"], pivots, "line {line}");
        assert_eq!(decision["status"], "active", "line {line}");
        let directive = decision["directive"].as_str().unwrap_or_default();
        assert!(!directive.is_empty(), "a pivot carries its directive");
        let found = detection(&decisions, line, "repeated_output");
        assert_eq!(found["action"], "pivot");
        assert_eq!(found["directive"].as_str(), Some(directive));
    }
    let first = detection(&decisions, 3, "repeated_output");
    assert_eq!(numbers(&first["evidence"]), [1, 2, 3]);
    assert_eq!(first["evidence_ids"], serde_json::json!(["r1", "r2", "r3"]));
    assert_eq!(
        numbers(&detection(&decisions, 6, "repeated_output")["evidence"]),
        [4, 5, 6]
    );

    let paused = at(&decisions, 9);
    assert_eq!(paused["action"], "escalate");
    assert_eq!(paused["status"], "paused");
    assert_eq!(paused["pivots"], 2);
    assert_eq!(
        detection(&decisions, 9, "repeated_output")["action"],
        "escalate"
    );
    // Failed turns are not failures: no loop is counted.
    assert_eq!(paused["loop_count"], 0);

    let report = replay_report("repeated_output.jsonl", &[]);
    let t1 = task(&report, "T1");
    assert_eq!(t1["status"], "paused");
    assert_eq!(t1["pivots"], 2);
    // The JSON report keeps each pivot's directive on its detection.
    let directives = t1["detections"]
        .as_array()
        .expect("detections")
        .iter()
        .filter(|d| d["action"] == "pivot" && d["directive"].is_string())
        .count();
    assert_eq!(directives, 2);
}

#[test]
fn a_successful_turn_or_a_different_output_breaks_the_run() {
    let decisions = replay_jsonl("repeated_output.jsonl", &[]);
    assert!(lines_with(&decisions, "T2", "repeated_output").is_empty());
    let last = decisions.last().expect("decisions");
    assert_eq!(last["task"], "T2");
    assert_eq!(last["status"], "active");
    assert_eq!(last["pivots"], 0);
}
