//! Store writes per backend: one task snapshot upsert, one new cycle-log
//! episode, and an episode upsert (the same id again), as the engine does
//! them after an event; and the second opinion's kept answers: a new one
//! kept (and read back), and one recalled. Memory and SQLite (a temp file,
//! WAL) always; PostgreSQL when `LOOPGUARD_TEST_POSTGRES_URL` names a
//! server (in a schema of its own, dropped afterwards), with a fleet's
//! commit beside a single engine's (`commit/postgres`).
use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use loopguard_core_types::{Action, TaskStatus, Timestamp};
use loopguard_host::{CycleEpisode, KeptOpinion, Store, TaskCommit, TaskRecord, TaskSnapshot};
use tokio::runtime::Runtime;

fn snapshot(loop_count: u32) -> TaskSnapshot {
    TaskSnapshot {
        task: "T-1042".into(),
        status: TaskStatus::Active,
        loop_count,
        pivots: 0,
        last_seen: Timestamp(1_700_000_000_000),
    }
}

fn episode(id: u64) -> CycleEpisode {
    CycleEpisode {
        id,
        task: format!("T{}", id % 100),
        opened_at: Timestamp(1_700_000_000_000),
        patterns: vec!["exact_failure".into()],
        intervention: Action::Warn,
        escalated: false,
        lines: vec![1, 3, 5],
        resolution: None,
        resolved_at: None,
    }
}

fn opinion(n: u64) -> KeptOpinion {
    KeptOpinion {
        key: format!("{n:064x}"),
        by: "LLM qwen2.5-7b-instruct".into(),
        same: n % 2 == 0,
        reason: "the same key rotation, asked again in other words".into(),
        answered_at: Timestamp(1_700_000_000_000),
    }
}

fn bench_store(c: &mut Criterion, runtime: &Runtime, name: &str, store: &Arc<dyn Store>) {
    let mut group = c.benchmark_group(format!("store/{name}"));
    let mut count = 0u32;
    group.bench_function("save_task", |b| {
        b.iter(|| {
            count = count.wrapping_add(1);
            runtime.block_on(store.save_task(black_box(&snapshot(count))))
        })
    });
    let mut next = 0u64;
    group.bench_function("record_new_episode", |b| {
        b.iter(|| {
            next += 1;
            runtime.block_on(store.record_episode(black_box(&episode(next))))
        })
    });
    group.bench_function("update_episode", |b| {
        b.iter(|| runtime.block_on(store.record_episode(black_box(&episode(1)))))
    });
    let mut kept = 0u64;
    group.bench_function("keep_new_opinion", |b| {
        b.iter(|| {
            kept += 1;
            runtime.block_on(store.keep_opinion(black_box(&opinion(kept))))
        })
    });
    let key = opinion(1).key;
    group.bench_function("recall_opinion", |b| {
        b.iter(|| runtime.block_on(store.recall_opinion(black_box(&key))))
    });
    group.finish();
}

/// A task's commit at `version`: its record (with a detector state of a
/// few hundred bytes, as an engine writes) and nothing else.
fn record_commit(task: &str, version: u64) -> TaskCommit {
    let mut snapshot = snapshot(2);
    snapshot.task = task.to_owned();
    TaskCommit {
        line: version,
        record: TaskRecord {
            snapshot,
            version,
            state: Some(format!(
                r#"{{"format":1,"builtin":{{"padding":"{}"}}}}"#,
                "x".repeat(400)
            )),
        },
        audit: Vec::new(),
        pivots: Vec::new(),
        episodes: Vec::new(),
    }
}

/// A shared store's commit against a durable store's: `commit` writes a
/// record whose version only has to be higher than the stored one;
/// `lock_and_commit_over_version` takes the task's row lock, reads the row
/// and writes over exactly the version it read (what each event costs a
/// fleet on PostgreSQL, the version check included).
fn bench_commit(c: &mut Criterion, runtime: &Runtime, store: &Arc<dyn Store>) {
    let mut group = c.benchmark_group("commit/postgres");
    let mut version = 0u64;
    group.bench_function("commit", |b| {
        b.iter(|| {
            version += 1;
            runtime.block_on(store.commit(black_box(&[record_commit("plain", version)])))
        })
    });
    group.bench_function("lock_and_commit_over_version", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let lock = store.lock_task("shared").await?;
                let next = lock.record().map_or(0, |record| record.version) + 1;
                lock.commit(black_box(&record_commit("shared", next))).await
            })
        })
    });
    group.finish();
}

fn writes(c: &mut Criterion) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        eprintln!("cannot start a tokio runtime");
        return;
    };
    let memory: Arc<dyn Store> = Arc::new(loopguard_host::MemoryStore::new());
    bench_store(c, &runtime, "memory", &memory);

    let Ok(folder) = tempfile::tempdir() else {
        eprintln!("cannot create a temp folder: SQLite skipped");
        return;
    };
    let url = format!("sqlite://{}", folder.path().join("bench.db").display());
    match runtime.block_on(loopguard_store_sqlx::open_store(&url)) {
        Ok(sqlite) => bench_store(c, &runtime, "sqlite", &sqlite),
        Err(err) => eprintln!("SQLite skipped: {err}"),
    }

    let Ok(base) = std::env::var("LOOPGUARD_TEST_POSTGRES_URL") else {
        eprintln!("PostgreSQL skipped: LOOPGUARD_TEST_POSTGRES_URL is not set");
        return;
    };
    let schema = format!("loopguard_bench_{}", std::process::id());
    let result = runtime.block_on(async {
        let admin = sqlx::PgPool::connect(&base).await?;
        sqlx::query(&format!("CREATE SCHEMA \"{schema}\""))
            .execute(&admin)
            .await?;
        Ok::<_, sqlx::Error>(admin)
    });
    let admin = match result {
        Ok(admin) => admin,
        Err(err) => {
            eprintln!("PostgreSQL skipped: {err}");
            return;
        }
    };
    let separator = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{separator}options=-c%20search_path%3D{schema}");
    match runtime.block_on(loopguard_store_sqlx::open_store(&url)) {
        Ok(postgres) => {
            bench_store(c, &runtime, "postgres", &postgres);
            bench_commit(c, &runtime, &postgres);
        }
        Err(err) => eprintln!("PostgreSQL skipped: {err}"),
    }
    let dropped =
        runtime.block_on(sqlx::query(&format!("DROP SCHEMA \"{schema}\" CASCADE")).execute(&admin));
    if let Err(err) = dropped {
        eprintln!("cannot drop the bench schema {schema}: {err}");
    }
}

criterion_group!(benches, writes);
criterion_main!(benches);
