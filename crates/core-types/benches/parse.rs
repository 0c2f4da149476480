//! Parsing one event line, against serde_json parsing the same line into a
//! `Value`.
use criterion::{Criterion, criterion_group, criterion_main};
use loopguard_core_types::Event;
use std::hint::black_box;

const LINES: [&str; 4] = [
    r#"{"type":"handoff","task":"T-1042","ts":"2026-11-22T10:00:00Z","id":"e17","from":"planner","to":"coder","content":"implement the retry policy"}"#,
    r#"{"type":"failure","task":"T-1042","agent":"coder","error":"thread 'main' panicked at src/lib.rs:42: index out of bounds","error_type":"panic","location":"src/lib.rs:42"}"#,
    r#"{"type":"transition","task":"T-1042","from":"build","to":"test"}"#,
    r#"{"type":"progress","task":"T-1042","tests_total":120,"tests_failed":4,"coverage":0.71,"files_changed":9}"#,
];

fn parse(c: &mut Criterion) {
    let mut group = c.benchmark_group("parse_event");
    group.bench_function("loopguard_event", |b| {
        b.iter(|| {
            for line in LINES {
                black_box(Event::from_json(black_box(line)).ok());
            }
        })
    });
    group.bench_function("serde_json_value", |b| {
        b.iter(|| {
            for line in LINES {
                black_box(serde_json::from_str::<serde_json::Value>(black_box(line)).ok());
            }
        })
    });
    group.finish();
}

criterion_group!(benches, parse);
criterion_main!(benches);
