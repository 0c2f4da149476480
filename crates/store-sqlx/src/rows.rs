//! Between the store's types and SQL columns.

use loopguard_host::StoreError;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A unit enum (`TaskStatus`, `Action`, `Resolution`) as its trace-format
/// name, e.g. `aborted_stuck`.
pub(crate) fn enum_text<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(text)) => text,
        Ok(other) => other.to_string(),
        Err(err) => format!("<{err}>"),
    }
}

/// The enum a column's text names.
pub(crate) fn enum_from<T: DeserializeOwned>(
    backend: &str,
    column: &str,
    text: &str,
) -> Result<T, StoreError> {
    serde_json::from_value(serde_json::Value::String(text.to_owned()))
        .map_err(|err| corrupt(backend, column, &err))
}

/// A list as JSON text.
pub(crate) fn json_text<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "[]".to_owned())
}

/// The list a column's JSON text holds.
pub(crate) fn json_from<T: DeserializeOwned>(
    backend: &str,
    column: &str,
    text: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|err| corrupt(backend, column, &err))
}

/// A counter column back to its width.
pub(crate) fn counter<T: TryFrom<i64>>(
    backend: &str,
    column: &str,
    value: i64,
) -> Result<T, StoreError> {
    T::try_from(value).map_err(|_| corrupt(backend, column, &format!("{value} is out of range")))
}

/// An episode id as the signed 64-bit column both databases have.
pub(crate) fn episode_id(backend: &str, id: u64) -> Result<i64, StoreError> {
    i64::try_from(id).map_err(|_| StoreError::Backend {
        backend: backend.to_owned(),
        message: format!(
            "record episode: id {id} is above the largest the store keeps ({})",
            i64::MAX
        ),
    })
}

fn corrupt(backend: &str, column: &str, err: &dyn std::fmt::Display) -> StoreError {
    StoreError::Backend {
        backend: backend.to_owned(),
        message: format!("read: column `{column}` holds an unreadable value: {err}"),
    }
}
