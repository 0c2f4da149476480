//! The cost of one successful `web_search` through `tool_rephrase` (ruling
//! 19) without the model, at the 10th call of a task and at the 10,000th:
//! the free text read from the arguments, its content words (stop words
//! out, stemmed) compared with the previous query's, the result's URLs
//! hashed. The stream rewords a dozen questions and opens a page now and
//! then. The state is bounded, so the cost does not grow with the task's
//! history. (The exchange tracker is measured in `hubs.rs`, on the hub
//! tracker's stream.)
use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use loopguard_config::Config;
use loopguard_core_types::Event;
use loopguard_detectors::{Detector, ObservedEvent, ToolRephrase, ToolRephraseState};

const SUBJECTS: [&str; 12] = [
    "EU AI act fines for startups",
    "GDPR data protection officer requirements",
    "pizza dough hydration for home ovens",
    "kubelet stopped posting node status",
    "retrieval augmented generation hallucination",
    "postgres vacuum settings for large tables",
    "refund rounding errors in decimal arithmetic",
    "rust async cancellation safety",
    "helm chart values for staging",
    "flaky checkout test timeout",
    "EUIPO trademark opposition deadline",
    "heat pump efficiency in cold climates",
];

fn searches(n: usize, seed: usize) -> Vec<Event> {
    (0..n)
        .map(|i| {
            let subject = SUBJECTS[((i + seed) / 5) % SUBJECTS.len()];
            let (tool, args) = if i % 7 == 6 {
                (
                    "open_page",
                    serde_json::json!({ "url": format!("https://example.test/{}", i - 1) }),
                )
            } else {
                let wording = match i % 4 {
                    0 => subject.to_owned(),
                    1 => format!("latest on {subject}"),
                    2 => format!("{subject} explained"),
                    _ => format!("what is known about {subject}"),
                };
                ("web_search", serde_json::json!({ "query": wording }))
            };
            Event::from_value(&serde_json::json!({
                "type": "tool_call", "task": "T", "agent": "researcher", "tool": tool,
                "args": args,
                "result": [{ "title": format!("Result {i}"), "url": format!("https://example.test/{i}") }],
            }))
            .expect("a tool call")
        })
        .collect()
}

fn rephrases(c: &mut Criterion) {
    let detector = ToolRephrase::new(&Config::default());
    let stream = searches(1_000, 5);
    let mut group = c.benchmark_group("tool_rephrase/per_call");
    group.throughput(Throughput::Elements(1));
    for warm in [10usize, 10_000] {
        let mut state = ToolRephraseState::default();
        let mut out = Vec::new();
        for (line, event) in (1..).zip(&searches(warm, 1)) {
            detector.observe(&mut state, &ObservedEvent::new(line, event), &mut out);
        }
        let mut next = 0usize;
        group.bench_with_input(
            BenchmarkId::from_parameter(format!("after_{warm}_calls")),
            &warm,
            |b, _| {
                b.iter(|| {
                    let event = &stream[next % stream.len()];
                    next += 1;
                    out.clear();
                    detector.observe(
                        &mut state,
                        &ObservedEvent::new(next as u64, event),
                        &mut out,
                    );
                    black_box(out.len())
                })
            },
        );
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = rephrases
}
criterion_main!(benches);
