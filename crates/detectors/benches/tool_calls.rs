//! The cost of one `tool_call` through the stale-call detector, at the 10th
//! call of a task and at the 10,000th: it must not grow with the task's
//! history (the state is bounded: `tools.history` calls and results per
//! agent).
//!
//! The stream is a coding agent's: reads, greps and test runs over 64
//! files, with results that repeat now and then (so some runs form and
//! end). Each bench first plays `warm` calls into the state, then measures
//! one more call at a time, cycling through 1,000 pre-built calls.
use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use loopguard_config::Config;
use loopguard_core_types::Event;
use loopguard_detectors::{Detector, ObservedEvent, ToolCalls, ToolCallsState};

/// A tiny deterministic generator (xorshift64): the same stream every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

fn calls(n: usize, seed: u64) -> Vec<Event> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|i| {
            let file = rng.below(64);
            let (tool, args, result) = match rng.below(3) {
                0 => (
                    "read_file",
                    serde_json::json!({"path": format!("src/module_{file}.rs"), "request_id": i}),
                    format!(
                        "pub fn handler_{file}() -> Result<(), Error> {{ todo!() }} // {} lines",
                        40 + file
                    ),
                ),
                1 => (
                    "grep",
                    serde_json::json!({"pattern": format!("handler_{}", file % 16)}),
                    format!("src/module_{file}.rs:12: pub fn handler_{}()", file % 16),
                ),
                _ => (
                    "run_tests",
                    serde_json::Value::Null,
                    format!(
                        "test result: FAILED. {} passed; {} failed; finished in 1.{}s",
                        120 + rng.below(3),
                        rng.below(3),
                        rng.below(10)
                    ),
                ),
            };
            Event::from_value(&serde_json::json!({
                "type": "tool_call", "task": "T", "agent": "coder",
                "tool": tool, "args": args, "result": result,
            }))
            .expect("a tool call")
        })
        .collect()
}

fn per_call(c: &mut Criterion) {
    let mut config = Config::default();
    config.tools.volatile_args = vec!["request_id".into()];
    let detector = ToolCalls::new(&config);
    let stream = calls(1_000, 0x5eed);
    let mut group = c.benchmark_group("tool_calls/per_call");
    group.throughput(Throughput::Elements(1));
    for warm in [10usize, 10_000] {
        let mut state = ToolCallsState::default();
        let warmup = calls(warm, 0xbeef);
        for (line, event) in warmup.iter().enumerate() {
            let mut out = Vec::new();
            detector.observe(
                &mut state,
                &ObservedEvent::new(line as u64 + 1, event),
                &mut out,
            );
        }
        let mut next = 0usize;
        let mut line = warm as u64;
        group.bench_with_input(
            BenchmarkId::from_parameter(format!("after_{warm}_calls")),
            &warm,
            |b, _| {
                b.iter(|| {
                    let event = &stream[next % stream.len()];
                    next += 1;
                    line += 1;
                    let mut out = Vec::new();
                    detector.observe(&mut state, &ObservedEvent::new(line, event), &mut out);
                    black_box(out)
                })
            },
        );
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = per_call
}
criterion_main!(benches);
