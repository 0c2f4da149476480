//! `loopguard demo`: bundled traces, one per built-in loop kind, three that
//! only semantic matching catches, three judged by progress, three of stale
//! tool calls next to tool repetition that is work, and one query reworded
//! again and again next to a search refined once, and a loop stopped by its
//! budget next to work that spends as much. Normal work stands
//! beside the loops: a review that brings a new revision each round stays
//! silent beside one that ping-pongs.
//!
//! The traces live in `crates/cli/demo/` and are compiled into the binary,
//! so the demo needs no file at run time. Each is replayed through a fresh
//! engine with the default config (plus the budget scenario's own budget
//! and prices), exactly as `loopguard replay` would. The
//! embedding model is loaded once and shared by every scenario's engine
//! (with `--no-semantic`, none is loaded, and the semantic scenarios show
//! what exact text misses).

use std::io::{self, BufWriter, Write};

use anstyle::{AnsiColor, Style};
use anyhow::Context;
use loopguard_semantic::{JudgeKind, SameRequestJudge, Verdict};

use crate::cli::{DemoArgs, Format};
use crate::outcome::Outcome;
use crate::output::{Collect, Jsonl, Text, wrap};
use crate::replay::replay_into;
use crate::setup::{self, ConfigSource, Setup};

/// One bundled trace and what it shows.
#[derive(Debug)]
pub(crate) struct Scenario {
    /// The scenario's name: its kind, or a name of its own when another
    /// scenario shows the same kind.
    pub(crate) name: &'static str,
    /// The detection kind the trace shows.
    pub(crate) kind: &'static str,
    /// A one-line title.
    pub(crate) title: &'static str,
    /// What loops and what loopguard tells the orchestrator, in plain words.
    pub(crate) story: &'static str,
    /// The trace, JSON Lines.
    pub(crate) trace: &'static str,
    /// Settings of its own on top of the defaults (TOML: its budget and
    /// prices), or none.
    pub(crate) settings: &'static str,
}

/// Every scenario, in the order the demo plays them.
pub(crate) const SCENARIOS: [Scenario; 20] = [
    Scenario {
        name: "exact_failure",
        kind: "exact_failure",
        title: "The same compiler error, again and again",
        story: "The coder keeps hitting the same type error; the tester runs into it \
                too. The first failure is an attempt; each exact repeat is a loop, \
                whichever agent hit it and even though the test numbers moved in \
                between. loopguard warns at the first loop, asks the orchestrator to \
                inject the failure history at the second, and at the third (the 4th \
                identical failure) escalates: the task waits for a human.",
        trace: include_str!("../demo/01_exact_failure.jsonl"),
        settings: "",
    },
    Scenario {
        name: "agent_pair",
        kind: "agent_pair",
        title: "Two review rounds: one works, one ping-pongs",
        story: "Two pull requests go back and forth between the coder and the reviewer. \
                PR-480 brings a new revision every time and the reviewer's comments \
                change with it: that is work, however often the pair talks, and \
                nothing is flagged. PR-481's coder resends the same revision and the \
                reviewer repeats the same comment: an exchange that brings nothing new \
                counts, and so does the one it repeats. The 4th counted exchange \
                within 600 seconds is a cycle: loopguard answers break_cycle and names \
                the agent to route around.",
        trace: include_str!("../demo/02_agent_pair.jsonl"),
        settings: "",
    },
    Scenario {
        name: "multi_agent",
        kind: "multi_agent",
        title: "Planner, coder, tester, planner, coder...",
        story: "No two agents talk to each other often, yet the work goes round a \
                three-agent circle and nothing changes but the round number, which \
                only labels the round. Every handoff of the second lap repeats one of \
                the first, so both laps count; once the work has gone around twice in \
                full (the 6th handoff), loopguard reports a multi-agent cycle and tells \
                the orchestrator to break it.",
        trace: include_str!("../demo/03_multi_agent.jsonl"),
        settings: "",
    },
    Scenario {
        name: "topic_cycle",
        kind: "topic_cycle",
        title: "One flaky test, passed from agent to agent",
        story: "Every agent passes the same question about the flaky test on to someone \
                else; nobody owns it. Each handoff repeats a text its sender was handed, \
                so each counts, and more than 3 on one topic is a cycle even when the \
                agents differ: the 4th handoff is flagged.",
        trace: include_str!("../demo/04_topic_cycle.jsonl"),
        settings: "",
    },
    Scenario {
        name: "edge_limit",
        kind: "edge_limit",
        title: "The planner sends the researcher out a 6th time",
        story: "A research graph goes from the planner to the researcher, past a \
                critic or a writer, and back to the planner. The progress report \
                halfway says what the first one said, so it is no progress. The 6th \
                hop along planner->researcher without progress aborts the task as \
                stuck (aborted_stuck); the same hop is also a 6th repeat of one \
                transition, but the abort is the stronger answer.",
        trace: include_str!("../demo/05_edge_limit.jsonl"),
        settings: "",
    },
    Scenario {
        name: "phase_visits",
        kind: "phase_visits",
        title: "Back into the test phase, an 11th time",
        story: "The workflow keeps returning to the test phase, from fix, from lint \
                and from review in turn, so no single transition repeats often. \
                Entering one phase more than 10 times is a loop anyway: loopguard \
                blocks the 11th entry and escalates to a human.",
        trace: include_str!("../demo/06_phase_visits.jsonl"),
        settings: "",
    },
    Scenario {
        name: "transition_limit",
        kind: "transition_limit",
        title: "build -> test, a 6th time",
        story: "Some tests got fixed halfway, so the edge is not stuck and nothing \
                aborts, but the pipeline takes the same build->test step again and \
                again. The 6th occurrence of one transition is blocked and escalated \
                to a human.",
        trace: include_str!("../demo/07_transition_limit.jsonl"),
        settings: "",
    },
    Scenario {
        name: "oscillation",
        kind: "oscillation",
        title: "Draft, review, draft, review",
        story: "The document bounces between draft and review. When the recent \
                transitions are one short cycle repeated twice in full \
                (draft->review, review->draft, twice), loopguard answers block: the \
                orchestrator should refuse this transition and try something else.",
        trace: include_str!("../demo/08_oscillation.jsonl"),
        settings: "",
    },
    Scenario {
        name: "repeated_output",
        kind: "repeated_output",
        title: "The same failed patch, nine times",
        story: "The coder's failed turns produce the same output, give or take \
                whitespace. Three identical failed outputs in a row earn a pivot: a \
                directive to drop the approach. After two pivots, the third run of \
                three pauses the task (paused) until a human steps in.",
        trace: include_str!("../demo/09_repeated_output.jsonl"),
        settings: "",
    },
    Scenario {
        name: "collaboration_loop",
        kind: "collaboration_loop",
        title: "The same review request, reworded",
        story: "The planner keeps asking the coder to review the authentication code, \
                each time in other words and a quarter of an hour apart, too slowly for \
                any exchange window. loopguard compares each request with the earlier \
                ones from the planner to the coder by embedding similarity: \"Can you \
                review this auth code again?\" is 0.889 similar to line 1's request, \
                above the 0.85 threshold, so it is a loop. The same request to the \
                tester (line 2) is another pair, and the changelog request (line 4) \
                is unrelated: neither counts. The third reworded repeat is the \
                task's third loop, and the task goes behind the human gate.",
        trace: include_str!("../demo/10_collaboration_loop.jsonl"),
        settings: "",
    },
    Scenario {
        name: "semantic_topic_cycle",
        kind: "topic_cycle",
        title: "One flaky test, in four wordings",
        story: "Four agents pass the flaky checkout test along, and no two of them word \
                it alike, so exact text sees four different topics and no agent pair \
                repeats. By embedding similarity each handoff joins the topic line 1 \
                started, \"Fix the flaky checkout test\" (\"The flaky checkout test \
                still needs a fix\", line 4, is 0.945 similar to it), and the 4th \
                exchange on that topic within 600 seconds is a topic cycle: loopguard \
                says how similar it was, to which line, and names the agent to route \
                around.",
        trace: include_str!("../demo/11_semantic_topic_cycle.jsonl"),
        settings: "",
    },
    Scenario {
        name: "repeated_query",
        kind: "repeated_query",
        title: "The researcher is sent the same search again",
        story: "The planner asks the researcher for recent papers on retrieval \
                augmented generation and hears there is nothing newer than the 2023 \
                survey. Asking once more after an answer is fair (line 3). But the \
                researcher's answer never changes (lines 4 and 6: no new information \
                in the replies, and no progress event changed a metric), so each \
                further rewording is a repeated query: loopguard asks the orchestrator \
                to inject what the last search found, low at the first repeat and \
                medium from the second. The researcher's unchanged answer, handed to \
                a planner who only rewords, repeats too (lines 4 and 6). Once the \
                researcher's notes land (line 8, one more file changed), asking again \
                is fair and nothing is flagged.",
        trace: include_str!("../demo/12_repeated_query.jsonl"),
        settings: "",
    },
    Scenario {
        name: "regression",
        kind: "regression",
        title: "A progressive retry and a stuck one",
        story: "Two parser tasks keep failing with different messages, so no failure \
                repeats exactly. PARSER-7's test reports show fewer failures and more \
                coverage each time: that is progress, and nothing is flagged. \
                PARSER-8's failing tests rise 1, 3, 5, 8: each rise is a regression \
                and counts as a loop although every message differs, and the third \
                rise puts the task behind the human gate.",
        trace: include_str!("../demo/13_regression.jsonl"),
        settings: "",
    },
    Scenario {
        name: "no_progress",
        kind: "no_progress",
        title: "Failing on, with no tests at all",
        story: "The coder and the reviewer trade fixes for a settings loader; every \
                failure is new, and the task never reports a test or a changed file. \
                Three differing failures in a row with no progress signal are a \
                no_progress loop: \"no tests\" is itself a warning sign.",
        trace: include_str!("../demo/14_no_progress.jsonl"),
        settings: "",
    },
    Scenario {
        name: "external_failure",
        kind: "external_failure",
        title: "The documentation API keeps timing out",
        story: "The researcher's calls to an outside API time out, and so does the \
                coder's. These are not the agents' loops: loopguard reports each as an \
                external failure, never counts it as a loop, and escalates at the \
                third in a row as a dependency problem for a human to look at.",
        trace: include_str!("../demo/15_external_failure.jsonl"),
        settings: "",
    },
    Scenario {
        name: "tool_repeat",
        kind: "tool_repeat",
        title: "The same glob, over and over (and work that only looks like it)",
        story: "The coder globs for the same files and gets the same list back, again \
                and again. The third identical call is the first stale-call \
                detection: loopguard asks the orchestrator to inject a directive it \
                can hand the agent as is (the call, how often, what it returned), \
                then again, and from the fifth call escalates. Task OPS-5 repeats \
                itself too, legitimately: a job polled until it is done (its status \
                changes every time), alerts read page by page, runbook files written \
                with the same short \"OK\". None of it is flagged.",
        trace: include_str!("../demo/16_tool_repeat.jsonl"),
        settings: "",
    },
    Scenario {
        name: "tool_cycle",
        kind: "tool_cycle",
        title: "Two files read in turn, forever",
        story: "The coder reads invoice.py, then discount.py, then invoice.py again, \
                and nothing in either file changes. The fourth read completes the \
                second lap of a two-call cycle: loopguard reports the cycle with the \
                files in order and tells the agent to use what it already read.",
        trace: include_str!("../demo/17_tool_cycle.jsonl"),
        settings: "",
    },
    Scenario {
        name: "tool_no_new_info",
        kind: "tool_no_new_info",
        title: "Different searches, the same empty answer; one search reworded",
        story: "The ops agent looks for the Helm values file under four patterns and \
                gets \"No files found\" every time. The arguments vary, the answer \
                does not: from the third search loopguard reports no new information \
                and says to change approach; listing the directory brings something \
                new and ends the run. The researcher rewords one web search twice \
                and hears \"none\" each time, too short to compare: with semantic \
                matching on, the same-request judge calls the three queries one, so \
                the third call is a repeat, and the reason says which query matched \
                which line.",
        trace: include_str!("../demo/18_tool_no_new_info.jsonl"),
        settings: "",
    },
    Scenario {
        name: "tool_rephrase",
        kind: "tool_rephrase",
        title: "One search in five wordings, no page opened",
        story: "The researcher asks the web about AI act fines for startups, then asks \
                again in other words, and again: each search returns other pages, so no \
                call is stale, but none is opened. The 3rd rephrase of one query (its \
                4th wording) is a tool_rephrase detection: loopguard lists the wordings \
                tried and tells the agent to change its approach, a different source, \
                tool or question, not the wording. The analyst of LEGAL-32 refines a \
                GDPR search once, opens a page from its results and goes on to a new \
                question: that is research, and nothing is flagged.",
        trace: include_str!("../demo/19_tool_rephrase.jsonl"),
        settings: "",
    },
    Scenario {
        name: "budget",
        kind: "budget",
        title: "A search loop that burns money, and work that costs the same",
        story: "Two tasks spend the same: six web searches each, at 20,000 input and \
                1,500 output tokens a call, priced from [pricing.gpt-4o]. The writer of \
                DOCS-3 asks six different questions and gets answers; the researcher of \
                RESEARCH-7 asks one question six times and hears \"No results found.\" \
                The demo sets [budget] max_loop_cost_usd = 0.25: the spend in loops is \
                what the events a loop detection names cost. At the fourth search the \
                loop has cost $0.26, and loopguard escalates with a budget detection \
                that names the limit, the spend and the loop that cost most. DOCS-3 \
                spends as much, in no loop, and is never stopped.",
        trace: include_str!("../demo/20_budget.jsonl"),
        settings: "[budget]\nmax_loop_cost_usd = 0.25\n\
                   [pricing.gpt-4o]\ninput_per_mtok = 2.5\noutput_per_mtok = 10.0\n",
    },
];

/// A fresh engine for `scenario`: the demo's config with the scenario's
/// own settings.
fn scenario_engine(demo: &Setup, scenario: &Scenario) -> anyhow::Result<loopguard_host::LoopGuard> {
    if scenario.settings.is_empty() {
        return demo.engine(None);
    }
    let own = loopguard_config::Config::from_toml_str(scenario.settings)
        .with_context(|| format!("the {} scenario's settings", scenario.name))?;
    let mut config = demo.config.clone();
    config.budget = own.budget;
    config.pricing = own.pricing;
    demo.engine_with(config, None)
}

/// A pair of requests the judges section compares, and what it shows.
#[derive(Debug)]
pub(crate) struct JudgePair {
    /// What the pair shows, in a few words.
    pub(crate) title: &'static str,
    /// The first request.
    pub(crate) a: &'static str,
    /// The second request.
    pub(crate) b: &'static str,
}

/// The judges section's heading.
const JUDGES_TITLE: &str = "Same request? cosine vs calibrated judge";

/// What the judges section shows, in plain words.
const JUDGES_STORY: &str = "Two requests can be close by cosine and still ask for \
    different things: another PR, another number, the opposite direction. The cosine judge \
    (similarity.judge = \"cosine\") calls a pair the same request when the cosine is above \
    similarity.request_threshold; the calibrated judge (the default) also weighs what the two \
    texts differ in, word by word, and vetoes a differing identifier or number. Both judge \
    these two pairs live:";

/// The pairs both judges compare, live.
pub(crate) const JUDGE_PAIRS: [JudgePair; 2] = [
    JudgePair {
        title: "one number apart",
        a: "Review PR #412 for security issues",
        b: "Review PR #418 for security issues",
    },
    JudgePair {
        title: "a rewording",
        a: "Can you review this authentication code?",
        b: "Could you review this authentication code again?",
    },
];

/// One pair as both judges saw it.
struct Judged {
    pair: &'static JudgePair,
    cosine: f32,
    /// The cosine judge's verdict, then the calibrated judge's.
    verdicts: [Verdict; 2],
}

/// Judges every pair of [`JUDGE_PAIRS`] with the cosine and the calibrated
/// judge at the configured thresholds; `None` without the model.
async fn judge_pairs(demo: &Setup) -> anyhow::Result<Option<Vec<Judged>>> {
    let Some(service) = &demo.service else {
        return Ok(None);
    };
    let detectors = demo.detectors();
    let similarity = &demo.config.similarity;
    // The cosine judge next to the calibrated one the defaults run (with
    // the tuned encoder when they turn it on).
    let calibrated = match demo.judge.kind() {
        JudgeKind::Calibrated => demo.judge.clone(),
        JudgeKind::Cosine => SameRequestJudge::of_kind(JudgeKind::Calibrated),
    };
    let judges = [SameRequestJudge::cosine(), calibrated];
    let mut judged = Vec::with_capacity(JUDGE_PAIRS.len());
    for pair in &JUDGE_PAIRS {
        let cosine = detectors
            .similarity(pair.a, pair.b)
            .await
            .context("cannot compare the demo's requests")?;
        let mut verdicts = Vec::with_capacity(judges.len());
        for judge in &judges {
            let threshold = judge.threshold_for(similarity, None).value;
            verdicts.push(
                judge
                    .judge(service, pair.a, pair.b, cosine, threshold)
                    .await
                    .context("cannot judge the demo's requests")?,
            );
        }
        let verdicts: [Verdict; 2] = verdicts
            .try_into()
            .map_err(|_| anyhow::anyhow!("two judges, two verdicts"))?;
        judged.push(Judged {
            pair,
            cosine,
            verdicts,
        });
    }
    Ok(Some(judged))
}

/// "yes" or "no".
fn yes_no(same: bool) -> &'static str {
    if same { "yes" } else { "no" }
}

/// Runs `loopguard demo`.
pub(crate) async fn run(args: &DemoArgs, no_semantic: bool) -> anyhow::Result<Outcome> {
    // The default settings (with `--no-semantic` applied) and the embedding
    // model, loaded once for every scenario; each scenario gets a fresh
    // engine, so no scenario's state leaks into the next.
    let config = setup::config(ConfigSource {
        no_semantic,
        ..ConfigSource::default()
    })?;
    let demo = Setup::start(config)?;
    match args.format {
        Format::Text => text(&demo).await?,
        Format::Json => json(&demo).await?,
        Format::Jsonl => jsonl(&demo).await?,
    }
    Ok(Outcome::Clean)
}

async fn text(demo: &Setup) -> anyhow::Result<()> {
    let mut out = anstream::stdout().lock();
    let bold = Style::new().bold();
    let heading = AnsiColor::Blue.on_default().bold();
    writeln!(
        out,
        "{bold}loopguard demo{bold:#}: {} recorded traces, one per built-in loop kind, and a \
         topic cycle\nthat only similarity sees. Each is replayed as `loopguard replay FILE \
         --format text` would print it.",
        SCENARIOS.len()
    )?;
    for note in demo.semantic_notes() {
        let label = AnsiColor::Yellow.on_default().bold();
        for (number, line) in wrap(&note, 72).iter().enumerate() {
            if number == 0 {
                writeln!(out, "{label}note:{label:#} {line}")?;
            } else {
                writeln!(out, "      {line}")?;
            }
        }
    }
    for (number, scenario) in SCENARIOS.iter().enumerate() {
        writeln!(out)?;
        writeln!(
            out,
            "{heading}== {}/{}  {}: {}{heading:#}",
            number + 1,
            SCENARIOS.len(),
            scenario.name,
            scenario.title
        )?;
        for line in wrap(scenario.story, 78) {
            writeln!(out, "{line}")?;
        }
        writeln!(out)?;
        out.flush()?;
        let engine = scenario_engine(demo, scenario)?;
        let mut output = Text::new(&mut out, anstream::stderr());
        let summary = replay_into(
            &engine,
            scenario.trace.as_bytes(),
            scenario.name,
            &mut output,
        )
        .await?;
        if !summary.has_kind(scenario.kind) {
            let why = if demo.service.is_some() {
                "this build found no {} detection in this trace"
            } else {
                "no {} detection: semantic matching is off"
            };
            writeln!(
                out,
                "{}({}){:#}",
                AnsiColor::Yellow.on_default(),
                why.replace("{}", scenario.kind),
                AnsiColor::Yellow.on_default(),
            )?;
        }
    }
    writeln!(out)?;
    writeln!(out, "{heading}== {JUDGES_TITLE}{heading:#}")?;
    for line in wrap(JUDGES_STORY, 78) {
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    match judge_pairs(demo).await? {
        None => writeln!(
            out,
            "{}(skipped: judging needs the embedding model, and semantic matching is off){:#}",
            AnsiColor::Yellow.on_default(),
            AnsiColor::Yellow.on_default(),
        )?,
        Some(judged) => {
            for Judged {
                pair,
                cosine,
                verdicts,
            } in &judged
            {
                writeln!(out)?;
                writeln!(out, "{bold}{}{bold:#}, cosine {cosine:.3}:", pair.title)?;
                writeln!(out, "  A: {}", pair.a)?;
                writeln!(out, "  B: {}", pair.b)?;
                for verdict in verdicts {
                    writeln!(
                        out,
                        "  {:<17} same request: {}, {}",
                        format!("{} judge:", verdict.judge),
                        yes_no(verdict.same),
                        verdict.reason()
                    )?;
                }
            }
        }
    }
    out.flush()?;
    Ok(())
}

async fn json(demo: &Setup) -> anyhow::Result<()> {
    let mut scenarios = Vec::with_capacity(SCENARIOS.len());
    for scenario in &SCENARIOS {
        let engine = scenario_engine(demo, scenario)?;
        let mut report = Collect::default();
        replay_into(
            &engine,
            scenario.trace.as_bytes(),
            scenario.name,
            &mut report,
        )
        .await?;
        let mut report = report.0.finish();
        report.notes = demo.semantic_notes();
        scenarios.push(serde_json::json!({
            "name": scenario.name,
            "kind": scenario.kind,
            "title": scenario.title,
            "report": report,
        }));
    }
    let judges = judge_pairs(demo).await?.map(|judged| {
        judged
            .iter()
            .map(|j| {
                let verdicts: serde_json::Map<String, serde_json::Value> = j
                    .verdicts
                    .iter()
                    .map(|v| {
                        (
                            v.judge.to_string(),
                            serde_json::json!({
                                "same": v.same,
                                "score": v.score,
                                "threshold": v.threshold,
                                "reason": v.reason(),
                            }),
                        )
                    })
                    .collect();
                serde_json::json!({
                    "title": j.pair.title,
                    "a": j.pair.a,
                    "b": j.pair.b,
                    "cosine": j.cosine,
                    "verdicts": verdicts,
                })
            })
            .collect::<Vec<_>>()
    });
    let mut out = BufWriter::new(io::stdout().lock());
    serde_json::to_writer_pretty(
        &mut out,
        &serde_json::json!({ "scenarios": scenarios, "judges": judges }),
    )?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

async fn jsonl(demo: &Setup) -> anyhow::Result<()> {
    let mut out = BufWriter::new(io::stdout().lock());
    for scenario in &SCENARIOS {
        let engine = scenario_engine(demo, scenario)?;
        let mut output = Jsonl::tagged(&mut out, scenario.name);
        replay_into(
            &engine,
            scenario.trace.as_bytes(),
            scenario.name,
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
                    panic!("{} line {}: {err}", scenario.name, number + 1);
                }
            }
        }
    }

    #[test]
    fn scenarios_have_distinct_names_and_builtin_kinds() {
        assert!(
            SCENARIOS
                .iter()
                .all(|scenario| loopguard_core_types::kinds::ALL.contains(&scenario.kind))
        );
        let mut names: Vec<&str> = SCENARIOS.iter().map(|scenario| scenario.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SCENARIOS.len());
        // A scenario named after a kind shows that kind.
        assert!(
            SCENARIOS
                .iter()
                .all(|scenario| scenario.name == scenario.kind
                    || !loopguard_core_types::kinds::ALL.contains(&scenario.name))
        );
    }
}
