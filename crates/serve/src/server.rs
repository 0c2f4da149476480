//! The server: start-up (the store's run, the shared state, the OTLP
//! flush task), serving connections, and shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use loopguard_host::{Durability, LoopGuard};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::connections::{self, Limits};
use crate::error::ServeError;
use crate::options::ServeOptions;
use crate::outlets::Outlets;
use crate::state::State;
use crate::{otlp, router};

/// How long shutdown waits for the store to write what it still holds.
const SETTLE_WAIT: Duration = Duration::from_secs(30);
/// How long shutdown waits for the webhook to send what waits.
const WEBHOOK_WAIT: Duration = Duration::from_secs(10);

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
                        otlp::flush_expired(&state).await;
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
        let (outlets, webhook) =
            Outlets::new(options.webhook.as_ref()).map_err(ServeError::Webhook)?;
        let state = Arc::new(State::new(engine, options, outlets, first_line));
        let flusher = Flusher::start(&state);
        Ok(Server {
            state,
            webhook,
            flusher,
        })
    }

    /// The routes (see the crate docs), with auth and the limits.
    pub fn router(&self) -> axum::Router {
        router::router(Arc::clone(&self.state))
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
        connections::serve(
            listener,
            self.router(),
            Limits {
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
        otlp::flush_all(&state).await;
        let store = Arc::clone(state.engine.store());
        let last_line = state.last_line();
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
