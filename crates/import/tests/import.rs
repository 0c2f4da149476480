//! Each importer against its fixtures: small logs written for this project
//! from each format's public description, with their edge cases. A fixture
//! `NAME.json` (or `.jsonl`) imports to exactly `NAME.trace.jsonl` (checked in, reviewed
//! by hand), and the trace reads back as the same events.

use std::fs;
use std::path::PathBuf;

use loopguard_core_types::{Event, Usage};
use loopguard_import::{Format, ImportError, import};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn read(name: &str) -> String {
    fs::read_to_string(fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn round_trip(name: &str) -> loopguard_import::Imported {
    round_trip_as(Format::MagenticOne, name, "json")
}

/// The fixture `NAME.EXT` imported in `format`: exactly its trace.
fn round_trip_as(format: Format, name: &str, ext: &str) -> loopguard_import::Imported {
    let imported = import(format, name, &read(&format!("{name}.{ext}")))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let written: Vec<String> = imported.events.iter().map(Event::to_json).collect();
    let expected = read(&format!("{name}.trace.jsonl"));
    let expected: Vec<&str> = expected.lines().collect();
    assert_eq!(written, expected, "{name}");
    // The trace reads back as the same events.
    for (line, event) in expected.iter().zip(&imported.events) {
        let back = Event::from_json(line).unwrap_or_else(|e| panic!("{name}: {line}: {e}"));
        assert_eq!(&back, event, "{name}");
    }
    imported
}

#[test]
fn a_magentic_one_run_becomes_handoffs_and_browser_calls_and_drops_the_ledger() {
    let imported = round_trip("magentic_one_loop");
    assert_eq!(imported.events[0].task, "m1-pricing", "the log's task_id");
    let dropped: Vec<(&str, usize)> = imported
        .dropped
        .iter()
        .map(|d| (d.what.as_str(), d.count))
        .collect();
    assert_eq!(
        dropped,
        [
            ("messages of role 'human'", 1),
            ("messages of role 'Orchestrator (thought)'", 5),
            ("lines of runner noise", 2),
            ("messages of role 'Orchestrator (termination condition)'", 1),
        ]
    );
    let trace = read("magentic_one_loop.trace.jsonl");
    assert!(!trace.contains("site-packages"), "noise stripped");
    assert!(!trace.contains("Updated Ledger"), "the ledger is not work");
    assert_eq!(trace.matches("\"type\":\"tool_call\"").count(), 5);
}

#[test]
fn edge_cases_are_dropped_by_name_and_the_rest_is_imported() {
    let imported = round_trip("magentic_one_edges");
    assert_eq!(
        imported.events[0].task, "magentic_one_edges",
        "a blank task_id: the log's name"
    );
    let dropped: Vec<(&str, usize)> = imported
        .dropped
        .iter()
        .map(|d| (d.what.as_str(), d.count))
        .collect();
    assert_eq!(
        dropped,
        [
            ("messages without a role", 2),
            ("messages of role 'Planner (scratchpad)'", 1),
            ("messages of role '(-> FileSurfer)'", 1),
        ],
        "a missing or blank role, an unknown shape, an instruction from nobody"
    );
}

#[test]
fn a_truncated_or_foreign_log_is_an_error_naming_it_and_where() {
    let truncated = import(
        Format::MagenticOne,
        "cut",
        &read("magentic_one_truncated.json"),
    )
    .expect_err("cut short");
    assert!(matches!(truncated, ImportError::Json { .. }));
    let message = truncated.to_string();
    assert!(
        message.starts_with("cut: not a JSON Magentic-One log: EOF while parsing")
            && message.contains("line 1 column"),
        "{message}"
    );
    let foreign =
        import(Format::MagenticOne, "other", r#"{"messages": []}"#).expect_err("no history");
    assert!(
        foreign.to_string().contains("has no `history` list"),
        "{foreign}"
    );
}

fn dropped(imported: &loopguard_import::Imported) -> Vec<(&str, usize)> {
    imported
        .dropped
        .iter()
        .map(|d| (d.what.as_str(), d.count))
        .collect()
}

#[test]
fn an_openhands_run_becomes_tool_calls_paired_with_their_observations() {
    let imported = round_trip_as(Format::OpenHands, "openhands_loop", "json");
    assert_eq!(
        imported.events[0].task, "oh-parse-date",
        "the conversation id"
    );
    assert_eq!(
        dropped(&imported),
        [
            ("system prompts", 1),
            ("messages from the user", 1),
            ("messages from the agent", 1),
            ("state updates", 1),
        ]
    );
    let trace = read("openhands_loop.trace.jsonl");
    assert_eq!(trace.matches("\"type\":\"tool_call\"").count(), 11);
    assert_eq!(
        trace
            .matches("\"error\":\"No replacement was performed")
            .count(),
        4,
        "an observation with is_error makes a failing call"
    );
    assert!(trace.contains("\"call_id\":\"toolu_03\""), "{trace}");
}

#[test]
fn openhands_edge_cases_of_both_generations() {
    let imported = round_trip_as(Format::OpenHands, "openhands_edges", "jsonl");
    assert_eq!(
        dropped(&imported),
        [
            ("messages from the user", 1),
            ("system prompts", 1),
            ("recalls", 2),
            ("state updates", 2),
            ("delegation results", 1),
            ("thoughts", 2),
            ("actions 'teleport'", 1),
            ("observations of no action in the log", 1),
            ("condensation events", 1),
            ("events of kind 'TelemetryEvent'", 1),
            ("items that are not JSON objects", 1),
            ("events of no known kind", 1),
            ("messages from the agent", 1),
            ("observations of finish actions", 1),
        ]
    );
    let trace = read("openhands_edges.trace.jsonl");
    let lines: Vec<&str> = trace.lines().collect();
    // The delegation and the delegate's finish: a handoff each way, the
    // delegate's browsing its own.
    assert!(lines[1].contains("\"from\":\"agent\",\"to\":\"BrowsingAgent\""));
    assert!(lines[2].contains("\"agent\":\"BrowsingAgent\",\"tool\":\"browse\""));
    assert!(lines[3].contains("\"from\":\"BrowsingAgent\",\"to\":\"agent\""));
    // The edit whose observation never came: a call without a result.
    assert!(lines[4].contains("\"id\":\"e14\"") && !lines[4].contains("\"result\""));
    // Errors of no action are failures; the SDK's finish is `completed`.
    assert!(lines[5].starts_with("{\"type\":\"failure\""));
    assert!(lines[7].contains("\"location\":\"grep_links\""));
    assert!(lines[9].starts_with("{\"type\":\"completed\""));
}

#[test]
fn a_truncated_openhands_log_is_an_error_naming_the_line() {
    let truncated = import(Format::OpenHands, "cut", &read("openhands_truncated.jsonl"))
        .expect_err("cut short");
    let message = truncated.to_string();
    assert!(
        message.starts_with("cut: not a JSON OpenHands log: EOF while parsing")
            && message.contains("line 5 column"),
        "{message}"
    );
    let foreign = import(Format::OpenHands, "other", r#"{"messages": []}"#).expect_err("no list");
    assert!(foreign.to_string().contains("has no `events`"), "{foreign}");
}

#[test]
fn an_otlp_export_in_genai_conventions_becomes_handoffs_and_tool_calls() {
    let imported = round_trip_as(Format::Otlp, "otlp_openai_agents", "json");
    assert_eq!(
        imported.events[0].task, "conv_68ee1f2a9c",
        "the conversation id"
    );
    assert_eq!(dropped(&imported), [("model call spans", 7)]);
    let trace = read("otlp_openai_agents.trace.jsonl");
    let lines: Vec<&str> = trace.lines().collect();
    assert_eq!(
        lines.len(),
        7,
        "spans sorted by time though they came by end"
    );
    assert!(lines[0].contains("\"from\":\"Triage\",\"to\":\"Billing\""));
    assert!(lines[6].contains("\"id\":\"sa000000000000002.back\""));
    assert_eq!(trace.matches("\"tool\":\"lookup_invoices\"").count(), 5);
}

#[test]
fn otlp_json_lines_with_openinference_attributes() {
    let imported = round_trip_as(Format::Otlp, "otlp_openinference", "jsonl");
    assert_eq!(
        imported.events[0].task, "sess-2025-10-14-ab12",
        "the session id"
    );
    assert_eq!(
        dropped(&imported),
        [("other spans", 3), ("model call spans", 4)],
        "the steps (chains) and the model calls"
    );
    let trace = read("otlp_openinference.trace.jsonl");
    assert_eq!(trace.matches("\"to\":\"web_agent\"").count(), 3);
    assert_eq!(
        trace
            .matches("\"from\":\"web_agent\",\"to\":\"CodeAgent.run\"")
            .count(),
        3,
        "the root agent is named by its span when it has no agent.name"
    );
}

#[test]
fn otlp_edge_cases_out_of_order_orphans_and_errors() {
    let imported = round_trip_as(Format::Otlp, "otlp_edges", "json");
    assert_eq!(
        imported.events[0].task, "aaaabbbbccccddddeeeeffff00001111",
        "no conversation id: the trace id"
    );
    assert_eq!(
        dropped(&imported),
        [
            ("spans without a span id", 1),
            ("other spans", 2),
            ("model call spans", 1),
        ]
    );
    let trace = read("otlp_edges.trace.jsonl");
    let lines: Vec<&str> = trace.lines().collect();
    assert!(
        lines[1]
            .contains("\"error\":\"Read timed out after 30 s\",\"error_type\":\"TimeoutError\"")
    );
    assert!(
        lines[2].contains("\"agent\":\"agent\""),
        "a parent not in the log"
    );
    assert!(
        lines[3].contains("\"error\":\"No such file: notes.md\""),
        "the exception event"
    );
    assert!(
        lines[4].starts_with("{\"type\":\"failure\""),
        "an agent span in error"
    );
    assert!(
        !trace.contains("\"to\":\"Planner\",\"content\""),
        "no handoff of Planner to itself"
    );
}

#[test]
fn a_truncated_otlp_export_is_an_error_naming_the_line() {
    let message = import(Format::Otlp, "cut", &read("otlp_truncated.json"))
        .expect_err("cut short")
        .to_string();
    assert!(
        message.starts_with("cut: not a JSON OTLP log: EOF while parsing")
            && message.contains("line 109 column"),
        "{message}"
    );
    let foreign = import(Format::Otlp, "other", r#"{"resourceLogs": []}"#).expect_err("no spans");
    assert!(
        foreign.to_string().contains("has no `resourceSpans`"),
        "{foreign}"
    );
}

/// Each event's id and usage (`None` for an event without).
/// The events of `imported` that carry usage, by id.
fn usages_given(imported: &loopguard_import::Imported) -> Vec<(String, Option<Usage>)> {
    usages(imported)
        .into_iter()
        .filter(|(_, usage)| usage.is_some())
        .collect()
}

fn usages(imported: &loopguard_import::Imported) -> Vec<(String, Option<Usage>)> {
    imported
        .events
        .iter()
        .map(|event| {
            let usage = event
                .usage()
                .unwrap_or_else(|e| panic!("{:?}: {e}", event.id));
            (event.id.clone().unwrap_or_default(), usage)
        })
        .collect()
}

fn tokens(input: u64, output: u64, model: &str) -> Option<Usage> {
    Some(Usage {
        input_tokens: Some(input),
        output_tokens: Some(output),
        cost_usd: None,
        model: Some(model.to_owned()),
    })
}

/// The sum of the events' input and output tokens.
fn totals(imported: &loopguard_import::Imported) -> (u64, u64) {
    usages(imported)
        .into_iter()
        .filter_map(|(_, usage)| usage)
        .fold((0, 0), |(input, output), usage| {
            (
                input + usage.input_tokens.unwrap_or(0),
                output + usage.output_tokens.unwrap_or(0),
            )
        })
}

#[test]
fn an_agents_sdk_trace_puts_each_model_calls_usage_on_its_agents_next_event() {
    let imported = round_trip_as(Format::Otlp, "otlp_agents_sdk_usage", "json");
    assert_eq!(imported.events[0].task, "conv_sdk_usage_01");
    assert_eq!(
        dropped(&imported),
        [("model call spans", 7), ("other spans", 1)],
        "`response` spans (no operation name) are model calls by their counts"
    );
    assert_eq!(
        usages(&imported),
        [
            // Triage: its first response before the handoff, its second
            // after it (Triage does nothing more): the previous event; the
            // response model wins over the request model.
            (
                "se000000000000001".to_owned(),
                tokens(500 + 100, 40 + 5, "gpt-4o-2024-08-06")
            ),
            (
                "sb000000000000001".to_owned(),
                tokens(800, 30, "gpt-4o-mini")
            ),
            // Two generations before one call: summed.
            (
                "sb000000000000002".to_owned(),
                tokens(900 + 950, 25 + 20, "gpt-4o-mini")
            ),
            ("se000000000000002".to_owned(), None),
            (
                "sb000000000000003".to_owned(),
                tokens(300 + 420, 60 + 80, "gpt-4o-2024-08-06")
            ),
        ]
    );
    assert_eq!(
        totals(&imported),
        (3970, 260),
        "every model call's tokens, once"
    );
}

#[test]
fn genai_usage_lands_on_the_agents_next_event() {
    let imported = round_trip_as(Format::Otlp, "otlp_openai_agents", "json");
    let with_usage = usages_given(&imported);
    assert_eq!(
        with_usage,
        [("sa000000000000002".to_owned(), tokens(812, 21, "gpt-4o"))],
        "Triage's first call, before its handoff to Billing; calls naming only a model spend nothing"
    );
}

#[test]
fn openinference_token_counts_land_on_the_agents_next_event() {
    let imported = round_trip_as(Format::Otlp, "otlp_openinference", "jsonl");
    let with_usage = usages_given(&imported);
    assert_eq!(
        with_usage,
        [
            // The manager's step call, before it hands to web_agent.
            (
                "s4000000000000000".to_owned(),
                tokens(1500, 120, "gpt-4o-mini")
            ),
            // web_agent's own call, before its visit.
            (
                "s5000000000000000".to_owned(),
                tokens(2100, 45, "gpt-4o-2024-08-06")
            ),
            (
                "s4000000000000010".to_owned(),
                tokens(1500, 96, "gpt-4o-mini")
            ),
            (
                "s4000000000000020".to_owned(),
                tokens(1500, 131, "gpt-4o-mini")
            ),
        ]
    );
}

#[test]
fn openhands_llm_metrics_become_each_steps_usage() {
    let imported = round_trip_as(Format::OpenHands, "openhands_usage", "json");
    assert_eq!(imported.events[0].task, "oh-usage-dates");
    assert_eq!(
        dropped(&imported),
        [
            ("messages from the user", 1),
            ("thoughts", 1),
            ("messages from the agent", 1)
        ]
    );
    let step = |input, output, cost| {
        Some(Usage {
            input_tokens: Some(input),
            output_tokens: Some(output),
            cost_usd: Some(cost),
            model: Some("claude-sonnet-4-5".to_owned()),
        })
    };
    assert_eq!(
        usages(&imported),
        [
            ("e1".to_owned(), step(1200, 80, 0.0042)),
            // Since e1, with the thought between (dropped) counted here.
            ("e4".to_owned(), step(2700 - 1200, 230 - 80, 0.0051)),
            // A reset (totals lower than before): a new accumulation.
            ("e6".to_owned(), step(400, 20, 0.001)),
            // The finish and the closing message after it (dropped).
            ("e8".to_owned(), step(1100 - 400, 75 - 20, 0.0021)),
        ]
    );
    // The totals are the last accumulation of each run of the totals: the
    // one before the reset (2700, 230, 0.0093) and the last (1100, 75,
    // 0.0031).
    assert_eq!(totals(&imported), (2700 + 1100, 230 + 75));
    let cost: f64 = usages(&imported)
        .iter()
        .filter_map(|(_, usage)| usage.as_ref()?.cost_usd)
        .sum();
    assert!((cost - (0.0093 + 0.0031)).abs() < 1e-9, "{cost}");
}

#[test]
fn openhands_totals_without_a_reset_equal_the_last_accumulation() {
    let metrics = |cost: f64, prompt: u64, completion: u64| {
        format!(
            r#""llm_metrics": {{"accumulated_cost": {cost}, "accumulated_token_usage": {{"model": "gpt-5", "prompt_tokens": {prompt}, "completion_tokens": {completion}}}}}"#
        )
    };
    let log = [
        format!(
            r#"{{"id": 1, "source": "agent", "action": "run", "args": {{"command": "ls"}}, {}}}"#,
            metrics(0.01, 100, 10)
        ),
        format!(
            r#"{{"id": 2, "source": "agent", "cause": 1, "observation": "run", "content": "a.txt", {}}}"#,
            metrics(0.01, 100, 10)
        ),
        format!(
            r#"{{"id": 3, "source": "agent", "action": "run", "args": {{"command": "cat a.txt"}}, {}}}"#,
            metrics(0.03, 350, 42)
        ),
        format!(
            r#"{{"id": 4, "source": "agent", "action": "run", "args": {{"command": "wc a.txt"}}, {}}}"#,
            metrics(0.07, 700, 90)
        ),
    ]
    .join("\n");
    let imported = import(Format::OpenHands, "run", &log).expect("a log");
    assert_eq!(totals(&imported), (700, 90), "the last accumulation");
    let costs: Vec<Option<f64>> = usages(&imported)
        .into_iter()
        .map(|(_, usage)| usage.and_then(|u| u.cost_usd))
        .collect();
    assert_eq!(costs, [Some(0.01), Some(0.02), Some(0.04)], "no float dust");
}
