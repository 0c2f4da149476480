//! `loopguard serve`, the real binary on 127.0.0.1:0: decisions over HTTP
//! equal `loopguard replay --format jsonl` on the same trace; a
//! non-loopback address without a token refuses to start; SIGTERM commits
//! every answered event; a restart on the same SQLite file keeps the tasks;
//! two servers on one PostgreSQL keep one exact count for a task fed
//! through both, and, while their database connections are cut again and
//! again, never answer backwards and store what a replay stores.
//! (The routes' own behaviour, auth and limits are tested in the serve
//! crate.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use loopguard_test_support::pg_faults::{BackendKiller, Terminations, Victims, application_name};
use serde_json::Value;

use crate::support::{
    PgSchema, http_request, loopguard, parse_jsonl, replay_jsonl, replay_report, run, sqlite_url,
    store_report, trace,
};

/// A running `loopguard serve`.
struct Serve {
    child: Child,
    addr: String,
    stderr: Arc<Mutex<String>>,
}

impl Serve {
    /// Starts `loopguard serve --listen 127.0.0.1:0 ARGS` and reads its
    /// address from stderr.
    fn start(args: &[&str]) -> Serve {
        let mut child = loopguard()
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("loopguard serve starts");
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr is piped"));
        let mut seen = String::new();
        let addr = loop {
            let mut line = String::new();
            let read = stderr.read_line(&mut line).expect("stderr is readable");
            assert!(read > 0, "the server stopped before listening: {seen}");
            seen.push_str(&line);
            if let Some(addr) = line.trim().strip_prefix("loopguard: listening on http://") {
                break addr.to_owned();
            }
        };
        let collected = Arc::new(Mutex::new(seen));
        let sink = Arc::clone(&collected);
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = stderr.read_to_string(&mut rest);
            if let Ok(mut all) = sink.lock() {
                all.push_str(&rest);
            }
        });
        Serve {
            child,
            addr,
            stderr: collected,
        }
    }

    /// One HTTP/1.1 request: the status and the body.
    fn request(&self, method: &str, path: &str, content_type: &str, body: &[u8]) -> (u16, String) {
        http_request(&self.addr, method, path, content_type, body)
    }

    /// `POST /v1/events` of NDJSON: the answer lines.
    fn events(&self, body: &[u8]) -> Vec<Value> {
        let (status, answer) = self.request("POST", "/v1/events", "application/x-ndjson", body);
        assert_eq!(status, 200, "{answer}");
        parse_jsonl(&answer)
    }

    /// `POST /v1/events` of one JSON event: its decision.
    fn event(&self, line: &str) -> Value {
        let (status, answer) =
            self.request("POST", "/v1/events", "application/json", line.as_bytes());
        assert_eq!(status, 200, "{answer}");
        serde_json::from_str(&answer).expect("a JSON decision")
    }

    fn get(&self, path: &str) -> (u16, Value) {
        let (status, body) = self.request("GET", path, "application/json", b"");
        (status, serde_json::from_str(&body).expect("a JSON body"))
    }

    /// SIGTERM, then the exit code and everything said on stderr.
    fn terminate(mut self) -> (Option<i32>, String) {
        let killed = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(killed.success());
        let status = self.child.wait().expect("the server exits");
        // The reader thread ends with the process's stderr.
        let mut stderr = String::new();
        for _ in 0..100 {
            stderr = self.stderr.lock().map(|s| s.clone()).unwrap_or_default();
            if stderr.contains("stopped") || stderr.contains("not written") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        (status.code(), stderr)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Traces with several detection kinds between them (and one with bad
/// lines, for the batch).
const TRACES: [&str; 6] = [
    "exact_failure.jsonl",
    "hub_team.jsonl",
    "human_gate.jsonl",
    "multi_agent.jsonl",
    "oscillation.jsonl",
    "tool_calls.jsonl",
];

#[test]
fn decisions_over_http_equal_replay_one_event_at_a_time_and_in_one_batch() {
    for name in TRACES {
        let replayed = replay_jsonl(name, &["--no-semantic"]);
        let text = std::fs::read_to_string(trace(name)).expect("the trace");
        let serve = Serve::start(&["--no-semantic", "--store", "memory"]);
        let one_by_one: Vec<Value> = text
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| serve.event(line))
            .collect();
        assert_eq!(one_by_one, replayed, "{name}, one event per request");
        let (code, _) = serve.terminate();
        assert_eq!(code, Some(0));

        let serve = Serve::start(&["--no-semantic", "--store", "memory"]);
        assert_eq!(serve.events(text.as_bytes()), replayed, "{name}, one batch");
    }
}

#[test]
fn a_batch_with_bad_lines_answers_like_replay() {
    let name = "bad_lines.jsonl";
    let replayed = replay_jsonl(name, &["--no-semantic"]);
    assert!(replayed.iter().any(|answer| answer.get("error").is_some()));
    let serve = Serve::start(&["--no-semantic", "--store", "memory"]);
    let bytes = std::fs::read(trace(name)).expect("the trace");
    assert_eq!(serve.events(&bytes), replayed);
}

#[test]
fn decisions_with_the_model_equal_replay_with_the_model() {
    let name = "semantic_collaboration.jsonl";
    let replayed = replay_jsonl(name, &[]);
    let serve = Serve::start(&["--store", "memory"]);
    let (status, ready) = serve.get("/readyz");
    assert_eq!(status, 200);
    assert_eq!(ready["semantic"], "loaded");
    let bytes = std::fs::read(trace(name)).expect("the trace");
    assert_eq!(serve.events(&bytes), replayed);
}

#[test]
fn a_non_loopback_address_without_a_token_refuses_to_start() {
    let run = run([
        "serve",
        "--no-semantic",
        "--store",
        "memory",
        "--listen",
        "0.0.0.0:0",
    ]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert_eq!(run.stderr.lines().count(), 1, "one message: {}", run.stderr);
    assert!(
        run.stderr
            .contains("refusing to listen on 0.0.0.0:0 without a token"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("[serve] token"), "{}", run.stderr);
}

#[test]
fn sigterm_commits_every_answered_event_and_a_restart_keeps_the_tasks() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let url = sqlite_url(&dir.path().join("serve.sqlite"));
    let name = "exact_failure.jsonl";
    let text = std::fs::read_to_string(trace(name)).expect("the trace");
    let events: Vec<&str> = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .collect();

    let serve = Serve::start(&["--no-semantic", "--store", &url]);
    for line in &events {
        serve.event(line);
    }
    let (code, stderr) = serve.terminate();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("every answered event is committed"),
        "{stderr}"
    );

    // The store holds what a replay of the trace reports.
    let stored = store_report(&url);
    let replayed = replay_report(name, &["--no-semantic"]);
    assert_eq!(stored["tasks"], replayed["tasks"]);
    assert_eq!(stored["events"], events.len());
    assert_eq!(stored["last_committed_line"], events.len());

    // A restart on the same file: the tasks are there, the gate still
    // holds, and line numbers go on.
    let serve = Serve::start(&["--no-semantic", "--store", &url]);
    let (status, tasks) = serve.get("/v1/tasks");
    assert_eq!(status, 200);
    let listed: Vec<&Value> = tasks["tasks"].as_array().expect("a list").iter().collect();
    let expected = replayed["tasks"].as_array().expect("a list");
    assert_eq!(listed.len(), expected.len());
    for (listed, expected) in listed.iter().zip(expected) {
        assert_eq!(listed["task"], expected["task"]);
        assert_eq!(listed["status"], expected["status"]);
        assert_eq!(listed["loop_count"], expected["loop_count"]);
    }
    let escalated = expected
        .iter()
        .find(|task| task["status"] == "escalated")
        .and_then(|task| task["task"].as_str())
        .expect("the trace escalates a task");
    let gated = serve.event(events[events.len() - 1]);
    assert_eq!(
        gated["line"],
        events.len() + 1,
        "lines go on after a restart"
    );
    let (status, human) = serve.request(
        "POST",
        &format!("/v1/tasks/{escalated}/human"),
        "application/json",
        br#"{"note":"fixed the key"}"#,
    );
    assert_eq!(status, 200, "{human}");
    let human: Value = serde_json::from_str(&human).expect("a decision");
    assert_eq!(human["status"], "active");
    let (code, stderr) = serve.terminate();
    assert_eq!(code, Some(0), "{stderr}");
    let stored = store_report(&url);
    assert_eq!(stored["events"], events.len() + 2);
    let task = stored["tasks"]
        .as_array()
        .and_then(|tasks| tasks.iter().find(|task| task["task"] == escalated))
        .expect("the task");
    assert_eq!(task["status"], "active");
}

/// What a decision says, without the line numbers (two servers on one
/// store number their lines each on its own).
fn verdict(decision: &Value) -> Value {
    let detections: Vec<Value> = decision["detections"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|detection| {
            serde_json::json!({
                "kind": detection["kind"],
                "severity": detection["severity"],
                "action": detection["action"],
                "loop_count": detection["loop_count"],
            })
        })
        .collect();
    serde_json::json!({
        "task": decision["task"],
        "action": decision["action"],
        "loop_count": decision["loop_count"],
        "status": decision["status"],
        "pivots": decision["pivots"],
        "detections": detections,
    })
}

#[test]
fn two_servers_on_one_postgres_keep_one_count_for_a_task_fed_through_both() {
    let Some(schema) = PgSchema::create("serve_fleet") else {
        return;
    };
    let first = Serve::start(&["--no-semantic", "--store", &schema.url]);
    let second = Serve::start(&["--no-semantic", "--store", &schema.url]);

    // One event through each in turn: every decision is what one engine
    // replaying the whole trace decides.
    for name in [
        "exact_failure.jsonl",
        "human_gate.jsonl",
        "oscillation.jsonl",
    ] {
        let text = std::fs::read_to_string(trace(name)).expect("the trace");
        // Each trace's tasks get a prefix of their own in the shared store.
        let prefixed = text.replace("\"task\":\"", &format!("\"task\":\"{name}-"));
        let through_both: Vec<Value> = prefixed
            .lines()
            .filter(|line| !line.trim().is_empty())
            .enumerate()
            .map(|(index, line)| {
                let server = if index % 2 == 0 { &first } else { &second };
                verdict(&server.event(line))
            })
            .collect();
        let replayed: Vec<Value> = replay_jsonl(name, &["--no-semantic"])
            .iter()
            .map(|decision| {
                let mut decision = decision.clone();
                if let Some(task) = decision["task"].as_str() {
                    decision["task"] = Value::String(format!("{name}-{task}"));
                }
                verdict(&decision)
            })
            .collect();
        assert_eq!(through_both, replayed, "{name} through both servers");
    }

    // Both at once on one task: the same failure from two clients through
    // the two servers. Identical events make the order irrelevant, so the
    // stored task must be exactly what one replay of all of them stores.
    const EACH: usize = 12;
    let failure = r#"{"type":"failure","task":"fleet","agent":"coder","error":"assertion failed: total == 12"}"#;
    std::thread::scope(|scope| {
        for server in [&first, &second] {
            scope.spawn(move || {
                for _ in 0..EACH {
                    server.event(failure);
                }
            });
        }
    });
    let (status, task) = first.get("/v1/tasks/fleet");
    assert_eq!(status, 200, "{task}");
    let (status, same) = second.get("/v1/tasks/fleet");
    assert_eq!(status, 200, "{same}");
    assert_eq!(task, same, "both servers read one task");
    let dir = tempfile::tempdir().expect("a temporary folder");
    let all = dir.path().join("all.jsonl");
    std::fs::write(&all, format!("{failure}\n").repeat(2 * EACH)).expect("written");
    let replay = run([
        "replay",
        "--no-semantic",
        "--format",
        "json",
        all.to_str().expect("a UTF-8 path"),
    ]);
    assert_eq!(replay.code, Some(0), "{}", replay.stderr);
    let replayed: Value = serde_json::from_str(&replay.stdout).expect("a JSON report");
    let expected = &replayed["tasks"][0];
    for key in ["status", "loop_count", "pivots"] {
        assert_eq!(task[key], expected[key], "{key}: {task} vs {expected}");
    }
    assert_eq!(
        task["detections"].as_array().map(Vec::len),
        expected["detections"].as_array().map(Vec::len),
        "every detection once: {task}"
    );
    for server in [first, second] {
        let (code, stderr) = server.terminate();
        assert_eq!(code, Some(0), "{stderr}");
    }
}

#[test]
fn a_segfaulting_plugin_cannot_end_serve() {
    // No isolation in the config: serve runs the plugin in a worker process
    // by default, and each segfault is a fault of that event's decision.
    let library = crate::plugins::plugin("loopguard-fixture-crashy");
    let dir = tempfile::tempdir().expect("a temporary folder");
    let config = dir.path().join("loopguard.toml");
    std::fs::write(
        &config,
        format!(
            "[[plugins]]\npath = '{}'\nconfig = {{ crash_at = [3, 6], how = \"segv\" }}\n",
            library.display()
        ),
    )
    .expect("config written");
    let config = config.to_string_lossy().into_owned();
    let serve = Serve::start(&["--no-semantic", "--store", "memory", "--config", &config]);
    let text = std::fs::read_to_string(trace("plugin_crash.jsonl")).expect("the trace");
    let decisions: Vec<Value> = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serve.event(line))
        .collect();
    assert_eq!(decisions.len(), 10, "every event answered");
    let faulted: Vec<(u64, Value)> = decisions
        .iter()
        .filter(|decision| decision.get("errors").is_some())
        .map(|decision| {
            (
                decision["line"].as_u64().unwrap_or(0),
                decision["errors"].clone(),
            )
        })
        .collect();
    assert_eq!(
        faulted,
        [3, 6].map(|line| {
            let fault = if line == 3 { 1 } else { 2 };
            (
                line,
                serde_json::json!([format!(
                    "detector crashy: its worker was killed by SIGSEGV (fault {fault} of 3)"
                )]),
            )
        })
    );
    // The built-in detectors decided as a replay without the plugin does.
    let bare = replay_jsonl("plugin_crash.jsonl", &["--no-semantic"]);
    let escalations = |decisions: &[Value]| -> Vec<u64> {
        decisions
            .iter()
            .filter(|decision| decision["action"] == "escalate")
            .filter_map(|decision| decision["line"].as_u64())
            .collect()
    };
    assert!(!escalations(&bare).is_empty());
    assert_eq!(escalations(&decisions), escalations(&bare));
    let (status, body) = serve.request("GET", "/healthz", "text/plain", b"");
    assert_eq!(status, 200, "{body}");
    let (code, stderr) = serve.terminate();
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn sigterm_ends_serve_within_the_grace_period_while_stalled_bodies_hold_connections() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let config = dir.path().join("loopguard.toml");
    std::fs::write(
        &config,
        "[serve]\nbody_timeout_ms = 60000\nshutdown_grace_ms = 1000\n",
    )
    .expect("config written");
    let config = config.to_string_lossy().into_owned();
    let serve = Serve::start(&["--no-semantic", "--store", "memory", "--config", &config]);
    let answered = serve
        .event(r#"{"type":"handoff","task":"T1","from":"planner","to":"coder","content":"go"}"#);
    assert_eq!(answered["task"], "T1");
    // Ten requests whose bodies stop halfway, as a stalled client sends.
    let stalled: Vec<TcpStream> = (0..10)
        .map(|_| {
            let mut stream = TcpStream::connect(&serve.addr).expect("the server accepts");
            stream
                .write_all(
                    b"POST /v1/events HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
                      content-length: 100\r\n\r\n{\"type\":",
                )
                .expect("sent");
            stream
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let started = std::time::Instant::now();
    let (code, stderr) = serve.terminate();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "SIGTERM ended serve within the 1 s grace period, not {:?}: {stderr}",
        started.elapsed()
    );
    assert_eq!(code, Some(0), "{stderr}");
    drop(stalled);
}

/// The events of four tasks in turn (`rounds` of each): one looping on a
/// failure until it escalates, one reset by `human` now and then, one by
/// `completed`, one ping-ponging between two agents.
fn fleet_events(rounds: usize) -> Vec<String> {
    let mut events = Vec::with_capacity(rounds * 4);
    for n in 0..rounds {
        let (from, to) = if n % 2 == 0 {
            ("planner", "coder")
        } else {
            ("coder", "planner")
        };
        events.push(
            r#"{"type":"failure","task":"F-esc","agent":"coder","error":"E1 mismatched types"}"#
                .to_owned(),
        );
        events.push(if n % 4 == 1 {
            r#"{"type":"human","task":"F-human","note":"go on"}"#.to_owned()
        } else {
            r#"{"type":"failure","task":"F-human","agent":"coder","error":"E2"}"#.to_owned()
        });
        events.push(if n % 5 == 2 {
            r#"{"type":"completed","task":"F-done"}"#.to_owned()
        } else {
            r#"{"type":"failure","task":"F-done","agent":"coder","error":"E3"}"#.to_owned()
        });
        events.push(format!(
            r#"{{"type":"handoff","task":"F-pair","from":"{from}","to":"{to}"}}"#
        ));
    }
    events
}

#[test]
fn two_servers_under_terminated_backends_never_answer_backwards_and_store_the_replay() {
    const TASKS: usize = 4;
    const FAULTS_FOR: Duration = Duration::from_secs(6);
    const FAULT_EVERY: Duration = Duration::from_millis(100);
    let Some(schema) = PgSchema::create("serve_fleet_faults") else {
        return;
    };
    let Ok(base) = std::env::var("LOOPGUARD_TEST_POSTGRES_URL") else {
        return;
    };
    let name = application_name("lg_serve_fleet");
    let url = format!("{}&application_name={name}", schema.url);
    let servers = [
        Serve::start(&["--no-semantic", "--store", &url]),
        Serve::start(&["--no-semantic", "--store", &url]),
    ];

    // Every backend of both servers terminated, 0.1 s apart, for 6 s, on
    // a runtime's thread while this one sends the events.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let killer = runtime
        .block_on(BackendKiller::start(
            &base,
            &name,
            Victims::All,
            FAULT_EVERY,
            Some(FAULTS_FOR),
        ))
        .expect("the killer connects");
    let events = fleet_events(100_000);
    let mut answered = Vec::new();
    for (index, event) in events.iter().enumerate() {
        if killer.is_over() {
            break;
        }
        // Each task's events alternate between the servers.
        let server = &servers[(index + index / TASKS) % 2];
        answered.push(server.event(event));
    }
    let Terminations { rounds, killed } =
        runtime.block_on(killer.finish()).expect("the killer ends");
    assert!(rounds >= 50, "{rounds} rounds of terminated backends");
    assert!(killed >= 50, "{killed} backends terminated");

    // The replay of the same events, in the same order, by one engine.
    let dir = tempfile::tempdir().expect("a temporary folder");
    let sent = dir.path().join("sent.jsonl");
    let mut text = events[..answered.len()].join("\n");
    text.push('\n');
    std::fs::write(&sent, text).expect("written");
    let path = sent.to_str().expect("a UTF-8 path");
    let replay = run(["replay", "--no-semantic", "--format", "jsonl", path]);
    assert_eq!(replay.code, Some(0), "{}", replay.stderr);
    let replayed = parse_jsonl(&replay.stdout);
    assert_eq!(replayed.len(), answered.len());
    let mut degraded = 0;
    for (at, (got, want)) in answered.iter().zip(&replayed).enumerate() {
        if got["degraded"] == true {
            degraded += 1;
            continue;
        }
        assert_eq!(
            verdict(got),
            verdict(want),
            "decision {at} ({degraded} degraded so far)"
        );
    }

    // SIGTERM writes what waits; the store then holds what the replay
    // decided for every task.
    for server in servers {
        let (code, stderr) = server.terminate();
        assert_eq!(code, Some(0), "{stderr}");
    }
    let stored = store_report(&schema.url);
    let report = run(["replay", "--no-semantic", "--format", "json", path]);
    assert_eq!(report.code, Some(0), "{}", report.stderr);
    let report: Value = serde_json::from_str(&report.stdout).expect("a JSON report");
    for want in report["tasks"].as_array().expect("tasks") {
        let got = stored["tasks"]
            .as_array()
            .and_then(|tasks| tasks.iter().find(|task| task["task"] == want["task"]))
            .unwrap_or_else(|| panic!("{} stored", want["task"]));
        for key in ["status", "loop_count", "pivots"] {
            assert_eq!(got[key], want[key], "{key}: {got} vs {want}");
        }
        let kinds = |task: &Value| -> Vec<Value> {
            task["detections"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|detection| detection["kind"].clone())
                .collect()
        };
        assert_eq!(kinds(got), kinds(want), "{}'s detections", want["task"]);
    }
    eprintln!(
        "serve fleet: {} events, {killed} backends terminated in {rounds} rounds, {degraded} degraded decisions",
        answered.len()
    );
}
