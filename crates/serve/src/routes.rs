//! The routes: events, tasks, human, health, the dashboard; auth and the
//! limits around them. (`POST /v1/traces`, the OTLP receiver, is in
//! `otlp.rs`; the dashboard's routes in `dashboard.rs`.)

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, Request, State as Shared};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use loopguard_core_types::{Event, LineError};
use loopguard_host::{DetectionSummary, ReplayItem, StoreError, store_report};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::body::ReadBody;
use crate::dashboard;
use crate::server::State;

/// The content type of one JSON event.
const JSON: &str = "application/json";
/// The content types of many events, one per line.
const NDJSON: [&str; 4] = [
    "application/x-ndjson",
    "application/ndjson",
    "application/jsonl",
    "application/json-lines",
];

/// The router over `state`.
pub(crate) fn router(state: Arc<State>) -> Router {
    // Writes take their place among the requests handled at once only
    // once their body is read (`ReadBody`); reads, which have no body, take
    // it first.
    let writes = Router::new()
        .route("/v1/events", post(post_events))
        .route("/v1/tasks/{task}/human", post(post_human))
        .route("/v1/traces", post(crate::otlp::post_traces))
        .layer(DefaultBodyLimit::max(state.options.body_limit_bytes));
    let reads = Router::new()
        .route("/v1/tasks", get(get_tasks))
        .route("/v1/tasks/{task}", get(get_task))
        .route(
            "/v1/tasks/{task}/timeline",
            get(dashboard::get_task_timeline),
        )
        .route("/v1/dashboard", get(dashboard::get_dashboard))
        .route("/v1/live", get(dashboard::get_live))
        .route_layer(middleware::from_fn_with_state(Arc::clone(&state), limit));
    // Auth outermost (an unauthorized request takes no place). Route
    // layers: a path that is no route is a 404, token or not.
    let api = writes
        .merge(reads)
        .route_layer(middleware::from_fn_with_state(Arc::clone(&state), auth));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(get_metrics))
        .merge(dashboard::pages())
        .merge(api)
        .with_state(state)
}

/// A JSON body with a status.
pub(crate) fn json_response(status: StatusCode, body: &impl serde::Serialize) -> Response {
    match serde_json::to_vec(body) {
        Ok(bytes) => (status, [(header::CONTENT_TYPE, JSON)], bytes).into_response(),
        Err(err) => error(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()),
    }
}

/// `{"error": message}` with a status.
pub(crate) fn error(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, JSON)],
        json!({ "error": message }).to_string(),
    )
        .into_response()
}

/// 401 unless the request carries the token.
async fn auth(Shared(state): Shared<Arc<State>>, request: Request, next: Next) -> Response {
    let header = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes);
    if state.authorized(header) {
        return next.run(request).await;
    }
    let mut response = error(
        StatusCode::UNAUTHORIZED,
        "this server needs `Authorization: Bearer TOKEN` with its [serve] token",
    );
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// 503 when `queue` requests are already being handled: nothing waits.
async fn limit(Shared(state): Shared<Arc<State>>, request: Request, next: Next) -> Response {
    let Ok(_permit) = Arc::clone(&state.permits).try_acquire_owned() else {
        return overloaded(&state);
    };
    next.run(request).await
}

/// The 503 for a request that finds every place taken (counted in
/// `/metrics`).
pub(crate) fn overloaded(state: &State) -> Response {
    state.outlets.metrics.refused("queue");
    let mut response = error(
        StatusCode::SERVICE_UNAVAILABLE,
        &format!(
            "overloaded: {} requests are being handled (serve.queue); retry later",
            state.options.queue
        ),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// The response to a body that could not be read (413 over the limit).
pub(crate) fn rejected(rejection: BytesRejection) -> Response {
    let status = rejection.status();
    let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
        "the body is larger than serve.body_limit_bytes".to_owned()
    } else {
        rejection.body_text()
    };
    error(status, &message)
}

/// The media type of `headers`' content type, lowercase, without
/// parameters.
pub(crate) fn media_type(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    let essence = value.split(';').next().unwrap_or_default().trim();
    Some(essence.to_ascii_lowercase())
}

/// `POST /v1/events`.
async fn post_events(
    Shared(state): Shared<Arc<State>>,
    headers: HeaderMap,
    body: ReadBody,
) -> Response {
    let body = body.bytes;
    match media_type(&headers).as_deref() {
        Some(JSON) => one_event(&state, &body).await,
        Some(media) if NDJSON.contains(&media) => many_events(&state, &body).await,
        other => error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            &format!(
                "the content type is {}: send one event as application/json or many, one per \
                 line, as application/x-ndjson",
                other.unwrap_or("missing")
            ),
        ),
    }
}

/// The UTF-8 byte-order mark some editors write first.
const BOM: &str = "\u{feff}";

/// One event: its decision, or 400 naming what is wrong.
async fn one_event(state: &State, body: &[u8]) -> Response {
    let text = match std::str::from_utf8(body) {
        Ok(text) => text,
        Err(err) => {
            state.outlets.line_failed();
            return bad_line(&format!("the body is not valid UTF-8 ({err})"));
        }
    };
    let text = text.strip_prefix(BOM).unwrap_or(text).trim();
    let event = match Event::from_json_within(text, &state.engine.config().limits) {
        Ok(event) => event,
        Err(err) => {
            state.outlets.line_failed();
            return bad_line(&err.to_string());
        }
    };
    decide(state, event).await
}

/// Decides `event` on the next line number.
async fn decide(state: &State, event: Event) -> Response {
    let decision = state.observe(event).await;
    json_response(StatusCode::OK, &decision)
}

/// 400 for the one event of a request.
fn bad_line(message: &str) -> Response {
    json_response(
        StatusCode::BAD_REQUEST,
        &LineErrorBody {
            error: message,
            line: 1,
        },
    )
}

/// `{"error": ..., "line": N}`.
#[derive(serde::Serialize)]
struct LineErrorBody<'a> {
    error: &'a str,
    line: u64,
}

/// Many events, one per line: a decision line per event and an error line
/// per bad line, in order, as `replay --format jsonl` prints them (errors
/// numbered by their line in this request).
async fn many_events(state: &State, body: &[u8]) -> Response {
    let lines = line_count(body);
    if lines == 0 {
        return ndjson(Vec::new());
    }
    let first = state.take_lines(lines);
    let store = state.store();
    let mut out = Vec::with_capacity(body.len() / 2);
    let mut failed = None;
    let replayed =
        loopguard_host::replay_observed_from(&state.engine, body, first, |item, observed| {
            let written = match item {
                ReplayItem::Decision(decision) => {
                    if let Some(observed) = observed {
                        state.outlets.decided(decision, observed);
                    }
                    serde_json::to_writer(&mut out, decision)
                }
                ReplayItem::Error(error) => {
                    state.outlets.line_failed();
                    store.note_line_error(error.line, &error.error);
                    let local = LineError {
                        line: error.line - first + 1,
                        error: error.error.clone(),
                    };
                    serde_json::to_writer(&mut out, &local)
                }
            };
            match written {
                Ok(()) => out.push(b'\n'),
                Err(err) => failed = Some(err),
            }
        })
        .await;
    state.answered(first + lines - 1);
    if let Err(err) = replayed {
        return error(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string());
    }
    if let Some(err) = failed {
        return error(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string());
    }
    ndjson(out)
}

/// An NDJSON body.
fn ndjson(body: Vec<u8>) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, NDJSON[0])],
        Body::from(body),
    )
        .into_response()
}

/// The lines of `body` as a replay counts them (a last line without a
/// newline counts).
fn line_count(body: &[u8]) -> u64 {
    let newlines = body.iter().filter(|&&byte| byte == b'\n').count() as u64;
    let unterminated = u64::from(!body.is_empty() && !body.ends_with(b"\n"));
    newlines + unterminated
}

/// `POST /v1/tasks/{task}/human`'s optional body.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HumanBody {
    /// What the human did.
    note: Option<String>,
}

/// `POST /v1/tasks/{task}/human`: a `human` event for the task.
async fn post_human(
    Shared(state): Shared<Arc<State>>,
    Path(task): Path<String>,
    body: ReadBody,
) -> Response {
    let body = body.bytes;
    let human = if body.iter().all(u8::is_ascii_whitespace) {
        HumanBody::default()
    } else {
        match serde_json::from_slice::<HumanBody>(&body) {
            Ok(human) => human,
            Err(err) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    &format!("the body must be {{\"note\": \"...\"}} or empty: {err}"),
                );
            }
        }
    };
    let mut event = json!({ "type": "human", "task": task });
    if let (Some(note), Some(object)) = (human.note, event.as_object_mut()) {
        object.insert("note".into(), Value::String(note));
    }
    match Event::from_json_within(&event.to_string(), &state.engine.config().limits) {
        Ok(event) => decide(&state, event).await,
        Err(err) => error(StatusCode::BAD_REQUEST, &err.to_string()),
    }
}

/// `GET /v1/tasks`: every stored task with its counts and last detection.
async fn get_tasks(Shared(state): Shared<Arc<State>>) -> Response {
    // Every task's snapshot and its detections' count and newest: not the
    // audit log itself, which grows with every detection ever made.
    let store = state.store();
    let listed =
        async { Ok::<_, StoreError>((store.tasks().await?, store.detection_summaries().await?)) };
    let (snapshots, summaries) = match listed.await {
        Ok(listed) => listed,
        Err(err) => return error(StatusCode::SERVICE_UNAVAILABLE, &format!("store: {err}")),
    };
    let summaries: HashMap<&str, &DetectionSummary> = summaries
        .iter()
        .map(|summary| (summary.task.as_str(), summary))
        .collect();
    let tasks: Vec<Value> = snapshots
        .iter()
        .map(|task| {
            let summary = summaries.get(task.task.as_str());
            json!({
                "task": task.task,
                "status": task.status,
                "loop_count": task.loop_count,
                "pivots": task.pivots,
                "detections": summary.map_or(0, |summary| summary.count),
                "last_detection": summary.map(|summary| json!({
                    "kind": summary.last.kind,
                    "line": summary.last.line,
                    "action": summary.last.action,
                })),
            })
        })
        .collect();
    json_response(StatusCode::OK, &json!({ "tasks": tasks }))
}

/// `GET /v1/tasks/{task}`: the task's report and its cycle log.
async fn get_task(Shared(state): Shared<Arc<State>>, Path(task): Path<String>) -> Response {
    let store = state.store();
    let report = match store_report(store, Some(&task)).await {
        Ok(report) => report,
        Err(err) => return error(StatusCode::SERVICE_UNAVAILABLE, &format!("store: {err}")),
    };
    let Some(found) = report.tasks.into_iter().next() else {
        return error(
            StatusCode::NOT_FOUND,
            &format!("no task {task:?} in the store"),
        );
    };
    let episodes = match store.episodes(Some(&task)).await {
        Ok(episodes) => episodes,
        Err(err) => return error(StatusCode::SERVICE_UNAVAILABLE, &format!("store: {err}")),
    };
    let mut value = match serde_json::to_value(&found) {
        Ok(value) => value,
        Err(err) => return error(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()),
    };
    if let Some(object) = value.as_object_mut() {
        object.insert("cycle_log".into(), json!(episodes));
    }
    json_response(StatusCode::OK, &value)
}

/// The content type of the Prometheus text format.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `GET /metrics`: the Prometheus text format.
async fn get_metrics(Shared(state): Shared<Arc<State>>) -> Response {
    match state.outlets.metrics.encode() {
        Ok(text) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, PROMETHEUS_TEXT)],
            text,
        )
            .into_response(),
        Err(err) => error(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()),
    }
}

/// `GET /healthz`: the process runs.
async fn healthz() -> &'static str {
    "ok"
}

/// `GET /readyz`: the store answers a cheap query and accepts writes (the
/// model, when semantic matching is on, loads before the server listens).
async fn readyz(Shared(state): Shared<Arc<State>>) -> Response {
    if state.permits.available_permits() == 0 {
        return json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({
                "ready": false,
                "reason": format!(
                    "overloaded: {} requests are being handled (serve.queue)",
                    state.options.queue
                ),
            }),
        );
    }
    let store = state.store();
    if let Err(err) = store.load_task("").await {
        return json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({ "ready": false, "reason": format!("the store does not answer: {err}") }),
        );
    }
    if let Some(Err(reason)) = store.health().map(|health| health.accepting()) {
        return json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({ "ready": false, "reason": format!("the store does not accept writes: {reason}") }),
        );
    }
    let semantic = if state.engine.config().semantic.enabled {
        "loaded"
    } else {
        "off"
    };
    json_response(
        StatusCode::OK,
        &json!({ "ready": true, "store": "ok", "semantic": semantic }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_counted_as_a_replay_counts_them() {
        assert_eq!(line_count(b""), 0);
        assert_eq!(line_count(b"a"), 1);
        assert_eq!(line_count(b"a\n"), 1);
        assert_eq!(line_count(b"a\n\nb"), 3);
        assert_eq!(line_count(b"\n"), 1);
    }
}
