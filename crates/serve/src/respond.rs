//! What the handlers share to read a request's content type and to answer
//! in JSON: the content types the API speaks, [`media_type`] and [`json`].

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// The content type of one JSON event, of OTLP/JSON and of every JSON
/// answer.
pub(crate) const JSON: &str = "application/json";
/// The content types of many events, one per line; the first is the one
/// answers are sent as.
pub(crate) const NDJSON: [&str; 4] = [
    "application/x-ndjson",
    "application/ndjson",
    "application/jsonl",
    "application/json-lines",
];
/// The content type of OTLP in protobuf.
pub(crate) const PROTOBUF: &str = "application/x-protobuf";

/// The media type of `headers`' content type, lowercase, without
/// parameters.
pub(crate) fn media_type(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    let essence = value.split(';').next().unwrap_or_default().trim();
    Some(essence.to_ascii_lowercase())
}

/// 200 with `body` as JSON (`application/json`); the error when it cannot
/// be serialized (a handler's `?` turns it into a 500).
pub(crate) fn json(body: &impl Serialize) -> Result<Response, serde_json::Error> {
    let bytes = serde_json::to_vec(body)?;
    Ok((StatusCode::OK, [(header::CONTENT_TYPE, JSON)], bytes).into_response())
}
