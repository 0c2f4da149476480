//! Failure loops (ruling 1 and 2), the human gate and resets.

use crate::support::*;

#[test]
fn exact_failure_counts_repeats_across_agents_and_escalates_at_loop_3() {
    let decisions = replay_jsonl("exact_failure.jsonl", &[]);
    assert_eq!(decisions.len(), 8, "one decision per event line");

    // The first occurrence is an attempt; a different message is not a repeat.
    for line in [2, 3] {
        assert_eq!(at(&decisions, line)["detections"], serde_json::json!([]));
        assert_eq!(at(&decisions, line)["loop_count"], 0);
    }
    assert_eq!(
        lines_with(&decisions, "T1", "exact_failure"),
        [4, 6, 7],
        "each repeat of line 2's message, by tester, reviewer and coder"
    );

    let first = detection(&decisions, 4, "exact_failure");
    assert_eq!(first["loop_count"], 1);
    assert_eq!(first["severity"], "low");
    assert_eq!(first["action"], "warn");
    assert_eq!(numbers(&first["evidence"]), [2, 4]);
    assert_eq!(at(&decisions, 4)["action"], "warn");

    // Test metrics improved on line 5: an exact repeat counts anyway.
    let second = detection(&decisions, 6, "exact_failure");
    assert_eq!(second["loop_count"], 2);
    assert_eq!(second["severity"], "medium");
    assert_eq!(second["action"], "inject_context");
    assert_eq!(numbers(&second["evidence"]), [2, 4, 6]);

    let third = detection(&decisions, 7, "exact_failure");
    assert_eq!(third["loop_count"], 3);
    assert_eq!(third["severity"], "high");
    assert_eq!(third["action"], "escalate");
    assert_eq!(numbers(&third["evidence"]), [2, 4, 6, 7]);
    assert_eq!(
        third["evidence_ids"],
        serde_json::json!(["f1", "f3", "f4", "f5"])
    );
    let gated = at(&decisions, 7);
    assert_eq!(gated["action"], "escalate");
    assert_eq!(gated["status"], "escalated");
    assert_eq!(gated["loop_count"], 3);
    assert_eq!(gated["id"], "f5");

    // Loop counters belong to a task: T2's first failure is an attempt.
    let other = at(&decisions, 8);
    assert_eq!(other["task"], "T2");
    assert_eq!(other["detections"], serde_json::json!([]));
    assert_eq!(other["status"], "active");
}

#[test]
fn exact_failure_report_lists_detections_with_their_lines() {
    let report = replay_report("exact_failure.jsonl", &[]);
    assert_eq!(report["events"], 8);
    assert_eq!(report["errors"], serde_json::json!([]));
    let t1 = task(&report, "T1");
    assert_eq!(t1["status"], "escalated");
    assert_eq!(t1["loop_count"], 3);
    assert_eq!(t1["pivots"], 0);
    let lines: Vec<_> = t1["detections"]
        .as_array()
        .expect("detections")
        .iter()
        .map(|d| (d["line"].as_u64(), d["kind"].as_str()))
        .collect();
    assert_eq!(
        lines,
        [
            (Some(4), Some("exact_failure")),
            (Some(6), Some("exact_failure")),
            (Some(7), Some("exact_failure"))
        ]
    );
    assert_eq!(task(&report, "T2")["status"], "active");
}

#[test]
fn human_gate_holds_until_a_human_event_then_everything_resets() {
    let decisions = replay_jsonl("human_gate.jsonl", &[]);
    let gate = at(&decisions, 4);
    assert_eq!(gate["action"], "escalate");
    assert_eq!(gate["status"], "escalated");
    assert_eq!(gate["loop_count"], 3);

    // A successful turn and a handoff do not lift the gate.
    for line in [5, 6] {
        let held = at(&decisions, line);
        assert_eq!(held["action"], "escalate", "line {line}");
        assert_eq!(held["status"], "escalated", "line {line}");
        assert_eq!(held["loop_count"], 3, "line {line}");
    }

    let human = at(&decisions, 7);
    assert_eq!(human["action"], "none");
    assert_eq!(human["status"], "active");
    assert_eq!(human["loop_count"], 0);

    // The failure history was reset too: the same message is an attempt
    // again, and its next repeat is loop 1.
    let again = at(&decisions, 8);
    assert_eq!(again["detections"], serde_json::json!([]));
    assert_eq!(again["action"], "none");
    assert_eq!(again["loop_count"], 0);
    let repeat = detection(&decisions, 9, "exact_failure");
    assert_eq!(repeat["loop_count"], 1);
    assert_eq!(numbers(&repeat["evidence"]), [8, 9]);
    assert_eq!(at(&decisions, 9)["status"], "active");
}

#[test]
fn completed_resets_counters_and_more_events_make_the_task_active() {
    let decisions = replay_jsonl("completed_reset.jsonl", &[]);
    assert_eq!(detection(&decisions, 2, "exact_failure")["loop_count"], 1);
    let done = at(&decisions, 3);
    assert_eq!(done["status"], "completed");
    assert_eq!(done["loop_count"], 0);
    assert_eq!(done["action"], "none");

    let after = at(&decisions, 4);
    assert_eq!(after["status"], "active");
    assert_eq!(after["loop_count"], 0);
    assert_eq!(after["detections"], serde_json::json!([]));
    let repeat = detection(&decisions, 5, "exact_failure");
    assert_eq!(repeat["loop_count"], 1);
    assert_eq!(numbers(&repeat["evidence"]), [4, 5]);

    let report = replay_report("completed_reset.jsonl", &[]);
    let t1 = task(&report, "T1");
    assert_eq!(t1["status"], "active");
    assert_eq!(t1["loop_count"], 1);
    // Detections are history: the one before `completed` is still listed.
    assert_eq!(t1["detections"].as_array().map(Vec::len), Some(2));
    assert_eq!(task(&report, "T2")["status"], "completed");
}

#[test]
fn a_failing_tool_call_is_a_failure_at_its_tool_and_a_successful_one_detects_nothing() {
    let decisions = replay_jsonl("tool_call_failures.jsonl", &[]);
    assert_eq!(decisions.len(), 7, "one decision per event line");
    // Ruling 14: the same error from three calls of `exec` (whatever the
    // arguments) and then from a `failure` event are one failure repeated.
    assert_eq!(lines_with(&decisions, "T1", "exact_failure"), [2, 4, 6]);
    let first = detection(&decisions, 2, "exact_failure");
    assert_eq!(first["action"], "warn");
    assert_eq!(numbers(&first["evidence"]), [1, 2]);
    assert_eq!(first["signature"]["location"], "exec");
    assert_eq!(first["signature"]["error_type"], "FileNotFoundError");
    assert_eq!(
        detection(&decisions, 4, "exact_failure")["action"],
        "inject_context"
    );
    // An outside-world error never loops.
    let external = detection(&decisions, 5, "external_failure");
    assert_eq!(external["action"], "warn");
    assert_eq!(at(&decisions, 5)["loop_count"], 2);
    let third = detection(&decisions, 6, "exact_failure");
    assert_eq!(third["action"], "escalate");
    assert_eq!(numbers(&third["evidence"]), [1, 2, 4, 6]);
    // A successful call is no failure (the stale-call kinds are not built
    // yet): nothing on lines 3 and 7.
    for line in [3, 7] {
        assert_eq!(at(&decisions, line)["detections"], serde_json::json!([]));
    }
}

#[test]
fn a_tool_call_without_its_agent_or_tool_is_a_line_error_naming_the_field() {
    let input = concat!(
        r#"{"type":"tool_call","task":"T","agent":"a"}"#,
        "\n",
        r#"{"type":"tool_call","task":"T","tool":"grep","args":{"q":"x"}}"#,
        "\n",
        r#"{"type":"tool_call","task":"T","agent":"a","tool":"grep","args":{"q":"x"},"result":"3 hits"}"#,
        "\n",
    );
    let run = run_with_stdin(["replay", "-", "--format", "jsonl"], input.as_bytes());
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let lines = parse_jsonl(&run.stdout);
    assert_eq!(lines.len(), 3, "one line out per line in: {}", run.stdout);
    assert_eq!(
        (&lines[0]["line"], &lines[0]["error"]),
        (
            &serde_json::json!(1),
            &serde_json::json!("missing field \"tool\" for event type \"tool_call\"")
        )
    );
    assert_eq!(
        (&lines[1]["line"], &lines[1]["error"]),
        (
            &serde_json::json!(2),
            &serde_json::json!("missing field \"agent\" for event type \"tool_call\"")
        )
    );
    // The good line goes on.
    assert_eq!(
        (&lines[2]["line"], &lines[2]["action"]),
        (&serde_json::json!(3), &serde_json::json!("none"))
    );
}
