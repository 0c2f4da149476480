//! The server: its options, its shared state, start-up and shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use loopguard_core_types::{Decision, Event, ServeConfig};
use loopguard_host::{Durability, LoopGuard, Observed, Store};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, oneshot};

use crate::ServeError;
use crate::outlets::Outlets;
use crate::webhook::WebhookOptions;

/// How long shutdown waits for the store to write what it still holds.
const SETTLE_WAIT: Duration = Duration::from_secs(30);
/// How long shutdown waits for the webhook to send what waits.
const WEBHOOK_WAIT: Duration = Duration::from_secs(10);

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

/// Refuses to listen on `addr` when it is not a loopback address and there
/// is no `token`: the API would be open to anyone who can reach it.
pub fn check_listen(addr: SocketAddr, token: Option<&str>) -> Result<(), ServeError> {
    if addr.ip().is_loopback() || token.is_some_and(|token| !token.is_empty()) {
        Ok(())
    } else {
        Err(ServeError::NoToken { addr })
    }
}

/// Resolves on SIGTERM or SIGINT (Ctrl-C): the shutdown future for
/// [`Server::run`]. If the signals cannot be watched, it never resolves
/// (and says so in the log).
pub async fn shutdown_signal() {
    let interrupt = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::error!(%err, "cannot watch SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(err) => {
                tracing::error!(%err, "cannot watch SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}

/// What every request shares.
#[derive(Debug)]
pub(crate) struct State {
    /// The one engine.
    pub(crate) engine: LoopGuard,
    /// The SHA-256 of the token, compared in constant time.
    token_hash: Option<[u8; 32]>,
    /// Requests handled at once.
    pub(crate) permits: Arc<Semaphore>,
    /// The limits.
    pub(crate) options: ServeOptions,
    /// The next input line number: every line of every request takes one,
    /// so decisions, evidence and the audit log name distinct lines.
    next_line: AtomicU64,
    /// The last line answered.
    last_line: AtomicU64,
    /// Where every decision goes besides its reply.
    pub(crate) outlets: Outlets,
    /// Turns `true` when the server stops accepting: long-lived responses
    /// (`GET /v1/live`) end then, so a graceful shutdown does not wait on
    /// them.
    pub(crate) closing: Arc<tokio::sync::watch::Sender<bool>>,
    /// OTLP spans waiting for their trace to be decided.
    pub(crate) otlp: crate::otlp::Buffer,
}

impl State {
    /// Takes `count` consecutive line numbers; returns the first.
    pub(crate) fn take_lines(&self, count: u64) -> u64 {
        self.next_line.fetch_add(count, Ordering::Relaxed)
    }

    /// Notes that `line` was answered.
    pub(crate) fn answered(&self, line: u64) {
        self.last_line.fetch_max(line, Ordering::Relaxed);
    }

    /// Decides `event` on the next line number and passes the decision to
    /// the outlets (metrics, live feed): every route that feeds the engine
    /// one event goes through here.
    pub(crate) async fn observe(&self, event: Event) -> Decision {
        let line = self.take_lines(1);
        let event_type = compact_str::CompactString::from(event.kind.type_name());
        let started = std::time::Instant::now();
        let decision = self.engine.observe_line(line, event).await;
        let observed = Observed::new(&event_type, started.elapsed());
        self.answered(line);
        self.outlets.decided(&decision, observed);
        decision
    }

    /// The engine's store.
    pub(crate) fn store(&self) -> &dyn Store {
        self.engine.store().as_ref()
    }

    /// Whether `header` (the `Authorization` value) carries the token; with
    /// no token, every request does.
    pub(crate) fn authorized(&self, header: Option<&[u8]>) -> bool {
        let Some(expected) = &self.token_hash else {
            return true;
        };
        let Some(given) = header.and_then(|value| value.strip_prefix(b"Bearer ")) else {
            return false;
        };
        let given: [u8; 32] = Sha256::digest(given).into();
        // Constant time: every byte is compared whatever the first
        // difference (and the hashes have one length whatever the token's).
        given
            .iter()
            .zip(expected)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

/// What shutdown committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Finished {
    /// The last input line answered (0 when none was).
    pub last_line: u64,
    /// Answered events whose writes never reached the store (0 when every
    /// answered decision is committed).
    pub lost: u64,
}

/// The engine behind the HTTP API: one [`LoopGuard`] shared by every
/// request.
#[derive(Debug)]
pub struct Server {
    state: Arc<State>,
    /// The webhook's worker, when there is one.
    webhook: Option<tokio::task::JoinHandle<()>>,
    /// The task that decides expired OTLP traces, and its stop.
    flusher: Flusher,
}

/// The background task that decides the OTLP traces whose flush delay has
/// passed. It holds the state weakly, so that it never keeps the engine
/// (and its store) alive.
#[derive(Debug)]
struct Flusher {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Flusher {
    fn start(state: &Arc<State>) -> Flusher {
        let (stop, mut stopped) = oneshot::channel::<()>();
        let weak = Arc::downgrade(state);
        let mut ticks = tokio::time::interval(state.otlp.tick());
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    _ = ticks.tick() => {
                        let Some(state) = weak.upgrade() else { break };
                        crate::otlp::flush_expired(&state).await;
                    }
                }
            }
        });
        Flusher { stop, task }
    }

    /// Stops the task once the flush it may be doing is done.
    async fn stop(self) {
        let _ = self.stop.send(());
        if let Err(err) = self.task.await {
            tracing::error!(%err, "the OTLP flush task failed");
        }
    }
}

impl Server {
    /// A server over `engine` (and its store). Line numbers continue after
    /// the store's last recorded run, and a new run is recorded, so that a
    /// restarted server on the same store names new lines.
    pub async fn start(engine: LoopGuard, options: ServeOptions) -> Result<Server, ServeError> {
        let runs = engine.store().runs().await?;
        let first_line = runs
            .iter()
            .map(|run| {
                run.last_line
                    .map_or(run.first_line, |line| line.saturating_add(1))
            })
            .max()
            .unwrap_or(1)
            .max(1);
        engine.store().begin_run(first_line, false).await?;
        let token_hash = options
            .token
            .as_deref()
            .map(|token| Sha256::digest(token.as_bytes()).into());
        let (outlets, webhook) =
            Outlets::new(options.webhook.as_ref()).map_err(ServeError::Webhook)?;
        let otlp = crate::otlp::Buffer::new(
            options.otlp_flush,
            options.otlp_max_traces,
            options.otlp_max_spans_per_trace,
        );
        let state = Arc::new(State {
            engine,
            token_hash,
            permits: Arc::new(Semaphore::new(options.queue.max(1))),
            options,
            next_line: AtomicU64::new(first_line),
            last_line: AtomicU64::new(0),
            outlets,
            closing: Arc::new(tokio::sync::watch::Sender::new(false)),
            otlp,
        });
        let flusher = Flusher::start(&state);
        Ok(Server {
            state,
            webhook,
            flusher,
        })
    }

    /// The routes (see the crate docs), with auth and the limits.
    pub fn router(&self) -> axum::Router {
        crate::routes::router(Arc::clone(&self.state))
    }

    /// The engine every request is answered by.
    pub fn engine(&self) -> &LoopGuard {
        &self.state.engine
    }

    /// Serves on `listener` until `shutdown` resolves, then stops accepting,
    /// ends the live streams, lets the requests in flight finish for at most
    /// [`ServeOptions::shutdown_grace`] (then closes the connections still
    /// open), and [`finish`](Server::finish)es: every answered decision is
    /// committed.
    ///
    /// Each connection is served by hyper with a timeout for its headers
    /// ([`ServeOptions::header_timeout`]); at most
    /// [`ServeOptions::max_connections`] are open at once.
    pub async fn run(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<Finished, ServeError> {
        let options = &self.state.options;
        crate::connections::serve(
            listener,
            self.router(),
            crate::connections::Limits {
                header_timeout: options.header_timeout,
                max_connections: options.max_connections,
                max_header_bytes: options.max_header_bytes,
                shutdown_grace: options.shutdown_grace,
            },
            Arc::clone(&self.state.outlets.metrics),
            async move {
                shutdown.await;
            },
            Arc::clone(&self.state.closing),
        )
        .await?;
        Ok(self.finish().await)
    }

    /// Commits what was answered and closes the store: the OTLP traces
    /// still buffered are decided first, a shared store's waiting commits
    /// are written (retried for up to 30 s), the store's writer is given the
    /// same time to write what it holds, and the run records its last line
    /// when nothing was lost.
    pub async fn finish(self) -> Finished {
        let Server {
            state,
            webhook,
            flusher,
        } = self;
        flusher.stop().await;
        crate::otlp::flush_all(&state).await;
        let store = Arc::clone(state.engine.store());
        let last_line = state.last_line.load(Ordering::Relaxed);
        let mut lost = 0u64;
        if store.durability() == Durability::Shared {
            let deadline = tokio::time::Instant::now() + SETTLE_WAIT;
            loop {
                match state.engine.write_pending().await {
                    Ok(0) => break,
                    _ if tokio::time::Instant::now() >= deadline => {
                        lost = u64::try_from(state.engine.pending_writes()).unwrap_or(u64::MAX);
                        break;
                    }
                    _ => tokio::time::sleep(Duration::from_millis(250)).await,
                }
            }
        }
        // Dropping the engine stops the store's writer once it has written
        // what it holds (routes still holding the state keep it alive; after
        // a graceful shutdown none does).
        drop(state);
        if let Some(worker) = webhook
            && tokio::time::timeout(WEBHOOK_WAIT, worker).await.is_err()
        {
            tracing::warn!("the webhook did not send every waiting decision before shutdown");
        }
        if let Some(health) = store.health() {
            let health = health.settled(SETTLE_WAIT).await;
            lost = lost.saturating_add(health.lost.saturating_add(health.backlog));
        }
        if lost == 0
            && last_line > 0
            && let Err(err) = store.finish_run(last_line).await
        {
            tracing::error!(%err, "cannot record the run's last line");
        }
        store.close().await;
        Finished { last_line, lost }
    }
}
