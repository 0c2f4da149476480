//! `loopguard demo`: bundled traces, one per built-in structural loop kind.
//!
//! The traces live in `crates/cli/demo/` and are compiled into the binary,
//! so the demo needs no file at run time. Each is replayed through a fresh
//! engine exactly as `loopguard replay` would, with the scenario's own small
//! config where the defaults would make the trace long.

use std::io::{self, BufWriter, Write};

use anstyle::{AnsiColor, Style};
use anyhow::{Context, anyhow};
use loopguard_core_types::{Config, Report};
use loopguard_host::LoopGuard;

use crate::Outcome;
use crate::cli::{DemoArgs, Format};
use crate::output::{Jsonl, Quiet, Text};
use crate::replay::replay_into;

/// One bundled trace and what it shows.
#[derive(Debug)]
pub(crate) struct Scenario {
    /// The detection kind the trace shows (and the scenario's name).
    pub(crate) kind: &'static str,
    /// A one-line title.
    pub(crate) title: &'static str,
    /// What loops and what loopguard tells the orchestrator, in plain words.
    pub(crate) story: &'static str,
    /// The trace, JSON Lines.
    pub(crate) trace: &'static str,
    /// Settings that differ from the defaults, as TOML.
    pub(crate) config: Option<&'static str>,
}

/// Every scenario, in the order the demo plays them.
pub(crate) const SCENARIOS: [Scenario; 9] = [
    Scenario {
        kind: "exact_failure",
        title: "The same compiler error, again and again",
        story: "The coder keeps hitting the same type error; the tester runs into it \
                too. The first failure is an attempt; each exact repeat is a loop, \
                whichever agent hit it and even though the test numbers moved in \
                between. loopguard warns at the first loop, asks the orchestrator to \
                inject the failure history at the second, and at the third (the 4th \
                identical failure) escalates: the task waits for a human.",
        trace: include_str!("../demo/01_exact_failure.jsonl"),
        config: None,
    },
    Scenario {
        kind: "agent_pair",
        title: "Coder and reviewer ping-pong",
        story: "The reviewer and the coder hand the same pull request back and forth. \
                More than 3 exchanges between one pair within 600 seconds is a \
                cycle, so the 4th exchange is flagged: loopguard answers \
                break_cycle and names the agent to route around.",
        trace: include_str!("../demo/02_agent_pair.jsonl"),
        config: None,
    },
    Scenario {
        kind: "multi_agent",
        title: "Planner, coder, tester, planner, coder...",
        story: "No two agents talk to each other often, yet the work goes round a \
                three-agent circle. When the first hop of the circle comes around \
                again, loopguard reports a multi-agent cycle and tells the \
                orchestrator to break it.",
        trace: include_str!("../demo/03_multi_agent.jsonl"),
        config: None,
    },
    Scenario {
        kind: "topic_cycle",
        title: "One flaky test, passed from agent to agent",
        story: "Every agent passes the same flaky-test topic to someone else; nobody \
                owns it. More than 3 handoffs on one topic is a cycle even when the \
                agents differ, so the 4th handoff is flagged.",
        trace: include_str!("../demo/04_topic_cycle.jsonl"),
        config: None,
    },
    Scenario {
        kind: "edge_limit",
        title: "The planner sends the researcher out once too often",
        story: "A research graph goes planner, researcher, critic, writer and back to \
                the planner, and the progress reports say the same thing each round. \
                Each hop along one edge without progress counts; past the limit \
                loopguard aborts the task as stuck (aborted_stuck). The default limit \
                is 5 hops; this trace lowers it to 2 for planner->researcher.",
        trace: include_str!("../demo/05_edge_limit.jsonl"),
        config: Some(include_str!("../demo/05_edge_limit.toml")),
    },
    Scenario {
        kind: "phase_visits",
        title: "Back into the test phase, again",
        story: "The workflow keeps returning to the test phase from fix and from \
                review. Entering one phase too often is a loop even when every way \
                in differs: loopguard blocks the entry and escalates to a human. The \
                default is 10 visits; this trace allows the test phase 3.",
        trace: include_str!("../demo/06_phase_visits.jsonl"),
        config: Some(include_str!("../demo/06_phase_visits.toml")),
    },
    Scenario {
        kind: "transition_limit",
        title: "build -> test, one time too many",
        story: "Tests get fixed a few at a time, so the progress rule never fires, but \
                the pipeline takes the same build->test step over and over. Past the \
                limit loopguard blocks the transition and escalates. The default is \
                5 repeats; this trace allows 2.",
        trace: include_str!("../demo/07_transition_limit.jsonl"),
        config: Some(include_str!("../demo/07_transition_limit.toml")),
    },
    Scenario {
        kind: "oscillation",
        title: "Draft, review, draft, review",
        story: "The document bounces between draft and review. When the recent \
                transitions are one short cycle repeated twice in full \
                (draft->review, review->draft, twice), loopguard answers block: the \
                orchestrator should refuse this transition and try something else.",
        trace: include_str!("../demo/08_oscillation.jsonl"),
        config: None,
    },
    Scenario {
        kind: "repeated_output",
        title: "The same failed patch, nine times",
        story: "The coder's failed turns produce the same output, give or take \
                whitespace. Three identical failed outputs in a row earn a pivot: a \
                directive to drop the approach. After two pivots, the third run of \
                three pauses the task (paused) until a human steps in.",
        trace: include_str!("../demo/09_repeated_output.jsonl"),
        config: None,
    },
];

/// Runs `loopguard demo`.
pub(crate) async fn run(args: &DemoArgs) -> anyhow::Result<Outcome> {
    match args.format {
        Format::Text => text().await?,
        Format::Json => json().await?,
        Format::Jsonl => jsonl().await?,
    }
    Ok(Outcome::Clean)
}

/// A fresh engine with the scenario's settings.
fn engine_for(scenario: &Scenario) -> anyhow::Result<LoopGuard> {
    let config = match scenario.config {
        Some(toml) => Config::from_toml_str(toml)
            .map_err(|err| anyhow!("the {} demo's config: {err}", scenario.kind))?,
        None => Config::default(),
    };
    LoopGuard::new(config).with_context(|| format!("the {} demo's config", scenario.kind))
}

async fn text() -> anyhow::Result<()> {
    let mut out = anstream::stdout().lock();
    let bold = Style::new().bold();
    let heading = AnsiColor::Blue.on_default().bold();
    let dim = Style::new().dimmed();
    writeln!(
        out,
        "{bold}loopguard demo{bold:#}: {} recorded traces, one per built-in structural loop kind.\n\
         Each is replayed as `loopguard replay FILE --format text` would print it.",
        SCENARIOS.len()
    )?;
    for (number, scenario) in SCENARIOS.iter().enumerate() {
        writeln!(out)?;
        writeln!(
            out,
            "{heading}== {}/{}  {}: {}{heading:#}",
            number + 1,
            SCENARIOS.len(),
            scenario.kind,
            scenario.title
        )?;
        for line in wrap(scenario.story, 78) {
            writeln!(out, "{line}")?;
        }
        if let Some(config) = scenario.config {
            let settings: Vec<&str> = config
                .lines()
                .map(str::trim)
                .filter(|line| !line.is_empty() && !line.starts_with('#'))
                .collect();
            writeln!(out, "{dim}config: {}{dim:#}", settings.join(" "))?;
        }
        writeln!(out)?;
        out.flush()?;
        let engine = engine_for(scenario)?;
        let mut output = Text::new(&mut out, anstream::stderr());
        let report = replay_into(
            &engine,
            scenario.trace.as_bytes(),
            scenario.kind,
            &mut output,
        )
        .await?;
        if !shows_its_kind(scenario, &report) {
            writeln!(
                out,
                "{}(this build found no {} detection in this trace){:#}",
                AnsiColor::Yellow.on_default(),
                scenario.kind,
                AnsiColor::Yellow.on_default(),
            )?;
        }
    }
    out.flush()?;
    Ok(())
}

async fn json() -> anyhow::Result<()> {
    let mut scenarios = Vec::with_capacity(SCENARIOS.len());
    for scenario in &SCENARIOS {
        let engine = engine_for(scenario)?;
        let report = replay_into(
            &engine,
            scenario.trace.as_bytes(),
            scenario.kind,
            &mut Quiet,
        )
        .await?;
        scenarios.push(serde_json::json!({
            "name": scenario.kind,
            "kind": scenario.kind,
            "title": scenario.title,
            "config": scenario.config,
            "report": report,
        }));
    }
    let mut out = BufWriter::new(io::stdout().lock());
    serde_json::to_writer_pretty(&mut out, &serde_json::json!({ "scenarios": scenarios }))?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

async fn jsonl() -> anyhow::Result<()> {
    let mut out = BufWriter::new(io::stdout().lock());
    for scenario in &SCENARIOS {
        let engine = engine_for(scenario)?;
        let mut output = Jsonl::tagged(&mut out, scenario.kind);
        replay_into(
            &engine,
            scenario.trace.as_bytes(),
            scenario.kind,
            &mut output,
        )
        .await?;
    }
    out.flush()?;
    Ok(())
}

fn shows_its_kind(scenario: &Scenario, report: &Report) -> bool {
    report
        .tasks
        .iter()
        .flat_map(|task| &task.detections)
        .any(|detection| detection.kind == scenario.kind)
}

/// Words of `text` in lines of at most `width` columns (a longer word gets
/// a line of its own).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_trace_and_config_is_valid() {
        for scenario in &SCENARIOS {
            for (number, line) in scenario.trace.lines().enumerate() {
                if let Err(err) = loopguard_core_types::Event::from_json(line) {
                    panic!("{} line {}: {err}", scenario.kind, number + 1);
                }
            }
            if let Err(err) = engine_for(scenario) {
                panic!("{}: {err:#}", scenario.kind);
            }
        }
    }

    #[test]
    fn scenarios_cover_distinct_builtin_kinds() {
        let mut kinds: Vec<&str> = SCENARIOS.iter().map(|scenario| scenario.kind).collect();
        assert!(
            kinds
                .iter()
                .all(|kind| loopguard_core_types::kinds::ALL.contains(kind))
        );
        kinds.sort_unstable();
        kinds.dedup();
        assert_eq!(kinds.len(), SCENARIOS.len());
    }

    #[test]
    fn wrap_keeps_lines_short_and_words_whole() {
        let lines = wrap("one two three four five six", 9);
        assert_eq!(lines, ["one two", "three", "four five", "six"]);
        assert!(wrap("", 10).is_empty());
    }
}
