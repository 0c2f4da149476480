//! The API's handlers for events, tasks, health and metrics: `POST
//! /v1/events`, `POST /v1/tasks/{task}/human`, `GET /v1/tasks`, `GET
//! /v1/tasks/{task}`, `GET /healthz`, `GET /readyz` and `GET /metrics`.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State as Shared};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use loopguard_core_types::{Event, LineError};
use loopguard_host::{DetectionSummary, ReplayItem, store_report};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::body::ReadBody;
use crate::error::ApiError;
use crate::respond::{JSON, NDJSON, json, media_type};
use crate::state::State;

/// `POST /v1/events`: one event (`application/json`) or many, one per
/// line (`application/x-ndjson` and its aliases).
pub(crate) async fn post_events(
    Shared(state): Shared<Arc<State>>,
    headers: HeaderMap,
    body: ReadBody,
) -> Result<Response, ApiError> {
    let body = body.bytes;
    match media_type(&headers).as_deref() {
        Some(JSON) => one_event(&state, &body).await,
        Some(media) if NDJSON.contains(&media) => many_events(&state, &body).await,
        other => Err(ApiError::EventsContentType(other.map(str::to_owned))),
    }
}

/// The UTF-8 byte-order mark some editors write first.
const BOM: &str = "\u{feff}";

/// One event: its decision, or 400 naming what is wrong.
async fn one_event(state: &State, body: &[u8]) -> Result<Response, ApiError> {
    let text = std::str::from_utf8(body).map_err(|err| {
        state.outlets.line_failed();
        ApiError::BadLine(format!("the body is not valid UTF-8 ({err})"))
    })?;
    let text = text.strip_prefix(BOM).unwrap_or(text).trim();
    let event = Event::from_json_within(text, &state.engine.config().limits).map_err(|err| {
        state.outlets.line_failed();
        ApiError::BadLine(err.to_string())
    })?;
    decide(state, event).await
}

/// Decides `event` on the next line number.
async fn decide(state: &State, event: Event) -> Result<Response, ApiError> {
    let decision = state.observe(event).await;
    Ok(json(&decision)?)
}

/// Many events, one per line: a decision line per event and an error line
/// per bad line, in order, as `replay --format jsonl` prints them (errors
/// numbered by their line in this request).
async fn many_events(state: &State, body: &[u8]) -> Result<Response, ApiError> {
    let lines = line_count(body);
    if lines == 0 {
        return Ok(ndjson(Vec::new()));
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
    replayed?;
    if let Some(err) = failed {
        return Err(err.into());
    }
    Ok(ndjson(out))
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
pub(crate) async fn post_human(
    Shared(state): Shared<Arc<State>>,
    Path(task): Path<String>,
    body: ReadBody,
) -> Result<Response, ApiError> {
    let body = body.bytes;
    let human = if body.iter().all(u8::is_ascii_whitespace) {
        HumanBody::default()
    } else {
        serde_json::from_slice::<HumanBody>(&body).map_err(ApiError::HumanBody)?
    };
    let mut event = json!({ "type": "human", "task": task });
    if let (Some(note), Some(object)) = (human.note, event.as_object_mut()) {
        object.insert("note".into(), Value::String(note));
    }
    let event = Event::from_json_within(&event.to_string(), &state.engine.config().limits)
        .map_err(ApiError::InvalidEvent)?;
    decide(&state, event).await
}

/// `GET /v1/tasks`: every stored task with its counts and last detection.
pub(crate) async fn get_tasks(Shared(state): Shared<Arc<State>>) -> Result<Response, ApiError> {
    // Every task's snapshot and its detections' count and newest: not the
    // audit log itself, which grows with every detection ever made.
    let store = state.store();
    let snapshots = store.tasks().await?;
    let summaries = store.detection_summaries().await?;
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
    Ok(json(&json!({ "tasks": tasks }))?)
}

/// `GET /v1/tasks/{task}`: the task's report, its cycle log and, when its
/// events carried usage, its `spend` (its costliest loops and its last
/// events with the running totals); 404 for a task the store does not
/// have.
pub(crate) async fn get_task(
    Shared(state): Shared<Arc<State>>,
    Path(task): Path<String>,
) -> Result<Response, ApiError> {
    let store = state.store();
    let report = store_report(store, Some(&task)).await?;
    let Some(found) = report.tasks.into_iter().next() else {
        return Err(ApiError::NoTask(task));
    };
    let episodes = store.episodes(Some(&task)).await?;
    let spend = crate::dashboard_spend::task_spend(store, &task).await?;
    let mut value = serde_json::to_value(&found)?;
    if let Some(object) = value.as_object_mut() {
        object.insert("cycle_log".into(), json!(episodes));
        if let Some(spend) = spend {
            object.insert("spend".into(), serde_json::to_value(spend)?);
        }
    }
    Ok(json(&value)?)
}

/// The content type of the Prometheus text format.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `GET /metrics`: the Prometheus text format.
pub(crate) async fn get_metrics(Shared(state): Shared<Arc<State>>) -> Result<Response, ApiError> {
    let text = state.outlets.metrics.encode()?;
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, PROMETHEUS_TEXT)],
        text,
    )
        .into_response())
}

/// `GET /healthz`: the process runs.
pub(crate) async fn healthz() -> &'static str {
    "ok"
}

/// `GET /readyz`: the store answers a cheap query and accepts writes (the
/// model, when semantic matching is on, loads before the server listens);
/// not ready while every place among the requests handled at once is
/// taken.
pub(crate) async fn readyz(Shared(state): Shared<Arc<State>>) -> Result<Response, ApiError> {
    if state.permits.available_permits() == 0 {
        return Err(ApiError::NotReady(format!(
            "overloaded: {} requests are being handled (serve.queue)",
            state.options.queue
        )));
    }
    let store = state.store();
    if let Err(err) = store.load_task("").await {
        return Err(ApiError::NotReady(format!(
            "the store does not answer: {err}"
        )));
    }
    if let Some(Err(reason)) = store.health().map(|health| health.accepting()) {
        return Err(ApiError::NotReady(format!(
            "the store does not accept writes: {reason}"
        )));
    }
    let semantic = if state.engine.config().semantic.enabled {
        "loaded"
    } else {
        "off"
    };
    Ok(json(
        &json!({ "ready": true, "store": "ok", "semantic": semantic }),
    )?)
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
