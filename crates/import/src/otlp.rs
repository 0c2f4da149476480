//! OpenTelemetry traces of agents: the OTLP/JSON encoding (`resourceSpans`
//! → `scopeSpans` → `spans`), one export or JSON Lines of them (the
//! collector's file exporter), read by the GenAI semantic conventions
//! (`gen_ai.operation.name`, `gen_ai.agent.name`, `gen_ai.tool.*`) and
//! OpenInference's attributes (`openinference.span.kind`, `agent.name`,
//! `tool.name`, `input.value`, `output.value`, `session.id`).
//!
//! The mapping is a pure function of spans, [`events_from_spans`], so that a
//! receiver that decodes OTLP itself (protobuf or JSON) hands it the same
//! [`Span`]s:
//!
//! - an agent span (`invoke_agent`, or OpenInference `AGENT`) inside another
//!   agent's span is a `handoff` from the outer agent to the inner one when
//!   it starts (`content` its input) and one back when it ends (`content`
//!   its output); a span of the same agent inside its own is no handoff;
//! - a handoff span (`gen_ai.operation.name` `handoff`, as the OpenAI Agents
//!   SDK's OpenTelemetry instrumentation and others write it, with agents as
//!   siblings rather than nested) is a `handoff` from
//!   `gen_ai.handoff.from_agent` to `gen_ai.handoff.to_agent` when it starts;
//! - a tool span (`execute_tool`, or `TOOL`) is a `tool_call` of the nearest
//!   enclosing agent, failing (ruling 14) when its status is an error or it
//!   has an `error.type`; an agent span in error is also a `failure`;
//! - model calls (`chat`, `LLM`, ..., or a span of no other role that gives
//!   a token count, as the OpenAI Agents SDK's `response` spans) and other
//!   spans are dropped and counted; they still link a tool to its agent;
//! - a model call's `usage` (trace format 1.2: `gen_ai.usage.input_tokens`
//!   / `output_tokens` or `llm.token_count.prompt` / `completion`, the
//!   model `gen_ai.response.model`, else `gen_ai.request.model`, else
//!   `llm.model_name`) goes on its agent's first event at or after the
//!   call's start, else on the agent's last event, else (an agent with no
//!   event) on the task's next event, else its last; calls landing on one
//!   event are summed. A tool or handoff span's own counts go on its event;
//!   an agent span's, and those of a span with a counting span inside it
//!   (a sum of those), are not read.
//!
//! Spans are ordered by their start (a handoff back by the end of its
//! span), whatever order they come in; every event's `ts` is its span's
//! time and its `id` `s` and the span id (`.back` for a handoff back). The
//! task is the trace's `gen_ai.conversation.id` (or `session.id`), else its
//! trace id.

use std::collections::{HashMap, HashSet};

use loopguard_core_types::{Timestamp, Usage};
use serde_json::{Map, Value, json};

use crate::{ImportError, Imported, JsonLog, read_json, text_of, usage};

const FORMAT: &str = "OTLP";
/// The agent of a tool span outside any agent span.
const DEFAULT_AGENT: &str = "agent";
/// OTLP's status code for an error.
const STATUS_ERROR: i64 = 2;
/// The attributes of a model call's token counts: input, then output, by
/// the GenAI conventions, then OpenInference's.
const TOKEN_KEYS: [&str; 4] = [
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "llm.token_count.prompt",
    "llm.token_count.completion",
];

/// One span, as the mapping reads it: decoded from OTLP/JSON by this
/// module, or from protobuf or JSON by a receiver.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Span {
    /// The trace's id (hex).
    pub trace_id: String,
    /// The span's id (hex).
    pub span_id: String,
    /// The parent span's id, if it has one.
    pub parent_span_id: Option<String>,
    /// The span's name.
    pub name: String,
    /// When it started, in nanoseconds since the Unix epoch (0: unknown).
    pub start_unix_nano: u64,
    /// When it ended, in nanoseconds since the Unix epoch (0: unknown).
    pub end_unix_nano: u64,
    /// Its attributes as JSON values (`stringValue` a string, `intValue` and
    /// `doubleValue` numbers, `arrayValue` an array, `kvlistValue` an
    /// object), over its resource's attributes.
    pub attributes: Map<String, Value>,
    /// Its status code: 0 unset, 1 ok, 2 error.
    pub status_code: i64,
    /// Its status message.
    pub status_message: String,
    /// Its events (an `exception` event carries `exception.message`).
    pub events: Vec<SpanEvent>,
}

/// An event within a span.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpanEvent {
    /// The event's name (`exception`, ...).
    pub name: String,
    /// Its attributes, as for a [`Span`].
    pub attributes: Map<String, Value>,
}

impl Span {
    fn attr(&self, key: &str) -> Option<&Value> {
        self.attributes.get(key).filter(|value| !value.is_null())
    }

    /// The first of `keys` that is a non-blank string.
    fn text(&self, keys: &[&str]) -> Option<&str> {
        keys.iter().find_map(|key| {
            self.attr(key)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|text| !text.is_empty())
        })
    }

    fn role(&self) -> Role {
        let operation = self.text(&["gen_ai.operation.name"]).unwrap_or("");
        let kind = self
            .text(&["openinference.span.kind"])
            .unwrap_or("")
            .to_ascii_uppercase();
        if operation == "invoke_agent" || kind == "AGENT" {
            Role::Agent
        } else if operation == "handoff" {
            Role::Handoff
        } else if operation == "execute_tool" || kind == "TOOL" {
            Role::Tool
        } else if matches!(
            operation,
            "chat" | "text_completion" | "generate_content" | "embeddings"
        ) || matches!(kind.as_str(), "LLM" | "EMBEDDING")
        {
            Role::Model
        } else if self.gives_tokens() {
            // A model call by its counts (the OpenAI Agents SDK's `response`
            // and `generation` spans carry no operation name).
            Role::Model
        } else {
            Role::Other
        }
    }

    /// Whether it gives a token count (GenAI or OpenInference).
    fn gives_tokens(&self) -> bool {
        TOKEN_KEYS
            .iter()
            .any(|key| self.attr(key).and_then(usage::tokens).is_some())
    }

    fn agent_name(&self) -> String {
        self.text(&["gen_ai.agent.name", "agent.name"])
            .map_or_else(|| self.name.clone(), str::to_owned)
    }

    /// Why it failed (message, type), when it did.
    fn error(&self) -> Option<(String, Option<String>)> {
        let error_type = self.text(&["error.type"]);
        if self.status_code != STATUS_ERROR && error_type.is_none() {
            return None;
        }
        let exception = self
            .events
            .iter()
            .find(|event| event.name == "exception")
            .map(|event| &event.attributes);
        let from_exception = |key: &str| exception.and_then(|a| a.get(key)).and_then(Value::as_str);
        let error_type = error_type
            .or_else(|| from_exception("exception.type"))
            .map(str::to_owned);
        let message = Some(self.status_message.trim())
            .filter(|message| !message.is_empty())
            .or_else(|| from_exception("exception.message"))
            .map(str::to_owned)
            .or_else(|| error_type.clone())
            .unwrap_or_else(|| "error".to_owned());
        Some((message, error_type))
    }

    /// The model call's usage its attributes give: tokens by the GenAI
    /// conventions (`gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens`)
    /// or OpenInference's (`llm.token_count.prompt`,
    /// `llm.token_count.completion`), the model `gen_ai.response.model`,
    /// else `gen_ai.request.model`, else `llm.model_name`. A count that is
    /// no whole number of at least 0 is left out.
    fn usage(&self) -> Usage {
        let count = |keys: [&str; 2]| {
            keys.iter()
                .find_map(|key| self.attr(key).and_then(usage::tokens))
        };
        Usage {
            input_tokens: count([TOKEN_KEYS[0], TOKEN_KEYS[2]]),
            output_tokens: count([TOKEN_KEYS[1], TOKEN_KEYS[3]]),
            cost_usd: None,
            model: self
                .text(&[
                    "gen_ai.response.model",
                    "gen_ai.request.model",
                    "llm.model_name",
                ])
                .map(str::to_owned),
        }
    }

    fn ts(nanos: u64) -> Option<String> {
        let millis = i64::try_from(nanos / 1_000_000).ok()?;
        (nanos > 0).then(|| Timestamp(millis).to_rfc3339())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Agent,
    Handoff,
    Tool,
    Model,
    Other,
}

/// The trace events of `spans`, in time order, and what was dropped.
pub fn events_from_spans(spans: &[Span]) -> Imported {
    let mut imported = Imported::default();
    let mut by_id: HashMap<(&str, &str), &Span> = HashMap::new();
    for span in spans {
        if span.span_id.is_empty() {
            imported.drop_one(
                "spans without a span id".to_owned(),
                "nothing to link them by",
            );
        } else {
            by_id.insert((&span.trace_id, &span.span_id), span);
        }
    }
    let tasks = tasks_by_trace(spans);
    let sums = sums_of_calls(spans, &by_id);
    // A span's own usage: none for one that sums the calls inside it.
    let usage_of = |span: &Span| {
        if sums.contains(&(span.trace_id.as_str(), span.span_id.as_str())) {
            Usage::default()
        } else {
            span.usage()
        }
    };
    let mut timed: Vec<(Key, Value)> = Vec::new();
    let mut calls: Vec<ModelCall> = Vec::new();
    // In the log's order, each span once (the last of a repeated id), so
    // that what is dropped is counted in a stable order.
    let kept = spans.iter().filter(|span| {
        by_id
            .get(&(span.trace_id.as_str(), span.span_id.as_str()))
            .is_some_and(|kept| std::ptr::eq(*kept, *span))
    });
    for span in kept {
        let task = tasks
            .get(span.trace_id.as_str())
            .map_or(span.trace_id.as_str(), String::as_str);
        let (outer, depth) = enclosing_agent(span, &by_id);
        match span.role() {
            Role::Agent => agent_events(span, outer, depth, task, &mut timed),
            Role::Handoff => match handoff(span, outer, task, spans) {
                Some(mut event) => {
                    usage::add_to(&mut event, &usage_of(span));
                    timed.push((Key::start(span, depth), event));
                }
                None => imported.drop_one(
                    "handoff spans with no agent to hand to".to_owned(),
                    "neither gen_ai.handoff.to_agent nor a later agent span names one",
                ),
            },
            Role::Tool => {
                let agent = outer.map_or_else(|| DEFAULT_AGENT.to_owned(), Span::agent_name);
                let mut event = tool_call(span, &agent, task);
                usage::add_to(&mut event, &usage_of(span));
                timed.push((Key::start(span, depth), event));
            }
            Role::Model => {
                calls.extend(ModelCall::of(span, usage_of(span), outer, task));
                imported.drop_one(
                    "model call spans".to_owned(),
                    "a model's completion is not an exchange between agents",
                );
            }
            Role::Other => imported.drop_one(
                "other spans".to_owned(),
                "neither an agent, a tool nor a model call (chains, the runner's own)",
            ),
        }
    }
    timed.sort_by(|a, b| a.0.cmp(&b.0));
    place_usage(&mut timed, &calls);
    for (_, event) in timed {
        imported.push_event(&event);
    }
    imported
}

/// A model call's usage, waiting for the event it lands on.
#[derive(Debug)]
struct ModelCall {
    task: String,
    /// The enclosing agent's name (the default agent's outside any).
    agent: String,
    /// When the call started.
    nanos: u64,
    usage: Usage,
}

impl ModelCall {
    /// The call `span` makes, when it gives a token count (a model named
    /// alone is no spend).
    fn of(span: &Span, usage: Usage, outer: Option<&Span>, task: &str) -> Option<ModelCall> {
        if usage.input_tokens.is_none() && usage.output_tokens.is_none() {
            return None;
        }
        Some(ModelCall {
            task: task.to_owned(),
            agent: outer.map_or_else(|| DEFAULT_AGENT.to_owned(), Span::agent_name),
            nanos: span.start_unix_nano,
            usage,
        })
    }
}

/// The spans with a span giving token counts inside them (an LLM span of
/// a framework around the client library's own, a workflow's total): their
/// own counts are the sum of those and are not read again.
fn sums_of_calls<'s>(
    spans: &'s [Span],
    by_id: &HashMap<(&'s str, &'s str), &'s Span>,
) -> HashSet<(&'s str, &'s str)> {
    let mut sums = HashSet::new();
    for span in spans {
        if !span.gives_tokens() {
            continue;
        }
        let mut parent = span.parent_span_id.as_deref();
        while let Some(id) = parent {
            let key = (span.trace_id.as_str(), id);
            let Some(above) = by_id.get(&key) else {
                break;
            };
            if !sums.insert(key) {
                // Marked already, with what is above it (or a cycle).
                break;
            }
            parent = above.parent_span_id.as_deref();
        }
    }
    sums
}

/// The agent acting in a mapped event: a call's or failure's `agent`, a
/// handoff's `from`.
fn acting_agent(event: &Value) -> Option<&str> {
    event
        .get("agent")
        .or_else(|| event.get("from"))
        .and_then(Value::as_str)
}

/// Puts each model call's usage on an event of `timed` (sorted by time):
/// its agent's first event at or after the call's start, else its agent's
/// last event before it; when the agent has no event in the task, the
/// task's first event at or after the call, else its last. Calls that fall
/// on one event are summed.
fn place_usage(timed: &mut [(Key, Value)], calls: &[ModelCall]) {
    if calls.is_empty() {
        return;
    }
    let mut by_agent: HashMap<(String, String), Vec<usize>> = HashMap::new();
    let mut by_task: HashMap<String, Vec<usize>> = HashMap::new();
    for (index, (_, event)) in timed.iter().enumerate() {
        let task = event.get("task").and_then(Value::as_str).unwrap_or("");
        by_task.entry(task.to_owned()).or_default().push(index);
        if let Some(agent) = acting_agent(event) {
            by_agent
                .entry((task.to_owned(), agent.to_owned()))
                .or_default()
                .push(index);
        }
    }
    for call in calls {
        let indices = by_agent
            .get(&(call.task.clone(), call.agent.clone()))
            .or_else(|| by_task.get(&call.task));
        let Some(indices) = indices.filter(|indices| !indices.is_empty()) else {
            continue;
        };
        let after = indices.partition_point(|&index| timed[index].0.nanos < call.nanos);
        let index = indices.get(after).or_else(|| indices.last());
        if let Some(&index) = index {
            usage::add_to(&mut timed[index].1, &call.usage);
        }
    }
}

/// Where an event goes in time: at a span's start (outer spans first) or,
/// for what a span's end brings, at its end (inner spans first, and before
/// anything that starts at the same instant).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    nanos: u64,
    starts: bool,
    depth: i64,
    span_id: String,
    suffix: u8,
}

impl Key {
    fn start(span: &Span, depth: i64) -> Key {
        Key {
            nanos: span.start_unix_nano,
            starts: true,
            depth,
            span_id: span.span_id.clone(),
            suffix: 0,
        }
    }

    fn end(span: &Span, depth: i64, suffix: u8) -> Key {
        Key {
            nanos: span.end_unix_nano.max(span.start_unix_nano),
            starts: false,
            depth: -depth,
            span_id: span.span_id.clone(),
            suffix,
        }
    }
}

/// Each trace's task: the first conversation (or session) id among its
/// spans in time order.
fn tasks_by_trace(spans: &[Span]) -> HashMap<&str, String> {
    let mut ordered: Vec<&Span> = spans.iter().collect();
    ordered.sort_by_key(|span| span.start_unix_nano);
    let mut tasks = HashMap::new();
    for span in ordered {
        if let Some(task) = span.text(&["gen_ai.conversation.id", "session.id"]) {
            tasks
                .entry(span.trace_id.as_str())
                .or_insert_with(|| task.to_owned());
        }
    }
    tasks
}

/// The nearest agent span above `span`, through any spans between, and
/// how deep `span` is (its ancestors in the log; a cycle of parents ends
/// the walk).
fn enclosing_agent<'s>(
    span: &Span,
    by_id: &HashMap<(&str, &str), &'s Span>,
) -> (Option<&'s Span>, i64) {
    let mut seen = HashSet::new();
    let mut agent = None;
    let mut depth = 0;
    let mut parent = span.parent_span_id.as_deref();
    while let Some(id) = parent.filter(|id| seen.insert(*id)) {
        let Some(above) = by_id.get(&(span.trace_id.as_str(), id)) else {
            break;
        };
        depth += 1;
        if agent.is_none() && above.role() == Role::Agent {
            agent = Some(*above);
        }
        parent = above.parent_span_id.as_deref();
    }
    (agent, depth)
}

/// The text of a GenAI messages attribute (`[{"role", "parts": [{"type":
/// "text", "content"}]}]`, as JSON text or structured), or the value as
/// text.
fn message_text(value: &Value) -> String {
    let parsed;
    let value = match value {
        Value::String(text) if text.trim_start().starts_with('[') => {
            match serde_json::from_str::<Value>(text) {
                Ok(messages) => {
                    parsed = messages;
                    &parsed
                }
                Err(_) => return text.clone(),
            }
        }
        other => other,
    };
    let Value::Array(messages) = value else {
        return text_of(value);
    };
    let texts: Vec<String> = messages
        .iter()
        .flat_map(|message| {
            let parts = message.get("parts").and_then(Value::as_array);
            match parts {
                Some(parts) => parts
                    .iter()
                    .filter_map(|part| {
                        part.get("content")
                            .or_else(|| part.get("text"))
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                    })
                    .collect(),
                None => vec![text_of(message.get("content").unwrap_or(message))],
            }
        })
        .collect();
    texts.join("\n")
}

fn agent_events(
    span: &Span,
    outer: Option<&Span>,
    depth: i64,
    task: &str,
    timed: &mut Vec<(Key, Value)>,
) {
    let name = span.agent_name();
    let id = format!("s{}", span.span_id);
    let handoff_from = outer
        .map(Span::agent_name)
        .filter(|outer_name| *outer_name != name);
    if let Some(from) = &handoff_from {
        let content = span
            .attr("gen_ai.input.messages")
            .or_else(|| span.attr("input.value"))
            .map(message_text);
        let mut event =
            json!({"type": "handoff", "task": task, "id": id, "from": from, "to": name});
        with(&mut event, "ts", Span::ts(span.start_unix_nano));
        with(&mut event, "content", content);
        timed.push((Key::start(span, depth), event));
    }
    if let Some((error, error_type)) = span.error() {
        let mut event = json!({"type": "failure", "task": task, "id": format!("{id}.failure"), "agent": name, "error": error});
        with(&mut event, "ts", Span::ts(span.end_unix_nano));
        with(&mut event, "error_type", error_type);
        timed.push((Key::end(span, depth, 0), event));
    }
    if let Some(to) = handoff_from {
        let content = span
            .attr("gen_ai.output.messages")
            .or_else(|| span.attr("output.value"))
            .map(message_text);
        let mut event = json!({"type": "handoff", "task": task, "id": format!("{id}.back"), "from": name, "to": to});
        with(&mut event, "ts", Span::ts(span.end_unix_nano));
        with(&mut event, "content", content);
        timed.push((Key::end(span, depth, 1), event));
    }
}

/// A handoff span's `handoff`: from `gen_ai.handoff.from_agent` (else the
/// span's own agent name, else the enclosing agent's) to
/// `gen_ai.handoff.to_agent`, else to the first agent span of the trace
/// that starts after it and is not that agent (an instrumentation that
/// starts the handoff span before the SDK names its target leaves the
/// target out); `None` without a target.
fn handoff(span: &Span, outer: Option<&Span>, task: &str, spans: &[Span]) -> Option<Value> {
    let from = span
        .text(&["gen_ai.handoff.from_agent", "gen_ai.agent.name"])
        .map(str::to_owned)
        .or_else(|| outer.map(Span::agent_name))
        .unwrap_or_else(|| DEFAULT_AGENT.to_owned());
    let to = match span
        .text(&["gen_ai.handoff.to_agent"])
        .filter(|to| *to != "unknown")
    {
        Some(to) => to.to_owned(),
        None => spans
            .iter()
            .filter(|next| {
                next.trace_id == span.trace_id
                    && next.role() == Role::Agent
                    && next.start_unix_nano >= span.start_unix_nano
                    && next.agent_name() != from
            })
            .min_by_key(|next| next.start_unix_nano)?
            .agent_name(),
    };
    let mut event = json!({
        "type": "handoff", "task": task, "id": format!("s{}", span.span_id),
        "from": from, "to": to,
    });
    with(&mut event, "ts", Span::ts(span.start_unix_nano));
    Some(event)
}

fn tool_call(span: &Span, agent: &str, task: &str) -> Value {
    let tool = span
        .text(&["gen_ai.tool.name", "tool.name"])
        .map(str::to_owned)
        .unwrap_or_else(|| {
            let name = span.name.trim();
            name.strip_prefix("execute_tool ")
                .unwrap_or(name)
                .to_owned()
        });
    let args = match span
        .attr("gen_ai.tool.call.arguments")
        .or_else(|| span.attr("input.value"))
    {
        Some(Value::String(text)) => {
            serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.clone()))
        }
        Some(other) => other.clone(),
        None => Value::Null,
    };
    let mut event = json!({
        "type": "tool_call", "task": task, "id": format!("s{}", span.span_id),
        "agent": agent, "tool": tool, "args": args,
    });
    with(&mut event, "ts", Span::ts(span.start_unix_nano));
    match span.error() {
        Some((error, error_type)) => {
            with(&mut event, "error", Some(error));
            with(&mut event, "error_type", error_type);
        }
        None => with(
            &mut event,
            "result",
            span.attr("gen_ai.tool.call.result")
                .or_else(|| span.attr("output.value"))
                .cloned(),
        ),
    }
    with(
        &mut event,
        "call_id",
        span.text(&["gen_ai.tool.call.id", "tool_call.id"]),
    );
    event
}

/// Sets `key` on the event when there is a value.
fn with(event: &mut Value, key: &str, value: Option<impl Into<Value>>) {
    if let (Some(value), Some(fields)) = (value, event.as_object_mut()) {
        fields.insert(key.to_owned(), value.into());
    }
}

pub(crate) fn import(name: &str, text: &str) -> Result<Imported, ImportError> {
    let (spans, lines_without) = spans_from_json(name, text)?;
    let mut imported = events_from_spans(&spans);
    for _ in 0..lines_without {
        imported.drop_one(
            "objects without resourceSpans".to_owned(),
            "not an OTLP traces export",
        );
    }
    Ok(imported)
}

/// The spans of an OTLP/JSON export, or of JSON Lines of exports; how many
/// objects had no `resourceSpans`.
fn spans_from_json(name: &str, text: &str) -> Result<(Vec<Span>, usize), ImportError> {
    let not_otlp =
        "is not an OTLP/JSON export (an object with `resourceSpans`) nor JSON Lines of them";
    let exports = match read_json(name, FORMAT, text, not_otlp)? {
        JsonLog::Objects(exports) => exports,
        JsonLog::Array(_) => return Err(ImportError::shape(name, not_otlp)),
    };
    let mut spans = Vec::new();
    let mut without = 0;
    for export in &exports {
        match spans_from_export(export) {
            Some(found) => spans.extend(found),
            None => without += 1,
        }
    }
    if without == exports.len() {
        return Err(ImportError::shape(
            name,
            "has no `resourceSpans` (is it an OTLP/JSON traces export?)",
        ));
    }
    Ok((spans, without))
}

/// The spans of one OTLP/JSON export (an `ExportTraceServiceRequest` as
/// JSON: `{"resourceSpans": [...]}`), each with its resource's attributes
/// under its own; `None` when `export` has no `resourceSpans` list. What a
/// receiver of OTLP/HTTP JSON hands [`events_from_spans`]. A span that is no
/// object, or has no `spanId`, comes back with an empty id (the mapping
/// drops it and counts it).
pub fn spans_from_export(export: &Value) -> Option<Vec<Span>> {
    let resource_spans = export.get("resourceSpans").and_then(Value::as_array)?;
    let mut spans = Vec::new();
    for resource_span in resource_spans {
        let resource = resource_span
            .get("resource")
            .and_then(|resource| resource.get("attributes"))
            .map(attributes)
            .unwrap_or_default();
        let scopes = resource_span
            .get("scopeSpans")
            .or_else(|| resource_span.get("instrumentationLibrarySpans"))
            .and_then(Value::as_array);
        for scope in scopes.into_iter().flatten() {
            let list = scope.get("spans").and_then(Value::as_array);
            spans.extend(
                list.into_iter()
                    .flatten()
                    .map(|span| span_of(span, &resource)),
            );
        }
    }
    Some(spans)
}

fn span_of(span: &Value, resource: &Map<String, Value>) -> Span {
    let text = |key: &str| {
        span.get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let mut all = resource.clone();
    all.extend(span.get("attributes").map(attributes).unwrap_or_default());
    let status = span.get("status");
    let status_code = match status.and_then(|status| status.get("code")) {
        Some(Value::Number(code)) => code.as_i64().unwrap_or(0),
        Some(Value::String(code)) if code == "STATUS_CODE_ERROR" => STATUS_ERROR,
        Some(Value::String(code)) if code == "STATUS_CODE_OK" => 1,
        _ => 0,
    };
    let events = span
        .get("events")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|event| SpanEvent {
            name: event
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            attributes: event.get("attributes").map(attributes).unwrap_or_default(),
        })
        .collect();
    Span {
        trace_id: text("traceId"),
        span_id: text("spanId"),
        parent_span_id: Some(text("parentSpanId")).filter(|id| !id.is_empty()),
        name: text("name"),
        start_unix_nano: nanos(span.get("startTimeUnixNano")),
        end_unix_nano: nanos(span.get("endTimeUnixNano")),
        attributes: all,
        status_code,
        status_message: status
            .and_then(|status| status.get("message"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        events,
    }
}

/// A time in nanoseconds: OTLP/JSON writes 64-bit integers as strings.
fn nanos(value: Option<&Value>) -> u64 {
    match value {
        Some(Value::String(text)) => text.trim().parse().unwrap_or(0),
        Some(Value::Number(number)) => number.as_u64().unwrap_or(0),
        _ => 0,
    }
}

/// A list of `{"key", "value": AnyValue}` as a map of JSON values.
fn attributes(list: &Value) -> Map<String, Value> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|pair| {
            let key = pair.get("key")?.as_str()?;
            Some((key.to_owned(), any_value(pair.get("value")?)))
        })
        .collect()
}

/// An OTLP `AnyValue` as JSON.
fn any_value(value: &Value) -> Value {
    if let Some(text) = value.get("stringValue") {
        return text.clone();
    }
    if let Some(int) = value.get("intValue") {
        return match int {
            Value::String(text) => text
                .trim()
                .parse::<i64>()
                .map_or_else(|_| int.clone(), Value::from),
            other => other.clone(),
        };
    }
    if let Some(found) = value.get("boolValue").or_else(|| value.get("doubleValue")) {
        return found.clone();
    }
    if let Some(array) = value.get("arrayValue") {
        let values = array.get("values").and_then(Value::as_array);
        return Value::Array(values.into_iter().flatten().map(any_value).collect());
    }
    if let Some(list) = value.get("kvlistValue") {
        return Value::Object(list.get("values").map(attributes).unwrap_or_default());
    }
    value.get("bytesValue").cloned().unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use loopguard_core_types::EventKind;

    use super::*;

    fn span(id: &str, parent: Option<&str>, start: u64, end: u64, attrs: Value) -> Span {
        Span {
            trace_id: "t1".to_owned(),
            span_id: id.to_owned(),
            parent_span_id: parent.map(str::to_owned),
            name: format!("span {id}"),
            start_unix_nano: start,
            end_unix_nano: end,
            attributes: attrs.as_object().cloned().unwrap_or_default(),
            ..Span::default()
        }
    }

    #[test]
    fn attribute_values_become_json() {
        let list = json!([
            {"key": "s", "value": {"stringValue": "x"}},
            {"key": "i", "value": {"intValue": "42"}},
            {"key": "b", "value": {"boolValue": true}},
            {"key": "d", "value": {"doubleValue": 0.5}},
            {"key": "a", "value": {"arrayValue": {"values": [{"stringValue": "p"}, {"intValue": 7}]}}},
            {"key": "k", "value": {"kvlistValue": {"values": [{"key": "n", "value": {"stringValue": "v"}}]}}},
            {"key": "e", "value": {}},
        ]);
        assert_eq!(
            Value::Object(attributes(&list)),
            json!({"s": "x", "i": 42, "b": true, "d": 0.5, "a": ["p", 7], "k": {"n": "v"}, "e": null})
        );
    }

    #[test]
    fn a_nested_agent_is_a_handoff_each_way_and_its_tool_its_call() {
        let spans = [
            // Given out of order: the tool first, the root last.
            span(
                "c",
                Some("b"),
                30,
                40,
                json!({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search", "gen_ai.tool.call.arguments": "{\"q\": \"x\"}", "gen_ai.tool.call.result": "found"}),
            ),
            span(
                "b",
                Some("a"),
                20,
                50,
                json!({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "Worker", "gen_ai.input.messages": "[{\"role\": \"user\", \"parts\": [{\"type\": \"text\", \"content\": \"find x\"}]}]"}),
            ),
            span(
                "m",
                Some("b"),
                25,
                29,
                json!({"gen_ai.operation.name": "chat"}),
            ),
            span(
                "a",
                None,
                10,
                60,
                json!({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "Triage", "gen_ai.conversation.id": "conv-1"}),
            ),
        ];
        let imported = events_from_spans(&spans);
        let ids: Vec<&str> = imported
            .events
            .iter()
            .filter_map(|e| e.id.as_deref())
            .collect();
        assert_eq!(ids, ["sb", "sc", "sb.back"]);
        assert!(imported.events.iter().all(|e| e.task == "conv-1"));
        let EventKind::Handoff {
            from, to, content, ..
        } = &imported.events[0].kind
        else {
            panic!("{:?}", imported.events[0]);
        };
        assert_eq!((from.as_str(), to.as_str()), ("Triage", "Worker"));
        assert_eq!(content.as_deref(), Some("find x"));
        let EventKind::ToolCall {
            agent,
            args,
            result,
            ..
        } = &imported.events[1].kind
        else {
            panic!("{:?}", imported.events[1]);
        };
        assert_eq!(agent, "Worker");
        assert_eq!(args, &json!({"q": "x"}));
        assert_eq!(result, &Some(json!("found")));
        assert_eq!(imported.dropped.len(), 1, "the model call");
    }

    #[test]
    fn an_error_status_makes_a_failing_call() {
        let mut tool = span(
            "c",
            None,
            1,
            2,
            json!({"openinference.span.kind": "TOOL", "tool.name": "fetch"}),
        );
        tool.status_code = STATUS_ERROR;
        tool.events.push(SpanEvent {
            name: "exception".to_owned(),
            attributes: json!({"exception.message": "timed out", "exception.type": "TimeoutError"})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        });
        let imported = events_from_spans(&[tool]);
        let EventKind::ToolCall {
            agent,
            error,
            error_type,
            ..
        } = &imported.events[0].kind
        else {
            panic!("{:?}", imported.events);
        };
        assert_eq!(agent, "agent", "no agent span above it");
        assert_eq!(error.as_deref(), Some("timed out"));
        assert_eq!(error_type.as_deref(), Some("TimeoutError"));
        assert_eq!(
            imported.events[0].task, "t1",
            "no conversation id: the trace id"
        );
    }

    #[test]
    fn a_handoff_span_between_sibling_agents_is_a_handoff() {
        // The OpenAI Agents SDK's OpenTelemetry instrumentation: agents are
        // siblings under the workflow, the handoff a span of the first.
        let spans = [
            span(
                "w",
                None,
                1,
                100,
                json!({"traceloop.span.kind": "workflow"}),
            ),
            span(
                "a",
                Some("w"),
                2,
                20,
                json!({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "Triage"}),
            ),
            span(
                "h",
                Some("a"),
                10,
                11,
                json!({"gen_ai.operation.name": "handoff", "gen_ai.handoff.from_agent": "Triage", "gen_ai.handoff.to_agent": "Billing", "gen_ai.agent.name": "Triage"}),
            ),
            span(
                "b",
                Some("w"),
                21,
                90,
                json!({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "Billing", "gen_ai.agent.handoff_parent": "Triage"}),
            ),
            // Its target left out (the instrumentation starts the span
            // before the SDK names it): the next agent to start.
            span(
                "y",
                Some("b"),
                30,
                31,
                json!({"gen_ai.operation.name": "handoff", "gen_ai.handoff.from_agent": "Billing", "gen_ai.agent.name": "Billing"}),
            ),
            span(
                "c",
                Some("w"),
                40,
                50,
                json!({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "Refunds"}),
            ),
            // No target and no agent after it.
            span(
                "x",
                Some("c"),
                45,
                46,
                json!({"gen_ai.operation.name": "handoff", "gen_ai.agent.name": "Refunds"}),
            ),
        ];
        let imported = events_from_spans(&spans);
        let handoffs: Vec<(String, String)> = imported
            .events
            .iter()
            .filter_map(|event| match &event.kind {
                EventKind::Handoff { from, to, .. } => Some((from.to_string(), to.to_string())),
                _ => None,
            })
            .collect();
        assert_eq!(
            handoffs,
            [
                ("Triage".to_owned(), "Billing".to_owned()),
                ("Billing".to_owned(), "Refunds".to_owned())
            ]
        );
        assert_eq!(imported.events[0].id.as_deref(), Some("sh"));
        assert!(
            imported
                .dropped
                .iter()
                .any(|d| d.what == "handoff spans with no agent to hand to"),
            "{:?}",
            imported.dropped
        );
    }

    fn usage_of(imported: &Imported) -> Vec<(Option<&str>, Option<Usage>)> {
        imported
            .events
            .iter()
            .map(|e| (e.id.as_deref(), e.usage().ok().flatten()))
            .collect()
    }

    fn tokens(input: u64, output: u64, model: Option<&str>) -> Option<Usage> {
        Some(Usage {
            input_tokens: Some(input),
            output_tokens: Some(output),
            cost_usd: None,
            model: model.map(str::to_owned),
        })
    }

    #[test]
    fn a_model_call_inside_another_is_counted_once() {
        // A framework's LLM span around the client library's: both give
        // counts, the outer one their sum.
        let spans = [
            span(
                "a",
                None,
                1,
                100,
                json!({"openinference.span.kind": "AGENT", "agent.name": "coder", "llm.token_count.prompt": 999}),
            ),
            span(
                "l",
                Some("a"),
                2,
                9,
                json!({"openinference.span.kind": "LLM", "llm.token_count.prompt": 300, "llm.token_count.completion": 30, "llm.model_name": "outer"}),
            ),
            span(
                "o",
                Some("l"),
                3,
                8,
                json!({"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": "300", "gen_ai.usage.output_tokens": "30", "gen_ai.request.model": "gpt-4o", "gen_ai.response.model": "gpt-4o-2024-08-06"}),
            ),
            span(
                "t",
                Some("a"),
                10,
                11,
                json!({"openinference.span.kind": "TOOL", "tool.name": "run"}),
            ),
        ];
        let imported = events_from_spans(&spans);
        assert_eq!(
            usage_of(&imported),
            [(Some("st"), tokens(300, 30, Some("gpt-4o-2024-08-06")))],
            "the innermost call's counts and response model; an agent span's are never read"
        );
    }

    #[test]
    fn usage_on_a_tool_span_is_its_calls_and_an_agent_without_events_falls_to_the_task() {
        let spans = [
            span(
                "t",
                None,
                10,
                11,
                json!({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "ask_llm", "gen_ai.usage.input_tokens": 50, "gen_ai.usage.output_tokens": 5}),
            ),
            // A call of an agent that has no event: the task's next event.
            span(
                "b",
                None,
                1,
                5,
                json!({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "Planner"}),
            ),
            span(
                "m",
                Some("b"),
                2,
                3,
                json!({"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 7, "gen_ai.usage.output_tokens": 1}),
            ),
            // A bad count is left out.
            span(
                "n",
                Some("b"),
                3,
                4,
                json!({"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": -4, "gen_ai.usage.output_tokens": 2}),
            ),
        ];
        let imported = events_from_spans(&spans);
        assert_eq!(
            usage_of(&imported),
            [(
                Some("st"),
                Some(Usage {
                    input_tokens: Some(57),
                    output_tokens: Some(8),
                    ..Usage::default()
                })
            )]
        );
    }

    #[test]
    fn nothing_in_an_export_panics() {
        for text in [
            "{\"resourceSpans\": 3}",
            "{\"resourceSpans\": [{\"scopeSpans\": [{\"spans\": [1, {}, {\"spanId\": \"a\", \"parentSpanId\": \"a\", \"attributes\": 5}]}]}]}",
            "{\"resourceSpans\": [{\"scopeSpans\": [{\"spans\": [{\"spanId\": \"a\", \"parentSpanId\": \"b\", \"startTimeUnixNano\": \"x\", \"attributes\": [{\"key\": \"openinference.span.kind\", \"value\": {\"stringValue\": \"AGENT\"}}]}, {\"spanId\": \"b\", \"parentSpanId\": \"a\", \"attributes\": [{\"key\": \"openinference.span.kind\", \"value\": {\"stringValue\": \"TOOL\"}}]}]}]}]}",
        ] {
            let _ = import("x", text);
        }
        assert!(matches!(import("x", ""), Err(ImportError::Shape { .. })));
        assert!(matches!(
            import("x", "{\"a\": 1}"),
            Err(ImportError::Shape { .. })
        ));
        assert!(matches!(import("x", "nope"), Err(ImportError::Json { .. })));
    }
}
