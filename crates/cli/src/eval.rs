//! `loopguard eval`: how well the detections of the configured engine line
//! up with labelled loops, at the level of events and of whole traces, next
//! to the baselines a detector has to beat.
//!
//! A trace `NAME.jsonl` is labelled by its sidecar `NAME.expected.jsonl`:
//! one `{"line": N}` a line for each line that is part of a loop (a `kind`
//! and other fields may be there and are ignored; an empty sidecar labels
//! a trace without loops). Each trace runs through a fresh engine with no
//! store.
//!
//! - **Events**: a line with a detection (of the kinds scored) is a true
//!   positive when a labelled line lies within `--within` lines of it, a
//!   false positive otherwise; a labelled line with no detection within
//!   that distance is a false negative.
//! - **Traces**: a trace with labels is a loop. It is predicted one when it
//!   has any detection, or, more strictly, when a task ends behind the
//!   human gate (escalated, paused or aborted).
//! - **Baselines**: the precision of a detection on a random line (the
//!   share of lines within `--within` of a label, weighted by where the
//!   detections are), and calling every trace longer than the set's median
//!   a loop.

use std::collections::BTreeSet;
use std::io::Write;

use loopguard_core_types::TaskStatus;
use loopguard_host::ReplayItem;
use serde::Serialize;

use crate::cli::{EvalArgs, ScoreFormat};
use crate::outcome::Outcome;
use crate::score::{
    Counts, Rates, read_sidecar, replay_trace, scored_kinds, sidecar_of, traces_of,
};
use crate::setup::{self, ConfigSource, Setup};

/// One trace replayed: its lines, its detection lines, whether a task
/// ended gated.
struct Replayed {
    lines: u64,
    detections: BTreeSet<u64>,
    gated: bool,
}

/// Whether some line of `set` lies within `within` of `line`.
fn near(set: &BTreeSet<u64>, line: u64, within: u64) -> bool {
    set.range(line.saturating_sub(within)..=line.saturating_add(within))
        .next()
        .is_some()
}

/// Event-level counts of one trace.
fn event_counts(labels: &BTreeSet<u64>, detections: &BTreeSet<u64>, within: u64) -> Counts {
    let tp = detections
        .iter()
        .filter(|&&line| near(labels, line, within))
        .count() as u64;
    Counts {
        tp,
        fp: detections.len() as u64 - tp,
        fn_: labels
            .iter()
            .filter(|&&line| !near(detections, line, within))
            .count() as u64,
    }
}

/// Lines of a trace of `lines` lines within `within` of a label.
fn covered(labels: &BTreeSet<u64>, lines: u64, within: u64) -> u64 {
    (1..=lines)
        .filter(|&line| near(labels, line, within))
        .count() as u64
}

/// Trace-level counts of `predicted` against `actual`.
fn trace_counts(pairs: impl Iterator<Item = (bool, bool)>) -> Counts {
    let mut counts = Counts::default();
    for (actual, predicted) in pairs {
        match (actual, predicted) {
            (true, true) => counts.tp += 1,
            (false, true) => counts.fp += 1,
            (true, false) => counts.fn_ += 1,
            (false, false) => {}
        }
    }
    counts
}

/// Everything `eval` reports.
#[derive(Debug, Serialize)]
struct Evaluation {
    traces: usize,
    traces_with_loops: usize,
    within: u64,
    kinds: Vec<String>,
    events: Rates,
    /// The precision of a detection put on a random line of its trace.
    chance_event_precision: Option<f64>,
    trace_any_detection: Rates,
    trace_gated: Rates,
    trace_longer_than_median: Rates,
    median_lines: u64,
}

/// Runs `loopguard eval`.
pub(crate) async fn run(args: &EvalArgs, no_semantic: bool) -> anyhow::Result<Outcome> {
    let scored = scored_kinds(&args.kinds)?;
    let config = setup::config(ConfigSource {
        file: args.config.as_deref(),
        no_semantic,
        plugins: &[],
        isolation: None,
    })?;
    let traces = traces_of(&args.inputs)?;
    let mut labelled = Vec::new();
    for trace in traces {
        // Labelled lines; a kind, when given, must be a known one.
        let labels: BTreeSet<u64> = read_sidecar(&sidecar_of(&trace), false)?
            .into_iter()
            .map(|(line, _)| line)
            .collect();
        labelled.push((trace, labels));
    }
    let setup = Setup::start(config)?;
    let mut replayed = Vec::new();
    for (trace, _) in &labelled {
        let engine = setup.engine(None)?;
        let mut run = Replayed {
            lines: 0,
            detections: BTreeSet::new(),
            gated: false,
        };
        replay_trace(&engine, trace, |item| match item {
            ReplayItem::Decision(decision) => {
                run.lines = run.lines.max(decision.line);
                let kind_scored = |kind: &str| scored.iter().any(|scored| scored == kind);
                if decision.detections.iter().any(|d| kind_scored(&d.kind)) {
                    run.detections.insert(decision.line);
                }
                if matches!(
                    decision.status,
                    TaskStatus::Escalated | TaskStatus::Paused | TaskStatus::AbortedStuck
                ) {
                    run.gated = true;
                }
            }
            ReplayItem::Error(error) => run.lines = run.lines.max(error.line),
        })
        .await?;
        replayed.push(run);
    }
    let within = args.within;
    let mut events = Counts::default();
    let (mut chance_hits, mut chance_total) = (0.0, 0.0);
    for ((_, labels), run) in labelled.iter().zip(&replayed) {
        events.add(event_counts(labels, &run.detections, within));
        if run.lines > 0 {
            let share = covered(labels, run.lines, within) as f64 / run.lines as f64;
            chance_hits += share * run.detections.len() as f64;
            chance_total += run.detections.len() as f64;
        }
    }
    let mut lengths: Vec<u64> = replayed.iter().map(|run| run.lines).collect();
    lengths.sort_unstable();
    let median_lines = lengths.get(lengths.len() / 2).copied().unwrap_or_default();
    let actual = || labelled.iter().map(|(_, labels)| !labels.is_empty());
    let evaluation = Evaluation {
        traces: labelled.len(),
        traces_with_loops: actual().filter(|&loops| loops).count(),
        within,
        kinds: scored,
        events: events.into(),
        chance_event_precision: (chance_total > 0.0).then(|| chance_hits / chance_total),
        trace_any_detection: trace_counts(
            actual().zip(replayed.iter().map(|run| !run.detections.is_empty())),
        )
        .into(),
        trace_gated: trace_counts(actual().zip(replayed.iter().map(|run| run.gated))).into(),
        trace_longer_than_median: trace_counts(
            actual().zip(replayed.iter().map(|run| run.lines > median_lines)),
        )
        .into(),
        median_lines,
    };
    let mut out = std::io::stdout().lock();
    match args.format {
        ScoreFormat::Json => {
            serde_json::to_writer_pretty(&mut out, &evaluation)?;
            writeln!(out)?;
        }
        ScoreFormat::Text => write_text(&mut out, &evaluation, setup.semantic_notes())?,
    }
    Ok(Outcome::Clean)
}

fn rate(value: Option<f64>) -> String {
    value.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.3}"))
}

fn write_text(out: &mut impl Write, eval: &Evaluation, notes: Vec<String>) -> anyhow::Result<()> {
    for note in notes {
        writeln!(out, "note: {note}")?;
    }
    writeln!(
        out,
        "{} trace(s), {} with labelled loops; a detection counts within {} line(s) of a label",
        eval.traces, eval.traces_with_loops, eval.within
    )?;
    writeln!(
        out,
        "{:<34} {:>5} {:>5} {:>5} {:>9} {:>7} {:>7}",
        "level", "TP", "FP", "FN", "precision", "recall", "F1"
    )?;
    let longer = format!("trace: longer than {} lines", eval.median_lines);
    for (name, rates) in [
        ("events: lines with a detection", &eval.events),
        ("trace: any detection", &eval.trace_any_detection),
        ("trace: gated", &eval.trace_gated),
        (longer.as_str(), &eval.trace_longer_than_median),
    ] {
        writeln!(
            out,
            "{:<34} {:>5} {:>5} {:>5} {:>9} {:>7} {:>7}",
            name,
            rates.counts.tp,
            rates.counts.fp,
            rates.counts.fn_,
            rate(rates.precision),
            rate(rates.recall),
            rate(rates.f1)
        )?;
    }
    writeln!(
        out,
        "chance: a detection on a random line is within {} line(s) of a label with probability {}",
        eval.within,
        rate(eval.chance_event_precision)
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(lines: &[u64]) -> BTreeSet<u64> {
        lines.iter().copied().collect()
    }

    #[test]
    fn a_detection_counts_within_the_distance_of_a_label() {
        let labels = set(&[5, 20]);
        let detections = set(&[7, 12]);
        let within_3 = event_counts(&labels, &detections, 3);
        assert_eq!((within_3.tp, within_3.fp, within_3.fn_), (1, 1, 1));
        let within_1 = event_counts(&labels, &detections, 1);
        assert_eq!((within_1.tp, within_1.fp, within_1.fn_), (0, 2, 2));
        assert_eq!(covered(&labels, 20, 1), 5, "lines 4-6 and 19-20");
    }

    #[test]
    fn traces_are_counted_by_what_was_predicted() {
        let counts =
            trace_counts([(true, true), (true, false), (false, true), (false, false)].into_iter());
        assert_eq!((counts.tp, counts.fp, counts.fn_), (1, 1, 1));
    }
}
