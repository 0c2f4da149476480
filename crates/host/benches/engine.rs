//! `LoopGuard::observe` per event with 10,000 live tasks, and the same with
//! `usage` on every event, prices and a budget (spend accounting, ruling
//! 18).
use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use loopguard_config::Config;
use loopguard_core_types::Event;
use loopguard_host::LoopGuard;

const TASKS: usize = 10_000;
const BATCH: usize = 1_000;

/// A deterministic event for task `task` at step `step`: a realistic mix of
/// handoffs, failures (some repeating), transitions, turns and progress.
fn event_for(task: usize, step: usize) -> Event {
    let agents = ["planner", "coder", "reviewer", "tester"];
    let phases = ["plan", "build", "test", "review"];
    let a = agents[step % 4];
    let b = agents[(step + 1) % 4];
    let line = match step % 6 {
        0 => format!(
            r#"{{"type":"handoff","task":"T{task}","from":"{a}","to":"{b}","content":"step {}"}}"#,
            step % 3
        ),
        1 => format!(
            r#"{{"type":"failure","task":"T{task}","agent":"{a}","error":"error E{} in module {}","error_type":"compile"}}"#,
            step % 5,
            task % 7
        ),
        2 => format!(
            r#"{{"type":"transition","task":"T{task}","from":"{}","to":"{}"}}"#,
            phases[step % 4],
            phases[(step + 1) % 4]
        ),
        3 => format!(
            r#"{{"type":"turn","task":"T{task}","agent":"{a}","output":"attempt {}","success":{}}}"#,
            step % 2,
            step % 4 == 3
        ),
        4 => format!(
            r#"{{"type":"progress","task":"T{task}","tests_total":50,"tests_failed":{},"files_changed":{}}}"#,
            step % 9,
            step / 6
        ),
        _ => format!(
            r#"{{"type":"collaboration","task":"T{task}","from":"{a}","to":"{b}","request":"please check {}"}}"#,
            step % 4
        ),
    };
    Event::from_json(&line).unwrap_or_else(|err| panic!("bench event {line}: {err}"))
}

/// `event` with a `usage` of its own: tokens of a priced model, or a cost.
fn with_usage(mut event: Event, step: usize) -> Event {
    let usage = if step % 2 == 0 {
        serde_json::json!({"input_tokens": 1200 + step, "output_tokens": 80, "model": "bench-model-1"})
    } else {
        serde_json::json!({"input_tokens": 900, "output_tokens": 40 + step, "cost_usd": 0.002})
    };
    event.extra.insert("usage".into(), usage);
    event
}

/// Prices for the bench's model and budgets no task reaches, so every
/// limit is checked on every event.
const SPEND_CONFIG: &str = "[pricing.bench-model]\ninput_per_mtok = 0.15\noutput_per_mtok = 0.6\n\
                            [budget]\nmax_tokens = 1000000000\nmax_cost_usd = 1000000.0\n\
                            max_loop_cost_usd = 1000000.0\n";

fn observe_with_live_tasks(c: &mut Criterion) {
    let config = Config::default();
    observe(c, "observe_10k_live_tasks", config, |event, _| event);
}

fn observe_with_usage(c: &mut Criterion) {
    let config = Config::from_toml_str(SPEND_CONFIG).expect("the bench's config");
    observe(c, "observe_10k_live_tasks_with_usage", config, with_usage);
}

/// Observes a stream of events over 10,000 warmed tasks, each event made by
/// `make` from the mix of [`event_for`].
fn observe(c: &mut Criterion, id: &str, config: Config, make: fn(Event, usize) -> Event) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let guard = LoopGuard::new(config).expect("a valid config");
    // Warm every task with some history so the state is in its steady size.
    let mut line = 0u64;
    runtime.block_on(async {
        for step in 0..24 {
            for task in 0..TASKS {
                line += 1;
                guard
                    .observe_line(line, make(event_for(task, step), step))
                    .await;
            }
        }
    });
    let stream: Vec<Event> = (0..BATCH)
        .map(|i| make(event_for((i * 7919) % TASKS, 24 + i % 12), i))
        .collect();
    let mut group = c.benchmark_group("engine");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function(id, |b| {
        b.iter_batched(
            || stream.clone(),
            |events| {
                runtime.block_on(async {
                    for event in events {
                        line += 1;
                        black_box(guard.observe_line(line, event).await);
                    }
                })
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
    assert_eq!(guard.live_tasks(), TASKS);
}

criterion_group!(benches, observe_with_live_tasks, observe_with_usage);
criterion_main!(benches);
