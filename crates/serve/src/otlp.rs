//! `POST /v1/traces`: an OTLP/HTTP traces receiver, so that an agent
//! framework's OpenTelemetry instrumentation feeds the engine with no code
//! of the application's own.
//!
//! The body is an `ExportTraceServiceRequest` in protobuf
//! (`application/x-protobuf`) or in OTLP/JSON (`application/json`),
//! optionally gzipped (`Content-Encoding: gzip`, decompressed within
//! `serve.body_limit_bytes`). The answer follows the OTLP/HTTP spec: 200 with
//! an `ExportTraceServiceResponse` in the request's encoding, whose
//! `partial_success` counts the spans that could not be read (no trace id
//! or span id, or ids of the wrong length); 400 with a `google.rpc.Status`
//! naming the problem when the body does not decode; 415 for any other
//! content type or encoding.
//!
//! Spans are mapped by [`loopguard_import::otlp::events_from_spans`], the
//! mapping of `loopguard import --from otlp`. An exporter sends a trace in
//! batches, children (which end first) usually before their root, so spans
//! are **buffered per trace** and the trace is decided when its root span
//! (the one with no parent: it is exported once it has ended) arrives, or
//! `serve.otlp_flush_ms` after the trace's last span arrived, whichever is
//! first. Its events then go through the engine in time order, one
//! [`State::observe`] each, so the store, the metrics and the live feed see
//! them as they see any other event (there is no reply to send them to).
//!
//! The spans wait in the server's [`Buffer`](crate::otlp_buffer::Buffer).
//! Memory is bounded: at most `serve.otlp_max_traces` traces are buffered
//! (one more decides the trace that waited longest first) and at most
//! `serve.otlp_max_spans_per_trace` spans of one trace (a trace that reaches
//! it is decided at once). A span of a trace that was already decided (a
//! late export, or a trace beyond the span bound) starts a new batch of that
//! trace, decided by the same rule. So that the mapping still links it, the
//! receiver remembers a skeleton of each recently decided trace (its spans'
//! ids, names and the few attributes that name agents, roles and the
//! conversation; at most `otlp_max_traces` traces, least recently decided
//! forgotten first): a late batch is mapped with its trace's skeleton, and
//! only the late spans' events are decided. A late tool span is then a call
//! of the agent whose span was decided before it, in the same task. A late
//! span of a forgotten trace is mapped alone (a tool outside any agent span
//! is a call of the default agent `agent`, and the task is the trace id
//! unless the batch names the conversation). A background task decides
//! expired traces; shutdown decides everything still buffered before the
//! store closes.
//!
//! `loopguard_otlp_spans_total{outcome}` counts the spans: `accepted` are
//! those the mapping turned into events (or used as the agent above a
//! tool), `ignored` those it drops (model calls, other spans), those whose
//! every event the engine's own validation refused (logged with the reason),
//! and those that could not be read.

use std::collections::HashSet;
use std::io::Read;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::State as Shared;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use loopguard_core_types::Event;
use loopguard_import::otlp::{Span, SpanEvent, events_from_spans, spans_from_export};
use prost::Message;
use serde_json::{Map, Value, json};

use crate::body::ReadBody;
use crate::error::ApiError;
use crate::otlp_proto as proto;
use crate::respond::{JSON, PROTOBUF, media_type};
use crate::state::State;

/// Decides the traces that waited `serve.otlp_flush_ms` since their last
/// span (the background task's work).
pub(crate) async fn flush_expired(state: &State) {
    for batch in state.otlp.expired(Instant::now()) {
        decide_batch(state, &batch).await;
    }
}

/// Decides every buffered trace (at shutdown).
pub(crate) async fn flush_all(state: &State) {
    let batches = state.otlp.drain();
    if !batches.is_empty() {
        tracing::info!(
            traces = batches.len(),
            "deciding the OTLP traces still buffered"
        );
    }
    for batch in batches {
        decide_batch(state, &batch).await;
    }
}

/// What the mapping dropped, in spans.
fn dropped(imported: &loopguard_import::Imported) -> u64 {
    imported
        .dropped
        .iter()
        .map(|dropped| u64::try_from(dropped.count).unwrap_or(u64::MAX))
        .sum()
}

/// Maps one trace's batch of spans (with the skeleton of the spans of the
/// trace decided before, when one is remembered) to events, and decides the
/// batch's own events in order.
async fn decide_batch(state: &State, spans: &[Span]) {
    let trace = spans.first().map_or("", |span| span.trace_id.as_str());
    let skeleton = state.otlp.skeleton(trace);
    let imported = if skeleton.is_empty() {
        events_from_spans(spans)
    } else {
        let mut all = skeleton.clone();
        all.extend_from_slice(spans);
        events_from_spans(&all)
    };
    let mut ignored = dropped(&imported);
    if !skeleton.is_empty() {
        // Only the batch's own spans count.
        ignored = ignored.saturating_sub(dropped(&events_from_spans(&skeleton)));
    }
    let own: HashSet<&str> = spans.iter().map(|span| span.span_id.as_str()).collect();
    let limits = &state.engine.config().limits;
    let mut refused: HashSet<String> = HashSet::new();
    let mut decided: HashSet<String> = HashSet::new();
    for event in imported.events {
        let span = span_of_event(&event);
        if !own.contains(span.as_str()) {
            // The skeleton's: decided with its own batch.
            continue;
        }
        // The engine's own check of an input line, on the mapped JSON.
        match Event::from_json_within(&event.to_json(), limits) {
            Ok(event) => {
                decided.insert(span);
                state.observe(event).await;
            }
            Err(err) => {
                tracing::warn!(
                    task = %event.task,
                    span = %span,
                    %err,
                    "an OTLP span's event is not a valid event; ignored"
                );
                refused.insert(span);
            }
        }
    }
    ignored += refused.difference(&decided).count() as u64;
    let accepted = (spans.len() as u64).saturating_sub(ignored);
    state.outlets.metrics.otlp_spans(accepted, ignored);
    state.otlp.remember(skeleton, spans);
}

/// The span id an event of the mapping came from (its id is `s` and the
/// span id, then `.back` or `.failure` for an end's event).
fn span_of_event(event: &Event) -> String {
    let id = event.id.as_deref().unwrap_or_default();
    let id = id.strip_prefix('s').unwrap_or(id);
    id.split('.').next().unwrap_or_default().to_owned()
}

/// The encoding of a request, which its answer uses too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Protobuf,
    Json,
}

impl Encoding {
    /// The 400 for an export in this encoding that does not decode.
    fn bad_export(self, message: String) -> ApiError {
        ApiError::BadExport {
            protobuf: self == Encoding::Protobuf,
            message,
        }
    }
}

/// `POST /v1/traces`: buffers the export's spans, decides the traces that
/// are ready, and answers an `ExportTraceServiceResponse`.
pub(crate) async fn post_traces(
    Shared(state): Shared<Arc<State>>,
    headers: HeaderMap,
    body: ReadBody,
) -> Result<Response, ApiError> {
    let encoding = match media_type(&headers).as_deref() {
        Some(PROTOBUF) => Encoding::Protobuf,
        Some(JSON) => Encoding::Json,
        other => return Err(ApiError::TracesContentType(other.map(str::to_owned))),
    };
    let body = decompressed(
        &headers,
        &body.bytes,
        state.options.body_limit_bytes,
        encoding,
    )?;
    let decoded = match encoding {
        Encoding::Protobuf => decode_protobuf(&body),
        Encoding::Json => decode_json(&body),
    };
    let (spans, unreadable) = decoded.map_err(|message| encoding.bad_export(message))?;
    if unreadable > 0 {
        state.outlets.metrics.otlp_spans(0, unreadable);
    }
    for batch in state.otlp.add(spans, Instant::now()) {
        decide_batch(&state, &batch).await;
    }
    let partial = (unreadable > 0).then(|| proto::ExportTracePartialSuccess {
        rejected_spans: i64::try_from(unreadable).unwrap_or(i64::MAX),
        error_message: format!(
            "{unreadable} span(s) without a valid trace id (16 bytes) and span id (8 bytes) \
             were rejected"
        ),
    });
    Ok(exported(encoding, partial))
}

/// The body as sent, or gunzipped within `limit` bytes, as its
/// `Content-Encoding` says.
fn decompressed(
    headers: &HeaderMap,
    body: &[u8],
    limit: usize,
    encoding: Encoding,
) -> Result<Vec<u8>, ApiError> {
    match content_encoding(headers).as_deref() {
        None | Some("identity") => Ok(body.to_vec()),
        Some("gzip") => gunzip(body, limit).map_err(|err| match err {
            Gunzip::TooLarge => ApiError::GzipTooLarge,
            Gunzip::Corrupt(err) => {
                encoding.bad_export(format!("the body is not valid gzip: {err}"))
            }
        }),
        Some(other) => Err(ApiError::ContentEncoding(other.to_owned())),
    }
}

/// The request's `Content-Encoding`, lowercase.
fn content_encoding(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_ENCODING)?;
    Some(
        value
            .to_str()
            .unwrap_or("unreadable")
            .trim()
            .to_ascii_lowercase(),
    )
}

/// Why a gzipped body could not be read.
enum Gunzip {
    TooLarge,
    Corrupt(std::io::Error),
}

/// The decompressed body, at most `limit` bytes.
fn gunzip(body: &[u8], limit: usize) -> Result<Vec<u8>, Gunzip> {
    let mut out = Vec::with_capacity(body.len().saturating_mul(4).min(limit));
    let bound = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    flate2::read::GzDecoder::new(body)
        .take(bound)
        .read_to_end(&mut out)
        .map_err(Gunzip::Corrupt)?;
    if out.len() > limit {
        return Err(Gunzip::TooLarge);
    }
    Ok(out)
}

/// The spans of a protobuf export, and how many could not be read.
fn decode_protobuf(body: &[u8]) -> Result<(Vec<Span>, u64), String> {
    let request = proto::ExportTraceServiceRequest::decode(body).map_err(|err| {
        format!("the body is not an OTLP ExportTraceServiceRequest in protobuf: {err}")
    })?;
    let mut spans = Vec::new();
    let mut unreadable = 0u64;
    for resource_spans in request.resource_spans {
        let resource = resource_spans
            .resource
            .map(|resource| attributes(resource.attributes))
            .unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                if span.trace_id.len() != 16
                    || span.span_id.len() != 8
                    || !matches!(span.parent_span_id.len(), 0 | 8)
                {
                    unreadable += 1;
                    continue;
                }
                spans.push(span_of(span, &resource));
            }
        }
    }
    Ok((spans, unreadable))
}

/// A protobuf span as the mapping reads it.
fn span_of(span: proto::Span, resource: &Map<String, Value>) -> Span {
    let mut all = resource.clone();
    all.extend(attributes(span.attributes));
    let (status_code, status_message) = span
        .status
        .map(|status| (i64::from(status.code), status.message))
        .unwrap_or_default();
    Span {
        trace_id: hex(&span.trace_id),
        span_id: hex(&span.span_id),
        parent_span_id: Some(hex(&span.parent_span_id)).filter(|id| !id.is_empty()),
        name: span.name,
        start_unix_nano: span.start_time_unix_nano,
        end_unix_nano: span.end_time_unix_nano,
        attributes: all,
        status_code,
        status_message,
        events: span
            .events
            .into_iter()
            .map(|event| SpanEvent {
                name: event.name,
                attributes: attributes(event.attributes),
            })
            .collect(),
    }
}

/// Attributes as JSON values, as the OTLP/JSON reader makes them.
fn attributes(list: Vec<proto::KeyValue>) -> Map<String, Value> {
    list.into_iter()
        .map(|pair| (pair.key, pair.value.map_or(Value::Null, any_value)))
        .collect()
}

/// An `AnyValue` as JSON (bytes as lowercase hex).
fn any_value(value: proto::AnyValue) -> Value {
    use proto::any_value::Value as Kind;
    match value.value {
        None => Value::Null,
        Some(Kind::StringValue(text)) => Value::String(text),
        Some(Kind::BoolValue(flag)) => Value::Bool(flag),
        Some(Kind::IntValue(int)) => Value::from(int),
        Some(Kind::DoubleValue(float)) => {
            serde_json::Number::from_f64(float).map_or(Value::Null, Value::Number)
        }
        Some(Kind::ArrayValue(array)) => {
            Value::Array(array.values.into_iter().map(any_value).collect())
        }
        Some(Kind::KvlistValue(list)) => Value::Object(attributes(list.values)),
        Some(Kind::BytesValue(bytes)) => Value::String(hex(&bytes)),
    }
}

/// Lowercase hex, as OTLP/JSON writes ids.
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

/// The spans of an OTLP/JSON export, and how many could not be read.
fn decode_json(body: &[u8]) -> Result<(Vec<Span>, u64), String> {
    let export: Value = serde_json::from_slice(body)
        .map_err(|err| format!("the body is not JSON (an OTLP/JSON export): {err}"))?;
    let spans = spans_from_export(&export).ok_or_else(|| {
        "the body has no `resourceSpans` list: it is not an OTLP/JSON \
         ExportTraceServiceRequest"
            .to_owned()
    })?;
    let before = spans.len();
    let spans: Vec<Span> = spans
        .into_iter()
        .filter(|span| !span.trace_id.is_empty() && !span.span_id.is_empty())
        .collect();
    let unreadable = (before - spans.len()) as u64;
    Ok((spans, unreadable))
}

/// 200 with an `ExportTraceServiceResponse` in the request's encoding.
fn exported(encoding: Encoding, partial: Option<proto::ExportTracePartialSuccess>) -> Response {
    match encoding {
        Encoding::Protobuf => {
            let response = proto::ExportTraceServiceResponse {
                partial_success: partial,
            };
            (
                StatusCode::OK,
                [(header::CONTENT_TYPE, PROTOBUF)],
                response.encode_to_vec(),
            )
                .into_response()
        }
        Encoding::Json => {
            let body = match partial {
                Some(partial) => json!({ "partialSuccess": {
                    "rejectedSpans": partial.rejected_spans.to_string(),
                    "errorMessage": partial.error_message,
                }}),
                None => json!({}),
            };
            (
                StatusCode::OK,
                [(header::CONTENT_TYPE, JSON)],
                body.to_string(),
            )
                .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_values_read_as_otlp_json_writes_them() {
        assert_eq!(hex(&[0x00, 0xab, 0x10]), "00ab10");
        let value = proto::AnyValue {
            value: Some(proto::any_value::Value::ArrayValue(proto::ArrayValue {
                values: vec![
                    proto::AnyValue {
                        value: Some(proto::any_value::Value::IntValue(7)),
                    },
                    proto::AnyValue {
                        value: Some(proto::any_value::Value::DoubleValue(f64::NAN)),
                    },
                ],
            })),
        };
        assert_eq!(any_value(value), json!([7, null]));
    }

    #[test]
    fn garbage_is_a_clear_error_and_bad_ids_are_counted() {
        let err = decode_protobuf(b"\xff\xff\xff").expect_err("garbage");
        assert!(err.contains("ExportTraceServiceRequest"), "{err}");
        let request = proto::ExportTraceServiceRequest {
            resource_spans: vec![proto::ResourceSpans {
                resource: None,
                scope_spans: vec![proto::ScopeSpans {
                    spans: vec![
                        proto::Span {
                            trace_id: vec![1; 16],
                            span_id: vec![2; 8],
                            ..proto::Span::default()
                        },
                        proto::Span {
                            trace_id: vec![1; 3],
                            span_id: vec![2; 8],
                            ..proto::Span::default()
                        },
                    ],
                }],
            }],
        };
        let (spans, unreadable) = decode_protobuf(&request.encode_to_vec()).expect("decodes");
        assert_eq!((spans.len(), unreadable), (1, 1));
        assert_eq!(spans[0].trace_id, "01".repeat(16));
        assert!(spans[0].parent_span_id.is_none());
        let err = decode_json(b"{\"a\": 1}").expect_err("no resourceSpans");
        assert!(err.contains("resourceSpans"), "{err}");
    }
}
