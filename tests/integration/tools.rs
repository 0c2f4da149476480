//! Stale tool calls (ruling 15): the same call again and again, a cycle of
//! calls, and repetition that is work.

use crate::support::*;

#[test]
fn the_same_call_again_is_nudged_then_escalated_with_a_directive_and_polling_is_not() {
    // The request ids differ from call to call: volatile, so one call.
    let decisions = replay_jsonl(
        "tool_calls.jsonl",
        &[
            "--config",
            config("tools_volatile.toml").to_str().expect("utf-8"),
        ],
    );
    assert_eq!(decisions.len(), 16, "one decision per event line");
    assert_eq!(lines_with(&decisions, "T1", "tool_repeat"), [3, 4, 5, 6]);
    let first = detection(&decisions, 3, "tool_repeat");
    assert_eq!(
        (first["action"].as_str(), first["severity"].as_str()),
        (Some("inject_context"), Some("low"))
    );
    assert_eq!(numbers(&first["evidence"]), [1, 2, 3]);
    assert_eq!(first["evidence_ids"], serde_json::json!(["g1", "g2", "g3"]));
    let directive = first["directive"].as_str().expect("a directive");
    assert!(
        directive.starts_with(r#"You have called glob with {"pattern":"**/*.tsx"} 3 times and got nothing new: it returned: src/App.tsx"#),
        "{directive}"
    );
    // The decision carries it too, for the orchestrator to hand on.
    assert_eq!(at(&decisions, 3)["directive"], first["directive"]);
    // Tool kinds never add to the loop count.
    assert_eq!(at(&decisions, 3)["loop_count"], 0);
    // The 4th stale call (5th identical call) escalates: the gate.
    let gate = detection(&decisions, 5, "tool_repeat");
    assert_eq!(gate["action"], "escalate");
    assert_eq!(at(&decisions, 5)["status"], "escalated");
    assert_eq!(
        at(&decisions, 6)["action"],
        "escalate",
        "the gate holds until a human"
    );

    // Polling whose result changes is work.
    for line in 7..=12 {
        assert_eq!(
            at(&decisions, line)["detections"],
            serde_json::json!([]),
            "line {line}"
        );
    }
    // A, B, A, B: a cycle, detected at the 4th call.
    assert_eq!(lines_with(&decisions, "T3", "tool_cycle"), [16]);
}

#[test]
fn without_the_volatile_key_the_calls_differ_and_only_their_results_repeat() {
    let decisions = replay_jsonl("tool_calls.jsonl", &[]);
    assert_eq!(
        lines_with(&decisions, "T1", "tool_no_new_info"),
        [3, 4, 5, 6]
    );
    assert!(lines_with(&decisions, "T1", "tool_repeat").is_empty());
}
