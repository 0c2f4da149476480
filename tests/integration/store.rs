//! `replay --store`, `tasks` and `log`: a replay's tasks and cycle log in a
//! SQLite file, read back by the other two commands.

use std::ffi::OsStr;

use serde_json::Value;

use crate::support::*;

fn sqlite_url(folder: &tempfile::TempDir) -> String {
    format!(
        "sqlite://{}",
        folder.path().join("state/loopguard.db").display()
    )
}

/// Replays the test trace `name` into the store at `url`, exact text only,
/// decisions as JSON Lines.
fn replay_into(name: &str, url: &str) -> Run {
    let trace = trace(name);
    run([
        "--no-semantic".as_ref(),
        "replay".as_ref(),
        trace.as_os_str(),
        "--format".as_ref(),
        "jsonl".as_ref(),
        "--store".as_ref(),
        url.as_ref(),
    ])
}

fn json(run: &Run) -> Value {
    assert_eq!(run.code, Some(0), "{run:?}");
    serde_json::from_str(&run.stdout).unwrap_or_else(|err| panic!("not JSON ({err}): {run:?}"))
}

#[test]
fn a_replayed_trace_is_listed_by_tasks_and_log() {
    let folder = tempfile::tempdir().expect("a temp folder");
    let url = sqlite_url(&folder);
    let replay = replay_into("exact_failure.jsonl", &url);
    assert_eq!(replay.code, Some(0), "{replay:?}");
    let decisions = parse_jsonl(&replay.stdout);
    let escalation = decisions
        .iter()
        .find(|decision| decision["action"] == "escalate")
        .expect("the trace escalates");
    assert!(folder.path().join("state/loopguard.db").is_file());

    let tasks = json(&run(["tasks", "--store", &url, "--format", "json"]));
    let t1 = tasks["tasks"]
        .as_array()
        .and_then(|tasks| tasks.iter().find(|task| task["task"] == "T1"))
        .unwrap_or_else(|| panic!("T1 is listed: {tasks}"));
    assert_eq!(t1["status"], "escalated");
    assert_eq!(t1["loop_count"], escalation["loop_count"]);
    assert_eq!(t1["episodes"], 1);

    let log = json(&run([
        "log", "--store", &url, "--task", "T1", "--format", "json",
    ]));
    let episodes = log["episodes"].as_array().expect("a list of episodes");
    assert_eq!(episodes.len(), 1, "{log}");
    assert_eq!(episodes[0]["task"], "T1");
    assert_eq!(episodes[0]["patterns"][0], "exact_failure");
    assert_eq!(episodes[0]["intervention"], "escalate");
    assert_eq!(episodes[0]["escalated"], true);
    // The episode's lines are the lines whose decisions had detections.
    let detected: Vec<Value> = decisions
        .iter()
        .filter(|decision| decision["task"] == "T1")
        .filter(|decision| {
            decision["detections"]
                .as_array()
                .is_some_and(|d| !d.is_empty())
        })
        .map(|decision| decision["line"].clone())
        .collect();
    assert_eq!(episodes[0]["lines"].as_array(), Some(&detected));

    let text = run(["tasks", "--store", &url]);
    assert_eq!(text.code, Some(0), "{text:?}");
    assert!(text.stdout.starts_with("TASK"), "{text:?}");
    assert!(
        text.stdout
            .lines()
            .any(|line| line.starts_with("T1") && line.contains("escalated")),
        "{text:?}"
    );
    let text = run(["log", "--store", &url, "--episodes"]);
    assert_eq!(text.code, Some(0), "{text:?}");
    let id = episodes[0]["id"].as_u64().expect("an episode id");
    assert!(text.stdout.contains(&format!("#{id} T1 ")), "{text:?}");
    assert!(
        text.stdout
            .contains("exact_failure -> escalate (escalated)"),
        "{text:?}"
    );

    let other = json(&run([
        "log", "--store", &url, "--task", "nobody", "--format", "json",
    ]));
    assert_eq!(other["episodes"], Value::Array(Vec::new()));
}

#[test]
fn a_store_url_that_names_no_backend_stops_before_any_work() {
    let trace = trace("exact_failure.jsonl");
    let run = run([
        "--no-semantic".as_ref(),
        "replay".as_ref(),
        trace.as_os_str(),
        "--store".as_ref(),
        "mysql://root@localhost/db".as_ref(),
    ]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stdout.is_empty(), "{run:?}");
    assert!(run.stderr.contains("mysql://root@localhost/db"), "{run:?}");
    assert!(run.stderr.contains("sqlite://PATH"), "{run:?}");
}

/// The same against PostgreSQL when `LOOPGUARD_TEST_POSTGRES_URL` is set
/// (in a schema of this run's own, dropped at the end); skipped with a
/// notice when it is not, failed when the server is unreachable.
#[test]
fn a_replay_into_postgres_is_read_back() {
    let Some(schema) = PgSchema::create("store_read_back") else {
        return;
    };
    let url = schema.url.clone();

    let replay = replay_into("exact_failure.jsonl", &url);
    let tasks = run(["tasks", "--store", &url, "--format", "json"]);
    let log = run(["log", "--store", &url, "--task", "T1", "--format", "json"]);
    drop(schema);

    assert_eq!(replay.code, Some(0), "{replay:?}");
    let tasks = json(&tasks);
    assert_eq!(tasks["tasks"][0]["task"], "T1", "{tasks}");
    assert_eq!(tasks["tasks"][0]["status"], "escalated", "{tasks}");
    assert_eq!(tasks["tasks"][0]["episodes"], 1, "{tasks}");
    let log = json(&log);
    assert_eq!(log["episodes"][0]["intervention"], "escalate", "{log}");
}

/// A replay of a file into a durable store writes each decision out once
/// its event is committed, not in blocks at the end. The file is a named
/// pipe that stays open: a block-buffered replay would print nothing while
/// it waits for more input, so this test would time out.
#[test]
fn a_replay_into_sqlite_prints_each_decision_once_it_is_committed() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;

    let folder = tempfile::tempdir().expect("a temporary folder");
    let url = sqlite_url(&folder);
    let fifo = folder.path().join("live.jsonl");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success(), "mkfifo {}", fifo.display());
    let mut child = loopguard()
        .args(["--no-semantic", "replay"])
        .arg(&fifo)
        .args(["--format", "jsonl", "--store", &url])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("loopguard replay starts");
    let mut writer = std::fs::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .expect("the pipe opens once the replay reads it");
    const SENT: u64 = 30;
    for n in 0..SENT {
        writeln!(
            writer,
            r#"{{"type":"failure","task":"T{}","agent":"coder","error":"assertion failed: x == {n}"}}"#,
            n % 3
        )
        .expect("written");
    }
    writer.flush().expect("flushed");
    // Read the decisions while the input is still open (on a thread, so
    // a replay that holds them back fails the test instead of hanging it).
    let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut line = String::new();
        for _ in 0..SENT {
            line.clear();
            if stdout.read_line(&mut line).unwrap_or(0) == 0 {
                break;
            }
            let _ = tx.send(line.clone());
        }
        stdout
    });
    let printed: Vec<String> = (0..SENT)
        .map_while(|_| rx.recv_timeout(std::time::Duration::from_secs(60)).ok())
        .collect();
    assert_eq!(
        printed.len() as u64,
        SENT,
        "every decision is printed while the input is still open"
    );
    // Each printed decision's event is committed already.
    let stored = store_report(&url);
    assert_eq!(stored["events"].as_u64(), Some(SENT), "{stored}");
    drop(writer);
    let _ = reader.join();
    let status = child.wait().expect("the replay ends with its input");
    assert!(status.success(), "{status:?}");
}

/// `report --task T` is the whole report's entry for T (read by its id,
/// not by scanning every task), with T's own count of events; the events
/// of all tasks add up to the whole report's.
#[test]
fn one_tasks_report_is_its_entry_in_the_whole_report() {
    let folder = tempfile::tempdir().expect("a temp folder");
    let url = sqlite_url(&folder);
    let replay = replay_into("tool_calls.jsonl", &url);
    assert_eq!(replay.code, Some(0), "{replay:?}");
    let whole = json(&run(["report", "--store", &url, "--format", "json"]));
    let tasks = whole["tasks"].as_array().expect("a list of tasks");
    assert!(tasks.len() >= 3, "{whole}");
    assert!(
        tasks
            .iter()
            .any(|task| task["detections"].as_array().is_some_and(|d| !d.is_empty())),
        "some task has detections: {whole}"
    );
    let mut events = 0;
    for task in tasks {
        let id = task["task"].as_str().expect("a task id");
        let one = json(&run([
            "report", "--store", &url, "--task", id, "--format", "json",
        ]));
        assert_eq!(one["tasks"], Value::Array(vec![task.clone()]), "{id}");
        events += one["events"].as_u64().expect("a count of events");
    }
    assert_eq!(Some(events), whole["events"].as_u64(), "{whole}");
    let nobody = json(&run([
        "report", "--store", &url, "--task", "nobody", "--format", "json",
    ]));
    assert_eq!(nobody["tasks"], Value::Array(Vec::new()), "{nobody}");
    assert_eq!(nobody["events"], 0, "{nobody}");
}

/// Ruling 18 through the store: `tasks` and `report --store` show each
/// task's spend as the replay's decisions left it, and the text summary
/// adds a spend column and the total.
#[test]
fn spend_is_listed_by_tasks_and_report_as_the_replay_left_it() {
    let folder = tempfile::tempdir().expect("a temp folder");
    let url = sqlite_url(&folder);
    let config = folder.path().join("spend.toml");
    std::fs::write(
        &config,
        "[budget]\nmax_loop_cost_usd = 0.05\n\
         [pricing.gpt-4o-mini]\ninput_per_mtok = 0.15\noutput_per_mtok = 0.6\n",
    )
    .expect("the config is written");
    let trace = trace("spend_budget.jsonl");
    let replay = |format: &str, store: Option<&str>| {
        let mut args: Vec<&OsStr> = vec![
            "--no-semantic".as_ref(),
            "replay".as_ref(),
            trace.as_os_str(),
            "--config".as_ref(),
            config.as_os_str(),
            "--format".as_ref(),
            format.as_ref(),
        ];
        if let Some(url) = store {
            args.extend([OsStr::new("--store"), OsStr::new(url)]);
        }
        run(args)
    };
    let replayed = replay("jsonl", Some(&url));
    assert_eq!(replayed.code, Some(0), "{replayed:?}");
    let decisions = parse_jsonl(&replayed.stdout);
    let last_usage = |task: &str| {
        decisions
            .iter()
            .rev()
            .find(|decision| decision["task"] == task && decision.get("usage").is_some())
            .map(|decision| decision["usage"].clone())
            .unwrap_or_else(|| panic!("{task} spent"))
    };

    let tasks = json(&run(["tasks", "--store", &url, "--format", "json"]));
    for task in tasks["tasks"].as_array().expect("tasks") {
        let name = task["task"].as_str().expect("a task id");
        assert_eq!(task["usage"], last_usage(name), "{name}");
    }
    let listed = run(["tasks", "--store", &url]);
    assert_eq!(listed.code, Some(0), "{listed:?}");
    assert!(
        listed
            .stdout
            .lines()
            .next()
            .is_some_and(|header| header.contains("SPEND"))
    );
    assert!(
        listed.stdout.contains("$0.1904 ($0.1800 in loops)"),
        "{listed:?}"
    );

    let report = json(&run(["report", "--store", &url, "--format", "json"]));
    for task in report["tasks"].as_array().expect("tasks") {
        let name = task["task"].as_str().expect("a task id");
        assert_eq!(task["usage"], last_usage(name), "{name}");
    }
    let report = run(["report", "--store", &url, "--format", "text"]);
    assert!(
        report.stdout.contains(
            "B: escalated, loop count 0, pivots 0, 4 detections, spent $0.1904 ($0.1800 in loops)"
        ),
        "{report:?}"
    );

    let text = replay("text", None);
    assert!(text.stdout.contains("spend"), "{text:?}");
    assert!(
        text.stdout.contains("spent $0.2706 ($0.2600 in loops)"),
        "the totals line: {text:?}"
    );
}
