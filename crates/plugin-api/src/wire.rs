//! The bytes that cross the ABI: JSON of the trace-format types.
//!
//! Layouts stay out of the ABI: the host sends an [`ObserveRequest`] (the
//! event as a trace line, its input line number, and the format version),
//! the plugin answers with a JSON array of [`Detection`]s, or nothing (an
//! empty answer means no detection, the common case, so it costs no
//! allocation). `describe` answers a [`PluginDescription`].
//!
//! Event types newer than this SDK are not an error (ABI 1.3):
//! [`decode_observe`] reads them as [`EventKind::Unknown`], which the
//! exported `observe` answers with no detections.
//!
//! [`EventKind::Unknown`]: loopguard_core_types::EventKind::Unknown

use loopguard_core_types::{Detection, Event, TRACE_FORMAT_VERSION};
use serde::{Deserialize, Serialize};

/// What the host sends to `observe`, as JSON:
/// `{"format":1,"line":7,"event":{"type":"turn","task":"T1",...}}`.
///
/// Read it with [`decode_observe`], which accepts event types newer than
/// this SDK; deserializing it directly (serde) is strict, as
/// [`Event::from_json`] is, and refuses them.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ObserveRequest {
    /// The trace format version of `event` ([`TRACE_FORMAT_VERSION`]).
    pub format: u32,
    /// The event's 1-based input line (the engine's sequence number when
    /// streamed): what a detection lists in its `evidence`.
    pub line: u64,
    /// The event, as a trace-format line.
    pub event: Event,
}

/// The borrowed twin of [`ObserveRequest`], for encoding.
#[derive(Serialize)]
struct ObserveRequestRef<'a> {
    format: u32,
    line: u64,
    event: &'a Event,
}

/// What `describe` answers, as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginDescription {
    /// The plugin's name: the `detector` of its detections, and how
    /// errors and logs name it.
    pub name: String,
    /// The plugin's own version.
    pub version: String,
    /// The detection kinds it reports (its own, never a built-in kind).
    pub kinds: Vec<String>,
    /// One sentence on what it catches.
    #[serde(default)]
    pub description: String,
}

/// Why bytes from the other side could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError(pub String);

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WireError {}

/// Encodes the request for one event, into `out` (cleared first), so a
/// caller can reuse one buffer.
pub fn encode_observe(line: u64, event: &Event, out: &mut Vec<u8>) {
    out.clear();
    let request = ObserveRequestRef {
        format: TRACE_FORMAT_VERSION,
        line,
        event,
    };
    // Serializing strings, numbers and JSON values into a Vec cannot fail.
    let _ = serde_json::to_writer(out, &request);
}

/// A request whose event is not read yet: the second try of
/// [`decode_observe`].
#[derive(Deserialize)]
struct ObserveRequestValue {
    format: u32,
    line: u64,
    event: serde_json::Value,
}

/// Decodes a request; refuses another trace format version. An event of a
/// type this SDK does not know (newer than it) is read as
/// [`EventKind::Unknown`](loopguard_core_types::EventKind::Unknown), as
/// [`Event::from_value_forward`] reads it, not refused.
pub fn decode_observe(bytes: &[u8]) -> Result<ObserveRequest, WireError> {
    // The common case in one pass; only a request the strict reading
    // refuses is read again, its event as a JSON value.
    let request = match serde_json::from_slice::<ObserveRequest>(bytes) {
        Ok(request) => request,
        Err(strict) => decode_observe_forward(bytes).map_err(|forward| {
            WireError(format!(
                "the event is not valid JSON of the trace format: {}",
                forward.unwrap_or_else(|| strict.to_string())
            ))
        })?,
    };
    if request.format != TRACE_FORMAT_VERSION {
        return Err(WireError(format!(
            "the event is in trace format {}, this plugin reads format {TRACE_FORMAT_VERSION}",
            request.format
        )));
    }
    Ok(request)
}

/// A request read with its event as a value, then the event read with
/// [`Event::from_value_forward`]. The error, when it has one of its own.
fn decode_observe_forward(bytes: &[u8]) -> Result<ObserveRequest, Option<String>> {
    let request: ObserveRequestValue = serde_json::from_slice(bytes).map_err(|_| None)?;
    let event = Event::from_value_forward(&request.event).map_err(|err| Some(err.to_string()))?;
    Ok(ObserveRequest {
        format: request.format,
        line: request.line,
        event,
    })
}

/// Encodes detections: nothing at all for none.
pub fn encode_detections(detections: &[Detection]) -> Vec<u8> {
    if detections.is_empty() {
        return Vec::new();
    }
    serde_json::to_vec(detections).unwrap_or_default()
}

/// Decodes detections (empty bytes are none).
pub fn decode_detections(bytes: &[u8]) -> Result<Vec<Detection>, WireError> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_slice(bytes)
        .map_err(|err| WireError(format!("its detections are not valid JSON: {err}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopguard_core_types::{Action, Severity};

    #[test]
    fn a_request_round_trips_with_its_line_and_version() {
        let event = Event::from_json(
            r#"{"type":"turn","task":"T1","agent":"coder","output":"hi","success":false,"x":1}"#,
        )
        .expect("an event");
        let mut bytes = Vec::new();
        encode_observe(7, &event, &mut bytes);
        let request = decode_observe(&bytes).expect("decodes");
        assert_eq!((request.format, request.line), (TRACE_FORMAT_VERSION, 7));
        assert_eq!(request.event, event);
    }

    #[test]
    fn another_format_or_garbage_is_refused_with_a_reason() {
        let err =
            decode_observe(br#"{"format":2,"line":1,"event":{"type":"completed","task":"T"}}"#)
                .expect_err("format 2");
        assert!(err.0.contains("trace format 2"), "{err}");
        let err = decode_observe(b"nope").expect_err("garbage");
        assert!(err.0.contains("not valid JSON"), "{err}");
    }

    #[test]
    fn an_event_type_newer_than_this_sdk_is_read_as_unknown_not_refused() {
        let bytes = br#"{"format":1,"line":4,"event":{"type":"tool_result_v9","task":"T","agent":"a","tool":"grep","args":{"q":"x"},"result":"..."}}"#;
        let request = decode_observe(bytes).expect("decodes");
        assert_eq!((request.line, request.event.task.as_str()), (4, "T"));
        let loopguard_core_types::EventKind::Unknown { event_type, fields } = &request.event.kind
        else {
            panic!("{:?}", request.event.kind);
        };
        assert_eq!(event_type, "tool_result_v9");
        assert_eq!(fields["args"]["q"], "x");
        // A known type with a missing field is still an error, naming it.
        let err = decode_observe(br#"{"format":1,"line":1,"event":{"type":"turn","task":"T"}}"#)
            .expect_err("no agent");
        assert!(err.0.contains("missing field \"agent\""), "{err}");
        // And so is an unknown type without a task.
        let err = decode_observe(br#"{"format":1,"line":1,"event":{"type":"tool_result_v9"}}"#)
            .expect_err("no task");
        assert!(err.0.contains("task"), "{err}");
    }

    #[test]
    fn detections_round_trip_and_none_is_empty() {
        assert!(encode_detections(&[]).is_empty());
        assert_eq!(decode_detections(&[]), Ok(Vec::new()));
        let detection = Detection::new("p", "mine", Severity::Low, Action::Warn, vec![1, 2], "why")
            .with_agents(["coder", "reviewer"]);
        let bytes = encode_detections(std::slice::from_ref(&detection));
        assert_eq!(decode_detections(&bytes), Ok(vec![detection]));
        // A host before trace format 1.2 reads the same bytes, `agents`
        // aside: it is an optional field.
        let text = String::from_utf8(bytes).expect("JSON text");
        assert!(text.contains(r#""agents":["coder","reviewer"]"#), "{text}");
        assert!(decode_detections(b"[{}]").is_err());
    }
}
