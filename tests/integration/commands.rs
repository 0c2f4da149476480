//! The command line itself: stdin, formats, logging, demo and help.

use std::ffi::OsStr;

use serde_json::Value;

use crate::support::*;

/// Every built-in structural kind the demo must show.
const DEMO_KINDS: [&str; 9] = [
    "exact_failure",
    "agent_pair",
    "multi_agent",
    "topic_cycle",
    "edge_limit",
    "phase_visits",
    "transition_limit",
    "oscillation",
    "repeated_output",
];

#[test]
fn dash_reads_standard_input() {
    let bytes = std::fs::read(trace("exact_failure.jsonl")).expect("fixture");
    let run = run_with_stdin(["replay", "-", "--format", "jsonl"], &bytes);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(
        parse_jsonl(&run.stdout),
        replay_jsonl("exact_failure.jsonl", &[])
    );

    let run = run_with_stdin(
        ["replay", "-", "--format", "json"],
        b"\n\n{\"type\":\"completed\",\"task\":\"T9\"}\n",
    );
    assert_eq!(run.code, Some(0), "{run:?}");
    let report: Value = serde_json::from_str(&run.stdout).expect("a report");
    assert_eq!(report["events"], 1);
    assert_eq!(task(&report, "T9")["status"], "completed");
}

#[test]
fn jsonl_is_the_default_when_stdout_is_not_a_terminal() {
    let path = trace("exact_failure.jsonl");
    let run = run([OsStr::new("replay"), path.as_os_str()]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(
        parse_jsonl(&run.stdout),
        replay_jsonl("exact_failure.jsonl", &[])
    );
}

#[test]
fn text_format_lists_detections_then_a_summary_and_totals() {
    let path = trace("repeated_output.jsonl");
    let run = run([
        OsStr::new("replay"),
        path.as_os_str(),
        OsStr::new("--format"),
        OsStr::new("text"),
    ]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stderr, "");
    assert!(!run.stdout.contains('\u{1b}'), "no colors in a pipe");
    let lines: Vec<&str> = run.stdout.lines().collect();
    let pivot = lines
        .iter()
        .position(|line| line.starts_with("line 3 ") && line.contains("repeated_output"))
        .unwrap_or_else(|| panic!("no line for the first pivot in\n{}", run.stdout));
    assert!(lines[pivot].contains("pivot") && lines[pivot].contains("T1"));
    assert!(
        lines[pivot + 1].starts_with(' ') && lines[pivot + 1].contains("directive:"),
        "the directive is on the next line, indented"
    );
    let summary = lines
        .iter()
        .find(|line| line.starts_with("T1 "))
        .unwrap_or_else(|| panic!("no summary row for T1 in\n{}", run.stdout));
    assert!(summary.contains("paused") && summary.contains("repeated_output ×3"));
    assert!(
        lines
            .iter()
            .any(|line| line.trim_start().starts_with("status: paused")),
        "the pause is announced where it happens"
    );
    assert!(
        lines
            .last()
            .is_some_and(|last| last.starts_with("Totals: 17 events, 2 tasks")),
        "{}",
        run.stdout
    );
}

#[test]
fn text_format_says_when_the_gate_closes_and_lifts() {
    let path = trace("human_gate.jsonl");
    let run = run([
        OsStr::new("replay"),
        path.as_os_str(),
        OsStr::new("--format"),
        OsStr::new("text"),
    ]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    let gate = lines
        .iter()
        .position(|line| line.starts_with("line 4 "))
        .unwrap_or_else(|| panic!("no line 4 in\n{}", run.stdout));
    assert!(lines[gate].contains("escalate"));
    assert_eq!(
        lines[gate + 1].trim(),
        "status: escalated (waiting for a human)"
    );
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with("line 7 ") && line.contains("status: active")),
        "{}",
        run.stdout
    );
}

#[test]
fn text_format_is_colored_only_when_asked_or_on_a_terminal() {
    let path = trace("exact_failure.jsonl");
    let args = [
        OsStr::new("replay"),
        path.as_os_str(),
        OsStr::new("--format"),
        OsStr::new("text"),
    ];
    let plain = run(args);
    assert!(!plain.stdout.contains('\u{1b}'));
    let colored = run_command(loopguard().env("CLICOLOR_FORCE", "1").args(args), b"");
    assert_eq!(colored.code, Some(0));
    assert!(colored.stdout.contains("\u{1b}["), "{}", colored.stdout);
}

#[test]
fn log_level_writes_diagnostics_to_stderr_only() {
    let path = trace("exact_failure.jsonl");
    let quiet = run([OsStr::new("replay"), path.as_os_str()]);
    assert_eq!(quiet.stderr, "", "logging is off by default");

    let loud = run([
        OsStr::new("--log-level"),
        OsStr::new("info"),
        OsStr::new("replay"),
        path.as_os_str(),
    ]);
    assert_eq!(loud.code, Some(0));
    assert!(loud.stderr.contains("loop detected"), "{}", loud.stderr);
    assert_eq!(parse_jsonl(&loud.stdout), parse_jsonl(&quiet.stdout));

    let from_env = run_command(
        loopguard()
            .env("LOOPGUARD_LOG", "error")
            .args([OsStr::new("replay"), path.as_os_str()]),
        b"",
    );
    assert_eq!(from_env.code, Some(0));
    assert!(
        from_env.stderr.contains("task escalated"),
        "{}",
        from_env.stderr
    );
    assert!(
        !from_env.stderr.contains("loop detected"),
        "{}",
        from_env.stderr
    );

    let bad = run(["--log-level", "loud", "demo"]);
    assert_eq!(bad.code, Some(2));
    assert_eq!(bad.stdout, "");
}

#[test]
fn demo_exits_0_and_explains_every_kind() {
    let run = run(["demo"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stderr, "");
    for kind in DEMO_KINDS {
        assert!(
            run.stdout.contains(&format!(": {kind}: "))
                || run.stdout.contains(&format!(" {kind}: ")),
            "no heading for {kind}"
        );
        assert!(
            run.stdout
                .lines()
                .any(|line| line.starts_with("line ") && line.contains(kind)),
            "no {kind} detection in the demo output"
        );
    }
    assert!(
        !run.stdout.contains("this build found no"),
        "{}",
        run.stdout
    );
}

#[test]
fn demo_json_shows_each_scenario_detecting_its_kind() {
    let run = run(["demo", "--format", "json"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let demo: Value = serde_json::from_str(&run.stdout).expect("JSON");
    let scenarios = demo["scenarios"].as_array().expect("scenarios");
    let kinds: Vec<_> = scenarios
        .iter()
        .filter_map(|s| s["kind"].as_str())
        .collect();
    assert_eq!(kinds[..DEMO_KINDS.len()], DEMO_KINDS);
    assert_eq!(
        kinds[DEMO_KINDS.len()..DEMO_KINDS.len() + 3],
        ["collaboration_loop", "topic_cycle", "repeated_query"],
        "then the scenarios only semantic matching catches"
    );
    assert_eq!(
        kinds[DEMO_KINDS.len() + 3..DEMO_KINDS.len() + 6],
        ["regression", "no_progress", "external_failure"],
        "then the scenarios judged by progress"
    );
    assert_eq!(
        kinds[DEMO_KINDS.len() + 6..],
        [
            "tool_repeat",
            "tool_cycle",
            "tool_no_new_info",
            "tool_rephrase",
            "budget"
        ],
        "then the stale tool calls and the rephrased ones, then the budget"
    );
    for scenario in scenarios {
        let kind = &scenario["kind"];
        let shown = scenario["report"]["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .flat_map(|task| task["detections"].as_array().into_iter().flatten())
            .any(|d| d["kind"] == *kind);
        assert!(shown, "the {kind} scenario shows no {kind}");
        assert_eq!(scenario["report"]["errors"], serde_json::json!([]));
    }

    let by_kind = |kind: &str| {
        let scenario = scenarios
            .iter()
            .find(|s| s["kind"] == kind)
            .expect("scenario");
        scenario["report"]["tasks"][0].clone()
    };
    // The exact failure reaches the gate at the 4th identical failure.
    let exact = by_kind("exact_failure");
    assert_eq!(exact["status"], "escalated");
    assert_eq!(exact["loop_count"], 3);
    let gate: Vec<_> = exact["detections"]
        .as_array()
        .expect("detections")
        .iter()
        .filter(|d| d["action"] == "escalate")
        .collect();
    assert_eq!(gate.len(), 1);
    assert_eq!(gate[0]["evidence"].as_array().map(Vec::len), Some(4));
    assert_eq!(by_kind("edge_limit")["status"], "aborted_stuck");
    let repeated = by_kind("repeated_output");
    assert_eq!(repeated["status"], "paused");
    assert_eq!(repeated["pivots"], 2);
    let actions: Vec<_> = repeated["detections"]
        .as_array()
        .expect("detections")
        .iter()
        .map(|d| d["action"].clone())
        .collect();
    assert_eq!(actions, ["pivot", "pivot", "escalate"]);
    assert_eq!(by_kind("oscillation")["detections"][0]["action"], "block");
    // The progressive retry is left alone; the stuck one reaches the gate.
    let regression = scenarios
        .iter()
        .find(|s| s["kind"] == "regression")
        .expect("scenario");
    let tasks = regression["report"]["tasks"].as_array().expect("tasks");
    assert_eq!(tasks[0]["detections"], serde_json::json!([]));
    assert_eq!(tasks[0]["status"], "completed");
    assert_eq!(tasks[1]["status"], "escalated");
    assert_eq!(tasks[1]["loop_count"], 3);
    let external = by_kind("external_failure");
    assert_eq!(external["loop_count"], 0);
    assert_eq!(external["status"], "escalated");
    // Normal work beside each loop: a review with a new revision each
    // round, a search refined once before a page is opened.
    for (kind, quiet, looping) in [
        ("agent_pair", "PR-480", "PR-481"),
        ("tool_rephrase", "LEGAL-32", "LEGAL-31"),
    ] {
        let scenario = scenarios
            .iter()
            .find(|s| s["kind"] == kind)
            .expect("scenario");
        let task = |name: &str| {
            scenario["report"]["tasks"]
                .as_array()
                .expect("tasks")
                .iter()
                .find(|task| task["task"] == name)
                .cloned()
                .unwrap_or_else(|| panic!("{name} in the {kind} scenario"))
        };
        assert_eq!(task(quiet)["detections"], serde_json::json!([]), "{kind}");
        assert_ne!(task(looping)["detections"], serde_json::json!([]), "{kind}");
    }
    // The loop is stopped by its budget; the task that spends as much in
    // no loop runs to its end.
    let budget = scenarios
        .iter()
        .find(|s| s["kind"] == "budget")
        .expect("scenario");
    let tasks = budget["report"]["tasks"].as_array().expect("tasks");
    let (looping, working) = (&tasks[0], &tasks[1]);
    assert_eq!(looping["status"], "escalated");
    assert_eq!(working["status"], "completed");
    assert_eq!(working["detections"], serde_json::json!([]));
    assert_eq!(looping["usage"]["cost_usd"], working["usage"]["cost_usd"]);
    let crossing = looping["detections"]
        .as_array()
        .expect("detections")
        .iter()
        .find(|d| d["kind"] == "budget")
        .expect("a budget detection");
    assert_eq!(crossing["budget"]["limit"], "budget.max_loop_cost_usd");
    assert_eq!(crossing["line"], 7);
}

#[test]
fn demo_jsonl_tags_every_decision_with_its_scenario() {
    let run = run(["demo", "--format", "jsonl"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let decisions = parse_jsonl(&run.stdout);
    assert!(
        decisions
            .iter()
            .all(|d| d["scenario"].is_string() && d["line"].is_u64())
    );
    for kind in DEMO_KINDS {
        assert!(
            decisions
                .iter()
                .any(|d| d["scenario"] == kind && !of_kind(d, kind).is_empty()),
            "{kind}"
        );
    }
}

#[test]
fn help_works_for_the_command_and_each_subcommand() {
    for args in [
        vec!["--help"],
        vec!["replay", "--help"],
        vec!["demo", "--help"],
        vec!["help", "replay"],
    ] {
        let run = run(&args);
        assert_eq!(run.code, Some(0), "{args:?}: {run:?}");
        assert!(run.stdout.contains("Usage: loopguard"), "{args:?}");
    }
    let replay = run(["replay", "--help"]).stdout;
    for needle in [
        "--config",
        "--format",
        "--strict",
        "--log-level",
        "jsonl",
        "terminal",
    ] {
        assert!(replay.contains(needle), "replay --help lacks {needle}");
    }
    let missing = run(["replay"]);
    assert_eq!(missing.code, Some(2), "a usage error");
}

/// A config error, as every command prints it: `loopguard: FILE:LINE:COLUMN:
/// `KEY`...`, one line on stderr, exit 2 and nothing on stdout. Returns
/// what follows the key (or the position, for an error about no key).
fn config_error_after<'a>(
    run: &'a Run,
    file: &std::path::Path,
    line_column: &str,
    key: Option<&str>,
) -> &'a str {
    assert_eq!(run.code, Some(2), "{run:?}");
    assert_eq!(run.stdout, "", "no work is done");
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    let mut head = format!("loopguard: {}:{line_column}: ", file.display());
    if let Some(key) = key {
        head.push_str(&format!("`{key}`"));
    }
    match run.stderr.strip_prefix(&head) {
        Some(rest) => rest.trim_end(),
        None => panic!("want {head:?}, got {}", run.stderr),
    }
}

#[test]
fn config_errors_print_file_line_column_and_key() {
    for (name, line_column, key, problem) in [
        (
            "unknown_key.toml",
            "3:1",
            Some("phases.max_visit"),
            ": unknown field `max_visit`",
        ),
        (
            "unknown_table.toml",
            "1:2",
            Some("phase"),
            ": unknown field `phase`",
        ),
        (
            "unknown_nested_key.toml",
            "6:1",
            Some("cycles.window_sec"),
            ": unknown field `window_sec`",
        ),
        (
            "invalid_value.toml",
            "2:1",
            Some("cycles.window_secs"),
            " = 0 is not valid: must be at least 1",
        ),
        // toml's own wording of a syntax error is its business: only that
        // there is one is checked.
        ("syntax_error.toml", "2:15", None, ""),
    ] {
        let file = config(name);
        let trace = trace("exact_failure.jsonl");
        let run = run([
            OsStr::new("replay"),
            trace.as_os_str(),
            OsStr::new("--config"),
            file.as_os_str(),
        ]);
        let rest = config_error_after(&run, &file, line_column, key);
        assert!(rest.starts_with(problem), "{name}: {}", run.stderr);
        assert!(!rest.is_empty(), "{name}: a problem follows");
    }
}

#[test]
fn every_command_reports_config_errors_alike() {
    let file = config("unknown_nested_key.toml");
    let config_flag = file.to_str().expect("a UTF-8 path");
    for args in [
        vec![
            "--no-semantic",
            "similarity",
            "a",
            "b",
            "--config",
            config_flag,
        ],
        vec![
            "tune",
            "threshold",
            "--pairs",
            "no-such-pairs.jsonl",
            "--config",
            config_flag,
        ],
        vec!["plugins", "--config", config_flag],
    ] {
        let run = run(&args);
        let rest = config_error_after(&run, &file, "6:1", Some("cycles.window_sec"));
        assert!(
            rest.starts_with(": unknown field `window_sec`"),
            "{args:?}: {rest}"
        );
    }
}

/// A different PR number, and a clear rewording: what `loopguard
/// similarity` tells the two judges apart with.
const NUMBER_CONTRAST: (&str, &str) = (
    "Review PR #412 for security issues",
    "Review PR #418 for security issues",
);
const REWORDING: (&str, &str) = (
    "Can you review this authentication code?",
    "Could you review this authentication code again?",
);

/// `loopguard similarity A B [--config F]`, its stdout.
fn similarity(pair: (&str, &str), config: Option<&std::path::Path>) -> String {
    let mut args = vec![
        OsStr::new("similarity"),
        OsStr::new(pair.0),
        OsStr::new(pair.1),
    ];
    if let Some(config) = config {
        args.extend([OsStr::new("--config"), config.as_os_str()]);
    }
    let out = run(args);
    assert_eq!(out.code, Some(0), "{out:?}");
    out.stdout
}

/// The cosine on the first line of `loopguard similarity`'s output.
fn cosine_of(stdout: &str) -> f64 {
    stdout
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("cosine "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.parse().ok())
        .unwrap_or_else(|| panic!("no cosine in {stdout:?}"))
}

#[test]
fn similarity_prints_the_calibrated_judges_verdict_and_every_feature() {
    let contrast = similarity(NUMBER_CONTRAST, None);
    // Close by cosine, yet another PR.
    assert!(cosine_of(&contrast) > 0.85, "{contrast}");
    let lines: Vec<&str> = contrast.lines().collect();
    assert!(
        lines[1].starts_with("same request: no (calibrated judge, score ")
            && lines[1].contains(" from the shipped judge weights for the tuned encoder): ")
            && lines[1].contains("412")
            && lines[1].contains("418"),
        "{contrast}"
    );
    assert!(
        lines[2].starts_with("same topic: yes, ")
            && lines[2].ends_with("(similarity.topic_threshold)"),
        "{contrast}"
    );
    let features = lines
        .iter()
        .find_map(|line| line.strip_prefix("features: "))
        .unwrap_or_else(|| panic!("no features line in {contrast}"));
    let names: Vec<&str> = features
        .split(", ")
        .filter_map(|pair| pair.split_whitespace().next())
        .collect();
    assert_eq!(names, loopguard_semantic::FEATURE_NAMES, "{features}");
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with("differing words: a-only ")),
        "{contrast}"
    );

    let rewording = similarity(REWORDING, None);
    assert!(cosine_of(&rewording) > 0.85, "{rewording}");
    assert!(
        rewording
            .lines()
            .nth(1)
            .is_some_and(|line| line.starts_with("same request: yes (calibrated judge, score ")),
        "{rewording}"
    );

    // The JSON names every feature the text does, with a value each.
    let out = run([
        "similarity",
        NUMBER_CONTRAST.0,
        NUMBER_CONTRAST.1,
        "--format",
        "json",
    ]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let document: Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(document["judge"], "calibrated");
    assert_eq!(document["same"], false);
    // The defaults run the tuned encoder (`similarity.tuned_encoder`).
    assert_eq!(
        document["threshold_key"],
        "the shipped judge weights for the tuned encoder"
    );
    assert!(
        document["tuned_cosine"]
            .as_f64()
            .is_some_and(|c| (-1.0..=1.0).contains(&c)),
        "{document}"
    );
    assert!(
        document["reason"]
            .as_str()
            .is_some_and(|r| r.contains("412"))
    );
    let json_features = document["features"].as_object().expect("features");
    assert_eq!(json_features.len(), names.len(), "{document}");
    for name in &names {
        assert!(json_features[*name].is_number(), "{name}: {document}");
    }
    assert!(
        document["score"]
            .as_f64()
            .is_some_and(|s| (0.0..=1.0).contains(&s))
    );
}

#[test]
fn similarity_with_the_cosine_judge_prints_todays_verdict() {
    let cosine = config("similarity_judge_cosine.toml");
    for pair in [NUMBER_CONTRAST, REWORDING] {
        let stdout = similarity(pair, Some(&cosine));
        let value = cosine_of(&stdout);
        let lines: Vec<&str> = stdout.lines().collect();
        // Exactly today's three lines: no judge details.
        assert_eq!(lines.len(), 3, "{stdout}");
        assert_eq!(
            lines[1],
            format!("same request: yes, {value:.3} > 0.85 (similarity.request_threshold)"),
            "{stdout}"
        );
        assert_eq!(
            lines[2],
            format!("same topic: yes, {value:.3} > 0.85 (similarity.topic_threshold)"),
            "{stdout}"
        );
    }
}

#[test]
fn similarity_without_embeddings_says_the_judge_needs_them() {
    let out = run([
        "--no-semantic",
        "similarity",
        NUMBER_CONTRAST.0,
        NUMBER_CONTRAST.1,
    ]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout.starts_with(
            "similarity 0.000 (exact normalized text: semantic matching is off)\nsame request: no"
        ) && out.stdout.contains("the calibrated judge needs embeddings"),
        "{}",
        out.stdout
    );
    // The cosine judge needs nothing more than the exact text.
    let cosine = config("similarity_judge_cosine.toml");
    let out = run([
        OsStr::new("--no-semantic"),
        OsStr::new("similarity"),
        OsStr::new("Fix the parser!"),
        OsStr::new("fix THE parser"),
        OsStr::new("--config"),
        cosine.as_os_str(),
    ]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        out.stdout,
        "similarity 1.000 (exact normalized text: semantic matching is off)\n\
         same request: yes, 1.000 > 0.85 (similarity.request_threshold)\n\
         same topic: yes, 1.000 > 0.85 (similarity.topic_threshold)\n"
    );
}

/// The demo's "Same request?" section: each pair's two verdict lines, the
/// cosine judge's then the calibrated judge's, as (same, line).
fn demo_verdicts(stdout: &str) -> Vec<(String, bool)> {
    let section = stdout
        .split_once("== Same request? cosine vs calibrated judge")
        .map(|(_, section)| section)
        .unwrap_or_else(|| panic!("no judges section in {stdout}"));
    section
        .lines()
        .filter_map(|line| {
            let line = line.trim_start();
            let (judge, rest) = line.split_once(" judge:")?;
            let same = rest.trim_start().strip_prefix("same request: ")?;
            Some((judge.to_owned(), same.starts_with("yes")))
        })
        .collect()
}

#[test]
fn demo_judges_a_number_contrast_and_a_rewording_with_both_judges() {
    let out = run(["demo"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let verdicts = demo_verdicts(&out.stdout);
    let expected = [
        // PR #412 vs #418: close by cosine, vetoed by the calibrated judge.
        ("cosine", true),
        ("calibrated", false),
        // A rewording: the same to both.
        ("cosine", true),
        ("calibrated", true),
    ];
    let expected: Vec<(String, bool)> = expected
        .iter()
        .map(|(judge, same)| ((*judge).to_owned(), *same))
        .collect();
    assert_eq!(verdicts, expected, "{}", out.stdout);
    assert!(
        out.stdout.contains("different numbers (412 vs 418)"),
        "{}",
        out.stdout
    );

    // The same verdicts in the JSON.
    let out = run(["demo", "--format", "json"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let demo: Value = serde_json::from_str(&out.stdout).expect("JSON");
    let judges = demo["judges"].as_array().expect("judges");
    let same: Vec<(bool, bool)> = judges
        .iter()
        .map(|pair| {
            (
                pair["verdicts"]["cosine"]["same"] == true,
                pair["verdicts"]["calibrated"]["same"] == true,
            )
        })
        .collect();
    assert_eq!(same, [(true, false), (true, true)], "{judges:?}");
    assert!(
        judges
            .iter()
            .all(|pair| pair["cosine"].as_f64().is_some_and(|c| c > 0.85)),
        "{judges:?}"
    );

    // Without the model the section is skipped, and says why.
    let out = run(["--no-semantic", "demo"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(demo_verdicts(&out.stdout).is_empty(), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("skipped: judging needs the embedding model"),
        "{}",
        out.stdout
    );
}
