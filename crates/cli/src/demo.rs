//! `loopguard demo`: bundled traces, one per built-in structural loop kind.
//!
//! The traces live in `crates/cli/demo/` and are compiled into the binary,
//! so the demo needs no file at run time. Each is replayed through a fresh
//! engine with the default config, exactly as `loopguard replay` would.

use std::io::{self, BufWriter, Write};

use anstyle::{AnsiColor, Style};
use anyhow::Context;
use loopguard_core_types::Config;
use loopguard_host::LoopGuard;

use crate::Outcome;
use crate::cli::{DemoArgs, Format};
use crate::output::{Collect, Jsonl, Text, wrap};
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
    },
    Scenario {
        kind: "agent_pair",
        title: "Coder and reviewer ping-pong",
        story: "The reviewer and the coder hand the same pull request back and forth. \
                More than 3 exchanges between one pair within 600 seconds is a \
                cycle, so the 4th exchange is flagged: loopguard answers \
                break_cycle and names the agent to route around.",
        trace: include_str!("../demo/02_agent_pair.jsonl"),
    },
    Scenario {
        kind: "multi_agent",
        title: "Planner, coder, tester, planner, coder...",
        story: "No two agents talk to each other often, yet the work goes round a \
                three-agent circle. One lap is an ordinary iteration; once the work \
                has gone around twice in full (the 6th handoff), loopguard reports a \
                multi-agent cycle and tells the orchestrator to break it.",
        trace: include_str!("../demo/03_multi_agent.jsonl"),
    },
    Scenario {
        kind: "topic_cycle",
        title: "One flaky test, passed from agent to agent",
        story: "Every agent passes the same flaky-test topic to someone else; nobody \
                owns it. More than 3 handoffs on one topic is a cycle even when the \
                agents differ, so the 4th handoff is flagged.",
        trace: include_str!("../demo/04_topic_cycle.jsonl"),
    },
    Scenario {
        kind: "edge_limit",
        title: "The planner sends the researcher out a 6th time",
        story: "A research graph goes from the planner to the researcher, past a \
                critic or a writer, and back to the planner. The progress report \
                halfway says what the first one said, so it is no progress. The 6th \
                hop along planner->researcher without progress aborts the task as \
                stuck (aborted_stuck); the same hop is also a 6th repeat of one \
                transition, but the abort is the stronger answer.",
        trace: include_str!("../demo/05_edge_limit.jsonl"),
    },
    Scenario {
        kind: "phase_visits",
        title: "Back into the test phase, an 11th time",
        story: "The workflow keeps returning to the test phase, from fix, from lint \
                and from review in turn, so no single transition repeats often. \
                Entering one phase more than 10 times is a loop anyway: loopguard \
                blocks the 11th entry and escalates to a human.",
        trace: include_str!("../demo/06_phase_visits.jsonl"),
    },
    Scenario {
        kind: "transition_limit",
        title: "build -> test, a 6th time",
        story: "Some tests got fixed halfway, so the edge is not stuck and nothing \
                aborts, but the pipeline takes the same build->test step again and \
                again. The 6th occurrence of one transition is blocked and escalated \
                to a human.",
        trace: include_str!("../demo/07_transition_limit.jsonl"),
    },
    Scenario {
        kind: "oscillation",
        title: "Draft, review, draft, review",
        story: "The document bounces between draft and review. When the recent \
                transitions are one short cycle repeated twice in full \
                (draft->review, review->draft, twice), loopguard answers block: the \
                orchestrator should refuse this transition and try something else.",
        trace: include_str!("../demo/08_oscillation.jsonl"),
    },
    Scenario {
        kind: "repeated_output",
        title: "The same failed patch, nine times",
        story: "The coder's failed turns produce the same output, give or take \
                whitespace. Three identical failed outputs in a row earn a pivot: a \
                directive to drop the approach. After two pivots, the third run of \
                three pauses the task (paused) until a human steps in.",
        trace: include_str!("../demo/09_repeated_output.jsonl"),
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

/// A fresh engine with the default settings: one per scenario, so no
/// scenario's state leaks into the next.
fn engine() -> anyhow::Result<LoopGuard> {
    LoopGuard::new(Config::default()).context("the default config")
}

async fn text() -> anyhow::Result<()> {
    let mut out = anstream::stdout().lock();
    let bold = Style::new().bold();
    let heading = AnsiColor::Blue.on_default().bold();
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
        writeln!(out)?;
        out.flush()?;
        let engine = engine()?;
        let mut output = Text::new(&mut out, anstream::stderr());
        let summary = replay_into(
            &engine,
            scenario.trace.as_bytes(),
            scenario.kind,
            &mut output,
        )
        .await?;
        if !summary.has_kind(scenario.kind) {
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
        let engine = engine()?;
        let mut report = Collect::default();
        replay_into(
            &engine,
            scenario.trace.as_bytes(),
            scenario.kind,
            &mut report,
        )
        .await?;
        let report = report.0.finish();
        scenarios.push(serde_json::json!({
            "kind": scenario.kind,
            "title": scenario.title,
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
        let engine = engine()?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_trace_line_is_a_valid_event() {
        for scenario in &SCENARIOS {
            for (number, line) in scenario.trace.lines().enumerate() {
                if let Err(err) = loopguard_core_types::Event::from_json(line) {
                    panic!("{} line {}: {err}", scenario.kind, number + 1);
                }
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
}
