//! Stale tool calls (ruling 15): an agent calling tools over and over and
//! getting nothing new (kinds `tool_repeat`, `tool_cycle`,
//! `tool_no_new_info`).
//!
//! Per task and agent (other agents' calls never count), a successful
//! `tool_call` is *stale* when it brings nothing new:
//!
//! - it has an informative result (`tools.min_result_chars`, 16, or more
//!   characters after normalization) that was already returned to this
//!   agent in this task, by any tool; or
//! - it has no informative result and the same call was already made by
//!   this agent in this task **with the same result** (after
//!   normalization; a missing result is an empty one). Ruling 15 asks for
//!   the same call alone; loopguard also wants the same short answer, so
//!   that polling a status that moves from "queued" to "running" to "done"
//!   is not called stale (a status that stays "queued" still is).
//!
//! **Normalization** of a result, so that a clock or an id does not make an
//! old answer look new: surrounding whitespace trimmed; timestamps and
//! clock times, UUIDs, runs of 16 or more hex digits, durations (`250 ms`,
//! `3s`, `2 minutes`) and "N minutes ago" replaced by placeholders; a JSON
//! result compared as canonical JSON (keys sorted, no whitespace) with its
//! strings normalized. "Build finished in 4.2s at 10:31:07" and "Build
//! finished in 3.9s at 10:32:44" are the same result; "2 tests failed" and
//! "3 tests failed" are not.
//!
//! **The same call**: the same `tool` and the same `args` as JSON values
//! (absent `args` is `null`; `{}` is not `null`), without the keys of
//! `tools.volatile_args` (and the tool's own), at any depth. A string
//! argument of 3 to 64 words on one line, mostly letters, is compared as
//! normalized text (case, spacing and end punctuation aside), and with
//! semantic matching on the engine's argument matcher (the semantic
//! crate's) first replaces each one the same-request judge calls the same
//! as an earlier value of that argument by that value
//! ([`ObservedEvent::matched_args`]): "find papers on RAG" and "search for
//! papers about retrieval augmented generation" are then one call, and the
//! detection's reason says which argument matched which line.
//!
//! The **run** of stale calls of a task and agent grows by one with each
//! stale call. A call that is not stale ends it, and so does a `progress`
//! event that changed a metric; `completed` and `human` reset everything
//! (the engine resets every detector's state). A failing call is a failure
//! (ruling 14): neither stale nor the end of a run. Calls of a tool with
//! `exclude = true` are not looked at.
//!
//! The `nudge_after`th stale call of a run (2: for one call repeated, its
//! third occurrence) is the first detection, `inject_context` (low), the
//! next ones `inject_context` (medium), and from the `escalate_after`th (4)
//! every one `escalate`s (high). The kind names the run's shape:
//! `tool_repeat` when its calls are one call, `tool_cycle` when they repeat
//! a sequence of 2 to 5 different calls (A, B, A, B: detected at the 4th),
//! `tool_no_new_info` otherwise (the arguments vary, the results repeat).
//! Each detection carries a `directive` the orchestrator can hand the agent
//! as is: the call, how often, its last result (at most 300 characters),
//! and what to do instead. `tool_*` kinds never add to the task's loop
//! count.
//!
//! State is bounded: per task at most 64 agents (the least recently active
//! forgotten first), per agent the `tools.history` (256) most recently seen
//! calls and results as 128-bit hashes, and the newest 16 calls of a run.
//! The cost of a call does not grow with the task's history.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::OnceLock;

use loopguard_config::{Config, ToolsConfig};
use loopguard_core_types::{Action, Detection, EventKind, Severity, kinds};
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bounded::{AGENTS_PER_TASK, hash128, most_recent_mut, push_bounded};
use crate::{Detector, EvidenceRef, ObservedEvent, evidence_of};

/// Calls of a run kept for its evidence and its directive (the newest).
const RUN_KEPT: usize = 16;
/// An agent's most recent calls, kept to tell a cycle (a run's calls and
/// the cycle before them).
const RECENT_KEPT: usize = RUN_KEPT + MAX_CYCLE;
/// The longest sequence of calls a `tool_cycle` repeats.
const MAX_CYCLE: usize = 5;
/// Characters of a result quoted in a directive.
const RESULT_QUOTE_CHARS: usize = 300;
/// Characters of a call's arguments naming it in a cycle.
const CYCLE_ARGS_CHARS: usize = 80;
/// Characters of a call's arguments quoted in a directive.
const ARGS_QUOTE_CHARS: usize = 200;

/// Detects stale tool calls (ruling 15).
#[derive(Debug, Clone)]
pub struct ToolCalls {
    config: ToolsConfig,
}

/// What the tool-call detector remembers of one task: its agents' calls,
/// the least recently active agent first.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct ToolCallsState {
    agents: VecDeque<AgentCalls>,
}

/// One agent's calls in one task.
#[derive(Debug, Serialize, Deserialize)]
struct AgentCalls {
    agent: String,
    /// Calls made without an informative result, keyed by the call and its
    /// short result, least recently seen first, each with where it was
    /// first made.
    calls: VecDeque<Seen>,
    /// Informative results returned, likewise.
    results: VecDeque<Seen>,
    /// The newest calls, in order: their keys and tools.
    recent: VecDeque<Recent>,
    /// The current run of stale calls.
    run: Run,
}

/// A call or a result seen, by its hash.
#[derive(Debug, Serialize, Deserialize)]
struct Seen {
    hash: [u8; 16],
    first: EvidenceRef,
}

/// One of an agent's recent calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Recent {
    key: [u8; 16],
    tool: String,
    /// The tool and its arguments, shortened, as a cycle's account names
    /// the call (empty in states saved before it was kept).
    #[serde(default)]
    label: String,
}

/// A run of stale calls.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Run {
    /// Stale calls in the run.
    count: u32,
    /// Where what the run's first stale call repeated was first seen.
    origin: Option<EvidenceRef>,
    /// The run's newest calls.
    calls: VecDeque<EvidenceRef>,
    /// The last stale call: its tool, its arguments and its result, as
    /// quoted in a directive.
    last: Option<Quoted>,
}

/// A call as a directive quotes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Quoted {
    tool: String,
    args: String,
    result: Option<String>,
}

/// The shape of a run's calls.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Shape {
    /// One call over and over.
    Repeat,
    /// A sequence of different calls over and over: the tools, in order.
    Cycle(Vec<String>),
    /// Varying calls whose results repeat.
    NoNewInfo,
}

impl ToolCalls {
    /// The detector with the `[tools]` settings of `config`.
    pub fn new(config: &Config) -> ToolCalls {
        ToolCalls {
            config: config.tools.clone(),
        }
    }

    fn history(&self) -> usize {
        usize::try_from(self.config.history.max(1)).unwrap_or(usize::MAX)
    }
}

impl ToolCallsState {
    /// The calls of `agent`, made the most recently active (created when
    /// new, forgetting the least recently active agent past the bound).
    fn agent_mut(&mut self, agent: &str) -> &mut AgentCalls {
        most_recent_mut(
            &mut self.agents,
            |calls| calls.agent == agent,
            || AgentCalls {
                agent: agent.to_owned(),
                calls: VecDeque::new(),
                results: VecDeque::new(),
                recent: VecDeque::new(),
                run: Run::default(),
            },
            AGENTS_PER_TASK,
        )
    }
}

/// Looks `hash` up in `seen`: where it was first seen, if it was. Either
/// way it becomes the most recently seen (first seen at `here` when new),
/// and the least recently seen is forgotten past `capacity`.
fn remember(
    seen: &mut VecDeque<Seen>,
    hash: [u8; 16],
    here: &EvidenceRef,
    capacity: usize,
) -> Option<EvidenceRef> {
    match seen.iter().position(|entry| entry.hash == hash) {
        Some(at) => {
            let entry = seen.remove(at)?;
            let first = entry.first.clone();
            seen.push_back(entry);
            Some(first)
        }
        None => {
            push_bounded(
                seen,
                Seen {
                    hash,
                    first: here.clone(),
                },
                capacity,
            );
            None
        }
    }
}

impl Detector for ToolCalls {
    type State = ToolCallsState;
    const CONFIG_SECTION: &'static str = "tools";
    const KINDS: &'static [&'static str] = &[
        kinds::TOOL_REPEAT,
        kinds::TOOL_CYCLE,
        kinds::TOOL_NO_NEW_INFO,
    ];

    fn name(&self) -> &'static str {
        "tool_calls"
    }

    fn observe(
        &self,
        state: &mut ToolCallsState,
        event: &ObservedEvent<'_>,
        out: &mut Vec<Detection>,
    ) {
        if event.progressed {
            // Progress ends every agent's run.
            for calls in &mut state.agents {
                calls.run = Run::default();
            }
            return;
        }
        let EventKind::ToolCall {
            agent,
            tool,
            args,
            result,
            error,
            ..
        } = &event.event.kind
        else {
            return;
        };
        // A failing call is a failure (ruling 14), nothing here.
        if error.is_some() {
            return;
        }
        let limits = self.config.limits_for(tool);
        if limits.exclude {
            return;
        }
        // Free-text arguments judged the same as earlier ones compare as
        // those (with semantic matching on).
        let matched = event.matched_args.filter(|m| !m.matches.is_empty());
        let compared = matched.map_or(args, |m| &m.args);
        let call = call_key(tool, compared, &self.config);
        let key = hash128(&call);
        let normalized = result.as_ref().map(normalize_result).unwrap_or_default();
        let informative = normalized.chars().count()
            >= usize::try_from(limits.min_result_chars).unwrap_or(usize::MAX);
        let here = event.evidence_ref();
        let history = self.history();
        let calls = state.agent_mut(agent);
        let earlier = if informative {
            remember(&mut calls.results, hash128(&normalized), &here, history)
        } else {
            // No informative result: stale when this call already came
            // back with this same short (or no) result. A short result that
            // changed ("queued", then "running") is news.
            let short_call = hash128(&format!("{call}\u{1f}{normalized}"));
            remember(&mut calls.calls, short_call, &here, history)
        };
        push_bounded(
            &mut calls.recent,
            Recent {
                key,
                tool: tool.clone(),
                label: format!(
                    "{tool} {}",
                    trimmed(&quote_args(tool, args, &self.config), CYCLE_ARGS_CHARS)
                ),
            },
            RECENT_KEPT,
        );
        let _ = event.stale_call.set(earlier.is_some());
        let Some(earlier) = earlier else {
            // Something new: the run ends.
            calls.run = Run::default();
            return;
        };
        let run = &mut calls.run;
        run.count = run.count.saturating_add(1);
        run.origin.get_or_insert(earlier);
        push_bounded(&mut run.calls, here, RUN_KEPT);
        run.last = Some(Quoted {
            tool: tool.clone(),
            args: quote_args(tool, args, &self.config),
            result: result.as_ref().map(quote_result),
        });
        let stale = run.count;
        if stale < limits.nudge_after {
            return;
        }
        let (severity, action) = if stale >= limits.escalate_after {
            (Severity::High, Action::Escalate)
        } else if stale == limits.nudge_after {
            (Severity::Low, Action::InjectContext)
        } else {
            (Severity::Medium, Action::InjectContext)
        };
        let run_len = usize::try_from(stale).unwrap_or(usize::MAX).min(RUN_KEPT);
        let shape = shape_of(&calls.recent, run_len);
        let run = &calls.run;
        let (lines, ids) = evidence_of(run.origin.iter().chain(run.calls.iter()));
        let Some(last) = &run.last else {
            return;
        };
        let kind = match shape {
            Shape::Repeat => kinds::TOOL_REPEAT,
            Shape::Cycle(_) => kinds::TOOL_CYCLE,
            Shape::NoNewInfo => kinds::TOOL_NO_NEW_INFO,
        };
        let times = stale.saturating_add(1);
        let directive = directive(&shape, last, times);
        let mut reason = format!(
            "{agent}'s {} stale tool call in a row: {}",
            ordinal(stale),
            summary(&shape, last, times)
        );
        if let Some(matched) = matched {
            for found in &matched.matches {
                let _ = write!(
                    reason,
                    "; its {} is the same as line {}'s: {}",
                    found.key, found.line, found.reason
                );
            }
        }
        let mut detection = Detection::new(self.name(), kind, severity, action, lines, reason);
        detection.count = Some(times);
        detection.evidence_ids = ids;
        detection.directive = Some(directive);
        detection.agents = vec![agent.clone()];
        out.push(detection);
    }
}

/// The shape of the run made of the last `run_len` calls of `recent`.
fn shape_of(recent: &VecDeque<Recent>, run_len: usize) -> Shape {
    let n = recent.len();
    let run_len = run_len.min(n);
    let run: Vec<&Recent> = recent.iter().skip(n - run_len).collect();
    if run.windows(2).all(|pair| pair[0].key == pair[1].key) {
        return Shape::Repeat;
    }
    for period in 2..=MAX_CYCLE {
        if n < run_len + period {
            break;
        }
        let repeats = (n - run_len..n).all(|at| recent[at].key == recent[at - period].key);
        let cycle: Vec<&Recent> = recent.iter().skip(n - period).collect();
        let distinct = cycle
            .iter()
            .enumerate()
            .all(|(i, call)| cycle[..i].iter().all(|other| other.key != call.key));
        if repeats && distinct {
            // The sequence in the order it was first made.
            let start = n - run_len - period;
            return Shape::Cycle(
                (start..start + period)
                    .map(|at| {
                        let call = &recent[at];
                        if call.label.is_empty() {
                            call.tool.clone()
                        } else {
                            call.label.clone()
                        }
                    })
                    .collect(),
            );
        }
    }
    Shape::NoNewInfo
}

/// What the agent is told.
fn directive(shape: &Shape, last: &Quoted, times: u32) -> String {
    // A sentence, ended once ("... general keywords." is not ended again).
    let mut returned = match &last.result {
        Some(result) => format!("returned: {result}"),
        None => "returned nothing".to_owned(),
    };
    if !returned.ends_with(['.', '!', '?']) {
        returned.push('.');
    }
    match shape {
        Shape::Repeat => format!(
            "You have called {} with {} {times} times and got nothing new: it {returned} \
             Do not call it again with the same arguments: use that result, or change approach.",
            last.tool, last.args
        ),
        Shape::Cycle(tools) => format!(
            "You are repeating the same {} calls ({}) and getting nothing new; the last, {} \
             with {}, {returned} Stop cycling: use what these calls returned, or change \
             approach.",
            tools.len(),
            tools.join("; "),
            last.tool,
            last.args
        ),
        Shape::NoNewInfo => format!(
            "Your last {times} tool calls returned results you already had; the last, {} with \
             {}, {returned} Varying the arguments is not finding anything new: use what you \
             have, or change approach.",
            last.tool, last.args
        ),
    }
}

/// The reason's account of the run, for a human.
fn summary(shape: &Shape, last: &Quoted, times: u32) -> String {
    match shape {
        Shape::Repeat => format!("{} with {} {times} times", last.tool, last.args),
        Shape::Cycle(tools) => format!(
            "the same {} calls ({}) again",
            tools.len(),
            tools.join("; ")
        ),
        Shape::NoNewInfo => format!(
            "{times} calls with varying arguments, results already returned (last: {} with {})",
            last.tool, last.args
        ),
    }
}

/// "2nd", "3rd", "11th".
pub(crate) fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// The canonical text of a call: its tool and its arguments without their
/// volatile keys, free text normalized, keys sorted.
fn call_key(tool: &str, args: &Value, config: &ToolsConfig) -> String {
    let mut out = String::with_capacity(64);
    out.push_str(tool);
    out.push('\u{1f}');
    canonical(
        args,
        &mut out,
        &|key| config.is_volatile(tool, key),
        &normalize_argument,
    );
    out
}

/// A call's arguments as a directive quotes them (at most 200
/// characters): canonical JSON without the volatile keys, or "no
/// arguments".
fn quote_args(tool: &str, args: &Value, config: &ToolsConfig) -> String {
    if args.is_null() {
        return "no arguments".to_owned();
    }
    let mut out = String::new();
    canonical(
        args,
        &mut out,
        &|key| config.is_volatile(tool, key),
        &|text| text.to_owned(),
    );
    trimmed(&out, ARGS_QUOTE_CHARS)
}

/// A result as a directive quotes it (at most 300 characters).
fn quote_result(result: &Value) -> String {
    let text = match result {
        Value::String(text) => text.trim().to_owned(),
        other => other.to_string(),
    };
    trimmed(&text, RESULT_QUOTE_CHARS)
}

/// `text` cut to `most` characters, with "…" when cut.
pub(crate) fn trimmed(text: &str, most: usize) -> String {
    match text.char_indices().nth(most) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// A result normalized for comparison: text trimmed with its clocks and
/// ids replaced; JSON as canonical JSON with its strings so normalized.
pub fn normalize_result(result: &Value) -> String {
    match result {
        Value::String(text) => normalize_text(text),
        other => {
            let mut out = String::new();
            canonical(other, &mut out, &|_| false, &normalize_text);
            out
        }
    }
}

/// Writes `value` as canonical JSON (object keys sorted, no whitespace)
/// into `out`, leaving out object keys `skip` names and passing every
/// string through `text`.
fn canonical(
    value: &Value,
    out: &mut String,
    skip: &dyn Fn(&str) -> bool,
    text: &dyn Fn(&str) -> String,
) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().filter(|key| !skip(key)).collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                if let Some(inner) = map.get(key) {
                    canonical(inner, out, skip, text);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out, skip, text);
            }
            out.push(']');
        }
        Value::String(string) => {
            let _ = write!(out, "{}", Value::String(text(string)));
        }
        other => {
            let _ = write!(out, "{other}");
        }
    }
}

/// A string argument: free text (3 to 64 words on one line, mostly
/// letters) compared as normalized text; anything else (a path, code, a
/// multi-line text) exactly.
fn normalize_argument(text: &str) -> String {
    if !is_free_text(text) {
        return text.to_owned();
    }
    let lower = text.to_lowercase();
    lower
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .trim_end_matches(['.', '?', '!', ',', ';', ':'])
        .to_owned()
}

/// Whether a string argument is free text (ruling 15): 3 to 64 words on
/// one line, mostly letters (at least 70% of its visible characters).
/// Paths, code, commands and multi-line text are not.
pub fn is_free_text(text: &str) -> bool {
    let words = text.split_whitespace().count();
    let letters = text.chars().filter(|c| c.is_alphabetic()).count();
    let visible = text.chars().filter(|c| !c.is_whitespace()).count();
    (3..=64).contains(&words) && !text.contains('\n') && letters * 10 >= visible * 7
}

/// A tool call's arguments as a semantic argument matcher saw them (the
/// semantic crate fills the seam; the engine passes them in
/// [`ObservedEvent::matched_args`]): each free-text argument the
/// same-request judge called the same as an earlier value of the same
/// argument (same task, agent and tool) replaced by that value, so that
/// "the same call" compares the two as one.
#[derive(Debug, Clone, PartialEq)]
pub struct MatchedArgs {
    /// The arguments, each matched value replaced by the earlier one.
    pub args: Value,
    /// What was matched, in the arguments' order.
    pub matches: Vec<ArgMatch>,
    /// Earlier values of the call's free-text arguments (same task, agent,
    /// tool and key) about the same thing: a cosine of at least
    /// `tools.rephrase_similarity` (ruling 19), whether or not the judge
    /// calls them the same request.
    pub related: Vec<RelatedArg>,
}

/// An earlier value of a free-text argument about the same thing as this
/// call's (ruling 19).
#[derive(Debug, Clone, PartialEq)]
pub struct RelatedArg {
    /// Where the argument is (as [`ArgMatch::key`]).
    pub key: String,
    /// The input line the earlier value was first seen on.
    pub line: u64,
    /// The two values' cosine.
    pub cosine: f32,
}

/// One free-text argument judged the same as an earlier value.
#[derive(Debug, Clone, PartialEq)]
pub struct ArgMatch {
    /// Where the argument is: its keys joined by `.`, with `[i]` for an
    /// array's items (`q`, `filter.text`, `queries[1]`).
    pub key: String,
    /// The input line the earlier value was first seen on.
    pub line: u64,
    /// The judge's verdict in words ("same request (score 0.93, cosine
    /// 0.88)").
    pub reason: String,
}

/// Text with what changes from call to call, though the answer does not,
/// replaced by placeholders: timestamps and clock times, UUIDs, long hex
/// runs, durations and "N minutes ago".
pub fn normalize_text(text: &str) -> String {
    struct Patterns {
        ago: Regex,
        timestamp: Regex,
        uuid: Regex,
        hex: Regex,
        clock: Regex,
        duration: Regex,
    }
    static PATTERNS: OnceLock<Option<Patterns>> = OnceLock::new();
    let patterns = PATTERNS.get_or_init(|| {
        Some(Patterns {
            ago: Regex::new(r"(?i)\b\d+\s*(?:seconds?|secs?|minutes?|mins?|hours?|hrs?|days?|weeks?)\s+ago\b").ok()?,
            timestamp: Regex::new(
                r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?",
            )
            .ok()?,
            uuid: Regex::new(
                r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
            )
            .ok()?,
            hex: Regex::new(r"\b[0-9a-fA-F]{16,}\b").ok()?,
            clock: Regex::new(r"\b\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?\b").ok()?,
            duration: Regex::new(
                r"\b\d+(?:\.\d+)?\s?(?:ns|us|µs|ms|s|sec|secs|seconds?|m|min|mins|minutes?|h|hrs?|hours?)\b",
            )
            .ok()?,
        })
    });
    let trimmed = text.trim();
    let Some(p) = patterns else {
        // The patterns are constants; they compile.
        return trimmed.to_owned();
    };
    let text = p.ago.replace_all(trimmed, "<ago>");
    let text = p.timestamp.replace_all(&text, "<time>");
    let text = p.uuid.replace_all(&text, "<uuid>");
    let text = p.hex.replace_all(&text, "<hex>");
    let text = p.clock.replace_all(&text, "<time>");
    p.duration.replace_all(&text, "<duration>").into_owned()
}

#[cfg(test)]
mod tests {
    use loopguard_core_types::Event;
    use serde_json::json;

    use super::*;

    #[test]
    fn results_are_normalized_for_clocks_ids_and_durations_but_not_counts() {
        assert_eq!(
            normalize_text("  Build finished in 4.2s at 10:31:07  "),
            normalize_text("Build finished in 3.9s at 10:32:44")
        );
        assert_eq!(
            normalize_text(
                "deployed 2026-11-22T10:00:00Z, request 3f2b8c1e-9a4d-4e6f-8b2a-1c3d5e7f9a0b, 5 minutes ago"
            ),
            "deployed <time>, request <uuid>, <ago>"
        );
        assert_eq!(
            normalize_text("commit 9fceb02d0ae598e95dc970b74767f19372d61af8"),
            "commit <hex>"
        );
        assert_ne!(
            normalize_text("2 tests failed"),
            normalize_text("3 tests failed")
        );
        // JSON: canonical, keys sorted, strings normalized.
        assert_eq!(
            normalize_result(&json!({"b": "took 12 ms", "a": [1, {"y": 2, "x": 1}]})),
            r#"{"a":[1,{"x":1,"y":2}],"b":"took <duration>"}"#
        );
        assert_eq!(
            normalize_result(&json!({"status": "done", "at": "10:00"})),
            normalize_result(&json!({"at": "11:30", "status": "done"}))
        );
    }

    #[test]
    fn the_same_call_ignores_volatile_keys_key_order_and_free_text_case() {
        let config = ToolsConfig {
            volatile_args: vec!["request_id".into()],
            ..ToolsConfig::default()
        };
        let key = |args: Value| call_key("web_search", &args, &config);
        assert_eq!(
            key(json!({"q": "Rust async runtimes compared", "request_id": 1, "n": 5})),
            key(json!({"n": 5, "request_id": 2, "q": "rust async  runtimes compared."}))
        );
        // A path or code compares exactly.
        assert_ne!(
            call_key("read", &json!({"path": "src/Main.rs"}), &config),
            call_key("read", &json!({"path": "src/main.rs"}), &config)
        );
        // Absent args are null, and {} is not null.
        assert_ne!(key(Value::Null), key(json!({})));
    }

    fn call(
        line: u64,
        agent: &str,
        tool: &str,
        args: Value,
        result: Option<Value>,
    ) -> (u64, Event) {
        let mut object =
            json!({"type": "tool_call", "task": "T", "agent": agent, "tool": tool, "args": args});
        if let Some(result) = result {
            object["result"] = result;
        }
        (line, Event::from_value(&object).expect("a tool call"))
    }

    /// Runs the detector over `events`, returning each event's detections.
    fn run(config: &Config, events: &[(u64, Event)]) -> Vec<Vec<Detection>> {
        let detector = ToolCalls::new(config);
        let mut state = ToolCallsState::default();
        events
            .iter()
            .map(|(line, event)| {
                let mut observed = ObservedEvent::new(*line, event);
                if matches!(event.kind, EventKind::Progress(_)) {
                    observed.progressed = true;
                }
                let mut out = Vec::new();
                detector.observe(&mut state, &observed, &mut out);
                out
            })
            .collect()
    }

    fn summary_of(found: &[Vec<Detection>]) -> Vec<Option<(&str, Action)>> {
        found
            .iter()
            .map(|d| d.first().map(|d| (d.kind.as_ref(), d.action)))
            .collect()
    }

    #[test]
    fn matched_arguments_make_reworded_calls_one_and_the_reason_says_so() {
        let config = Config::default();
        let search = |line, q: &str| {
            call(
                line,
                "researcher",
                "web_search",
                json!({"q": q}),
                Some(json!("none")),
            )
        };
        let events = [
            search(1, "find papers on retrieval augmented generation"),
            search(2, "search for papers about RAG please"),
            search(3, "look up retrieval augmented generation papers"),
        ];
        // Without a matcher: three different calls with short results.
        assert!(run(&config, &events).iter().all(Vec::is_empty));
        // With one that matched lines 2 and 3 to line 1's value.
        let matched = MatchedArgs {
            args: json!({"q": "find papers on retrieval augmented generation"}),
            matches: vec![ArgMatch {
                key: "q".into(),
                line: 1,
                reason: "same request (score 0.90, cosine 0.88)".into(),
            }],
            related: Vec::new(),
        };
        let detector = ToolCalls::new(&config);
        let mut state = ToolCallsState::default();
        let mut found = Vec::new();
        for (line, event) in &events {
            let observed =
                ObservedEvent::new(*line, event).with_matched_args((*line > 1).then_some(&matched));
            let mut out = Vec::new();
            detector.observe(&mut state, &observed, &mut out);
            found.push(out);
        }
        assert_eq!(
            summary_of(&found)[2],
            Some((kinds::TOOL_REPEAT, Action::InjectContext))
        );
        assert!(
            found[2][0].reason.ends_with(
                "; its q is the same as line 1's: same request (score 0.90, cosine 0.88)"
            ),
            "{}",
            found[2][0].reason
        );
    }

    #[test]
    fn a_short_result_that_changes_is_news_and_one_that_stays_is_not() {
        let config = Config::default();
        let poll = |line, status: &str| {
            call(
                line,
                "ops",
                "job_status",
                json!({"job": "backfill-42"}),
                Some(json!(status)),
            )
        };
        // queued, queued, running, running, done: never two stale calls in
        // a row.
        let moving = [
            poll(1, "queued"),
            poll(2, "queued"),
            poll(3, "running"),
            poll(4, "running"),
            poll(5, "done"),
        ];
        assert!(run(&config, &moving).iter().all(Vec::is_empty));
        // queued four times: the third is the first detection.
        let stuck: Vec<_> = (1..=4).map(|line| poll(line, "queued")).collect();
        assert_eq!(
            summary_of(&run(&config, &stuck)),
            [
                None,
                None,
                Some((kinds::TOOL_REPEAT, Action::InjectContext)),
                Some((kinds::TOOL_REPEAT, Action::InjectContext)),
            ]
        );
        // No result at all is an empty one: the same call again is stale.
        let silent: Vec<_> = (1..=3)
            .map(|line| call(line, "coder", "touch", json!({"path": "a"}), None))
            .collect();
        assert_eq!(
            summary_of(&run(&config, &silent))[2],
            Some((kinds::TOOL_REPEAT, Action::InjectContext))
        );
    }

    #[test]
    fn one_call_repeated_is_nudged_at_its_third_occurrence_and_escalated_at_its_fifth() {
        let config = Config::default();
        let events: Vec<_> = (1..=6)
            .map(|line| {
                call(
                    line,
                    "a",
                    "glob",
                    json!({"pattern": "**/*.rs"}),
                    Some(json!("src/main.rs\nsrc/lib.rs")),
                )
            })
            .collect();
        let found = run(&config, &events);
        let repeat = kinds::TOOL_REPEAT;
        let (nudge, gate) = (Action::InjectContext, Action::Escalate);
        assert_eq!(
            summary_of(&found),
            [
                None,
                None,
                Some((repeat, nudge)),
                Some((repeat, nudge)),
                Some((repeat, gate)),
                Some((repeat, gate))
            ]
        );
        let first = &found[2][0];
        assert_eq!(first.severity, Severity::Low);
        assert_eq!(first.evidence, [1, 2, 3]);
        assert_eq!(first.count, Some(3));
        let directive = first.directive.as_deref().expect("a directive");
        assert!(
            directive.starts_with(r#"You have called glob with {"pattern":"**/*.rs"} 3 times and got nothing new: it returned: src/main.rs"#),
            "{directive}"
        );
        assert_eq!(found[3][0].severity, Severity::Medium);
        assert_eq!(found[4][0].severity, Severity::High);
    }

    #[test]
    fn a_cycle_of_two_calls_is_detected_at_the_fourth_call() {
        let config = Config::default();
        let a = || json!({"path": "a.rs"});
        let b = || json!({"path": "b.rs"});
        let events = vec![
            call(
                1,
                "a",
                "read",
                a(),
                Some(json!("fn a() { /* the first file */ }")),
            ),
            call(
                2,
                "a",
                "read",
                b(),
                Some(json!("fn b() { /* the second file */ }")),
            ),
            call(
                3,
                "a",
                "read",
                a(),
                Some(json!("fn a() { /* the first file */ }")),
            ),
            call(
                4,
                "a",
                "read",
                b(),
                Some(json!("fn b() { /* the second file */ }")),
            ),
        ];
        let found = run(&config, &events);
        assert_eq!(
            summary_of(&found)[3],
            Some((kinds::TOOL_CYCLE, Action::InjectContext))
        );
        let directive = found[3][0].directive.as_deref().expect("a directive");
        assert!(
            directive.contains(r#"the same 2 calls (read {"path":"a.rs"}; read {"path":"b.rs"})"#),
            "{directive}"
        );
        assert_eq!(found[3][0].evidence, [1, 3, 4]);
    }

    #[test]
    fn reworded_searches_returning_the_same_result_are_no_new_information() {
        let config = Config::default();
        let same = || {
            Some(json!(
                "Error: the flag --fast is not supported by this version of the tool"
            ))
        };
        let events = vec![
            call(1, "a", "search", json!({"q": "fast flag"}), same()),
            call(
                2,
                "a",
                "search",
                json!({"q": "enable the fast flag"}),
                same(),
            ),
            call(
                3,
                "a",
                "search",
                json!({"q": "how to turn fast mode on"}),
                same(),
            ),
        ];
        let found = run(&config, &events);
        assert_eq!(
            summary_of(&found)[2],
            Some((kinds::TOOL_NO_NEW_INFO, Action::InjectContext))
        );
    }

    #[test]
    fn legitimate_repetition_stays_silent() {
        let config = Config::default();
        // Polling whose result changes.
        let polling: Vec<_> = (1..=8)
            .map(|line| {
                call(
                    line,
                    "a",
                    "job_status",
                    json!({"id": 7}),
                    Some(json!(format!("running: {} of 8 shards done", line))),
                )
            })
            .collect();
        assert!(run(&config, &polling).iter().all(Vec::is_empty));
        // Paging: the same tool, another page each time.
        let paging: Vec<_> = (1..=8)
            .map(|line| {
                call(
                    line,
                    "a",
                    "list_issues",
                    json!({"page": line}),
                    Some(json!(format!("issues {}..{}", line * 50, line * 50 + 49))),
                )
            })
            .collect();
        assert!(run(&config, &paging).iter().all(Vec::is_empty));
        // Short results ("OK") for different writes.
        let writes: Vec<_> = (1..=8)
            .map(|line| {
                call(
                    line,
                    "a",
                    "write_file",
                    json!({"path": format!("src/m{line}.rs")}),
                    Some(json!("OK")),
                )
            })
            .collect();
        assert!(run(&config, &writes).iter().all(Vec::is_empty));
        // Two agents making the same call: each its own.
        let two = vec![
            call(
                1,
                "a",
                "ls",
                Value::Null,
                Some(json!("README.md Cargo.toml src")),
            ),
            call(
                2,
                "b",
                "ls",
                Value::Null,
                Some(json!("README.md Cargo.toml src")),
            ),
            call(
                3,
                "a",
                "ls",
                Value::Null,
                Some(json!("README.md Cargo.toml src")),
            ),
            call(
                4,
                "b",
                "ls",
                Value::Null,
                Some(json!("README.md Cargo.toml src")),
            ),
        ];
        assert!(run(&config, &two).iter().all(Vec::is_empty));
    }

    #[test]
    fn a_new_result_or_progress_ends_the_run_and_failures_and_excluded_tools_do_not() {
        let mut config = Config::default();
        config.tools.per_tool.insert(
            "heartbeat".into(),
            loopguard_config::PerToolConfig {
                exclude: true,
                ..Default::default()
            },
        );
        let same = || Some(json!("3 files changed, 12 insertions(+)"));
        let progress = Event::from_json(r#"{"type":"progress","task":"T","tests_failed":1}"#)
            .expect("progress");
        let failing = Event::from_json(
            r#"{"type":"tool_call","task":"T","agent":"a","tool":"exec","error":"boom"}"#,
        )
        .expect("failing");
        let events = vec![
            call(1, "a", "git_diff", Value::Null, same()),
            call(2, "a", "git_diff", Value::Null, same()),
            (3, progress),
            call(4, "a", "git_diff", Value::Null, same()),
            (5, failing),
            call(
                6,
                "a",
                "heartbeat",
                Value::Null,
                Some(json!("alive and well, nothing new")),
            ),
            call(7, "a", "git_diff", Value::Null, same()),
        ];
        let found = run(&config, &events);
        // The run restarted at the progress (line 4 is its 1st stale call);
        // the failure and the excluded tool neither count nor end it: line
        // 7 is its 2nd.
        assert_eq!(
            summary_of(&found),
            [
                None,
                None,
                None,
                None,
                None,
                None,
                Some((kinds::TOOL_REPEAT, Action::InjectContext))
            ]
        );
        // A polling tool may allow more.
        let mut patient = Config::default();
        patient.tools.per_tool.insert(
            "glob".into(),
            loopguard_config::PerToolConfig {
                nudge_after: Some(5),
                escalate_after: Some(8),
                ..Default::default()
            },
        );
        let events: Vec<_> = (1..=6)
            .map(|line| {
                call(
                    line,
                    "a",
                    "glob",
                    json!({"pattern": "*"}),
                    Some(json!("one two three four five")),
                )
            })
            .collect();
        let found = run(&patient, &events);
        assert_eq!(found.iter().position(|d| !d.is_empty()), Some(5));
    }

    #[test]
    fn the_state_is_bounded_and_round_trips() {
        let mut config = Config::default();
        config.tools.history = 8;
        let detector = ToolCalls::new(&config);
        let mut state = ToolCallsState::default();
        for line in 1..=200u64 {
            let agent = format!("agent-{}", line % 100);
            let (line, event) = call(
                line,
                &agent,
                "read",
                json!({"path": format!("f{line}")}),
                Some(json!(format!("contents of file number {line}"))),
            );
            let mut out = Vec::new();
            detector.observe(&mut state, &ObservedEvent::new(line, &event), &mut out);
            assert!(out.is_empty());
        }
        assert_eq!(state.agents.len(), AGENTS_PER_TASK);
        assert!(
            state
                .agents
                .iter()
                .all(|a| a.calls.len() <= 8 && a.results.len() <= 8)
        );
        let json = serde_json::to_value(&state).expect("serializes");
        let back: ToolCallsState = serde_json::from_value(json.clone()).expect("reads");
        assert_eq!(serde_json::to_value(&back).expect("serializes"), json);
    }
}
