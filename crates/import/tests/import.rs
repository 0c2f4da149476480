//! Each importer against its fixtures: small logs written for this project
//! from each format's public description, with their edge cases. A fixture
//! `NAME.json` (or `.jsonl`) imports to exactly `NAME.trace.jsonl` (checked in, reviewed
//! by hand), and the trace reads back as the same events.

use std::fs;
use std::path::PathBuf;

use loopguard_core_types::Event;
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
        [("other spans", 3), ("model call spans", 3)],
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
