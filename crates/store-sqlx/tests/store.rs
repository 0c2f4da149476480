//! The SQL stores against real databases: SQLite on a temporary file, and
//! PostgreSQL when `LOOPGUARD_TEST_POSTGRES_URL` names a server (each run
//! in a schema of its own, dropped at the end).

use std::sync::Arc;

use loopguard_config::Config;
use loopguard_core_types::{Action, Event, EventError, TaskStatus, Timestamp};
use loopguard_host::{
    CycleEpisode, HostError, KeptOpinion, LoopGuard, Resolution, Store, StoreError, TaskSnapshot,
};
use loopguard_store_sqlx::{PostgresStore, SqliteStore, open_store};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// The engine on each store: restart continuity, atomic pivots, two
/// engines on one task.
#[path = "engine.rs"]
mod engine;

#[path = "fleet.rs"]
mod fleet;
/// The engine on PostgreSQL through an outage: connections refused,
/// backends terminated.
#[path = "outage.rs"]
mod outage;

/// Task T's failure "E1", the event the engine tests repeat.
fn failure_e1() -> Result<Event, EventError> {
    Event::from_json(r#"{"type":"failure","task":"T","agent":"coder","error":"E1"}"#)
}

/// The engine with the default config on a PostgreSQL store at `url`
/// (migrated), and that store.
async fn postgres_guard<E>(url: &str) -> Result<(Arc<PostgresStore>, LoopGuard), E>
where
    E: From<StoreError> + From<HostError>,
{
    let store = Arc::new(PostgresStore::open(url).await?);
    let guard = LoopGuard::builder(Config::default())
        .store(store.clone())
        .build()?;
    Ok((store, guard))
}

fn episode(id: u64, task: &str) -> CycleEpisode {
    CycleEpisode {
        id,
        task: task.into(),
        opened_at: Timestamp(1_700_000_000_000 + id as i64),
        patterns: vec!["exact_failure".into(), "agent_pair".into()],
        intervention: Action::InjectContext,
        escalated: false,
        lines: vec![1, 3, 5],
        resolution: None,
        resolved_at: None,
    }
}

fn snapshot(task: &str, loop_count: u32) -> TaskSnapshot {
    TaskSnapshot {
        task: task.into(),
        status: TaskStatus::AbortedStuck,
        loop_count,
        pivots: 2,
        last_seen: Timestamp(1_700_000_123_456),
    }
}

/// What every backend must do: upserts, ordering, filters.
async fn round_trips(store: &dyn Store) -> TestResult {
    assert_eq!(store.load_task("T1").await?, None);
    store.save_task(&snapshot("T2", 1)).await?;
    store.save_task(&snapshot("T1", 1)).await?;
    store.save_task(&snapshot("T1", 4)).await?;
    assert_eq!(store.load_task("T1").await?, Some(snapshot("T1", 4)));
    let tasks = store.tasks().await?;
    let names: Vec<_> = tasks.iter().map(|task| task.task.as_str()).collect();
    assert_eq!(names, ["T1", "T2"]);

    store.record_episode(&episode(7, "T1")).await?;
    store.record_episode(&episode(3, "T2")).await?;
    store.record_episode(&episode(5, "T1")).await?;
    let mut resolved = episode(7, "T1");
    resolved.resolution = Some(Resolution::Human);
    resolved.resolved_at = Some(Timestamp(1_700_000_200_000));
    resolved.escalated = true;
    resolved.intervention = Action::Escalate;
    store.record_episode(&resolved).await?;

    // Oldest first: the order of first recording, kept by an upsert.
    let all = store.episodes(None).await?;
    let ids: Vec<_> = all.iter().map(|episode| episode.id).collect();
    assert_eq!(ids, [7, 3, 5]);
    assert_eq!(all[0], resolved);
    let t1 = store.episodes(Some("T1")).await?;
    assert_eq!(t1, vec![resolved, episode(5, "T1")]);
    assert!(store.episodes(Some("nobody")).await?.is_empty());

    // Second opinions: the first answer per key is kept.
    assert_eq!(store.recall_opinion(&opinion_key('a')).await?, None);
    let first = opinion('a', true);
    assert_eq!(store.keep_opinion(&first).await?, first);
    let mut later = opinion('a', false);
    later.reason = "a later, different answer".into();
    assert_eq!(store.keep_opinion(&later).await?, first);
    store.keep_opinion(&opinion('b', false)).await?;
    assert_eq!(store.recall_opinion(&opinion_key('a')).await?, Some(first));
    assert_eq!(
        store.recall_opinion(&opinion_key('b')).await?,
        Some(opinion('b', false))
    );

    // Listed oldest answer first, then by key; forgotten by age.
    let mut older = opinion('c', true);
    older.answered_at = Timestamp(1_700_000_100_000);
    store.keep_opinion(&older).await?;
    let keys = |kept: Vec<KeptOpinion>| kept.into_iter().map(|o| o.key).collect::<Vec<_>>();
    assert_eq!(
        keys(store.opinions().await?),
        [opinion_key('c'), opinion_key('a'), opinion_key('b')]
    );
    assert_eq!(store.opinions().await?[0], older);
    // Strictly before: the answers of that very moment stay.
    assert_eq!(
        store
            .forget_opinions_before(Timestamp(1_700_000_300_000))
            .await?,
        1
    );
    assert_eq!(store.recall_opinion(&opinion_key('c')).await?, None);
    assert_eq!(
        keys(store.opinions().await?),
        [opinion_key('a'), opinion_key('b')]
    );
    // A forgotten pair's next answer is kept.
    let mut again = opinion('c', false);
    again.answered_at = Timestamp(1_700_000_400_000);
    assert_eq!(store.keep_opinion(&again).await?, again);
    assert_eq!(store.forget_opinions_before(Timestamp(0)).await?, 0);
    Ok(())
}

/// A key of 64 hex digits, all `digit`.
fn opinion_key(digit: char) -> String {
    std::iter::repeat_n(digit, 64).collect()
}

fn opinion(digit: char, same: bool) -> KeptOpinion {
    KeptOpinion {
        key: opinion_key(digit),
        by: "model qwen2.5-7b-instruct".into(),
        same,
        reason: format!("the same request: {same} (\"quoted\", ünïcode)"),
        answered_at: Timestamp(1_700_000_300_000),
    }
}

mod sqlite {
    use super::*;

    fn url(folder: &tempfile::TempDir) -> String {
        format!(
            "sqlite://{}",
            folder.path().join("nested/dir/loopguard.db").display()
        )
    }

    #[tokio::test]
    async fn round_trips_on_a_file_created_with_its_folder() -> TestResult {
        let folder = tempfile::tempdir()?;
        let store = open_store(&url(&folder)).await?;
        round_trips(store.as_ref()).await?;
        assert!(folder.path().join("nested/dir/loopguard.db").is_file());
        Ok(())
    }

    #[tokio::test]
    async fn the_file_is_in_wal_mode() -> TestResult {
        let folder = tempfile::tempdir()?;
        let store = SqliteStore::open(&url(&folder)).await?;
        store.save_task(&snapshot("T", 1)).await?;
        store.close().await;
        assert!(
            folder.path().join("nested/dir/loopguard.db-wal").exists() || {
                // The WAL file may have been checkpointed away on close; the
                // mode itself is in the file header (bytes 18 and 19 are 2).
                let header = std::fs::read(folder.path().join("nested/dir/loopguard.db"))?;
                header.get(18..20) == Some(&[2, 2])
            }
        );
        Ok(())
    }

    #[tokio::test]
    async fn reopening_the_file_keeps_everything_and_migrations_are_idempotent() -> TestResult {
        let folder = tempfile::tempdir()?;
        {
            let store = SqliteStore::open(&url(&folder)).await?;
            round_trips(&store).await?;
            store.close().await;
        }
        for _ in 0..2 {
            let store = SqliteStore::open(&url(&folder)).await?;
            assert_eq!(store.load_task("T1").await?, Some(snapshot("T1", 4)));
            assert_eq!(store.episodes(None).await?.len(), 3);
            assert_eq!(
                store.recall_opinion(&opinion_key('a')).await?,
                Some(opinion('a', true))
            );
            store.close().await;
        }
        Ok(())
    }

    #[tokio::test]
    async fn a_database_from_a_newer_loopguard_is_refused() -> TestResult {
        let folder = tempfile::tempdir()?;
        let store = SqliteStore::open(&url(&folder)).await?;
        store.close().await;
        drop(store);
        // What a future loopguard would leave: a migration this one lacks.
        let raw = sqlx::SqlitePool::connect(&url(&folder)).await?;
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
             VALUES (9999, 'from the future', TRUE, X'00', 0)",
        )
        .execute(&raw)
        .await?;
        raw.close().await;
        let err = SqliteStore::open(&url(&folder))
            .await
            .err()
            .map(|err| err.to_string())
            .unwrap_or_default();
        assert!(err.contains("schema version 9999"), "{err}");
        assert!(err.contains("newer loopguard"), "{err}");
        assert!(err.contains("loopguard.db"), "names the database: {err}");
        Ok(())
    }

    #[tokio::test]
    async fn a_schema_3_file_is_migrated_and_read_only_it_recalls_nothing() -> TestResult {
        let folder = tempfile::tempdir()?;
        let store = SqliteStore::open(&url(&folder)).await?;
        store.save_task(&snapshot("T1", 4)).await?;
        store.close().await;
        drop(store);
        // What loopguard of schema 3 left: no second-opinion table.
        let raw = sqlx::SqlitePool::connect(&url(&folder)).await?;
        sqlx::query("DROP TABLE loopguard_second_opinions")
            .execute(&raw)
            .await?;
        sqlx::query("DELETE FROM _sqlx_migrations WHERE version = 4")
            .execute(&raw)
            .await?;
        raw.close().await;
        // Read-only, it is not migrated: nothing is kept, and that is no error.
        let reader = loopguard_store_sqlx::open_store_read_only(&url(&folder)).await?;
        assert_eq!(reader.recall_opinion(&opinion_key('a')).await?, None);
        assert!(reader.opinions().await?.is_empty());
        drop(reader);
        // Opened for writing, it is migrated and keeps answers.
        let store = SqliteStore::open(&url(&folder)).await?;
        assert_eq!(store.load_task("T1").await?, Some(snapshot("T1", 4)));
        store.keep_opinion(&opinion('a', true)).await?;
        assert_eq!(
            store.recall_opinion(&opinion_key('a')).await?,
            Some(opinion('a', true))
        );
        Ok(())
    }

    #[tokio::test]
    async fn an_unopenable_file_is_named_with_the_operation() -> TestResult {
        let folder = tempfile::tempdir()?;
        // A folder where the database file should be.
        std::fs::create_dir_all(folder.path().join("nested/dir/loopguard.db"))?;
        let err = open_store(&url(&folder))
            .await
            .err()
            .map(|err| err.to_string())
            .unwrap_or_default();
        assert!(err.contains("store sqlite://"), "{err}");
        assert!(err.contains("open"), "{err}");
        Ok(())
    }

    #[tokio::test]
    async fn many_writers_on_one_store_end_consistent() -> TestResult {
        let folder = tempfile::tempdir()?;
        let a: Arc<dyn Store> = Arc::new(SqliteStore::open(&url(&folder)).await?);
        let b = Arc::clone(&a);
        concurrent_writers(a, b).await
    }

    #[tokio::test]
    async fn a_second_store_on_one_file_is_refused_until_the_first_is_dropped() -> TestResult {
        let folder = tempfile::tempdir()?;
        let first = SqliteStore::open(&url(&folder)).await?;
        let err = SqliteStore::open(&url(&folder))
            .await
            .err()
            .map(|err| err.to_string())
            .unwrap_or_default();
        assert!(err.contains("another loopguard holds"), "{err}");
        assert!(
            err.contains("nested/dir/loopguard.db"),
            "names the file: {err}"
        );
        // A reader is not a writer: it opens beside the writer.
        let reader = loopguard_store_sqlx::open_store_read_only(&url(&folder)).await?;
        assert!(reader.tasks().await?.is_empty());
        drop(first);
        SqliteStore::open(&url(&folder)).await?;
        Ok(())
    }

    #[tokio::test]
    async fn a_failed_commit_leaves_no_lock_behind() -> TestResult {
        let folder = tempfile::tempdir()?;
        let store = SqliteStore::open(&url(&folder)).await?;
        let commit = |version| loopguard_host::TaskCommit {
            line: version,
            record: loopguard_host::TaskRecord {
                snapshot: TaskSnapshot {
                    task: "T".into(),
                    status: TaskStatus::Active,
                    loop_count: version as u32,
                    pivots: 0,
                    last_seen: Timestamp(0),
                },
                version,
                state: None,
            },
            audit: Vec::new(),
            pivots: Vec::new(),
            episodes: vec![episode(version, "T")],
        };
        store.inject_commit_failure(1);
        assert!(store.commit(&[commit(1)]).await.is_err());
        // The next commits go through at once: no "database is locked".
        let started = std::time::Instant::now();
        for version in 2..6 {
            store.commit(&[commit(version)]).await?;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        assert_eq!(store.load_record("T").await?.map(|r| r.version), Some(5));
        Ok(())
    }
}

mod postgres {
    use super::*;

    /// A schema of this run's own on the server `LOOPGUARD_TEST_POSTGRES_URL`
    /// names, dropped when the test ends. `None` (with a notice) when the
    /// variable is unset; a server that is named but unreachable fails.
    pub(crate) struct Schema {
        admin: sqlx::PgPool,
        pub(crate) name: String,
        pub(crate) url: String,
    }

    impl Schema {
        pub(crate) async fn create(
            test: &str,
        ) -> Result<Option<Schema>, Box<dyn std::error::Error>> {
            let Ok(base) = std::env::var("LOOPGUARD_TEST_POSTGRES_URL") else {
                eprintln!(
                    "postgres::{test}: skipped: LOOPGUARD_TEST_POSTGRES_URL is not set \
                     (e.g. postgres://postgres@127.0.0.1:5432/test)"
                );
                return Ok(None);
            };
            let admin = sqlx::PgPool::connect(&base)
                .await
                .map_err(|err| format!("LOOPGUARD_TEST_POSTGRES_URL is set but {base}: {err}"))?;
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_nanos();
            let name = format!("loopguard_test_{}_{}_{nanos}", test, std::process::id());
            sqlx::query(&format!("CREATE SCHEMA \"{name}\""))
                .execute(&admin)
                .await?;
            let separator = if base.contains('?') { '&' } else { '?' };
            let url = format!("{base}{separator}options=-c%20search_path%3D{name}");
            Ok(Some(Schema { admin, name, url }))
        }

        pub(crate) async fn drop(self) -> TestResult {
            sqlx::query(&format!("DROP SCHEMA \"{}\" CASCADE", self.name))
                .execute(&self.admin)
                .await?;
            self.admin.close().await;
            Ok(())
        }
    }

    #[tokio::test]
    async fn round_trips_and_reopening_keeps_everything() -> TestResult {
        let Some(schema) = Schema::create("round_trips").await? else {
            return Ok(());
        };
        let result = async {
            let store = PostgresStore::open(&schema.url).await?;
            round_trips(&store).await?;
            store.close().await;
            for _ in 0..2 {
                let store = open_store(&schema.url).await?;
                assert_eq!(store.load_task("T1").await?, Some(snapshot("T1", 4)));
                assert_eq!(store.episodes(None).await?.len(), 3);
                assert_eq!(
                    store.recall_opinion(&opinion_key('a')).await?,
                    Some(opinion('a', true))
                );
            }
            Ok::<(), Box<dyn std::error::Error>>(())
        }
        .await;
        schema.drop().await?;
        result
    }

    #[tokio::test]
    async fn a_database_from_a_newer_loopguard_is_refused() -> TestResult {
        let Some(schema) = Schema::create("newer").await? else {
            return Ok(());
        };
        let result = async {
            let store = PostgresStore::open(&schema.url).await?;
            sqlx::query(&format!(
                "INSERT INTO \"{}\"._sqlx_migrations \
                 (version, description, success, checksum, execution_time) \
                 VALUES (9999, 'from the future', TRUE, '\\x00', 0)",
                schema.name
            ))
            .execute(&schema.admin)
            .await?;
            store.close().await;
            let err = PostgresStore::open(&schema.url)
                .await
                .err()
                .map(|err| err.to_string())
                .unwrap_or_default();
            assert!(err.contains("schema version 9999"), "{err}");
            assert!(err.contains("newer loopguard"), "{err}");
            assert!(err.contains("store postgres://"), "{err}");
            Ok::<(), Box<dyn std::error::Error>>(())
        }
        .await;
        schema.drop().await?;
        result
    }

    #[tokio::test]
    async fn an_unreachable_server_is_named_without_its_password() -> TestResult {
        // Port 1 on loopback: refused at once.
        let err = open_store("postgres://loopguard:hunter2@127.0.0.1:1/none")
            .await
            .err()
            .map(|err| err.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("postgres://loopguard:***@127.0.0.1:1/none"),
            "{err}"
        );
        assert!(!err.contains("hunter2"), "{err}");
        assert!(err.contains("connect"), "{err}");
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_pools_writing_one_database_end_consistent() -> TestResult {
        let Some(schema) = Schema::create("concurrent").await? else {
            return Ok(());
        };
        let result = async {
            let a: Arc<dyn Store> = Arc::new(PostgresStore::open(&schema.url).await?);
            let b: Arc<dyn Store> = Arc::new(PostgresStore::open(&schema.url).await?);
            concurrent_writers(a, b).await
        }
        .await;
        schema.drop().await?;
        result
    }
}

/// Two stores (two pools) on one database, many tokio tasks each,
/// upserting the same task and the same episodes: every row exists once and
/// holds one of the values written, nothing else.
async fn concurrent_writers(a: Arc<dyn Store>, b: Arc<dyn Store>) -> TestResult {
    const WRITERS: u32 = 16;
    const ROUNDS: u32 = 10;
    let mut handles = Vec::new();
    for writer in 0..WRITERS {
        let store = if writer % 2 == 0 {
            a.clone()
        } else {
            b.clone()
        };
        handles.push(tokio::spawn(async move {
            for round in 0..ROUNDS {
                store
                    .save_task(&snapshot("shared", writer * 100 + round))
                    .await?;
                let mut shared = episode(u64::from(round % 4) + 1, "shared");
                shared.lines = vec![u64::from(writer), u64::from(round)];
                store.record_episode(&shared).await?;
                store
                    .record_episode(&episode(u64::from(1000 + writer * ROUNDS + round), "own"))
                    .await?;
            }
            Ok::<(), loopguard_host::StoreError>(())
        }));
    }
    for handle in handles {
        handle.await??;
    }
    for store in [&a, &b] {
        let tasks = store.tasks().await?;
        assert_eq!(tasks.len(), 1);
        let count = tasks[0].loop_count;
        assert!(count / 100 < WRITERS && count % 100 < ROUNDS, "{count}");
        let shared = store.episodes(Some("shared")).await?;
        let ids: Vec<_> = shared.iter().map(|episode| episode.id).collect();
        assert_eq!(ids.len(), 4, "{ids:?}");
        for episode in &shared {
            assert_eq!(episode.lines.len(), 2);
            assert!(episode.lines[0] < u64::from(WRITERS) && episode.lines[1] < u64::from(ROUNDS));
            // Whole rows: the round in `lines` is one that wrote this id.
            assert_eq!(episode.lines[1] % 4 + 1, episode.id);
        }
        let own = store.episodes(Some("own")).await?;
        assert_eq!(own.len(), (WRITERS * ROUNDS) as usize);
    }
    Ok(())
}
