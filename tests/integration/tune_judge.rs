//! `loopguard tune judge fit` and `tune judge eval` on small pair files
//! with the lexical embedder (whose cosines are known): the files written,
//! the counts and intervals, the cross-validation, the flags each
//! subcommand refuses, the picture of both judges; and the second opinion
//! of a fake LLM that knows every label.

use std::ffi::OsStr;
use std::fs;
use std::path::Path;

use serde_json::Value;
use tempfile::TempDir;

use crate::support::*;
use crate::tune::{
    EVAL, FIT, JUDGE_PAIRS, PAIRS, THRESHOLD, eval_only_json, pair_file, tune_lexical, workspace,
    write_config,
};

#[test]
fn eval_only_with_out_writes_every_verdict_and_the_mistakes_worst_first() {
    let dir = TempDir::new().expect("a temporary directory");
    // No split: every pair is scored; the first two are a hard case.
    let unsplit: String = JUDGE_PAIRS.replace(r#", "split": "test""#, "").replacen(
        r#""same": false}"#,
        r#""same": false, "hard": "values"}"#,
        2,
    );
    let pairs = pair_file(&dir, &unsplit);
    let out = dir.path().join("eval");
    let threshold = 0.7;
    let config = write_config(
        &dir,
        "cosine.toml",
        &format!("[similarity]\njudge = \"cosine\"\nrequest_threshold = {threshold}\n"),
    );
    let text = tune_lexical(
        EVAL,
        &pairs,
        &[
            "--config".as_ref(),
            config.as_os_str(),
            "--out".as_ref(),
            out.as_os_str(),
        ],
    );
    assert_eq!(text.code, Some(0), "{text:?}");
    let eval_json = out.join("eval.json");
    let pairs_jsonl = out.join("pairs.jsonl");
    assert!(
        text.stdout.contains(&eval_json.display().to_string())
            && text.stdout.contains(&pairs_jsonl.display().to_string()),
        "{}",
        text.stdout
    );
    assert_the_hard_case_table(&text.stdout);
    let judged = every_verdict_at(&pairs_jsonl, threshold);

    // eval.json: the counts --format json prints, and the mistakes.
    let eval: Value =
        serde_json::from_str(&fs::read_to_string(&eval_json).expect("eval.json written"))
            .expect("JSON");
    let printed = eval_only_json(&pairs, &["--config".as_ref(), config.as_os_str()]);
    let printed: Value = serde_json::from_str(printed.stdout.trim()).expect("one JSON object");
    for key in ["judge", "threshold", "tp", "fp", "fn", "tn", "f1"] {
        assert_eq!(eval[key], printed[key], "{key}");
    }
    assert_the_average_precision(&eval, &judged, &text.stdout);
    // Not in what --format json prints: its keys are the issue's.
    assert!(printed.get("average_precision").is_none(), "{printed}");
    assert!(printed.get("intervals").is_none(), "{printed}");
    assert_the_intervals(&eval, &text.stdout);
    assert_the_mistakes_worst_first(&eval, &judged, threshold);

    // A place that cannot be a directory is one clear error.
    let blocked = dir.path().join("a-file");
    fs::write(&blocked, "").expect("write a file");
    let failed = tune_lexical(
        EVAL,
        &pairs,
        &[
            "--config".as_ref(),
            config.as_os_str(),
            "--out".as_ref(),
            blocked.as_os_str(),
        ],
    );
    assert_eq!(failed.code, Some(2), "{failed:?}");
    assert!(
        failed.stderr.contains(&blocked.display().to_string()),
        "{}",
        failed.stderr
    );
}

/// `value[key]` as a number, NaN when it is not one.
fn number(value: &Value, key: &str) -> f64 {
    value[key].as_f64().unwrap_or(f64::NAN)
}

/// The table by hard case in `stdout`: the two marked pairs, and the rest.
fn assert_the_hard_case_table(stdout: &str) {
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .skip_while(|line| !line.starts_with("by hard case"))
        .skip(2)
        .take_while(|line| !line.is_empty())
        .map(|line| line.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows.iter().map(|row| (row[0], row[1])).collect::<Vec<_>>(),
        [("-", "4"), ("values", "2")],
        "{stdout}"
    );
}

/// The pairs `pairs_jsonl` lists: every pair, in the file's order, with its
/// verdict at `threshold`, its score (the cosine) and the reason naming the
/// threshold.
fn every_verdict_at(pairs_jsonl: &Path, threshold: f64) -> Vec<Value> {
    let judged: Vec<Value> = fs::read_to_string(pairs_jsonl)
        .expect("pairs.jsonl written")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    let lines: Vec<u64> = judged.iter().filter_map(|p| p["line"].as_u64()).collect();
    assert_eq!(lines, [1, 2, 3, 4, 5, 6]);
    for pair in &judged {
        let said = pair["said_same"].as_bool().expect("said_same");
        assert_eq!(said, number(pair, "score") > threshold, "{pair}");
        assert_eq!(number(pair, "score"), number(pair, "cosine"), "{pair}");
        assert!(
            pair["reason"]
                .as_str()
                .is_some_and(|r| r.contains(&format!("threshold {threshold:.2}"))),
            "{pair}"
        );
    }
    judged
}

/// eval.json's average precision is that of the scores in pairs.jsonl
/// (`judged`), recomputed here: each same pair, highest score first, at
/// the precision of the pairs scored at least as high; and the text
/// (`stdout`) prints it.
fn assert_the_average_precision(eval: &Value, judged: &[Value], stdout: &str) {
    let labelled: Vec<(f64, bool)> = judged
        .iter()
        .map(|p| (number(p, "score"), p["same"] == true))
        .collect();
    let same_pairs = labelled.iter().filter(|(_, same)| *same).count() as f64;
    let expected: f64 = labelled
        .iter()
        .filter(|(_, same)| *same)
        .map(|(score, _)| {
            let above: Vec<&(f64, bool)> = labelled.iter().filter(|(s, _)| s >= score).collect();
            let found = above.iter().filter(|(_, same)| *same).count() as f64;
            found / above.len() as f64 / same_pairs
        })
        .sum();
    let ranking = eval["average_precision"]
        .as_f64()
        .expect("average_precision");
    assert!((ranking - expected).abs() < 1e-9, "{ranking} vs {expected}");
    assert!(
        stdout.contains(&format!(
            "average precision (every threshold): {expected:.3}"
        )),
        "{stdout}"
    );
}

/// How sure each figure is: its 90% bootstrap interval over the six pairs
/// holds the figure itself, and the text (`stdout`) prints the same ends.
fn assert_the_intervals(eval: &Value, stdout: &str) {
    let intervals = &eval["intervals"];
    assert_eq!(
        (
            intervals["pairs"].as_u64(),
            intervals["resamples"].as_u64(),
            intervals["level"].as_f64()
        ),
        (Some(6), Some(2000), Some(0.9)),
        "{intervals}"
    );
    let mut ends = Vec::new();
    for figure in ["precision", "recall", "f1"] {
        let point = eval[figure].as_f64().expect("a defined figure");
        let [low, high] = [0, 1].map(|end| intervals[figure][end].as_f64().unwrap_or(f64::NAN));
        assert!(
            (0.0..=1.0).contains(&low) && low <= point && point <= high && high <= 1.0,
            "{figure} {point} in {intervals}"
        );
        ends.push(format!("{low:.2}-{high:.2}"));
    }
    let line = format!(
        "90% intervals (2000 bootstrap resamples of the 6 pairs): P {} / R {} / F1 {}",
        ends[0], ends[1], ends[2]
    );
    assert!(stdout.contains(&line), "{line} in {stdout}");
}

/// eval.json's counts by hard case add up to the whole, and its mistakes
/// are the pairs `judged` wrong, the farthest from `threshold` first.
fn assert_the_mistakes_worst_first(eval: &Value, judged: &[Value], threshold: f64) {
    let wrong: Vec<&Value> = judged
        .iter()
        .filter(|p| p["said_same"] != p["same"])
        .collect();
    let hard: Vec<&Value> = judged.iter().map(|p| &p["hard"]).collect();
    assert_eq!(
        hard[..3],
        [&Value::from("values"), &Value::from("values"), &Value::Null]
    );
    let by_hard = eval["by_hard"].as_array().expect("by_hard");
    assert_eq!(by_hard.len(), 2);
    for key in ["tp", "fp", "fn", "tn"] {
        let sum: u64 = by_hard.iter().filter_map(|row| row[key].as_u64()).sum();
        assert_eq!(Some(sum), eval[key].as_u64(), "{key}");
    }
    let count = |key: &str| eval[key].as_u64().unwrap_or(u64::MAX);
    assert_eq!(wrong.len() as u64, count("fp") + count("fn"));
    assert!(
        !wrong.is_empty(),
        "a pair the cosine gets wrong: {judged:?}"
    );
    let mistakes = eval["mistakes"].as_array().expect("mistakes");
    assert_eq!(mistakes.len(), wrong.len());
    let distances: Vec<f64> = mistakes
        .iter()
        .map(|m| (number(m, "score") - threshold).abs())
        .collect();
    assert!(
        distances.windows(2).all(|w| w[0] >= w[1]),
        "worst first: {distances:?}"
    );
    for mistake in mistakes {
        assert!(wrong.contains(&mistake), "{mistake}");
    }
}

#[test]
fn the_judge_is_fitted_written_and_scored_and_eval_only_prints_its_counts() {
    let dir = TempDir::new().expect("a temporary directory");
    let pairs = pair_file(&dir, JUDGE_PAIRS);
    let weights = dir.path().join("weights").join("judge.json");
    let fitted = tune_lexical(
        FIT,
        &pairs,
        &["--weights-out".as_ref(), weights.as_os_str()],
    );
    assert_eq!(fitted.code, Some(0), "{fitted:?}");
    assert!(fitted.stdout.contains("calibrated"), "{}", fitted.stdout);
    assert!(
        fitted.stdout.contains("residual_cosine"),
        "{}",
        fitted.stdout
    );
    // Both judges' ranking of the held-out pairs, whatever their thresholds.
    assert!(
        fitted
            .stdout
            .contains("held-out average precision (every threshold): cosine "),
        "{}",
        fitted.stdout
    );
    // And how sure each judge's held-out figures are, over its 2 test pairs.
    let interval_rows: Vec<&str> = fitted
        .stdout
        .lines()
        .skip_while(|line| *line != "90% intervals (2000 bootstrap resamples of the 2 test pairs):")
        .skip(1)
        .take(2)
        .collect();
    assert_eq!(interval_rows.len(), 2, "{}", fitted.stdout);
    for (row, judge) in interval_rows.iter().zip(["cosine", "calibrated"]) {
        assert!(
            row.trim_start().starts_with(judge) && row.contains(" / F1 "),
            "{row}"
        );
    }
    // The weights file reads back as judge weights, fitted on this file.
    let written: Value =
        serde_json::from_str(&fs::read_to_string(&weights).expect("weights written"))
            .expect("JSON");
    assert_eq!(written["format"], 2);
    assert!(
        written["fitted_on"]
            .as_str()
            .is_some_and(|f| f.contains("pairs.jsonl")),
        "{written}"
    );
    // Scored as they are, on the test split: the contrast is caught, the
    // repeat kept, and the counts come as the documented JSON.
    let eval = eval_only_json(&pairs, &["--weights".as_ref(), weights.as_os_str()]);
    assert_eq!(eval.code, Some(0), "{eval:?}");
    let scored: Value = serde_json::from_str(eval.stdout.trim()).expect("one JSON object");
    let keys: Vec<&str> = scored
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "f1",
            "fn",
            "fp",
            "judge",
            "precision",
            "recall",
            "threshold",
            "tn",
            "tp"
        ]
    );
    assert_eq!(scored["judge"], "calibrated");
    assert_eq!(
        (scored["tp"].as_u64(), scored["fp"].as_u64()),
        (Some(1), Some(0))
    );
    assert_eq!(
        (scored["tn"].as_u64(), scored["fn"].as_u64()),
        (Some(1), Some(0))
    );
    // The cosine judge at the configured 0.85 flags the contrast (lexical
    // cosine 0.8 + a shared build number) or not; either way it is scored
    // at the config's request threshold.
    let cosine = eval_only_json(&pairs, &["--judge".as_ref(), "cosine".as_ref()]);
    let cosine: Value = serde_json::from_str(cosine.stdout.trim()).expect("one JSON object");
    assert_eq!(cosine["judge"], "cosine");
    assert_eq!(cosine["threshold"], 0.85);
}

#[test]
fn folds_cross_validate_the_calibrated_judge_on_the_train_split() {
    let dir = TempDir::new().expect("a temporary directory");
    let pairs = pair_file(&dir, JUDGE_PAIRS);
    let folds = |count: &str, extra: &[&OsStr]| {
        let mut args: Vec<&OsStr> = vec!["--folds".as_ref(), count.as_ref()];
        args.extend_from_slice(extra);
        tune_lexical(FIT, &pairs, &args)
    };
    let json = folds("2", &["--format".as_ref(), "json".as_ref()]);
    assert_eq!(json.code, Some(0), "{json:?}");
    let document: Value = serde_json::from_str(json.stdout.trim()).expect("JSON");
    let cv = &document["cross_validation"];
    // Four train pairs (two of each label) in two folds, ten shuffles.
    assert_eq!(
        (
            cv["folds"].as_u64(),
            cv["repeats"].as_u64(),
            cv["pairs"].as_u64()
        ),
        (Some(2), Some(10), Some(4)),
        "{cv}"
    );
    let f1 = cv["f1"].as_array().expect("one F1 per shuffle");
    assert_eq!(f1.len(), 10);
    let mean = cv["f1_mean"].as_f64().expect("a mean");
    assert!((0.0..=1.0).contains(&mean), "{cv}");
    // And the threshold each shuffle found its F1 at.
    let thresholds = cv["thresholds"].as_array().expect("one per shuffle");
    assert_eq!(thresholds.len(), 10);
    assert!(
        thresholds
            .iter()
            .all(|t| t.as_f64().is_some_and(|t| (0.0..1.0).contains(&t))),
        "{cv}"
    );
    let text = folds("2", &[]);
    assert!(
        text.stdout
            .contains("cross-validated on the 4 train pairs (2 folds, 10 shuffles)"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains(", at thresholds "), "{}", text.stdout);
    // Each shuffle's average precision of its out-of-fold scores, and
    // their mean, in the JSON and the text.
    let ranking = cv["average_precision"]
        .as_array()
        .expect("one average precision per shuffle");
    assert_eq!(ranking.len(), 10);
    let values: Vec<f64> = ranking.iter().filter_map(Value::as_f64).collect();
    assert!(
        values.len() == 10 && values.iter().all(|v| (0.0..=1.0).contains(v)),
        "{cv}"
    );
    let ranking_mean = cv["average_precision_mean"].as_f64().expect("a mean");
    assert!(
        (ranking_mean - values.iter().sum::<f64>() / 10.0).abs() < 1e-9,
        "{cv}"
    );
    assert!(
        text.stdout
            .contains(&format!("; average precision {ranking_mean:.3}")),
        "{}",
        text.stdout
    );
    // Scoring a judge fits nothing to cross-validate: `judge eval` takes
    // no --folds, and clap says so before any work.
    let eval = tune_lexical(EVAL, &pairs, &["--folds".as_ref(), "2".as_ref()]);
    assert_eq!(eval.code, Some(2), "{eval:?}");
    assert!(
        eval.stderr.contains("unexpected argument '--folds' found"),
        "{}",
        eval.stderr
    );
    assert!(!eval.stderr.contains("distinct texts"), "{}", eval.stderr);
    assert_eq!(eval.stdout, "");
    // More folds than pairs of a label: said, with the counts, and no
    // weights written.
    let weights = dir.path().join("never.json");
    let too_many = folds("3", &["--weights-out".as_ref(), weights.as_os_str()]);
    assert_eq!(too_many.code, Some(2), "{too_many:?}");
    assert!(
        too_many.stderr.contains("3 folds; 2 same, 2 different"),
        "{}",
        too_many.stderr
    );
    assert!(!weights.exists(), "nothing half written");
}

#[test]
fn the_shipped_reply_pairs_are_scored_whole_with_nothing_fitted() {
    // `data/pairs/replies.jsonl` has no split: eval-only scores all 48
    // pairs (24 of them the same reply reworded) with the shipped judge.
    let pairs = workspace("data/pairs/replies.jsonl");
    let scored = run([
        "tune".as_ref(),
        "judge".as_ref(),
        "eval".as_ref(),
        "--pairs".as_ref(),
        pairs.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
    ]);
    assert_eq!(scored.code, Some(0), "{scored:?}");
    let scored: Value = serde_json::from_str(scored.stdout.trim()).expect("one JSON object");
    assert_eq!(scored["judge"], "calibrated");
    let count = |key: &str| scored[key].as_u64().unwrap_or_default();
    assert_eq!(count("tp") + count("fn"), 24, "{scored}");
    assert_eq!(count("fp") + count("tn"), 24, "{scored}");
}

#[test]
fn the_threshold_sweep_takes_none_of_the_judges_flags() {
    let dir = TempDir::new().expect("a temporary directory");
    let pairs = pair_file(&dir, PAIRS);
    let weights = dir.path().join("weights.json");
    for (flags, flag) in [
        (
            &["--weights".as_ref(), weights.as_os_str()][..],
            "--weights",
        ),
        (
            &["--weights-out".as_ref(), weights.as_os_str()][..],
            "--weights-out",
        ),
        (&["--judge".as_ref(), "cosine".as_ref()][..], "--judge"),
        (&["--folds".as_ref(), "5".as_ref()][..], "--folds"),
        (&["--second-opinion".as_ref()][..], "--second-opinion"),
    ] {
        let refused = tune_lexical(THRESHOLD, &pairs, flags);
        assert_eq!(refused.code, Some(2), "{flag}: {refused:?}");
        assert!(
            refused
                .stderr
                .contains(&format!("unexpected argument '{flag}' found")),
            "{flag}: {}",
            refused.stderr
        );
        // A usage error: nothing read, nothing embedded, nothing written.
        assert!(
            !refused.stderr.contains("distinct texts"),
            "{}",
            refused.stderr
        );
        assert_eq!(refused.stdout, "", "{flag}");
        assert!(!weights.exists(), "{flag}");
    }
}

#[test]
fn the_flat_spelling_of_tune_is_refused_naming_the_subcommand() {
    let dir = TempDir::new().expect("a temporary directory");
    let pairs = pair_file(&dir, PAIRS);
    for (flags, says) in [
        (
            &[
                "--pairs".as_ref(),
                pairs.as_os_str(),
                "--judge".as_ref(),
                "calibrated".as_ref(),
            ][..],
            "`loopguard tune judge fit --pairs FILE`",
        ),
        (
            &[
                "--pairs".as_ref(),
                pairs.as_os_str(),
                "--eval-only".as_ref(),
            ][..],
            "`loopguard tune judge eval --pairs FILE`",
        ),
        (
            &["--pairs".as_ref(), pairs.as_os_str()][..],
            "`loopguard tune threshold --pairs FILE`",
        ),
        (
            &[
                "--eval-only".as_ref(),
                "--pairs".as_ref(),
                pairs.as_os_str(),
            ][..],
            "`loopguard tune judge eval --pairs FILE`",
        ),
        (
            &["--traces".as_ref(), dir.path().as_os_str()][..],
            "`loopguard tune threshold --traces DIR_OR_FILE`",
        ),
    ] {
        let mut args: Vec<&OsStr> = vec!["tune".as_ref()];
        args.extend_from_slice(flags);
        let refused = run(args);
        assert_eq!(refused.code, Some(2), "{flags:?}: {refused:?}");
        assert!(
            refused.stderr.contains(says),
            "{flags:?}: {}",
            refused.stderr
        );
        assert_eq!(refused.stdout, "");
    }
}

#[test]
fn strict_makes_bad_pair_lines_exit_1_when_the_judge_is_fitted_or_scored() {
    let dir = TempDir::new().expect("a temporary directory");
    let pairs = pair_file(&dir, &format!("{JUDGE_PAIRS}not json\n"));
    for subcommand in [FIT, EVAL] {
        let lenient = tune_lexical(subcommand, &pairs, &[]);
        assert_eq!(lenient.code, Some(0), "{subcommand:?}: {lenient:?}");
        assert!(
            lenient.stderr.contains(":7: not a JSON object"),
            "{}",
            lenient.stderr
        );
        let strict = tune_lexical(subcommand, &pairs, &["--strict".as_ref()]);
        assert_eq!(strict.code, Some(1), "{subcommand:?}: {strict:?}");
        assert_eq!(strict.stdout, lenient.stdout, "the work is still done");
    }
}

#[test]
fn the_judge_fit_draws_both_judges_curves_in_one_picture() {
    let dir = TempDir::new().expect("a temporary directory");
    let pairs = pair_file(&dir, JUDGE_PAIRS);
    let out = dir.path().join("out");
    let fitted = tune_lexical(
        FIT,
        &pairs,
        &[
            "--out".as_ref(),
            out.as_os_str(),
            "--format".as_ref(),
            "json".as_ref(),
        ],
    );
    assert_eq!(fitted.code, Some(0), "{fitted:?}");
    let png = fs::read(out.join("judge_pr_curve.png")).expect("the PNG");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    let svg = fs::read_to_string(out.join("judge_pr_curve.svg")).expect("the SVG");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    for label in ["cosine judge (threshold", "calibrated judge (threshold"] {
        assert!(svg.contains(label), "no legend {label:?} in the SVG");
    }
    // The curve points are in the report, on stdout and in judge.json, on
    // the held-out split, each judge at its own operating threshold.
    let report: Value = serde_json::from_str(&fitted.stdout).expect("JSON");
    let written: Value = serde_json::from_str(
        &fs::read_to_string(out.join("judge.json")).expect("judge.json written"),
    )
    .expect("JSON");
    let curves = &report["held_out_pr_curves"];
    assert_eq!(&written["held_out_pr_curves"], curves);
    assert_eq!(curves["split"], "test");
    assert_eq!(curves["pairs"], 2);
    // Each judge's held-out intervals are in both too, over the same pairs.
    for judge in ["cosine", "calibrated"] {
        let intervals = &report[judge]["test_intervals"];
        assert_eq!(&written[judge]["test_intervals"], intervals, "{judge}");
        assert_eq!(
            (intervals["pairs"].as_u64(), intervals["resamples"].as_u64()),
            (Some(2), Some(2000)),
            "{judge}: {intervals}"
        );
    }
    assert_eq!(curves["cosine"]["threshold"], 0.85);
    let (operating, fitted) = (
        curves["calibrated"]["threshold"]
            .as_f64()
            .expect("a threshold"),
        report["weights"]["threshold"]
            .as_f64()
            .expect("a threshold"),
    );
    assert!((operating - fitted).abs() < 1e-6, "{operating} vs {fitted}");
    for judge in ["cosine", "calibrated"] {
        // Two held-out pairs, one of each label: the same pair ranked
        // first gives 1, last 1/2 (or 1/2 when both score alike).
        let ranking = curves[judge]["average_precision"]
            .as_f64()
            .expect("an average precision");
        assert!(ranking == 1.0 || ranking == 0.5, "{judge}: {curves}");
        let points = curves[judge]["points"].as_array().expect("points");
        assert!(!points.is_empty(), "{judge}: {curves}");
        assert!(
            points.iter().all(|p| {
                let in_range =
                    |key: &str| p[key].as_f64().is_some_and(|v| (0.0..=1.0).contains(&v));
                in_range("precision") && in_range("recall")
            }),
            "{judge}: {curves}"
        );
    }
}

/// A fake LLM that answers every same-request question with the pair's
/// label in `pairs` (a reader that is always right), on 127.0.0.1; and the
/// runtime it runs on. Unknown pairs get a garbled answer.
fn labelling_llm(
    pairs: &Path,
) -> (
    tokio::runtime::Runtime,
    std::sync::Arc<loopguard_test_support::fake_llm::FakeLlm>,
) {
    use loopguard_test_support::fake_llm::{FakeAnswer, FakeLlm, message};
    let mut labels = std::collections::HashMap::new();
    for line in fs::read_to_string(pairs).expect("the pairs").lines() {
        let pair: Value = serde_json::from_str(line).expect("a pair");
        let text = |key: &str| pair[key].as_str().unwrap_or_default().to_owned();
        labels.insert((text("a"), text("b")), pair["same"] == true);
    }
    let (runtime, fake) = FakeLlm::start_in_background(move |_, body| {
        let user = message(body, "user").unwrap_or_default();
        let quoted = |prefix: &str| {
            user.lines()
                .find_map(|line| line.strip_prefix(prefix))
                .and_then(|json| serde_json::from_str::<String>(json).ok())
                .unwrap_or_default()
        };
        match labels.get(&(quoted("First message: "), quoted("Second message: "))) {
            Some(same) => FakeAnswer::Content(format!(r#"{{"same": {same}, "reason": "label"}}"#)),
            None => FakeAnswer::Content("no idea".into()),
        }
    });
    (runtime, fake)
}

#[test]
fn eval_only_with_a_second_opinion_scores_the_judge_alone_and_with_it() {
    // The unseen batches' 48 test pairs, with the real model; the "LLM"
    // knows every label, so every pair it hears is right.
    let pairs = workspace("data/pairs/unseen-batches-16-18.jsonl");
    let (_runtime, fake) = labelling_llm(&pairs);
    let plain = run([
        "tune".as_ref(),
        "judge".as_ref(),
        "eval".as_ref(),
        "--pairs".as_ref(),
        pairs.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
    ]);
    assert_eq!(plain.code, Some(0), "{plain:?}");
    let plain: Value = serde_json::from_str(plain.stdout.trim()).expect("one JSON object");

    let dir = TempDir::new().expect("a temporary directory");
    let mut command = loopguard();
    command
        .env("LOOPGUARD_LLM_BASE_URL", fake.base_url())
        .env("LOOPGUARD_LLM_MODEL", "labels")
        .args(["tune", "judge", "eval", "--pairs"])
        .arg(&pairs)
        .args(["--second-opinion", "--format", "json", "--out"])
        .arg(dir.path());
    let judged = run_command(&mut command, b"");
    assert_eq!(judged.code, Some(0), "{judged:?}");
    let judged: Value = serde_json::from_str(judged.stdout.trim()).expect("one JSON object");
    let count = |value: &Value, key: &str| value[key].as_u64().unwrap_or(u64::MAX);

    // The judge alone is what plain `judge eval` prints.
    for key in ["tp", "fp", "fn", "tn"] {
        assert_eq!(
            count(&judged["judge_alone"], key),
            count(&plain, key),
            "{key}"
        );
    }
    let second = &judged["second_opinion"];
    assert_eq!(second["by"], "LLM labels");
    assert_eq!(count(second, "pairs"), 48);
    let asked = count(second, "asked");
    assert!(asked > 0 && asked < 48, "only the unsure pairs: {second}");
    assert_eq!(count(second, "answered"), asked, "{second}");
    assert_eq!(count(second, "failed"), 0, "{second}");
    assert_eq!(fake.requests() as u64, asked);
    // A reader that is always right fixes every mistake it hears, and
    // the judge's own sure verdicts stay as they were.
    let mistakes = |value: &Value| count(value, "fp") + count(value, "fn");
    assert!(mistakes(&judged) < mistakes(&plain), "{judged}");
    assert_eq!(
        count(&judged, "tp") + count(&judged, "fn"),
        count(&plain, "tp") + count(&plain, "fn")
    );

    // --out: every pair's final verdict, and who decided it.
    let written: Value = serde_json::from_str(
        &fs::read_to_string(dir.path().join("eval.json")).expect("eval.json written"),
    )
    .expect("JSON");
    assert_eq!(written["second_opinion"], judged["second_opinion"]);
    assert_eq!(
        written["mistakes"].as_array().map(Vec::len),
        Some(mistakes(&judged) as usize)
    );
    let lines: Vec<Value> = fs::read_to_string(dir.path().join("pairs.jsonl"))
        .expect("pairs.jsonl written")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 48);
    let decided_by_it = lines
        .iter()
        .filter(|p| {
            p["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("LLM labels says"))
        })
        .count();
    assert_eq!(decided_by_it as u64, asked);
}

#[test]
fn eval_only_with_an_unreachable_second_opinion_keeps_the_judges_verdicts_and_warns() {
    let pairs = workspace("data/pairs/unseen-batches-16-18.jsonl");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let address = listener.local_addr().expect("bound");
    drop(listener);
    let mut command = loopguard();
    command
        .env("LOOPGUARD_LLM_BASE_URL", format!("http://{address}/v1"))
        .env("LOOPGUARD_LLM_MODEL", "nobody")
        .args(["tune", "judge", "eval", "--pairs"])
        .arg(&pairs)
        .args(["--second-opinion", "--format", "json"]);
    let judged = run_command(&mut command, b"");
    assert_eq!(judged.code, Some(0), "{judged:?}");
    assert!(
        judged
            .stderr
            .contains("the second opinion gave no answer on"),
        "{}",
        judged.stderr
    );
    assert!(judged.stderr.contains("cannot reach"), "{}", judged.stderr);
    let judged: Value = serde_json::from_str(judged.stdout.trim()).expect("one JSON object");
    for key in ["tp", "fp", "fn", "tn"] {
        assert_eq!(judged[key], judged["judge_alone"][key], "{key}: {judged}");
    }
    let second = &judged["second_opinion"];
    let count = |key: &str| second[key].as_u64().unwrap_or(u64::MAX);
    // The first asks (up to four at once) fail; the rest are not sent
    // while it cools down.
    assert!((1..=4).contains(&count("failed")), "{second}");
    assert_eq!(
        count("failed") + count("skipped"),
        count("asked"),
        "{second}"
    );
    assert_eq!(count("answered"), 0, "{second}");
}

#[test]
fn a_second_opinion_without_an_llm_is_one_clear_error() {
    let pairs = workspace("data/pairs/unseen-batches-16-18.jsonl");
    let mut command = loopguard();
    command
        .env_remove("LOOPGUARD_LLM_BASE_URL")
        .env_remove("LOOPGUARD_LLM_MODEL")
        .args(["tune", "judge", "eval", "--pairs"])
        .arg(&pairs)
        .args(["--second-opinion"]);
    let run = run_command(&mut command, b"");
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(
        run.stderr
            .contains("the second opinion needs an LLM: set llm.base_url and llm.model"),
        "{}",
        run.stderr
    );
}
