//! What can stop the server.

use std::net::SocketAddr;

use loopguard_host::StoreError;

/// Why the server cannot start, or could not serve.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// Listening on an address others can reach, with no token to keep
    /// them out.
    #[error(
        "refusing to listen on {addr} without a token: anyone who can reach it could feed \
         events and read tasks; set [serve] token in the config, or listen on a loopback \
         address (127.0.0.1 or [::1])"
    )]
    NoToken {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// The store did not answer at start-up or at shutdown.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// The webhook's HTTP client cannot be built.
    #[error("webhook: cannot build its HTTP client: {0}")]
    Webhook(#[source] reqwest::Error),
    /// The listener failed.
    #[error("cannot serve: {0}")]
    Io(#[from] std::io::Error),
}
