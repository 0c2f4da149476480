//! One `POST /v1/events` of one event over loopback: a real server on
//! 127.0.0.1:0 (memory store, built-in detectors only, as `loopguard serve
//! --no-semantic --store memory`) and a keep-alive reqwest client. Each
//! request is a failure of its own task, so the engine's work stays the
//! same and the figure is the HTTP round trip plus one `observe`.
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use loopguard_core_types::Config;
use loopguard_host::{LoopGuard, MemoryStore};
use loopguard_serve::{ServeOptions, Server};

fn one_event(c: &mut Criterion) {
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
        format!("http://{addr}/v1/events")
    });
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

criterion_group!(benches, one_event);
criterion_main!(benches);
