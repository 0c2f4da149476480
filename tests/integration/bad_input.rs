//! Lines that are not events, unreadable inputs and bad configs.

use std::ffi::OsStr;

use crate::support::*;

#[test]
fn bad_lines_are_answered_in_place_and_blank_lines_are_skipped() {
    let output = replay_jsonl("bad_lines.jsonl", &[]);
    // Lines 4 and 6 are blank: one object per non-blank line.
    let lines: Vec<_> = output.iter().map(|o| o["line"].as_u64()).collect();
    assert_eq!(lines, [Some(1), Some(2), Some(3), Some(5), Some(7)]);

    assert!(at(&output, 1)["task"] == "T1" && at(&output, 1).get("error").is_none());
    let not_json = at(&output, 2)["error"].as_str().unwrap_or_default();
    assert!(not_json.starts_with("invalid JSON"), "{not_json}");
    assert_eq!(
        at(&output, 3),
        &serde_json::json!({"line": 3, "error": "unknown event type \"handof\""})
    );
    assert_eq!(
        at(&output, 5),
        &serde_json::json!({"line": 5, "error": "missing field \"task\""})
    );
    // The good lines around them are decided as usual: line 7 repeats
    // line 1's failure.
    assert_eq!(
        numbers(&detection(&output, 7, "exact_failure")["evidence"]),
        [1, 7]
    );
}

#[test]
fn bad_lines_are_listed_in_the_report() {
    let report = replay_report("bad_lines.jsonl", &[]);
    assert_eq!(report["events"], 2);
    let errors = report["errors"].as_array().expect("errors");
    let lines: Vec<_> = errors.iter().map(|e| e["line"].as_u64()).collect();
    assert_eq!(lines, [Some(2), Some(3), Some(5)]);
    assert_eq!(errors[1]["error"], "unknown event type \"handof\"");
    assert_eq!(errors[2]["error"], "missing field \"task\"");
    assert_eq!(task(&report, "T1")["loop_count"], 1);
}

#[test]
fn bad_lines_go_to_stderr_in_text_format() {
    let path = trace("bad_lines.jsonl");
    let run = run([
        OsStr::new("replay"),
        path.as_os_str(),
        OsStr::new("--format"),
        OsStr::new("text"),
    ]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stderr
            .lines()
            .any(|line| line == "line 3: unknown event type \"handof\""),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("line 5: missing field \"task\""));
    assert!(!run.stdout.contains("handof"));
    assert!(run.stdout.contains("3 line errors"), "{}", run.stdout);
}

#[test]
fn invalid_utf8_is_an_error_for_that_line_only() {
    let output = replay_jsonl("invalid_utf8.jsonl", &[]);
    assert_eq!(output.len(), 3);
    let error = at(&output, 2)["error"].as_str().unwrap_or_default();
    assert!(error.contains("UTF-8"), "{error}");
    // Lines 1 and 3 are the same failure: line 3 is its first repeat.
    assert_eq!(
        numbers(&detection(&output, 3, "exact_failure")["evidence"]),
        [1, 3]
    );
}

#[test]
fn strict_exits_1_on_any_line_error_and_still_prints_everything() {
    let path = trace("bad_lines.jsonl");
    let run = run([
        OsStr::new("replay"),
        path.as_os_str(),
        OsStr::new("--format"),
        OsStr::new("jsonl"),
        OsStr::new("--strict"),
    ]);
    assert_eq!(run.code, Some(1), "{run:?}");
    assert_eq!(parse_jsonl(&run.stdout).len(), 5);

    let clean = trace("exact_failure.jsonl");
    let run = crate::support::run([
        OsStr::new("replay"),
        clean.as_os_str(),
        OsStr::new("--strict"),
    ]);
    assert_eq!(run.code, Some(0), "{run:?}");
}

#[test]
fn an_unreadable_trace_exits_2_with_one_message_naming_it() {
    for path in [trace("no-such-trace.jsonl"), trace("")] {
        let run = run([OsStr::new("replay"), path.as_os_str()]);
        assert_eq!(run.code, Some(2), "{run:?}");
        assert_eq!(run.stdout, "");
        assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
        assert!(
            run.stderr.contains(&*path.to_string_lossy()),
            "{}",
            run.stderr
        );
    }
}

/// Runs the exact-failure trace with `--config NAME` and returns the run.
fn with_config(path: &std::path::Path) -> Run {
    let trace = trace("exact_failure.jsonl");
    run([
        OsStr::new("replay"),
        trace.as_os_str(),
        OsStr::new("--config"),
        path.as_os_str(),
    ])
}

#[test]
fn a_bad_config_exits_2_before_any_output_naming_the_key() {
    for (file, key) in [
        ("invalid_value.toml", "cycles.window_secs"),
        ("unknown_key.toml", "max_visit"),
        ("unknown_table.toml", "phase"),
    ] {
        let path = config(file);
        let run = with_config(&path);
        assert_eq!(run.code, Some(2), "{file}: {run:?}");
        assert_eq!(run.stdout, "", "{file}: no work is done");
        assert_eq!(run.stderr.lines().count(), 1, "{file}: {}", run.stderr);
        assert!(run.stderr.contains(key), "{file}: {}", run.stderr);
        assert!(run.stderr.contains(file), "{file}: {}", run.stderr);
    }
}

#[test]
fn an_unknown_config_key_is_named_with_its_table() {
    let run = with_config(&config("unknown_key.toml"));
    assert_eq!(run.code, Some(2));
    assert!(run.stderr.contains("`phases.max_visit`"), "{}", run.stderr);
}

#[test]
fn a_missing_config_file_exits_2_naming_it() {
    let path = config("no-such-config.toml");
    let run = with_config(&path);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert_eq!(run.stdout, "");
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(run.stderr.contains("no-such-config.toml"), "{}", run.stderr);
}
