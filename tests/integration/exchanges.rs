//! What an exchange counts (ruling 4 of trace format 1.2): only an exchange
//! that brings nothing new counts toward `agent_pair`, `multi_agent` and
//! `topic_cycle`, by default; `cycles.count = "every"` counts as 1.1 did.

use crate::support::*;

/// The cycle kinds' lines in `task` of `trace` replayed with `extra`.
fn cycle_lines(trace: &str, task: &str, extra: &[&str]) -> Vec<(u64, String)> {
    let decisions = replay_jsonl(trace, extra);
    let mut found = Vec::new();
    for kind in ["agent_pair", "multi_agent", "topic_cycle"] {
        for line in lines_with(&decisions, task, kind) {
            found.push((line, kind.to_owned()));
        }
    }
    found.sort();
    found
}

#[test]
fn a_ping_pong_with_a_repeated_outcome_breaks_at_the_4th_exchange() {
    let decisions = replay_jsonl("pingpong_repeated_outcome.jsonl", &["--no-semantic"]);
    assert_eq!(lines_with(&decisions, "PR-88", "agent_pair"), [4, 5, 6]);
    let first = detection(&decisions, 4, "agent_pair");
    // The resent revision counts, and so does the first one it repeats.
    assert_eq!(numbers(&first["evidence"]), [1, 2, 3, 4]);
    assert_eq!(first["action"], "break_cycle");
    assert_eq!(first["skip_agent"], "coder");
}

#[test]
fn review_rounds_with_a_new_revision_each_time_are_work_not_a_cycle() {
    for extra in [&["--no-semantic"][..], &[]] {
        assert_eq!(
            cycle_lines("review_rounds_normal.jsonl", "PR-91", extra),
            [],
            "{extra:?}"
        );
    }
    // Trace format 1.1 counted every exchange: the 4th was a cycle.
    let every = count_every();
    let lines: Vec<u64> = cycle_lines(
        "review_rounds_normal.jsonl",
        "PR-91",
        &["--no-semantic", "--config", &every],
    )
    .into_iter()
    .filter(|(_, kind)| kind == "agent_pair")
    .map(|(line, _)| line)
    .collect();
    assert_eq!(lines, (4..=10).collect::<Vec<_>>());
}

#[test]
fn a_tester_reporting_the_same_failure_under_new_run_numbers_is_a_cycle() {
    // The developer's fixes are new each time; the tester's report is the
    // same but for its run number, a placeholder.
    let decisions = replay_jsonl("tester_run_numbers.jsonl", &["--no-semantic"]);
    assert_eq!(lines_with(&decisions, "BUG-311", "agent_pair"), [7]);
    assert_eq!(
        numbers(&detection(&decisions, 7, "agent_pair")["evidence"]),
        [1, 3, 5, 7]
    );
}

#[test]
fn three_agents_passing_the_same_messages_round_a_cycle_loop_at_the_second_lap() {
    let decisions = replay_jsonl("three_agent_rounds.jsonl", &["--no-semantic"]);
    assert_eq!(lines_with(&decisions, "EXP-7", "multi_agent"), [6, 7]);
    let found = detection(&decisions, 6, "multi_agent");
    assert_eq!(numbers(&found["evidence"]), [1, 2, 3, 4, 5, 6]);
    assert_eq!(found["count"], 6);
}

#[test]
fn a_question_that_returns_to_its_asker_is_a_topic_cycle() {
    let decisions = replay_jsonl("question_returns.jsonl", &["--no-semantic"]);
    assert_eq!(lines_with(&decisions, "INV-12", "topic_cycle"), [4]);
    assert_eq!(
        numbers(&detection(&decisions, 4, "topic_cycle")["evidence"]),
        [1, 2, 3, 4]
    );
}

#[test]
fn the_deprecated_repeats_only_key_is_read_as_count_with_one_line_on_stderr() {
    let old = config("repeats_only_false.toml");
    let old = old.to_str().expect("a UTF-8 path");
    let every = count_every();
    let trace = trace("review_rounds_normal.jsonl");
    let trace = trace.to_str().expect("a UTF-8 path");
    let with_old = run(["replay", trace, "--no-semantic", "--config", old]);
    let with_new = run(["replay", trace, "--no-semantic", "--config", &every]);
    assert_eq!(with_old.stdout, with_new.stdout);
    let deprecations: Vec<&str> = with_old
        .stderr
        .lines()
        .filter(|line| line.contains("deprecated"))
        .collect();
    assert_eq!(
        deprecations,
        [format!(
            "{old}: `cycles.repeats_only` is deprecated: read as `cycles.count = \"every\"`; write that instead"
        )]
    );
    assert!(!with_new.stderr.contains("deprecated"));
}
