//! What can go wrong: [`ServeError`], why the server cannot start or could
//! not serve, and [`ApiError`], why a request is refused, with the one
//! answer each refusal gets.

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use loopguard_core_types::EventError;
use loopguard_host::{HostError, StoreError};
use prost::Message;
use serde_json::{Value, json};

use crate::respond::{JSON, PROTOBUF};

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

/// `google.rpc.Code.INVALID_ARGUMENT`, the code of an OTLP export that
/// does not decode.
const INVALID_ARGUMENT: i32 = 3;

/// Why a request is refused. Its [`IntoResponse`] is the answer: the status
/// below, and as body `{"error": message}` (the message is the variant's
/// `Display`) unless the variant names another body.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
    /// 401 with `WWW-Authenticate: Bearer`: the request has no token or
    /// the wrong one.
    #[error("this server needs `Authorization: Bearer TOKEN` with its [serve] token")]
    Unauthorized,
    /// 503 with `Retry-After: 1`: `queue` requests are being handled
    /// already (`serve.queue`).
    #[error("overloaded: {queue} requests are being handled (serve.queue); retry later")]
    Overloaded {
        /// `serve.queue`.
        queue: usize,
    },
    /// 408: the body did not arrive within `serve.body_timeout_ms`.
    #[error("the body did not arrive within {} ms (serve.body_timeout_ms)", .after.as_millis())]
    BodyTimeout {
        /// `serve.body_timeout_ms`.
        after: Duration,
    },
    /// The body could not be read: 413 when it is larger than
    /// `serve.body_limit_bytes`, else the rejection's own status and text.
    #[error("{}", rejection_message(.0))]
    Body(#[from] BytesRejection),
    /// 413: a gzipped body larger than `serve.body_limit_bytes` once
    /// decompressed.
    #[error("the gzipped body is larger than serve.body_limit_bytes once decompressed")]
    GzipTooLarge,
    /// 415: `POST /v1/events` with another content type (`None`: none).
    #[error(
        "the content type is {}: send one event as application/json or many, one per line, \
         as application/x-ndjson",
        .0.as_deref().unwrap_or("missing")
    )]
    EventsContentType(Option<String>),
    /// 415: `POST /v1/traces` with another content type (`None`: none).
    #[error(
        "the content type is {}: send an OTLP ExportTraceServiceRequest as \
         application/x-protobuf or application/json",
        .0.as_deref().unwrap_or("missing")
    )]
    TracesContentType(Option<String>),
    /// 415: `POST /v1/traces` in a content encoding other than gzip.
    #[error("the content encoding is {0}: send the body as is or gzipped")]
    ContentEncoding(String),
    /// 400 with `{"error": message, "line": 1}`: the one event of a
    /// request is not a valid event.
    #[error("{0}")]
    BadLine(String),
    /// 400: `POST /v1/tasks/{task}/human`'s body is neither empty nor
    /// `{"note": "..."}`.
    #[error("the body must be {{\"note\": \"...\"}} or empty: {0}")]
    HumanBody(serde_json::Error),
    /// 400: the event a route built from the request is not a valid event.
    #[error("{0}")]
    InvalidEvent(EventError),
    /// 400 with a `google.rpc.Status` (`{"code": 3, "message": ...}`), in
    /// protobuf or in JSON as the request was: an OTLP export that does
    /// not decode.
    #[error("{message}")]
    BadExport {
        /// Whether the request was protobuf (else OTLP/JSON).
        protobuf: bool,
        /// What is wrong with it.
        message: String,
    },
    /// 404: the store has no such task.
    #[error("no task {0:?} in the store")]
    NoTask(String),
    /// 503 with `Retry-After: 5`: `limit` `GET /v1/live` streams are open
    /// already.
    #[error("{limit} live streams are open already; retry later")]
    LiveStreamsFull {
        /// The streams open at once.
        limit: usize,
    },
    /// 503 with `{"ready": false, "reason": reason}`: `GET /readyz` when
    /// the server is not ready.
    #[error("{0}")]
    NotReady(String),
    /// 503: the store did not answer.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// 500: the answer could not be made.
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// The status the refusal is answered with.
    fn status(&self) -> StatusCode {
        match self {
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::BodyTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            ApiError::Body(rejection) => rejection.status(),
            ApiError::GzipTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::EventsContentType(_)
            | ApiError::TracesContentType(_)
            | ApiError::ContentEncoding(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::BadLine(_)
            | ApiError::HumanBody(_)
            | ApiError::InvalidEvent(_)
            | ApiError::BadExport { .. } => StatusCode::BAD_REQUEST,
            ApiError::NoTask(_) => StatusCode::NOT_FOUND,
            ApiError::Overloaded { .. }
            | ApiError::LiveStreamsFull { .. }
            | ApiError::NotReady(_)
            | ApiError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The header that goes with the status, if any.
    fn header(&self) -> Option<(HeaderName, HeaderValue)> {
        match self {
            ApiError::Unauthorized => {
                Some((header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer")))
            }
            ApiError::Overloaded { .. } => {
                Some((header::RETRY_AFTER, HeaderValue::from_static("1")))
            }
            ApiError::LiveStreamsFull { .. } => {
                Some((header::RETRY_AFTER, HeaderValue::from_static("5")))
            }
            _ => None,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut response = match &self {
            ApiError::BadExport {
                protobuf: true,
                message,
            } => {
                let body = RpcStatus {
                    code: INVALID_ARGUMENT,
                    message: message.clone(),
                };
                (
                    status,
                    [(header::CONTENT_TYPE, PROTOBUF)],
                    body.encode_to_vec(),
                )
                    .into_response()
            }
            ApiError::BadExport {
                protobuf: false,
                message,
            } => json_body(
                status,
                &json!({ "code": INVALID_ARGUMENT, "message": message }),
            ),
            ApiError::BadLine(message) => {
                json_body(status, &json!({ "error": message, "line": 1 }))
            }
            ApiError::NotReady(reason) => {
                json_body(status, &json!({ "ready": false, "reason": reason }))
            }
            _ => json_body(status, &json!({ "error": self.to_string() })),
        };
        if let Some((name, value)) = self.header() {
            response.headers_mut().insert(name, value);
        }
        response
    }
}

/// A JSON value with a status.
fn json_body(status: StatusCode, body: &Value) -> Response {
    (status, [(header::CONTENT_TYPE, JSON)], body.to_string()).into_response()
}

/// The message for a body that could not be read.
fn rejection_message(rejection: &BytesRejection) -> String {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        "the body is larger than serve.body_limit_bytes".to_owned()
    } else {
        rejection.body_text()
    }
}

impl From<serde_json::Error> for ApiError {
    /// An answer that could not be serialized.
    fn from(err: serde_json::Error) -> Self {
        ApiError::Internal(err.to_string())
    }
}

impl From<HostError> for ApiError {
    /// A replay that failed.
    fn from(err: HostError) -> Self {
        ApiError::Internal(err.to_string())
    }
}

impl From<std::fmt::Error> for ApiError {
    /// Metrics that could not be written out.
    fn from(err: std::fmt::Error) -> Self {
        ApiError::Internal(err.to_string())
    }
}

/// `google.rpc.Status`, the body of an OTLP/HTTP error.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The status, the headers (in order) and the body of `error`'s answer.
    async fn answer(error: ApiError) -> (u16, Vec<(String, String)>, String) {
        let response = error.into_response();
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(name, value)| {
                let value = value.to_str().unwrap_or("(not text)");
                (name.as_str().to_owned(), value.to_owned())
            })
            .collect();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default();
        (status, headers, body)
    }

    fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect()
    }

    #[tokio::test]
    async fn a_full_queue_is_a_503_to_retry_after_a_second() {
        assert_eq!(
            answer(ApiError::Overloaded { queue: 64 }).await,
            (
                503,
                headers(&[("content-type", "application/json"), ("retry-after", "1")]),
                r#"{"error":"overloaded: 64 requests are being handled (serve.queue); retry later"}"#
                    .to_owned()
            )
        );
    }

    #[tokio::test]
    async fn too_many_live_streams_is_a_503_to_retry_after_five_seconds() {
        assert_eq!(
            answer(ApiError::LiveStreamsFull { limit: 64 }).await,
            (
                503,
                headers(&[("content-type", "application/json"), ("retry-after", "5")]),
                r#"{"error":"64 live streams are open already; retry later"}"#.to_owned()
            )
        );
    }

    #[tokio::test]
    async fn an_answer_that_cannot_be_made_is_a_500_naming_why() {
        let err = serde_json::from_str::<u8>("x").expect_err("not a number");
        let message = err.to_string();
        assert_eq!(
            answer(ApiError::from(err)).await,
            (
                500,
                headers(&[("content-type", "application/json")]),
                json!({ "error": message }).to_string()
            )
        );
    }

    #[tokio::test]
    async fn readiness_names_its_reason_not_an_error() {
        assert_eq!(
            answer(ApiError::NotReady("overloaded: 1 requests".into())).await,
            (
                503,
                headers(&[("content-type", "application/json")]),
                r#"{"ready":false,"reason":"overloaded: 1 requests"}"#.to_owned()
            )
        );
    }
}
