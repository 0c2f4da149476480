//! `loopguard serve`: the engine behind an HTTP API, so that an
//! orchestrator in any language can ask it about each event.
//!
//! A [`Server`] holds one [`LoopGuard`](loopguard_host::LoopGuard) (shared by every request) and its
//! store; [`Server::router`] is the axum [`Router`](axum::Router) that
//! answers:
//!
//! | route | what |
//! |-------|------|
//! | `POST /v1/events` | one event (`application/json`) or many (`application/x-ndjson`) in, their decisions out, exactly as `loopguard replay --format jsonl` prints them |
//! | `GET /v1/tasks` | every stored task: status, loop count, pivots, detections, the last detection |
//! | `GET /v1/tasks/{task}` | one task's report (as `replay --format json` prints a task), its cycle log and, when its events carried usage, its `spend` (costliest loops, running totals over its last events) |
//! | `POST /v1/tasks/{task}/human` | a `human` event for the task (lifts the gate), optional `{"note": "..."}` |
//! | `POST /v1/traces` | OTLP/HTTP traces (protobuf or JSON, optionally gzipped): spans buffered per trace, mapped as `loopguard import --from otlp` maps them, and decided when the trace's root span ends or `serve.otlp_flush_ms` after its last span |
//! | `GET /healthz`, `GET /readyz` | the process runs; the store answers |
//! | `GET /metrics` | the loop figures in the Prometheus text format (no token needed, like the health routes) |
//! | `GET /`, `GET /tasks/{task}`, `GET /assets/*` | the live dashboard and a task's page: static HTML, CSS and JS compiled in, no data, no token needed |
//! | `GET /v1/dashboard` | the dashboard's data, from the store: totals, tasks (newest activity first), the newest detections, detections per kind per minute, the agent matrix, the listed tasks' spend and costliest loops (all bounded) |
//! | `GET /v1/tasks/{task}/timeline` | the task's audit log (detections and resets, with lines and times), newest first |
//! | `GET /v1/live` | every decision as it is answered, as server-sent events (`decision`; `lagged` with how many a slow client missed) |
//!
//! With a token ([`ServeOptions::token`]) every `/v1` request needs
//! `Authorization: Bearer TOKEN`; [`check_listen`] refuses a non-loopback
//! address without one. Every request is bounded:
//! - its headers must arrive within [`ServeOptions::header_timeout`] (else
//!   the connection is closed), and a write's body within
//!   [`ServeOptions::body_timeout`] (else 408) and
//!   [`ServeOptions::body_limit_bytes`] (else 413);
//! - at most [`ServeOptions::queue`] requests are handled at once (503
//!   beyond: nothing waits in an unbounded queue), and a write takes its
//!   place only once its body is read, so slow senders hold none;
//!   `/readyz` says not ready while every place is taken;
//! - at most [`ServeOptions::max_connections`] connections are open, and
//!   each buffers at most [`ServeOptions::max_header_bytes`] of a request's
//!   head (431 beyond).
//!
//! Each refusal is counted in `/metrics` (`loopguard_refused_total`). Every
//! decision also goes to `GET /metrics` and, with
//! [`ServeOptions::webhook`], each one that asks for an action is POSTed to
//! a webhook ([`WebhookOptions`]) without holding up the answer.
//! [`Server::run`] serves until its shutdown future resolves, lets the
//! requests in flight finish for at most [`ServeOptions::shutdown_grace`],
//! closes what is still open, and commits what was answered.
//!
//! ```
//! use loopguard_config::Config;
//! use loopguard_host::LoopGuard;
//! use loopguard_serve::{ServeOptions, Server};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
//! let engine = LoopGuard::new(Config::default())?;
//! let server = Server::start(engine, ServeOptions::default()).await?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! // Serve until the future resolves (here at once), then commit and stop.
//! let finished = server.run(listener, async {}).await?;
//! assert_eq!(finished.lost, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub use error::ServeError;
pub use options::ServeOptions;
pub use server::{Finished, Server, check_listen, shutdown_signal};
pub use webhook::WebhookOptions;

mod body;
mod connections;
mod dashboard;
mod dashboard_spend;
mod error;
mod metrics;
mod options;
mod otlp;
mod otlp_buffer;
pub mod otlp_proto;
mod outlets;
mod respond;
mod router;
mod routes;
mod server;
mod state;
mod webhook;
