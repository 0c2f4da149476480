//! The SQLite and PostgreSQL stores: one implementation, two databases.
//!
//! The SQL is the same for both (`$N` parameters and `ON CONFLICT … DO
//! UPDATE` are understood by SQLite 3.24+ and PostgreSQL alike); only the
//! pool, the connection options and the migrations differ.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use loopguard_core_types::Timestamp;
use loopguard_host::{CycleEpisode, Store, StoreError, TaskSnapshot};
use sqlx::Row;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::rows::{counter, enum_from, enum_text, episode_id, json_from, json_text};
use crate::url::{SCHEMA_VERSION, redact_url};

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("migrations/postgres");

/// How long a connection waits for another writer's lock (SQLite) or for a
/// free connection (both) before the operation fails.
const WAIT: Duration = Duration::from_secs(10);

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
const MIGRATED_VERSION: &str = "SELECT MAX(version) FROM _sqlx_migrations WHERE success";

/// The cycle log and task snapshots in one SQLite file, in WAL mode.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    backend: String,
}

/// The cycle log and task snapshots in a PostgreSQL database that many
/// engines may share.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
    backend: String,
}

impl SqliteStore {
    /// Opens (creating it, and its folder, if missing) the file that
    /// `sqlite://PATH` (or `sqlite:PATH`) names, and migrates it.
    pub async fn open(url: &str) -> Result<SqliteStore, StoreError> {
        let backend = url.to_owned();
        let path = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
            .unwrap_or(url);
        let path = path.split_once('?').map_or(path, |(path, _)| path);
        if path.is_empty() {
            return Err(error(
                &backend,
                "open",
                "the URL names no file: use sqlite://PATH",
            ));
        }
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
            .map_err(|err| error(&backend, "open", err))?;
        let store = SqliteStore { pool, backend };
        store.migrate().await?;
        Ok(store)
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        let exists: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(|err| error(&self.backend, "read the schema version", err))?;
        if exists > 0 {
            let version: Option<i64> = sqlx::query_scalar(MIGRATED_VERSION)
                .fetch_one(&self.pool)
                .await
                .map_err(|err| error(&self.backend, "read the schema version", err))?;
            refuse_newer(&self.backend, version)?;
        }
        SQLITE_MIGRATIONS
            .run(&self.pool)
            .await
            .map_err(|err| error(&self.backend, "migrate", err))
    }
}

impl PostgresStore {
    /// Connects to the database a `postgres://` URL names and migrates it.
    /// Its `options` parameter is passed on, e.g.
    /// `?options=-c%20search_path%3Dloopguard` keeps the tables in the
    /// `loopguard` schema.
    pub async fn open(url: &str) -> Result<PostgresStore, StoreError> {
        let backend = redact_url(url);
        let options =
            PgConnectOptions::from_str(url).map_err(|err| error(&backend, "open", err))?;
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(WAIT)
            .connect_with(options)
            .await
            .map_err(|err| error(&backend, "connect", err))?;
        let store = PostgresStore { pool, backend };
        store.migrate().await?;
        Ok(store)
    }

    async fn migrate(&self) -> Result<(), StoreError> {
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
        POSTGRES_MIGRATIONS
            .run(&self.pool)
            .await
            .map_err(|err| error(&self.backend, "migrate", err))
    }
}

/// The same `Store` for both pools: the SQL above, binds, and row decoding.
macro_rules! sql_store {
    ($store:ty) => {
        impl $store {
            /// The backend as messages name it (the URL, without password).
            pub fn backend(&self) -> &str {
                &self.backend
            }

            /// Closes the pool, waiting for connections in use.
            pub async fn close(&self) {
                self.pool.close().await;
            }
        }

        #[async_trait]
        impl Store for $store {
            async fn record_episode(&self, episode: &CycleEpisode) -> Result<(), StoreError> {
                let id = episode_id(&self.backend, episode.id)?;
                let lines = json_text(&episode.lines);
                sqlx::query(RECORD_EPISODE)
                    .bind(id)
                    .bind(&episode.task)
                    .bind(episode.opened_at.0)
                    .bind(json_text(&episode.patterns))
                    .bind(enum_text(&episode.intervention))
                    .bind(episode.escalated)
                    .bind(lines)
                    .bind(episode.resolution.as_ref().map(enum_text))
                    .bind(episode.resolved_at.map(|at| at.0))
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
                let rows = match task {
                    Some(task) => {
                        sqlx::query(TASK_EPISODES)
                            .bind(task)
                            .fetch_all(&self.pool)
                            .await
                    }
                    None => sqlx::query(EPISODES).fetch_all(&self.pool).await,
                }
                .map_err(|err| error(&self.backend, "read the cycle log", err))?;
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

sql_store!(SqliteStore);
sql_store!(PostgresStore);

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

#[cfg(test)]
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
