//! Accepting connections: hyper serves each one, with a timeout and a size
//! limit for a request's headers (431 beyond); at most `max_connections` are open at once (one more
//! is closed as soon as it is accepted). On shutdown the listener closes,
//! the live streams end, the requests in flight get `shutdown_grace` to
//! finish, and every connection still open after that is closed.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::metrics::Metrics;

/// How long the accept loop pauses after an accept error (out of file
/// descriptors, most often), so it does not spin.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

/// What every connection is held to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// How long a client may take to send a request's headers.
    pub(crate) header_timeout: Duration,
    /// Connections open at once.
    pub(crate) max_connections: usize,
    /// Bytes one connection buffers while reading a request's head.
    pub(crate) max_header_bytes: usize,
    /// After shutdown, how long the requests in flight may take.
    pub(crate) shutdown_grace: Duration,
}

/// Serves `router` on `listener` until `shutdown` resolves (see the module
/// docs); `closing` turns `true` when it does.
pub(crate) async fn serve(
    listener: TcpListener,
    router: axum::Router,
    limits: Limits,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    closing: Arc<tokio::sync::watch::Sender<bool>>,
) -> std::io::Result<()> {
    let open = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        // Finished connections leave the set as they go.
        while connections.try_join_next().is_some() {}
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(err) => {
                    tracing::warn!(%err, "cannot accept a connection");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(place) = Arc::clone(&open).try_acquire_owned() else {
            metrics.refused("connections");
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout)
            .max_buf_size(limits.max_header_bytes.max(8192));
        let connection = builder.serve_connection(
            TokioIo::new(stream),
            TowerToHyperService::new(router.clone()),
        );
        let connection = graceful.watch(connection);
        let metrics = Arc::clone(&metrics);
        connections.spawn(async move {
            if let Err(err) = connection.await
                && err.is_timeout()
            {
                metrics.refused("header_timeout");
            }
            drop(place);
        });
    }
    drop(listener);
    closing.send_replace(true);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(limits.shutdown_grace) => {
            tracing::warn!(
                open = connections.len(),
                "the grace period (serve.shutdown_grace_ms) is over: closing the connections still open"
            );
        }
    }
    connections.shutdown().await;
    Ok(())
}
