//! SQLite and PostgreSQL stores for the loopguard engine, through `sqlx`.
//!
//! [`open_store`] turns a store URL into a [`Store`]:
//!
//! | URL | backend |
//! |-----|---------|
//! | `memory` | [`MemoryStore`]: nothing outlives the process |
//! | `sqlite://PATH` | [`SqliteStore`]: one file in WAL mode, created (with its folder) on first use |
//! | `postgres://…` (or `postgresql://…`) | [`PostgresStore`]: one database shared by a fleet of engines |
//!
//! Both SQL backends keep the same tables: `loopguard_tasks` (one row per
//! task: status, counters, a version raised by every commit, and the
//! detectors' whole state as versioned JSON), `loopguard_audit` (every
//! detection and every reset, with its reason and the counts it cleared),
//! `loopguard_pivots` (the strategy pivots) and `loopguard_episodes` (the
//! cycle log). One event's writes are one [`TaskCommit`](loopguard_host::TaskCommit),
//! committed in one transaction: all of it or none of it. A task's row is
//! replaced only by a higher version, so a late retry never overwrites a
//! newer state.
//!
//! - SQLite is [`Durability::Durable`](loopguard_host::Durability): one
//!   engine, whose concurrent events share transactions.
//! - PostgreSQL is [`Durability::Shared`](loopguard_host::Durability): every
//!   event takes its task's transaction-scoped advisory lock
//!   (`pg_advisory_xact_lock`) and reads the task's row before the engine
//!   decides, so engines in several processes serve one task with exact
//!   counters (no read-modify-write race: the lock serializes them).
//!
//! One SQLite file serves one engine: [`open_store`] holds an advisory lock
//! on `PATH.lock` and refuses a file another loopguard holds.
//! [`open_store_read_only`] neither locks, creates nor migrates: it reads a
//! store while its engine writes it, or a file that cannot be written.
//!
//! A SQLite commit that fails (a full disk) is rolled back and its
//! connection closed, so it never keeps the write lock; the engine's writer
//! keeps the commit and writes it once the database takes it again.
//!
//! The stores also record the runs of `loopguard replay`
//! ([`Store::begin_run`]): the last input line each committed, in the same
//! transaction as that line's event, and the lines that were not events,
//! so a run can be resumed after its last committed line.
//!
//! And the answers of the same-request judge's second opinion
//! (`loopguard_second_opinions`, [`Store::keep_opinion`]): the first
//! answer kept for a pair wins, every engine on the store recalls it, and
//! none is forgotten until [`Store::forget_opinions_before`] is called
//! (`loopguard opinions --forget-older-than DAYS`).
//!
//! The schema's migrations are embedded and applied when a store opens; a
//! database written by a newer loopguard (a schema version above
//! [`SCHEMA_VERSION`]) is refused with a message saying so.
//!
//! Cargo features: `sqlite` and `postgres` (both on by default), one per
//! backend; [`open_store`] names a missing one.
//!
//! ```
//! use loopguard_core_types::{TaskStatus, Timestamp};
//! use loopguard_host::TaskSnapshot;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
//! let folder = tempfile::tempdir()?;
//! let url = format!("sqlite://{}", folder.path().join("state/loopguard.db").display());
//! let store = loopguard_store_sqlx::open_store(&url).await?;
//! let snapshot = TaskSnapshot {
//!     task: "T-1042".into(),
//!     status: TaskStatus::Escalated,
//!     loop_count: 3,
//!     pivots: 0,
//!     last_seen: Timestamp(1_700_000_000_000),
//! };
//! store.save_task(&snapshot).await?;
//! assert_eq!(store.load_task("T-1042").await?, Some(snapshot));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

#[cfg(feature = "postgres")]
pub use backends::PostgresStore;
pub use backends::SCHEMA_VERSION;
#[cfg(feature = "sqlite")]
pub use backends::SqliteStore;
pub use loopguard_host::{MemoryStore, Store, StoreError};
pub use open::{open_store, open_store_read_only};
pub use url::redact_url;

// Imports go one way: `open` -> `backends` -> `rows`, `url`.
mod backends;
mod open;
mod rows;
mod url;
