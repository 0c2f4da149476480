//! Hostile and broken clients: bodies that stall, headers that never end,
//! more requests than places, and a shutdown with such connections open.

use std::time::Duration;

use loopguard_serve::ServeOptions;
use reqwest::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::Running;

/// A POST whose headers promise 100 bytes of body and which then sends 8.
async fn stalled_body(addr: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.expect("the server accepts");
    stream
        .write_all(
            b"POST /v1/events HTTP/1.1\r\nhost: loopguard\r\ncontent-type: application/json\r\n\
              content-length: 100\r\n\r\n{\"type\":",
        )
        .await
        .expect("sent");
    stream
}

/// Everything the server sends until it closes the connection, or what it
/// sent within `within` if it keeps it open.
async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> String {
    closed_within(stream, within).await.0
}

/// What the server sent, and whether it closed the connection within
/// `within` (a bound against hanging, not a measured time).
async fn closed_within(stream: &mut TcpStream, within: Duration) -> (String, bool) {
    let mut answer = Vec::new();
    let closed = tokio::time::timeout(within, stream.read_to_end(&mut answer))
        .await
        .is_ok();
    (String::from_utf8_lossy(&answer).into_owned(), closed)
}

/// Whether the server has sent nothing on `stream` yet (and not closed it).
fn nothing_answered_yet(stream: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(stream.try_read(&mut byte), Err(err) if err.kind() == std::io::ErrorKind::WouldBlock)
}

/// `GET /metrics`.
async fn metrics(server: &Running) -> String {
    server
        .request(reqwest::Method::GET, "/metrics")
        .send()
        .await
        .expect("an answer")
        .text()
        .await
        .expect("a body")
}

/// A request that holds its place a while once its body is read: 60,000
/// events in one NDJSON body (the server needs `body_limit_bytes` of a few
/// MiB). Its status when answered.
pub(crate) fn busy_request(
    server: &Running,
) -> tokio::task::JoinHandle<Result<StatusCode, reqwest::Error>> {
    let body: String = (0..60_000)
        .map(|n| {
            format!("{{\"type\":\"handoff\",\"task\":\"T{n}\",\"from\":\"a\",\"to\":\"b\"}}\n")
        })
        .collect();
    let request = server
        .request(reqwest::Method::POST, "/v1/events")
        .header("content-type", "application/x-ndjson")
        .body(body);
    tokio::spawn(async move { request.send().await.map(|answer| answer.status()) })
}

fn options(body_timeout: Duration) -> ServeOptions {
    ServeOptions {
        body_timeout,
        header_timeout: Duration::from_millis(500),
        ..ServeOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seventy_stalled_bodies_take_no_place_and_are_answered_408() {
    let body_timeout = Duration::from_secs(5);
    let server = Running::start(options(body_timeout)).await;
    assert_eq!(
        ServeOptions::default().queue,
        64,
        "more stalled bodies than places"
    );
    let mut stalled = Vec::new();
    for _ in 0..70 {
        stalled.push(stalled_body(server.addr()).await);
    }

    // Every other client is served at once, writes included.
    let tasks = server
        .request(reqwest::Method::GET, "/v1/tasks")
        .send()
        .await
        .expect("an answer");
    assert_eq!(tasks.status(), StatusCode::OK);
    let event = server
        .request(reqwest::Method::POST, "/v1/events")
        .header("content-type", "application/json")
        .body(r#"{"type":"handoff","task":"T1","from":"a","to":"b","content":"go"}"#)
        .send()
        .await
        .expect("an answer");
    assert_eq!(event.status(), StatusCode::OK, "{:?}", event.text().await);
    let ready = server
        .request(reqwest::Method::GET, "/readyz")
        .send()
        .await
        .expect("an answer");
    assert_eq!(ready.status(), StatusCode::OK, "nothing is overloaded");
    // Served while every stalled body was still waiting for its timeout.
    assert!(
        stalled.iter().all(nothing_answered_yet),
        "the other clients were answered before any stalled body timed out"
    );

    // Each stalled body is answered 408 once its time is up.
    for stream in &mut stalled {
        let answer = read_until_closed(stream, Duration::from_secs(10)).await;
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.contains("serve.body_timeout_ms"), "{answer}");
    }
    let metrics = metrics(&server).await;
    assert!(
        metrics.contains(r#"loopguard_refused_total{reason="body_timeout"} 70"#),
        "{metrics}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_that_never_end_are_closed_after_the_header_timeout() {
    let server = Running::start(options(Duration::from_secs(5))).await;
    let mut stream = TcpStream::connect(server.addr()).await.expect("accepts");
    stream
        .write_all(b"POST /v1/events HTTP/1.1\r\nhost: loopguard\r\n")
        .await
        .expect("sent");
    let (answer, closed) = closed_within(&mut stream, Duration::from_secs(10)).await;
    assert!(closed, "the connection is closed: {answer}");
    assert!(answer.is_empty(), "closed unanswered: {answer}");
    let metrics = metrics(&server).await;
    assert!(
        metrics.contains(r#"loopguard_refused_total{reason="header_timeout"} 1"#),
        "{metrics}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_are_closed_and_counted() {
    let mut options = options(Duration::from_secs(30));
    options.max_connections = 3;
    let server = Running::start(options).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(stalled_body(server.addr()).await);
    }
    // Give the server time to accept the three.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut fourth = TcpStream::connect(server.addr()).await.expect("accepted");
    let _ = fourth
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: loopguard\r\n\r\n")
        .await;
    let answer = read_until_closed(&mut fourth, Duration::from_secs(5)).await;
    assert!(answer.is_empty(), "closed unanswered: {answer}");
    drop(held);
    // Places free again: the same request is answered.
    let mut answered = String::new();
    for _ in 0..50 {
        let mut stream = TcpStream::connect(server.addr()).await.expect("accepted");
        let _ = stream
            .write_all(b"GET /metrics HTTP/1.1\r\nhost: loopguard\r\nconnection: close\r\n\r\n")
            .await;
        answered = read_until_closed(&mut stream, Duration::from_secs(5)).await;
        if answered.starts_with("HTTP/1.1 200") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
    assert!(
        answered.contains(r#"loopguard_refused_total{reason="connections"}"#),
        "{answered}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_says_not_ready_while_every_place_is_taken() {
    let mut options = options(Duration::from_secs(30));
    options.queue = 1;
    options.body_limit_bytes = 64 << 20;
    let server = Running::start(options).await;
    let busy = busy_request(&server);
    let mut overloaded = None;
    while !busy.is_finished() {
        let ready = server
            .request(reqwest::Method::GET, "/readyz")
            .send()
            .await
            .expect("an answer");
        if ready.status() == StatusCode::SERVICE_UNAVAILABLE {
            overloaded = Some(ready.text().await.expect("a body"));
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let said = overloaded.expect("/readyz said not ready while the one place was taken");
    assert!(said.contains("overloaded"), "{said}");
    let status = busy.await.expect("the request task").expect("an answer");
    assert_eq!(status, StatusCode::OK);
    let ready = server
        .request(reqwest::Method::GET, "/readyz")
        .send()
        .await
        .expect("an answer");
    assert_eq!(ready.status(), StatusCode::OK);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_within_the_grace_with_stalled_connections_open() {
    let mut options = options(Duration::from_secs(60));
    options.shutdown_grace = Duration::from_millis(500);
    let server = Running::start(options).await;
    let answered = server
        .request(reqwest::Method::POST, "/v1/events")
        .header("content-type", "application/json")
        .body(r#"{"type":"handoff","task":"T1","from":"a","to":"b","content":"go"}"#)
        .send()
        .await
        .expect("an answer");
    assert_eq!(answered.status(), StatusCode::OK);
    let mut stalled = Vec::new();
    for _ in 0..10 {
        stalled.push(stalled_body(server.addr()).await);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The stalled bodies would hold a graceful shutdown for their 60 s
    // body timeout; the grace of 0.5 s closes them long before this bound.
    let finished = tokio::time::timeout(Duration::from_secs(10), server.stop())
        .await
        .expect("the server stops after its grace, despite the stalled connections");
    assert_eq!(finished.lost, 0);
    assert_eq!(finished.last_line, 1, "the answered event is committed");
    for stream in &mut stalled {
        let _ = read_until_closed(stream, Duration::from_secs(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed_after_the_header_timeout() {
    let server = Running::start(options(Duration::from_secs(5))).await;
    let mut stream = TcpStream::connect(server.addr()).await.expect("accepts");
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: loopguard\r\n\r\n")
        .await
        .expect("sent");
    let (answer, closed) = closed_within(&mut stream, Duration::from_secs(10)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        closed,
        "the idle connection is closed by the header timeout"
    );
    let metrics = metrics(&server).await;
    assert!(
        metrics.contains(r#"loopguard_refused_total{reason="header_timeout"} 1"#),
        "{metrics}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_beyond_the_per_connection_limit_are_answered_431() {
    let server = Running::start(ServeOptions {
        max_header_bytes: 16 * 1024,
        ..options(Duration::from_secs(5))
    })
    .await;
    let mut stream = TcpStream::connect(server.addr()).await.expect("accepts");
    let padding = "x".repeat(64 * 1024);
    let head = format!("GET /healthz HTTP/1.1\r\nhost: loopguard\r\nx-padding: {padding}\r\n\r\n");
    let _ = stream.write_all(head.as_bytes()).await;
    let answer = read_until_closed(&mut stream, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    // A request within the limit is answered.
    let health = server
        .request(reqwest::Method::GET, "/healthz")
        .send()
        .await
        .expect("an answer");
    assert_eq!(health.status(), StatusCode::OK);
    server.stop().await;
}
