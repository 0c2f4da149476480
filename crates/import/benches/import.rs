//! The cost of importing a log, per message or event: a Magentic-One run
//! of 1,000 messages (instructions, replies with browser actions, ledger
//! thoughts and runner noise in equal measure), an OpenHands event stream
//! of 1,000 events and an OTLP/JSON export of 1,000 spans, parsed and
//! mapped.
use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use loopguard_import::{Format, import};

fn log(messages: usize) -> String {
    let history: Vec<serde_json::Value> = (0..messages)
        .map(|n| match n % 4 {
            0 => serde_json::json!({"role": "Orchestrator (-> WebSurfer)", "content": format!("Open result {n} and summarize it")}),
            1 => serde_json::json!({"role": "WebSurfer", "content": format!("I clicked 'Result {n}'.\n\nThe web browser is open to the page [Result {n}](https://example.test/{n}).")}),
            2 => serde_json::json!({"role": "Orchestrator (thought)", "content": "Updated Ledger:\n{\"is_in_loop\": {\"answer\": false}}"}),
            _ => serde_json::json!({"role": "WebSurfer", "content": format!("Summary of result {n}.\n/usr/lib/python3/site-packages/x.py:1: UserWarning: noisy")}),
        })
        .collect();
    serde_json::json!({"task_id": "bench", "history": history}).to_string()
}

fn per_message(c: &mut Criterion) {
    let text = log(1_000);
    let mut group = c.benchmark_group("import/magentic_one");
    group.throughput(Throughput::Elements(1_000));
    group.bench_function("log_of_1000_messages", |b| {
        b.iter(|| black_box(import(Format::MagenticOne, "bench", black_box(&text))))
    });
    group.finish();
}

/// An OpenHands event stream as JSON Lines: actions with their
/// observations, actions answered by an error, and messages.
fn openhands_log(events: usize) -> String {
    (0..events)
        .map(|n| {
            let call = n / 2;
            match n % 5 {
                0 | 2 => serde_json::json!({"kind": "ActionEvent", "id": format!("a{n}"), "timestamp": "2025-10-14T09:00:00.000000", "source": "agent", "thought": [{"type": "text", "text": "Run the tests."}], "tool_name": "terminal", "tool_call_id": format!("c{call}"), "tool_call": {"id": format!("c{call}"), "name": "terminal", "arguments": format!("{{\"command\": \"pytest -k case_{call}\"}}"), "origin": "completion"}, "action": {"kind": "TerminalAction", "command": format!("pytest -k case_{call}"), "is_input": false}, "llm_response_id": format!("r{n}")}),
                1 => serde_json::json!({"kind": "ObservationEvent", "id": format!("o{n}"), "timestamp": "2025-10-14T09:00:01.000000", "source": "environment", "tool_name": "terminal", "tool_call_id": format!("c{call}"), "action_id": format!("a{}", n - 1), "observation": {"kind": "TerminalObservation", "content": [{"type": "text", "text": format!("1 failed, {n} passed in 0.{n}s")}], "is_error": false, "exit_code": 1}}),
                3 => serde_json::json!({"kind": "AgentErrorEvent", "id": format!("x{n}"), "timestamp": "2025-10-14T09:00:02.000000", "source": "agent", "tool_name": "terminal", "tool_call_id": format!("c{}", (n - 1) / 2), "error": "Command timed out after 120 seconds"}),
                _ => serde_json::json!({"kind": "MessageEvent", "id": format!("m{n}"), "timestamp": "2025-10-14T09:00:03.000000", "source": "agent", "llm_message": {"role": "assistant", "content": [{"type": "text", "text": "Still failing."}]}}),
            }
            .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn per_event(c: &mut Criterion) {
    let text = openhands_log(1_000);
    let mut group = c.benchmark_group("import/openhands");
    group.throughput(Throughput::Elements(1_000));
    group.bench_function("log_of_1000_events", |b| {
        b.iter(|| black_box(import(Format::OpenHands, "bench", black_box(&text))))
    });
    group.finish();
}

/// An OTLP/JSON export of `spans` spans: a root agent, sub-agent spans
/// each with a model call and tool calls, in reverse order.
fn otlp_export(spans: usize) -> String {
    let attr =
        |key: &str, value: String| serde_json::json!({"key": key, "value": {"stringValue": value}});
    let mut list: Vec<serde_json::Value> = (0..spans)
        .map(|n| {
            let (parent, attributes) = match n % 5 {
                0 if n == 0 => (String::new(), vec![attr("gen_ai.operation.name", "invoke_agent".into()), attr("gen_ai.agent.name", "Root".into()), attr("gen_ai.conversation.id", "bench".into())]),
                0 => ("0".to_owned(), vec![attr("gen_ai.operation.name", "invoke_agent".into()), attr("gen_ai.agent.name", format!("Worker{}", n % 3)), attr("gen_ai.input.messages", format!("[{{\"role\": \"user\", \"parts\": [{{\"type\": \"text\", \"content\": \"step {n}\"}}]}}]"))]),
                1 => (format!("{}", n - 1), vec![attr("gen_ai.operation.name", "chat".into())]),
                _ => (format!("{}", n - n % 5), vec![attr("gen_ai.operation.name", "execute_tool".into()), attr("gen_ai.tool.name", "search".into()), attr("gen_ai.tool.call.arguments", format!("{{\"q\": \"item {}\"}}", n % 7)), attr("gen_ai.tool.call.result", format!("result {}", n % 11))]),
            };
            let start = 1_760_432_400_000_000_000_u64 + n as u64 * 1_000_000;
            serde_json::json!({"traceId": "5b8efff798038103d269b633813fc60c", "spanId": format!("{n}"), "parentSpanId": parent, "name": "span", "kind": 1, "startTimeUnixNano": start.to_string(), "endTimeUnixNano": (start + 500_000).to_string(), "attributes": attributes, "status": {}})
        })
        .collect();
    list.reverse();
    serde_json::json!({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "bench"}, "spans": list}]}]}).to_string()
}

fn per_span(c: &mut Criterion) {
    let text = otlp_export(1_000);
    let mut group = c.benchmark_group("import/otlp");
    group.throughput(Throughput::Elements(1_000));
    group.bench_function("export_of_1000_spans", |b| {
        b.iter(|| black_box(import(Format::Otlp, "bench", black_box(&text))))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = per_message, per_event, per_span
}
criterion_main!(benches);
