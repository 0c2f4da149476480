//! What the client costs around an LLM's own time: one question asked of
//! a chat-completions server on loopback that answers at once (the fake
//! server of `loopguard-test-support`), and reading an answer's content.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use loopguard_llm_client::{ChatClient, LlmSettings, message_content};
use loopguard_test_support::fake_llm::{FakeAnswer, FakeLlm};

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let fake = runtime.block_on(FakeLlm::start(|_, _| {
        FakeAnswer::Content(r#"{"same": true, "reason": "a rewording"}"#.into())
    }));
    let client = ChatClient::new(LlmSettings {
        base_url: fake.base_url(),
        model: "bench".into(),
        api_key: None,
        timeout: Duration::from_secs(10),
        retries: 0,
        backoff: Duration::from_millis(5),
    })
    .expect("a client");
    c.bench_function("llm_client/ask_on_loopback", |b| {
        b.iter(|| {
            runtime
                .block_on(client.ask(black_box("rules"), black_box("question")))
                .expect("an answer")
        })
    });
    let body = serde_json::json!({"choices": [{"index": 0, "message": {"role": "assistant",
        "content": "{\"same\": false, \"reason\": \"another table\"}"}}]})
    .to_string();
    c.bench_function("llm_client/message_content", |b| {
        b.iter(|| message_content(black_box(&body)).expect("content"))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
