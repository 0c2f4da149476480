//! The SQLite and PostgreSQL stores: one implementation, two databases.
//!
//! The SQL is the same for both (`$N` parameters and `ON CONFLICT … DO
//! UPDATE` are understood by SQLite 3.24+ and PostgreSQL alike); only the
//! pool, the connection options and the migrations differ.

// With one backend left out, some of the shared SQL and helpers go unused.
#![cfg_attr(
    not(all(feature = "sqlite", feature = "postgres")),
    allow(dead_code, unused_imports, unused_macros)
)]

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use loopguard_core_types::Timestamp;
use loopguard_host::{
    AuditEntry, AuditRecord, CycleEpisode, DetectionSummary, Durability, KeptOpinion, PivotRecord,
    RunRecord, Store, StoreError, StoreHealth, StoredLineError, TaskCommit, TaskLock, TaskRecord,
    TaskSnapshot,
};
use parking_lot::Mutex;
use sqlx::Row;
use sqlx::migrate::Migrator;
#[cfg(feature = "postgres")]
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
#[cfg(feature = "sqlite")]
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::rows::{counter, enum_from, enum_text, episode_id, json_from, json_text};
use crate::url::redact_url;

/// The newest schema this loopguard knows: the version of its last
/// embedded migration. A database at a higher version is refused.
pub const SCHEMA_VERSION: i64 = 4;

#[cfg(feature = "sqlite")]
static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("migrations/sqlite");
#[cfg(feature = "postgres")]
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("migrations/postgres");

/// How long a connection waits for another writer's lock (SQLite) or for a
/// free connection (both) before the operation fails.
const WAIT: Duration = Duration::from_secs(10);
/// How long a PostgreSQL operation waits for a connection (including
/// reconnecting to a server that refuses connections) before it fails.
/// Short: a failed task lock is not waited for, the engine decides on its
/// own copy of the task and keeps the commit until the server answers.
#[cfg(feature = "postgres")]
const PG_ACQUIRE: Duration = Duration::from_secs(3);

/// How long opening a SQLite store for writing waits for another loopguard
/// that holds the file (e.g. one migrating it at the same moment) before it
/// refuses to open.
const LOCK_WAIT: Duration = Duration::from_secs(3);

/// The line errors a run stores, at most (the rest are counted in the
/// replay's own output only).
const MAX_STORED_LINE_ERRORS: usize = 10_000;

const SAVE_TASK: &str = "INSERT INTO loopguard_tasks (task, status, loop_count, pivots, last_seen) \
     VALUES ($1, $2, $3, $4, $5) \
     ON CONFLICT (task) DO UPDATE SET status = excluded.status, \
     loop_count = excluded.loop_count, pivots = excluded.pivots, last_seen = excluded.last_seen";
const LOAD_TASK: &str =
    "SELECT task, status, loop_count, pivots, last_seen FROM loopguard_tasks WHERE task = $1";
const TASKS: &str =
    "SELECT task, status, loop_count, pivots, last_seen FROM loopguard_tasks ORDER BY task";
const RECORD_EPISODE: &str = "INSERT INTO loopguard_episodes \
     (id, task, opened_at, patterns, intervention, escalated, lines, resolution, resolved_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
     ON CONFLICT (id) DO UPDATE SET task = excluded.task, opened_at = excluded.opened_at, \
     patterns = excluded.patterns, intervention = excluded.intervention, \
     escalated = excluded.escalated, lines = excluded.lines, \
     resolution = excluded.resolution, resolved_at = excluded.resolved_at";
const EPISODES: &str = "SELECT id, task, opened_at, patterns, intervention, escalated, lines, \
     resolution, resolved_at FROM loopguard_episodes ORDER BY seq";
const TASK_EPISODES: &str = "SELECT id, task, opened_at, patterns, intervention, escalated, lines, \
     resolution, resolved_at FROM loopguard_episodes WHERE task = $1 ORDER BY seq";
const LOAD_RECORD: &str = "SELECT task, status, loop_count, pivots, last_seen, version, state \
     FROM loopguard_tasks WHERE task = $1";
/// A task's record is replaced only by a higher version: a commit written
/// late (a retry) never overwrites a newer one.
const COMMIT_TASK: &str = "INSERT INTO loopguard_tasks \
     (task, status, loop_count, pivots, last_seen, version, state) \
     VALUES ($1, $2, $3, $4, $5, $6, $7) \
     ON CONFLICT (task) DO UPDATE SET status = excluded.status, \
     loop_count = excluded.loop_count, pivots = excluded.pivots, last_seen = excluded.last_seen, \
     version = excluded.version, state = excluded.state \
     WHERE excluded.version > loopguard_tasks.version";
/// A shared store's commit, written only over the version it was decided
/// on (`$8`, 0 for a task without a row): a compare-and-swap, so that a
/// commit built on an older row is refused rather than written over a
/// newer one. The task's row lock already serializes the engines; this is
/// what makes an overwrite impossible even so.
const COMMIT_TASK_OVER: &str = "INSERT INTO loopguard_tasks \
     (task, status, loop_count, pivots, last_seen, version, state) \
     VALUES ($1, $2, $3, $4, $5, $6, $7) \
     ON CONFLICT (task) DO UPDATE SET status = excluded.status, \
     loop_count = excluded.loop_count, pivots = excluded.pivots, last_seen = excluded.last_seen, \
     version = excluded.version, state = excluded.state \
     WHERE loopguard_tasks.version = $8";
const INSERT_AUDIT: &str =
    "INSERT INTO loopguard_audit (task, line, at, entry, detail) VALUES ($1, $2, $3, $4, $5)";
const AUDIT: &str = "SELECT task, line, at, detail FROM loopguard_audit ORDER BY seq";
const TASK_AUDIT: &str =
    "SELECT task, line, at, detail FROM loopguard_audit WHERE task = $1 ORDER BY seq";
const RECENT_AUDIT: &str = "SELECT task, line, at, detail FROM \
    (SELECT seq, task, line, at, detail FROM loopguard_audit ORDER BY seq DESC LIMIT $1) AS recent \
    ORDER BY seq";
const TASK_RECENT_AUDIT: &str = "SELECT task, line, at, detail FROM \
    (SELECT seq, task, line, at, detail FROM loopguard_audit WHERE task = $1 \
    ORDER BY seq DESC LIMIT $2) AS recent ORDER BY seq";
/// Each task's detection count and newest detection, counted in the
/// database (the `(task, seq)` index serves it): one row per task, in the
/// order of the tasks' first detections. `$1` is the entry name.
const DETECTION_SUMMARIES: &str = "SELECT a.task, c.n, a.detail FROM loopguard_audit a \
    JOIN (SELECT task, COUNT(*) AS n, MIN(seq) AS first, MAX(seq) AS last \
    FROM loopguard_audit WHERE entry = $1 GROUP BY task) c ON a.seq = c.last \
    ORDER BY c.first";
const INSERT_PIVOT: &str =
    "INSERT INTO loopguard_pivots (task, line, at, number, directive) VALUES ($1, $2, $3, $4, $5)";
const PIVOTS: &str = "SELECT task, line, at, number, directive FROM loopguard_pivots ORDER BY seq";
const TASK_PIVOTS: &str =
    "SELECT task, line, at, number, directive FROM loopguard_pivots WHERE task = $1 ORDER BY seq";
#[cfg(feature = "postgres")]
/// Serializes every engine's events of one task, including a task that has
/// no row yet; released when the transaction ends.
const LOCK_TASK: &str = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))";
const MIGRATED_VERSION: &str = "SELECT MAX(version) FROM _sqlx_migrations WHERE success";
const NEW_RUN: &str = "INSERT INTO loopguard_runs (run, first_line, last_line, started_at) \
     SELECT COALESCE(MAX(run), 0) + 1, $1, NULL, $2 FROM loopguard_runs RETURNING run";
const RUNS: &str = "SELECT run, first_line, last_line, started_at FROM loopguard_runs ORDER BY run";
/// A run's last committed line only moves forward.
const ADVANCE_RUN: &str = "UPDATE loopguard_runs SET last_line = $2 \
     WHERE run = $1 AND (last_line IS NULL OR last_line < $2)";
const INSERT_LINE_ERROR: &str = "INSERT INTO loopguard_line_errors (run, line, error) \
     VALUES ($1, $2, $3) ON CONFLICT (run, line) DO NOTHING";
const LINE_ERRORS: &str = "SELECT run, line, error FROM loopguard_line_errors ORDER BY run, line";
/// The first answer for a key wins; a later one is dropped (and the kept
/// one read back).
const KEEP_OPINION: &str = "INSERT INTO loopguard_second_opinions \
     (pair_key, answered_by, same, reason, answered_at) VALUES ($1, $2, $3, $4, $5) \
     ON CONFLICT (pair_key) DO NOTHING";
const RECALL_OPINION: &str = "SELECT pair_key, answered_by, same, reason, answered_at \
     FROM loopguard_second_opinions WHERE pair_key = $1";
const OPINIONS: &str = "SELECT pair_key, answered_by, same, reason, answered_at \
     FROM loopguard_second_opinions ORDER BY answered_at, pair_key";
const FORGET_OPINIONS: &str = "DELETE FROM loopguard_second_opinions WHERE answered_at < $1";

/// The cycle log and task snapshots in one SQLite file, in WAL mode.
#[derive(Debug, Clone)]
#[cfg(feature = "sqlite")]
pub struct SqliteStore {
    pool: SqlitePool,
    backend: String,
    fault: Fault,
    run: Arc<RunState>,
    health: Arc<StoreHealth>,
    /// The writer's lock on the file beside the database (none when read
    /// only, or in memory), held as long as any clone of the store lives.
    _writer_lock: Option<Arc<std::fs::File>>,
}

/// The cycle log and task snapshots in a PostgreSQL database that many
/// engines may share.
#[derive(Debug, Clone)]
#[cfg(feature = "postgres")]
pub struct PostgresStore {
    pool: PgPool,
    backend: String,
    fault: Fault,
    run: Arc<RunState>,
    health: Arc<StoreHealth>,
}

/// The run of input lines a store is recording (see [`Store::begin_run`]).
#[derive(Debug, Default)]
struct RunState {
    /// The current run, once begun.
    run: Mutex<Option<u64>>,
    /// Line errors noted and not yet stored.
    pending: Mutex<Vec<(u64, String)>>,
    /// Line errors noted in this run (stored or pending).
    noted: AtomicUsize,
}

impl RunState {
    fn current(&self) -> Option<u64> {
        *self.run.lock()
    }

    /// The noted line errors before `line` (all with `None`).
    fn pending_before(&self, line: Option<u64>) -> Vec<(u64, String)> {
        self.pending
            .lock()
            .iter()
            .filter(|(at, _)| line.is_none_or(|line| *at < line))
            .cloned()
            .collect()
    }

    /// Forgets the noted line errors before `line`, once stored.
    fn stored_before(&self, line: Option<u64>) {
        self.pending
            .lock()
            .retain(|(at, _)| line.is_some_and(|line| *at >= line));
    }
}

/// A failure to inject into the next commit, for the tests of atomicity:
/// after this many statements, the commit fails (and rolls back).
#[derive(Debug, Clone, Default)]
struct Fault(Arc<AtomicUsize>);

impl Fault {
    const OFF: usize = 0;

    /// Counts one statement of a commit; an error when the injected
    /// failure is due (it fires once).
    fn after_statement(&self, backend: &str, done: &mut usize) -> Result<(), StoreError> {
        *done += 1;
        let due = self.0.load(Ordering::Relaxed);
        if due != Fault::OFF
            && *done == due
            && self
                .0
                .compare_exchange(due, Fault::OFF, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return Err(error(
                backend,
                "commit",
                format!("injected failure after {done} statements"),
            ));
        }
        Ok(())
    }
}

#[cfg(feature = "sqlite")]
impl SqliteStore {
    /// Opens (creating it, and its folder, if missing) the file that
    /// `sqlite://PATH` (or `sqlite:PATH`) names, for this engine alone, and
    /// migrates it.
    ///
    /// One file serves one engine: the store holds an advisory lock on
    /// `PATH.lock` for as long as it lives. Opening a file that another
    /// loopguard holds waits up to 3 seconds (one that is migrating it, or
    /// finishing) and then is refused, naming the file. Migrations run
    /// under the lock, so two processes opening a fresh file at once
    /// migrate it one after the other.
    pub async fn open(url: &str) -> Result<SqliteStore, StoreError> {
        let backend = url.to_owned();
        let path = sqlite_path(&backend)?;
        let mut lock = None;
        let options = if path == ":memory:" {
            SqliteConnectOptions::from_str("sqlite::memory:")
                .map_err(|err| error(&backend, "open", err))?
        } else {
            if let Some(folder) = Path::new(path).parent()
                && !folder.as_os_str().is_empty()
            {
                std::fs::create_dir_all(folder).map_err(|err| {
                    error(
                        &backend,
                        "open",
                        format!("cannot create {}: {err}", folder.display()),
                    )
                })?;
            }
            lock = Some(Arc::new(writer_lock(&backend, path).await?));
            SqliteConnectOptions::new()
                .filename(path)
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                // With WAL, NORMAL syncs at checkpoints, not every commit:
                // a crashed process loses nothing, a power cut may lose the
                // last writes, never the file's consistency.
                .synchronous(SqliteSynchronous::Normal)
        };
        let options = options.busy_timeout(WAIT);
        // An in-memory database is one per connection: keep it to one.
        let connections = if path == ":memory:" { 1 } else { 4 };
        let pool = SqlitePoolOptions::new()
            .max_connections(connections)
            .acquire_timeout(WAIT)
            .connect_with(options)
            .await
            .map_err(|err| error(&backend, "open", with_disk_hint(err)))?;
        let store = SqliteStore {
            pool,
            backend,
            fault: Fault::default(),
            run: Arc::default(),
            health: Arc::default(),
            _writer_lock: lock,
        };
        store.migrate().await?;
        Ok(store)
    }

    /// Opens the file `sqlite://PATH` names for reading only: never
    /// created, never migrated, never locked, so it works while a writer
    /// holds the file (WAL lets readers in) and on a file or file system
    /// that cannot be written (then opened as immutable). A schema newer
    /// than this loopguard's is refused.
    pub async fn open_read_only(url: &str) -> Result<SqliteStore, StoreError> {
        let backend = url.to_owned();
        let path = sqlite_path(&backend)?;
        if path == ":memory:" {
            return SqliteStore::open(url).await;
        }
        if !Path::new(path).is_file() {
            return Err(error(
                &backend,
                "open",
                format!("there is no store at {path} (a read-only command creates none)"),
            ));
        }
        let options = SqliteConnectOptions::new()
            .filename(path)
            .read_only(true)
            .busy_timeout(WAIT);
        let mut last = None;
        // A WAL file that cannot be written (a read-only file system) can
        // only be read as immutable: nothing else can change it either.
        for immutable in [false, true] {
            let pool = SqlitePoolOptions::new()
                .max_connections(2)
                .acquire_timeout(WAIT)
                .connect_with(options.clone().immutable(immutable))
                .await;
            let pool = match pool {
                Ok(pool) => pool,
                Err(err) => {
                    last = Some(error(&backend, "open", err));
                    continue;
                }
            };
            let store = SqliteStore {
                pool,
                backend: backend.clone(),
                fault: Fault::default(),
                run: Arc::default(),
                health: Arc::default(),
                _writer_lock: None,
            };
            match store.check_schema(true).await {
                Ok(()) => return Ok(store),
                Err(err) => {
                    store.pool.close().await;
                    last = Some(err);
                }
            }
        }
        Err(last.unwrap_or_else(|| error(&backend, "open", "cannot open")))
    }

    /// Refuses a database of a newer schema; with `required`, also a file
    /// that is not a loopguard store at all.
    async fn check_schema(&self, required: bool) -> Result<(), StoreError> {
        let exists: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(|err| error(&self.backend, "read the schema version", err))?;
        if exists == 0 {
            return if required {
                Err(error(
                    &self.backend,
                    "open",
                    "not a loopguard store (the file has no loopguard schema)",
                ))
            } else {
                Ok(())
            };
        }
        let version: Option<i64> = sqlx::query_scalar(MIGRATED_VERSION)
            .fetch_one(&self.pool)
            .await
            .map_err(|err| error(&self.backend, "read the schema version", err))?;
        refuse_newer(&self.backend, version)
    }

    /// Before the pool closes: the WAL checkpointed into the file and
    /// truncated, so the file alone holds everything (a copy of it, or a
    /// reader that cannot write, sees it all). A failure leaves the WAL.
    async fn before_close(&self) {
        if self._writer_lock.is_some()
            && let Err(err) = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
                .execute(&self.pool)
                .await
        {
            tracing::warn!(store = %self.backend, error = %err, "the WAL could not be checkpointed at close");
        }
    }

    /// Writes the commits and the run's progress in one `BEGIN IMMEDIATE`
    /// transaction on a connection of its own. On any failure (a full
    /// disk, say) the transaction is rolled back and the connection closed,
    /// so no failed transaction keeps the write lock: the next commit opens
    /// a fresh connection.
    async fn commit_lines(
        &self,
        commits: &[TaskCommit],
        line: Option<u64>,
    ) -> Result<(), StoreError> {
        let failed = |err| error(&self.backend, "commit", err);
        let mut connection = self.pool.acquire().await.map_err(failed)?;
        let written = self.write_all(&mut connection, commits, line).await;
        if written.is_err() {
            let _ = sqlx::query("ROLLBACK").execute(&mut *connection).await;
            let _ = connection.close().await;
        }
        written?;
        self.run.stored_before(line);
        Ok(())
    }

    async fn write_all(
        &self,
        connection: &mut sqlx::SqliteConnection,
        commits: &[TaskCommit],
        line: Option<u64>,
    ) -> Result<(), StoreError> {
        let failed = |err| error(&self.backend, "commit", err);
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut *connection)
            .await
            .map_err(failed)?;
        let mut done = 0;
        for commit in commits {
            self.write_commit(connection, commit, &mut done).await?;
        }
        self.write_progress(connection, line).await?;
        sqlx::query("COMMIT")
            .execute(&mut *connection)
            .await
            .map_err(failed)?;
        Ok(())
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        self.check_schema(false).await?;
        SQLITE_MIGRATIONS
            .run(&self.pool)
            .await
            .map_err(|err| error(&self.backend, "migrate", err))
    }
}

#[cfg(feature = "postgres")]
impl PostgresStore {
    /// Connects to the database a `postgres://` URL names and migrates it.
    /// Its `options` parameter is passed on, e.g.
    /// `?options=-c%20search_path%3Dloopguard` keeps the tables in the
    /// `loopguard` schema.
    pub async fn open(url: &str) -> Result<PostgresStore, StoreError> {
        let store = PostgresStore::connect(url, 8, PG_ACQUIRE).await?;
        store.migrate().await?;
        Ok(store)
    }

    /// Connects to the database for reading only: never migrated (a schema
    /// newer than this loopguard's is refused).
    pub async fn open_read_only(url: &str) -> Result<PostgresStore, StoreError> {
        let store = PostgresStore::connect(url, 2, WAIT).await?;
        store.check_schema().await?;
        Ok(store)
    }

    /// Connects a pool of at most `max_connections`, each acquired within
    /// `acquire_timeout`; neither migrated nor checked.
    async fn connect(
        url: &str,
        max_connections: u32,
        acquire_timeout: Duration,
    ) -> Result<PostgresStore, StoreError> {
        let backend = redact_url(url);
        let options =
            PgConnectOptions::from_str(url).map_err(|err| error(&backend, "open", err))?;
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(acquire_timeout)
            .connect_with(options)
            .await
            .map_err(|err| error(&backend, "connect", err))?;
        Ok(PostgresStore {
            pool,
            backend,
            fault: Fault::default(),
            run: Arc::default(),
            health: Arc::default(),
        })
    }

    async fn check_schema(&self) -> Result<(), StoreError> {
        let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
            .fetch_one(&self.pool)
            .await
            .map_err(|err| error(&self.backend, "read the schema version", err))?;
        if exists {
            let version: Option<i64> = sqlx::query_scalar(MIGRATED_VERSION)
                .fetch_one(&self.pool)
                .await
                .map_err(|err| error(&self.backend, "read the schema version", err))?;
            refuse_newer(&self.backend, version)?;
        }
        Ok(())
    }

    /// Nothing to do before the pool closes.
    async fn before_close(&self) {}

    /// Writes the commits and the run's progress in one transaction.
    async fn commit_lines(
        &self,
        commits: &[TaskCommit],
        line: Option<u64>,
    ) -> Result<(), StoreError> {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(|err| error(&self.backend, "commit", err))?;
        let mut done = 0;
        for commit in commits {
            self.write_commit(&mut tx, commit, &mut done).await?;
        }
        self.write_progress(&mut tx, line).await?;
        tx.commit()
            .await
            .map_err(|err| error(&self.backend, "commit", err))?;
        self.run.stored_before(line);
        Ok(())
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        self.check_schema().await?;
        POSTGRES_MIGRATIONS
            .run(&self.pool)
            .await
            .map_err(|err| error(&self.backend, "migrate", err))
    }
}

/// The same `Store` for both pools: the SQL above, binds, and row decoding.
macro_rules! sql_store {
    ($store:ty, $db:ty, $durability:expr) => {
        impl $store {
            /// The backend as messages name it (the URL, without password).
            pub fn backend(&self) -> &str {
                &self.backend
            }

            /// Closes the pool, waiting for connections in use.
            pub async fn close(&self) {
                self.pool.close().await;
            }

            /// A row of `loopguard_second_opinions`.
            fn kept_opinion(
                &self,
                row: &<$db as sqlx::Database>::Row,
            ) -> Result<KeptOpinion, StoreError> {
                let read = |err| error(&self.backend, "read a second opinion", err);
                Ok(KeptOpinion {
                    key: row.try_get("pair_key").map_err(read)?,
                    by: row.try_get("answered_by").map_err(read)?,
                    same: row.try_get("same").map_err(read)?,
                    reason: row.try_get("reason").map_err(read)?,
                    answered_at: Timestamp(row.try_get("answered_at").map_err(read)?),
                })
            }

            /// Makes the next commit fail after `statements` statements
            /// (and roll back): for tests of atomicity. 0 turns it off.
            #[doc(hidden)]
            pub fn inject_commit_failure(&self, statements: usize) {
                self.fault.0.store(statements, Ordering::Relaxed);
            }

            /// The rows of `all`, or of `one` for a single task (its `$1`).
            /// Audit rows as entries.
            fn audit_entries(
                &self,
                rows: &[<$db as sqlx::Database>::Row],
            ) -> Result<Vec<AuditEntry>, StoreError> {
                rows.iter()
                    .map(|row| {
                        let read = |err| error(&self.backend, "read the audit log", err);
                        let detail: String = row.try_get("detail").map_err(read)?;
                        Ok(AuditEntry {
                            task: row.try_get("task").map_err(read)?,
                            line: counter(
                                &self.backend,
                                "line",
                                row.try_get("line").map_err(read)?,
                            )?,
                            at: Timestamp(row.try_get("at").map_err(read)?),
                            record: json_from(&self.backend, "detail", &detail)?,
                        })
                    })
                    .collect()
            }

            async fn rows_for(
                &self,
                one: &'static str,
                all: &'static str,
                task: Option<&str>,
                operation: &str,
            ) -> Result<Vec<<$db as sqlx::Database>::Row>, StoreError> {
                match task {
                    Some(task) => sqlx::query(one).bind(task).fetch_all(&self.pool).await,
                    None => sqlx::query(all).fetch_all(&self.pool).await,
                }
                .map_err(|err| error(&self.backend, operation, err))
            }

            /// The upsert of an episode, bound.
            fn episode_query<'q>(
                &self,
                episode: &'q CycleEpisode,
            ) -> Result<
                sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments<'q>>,
                StoreError,
            > {
                Ok(sqlx::query(RECORD_EPISODE)
                    .bind(episode_id(&self.backend, episode.id)?)
                    .bind(&episode.task)
                    .bind(episode.opened_at.0)
                    .bind(json_text(&episode.patterns))
                    .bind(enum_text(&episode.intervention))
                    .bind(episode.escalated)
                    .bind(json_text(&episode.lines))
                    .bind(episode.resolution.as_ref().map(enum_text))
                    .bind(episode.resolved_at.map(|at| at.0)))
            }

            /// Writes one event's commit inside the transaction open on
            /// `tx`: pivot records, audit rows, episodes, then the task's
            /// record.
            async fn write_commit(
                &self,
                tx: &mut <$db as sqlx::Database>::Connection,
                commit: &TaskCommit,
                done: &mut usize,
            ) -> Result<(), StoreError> {
                self.write_journal(tx, commit, done).await?;
                self.write_record(tx, &commit.record, None).await?;
                self.fault.after_statement(&self.backend, done)?;
                Ok(())
            }

            /// Writes a task's record inside the transaction open on `tx`:
            /// over a lower version ([`COMMIT_TASK`], `over` is `None`), or
            /// over version `over` only ([`COMMIT_TASK_OVER`]), refused
            /// when the row is at another version.
            async fn write_record(
                &self,
                tx: &mut <$db as sqlx::Database>::Connection,
                record: &TaskRecord,
                over: Option<u64>,
            ) -> Result<(), StoreError> {
                let query = sqlx::query(over.map_or(COMMIT_TASK, |_| COMMIT_TASK_OVER))
                    .bind(&record.snapshot.task)
                    .bind(enum_text(&record.snapshot.status))
                    .bind(i64::from(record.snapshot.loop_count))
                    .bind(i64::from(record.snapshot.pivots))
                    .bind(record.snapshot.last_seen.0)
                    .bind(wide(record.version))
                    .bind(record.state.as_deref());
                let query = match over {
                    Some(version) => query.bind(wide(version)),
                    None => query,
                };
                let written = query
                    .execute(&mut *tx)
                    .await
                    .map_err(|err| error(&self.backend, "commit", err))?;
                match over {
                    Some(version) if written.rows_affected() != 1 => Err(error(
                        &self.backend,
                        "commit",
                        format!(
                            "task {}'s row is no longer at version {version}: the commit is \
                             refused, not written over it",
                            record.snapshot.task
                        ),
                    )),
                    _ => Ok(()),
                }
            }

            /// Inside the transaction open on `tx`: a commit's pivot
            /// records, audit rows and episodes.
            async fn write_journal(
                &self,
                tx: &mut <$db as sqlx::Database>::Connection,
                commit: &TaskCommit,
                done: &mut usize,
            ) -> Result<(), StoreError> {
                let backend = &self.backend;
                let failed = |err| error(backend, "commit", err);
                for pivot in &commit.pivots {
                    sqlx::query(INSERT_PIVOT)
                        .bind(&pivot.task)
                        .bind(wide(pivot.line))
                        .bind(pivot.at.0)
                        .bind(i64::from(pivot.number))
                        .bind(pivot.directive.as_deref())
                        .execute(&mut *tx)
                        .await
                        .map_err(failed)?;
                    self.fault.after_statement(backend, done)?;
                }
                for entry in &commit.audit {
                    sqlx::query(INSERT_AUDIT)
                        .bind(&entry.task)
                        .bind(wide(entry.line))
                        .bind(entry.at.0)
                        .bind(entry.record.entry())
                        .bind(json_text(&entry.record))
                        .execute(&mut *tx)
                        .await
                        .map_err(failed)?;
                    self.fault.after_statement(backend, done)?;
                }
                for episode in &commit.episodes {
                    self.episode_query(episode)?
                        .execute(&mut *tx)
                        .await
                        .map_err(failed)?;
                    self.fault.after_statement(backend, done)?;
                }
                Ok(())
            }

            /// Inside the transaction open on `tx`: the current run's line
            /// errors noted before `line`, and `line` as its last committed
            /// line.
            async fn write_progress(
                &self,
                tx: &mut <$db as sqlx::Database>::Connection,
                line: Option<u64>,
            ) -> Result<(), StoreError> {
                let Some(run) = self.run.current() else {
                    return Ok(());
                };
                let failed = |err| error(&self.backend, "record the run's progress", err);
                for (at, message) in self.run.pending_before(line) {
                    sqlx::query(INSERT_LINE_ERROR)
                        .bind(wide(run))
                        .bind(wide(at))
                        .bind(message)
                        .execute(&mut *tx)
                        .await
                        .map_err(failed)?;
                }
                if let Some(line) = line {
                    sqlx::query(ADVANCE_RUN)
                        .bind(wide(run))
                        .bind(wide(line))
                        .execute(&mut *tx)
                        .await
                        .map_err(failed)?;
                }
                Ok(())
            }

            /// Records the run's progress (and pending line errors) on its
            /// own, in one transaction.
            async fn progress_alone(&self, line: Option<u64>) -> Result<(), StoreError> {
                let failed = |err| error(&self.backend, "record the run's progress", err);
                let mut tx = self.pool.begin().await.map_err(failed)?;
                self.write_progress(&mut tx, line).await?;
                tx.commit().await.map_err(failed)?;
                self.run.stored_before(line.map(|line| line + 1));
                Ok(())
            }
        }

        #[async_trait]
        impl Store for $store {
            fn durability(&self) -> Durability {
                $durability
            }

            async fn load_record(&self, task: &str) -> Result<Option<TaskRecord>, StoreError> {
                let row = sqlx::query(LOAD_RECORD)
                    .bind(task)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(|err| error(&self.backend, "load task", err))?;
                row.map(|row| record_row(&self.backend, &row)).transpose()
            }

            async fn lock_task(&self, task: &str) -> Result<Box<dyn TaskLock>, StoreError> {
                self.lock_for_event(task).await
            }

            async fn commit(&self, commits: &[TaskCommit]) -> Result<(), StoreError> {
                self.commit_lines(commits, None).await
            }

            async fn commit_at(
                &self,
                commits: &[TaskCommit],
                line: Option<u64>,
            ) -> Result<(), StoreError> {
                self.commit_lines(commits, line).await
            }

            fn health(&self) -> Option<&StoreHealth> {
                Some(&self.health)
            }

            async fn close(&self) {
                self.before_close().await;
                self.pool.close().await;
            }

            async fn begin_run(
                &self,
                first_line: u64,
                resume: bool,
            ) -> Result<Option<RunRecord>, StoreError> {
                let record = if resume {
                    self.runs().await?.pop().ok_or_else(|| {
                        error(
                            &self.backend,
                            "resume",
                            "the store has recorded no run to resume",
                        )
                    })?
                } else {
                    let started_at = loopguard_core_types::Timestamp::now();
                    // Engines that share a store may number a run at the
                    // same moment: the later one takes the next number.
                    let mut attempts = 0;
                    let run: i64 = loop {
                        attempts += 1;
                        match sqlx::query_scalar(NEW_RUN)
                            .bind(wide(first_line))
                            .bind(started_at.0)
                            .fetch_one(&self.pool)
                            .await
                        {
                            Ok(run) => break run,
                            Err(err)
                                if attempts < 10
                                    && err
                                        .as_database_error()
                                        .is_some_and(|db| db.is_unique_violation()) => {}
                            Err(err) => return Err(error(&self.backend, "record a run", err)),
                        }
                    };
                    RunRecord {
                        run: counter(&self.backend, "run", run)?,
                        first_line,
                        last_line: None,
                        started_at,
                    }
                };
                *self.run.run.lock() = Some(record.run);
                Ok(Some(record))
            }

            fn note_line_error(&self, line: u64, message: &str) {
                if self.run.current().is_some()
                    && self.run.noted.fetch_add(1, Ordering::Relaxed) < MAX_STORED_LINE_ERRORS
                {
                    self.run.pending.lock().push((line, message.to_owned()));
                }
            }

            async fn finish_run(&self, last_line: u64) -> Result<(), StoreError> {
                if self.run.current().is_none() {
                    return Ok(());
                }
                self.progress_alone(Some(last_line)).await
            }

            async fn runs(&self) -> Result<Vec<RunRecord>, StoreError> {
                let rows = match sqlx::query(RUNS).fetch_all(&self.pool).await {
                    Ok(rows) => rows,
                    // A store of an older schema, opened read-only.
                    Err(err) if missing_table(&err) => return Ok(Vec::new()),
                    Err(err) => return Err(error(&self.backend, "read the runs", err)),
                };
                rows.iter()
                    .map(|row| {
                        let read = |err| error(&self.backend, "read the runs", err);
                        let last_line: Option<i64> = row.try_get("last_line").map_err(read)?;
                        Ok(RunRecord {
                            run: counter(&self.backend, "run", row.try_get("run").map_err(read)?)?,
                            first_line: counter(
                                &self.backend,
                                "first_line",
                                row.try_get("first_line").map_err(read)?,
                            )?,
                            last_line: last_line
                                .map(|line| counter(&self.backend, "last_line", line))
                                .transpose()?,
                            started_at: Timestamp(row.try_get("started_at").map_err(read)?),
                        })
                    })
                    .collect()
            }

            async fn recall_opinion(
                &self,
                key: &str,
            ) -> Result<Option<KeptOpinion>, StoreError> {
                let row = match sqlx::query(RECALL_OPINION)
                    .bind(key)
                    .fetch_optional(&self.pool)
                    .await
                {
                    Ok(row) => row,
                    // A store of an older schema, opened read-only.
                    Err(err) if missing_table(&err) => return Ok(None),
                    Err(err) => return Err(error(&self.backend, "read a second opinion", err)),
                };
                row.map(|row| self.kept_opinion(&row)).transpose()
            }

            async fn opinions(&self) -> Result<Vec<KeptOpinion>, StoreError> {
                let rows = match sqlx::query(OPINIONS).fetch_all(&self.pool).await {
                    Ok(rows) => rows,
                    // A store of an older schema, opened read-only.
                    Err(err) if missing_table(&err) => return Ok(Vec::new()),
                    Err(err) => return Err(error(&self.backend, "read the second opinions", err)),
                };
                rows.iter()
                    .map(|row| self.kept_opinion(row))
                    .collect()
            }

            async fn forget_opinions_before(&self, before: Timestamp) -> Result<u64, StoreError> {
                let done = sqlx::query(FORGET_OPINIONS)
                    .bind(before.0)
                    .execute(&self.pool)
                    .await
                    .map_err(|err| error(&self.backend, "forget second opinions", err))?;
                Ok(done.rows_affected())
            }

            async fn keep_opinion(&self, opinion: &KeptOpinion) -> Result<KeptOpinion, StoreError> {
                sqlx::query(KEEP_OPINION)
                    .bind(&opinion.key)
                    .bind(&opinion.by)
                    .bind(opinion.same)
                    .bind(&opinion.reason)
                    .bind(opinion.answered_at.0)
                    .execute(&self.pool)
                    .await
                    .map_err(|err| error(&self.backend, "keep a second opinion", err))?;
                // Another engine's answer may have been kept first.
                Ok(self
                    .recall_opinion(&opinion.key)
                    .await?
                    .unwrap_or_else(|| opinion.clone()))
            }

            async fn line_errors(&self) -> Result<Vec<StoredLineError>, StoreError> {
                let rows = match sqlx::query(LINE_ERRORS).fetch_all(&self.pool).await {
                    Ok(rows) => rows,
                    Err(err) if missing_table(&err) => return Ok(Vec::new()),
                    Err(err) => return Err(error(&self.backend, "read the line errors", err)),
                };
                rows.iter()
                    .map(|row| {
                        let read = |err| error(&self.backend, "read the line errors", err);
                        Ok(StoredLineError {
                            run: counter(&self.backend, "run", row.try_get("run").map_err(read)?)?,
                            line: counter(
                                &self.backend,
                                "line",
                                row.try_get("line").map_err(read)?,
                            )?,
                            error: row.try_get("error").map_err(read)?,
                        })
                    })
                    .collect()
            }

            async fn audit(&self, task: Option<&str>) -> Result<Vec<AuditEntry>, StoreError> {
                let rows = self
                    .rows_for(TASK_AUDIT, AUDIT, task, "read the audit log")
                    .await?;
                self.audit_entries(&rows)
            }

            async fn audit_recent(
                &self,
                task: Option<&str>,
                limit: usize,
            ) -> Result<Vec<AuditEntry>, StoreError> {
                let limit = i64::try_from(limit).unwrap_or(i64::MAX);
                let rows = match task {
                    Some(task) => {
                        sqlx::query(TASK_RECENT_AUDIT)
                            .bind(task)
                            .bind(limit)
                            .fetch_all(&self.pool)
                            .await
                    }
                    None => {
                        sqlx::query(RECENT_AUDIT)
                            .bind(limit)
                            .fetch_all(&self.pool)
                            .await
                    }
                }
                .map_err(|err| error(&self.backend, "read the audit log", err))?;
                self.audit_entries(&rows)
            }

            async fn detection_summaries(&self) -> Result<Vec<DetectionSummary>, StoreError> {
                const READ: &str = "read the detection summaries";
                let rows = sqlx::query(DETECTION_SUMMARIES)
                    .bind("detection")
                    .fetch_all(&self.pool)
                    .await
                    .map_err(|err| error(&self.backend, READ, err))?;
                rows.iter()
                    .map(|row| {
                        let read = |err| error(&self.backend, READ, err);
                        let detail: String = row.try_get("detail").map_err(read)?;
                        let record: AuditRecord = json_from(&self.backend, "detail", &detail)?;
                        let AuditRecord::Detection(last) = record else {
                            return Err(StoreError::Backend {
                                backend: self.backend.clone(),
                                message: format!(
                                    "{READ}: a row with entry \"detection\" holds another record: {detail}"
                                ),
                            });
                        };
                        Ok(DetectionSummary {
                            task: row.try_get("task").map_err(read)?,
                            count: counter(&self.backend, "n", row.try_get("n").map_err(read)?)?,
                            last: *last,
                        })
                    })
                    .collect()
            }

            async fn pivots(&self, task: Option<&str>) -> Result<Vec<PivotRecord>, StoreError> {
                let rows = self
                    .rows_for(TASK_PIVOTS, PIVOTS, task, "read the pivot records")
                    .await?;
                rows.iter()
                    .map(|row| {
                        let read = |err| error(&self.backend, "read the pivot records", err);
                        Ok(PivotRecord {
                            task: row.try_get("task").map_err(read)?,
                            line: counter(
                                &self.backend,
                                "line",
                                row.try_get("line").map_err(read)?,
                            )?,
                            at: Timestamp(row.try_get("at").map_err(read)?),
                            number: counter(
                                &self.backend,
                                "number",
                                row.try_get("number").map_err(read)?,
                            )?,
                            directive: row.try_get("directive").map_err(read)?,
                        })
                    })
                    .collect()
            }

            async fn record_episode(&self, episode: &CycleEpisode) -> Result<(), StoreError> {
                self.episode_query(episode)?
                    .execute(&self.pool)
                    .await
                    .map_err(|err| error(&self.backend, "record episode", err))?;
                Ok(())
            }

            async fn save_task(&self, snapshot: &TaskSnapshot) -> Result<(), StoreError> {
                sqlx::query(SAVE_TASK)
                    .bind(&snapshot.task)
                    .bind(enum_text(&snapshot.status))
                    .bind(i64::from(snapshot.loop_count))
                    .bind(i64::from(snapshot.pivots))
                    .bind(snapshot.last_seen.0)
                    .execute(&self.pool)
                    .await
                    .map_err(|err| error(&self.backend, "save task", err))?;
                Ok(())
            }

            async fn load_task(&self, task: &str) -> Result<Option<TaskSnapshot>, StoreError> {
                let row = sqlx::query(LOAD_TASK)
                    .bind(task)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(|err| error(&self.backend, "load task", err))?;
                row.map(|row| {
                    task_row(
                        &self.backend,
                        row.try_get("task"),
                        row.try_get("status"),
                        row.try_get("loop_count"),
                        row.try_get("pivots"),
                        row.try_get("last_seen"),
                    )
                })
                .transpose()
            }

            async fn tasks(&self) -> Result<Vec<TaskSnapshot>, StoreError> {
                let rows = sqlx::query(TASKS)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(|err| error(&self.backend, "list tasks", err))?;
                rows.iter()
                    .map(|row| {
                        task_row(
                            &self.backend,
                            row.try_get("task"),
                            row.try_get("status"),
                            row.try_get("loop_count"),
                            row.try_get("pivots"),
                            row.try_get("last_seen"),
                        )
                    })
                    .collect()
            }

            async fn episodes(&self, task: Option<&str>) -> Result<Vec<CycleEpisode>, StoreError> {
                let rows = self
                    .rows_for(TASK_EPISODES, EPISODES, task, "read the cycle log")
                    .await?;
                rows.iter()
                    .map(|row| {
                        episode_row(
                            &self.backend,
                            EpisodeColumns {
                                id: row.try_get("id"),
                                task: row.try_get("task"),
                                opened_at: row.try_get("opened_at"),
                                patterns: row.try_get("patterns"),
                                intervention: row.try_get("intervention"),
                                escalated: row.try_get("escalated"),
                                lines: row.try_get("lines"),
                                resolution: row.try_get("resolution"),
                                resolved_at: row.try_get("resolved_at"),
                            },
                        )
                    })
                    .collect()
            }
        }
    };
}

#[cfg(feature = "sqlite")]
sql_store!(SqliteStore, sqlx::Sqlite, Durability::Durable);
#[cfg(feature = "postgres")]
sql_store!(PostgresStore, sqlx::Postgres, Durability::Shared);

#[cfg(feature = "postgres")]
/// A task held under PostgreSQL's lock for it, inside a transaction.
struct PgTaskLock {
    store: PostgresStore,
    tx: sqlx::Transaction<'static, sqlx::Postgres>,
    record: Option<TaskRecord>,
}

#[cfg(feature = "sqlite")]
impl SqliteStore {
    /// SQLite serves one engine (it is [`Durability::Durable`]): no event
    /// asks it for a task lock.
    async fn lock_for_event(&self, task: &str) -> Result<Box<dyn TaskLock>, StoreError> {
        let _ = task;
        Err(error(
            &self.backend,
            "lock task",
            "a SQLite store serves one engine; share a PostgreSQL store between engines",
        ))
    }
}

#[cfg(feature = "postgres")]
impl PostgresStore {
    async fn lock_for_event(&self, task: &str) -> Result<Box<dyn TaskLock>, StoreError> {
        Ok(Box::new(self.lock(task).await?))
    }

    async fn lock(&self, task: &str) -> Result<PgTaskLock, StoreError> {
        let failed = |err| error(&self.backend, "lock task", err);
        let mut tx = self.pool.begin().await.map_err(failed)?;
        sqlx::query(LOCK_TASK)
            .bind(task)
            .execute(&mut *tx)
            .await
            .map_err(failed)?;
        let row = sqlx::query(LOAD_RECORD)
            .bind(task)
            .fetch_optional(&mut *tx)
            .await
            .map_err(failed)?;
        let record = row.map(|row| record_row(&self.backend, &row)).transpose()?;
        Ok(PgTaskLock {
            store: self.clone(),
            tx,
            record,
        })
    }
}

#[cfg(feature = "postgres")]
#[async_trait]
impl TaskLock for PgTaskLock {
    fn record(&self) -> Option<&TaskRecord> {
        self.record.as_ref()
    }

    async fn commit(mut self: Box<Self>, commit: &TaskCommit) -> Result<(), StoreError> {
        let mut done = 0;
        self.store
            .write_journal(&mut self.tx, commit, &mut done)
            .await?;
        let over = self.record.as_ref().map_or(0, |record| record.version);
        self.store
            .write_record(&mut self.tx, &commit.record, Some(over))
            .await?;
        let backend = &self.store.backend;
        self.store.fault.after_statement(backend, &mut done)?;
        let line = self.store.run.current().map(|_| commit.line);
        self.store.write_progress(&mut self.tx, line).await?;
        let backend = self.store.backend.clone();
        self.tx
            .commit()
            .await
            .map_err(|err| error(&backend, "commit", err))?;
        self.store.run.stored_before(line);
        Ok(())
    }
}

/// A line number or version as the signed 64-bit column both databases
/// have (values above `i64::MAX` do not occur: they are counts).
fn wide(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn record_row<R: Row>(backend: &str, row: &R) -> Result<TaskRecord, StoreError>
where
    for<'r> &'r str: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let read = |err| error(backend, "read task", err);
    let snapshot = task_row(
        backend,
        row.try_get("task"),
        row.try_get("status"),
        row.try_get("loop_count"),
        row.try_get("pivots"),
        row.try_get("last_seen"),
    )?;
    Ok(TaskRecord {
        snapshot,
        version: counter(backend, "version", row.try_get("version").map_err(read)?)?,
        state: row.try_get("state").map_err(read)?,
    })
}

type Column<T> = Result<T, sqlx::Error>;

fn task_row(
    backend: &str,
    task: Column<String>,
    status: Column<String>,
    loop_count: Column<i64>,
    pivots: Column<i64>,
    last_seen: Column<i64>,
) -> Result<TaskSnapshot, StoreError> {
    let read = |err| error(backend, "read task", err);
    Ok(TaskSnapshot {
        task: task.map_err(read)?,
        status: enum_from(backend, "status", &status.map_err(read)?)?,
        loop_count: counter(backend, "loop_count", loop_count.map_err(read)?)?,
        pivots: counter(backend, "pivots", pivots.map_err(read)?)?,
        last_seen: Timestamp(last_seen.map_err(read)?),
    })
}

struct EpisodeColumns {
    id: Column<i64>,
    task: Column<String>,
    opened_at: Column<i64>,
    patterns: Column<String>,
    intervention: Column<String>,
    escalated: Column<bool>,
    lines: Column<String>,
    resolution: Column<Option<String>>,
    resolved_at: Column<Option<i64>>,
}

fn episode_row(backend: &str, columns: EpisodeColumns) -> Result<CycleEpisode, StoreError> {
    let read = |err| error(backend, "read the cycle log", err);
    let resolution = match columns.resolution.map_err(read)? {
        Some(text) => Some(enum_from(backend, "resolution", &text)?),
        None => None,
    };
    Ok(CycleEpisode {
        id: counter(backend, "id", columns.id.map_err(read)?)?,
        task: columns.task.map_err(read)?,
        opened_at: Timestamp(columns.opened_at.map_err(read)?),
        patterns: json_from(backend, "patterns", &columns.patterns.map_err(read)?)?,
        intervention: enum_from(
            backend,
            "intervention",
            &columns.intervention.map_err(read)?,
        )?,
        escalated: columns.escalated.map_err(read)?,
        lines: json_from(backend, "lines", &columns.lines.map_err(read)?)?,
        resolution,
        resolved_at: columns.resolved_at.map_err(read)?.map(Timestamp),
    })
}

/// The file a `sqlite://PATH` (or `sqlite:PATH`) URL names.
fn sqlite_path(url: &str) -> Result<&str, StoreError> {
    let path = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .unwrap_or(url);
    let path = path.split_once('?').map_or(path, |(path, _)| path);
    if path.is_empty() {
        return Err(error(
            url,
            "open",
            "the URL names no file: use sqlite://PATH",
        ));
    }
    Ok(path)
}

/// The exclusive advisory lock on `PATH.lock` that makes one engine the
/// file's only writer: waits up to [`LOCK_WAIT`] for another loopguard
/// that holds it, then refuses, naming the file.
#[cfg(unix)]
async fn writer_lock(backend: &str, path: &str) -> Result<std::fs::File, StoreError> {
    use rustix::fs::{FlockOperation, flock};

    let lock_path = format!("{path}.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&lock_path)
        .map_err(|err| error(backend, "open", format!("cannot open {lock_path}: {err}")))?;
    let deadline = tokio::time::Instant::now() + LOCK_WAIT;
    loop {
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(file),
            Err(err) if err == rustix::io::Errno::WOULDBLOCK || err == rustix::io::Errno::INTR => {
                if tokio::time::Instant::now() >= deadline {
                    return Err(error(
                        backend,
                        "open",
                        format!(
                            "another loopguard holds {path} (its lock {lock_path}): a SQLite \
                             store serves one engine at a time; stop the other one, or share a \
                             PostgreSQL store between engines"
                        ),
                    ));
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            Err(err) => {
                return Err(error(
                    backend,
                    "open",
                    format!("cannot lock {lock_path}: {err}"),
                ));
            }
        }
    }
}

/// Without advisory locks (not Unix), nothing stops a second writer.
#[cfg(not(unix))]
async fn writer_lock(backend: &str, path: &str) -> Result<std::fs::File, StoreError> {
    let lock_path = format!("{path}.lock");
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|err| error(backend, "open", format!("cannot open {lock_path}: {err}")))
}

/// A SQLite error, with a hint when it is what a full disk causes
/// (`SQLITE_FULL`, or no room for the WAL index: `SQLITE_IOERR_SHMSIZE`).
fn with_disk_hint(err: sqlx::Error) -> String {
    let full = err
        .as_database_error()
        .and_then(|db| db.code())
        .is_some_and(|code| code == "13" || code == "4874");
    if full {
        format!("{err} (is the disk full? nothing was written)")
    } else {
        err.to_string()
    }
}

/// Whether a query failed because its table does not exist (a store of an
/// older schema, read without migrating it).
fn missing_table(err: &sqlx::Error) -> bool {
    err.as_database_error().is_some_and(|db| {
        db.code().as_deref() == Some("42P01") || db.message().contains("no such table")
    })
}

/// Refuses a database whose schema is newer than this loopguard's.
fn refuse_newer(backend: &str, version: Option<i64>) -> Result<(), StoreError> {
    match version {
        Some(version) if version > SCHEMA_VERSION => Err(error(
            backend,
            "open",
            format!(
                "the database has schema version {version}, written by a newer loopguard; \
                 this one knows versions up to {SCHEMA_VERSION}: upgrade loopguard \
                 (the database is left untouched)"
            ),
        )),
        _ => Ok(()),
    }
}

fn error(backend: &str, operation: &str, err: impl std::fmt::Display) -> StoreError {
    StoreError::Backend {
        backend: backend.to_owned(),
        message: format!("{operation}: {err}"),
    }
}

#[cfg(all(test, feature = "sqlite", feature = "postgres"))]
mod tests {
    use super::*;

    #[test]
    fn schema_version_is_the_last_embedded_migration() {
        for migrator in [&SQLITE_MIGRATIONS, &POSTGRES_MIGRATIONS] {
            let last = migrator.iter().map(|migration| migration.version).max();
            assert_eq!(last, Some(SCHEMA_VERSION));
        }
    }
}
