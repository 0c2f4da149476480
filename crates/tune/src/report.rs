//! The result of a sweep, from labelled pairs: every threshold's scores,
//! the thresholds worth choosing, and how they do on held-out data.

use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;

use crate::embed::{EmbedStats, Vectors};
use crate::error::{LineIssue, Result, TuneError};
use crate::pairs::{PairSet, Split};
use crate::sweep::{ScoreTable, SweepRow, Thresholds, best_f1, min_precision};

/// A threshold the production config sets today, to score alongside the
/// sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Configured {
    /// The config key(s), e.g. `similarity.request_threshold`.
    pub key: String,
    /// Its value.
    pub threshold: f64,
}

impl Configured {
    /// `key` = `threshold`.
    pub fn new(key: impl Into<String>, threshold: f64) -> Self {
        Self {
            key: key.into(),
            threshold,
        }
    }
}

/// What a sweep is asked for.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TuneOptions {
    /// The thresholds to score.
    pub thresholds: Thresholds,
    /// Also choose the lowest threshold with at least this precision.
    pub min_precision: Option<f64>,
    /// The thresholds configured today, scored too.
    pub configured: Vec<Configured>,
    /// Only pairs (or detections) of this kind; for the record.
    pub kind: Option<String>,
    /// The embedder's name as the user chose it (`minilm`, `lexical`).
    pub embedder: String,
}

impl TuneOptions {
    /// A sweep over `thresholds`, with nothing else asked.
    pub fn new(thresholds: Thresholds) -> Self {
        Self {
            thresholds,
            min_precision: None,
            configured: Vec::new(),
            kind: None,
            embedder: String::new(),
        }
    }

    /// Also choose the lowest threshold with precision ≥ `floor`, which
    /// must be in (0, 1].
    pub fn min_precision(mut self, floor: f64) -> Result<Self> {
        if !(floor > 0.0 && floor <= 1.0) {
            return Err(TuneError::PrecisionFloor(floor));
        }
        self.min_precision = Some(floor);
        Ok(self)
    }

    /// Scores `configured` too.
    #[must_use]
    pub fn configured(mut self, configured: Vec<Configured>) -> Self {
        self.configured = configured;
        self
    }

    /// Records the kind the input was filtered on.
    #[must_use]
    pub fn kind(mut self, kind: Option<String>) -> Self {
        self.kind = kind;
        self
    }

    /// Records the embedder's name.
    #[must_use]
    pub fn embedder(mut self, name: impl Into<String>) -> Self {
        self.embedder = name.into();
        self
    }
}

/// Labelled pairs, or traces with expected detections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// A pair file.
    Pairs,
    /// Traces and their sidecars.
    Traces,
}

/// The embedder the vectors came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EmbedderInfo {
    /// As chosen (`minilm`, `lexical`).
    pub name: String,
    /// The model's id.
    pub model_id: String,
    /// Its vector length.
    pub dimension: usize,
}

/// How much data one split has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Pairs (pairs mode) or traces (traces mode).
    pub items: usize,
    /// Pairs labelled the same, or expected detections.
    pub same: usize,
    /// Pairs labelled different (`None` for traces).
    pub different: Option<usize>,
}

/// A chosen or configured threshold, scored on the train split and, when
/// there is one, on the held-out split.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Choice {
    /// The threshold.
    pub threshold: f64,
    /// The config key it is set in, for a configured threshold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Its counts and scores on the data it was chosen on.
    pub train: SweepRow,
    /// Its counts and scores on held-out data, never used to choose.
    pub test: Option<SweepRow>,
}

/// `--min-precision`: the floor, and the threshold that meets it, if any.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MinPrecision {
    /// The precision asked for.
    pub floor: f64,
    /// The lowest threshold whose train precision is at least the floor
    /// (`None`: no threshold of the sweep meets it).
    pub choice: Option<Choice>,
}

/// One pair or detection that a threshold got wrong, or one that is shown
/// as an example.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Example {
    /// Where: `FILE:LINE`.
    pub at: String,
    /// The kind (pair kind or detection kind).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Its cosine (for a detection: the similarity it reported, if any).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cosine: Option<f32>,
    /// The first text of a pair.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub a: Option<String>,
    /// The second text of a pair.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub b: Option<String>,
}

/// What one threshold gets wrong on the train split.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Mistakes {
    /// The threshold (the best-F1 one).
    pub threshold: f64,
    /// Flagged but not the same (expected): highest cosine first.
    pub false_positives: Vec<Example>,
    /// The same (expected) but not flagged: lowest cosine first.
    pub false_negatives: Vec<Example>,
}

/// A labelled pair with its cosine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoredPair {
    /// Its line in the pair file.
    pub line: u64,
    /// Train or test.
    pub split: Split,
    /// Its label.
    pub same: bool,
    /// Its kind, if labelled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The cosine of its two texts.
    pub cosine: f32,
    /// The first text.
    pub a: String,
    /// The second text.
    pub b: String,
}

/// A semantic detection seen in a trace at the sweep's lowest threshold
/// (traces mode): what the histogram shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceDetection {
    /// The trace file.
    pub trace: String,
    /// The line it fired on.
    pub line: u64,
    /// Its kind.
    pub kind: String,
    /// The similarity it reported (`topic_cycle` reports none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub similarity: Option<f32>,
    /// Whether the sidecar expects it.
    pub expected: bool,
}

/// The whole result of a sweep: what `loopguard tune threshold --format
/// json` prints and `sweep.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct TuneReport {
    /// Pairs or traces.
    pub mode: Mode,
    /// The pair file, or the trace file or directory.
    pub input: PathBuf,
    /// Held-out traces (`--holdout`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holdout: Option<PathBuf>,
    /// The kind the input was filtered on, if any.
    pub kind: Option<String>,
    /// The rule: "same" is a cosine strictly above the threshold.
    pub rule: &'static str,
    /// Where the vectors came from.
    pub embedder: EmbedderInfo,
    /// What embedding took.
    pub embedding: EmbedStats,
    /// Input lines that were skipped, each with what is wrong.
    pub issues: Vec<LineIssue>,
    /// The data thresholds are chosen on.
    pub train: Counts,
    /// The held-out data, if any.
    pub test: Option<Counts>,
    /// The sweep asked for.
    pub thresholds: Thresholds,
    /// One row per threshold, on the train split.
    pub rows: Vec<SweepRow>,
    /// The threshold with the best train F1 (ties: the higher threshold).
    pub best_f1: Option<Choice>,
    /// `--min-precision`, if given.
    pub min_precision: Option<MinPrecision>,
    /// The thresholds configured today, scored the same way.
    pub configured: Vec<Choice>,
    /// What the best-F1 threshold gets wrong on the train split.
    pub mistakes: Option<Mistakes>,
    /// Every pair with its cosine (pairs mode).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pairs: Vec<ScoredPair>,
    /// Every semantic detection at the lowest threshold (traces mode).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub detections: Vec<TraceDetection>,
}

/// The rule every sweep applies.
pub(crate) const RULE: &str = "same when cosine > threshold";

impl TuneReport {
    /// The row of the sweep at `threshold`, if the sweep has it.
    pub fn row_at(&self, threshold: f64) -> Option<&SweepRow> {
        self.rows
            .iter()
            .find(|row| (row.threshold - threshold).abs() < 1e-9)
    }

    /// The threshold to put in the config: the `--min-precision` one when
    /// asked for and met, else the best-F1 one.
    pub fn recommended(&self) -> Option<&Choice> {
        self.min_precision
            .as_ref()
            .and_then(|m| m.choice.as_ref())
            .or(self.best_f1.as_ref())
    }

    /// The sweep as CSV: `threshold,tp,fp,tn,fn,precision,recall,f1,fpr,marks`,
    /// `n/a` for an undefined ratio (and for `tn`/`fpr` of traces); `marks`
    /// names `best_f1`, `min_precision` and `configured` rows.
    pub fn write_csv(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let decimals = self.thresholds.decimals();
        writeln!(out, "threshold,tp,fp,tn,fn,precision,recall,f1,fpr,marks")?;
        for row in &self.rows {
            let c = &row.confusion;
            let m = &row.metrics;
            let tn = c.tn.map_or_else(|| "n/a".to_owned(), |tn| tn.to_string());
            writeln!(
                out,
                "{:.decimals$},{},{},{},{},{},{},{},{},{}",
                row.threshold,
                c.tp,
                c.fp,
                tn,
                c.fn_,
                ratio(m.precision),
                ratio(m.recall),
                ratio(m.f1),
                ratio(m.fpr),
                self.marks(row.threshold).join(";")
            )?;
        }
        Ok(())
    }

    /// The marks of the row at `threshold`: `best_f1`, `min_precision`,
    /// `configured`.
    pub fn marks(&self, threshold: f64) -> Vec<&'static str> {
        let is = |choice: Option<&Choice>| {
            choice.is_some_and(|c| (c.threshold - threshold).abs() < 1e-9)
        };
        let mut marks = Vec::new();
        if is(self.best_f1.as_ref()) {
            marks.push("best_f1");
        }
        if is(self.min_precision.as_ref().and_then(|m| m.choice.as_ref())) {
            marks.push("min_precision");
        }
        if self.configured.iter().any(|c| is(Some(c))) {
            marks.push("configured");
        }
        marks
    }
}

/// A ratio with 4 decimals, or `n/a`.
fn ratio(value: Option<f64>) -> String {
    value.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.4}"))
}

/// Sweeps labelled pairs: the cosine of every pair from `vectors`, the
/// table on the train split, the best-F1 and `--min-precision` thresholds
/// chosen on it, each then scored on the test split.
///
/// Test pairs never influence a choice. An error when the set has no train
/// pair, or a text has no vector.
pub fn tune_pairs(
    set: &PairSet,
    vectors: &Vectors,
    stats: &EmbedStats,
    options: &TuneOptions,
) -> Result<TuneReport> {
    let mut pairs = Vec::with_capacity(set.pairs.len());
    for pair in &set.pairs {
        let cosine = vectors.cosine(&pair.a, &pair.b).ok_or_else(|| {
            TuneError::NoData(format!(
                "{}:{}: a text of this pair has no vector",
                set.file.display(),
                pair.line
            ))
        })?;
        pairs.push(ScoredPair {
            line: pair.line,
            split: pair.split,
            same: pair.same,
            kind: pair.kind.clone(),
            cosine,
            a: pair.a.clone(),
            b: pair.b.clone(),
        });
    }
    let table = |split: Split| {
        ScoreTable::new(
            pairs
                .iter()
                .filter(|p| p.split == split)
                .map(|p| (p.cosine, p.same)),
        )
    };
    let (train, test) = (table(Split::Train), table(Split::Test));
    if train.is_empty() {
        let filter = options
            .kind
            .as_deref()
            .map(|kind| format!(" of kind {kind:?}"))
            .unwrap_or_default();
        return Err(TuneError::NoData(format!(
            "{} has no train pair{filter} to choose a threshold on ({} pair(s), {} bad line(s))",
            set.file.display(),
            set.pairs.len(),
            set.issues.len()
        )));
    }
    let score = |threshold: f64, key: Option<String>| Choice {
        threshold,
        key,
        train: SweepRow::new(threshold, train.confusion_at(threshold)),
        test: (!test.is_empty()).then(|| SweepRow::new(threshold, test.confusion_at(threshold))),
    };
    let rows = train.sweep(&options.thresholds);
    let best = best_f1(&rows).map(|row| score(row.threshold, None));
    let floor = options.min_precision.map(|floor| MinPrecision {
        floor,
        choice: min_precision(&rows, floor).map(|row| score(row.threshold, None)),
    });
    let configured = options
        .configured
        .iter()
        .map(|c| score(c.threshold, Some(c.key.clone())))
        .collect();
    let mistakes = best.as_ref().map(|best| {
        let t = best.threshold as f32;
        let example = |p: &ScoredPair| Example {
            at: format!("{}:{}", set.file.display(), p.line),
            kind: p.kind.clone(),
            cosine: Some(p.cosine),
            a: Some(p.a.clone()),
            b: Some(p.b.clone()),
        };
        let train_pairs = || pairs.iter().filter(|p| p.split == Split::Train);
        let mut fps: Vec<&ScoredPair> = train_pairs().filter(|p| !p.same && p.cosine > t).collect();
        fps.sort_by(|x, y| y.cosine.total_cmp(&x.cosine));
        let mut fns: Vec<&ScoredPair> = train_pairs().filter(|p| p.same && p.cosine <= t).collect();
        fns.sort_by(|x, y| x.cosine.total_cmp(&y.cosine));
        Mistakes {
            threshold: best.threshold,
            false_positives: fps.into_iter().map(example).collect(),
            false_negatives: fns.into_iter().map(example).collect(),
        }
    });
    let counts = |table: &ScoreTable| Counts {
        items: table.positives() + table.negatives(),
        same: table.positives(),
        different: Some(table.negatives()),
    };
    Ok(TuneReport {
        mode: Mode::Pairs,
        input: set.file.clone(),
        holdout: None,
        kind: options.kind.clone(),
        rule: RULE,
        embedder: EmbedderInfo {
            name: options.embedder.clone(),
            model_id: vectors.model_id().to_owned(),
            dimension: vectors.dimension(),
        },
        embedding: stats.clone(),
        issues: set.issues.clone(),
        train: counts(&train),
        test: (!test.is_empty()).then(|| counts(&test)),
        thresholds: options.thresholds.clone(),
        rows,
        best_f1: best,
        min_precision: floor,
        configured,
        mistakes,
        pairs,
        detections: Vec::new(),
    })
}
