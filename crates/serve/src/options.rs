//! [`ServeOptions`]: what the server enforces, read from `[serve]`.

use std::time::Duration;

use loopguard_config::ServeConfig;

use crate::webhook::WebhookOptions;

/// What the server enforces: the token, the body limit, the requests at
/// once, and how the OTLP receiver buffers spans.
/// [`ServeOptions::from_config`] reads them from `[serve]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeOptions {
    /// The bearer token every `/v1` request needs (none: no check).
    pub token: Option<String>,
    /// The largest request body in bytes; a larger one is answered 413.
    pub body_limit_bytes: usize,
    /// Requests handled at once; one more is answered 503 at once. A
    /// request takes its place once its body is read.
    pub queue: usize,
    /// How long a client may take to send a request's headers; slower, the
    /// connection is closed (`serve.header_timeout_ms`).
    pub header_timeout: Duration,
    /// How long a client may take to send a request's body; slower, 408
    /// (`serve.body_timeout_ms`).
    pub body_timeout: Duration,
    /// Connections open at once; one more is closed when accepted
    /// (`serve.max_connections`).
    pub max_connections: usize,
    /// Bytes one connection buffers while reading a request's head; longer
    /// headers are answered 431 (`serve.max_header_bytes`, at least 8192).
    pub max_header_bytes: usize,
    /// After the shutdown signal, how long requests in flight may take
    /// before the open connections are closed (`serve.shutdown_grace_ms`).
    pub shutdown_grace: Duration,
    /// Where decisions that ask for an action are POSTed (none: nowhere).
    pub webhook: Option<WebhookOptions>,
    /// How long an OTLP trace whose root span has not arrived waits after
    /// its last span before it is decided (`serve.otlp_flush_ms`).
    pub otlp_flush: Duration,
    /// The most OTLP traces buffered at once (`serve.otlp_max_traces`).
    pub otlp_max_traces: usize,
    /// The most spans buffered for one OTLP trace
    /// (`serve.otlp_max_spans_per_trace`).
    pub otlp_max_spans_per_trace: usize,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions::from_config(&ServeConfig::default())
    }
}

impl ServeOptions {
    /// The options `[serve]` sets.
    pub fn from_config(config: &ServeConfig) -> ServeOptions {
        ServeOptions {
            token: config.token.clone(),
            body_limit_bytes: config.body_limit_bytes,
            queue: config.queue.max(1),
            header_timeout: Duration::from_millis(config.header_timeout_ms.max(1)),
            body_timeout: Duration::from_millis(config.body_timeout_ms.max(1)),
            max_connections: config.max_connections.max(1),
            max_header_bytes: config.max_header_bytes.max(8192),
            shutdown_grace: Duration::from_millis(config.shutdown_grace_ms.max(1)),
            webhook: WebhookOptions::from_config(config),
            otlp_flush: Duration::from_millis(config.otlp_flush_ms.max(1)),
            otlp_max_traces: config.otlp_max_traces.max(1),
            otlp_max_spans_per_trace: config.otlp_max_spans_per_trace.max(1),
        }
    }
}
