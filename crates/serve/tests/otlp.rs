//! `POST /v1/traces`, the OTLP/HTTP receiver, over a real socket: exports
//! built here (protobuf through prost, OTLP/JSON, gzipped), out-of-order
//! batches, the flush delay, bad bodies, shutdown with a trace still
//! buffered (into SQLite, with a model call's usage), and the real client: an OpenAI Agents SDK agent
//! in a Python venv this test makes, exporting through OpenTelemetry's own
//! instrumentation and OTLP exporter.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use loopguard_host::store_report;
use loopguard_serve::ServeOptions;
use loopguard_serve::otlp_proto::{
    AnyValue, ExportTraceServiceRequest, ExportTraceServiceResponse, KeyValue, ResourceSpans,
    ScopeSpans, Span, Status, any_value,
};
use prost::Message;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// How long a test waits for something the server does in the background
/// before it fails (generous: the machine may be busy; nothing here is
/// timed).
const PATIENCE: Duration = Duration::from_secs(60);

mod common;

use common::Running;

impl Running {
    fn traces(&self, content_type: &str, body: Vec<u8>) -> reqwest::RequestBuilder {
        self.authed(reqwest::Method::POST, "/v1/traces")
            .header("content-type", content_type)
            .body(body)
    }

    /// Posts a protobuf export; asserts a 200 with no rejected spans.
    async fn export(&self, spans: Vec<Span>) {
        let answer = self
            .traces("application/x-protobuf", request(spans).encode_to_vec())
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), StatusCode::OK);
        assert_eq!(
            answer.headers()["content-type"],
            "application/x-protobuf",
            "answered in the request's encoding"
        );
        let body = answer.bytes().await.expect("a body");
        let response = ExportTraceServiceResponse::decode(body).expect("a response message");
        assert_eq!(response.partial_success, None);
    }

    async fn get(&self, path: &str) -> reqwest::Response {
        self.authed(reqwest::Method::GET, path)
            .send()
            .await
            .expect("an answer")
    }

    async fn tasks(&self) -> Value {
        let answer = self.get("/v1/tasks").await;
        assert_eq!(answer.status(), StatusCode::OK);
        answer.json().await.expect("JSON")
    }

    /// The task's entry in `GET /v1/tasks`, once it is there.
    async fn wait_for_task(&self, task: &str) -> Value {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let tasks = self.tasks().await;
            if let Some(found) = tasks["tasks"]
                .as_array()
                .and_then(|tasks| tasks.iter().find(|t| t["task"] == task))
            {
                return found.clone();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "task {task} never appeared in {tasks}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn text(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.to_owned())),
        }),
    }
}

fn int(key: &str, value: i64) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::IntValue(value)),
        }),
    }
}

fn request(spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: None,
            scope_spans: vec![ScopeSpans { spans }],
        }],
    }
}

/// The trace id's hex: the task the mapping names after the trace.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

const SECOND: u64 = 1_000_000_000;
/// 2026-01-01T00:00:00Z.
const EPOCH: u64 = 1_767_225_600 * SECOND;

fn span(trace: [u8; 16], id: u8, parent: Option<u8>, name: &str, times: (u64, u64)) -> Span {
    Span {
        trace_id: trace.to_vec(),
        span_id: vec![0, 0, 0, 0, 0, 0, 0, id],
        parent_span_id: parent.map_or_else(Vec::new, |p| vec![0, 0, 0, 0, 0, 0, 0, p]),
        name: name.to_owned(),
        start_time_unix_nano: EPOCH + times.0 * SECOND,
        end_time_unix_nano: EPOCH + times.1 * SECOND,
        attributes: Vec::new(),
        events: Vec::new(),
        status: Some(Status {
            message: String::new(),
            code: 1,
        }),
    }
}

/// A trace as an agent framework exports it: a workflow root (1), an agent
/// (2), a model call (3), then `calls` calls of one tool with the same
/// arguments and the same (informative) result, inside the agent. With
/// `same: false`, every call reads another file.
fn tool_loop(trace: [u8; 16], calls: u8, same: bool) -> Vec<Span> {
    let end = 100 + u64::from(calls);
    let mut root = span(trace, 1, None, "Agent Workflow", (1, end + 2));
    root.attributes
        .push(text("traceloop.span.kind", "workflow"));
    let mut agent = span(trace, 2, Some(1), "Coder.agent", (2, end + 1));
    agent.attributes = vec![
        text("gen_ai.operation.name", "invoke_agent"),
        text("gen_ai.agent.name", "Coder"),
    ];
    let mut model = span(trace, 3, Some(2), "openai.response", (3, 4));
    model.attributes = vec![text("gen_ai.operation.name", "chat")];
    let mut spans = vec![root, agent, model];
    for n in 0..calls {
        let at = 10 + u64::from(n);
        let mut tool = span(trace, 10 + n, Some(2), "read_file.tool", (at, at));
        let file = if same {
            "src/main.rs".to_owned()
        } else {
            format!("src/module_{n}.rs")
        };
        tool.attributes = vec![
            text("gen_ai.operation.name", "execute_tool"),
            text("gen_ai.tool.name", "read_file"),
            text(
                "gen_ai.tool.call.arguments",
                &json!({ "path": file }).to_string(),
            ),
            text(
                "gen_ai.tool.call.result",
                &format!("fn main() {{ println!(\"{file}\"); }} // the whole file"),
            ),
        ];
        spans.push(tool);
    }
    // As a batch span processor exports them: in the order they ended.
    spans.sort_by_key(|span| span.end_time_unix_nano);
    spans
}

fn is_root(span: &Span) -> bool {
    span.parent_span_id.is_empty()
}

/// The same spans as OTLP/JSON.
fn as_json(spans: &[Span]) -> Value {
    let spans: Vec<Value> = spans
        .iter()
        .map(|span| {
            let attributes: Vec<Value> = span
                .attributes
                .iter()
                .map(|pair| {
                    let value = match pair.value.as_ref().and_then(|v| v.value.as_ref()) {
                        Some(any_value::Value::StringValue(text)) => json!({ "stringValue": text }),
                        other => panic!("only strings here: {other:?}"),
                    };
                    json!({ "key": pair.key, "value": value })
                })
                .collect();
            json!({
                "traceId": hex(&span.trace_id),
                "spanId": hex(&span.span_id),
                "parentSpanId": hex(&span.parent_span_id),
                "name": span.name,
                "kind": 1,
                "startTimeUnixNano": span.start_time_unix_nano.to_string(),
                "endTimeUnixNano": span.end_time_unix_nano.to_string(),
                "attributes": attributes,
                "status": { "code": 1 },
            })
        })
        .collect();
    json!({ "resourceSpans": [{
        "resource": { "attributes": [{ "key": "service.name", "value": { "stringValue": "app" } }] },
        "scopeSpans": [{ "scope": { "name": "test" }, "spans": spans }],
    }]})
}

/// The value of the first metric line that starts with `prefix`.
fn metric(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|line| line.starts_with(prefix))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}

/// Whether the metrics count a detection of a stale tool call.
fn has_tool_detection(text: &str) -> bool {
    text.lines().any(|line| {
        line.starts_with("loopguard_detections_total{kind=\"tool_") && !line.ends_with(" 0")
    })
}

#[tokio::test]
async fn a_protobuf_tool_loop_is_decided_when_its_root_ends() {
    let server = Running::start(ServeOptions::default()).await;
    let trace = [7; 16];
    server.export(tool_loop(trace, 8, true)).await;
    let task = server.wait_for_task(&hex(&trace)).await;
    assert!(task["detections"].as_u64() > Some(0), "{task}");
    let kind = task["last_detection"]["kind"].as_str().unwrap_or_default();
    assert!(kind.starts_with("tool_"), "{task}");
    let metrics = server.metrics().await;
    // The agent and 8 tools accepted; the workflow root and the model call
    // ignored (neither is an agent nor a tool).
    assert_eq!(
        metric(&metrics, "loopguard_otlp_spans_total{outcome=\"accepted\"}"),
        Some(9.0),
        "{metrics}"
    );
    assert_eq!(
        metric(&metrics, "loopguard_otlp_spans_total{outcome=\"ignored\"}"),
        Some(2.0),
        "{metrics}"
    );
    assert!(has_tool_detection(&metrics), "{metrics}");
    assert_eq!(
        metric(&metrics, "loopguard_events_total{event_type=\"tool_call\"}"),
        Some(8.0),
        "{metrics}"
    );
    server.stop().await;
}

#[tokio::test]
async fn otlp_json_and_gzip_map_the_same_way() {
    let server = Running::start(ServeOptions::default()).await;
    let plain = [8; 16];
    let answer = server
        .traces(
            "application/json",
            as_json(&tool_loop(plain, 6, true)).to_string().into_bytes(),
        )
        .send()
        .await
        .expect("an answer");
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(answer.headers()["content-type"], "application/json");
    assert_eq!(
        answer.json::<Value>().await.expect("JSON"),
        json!({}),
        "an empty ExportTraceServiceResponse"
    );
    let zipped = [9; 16];
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gzip.write_all(as_json(&tool_loop(zipped, 6, true)).to_string().as_bytes())
        .expect("gzipped");
    let answer = server
        .traces("application/json", gzip.finish().expect("gzipped"))
        .header("content-encoding", "gzip")
        .send()
        .await
        .expect("an answer");
    assert_eq!(answer.status(), StatusCode::OK);
    let plain = server.wait_for_task(&hex(&plain)).await;
    let zipped = server.wait_for_task(&hex(&zipped)).await;
    assert!(plain["detections"].as_u64() > Some(0), "{plain}");
    assert_eq!(plain["detections"], zipped["detections"]);
    assert_eq!(plain["status"], zipped["status"]);
    server.stop().await;
}

#[tokio::test]
async fn out_of_order_batches_decide_as_one_in_order_batch() {
    let trace = [3; 16];
    let spans = tool_loop(trace, 7, true);
    // No flush delay within the test: only the root decides.
    let options = ServeOptions {
        otlp_flush: Duration::from_secs(3600),
        ..ServeOptions::default()
    };
    let whole = Running::start(options.clone()).await;
    let mut in_order = spans.clone();
    in_order.sort_by_key(|span| span.start_time_unix_nano);
    whole.export(in_order).await;
    let split = Running::start(options).await;
    // Children first (the root last, in a request of its own), each batch
    // backwards.
    let (mut root, mut children): (Vec<Span>, Vec<Span>) = spans.into_iter().partition(is_root);
    children.reverse();
    let later = children.split_off(children.len() / 2);
    split.export(later).await;
    split.export(children).await;
    assert_eq!(
        split.tasks().await["tasks"],
        json!([]),
        "nothing is decided before the root ends"
    );
    root.truncate(1);
    split.export(root).await;
    let task = hex(&trace);
    let one = whole.wait_for_task(&task).await;
    let two = split.wait_for_task(&task).await;
    assert!(one["detections"].as_u64() > Some(0), "{one}");
    assert_eq!(one, two);
    let one = whole.get(&format!("/v1/tasks/{task}")).await;
    let two = split.get(&format!("/v1/tasks/{task}")).await;
    assert_eq!(
        one.json::<Value>().await.expect("JSON")["detections"],
        two.json::<Value>().await.expect("JSON")["detections"]
    );
    whole.stop().await;
    split.stop().await;
}

#[tokio::test]
async fn a_trace_whose_root_never_comes_is_decided_after_the_flush_delay() {
    let server = Running::start(ServeOptions {
        otlp_flush: Duration::from_millis(50),
        ..ServeOptions::default()
    })
    .await;
    let trace = [4; 16];
    let children: Vec<Span> = tool_loop(trace, 6, true)
        .into_iter()
        .filter(|span| !is_root(span))
        .collect();
    server.export(children).await;
    let task = server.wait_for_task(&hex(&trace)).await;
    assert!(task["detections"].as_u64() > Some(0), "{task}");
    server.stop().await;
}

#[tokio::test]
async fn a_late_span_is_linked_to_its_agent_and_task_decided_before() {
    let server = Running::start(ServeOptions {
        otlp_flush: Duration::from_millis(50),
        ..ServeOptions::default()
    })
    .await;
    let trace = [10; 16];
    let mut spans = tool_loop(trace, 4, true);
    for span in spans.iter_mut().filter(|span| is_root(span)) {
        span.attributes
            .push(text("gen_ai.conversation.id", "conversation-late"));
    }
    // The root's export: decided at once.
    let late = spans
        .iter()
        .position(|span| span.span_id.ends_with(&[13]))
        .map(|at| spans.remove(at))
        .expect("the fourth call");
    server.export(spans).await;
    let before = server.wait_for_task("conversation-late").await;
    assert!(before["detections"].as_u64() > Some(0), "{before}");
    // The fourth call comes after: a batch of its own, decided after the
    // flush delay, still the agent's call in the conversation's task.
    server.export(vec![late]).await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let metrics = server.metrics().await;
        if metric(&metrics, "loopguard_events_total{event_type=\"tool_call\"}") == Some(4.0) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the late call was never decided: {metrics}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let tasks = server.tasks().await;
    assert_eq!(tasks["tasks"].as_array().map(Vec::len), Some(1), "{tasks}");
    let after = server.wait_for_task("conversation-late").await;
    assert_eq!(
        after["detections"].as_u64(),
        before["detections"].as_u64().map(|n| n + 1),
        "the late call repeats the agent's own call: {after}"
    );
    server.stop().await;
}

#[tokio::test]
async fn different_calls_are_no_loop() {
    let server = Running::start(ServeOptions::default()).await;
    let trace = [5; 16];
    server.export(tool_loop(trace, 8, false)).await;
    let task = server.wait_for_task(&hex(&trace)).await;
    assert_eq!(task["detections"], 0, "{task}");
    server.stop().await;
}

#[tokio::test]
async fn bad_bodies_are_answered_with_what_is_wrong() {
    let server = Running::start(ServeOptions {
        token: Some("otlp-token".into()),
        ..ServeOptions::default()
    })
    .await;
    // No token: 401, as every /v1 route.
    let answer = server
        .client
        .post(format!("{}/v1/traces", server.url))
        .header("content-type", "application/x-protobuf")
        .body(request(tool_loop([1; 16], 1, true)).encode_to_vec())
        .send()
        .await
        .expect("an answer");
    assert_eq!(answer.status(), StatusCode::UNAUTHORIZED);

    let answer = server
        .traces(
            "application/x-protobuf",
            b"\xff\xff\xff\xff not protobuf".to_vec(),
        )
        .send()
        .await
        .expect("an answer");
    assert_eq!(answer.status(), StatusCode::BAD_REQUEST);
    let body = answer.bytes().await.expect("a body");
    let message = String::from_utf8_lossy(&body);
    assert!(
        message.contains("not an OTLP ExportTraceServiceRequest in protobuf"),
        "{message}"
    );

    let answer = server
        .traces("application/json", b"{\"resourceSpans\": [".to_vec())
        .send()
        .await
        .expect("an answer");
    assert_eq!(answer.status(), StatusCode::BAD_REQUEST);
    let body: Value = answer.json().await.expect("a JSON status");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("not JSON")),
        "{body}"
    );

    let answer = server
        .traces("application/x-protobuf", b"not gzip".to_vec())
        .header("content-encoding", "gzip")
        .send()
        .await
        .expect("an answer");
    assert_eq!(answer.status(), StatusCode::BAD_REQUEST);

    for (content_type, encoding) in [("text/plain", None), ("application/x-protobuf", Some("br"))] {
        let mut request = server.traces(content_type, b"{}".to_vec());
        if let Some(encoding) = encoding {
            request = request.header("content-encoding", encoding);
        }
        let answer = request.send().await.expect("an answer");
        assert_eq!(answer.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
        let body: Value = answer.json().await.expect("a JSON error");
        assert!(
            body["error"]
                .as_str()
                .is_some_and(|e| e.contains("application/x-protobuf") || e.contains("gzip")),
            "{body}"
        );
    }

    // A span with a short trace id is rejected, the others are taken.
    let mut spans = tool_loop([6; 16], 3, true);
    spans[0].trace_id = vec![6; 3];
    let answer = server
        .traces("application/x-protobuf", request(spans).encode_to_vec())
        .send()
        .await
        .expect("an answer");
    assert_eq!(answer.status(), StatusCode::OK);
    let response = ExportTraceServiceResponse::decode(answer.bytes().await.expect("a body"))
        .expect("a response");
    let partial = response.partial_success.expect("a partial success");
    assert_eq!(partial.rejected_spans, 1);
    assert!(partial.error_message.contains("trace id"), "{partial:?}");
    let metrics = server.metrics().await;
    assert!(
        metric(&metrics, "loopguard_otlp_spans_total{outcome=\"ignored\"}") >= Some(1.0),
        "{metrics}"
    );
    server.stop().await;
}

#[tokio::test]
async fn shutdown_decides_the_traces_still_buffered_into_the_store() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite://{}", dir.path().join("serve.sqlite").display());
    let store = loopguard_store_sqlx::open_store(&url)
        .await
        .expect("the store opens");
    let server = Running::with_store(
        ServeOptions {
            // Far beyond the test: only shutdown can decide the trace.
            otlp_flush: Duration::from_secs(3600),
            ..ServeOptions::default()
        },
        store,
    )
    .await;
    let trace = [2; 16];
    let mut children: Vec<Span> = tool_loop(trace, 5, true)
        .into_iter()
        .filter(|span| !is_root(span))
        .collect();
    // The model call's usage (trace format 1.2): on the agent's next
    // event, its first tool call.
    for span in children
        .iter_mut()
        .filter(|span| span.name == "openai.response")
    {
        span.attributes.extend([
            int("gen_ai.usage.input_tokens", 1200),
            int("gen_ai.usage.output_tokens", 80),
            text("gen_ai.response.model", "gpt-4o-mini-2024-07-18"),
        ]);
    }
    server.export(children).await;
    assert_eq!(server.tasks().await["tasks"], json!([]), "still buffered");
    let finished = server.stop().await;
    assert_eq!(finished.lost, 0);
    assert!(finished.last_line >= 5, "{finished:?}");

    let store = loopguard_store_sqlx::open_store(&url)
        .await
        .expect("the store opens again");
    let report = store_report(store.as_ref(), None).await.expect("a report");
    store.close().await;
    assert_eq!(report.events, 5, "the five tool calls: {report:?}");
    let task = report
        .tasks
        .iter()
        .find(|task| task.task == hex(&trace))
        .expect("the trace's task");
    assert!(!task.detections.is_empty(), "{task:?}");
    let spent = task.usage.as_ref().expect("the model call's usage");
    assert_eq!(
        (spent.total.input_tokens, spent.total.output_tokens),
        (1200, 80),
        "{task:?}"
    );
}

// --- The real client: the OpenAI Agents SDK through OpenTelemetry. ---

/// The workspace's root.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A venv with the pinned requirements, made under the target directory
/// and reused while the requirements file is unchanged (its hash names the
/// venv). Panics with what is missing when it cannot be made.
fn venv() -> PathBuf {
    let requirements = workspace().join("tests/python/openai_agents_otlp.requirements.txt");
    let pinned = std::fs::read(&requirements)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", requirements.display()));
    // FNV-1a: a stable name for the file's content.
    let hash = pinned.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    });
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("otlp-venv-{hash:016x}"));
    let python = dir.join("bin/python");
    if dir.join(".complete").exists() && python.exists() {
        return python;
    }
    let interpreter = std::env::var("LOOPGUARD_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let _ = std::fs::remove_dir_all(&dir);
    let made = Command::new(&interpreter)
        .args(["-m", "venv"])
        .arg(&dir)
        .output();
    match made {
        Ok(output) if output.status.success() => {}
        Ok(output) => panic!(
            "cannot make a Python venv with `{interpreter} -m venv {}`: {}\nInstall Python 3 \
             with its venv module (Debian: apt-get install python3-venv), or name an \
             interpreter in LOOPGUARD_TEST_PYTHON.",
            dir.display(),
            String::from_utf8_lossy(&output.stderr)
        ),
        Err(err) => panic!(
            "cannot run `{interpreter}` to make the test's Python venv: {err}\nInstall Python 3 \
             (Debian: apt-get install python3 python3-venv), or name an interpreter in \
             LOOPGUARD_TEST_PYTHON."
        ),
    }
    let output = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-input",
            "--quiet",
            "-r",
        ])
        .arg(&requirements)
        .output()
        .unwrap_or_else(|err| panic!("cannot run pip in {}: {err}", dir.display()));
    assert!(
        output.status.success(),
        "pip could not install the pinned packages of {} (does this machine reach PyPI?):\n{}",
        requirements.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::write(dir.join(".complete"), &pinned).expect("the venv is marked complete");
    python
}

/// What one run of the agent script printed: its trace ids, and the input
/// and output tokens its scripted model reported.
struct AgentRun {
    ids: Vec<String>,
    tokens: (u64, u64),
}

/// Runs the agent script against `server`.
fn run_agent(python: &Path, server: &Running, mode: &str, gzip: bool) -> AgentRun {
    let script = workspace().join("tests/python/openai_agents_otlp.py");
    let mut command = Command::new(python);
    command
        .arg(&script)
        .args(["--mode", mode, "--calls", "8"])
        .env(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            format!("{}/v1/traces", server.url),
        )
        .env("OPENAI_API_KEY", "sk-dummy-not-used")
        .env("OTEL_SERVICE_NAME", "openai-agents-test")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_HEADERS");
    if let Some(token) = &server.token {
        command.env(
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            format!("Authorization=Bearer%20{token}"),
        );
    }
    if gzip {
        command.env("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip");
    }
    let output = command
        .output()
        .unwrap_or_else(|err| panic!("cannot run {}: {err}", script.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{} --mode {mode} failed:\n{stdout}\n{stderr}",
        script.display()
    );
    assert!(
        !stderr.contains("Failed to export"),
        "the exporter was refused:\n{stderr}"
    );
    let ids: Vec<String> = stdout
        .lines()
        .filter_map(|line| line.strip_prefix("trace_id="))
        .map(str::to_owned)
        .collect();
    assert!(!ids.is_empty(), "no trace id printed:\n{stdout}\n{stderr}");
    let tokens = stdout
        .lines()
        .find_map(|line| line.strip_prefix("tokens="))
        .and_then(|tokens| tokens.split_once(','))
        .and_then(|(input, output)| Some((input.parse().ok()?, output.parse().ok()?)))
        .unwrap_or_else(|| panic!("no tokens printed:\n{stdout}"));
    AgentRun { ids, tokens }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_agents_sdk_exports_a_tool_loop_that_is_caught() {
    let python = tokio::task::spawn_blocking(venv)
        .await
        .expect("the venv is made");
    let server = Arc::new(
        Running::start(ServeOptions {
            token: Some("agents-sdk".into()),
            ..ServeOptions::default()
        })
        .await,
    );
    let run = |mode: &'static str, gzip: bool| {
        let python = python.clone();
        let server = Arc::clone(&server);
        tokio::task::spawn_blocking(move || run_agent(&python, &server, mode, gzip))
    };
    let looping = run("loop", false).await.expect("the script ran");
    let normal = run("normal", true).await.expect("the script ran");
    let spent = (
        looping.tokens.0 + normal.tokens.0,
        looping.tokens.1 + normal.tokens.1,
    );
    let (looping, normal) = (looping.ids, normal.ids);
    assert_eq!(looping.len(), 1, "one trace: {looping:?}");
    assert_eq!(normal.len(), 1, "one trace: {normal:?}");

    let task = server.wait_for_task(&looping[0]).await;
    assert!(task["detections"].as_u64() > Some(0), "{task}");
    let kind = task["last_detection"]["kind"].as_str().unwrap_or_default();
    assert!(kind.starts_with("tool_"), "{task}");
    let task = server.wait_for_task(&normal[0]).await;
    assert_eq!(task["detections"], 0, "{task}");

    let metrics = server.metrics().await;
    assert!(
        metric(&metrics, "loopguard_otlp_spans_total{outcome=\"accepted\"}") >= Some(11.0),
        "{metrics}"
    );
    assert!(has_tool_detection(&metrics), "{metrics}");
    // Every model call's usage, read from the instrumentation's
    // `gen_ai.usage.*` attributes, reached the tasks' spend.
    assert_eq!(
        (
            metric(&metrics, "loopguard_tokens_total{direction=\"input\"}"),
            metric(&metrics, "loopguard_tokens_total{direction=\"output\"}"),
        ),
        (Some(spent.0 as f64), Some(spent.1 as f64)),
        "{metrics}"
    );
    assert_eq!(
        metric(&metrics, "loopguard_events_total{event_type=\"tool_call\"}"),
        Some(11.0),
        "8 calls of the loop and 3 of the normal run: {metrics}"
    );
    assert_eq!(
        metric(&metrics, "loopguard_events_total{event_type=\"handoff\"}"),
        Some(2.0),
        "the triage agent hands to the weather agent in each run: {metrics}"
    );
    let Ok(server) = Arc::try_unwrap(server) else {
        panic!("the server is still shared");
    };
    server.stop().await;
}
