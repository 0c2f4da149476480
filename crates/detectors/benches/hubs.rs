//! The cost of one handoff through the hub tracker (ruling 17, counting as
//! trace format 1.1) and through the exchange tracker (ruling 4 of 1.2, the
//! default), at the 10th handoff of a task and at the 10,000th: it must not
//! grow with the task's history (the hub tracker keeps 64 agents, 16
//! recipients per sender, 32 distinct texts per sender and recipient; the
//! exchange tracker the task's last 64 exchanged texts).
//!
//! The stream is a hub-and-spoke team's: an orchestrator instructs four
//! workers in turn and each replies, with instructions and replies drawn
//! from a few hundred texts (so some repeat).
use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use loopguard_config::Config;
use loopguard_core_types::Event;
use loopguard_detectors::{
    EvidenceRef, ExchangeRepeats, ExchangeRepeatsState, HubState, HubTracker,
};

const WORKERS: [&str; 4] = ["web_surfer", "file_surfer", "coder", "terminal"];

fn handoffs(n: usize, seed: usize) -> Vec<Event> {
    (0..n)
        .map(|i| {
            let worker = WORKERS[(i / 2) % WORKERS.len()];
            let text = (i * 7 + seed) % 300;
            let (from, to, content) = if i % 2 == 0 {
                (
                    "orchestrator",
                    worker,
                    format!("Instruction {text}: look into item {text}"),
                )
            } else {
                (
                    worker,
                    "orchestrator",
                    format!("Reply {text}: item {text} done at 10:{:02}:00", text % 60),
                )
            };
            Event::from_value(&serde_json::json!({
                "type": "handoff", "task": "T", "from": from, "to": to, "content": content,
            }))
            .expect("a handoff")
        })
        .collect()
}

fn per_handoff(c: &mut Criterion) {
    let tracker = HubTracker::new(&Config::default());
    let stream = handoffs(1_000, 11);
    let mut group = c.benchmark_group("hubs/per_handoff");
    group.throughput(Throughput::Elements(1));
    for warm in [10usize, 10_000] {
        let mut state = HubState::default();
        for event in &handoffs(warm, 3) {
            tracker.observe(&mut state, event);
        }
        let mut next = 0usize;
        group.bench_with_input(
            BenchmarkId::from_parameter(format!("after_{warm}_handoffs")),
            &warm,
            |b, _| {
                b.iter(|| {
                    let event = &stream[next % stream.len()];
                    next += 1;
                    black_box(tracker.observe(&mut state, event))
                })
            },
        );
    }
    group.finish();
}

fn exchanges_per_handoff(c: &mut Criterion) {
    let tracker = ExchangeRepeats::new(&Config::default());
    let stream = handoffs(1_000, 11);
    let mut group = c.benchmark_group("exchanges/per_handoff");
    group.throughput(Throughput::Elements(1));
    for warm in [10usize, 10_000] {
        let mut state = ExchangeRepeatsState::default();
        for (line, event) in (1..).zip(&handoffs(warm, 3)) {
            tracker.observe(
                &mut state,
                event,
                None,
                || EvidenceRef::new(line, None),
                None,
            );
        }
        let mut line = warm as u64;
        group.bench_with_input(
            BenchmarkId::from_parameter(format!("after_{warm}_handoffs")),
            &warm,
            |b, _| {
                b.iter(|| {
                    line += 1;
                    let event = &stream[line as usize % stream.len()];
                    black_box(tracker.observe(
                        &mut state,
                        event,
                        None,
                        || EvidenceRef::new(line, None),
                        None,
                    ))
                })
            },
        );
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = per_handoff, exchanges_per_handoff
}
criterion_main!(benches);
