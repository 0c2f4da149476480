//! Magentic-One / AutoGen AgentChat logs: a JSON object whose `history` is
//! a list of `{"role", "content"}` messages, the orchestrator's marked by
//! what they are: `Orchestrator (-> WebSurfer)` (an instruction to a
//! worker), `Orchestrator (thought)` (its own ledger: "Updated Ledger",
//! "Next speaker WebSurfer", "Stalled.... Replanning..."), `Orchestrator
//! (termination condition)`; a worker's reply is marked by the worker's
//! name alone.
//!
//! - An instruction becomes a `handoff` from the orchestrator to the worker;
//!   a reply a `handoff` from the worker back to the orchestrator that last
//!   instructed (ruling 17 then treats the orchestrator as the hub).
//! - A reply that reports a browser action ("I clicked 'Pricing'.", "I
//!   typed 'acme pricing' into 'Search'.") is also a `tool_call` of the
//!   worker (`click` with `{"target"}`, `type` with `{"text", "into"}`),
//!   whose result is the rest of the reply (the page's title and address),
//!   so that returning to the same page is a stale call (ruling 15).
//! - Dropped, and counted: the orchestrator's thoughts and termination
//!   messages (its own judgement, not work: it already says whether it
//!   thinks it loops), the human's task, messages without a role, roles of
//!   an unknown shape, and runner noise in a content (Python warnings and
//!   tracebacks from site-packages).
//!
//! The task is the log's `task_id` when it has one, else the log's name.
//! Each event's `id` is `m` and the message's 1-based index, so evidence
//! points back into the log.

use std::sync::OnceLock;

use regex::Regex;
use serde_json::{Value, json};

use crate::{ImportError, Imported, text_of};

const FORMAT: &str = "Magentic-One";
/// The orchestrator's name when a reply comes before any instruction.
const DEFAULT_HUB: &str = "Orchestrator";

struct Patterns {
    instruction: Regex,
    marked: Regex,
    clicked: Regex,
    typed: Regex,
    noise: Regex,
}

fn patterns() -> &'static Patterns {
    static PATTERNS: OnceLock<Patterns> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let compile = |pattern: &str| {
            Regex::new(pattern).unwrap_or_else(|err| panic!("pattern {pattern}: {err}"))
        };
        Patterns {
            instruction: compile(r"^(.+?)\s*\(->\s*(.+?)\)$"),
            marked: compile(r"^(.*?)\s*\((.+)\)$"),
            clicked: compile(r"^I clicked '([^']*)'\.?\s*"),
            typed: compile(r"^I typed '([^']*)' into (?:'([^']*)'|([^.\n]*))\.?\s*"),
            noise: compile(
                r#"(?i)(site-packages/|^\s*Traceback \(most recent call last\)|^\s*File ".*", line \d+|^\s*\S*Warning: |^\s*warnings\.warn\()"#,
            ),
        }
    })
}

/// `text` without runner noise; the number of lines removed.
fn without_noise(text: &str) -> (String, usize) {
    let noise = &patterns().noise;
    let mut removed = 0;
    let kept: Vec<&str> = text
        .lines()
        .filter(|line| {
            let is_noise = noise.is_match(line);
            removed += usize::from(is_noise);
            !is_noise
        })
        .collect();
    (kept.join("\n").trim().to_owned(), removed)
}

pub(crate) fn import(name: &str, text: &str) -> Result<Imported, ImportError> {
    let log: Value = serde_json::from_str(text).map_err(|error| ImportError::Json {
        name: name.to_owned(),
        format: FORMAT,
        error,
    })?;
    let history = log
        .get("history")
        .and_then(Value::as_array)
        .ok_or_else(|| ImportError::Shape {
            name: name.to_owned(),
            problem: "has no `history` list of {\"role\", \"content\"} messages (is it a \
                      Magentic-One / AgentChat log?)"
                .to_owned(),
        })?;
    let task = log
        .get("task_id")
        .and_then(Value::as_str)
        .filter(|task| !task.trim().is_empty())
        .unwrap_or(name)
        .to_owned();
    let patterns = patterns();
    let mut imported = Imported::default();
    let mut hub = DEFAULT_HUB.to_owned();
    for (index, message) in history.iter().enumerate() {
        let id = format!("m{}", index + 1);
        let Some(role) = message
            .get("role")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|role| !role.is_empty())
        else {
            imported.drop_one(
                "messages without a role".to_owned(),
                "nobody to attribute them to",
            );
            continue;
        };
        let (content, noise) =
            without_noise(&text_of(message.get("content").unwrap_or(&Value::Null)));
        for _ in 0..noise {
            imported.drop_one(
                "lines of runner noise".to_owned(),
                "Python warnings and tracebacks from the runner, not the agents' words",
            );
        }
        let instruction = patterns
            .instruction
            .captures(role)
            .map(|caps| (caps[1].trim().to_owned(), caps[2].trim().to_owned()))
            .filter(|(from, to)| !from.is_empty() && !to.is_empty());
        if let Some((from, to)) = instruction {
            hub.clone_from(&from);
            imported.push_event(&json!({
                "type": "handoff", "task": task, "id": id,
                "from": from, "to": to, "content": content,
            }));
        } else if let Some(caps) = patterns.marked.captures(role) {
            let why = match caps[2].trim() {
                "thought" => {
                    "the orchestrator's own ledger and plans (its loop verdict included), not work"
                }
                "termination condition" => "the run's end as the orchestrator reports it",
                _ => "a role of a shape this importer does not know",
            };
            imported.drop_one(format!("messages of role '{role}'"), why);
        } else if role.eq_ignore_ascii_case("human") || role.eq_ignore_ascii_case("user") {
            imported.drop_one(
                format!("messages of role '{role}'"),
                "the task as the user gave it, not an exchange between agents",
            );
        } else {
            if let Some(call) = browser_action(&content) {
                imported.push_event(&json!({
                    "type": "tool_call", "task": task, "id": format!("{id}.action"),
                    "agent": role, "tool": call.0, "args": call.1, "result": call.2,
                }));
            }
            imported.push_event(&json!({
                "type": "handoff", "task": task, "id": id,
                "from": role, "to": hub, "content": content,
            }));
        }
    }
    Ok(imported)
}

/// A reply reporting a browser action: the tool, its arguments and what
/// came back (the rest of the reply).
fn browser_action(content: &str) -> Option<(&'static str, Value, String)> {
    let patterns = patterns();
    if let Some(caps) = patterns.typed.captures(content) {
        let rest = content[caps.get(0)?.end()..].trim().to_owned();
        let into = caps
            .get(2)
            .or_else(|| caps.get(3))
            .map_or("", |found| found.as_str().trim());
        return Some(("type", json!({"text": &caps[1], "into": into}), rest));
    }
    let caps = patterns.clicked.captures(content)?;
    let rest = content[caps.get(0)?.end()..].trim().to_owned();
    Some(("click", json!({"target": &caps[1]}), rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runner_noise_is_removed_line_by_line() {
        let (text, removed) = without_noise(
            "The page lists three plans.\n/usr/lib/python3.11/site-packages/x.py:12: DeprecationWarning: old\n  warnings.warn(\"old\")\nPro is $20.",
        );
        assert_eq!(text, "The page lists three plans.\nPro is $20.");
        assert_eq!(removed, 2);
    }

    #[test]
    fn browser_actions_become_calls() {
        let (tool, args, result) =
            browser_action("I clicked 'Pricing'. The web browser is open to the page [ACME Pricing](https://acme.test/pricing).")
                .expect("a click");
        assert_eq!(tool, "click");
        assert_eq!(args, json!({"target": "Pricing"}));
        assert!(result.starts_with("The web browser is open"), "{result}");
        let (tool, args, _) =
            browser_action("I typed 'acme pricing' into 'Search'. Results: ...").expect("typing");
        assert_eq!(
            (tool, args),
            ("type", json!({"text": "acme pricing", "into": "Search"}))
        );
        let (_, args, result) = browser_action(
            "I typed 'acme.test' into the browser address bar.\n\nThe web browser is open to the page [ACME Cloud](https://acme.test/).",
        )
        .expect("typing into an unquoted field");
        assert_eq!(
            args,
            json!({"text": "acme.test", "into": "the browser address bar"})
        );
        assert!(result.starts_with("The web browser is open"), "{result}");
        assert!(browser_action("Here is what I found.").is_none());
    }
}
