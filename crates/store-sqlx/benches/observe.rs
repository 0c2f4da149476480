//! `LoopGuard::observe` on each backend: what a durable store costs per
//! event, one event at a time (each answered after its commit) and with 32
//! events in flight at once (their commits share transactions on SQLite).
//!
//! Backends: `memory` (counters only, what replay uses), `memory-durable`
//! (everything a database keeps, serialized, but in memory: the engine's own
//! cost of durability), SQLite on a temp file (WAL), and PostgreSQL when
//! `LOOPGUARD_TEST_POSTGRES_URL` names a server (a schema of its own,
//! dropped afterwards; every event under its task's lock).
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use loopguard_config::Config;
use loopguard_core_types::Event;
use loopguard_host::{LoopGuard, MemoryStore, Store};
use tokio::runtime::Runtime;

/// Events of 64 tasks: failures that repeat (detections, audit rows) and
/// transitions between phases.
fn events() -> Vec<Event> {
    (0..1024)
        .filter_map(|n: usize| {
            let task = n % 64;
            let json = if n % 3 == 0 {
                format!(
                    r#"{{"type":"transition","task":"B{task}","from":"p{}","to":"p{}"}}"#,
                    n % 4,
                    (n + 1) % 4
                )
            } else {
                format!(
                    r#"{{"type":"failure","task":"B{task}","agent":"coder","error":"E{}"}}"#,
                    n % 5
                )
            };
            Event::from_json(&json).ok()
        })
        .collect()
}

fn bench_backend(c: &mut Criterion, runtime: &Runtime, name: &str, store: Arc<dyn Store>) {
    let events = events();
    let Ok(guard) = LoopGuard::builder(Config::default()).store(store).build() else {
        eprintln!("{name}: the engine does not start");
        return;
    };
    let guard = Arc::new(guard);
    let mut group = c.benchmark_group(format!("observe/{name}"));
    group.throughput(Throughput::Elements(1));
    let mut next = 0usize;
    group.bench_function("one_at_a_time", |b| {
        b.iter(|| {
            next = (next + 1) % events.len();
            runtime.block_on(guard.observe(black_box(events[next].clone())))
        })
    });
    const IN_FLIGHT: usize = 32;
    group.throughput(Throughput::Elements(IN_FLIGHT as u64));
    group.bench_function("32_in_flight", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                let batch: Vec<Event> = (0..IN_FLIGHT)
                    .map(|_| {
                        next = (next + 1) % events.len();
                        events[next].clone()
                    })
                    .collect();
                let started = Instant::now();
                runtime.block_on(async {
                    let handles: Vec<_> = batch
                        .into_iter()
                        .map(|event| {
                            let guard = guard.clone();
                            tokio::spawn(async move { guard.observe(event).await })
                        })
                        .collect();
                    for handle in handles {
                        let _ = handle.await;
                    }
                });
                total += started.elapsed();
            }
            total
        })
    });
    group.finish();
}

fn observe(c: &mut Criterion) {
    let Ok(runtime) = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    else {
        eprintln!("cannot start a tokio runtime");
        return;
    };
    bench_backend(c, &runtime, "memory", Arc::new(MemoryStore::new()));
    bench_backend(
        c,
        &runtime,
        "memory-durable",
        Arc::new(MemoryStore::durable()),
    );

    let Ok(folder) = tempfile::tempdir() else {
        eprintln!("cannot create a temp folder: SQLite skipped");
        return;
    };
    let url = format!("sqlite://{}", folder.path().join("bench.db").display());
    match runtime.block_on(loopguard_store_sqlx::open_store(&url)) {
        Ok(sqlite) => bench_backend(c, &runtime, "sqlite", sqlite),
        Err(err) => eprintln!("SQLite skipped: {err}"),
    }

    let Ok(base) = std::env::var("LOOPGUARD_TEST_POSTGRES_URL") else {
        eprintln!("PostgreSQL skipped: LOOPGUARD_TEST_POSTGRES_URL is not set");
        return;
    };
    let schema = format!("loopguard_bench_observe_{}", std::process::id());
    let admin = match runtime.block_on(async {
        let admin = sqlx::PgPool::connect(&base).await?;
        sqlx::query(&format!("CREATE SCHEMA \"{schema}\""))
            .execute(&admin)
            .await?;
        Ok::<_, sqlx::Error>(admin)
    }) {
        Ok(admin) => admin,
        Err(err) => {
            eprintln!("PostgreSQL skipped: {err}");
            return;
        }
    };
    let separator = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{separator}options=-c%20search_path%3D{schema}");
    match runtime.block_on(loopguard_store_sqlx::open_store(&url)) {
        Ok(postgres) => bench_backend(c, &runtime, "postgres", postgres),
        Err(err) => eprintln!("PostgreSQL skipped: {err}"),
    }
    let dropped =
        runtime.block_on(sqlx::query(&format!("DROP SCHEMA \"{schema}\" CASCADE")).execute(&admin));
    if let Err(err) = dropped {
        eprintln!("cannot drop the bench schema {schema}: {err}");
    }
}

criterion_group!(benches, observe);
criterion_main!(benches);
