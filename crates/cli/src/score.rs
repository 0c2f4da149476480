//! `loopguard score`: recorded traces replayed through the configured
//! engine, their detections compared with what their sidecars say they
//! should produce, precision and recall per kind.
//!
//! A trace `NAME.jsonl` is scored against `NAME.expected.jsonl`: one
//! expected detection a line, `{"line": N, "kind": "..."}` (other fields,
//! such as a `note`, are ignored; an empty sidecar expects none). A
//! detection of a scored kind at an expected line and kind is a true
//! positive, one nobody expected a false positive, an expected one that
//! does not fire a false negative. Only the kinds `--kinds` names are
//! scored (every kind without it). Each trace runs through a fresh engine
//! with no store, so traces never see each other's tasks.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};
use loopguard_core_types::kinds;
use loopguard_host::{LoopGuard, ReplayItem, replay_each};
use serde::Serialize;
use serde_json::Value;

use crate::cli::{ScoreArgs, ScoreFormat};
use crate::outcome::Outcome;
use crate::setup::{self, ConfigSource, Setup};

/// The sidecar of a trace: `x.jsonl` -> `x.expected.jsonl`.
pub(crate) fn sidecar_of(trace: &Path) -> PathBuf {
    let stem = trace
        .file_name()
        .and_then(|name| name.to_str())
        .and_then(|name| name.strip_suffix(".jsonl"))
        .unwrap_or_default();
    trace.with_file_name(format!("{stem}.expected.jsonl"))
}

/// The traces named: files as given, directories' `*.jsonl` files (not
/// their sidecars), sorted by name.
pub(crate) fn traces_of(inputs: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut traces = Vec::new();
    for input in inputs {
        if input.is_dir() {
            let mut found: Vec<PathBuf> = fs::read_dir(input)
                .with_context(|| format!("cannot read the directory {}", input.display()))?
                .filter_map(|entry| entry.ok().map(|entry| entry.path()))
                .filter(|path| {
                    path.file_name()
                        .and_then(|name| name.to_str())
                        .is_some_and(|name| {
                            name.ends_with(".jsonl") && !name.ends_with(".expected.jsonl")
                        })
                })
                .collect();
            found.sort();
            if found.is_empty() {
                bail!("no trace (*.jsonl) in {}", input.display());
            }
            traces.extend(found);
        } else {
            traces.push(input.clone());
        }
    }
    Ok(traces)
}

/// One expected or fired detection: its line and kind.
type Key = (u64, String);

/// Reads a sidecar: every line a `{"line": N}` object, its `kind` (when
/// there, or when `kind_required`) a known kind; an error names the file
/// and the line. Other fields (a `note`) are ignored.
pub(crate) fn read_sidecar(
    path: &Path,
    kind_required: bool,
) -> anyhow::Result<Vec<(u64, Option<String>)>> {
    let text = fs::read_to_string(path).with_context(|| {
        format!(
            "cannot read {} (every trace needs a sidecar NAME.expected.jsonl, empty when it \
             expects nothing)",
            path.display()
        )
    })?;
    let mut entries = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("{} line {}", path.display(), index + 1);
        let value: Value =
            serde_json::from_str(line).map_err(|err| anyhow!("{}: not JSON: {err}", at()))?;
        let trace_line = value["line"]
            .as_u64()
            .filter(|&n| n >= 1)
            .ok_or_else(|| anyhow!("{}: `line` must be a line number (1 or more)", at()))?;
        let kind = match value["kind"].as_str() {
            Some(kind) if !kinds::ALL.contains(&kind) => bail!(
                "{}: unknown kind {kind:?} (one of {})",
                at(),
                kinds::ALL.join(", ")
            ),
            None if kind_required => bail!("{}: `kind` is missing", at()),
            kind => kind.map(str::to_owned),
        };
        entries.push((trace_line, kind));
    }
    Ok(entries)
}

/// A sidecar's expected detections, each with its kind.
fn read_expected(path: &Path) -> anyhow::Result<Vec<Key>> {
    Ok(read_sidecar(path, true)?
        .into_iter()
        .filter_map(|(line, kind)| Some((line, kind?)))
        .collect())
}

/// The kinds `--kinds` names (every kind when it names none); an unknown
/// one is an error listing the known ones.
pub(crate) fn scored_kinds(named: &[String]) -> anyhow::Result<Vec<String>> {
    if named.is_empty() {
        return Ok(kinds::ALL.iter().map(|kind| (*kind).to_owned()).collect());
    }
    if let Some(kind) = named
        .iter()
        .find(|kind| !kinds::ALL.contains(&kind.as_str()))
    {
        bail!(
            "--kinds: unknown kind {kind:?} (one of {})",
            kinds::ALL.join(", ")
        );
    }
    Ok(named.to_vec())
}

/// Replays the trace at `path` through `engine`, handing each answer to
/// `sink`; an error names the trace.
pub(crate) async fn replay_trace(
    engine: &LoopGuard,
    path: &Path,
    sink: impl FnMut(ReplayItem<'_>),
) -> anyhow::Result<()> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    replay_each(engine, BufReader::new(file), sink)
        .await
        .map_err(|err| anyhow!(err).context(format!("cannot read {}", path.display())))?;
    Ok(())
}

/// Counts of one kind, or of all.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub(crate) struct Counts {
    pub(crate) tp: u64,
    pub(crate) fp: u64,
    #[serde(rename = "fn")]
    pub(crate) fn_: u64,
}

impl Counts {
    fn precision(self) -> Option<f64> {
        ratio(self.tp, self.tp + self.fp)
    }

    fn recall(self) -> Option<f64> {
        ratio(self.tp, self.tp + self.fn_)
    }

    fn f1(self) -> Option<f64> {
        ratio(2 * self.tp, 2 * self.tp + self.fp + self.fn_)
    }

    pub(crate) fn add(&mut self, other: Counts) {
        self.tp += other.tp;
        self.fp += other.fp;
        self.fn_ += other.fn_;
    }
}

fn ratio(num: u64, den: u64) -> Option<f64> {
    (den > 0).then(|| num as f64 / den as f64)
}

/// One trace's result.
#[derive(Debug, Serialize)]
struct TraceScore {
    trace: String,
    expected: usize,
    fired: usize,
    /// Expected and not fired.
    missed: Vec<Found>,
    /// Fired and not expected.
    unexpected: Vec<Found>,
    line_errors: u64,
}

/// A detection by line and kind, as reported.
#[derive(Debug, Serialize)]
struct Found {
    line: u64,
    kind: String,
}

/// Every trace's result and the sums.
#[derive(Debug, Serialize)]
struct Scores {
    kinds: Vec<String>,
    per_kind: BTreeMap<String, Rates>,
    all: Rates,
    /// Lines with some scored detection, kind aside.
    by_line: Rates,
    traces_with_loops: usize,
    traces_with_loops_caught: usize,
    traces_without: usize,
    traces_without_silent: usize,
    traces: Vec<TraceScore>,
}

/// Counts with their rates, for the JSON.
#[derive(Debug, Serialize)]
pub(crate) struct Rates {
    #[serde(flatten)]
    pub(crate) counts: Counts,
    pub(crate) precision: Option<f64>,
    pub(crate) recall: Option<f64>,
    pub(crate) f1: Option<f64>,
}

impl From<Counts> for Rates {
    fn from(counts: Counts) -> Rates {
        Rates {
            counts,
            precision: counts.precision(),
            recall: counts.recall(),
            f1: counts.f1(),
        }
    }
}

/// Matches `fired` against `expected` (multisets of keys): true positives,
/// misses and false alarms.
fn matched(expected: &[Key], fired: &[Key]) -> (Vec<Key>, Vec<Key>, Vec<Key>) {
    let mut left: Vec<Key> = expected.to_vec();
    let (mut hits, mut unexpected) = (Vec::new(), Vec::new());
    for key in fired {
        match left.iter().position(|want| want == key) {
            Some(at) => hits.push(left.remove(at)),
            None => unexpected.push(key.clone()),
        }
    }
    (hits, left, unexpected)
}

/// Runs `loopguard score`.
pub(crate) async fn run(args: &ScoreArgs, no_semantic: bool) -> anyhow::Result<Outcome> {
    let scored = scored_kinds(&args.kinds)?;
    let config = setup::config(ConfigSource {
        file: args.config.as_deref(),
        no_semantic,
        plugins: &[],
        isolation: None,
    })?;
    let traces = traces_of(&args.inputs)?;
    // Every sidecar first: a missing or bad one stops before any replay.
    let mut sets = Vec::new();
    for trace in traces {
        let expected: Vec<Key> = read_expected(&sidecar_of(&trace))?
            .into_iter()
            .filter(|(_, kind)| scored.contains(kind))
            .collect();
        sets.push((trace, expected));
    }
    let setup = Setup::start(config)?;
    let mut per_kind: BTreeMap<String, Counts> = scored
        .iter()
        .map(|kind| (kind.clone(), Counts::default()))
        .collect();
    let mut by_line = Counts::default();
    let mut results = Vec::new();
    for (trace, expected) in &sets {
        let engine = setup.engine(None)?;
        let mut fired: Vec<Key> = Vec::new();
        let mut line_errors = 0;
        replay_trace(&engine, trace, |item| match item {
            ReplayItem::Decision(decision) => {
                for detection in &decision.detections {
                    let kind: &str = &detection.kind;
                    if scored.iter().any(|scored| scored == kind) {
                        fired.push((decision.line, kind.to_owned()));
                    }
                }
            }
            ReplayItem::Error(_) => line_errors += 1,
        })
        .await?;
        if line_errors > 0 {
            eprintln!(
                "loopguard: {}: {line_errors} line error(s) (`loopguard replay` lists them)",
                trace.display()
            );
        }
        let (hits, missed, unexpected) = matched(expected, &fired);
        for (_, kind) in &hits {
            bump(&mut per_kind, kind).tp += 1;
        }
        for (_, kind) in &missed {
            bump(&mut per_kind, kind).fn_ += 1;
        }
        for (_, kind) in &unexpected {
            bump(&mut per_kind, kind).fp += 1;
        }
        let lines = |keys: &[Key]| {
            let mut lines: Vec<(u64, String)> = keys
                .iter()
                .map(|(line, _)| (*line, String::new()))
                .collect();
            lines.dedup();
            lines
        };
        let (line_hits, line_missed, line_unexpected) = matched(&lines(expected), &lines(&fired));
        by_line.add(Counts {
            tp: line_hits.len() as u64,
            fp: line_unexpected.len() as u64,
            fn_: line_missed.len() as u64,
        });
        let found = |keys: Vec<Key>| {
            keys.into_iter()
                .map(|(line, kind)| Found { line, kind })
                .collect()
        };
        results.push(TraceScore {
            trace: trace.display().to_string(),
            expected: expected.len(),
            fired: fired.len(),
            missed: found(missed),
            unexpected: found(unexpected),
            line_errors,
        });
    }
    let mut all = Counts::default();
    for counts in per_kind.values() {
        all.add(*counts);
    }
    let with_loops: Vec<&TraceScore> = results.iter().filter(|t| t.expected > 0).collect();
    let scores = Scores {
        kinds: scored,
        traces_with_loops: with_loops.len(),
        traces_with_loops_caught: with_loops
            .iter()
            .filter(|t| t.missed.len() < t.expected)
            .count(),
        traces_without: results.len() - with_loops.len(),
        traces_without_silent: results
            .iter()
            .filter(|t| t.expected == 0 && t.fired == 0)
            .count(),
        per_kind: per_kind
            .into_iter()
            .map(|(kind, counts)| (kind, counts.into()))
            .collect(),
        all: all.into(),
        by_line: by_line.into(),
        traces: results,
    };
    let mut out = std::io::stdout().lock();
    match args.format {
        ScoreFormat::Json => {
            serde_json::to_writer_pretty(&mut out, &scores)?;
            writeln!(out)?;
        }
        ScoreFormat::Text => write_text(&mut out, &scores, setup.semantic_notes())?,
    }
    Ok(Outcome::Clean)
}

fn bump<'a>(per_kind: &'a mut BTreeMap<String, Counts>, kind: &str) -> &'a mut Counts {
    per_kind.entry(kind.to_owned()).or_default()
}

fn rate(value: Option<f64>) -> String {
    value.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.3}"))
}

fn write_text(out: &mut impl Write, scores: &Scores, notes: Vec<String>) -> anyhow::Result<()> {
    for note in notes {
        writeln!(out, "note: {note}")?;
    }
    let expected: usize = scores.traces.iter().map(|t| t.expected).sum();
    writeln!(
        out,
        "{} trace(s), {expected} expected detection(s) of the scored kinds",
        scores.traces.len()
    )?;
    writeln!(
        out,
        "{:<22} {:>5} {:>5} {:>5} {:>9} {:>7} {:>7}",
        "kind", "TP", "FP", "FN", "precision", "recall", "F1"
    )?;
    let row = |out: &mut dyn Write, name: &str, rates: &Rates| -> std::io::Result<()> {
        writeln!(
            out,
            "{:<22} {:>5} {:>5} {:>5} {:>9} {:>7} {:>7}",
            name,
            rates.counts.tp,
            rates.counts.fp,
            rates.counts.fn_,
            rate(rates.precision),
            rate(rates.recall),
            rate(rates.f1)
        )
    };
    for (kind, rates) in &scores.per_kind {
        let c = rates.counts;
        if c.tp + c.fp + c.fn_ > 0 {
            row(out, kind, rates)?;
        }
    }
    row(out, "all", &scores.all)?;
    row(out, "by line (kind aside)", &scores.by_line)?;
    writeln!(
        out,
        "traces expecting detections: {} of {} caught (at least one expected detection); \
         traces expecting none: {} of {} silent",
        scores.traces_with_loops_caught,
        scores.traces_with_loops,
        scores.traces_without_silent,
        scores.traces_without
    )?;
    for trace in &scores.traces {
        for missed in &trace.missed {
            writeln!(
                out,
                "missed     {} line {}: {}",
                trace.trace, missed.line, missed.kind
            )?;
        }
        for unexpected in &trace.unexpected {
            writeln!(
                out,
                "unexpected {} line {}: {}",
                trace.trace, unexpected.line, unexpected.kind
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(list: &[(u64, &str)]) -> Vec<Key> {
        list.iter()
            .map(|(line, kind)| (*line, (*kind).to_owned()))
            .collect()
    }

    #[test]
    fn matching_is_by_line_and_kind_as_multisets() {
        let expected = keys(&[(3, "tool_repeat"), (4, "tool_repeat"), (5, "tool_cycle")]);
        let fired = keys(&[
            (3, "tool_repeat"),
            (4, "tool_no_new_info"),
            (9, "tool_repeat"),
        ]);
        let (hits, missed, unexpected) = matched(&expected, &fired);
        assert_eq!(hits, keys(&[(3, "tool_repeat")]));
        assert_eq!(missed, keys(&[(4, "tool_repeat"), (5, "tool_cycle")]));
        assert_eq!(
            unexpected,
            keys(&[(4, "tool_no_new_info"), (9, "tool_repeat")])
        );
    }

    #[test]
    fn rates_are_none_without_a_denominator() {
        let none = Counts::default();
        assert_eq!(
            (none.precision(), none.recall(), none.f1()),
            (None, None, None)
        );
        let some = Counts {
            tp: 3,
            fp: 1,
            fn_: 2,
        };
        assert_eq!(some.precision(), Some(0.75));
        assert_eq!(some.recall(), Some(0.6));
        assert!(some.f1().is_some_and(|f1| (f1 - 6.0 / 9.0).abs() < 1e-9));
    }

    #[test]
    fn a_sidecar_is_named_after_its_trace() {
        assert_eq!(
            sidecar_of(Path::new("data/tool-traces/loop_glob.jsonl")),
            PathBuf::from("data/tool-traces/loop_glob.expected.jsonl")
        );
    }
}
