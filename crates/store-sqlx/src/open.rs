//! Opening the store a URL names: which backend, migrated and ready.

use std::sync::Arc;

use loopguard_host::{MemoryStore, Store, StoreError};

#[cfg(feature = "postgres")]
use crate::backends::PostgresStore;
#[cfg(feature = "sqlite")]
use crate::backends::SqliteStore;
use crate::url::redact_url;

/// Opens the store a URL names: `memory`, `sqlite://PATH` or
/// `postgres://…`. The SQL backends apply their migrations before this
/// returns.
pub async fn open_store(url: &str) -> Result<Arc<dyn Store>, StoreError> {
    open(url, Access::Write).await
}

/// Opens the store a URL names for reading only, as `loopguard tasks`,
/// `log` and `report` do: never created, never migrated, and (SQLite)
/// never locked, so it reads a store a running engine writes, a read-only
/// file, or one of an older schema (what that schema lacks reads as empty).
/// `memory` is an empty store.
pub async fn open_store_read_only(url: &str) -> Result<Arc<dyn Store>, StoreError> {
    open(url, Access::ReadOnly).await
}

/// How a store is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Created and migrated when needed; SQLite's writer lock taken.
    Write,
    /// Read as it is.
    ReadOnly,
}

/// The backend `url` names, opened for `access`.
async fn open(url: &str, access: Access) -> Result<Arc<dyn Store>, StoreError> {
    let trimmed = url.trim();
    if trimmed == "memory" {
        return Ok(Arc::new(MemoryStore::new()));
    }
    if trimmed.starts_with("sqlite:") {
        #[cfg(feature = "sqlite")]
        return Ok(Arc::new(match access {
            Access::Write => SqliteStore::open(trimmed).await?,
            Access::ReadOnly => SqliteStore::open_read_only(trimmed).await?,
        }));
        #[cfg(not(feature = "sqlite"))]
        return Err(left_out(trimmed, "sqlite"));
    }
    if trimmed.starts_with("postgres://") || trimmed.starts_with("postgresql://") {
        #[cfg(feature = "postgres")]
        return Ok(Arc::new(match access {
            Access::Write => PostgresStore::open(trimmed).await?,
            Access::ReadOnly => PostgresStore::open_read_only(trimmed).await?,
        }));
        #[cfg(not(feature = "postgres"))]
        return Err(left_out(trimmed, "postgres"));
    }
    Err(StoreError::Backend {
        backend: redact_url(trimmed),
        message:
            "not a store URL: expected `memory`, `sqlite://PATH` or `postgres://USER@HOST/DATABASE`"
                .into(),
    })
}

/// The error for a URL whose backend this build left out.
#[cfg(not(all(feature = "sqlite", feature = "postgres")))]
fn left_out(url: &str, feature: &str) -> StoreError {
    StoreError::Backend {
        backend: redact_url(url),
        message: format!(
            "this loopguard was built without the `{feature}` feature of loopguard-store-sqlx"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unknown_scheme_is_named_in_the_error() {
        let err = open_store("mysql://root:pw@localhost/db")
            .await
            .err()
            .map(|err| err.to_string())
            .unwrap_or_default();
        assert!(err.contains("mysql://root:***@localhost/db"), "{err}");
        assert!(err.contains("sqlite://PATH"), "{err}");
    }

    #[tokio::test]
    async fn memory_opens_a_memory_store() {
        let store = open_store("memory").await;
        assert!(store.is_ok_and(|store| format!("{store:?}").contains("MemoryStore")));
    }
}
