//! OpenHands event streams, of both generations:
//!
//! - the software-agent-sdk's events, each an object with a `kind`:
//!   `ActionEvent` (`tool_name`, `tool_call_id`, `tool_call {id, name,
//!   arguments}`, `action`), `ObservationEvent` (`tool_call_id`,
//!   `action_id`, `observation {content, is_error}`), `AgentErrorEvent`
//!   (`tool_name`, `tool_call_id`, `error`), `UserRejectObservation`,
//!   `MessageEvent` (`source`, `llm_message`), and the runtime's own
//!   (`SystemPromptEvent`, `Condensation`, `ConversationStateUpdateEvent`,
//!   ...);
//! - the older (v0) trajectories: actions (`action` `run`, `read`, `edit`,
//!   `browse`, `delegate`, `finish`, `message`, ... with `args`) and
//!   observations (`observation`, `content`, `extras`, `cause` the action's
//!   id), both with `source` and `tool_call_metadata {tool_call_id}`.
//!
//! A log is a JSON array of events, an object with an `events`, `history`,
//! `trajectory` or `items` list, or JSON Lines: the first non-blank
//! character decides (`[` an array; `{` one object or several, one per
//! line, each an event or a run with its list, as in an evaluation's
//! `output.jsonl`).
//!
//! An action and its observation (paired by `tool_call_id`, `action_id` or
//! `cause`) become one `tool_call` at the action's place; an error in place
//! of the observation makes it a failing call (ruling 14), an error of no
//! action a `failure`. A delegation is a `handoff` to the delegate and, when
//! the delegate finishes, one back; a `finish` of the agent itself is
//! `completed`. Messages, thoughts, the system prompt, condensations and
//! state updates are dropped and counted. Every event's `id` is `e` and the
//! log's id of the event (its 1-based index when it has none).
//!
//! An event's `llm_metrics` (running totals: `accumulated_cost`,
//! `accumulated_token_usage {prompt_tokens, completion_tokens, model}`)
//! become the `usage` of the trace event it maps to: the difference from
//! the totals before (lower totals start a new accumulation). What an
//! event mapped to nothing spent goes on the next trace event, what is
//! spent after the last one on the last, so a run's usage sums to its
//! final totals.

use std::collections::HashMap;

use loopguard_core_types::{Timestamp, Usage};
use serde_json::{Map, Value, json};

use crate::usage::{self, Accumulation};
use crate::{ImportError, Imported, JsonLog, read_json, text_of};

const FORMAT: &str = "OpenHands";
/// The agent's name: the logs name none but a delegate.
const DEFAULT_AGENT: &str = "agent";
/// The keys of a run's list of events.
const LIST_KEYS: [&str; 4] = ["events", "history", "trajectory", "items"];
/// The keys of a run's task id, in order of preference.
const TASK_KEYS: [&str; 4] = ["task_id", "instance_id", "conversation_id", "id"];
/// v0 actions that call a tool.
const V0_TOOLS: [&str; 11] = [
    "run",
    "run_ipython",
    "read",
    "write",
    "edit",
    "browse",
    "browse_interactive",
    "mcp",
    "search",
    "push",
    "send_pr",
];
/// v0 `args` that are the model's narration or the runtime's bookkeeping,
/// not the call: two identical calls differ in them.
const V0_NOISE_ARGS: [&str; 6] = [
    "thought",
    "security_risk",
    "confirmation_state",
    "is_confirmed",
    "impl_source",
    "hidden",
];

const WHY_USER: &str = "the task as the user gave it, not an exchange between agents";
const WHY_AGENT_MESSAGE: &str = "the agent talking to the user, not work passed between agents";
const WHY_SYSTEM: &str = "the agent's instructions, not work";
const WHY_CONDENSATION: &str = "the history condensed for the model, not work";
const WHY_STATE: &str = "the runtime's bookkeeping (agent state, pauses, tokens, model logs)";
const WHY_THINK: &str = "the agent's own thoughts, not work";
const WHY_RECALL: &str = "context the runtime retrieved for the agent, not the agent's work";

/// One run: its task and its events in the log's order.
struct Run {
    task: String,
    events: Vec<Value>,
}

pub(crate) fn import(name: &str, text: &str) -> Result<Imported, ImportError> {
    let mut imported = Imported::default();
    for run in runs(name, text)? {
        let mut mapper = Mapper::new(&run.task);
        let mut spent = Accumulation::default();
        for (index, event) in run.events.iter().enumerate() {
            if let Some(total) = llm_metrics(event) {
                spent.observe(total);
            }
            let before = mapper.out.len();
            mapper.event(index, event, &mut imported);
            // What was spent up to this event goes on its first event.
            if let Some(first) = mapper.out.get_mut(before)
                && let Some(usage) = spent.take()
            {
                usage::add_to(first, &usage);
            }
        }
        // Spent after the last event (a closing message): the last event's.
        if let Some(last) = mapper.out.last_mut()
            && let Some(usage) = spent.take()
        {
            usage::add_to(last, &usage);
        }
        for value in mapper.out {
            imported.push_event(&value);
        }
    }
    Ok(imported)
}

/// The running totals an event's `llm_metrics` give (`accumulated_cost`,
/// `accumulated_token_usage {prompt_tokens, completion_tokens, model}`,
/// else the metrics' `model_name`), when it gives a count or a cost.
fn llm_metrics(event: &Value) -> Option<Usage> {
    let metrics = event.get("llm_metrics")?.as_object()?;
    let tokens = metrics
        .get("accumulated_token_usage")
        .and_then(Value::as_object);
    let count = |key: &str| tokens.and_then(|t| t.get(key)).and_then(usage::tokens);
    let model = tokens
        .and_then(|t| str_of(t, "model"))
        .or_else(|| str_of(metrics, "model_name"))
        .map(str::trim)
        .filter(|model| !model.is_empty());
    let total = Usage {
        input_tokens: count("prompt_tokens"),
        output_tokens: count("completion_tokens"),
        cost_usd: metrics.get("accumulated_cost").and_then(usage::dollars),
        model: model.map(str::to_owned),
    };
    let spends =
        total.input_tokens.is_some() || total.output_tokens.is_some() || total.cost_usd.is_some();
    spends.then_some(total)
}

/// The log's runs: decided by its first non-blank character.
fn runs(name: &str, text: &str) -> Result<Vec<Run>, ImportError> {
    let values = match read_json(
        name,
        FORMAT,
        text,
        "is neither a JSON array of OpenHands events, an object with their list, \
         nor JSON Lines of them",
    )? {
        JsonLog::Array(events) => {
            return Ok(vec![Run {
                task: name.to_owned(),
                events,
            }]);
        }
        JsonLog::Objects(values) => values,
    };
    let runs_in_log = values.iter().filter(|v| event_list(v).is_some()).count();
    if let [only] = values.as_slice()
        && runs_in_log == 0
        && !is_event(only)
    {
        return Err(ImportError::shape(
            name,
            "has no `events`, `history`, `trajectory` or `items` list and is not an event \
             (is it an OpenHands log?)",
        ));
    }
    let mut loose = Vec::new();
    let mut runs = Vec::new();
    for (n, value) in values.into_iter().enumerate() {
        match event_list(&value) {
            Some(events) => {
                let task = task_of(&value).unwrap_or_else(|| {
                    if runs_in_log > 1 {
                        format!("{name}#{}", n + 1)
                    } else {
                        name.to_owned()
                    }
                });
                runs.push(Run {
                    task,
                    events: events.clone(),
                });
            }
            None => loose.push(value),
        }
    }
    if !loose.is_empty() {
        runs.insert(
            0,
            Run {
                task: name.to_owned(),
                events: loose,
            },
        );
    }
    Ok(runs)
}

fn is_event(value: &Value) -> bool {
    ["kind", "action", "observation"]
        .iter()
        .any(|key| value.get(key).is_some_and(Value::is_string))
}

/// A run's list of events, when `value` is a run rather than an event.
fn event_list(value: &Value) -> Option<&Vec<Value>> {
    if is_event(value) {
        return None;
    }
    LIST_KEYS
        .iter()
        .find_map(|key| value.get(key).and_then(Value::as_array))
}

fn task_of(run: &Value) -> Option<String> {
    TASK_KEYS.iter().find_map(|key| match run.get(key)? {
        Value::String(task) if !task.trim().is_empty() => Some(task.trim().to_owned()),
        Value::Number(task) => Some(task.to_string()),
        _ => None,
    })
}

fn str_of<'v>(fields: &'v Map<String, Value>, key: &str) -> Option<&'v str> {
    fields.get(key).and_then(Value::as_str)
}

/// An id of the log as a string: ids are strings (the SDK) or numbers (v0).
fn id_text(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(id) if !id.trim().is_empty() => Some(id.trim().to_owned()),
        Value::Number(id) => Some(id.to_string()),
        _ => None,
    }
}

/// The event's `timestamp` as RFC 3339; the SDK writes local time without
/// an offset, read as UTC (a constant shift changes no interval).
fn rfc3339(text: &str) -> Option<String> {
    if Timestamp::parse_rfc3339(text).is_ok() {
        return Some(text.to_owned());
    }
    let utc = format!("{text}Z");
    Timestamp::parse_rfc3339(&utc).is_ok().then_some(utc)
}

/// Where an event comes from in the log.
struct Header {
    /// The log's id of the event, if any.
    log_id: Option<String>,
    /// The trace's `id`: `e` and the log's id, or the 1-based index.
    id: String,
    ts: Option<String>,
}

impl Header {
    fn of(index: usize, fields: &Map<String, Value>) -> Header {
        let log_id = id_text(fields.get("id"));
        let id = match &log_id {
            Some(id) => format!("e{id}"),
            None => format!("e{}", index + 1),
        };
        let ts = str_of(fields, "timestamp").and_then(rfc3339);
        Header { log_id, id, ts }
    }

    /// The id of the `n`th of `of` events made of this one.
    fn nth(&self, n: usize, of: usize) -> String {
        if of > 1 {
            format!("{}.{}", self.id, n + 1)
        } else {
            self.id.clone()
        }
    }
}

/// What an action waits for its observation to complete.
enum Pending {
    /// A `tool_call` in the trace at this index.
    Tool(usize),
    /// A delegation to these agents, handed back (`returned`) or not yet.
    Delegation { to: Vec<String>, returned: bool },
    /// An action whose observation only echoes it: dropped as this.
    Echo {
        what: &'static str,
        why: &'static str,
    },
}

struct Call {
    agent: String,
    pending: Pending,
    answered: bool,
}

/// What came back for an action.
struct Answer {
    text: String,
    /// The call failed: its message and type.
    error: Option<(String, Option<String>)>,
    /// Where an error of no action happened (the tool's name).
    location: Option<String>,
}

/// One run mapped to trace events.
struct Mapper<'t> {
    task: &'t str,
    out: Vec<Value>,
    calls: Vec<Call>,
    by_call_id: HashMap<String, usize>,
    by_event_id: HashMap<String, usize>,
    /// The v0 delegations not handed back yet, innermost last: the agent at
    /// work is the innermost delegate.
    delegations: Vec<usize>,
}

impl<'t> Mapper<'t> {
    fn new(task: &'t str) -> Mapper<'t> {
        Mapper {
            task,
            out: Vec::new(),
            calls: Vec::new(),
            by_call_id: HashMap::new(),
            by_event_id: HashMap::new(),
            delegations: Vec::new(),
        }
    }

    /// The agent at work: the innermost delegate, else the agent.
    fn agent(&self) -> String {
        self.delegations
            .last()
            .and_then(|&call| match &self.calls.get(call)?.pending {
                Pending::Delegation { to, .. } => to.first().cloned(),
                _ => None,
            })
            .unwrap_or_else(|| DEFAULT_AGENT.to_owned())
    }

    /// Adds the trace event `event` (its type and own fields) with the
    /// task, `id` and `ts`; returns its index.
    fn emit(&mut self, id: String, ts: Option<&String>, mut event: Value) -> usize {
        if let Some(fields) = event.as_object_mut() {
            fields.insert("task".to_owned(), json!(self.task));
            fields.insert("id".to_owned(), json!(id));
            if let Some(ts) = ts {
                fields.insert("ts".to_owned(), json!(ts));
            }
        }
        self.out.push(event);
        self.out.len() - 1
    }

    /// Remembers an action by its event id and tool call id.
    fn register(&mut self, header: &Header, call_id: Option<&str>, call: Call) {
        let index = self.calls.len();
        self.calls.push(call);
        if let Some(id) = &header.log_id {
            self.by_event_id.insert(id.clone(), index);
        }
        if let Some(call_id) = call_id.filter(|id| !id.is_empty()) {
            self.by_call_id.insert(call_id.to_owned(), index);
        }
    }

    /// The unanswered action an observation answers.
    fn find(&self, fields: &Map<String, Value>) -> Option<usize> {
        let metadata = fields.get("tool_call_metadata").and_then(Value::as_object);
        let by_call = [
            str_of(fields, "tool_call_id"),
            metadata.and_then(|m| str_of(m, "tool_call_id")),
        ]
        .into_iter()
        .flatten()
        .find_map(|id| self.by_call_id.get(id));
        let by_event = || {
            ["action_id", "cause"]
                .iter()
                .filter_map(|key| id_text(fields.get(*key)))
                .find_map(|id| self.by_event_id.get(&id))
        };
        by_call
            .or_else(by_event)
            .copied()
            .filter(|&call| self.calls.get(call).is_some_and(|c| !c.answered))
    }

    fn event(&mut self, index: usize, event: &Value, imported: &mut Imported) {
        let Some(fields) = event.as_object() else {
            imported.drop_one(
                "items that are not JSON objects".to_owned(),
                "not an event of any generation",
            );
            return;
        };
        let header = Header::of(index, fields);
        if let Some(kind) = str_of(fields, "kind") {
            self.sdk_event(kind, &header, fields, imported);
        } else if let Some(action) = str_of(fields, "action") {
            self.v0_action(action, &header, fields, imported);
        } else if let Some(observation) = str_of(fields, "observation") {
            self.v0_observation(observation, &header, fields, imported);
        } else {
            imported.drop_one(
                "events of no known kind".to_owned(),
                "neither a `kind` nor an `action` or `observation` to read them by",
            );
        }
    }

    fn drop_message(fields: &Map<String, Value>, imported: &mut Imported) {
        if str_of(fields, "source") == Some("user") {
            imported.drop_one("messages from the user".to_owned(), WHY_USER);
        } else {
            imported.drop_one("messages from the agent".to_owned(), WHY_AGENT_MESSAGE);
        }
    }

    fn sdk_event(
        &mut self,
        kind: &str,
        header: &Header,
        fields: &Map<String, Value>,
        imported: &mut Imported,
    ) {
        match kind {
            "ActionEvent" => self.sdk_action(header, fields, imported),
            "ObservationEvent" => {
                let observation = fields.get("observation").unwrap_or(&Value::Null);
                let mut text = text_of(observation.get("content").unwrap_or(&Value::Null));
                if text.is_empty() {
                    // Earlier SDK observations kept their text in `output`.
                    text = text_of(observation.get("output").unwrap_or(&Value::Null));
                }
                let failed = observation.get("is_error").and_then(Value::as_bool) == Some(true);
                let error = failed.then(|| (text.clone(), None));
                self.answer(
                    header,
                    fields,
                    Answer {
                        text,
                        error,
                        location: None,
                    },
                    imported,
                );
            }
            "AgentErrorEvent" => {
                let error = str_of(fields, "error").unwrap_or("").to_owned();
                let location = str_of(fields, "tool_name").map(str::to_owned);
                let answer = Answer {
                    text: error.clone(),
                    error: Some((error, None)),
                    location,
                };
                self.answer(header, fields, answer, imported);
            }
            "UserRejectObservation" => {
                let reason = str_of(fields, "rejection_reason").unwrap_or("rejected");
                let answer = Answer {
                    text: reason.to_owned(),
                    error: Some((format!("rejected: {reason}"), Some("rejected".to_owned()))),
                    location: str_of(fields, "tool_name").map(str::to_owned),
                };
                self.answer(header, fields, answer, imported);
            }
            "ConversationErrorEvent" => {
                let error = str_of(fields, "detail").unwrap_or("").to_owned();
                let error_type = str_of(fields, "code").map(str::to_owned);
                let agent = self.agent();
                self.emit(
                    header.id.clone(),
                    header.ts.as_ref(),
                    json!({"type": "failure", "agent": agent, "error": error, "error_type": error_type}),
                );
            }
            "MessageEvent" => Self::drop_message(fields, imported),
            "SystemPromptEvent" => imported.drop_one("system prompts".to_owned(), WHY_SYSTEM),
            "Condensation" | "CondensationRequest" | "CondensationSummaryEvent" => {
                imported.drop_one("condensation events".to_owned(), WHY_CONDENSATION);
            }
            "ConversationStateUpdateEvent"
            | "PauseEvent"
            | "InterruptEvent"
            | "TokenEvent"
            | "LLMCompletionLogEvent"
            | "StreamingDeltaEvent" => {
                imported.drop_one("state updates".to_owned(), WHY_STATE);
            }
            other => imported.drop_one(
                format!("events of kind '{other}'"),
                "a kind this importer does not know",
            ),
        }
    }

    fn sdk_action(
        &mut self,
        header: &Header,
        fields: &Map<String, Value>,
        imported: &mut Imported,
    ) {
        let tool_call = fields.get("tool_call").and_then(Value::as_object);
        let tool = str_of(fields, "tool_name")
            .or_else(|| tool_call.and_then(|call| str_of(call, "name")))
            .unwrap_or("")
            .to_owned();
        let call_id = str_of(fields, "tool_call_id")
            .or_else(|| tool_call.and_then(|call| str_of(call, "id")))
            .map(str::to_owned);
        let action = fields.get("action").and_then(Value::as_object);
        let agent = self.agent();
        let echo = |what, why| Call {
            agent: agent.clone(),
            pending: Pending::Echo { what, why },
            answered: false,
        };
        match tool.as_str() {
            "finish" => {
                self.emit(
                    header.id.clone(),
                    header.ts.as_ref(),
                    json!({"type": "completed"}),
                );
                let call = echo("observations of finish actions", "the finish tool's echo");
                self.register(header, call_id.as_deref(), call);
            }
            "think" => {
                imported.drop_one("thoughts".to_owned(), WHY_THINK);
                self.register(header, call_id.as_deref(), echo("thoughts", WHY_THINK));
            }
            "delegate" | "task" => {
                let targets = delegation_targets(&tool, action);
                if targets.is_empty() {
                    imported.drop_one(
                        "sub-agent spawns".to_owned(),
                        "sub-agents made ready, no work handed over yet",
                    );
                    let call = echo("sub-agent spawns", "sub-agents made ready");
                    self.register(header, call_id.as_deref(), call);
                } else {
                    self.delegate(header, call_id.as_deref(), &agent, targets);
                }
            }
            _ => {
                let args = match action {
                    Some(action) => {
                        let mut args = action.clone();
                        args.remove("kind");
                        Value::Object(args)
                    }
                    None => tool_call
                        .and_then(|call| call.get("arguments"))
                        .map(|arguments| match arguments {
                            Value::String(text) => serde_json::from_str(text)
                                .unwrap_or_else(|_| Value::String(text.clone())),
                            other => other.clone(),
                        })
                        .unwrap_or(Value::Null),
                };
                self.tool_call(header, call_id, agent, tool, args);
            }
        }
    }

    /// A `tool_call` waiting for its result.
    fn tool_call(
        &mut self,
        header: &Header,
        call_id: Option<String>,
        agent: String,
        tool: String,
        args: Value,
    ) {
        let mut event = json!({"type": "tool_call", "agent": agent, "tool": tool, "args": args});
        if let (Some(id), Some(fields)) = (&call_id, event.as_object_mut()) {
            fields.insert("call_id".to_owned(), json!(id));
        }
        let slot = self.emit(header.id.clone(), header.ts.as_ref(), event);
        let call = Call {
            agent,
            pending: Pending::Tool(slot),
            answered: false,
        };
        self.register(header, call_id.as_deref(), call);
    }

    /// Handoffs from `from` to each target, with its task.
    fn delegate(
        &mut self,
        header: &Header,
        call_id: Option<&str>,
        from: &str,
        targets: Vec<(String, String)>,
    ) -> usize {
        let of = targets.len();
        for (n, (to, content)) in targets.iter().enumerate() {
            self.emit(
                header.nth(n, of),
                header.ts.as_ref(),
                json!({"type": "handoff", "from": from, "to": to, "content": content}),
            );
        }
        let call = Call {
            agent: from.to_owned(),
            pending: Pending::Delegation {
                to: targets.into_iter().map(|(to, _)| to).collect(),
                returned: false,
            },
            answered: false,
        };
        self.register(header, call_id, call);
        self.calls.len() - 1
    }

    /// The handoffs back from a delegation's agents to the one who
    /// delegated.
    fn hand_back(&mut self, call: usize, header: &Header, content: &str) {
        let Some(Call {
            agent,
            pending: Pending::Delegation { to, returned },
            ..
        }) = self.calls.get_mut(call)
        else {
            return;
        };
        *returned = true;
        let (parent, children) = (agent.clone(), to.clone());
        self.delegations.retain(|&open| open != call);
        let of = children.len();
        for (n, child) in children.iter().enumerate() {
            self.emit(
                header.nth(n, of),
                header.ts.as_ref(),
                json!({"type": "handoff", "from": child, "to": parent, "content": content}),
            );
        }
    }

    /// An observation (or an error): completes its action, or is a
    /// `failure` when it is an error of no action.
    fn answer(
        &mut self,
        header: &Header,
        fields: &Map<String, Value>,
        answer: Answer,
        imported: &mut Imported,
    ) {
        let Some(call) = self.find(fields) else {
            match answer.error {
                Some((error, error_type)) => {
                    let agent = self.agent();
                    let mut event = json!({"type": "failure", "agent": agent, "error": error});
                    if let Some(fields) = event.as_object_mut() {
                        if let Some(error_type) = error_type {
                            fields.insert("error_type".to_owned(), json!(error_type));
                        }
                        if let Some(location) = answer.location {
                            fields.insert("location".to_owned(), json!(location));
                        }
                    }
                    self.emit(header.id.clone(), header.ts.as_ref(), event);
                }
                None => imported.drop_one(
                    "observations of no action in the log".to_owned(),
                    "nothing to pair them with (their action is missing or already answered)",
                ),
            }
            return;
        };
        let Some(entry) = self.calls.get_mut(call) else {
            return;
        };
        entry.answered = true;
        match entry.pending {
            Pending::Tool(slot) => {
                if let Some(event) = self.out.get_mut(slot).and_then(Value::as_object_mut) {
                    match answer.error {
                        Some((error, error_type)) => {
                            event.insert("error".to_owned(), json!(error));
                            if let Some(error_type) = error_type {
                                event.insert("error_type".to_owned(), json!(error_type));
                            }
                        }
                        None => {
                            event.insert("result".to_owned(), json!(answer.text));
                        }
                    }
                }
            }
            Pending::Delegation {
                returned: false, ..
            } => {
                self.hand_back(call, header, &answer.text);
            }
            Pending::Delegation { returned: true, .. } => imported.drop_one(
                "delegation results".to_owned(),
                "the delegate's finish already handed the work back",
            ),
            Pending::Echo { what, why } => imported.drop_one(what.to_owned(), why),
        }
    }

    fn v0_action(
        &mut self,
        action: &str,
        header: &Header,
        fields: &Map<String, Value>,
        imported: &mut Imported,
    ) {
        let args = fields.get("args").and_then(Value::as_object);
        let call_id = fields
            .get("tool_call_metadata")
            .and_then(Value::as_object)
            .and_then(|metadata| str_of(metadata, "tool_call_id"))
            .map(str::to_owned);
        let from_user = str_of(fields, "source") == Some("user");
        match action {
            tool if V0_TOOLS.contains(&tool) => {
                if from_user {
                    imported.drop_one(
                        "actions of the user".to_owned(),
                        "the user's own commands, not the agent's work",
                    );
                    return;
                }
                let mut args = args.cloned().unwrap_or_default();
                for key in V0_NOISE_ARGS {
                    args.remove(key);
                }
                let tool = match (tool, args.get("name").and_then(Value::as_str)) {
                    ("mcp", Some(name)) => name.to_owned(),
                    _ => tool.to_owned(),
                };
                let agent = self.agent();
                self.tool_call(header, call_id, agent, tool, Value::Object(args));
            }
            "delegate" => {
                let to = args
                    .and_then(|args| str_of(args, "agent"))
                    .unwrap_or("delegate")
                    .to_owned();
                let inputs = args.and_then(|args| args.get("inputs"));
                let content = match inputs.and_then(|inputs| inputs.get("task")) {
                    Some(task) => text_of(task),
                    None => inputs.map(text_of).unwrap_or_default(),
                };
                let from = self.agent();
                let call = self.delegate(header, call_id.as_deref(), &from, vec![(to, content)]);
                self.delegations.push(call);
            }
            "finish" => self.v0_finish(header, args, call_id.as_deref(), imported),
            "message" => Self::drop_message(fields, imported),
            "system" => imported.drop_one("system prompts".to_owned(), WHY_SYSTEM),
            "think" => imported.drop_one("thoughts".to_owned(), WHY_THINK),
            "recall" => imported.drop_one("recalls".to_owned(), WHY_RECALL),
            "condensation" | "condensation_request" => {
                imported.drop_one("condensation events".to_owned(), WHY_CONDENSATION);
            }
            "change_agent_state" | "null" | "pause" | "resume" | "stop" | "start" => {
                imported.drop_one("state updates".to_owned(), WHY_STATE);
            }
            "reject" => imported.drop_one(
                "reject actions".to_owned(),
                "the agent gives the task up: not a success, and no error to compare",
            ),
            other => imported.drop_one(
                format!("actions '{other}'"),
                "an action this importer does not know",
            ),
        }
    }

    /// A delegate's finish hands the work back; the agent's own is
    /// `completed`, unless it says the task was not completed.
    fn v0_finish(
        &mut self,
        header: &Header,
        args: Option<&Map<String, Value>>,
        call_id: Option<&str>,
        imported: &mut Imported,
    ) {
        let echo = Call {
            agent: self.agent(),
            pending: Pending::Echo {
                what: "observations of finish actions",
                why: "the finish action's echo",
            },
            answered: false,
        };
        if let Some(&open) = self.delegations.last() {
            let content = finish_text(args);
            self.hand_back(open, header, &content);
        } else if args
            .and_then(|args| str_of(args, "task_completed"))
            .is_some_and(|done| done.eq_ignore_ascii_case("false"))
        {
            imported.drop_one(
                "finish actions of an unfinished task".to_owned(),
                "the agent stops but says the task is not done: not a success",
            );
        } else {
            self.emit(
                header.id.clone(),
                header.ts.as_ref(),
                json!({"type": "completed"}),
            );
        }
        self.register(header, call_id, echo);
    }

    fn v0_observation(
        &mut self,
        observation: &str,
        header: &Header,
        fields: &Map<String, Value>,
        imported: &mut Imported,
    ) {
        let text = text_of(fields.get("content").unwrap_or(&Value::Null));
        match observation {
            "agent_state_changed" | "null" | "success" => {
                imported.drop_one("state updates".to_owned(), WHY_STATE);
            }
            "recall" | "microagent" | "workspace_context" => {
                imported.drop_one("recalls".to_owned(), WHY_RECALL);
            }
            "condense" => imported.drop_one("condensation events".to_owned(), WHY_CONDENSATION),
            "think" => imported.drop_one("thoughts".to_owned(), WHY_THINK),
            "chat" | "message" => Self::drop_message(fields, imported),
            "error" => {
                let answer = Answer {
                    text: text.clone(),
                    error: Some((text, None)),
                    location: None,
                };
                self.answer(header, fields, answer, imported);
            }
            "user_rejected" => {
                let answer = Answer {
                    error: Some((format!("rejected: {text}"), Some("rejected".to_owned()))),
                    text,
                    location: None,
                };
                self.answer(header, fields, answer, imported);
            }
            _ => {
                let answer = Answer {
                    text,
                    error: None,
                    location: None,
                };
                self.answer(header, fields, answer, imported);
            }
        }
    }
}

/// What a delegate hands back when it finishes: its final thought, else
/// its outputs' `content`, else the outputs as JSON.
fn finish_text(args: Option<&Map<String, Value>>) -> String {
    let Some(args) = args else {
        return String::new();
    };
    let thought = str_of(args, "final_thought").unwrap_or("").trim();
    if !thought.is_empty() {
        return thought.to_owned();
    }
    match args.get("outputs") {
        Some(Value::Object(outputs)) if outputs.is_empty() => String::new(),
        Some(outputs) => match outputs.get("content") {
            Some(content) => text_of(content),
            None => text_of(outputs),
        },
        None => str_of(args, "message").unwrap_or("").to_owned(),
    }
}

/// The SDK's delegations: the `delegate` tool's `tasks` (sub-agent id to
/// task), or the `task` tool's `prompt` to its `subagent_type`. None for a
/// `spawn`.
fn delegation_targets(tool: &str, action: Option<&Map<String, Value>>) -> Vec<(String, String)> {
    let Some(action) = action else {
        return Vec::new();
    };
    if tool == "task" {
        return match str_of(action, "prompt") {
            Some(prompt) => {
                let to = str_of(action, "subagent_type").unwrap_or("general-purpose");
                vec![(to.to_owned(), prompt.to_owned())]
            }
            None => Vec::new(),
        };
    }
    match action.get("tasks").and_then(Value::as_object) {
        Some(tasks) if str_of(action, "command") != Some("spawn") => tasks
            .iter()
            .map(|(to, task)| (to.clone(), text_of(task)))
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use loopguard_core_types::EventKind;

    use super::*;

    fn kinds(imported: &Imported) -> Vec<&'static str> {
        imported
            .events
            .iter()
            .map(|event| match &event.kind {
                EventKind::Handoff { .. } => "handoff",
                EventKind::ToolCall { .. } => "tool_call",
                EventKind::Failure { .. } => "failure",
                EventKind::Completed => "completed",
                _ => "other",
            })
            .collect()
    }

    const SDK_PAIR: &str = r#"{"kind": "ActionEvent", "id": "a1", "source": "agent", "tool_name": "terminal", "tool_call_id": "c1", "tool_call": {"id": "c1", "name": "terminal", "arguments": "{\"command\": \"ls\"}", "origin": "completion"}, "action": {"kind": "TerminalAction", "command": "ls"}, "thought": [], "llm_response_id": "r1"}
{"kind": "ObservationEvent", "id": "o1", "source": "environment", "tool_name": "terminal", "tool_call_id": "c1", "action_id": "a1", "observation": {"kind": "TerminalObservation", "content": [{"type": "text", "text": "README.md"}], "is_error": false}}"#;

    #[test]
    fn the_first_character_decides_the_shape() {
        let lines = import("log", SDK_PAIR).expect("JSON Lines");
        assert_eq!(kinds(&lines), ["tool_call"]);
        let array = format!("[{}]", SDK_PAIR.replace('\n', ","));
        assert_eq!(
            kinds(&import("log", &array).expect("an array")),
            ["tool_call"]
        );
        let object = format!(
            r#"{{"conversation_id": "c-9", "events": [{}]}}"#,
            SDK_PAIR.replace('\n', ",")
        );
        let imported = import("log", &object).expect("an object");
        assert_eq!(imported.events[0].task, "c-9");
        // An evaluation's output.jsonl: one run a line, each its own task.
        let runs = format!(
            "{{\"instance_id\": \"a__b-1\", \"history\": [{0}]}}\n{{\"instance_id\": \"a__b-2\", \"history\": [{0}]}}",
            SDK_PAIR.replace('\n', ",")
        );
        let imported = import("output", &runs).expect("runs");
        let tasks: Vec<&str> = imported.events.iter().map(|e| e.task.as_str()).collect();
        assert_eq!(tasks, ["a__b-1", "a__b-2"]);
    }

    #[test]
    fn an_action_and_its_observation_are_one_call() {
        let imported = import("log", SDK_PAIR).expect("a log");
        let event = &imported.events[0];
        assert_eq!(event.id.as_deref(), Some("ea1"));
        let EventKind::ToolCall {
            agent,
            tool,
            args,
            result,
            call_id,
            ..
        } = &event.kind
        else {
            panic!("{event:?}");
        };
        assert_eq!((agent.as_str(), tool.as_str()), ("agent", "terminal"));
        assert_eq!(
            args,
            &json!({"command": "ls"}),
            "the action without its kind"
        );
        assert_eq!(result, &Some(json!("README.md")));
        assert_eq!(call_id.as_deref(), Some("c1"));
    }

    #[test]
    fn v0_pairs_by_cause_and_drops_the_thought_from_args() {
        let log = r#"[
          {"id": 3, "source": "agent", "action": "run", "args": {"command": "make", "thought": "let me build"}},
          {"id": 4, "source": "agent", "observation": "run", "cause": 3, "content": "ok", "extras": {}}
        ]"#;
        let imported = import("log", log).expect("a log");
        let EventKind::ToolCall {
            tool, args, result, ..
        } = &imported.events[0].kind
        else {
            panic!("{:?}", imported.events);
        };
        assert_eq!((tool.as_str(), args), ("run", &json!({"command": "make"})));
        assert_eq!(result, &Some(json!("ok")));
        assert_eq!(imported.events[0].id.as_deref(), Some("e3"));
    }

    #[test]
    fn naive_timestamps_read_as_utc_and_bad_ones_are_left_out() {
        assert_eq!(
            rfc3339("2025-10-01T12:00:00.5").as_deref(),
            Some("2025-10-01T12:00:00.5Z")
        );
        assert_eq!(
            rfc3339("2025-10-01T12:00:00+02:00").as_deref(),
            Some("2025-10-01T12:00:00+02:00")
        );
        assert_eq!(rfc3339("yesterday"), None);
    }

    #[test]
    fn nothing_in_a_log_panics() {
        for log in [
            "[1, null, \"x\", [], {}]",
            "{\"events\": [{\"kind\": 3}, {\"action\": \"finish\", \"args\": 7}]}",
            "{\"kind\": \"ObservationEvent\"}",
            "{\"observation\": \"delegate\", \"cause\": {}}",
            "{\"kind\": \"ActionEvent\", \"tool_name\": \"delegate\", \"action\": {\"command\": \"delegate\", \"tasks\": {\"a\": 1}}}",
        ] {
            let _ = import("log", log);
        }
        assert!(matches!(
            import("log", "   "),
            Err(ImportError::Shape { .. })
        ));
        assert!(matches!(
            import("log", "{\"x\": 1}"),
            Err(ImportError::Shape { .. })
        ));
        assert!(matches!(
            import("log", "hello"),
            Err(ImportError::Json { .. })
        ));
    }
}
