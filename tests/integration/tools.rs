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

/// The stale-call kinds (ruling 15), as `score --kinds` takes them.
const STALE_KINDS: &str = "tool_repeat,tool_cycle,tool_no_new_info";

/// Every tool kind: the stale calls and the rephrased ones (ruling 19).
const TOOL_KINDS: &str = "tool_repeat,tool_cycle,tool_no_new_info,tool_rephrase";

fn corpus() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/tool-traces")
}

/// `loopguard score` on the corpus with `kinds`, as JSON, and its output.
fn score_corpus(kinds: &str) -> (serde_json::Value, String) {
    let dir = corpus();
    let out = run([
        std::ffi::OsStr::new("score"),
        dir.as_os_str(),
        std::ffi::OsStr::new("--kinds"),
        std::ffi::OsStr::new(kinds),
        std::ffi::OsStr::new("--format"),
        std::ffi::OsStr::new("json"),
    ]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let scores = serde_json::from_str(&out.stdout).expect("JSON");
    (scores, out.stdout)
}

#[test]
fn the_tool_corpus_fires_on_every_expected_line_and_never_on_legitimate_work() {
    let dir = corpus();
    let (scores, stdout) = score_corpus(STALE_KINDS);
    let traces = scores["traces"].as_array().expect("traces");
    assert!(traces.len() >= 30, "{} traces", traces.len());
    let (with, without) = (
        scores["traces_with_loops"].as_u64().unwrap_or(0),
        scores["traces_without"].as_u64().unwrap_or(0),
    );
    assert!(without * 2 >= with, "half legitimate: {with} / {without}");
    // Every legitimate trace stays silent; every expected line fires.
    assert_eq!(scores["traces_without_silent"], without, "{stdout}");
    assert_eq!(scores["by_line"]["fp"], 0, "{stdout}");
    assert_eq!(scores["by_line"]["fn"], 0, "{stdout}");
    // Cycles are named as cycles.
    assert_eq!(scores["per_kind"]["tool_cycle"]["fp"], 0);
    assert_eq!(scores["per_kind"]["tool_cycle"]["fn"], 0);
    for trace in traces {
        assert_eq!(trace["line_errors"], 0, "{trace}");
    }

    // The text table says the same.
    let text = run([
        std::ffi::OsStr::new("score"),
        dir.as_os_str(),
        std::ffi::OsStr::new("--kinds"),
        std::ffi::OsStr::new(STALE_KINDS),
    ]);
    assert_eq!(text.code, Some(0), "{text:?}");
    assert!(
        text.stdout
            .lines()
            .any(|l| l.starts_with("by line (kind aside)") && l.contains("1.000   1.000   1.000")),
        "{}",
        text.stdout
    );
}

#[test]
fn rephrased_queries_are_caught_and_legitimate_work_stays_silent() {
    let (scores, stdout) = score_corpus(TOOL_KINDS);
    // Every legitimate trace is silent, refining searches, paging and one
    // question asked of two tools included; nothing fires off its line.
    assert_eq!(
        scores["traces_without_silent"], scores["traces_without"],
        "{stdout}"
    );
    assert_eq!(scores["by_line"]["fp"], 0, "{stdout}");
    let rephrase = &scores["per_kind"]["tool_rephrase"];
    assert_eq!(rephrase["fp"], 0, "{rephrase}");
    let recall = rephrase["recall"].as_f64().expect("a recall");
    assert!(recall >= REPHRASE_RECALL_FLOOR, "{rephrase}");
}

/// The `tool_rephrase` recall the corpus keeps at least (its misses are
/// rewordings in synonyms whose cosine the model puts below 0.70).
const REPHRASE_RECALL_FLOOR: f64 = 0.85;

#[test]
fn a_query_reworded_again_and_again_is_told_to_change_its_approach() {
    for extra in [&["--no-semantic"][..], &[]] {
        let decisions = replay_jsonl("tool_rephrase.jsonl", extra);
        // R1: one question in six wordings, nothing opened; the 3rd
        // rephrase (the 4th wording) is the first detection.
        assert_eq!(
            lines_with(&decisions, "R1", "tool_rephrase"),
            [9, 10, 11],
            "{extra:?}"
        );
        let ladder: Vec<(&str, &str)> = [9, 10, 11]
            .iter()
            .map(|line| {
                let found = detection(&decisions, *line, "tool_rephrase");
                (
                    found["severity"].as_str().unwrap_or_default(),
                    found["action"].as_str().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            ladder,
            [
                ("low", "inject_context"),
                ("medium", "inject_context"),
                ("high", "escalate")
            ]
        );
        let first = detection(&decisions, 9, "tool_rephrase");
        assert_eq!(numbers(&first["evidence"]), [1, 3, 5, 9]);
        assert_eq!(first["agents"], serde_json::json!(["researcher"]));
        let directive = first["directive"].as_str().unwrap_or_default();
        for wording in [
            "\"EU AI act fines for startups\" (line 1)",
            "\"what fines does the EU AI act set for startups\" (line 9)",
            "change the approach",
        ] {
            assert!(directive.contains(wording), "{directive}");
        }
        // Never a loop: the task's loop count stays 0.
        assert_eq!(at(&decisions, 11)["loop_count"], 0);
        // R2: refined once, then a page from the results opened.
        assert!(lines_with(&decisions, "R2", "tool_rephrase").is_empty());
    }
}

#[test]
fn score_needs_a_sidecar_and_known_kinds() {
    let dir = tempfile::TempDir::new().expect("a temporary directory");
    let trace = dir.path().join("lonely.jsonl");
    std::fs::write(
        &trace,
        r#"{"type":"tool_call","task":"T","agent":"a","tool":"ls","result":"x"}"#,
    )
    .expect("written");
    let missing = run([std::ffi::OsStr::new("score"), trace.as_os_str()]);
    assert_eq!(missing.code, Some(2), "{missing:?}");
    assert!(
        missing.stderr.contains("lonely.expected.jsonl"),
        "{}",
        missing.stderr
    );
    std::fs::write(
        dir.path().join("lonely.expected.jsonl"),
        "{\"line\": 1, \"kind\": \"tool_loop\"}\n",
    )
    .expect("written");
    let unknown = run([std::ffi::OsStr::new("score"), trace.as_os_str()]);
    assert_eq!(unknown.code, Some(2), "{unknown:?}");
    assert!(
        unknown.stderr.contains("lonely.expected.jsonl line 1")
            && unknown.stderr.contains("unknown kind \"tool_loop\""),
        "{}",
        unknown.stderr
    );
    let bad_flag = run([
        std::ffi::OsStr::new("score"),
        trace.as_os_str(),
        std::ffi::OsStr::new("--kinds"),
        std::ffi::OsStr::new("tool_loop"),
    ]);
    assert_eq!(bad_flag.code, Some(2), "{bad_flag:?}");
    assert!(bad_flag.stderr.contains("--kinds"), "{}", bad_flag.stderr);
}

#[test]
fn the_demo_shows_the_tool_loops_and_keeps_legitimate_repetition_silent() {
    let out = run(["demo", "--format", "json"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let demo: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
    let scenario = |name: &str| {
        demo["scenarios"]
            .as_array()
            .and_then(|all| all.iter().find(|s| s["name"] == name))
            .unwrap_or_else(|| panic!("no scenario {name}"))
            .clone()
    };
    let kinds_of = |task: &serde_json::Value| -> Vec<String> {
        task["detections"]
            .as_array()
            .map(|all| {
                all.iter()
                    .map(|d| d["kind"].as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let repeat = scenario("tool_repeat");
    let tasks = repeat["report"]["tasks"].as_array().expect("tasks");
    let task = |name: &str| {
        tasks
            .iter()
            .find(|t| t["task"] == name)
            .unwrap_or_else(|| panic!("no task {name}"))
    };
    assert_eq!(kinds_of(task("UI-88")), ["tool_repeat"; 3]);
    assert_eq!(task("UI-88")["status"], "escalated");
    assert!(
        kinds_of(task("OPS-5")).is_empty(),
        "polling, paging, writes"
    );
    let cycle = scenario("tool_cycle");
    assert_eq!(kinds_of(&cycle["report"]["tasks"][0]), ["tool_cycle"; 3]);
    let searches = scenario("tool_no_new_info");
    let tasks = searches["report"]["tasks"].as_array().expect("tasks");
    let task = |name: &str| {
        tasks
            .iter()
            .find(|t| t["task"] == name)
            .unwrap_or_else(|| panic!("no task {name}"))
    };
    assert_eq!(kinds_of(task("OPS-31")), ["tool_no_new_info"; 2]);
    assert_eq!(kinds_of(task("RES-40")), ["tool_repeat"]);
}

#[test]
fn reworded_free_text_arguments_are_one_call_to_the_judge_and_a_contrast_is_not() {
    let decisions = replay_jsonl("tool_args_reworded.jsonl", &[]);
    // T1: three wordings of one search, each answered "none" (too short
    // to be informative): the same call only because the judge says so.
    assert_eq!(lines_with(&decisions, "T1", "tool_repeat"), [3]);
    let found = detection(&decisions, 3, "tool_repeat");
    let reason = found["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("; its q is the same as line 1's: same request (score "),
        "{reason}"
    );
    assert_eq!(numbers(&found["evidence"]), [1, 2, 3]);
    // T2: staging and production are different deployments.
    for kind in ["tool_repeat", "tool_cycle", "tool_no_new_info"] {
        assert!(lines_with(&decisions, "T2", kind).is_empty(), "{kind}");
    }
    // Without embeddings the wordings are different calls.
    let exact = replay_jsonl("tool_args_reworded.jsonl", &["--no-semantic"]);
    for kind in ["tool_repeat", "tool_cycle", "tool_no_new_info"] {
        assert!(lines_with(&exact, "T1", kind).is_empty(), "{kind}");
    }
}

#[test]
fn eval_scores_events_within_a_distance_and_traces_next_to_baselines() {
    let dir = corpus();
    let out = run([
        std::ffi::OsStr::new("eval"),
        dir.as_os_str(),
        std::ffi::OsStr::new("--kinds"),
        std::ffi::OsStr::new(TOOL_KINDS),
        std::ffi::OsStr::new("--format"),
        std::ffi::OsStr::new("json"),
    ]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let eval: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(eval["within"], 3);
    assert_eq!(eval["events"]["fp"], 0, "{}", out.stdout);
    let recall = eval["events"]["recall"].as_f64().unwrap_or(0.0);
    assert!(recall >= 0.95, "{}", out.stdout);
    assert_eq!(eval["trace_any_detection"]["fp"], 0);
    let traces = eval["trace_any_detection"]["recall"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(traces >= 0.9, "{}", out.stdout);
    // The baselines are there to be beaten.
    let chance = eval["chance_event_precision"].as_f64().unwrap_or(1.0);
    assert!(chance < 1.0, "{chance}");
    let by_length = eval["trace_longer_than_median"]["f1"]
        .as_f64()
        .unwrap_or(1.0);
    assert!(by_length < 1.0, "{by_length}");

    // Within a distance: one failure repeated three lines later, labelled
    // at the first.
    let tmp = tempfile::TempDir::new().expect("a temporary directory");
    let trace = tmp.path().join("late.jsonl");
    std::fs::write(
        &trace,
        concat!(
            r#"{"type":"failure","task":"T","agent":"coder","error":"TypeError: x is undefined"}"#,
            "\n",
            r#"{"type":"turn","task":"T","agent":"coder","output":"retrying","success":true}"#,
            "\n",
            r#"{"type":"turn","task":"T","agent":"coder","output":"retrying again","success":true}"#,
            "\n",
            r#"{"type":"failure","task":"T","agent":"coder","error":"TypeError: x is undefined"}"#,
            "\n"
        ),
    )
    .expect("written");
    std::fs::write(tmp.path().join("late.expected.jsonl"), "{\"line\": 1}\n").expect("written");
    let counts = |within: &str| {
        let out = run([
            std::ffi::OsStr::new("eval"),
            trace.as_os_str(),
            std::ffi::OsStr::new("--within"),
            std::ffi::OsStr::new(within),
            std::ffi::OsStr::new("--format"),
            std::ffi::OsStr::new("json"),
            std::ffi::OsStr::new("--no-semantic"),
        ]);
        assert_eq!(out.code, Some(0), "{out:?}");
        let eval: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
        (
            eval["events"]["tp"].as_u64(),
            eval["events"]["fp"].as_u64(),
            eval["events"]["fn"].as_u64(),
        )
    };
    assert_eq!(counts("3"), (Some(1), Some(0), Some(0)));
    assert_eq!(counts("2"), (Some(0), Some(1), Some(1)));
}
