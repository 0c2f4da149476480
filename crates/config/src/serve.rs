//! `[serve]`: the HTTP sidecar's address, token and limits.

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::check::{invalid, is_http_url, within};

/// `[serve]`: the HTTP sidecar (`loopguard serve`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeConfig {
    /// The bearer token every write (and every read of task data) must
    /// carry as `Authorization: Bearer TOKEN` (default none). Without one,
    /// the server listens on a loopback address only.
    pub token: Option<String>,
    /// The address to listen on (default `127.0.0.1:7878`); `--listen`
    /// overrides it.
    pub listen: String,
    /// The largest request body in bytes (default 1 MiB); a larger one is
    /// answered 413.
    pub body_limit_bytes: usize,
    /// Requests handled at once (default 64); one more is answered 503 at
    /// once rather than queued, so memory stays bounded. A request takes its
    /// place only once its body has been read, so slow senders hold none.
    pub queue: usize,
    /// How long a client may take to send a request's headers, in
    /// milliseconds (default 5000); a slower one's connection is closed and
    /// counted in `/metrics`. It bounds an idle keep-alive connection too.
    pub header_timeout_ms: u64,
    /// How long a client may take to send a request's body, in
    /// milliseconds (default 5000); a slower one is answered 408 and
    /// counted in `/metrics`.
    pub body_timeout_ms: u64,
    /// Connections open at once (default 1024); one more is closed as soon
    /// as it is accepted, and counted in `/metrics`.
    pub max_connections: usize,
    /// The most bytes one connection buffers while reading a request's
    /// head (default 65536): longer headers are answered 431, so no
    /// connection holds more memory than this before its body is read.
    pub max_header_bytes: usize,
    /// After SIGTERM or SIGINT, how long the requests in flight may take to
    /// finish, in milliseconds (default 10000); then the connections still
    /// open are closed, every answered decision is committed, and the
    /// server exits.
    pub shutdown_grace_ms: u64,
    /// Where to POST each decision that asks for an action (not `none`), as
    /// JSON, as `replay --format jsonl` prints it (default none). Delivery
    /// never holds up an answer: decisions wait in a bounded queue and are
    /// retried; see the `webhook_*` keys.
    pub webhook_url: Option<String>,
    /// Attempts per decision before the webhook gives it up (default 3).
    pub webhook_attempts: u32,
    /// How long one attempt may take, in milliseconds (default 5000).
    pub webhook_timeout_ms: u64,
    /// Decisions waiting for the webhook at most (default 1024); one more
    /// is dropped and counted (`loopguard_webhook_total{outcome="dropped"}`)
    /// rather than queued without bound.
    pub webhook_queue: usize,
    /// OTLP receiver (`POST /v1/traces`): how long, in milliseconds, a
    /// trace whose root span has not ended waits after its last span
    /// arrived before its events are decided anyway (default 5000). A trace
    /// is decided at once when its root span (the one with no parent) ends.
    pub otlp_flush_ms: u64,
    /// OTLP receiver: the most traces buffered at once (default 1024);
    /// one more flushes the trace that waited longest first.
    pub otlp_max_traces: usize,
    /// OTLP receiver: the most spans buffered for one trace (default 4096);
    /// a trace that reaches it is decided at once, and its later spans
    /// form a new batch.
    pub otlp_max_spans_per_trace: usize,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            token: None,
            listen: "127.0.0.1:7878".to_owned(),
            body_limit_bytes: 1024 * 1024,
            queue: 64,
            header_timeout_ms: 5000,
            body_timeout_ms: 5000,
            max_connections: 1024,
            max_header_bytes: 64 * 1024,
            shutdown_grace_ms: 10_000,
            webhook_url: None,
            webhook_attempts: 3,
            webhook_timeout_ms: 5000,
            webhook_queue: 1024,
            otlp_flush_ms: 5000,
            otlp_max_traces: 1024,
            otlp_max_spans_per_trace: 4096,
        }
    }
}

impl ServeConfig {
    /// Checks every `serve.*` value.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.token.as_deref().is_some_and(str::is_empty) {
            return Err(invalid(
                "serve.token",
                "\"\"",
                "must not be empty (leave it out for no token)",
            ));
        }
        if self.listen.parse::<std::net::SocketAddr>().is_err() {
            return Err(invalid(
                "serve.listen",
                &self.listen,
                "must be an IP address and a port, e.g. \"127.0.0.1:7878\"",
            ));
        }
        within(
            "serve.body_limit_bytes",
            self.body_limit_bytes,
            64..=1 << 30,
            "must be between 64 and 1073741824 (1 GiB)",
        )?;
        within(
            "serve.queue",
            self.queue,
            1..=1 << 20,
            "must be between 1 and 1048576",
        )?;
        self.validate_webhook()?;
        for (key, value) in [
            ("serve.header_timeout_ms", self.header_timeout_ms),
            ("serve.body_timeout_ms", self.body_timeout_ms),
            ("serve.shutdown_grace_ms", self.shutdown_grace_ms),
        ] {
            within(
                key,
                value,
                1..=3_600_000,
                "must be between 1 and 3600000 (an hour)",
            )?;
        }
        within(
            "serve.max_header_bytes",
            self.max_header_bytes,
            8192..=16 << 20,
            "must be between 8192 and 16777216",
        )?;
        within(
            "serve.max_connections",
            self.max_connections,
            1..=1 << 20,
            "must be between 1 and 1048576",
        )?;
        self.validate_otlp()
    }

    fn validate_webhook(&self) -> Result<(), ConfigError> {
        if let Some(url) = &self.webhook_url
            && !is_http_url(url)
        {
            return Err(invalid(
                "serve.webhook_url",
                url,
                "must be an http:// or https:// URL, e.g. \"https://example.com/loopguard\"",
            ));
        }
        within(
            "serve.webhook_attempts",
            self.webhook_attempts,
            1..=100,
            "must be between 1 and 100",
        )?;
        within(
            "serve.webhook_timeout_ms",
            self.webhook_timeout_ms,
            1..=600_000,
            "must be between 1 and 600000 (ten minutes)",
        )?;
        within(
            "serve.webhook_queue",
            self.webhook_queue,
            1..=1 << 20,
            "must be between 1 and 1048576",
        )
    }

    fn validate_otlp(&self) -> Result<(), ConfigError> {
        within(
            "serve.otlp_flush_ms",
            self.otlp_flush_ms,
            1..=3_600_000,
            "must be between 1 and 3600000 (an hour)",
        )?;
        within(
            "serve.otlp_max_traces",
            self.otlp_max_traces,
            1..=1 << 20,
            "must be between 1 and 1048576",
        )?;
        within(
            "serve.otlp_max_spans_per_trace",
            self.otlp_max_spans_per_trace,
            1..=1 << 20,
            "must be between 1 and 1048576",
        )
    }
}
