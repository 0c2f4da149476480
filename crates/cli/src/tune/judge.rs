//! `loopguard tune judge fit` and `tune judge eval`: fit the
//! same-request judge's weights on the train split and score them next to
//! plain cosine, or score a judge as it is.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use std::sync::Arc;

use anyhow::{Context, bail};
use loopguard_config::Config;
use loopguard_llm_client::{BASE_URL_ENV, LlmSettings, MODEL_ENV};
use loopguard_semantic::{
    Features, JudgeKind, JudgeWeights, LlmSecondOpinion, SameRequestJudge, SecondOpinionPolicy,
};
use loopguard_tune::{
    Confusion, CrossValidation, Intervals, JudgeCurves, JudgeReport, JudgeScore, JudgedPair,
    PairSet, SecondOpinionScore, average_precision, cross_validate, evaluate_with_second_opinion,
    fit_and_score, judge_curves, judged_by_hard, judged_pairs, judged_score, mistakes_worst_first,
    write_judge_plot,
};

use crate::cli::{TuneEvalArgs, TuneFitArgs, TuneFormat, TuneJudge};
use crate::outcome::Outcome;

/// The precision the fitted judge's threshold must reach on the train
/// split unless `--min-precision` says otherwise.
const DEFAULT_MIN_PRECISION: f64 = 0.9;

/// Shuffles of `--folds`.
const CV_REPEATS: usize = 10;

/// Fits the judge on `pairs` (their `features` read by `model`, and by
/// `tuned_encoder` when it names one) and prints the result.
pub(crate) fn fit(
    args: &TuneFitArgs,
    config: &Config,
    pairs: &PairSet,
    features: &[Features],
    model: &str,
    tuned_encoder: Option<&str>,
) -> anyhow::Result<Outcome> {
    let min_precision = args.min_precision.unwrap_or(DEFAULT_MIN_PRECISION);
    let mut report = fit_and_score(
        pairs,
        features,
        model,
        &fitted_on(args, features),
        min_precision,
    )?;
    // The fit names an encoder when it weighs `tuned_cosine`: the one
    // that read it.
    if report.weights.tuned_encoder.is_some() {
        report.weights.tuned_encoder = tuned_encoder.map(str::to_owned);
    }
    // Before anything is written: a cross-validation that cannot be done
    // (too few pairs for the folds) ends the command with nothing half
    // written.
    let cross_validation = args
        .folds
        .map(|folds| {
            cross_validate(
                pairs,
                features,
                usize::from(folds),
                CV_REPEATS,
                min_precision,
            )
        })
        .transpose()?;
    let weights_path = args
        .weights_out
        .clone()
        .or_else(|| args.out.as_ref().map(|dir| dir.join("judge-weights.json")));
    if let Some(path) = &weights_path {
        write_weights(path, &report.weights)?;
    }
    // Both judges on the held-out pairs: the cosine judge at the
    // configured request threshold, the calibrated one at its own.
    let curves = judge_curves(
        pairs,
        features,
        &report.weights,
        config.similarity.request_threshold,
    );
    let document = report_json(&report, &curves, cross_validation.as_ref())?;
    let mut written: Vec<PathBuf> = weights_path.into_iter().collect();
    if let Some(dir) = &args.out {
        written.extend(write_fit_files(dir, &document, &curves)?);
    }
    let mut out = io::stdout().lock();
    match args.common.format {
        TuneFormat::Json => {
            serde_json::to_writer_pretty(&mut out, &document)?;
            writeln!(out)?;
        }
        TuneFormat::Text => {
            let fitted = Fitted {
                report: &report,
                curves: &curves,
                cross_validation: cross_validation.as_ref(),
                min_precision,
                written: &written,
            };
            write_fit_text(&mut out, &fitted)?;
        }
    }
    out.flush()?;
    Ok(Outcome::Clean)
}

/// What the weights were fitted on, as their file says it: the pair file's
/// train split, and where the tuned cosines came from when one was read.
fn fitted_on(args: &TuneFitArgs, features: &[Features]) -> String {
    let path = args.pairs.display();
    if let Some(file) = &args.tuned_cosines {
        format!(
            "{path} (train split; the tuned cosines of the pairs in {}, out of fold)",
            file.display()
        )
    } else if features.iter().any(|f| f.tuned_cosine.is_some()) {
        format!("{path} (train split, less the pairs the tuned encoder was tuned on)")
    } else {
        format!("{path} (train split)")
    }
}

/// The fitted weights as pretty JSON in `path`, its directory created if
/// missing.
fn write_weights(path: &Path, weights: &JudgeWeights) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(weights)?;
    std::fs::write(path, format!("{text}\n"))
        .with_context(|| format!("cannot write {}", path.display()))
}

/// `tune judge fit --out DIR`: `DIR/judge.json` (what `--format json`
/// prints) and the picture of both judges' curves. Returns their paths.
fn write_fit_files(
    dir: &Path,
    document: &serde_json::Value,
    curves: &JudgeCurves,
) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let json = dir.join("judge.json");
    std::fs::write(&json, serde_json::to_string_pretty(document)?)
        .with_context(|| format!("cannot write {}", json.display()))?;
    let mut written = vec![json];
    written.extend(write_judge_plot(curves, dir)?);
    Ok(written)
}

/// What `tune judge fit` found, for its text output.
struct Fitted<'a> {
    /// Both judges' scores, the weights, the held-out pairs by hard case.
    report: &'a JudgeReport,
    /// Both judges' precision-recall curves.
    curves: &'a JudgeCurves,
    /// The folds' figures, with `--folds`.
    cross_validation: Option<&'a CrossValidation>,
    /// The train precision the threshold had to reach.
    min_precision: f64,
    /// The files written, the weights first.
    written: &'a [PathBuf],
}

/// `tune judge fit` for people: both judges' scores, the held-out pairs by
/// hard case, the cross-validation, the weights, the files written and how
/// to score them.
fn write_fit_text(out: &mut dyn Write, fitted: &Fitted<'_>) -> io::Result<()> {
    write_judges_scores(out, fitted)?;
    write_held_out_by_hard(out, fitted.report)?;
    if let Some(cv) = fitted.cross_validation {
        write_cross_validation(out, cv)?;
    }
    let report = fitted.report;
    writeln!(out, "\nweights (bias {:+.3}):", report.weights.bias)?;
    for (name, weight) in report.feature_names.iter().zip(&report.weights.weights) {
        writeln!(out, "  {name:<17} {weight:+.3}")?;
    }
    write_fit_written(out, fitted.written)
}

/// Both judges' precision, recall and F1 on each split, the intervals of
/// their held-out figures and their average precision.
fn write_judges_scores(out: &mut dyn Write, fitted: &Fitted<'_>) -> io::Result<()> {
    let Fitted { report, curves, .. } = *fitted;
    writeln!(
        out,
        "same-request judge on {} train and {} test pairs (threshold chosen on train: \
         best F1 at precision >= {:.2})",
        report.train_pairs, report.test_pairs, fitted.min_precision
    )?;
    writeln!(
        out,
        "\n{:<11} {:>9}  {:>30}  {:>30}",
        "judge", "threshold", "train P / R / F1", "test P / R / F1"
    )?;
    for score in [&report.cosine, &report.calibrated] {
        writeln!(out, "{}", row(score))?;
    }
    if let Some(intervals) = &report.calibrated.test_intervals {
        writeln!(out, "{}", intervals_heading(intervals, "test pairs"))?;
        for score in [&report.cosine, &report.calibrated] {
            if let Some(intervals) = &score.test_intervals {
                writeln!(
                    out,
                    "  {:<11} {}",
                    score.judge.to_string(),
                    intervals.describe()
                )?;
            }
        }
    }
    writeln!(
        out,
        "{} average precision (every threshold): cosine {}, calibrated {}",
        if curves.split == "test" {
            "held-out"
        } else {
            "all pairs'"
        },
        three_places(curves.cosine.average_precision),
        three_places(curves.calibrated.average_precision),
    )
}

/// Both judges on the held-out pairs, hard case by hard case (nothing when
/// no pair has one).
fn write_held_out_by_hard(out: &mut dyn Write, report: &JudgeReport) -> io::Result<()> {
    if report.held_out_by_hard.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\nheld out, by hard case (each judge at its threshold; - is no hard case):\n\
         {:<11} {:>5}  {:>30}  {:>30}",
        "hard", "pairs", "cosine P / R / F1", "calibrated P / R / F1"
    )?;
    for case in &report.held_out_by_hard {
        writeln!(
            out,
            "{:<11} {:>5}  {:>30}  {:>30}",
            case.hard,
            case.pairs,
            prf(&case.cosine),
            prf(&case.calibrated)
        )?;
    }
    Ok(())
}

/// The calibrated judge cross-validated on the train split: the mean and
/// spread of its best F1, the range of its thresholds, its average
/// precision.
fn write_cross_validation(out: &mut dyn Write, cv: &CrossValidation) -> io::Result<()> {
    writeln!(
        out,
        "\ncalibrated, cross-validated on the {} train pairs ({} folds, {} shuffles): \
         best F1 at precision >= {:.2}: {:.3} ± {:.3}, at thresholds {:.2} to {:.2}; \
         average precision {:.3}",
        cv.pairs,
        cv.folds,
        cv.repeats,
        cv.min_precision,
        cv.f1_mean,
        cv.f1_sd,
        cv.thresholds.iter().copied().fold(f32::INFINITY, f32::min),
        cv.thresholds
            .iter()
            .copied()
            .fold(f32::NEG_INFINITY, f32::max),
        cv.average_precision_mean,
    )
}

/// The files written, and the command that scores the weights on other
/// pairs.
fn write_fit_written(out: &mut dyn Write, written: &[PathBuf]) -> io::Result<()> {
    if !written.is_empty() {
        writeln!(out, "\nwrote:")?;
        for file in written {
            writeln!(out, "  {}", file.display())?;
        }
    }
    writeln!(
        out,
        "\nScore them on other labelled pairs with:\n  loopguard tune judge eval --pairs FILE --weights {}",
        written
            .first()
            .map_or_else(|| "judge-weights.json".into(), |p| p.display().to_string())
    )
}

/// The report as JSON, with both judges' precision-recall curves on the
/// held-out pairs under `held_out_pr_curves`.
fn report_json(
    report: &JudgeReport,
    curves: &JudgeCurves,
    cross_validation: Option<&CrossValidation>,
) -> anyhow::Result<serde_json::Value> {
    let mut document = serde_json::to_value(report)?;
    if let Some(object) = document.as_object_mut() {
        object.insert("held_out_pr_curves".into(), serde_json::to_value(curves)?);
        if let Some(cv) = cross_validation {
            object.insert("cross_validation".into(), serde_json::to_value(cv)?);
        }
    }
    Ok(document)
}

/// The judge `tune judge eval` scores, at its threshold: the one the
/// config runs (`similarity.judge`, `judge_weights`, `tuned_encoder`,
/// `judge_threshold`), with `--judge`, `--weights` and `--tuned-encoder`
/// overriding it. Weights named by `--weights` score at their own
/// threshold; the config's `judge_threshold` moves only the config's.
pub(crate) fn eval_judge(
    args: &TuneEvalArgs,
    config: &Config,
) -> anyhow::Result<(SameRequestJudge, f32)> {
    let similarity = &config.similarity;
    // --weights and --tuned-encoder are the calibrated judge's, so they
    // choose it over the config's cosine judge (clap refuses them next to
    // --judge).
    let kind = match args.judge {
        Some(TuneJudge::Cosine) => JudgeKind::Cosine,
        Some(TuneJudge::Calibrated) => JudgeKind::Calibrated,
        None if args.weights.is_some() || args.tuned_encoder.is_some() => JudgeKind::Calibrated,
        None => similarity.judge,
    };
    if kind == JudgeKind::Cosine {
        return Ok((SameRequestJudge::cosine(), similarity.request_threshold));
    }
    if let Some(path) = &args.weights {
        let weights = JudgeWeights::from_file(path).context("--weights")?;
        let threshold = weights.threshold;
        return Ok((SameRequestJudge::calibrated(weights), threshold));
    }
    let mut calibrated = similarity.clone();
    calibrated.judge = JudgeKind::Calibrated;
    if let Some(encoder) = args.tuned_encoder {
        calibrated.tuned_encoder = encoder;
    }
    // Only a weights file can fail to load; the shipped weights cannot.
    let judge = SameRequestJudge::from_config(&calibrated).context("similarity.judge_weights")?;
    let threshold = judge.threshold_for(&calibrated, None).value;
    Ok((judge, threshold))
}

/// Scores `judge` at `threshold` on `pairs` as it is, and prints the
/// result; with `--second-opinion` (or the config's second opinion
/// enabled), also with the LLM's answers on the pairs it is unsure of.
pub(crate) async fn eval(
    args: &TuneEvalArgs,
    config: &Config,
    pairs: &PairSet,
    features: &[Features],
    judge: SameRequestJudge,
    threshold: f32,
) -> anyhow::Result<Outcome> {
    if args.second_opinion || config.similarity.second_opinion.enabled {
        return eval_second_opinion(args, config, pairs, features, judge, threshold).await;
    }
    let judged = judged_pairs(pairs, features, &judge, threshold);
    let score = judged_score(judge.kind(), threshold, &judged);
    let document = eval_json(&score);
    let ranking = judged_average_precision(&judged);
    let written = args
        .out
        .as_ref()
        .map(|dir| {
            let scored = Scored {
                judged: &judged,
                threshold,
                ranking,
                intervals: score.test_intervals.as_ref(),
            };
            write_eval_files(dir, &document, &scored)
        })
        .transpose()?;
    let mut out = io::stdout().lock();
    match args.common.format {
        TuneFormat::Json => {
            serde_json::to_writer(&mut out, &document)?;
            writeln!(out)?;
        }
        TuneFormat::Text => {
            writeln!(out, "{}", row(&score))?;
            if let Some(intervals) = &score.test_intervals {
                writeln!(
                    out,
                    "{} {}",
                    intervals_heading(intervals, "pairs"),
                    intervals.describe()
                )?;
            }
            writeln!(
                out,
                "average precision (every threshold): {}",
                three_places(ranking)
            )?;
            write!(out, "{}", hard_case_table(&judged))?;
            if let Some(written) = &written {
                writeln!(out, "{written}")?;
            }
        }
    }
    out.flush()?;
    Ok(Outcome::Clean)
}

/// The judged pairs' scores hard case by hard case, as a text table
/// (empty when no pair has a `hard` field).
fn hard_case_table(judged: &[JudgedPair]) -> String {
    let by_hard = judged_by_hard(judged);
    if by_hard.is_empty() {
        return String::new();
    }
    let mut table = format!(
        "\nby hard case (- is no hard case):\n{:<11} {:>5} {:>6}  {:>30}\n",
        "hard", "pairs", "wrong", "P / R / F1"
    );
    for (hard, counts) in &by_hard {
        table.push_str(&format!(
            "{hard:<11} {:>5} {:>6}  {:>30}\n",
            counts.total(),
            counts.fp + counts.fn_,
            prf(counts)
        ));
    }
    table
}

/// `[{"hard", "pairs", "tp", "fp", "fn", "tn", "precision", "recall",
/// "f1"}]`, hard case by hard case; empty when no pair has one.
fn hard_case_json(judged: &[JudgedPair]) -> serde_json::Value {
    judged_by_hard(judged)
        .into_iter()
        .map(|(hard, counts)| {
            let metrics = counts.metrics();
            serde_json::json!({
                "hard": hard,
                "pairs": counts.total(),
                "tp": counts.tp,
                "fp": counts.fp,
                "fn": counts.fn_,
                "tn": counts.tn,
                "precision": metrics.precision,
                "recall": metrics.recall,
                "f1": metrics.f1,
            })
        })
        .collect()
}

/// The judged pairs `tune judge eval --out DIR` writes, and what was
/// measured of them.
#[derive(Clone, Copy)]
struct Scored<'a> {
    /// Every pair, as the judge (and its second opinion) saw it.
    judged: &'a [JudgedPair],
    /// The threshold the verdicts were given at.
    threshold: f32,
    /// Their average precision ([`judged_average_precision`]).
    ranking: Option<f64>,
    /// The 90% bootstrap intervals of their figures.
    intervals: Option<&'a Intervals>,
}

/// "90% intervals (2000 bootstrap resamples of the 421 test pairs):".
fn intervals_heading(intervals: &Intervals, what: &str) -> String {
    format!(
        "{:.0}% intervals ({} bootstrap resamples of the {} {what}):",
        intervals.level * 100.0,
        intervals.resamples,
        intervals.pairs
    )
}

/// What `tune judge eval --out DIR` wrote, for the text output.
struct EvalFiles {
    eval_json: PathBuf,
    pairs_jsonl: PathBuf,
    false_repeats: usize,
    missed_repeats: usize,
}

impl std::fmt::Display for EvalFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "\n{} mistakes ({} false repeats, {} missed repeats), worst first, in {}\n\
             every pair's verdict, score and reason in {}",
            self.false_repeats + self.missed_repeats,
            self.false_repeats,
            self.missed_repeats,
            self.eval_json.display(),
            self.pairs_jsonl.display()
        )
    }
}

/// `tune judge eval --out DIR`: `DIR/eval.json`, the counts as `--format json`
/// prints them plus `average_precision` (of the judged pairs' scores,
/// after a second opinion when one was asked; `null` when no pair is the
/// same), `intervals` (the 90% bootstrap intervals of its figures;
/// `null` with no pair), `mistakes` (the pairs the judge got wrong, worst first: the
/// farthest from the threshold) and, when the pairs have a
/// `hard` field, `by_hard` (the counts of each hard case); and
/// `DIR/pairs.jsonl`, every pair scored, in the file's order, with its
/// label, hard case, verdict, score, cosine and reason.
fn write_eval_files(
    dir: &Path,
    document: &serde_json::Value,
    scored: &Scored<'_>,
) -> anyhow::Result<EvalFiles> {
    let Scored {
        judged,
        threshold,
        ranking,
        intervals,
    } = *scored;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mistakes = mistakes_worst_first(judged, threshold);
    let mut eval = document.clone();
    eval["average_precision"] = serde_json::json!(ranking);
    eval["intervals"] = serde_json::to_value(intervals)?;
    // Through text, so a score reads as in pairs.jsonl ("0.857143", not
    // the f32 widened to 0.857142984867096).
    eval["mistakes"] = serde_json::from_str(&serde_json::to_string(&mistakes)?)?;
    let by_hard = hard_case_json(judged);
    if by_hard.as_array().is_some_and(|rows| !rows.is_empty()) {
        eval["by_hard"] = by_hard;
    }
    let eval_json = dir.join("eval.json");
    std::fs::write(&eval_json, serde_json::to_string_pretty(&eval)? + "\n")
        .with_context(|| format!("cannot write {}", eval_json.display()))?;
    let mut lines = String::new();
    for pair in judged {
        lines.push_str(&serde_json::to_string(pair)?);
        lines.push('\n');
    }
    let pairs_jsonl = dir.join("pairs.jsonl");
    std::fs::write(&pairs_jsonl, lines)
        .with_context(|| format!("cannot write {}", pairs_jsonl.display()))?;
    Ok(EvalFiles {
        eval_json,
        pairs_jsonl,
        false_repeats: mistakes.iter().filter(|pair| pair.said_same).count(),
        missed_repeats: mistakes.iter().filter(|pair| !pair.said_same).count(),
    })
}

/// `tune judge eval --second-opinion`: the judge alone and with the LLM's
/// answers, and how many pairs were sent.
async fn eval_second_opinion(
    args: &TuneEvalArgs,
    config: &Config,
    pairs: &PairSet,
    features: &[Features],
    judge: SameRequestJudge,
    threshold: f32,
) -> anyhow::Result<Outcome> {
    if judge.kind() != JudgeKind::Calibrated {
        bail!(
            "the second opinion hears the calibrated judge's unsure pairs, and the judge \
             scored is the cosine judge (--judge cosine, or the config's similarity.judge): \
             drop --judge cosine, or give --judge calibrated"
        );
    }
    let settings = LlmSettings::from_config(&config.llm)
        .context("the second opinion's LLM")?
        .with_context(|| {
            format!(
                "the second opinion needs an LLM: set llm.base_url and llm.model in the config \
                 (or {BASE_URL_ENV} and {MODEL_ENV})"
            )
        })?;
    let opinion = LlmSecondOpinion::new(settings).context("the second opinion's LLM")?;
    let judge = judge.with_second_opinion(
        Arc::new(opinion),
        SecondOpinionPolicy::from_config(&config.similarity.second_opinion),
    );
    let result = evaluate_with_second_opinion(pairs, features, &judge, threshold).await;
    if let Some(error) = &result.first_error {
        eprintln!(
            "loopguard: warning: the second opinion gave no answer on {} pair(s) (first: {error}); \
             they keep the judge's verdict",
            result.stats.failed + result.stats.skipped
        );
    }
    // The intervals are of the verdicts after the second opinion (those
    // `result.judged` holds); the judge alone's counts come without.
    let alone = JudgeScore {
        judge: JudgeKind::Calibrated,
        threshold,
        train: None,
        test: result.judge_alone,
        test_intervals: None,
        curve: Vec::new(),
    };
    let with = judged_score(JudgeKind::Calibrated, threshold, &result.judged);
    let mut document = eval_json(&with);
    document["judge_alone"] = eval_json(&alone);
    document["second_opinion"] = second_opinion_json(&result);
    let written = args
        .out
        .as_ref()
        .map(|dir| {
            let scored = Scored {
                judged: &result.judged,
                threshold,
                ranking: judged_average_precision(&result.judged),
                intervals: with.test_intervals.as_ref(),
            };
            write_eval_files(dir, &document, &scored)
        })
        .transpose()?;
    let mut out = io::stdout().lock();
    match args.common.format {
        TuneFormat::Json => {
            serde_json::to_writer(&mut out, &document)?;
            writeln!(out)?;
        }
        TuneFormat::Text => {
            let stats = &result.stats;
            writeln!(
                out,
                "calibrated judge alone:          {}",
                prf(&result.judge_alone)
            )?;
            writeln!(
                out,
                "with the second opinion:         {}",
                prf(&result.with_second_opinion)
            )?;
            writeln!(
                out,
                "second opinion ({}): asked about {} of {} pairs ({:.0}%), answered {} (from \
                 the cache {}), failed {}, not asked while cooling down {}, overruled the \
                 judge {} times",
                result.by,
                stats.wanted,
                result.pairs,
                share(stats.wanted, result.pairs),
                stats.answered,
                stats.cached,
                stats.failed,
                stats.skipped,
                stats.overturned
            )?;
            write!(out, "{}", hard_case_table(&result.judged))?;
            if let Some(written) = &written {
                writeln!(out, "{written}")?;
            }
        }
    }
    out.flush()?;
    Ok(Outcome::Clean)
}

/// `{"by", "pairs", "asked", "answered", "cached", "failed", "skipped",
/// "overruled", "first_error"}`.
fn second_opinion_json(result: &SecondOpinionScore) -> serde_json::Value {
    let stats = &result.stats;
    serde_json::json!({
        "by": result.by,
        "pairs": result.pairs,
        "asked": stats.wanted,
        "answered": stats.answered,
        "cached": stats.cached,
        "failed": stats.failed,
        "skipped": stats.skipped,
        "overruled": stats.overturned,
        "first_error": result.first_error,
    })
}

/// `part` of `whole` in percent (0 of nothing).
fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// `{"judge", "threshold", "tp", "fp", "fn", "tn", "precision", "recall", "f1"}`.
fn eval_json(score: &JudgeScore) -> serde_json::Value {
    let metrics = score.test.metrics();
    serde_json::json!({
        "judge": score.judge.to_string(),
        // The threshold as written (0.79, not the f32's 0.7900000214...).
        "threshold": format!("{}", score.threshold).parse::<f64>().unwrap_or_default(),
        "tp": score.test.tp,
        "fp": score.test.fp,
        "fn": score.test.fn_,
        "tn": score.test.tn,
        "precision": metrics.precision,
        "recall": metrics.recall,
        "f1": metrics.f1,
    })
}

/// The average precision of the judged pairs' scores against their
/// labels: how well the judge ranks them, whatever its threshold.
fn judged_average_precision(judged: &[JudgedPair]) -> Option<f64> {
    let scores: Vec<f32> = judged.iter().map(|pair| pair.score).collect();
    let labels: Vec<bool> = judged.iter().map(|pair| pair.same).collect();
    average_precision(&scores, &labels)
}

/// A share to three places, or "-" when undefined.
fn three_places(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |value| format!("{value:.3}"))
}

fn row(score: &JudgeScore) -> String {
    format!(
        "{:<11} {:>9.2}  {:>30}  {:>30}",
        score.judge.to_string(),
        score.threshold,
        score.train.as_ref().map_or_else(String::new, prf),
        prf(&score.test)
    )
}

/// "P 0.91 / R 0.94 / F1 0.92 (TP n FP n FN n)".
fn prf(counts: &Confusion) -> String {
    let m = counts.metrics();
    let f = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"));
    format!(
        "{} / {} / {} ({}/{}/{})",
        f(m.precision),
        f(m.recall),
        f(m.f1),
        counts.tp,
        counts.fp,
        counts.fn_
    )
}
