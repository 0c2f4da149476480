//! The server's routes over a real socket: the router on a listener bound
//! to 127.0.0.1:0, reqwest as the client. (The binary's tests, against
//! `loopguard replay` and across restarts and SIGTERM, are in
//! tests/integration/serve.rs.)

use std::net::SocketAddr;
use std::sync::Arc;

use loopguard_serve::{ServeOptions, check_listen};
use reqwest::StatusCode;
use serde_json::{Value, json};

mod answers;
mod common;
mod hostile;

use common::Running;

impl Running {
    fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.request(reqwest::Method::POST, path)
    }

    fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.request(reqwest::Method::GET, path)
    }

    async fn events(&self, body: &str) -> reqwest::Response {
        self.post("/v1/events")
            .header("content-type", "application/x-ndjson")
            .body(body.to_owned())
            .send()
            .await
            .expect("an answer")
    }
}

fn lines(body: &str) -> Vec<Value> {
    body.lines()
        .map(|line| serde_json::from_str(line).expect("each answer line is JSON"))
        .collect()
}

const FAILURE: &str =
    r#"{"type":"failure","task":"T1","agent":"coder","error":"assertion failed: x == 3"}"#;

#[tokio::test]
async fn one_event_gets_its_decision_and_ndjson_a_line_per_input_line_even_past_a_bad_one() {
    let server = Running::start(ServeOptions::default()).await;
    let one = server
        .post("/v1/events")
        .header("content-type", "application/json")
        .body(FAILURE)
        .send()
        .await
        .expect("an answer");
    assert_eq!(one.status(), StatusCode::OK);
    let decision: Value = one.json().await.expect("a JSON decision");
    assert_eq!(decision["task"], "T1");
    assert_eq!(decision["action"], "none");
    assert_eq!(decision["line"], 1);

    let batch =
        format!("{FAILURE}\n{{\"type\":\"failure\",\"task\":\"T1\"}}\n\n{FAILURE}\n{FAILURE}\n");
    let answer = server.events(&batch).await;
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(
        answer.headers()["content-type"],
        "application/x-ndjson",
        "NDJSON in, NDJSON out"
    );
    let answers = lines(&answer.text().await.expect("a body"));
    // Four non-blank lines: three decisions and one error, in order.
    assert_eq!(answers.len(), 4, "{answers:?}");
    assert_eq!(answers[0]["action"], "warn", "the second identical failure");
    assert_eq!(answers[1]["line"], 2, "error lines are per request");
    let error = answers[1]["error"].as_str().expect("an error message");
    assert!(error.contains("agent"), "names the missing field: {error}");
    // The blank line is skipped; the rest go on, on the same engine.
    assert_eq!(answers[2]["task"], "T1");
    assert_eq!(answers[3]["action"], "escalate", "{:?}", answers[3]);
    assert_eq!(answers[3]["status"], "escalated");
    server.stop().await;
}

#[tokio::test]
async fn a_single_bad_event_is_a_400_naming_the_field_and_other_content_types_a_415() {
    let server = Running::start(ServeOptions::default()).await;
    let answer = server
        .post("/v1/events")
        .header("content-type", "application/json")
        .body(r#"{"type":"failure","task":"T1","agent":"coder"}"#)
        .send()
        .await
        .expect("an answer");
    assert_eq!(answer.status(), StatusCode::BAD_REQUEST);
    let body: Value = answer.json().await.expect("a JSON error");
    assert_eq!(body["line"], 1);
    let error = body["error"].as_str().expect("a message");
    assert!(
        error.contains("error"),
        "names the missing `error` field: {error}"
    );

    let answer = server
        .post("/v1/events")
        .header("content-type", "text/plain")
        .body(FAILURE)
        .send()
        .await
        .expect("an answer");
    assert_eq!(answer.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    server.stop().await;
}

#[tokio::test]
async fn with_a_token_every_api_request_needs_it_and_health_never_does() {
    let server = Running::start(ServeOptions {
        token: Some("s3cret".into()),
        ..ServeOptions::default()
    })
    .await;
    let post = |token: Option<&str>| {
        let mut request = server
            .post("/v1/events")
            .header("content-type", "application/json")
            .body(FAILURE);
        if let Some(token) = token {
            request = request.header("authorization", token);
        }
        request.send()
    };
    let missing = post(None).await.expect("an answer");
    assert_eq!(missing.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(missing.headers()["www-authenticate"], "Bearer");
    for wrong in ["Bearer s3cre", "Bearer s3cret2", "s3cret", "Basic s3cret"] {
        let answer = post(Some(wrong)).await.expect("an answer");
        assert_eq!(answer.status(), StatusCode::UNAUTHORIZED, "{wrong}");
    }
    let right = post(Some("Bearer s3cret")).await.expect("an answer");
    assert_eq!(right.status(), StatusCode::OK);

    let tasks = server.get("/v1/tasks").send().await.expect("an answer");
    assert_eq!(
        tasks.status(),
        StatusCode::UNAUTHORIZED,
        "reads of task data too"
    );
    let tasks = server
        .get("/v1/tasks")
        .bearer_auth("s3cret")
        .send()
        .await
        .expect("an answer");
    assert_eq!(tasks.status(), StatusCode::OK);
    for path in ["/healthz", "/readyz", "/metrics"] {
        let answer = server.get(path).send().await.expect("an answer");
        assert_eq!(answer.status(), StatusCode::OK, "{path}");
    }
    let unknown = server
        .get("/v1/no-such-route")
        .send()
        .await
        .expect("an answer");
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND, "not a 401");
    server.stop().await;
}

#[tokio::test]
async fn a_body_over_the_limit_is_a_413() {
    let server = Running::start(ServeOptions {
        body_limit_bytes: 256,
        ..ServeOptions::default()
    })
    .await;
    let small = server.events(FAILURE).await;
    assert_eq!(small.status(), StatusCode::OK);
    let big = format!("{FAILURE}\n").repeat(4);
    let answer = server.events(&big).await;
    assert_eq!(answer.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let body: Value = answer.json().await.expect("a JSON error");
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.contains("body_limit_bytes"))
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_beyond_the_queue_is_a_503_and_the_held_one_still_completes() {
    let server = Running::start(ServeOptions {
        queue: 1,
        body_limit_bytes: 64 << 20,
        ..ServeOptions::default()
    })
    .await;
    // A request whose body has been read holds the one place while its
    // many events are decided. A listing may take the place first, and the
    // busy request is then the one turned away: it is sent again, a few
    // times at most.
    let mut attempt = 0;
    let (held, refused) = loop {
        attempt += 1;
        let held = hostile::busy_request(&server);
        if let Some(refused) = refused_while_held(&server, &held).await {
            break (held, refused);
        }
        // It lost the place to a listing (503), or was decided between two
        // listings (200): either way, again.
        let status = held.await.expect("the request task").expect("an answer");
        assert!(
            matches!(status, StatusCode::OK | StatusCode::SERVICE_UNAVAILABLE),
            "{status}"
        );
        assert!(attempt < 5, "a request beyond the queue is refused");
    };
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.headers()["retry-after"], "1");
    // Health is not queued.
    let health = server.get("/healthz").send().await.expect("an answer");
    assert_eq!(health.status(), StatusCode::OK);
    // The held request completes, and its place is free again.
    let status = held.await.expect("the request task").expect("an answer");
    assert_eq!(status, StatusCode::OK);
    let after = server.get("/v1/tasks").send().await.expect("an answer");
    assert_eq!(after.status(), StatusCode::OK);
    server.stop().await;
}

/// Asks for the task list until one request is turned away while `held`
/// is decided (bounded: no assertion on time); `None` when `held` ended
/// first.
async fn refused_while_held(
    server: &Running,
    held: &tokio::task::JoinHandle<Result<StatusCode, reqwest::Error>>,
) -> Option<reqwest::Response> {
    while !held.is_finished() {
        let answer = server.get("/v1/tasks").send().await.expect("an answer");
        if answer.status() != StatusCode::OK {
            return Some(answer);
        }
        tokio::task::yield_now().await;
    }
    None
}

#[tokio::test]
async fn tasks_list_and_report_what_was_fed_and_an_unknown_task_is_a_404() {
    let server = Running::start(ServeOptions::default()).await;
    let trace = format!(
        "{FAILURE}\n{FAILURE}\n{}\n",
        r#"{"type":"turn","task":"T2","agent":"coder","output":"done","success":true}"#
    );
    assert_eq!(server.events(&trace).await.status(), StatusCode::OK);
    let tasks: Value = server
        .get("/v1/tasks")
        .send()
        .await
        .expect("an answer")
        .json()
        .await
        .expect("JSON");
    let tasks = tasks["tasks"].as_array().expect("a list");
    assert_eq!(tasks.len(), 2);
    assert_eq!(tasks[0]["task"], "T1");
    assert_eq!(tasks[0]["status"], "active");
    assert_eq!(tasks[1]["task"], "T2");
    assert_eq!(tasks[1]["loop_count"], 0);
    assert_eq!(tasks[0]["detections"], 1);
    assert_eq!(tasks[0]["last_detection"]["kind"], "exact_failure");
    assert_eq!(tasks[0]["last_detection"]["line"], 2);
    assert_eq!(tasks[1]["last_detection"], Value::Null);

    let task = server.get("/v1/tasks/T1").send().await.expect("an answer");
    assert_eq!(task.status(), StatusCode::OK);
    let task: Value = task.json().await.expect("JSON");
    assert_eq!(task["task"], "T1");
    assert_eq!(task["loop_count"], 1);
    assert_eq!(task["detections"][0]["kind"], "exact_failure");
    assert_eq!(task["cycle_log"][0]["task"], "T1", "{task}");

    let unknown = server
        .get("/v1/tasks/nope")
        .send()
        .await
        .expect("an answer");
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    let body: Value = unknown.json().await.expect("a JSON error");
    assert!(body["error"].as_str().is_some_and(|e| e.contains("nope")));
    server.stop().await;
}

#[tokio::test]
async fn human_lifts_the_gate_of_an_escalated_task() {
    let server = Running::start(ServeOptions::default()).await;
    let answers = lines(
        &server
            .events(&format!("{FAILURE}\n").repeat(4))
            .await
            .text()
            .await
            .expect("a body"),
    );
    assert_eq!(answers[3]["status"], "escalated");
    let human = server
        .post("/v1/tasks/T1/human")
        .json(&json!({ "note": "keyed the cache by tenant" }))
        .send()
        .await
        .expect("an answer");
    assert_eq!(human.status(), StatusCode::OK);
    let decision: Value = human.json().await.expect("a decision");
    assert_eq!(decision["task"], "T1");
    assert_eq!(decision["status"], "active");
    assert_eq!(decision["loop_count"], 0);
    assert_eq!(decision["line"], 5, "the next line after the batch's four");
    // Without a body, too; a body with an unknown key is refused.
    let bare = server
        .post("/v1/tasks/T1/human")
        .send()
        .await
        .expect("an answer");
    assert_eq!(bare.status(), StatusCode::OK);
    let typo = server
        .post("/v1/tasks/T1/human")
        .json(&json!({ "note": "x", "notes": "y" }))
        .send()
        .await
        .expect("an answer");
    assert_eq!(typo.status(), StatusCode::BAD_REQUEST);
    let task: Value = server
        .get("/v1/tasks/T1")
        .send()
        .await
        .expect("an answer")
        .json()
        .await
        .expect("JSON");
    assert_eq!(task["status"], "active");
    server.stop().await;
}

#[tokio::test]
async fn shutdown_reports_the_last_line_answered() {
    let server = Running::start(ServeOptions::default()).await;
    server.events(&format!("{FAILURE}\n").repeat(3)).await;
    let finished = server.stop().await;
    assert_eq!(finished.last_line, 3);
    assert_eq!(finished.lost, 0);
}

#[test]
fn a_non_loopback_address_needs_a_token() {
    let any: SocketAddr = "0.0.0.0:7878".parse().expect("an address");
    let err = check_listen(any, None).expect_err("refused");
    assert!(err.to_string().contains("token"), "{err}");
    assert!(check_listen(any, Some("")).is_err());
    assert!(check_listen(any, Some("t")).is_ok());
    for local in ["127.0.0.1:7878", "[::1]:7878"] {
        let local: SocketAddr = local.parse().expect("an address");
        assert!(check_listen(local, None).is_ok());
    }
}

/// tests/traces/human_gate.jsonl: failures escalated, a human, more
/// failures.
fn human_gate() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/traces/human_gate.jsonl"
    ))
    .expect("the trace")
}

/// The value of the sample `name` (with its labels, as written) in a
/// Prometheus text exposition; 0 when it is not there.
fn sample(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| {
            let (key, value) = line.rsplit_once(' ')?;
            (key == name).then(|| value.parse().ok()).flatten()
        })
        .unwrap_or(0.0)
}

#[tokio::test]
async fn metrics_count_what_the_decisions_said() {
    let server = Running::start(ServeOptions::default()).await;
    let mut trace = human_gate();
    trace.push_str("not json\n{\"type\":\"completed\",\"task\":\"T1\"}\n");
    // An unknown type is a line error (the trace format's rule).
    trace.push_str("{\"type\":\"my_own_type\",\"task\":\"T2\"}\n");
    trace.push_str(
        "{\"type\":\"turn\",\"task\":\"T2\",\"agent\":\"a\",\"output\":\"x\",\"success\":true}\n",
    );
    let answers = lines(&server.events(&trace).await.text().await.expect("a body"));
    let decisions: Vec<&Value> = answers
        .iter()
        .filter(|a| a.get("action").is_some())
        .collect();
    let text = server.metrics().await;
    // Every event by its type, the unknown one as `other`.
    let mut by_type: std::collections::BTreeMap<String, f64> = Default::default();
    for line in trace.lines().filter(|line| line.starts_with('{')) {
        let event: Value = serde_json::from_str(line).expect("JSON");
        let kind = event["type"].as_str().unwrap_or_default();
        if kind != "my_own_type" {
            *by_type.entry(kind.to_owned()).or_default() += 1.0;
        }
    }
    for (kind, count) in &by_type {
        let name = format!("loopguard_events_total{{event_type=\"{kind}\"}}");
        assert_eq!(sample(&text, &name), *count, "{name} in\n{text}");
    }
    assert_eq!(sample(&text, "loopguard_line_errors_total"), 2.0);
    // Every detection by its kind and action.
    let mut by_detection: std::collections::BTreeMap<(String, String), f64> = Default::default();
    for decision in &decisions {
        for detection in decision["detections"].as_array().into_iter().flatten() {
            let key = (
                detection["kind"].as_str().unwrap_or_default().to_owned(),
                detection["action"].as_str().unwrap_or_default().to_owned(),
            );
            *by_detection.entry(key).or_default() += 1.0;
        }
    }
    assert!(!by_detection.is_empty(), "the trace has detections");
    for ((kind, action), count) in &by_detection {
        let name = format!("loopguard_detections_total{{kind=\"{kind}\",action=\"{action}\"}}");
        assert_eq!(sample(&text, &name), *count, "{name} in\n{text}");
    }
    // The gate: T1 went behind it, a human lifted it, T1 completed.
    let gated = decisions
        .iter()
        .any(|d| d["status"] == "escalated" || d["status"] == "paused");
    assert!(gated, "the trace escalates");
    assert_eq!(sample(&text, "loopguard_tasks_seen_total"), 2.0);
    assert_eq!(sample(&text, "loopguard_tasks_gated_total"), 1.0);
    assert_eq!(sample(&text, "loopguard_tasks{status=\"completed\"}"), 1.0);
    assert_eq!(sample(&text, "loopguard_tasks{status=\"active\"}"), 1.0);
    assert_eq!(sample(&text, "loopguard_loops_per_task_count"), 1.0);
    // Its loops: the highest loop count before it completed.
    let most_loops = decisions
        .iter()
        .filter(|d| d["task"] == "T1")
        .filter_map(|d| d["loop_count"].as_f64())
        .fold(0.0, f64::max);
    assert!(most_loops > 0.0);
    assert_eq!(sample(&text, "loopguard_loops_per_task_sum"), most_loops);
    // Two resolutions: the human answers the first detections' gate, and the
    // completion ends the second episode (the failures after the human are
    // detected again).
    assert_eq!(sample(&text, "loopguard_resolution_seconds_count"), 2.0);
    assert_eq!(
        sample(&text, "loopguard_observe_seconds_count"),
        decisions.len() as f64
    );
    server.stop().await;
}

/// A webhook receiver on loopback: refuses the first `refuse` POSTs with a
/// 500, records the bodies of the others.
struct Receiver {
    url: String,
    received: tokio::sync::mpsc::UnboundedReceiver<Value>,
}

async fn receiver(refuse: usize) -> Receiver {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let (tx, received) = tokio::sync::mpsc::unbounded_channel();
    let refused = Arc::new(AtomicUsize::new(0));
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: axum::body::Bytes| {
            let tx = tx.clone();
            let refused = Arc::clone(&refused);
            async move {
                if refused.fetch_add(1, Ordering::SeqCst) < refuse {
                    return axum::http::StatusCode::INTERNAL_SERVER_ERROR;
                }
                let value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let _ = tx.send(value);
                axum::http::StatusCode::NO_CONTENT
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port");
    let addr = listener.local_addr().expect("an address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    Receiver {
        url: format!("http://{addr}/hook"),
        received,
    }
}

fn webhook_options(url: &str) -> ServeOptions {
    ServeOptions {
        webhook: Some(loopguard_serve::WebhookOptions {
            url: url.to_owned(),
            attempts: 3,
            timeout: std::time::Duration::from_secs(5),
            queue: 64,
        }),
        ..ServeOptions::default()
    }
}

#[tokio::test]
async fn the_webhook_gets_each_decision_with_an_action_in_order_retried_past_a_refusal() {
    let mut hook = receiver(1).await;
    let server = Running::start(webhook_options(&hook.url)).await;
    let trace = human_gate();
    let answers = lines(&server.events(&trace).await.text().await.expect("a body"));
    let with_action: Vec<&Value> = answers
        .iter()
        .filter(|a| a.get("action").is_some_and(|action| action != "none"))
        .collect();
    assert!(!with_action.is_empty(), "the trace asks for actions");
    // Stopping gives the worker time to send what waits.
    server.stop().await;
    let mut delivered = Vec::new();
    while let Ok(value) = hook.received.try_recv() {
        delivered.push(value);
    }
    let expected: Vec<Value> = with_action.into_iter().cloned().collect();
    assert_eq!(
        delivered, expected,
        "every decision with an action, once each, in order, the first after a 500"
    );
}

#[tokio::test]
async fn an_unreachable_webhook_never_holds_up_an_answer_and_is_counted() {
    // A port nothing listens on: bind, note it, close.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        listener.local_addr().expect("an address")
    };
    let mut options = webhook_options(&format!("http://{closed}/hook"));
    if let Some(webhook) = &mut options.webhook {
        webhook.attempts = 1;
        webhook.queue = 1;
    }
    let server = Running::start(options).await;
    let trace = human_gate();
    let answer = server.events(&trace).await;
    assert_eq!(answer.status(), StatusCode::OK);
    let answers = lines(&answer.text().await.expect("a body"));
    let with_action = answers
        .iter()
        .filter(|a| a.get("action").is_some_and(|action| action != "none"))
        .count() as f64;
    // Every decision with an action is either tried and failed, or dropped
    // from the one-place queue; poll until the worker has tried its last.
    let mut text = String::new();
    for _ in 0..200 {
        text = server.metrics().await;
        let failed = sample(&text, "loopguard_webhook_total{outcome=\"failed\"}");
        let dropped = sample(&text, "loopguard_webhook_total{outcome=\"dropped\"}");
        if failed + dropped == with_action {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(
        sample(&text, "loopguard_webhook_total{outcome=\"failed\"}")
            + sample(&text, "loopguard_webhook_total{outcome=\"dropped\"}"),
        with_action,
        "{text}"
    );
    assert_eq!(
        sample(&text, "loopguard_webhook_total{outcome=\"delivered\"}"),
        0.0
    );
    server.stop().await;
}

// ---- spend (trace format 1.2, ruling 18) -----------------------------------

/// A budget on the spend in loops and a price for the model the trace
/// names without a cost.
const SPEND_CONFIG: &str = "[budget]\nmax_loop_cost_usd = 0.05\n\
                            [pricing.gpt-4o-mini]\ninput_per_mtok = 0.15\noutput_per_mtok = 0.6\n";

fn spend_config() -> loopguard_config::Config {
    loopguard_config::Config::from_toml_str(SPEND_CONFIG).expect("a valid config")
}

/// tests/traces/spend_budget.jsonl: two tasks whose tool calls repeat,
/// with usage on their events, one taken past the budget.
fn spend_budget() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/traces/spend_budget.jsonl"
    ))
    .expect("the trace")
}

/// What one event spent, by hand: its own cost, else its tokens at the
/// price of SPEND_CONFIG (every model of the trace is a gpt-4o-mini).
fn spent_by_hand(event: &Value) -> (u64, u64, f64) {
    let usage = &event["usage"];
    let input = usage["input_tokens"].as_u64().unwrap_or(0);
    let output = usage["output_tokens"].as_u64().unwrap_or(0);
    let cost = usage["cost_usd"]
        .as_f64()
        .unwrap_or((input as f64 * 0.15 + output as f64 * 0.6) / 1e6);
    (input, output, cost)
}

#[tokio::test]
async fn the_spend_counters_are_the_sums_of_what_the_served_events_spent() {
    let server = Running::with_config(
        ServeOptions::default(),
        Arc::new(loopguard_host::MemoryStore::durable()),
        spend_config(),
    )
    .await;
    // Usage on every line: the trace without its human and completed events.
    let trace: String = spend_budget()
        .lines()
        .filter(|line| line.contains("\"usage\""))
        .map(|line| format!("{line}\n"))
        .collect();
    let answers = lines(&server.events(&trace).await.text().await.expect("a body"));
    let (mut input, mut output, mut cost) = (0, 0, 0.0);
    for line in trace.lines() {
        let (i, o, c) = spent_by_hand(&serde_json::from_str(line).expect("JSON"));
        input += i;
        output += o;
        cost += c;
    }
    // The spend in loops: each task's last running total.
    let mut in_loops: std::collections::BTreeMap<String, f64> = Default::default();
    let mut loop_kinds = std::collections::BTreeSet::new();
    for decision in &answers {
        let task = decision["task"].as_str().expect("a task").to_owned();
        let spent = decision["usage"]["in_loops"]["cost_usd"].as_f64();
        in_loops.insert(task, spent.unwrap_or(0.0));
        for detection in decision["detections"].as_array().into_iter().flatten() {
            loop_kinds.insert(detection["kind"].as_str().unwrap_or_default().to_owned());
        }
    }
    let loops: f64 = in_loops.values().sum();
    assert!(loops > 0.0, "the trace loops: {answers:?}");
    let text = server.metrics().await;
    let near = |name: &str, expected: f64| {
        let got = sample(&text, name);
        assert!(
            (got - expected).abs() < 1e-9,
            "{name} {got} != {expected} in\n{text}"
        );
    };
    near("loopguard_tokens_total{direction=\"input\"}", input as f64);
    near(
        "loopguard_tokens_total{direction=\"output\"}",
        output as f64,
    );
    near("loopguard_cost_usd_total", cost);
    // The spend in loops, under the kinds of the loops that named it.
    let by_kind: Vec<(String, f64)> = text
        .lines()
        .filter_map(|line| line.strip_prefix("loopguard_loop_cost_usd_total{kind=\""))
        .filter_map(|rest| {
            let (kind, value) = rest.split_once("\"} ")?;
            Some((kind.to_owned(), value.parse().ok()?))
        })
        .collect();
    assert!(!by_kind.is_empty(), "no loop cost in\n{text}");
    for (kind, _) in &by_kind {
        assert!(loop_kinds.contains(kind), "{kind} is a detected kind");
    }
    let counted: f64 = by_kind.iter().map(|(_, value)| value).sum();
    assert!((counted - loops).abs() < 1e-9, "{counted} != {loops}");
    server.stop().await;
}

#[tokio::test]
async fn the_webhook_gets_the_budget_detection_with_its_budget() {
    let mut hook = receiver(0).await;
    let server = Running::with_config(
        webhook_options(&hook.url),
        Arc::new(loopguard_host::MemoryStore::durable()),
        spend_config(),
    )
    .await;
    let answers = lines(
        &server
            .events(&spend_budget())
            .await
            .text()
            .await
            .expect("a body"),
    );
    server.stop().await;
    let mut delivered = Vec::new();
    while let Ok(value) = hook.received.try_recv() {
        delivered.push(value);
    }
    let is_budget = |decision: &&Value| {
        decision["detections"]
            .as_array()
            .is_some_and(|detections| detections.iter().any(|d| d["kind"] == "budget"))
    };
    let answered: Vec<&Value> = answers.iter().filter(is_budget).collect();
    let posted: Vec<&Value> = delivered.iter().filter(is_budget).collect();
    assert!(
        !answered.is_empty(),
        "the trace crosses the budget: {answers:?}"
    );
    assert_eq!(
        posted, answered,
        "each decision with a budget detection is posted"
    );
    let budget = posted[0]["detections"]
        .as_array()
        .and_then(|detections| detections.iter().find(|d| d["kind"] == "budget"))
        .map(|detection| &detection["budget"])
        .expect("a budget detection");
    assert_eq!(budget["limit"], "budget.max_loop_cost_usd");
    assert_eq!(budget["allowed"], 0.05);
    assert!(
        budget["spent"].as_f64().is_some_and(|spent| spent > 0.05),
        "{budget}"
    );
    assert!(
        budget["usage"]["in_loops"]["cost_usd"].as_f64().is_some(),
        "{budget}"
    );
    let loops = budget["costliest_loops"]
        .as_array()
        .expect("the costliest loops");
    assert!(!loops.is_empty(), "{budget}");
    assert!(
        loops[0]["evidence"]
            .as_array()
            .is_some_and(|lines| !lines.is_empty())
    );
    assert_eq!(posted[0]["action"], "escalate");
}
