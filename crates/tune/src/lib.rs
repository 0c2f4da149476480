//! Threshold tuning for loopguard's similarity checks: what each cosine
//! threshold catches and what it wrongly flags, on your own data, before
//! you change a production setting.
//!
//! loopguard calls two requests (or two topics) "the same" when the cosine
//! of their embeddings is strictly above a threshold
//! (`similarity.request_threshold`, `similarity.topic_threshold`; 0.85 by
//! default). This crate sweeps that threshold over labelled data and scores
//! every value: `loopguard tune` is its command line.
//!
//! - [`PairSet`]: labelled pairs of texts (JSON Lines, `{"a", "b", "same"}`
//!   with optional `kind`, `source` and `split`), bad lines listed with
//!   their line numbers ([`LineIssue`]).
//! - [`embed_texts`]: every distinct text embedded once, in batches, kept
//!   in an [`EmbeddingCache`] on disk so a second sweep runs no inference;
//!   [`EmbedderChoice`] names the embedders (the real model, or
//!   [`LexicalEmbedder`], a lexical baseline).
//! - [`tune_pairs`]: the sweep ([`Thresholds`], [`ScoreTable`]): for each
//!   threshold the counts ([`Confusion`]) and precision, recall, F1 and
//!   false-positive rate ([`Metrics`]) on the train split; the best-F1
//!   threshold and the lowest one meeting a precision floor, each then
//!   scored on the held-out test split; the configured thresholds scored
//!   alike. All in one [`TuneReport`].
//! - [`TraceSet`] and [`tune_traces`]: the same on recorded traces, each
//!   replayed through the real engine at every threshold and scored against
//!   the detections a sidecar file expects.
//! - [`judge_curves`]: the precision-recall curves of both same-request
//!   judges (cosine, calibrated) on the held-out pairs, each with its
//!   operating point, drawn in one picture by `write_judge_plot` (feature
//!   `plots`).
//! - [`bootstrap_intervals`]: how sure a held-out figure is, as the 90%
//!   bootstrap intervals of its precision, recall and F1 ([`Intervals`]).
//! - [`write_outputs`]: the table as CSV and JSON and, with the `plots`
//!   feature (on by default), a precision-recall curve and a histogram of
//!   cosines as PNG and SVG.
//!
//! With a toy embedder (three directions; no model needed):
//!
//! ```
//! use std::path::Path;
//! use loopguard_semantic::Embedder;
//! use loopguard_tune::{EmbedOptions, PairSet, Thresholds, TuneOptions, embed_texts, tune_pairs};
//!
//! struct Toy;
//! impl Embedder for Toy {
//!     fn model_id(&self) -> &str { "toy" }
//!     fn dimension(&self) -> usize { 2 }
//!     fn embed_batch(&self, texts: &[&str]) -> loopguard_semantic::Result<Vec<Vec<f32>>> {
//!         Ok(texts.iter().map(|t| {
//!             if t.contains("auth") { vec![1.0, 0.0] }
//!             else if t.contains("login") { vec![0.8, 0.6] } // cosine 0.8 with "auth"
//!             else { vec![0.0, 1.0] }
//!         }).collect())
//!     }
//! }
//!
//! let file = r#"
//! {"a": "review the auth code", "b": "review the auth code again", "same": true}
//! {"a": "review the auth code", "b": "check the login page", "same": false}
//! {"a": "update the changelog", "b": "update the changelog again", "same": true}
//! {"a": "update the changelog", "b": "review the auth code", "same": false}
//! "#;
//! let pairs = PairSet::parse(file.as_bytes(), Path::new("pairs.jsonl"))?;
//! let (vectors, stats) = embed_texts(&Toy, pairs.distinct_texts(), &EmbedOptions::new(), &mut |_, _| {})?;
//! assert_eq!(stats.embedded, 5); // distinct texts only
//!
//! let options = TuneOptions::new(Thresholds::new(0.70, 0.95, 0.05)?);
//! let report = tune_pairs(&pairs, &vectors, &stats, &options)?;
//! // At 0.75 the login pair (0.8) is wrongly flagged; at 0.80 it is not:
//! // "the same" means strictly above the threshold.
//! assert_eq!(report.row_at(0.75).map(|r| r.confusion.fp), Some(1));
//! assert_eq!(report.row_at(0.80).map(|r| r.confusion.fp), Some(0));
//! // F1 is 1 from 0.80 up; ties go to the higher threshold.
//! let best = report.best_f1.as_ref().map(|b| b.threshold);
//! assert_eq!(best, Some(0.95));
//! # Ok::<(), loopguard_tune::TuneError>(())
//! ```
#![deny(missing_docs)]

pub use bootstrap::{
    BOOTSTRAP_LEVEL, BOOTSTRAP_RESAMPLES, Interval, Intervals, bootstrap_intervals,
};
pub use cache::EmbeddingCache;
pub use embed::{DEFAULT_BATCH, EmbedOptions, EmbedStats, Vectors, embed_texts};
pub use embedders::EmbedderChoice;
pub use error::{LineIssue, Result, TuneError};
pub use judge_curve::{
    CurvePoint, JudgeCurve, JudgeCurves, average_precision, judge_curves, pr_curve, pr_point,
};
pub use judge_fit::{
    CrossValidation, HardCaseScore, JudgeReport, JudgeScore, JudgedPair, PairFeatures,
    add_tuned_cosines, cross_validate, fit_and_score, fit_logistic, judge_features, judged_by_hard,
    judged_pairs, judged_score, mistakes_worst_first,
};
pub use lexical::{LEXICAL_DIMENSION, LEXICAL_MODEL_ID, LexicalEmbedder};
pub use output::write_outputs;
pub use pairs::{Pair, PairSet, Split};
#[cfg(feature = "plots")]
pub use plots::{write_judge_plot, write_plots};
pub use report::{
    Choice, Configured, Counts, EmbedderInfo, Example, MinPrecision, Mistakes, Mode, ScoredPair,
    TraceDetection, TuneOptions, TuneReport, tune_pairs,
};
pub use second_opinion::{SecondOpinionScore, evaluate_with_second_opinion};
pub use sweep::{
    Confusion, MAX_THRESHOLDS, Metrics, ScoreTable, SweepRow, Thresholds, best_f1, min_precision,
};
pub use traces::{Expected, SEMANTIC_KINDS, SIDECAR_SUFFIX, Trace, TraceSet, tune_traces};
pub use tuned_cosines::TunedCosines;

mod bootstrap;
mod cache;
mod embed;
mod embedders;
mod error;
mod judge_curve;
mod judge_fit;
mod lexical;
mod output;
mod pairs;
#[cfg(feature = "plots")]
mod plots;
mod random;
mod report;
mod second_opinion;
mod sweep;
mod traces;
mod tuned_cosines;
