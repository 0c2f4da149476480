//! Event timestamps: RFC 3339 in the trace, milliseconds since the Unix
//! epoch inside loopguard.

use std::fmt;

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// A point in time with millisecond precision (milliseconds since the Unix
/// epoch, UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// Parses an RFC 3339 timestamp such as `2026-11-22T10:00:00Z`.
    pub fn parse_rfc3339(text: &str) -> Result<Timestamp, String> {
        let parsed = OffsetDateTime::parse(text, &Rfc3339)
            .map_err(|err| format!("is not an RFC 3339 timestamp ({err}): {text:?}"))?;
        let millis = parsed.unix_timestamp_nanos() / 1_000_000;
        i64::try_from(millis)
            .map(Timestamp)
            .map_err(|_| format!("is out of range: {text:?}"))
    }

    /// The current wall-clock time.
    pub fn now() -> Timestamp {
        let millis = OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000;
        Timestamp(i64::try_from(millis).unwrap_or(i64::MAX))
    }

    /// Milliseconds since the Unix epoch.
    pub fn as_millis(self) -> i64 {
        self.0
    }

    /// Whole seconds from `earlier` to `self` (negative when `earlier` is
    /// later), saturating.
    pub fn seconds_since(self, earlier: Timestamp) -> i64 {
        self.0.saturating_sub(earlier.0) / 1000
    }

    /// The timestamp as RFC 3339 in UTC.
    pub fn to_rfc3339(self) -> String {
        OffsetDateTime::from_unix_timestamp_nanos(i128::from(self.0) * 1_000_000)
            .ok()
            .and_then(|dt| dt.format(&Rfc3339).ok())
            .unwrap_or_else(|| format!("@{}ms", self.0))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Timestamp::parse_rfc3339(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats_round_trip() {
        let ts = Timestamp::parse_rfc3339("2026-11-22T10:00:05.250+01:00").expect("valid");
        assert_eq!(ts.to_rfc3339(), "2026-11-22T09:00:05.25Z");
        let later = Timestamp::parse_rfc3339("2026-11-22T09:10:05.250Z").expect("valid");
        assert_eq!(later.seconds_since(ts), 600);
    }

    #[test]
    fn rejects_non_rfc3339() {
        assert!(Timestamp::parse_rfc3339("yesterday").is_err());
        assert!(Timestamp::parse_rfc3339("2026-11-22 10:00").is_err());
    }
}
