//! The OTLP trace messages the receiver reads, as protobuf (prost) types:
//! the subset of `opentelemetry/proto/collector/trace/v1` and
//! `opentelemetry/proto/trace/v1` (OTLP 1.x) that the mapping uses, with the
//! proto's own field numbers. Fields left out (links, trace state, dropped
//! counts, the scope, flags, ...) are skipped when decoding, as protobuf
//! skips any unknown field, so a newer exporter's messages decode too.
//!
//! A client in Rust can build and encode an export with them:
//!
//! ```
//! use loopguard_serve::otlp_proto::{
//!     AnyValue, ExportTraceServiceRequest, KeyValue, ResourceSpans, ScopeSpans, Span, any_value,
//! };
//! use prost::Message;
//!
//! let span = Span {
//!     trace_id: vec![1; 16],
//!     span_id: vec![2; 8],
//!     name: "search".into(),
//!     attributes: vec![KeyValue {
//!         key: "gen_ai.operation.name".into(),
//!         value: Some(AnyValue {
//!             value: Some(any_value::Value::StringValue("execute_tool".into())),
//!         }),
//!     }],
//!     ..Span::default()
//! };
//! let request = ExportTraceServiceRequest {
//!     resource_spans: vec![ResourceSpans {
//!         resource: None,
//!         scope_spans: vec![ScopeSpans { spans: vec![span] }],
//!     }],
//! };
//! let body = request.encode_to_vec();
//! assert_eq!(ExportTraceServiceRequest::decode(body.as_slice())?, request);
//! # Ok::<(), prost::DecodeError>(())
//! ```

/// `ExportTraceServiceRequest`: one export, the body of `POST /v1/traces`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportTraceServiceRequest {
    /// The spans, by the resource (process) that made them.
    #[prost(message, repeated, tag = "1")]
    pub resource_spans: Vec<ResourceSpans>,
}

/// `ExportTraceServiceResponse`: the answer to an export.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportTraceServiceResponse {
    /// Set when some spans were rejected.
    #[prost(message, optional, tag = "1")]
    pub partial_success: Option<ExportTracePartialSuccess>,
}

/// `ExportTracePartialSuccess`: how many spans were rejected, and why.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportTracePartialSuccess {
    /// The spans rejected.
    #[prost(int64, tag = "1")]
    pub rejected_spans: i64,
    /// Why, for a person to read.
    #[prost(string, tag = "2")]
    pub error_message: String,
}

/// `ResourceSpans`: one resource's spans.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ResourceSpans {
    /// The resource (its attributes apply to every span under it).
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    /// The spans, by instrumentation scope.
    #[prost(message, repeated, tag = "2")]
    pub scope_spans: Vec<ScopeSpans>,
}

/// `Resource`: the process that made the spans.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Resource {
    /// Its attributes (`service.name`, ...).
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
}

/// `ScopeSpans`: one instrumentation scope's spans.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ScopeSpans {
    /// The spans.
    #[prost(message, repeated, tag = "2")]
    pub spans: Vec<Span>,
}

/// `Span`: one operation.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Span {
    /// The trace's id: 16 bytes.
    #[prost(bytes = "vec", tag = "1")]
    pub trace_id: Vec<u8>,
    /// The span's id: 8 bytes.
    #[prost(bytes = "vec", tag = "2")]
    pub span_id: Vec<u8>,
    /// The parent span's id (empty for a root span).
    #[prost(bytes = "vec", tag = "4")]
    pub parent_span_id: Vec<u8>,
    /// Its name.
    #[prost(string, tag = "5")]
    pub name: String,
    /// When it started, in nanoseconds since the Unix epoch.
    #[prost(fixed64, tag = "7")]
    pub start_time_unix_nano: u64,
    /// When it ended, in nanoseconds since the Unix epoch.
    #[prost(fixed64, tag = "8")]
    pub end_time_unix_nano: u64,
    /// Its attributes.
    #[prost(message, repeated, tag = "9")]
    pub attributes: Vec<KeyValue>,
    /// Its events (`exception`, ...).
    #[prost(message, repeated, tag = "11")]
    pub events: Vec<SpanEvent>,
    /// Its status.
    #[prost(message, optional, tag = "15")]
    pub status: Option<Status>,
}

/// `Span.Event`: something that happened within a span.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SpanEvent {
    /// Its name.
    #[prost(string, tag = "2")]
    pub name: String,
    /// Its attributes.
    #[prost(message, repeated, tag = "3")]
    pub attributes: Vec<KeyValue>,
}

/// `Status`: how a span ended.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Status {
    /// Why, for a person to read.
    #[prost(string, tag = "2")]
    pub message: String,
    /// 0 unset, 1 ok, 2 error.
    #[prost(int32, tag = "3")]
    pub code: i32,
}

/// `KeyValue`: one attribute.
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValue {
    /// Its key.
    #[prost(string, tag = "1")]
    pub key: String,
    /// Its value.
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

/// `AnyValue`: an attribute's value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AnyValue {
    /// The value, of one of the kinds (none: an empty value).
    #[prost(oneof = "any_value::Value", tags = "1, 2, 3, 4, 5, 6, 7")]
    pub value: Option<any_value::Value>,
}

/// The kinds of [`AnyValue`].
pub mod any_value {
    /// One kind of value.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        /// A string.
        #[prost(string, tag = "1")]
        StringValue(String),
        /// A boolean.
        #[prost(bool, tag = "2")]
        BoolValue(bool),
        /// An integer.
        #[prost(int64, tag = "3")]
        IntValue(i64),
        /// A float.
        #[prost(double, tag = "4")]
        DoubleValue(f64),
        /// A list of values.
        #[prost(message, tag = "5")]
        ArrayValue(super::ArrayValue),
        /// A list of key-value pairs.
        #[prost(message, tag = "6")]
        KvlistValue(super::KeyValueList),
        /// Bytes.
        #[prost(bytes, tag = "7")]
        BytesValue(Vec<u8>),
    }
}

/// `ArrayValue`: a list of values.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ArrayValue {
    /// The values.
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<AnyValue>,
}

/// `KeyValueList`: a list of key-value pairs.
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValueList {
    /// The pairs.
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<KeyValue>,
}
