//! Events in: the JSON Lines input of the trace format.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::limits::LimitsConfig;
use crate::time::Timestamp;
use crate::usage::Usage;

/// One agent event of one task, as read from a trace line or posted by an
/// orchestrator.
///
/// Unknown fields are kept in [`Event::extra`] (and written back out when
/// the event is serialized) but otherwise ignored.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The unit a loop counter belongs to (an issue, a ticket, a task id).
    pub task: String,
    /// When it happened. Absent means "now" when streamed and "file order"
    /// when replayed.
    pub ts: Option<Timestamp>,
    /// The orchestrator's own id, echoed back in evidence.
    pub id: Option<String>,
    /// The event type and its own fields.
    pub kind: EventKind,
    /// Fields this version of the contract does not know, kept as they were.
    pub extra: Map<String, Value>,
}

/// The event types of the trace format and their own fields.
///
/// Non-exhaustive: a later revision of the contract adds event types, and a
/// consumer built before it sees them as [`EventKind::Unknown`] (through
/// [`Event::from_json_forward`]) rather than failing.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum EventKind {
    /// Work passed from one agent to another.
    Handoff {
        /// The agent handing the work over.
        from: String,
        /// The agent receiving it.
        to: String,
        /// What was handed over, if given.
        content: Option<String>,
        /// An explicit topic, if given.
        topic: Option<String>,
    },
    /// An agent asks another agent for help.
    Collaboration {
        /// The asking agent.
        from: String,
        /// The agent asked.
        to: String,
        /// The request text.
        request: String,
    },
    /// An attempt failed.
    Failure {
        /// The agent whose attempt failed.
        agent: String,
        /// The error message.
        error: String,
        /// The error's type or class, if given.
        error_type: Option<String>,
        /// Where it happened (file:line, module, node), if given.
        location: Option<String>,
        /// A stack trace, if given.
        stack: Option<String>,
    },
    /// One agent turn and its outcome.
    Turn {
        /// The agent that took the turn.
        agent: String,
        /// What it produced.
        output: String,
        /// Whether the turn succeeded.
        success: bool,
    },
    /// The workflow moved between phases or nodes.
    Transition {
        /// The phase or node left.
        from: String,
        /// The phase or node entered.
        to: String,
    },
    /// Measurable progress signals.
    Progress(ProgressSnapshot),
    /// The task succeeded: its counters reset.
    Completed,
    /// A human intervened: counters reset, a gate lifts.
    Human {
        /// What the human said, if anything.
        note: Option<String>,
    },
    /// An agent called a tool (trace format 1.1). A call with `error`
    /// failed: it is also a failure of its agent, at its tool
    /// ([`EventKind::failure`]; ruling 14).
    ToolCall {
        /// The agent that made the call.
        agent: String,
        /// The tool's name.
        tool: String,
        /// Its arguments, any JSON (`null` when absent; `{}` is not
        /// `null`).
        args: Value,
        /// What came back: text or any JSON. Ignored when `error` is set.
        result: Option<Value>,
        /// The call failed, with this message.
        error: Option<String>,
        /// The error's type or class, as for a `failure`.
        error_type: Option<String>,
        /// The orchestrator's id of the call.
        call_id: Option<String>,
    },
    /// An event type newer than this build of the contract, read by
    /// [`Event::from_json_forward`]: its `type` and its own fields, kept as
    /// they were. The engine never receives one from `replay` (an unknown
    /// `type` is a line error there); plugins and importers skip it.
    Unknown {
        /// The `type` as written.
        event_type: String,
        /// Every field but `type`, `task`, `ts` and `id`, as written.
        fields: Map<String, Value>,
    },
}

/// The measurable fields of a `progress` event. Every field is optional.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ProgressSnapshot {
    /// Number of tests run.
    pub tests_total: Option<u64>,
    /// Number of tests failing.
    pub tests_failed: Option<u64>,
    /// Test coverage, between 0 and 1.
    pub coverage: Option<f64>,
    /// The task's running total of changed files.
    pub files_changed: Option<u64>,
    /// Dependencies added so far.
    pub deps_added: Option<u64>,
}

impl EventKind {
    /// The `type` name of this event in the trace format.
    pub fn type_name(&self) -> &str {
        match self {
            EventKind::Handoff { .. } => "handoff",
            EventKind::Collaboration { .. } => "collaboration",
            EventKind::Failure { .. } => "failure",
            EventKind::Turn { .. } => "turn",
            EventKind::Transition { .. } => "transition",
            EventKind::Progress(_) => "progress",
            EventKind::Completed => "completed",
            EventKind::Human { .. } => "human",
            EventKind::ToolCall { .. } => "tool_call",
            EventKind::Unknown { event_type, .. } => event_type,
        }
    }
}

/// A failure as the failure rules read it: a `failure` event, or a
/// `tool_call` whose call failed (ruling 14: its tool is the location).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureView<'a> {
    /// The agent whose attempt failed.
    pub agent: &'a str,
    /// The error message.
    pub error: &'a str,
    /// The error's type or class, if given.
    pub error_type: Option<&'a str>,
    /// Where it happened: the failure's `location`, or the failing call's
    /// tool.
    pub location: Option<&'a str>,
    /// A stack trace, if given.
    pub stack: Option<&'a str>,
}

impl EventKind {
    /// The failure this event reports, if it reports one: a `failure`, or
    /// a `tool_call` with `error` (ruling 14).
    ///
    /// ```
    /// use loopguard_core_types::Event;
    /// let call = Event::from_json(
    ///     r#"{"type":"tool_call","task":"T","agent":"coder","tool":"exec","error":"No such file"}"#,
    /// )?;
    /// let failure = call.kind.failure().expect("a failing call is a failure");
    /// assert_eq!((failure.agent, failure.location), ("coder", Some("exec")));
    /// # Ok::<(), loopguard_core_types::EventError>(())
    /// ```
    pub fn failure(&self) -> Option<FailureView<'_>> {
        match self {
            EventKind::Failure {
                agent,
                error,
                error_type,
                location,
                stack,
            } => Some(FailureView {
                agent,
                error,
                error_type: error_type.as_deref(),
                location: location.as_deref(),
                stack: stack.as_deref(),
            }),
            EventKind::ToolCall {
                agent,
                tool,
                error: Some(error),
                error_type,
                ..
            } => Some(FailureView {
                agent,
                error,
                error_type: error_type.as_deref(),
                location: Some(tool),
                stack: None,
            }),
            _ => None,
        }
    }
}

/// Every event type the contract knows, in the order the spec lists them.
pub const EVENT_TYPES: [&str; 9] = [
    "handoff",
    "collaboration",
    "failure",
    "turn",
    "transition",
    "progress",
    "completed",
    "human",
    "tool_call",
];

/// Why a line could not become an [`Event`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EventError {
    /// The line is not a JSON object, or a field has the wrong JSON type.
    #[error("invalid JSON: {0}")]
    Json(String),
    /// The object has no `type` field.
    #[error("missing field \"type\"")]
    MissingType,
    /// The `type` is not one the contract knows.
    #[error("unknown event type {0:?}")]
    UnknownType(String),
    /// A required field is absent.
    #[error("missing field {field:?} for event type {event_type:?}")]
    MissingField {
        /// The event type.
        event_type: &'static str,
        /// The field that is required for it.
        field: &'static str,
    },
    /// The `task` field is absent.
    #[error("missing field \"task\"")]
    MissingTask,
    /// A field has a value outside its range.
    #[error("field {field:?} {problem}")]
    BadValue {
        /// The field.
        field: &'static str,
        /// What is wrong with its value.
        problem: String,
    },
    /// A field is longer than its limit in `[limits]`.
    #[error(
        "field {field:?} is {len} bytes, longer than the limit of {limit} (limits.{limit_key})"
    )]
    TooLong {
        /// The field.
        field: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The limit it exceeds.
        limit: usize,
        /// The `[limits]` key that sets it.
        limit_key: &'static str,
    },
    /// The line is longer than `limits.max_line_bytes`; it was not read.
    #[error("the line is {len} bytes, longer than the limit of {limit} (limits.max_line_bytes)")]
    LineTooLong {
        /// The line's length in bytes, newline excluded.
        len: u64,
        /// The limit it exceeds.
        limit: usize,
    },
}

impl Event {
    /// Parses one JSON Lines line of the trace format.
    ///
    /// ```
    /// use loopguard_core_types::{Event, EventKind};
    /// let event = Event::from_json(r#"{"type":"transition","task":"T1","from":"plan","to":"test"}"#)?;
    /// assert_eq!(event.task, "T1");
    /// assert!(matches!(event.kind, EventKind::Transition { .. }));
    /// # Ok::<(), loopguard_core_types::EventError>(())
    /// ```
    pub fn from_json(line: &str) -> Result<Event, EventError> {
        let raw: RawEvent<'_> =
            serde_json::from_str(line).map_err(|err| EventError::Json(err.to_string()))?;
        raw.into_event()
    }

    /// Parses one line like [`Event::from_json`] and checks it against
    /// `limits` ([`Event::check_limits`]): what `replay` (and a server) read
    /// input with. The line's own length is the reader's to check, before
    /// the line is held whole.
    ///
    /// ```
    /// use loopguard_core_types::{Event, EventError, LimitsConfig};
    /// let limits = LimitsConfig { max_task_id_bytes: 4, ..LimitsConfig::default() };
    /// let err = Event::from_json_within(r#"{"type":"completed","task":"T-1042"}"#, &limits)
    ///     .unwrap_err();
    /// assert!(matches!(err, EventError::TooLong { field: "task", len: 6, .. }));
    /// assert_eq!(
    ///     err.to_string(),
    ///     "field \"task\" is 6 bytes, longer than the limit of 4 (limits.max_task_id_bytes)"
    /// );
    /// ```
    pub fn from_json_within(line: &str, limits: &LimitsConfig) -> Result<Event, EventError> {
        let event = Event::from_json(line)?;
        event.check_limits(limits)?;
        Ok(event)
    }

    /// Checks the event against `limits`: its `task` id may be at most
    /// `limits.max_task_id_bytes` long. Long texts are not errors: the
    /// detectors keep at most `limits.max_text_bytes` of each.
    pub fn check_limits(&self, limits: &LimitsConfig) -> Result<(), EventError> {
        if self.task.len() > limits.max_task_id_bytes {
            return Err(EventError::TooLong {
                field: "task",
                len: self.task.len(),
                limit: limits.max_task_id_bytes,
                limit_key: "max_task_id_bytes",
            });
        }
        Ok(())
    }

    /// Parses one line like [`Event::from_json`], except that an event type
    /// this build does not know becomes [`EventKind::Unknown`] with its
    /// fields kept, rather than an error. For consumers that must accept
    /// event types newer than themselves (plugins, importers): the trace
    /// format's rule "an event type newer than a consumer reaches it as
    /// unknown, raw JSON kept". The common fields (`task`, and `ts` when
    /// present) must still be valid.
    ///
    /// ```
    /// use loopguard_core_types::{Event, EventKind};
    /// let line = r#"{"type":"tool_result_v9","task":"T1","tool":"grep","n":3}"#;
    /// assert!(Event::from_json(line).is_err());
    /// let event = Event::from_json_forward(line)?;
    /// match &event.kind {
    ///     EventKind::Unknown { event_type, fields } => {
    ///         assert_eq!(event_type, "tool_result_v9");
    ///         assert_eq!(fields["n"], 3);
    ///     }
    ///     other => panic!("{other:?}"),
    /// }
    /// assert!(Event::from_json(&event.to_json()).is_err());
    /// # Ok::<(), loopguard_core_types::EventError>(())
    /// ```
    pub fn from_json_forward(line: &str) -> Result<Event, EventError> {
        match Event::from_json(line) {
            Err(EventError::UnknownType(_)) => {
                let value: Value =
                    serde_json::from_str(line).map_err(|err| EventError::Json(err.to_string()))?;
                Event::unknown_from_value(value)
            }
            other => other,
        }
    }

    /// [`Event::from_json_forward`] for a parsed JSON value.
    pub fn from_value_forward(value: &Value) -> Result<Event, EventError> {
        match Event::from_value(value) {
            Err(EventError::UnknownType(_)) => Event::unknown_from_value(value.clone()),
            other => other,
        }
    }

    /// An event of a type this build does not know, from its JSON object.
    fn unknown_from_value(value: Value) -> Result<Event, EventError> {
        let Value::Object(mut fields) = value else {
            return Err(EventError::Json("expected a JSON object".into()));
        };
        let text = |fields: &mut Map<String, Value>, key: &'static str| match fields.remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(other) => Err(EventError::BadValue {
                field: key,
                problem: format!("must be a string, got {other}"),
            }),
        };
        let event_type = text(&mut fields, "type")?.ok_or(EventError::MissingType)?;
        let task = text(&mut fields, "task")?.ok_or(EventError::MissingTask)?;
        let ts = parse_ts(text(&mut fields, "ts")?.as_deref())?;
        let id = text(&mut fields, "id")?;
        Ok(Event {
            task,
            ts,
            id,
            kind: EventKind::Unknown { event_type, fields },
            extra: Map::new(),
        })
    }

    /// Parses a JSON value of the trace format (as posted to the sidecar).
    pub fn from_value(value: &Value) -> Result<Event, EventError> {
        let raw = RawEvent::deserialize(value).map_err(|err| EventError::Json(err.to_string()))?;
        raw.into_event()
    }

    /// Serializes the event back to one line of the trace format.
    pub fn to_json(&self) -> String {
        // Serializing a map of strings, numbers and JSON values cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// What this event's step spent: its `usage` (trace format 1.2, ruling
    /// 18), read from [`Event::extra`]. `None` when the event has none; an
    /// error naming the field when a value is bad (a line read by
    /// [`Event::from_json`] has been checked already).
    pub fn usage(&self) -> Result<Option<Usage>, EventError> {
        match self.extra.get("usage") {
            None | Some(Value::Null) => Ok(None),
            Some(usage) => Usage::from_value(usage).map(Some),
        }
    }

    /// The agent this event is attributed to, if the event type names one
    /// (`from` for handoffs and collaborations).
    pub fn agent(&self) -> Option<&str> {
        match &self.kind {
            EventKind::Handoff { from, .. } | EventKind::Collaboration { from, .. } => Some(from),
            EventKind::Failure { agent, .. }
            | EventKind::Turn { agent, .. }
            | EventKind::ToolCall { agent, .. } => Some(agent),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        RawEvent::deserialize(deserializer)?
            .into_event()
            .map_err(de::Error::custom)
    }
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("type", self.kind.type_name())?;
        map.serialize_entry("task", &self.task)?;
        if let Some(ts) = &self.ts {
            map.serialize_entry("ts", &ts.to_rfc3339())?;
        }
        if let Some(id) = &self.id {
            map.serialize_entry("id", id)?;
        }
        fn opt<M: SerializeMap, T: Serialize>(
            map: &mut M,
            key: &str,
            value: &Option<T>,
        ) -> Result<(), M::Error> {
            match value {
                Some(value) => map.serialize_entry(key, value),
                None => Ok(()),
            }
        }
        match &self.kind {
            EventKind::Handoff {
                from,
                to,
                content,
                topic,
            } => {
                map.serialize_entry("from", from)?;
                map.serialize_entry("to", to)?;
                opt(&mut map, "content", content)?;
                opt(&mut map, "topic", topic)?;
            }
            EventKind::Collaboration { from, to, request } => {
                map.serialize_entry("from", from)?;
                map.serialize_entry("to", to)?;
                map.serialize_entry("request", request)?;
            }
            EventKind::Failure {
                agent,
                error,
                error_type,
                location,
                stack,
            } => {
                map.serialize_entry("agent", agent)?;
                map.serialize_entry("error", error)?;
                opt(&mut map, "error_type", error_type)?;
                opt(&mut map, "location", location)?;
                opt(&mut map, "stack", stack)?;
            }
            EventKind::Turn {
                agent,
                output,
                success,
            } => {
                map.serialize_entry("agent", agent)?;
                map.serialize_entry("output", output)?;
                map.serialize_entry("success", success)?;
            }
            EventKind::Transition { from, to } => {
                map.serialize_entry("from", from)?;
                map.serialize_entry("to", to)?;
            }
            EventKind::Progress(progress) => {
                opt(&mut map, "tests_total", &progress.tests_total)?;
                opt(&mut map, "tests_failed", &progress.tests_failed)?;
                opt(&mut map, "coverage", &progress.coverage)?;
                opt(&mut map, "files_changed", &progress.files_changed)?;
                opt(&mut map, "deps_added", &progress.deps_added)?;
            }
            EventKind::Completed => {}
            EventKind::Human { note } => opt(&mut map, "note", note)?,
            EventKind::ToolCall {
                agent,
                tool,
                args,
                result,
                error,
                error_type,
                call_id,
            } => {
                map.serialize_entry("agent", agent)?;
                map.serialize_entry("tool", tool)?;
                if !args.is_null() {
                    map.serialize_entry("args", args)?;
                }
                opt(&mut map, "result", result)?;
                opt(&mut map, "error", error)?;
                opt(&mut map, "error_type", error_type)?;
                opt(&mut map, "call_id", call_id)?;
            }
            EventKind::Unknown { fields, .. } => {
                for (key, value) in fields {
                    map.serialize_entry(key, value)?;
                }
            }
        }
        for (key, value) in &self.extra {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// Every field any event type may carry, all optional, borrowed from the
/// line where possible. Parsed by hand (not with `#[serde(flatten)]`) so
/// that unknown fields are kept without buffering the whole object.
#[derive(Default)]
struct RawEvent<'a> {
    event_type: Option<Cow<'a, str>>,
    task: Option<Cow<'a, str>>,
    ts: Option<Cow<'a, str>>,
    id: Option<Cow<'a, str>>,
    from: Option<Cow<'a, str>>,
    to: Option<Cow<'a, str>>,
    content: Option<Cow<'a, str>>,
    topic: Option<Cow<'a, str>>,
    request: Option<Cow<'a, str>>,
    agent: Option<Cow<'a, str>>,
    error: Option<Cow<'a, str>>,
    error_type: Option<Cow<'a, str>>,
    location: Option<Cow<'a, str>>,
    stack: Option<Cow<'a, str>>,
    output: Option<Cow<'a, str>>,
    success: Option<bool>,
    note: Option<Cow<'a, str>>,
    tool: Option<Cow<'a, str>>,
    call_id: Option<Cow<'a, str>>,
    /// `args` and `result`: any JSON, kept as written (`null` included).
    args: Option<Value>,
    result: Option<Value>,
    progress: ProgressSnapshot,
    extra: Map<String, Value>,
}

/// A string field that may also be `null`.
struct OptStr<'a>(Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for OptStr<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StrVisitor;
        impl<'de> Visitor<'de> for StrVisitor {
            type Value = OptStr<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(OptStr(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(OptStr(Some(Cow::Owned(v.to_owned()))))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(OptStr(Some(Cow::Owned(v))))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(OptStr(None))
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(OptStr(None))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                d.deserialize_any(StrVisitor)
            }
        }
        deserializer.deserialize_any(StrVisitor)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for RawEvent<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RawVisitor;
        impl<'de> Visitor<'de> for RawVisitor {
            type Value = RawEvent<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object (one event)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut raw = RawEvent::default();
                while let Some(key) = map.next_key::<OptStr<'de>>()? {
                    let key = key.0.unwrap_or_default();
                    macro_rules! string {
                        ($field:ident) => {{
                            raw.$field = map.next_value::<OptStr<'de>>()?.0;
                        }};
                    }
                    macro_rules! typed {
                        ($slot:expr) => {{
                            $slot = map.next_value()?;
                        }};
                    }
                    match &*key {
                        "type" => string!(event_type),
                        "task" => string!(task),
                        "ts" => string!(ts),
                        "id" => string!(id),
                        "from" => string!(from),
                        "to" => string!(to),
                        "content" => string!(content),
                        "topic" => string!(topic),
                        "request" => string!(request),
                        "agent" => string!(agent),
                        "error" => string!(error),
                        "error_type" => string!(error_type),
                        "location" => string!(location),
                        "stack" => string!(stack),
                        "output" => string!(output),
                        "note" => string!(note),
                        "tool" => string!(tool),
                        "call_id" => string!(call_id),
                        "args" => raw.args = Some(map.next_value()?),
                        "result" => raw.result = Some(map.next_value()?),
                        "success" => typed!(raw.success),
                        "tests_total" => typed!(raw.progress.tests_total),
                        "tests_failed" => typed!(raw.progress.tests_failed),
                        "coverage" => typed!(raw.progress.coverage),
                        "files_changed" => typed!(raw.progress.files_changed),
                        "deps_added" => typed!(raw.progress.deps_added),
                        _ => {
                            let value: Value = map.next_value()?;
                            raw.extra.insert(key.into_owned(), value);
                        }
                    }
                }
                Ok(raw)
            }
        }
        deserializer.deserialize_map(RawVisitor)
    }
}

/// The `ts` field, when present: an RFC 3339 time.
fn parse_ts(text: Option<&str>) -> Result<Option<Timestamp>, EventError> {
    text.map(|text| {
        Timestamp::parse_rfc3339(text).map_err(|problem| EventError::BadValue {
            field: "ts",
            problem,
        })
    })
    .transpose()
}

fn owned(value: Option<Cow<'_, str>>) -> Option<String> {
    value.map(Cow::into_owned)
}

impl RawEvent<'_> {
    fn into_event(mut self) -> Result<Event, EventError> {
        let event_type = self.event_type.ok_or(EventError::MissingType)?;
        let event_type: &'static str = EVENT_TYPES
            .iter()
            .find(|known| **known == event_type)
            .ok_or_else(|| EventError::UnknownType(event_type.clone().into_owned()))?;
        let task = owned(self.task).ok_or(EventError::MissingTask)?;
        let required = |value: Option<Cow<'_, str>>, field: &'static str| {
            owned(value).ok_or(EventError::MissingField { event_type, field })
        };
        let kind = match event_type {
            "handoff" => EventKind::Handoff {
                from: required(self.from, "from")?,
                to: required(self.to, "to")?,
                content: owned(self.content),
                topic: owned(self.topic),
            },
            "collaboration" => EventKind::Collaboration {
                from: required(self.from, "from")?,
                to: required(self.to, "to")?,
                request: required(self.request, "request")?,
            },
            "failure" => EventKind::Failure {
                agent: required(self.agent, "agent")?,
                error: required(self.error, "error")?,
                error_type: owned(self.error_type),
                location: owned(self.location),
                stack: owned(self.stack),
            },
            "turn" => EventKind::Turn {
                agent: required(self.agent, "agent")?,
                output: required(self.output, "output")?,
                success: self.success.ok_or(EventError::MissingField {
                    event_type,
                    field: "success",
                })?,
            },
            "transition" => EventKind::Transition {
                from: required(self.from, "from")?,
                to: required(self.to, "to")?,
            },
            "progress" => {
                if let Some(coverage) = self.progress.coverage
                    && !(0.0..=1.0).contains(&coverage)
                {
                    return Err(EventError::BadValue {
                        field: "coverage",
                        problem: format!("must be between 0 and 1, got {coverage}"),
                    });
                }
                EventKind::Progress(self.progress)
            }
            "completed" => EventKind::Completed,
            "tool_call" => EventKind::ToolCall {
                agent: required(self.agent, "agent")?,
                tool: required(self.tool.take(), "tool")?,
                args: self.args.take().unwrap_or(Value::Null),
                // A failed call's result is ignored.
                result: self
                    .result
                    .take()
                    .filter(|result| !result.is_null() && self.error.is_none()),
                error: owned(self.error),
                error_type: owned(self.error_type),
                call_id: owned(self.call_id.take()),
            },
            _ => EventKind::Human {
                note: owned(self.note),
            },
        };
        // Fields of other event types are ignored, not errors: a line may
        // carry more than its type needs.
        let ts = parse_ts(self.ts.as_deref())?;
        // Tool-call fields on another type are that line's own extras,
        // kept like any unknown field.
        let mut extra = self.extra;
        for (key, value) in [
            (
                "tool",
                self.tool.map(|tool| Value::String(tool.into_owned())),
            ),
            (
                "call_id",
                self.call_id.map(|id| Value::String(id.into_owned())),
            ),
            ("args", self.args),
            ("result", self.result),
        ] {
            if let Some(value) = value {
                extra.insert(key.to_owned(), value);
            }
        }
        if let Some(usage) = extra.get("usage").filter(|usage| !usage.is_null()) {
            Usage::from_value(usage)?;
        }
        Ok(Event {
            task,
            ts,
            id: owned(self.id),
            kind,
            extra,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_event_type() {
        let lines = [
            r#"{"type":"handoff","task":"T","from":"a","to":"b","content":"c","topic":"t"}"#,
            r#"{"type":"collaboration","task":"T","from":"a","to":"b","request":"r"}"#,
            r#"{"type":"failure","task":"T","agent":"a","error":"e","error_type":"x","location":"l","stack":"s"}"#,
            r#"{"type":"turn","task":"T","agent":"a","output":"o","success":false}"#,
            r#"{"type":"transition","task":"T","from":"p","to":"q"}"#,
            r#"{"type":"progress","task":"T","tests_total":10,"tests_failed":2,"coverage":0.5,"files_changed":3,"deps_added":1}"#,
            r#"{"type":"completed","task":"T"}"#,
            r#"{"type":"human","task":"T","note":"carry on"}"#,
            r#"{"type":"tool_call","task":"T","agent":"a","tool":"grep","args":{"q":"x"},"result":{"hits":[1,2]},"call_id":"c"}"#,
        ];
        for (line, expected) in lines.iter().zip(EVENT_TYPES) {
            let event = Event::from_json(line).expect(line);
            assert_eq!(event.kind.type_name(), expected);
            // Serializing and parsing again gives the same event.
            let again = Event::from_json(&event.to_json()).expect("round trip");
            assert_eq!(again, event);
        }
    }

    #[test]
    fn a_task_id_past_the_limit_is_an_error_naming_the_field_and_long_texts_are_not() {
        let limits = LimitsConfig::default();
        let line = |task: &str, text: &str| {
            serde_json::json!({"type": "failure", "task": task, "agent": "a", "error": text})
                .to_string()
        };
        let at_limit = "t".repeat(1024);
        let huge_text = "x".repeat(100_000);
        let event = Event::from_json_within(&line(&at_limit, &huge_text), &limits)
            .expect("an id at the limit and a long text are accepted");
        assert_eq!(event.task.len(), 1024);
        let over = "t".repeat(65_536);
        let err = Event::from_json_within(&line(&over, "e"), &limits).expect_err("too long");
        assert_eq!(
            err.to_string(),
            "field \"task\" is 65536 bytes, longer than the limit of 1024 \
             (limits.max_task_id_bytes)"
        );
        // Plain parsing does not check limits; `check_limits` does.
        let event = Event::from_json(&line(&over, "e")).expect("parses");
        assert_eq!(event.check_limits(&limits), Err(err));
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let err = |line: &str| Event::from_json(line).expect_err(line).to_string();
        assert_eq!(
            err(r#"{"type":"handof","task":"T"}"#),
            r#"unknown event type "handof""#
        );
        assert_eq!(err(r#"{"type":"completed"}"#), r#"missing field "task""#);
        assert_eq!(err(r#"{"task":"T"}"#), r#"missing field "type""#);
        assert_eq!(
            err(r#"{"type":"failure","task":"T","agent":"a"}"#),
            r#"missing field "error" for event type "failure""#
        );
        assert!(
            err(r#"{"type":"turn","task":"T","agent":"a","output":"o","success":"yes"}"#)
                .starts_with("invalid JSON")
        );
        assert!(err("not json").starts_with("invalid JSON"));
        assert!(err("[1,2]").starts_with("invalid JSON"));
        assert!(err(r#"{"type":"progress","task":"T","coverage":1.5}"#).contains("coverage"));
        assert!(err(r#"{"type":"completed","task":"T","ts":"noon"}"#).contains("ts"));
    }

    #[test]
    fn unknown_fields_are_kept_and_nulls_are_absent() {
        let event = Event::from_json(
            r#"{"type":"handoff","task":"T","from":"a","to":"b","content":null,"x-trace":{"span":7},"ts":"2026-11-22T10:00:00Z","id":"e1"}"#,
        )
        .expect("valid");
        assert_eq!(event.extra["x-trace"]["span"], 7);
        assert_eq!(event.id.as_deref(), Some("e1"));
        assert!(event.ts.is_some());
        assert!(matches!(
            event.kind,
            EventKind::Handoff { content: None, .. }
        ));
        assert!(event.to_json().contains("x-trace"));
    }

    #[test]
    fn usage_of_trace_format_1_2_is_accepted_on_any_event_and_kept() {
        let usage = serde_json::json!({
            "input_tokens": 1200, "output_tokens": 340, "cost_usd": 0.0123, "model": "gpt-4o"
        });
        for line in [
            r#"{"type":"turn","task":"T","agent":"a","output":"x","success":true,"usage":USAGE}"#,
            r#"{"type":"tool_call","task":"T","agent":"a","tool":"grep","result":"ok","usage":USAGE}"#,
            r#"{"type":"completed","task":"T","usage":USAGE}"#,
        ] {
            let line = line.replace("USAGE", &usage.to_string());
            let event = Event::from_json(&line).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(event.extra["usage"], usage, "{line}");
            let again = Event::from_json(&event.to_json()).expect("written back out");
            assert_eq!(again.extra["usage"], usage);
        }
    }

    #[test]
    fn tool_calls_are_read_with_any_json_and_a_failing_call_is_a_failure() {
        let call = Event::from_json(
            r#"{"type":"tool_call","task":"T","agent":"coder","tool":"web_search","args":{"q":"rust"},"result":"3 hits","call_id":"c1"}"#,
        )
        .expect("valid");
        let EventKind::ToolCall {
            agent,
            tool,
            args,
            result,
            error,
            call_id,
            ..
        } = &call.kind
        else {
            panic!("{:?}", call.kind);
        };
        assert_eq!((agent.as_str(), tool.as_str()), ("coder", "web_search"));
        assert_eq!(args["q"], "rust");
        assert_eq!(result.as_ref(), Some(&Value::from("3 hits")));
        assert_eq!((error, call_id.as_deref()), (&None, Some("c1")));
        assert_eq!(call.agent(), Some("coder"));
        assert_eq!(call.kind.failure(), None, "a successful call is no failure");
        // Absent args are null; {} is not null; both round-trip.
        let bare = Event::from_json(r#"{"type":"tool_call","task":"T","agent":"a","tool":"ls"}"#)
            .expect("valid");
        assert!(matches!(
            &bare.kind,
            EventKind::ToolCall {
                args: Value::Null,
                result: None,
                ..
            }
        ));
        assert_eq!(Event::from_json(&bare.to_json()), Ok(bare.clone()));
        let empty = Event::from_json(
            r#"{"type":"tool_call","task":"T","agent":"a","tool":"ls","args":{}}"#,
        )
        .expect("valid");
        assert_ne!(empty, bare);
        assert_eq!(Event::from_json(&empty.to_json()), Ok(empty));
        // A failing call: its result is ignored, and it is a failure at its tool.
        let failed = Event::from_json(
            r#"{"type":"tool_call","task":"T","agent":"a","tool":"exec","args":{"cmd":"cat x"},"result":"partial","error":"FileNotFoundError: x","error_type":"FileNotFoundError"}"#,
        )
        .expect("valid");
        assert!(matches!(
            &failed.kind,
            EventKind::ToolCall { result: None, .. }
        ));
        let failure = failed.kind.failure().expect("a failure");
        assert_eq!(
            failure,
            FailureView {
                agent: "a",
                error: "FileNotFoundError: x",
                error_type: Some("FileNotFoundError"),
                location: Some("exec"),
                stack: None,
            }
        );
        // A missing agent or tool names the field.
        assert_eq!(
            Event::from_json(r#"{"type":"tool_call","task":"T","tool":"ls"}"#),
            Err(EventError::MissingField {
                event_type: "tool_call",
                field: "agent"
            })
        );
        assert_eq!(
            Event::from_json(r#"{"type":"tool_call","task":"T","agent":"a"}"#)
                .map_err(|err| err.to_string()),
            Err("missing field \"tool\" for event type \"tool_call\"".to_owned())
        );
        // Tool-call fields on another type are kept as that line's extras.
        let handoff = Event::from_json(
            r#"{"type":"handoff","task":"T","from":"a","to":"b","tool":"grep","args":[1]}"#,
        )
        .expect("valid");
        assert_eq!(handoff.extra["tool"], "grep");
        assert_eq!(handoff.extra["args"], serde_json::json!([1]));
    }

    #[test]
    fn escaped_strings_are_unescaped() {
        let event = Event::from_json(
            r#"{"type":"failure","task":"T\u00e9","agent":"a","error":"line1\nline2 \"quoted\""}"#,
        )
        .expect("valid");
        assert_eq!(event.task, "Té");
        match event.kind {
            EventKind::Failure { error, .. } => assert_eq!(error, "line1\nline2 \"quoted\""),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn newer_event_types_are_kept_whole_by_forward_parsing() {
        let line = r#"{"type":"tool_result_v9","task":"T","ts":"2026-11-22T10:00:00Z","id":"c1","agent":"a","tool":"grep","args":{"q":"x"},"result":null}"#;
        assert_eq!(
            Event::from_json(line),
            Err(EventError::UnknownType("tool_result_v9".into()))
        );
        let event = Event::from_json_forward(line).expect("kept");
        assert_eq!(event.task, "T");
        assert_eq!(event.id.as_deref(), Some("c1"));
        assert!(event.ts.is_some());
        assert_eq!(event.kind.type_name(), "tool_result_v9");
        let EventKind::Unknown { fields, .. } = &event.kind else {
            panic!("{:?}", event.kind);
        };
        assert_eq!(fields["args"]["q"], "x");
        assert!(fields["result"].is_null());
        // Written back out, it is the same object.
        let back: Value = serde_json::from_str(&event.to_json()).expect("json");
        let original: Value = serde_json::from_str(line).expect("json");
        assert_eq!(back, original);
        let value: Value = serde_json::from_str(line).expect("json");
        assert_eq!(Event::from_value_forward(&value), Ok(event));
        // Known types parse as before; the common fields are still checked.
        assert!(matches!(
            Event::from_json_forward(r#"{"type":"completed","task":"T"}"#).map(|e| e.kind),
            Ok(EventKind::Completed)
        ));
        assert_eq!(
            Event::from_json_forward(r#"{"type":"tool_result_v9","agent":"a"}"#),
            Err(EventError::MissingTask)
        );
        assert!(
            Event::from_json_forward(r#"{"type":"tool_result_v9","task":"T","ts":"noon"}"#)
                .is_err()
        );
        assert!(Event::from_json_forward(r#"{"type":"completed"}"#).is_err());
    }

    #[test]
    fn from_value_matches_from_json() {
        let line =
            r#"{"type":"turn","task":"T","agent":"a","output":"o","success":true,"extra":1}"#;
        let value: Value = serde_json::from_str(line).expect("json");
        assert_eq!(Event::from_value(&value), Event::from_json(line));
    }
}
