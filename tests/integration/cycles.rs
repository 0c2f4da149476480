//! Exchange cycles between agents (ruling 4). The counting of trace format
//! 1.1 (`cycles.count = "every"`): every exchange counts, so these traces
//! replay as they did under 1.1. What the defaults (1.2) make of them is
//! checked beside it; `exchanges.rs` has the traces of 1.2's own cases.

use crate::support::*;

#[test]
fn agent_pair_breaks_the_cycle_at_the_4th_exchange_and_climbs_by_severity() {
    // Structural detectors only: "review round 7: naming" repeating round
    // 1's to the same agent is also a repeated query by similarity.
    let every = count_every();
    let decisions = replay_jsonl("agent_pair.jsonl", &["--no-semantic", "--config", &every]);
    assert_eq!(
        lines_with(&decisions, "T1", "agent_pair"),
        (4..=12).collect::<Vec<_>>()
    );
    // By default (1.2) the rounds' subjects count once they come back:
    // "review round 7: naming" is round 1's with its number a placeholder,
    // and round 1 counts with it.
    let defaults = replay_jsonl("agent_pair.jsonl", &["--no-semantic"]);
    assert_eq!(
        lines_with(&defaults, "T1", "agent_pair"),
        (8..=12).collect::<Vec<_>>()
    );
    assert_eq!(
        numbers(&detection(&defaults, 8, "agent_pair")["evidence"]),
        [1, 2, 7, 8]
    );

    let first = detection(&decisions, 4, "agent_pair");
    assert_eq!(first["severity"], "low");
    assert_eq!(first["action"], "break_cycle");
    assert_eq!(first["count"], 4);
    assert_eq!(numbers(&first["evidence"]), [1, 2, 3, 4]);
    assert_eq!(
        first["evidence_ids"],
        serde_json::json!(["x1", "x2", "x3", "x4"])
    );
    assert_eq!(at(&decisions, 4)["action"], "break_cycle");
    // Cycles do not feed the loop count (ruling 4).
    assert_eq!(at(&decisions, 4)["loop_count"], 0);

    for (line, severity, action) in [
        (5, "medium", "break_cycle"),
        (7, "medium", "break_cycle"),
        (8, "high", "inject_context"),
        (11, "high", "inject_context"),
        (12, "critical", "escalate"),
    ] {
        let found = detection(&decisions, line, "agent_pair");
        assert_eq!(found["severity"], severity, "line {line}");
        assert_eq!(found["action"], action, "line {line}");
        assert_eq!(at(&decisions, line)["action"], action, "line {line}");
    }
    let last = at(&decisions, 12);
    assert_eq!(last["status"], "escalated");
    assert_eq!(last["loop_count"], 0);
}

#[test]
fn agent_pair_window_is_600_seconds_and_does_not_apply_without_timestamps() {
    let decisions = replay_jsonl("agent_pair_window.jsonl", &[]);
    // T1: exchanges at 0, 4, 8 and 12 minutes: at 12 only three are within
    // 600 s. The 5th, at 13 minutes, makes four within the window.
    assert_eq!(lines_with(&decisions, "T1", "agent_pair"), [5]);
    assert_eq!(
        numbers(&detection(&decisions, 5, "agent_pair")["evidence"]),
        [2, 3, 4, 5]
    );
    // T2 has no timestamps: four exchanges in file order are a cycle.
    assert_eq!(lines_with(&decisions, "T2", "agent_pair"), [9]);
    assert_eq!(
        numbers(&detection(&decisions, 9, "agent_pair")["evidence"]),
        [6, 7, 8, 9]
    );
}

#[test]
fn multi_agent_cycle_fires_once_the_work_went_around_it_twice() {
    // Structural detectors only: "Totals column still empty" to the planner
    // is also a repeated query by similarity.
    let every = count_every();
    let decisions = replay_jsonl("multi_agent.jsonl", &["--no-semantic", "--config", &every]);
    // T1: planner -> coder -> tester -> planner. One lap and more (lines
    // 1-5) is ordinary iteration; the 6th handoff completes the second lap.
    assert_eq!(lines_with(&decisions, "T1", "multi_agent"), [6]);
    for task in ["T1", "T2"] {
        assert!(
            lines_with(&decisions, task, "agent_pair").is_empty(),
            "{task}: no pair exchanged more than twice"
        );
    }
    let found = detection(&decisions, 6, "multi_agent");
    assert_eq!(found["action"], "break_cycle");
    assert_eq!(found["severity"], "medium");
    assert_eq!(found["count"], 6);
    assert_eq!(found["skip_agent"], "planner");
    assert_eq!(numbers(&found["evidence"]), [1, 2, 3, 4, 5, 6]);
    assert_eq!(
        found["evidence_ids"],
        serde_json::json!(["m1", "m2", "m3", "m4", "m5", "m6"])
    );
    for line in 1..=5 {
        assert_eq!(at(&decisions, line)["action"], "none", "line {line}");
    }
    assert_eq!(at(&decisions, 6)["action"], "break_cycle");
    assert_eq!(at(&decisions, 6)["loop_count"], 0);

    // T2: a four-agent cycle (lines 7-14) needs 8 handoffs, two full laps;
    // its first lap closing (line 10) is no detection.
    assert_eq!(lines_with(&decisions, "T2", "multi_agent"), [14]);
    let found = detection(&decisions, 14, "multi_agent");
    assert_eq!(found["count"], 8);
    assert_eq!(found["severity"], "high");
    assert_eq!(found["action"], "inject_context");
    assert_eq!(numbers(&found["evidence"]), (7..=14).collect::<Vec<_>>());
    assert_eq!(at(&decisions, 14)["action"], "inject_context");
    assert_eq!(at(&decisions, 14)["status"], "active");
}

#[test]
fn topic_cycle_fires_on_the_4th_handoff_of_one_topic_or_normalized_content() {
    let every = count_every();
    let decisions = replay_jsonl("topic_cycle.jsonl", &["--config", &every]);
    // T1 names its topic; T2 repeats the same content in different case,
    // spacing and punctuation. Every handoff is between a new pair.
    assert_eq!(lines_with(&decisions, "T1", "topic_cycle"), [7]);
    assert_eq!(lines_with(&decisions, "T2", "topic_cycle"), [8]);
    let named = detection(&decisions, 7, "topic_cycle");
    assert_eq!(numbers(&named["evidence"]), [1, 3, 5, 7]);
    assert_eq!(named["action"], "break_cycle");
    let normalized = detection(&decisions, 8, "topic_cycle");
    assert_eq!(numbers(&normalized["evidence"]), [2, 4, 6, 8]);
    for line in 1..=8 {
        assert!(
            of_kind(at(&decisions, line), "agent_pair").is_empty(),
            "line {line}"
        );
    }
}
