//! One `POST /v1/events` of one event over loopback: a real server on
//! 127.0.0.1:0 (memory store, built-in detectors only, as `loopguard serve
//! --no-semantic --store memory`) and a keep-alive reqwest client. Each
//! request is a failure of its own task, so the engine's work stays the
//! same and the figure is the HTTP round trip plus one `observe`.
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use loopguard_config::Config;
use loopguard_host::{LoopGuard, MemoryStore};
use loopguard_serve::otlp_proto::{
    AnyValue, ExportTraceServiceRequest, KeyValue, ResourceSpans, ScopeSpans, Span, any_value,
};
use loopguard_serve::{ServeOptions, Server};
use prost::Message;

/// A runtime and a server on a free loopback port; the server's base URL.
fn server() -> (tokio::runtime::Runtime, String) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let url = runtime.block_on(async {
        let mut config = Config::default();
        config.semantic.enabled = false;
        let engine = LoopGuard::builder(config)
            .store(Arc::new(MemoryStore::durable()))
            .build()
            .expect("a valid config");
        let server = Server::start(engine, ServeOptions::default())
            .await
            .expect("the server starts");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free port");
        let addr = listener.local_addr().expect("an address");
        tokio::spawn(server.run(listener, std::future::pending()));
        format!("http://{addr}")
    });
    (runtime, url)
}

fn one_event(c: &mut Criterion) {
    let (runtime, url) = server();
    let url = format!("{url}/v1/events");
    let client = reqwest::Client::new();
    let next = AtomicU64::new(0);
    let mut group = c.benchmark_group("serve");
    group.throughput(Throughput::Elements(1));
    group.bench_function("post_one_event", |b| {
        b.to_async(&runtime).iter(|| {
            let n = next.fetch_add(1, Ordering::Relaxed);
            let body = format!(
                r#"{{"type":"failure","task":"T{n}","agent":"coder","error":"assertion failed: x == {n}"}}"#
            );
            let request = client
                .post(&url)
                .header("content-type", "application/json")
                .body(body);
            async move {
                let answer = request.send().await.expect("an answer");
                assert!(answer.status().is_success());
                black_box(answer.bytes().await.expect("a body"))
            }
        })
    });
    group.finish();
}

fn text(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.to_owned())),
        }),
    }
}

/// Trace `n`: a workflow root, an agent, eight tool calls.
fn small_trace(n: u64) -> Vec<u8> {
    let mut trace_id = [0u8; 16];
    trace_id[..8].copy_from_slice(&n.to_be_bytes());
    let start = 1_767_225_600_000_000_000u64;
    let span = |id: u8, parent: Option<u8>, at: u64, attributes: Vec<KeyValue>| Span {
        trace_id: trace_id.to_vec(),
        span_id: vec![0, 0, 0, 0, 0, 0, 0, id],
        parent_span_id: parent.map_or_else(Vec::new, |p| vec![0, 0, 0, 0, 0, 0, 0, p]),
        name: format!("span {id}"),
        start_time_unix_nano: start + at * 1_000_000,
        end_time_unix_nano: start + (at + 1) * 1_000_000,
        attributes,
        events: Vec::new(),
        status: None,
    };
    let mut spans = Vec::new();
    for call in 0..8u8 {
        spans.push(span(
            10 + call,
            Some(2),
            10 + u64::from(call),
            vec![
                text("gen_ai.operation.name", "execute_tool"),
                text("gen_ai.tool.name", "read_file"),
                text(
                    "gen_ai.tool.call.arguments",
                    &format!("{{\"path\": \"src/module_{call}.rs\"}}"),
                ),
                text(
                    "gen_ai.tool.call.result",
                    &format!("pub fn f{call}() {{}} // module {call}"),
                ),
            ],
        ));
    }
    spans.push(span(
        2,
        Some(1),
        2,
        vec![
            text("gen_ai.operation.name", "invoke_agent"),
            text("gen_ai.agent.name", "Coder"),
        ],
    ));
    spans.push(span(1, None, 1, Vec::new()));
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: None,
            scope_spans: vec![ScopeSpans { spans }],
        }],
    }
    .encode_to_vec()
}

fn otlp_export(c: &mut Criterion) {
    let (runtime, url) = server();
    let url = format!("{url}/v1/traces");
    let client = reqwest::Client::new();
    let next = AtomicU64::new(0);
    let mut group = c.benchmark_group("serve");
    group.throughput(Throughput::Elements(10));
    group.bench_function("otlp_export_small_trace", |b| {
        b.to_async(&runtime).iter(|| {
            let body = small_trace(next.fetch_add(1, Ordering::Relaxed));
            let request = client
                .post(&url)
                .header("content-type", "application/x-protobuf")
                .body(body);
            async move {
                let answer = request.send().await.expect("an answer");
                assert!(answer.status().is_success());
                black_box(answer.bytes().await.expect("a body"))
            }
        })
    });
    group.finish();
}

criterion_group!(benches, one_event, otlp_export);
criterion_main!(benches);
