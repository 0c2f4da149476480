//! Importers through the command: `loopguard import --from FORMAT` and
//! `replay --from FORMAT`, with the fixtures of `crates/import`.

use std::ffi::OsStr;

use crate::support::*;

fn import_fixture(name: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../import/tests/fixtures")
        .join(name)
}

/// `loopguard import --from FORMAT` of the fixtures `logs`.
fn import_logs(format: &str, logs: &[&str]) -> Run {
    let paths: Vec<_> = logs.iter().map(|log| import_fixture(log)).collect();
    let mut args = vec![
        OsStr::new("import"),
        OsStr::new("--from"),
        OsStr::new(format),
    ];
    args.extend(paths.iter().map(|path| path.as_os_str()));
    run(args)
}

/// The decisions of `replay --from FORMAT` on the fixture `log`, by line.
fn replay_log(format: &str, log: &str) -> Vec<serde_json::Value> {
    let path = import_fixture(log);
    let replayed = run([
        OsStr::new("replay"),
        OsStr::new("--from"),
        OsStr::new(format),
        path.as_os_str(),
        OsStr::new("--format"),
        OsStr::new("jsonl"),
        OsStr::new("--no-semantic"),
    ]);
    assert_eq!(replayed.code, Some(0), "{replayed:?}");
    parse_jsonl(&replayed.stdout)
}

#[test]
fn a_magentic_one_log_imports_and_replays_and_a_bad_one_is_named() {
    let out = import_logs(
        "magentic-one",
        &[
            "magentic_one_loop.json",
            "magentic_one_truncated.json",
            "magentic_one_edges.json",
        ],
    );
    assert_eq!(out.code, Some(1), "one log could not be imported: {out:?}");
    let events = parse_jsonl(&out.stdout);
    assert_eq!(events.len(), 15 + 3, "both good logs are written");
    assert!(
        out.stderr.contains("magentic_one_truncated.json")
            && out.stderr.contains("not a JSON Magentic-One log"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("dropped messages of role 'Orchestrator (thought)': 5"),
        "{}",
        out.stderr
    );

    // Replayed directly: the re-issued instruction and the same page.
    let decisions = replay_log("magentic-one", "magentic_one_loop.json");
    assert_eq!(decisions.len(), 15);
    assert!(!lines_with(&decisions, "m1-pricing", "tool_repeat").is_empty());
    assert!(!lines_with(&decisions, "m1-pricing", "agent_pair").is_empty());

    let unknown = import_logs("crewai", &["magentic_one_loop.json"]);
    assert_eq!(unknown.code, Some(2), "{unknown:?}");
    assert!(
        unknown
            .stderr
            .contains("unknown log format (known: magentic-one, openhands, otlp)"),
        "{}",
        unknown.stderr
    );
}

#[test]
fn an_openhands_log_imports_and_replays_with_its_loops_found() {
    let out = import_logs(
        "openhands",
        &[
            "openhands_loop.json",
            "openhands_truncated.jsonl",
            "openhands_edges.jsonl",
        ],
    );
    assert_eq!(out.code, Some(1), "one log could not be imported: {out:?}");
    assert_eq!(parse_jsonl(&out.stdout).len(), 11 + 10, "both good logs");
    assert!(
        out.stderr.contains("openhands_truncated.jsonl")
            && out.stderr.contains("not a JSON OpenHands log")
            && out.stderr.contains("line 5 column"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("dropped events of kind 'TelemetryEvent': 1"),
        "{}",
        out.stderr
    );

    // The same failing test run again and again, then the same failing
    // edit: a stale call, then exact repeats of an error.
    let decisions = replay_log("openhands", "openhands_loop.json");
    assert_eq!(decisions.len(), 11);
    assert_eq!(
        lines_with(&decisions, "oh-parse-date", "tool_repeat"),
        [5, 6, 7]
    );
    assert_eq!(
        lines_with(&decisions, "oh-parse-date", "exact_failure"),
        [9, 10, 11]
    );
}

#[test]
fn an_otlp_export_imports_and_replays_with_its_loops_found() {
    let out = import_logs(
        "otlp",
        &[
            "otlp_openai_agents.json",
            "otlp_truncated.json",
            "otlp_openinference.jsonl",
        ],
    );
    assert_eq!(
        out.code,
        Some(1),
        "one export could not be imported: {out:?}"
    );
    assert_eq!(parse_jsonl(&out.stdout).len(), 7 + 9, "both good exports");
    assert!(
        out.stderr.contains("otlp_truncated.json") && out.stderr.contains("not a JSON OTLP log"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("dropped model call spans: 7"),
        "{}",
        out.stderr
    );

    // The billing agent looks the same invoices up again and again.
    let decisions = replay_log("otlp", "otlp_openai_agents.json");
    assert_eq!(
        lines_with(&decisions, "conv_68ee1f2a9c", "tool_repeat"),
        [4, 5, 6]
    );
    // The manager sends web_agent the same task three times.
    let decisions = replay_log("otlp", "otlp_openinference.jsonl");
    let task = "sess-2025-10-14-ab12";
    assert_eq!(lines_with(&decisions, task, "agent_pair"), [6, 7, 9]);
    assert_eq!(lines_with(&decisions, task, "tool_repeat"), [8]);
}
