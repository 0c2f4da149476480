//! The cost of importing a Magentic-One log, per message: a 1,000-message
//! run (instructions, replies with browser actions, ledger thoughts and
//! runner noise in equal measure), parsed and mapped.
use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use loopguard_import::{Format, import};

fn log(messages: usize) -> String {
    let history: Vec<serde_json::Value> = (0..messages)
        .map(|n| match n % 4 {
            0 => serde_json::json!({"role": "Orchestrator (-> WebSurfer)", "content": format!("Open result {n} and summarize it")}),
            1 => serde_json::json!({"role": "WebSurfer", "content": format!("I clicked 'Result {n}'.\n\nThe web browser is open to the page [Result {n}](https://example.test/{n}).")}),
            2 => serde_json::json!({"role": "Orchestrator (thought)", "content": "Updated Ledger:\n{\"is_in_loop\": {\"answer\": false}}"}),
            _ => serde_json::json!({"role": "WebSurfer", "content": format!("Summary of result {n}.\n/usr/lib/python3/site-packages/x.py:1: UserWarning: noisy")}),
        })
        .collect();
    serde_json::json!({"task_id": "bench", "history": history}).to_string()
}

fn per_message(c: &mut Criterion) {
    let text = log(1_000);
    let mut group = c.benchmark_group("import/magentic_one");
    group.throughput(Throughput::Elements(1_000));
    group.bench_function("log_of_1000_messages", |b| {
        b.iter(|| black_box(import(Format::MagenticOne, "bench", black_box(&text))))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = per_message
}
criterion_main!(benches);
