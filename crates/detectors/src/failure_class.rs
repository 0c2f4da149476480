//! Failure classification: is a failure the agents' own, or external
//! (ruling 3)?
//!
//! Network, timeout, authentication and dependency failures come from
//! outside the agents: retrying harder does not fix them, so they never add
//! to a task's loop count. They are reported as `external_failure`, and a
//! run of them is a dependency problem for a human, not an agent loop.
//!
//! [`classify`] decides from the event's `error_type` when it gives one: the
//! orchestrator that classified its own error is trusted, so an
//! `AssertionError` whose message says "timed out" (a test the agent's code
//! made hang) stays the agent's. Without an `error_type` (or with an empty
//! one), the message decides. Both are matched case-insensitively:
//!
//! | kind | `error_type` contains | the message contains (as words) |
//! |------|-----------------------|---------------------------------|
//! | [`ExternalKind::Authentication`] | `auth`, `credential`, `unauthori`, `forbidden` | "401", "403 forbidden", "unauthorized", "authentication failed", "invalid api key", "invalid credentials", "permission denied (publickey)", "token expired" |
//! | [`ExternalKind::Dependency`] | `dependency`, `dependencies`, `package`, `registry`, `install` | "no matching distribution", "could not find a version that satisfies", "failed to fetch", "failed to download", "could not resolve dependencies", "unable to resolve dependency", "failed to select a version", "version solving failed", "eresolve", "package not found" |
//! | [`ExternalKind::Timeout`] | `timeout`, `timedout`, `timed_out`, `deadline` | "timed out", "timeout", "deadline exceeded", "etimedout", "gateway timeout" |
//! | [`ExternalKind::Network`] | `network`, `connect`, `dns`, `socket`, `unreachable`, `unavailable`, `ratelimit`, `rate_limit` | "connection refused", "connection reset", "connection aborted", "econnrefused", "econnreset", "ehostunreach", "enetunreach", "network is unreachable", "no route to host", "could not resolve", "name or service not known", "temporary failure in name resolution", "getaddrinfo", "service unavailable", "bad gateway", "too many requests", "rate limit", "rate limited", "rate-limited", "certificate verify failed" |
//!
//! The kinds are tried in the order of the table (authentication first), so
//! "failed to fetch: connection timed out" is a dependency failure. A
//! message pattern matches only as whole words: "timeout" matches
//! "request timeout" but not `test_timeout_handling`.

use std::fmt;

/// Whose failure it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureClass {
    /// The agents' own: a repeat is a loop.
    Agent,
    /// From outside the agents: never a loop (ruling 3).
    External(ExternalKind),
}

/// The kind of an external failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExternalKind {
    /// The network: refused or reset connections, DNS, unavailable or
    /// rate-limiting services.
    Network,
    /// A call that took too long.
    Timeout,
    /// Missing, wrong or expired credentials.
    Authentication,
    /// A package or dependency that cannot be found or fetched.
    Dependency,
}

impl ExternalKind {
    /// The kind's name in reasons: `network`, `timeout`, `authentication`,
    /// `dependency`.
    pub fn as_str(self) -> &'static str {
        match self {
            ExternalKind::Network => "network",
            ExternalKind::Timeout => "timeout",
            ExternalKind::Authentication => "authentication",
            ExternalKind::Dependency => "dependency",
        }
    }
}

impl fmt::Display for ExternalKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FailureClass {
    /// Whether the failure is external.
    pub fn is_external(self) -> bool {
        matches!(self, FailureClass::External(_))
    }
}

/// Each kind with its `error_type` substrings and message words, in the
/// order they are tried. Every pattern is lowercase ASCII.
const RULES: [(ExternalKind, &[&str], &[&str]); 4] = [
    (
        ExternalKind::Authentication,
        &["auth", "credential", "unauthori", "forbidden"],
        &[
            "401",
            "403 forbidden",
            "unauthorized",
            "unauthorised",
            "authentication failed",
            "invalid api key",
            "incorrect api key",
            "invalid credentials",
            "permission denied (publickey)",
            "token expired",
        ],
    ),
    (
        ExternalKind::Dependency,
        &[
            "dependency",
            "dependencies",
            "package",
            "registry",
            "install",
        ],
        &[
            "no matching distribution",
            "could not find a version that satisfies",
            "failed to fetch",
            "failed to download",
            "could not resolve dependencies",
            "could not resolve dependency",
            "unable to resolve dependency",
            "failed to select a version",
            "version solving failed",
            "eresolve",
            "package not found",
        ],
    ),
    (
        ExternalKind::Timeout,
        &["timeout", "timedout", "timed_out", "deadline"],
        &[
            "timed out",
            "timeout",
            "deadline exceeded",
            "etimedout",
            "gateway timeout",
        ],
    ),
    (
        ExternalKind::Network,
        &[
            "network",
            "connect",
            "dns",
            "socket",
            "unreachable",
            "unavailable",
            "ratelimit",
            "rate_limit",
        ],
        &[
            "connection refused",
            "connection reset",
            "connection aborted",
            "econnrefused",
            "econnreset",
            "ehostunreach",
            "enetunreach",
            "network is unreachable",
            "no route to host",
            "could not resolve",
            "name or service not known",
            "temporary failure in name resolution",
            "getaddrinfo",
            "service unavailable",
            "bad gateway",
            "too many requests",
            "rate limit",
            "rate limited",
            "rate-limited",
            "certificate verify failed",
        ],
    ),
];

/// Classifies a failure by its `error_type` when given (and not blank),
/// otherwise by its message. See the module documentation for the rules.
///
/// ```
/// use loopguard_detectors::{ExternalKind, FailureClass, classify};
///
/// assert_eq!(
///     classify(None, "POST https://api.example/v1: connection refused"),
///     FailureClass::External(ExternalKind::Network)
/// );
/// assert_eq!(classify(Some("TimeoutError"), "boom"), FailureClass::External(ExternalKind::Timeout));
/// assert_eq!(classify(None, "E0308 mismatched types"), FailureClass::Agent);
/// // A classified error is trusted: the agent's own test hung.
/// assert_eq!(classify(Some("AssertionError"), "test timed out"), FailureClass::Agent);
/// ```
pub fn classify(error_type: Option<&str>, message: &str) -> FailureClass {
    if let Some(error_type) = error_type.map(str::trim).filter(|t| !t.is_empty()) {
        return RULES
            .iter()
            .find(|(_, types, _)| types.iter().any(|p| contains_ci(error_type, p)))
            .map_or(FailureClass::Agent, |(kind, _, _)| {
                FailureClass::External(*kind)
            });
    }
    RULES
        .iter()
        .find(|(_, _, words)| words.iter().any(|p| contains_word_ci(message, p)))
        .map_or(FailureClass::Agent, |(kind, _, _)| {
            FailureClass::External(*kind)
        })
}

/// Whether `haystack` contains the lowercase ASCII `needle`, ignoring ASCII
/// case.
fn contains_ci(haystack: &str, needle: &str) -> bool {
    find_ci(haystack.as_bytes(), needle.as_bytes(), |_, _| true)
}

/// Whether `haystack` contains the lowercase ASCII `needle` as whole words
/// (not preceded or followed by a letter, digit or `_`), ignoring ASCII case.
fn contains_word_ci(haystack: &str, needle: &str) -> bool {
    let is_word = |byte: u8| byte.is_ascii_alphanumeric() || byte == b'_';
    let bytes = haystack.as_bytes();
    find_ci(bytes, needle.as_bytes(), |start, end| {
        let before = start
            .checked_sub(1)
            .and_then(|at| bytes.get(at))
            .is_none_or(|b| !is_word(*b));
        let after = bytes.get(end).is_none_or(|b| !is_word(*b));
        before && after
    })
}

/// Whether some window of `haystack` equals `needle` (ASCII case ignored)
/// and `accept(start, end)` holds for it.
fn find_ci(haystack: &[u8], needle: &[u8], accept: impl Fn(usize, usize) -> bool) -> bool {
    let Some(&first) = needle.first() else {
        return true;
    };
    if haystack.len() < needle.len() {
        return false;
    }
    (0..=haystack.len() - needle.len()).any(|start| {
        haystack[start].eq_ignore_ascii_case(&first)
            && haystack[start..start + needle.len()].eq_ignore_ascii_case(needle)
            && accept(start, start + needle.len())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ExternalKind::*;

    fn external(kind: ExternalKind) -> FailureClass {
        FailureClass::External(kind)
    }

    #[test]
    fn error_type_decides_when_given() {
        for (error_type, expected) in [
            ("timeout", external(Timeout)),
            ("TimeoutError", external(Timeout)),
            ("requests.exceptions.ReadTimeout", external(Timeout)),
            ("DEADLINE_EXCEEDED", external(Timeout)),
            ("network", external(Network)),
            ("ConnectionRefusedError", external(Network)),
            ("RateLimitError", external(Network)),
            ("ServiceUnavailable", external(Network)),
            ("auth", external(Authentication)),
            ("AuthenticationError", external(Authentication)),
            ("Unauthorized", external(Authentication)),
            ("dependency", external(Dependency)),
            ("PackageNotFoundError", external(Dependency)),
            ("AssertionError", FailureClass::Agent),
            ("TypeError", FailureClass::Agent),
            ("E0308", FailureClass::Agent),
        ] {
            assert_eq!(classify(Some(error_type), "boom"), expected, "{error_type}");
        }
        // A given type is trusted over the message.
        assert_eq!(
            classify(Some("AssertionError"), "connection refused"),
            FailureClass::Agent
        );
        assert_eq!(
            classify(Some("timeout"), "E0308 mismatched types"),
            external(Timeout)
        );
    }

    #[test]
    fn blank_error_type_falls_back_to_the_message() {
        assert_eq!(
            classify(Some("  "), "connection refused"),
            external(Network)
        );
        assert_eq!(classify(Some(""), "E0308"), FailureClass::Agent);
    }

    #[test]
    fn messages_are_recognised_case_insensitively() {
        for (message, expected) in [
            ("connect ECONNREFUSED 127.0.0.1:5432", external(Network)),
            ("read ECONNRESET", external(Network)),
            ("Connection refused (os error 111)", external(Network)),
            (
                "HTTP 503 Service Unavailable from api.openai.com",
                external(Network),
            ),
            ("429 Too Many Requests", external(Network)),
            ("Rate limit reached for gpt-4", external(Network)),
            (
                "curl: (6) Could not resolve host: github.com",
                external(Network),
            ),
            (
                "request to https://x/y timed out after 30s",
                external(Timeout),
            ),
            ("Request Timeout", external(Timeout)),
            ("context deadline exceeded", external(Timeout)),
            ("HTTP 401 Unauthorized", external(Authentication)),
            ("Incorrect API key provided", external(Authentication)),
            (
                "ERROR: No matching distribution found for torch==9.9",
                external(Dependency),
            ),
            (
                "error: failed to select a version for the requirement `serde = \"^9\"`",
                external(Dependency),
            ),
            ("npm ERR! code ERESOLVE", external(Dependency)),
            (
                "Failed to fetch https://registry/x.tgz",
                external(Dependency),
            ),
        ] {
            assert_eq!(classify(None, message), expected, "{message}");
        }
    }

    #[test]
    fn agent_failures_stay_the_agents() {
        for message in [
            "E0308 mismatched types",
            "AssertionError: expected 3, got 4",
            "test_timeout_handling failed: expected 3 got 4",
            "1 failing: test_connection_pool_reuse",
            "NameError: name 'authenticate' is not defined",
            "index out of bounds: the len is 4010 but the index is 4011",
            "",
        ] {
            assert_eq!(classify(None, message), FailureClass::Agent, "{message}");
        }
    }

    #[test]
    fn patterns_match_whole_words_only() {
        assert!(contains_word_ci("Request TIMEOUT.", "timeout"));
        assert!(contains_word_ci("timeout", "timeout"));
        assert!(!contains_word_ci("test_timeout_x", "timeout"));
        assert!(!contains_word_ci("timeouts", "timeout"));
        assert!(!contains_word_ci("line 4012", "401"));
        assert!(contains_word_ci("status=401;", "401"));
        assert!(!contains_word_ci("time", "timeout"));
        assert!(contains_ci("ReadTimeout", "timeout"));
        // Non-ASCII text around a match is fine.
        assert!(contains_word_ci("délai: timed out ✗", "timed out"));
    }

    #[test]
    fn kinds_are_tried_in_order() {
        // Dependency before timeout.
        assert_eq!(
            classify(None, "failed to fetch crate: connection timed out"),
            external(Dependency)
        );
        // Timeout before network.
        assert_eq!(
            classify(None, "connection refused, then timed out"),
            external(Timeout)
        );
        assert!(external(Timeout).is_external());
        assert!(!FailureClass::Agent.is_external());
        assert_eq!(Dependency.to_string(), "dependency");
    }
}
