//! Every refusal the server answers, byte for byte as a client reads it off
//! the socket (status line, headers but `date`, body): the status codes,
//! the headers that go with them and the bodies clients parse.

use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use loopguard_host::{CycleEpisode, Durability, Store, StoreError, TaskSnapshot};
use loopguard_serve::ServeOptions;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::Running;

/// A failure event with every field.
const FAILURE: &str =
    r#"{"type":"failure","task":"T1","agent":"coder","error":"assertion failed: x == 3"}"#;

/// One request, sent as is on its own connection (`connection: close`):
/// the answer with its `date` header left out ([`printable`]).
async fn raw(addr: &str, head: &str, body: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("the server accepts");
    let mut request = format!("{head}\r\nhost: loopguard\r\nconnection: close\r\n").into_bytes();
    if !body.is_empty() {
        request.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
    }
    request.extend_from_slice(b"\r\n");
    request.extend_from_slice(body);
    stream.write_all(&request).await.expect("sent");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("answered and closed in time")
        .expect("read");
    without_date(&printable(&answer))
}

/// `bytes` as text: printable ASCII as is, `\r` and `\n` as those two
/// escapes, any other byte as `\xNN`.
fn printable(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&byte| match byte {
            b'\r' => "\\r".to_owned(),
            b'\n' => "\\n".to_owned(),
            b' '..=b'~' => char::from(byte).to_string(),
            _ => format!("\\x{byte:02x}"),
        })
        .collect()
}

/// `answer` without its `date` header (the only part that changes).
fn without_date(answer: &str) -> String {
    answer
        .split("\\r\\n")
        .filter(|line| !line.starts_with("date: "))
        .collect::<Vec<_>>()
        .join("\\r\\n")
}

/// `body` gzipped.
fn gzip(body: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(body).expect("gzipped");
    encoder.finish().expect("gzipped")
}

/// Compares each answer with what it must be, naming every one that
/// differs.
fn check(answers: &[(&str, String, &str)]) {
    let wrong: Vec<String> = answers
        .iter()
        .filter(|(_, got, expected)| got != expected)
        .map(|(name, got, expected)| format!("{name}:\n  got      {got}\n  expected {expected}"))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test]
async fn requests_the_api_refuses_are_answered_as_clients_parse_them() {
    let server = Running::start(ServeOptions::default()).await;
    let addr = server.addr().to_owned();
    let long_task = "t".repeat(1100);
    let answers = [
        (
            "events as text/plain",
            raw(&addr, "POST /v1/events HTTP/1.1\r\ncontent-type: text/plain", FAILURE.as_bytes()).await,
            r#"HTTP/1.1 415 Unsupported Media Type\r\ncontent-type: application/json\r\ncontent-length: 125\r\nconnection: close\r\n\r\n{"error":"the content type is text/plain: send one event as application/json or many, one per line, as application/x-ndjson"}"#,
        ),
        (
            "events without a content type",
            raw(&addr, "POST /v1/events HTTP/1.1", FAILURE.as_bytes()).await,
            r#"HTTP/1.1 415 Unsupported Media Type\r\ncontent-type: application/json\r\ncontent-length: 122\r\nconnection: close\r\n\r\n{"error":"the content type is missing: send one event as application/json or many, one per line, as application/x-ndjson"}"#,
        ),
        (
            "one event without its error",
            raw(
                &addr,
                "POST /v1/events HTTP/1.1\r\ncontent-type: application/json",
                br#"{"type":"failure","task":"T1","agent":"coder"}"#,
            )
            .await,
            r#"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 71\r\nconnection: close\r\n\r\n{"error":"missing field \"error\" for event type \"failure\"","line":1}"#,
        ),
        (
            "one event, not UTF-8",
            raw(&addr, "POST /v1/events HTTP/1.1\r\ncontent-type: application/json", b"\xff\xfe").await,
            r#"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 97\r\nconnection: close\r\n\r\n{"error":"the body is not valid UTF-8 (invalid utf-8 sequence of 1 bytes from index 0)","line":1}"#,
        ),
        (
            "an unknown task",
            raw(&addr, "GET /v1/tasks/nope HTTP/1.1", b"").await,
            r#"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 41\r\nconnection: close\r\n\r\n{"error":"no task \"nope\" in the store"}"#,
        ),
        (
            "an unknown task's timeline",
            raw(&addr, "GET /v1/tasks/nope/timeline HTTP/1.1", b"").await,
            r#"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 41\r\nconnection: close\r\n\r\n{"error":"no task \"nope\" in the store"}"#,
        ),
        (
            "human with an unknown key",
            raw(&addr, "POST /v1/tasks/T1/human HTTP/1.1", br#"{"notes":"x"}"#).await,
            r#"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 116\r\nconnection: close\r\n\r\n{"error":"the body must be {\"note\": \"...\"} or empty: unknown field `notes`, expected `note` at line 1 column 8"}"#,
        ),
        (
            "human for a task id over the limit",
            raw(&addr, &format!("POST /v1/tasks/{long_task}/human HTTP/1.1"), b"").await,
            r#"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 98\r\nconnection: close\r\n\r\n{"error":"field \"task\" is 1100 bytes, longer than the limit of 1024 (limits.max_task_id_bytes)"}"#,
        ),
        (
            "traces as text/plain",
            raw(&addr, "POST /v1/traces HTTP/1.1\r\ncontent-type: text/plain", b"{}").await,
            r#"HTTP/1.1 415 Unsupported Media Type\r\ncontent-type: application/json\r\ncontent-length: 128\r\nconnection: close\r\n\r\n{"error":"the content type is text/plain: send an OTLP ExportTraceServiceRequest as application/x-protobuf or application/json"}"#,
        ),
        (
            "traces in brotli",
            raw(
                &addr,
                "POST /v1/traces HTTP/1.1\r\ncontent-type: application/json\r\ncontent-encoding: br",
                b"{}",
            )
            .await,
            r#"HTTP/1.1 415 Unsupported Media Type\r\ncontent-type: application/json\r\ncontent-length: 70\r\nconnection: close\r\n\r\n{"error":"the content encoding is br: send the body as is or gzipped"}"#,
        ),
        (
            "traces, protobuf, not gzip",
            raw(
                &addr,
                "POST /v1/traces HTTP/1.1\r\ncontent-type: application/x-protobuf\r\ncontent-encoding: gzip",
                b"not gzip",
            )
            .await,
            r#"HTTP/1.1 400 Bad Request\r\ncontent-type: application/x-protobuf\r\ncontent-length: 54\r\nconnection: close\r\n\r\n\x08\x03\x122the body is not valid gzip: unexpected end of file"#,
        ),
        (
            "traces, protobuf, garbage",
            raw(
                &addr,
                "POST /v1/traces HTTP/1.1\r\ncontent-type: application/x-protobuf",
                b"\xff\xff\xff",
            )
            .await,
            r#"HTTP/1.1 400 Bad Request\r\ncontent-type: application/x-protobuf\r\ncontent-length: 116\r\nconnection: close\r\n\r\n\x08\x03\x12pthe body is not an OTLP ExportTraceServiceRequest in protobuf: failed to decode Protobuf message: invalid varint"#,
        ),
        (
            "traces, JSON, not JSON",
            raw(&addr, "POST /v1/traces HTTP/1.1\r\ncontent-type: application/json", b"{").await,
            r#"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 113\r\nconnection: close\r\n\r\n{"code":3,"message":"the body is not JSON (an OTLP/JSON export): EOF while parsing an object at line 1 column 1"}"#,
        ),
        (
            "traces, JSON, no resourceSpans",
            raw(&addr, "POST /v1/traces HTTP/1.1\r\ncontent-type: application/json", br#"{"a":1}"#).await,
            r#"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 109\r\nconnection: close\r\n\r\n{"code":3,"message":"the body has no `resourceSpans` list: it is not an OTLP/JSON ExportTraceServiceRequest"}"#,
        ),
        (
            "a path that is no route",
            raw(&addr, "GET /v1/no-such-route HTTP/1.1", b"").await,
            r#"HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"#,
        ),
        (
            "health",
            raw(&addr, "GET /healthz HTTP/1.1", b"").await,
            r#"HTTP/1.1 200 OK\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"#,
        ),
    ];
    check(&answers);
    server.stop().await;
}

#[tokio::test]
async fn the_limits_and_the_token_are_answered_as_clients_parse_them() {
    let server = Running::start(ServeOptions {
        token: Some("s3cret".into()),
        body_limit_bytes: 256,
        body_timeout: Duration::from_millis(300),
        ..ServeOptions::default()
    })
    .await;
    let addr = server.addr().to_owned();
    let auth = "authorization: Bearer s3cret";
    let big = format!("{FAILURE}\n").repeat(4);
    let bomb = gzip(&[b' '; 4096]);
    assert!(bomb.len() < 256, "the gzipped body is within the limit");
    // A body that promises 100 bytes and sends 8.
    let mut stalled = TcpStream::connect(&addr).await.expect("accepts");
    stalled
        .write_all(
            format!(
                "POST /v1/events HTTP/1.1\r\nhost: loopguard\r\n{auth}\r\ncontent-type: \
                 application/json\r\ncontent-length: 100\r\n\r\n{{\"type\":"
            )
            .as_bytes(),
        )
        .await
        .expect("sent");
    let mut timed_out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stalled.read_to_end(&mut timed_out))
        .await
        .expect("answered in time")
        .expect("read");
    let answers = [
        (
            "no token",
            raw(&addr, "GET /v1/tasks HTTP/1.1", b"").await,
            r#"HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\nwww-authenticate: Bearer\r\ncontent-length: 82\r\nconnection: close\r\n\r\n{"error":"this server needs `Authorization: Bearer TOKEN` with its [serve] token"}"#,
        ),
        (
            "the wrong token",
            raw(
                &addr,
                "GET /v1/tasks HTTP/1.1\r\nauthorization: Bearer s3cre",
                b"",
            )
            .await,
            r#"HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\nwww-authenticate: Bearer\r\ncontent-length: 82\r\nconnection: close\r\n\r\n{"error":"this server needs `Authorization: Bearer TOKEN` with its [serve] token"}"#,
        ),
        (
            "a body over the limit",
            raw(
                &addr,
                &format!(
                    "POST /v1/events HTTP/1.1\r\n{auth}\r\ncontent-type: application/x-ndjson"
                ),
                big.as_bytes(),
            )
            .await,
            r#"HTTP/1.1 413 Payload Too Large\r\ncontent-type: application/json\r\ncontent-length: 58\r\nconnection: close\r\n\r\n{"error":"the body is larger than serve.body_limit_bytes"}"#,
        ),
        (
            "a gzipped body over the limit once decompressed",
            raw(
                &addr,
                &format!(
                    "POST /v1/traces HTTP/1.1\r\n{auth}\r\ncontent-type: application/json\r\n\
                     content-encoding: gzip"
                ),
                &bomb,
            )
            .await,
            r#"HTTP/1.1 413 Payload Too Large\r\ncontent-type: application/json\r\ncontent-length: 84\r\nconnection: close\r\n\r\n{"error":"the gzipped body is larger than serve.body_limit_bytes once decompressed"}"#,
        ),
        (
            "a body that did not arrive in time",
            without_date(&printable(&timed_out)),
            r#"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncontent-length: 73\r\n\r\n{"error":"the body did not arrive within 300 ms (serve.body_timeout_ms)"}"#,
        ),
    ];
    check(&answers);
    server.stop().await;
}

/// A store whose every read fails (its writes are dropped): what a
/// database that went away answers.
#[derive(Debug)]
struct Unreachable;

/// A store call's answer, as the `Store` trait returns it.
type Answer<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// The error every read of [`Unreachable`] returns.
fn unreachable() -> StoreError {
    StoreError::Backend {
        backend: "test".into(),
        message: "the database went away".into(),
    }
}

impl Store for Unreachable {
    fn durability(&self) -> Durability {
        Durability::Durable
    }

    fn group_commit(&self) -> bool {
        false
    }

    fn record_episode<'s, 'e, 'a>(&'s self, _: &'e CycleEpisode) -> Answer<'a, ()>
    where
        's: 'a,
        'e: 'a,
        Self: 'a,
    {
        Box::pin(async { Ok(()) })
    }

    fn save_task<'s, 't, 'a>(&'s self, _: &'t TaskSnapshot) -> Answer<'a, ()>
    where
        's: 'a,
        't: 'a,
        Self: 'a,
    {
        Box::pin(async { Ok(()) })
    }

    fn load_task<'s, 't, 'a>(&'s self, _: &'t str) -> Answer<'a, Option<TaskSnapshot>>
    where
        's: 'a,
        't: 'a,
        Self: 'a,
    {
        Box::pin(async { Err(unreachable()) })
    }

    fn tasks<'s, 'a>(&'s self) -> Answer<'a, Vec<TaskSnapshot>>
    where
        's: 'a,
        Self: 'a,
    {
        Box::pin(async { Err(unreachable()) })
    }

    fn episodes<'s, 't, 'a>(&'s self, _: Option<&'t str>) -> Answer<'a, Vec<CycleEpisode>>
    where
        's: 'a,
        't: 'a,
        Self: 'a,
    {
        Box::pin(async { Err(unreachable()) })
    }

    fn audit<'s, 't, 'a>(
        &'s self,
        _: Option<&'t str>,
    ) -> Answer<'a, Vec<loopguard_host::AuditEntry>>
    where
        's: 'a,
        't: 'a,
        Self: 'a,
    {
        Box::pin(async { Err(unreachable()) })
    }
}

#[tokio::test]
async fn a_store_that_does_not_answer_is_a_503_naming_it() {
    let server = Running::with_store(ServeOptions::default(), Arc::new(Unreachable)).await;
    let addr = server.addr().to_owned();
    let answers = [
        (
            "tasks",
            raw(&addr, "GET /v1/tasks HTTP/1.1", b"").await,
            r#"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: 53\r\nconnection: close\r\n\r\n{"error":"store: store test: the database went away"}"#,
        ),
        (
            "a task",
            raw(&addr, "GET /v1/tasks/T1 HTTP/1.1", b"").await,
            r#"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: 53\r\nconnection: close\r\n\r\n{"error":"store: store test: the database went away"}"#,
        ),
        (
            "a task's timeline",
            raw(&addr, "GET /v1/tasks/T1/timeline HTTP/1.1", b"").await,
            r#"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: 53\r\nconnection: close\r\n\r\n{"error":"store: store test: the database went away"}"#,
        ),
        (
            "the dashboard",
            raw(&addr, "GET /v1/dashboard HTTP/1.1", b"").await,
            r#"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: 53\r\nconnection: close\r\n\r\n{"error":"store: store test: the database went away"}"#,
        ),
        (
            "ready",
            raw(&addr, "GET /readyz HTTP/1.1", b"").await,
            r#"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: 88\r\nconnection: close\r\n\r\n{"ready":false,"reason":"the store does not answer: store test: the database went away"}"#,
        ),
    ];
    check(&answers);
    server.stop().await;
}
