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
//! Both SQL backends keep the same two tables (`loopguard_tasks`, one row
//! per task, and `loopguard_episodes`, the cycle log), written with
//! single-statement upserts (`INSERT … ON CONFLICT … DO UPDATE`), so two
//! engines on one database never lose a write to a read-modify-write race.
//! The schema's migrations are embedded and applied when a store opens; a
//! database written by a newer loopguard (a schema version above
//! [`SCHEMA_VERSION`]) is refused with a message saying so.
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

pub use backends::{PostgresStore, SqliteStore};
pub use loopguard_host::{MemoryStore, Store, StoreError};
pub use url::{SCHEMA_VERSION, open_store, redact_url};

mod backends;
mod rows;
mod url;
