//! Importers: other frameworks' logs turned into loopguard's trace format
//! (`docs/spec/trace-format.md`), so that a recorded run replays without a
//! converter of one's own.
//!
//! An importer adds no rules (ruling 16): it says what became what, and
//! drops what is not work (an orchestrator's own bookkeeping, runner
//! noise). A converted trace replays exactly like a hand-written one.
//! What a log says a step spent (OpenHands' `llm_metrics`, OpenTelemetry
//! model calls' token counts) becomes its event's `usage` (trace format
//! 1.2).
//! `docs/importers.md` has each format's mapping table. The OpenTelemetry
//! mapping is also public as a function of decoded spans
//! ([`otlp::events_from_spans`]), for receivers that decode OTLP themselves.
//!
//! ```
//! use loopguard_import::{Format, import};
//!
//! let log = r#"{"history": [
//!   {"role": "Orchestrator (-> WebSurfer)", "content": "Open the pricing page"},
//!   {"role": "WebSurfer", "content": "The pricing page lists three plans."}
//! ]}"#;
//! let imported = import(Format::MagenticOne, "run-1", log).expect("a log");
//! assert_eq!(imported.events.len(), 2);
//! assert_eq!(imported.events[0].task, "run-1");
//! ```

use loopguard_core_types::Event;
use serde_json::Value;

mod magentic_one;
mod openhands;
pub mod otlp;
mod usage;

/// A log format loopguard imports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Magentic-One / AutoGen AgentChat logs: a JSON object whose `history`
    /// is a list of `{"role", "content"}` messages.
    MagenticOne,
    /// OpenHands event streams: the software-agent-sdk's events (`kind`
    /// `ActionEvent`, `ObservationEvent`, `AgentErrorEvent`, ...) or the
    /// older trajectories (`action` / `observation` with `args`, `content`,
    /// `extras`, `cause`), as a JSON array, an object with an `events`,
    /// `history`, `trajectory` or `items` list, or JSON Lines.
    OpenHands,
    /// OpenTelemetry traces in the OTLP/JSON encoding (`resourceSpans`), one
    /// export or JSON Lines of them (the collector's file exporter), read
    /// by the GenAI semantic conventions and OpenInference's attributes.
    Otlp,
}

impl Format {
    /// Every format, by the name the command line takes.
    pub const ALL: [(&'static str, Format); 3] = [
        ("magentic-one", Format::MagenticOne),
        ("openhands", Format::OpenHands),
        ("otlp", Format::Otlp),
    ];

    /// The format called `name` on the command line.
    pub fn named(name: &str) -> Option<Format> {
        Format::ALL
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, format)| *format)
    }
}

/// What an import gave: the events, in order, and what was dropped.
#[derive(Debug, Clone, Default)]
pub struct Imported {
    /// The trace's events, in order (the log's, or for spans their time's).
    pub events: Vec<Event>,
    /// What was left out and why, one entry per kind of thing with a count
    /// ("3 messages of role 'Orchestrator (thought)': the orchestrator's
    /// own ledger, not work").
    pub dropped: Vec<Dropped>,
}

/// Things of one kind that an import left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// What they are.
    pub what: String,
    /// Why they are not events.
    pub why: &'static str,
    /// How many.
    pub count: usize,
}

impl Imported {
    /// Adds the event `value` describes; one the trace format refuses is
    /// dropped and counted, never a panic.
    fn push_event(&mut self, value: &Value) {
        match Event::from_value(value) {
            Ok(event) => self.events.push(event),
            Err(_) => self.drop_one(
                "items that make no valid event".to_owned(),
                "the trace format refuses what they would become",
            ),
        }
    }

    fn drop_one(&mut self, what: String, why: &'static str) {
        match self.dropped.iter_mut().find(|d| d.what == what) {
            Some(dropped) => dropped.count += 1,
            None => self.dropped.push(Dropped {
                what,
                why,
                count: 1,
            }),
        }
    }
}

/// A message's or observation's content as text: a string, the `text`s of
/// a list of parts (images and other parts dropped), an object's `text`, or
/// the JSON of anything else.
pub(crate) fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| match part {
                Value::String(text) => Some(text.as_str()),
                other => other.get("text").and_then(Value::as_str),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        Value::Object(map) => match map.get("text") {
            Some(Value::String(text)) => text.clone(),
            _ => content.to_string(),
        },
        other => other.to_string(),
    }
}

/// Why a log could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The log is not JSON (or is cut short).
    #[error("{name}: not a JSON {format} log: {error}")]
    Json {
        /// The log's name (its file).
        name: String,
        /// The format asked for.
        format: &'static str,
        /// The parser's error, with its line and column.
        error: serde_json::Error,
    },
    /// The log lacks what the format must have.
    #[error("{name}: {problem}")]
    Shape {
        /// The log's name.
        name: String,
        /// What is missing or wrong, and where.
        problem: String,
    },
}

impl ImportError {
    fn shape(name: &str, problem: &str) -> ImportError {
        ImportError::Shape {
            name: name.to_owned(),
            problem: problem.to_owned(),
        }
    }
}

/// A log's JSON, as its first non-blank character says.
enum JsonLog {
    /// `[`: one array.
    Array(Vec<Value>),
    /// `{`: one object, or several (JSON Lines, or objects one after the
    /// other).
    Objects(Vec<Value>),
}

/// Reads the JSON of the log `text` in `format`; empty text is an error
/// saying so, text that is neither an array nor objects one saying what
/// the format takes (`expected`), and a syntax error one naming the line
/// and the column.
fn read_json(
    name: &str,
    format: &'static str,
    text: &str,
    expected: &str,
) -> Result<JsonLog, ImportError> {
    let json_error = |error| ImportError::Json {
        name: name.to_owned(),
        format,
        error,
    };
    match text.trim_start().chars().next() {
        None => Err(ImportError::shape(name, "is empty")),
        Some('[') => serde_json::from_str(text)
            .map(JsonLog::Array)
            .map_err(json_error),
        Some('{') => serde_json::Deserializer::from_str(text)
            .into_iter::<Value>()
            .collect::<Result<_, _>>()
            .map(JsonLog::Objects)
            .map_err(json_error),
        Some(_) => {
            // Not JSON, most likely: the parser says where.
            serde_json::from_str::<Value>(text).map_err(json_error)?;
            Err(ImportError::shape(name, expected))
        }
    }
}

/// Imports the log `text` (called `name` in errors; its task id unless the
/// log names one) in `format`.
pub fn import(format: Format, name: &str, text: &str) -> Result<Imported, ImportError> {
    match format {
        Format::MagenticOne => magentic_one::import(name, text),
        Format::OpenHands => openhands::import(name, text),
        Format::Otlp => otlp::import(name, text),
    }
}
