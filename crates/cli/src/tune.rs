//! `loopguard tune`: `threshold` sweeps the similarity threshold over
//! labelled pairs or recorded traces, prints what each threshold catches
//! and wrongly flags, and writes the table and the pictures; `judge fit`
//! and `judge eval` (in `judge`) fit or score the same-request judge on
//! labelled pairs.

use std::io::{self, IsTerminal, Write};
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use loopguard_config::{Config, TunedEncoder};
use loopguard_semantic::{
    Embedder, Features, MPNET_TUNED_MODEL_ID, ProvisionOptions, TUNED_MODEL_ID, mpnet_encoder_saw,
    provision_options, tuned_encoder_saw,
};
use loopguard_tune::{
    Choice, Configured, EmbedOptions, EmbedStats, EmbedderChoice, EmbeddingCache, LineIssue, Mode,
    PairSet, Split, SweepRow, Thresholds, TraceSet, TuneOptions, TuneReport, TunedCosines, Vectors,
    add_tuned_cosines, embed_texts, judge_features, tune_pairs, tune_traces, write_outputs,
};

use crate::cli::{
    TuneArgs, TuneCommand, TuneCommon, TuneEmbedder, TuneEvalArgs, TuneFitArgs, TuneFormat,
    TuneJudgeCommand, TuneThresholdArgs,
};
use crate::outcome::Outcome;
use crate::setup::{self, ConfigSource};

mod judge;

/// Mistakes listed in the text output (all of them are in the JSON).
const SHOWN_MISTAKES: usize = 5;

/// What the sweep runs on.
enum Input {
    Pairs(PairSet),
    Traces(TraceSet, Option<TraceSet>),
}

/// Runs `loopguard tune threshold`, `tune judge fit` or `tune judge eval`.
pub(crate) async fn run(args: &TuneArgs, no_semantic: bool) -> anyhow::Result<Outcome> {
    if no_semantic {
        bail!(
            "tune compares texts with an embedder, so --no-semantic does not apply \
             (--embedder lexical is the model-free baseline)"
        );
    }
    match &args.command {
        TuneCommand::Threshold(args) => threshold(args).await,
        TuneCommand::Judge(TuneJudgeCommand::Fit(args)) => fit(args),
        TuneCommand::Judge(TuneJudgeCommand::Eval(args)) => eval(args).await,
    }
}

/// `loopguard tune threshold`: the config and the range first (a bad one
/// stops before any work), then the input, the embedder, the embeddings,
/// the sweep, the output.
async fn threshold(args: &TuneThresholdArgs) -> anyhow::Result<Outcome> {
    let common = &args.common;
    let config = read_config(common)?;
    let choice = embedder_choice(common);
    let mut options = TuneOptions::new(Thresholds::new(args.from, args.to, args.step)?)
        .kind(args.kind.clone())
        .embedder(choice.name())
        .configured(configured(&config, args.kind.as_deref()));
    if let Some(floor) = args.min_precision {
        options = options.min_precision(floor)?;
    }

    // clap gives one of --pairs and --traces.
    let input = match (&args.pairs, &args.traces) {
        (Some(path), _) => Input::Pairs(PairSet::read(path)?),
        (None, Some(path)) => {
            let holdout = args.holdout.as_deref().map(TraceSet::read).transpose()?;
            Input::Traces(TraceSet::read(path)?, holdout)
        }
        (None, None) => bail!("give --pairs FILE or --traces DIR_OR_FILE"),
    };
    let issues = match &input {
        Input::Pairs(set) => set.issues.clone(),
        Input::Traces(set, holdout) => set
            .issues
            .iter()
            .chain(holdout.iter().flat_map(|h| &h.issues))
            .cloned()
            .collect(),
    };
    print_issues(&issues);

    let texts: Vec<String> = match &input {
        Input::Pairs(set) => owned(set.with_kind(args.kind.as_deref()).distinct_texts()),
        Input::Traces(set, holdout) => {
            let mut texts = set.texts();
            texts.extend(holdout.iter().flat_map(TraceSet::texts));
            texts
        }
    };
    let embedded = embed(common, &config, choice, &texts)?;

    let report = match &input {
        Input::Pairs(set) => tune_pairs(
            &set.with_kind(args.kind.as_deref()),
            &embedded.vectors,
            &embedded.stats,
            &options,
        )?,
        Input::Traces(set, holdout) => {
            tune_traces(
                set,
                holdout.as_ref(),
                embedded.vectors,
                &embedded.stats,
                Arc::clone(&embedded.embedder),
                &config,
                &options,
            )
            .await?
        }
    };

    // Problems only a replay finds (a trace line that is not an event).
    for issue in report.issues.iter().filter(|issue| !issues.contains(issue)) {
        eprintln!("loopguard: {issue}");
    }
    let written = match &args.out {
        Some(dir) => write_outputs(&report, dir)?,
        None => Vec::new(),
    };
    let mut out = io::stdout().lock();
    match common.format {
        TuneFormat::Text => {
            write_text(&mut out, &report)?;
            if !written.is_empty() {
                writeln!(out, "\nwrote:")?;
                for file in &written {
                    writeln!(out, "  {}", file.display())?;
                }
            }
        }
        TuneFormat::Json => {
            serde_json::to_writer_pretty(&mut out, &report)?;
            writeln!(out)?;
            for file in &written {
                eprintln!("loopguard: wrote {}", file.display());
            }
        }
    }
    out.flush()?;
    Ok(strict_outcome(common, report.issues.len()))
}

/// `loopguard tune judge fit`: the tuned cosines and the config first (a
/// bad one stops before any work), then the pairs, their readings, the
/// fit, the output.
fn fit(args: &TuneFitArgs) -> anyhow::Result<Outcome> {
    let common = &args.common;
    // Read before any work: a bad file stops the run with its line.
    let tuned_cosines = args
        .tuned_cosines
        .as_deref()
        .map(TunedCosines::read)
        .transpose()?;
    let config = read_config(common)?;
    let readings = judge_readings(
        &args.pairs,
        args.pairs_of.kind.as_deref(),
        common,
        &config,
        args.tuned_encoder,
        tuned_cosines.as_ref(),
        true,
    )?;
    let outcome = judge::fit(
        args,
        &config,
        &readings.pairs,
        &readings.features,
        &readings.model,
        readings.tuned_id,
    )?;
    Ok(with_strict(outcome, common, readings.issues))
}

/// `loopguard tune judge eval`: the tuned cosines, the config and the
/// judge (its weights file read) first (a bad one stops before anything is
/// embedded), then the pairs, their readings, the scores, the output.
async fn eval(args: &TuneEvalArgs) -> anyhow::Result<Outcome> {
    let common = &args.common;
    let tuned_cosines = args
        .tuned_cosines
        .as_deref()
        .map(TunedCosines::read)
        .transpose()?;
    let config = read_config(common)?;
    let (judge, threshold) = judge::eval_judge(args, &config)?;
    // The judge scored may read a tuned encoder (the config's, the one
    // --tuned-encoder names, or the one its weights were fitted with).
    let tuned = judge.tuned_encoder_needed().map(|id| {
        if id == MPNET_TUNED_MODEL_ID {
            TunedEncoder::Mpnet
        } else {
            TunedEncoder::MiniLm
        }
    });
    let readings = judge_readings(
        &args.pairs,
        args.pairs_of.kind.as_deref(),
        common,
        &config,
        tuned,
        tuned_cosines.as_ref(),
        false,
    )?;
    let outcome = judge::eval(
        args,
        &config,
        &readings.pairs,
        &readings.features,
        judge,
        threshold,
    )
    .await?;
    Ok(with_strict(outcome, common, readings.issues))
}

/// `--config`, or the built-in defaults.
fn read_config(common: &TuneCommon) -> anyhow::Result<Config> {
    setup::config(ConfigSource {
        file: common.config.as_deref(),
        ..ConfigSource::default()
    })
}

/// The embedder `--embedder` names.
fn embedder_choice(common: &TuneCommon) -> EmbedderChoice {
    match common.embedder {
        TuneEmbedder::Minilm => EmbedderChoice::MiniLm,
        TuneEmbedder::Lexical => EmbedderChoice::Lexical,
    }
}

/// Each bad input line on stderr.
fn print_issues(issues: &[LineIssue]) {
    for issue in issues {
        eprintln!("loopguard: {issue}");
    }
}

/// Line errors (exit 1) with `--strict` when `issues` lines were bad,
/// else clean.
fn strict_outcome(common: &TuneCommon, issues: usize) -> Outcome {
    if common.strict && issues > 0 {
        Outcome::LineErrors
    } else {
        Outcome::Clean
    }
}

/// `outcome`, or line errors with `--strict` when it was clean and
/// `issues` lines were bad.
fn with_strict(outcome: Outcome, common: &TuneCommon, issues: usize) -> Outcome {
    match outcome {
        Outcome::Clean => strict_outcome(common, issues),
        other => other,
    }
}

/// `texts`, owned.
fn owned(texts: Vec<&str>) -> Vec<String> {
    texts.into_iter().map(str::to_owned).collect()
}

/// The embedder, its options (the disk cache unless `--no-cache`) and
/// every text embedded.
struct Embedded {
    embedder: Arc<dyn Embedder>,
    provision: ProvisionOptions,
    options: EmbedOptions,
    vectors: Vectors,
    stats: EmbedStats,
}

/// `texts` embedded by `choice` through the disk cache (a bar on a
/// terminal while it runs; the counts on stderr). The model is loaded on
/// its first inference: never when every text is cached.
fn embed(
    common: &TuneCommon,
    config: &Config,
    choice: EmbedderChoice,
    texts: &[String],
) -> anyhow::Result<Embedded> {
    let provision = provision_options(&config.semantic);
    let embedder: Arc<dyn Embedder> = choice.load(&provision, setup::announce_fetch);
    let cache = (!common.no_cache && choice.caches()).then(|| {
        EmbeddingCache::new(
            common
                .cache_dir
                .clone()
                .unwrap_or_else(|| EmbeddingCache::default_dir(&provision.resolve().model_dir)),
        )
    });
    let mut options = EmbedOptions::new();
    if let Some(cache) = &cache {
        options = options.cache(cache.clone());
    }
    let bar = progress_bar();
    let (vectors, stats) = embed_texts(
        embedder.as_ref(),
        texts.iter().map(String::as_str),
        &options,
        &mut |done, total| {
            if total > 0 {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            }
        },
    )
    .with_context(|| format!("cannot embed the texts with {choice}"))?;
    bar.finish_and_clear();
    for warning in &stats.cache_warnings {
        eprintln!("loopguard: warning: {warning}");
    }
    let from_cache = match &cache {
        Some(cache) => format!(
            ", {} from the cache in {}",
            stats.cached,
            cache.dir().display()
        ),
        None if choice.caches() => ", no disk cache (--no-cache)".to_owned(),
        None => ", not cached (computing is faster)".to_owned(),
    };
    eprintln!(
        "loopguard: {} distinct texts: {} embedded by {choice} ({}){from_cache}",
        stats.texts,
        stats.embedded,
        vectors.model_id()
    );
    Ok(Embedded {
        embedder,
        provision,
        options,
        vectors,
        stats,
    })
}

/// The pairs a judge is fitted or scored on, with what it reads of each.
struct JudgeReadings {
    /// The pairs of `--kind`, less those the tuned encoder was tuned on.
    pairs: PairSet,
    /// Each pair's readings, in the order of `pairs`.
    features: Vec<Features>,
    /// The embedding model's id.
    model: String,
    /// The tuned encoder's id, when one read the pairs.
    tuned_id: Option<&'static str>,
    /// How many lines of the pair file were bad.
    issues: usize,
}

/// The pairs of `path` (its bad lines on stderr) of `kind`, embedded, and
/// the judge's readings of each; with `tuned`, the tuned encoder's cosine
/// too ([`with_tuned_encoder`]).
fn judge_readings(
    path: &Path,
    kind: Option<&str>,
    common: &TuneCommon,
    config: &Config,
    tuned: Option<TunedEncoder>,
    tuned_cosines: Option<&TunedCosines>,
    fitting: bool,
) -> anyhow::Result<JudgeReadings> {
    let all = PairSet::read(path)?;
    print_issues(&all.issues);
    let set = all.with_kind(kind);
    let choice = embedder_choice(common);
    let embedded = embed(common, config, choice, &owned(set.distinct_texts()))?;
    let features = judge_features(
        &set,
        &embedded.vectors,
        embedded.embedder.as_ref(),
        &embedded.options,
    )
    .with_context(|| format!("cannot embed the residual texts with {choice}"))?
    .features;
    let (pairs, features, tuned_id) = match tuned {
        Some(encoder) => {
            let (set, features, id) = with_tuned_encoder(
                &set,
                features,
                &embedded.provision,
                &embedded.options,
                encoder,
                tuned_cosines,
                fitting,
            )?;
            (set, features, Some(id))
        }
        None if tuned_cosines.is_some() => bail!(
            "--tuned-cosines replaces the tuned encoder's cosines, and this judge reads no \
             tuned encoder: add --tuned-encoder"
        ),
        None => (set, features, None),
    };
    Ok(JudgeReadings {
        pairs,
        features,
        model: embedded.vectors.model_id().to_owned(),
        tuned_id,
        issues: all.issues.len(),
    })
}

/// The pairs and their features with the tuned encoder's cosine added
/// (its texts embedded through the disk cache like the model's), or the
/// cosine `from_file` gives the pair, without the pairs it was tuned on:
/// a pair with a text it saw is left out, unless `from_file` gives its
/// cosine, and the counts said on stderr (with a hint when `fitting` is
/// left no train pair).
fn with_tuned_encoder(
    set: &PairSet,
    mut features: Vec<Features>,
    provision: &ProvisionOptions,
    embed: &EmbedOptions,
    encoder: TunedEncoder,
    from_file: Option<&TunedCosines>,
    fitting: bool,
) -> anyhow::Result<(PairSet, Vec<Features>, &'static str)> {
    // Each shipped encoder was tuned on every train pair of
    // data/pairs/requests.jsonl; its out-of-fold cosines ship beside them.
    let (choice, saw, shipped_cosines): (_, fn(&str) -> bool, _) = match encoder {
        TunedEncoder::Mpnet => (
            EmbedderChoice::TunedMpnet,
            mpnet_encoder_saw,
            "data/pairs/tuned-oof-cosines-mpnet.jsonl",
        ),
        TunedEncoder::MiniLm | TunedEncoder::Off => (
            EmbedderChoice::TunedMiniLm,
            tuned_encoder_saw,
            "data/pairs/tuned-oof-cosines.jsonl",
        ),
    };
    let tuned = choice.load(provision, setup::announce_fetch);
    let (vectors, stats) = embed_texts(tuned.as_ref(), set.distinct_texts(), embed, &mut |_, _| {})
        .with_context(|| format!("cannot embed the texts with {choice}"))?;
    eprintln!(
        "loopguard: {} distinct texts: {} embedded by {choice} ({}), {} from the cache",
        stats.texts,
        stats.embedded,
        vectors.model_id(),
        stats.cached
    );
    add_tuned_cosines(set, &mut features, &vectors)?;
    let read_from_file = match from_file {
        Some(file) => {
            let read = file.apply(set, &mut features);
            eprintln!(
                "loopguard: {} of {} pairs' tuned cosines read from {} (of its {})",
                read.iter().filter(|read| **read).count(),
                set.pairs.len(),
                file.path().display(),
                file.len()
            );
            read
        }
        None => vec![false; set.pairs.len()],
    };
    let seen: Vec<bool> = set
        .pairs
        .iter()
        .zip(&read_from_file)
        .map(|(pair, from_file)| !from_file && (saw(&pair.a) || saw(&pair.b)))
        .collect();
    let left_out = seen.iter().filter(|seen| **seen).count();
    if left_out > 0 {
        let train_kept = set
            .pairs
            .iter()
            .zip(&seen)
            .filter(|(pair, seen)| pair.split == Split::Train && !**seen)
            .count();
        let hint = if fitting && from_file.is_none() && train_kept == 0 {
            format!(
                " (give --tuned-cosines with their out-of-fold cosines: {shipped_cosines} for \
                 data/pairs/requests.jsonl)"
            )
        } else {
            String::new()
        };
        eprintln!(
            "loopguard: {left_out} of {} pairs left out: the tuned encoder was tuned on their \
             texts{hint}",
            set.pairs.len()
        );
    }
    let mut kept = set.clone();
    kept.pairs = Vec::with_capacity(set.pairs.len() - left_out);
    let mut kept_features = Vec::with_capacity(set.pairs.len() - left_out);
    for ((pair, features), seen) in set.pairs.iter().zip(features).zip(seen) {
        if !seen {
            kept.pairs.push(pair.clone());
            kept_features.push(features);
        }
    }
    let id = if encoder == TunedEncoder::Mpnet {
        MPNET_TUNED_MODEL_ID
    } else {
        TUNED_MODEL_ID
    };
    Ok((kept, kept_features, id))
}

/// The thresholds configured today for `kind`: the request threshold, the
/// topic threshold, or both (one entry when they are equal).
fn configured(config: &Config, kind: Option<&str>) -> Vec<Configured> {
    let request = (
        "similarity.request_threshold",
        config.similarity.request_threshold,
    );
    let topic = (
        "similarity.topic_threshold",
        config.similarity.topic_threshold,
    );
    let keys = match kind {
        Some("request") => vec![request],
        Some("topic") => vec![topic],
        _ => vec![request, topic],
    };
    let mut configured: Vec<Configured> = Vec::new();
    for (key, value) in keys {
        // 0.85f32 is 0.8500000238 as f64; the config means 0.85.
        let value = value.to_string().parse::<f64>().unwrap_or(f64::from(value));
        match configured.iter_mut().find(|c| c.threshold == value) {
            Some(same) => same.key = format!("{}, {key}", same.key),
            None => configured.push(Configured::new(key, value)),
        }
    }
    configured
}

/// The config keys the chosen threshold goes in.
fn keys_for(kind: Option<&str>) -> &'static [&'static str] {
    match kind {
        Some("request") => &["request_threshold"],
        Some("topic") => &["topic_threshold"],
        _ => &["request_threshold", "topic_threshold"],
    }
}

/// A bar on stderr while texts are embedded, only on a terminal.
fn progress_bar() -> ProgressBar {
    if !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0);
    if let Ok(style) =
        ProgressStyle::with_template("embedding {bar:30} {pos}/{len} texts, {eta} left")
    {
        bar.set_style(style);
    }
    bar
}

/// The report for people: the table, the choices, the mistakes, the
/// config snippet.
fn write_text(out: &mut dyn Write, report: &TuneReport) -> io::Result<()> {
    write_heading(out, report)?;
    write_table(out, report)?;
    write_choices(out, report)?;
    write_mistakes(out, report)?;
    write_config_snippet(out, report)
}

/// `threshold` with as many decimals as the sweep's thresholds need.
fn fmt_threshold(report: &TuneReport, threshold: f64) -> String {
    let decimals = report.thresholds.decimals();
    format!("{threshold:.decimals$}")
}

/// What was read and how: the input and the embedder, the sizes of the
/// train and held-out splits, the rule, the lines skipped; then a blank
/// line.
fn write_heading(out: &mut dyn Write, report: &TuneReport) -> io::Result<()> {
    let kind = report
        .kind
        .as_deref()
        .map(|k| format!(", kind {k}"))
        .unwrap_or_default();
    writeln!(
        out,
        "loopguard tune: {}{kind}, {} ({}, {} dimensions)",
        report.input.display(),
        report.embedder.name,
        report.embedder.model_id,
        report.embedder.dimension
    )?;
    match report.mode {
        Mode::Pairs => {
            let split = |c: &loopguard_tune::Counts| {
                format!(
                    "{} pairs ({} same, {} different)",
                    c.items,
                    c.same,
                    c.different.unwrap_or(0)
                )
            };
            let test = report
                .test
                .as_ref()
                .map_or_else(|| "none".to_owned(), split);
            writeln!(
                out,
                "train: {}; held-out test: {test}",
                split(&report.train)
            )?;
        }
        Mode::Traces => {
            let test = match (&report.holdout, &report.test) {
                (Some(path), Some(c)) => format!(
                    "{} trace(s) in {}, {} expected detection(s)",
                    c.items,
                    path.display(),
                    c.same
                ),
                _ => "none (--holdout DIR to check the choice on other traces)".to_owned(),
            };
            writeln!(
                out,
                "train: {} trace(s), {} expected detection(s); held-out: {test}",
                report.train.items, report.train.same
            )?;
        }
    }
    writeln!(
        out,
        "\"the same\" when cosine > threshold; thresholds are chosen on the train split only"
    )?;
    if !report.issues.is_empty() {
        writeln!(
            out,
            "{} input line(s) skipped (listed on stderr)",
            report.issues.len()
        )?;
    }
    writeln!(out)
}

/// The sweep's table, one row per threshold with its marks (best F1, the
/// precision floor, configured); then a blank line.
fn write_table(out: &mut dyn Write, report: &TuneReport) -> io::Result<()> {
    let width = (report.thresholds.decimals() + 3).max(9);
    writeln!(
        out,
        "{:>width$} {:>5} {:>5} {:>5} {:>5} {:>9} {:>7} {:>6} {:>6}",
        "threshold", "TP", "FP", "TN", "FN", "precision", "recall", "F1", "FPR"
    )?;
    let floor_mark = report
        .min_precision
        .as_ref()
        .map(|m| format!("precision >= {}", m.floor))
        .unwrap_or_default();
    for row in &report.rows {
        let marks: Vec<&str> = report
            .marks(row.threshold)
            .into_iter()
            .map(|mark| match mark {
                "best_f1" => "best F1",
                "min_precision" => floor_mark.as_str(),
                _ => "configured",
            })
            .collect();
        let marks = if marks.is_empty() {
            String::new()
        } else {
            format!("  <- {}", marks.join(", "))
        };
        let c = &row.confusion;
        let m = &row.metrics;
        writeln!(
            out,
            "{:>width$} {:>5} {:>5} {:>5} {:>5} {:>9} {:>7} {:>6} {:>6}{marks}",
            fmt_threshold(report, row.threshold),
            c.tp,
            c.fp,
            c.tn.map_or_else(|| "n/a".to_owned(), |tn| tn.to_string()),
            c.fn_,
            ratio(m.precision),
            ratio(m.recall),
            ratio(m.f1),
            ratio(m.fpr),
        )?;
    }
    writeln!(out)
}

/// The thresholds chosen (best F1, the lowest that meets the precision
/// floor) and those configured today, each with its scores.
fn write_choices(out: &mut dyn Write, report: &TuneReport) -> io::Result<()> {
    match &report.best_f1 {
        Some(best) => {
            let edge = if (best.threshold - report.thresholds.from()).abs() < 1e-9 {
                " (the lowest of the sweep: the best may be lower, try a lower --from)"
            } else if (best.threshold - report.thresholds.to()).abs() < 1e-9 {
                " (the highest of the sweep: the best may be higher, try a higher --to)"
            } else {
                ""
            };
            writeln!(
                out,
                "best F1: {}{edge}",
                fmt_threshold(report, best.threshold)
            )?;
            write_scores(out, report, best)?;
        }
        None => {
            let unit = match report.mode {
                Mode::Pairs => "pairs",
                Mode::Traces => "detections",
            };
            writeln!(
                out,
                "best F1: none (no {unit} labelled the same and none flagged)"
            )?;
        }
    }
    if let Some(floor) = &report.min_precision {
        match &floor.choice {
            Some(choice) => {
                writeln!(
                    out,
                    "precision >= {}: {}, the lowest threshold that meets it (the most recall)",
                    floor.floor,
                    fmt_threshold(report, choice.threshold)
                )?;
                write_scores(out, report, choice)?;
            }
            None => writeln!(
                out,
                "precision >= {}: no threshold from {} to {} meets it on the train split",
                floor.floor,
                fmt_threshold(report, report.thresholds.from()),
                fmt_threshold(report, report.thresholds.to())
            )?,
        }
    }
    for configured in &report.configured {
        writeln!(
            out,
            "configured now: {} = {}",
            configured.key.as_deref().unwrap_or("?"),
            fmt_threshold(report, configured.threshold)
        )?;
        write_scores(out, report, configured)?;
    }
    Ok(())
}

/// A chosen threshold's scores on the train split and the held-out one.
fn write_scores(out: &mut dyn Write, report: &TuneReport, choice: &Choice) -> io::Result<()> {
    writeln!(out, "  train     {}", line(&choice.train))?;
    match &choice.test {
        Some(test) => writeln!(out, "  held-out  {}", line(test)),
        None => {
            let (test_name, how) = match report.mode {
                Mode::Pairs => ("test pairs", " (lines with \"split\": \"test\")"),
                Mode::Traces => ("held-out traces", " (--holdout DIR)"),
            };
            writeln!(out, "  held-out  n/a: no {test_name}{how}")
        }
    }
}

/// The first mistakes at the best F1 threshold: what it wrongly flagged
/// (highest cosine first), then what it missed (lowest first).
fn write_mistakes(out: &mut dyn Write, report: &TuneReport) -> io::Result<()> {
    let Some(mistakes) = &report.mistakes else {
        return Ok(());
    };
    for (what, order, list) in [
        ("wrongly flagged", "highest", &mistakes.false_positives),
        ("missed", "lowest", &mistakes.false_negatives),
    ] {
        if list.is_empty() {
            continue;
        }
        writeln!(
            out,
            "\n{what} at {} (train, {} of {}, {order} cosine first):",
            fmt_threshold(report, mistakes.threshold),
            list.len().min(SHOWN_MISTAKES),
            list.len()
        )?;
        for example in list.iter().take(SHOWN_MISTAKES) {
            let cosine = example
                .cosine
                .map_or_else(|| "  n/a".to_owned(), |c| format!("{c:.3}"));
            let detail = match (&example.a, &example.b) {
                (Some(a), Some(b)) => format!("{:?} / {:?}", clip(a), clip(b)),
                _ => example.kind.clone().unwrap_or_default(),
            };
            writeln!(out, "  {cosine}  {}  {detail}", example.at)?;
        }
    }
    Ok(())
}

/// The TOML that sets the recommended threshold, and why it is the one.
fn write_config_snippet(out: &mut dyn Write, report: &TuneReport) -> io::Result<()> {
    let Some(choice) = report.recommended() else {
        return Ok(());
    };
    let why = if report
        .min_precision
        .as_ref()
        .and_then(|m| m.choice.as_ref())
        .is_some()
    {
        "the lowest threshold with the precision asked for"
    } else {
        "the best F1 on the train split"
    };
    writeln!(
        out,
        "\nto use {} ({why}), in your config:",
        fmt_threshold(report, choice.threshold)
    )?;
    writeln!(out, "  [similarity]")?;
    for key in keys_for(report.kind.as_deref()) {
        writeln!(out, "  {key} = {}", fmt_threshold(report, choice.threshold))?;
    }
    writeln!(
        out,
        "(or under [similarity.task_types.NAME] for one task type; see docs/tuning.md)"
    )
}

/// "precision 0.966  recall 0.933  F1 0.949  FPR 0.033  (TP 140, FP 5, TN 145, FN 10)".
fn line(row: &SweepRow) -> String {
    let c = &row.confusion;
    let m = &row.metrics;
    let tn = c.tn.map(|tn| format!(", TN {tn}")).unwrap_or_default();
    format!(
        "precision {}  recall {}  F1 {}  FPR {}  (TP {}, FP {}{tn}, FN {})",
        ratio(m.precision),
        ratio(m.recall),
        ratio(m.f1),
        ratio(m.fpr),
        c.tp,
        c.fp,
        c.fn_
    )
}

/// A ratio with 3 decimals, or `n/a` when undefined.
fn ratio(value: Option<f64>) -> String {
    value.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.3}"))
}

/// `text` cut to 60 characters.
fn clip(text: &str) -> String {
    const MAX: usize = 60;
    if text.chars().count() <= MAX {
        text.to_owned()
    } else {
        let cut: String = text.chars().take(MAX - 1).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_thresholds_read_as_the_config_wrote_them() {
        let config = Config::default();
        let both = configured(&config, None);
        assert_eq!(
            both,
            [Configured::new(
                "similarity.request_threshold, similarity.topic_threshold",
                0.85
            )]
        );
        let mut config = Config::default();
        config.similarity.topic_threshold = 0.8;
        assert_eq!(configured(&config, None).len(), 2);
        assert_eq!(
            configured(&config, Some("topic")),
            [Configured::new("similarity.topic_threshold", 0.8)]
        );
    }
}
