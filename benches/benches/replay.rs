//! Replay of generated traces from a file (1M events over 10k tasks under
//! `cargo bench`, 20k under `cargo test`), against serde_json merely
//! parsing the same file. Two traces: a realistic one (tasks mostly move
//! on) and a loop-heavy one (detectors fire on most events).
//!
//! Also prints the steady per-task state of the engine, measured with a
//! counting allocator (not a criterion figure).
use std::alloc::{GlobalAlloc, Layout, System};
use std::fs::File;
use std::hint::black_box;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicIsize, Ordering};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use loopguard_benches::{Mix, generate_trace_mix};
use loopguard_config::Config;
use loopguard_core_types::Event;
use std::sync::Arc;

use loopguard_host::{
    CycleEpisode, LoopGuard, ReplayItem, Store, StoreError, TaskSnapshot, replay, replay_each,
};

struct Counting;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator and only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE_BYTES.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn full_run() -> bool {
    std::env::args().any(|arg| arg == "--bench")
}

fn write_trace(path: &Path, events: usize, tasks: usize, mix: Mix) {
    let mut text = String::with_capacity(events * 140);
    generate_trace_mix(events, tasks, mix, &mut text);
    std::fs::write(path, text).expect("temp file is writable");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime")
}

/// Replays a file the way `loopguard replay --format jsonl` does: one
/// decision per line, streamed, no report kept. With `emit_jsonl` each
/// decision is serialized (to a sink).
fn replay_file(path: &Path, emit_jsonl: bool) -> u64 {
    let guard = LoopGuard::new(Config::default()).expect("default config");
    let input = BufReader::with_capacity(1 << 16, File::open(path).expect("trace exists"));
    let mut out = BufWriter::new(std::io::sink());
    let mut decisions = 0;
    runtime()
        .block_on(replay_each(&guard, input, |item| {
            if let ReplayItem::Decision(decision) = item {
                decisions += 1;
                if emit_jsonl {
                    let _ = serde_json::to_writer(&mut out, decision);
                    let _ = out.write_all(b"\n");
                }
            }
        }))
        .expect("trace is readable");
    decisions
}

/// Replays a file building the whole JSON report (`--format json`).
fn replay_file_report(path: &Path) -> u64 {
    let guard = LoopGuard::new(Config::default()).expect("default config");
    let input = BufReader::with_capacity(1 << 16, File::open(path).expect("trace exists"));
    let report = runtime()
        .block_on(replay(&guard, input, |_| {}))
        .expect("trace is readable");
    report.events
}

fn parse_file<T: serde::de::DeserializeOwned>(path: &Path) -> u64 {
    let mut input = BufReader::with_capacity(1 << 16, File::open(path).expect("trace exists"));
    let mut line = String::new();
    let mut parsed = 0;
    while input.read_line(&mut line).expect("readable") > 0 {
        if serde_json::from_str::<T>(&line).is_ok() {
            parsed += 1;
        }
        line.clear();
    }
    parsed
}

fn events_file(path: &Path) -> u64 {
    let mut input = BufReader::with_capacity(1 << 16, File::open(path).expect("trace exists"));
    let mut line = String::new();
    let mut parsed = 0;
    while input.read_line(&mut line).expect("readable") > 0 {
        if Event::from_json(&line).is_ok() {
            parsed += 1;
        }
        line.clear();
    }
    parsed
}

/// A store that keeps nothing, so that the counting allocator sees only the
/// engine's own per-task state (the cycle log is history, not task state).
#[derive(Debug)]
struct DiscardStore;

#[async_trait::async_trait]
impl Store for DiscardStore {
    async fn record_episode(&self, _: &CycleEpisode) -> Result<(), StoreError> {
        Ok(())
    }
    async fn save_task(&self, _: &TaskSnapshot) -> Result<(), StoreError> {
        Ok(())
    }
    async fn load_task(&self, _: &str) -> Result<Option<TaskSnapshot>, StoreError> {
        Ok(None)
    }
    async fn tasks(&self) -> Result<Vec<TaskSnapshot>, StoreError> {
        Ok(Vec::new())
    }
    async fn episodes(&self, _: Option<&str>) -> Result<Vec<CycleEpisode>, StoreError> {
        Ok(Vec::new())
    }
}

/// Bytes of engine state per live task after a long trace.
fn per_task_state(tasks: usize, events: usize, mix: Mix) -> f64 {
    let mut trace = String::new();
    generate_trace_mix(events, tasks, mix, &mut trace);
    let runtime = runtime();
    let before = LIVE_BYTES.load(Ordering::Relaxed);
    let guard = LoopGuard::builder(Config::default())
        .store(Arc::new(DiscardStore))
        .build()
        .expect("default config");
    runtime.block_on(async {
        // Events are parsed and dropped one at a time, so what stays
        // allocated is the engine's state.
        for (line, text) in trace.lines().enumerate() {
            let event = Event::from_json(text).expect("generated lines are valid");
            black_box(guard.observe_line(line as u64 + 1, event).await);
        }
    });
    let after = LIVE_BYTES.load(Ordering::Relaxed);
    let live = guard.live_tasks().max(1);
    (after - before) as f64 / live as f64
}

fn replay_benches(c: &mut Criterion) {
    let (events, tasks) = if full_run() {
        (1_000_000, 10_000)
    } else {
        (20_000, 500)
    };
    let dir = tempfile::tempdir().expect("temp dir");
    for mix in [Mix::Realistic, Mix::LoopHeavy] {
        let state = per_task_state(tasks, events.min(400_000), mix);
        println!(
            "steady per-task state, {mix:?}: {state:.0} bytes per task ({tasks} tasks, {} events)",
            events.min(400_000)
        );
    }

    let path = dir.path().join("realistic.jsonl");
    write_trace(&path, events, tasks, Mix::Realistic);
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    println!("realistic trace: {events} events over {tasks} tasks, {bytes} bytes");
    let mut group = c.benchmark_group("replay_realistic");
    group.sample_size(10);
    group.throughput(Throughput::Elements(events as u64));
    group.bench_function("serde_json_value_parse", |b| {
        b.iter(|| assert_eq!(parse_file::<serde_json::Value>(&path), events as u64))
    });
    group.bench_function("serde_json_ignored_any_parse", |b| {
        b.iter(|| assert_eq!(parse_file::<serde::de::IgnoredAny>(&path), events as u64))
    });
    group.bench_function("loopguard_event_parse", |b| {
        b.iter(|| assert_eq!(events_file(&path), events as u64))
    });
    group.bench_function("replay_structural", |b| {
        b.iter(|| assert_eq!(replay_file(&path, false), events as u64))
    });
    group.bench_function("replay_structural_jsonl_out", |b| {
        b.iter(|| assert_eq!(replay_file(&path, true), events as u64))
    });
    group.bench_function("replay_structural_json_report", |b| {
        b.iter(|| assert_eq!(replay_file_report(&path), events as u64))
    });
    group.finish();

    let heavy = dir.path().join("loop-heavy.jsonl");
    write_trace(&heavy, events, tasks, Mix::LoopHeavy);
    let mut group = c.benchmark_group("replay_loop_heavy");
    group.sample_size(10);
    group.throughput(Throughput::Elements(events as u64));
    group.bench_function("replay_structural_jsonl_out", |b| {
        b.iter(|| assert_eq!(replay_file(&heavy, true), events as u64))
    });
    group.finish();
}

criterion_group!(benches, replay_benches);
criterion_main!(benches);
