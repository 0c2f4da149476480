//! A write request's body: read within `serve.body_timeout_ms` (slower:
//! 408) and `serve.body_limit_bytes` (larger: 413), and only then a place
//! among the requests handled at once (`serve.queue`; none free: 503). A
//! client that sends its body slowly, or not at all, holds no place, so it
//! cannot keep other clients out.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::Response;
use tokio::sync::OwnedSemaphorePermit;

use crate::routes::{error, overloaded, rejected};
use crate::server::State;

/// A body read in time, and the place its request is handled in (given
/// back when the request is answered).
pub(crate) struct ReadBody {
    /// The body.
    pub(crate) bytes: Bytes,
    /// The place among the requests handled at once.
    _place: OwnedSemaphorePermit,
}

impl FromRequest<Arc<State>> for ReadBody {
    type Rejection = Response;

    async fn from_request(request: Request, state: &Arc<State>) -> Result<Self, Response> {
        let timeout = state.options.body_timeout;
        let bytes = match tokio::time::timeout(timeout, Bytes::from_request(request, state)).await {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(rejection)) => return Err(rejected(rejection)),
            Err(_elapsed) => {
                state.outlets.metrics.refused("body_timeout");
                return Err(error(
                    StatusCode::REQUEST_TIMEOUT,
                    &format!(
                        "the body did not arrive within {} ms (serve.body_timeout_ms)",
                        timeout.as_millis()
                    ),
                ));
            }
        };
        match Arc::clone(&state.permits).try_acquire_owned() {
            Ok(place) => Ok(ReadBody {
                bytes,
                _place: place,
            }),
            Err(_) => Err(overloaded(state)),
        }
    }
}
