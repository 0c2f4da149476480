//! The axum [`Router`]: every route and its handler, and the layers around
//! them. Writes (`POST`) take their place among the requests handled at
//! once only once their body is read ([`ReadBody`](crate::body::ReadBody)),
//! within `serve.body_limit_bytes`; reads take it before they are handled
//! ([`limit`]). Every `/v1` route needs the token ([`auth`], outermost, so
//! an unauthorized request takes no place); health, metrics and the
//! dashboard's pages do not.

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State as Shared};
use axum::http::{HeaderValue, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};

use crate::error::ApiError;
use crate::state::State;
use crate::{dashboard, otlp, routes};

/// The router over `state`.
pub(crate) fn router(state: Arc<State>) -> Router {
    let writes = Router::new()
        .route("/v1/events", post(routes::post_events))
        .route("/v1/tasks/{task}/human", post(routes::post_human))
        .route("/v1/traces", post(otlp::post_traces))
        .layer(DefaultBodyLimit::max(state.options.body_limit_bytes));
    let reads = Router::new()
        .route("/v1/tasks", get(routes::get_tasks))
        .route("/v1/tasks/{task}", get(routes::get_task))
        .route(
            "/v1/tasks/{task}/timeline",
            get(dashboard::get_task_timeline),
        )
        .route("/v1/dashboard", get(dashboard::get_dashboard))
        .route("/v1/live", get(dashboard::get_live))
        .route_layer(middleware::from_fn_with_state(Arc::clone(&state), limit));
    // Route layers: a path that is no route is a 404, token or not.
    let api = writes
        .merge(reads)
        .route_layer(middleware::from_fn_with_state(Arc::clone(&state), auth));
    let pages = Router::new()
        .route("/", get(dashboard::index_page))
        .route("/tasks/{task}", get(dashboard::task_page))
        .route("/assets/dashboard.css", get(dashboard::stylesheet))
        .route("/assets/dashboard.js", get(dashboard::script))
        .route("/assets/favicon.svg", get(dashboard::icon));
    Router::new()
        .route("/healthz", get(routes::healthz))
        .route("/readyz", get(routes::readyz))
        .route("/metrics", get(routes::get_metrics))
        .merge(pages)
        .merge(api)
        .with_state(state)
}

/// [`ApiError::Unauthorized`] unless the request carries the token.
async fn auth(
    Shared(state): Shared<Arc<State>>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let header = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes);
    if !state.authorized(header) {
        return Err(ApiError::Unauthorized);
    }
    Ok(next.run(request).await)
}

/// A place among the requests handled at once for the request, held until
/// it is answered ([`ApiError::Overloaded`] when none is free: nothing
/// waits).
async fn limit(
    Shared(state): Shared<Arc<State>>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let _place = state.take_place()?;
    Ok(next.run(request).await)
}
