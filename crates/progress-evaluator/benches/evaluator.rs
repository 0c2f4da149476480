//! Per-event cost of the progress evaluator on a realistic stream: 200
//! tasks interleaved, each with handoffs, turns, `progress` events whose
//! metrics move (up and down), agent failures with differing and repeated
//! messages, external failures, and a `completed` at the end.
//!
//! - `progress_evaluator/metrics_only`: no judge (the default).
//! - `progress_evaluator/with_judge`: an instant in-process judge, so the
//!   figure is the evaluator's own cost on the judge path (request
//!   building, cache lookups), not a model's latency.

use std::hint::black_box;
use std::sync::Arc;

use async_trait::async_trait;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use loopguard_config::Config;
use loopguard_core_types::Event;
use loopguard_detectors::ObservedEvent;
use loopguard_host::ExtensionDetector;
use loopguard_progress_evaluator::{
    GoalJudge, JudgeError, JudgeRequest, Judgement, ProgressEvaluator, Verdict,
};

const TASKS: usize = 200;
const ROUNDS: usize = 12;

/// The stream: round-robin over tasks, so their states interleave as in a
/// busy orchestrator.
fn stream() -> Vec<Event> {
    let mut lines = Vec::new();
    for round in 0..ROUNDS {
        for task in 0..TASKS {
            let t = format!("TASK-{task:04}");
            let failing = match task % 4 {
                0 => 10usize.saturating_sub(round), // progressing
                1 => 1 + round,                     // regressing
                _ => 4,                             // stuck
            };
            let coverage = if task % 4 == 0 {
                0.3 + round as f64 * 0.05
            } else {
                0.5
            };
            lines.push(format!(
                r#"{{"type":"handoff","task":"{t}","from":"planner","to":"coder","content":"round {round}","goal":"ship feature {task}"}}"#
            ));
            lines.push(format!(
                r#"{{"type":"progress","task":"{t}","tests_total":120,"tests_failed":{failing},"coverage":{coverage:.2},"files_changed":{}}}"#,
                if task % 4 == 0 { round + 1 } else { 1 }
            ));
            let error = if task % 5 == 0 {
                "error[E0308]: mismatched types: expected `u32`, found `Option<u32>`".to_owned()
            } else {
                format!(
                    "assertion failed: test_case_{round} at src/lib.rs:{}",
                    100 + round
                )
            };
            lines.push(format!(
                r#"{{"type":"failure","task":"{t}","agent":"coder","error":"{error}","location":"src/lib.rs:42"}}"#
            ));
            if round % 4 == 3 {
                lines.push(format!(
                    r#"{{"type":"failure","task":"{t}","agent":"tester","error":"POST https://registry.example/api: connection timed out after 30s"}}"#
                ));
            }
            lines.push(format!(
                r#"{{"type":"turn","task":"{t}","agent":"coder","output":"tried variant {round}","success":false}}"#
            ));
        }
    }
    for task in 0..TASKS {
        lines.push(format!(r#"{{"type":"completed","task":"TASK-{task:04}"}}"#));
    }
    lines
        .iter()
        .map(|line| Event::from_json(line).expect("the generated stream is valid"))
        .collect()
}

#[derive(Debug)]
struct Instant;

#[async_trait]
impl GoalJudge for Instant {
    async fn judge(&self, request: &JudgeRequest) -> Result<Judgement, JudgeError> {
        Ok(Judgement {
            verdict: if request.current.line % 2 == 0 {
                Verdict::NoProgress
            } else {
                Verdict::Progress
            },
            reason: "benchmark".to_owned(),
        })
    }

    fn describe(&self) -> String {
        "model instant".to_owned()
    }
}

fn bench(c: &mut Criterion) {
    let events = stream();
    let config = Config::default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let mut group = c.benchmark_group("progress_evaluator");
    group.throughput(Throughput::Elements(events.len() as u64));
    for (name, judged) in [("metrics_only", false), ("with_judge", true)] {
        group.bench_function(name, |b| {
            b.iter_batched(
                || {
                    let evaluator = ProgressEvaluator::new(&config);
                    if judged {
                        evaluator.with_judge(Arc::new(Instant))
                    } else {
                        evaluator
                    }
                },
                |evaluator| {
                    runtime.block_on(async {
                        let mut found = 0;
                        for (index, event) in events.iter().enumerate() {
                            let observed = ObservedEvent::new(index as u64 + 1, event);
                            found += evaluator.observe(&observed).await.map_or(0, |d| d.len());
                            if matches!(event.kind, loopguard_core_types::EventKind::Completed) {
                                evaluator.reset_task(&event.task).await;
                            }
                        }
                        black_box(found)
                    })
                },
                BatchSize::LargeInput,
            );
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
