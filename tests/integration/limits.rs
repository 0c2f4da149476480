//! Hostile input (issue 18): ids, lines and fields far longer than any
//! real trace's, a byte-order mark, a first line number at the end of the
//! range. Each one is answered (a line error, a clear refusal) and never
//! panics or loses the summary; `[limits]` sets the bounds.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::*;

/// The task id the formatting once panicked on: 65,536 bytes is past
/// what `{:<width$}` accepts as a width.
const HUGE_ID_BYTES: usize = 65_536;

fn huge_id() -> String {
    "t".repeat(HUGE_ID_BYTES)
}

/// Two identical failures of task `task` (the second is an
/// `exact_failure` detection) and a transition, as JSON Lines.
fn failing_trace(task: &str) -> String {
    let failure = serde_json::json!({
        "type": "failure", "task": task, "agent": "coder", "error": "boom"
    });
    let transition = serde_json::json!({
        "type": "transition", "task": task, "from": "plan", "to": "code"
    });
    format!("{failure}\n{failure}\n{transition}\n")
}

/// A config file in `folder` with `text` as its contents.
fn config_file(folder: &Path, text: &str) -> PathBuf {
    let path = folder.join("loopguard.toml");
    std::fs::write(&path, text).expect("the config is written");
    path
}

/// `[limits]` that accept the huge id.
fn huge_ids_allowed(folder: &Path) -> PathBuf {
    config_file(folder, "[limits]\nmax_task_id_bytes = 100000\n")
}

/// `loopguard --no-semantic replay TRACE EXTRA` with `trace` written to a
/// file (not piped: an answer as long as the input would fill the output
/// pipe while the input is still being written).
fn replay_stdin(extra: &[&OsStr], trace: &[u8]) -> Run {
    let folder = tempfile::tempdir().expect("a temp folder");
    let path = folder.path().join("trace.jsonl");
    std::fs::write(&path, trace).expect("the trace is written");
    let mut args: Vec<&OsStr> = vec![
        OsStr::new("--no-semantic"),
        OsStr::new("replay"),
        path.as_os_str(),
    ];
    args.extend_from_slice(extra);
    run(args)
}

/// `replay_stdin` of `trace` in JSON Lines, with `extra` before the format.
fn jsonl_from(extra: &[&OsStr], trace: &[u8]) -> Run {
    let mut args = extra.to_vec();
    args.extend([OsStr::new("--format"), OsStr::new("jsonl")]);
    replay_stdin(&args, trace)
}

/// The decisions of `replay_stdin` of `trace` in JSON Lines under a config
/// of `config_text`, which must exit 0.
fn jsonl_under(config_text: &str, trace: &str) -> Vec<Value> {
    let folder = tempfile::tempdir().expect("a temp folder");
    let config = config_file(folder.path(), config_text);
    let run = jsonl_from(
        &[OsStr::new("--config"), config.as_os_str()],
        trace.as_bytes(),
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    parse_jsonl(&run.stdout)
}

/// No run may panic (exit 101) or print Rust's panic message.
fn assert_no_panic(run: &Run) {
    assert_ne!(run.code, Some(101), "panicked: {}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
}

#[test]
fn a_huge_task_id_is_answered_in_every_format() {
    let folder = tempfile::tempdir().expect("a temp folder");
    let config = huge_ids_allowed(folder.path());
    let id = huge_id();
    let trace = failing_trace(&id);
    let in_format = |format: &str| {
        replay_stdin(
            &[
                OsStr::new("--config"),
                config.as_os_str(),
                OsStr::new("--format"),
                OsStr::new(format),
            ],
            trace.as_bytes(),
        )
    };

    let jsonl = in_format("jsonl");
    assert_no_panic(&jsonl);
    assert_eq!(jsonl.code, Some(0), "{}", jsonl.stderr);
    let decisions = parse_jsonl(&jsonl.stdout);
    assert_eq!(decisions.len(), 3);
    // Machine formats keep the id whole.
    assert_eq!(
        decisions[1]["task"].as_str().map(str::len),
        Some(HUGE_ID_BYTES)
    );
    assert_eq!(decisions[1]["detections"][0]["kind"], "exact_failure");

    let json = in_format("json");
    assert_no_panic(&json);
    assert_eq!(json.code, Some(0), "{}", json.stderr);
    let report: Value = serde_json::from_str(&json.stdout).expect("a JSON report");
    assert_eq!(report["events"], 3);
    assert_eq!(
        report["tasks"][0]["task"].as_str().map(str::len),
        Some(HUGE_ID_BYTES)
    );

    let text = in_format("text");
    assert_no_panic(&text);
    assert_eq!(text.code, Some(0), "{}", text.stderr);
    // The summary is there, and the id is shown cut, with its length.
    assert!(text.stdout.contains("Totals: 3 events"), "{}", text.stdout);
    assert!(
        text.stdout.contains("… (65536 bytes)"),
        "{}",
        &text.stdout[..text.stdout.len().min(2000)]
    );
    for line in text.stdout.lines() {
        assert!(line.chars().count() < 400, "a line of {} chars", line.len());
    }
}

#[test]
fn a_huge_task_id_without_raised_limits_is_a_line_error_and_the_summary_stays() {
    let trace = failing_trace(&huge_id());
    let text = replay_stdin(
        &[OsStr::new("--format"), OsStr::new("text")],
        trace.as_bytes(),
    );
    assert_no_panic(&text);
    assert_eq!(text.code, Some(0), "{}", text.stderr);
    assert!(text.stdout.contains("3 line errors"), "{}", text.stdout);
    assert!(
        text.stderr.contains(
            "line 1: field \"task\" is 65536 bytes, longer than the limit of 1024 \
             (limits.max_task_id_bytes)"
        ),
        "{}",
        text.stderr
    );
}

#[test]
fn a_store_holding_a_huge_task_id_is_listed_logged_and_reported() {
    let folder = tempfile::tempdir().expect("a temp folder");
    let config = huge_ids_allowed(folder.path());
    let url = format!("sqlite://{}", folder.path().join("state.db").display());
    let id = huge_id();
    let trace = failing_trace(&id);
    let replay = replay_stdin(
        &[
            OsStr::new("--config"),
            config.as_os_str(),
            OsStr::new("--store"),
            OsStr::new(&url),
            OsStr::new("--format"),
            OsStr::new("jsonl"),
        ],
        trace.as_bytes(),
    );
    assert_eq!(replay.code, Some(0), "{}", replay.stderr);

    for command in ["tasks", "log", "report"] {
        for format in ["text", "json"] {
            let run = run([command, "--store", &url, "--format", format]);
            assert_no_panic(&run);
            assert_eq!(run.code, Some(0), "{command} {format}: {}", run.stderr);
            if format == "json" {
                let value: Value = serde_json::from_str(&run.stdout).expect("JSON");
                assert!(
                    value.to_string().contains(&id),
                    "{command}: the id is whole"
                );
            } else {
                assert!(
                    run.stdout.contains("… (65536 bytes)"),
                    "{command}: {}",
                    &run.stdout[..run.stdout.len().min(2000)]
                );
                for line in run.stdout.lines() {
                    assert!(
                        line.chars().count() < 400,
                        "{command}: a line of {}",
                        line.len()
                    );
                }
            }
        }
    }
}

#[test]
fn a_line_longer_than_the_limit_is_a_line_error_naming_its_length() {
    let good = r#"{"type":"failure","task":"T","agent":"a","error":"boom"}"#;
    let long = format!(
        r#"{{"type":"failure","task":"T","agent":"a","error":"{}"}}"#,
        "x".repeat(10_000)
    );
    let stdin = format!("{good}\n{long}\n{good}\n");
    let output = jsonl_under("[limits]\nmax_line_bytes = 4096\n", &stdin);
    assert_eq!(output.len(), 3);
    assert_eq!(
        at(&output, 2)["error"],
        format!(
            "the line is {} bytes, longer than the limit of 4096 (limits.max_line_bytes)",
            long.len()
        )
    );
    // The lines around it are read as usual: line 3 repeats line 1.
    assert_eq!(
        numbers(&detection(&output, 3, "exact_failure")["evidence"]),
        [1, 3]
    );
}

#[test]
fn a_task_id_longer_than_the_limit_is_a_line_error_naming_the_field() {
    let stdin = "{\"type\":\"completed\",\"task\":\"123456789\"}\n\
                 {\"type\":\"completed\",\"task\":\"12345678\"}\n";
    let output = jsonl_under("[limits]\nmax_task_id_bytes = 8\n", stdin);
    assert_eq!(
        at(&output, 1)["error"],
        "field \"task\" is 9 bytes, longer than the limit of 8 (limits.max_task_id_bytes)"
    );
    assert_eq!(at(&output, 2)["task"], "12345678");
}

#[test]
fn a_leading_byte_order_mark_is_skipped() {
    let stdin = "\u{feff}{\"type\":\"failure\",\"task\":\"T\",\"agent\":\"a\",\"error\":\"e\"}\n\
                 {\"type\":\"failure\",\"task\":\"T\",\"agent\":\"a\",\"error\":\"e\"}\n";
    let run = jsonl_from(&[], stdin.as_bytes());
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let output = parse_jsonl(&run.stdout);
    assert!(at(&output, 1).get("error").is_none(), "{output:?}");
    assert_eq!(at(&output, 1)["task"], "T");
    assert_eq!(
        numbers(&detection(&output, 2, "exact_failure")["evidence"]),
        [1, 2]
    );
}

#[test]
fn a_first_line_that_would_overflow_is_refused() {
    let stdin =
        b"{\"type\":\"completed\",\"task\":\"T\"}\n{\"type\":\"completed\",\"task\":\"T\"}\n";
    let run = jsonl_from(
        &[
            OsStr::new("--first-line"),
            OsStr::new("18446744073709551615"),
        ],
        stdin,
    );
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("--first-line"), "{}", run.stderr);
    assert!(run.stderr.contains("9007199254740992"), "{}", run.stderr);
    // The largest first line allowed numbers the lines after it on.
    let run = jsonl_from(
        &[OsStr::new("--first-line"), OsStr::new("9007199254740992")],
        stdin,
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let lines: Vec<_> = parse_jsonl(&run.stdout)
        .iter()
        .map(|decision| decision["line"].as_u64())
        .collect();
    assert_eq!(
        lines,
        [Some(9_007_199_254_740_992), Some(9_007_199_254_740_993)]
    );
}
