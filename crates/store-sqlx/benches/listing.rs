//! What a listing of every task reads (`GET /v1/tasks`): each task's
//! detection count and newest detection (`Store::detection_summaries`),
//! against the whole audit log summarized in Rust (what the listing read
//! before). Memory and SQLite (a temp file, WAL), with 200 tasks of 5 and
//! of 50 detections each.
use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use loopguard_core_types::{Detection, TaskStatus, Timestamp};
use loopguard_host::{AuditEntry, AuditRecord, Store, TaskCommit, TaskRecord, TaskSnapshot};
use tokio::runtime::Runtime;

const TASKS: u64 = 200;

/// A detection as the engine records one.
fn detection(line: u64) -> Option<Detection> {
    serde_json::from_value(serde_json::json!({
        "line": line,
        "detector": "exact_failure",
        "kind": "exact_failure",
        "severity": "medium",
        "action": "warn",
        "evidence": [line - 1, line],
        "reason": "the same failure twice",
    }))
    .ok()
}

/// Fills `store` with `per_task` detections for each of [`TASKS`] tasks,
/// one commit per task.
async fn fill(store: &dyn Store, per_task: u64) -> Option<()> {
    for task in 0..TASKS {
        let name = format!("T{task}");
        let audit = (1..=per_task)
            .map(|n| {
                Some(AuditEntry {
                    task: name.clone(),
                    line: task * 1_000 + n * 2,
                    at: Timestamp(1_700_000_000_000),
                    record: AuditRecord::Detection(Box::new(detection(task * 1_000 + n * 2)?)),
                })
            })
            .collect::<Option<Vec<_>>>()?;
        let commit = TaskCommit {
            line: task * 1_000 + per_task * 2,
            record: TaskRecord {
                snapshot: TaskSnapshot {
                    task: name,
                    status: TaskStatus::Active,
                    loop_count: 1,
                    pivots: 0,
                    last_seen: Timestamp(1_700_000_000_000),
                },
                version: 1,
                state: None,
            },
            audit,
            pivots: Vec::new(),
            episodes: Vec::new(),
        };
        store.commit(&[commit]).await.ok()?;
    }
    Some(())
}

fn bench_store(
    c: &mut Criterion,
    runtime: &Runtime,
    name: &str,
    open: &dyn Fn() -> Option<Arc<dyn Store>>,
) {
    let mut group = c.benchmark_group(format!("listing/{name}"));
    for per_task in [5u64, 50] {
        let Some(store) = open() else {
            eprintln!("{name} skipped: the store did not open");
            return;
        };
        if runtime.block_on(fill(store.as_ref(), per_task)).is_none() {
            eprintln!("{name} skipped: the store could not be filled");
            return;
        }
        let detections = TASKS * per_task;
        group.bench_with_input(
            BenchmarkId::new("detection_summaries", detections),
            &store,
            |b, store| b.iter(|| runtime.block_on(black_box(store).detection_summaries())),
        );
        group.bench_with_input(
            BenchmarkId::new("whole_audit_log", detections),
            &store,
            |b, store| {
                b.iter(|| {
                    runtime.block_on(async {
                        let log = black_box(store).audit(None).await?;
                        Ok::<_, loopguard_host::StoreError>(loopguard_host::summarize_detections(
                            &log,
                        ))
                    })
                })
            },
        );
    }
    group.finish();
}

fn listing(c: &mut Criterion) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        eprintln!("cannot start a tokio runtime");
        return;
    };
    bench_store(c, &runtime, "memory", &|| {
        Some(Arc::new(loopguard_host::MemoryStore::durable()) as Arc<dyn Store>)
    });
    let Ok(folder) = tempfile::tempdir() else {
        eprintln!("cannot create a temp folder: SQLite skipped");
        return;
    };
    // Each size in a database file of its own.
    let opened = std::cell::Cell::new(0u32);
    bench_store(c, &runtime, "sqlite", &|| {
        opened.set(opened.get() + 1);
        let path = folder.path().join(format!("listing-{}.db", opened.get()));
        let url = format!("sqlite://{}", path.display());
        runtime
            .block_on(loopguard_store_sqlx::open_store(&url))
            .ok()
    });
}

criterion_group!(benches, listing);
criterion_main!(benches);
