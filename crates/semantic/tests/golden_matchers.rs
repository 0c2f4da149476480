//! Golden saved state of the semantic matchers, format 1: the tool-argument
//! matcher (`tool_arguments`: each argument's kept values) and the exchange
//! matcher (`exchange_texts`: each sender's kept texts), written by an
//! earlier build and imported by this one. The rules are `golden_state.rs`'s
//! (never edit or regenerate a fixture of a shipped format; missing ones
//! are written with `LOOPGUARD_WRITE_FIXTURES=1 cargo test -p
//! loopguard-semantic --test tests golden_matchers`):
//!
//! - imported into fresh matchers, the rest of the sequence must be matched
//!   as one whole run matches it, computed live here;
//! - the export right after the import must have the fixture's key
//!   structure;
//! - the same export with `"format": 99` is refused by name.
//!
//! The sequences are this file's own (the toy embedder of `restart.rs`):
//! repeats the matchers must answer with the earlier text, whatever the
//! embedder, on both sides of the split.

use std::collections::BTreeSet;

use loopguard_config::Config;
use loopguard_core_types::{Event, EventKind};
use loopguard_host::{ExchangeRef, ExtensionError, ToolCallRef};
use loopguard_semantic::engine::STATE_FORMAT;
use loopguard_semantic::{SemanticDetectors, SemanticLimits};
use serde_json::{Value, json};

use crate::golden_state::golden::{Fixtures, Golden, never_filled};
use crate::golden_state::states_of;
use crate::restart::{event, words_service};

const FIXTURES: Fixtures = Fixtures {
    format: 1,
    write_command: "cargo test -p loopguard-semantic --test tests golden_matchers",
    state: "the semantic matchers' saved state",
};

/// The fixtures: each sequence with every task's matcher states exported
/// after `after_line`.
const GOLDEN: [Golden; 2] = [
    Golden {
        trace: "matched_tool_arguments",
        after_line: 4,
        holds: "argument values of two tools and two agents, two tasks",
    },
    Golden {
        trace: "matched_exchanges",
        after_line: 5,
        holds: "texts of three senders, two tasks",
    },
];

/// The matchers' names, as the engine keys their saved states.
const TOOL_ARGUMENTS: &str = "tool_arguments";
const EXCHANGE_TEXTS: &str = "exchange_texts";

/// Calls with free-text arguments, then the same calls again (verbatim
/// repeats are the same at any threshold, whatever the embedder).
fn matched_tool_arguments() -> Vec<Event> {
    [
        (
            "T1",
            "researcher",
            "web_search",
            "recent papers on retrieval augmented generation",
        ),
        (
            "T1",
            "researcher",
            "arxiv",
            "benchmarks for long context retrieval",
        ),
        (
            "T1",
            "analyst",
            "web_search",
            "market size of vector databases",
        ),
        ("T2", "ops", "runbook", "restart the payments worker safely"),
        (
            "T1",
            "researcher",
            "web_search",
            "recent papers on retrieval augmented generation",
        ),
        (
            "T1",
            "researcher",
            "arxiv",
            "benchmarks for long context retrieval",
        ),
        ("T2", "ops", "runbook", "restart the payments worker safely"),
        (
            "T1",
            "analyst",
            "web_search",
            "market size of vector databases",
        ),
    ]
    .into_iter()
    .map(|(task, agent, tool, q)| {
        event_of(json!({
            "type": "tool_call", "task": task, "agent": agent, "tool": tool,
            "args": {"q": q, "limit": 5}, "result": "three results"
        }))
    })
    .collect()
}

/// Instructions and replies, then the same ones again.
fn matched_exchanges() -> Vec<Event> {
    [
        (
            "H1",
            "orchestrator",
            "web_surfer",
            "Find the monthly price of the Pro plan",
        ),
        (
            "H1",
            "web_surfer",
            "orchestrator",
            "The pricing page did not load its price table",
        ),
        (
            "H1",
            "orchestrator",
            "coder",
            "Prepare a table of plan prices",
        ),
        ("H2", "lead", "writer", "Draft the release notes for 3.2"),
        (
            "H1",
            "coder",
            "orchestrator",
            "The table is ready with no rows yet",
        ),
        (
            "H1",
            "orchestrator",
            "web_surfer",
            "Find the monthly price of the Pro plan",
        ),
        (
            "H1",
            "web_surfer",
            "orchestrator",
            "The pricing page did not load its price table",
        ),
        ("H2", "lead", "writer", "Draft the release notes for 3.2"),
    ]
    .into_iter()
    .map(|(task, from, to, content)| {
        event_of(json!({
            "type": "handoff", "task": task, "from": from, "to": to, "content": content
        }))
    })
    .collect()
}

/// The event `value` describes.
fn event_of(value: Value) -> Event {
    event(&value.to_string())
}

fn detectors() -> SemanticDetectors {
    SemanticDetectors::with_limits(
        &Config::default(),
        Some(words_service()),
        SemanticLimits::default(),
    )
}

/// The sequence of `golden`.
fn events_of(golden: &Golden) -> Vec<Event> {
    match golden.trace {
        "matched_tool_arguments" => matched_tool_arguments(),
        "matched_exchanges" => matched_exchanges(),
        other => panic!("no sequence {other}"),
    }
}

/// The checked-in fixture of `golden`, written first if missing and
/// writing is on.
async fn fixture_of(golden: &Golden) -> Value {
    FIXTURES.fixture(golden, generate(golden)).await
}

/// What this build exports after the first `after_line` events.
async fn generate(golden: &Golden) -> Value {
    let events = events_of(golden);
    let before = detectors();
    feed(&before, 1, &events[..golden.after_line]).await;
    let states: Vec<Value> = export_all(&before, &tasks_of(&events))
        .await
        .into_iter()
        .map(|(task, matcher, state)| json!({"task": task, "detector": matcher, "state": state}))
        .collect();
    json!({
        "trace": golden.trace,
        "after_line": golden.after_line,
        "embedder": "the toy bag of words of restart.rs (Words), default limits",
        "holds": golden.holds,
        "states": states,
    })
}

fn tasks_of(events: &[Event]) -> BTreeSet<String> {
    events.iter().map(|event| event.task.clone()).collect()
}

/// What the matchers answer for each event, as JSON: the matched argument
/// keys with their lines, the matched exchange text with its line.
async fn feed(detectors: &SemanticDetectors, first: u64, events: &[Event]) -> Vec<Value> {
    let arguments = detectors.arguments().expect("a tool-argument matcher");
    let exchanges = detectors.exchanges().expect("an exchange matcher");
    let mut said = Vec::new();
    for (index, event) in events.iter().enumerate() {
        let line = first + index as u64;
        let mut answer = json!(null);
        if let Some(call) = ToolCallRef::of(event, line) {
            let matched = loopguard_host::ArgumentMatcher::match_args(arguments.as_ref(), call)
                .await
                .unwrap_or_else(|e| panic!("line {line}: {e}"));
            answer = json!(matched.map(|m| {
                m.matches
                    .iter()
                    .map(|arg| json!({"key": arg.key, "line": arg.line}))
                    .collect::<Vec<_>>()
            }));
        }
        if let Some(exchange) = ExchangeRef::of(event, line) {
            let matched =
                loopguard_host::ExchangeMatcher::match_exchange(exchanges.as_ref(), exchange)
                    .await
                    .unwrap_or_else(|e| panic!("line {line}: {e}"));
            answer = json!(matched.map(|m| json!({"text": m.text, "line": m.line})));
        }
        if matches!(event.kind, EventKind::Completed | EventKind::Human { .. }) {
            loopguard_host::ArgumentMatcher::reset_task(arguments.as_ref(), &event.task).await;
            loopguard_host::ExchangeMatcher::reset_task(exchanges.as_ref(), &event.task).await;
        }
        said.push(answer);
    }
    said
}

async fn export_all(
    detectors: &SemanticDetectors,
    tasks: &BTreeSet<String>,
) -> Vec<(String, String, Value)> {
    let arguments = detectors.arguments().expect("a tool-argument matcher");
    let exchanges = detectors.exchanges().expect("an exchange matcher");
    let mut saved = Vec::new();
    for task in tasks {
        if let Some(state) =
            loopguard_host::ArgumentMatcher::export_task(arguments.as_ref(), task).await
        {
            saved.push((task.clone(), TOOL_ARGUMENTS.to_owned(), through_text(state)));
        }
        if let Some(state) =
            loopguard_host::ExchangeMatcher::export_task(exchanges.as_ref(), task).await
        {
            saved.push((task.clone(), EXCHANGE_TEXTS.to_owned(), through_text(state)));
        }
    }
    saved
}

fn through_text(value: Value) -> Value {
    let text = serde_json::to_string(&value).unwrap_or_else(|e| panic!("{e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"))
}

async fn import_one(
    detectors: &SemanticDetectors,
    matcher: &str,
    task: &str,
    state: Value,
) -> Result<(), ExtensionError> {
    match matcher {
        TOOL_ARGUMENTS => {
            let arguments = detectors.arguments().expect("a tool-argument matcher");
            loopguard_host::ArgumentMatcher::import_task(arguments.as_ref(), task, state).await
        }
        EXCHANGE_TEXTS => {
            let exchanges = detectors.exchanges().expect("an exchange matcher");
            loopguard_host::ExchangeMatcher::import_task(exchanges.as_ref(), task, state).await
        }
        other => panic!("no matcher {other}"),
    }
}

#[test]
fn the_fixtures_are_of_the_format_this_build_writes() {
    FIXTURES.assert_written_format(STATE_FORMAT);
}

#[tokio::test]
async fn exports_of_format_1_imported_match_the_rest_like_one_whole_run() {
    for golden in &GOLDEN {
        let fixture = fixture_of(golden).await;
        FIXTURES.assert_split(golden, &fixture);
        let events = events_of(golden);
        let split = golden.after_line;
        let whole = feed(&detectors(), 1, &events).await;
        assert!(
            whole[split..].iter().any(|answer| !answer.is_null()),
            "{}: something after the split is matched",
            golden.trace
        );
        let after = detectors();
        for (task, matcher, state) in states_of(&fixture) {
            import_one(&after, &matcher, &task, state)
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", FIXTURES.path(golden).display()));
        }
        let continued = feed(&after, split as u64 + 1, &events[split..]).await;
        FIXTURES.assert_continues_like_one_run(golden, &continued, &whole[split..]);
    }
}

#[tokio::test]
async fn the_export_right_after_an_import_has_the_fixtures_keys_at_every_level() {
    for golden in &GOLDEN {
        let saved = states_of(&fixture_of(golden).await);
        let after = detectors();
        for (task, matcher, state) in &saved {
            import_one(&after, matcher, task, state.clone())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let tasks: BTreeSet<String> = saved.iter().map(|(task, _, _)| task.clone()).collect();
        let exported = export_all(&after, &tasks).await;
        for (task, matcher, state) in &saved {
            let again = exported
                .iter()
                .find(|(t, m, _)| t == task && m == matcher)
                .map(|(_, _, state)| state)
                .unwrap_or_else(|| panic!("{}: {matcher} of {task} exported", golden.trace));
            FIXTURES.assert_same_structure(
                golden,
                &format!("{matcher} of task {task}"),
                state,
                again,
            );
        }
    }
}

#[tokio::test]
async fn an_export_of_an_unknown_format_is_refused_by_name() {
    for golden in &GOLDEN {
        let after = detectors();
        for (task, matcher, mut state) in states_of(&fixture_of(golden).await) {
            state["format"] = json!(99);
            let error = import_one(&after, &matcher, &task, state)
                .await
                .expect_err("format 99 is refused");
            let name = if matcher == TOOL_ARGUMENTS {
                "tool arguments"
            } else {
                "exchange texts"
            };
            assert_eq!(
                error.to_string(),
                format!(
                    "{name}: task '{task}'s saved state has format 99, and this loopguard \
                     reads format {STATE_FORMAT}; the task starts afresh"
                ),
                "{}",
                golden.trace
            );
        }
    }
}

#[tokio::test]
async fn together_the_fixtures_fill_every_part_of_each_export() {
    let mut states: Vec<(String, Value)> = Vec::new();
    for golden in &GOLDEN {
        for (_, matcher, state) in states_of(&fixture_of(golden).await) {
            states.push((matcher, state));
        }
    }
    for name in [TOOL_ARGUMENTS, EXCHANGE_TEXTS] {
        let all: Vec<&Value> = states
            .iter()
            .filter(|(matcher, _)| matcher == name)
            .map(|(_, state)| state)
            .collect();
        assert!(!all.is_empty(), "no fixture holds an export of {name}");
        let unfilled = never_filled(&all);
        assert!(
            unfilled.is_empty(),
            "parts of {name}'s export that no fixture fills: {unfilled:?}"
        );
    }
}
