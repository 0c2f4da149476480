//! Restarts and fleets through the command: a trace replayed in two runs on
//! one store reports like one run; two processes at once on one PostgreSQL
//! database keep every count; a writer killed with SIGKILL loses no row it
//! had answered for.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;

use serde_json::Value;

use crate::support::*;

/// The traces joined into one long trace, each trace's tasks renamed after
/// its file so that they stay apart: every built-in kind, resets, the gate
/// and pivots, interleaved with nothing.
const PARTS: [&str; 8] = [
    "exact_failure.jsonl",
    "human_gate.jsonl",
    "edge_limit.jsonl",
    "oscillation.jsonl",
    "phase_visits.jsonl",
    "repeated_output.jsonl",
    "transition_limit.jsonl",
    "completed_reset.jsonl",
];

/// The joined trace's lines (events only, no blank lines).
fn joined_trace(parts: &[&str]) -> Vec<String> {
    let mut lines = Vec::new();
    for part in parts {
        let text = std::fs::read_to_string(trace(part)).expect("the trace is readable");
        let prefix = part.trim_end_matches(".jsonl");
        for line in text.lines() {
            let Ok(mut event) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let Some(task) = event["task"].as_str().map(str::to_owned) else {
                continue;
            };
            event["task"] = Value::String(format!("{prefix}/{task}"));
            lines.push(event.to_string());
        }
    }
    lines
}

fn write_lines(path: &Path, lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(path, text).expect("a temp file");
}

/// `replay --store URL` of a file, JSON Lines out, exact text only.
fn replay_into(url: &str, file: &Path, extra: &[&str]) -> Vec<Value> {
    let mut with = vec!["--no-semantic"];
    with.extend_from_slice(extra);
    replay_with(url, file, &with)
}

/// `replay --store URL` of a file, JSON Lines out, with `flags` (the
/// semantic model unless they say `--no-semantic`).
fn replay_with(url: &str, file: &Path, flags: &[&str]) -> Vec<Value> {
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "replay".as_ref(),
        file.as_os_str(),
        "--format".as_ref(),
        "jsonl".as_ref(),
        "--store".as_ref(),
        url.as_ref(),
    ];
    args.extend(flags.iter().map(std::ffi::OsStr::new));
    let run = run(args);
    assert_eq!(run.code, Some(0), "{run:?}");
    parse_jsonl(&run.stdout)
}

#[test]
fn a_trace_replayed_in_two_runs_on_sqlite_reports_like_one_run() {
    let folder = tempfile::tempdir().expect("a temp folder");
    let lines = joined_trace(&PARTS);
    let half = lines.len() / 2;
    let (whole, first, second) = (
        folder.path().join("whole.jsonl"),
        folder.path().join("first.jsonl"),
        folder.path().join("second.jsonl"),
    );
    write_lines(&whole, &lines);
    write_lines(&first, &lines[..half]);
    write_lines(&second, &lines[half..]);
    let one = sqlite_url(&folder.path().join("one.db"));
    let two = sqlite_url(&folder.path().join("two.db"));

    let whole_decisions = replay_into(&one, &whole, &[]);
    let mut halves = replay_into(&two, &first, &[]);
    let first_line = (half + 1).to_string();
    halves.extend(replay_into(&two, &second, &["--first-line", &first_line]));
    assert_eq!(halves, whole_decisions);

    let report = store_report(&one);
    assert_eq!(store_report(&two), report);
    assert_eq!(report["events"], lines.len());
    // The report is not trivially equal: it holds every built-in kind the
    // parts show, pivots and a gated task.
    let kinds: Vec<&str> = report["tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|task| task["detections"].as_array().into_iter().flatten())
        .filter_map(|detection| detection["kind"].as_str())
        .collect();
    for kind in [
        "exact_failure",
        "edge_limit",
        "oscillation",
        "phase_visits",
        "repeated_output",
        "transition_limit",
    ] {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
    }

    // The audit trail names the resets with their reasons.
    let log = run(["log", "--store", &two, "--format", "json"]);
    assert_eq!(log.code, Some(0), "{log:?}");
    let log: Value = serde_json::from_str(&log.stdout).expect("JSON");
    let resets: Vec<&Value> = log["audit"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|entry| entry["record"]["entry"] == "reset")
        .collect();
    assert!(!resets.is_empty(), "{log}");
    assert!(
        resets.iter().all(|entry| matches!(
            entry["record"]["reason"].as_str(),
            Some("human" | "completed")
        )),
        "{resets:?}"
    );
    assert!(!log["pivots"].as_array().is_none_or(Vec::is_empty), "{log}");
    let text = run(["log", "--store", &two]);
    assert!(text.stdout.contains("reset by "), "{text:?}");
    assert!(text.stdout.contains("pivot #1"), "{text:?}");
}

#[test]
fn the_semantic_and_progress_traces_replayed_in_two_runs_report_like_one_run() {
    // The default config: the embedding model, whose detectors keep their
    // windows as texts in the store and embed them again after a restart;
    // and the progress evaluator.
    let folder = tempfile::tempdir().expect("a temp folder");
    let lines = joined_trace(&[
        "semantic_collaboration.jsonl",
        "repeated_query.jsonl",
        "semantic_topic_cycle.jsonl",
        "multi_agent.jsonl",
        "agent_pair.jsonl",
        "progress.jsonl",
    ]);
    for half in [lines.len() / 3, lines.len() / 2, lines.len() * 2 / 3] {
        let (whole, first, second) = (
            folder.path().join(format!("whole-{half}.jsonl")),
            folder.path().join(format!("first-{half}.jsonl")),
            folder.path().join(format!("second-{half}.jsonl")),
        );
        write_lines(&whole, &lines);
        write_lines(&first, &lines[..half]);
        write_lines(&second, &lines[half..]);
        let one = sqlite_url(&folder.path().join(format!("one-{half}.db")));
        let two = sqlite_url(&folder.path().join(format!("two-{half}.db")));
        let whole_decisions = replay_with(&one, &whole, &[]);
        let mut halves = replay_with(&two, &first, &[]);
        let first_line = (half + 1).to_string();
        halves.extend(replay_with(&two, &second, &["--first-line", &first_line]));
        assert_eq!(halves, whole_decisions, "split at {half}");
        assert_eq!(store_report(&two), store_report(&one), "split at {half}");
        let kinds: Vec<String> = whole_decisions
            .iter()
            .flat_map(|decision| {
                decision["detections"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .filter_map(|detection| detection["kind"].as_str().map(str::to_owned))
            .collect();
        for kind in [
            "collaboration_loop",
            "repeated_query",
            "topic_cycle",
            "regression",
        ] {
            assert!(kinds.iter().any(|seen| seen == kind), "{kind} in {kinds:?}");
        }
    }
}

/// Starts `replay --store URL FILE` without waiting for it.
fn spawn_replay(url: &str, file: &Path) -> std::process::Child {
    loopguard()
        .args(["--no-semantic", "replay"])
        .arg(file)
        .args(["--format", "jsonl", "--store", url])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the command starts")
}

fn finish(child: std::process::Child) -> Vec<Value> {
    let output = child.wait_with_output().expect("the command ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    parse_jsonl(&String::from_utf8_lossy(&output.stdout))
}

/// `lines` with every line `keep` rejects blanked: line numbers stay those
/// of the whole trace, and blank lines are skipped by replay.
fn masked(lines: &[String], keep: impl Fn(usize, &str) -> bool) -> Vec<String> {
    lines
        .iter()
        .enumerate()
        .map(|(index, line)| {
            if keep(index, line) {
                line.clone()
            } else {
                String::new()
            }
        })
        .collect()
}

#[test]
fn two_processes_at_once_on_postgres_report_like_one_run() {
    let (Some(one), Some(two)) = (PgSchema::create("fleet_one"), PgSchema::create("fleet_two"))
    else {
        return;
    };
    let folder = tempfile::tempdir().expect("a temp folder");
    let lines = joined_trace(&PARTS);
    let whole = folder.path().join("whole.jsonl");
    write_lines(&whole, &lines);
    // Two replicas behind a router that sends each task to one of them:
    // the parts alternate between the two processes.
    let owner = |line: &str| -> usize {
        let part = PARTS
            .iter()
            .position(|part| line.contains(&format!("\"{}/", part.trim_end_matches(".jsonl"))))
            .unwrap_or(0);
        part % 2
    };
    let (a, b) = (folder.path().join("a.jsonl"), folder.path().join("b.jsonl"));
    write_lines(&a, &masked(&lines, |_, line| owner(line) == 0));
    write_lines(&b, &masked(&lines, |_, line| owner(line) == 1));

    let whole_decisions = finish(spawn_replay(&one.url, &whole));
    let (first, second) = (spawn_replay(&two.url, &a), spawn_replay(&two.url, &b));
    let mut fleet = finish(first);
    fleet.extend(finish(second));
    fleet.sort_by_key(|decision| decision["line"].as_u64());
    assert_eq!(fleet, whole_decisions);
    assert_eq!(store_report(&two.url), store_report(&one.url));
}

#[test]
fn two_processes_at_once_on_one_postgres_task_keep_its_count_exact() {
    let (Some(one), Some(two)) = (
        PgSchema::create("hammer_one"),
        PgSchema::create("hammer_two"),
    ) else {
        return;
    };
    let folder = tempfile::tempdir().expect("a temp folder");
    // The same failure of one task, 120 times: whatever the interleaving,
    // one run counts 119 loops.
    let lines: Vec<String> = (0..120)
        .map(|_| {
            r#"{"type":"failure","task":"T","agent":"coder","error":"E0308 mismatched types"}"#
                .to_owned()
        })
        .collect();
    let whole = folder.path().join("whole.jsonl");
    write_lines(&whole, &lines);
    let (a, b) = (folder.path().join("a.jsonl"), folder.path().join("b.jsonl"));
    write_lines(&a, &masked(&lines, |index, _| index % 2 == 0));
    write_lines(&b, &masked(&lines, |index, _| index % 2 == 1));

    finish(spawn_replay(&one.url, &whole));
    let (first, second) = (spawn_replay(&two.url, &a), spawn_replay(&two.url, &b));
    let mut counts: Vec<u64> = finish(first)
        .into_iter()
        .chain(finish(second))
        .filter_map(|decision| decision["loop_count"].as_u64())
        .collect();
    counts.sort_unstable();
    assert_eq!(counts, (0..120).collect::<Vec<u64>>());

    let (whole_report, fleet_report) = (store_report(&one.url), store_report(&two.url));
    for key in ["status", "loop_count", "pivots"] {
        assert_eq!(
            fleet_report["tasks"][0][key], whole_report["tasks"][0][key],
            "{key}"
        );
    }
    assert_eq!(whole_report["tasks"][0]["loop_count"], 119);
    assert_eq!(fleet_report["events"], 120);
    assert_eq!(
        fleet_report["tasks"][0]["detections"]
            .as_array()
            .map(Vec::len),
        Some(119)
    );
}

#[test]
fn a_writer_killed_with_sigkill_loses_no_row_it_answered_for() {
    let folder = tempfile::tempdir().expect("a temp folder");
    let url = sqlite_url(&folder.path().join("killed.db"));
    let mut child = replay_stdin_command(&url)
        .stderr(Stdio::null())
        .spawn()
        .expect("the command starts");
    let mut stdin = child.stdin.take().expect("a pipe");
    let mut stdout = BufReader::new(child.stdout.take().expect("a pipe"));
    let event = |n: usize| {
        format!(
            r#"{{"type":"failure","task":"T{}","agent":"coder","error":"E{}"}}"#,
            n % 3,
            n % 2
        )
    };
    // Feed events one by one and read each answer: an answer is printed only
    // after its event's writes are committed.
    let mut answered = Vec::new();
    for n in 0..60 {
        writeln!(stdin, "{}", event(n)).expect("the pipe is open");
        stdin.flush().expect("the pipe is open");
        let mut answer = String::new();
        stdout.read_line(&mut answer).expect("an answer");
        answered.push(serde_json::from_str::<Value>(&answer).expect("a decision"));
    }
    // More events in flight, then SIGKILL mid-stream.
    for n in 60..200 {
        let _ = writeln!(stdin, "{}", event(n));
    }
    child.kill().expect("SIGKILL");
    let _ = child.wait();

    // Every answered detection is in the audit trail, and every answered
    // event is counted in its task's record.
    let log = run(["log", "--store", &url, "--format", "json"]);
    assert_eq!(
        log.code,
        Some(0),
        "the database opens after the kill: {log:?}"
    );
    let log: Value = serde_json::from_str(&log.stdout).expect("JSON");
    let audited: Vec<(u64, String)> = log["audit"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|entry| entry["record"]["entry"] == "detection")
        .map(|entry| {
            (
                entry["line"].as_u64().unwrap_or_default(),
                entry["task"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let mut expected = 0;
    for decision in &answered {
        for _ in decision["detections"].as_array().into_iter().flatten() {
            expected += 1;
            let key = (
                decision["line"].as_u64().unwrap_or_default(),
                decision["task"].as_str().unwrap_or_default().to_owned(),
            );
            assert!(
                audited.contains(&key),
                "{key:?} was answered but is not in {audited:?}"
            );
        }
    }
    assert!(expected > 20, "the answered events had detections");
    let report = store_report(&url);
    let events = report["events"].as_u64().unwrap_or_default();
    assert!(events >= 60, "{events} events committed, 60 were answered");
}

/// `replay FILE --store URL --config CONFIG` with the fake LLM of
/// `base_url` named in the environment: the decisions.
fn replay_asking(url: &str, file: &Path, config: &Path, base_url: &str) -> Vec<Value> {
    let mut command = loopguard();
    command
        .env("LOOPGUARD_LLM_BASE_URL", base_url)
        .env("LOOPGUARD_LLM_MODEL", "fake-judge")
        .args(["replay"])
        .arg(file)
        .args(["--format", "jsonl", "--store", url, "--config"])
        .arg(config);
    let run = run_command(&mut command, b"");
    assert_eq!(run.code, Some(0), "{run:?}");
    parse_jsonl(&run.stdout)
}

#[test]
fn a_second_opinion_asked_in_one_run_is_recalled_by_the_next_on_the_store() {
    use loopguard_test_support::fake_llm::{FakeAnswer, FakeLlm};

    // A request and a looser rewording of it that the shipped judge scores
    // in the second opinion's band (crates/semantic's engine tests check
    // that), sent by another task in each run.
    let collab = |task: &str, request: &str| {
        serde_json::json!({"type": "collaboration", "task": task, "from": "planner",
            "to": "coder", "request": request})
        .to_string()
    };
    let folder = tempfile::tempdir().expect("a temp folder");
    let config = folder.path().join("loopguard.toml");
    std::fs::write(&config, "[similarity.second_opinion]\nenabled = true\n").expect("config");
    let (first, second, third) = (
        folder.path().join("first.jsonl"),
        folder.path().join("second.jsonl"),
        folder.path().join("third.jsonl"),
    );
    for (file, task) in [(&first, "A"), (&second, "B"), (&third, "C")] {
        write_lines(
            file,
            &[
                collab(task, "Rotate the API keys for the staging cluster."),
                collab(task, "Staging needs fresh API keys."),
            ],
        );
    }
    // The fake serves from its own runtime (kept alive here) while the commands run.
    let (_serving, fake) = FakeLlm::start_in_background(|_, _| {
        FakeAnswer::Content(r#"{"same": true, "reason": "the same key rotation"}"#.into())
    });
    let loop_reason = |decisions: &[Value]| {
        of_kind(at(decisions, 2), "collaboration_loop")
            .first()
            .and_then(|detection| detection["reason"].as_str())
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("a loop at line 2: {decisions:?}"))
    };

    let url = sqlite_url(&folder.path().join("answers.db"));
    let asked = replay_asking(&url, &first, &config, &fake.base_url());
    assert_eq!(fake.requests(), 1);
    let reason = loop_reason(&asked);
    assert!(
        reason.contains("LLM fake-judge says the same request (the same key rotation), overruling"),
        "{reason}"
    );

    // The next run on the store: the same pair, decided alike, not asked.
    let recalled = replay_asking(&url, &second, &config, &fake.base_url());
    assert_eq!(fake.requests(), 1, "recalled from the store, not asked");
    let reason = loop_reason(&recalled);
    assert!(
        reason.contains("(the same key rotation), as before, overruling"),
        "{reason}"
    );

    // On another store it is asked again: what was recalled was the store's.
    let elsewhere = sqlite_url(&folder.path().join("other.db"));
    replay_asking(&elsewhere, &second, &config, &fake.base_url());
    assert_eq!(fake.requests(), 2);

    // `loopguard opinions` lists the kept answer, and forgets it by age.
    let listed = run(["opinions", "--store", &url, "--format", "json"]);
    assert_eq!(listed.code, Some(0), "{listed:?}");
    let listed: Value = serde_json::from_str(&listed.stdout).expect("JSON");
    let kept = listed["opinions"].as_array().expect("a list");
    assert_eq!(kept.len(), 1, "{listed}");
    assert_eq!(kept[0]["same"], true, "{listed}");
    assert_eq!(kept[0]["by"], "LLM fake-judge", "{listed}");
    assert_eq!(kept[0]["reason"], "the same key rotation", "{listed}");
    let text = run(["opinions", "--store", &url]);
    assert!(
        text.stdout.contains("  same       LLM fake-judge  key ")
            && text.stdout.contains("the same key rotation"),
        "{text:?}"
    );
    let forget = |days: &str| {
        let run = run(["opinions", "--store", &url, "--forget-older-than", days]);
        assert_eq!(run.code, Some(0), "{run:?}");
        run.stdout
    };
    // Answered moments ago: a day's limit keeps it.
    assert!(forget("1").starts_with("forgot 0 second opinions answered before "));
    assert!(forget("0").starts_with("forgot 1 second opinion answered before "));
    let empty = run(["opinions", "--store", &url]);
    assert_eq!(empty.stdout.trim(), "(no second opinions)", "{empty:?}");
    // Forgotten, the pair is asked again (by a new task: B's history is
    // on this store).
    replay_asking(&url, &third, &config, &fake.base_url());
    assert_eq!(fake.requests(), 3);

    // Forgetting on a store that is not there creates none.
    let missing = folder.path().join("typo.db");
    let refused = run([
        "opinions",
        "--store",
        &sqlite_url(&missing),
        "--forget-older-than",
        "0",
    ]);
    assert_eq!(refused.code, Some(2), "{refused:?}");
    assert!(refused.stderr.contains("there is no store"), "{refused:?}");
    assert!(!missing.exists());
}
