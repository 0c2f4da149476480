//! A write request's body: read within `serve.body_timeout_ms` (slower:
//! 408) and `serve.body_limit_bytes` (larger: 413), and only then a place
//! among the requests handled at once (`serve.queue`; none free: 503). A
//! client that sends its body slowly, or not at all, holds no place, so it
//! cannot keep other clients out.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use tokio::sync::OwnedSemaphorePermit;

use crate::error::ApiError;
use crate::state::State;

/// A body read in time, and the place its request is handled in (given
/// back when the request is answered).
pub(crate) struct ReadBody {
    /// The body.
    pub(crate) bytes: Bytes,
    /// The place among the requests handled at once.
    _place: OwnedSemaphorePermit,
}

impl FromRequest<Arc<State>> for ReadBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &Arc<State>) -> Result<Self, ApiError> {
        let after = state.options.body_timeout;
        let Ok(read) = tokio::time::timeout(after, Bytes::from_request(request, state)).await
        else {
            state.outlets.metrics.refused("body_timeout");
            return Err(ApiError::BodyTimeout { after });
        };
        Ok(ReadBody {
            bytes: read?,
            _place: state.take_place()?,
        })
    }
}
