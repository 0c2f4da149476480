//! The checks the sections' `validate` functions share. Each failure is a
//! [`ConfigError::Invalid`] naming the key and the value as written; its
//! position in the text is added by the caller that has the text.

use std::fmt::Display;
use std::ops::RangeInclusive;

use crate::{ConfigError, ConfigLocation};

/// `key` = `value` is not valid, for `reason`.
pub(crate) fn invalid(key: &str, value: impl ToString, reason: &str) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_owned(),
        value: value.to_string(),
        reason: reason.to_owned(),
        location: ConfigLocation::default(),
    }
}

/// A count that must be at least 1.
pub(crate) fn at_least_one(key: &str, value: u32) -> Result<(), ConfigError> {
    if value == 0 {
        return Err(invalid(key, value, "must be at least 1"));
    }
    Ok(())
}

/// A value that must lie in `range`; `reason` says what the range is.
pub(crate) fn within<T: PartialOrd + Display>(
    key: &str,
    value: T,
    range: RangeInclusive<T>,
    reason: &str,
) -> Result<(), ConfigError> {
    if !range.contains(&value) {
        return Err(invalid(key, value, reason));
    }
    Ok(())
}

/// Whether `url` is an `http://` or `https://` URL.
pub(crate) fn is_http_url(url: &str) -> bool {
    url.starts_with("http://") || url.starts_with("https://")
}
