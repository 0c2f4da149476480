//! Progress evaluation (Decision 74, rulings 2 and 3): a progressive retry
//! is no loop, rising failing tests are `regression` loops, differing
//! failures with no tests are `no_progress`, external failures are never
//! loops and escalate at the third in a row; with an LLM judge configured
//! (a fake OpenAI-compatible server on 127.0.0.1, started here) it is asked
//! only about the failure metrics cannot decide, and its verdict is in the
//! report.

use std::ffi::OsStr;

use loopguard_test_support::fake_llm::{FakeAnswer, FakeLlm};
use serde_json::{Value, json};

use crate::support::*;

/// `loopguard replay TRACE --format FORMAT --config CONFIG`, with no LLM in
/// the environment.
fn replay_with(trace_name: &str, format: &str, config_path: &std::path::Path) -> Run {
    let path = trace(trace_name);
    let mut command = loopguard();
    command
        .env_remove("LOOPGUARD_LLM_BASE_URL")
        .env_remove("LOOPGUARD_LLM_MODEL")
        .env_remove("LOOPGUARD_LLM_API_KEY")
        .args([
            OsStr::new("replay"),
            path.as_os_str(),
            OsStr::new("--format"),
            OsStr::new(format),
            OsStr::new("--config"),
            config_path.as_os_str(),
        ]);
    let run = run_command(&mut command, b"");
    assert_eq!(run.code, Some(0), "{trace_name}: {run:?}");
    run
}

fn decisions(trace_name: &str) -> Vec<Value> {
    parse_jsonl(&replay_with(trace_name, "jsonl", &config("progress.toml")).stdout)
}

#[test]
fn a_progressive_retry_is_not_a_loop() {
    let decisions = decisions("progress.jsonl");
    for line in 1..=8 {
        assert_eq!(at(&decisions, line)["detections"], json!([]), "line {line}");
        assert_eq!(at(&decisions, line)["loop_count"], 0, "line {line}");
    }
    assert_eq!(at(&decisions, 8)["status"], "completed");
}

#[test]
fn failing_tests_rising_one_three_five_eight_escalate() {
    let decisions = decisions("progress.jsonl");
    assert_eq!(lines_with(&decisions, "S", "regression"), [11, 13, 15]);
    // The failures in between, all different, add nothing themselves.
    for line in [10, 12, 14] {
        assert_eq!(at(&decisions, line)["detections"], json!([]), "line {line}");
    }
    let expected = [
        (11, 1, "low", "warn"),
        (13, 2, "medium", "inject_context"),
        (15, 3, "high", "escalate"),
    ];
    for (line, loops, severity, action) in expected {
        let found = detection(&decisions, line, "regression");
        assert_eq!(found["detector"], "progress");
        assert_eq!(found["loop_count"], loops, "line {line}");
        assert_eq!(found["severity"], severity, "line {line}");
        assert_eq!(found["action"], action, "line {line}");
    }
    let last = detection(&decisions, 15, "regression");
    assert_eq!(numbers(&last["evidence"]), [9, 11, 13, 15]);
    assert!(
        last["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("failing tests rose 1 → 3 → 5 → 8")),
        "{last}"
    );
    assert_eq!(at(&decisions, 15)["status"], "escalated");
}

#[test]
fn differing_failures_with_no_tests_are_no_progress() {
    let decisions = decisions("progress.jsonl");
    assert_eq!(lines_with(&decisions, "N", "no_progress"), [18]);
    let found = detection(&decisions, 18, "no_progress");
    assert_eq!(found["loop_count"], 1);
    assert_eq!(found["action"], "warn");
    assert_eq!(numbers(&found["evidence"]), [16, 17, 18]);
    assert!(
        found["reason"]
            .as_str()
            .is_some_and(|r| r.contains("no tests and no completion signals")),
        "{found}"
    );
}

#[test]
fn external_timeouts_are_not_loops_and_escalate_at_the_third() {
    let decisions = decisions("progress.jsonl");
    assert_eq!(
        lines_with(&decisions, "X", "external_failure"),
        [19, 20, 21]
    );
    // Identical timeouts are not exact_failure loops either (ruling 3).
    assert_eq!(lines_with(&decisions, "X", "exact_failure"), [] as [u64; 0]);
    for (line, action) in [(19, "warn"), (20, "warn"), (21, "escalate")] {
        let decision = at(&decisions, line);
        assert_eq!(decision["loop_count"], 0, "line {line}");
        assert_eq!(decision["action"], action, "line {line}");
    }
    let third = detection(&decisions, 21, "external_failure");
    assert!(
        third["reason"]
            .as_str()
            .is_some_and(|r| r.contains("dependency problem") && r.contains("not an agent loop")),
        "{third}"
    );
    assert_eq!(at(&decisions, 21)["status"], "escalated");
}

#[test]
fn the_report_tells_the_progressive_task_from_the_stuck_ones() {
    let run = replay_with("progress.jsonl", "json", &config("progress.toml"));
    let report: Value = serde_json::from_str(&run.stdout).expect("the report is JSON");
    let summary = |name: &str| {
        let found = task(&report, name);
        (found["status"].clone(), found["loop_count"].clone())
    };
    assert_eq!(summary("P"), (json!("completed"), json!(0)));
    assert_eq!(summary("S"), (json!("escalated"), json!(3)));
    assert_eq!(summary("N"), (json!("active"), json!(1)));
    assert_eq!(summary("X"), (json!("escalated"), json!(0)));
    assert_eq!(report["errors"], json!([]));
}

#[test]
fn the_llm_judge_is_asked_only_about_the_undecidable_failure() {
    // The fake serves from its runtime's worker thread while the command runs.
    let (_serving, fake) = FakeLlm::start_in_background(|_, _| {
        FakeAnswer::Content(
            r#"{"verdict":"regressive","reason":"each fix breaks the table header parser"}"#.into(),
        )
    });
    let url = fake.base_url();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config_path = dir.path().join("llm.toml");
    std::fs::write(
        &config_path,
        format!(
            "[semantic]\nenabled = false\n[llm]\nbase_url = \"{url}\"\nmodel = \"test-judge\"\ntimeout_secs = 10\nretries = 0\n"
        ),
    )
    .expect("the config is written");
    let decisions = parse_jsonl(&replay_with("progress_judge.jsonl", "jsonl", &config_path).stdout);

    // Line 5 follows progress, N has no tests, X is external: decided by
    // metrics. Line 7 follows an unchanged snapshot: asked.
    assert_eq!(fake.requests(), 1);
    let bodies = fake.bodies();
    let question = bodies[0]["messages"][1]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        question.contains("Goal: parse nested TOML tables"),
        "{question}"
    );
    assert!(
        question.contains("duplicate key `a` at line 3"),
        "{question}"
    );

    assert_eq!(lines_with(&decisions, "J", "regression"), [7]);
    let judged = detection(&decisions, 7, "regression");
    assert_eq!(
        judged["reason"],
        "LLM judge (model test-judge): each fix breaks the table header parser"
    );
    assert_eq!(judged["loop_count"], 1);
    assert_eq!(numbers(&judged["evidence"]), [3, 5, 7]);
    assert_eq!(lines_with(&decisions, "N", "no_progress"), [10]);
    assert_eq!(lines_with(&decisions, "X", "external_failure"), [11]);

    // Without the judge, line 7 gets the metrics-only verdict: metrics are
    // reported and none moved since the failure on line 5, so it is one
    // no_progress loop (ruling 13), compared with line 5.
    let plain = decisions_without_judge();
    let verdict = detection(&plain, 7, "no_progress");
    assert_eq!(verdict["loop_count"], 1);
    assert_eq!(numbers(&verdict["evidence"]), [5, 7]);
    assert_eq!(
        verdict["reason"],
        "a failure (line 7) that differs from the previous one (line 5) with no progress in \
         the test metrics or completion signals since line 4"
    );
}

fn decisions_without_judge() -> Vec<Value> {
    parse_jsonl(&replay_with("progress_judge.jsonl", "jsonl", &config("progress.toml")).stdout)
}
