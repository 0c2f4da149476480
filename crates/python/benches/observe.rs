//! The Rust side of `bench/observe.py`: the same trace through the engine
//! `loopguard.Guard(semantic=False)` builds (exact semantic detectors and
//! the progress evaluator on the memory store), each line parsed with
//! `Event::from_json_within` and observed with `observe_line`, as the
//! binding does, minus Python. Prints µs per event (best of 3).
//!
//! `cargo bench -p loopguard-python --bench observe -- TRACE.jsonl` (the
//! file `bench/observe.py` writes); without a file, a small built-in trace
//! is timed once (as `cargo test --benches` does).

use std::sync::Arc;
use std::time::Instant;

use loopguard_config::Config;
use loopguard_core_types::Event;
use loopguard_host::{LoopGuard, MemoryStore};
use loopguard_progress_evaluator::ProgressEvaluator;
use loopguard_semantic::SemanticDetectors;

fn engine() -> Result<LoopGuard, Box<dyn std::error::Error>> {
    let mut config = Config::default();
    config.semantic.enabled = false;
    let builder = LoopGuard::builder(config.clone()).store(Arc::new(MemoryStore::new()));
    let builder = SemanticDetectors::exact(&config).install(builder);
    Ok(builder
        .extension(Arc::new(ProgressEvaluator::new(&config)))
        .build()?)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let file = std::env::args().skip(1).find(|arg| !arg.starts_with('-'));
    let text = match &file {
        Some(path) => std::fs::read_to_string(path)?,
        None => (0..1000)
            .map(|n| {
                format!(
                    r#"{{"type":"handoff","task":"t{}","from":"a","to":"b","content":"step {n}"}}"#,
                    n % 10
                )
            })
            .collect::<Vec<_>>()
            .join("\n"),
    };
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let rounds = if file.is_some() { 3 } else { 1 };
    let mut best = f64::MAX;
    let mut best_each = f64::MAX;
    for _ in 0..rounds {
        // One `block_on` for the whole trace: the engine alone.
        let guard = engine()?;
        let limits = guard.config().limits.clone();
        let started = Instant::now();
        runtime.block_on(async {
            for (n, line) in lines.iter().enumerate() {
                let event = Event::from_json_within(line, &limits)?;
                std::hint::black_box(guard.observe_line(n as u64 + 1, event).await);
            }
            Ok::<(), Box<dyn std::error::Error>>(())
        })?;
        best = best.min(started.elapsed().as_secs_f64());
        // One `block_on` per event, as the binding calls it.
        let guard = engine()?;
        let started = Instant::now();
        for (n, line) in lines.iter().enumerate() {
            let event = Event::from_json_within(line, &limits)?;
            std::hint::black_box(runtime.block_on(guard.observe_line(n as u64 + 1, event)));
        }
        best_each = best_each.min(started.elapsed().as_secs_f64());
    }
    let count = lines.len() as f64;
    println!(
        "Rust, parse + observe_line, one block_on:       {:7.2} µs/event ({} events)",
        best / count * 1e6,
        lines.len()
    );
    println!(
        "Rust, parse + observe_line, block_on per event: {:7.2} µs/event",
        best_each / count * 1e6
    );
    Ok(())
}
