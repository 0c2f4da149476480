//! `loopguard tune judge` on the shipped pair files with the real model:
//! the tuned encoders fitted on their out-of-fold cosines, the weights that
//! name them, and the judge the config runs scored as it is.

use std::ffi::OsStr;
use std::fs;
use std::path::Path;

use serde_json::Value;
use tempfile::TempDir;

use crate::support::*;
use crate::tune::{EVAL, FIT, workspace, write_config};

/// `tune SUBCOMMAND --pairs data/pairs/requests.jsonl` with `extra`, as
/// JSON.
fn tune_shipped_json(subcommand: &[&str], extra: &[&OsStr]) -> (Run, Value) {
    let pairs = workspace("data/pairs/requests.jsonl");
    let mut args: Vec<&OsStr> = vec!["tune".as_ref()];
    args.extend(subcommand.iter().map(OsStr::new));
    args.extend::<[&OsStr; 2]>(["--pairs".as_ref(), pairs.as_os_str()]);
    args.extend_from_slice(extra);
    args.extend::<[&OsStr; 2]>(["--format".as_ref(), "json".as_ref()]);
    let out = run(args);
    assert_eq!(out.code, Some(0), "{out:?}");
    let document = serde_json::from_str(out.stdout.trim()).expect("one JSON document");
    (out, document)
}

/// How many pairs' tuned cosines a run says it read from `--tuned-cosines`.
fn cosines_read_from_file(stderr: &str) -> usize {
    stderr
        .lines()
        .filter_map(|line| line.strip_prefix("loopguard: "))
        .find(|line| line.contains(" pairs' tuned cosines read from "))
        .and_then(|counts| counts.split(" of ").next())
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("no count of cosines read in {stderr}"))
}

/// The texts of a pair file's lines, with each line's `split`.
fn texts_by_split(path: &str) -> Vec<(String, String, Option<String>)> {
    fs::read_to_string(workspace(path))
        .unwrap_or_else(|error| panic!("{path}: {error}"))
        .lines()
        .map(|line| {
            let pair: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{path}: {e}"));
            let text = |key: &str| pair[key].as_str().expect("a text").to_owned();
            (
                text("a"),
                text("b"),
                pair["split"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

#[test]
fn the_out_of_fold_cosines_are_the_train_pairs_and_the_written_pairs_share_no_held_out_text() {
    let shipped = texts_by_split("data/pairs/requests.jsonl");
    let train: Vec<(&str, &str)> = shipped
        .iter()
        .filter(|(_, _, split)| split.as_deref() == Some("train"))
        .map(|(a, b, _)| (a.as_str(), b.as_str()))
        .collect();
    // One cosine per train pair, in the pair file's order, none for a
    // held-out pair: for each shipped encoder.
    for file in [
        "data/pairs/tuned-oof-cosines.jsonl",
        "data/pairs/tuned-oof-cosines-mpnet.jsonl",
    ] {
        let oof = texts_by_split(file);
        let read: Vec<(&str, &str)> = oof
            .iter()
            .map(|(a, b, _)| (a.as_str(), b.as_str()))
            .collect();
        assert_eq!(read, train, "{file}");
    }
    // The pairs written for the encoder are train pairs whose texts are
    // in no held-out pair and no unseen batch.
    let held_out: std::collections::HashSet<String> = shipped
        .iter()
        .filter(|(_, _, split)| split.as_deref() == Some("test"))
        .chain(&texts_by_split("data/pairs/unseen-batches-16-18.jsonl"))
        .flat_map(|(a, b, _)| [a.to_lowercase(), b.to_lowercase()])
        .collect();
    let written = texts_by_split("data/pairs/encoder-extra.jsonl");
    assert!(written.len() > 300, "{}", written.len());
    for (a, b, split) in &written {
        assert_eq!(split.as_deref(), Some("train"), "{a} / {b}");
        for text in [a, b] {
            assert!(!held_out.contains(&text.to_lowercase()), "{text}");
        }
    }
}

#[test]
fn the_tuned_encoder_is_fitted_on_out_of_fold_cosines_and_lifts_recall() {
    // Without the cosines, every train pair is one the encoder was tuned
    // on: nothing is left to fit, and the message names the file to give.
    let pairs = workspace("data/pairs/requests.jsonl");
    let bare = run([
        "tune".as_ref(),
        "judge".as_ref(),
        "fit".as_ref(),
        "--pairs".as_ref(),
        pairs.as_os_str(),
        "--tuned-encoder".as_ref(),
    ] as [&OsStr; 6]);
    assert_eq!(bare.code, Some(2), "{bare:?}");
    assert!(
        bare.stderr.contains(
            "pairs left out: the tuned encoder was tuned on their texts (give --tuned-cosines \
             with their out-of-fold cosines: data/pairs/tuned-oof-cosines.jsonl"
        ),
        "{}",
        bare.stderr
    );

    let dir = TempDir::new().expect("a temporary directory");
    let weights = dir.path().join("tuned.json");
    let oof = workspace("data/pairs/tuned-oof-cosines.jsonl");
    let (fit, report) = tune_shipped_json(
        FIT,
        &[
            "--tuned-encoder".as_ref(),
            "--tuned-cosines".as_ref(),
            oof.as_os_str(),
            "--weights-out".as_ref(),
            weights.as_os_str(),
        ],
    );
    // The encoder was tuned on every train pair: each one's cosine is read
    // from the file (an encoder tuned without it), and none is left out.
    let read_from_file = cosines_read_from_file(&fit.stderr);
    assert!(!fit.stderr.contains("left out"), "{}", fit.stderr);
    let (without, plain) = tune_shipped_json(FIT, &[]);
    let train = |document: &Value| document["train_pairs"].as_u64().expect("train pairs") as usize;
    assert_eq!(
        read_from_file,
        train(&plain),
        "every train pair, from the file"
    );
    assert_eq!(train(&report), train(&plain));
    assert!(
        !without.stderr.contains("tuned-minilm"),
        "{}",
        without.stderr
    );
    assert_eq!(
        report["test_pairs"], plain["test_pairs"],
        "no test pair is left out"
    );
    // The weights weigh the tuned cosine and name the encoder.
    let written: Value =
        serde_json::from_str(&fs::read_to_string(&weights).expect("weights written"))
            .expect("JSON");
    assert_eq!(
        written["weights"].as_object().map(|weights| weights.len()),
        Some(16)
    );
    assert_eq!(report["feature_names"][14], "tuned_cosine");
    assert!(
        written["weights"]["tuned_cosine"]
            .as_f64()
            .is_some_and(|w| w > 0.0),
        "{written}"
    );
    assert!(
        written["tuned_encoder"]
            .as_str()
            .is_some_and(|id| id.starts_with("all-MiniLM-L6-v2-int8-tuned-")),
        "{written}"
    );
    // On the held-out pairs it catches more repeats than the judge without
    // it, at no less precision than the floor it was fitted for allows.
    let test = |document: &Value| {
        let count = |key: &str| {
            document["calibrated"]["test"][key]
                .as_f64()
                .unwrap_or_else(|| panic!("{key} in {document}"))
        };
        let (tp, fp, missed) = (count("tp"), count("fp"), count("fn"));
        // Precision, recall, F1.
        (
            tp / (tp + fp),
            tp / (tp + missed),
            2.0 * tp / (2.0 * tp + fp + missed),
        )
    };
    let (tuned, without) = (test(&report), test(&plain));
    assert!(tuned.1 > without.1, "recall {tuned:?} against {without:?}");
    assert!(tuned.2 > without.2, "F1 {tuned:?} against {without:?}");
    assert!(tuned.0 > 0.8, "precision {tuned:?}");

    // Scored as written, fitting nothing: the file turns the encoder on by
    // itself, and scores the held-out pairs as the fit did.
    let (eval, scored) = tune_shipped_json(EVAL, &["--weights".as_ref(), weights.as_os_str()]);
    assert!(eval.stderr.contains("tuned-minilm"), "{}", eval.stderr);
    assert_eq!(scored["tp"], report["calibrated"]["test"]["tp"]);
    assert_eq!(scored["fp"], report["calibrated"]["test"]["fp"]);
    // The weights shipped for it are these (fitted the same way).
    let (_, shipped) = tune_shipped_json(EVAL, &["--tuned-encoder".as_ref()]);
    assert_eq!(
        (shipped["tp"].clone(), shipped["fp"].clone()),
        (scored["tp"].clone(), scored["fp"].clone())
    );
}

#[test]
fn a_tuned_cosines_file_that_names_held_out_pairs_scores_them_by_its_cosines() {
    // A file may give any pair's cosine, a held-out one's too: that is how
    // a reading loopguard does not ship is scored (docs/tuning.md, "Session
    // 31"). Here a reading that knows the labels: 1 for a repeat, 0 not.
    let text = fs::read_to_string(workspace("data/pairs/requests.jsonl")).expect("the pairs");
    let mut oracle = String::new();
    let mut held_out = 0;
    for line in text.lines() {
        let pair: Value = serde_json::from_str(line).expect("a pair");
        if pair["split"] != "test" {
            continue;
        }
        held_out += 1;
        let cosine = if pair["same"] == true { 1.0 } else { 0.0 };
        let written = serde_json::json!({"a": pair["a"], "b": pair["b"], "tuned_cosine": cosine});
        oracle.push_str(&format!("{written}\n"));
    }
    let dir = TempDir::new().expect("a temporary directory");
    let file = dir.path().join("oracle.jsonl");
    fs::write(&file, oracle).expect("write the cosines");

    let (by_file, read) = tune_shipped_json(
        EVAL,
        &[
            "--tuned-encoder".as_ref(),
            "--tuned-cosines".as_ref(),
            file.as_os_str(),
        ],
    );
    let (_, by_encoder) = tune_shipped_json(EVAL, &["--tuned-encoder".as_ref()]);
    let read_from_file = cosines_read_from_file(&by_file.stderr);
    assert_eq!(read_from_file, held_out, "{}", by_file.stderr);
    // The same weights, the same pairs: only the reading differs, and the
    // one that knows the labels catches more repeats and fewer false ones.
    let count = |document: &Value, key: &str| {
        document[key]
            .as_u64()
            .unwrap_or_else(|| panic!("{key} in {document}"))
    };
    let total = |document: &Value| {
        ["tp", "fp", "tn", "fn"]
            .iter()
            .map(|key| count(document, key))
            .sum::<u64>()
    };
    assert_eq!(total(&read), total(&by_encoder));
    assert_eq!(total(&read), held_out as u64);
    assert!(
        count(&read, "tp") > count(&by_encoder, "tp"),
        "{read} against {by_encoder}"
    );
    assert!(
        count(&read, "fp") < count(&by_encoder, "fp"),
        "{read} against {by_encoder}"
    );
}

#[test]
fn the_larger_tuned_encoder_is_fitted_on_its_out_of_fold_cosines_and_its_weights_name_it() {
    // A slice of the shipped pairs: train pairs of both labels (the larger
    // encoder was tuned on every one) and held-out pairs (on none).
    let text = fs::read_to_string(workspace("data/pairs/requests.jsonl")).expect("the pairs");
    let (mut train, mut test) = (Vec::new(), Vec::new());
    let mut labels = [0usize; 2];
    for line in text.lines() {
        let pair: Value = serde_json::from_str(line).expect("a pair");
        let (a, b) = (
            pair["a"].as_str().unwrap_or(""),
            pair["b"].as_str().unwrap_or(""),
        );
        let same = usize::from(pair["same"] == true);
        let saw =
            loopguard_semantic::mpnet_encoder_saw(a) || loopguard_semantic::mpnet_encoder_saw(b);
        match pair["split"].as_str() {
            Some("train") if labels[same] < 20 => {
                assert!(
                    saw,
                    "the larger encoder was tuned on every train pair: {line}"
                );
                labels[same] += 1;
                train.push(line);
            }
            Some("test") if test.len() < 20 => {
                assert!(!saw, "and on no held-out pair: {line}");
                test.push(line);
            }
            _ => {}
        }
    }
    assert_eq!((labels, test.len()), ([20, 20], 20));
    let dir = TempDir::new().expect("a temporary directory");
    let pairs = dir.path().join("pairs.jsonl");
    fs::write(&pairs, [train, test].concat().join("\n") + "\n").expect("write the pairs");
    let weights = dir.path().join("mpnet.json");
    let oof = workspace("data/pairs/tuned-oof-cosines-mpnet.jsonl");
    let fit_args = |with_cosines: bool| {
        let mut args: Vec<&OsStr> = vec![
            "tune".as_ref(),
            "judge".as_ref(),
            "fit".as_ref(),
            "--pairs".as_ref(),
            pairs.as_os_str(),
            "--tuned-encoder".as_ref(),
            "mpnet".as_ref(),
            "--weights-out".as_ref(),
            weights.as_os_str(),
        ];
        if with_cosines {
            args.extend::<[&OsStr; 2]>(["--tuned-cosines".as_ref(), oof.as_os_str()]);
        }
        args
    };
    // Without its cosines nothing is left to fit, and the hint names the
    // larger encoder's own file.
    let bare = run(fit_args(false));
    assert_eq!(bare.code, Some(2), "{bare:?}");
    assert!(
        bare.stderr.contains(
            "loopguard: 40 of 60 pairs left out: the tuned encoder was tuned on their texts \
             (give --tuned-cosines with their out-of-fold cosines: \
             data/pairs/tuned-oof-cosines-mpnet.jsonl for data/pairs/requests.jsonl)"
        ),
        "{}",
        bare.stderr
    );
    let fit = run(fit_args(true));
    assert_eq!(fit.code, Some(0), "{fit:?}");
    assert!(
        fit.stderr
            .contains("loopguard: 40 of 60 pairs' tuned cosines read from"),
        "{}",
        fit.stderr
    );
    assert!(!fit.stderr.contains("left out"), "{}", fit.stderr);
    assert!(fit.stderr.contains("by tuned-mpnet"), "{}", fit.stderr);
    let written: Value =
        serde_json::from_str(&fs::read_to_string(&weights).expect("weights written"))
            .expect("JSON");
    assert_eq!(
        written["tuned_encoder"].as_str(),
        Some(loopguard_semantic::MPNET_TUNED_MODEL_ID),
        "{written}"
    );
    assert!(
        written["weights"]["tuned_cosine"]
            .as_f64()
            .is_some_and(|w| w != 0.0),
        "{written}"
    );
    // Scored as written: the file asks for the larger encoder by itself.
    let eval = run([
        "tune".as_ref(),
        "judge".as_ref(),
        "eval".as_ref(),
        "--pairs".as_ref(),
        pairs.as_os_str(),
        "--weights".as_ref(),
        weights.as_os_str(),
    ] as [&OsStr; 7]);
    assert_eq!(eval.code, Some(0), "{eval:?}");
    assert!(eval.stderr.contains("by tuned-mpnet"), "{}", eval.stderr);
}

#[test]
fn the_larger_encoders_shipped_weights_are_a_refit_on_its_out_of_fold_cosines() {
    let dir = TempDir::new().expect("a temporary directory");
    let weights = dir.path().join("mpnet.json");
    let oof = workspace("data/pairs/tuned-oof-cosines-mpnet.jsonl");
    let (fit, report) = tune_shipped_json(
        FIT,
        &[
            "--tuned-encoder".as_ref(),
            "mpnet".as_ref(),
            "--tuned-cosines".as_ref(),
            oof.as_os_str(),
            "--weights-out".as_ref(),
            weights.as_os_str(),
        ],
    );
    // Every train pair's cosine is read from the file, none is left out.
    assert!(!fit.stderr.contains("left out"), "{}", fit.stderr);
    assert!(
        fit.stderr.contains(&format!(
            "{} of {} pairs' tuned cosines read from",
            report["train_pairs"],
            report["train_pairs"].as_u64().unwrap_or(0)
                + report["test_pairs"].as_u64().unwrap_or(0)
        )),
        "{}",
        fit.stderr
    );
    // The shipped weights, read as a config reads them, score the held-out
    // pairs as the refit does.
    let config = workspace("tests/configs/similarity_tuned_encoder_mpnet.toml");
    let (eval, shipped) = tune_shipped_json(EVAL, &["--config".as_ref(), config.as_os_str()]);
    assert!(eval.stderr.contains("by tuned-mpnet"), "{}", eval.stderr);
    let count = |document: &Value, key: &str| document[key].as_u64().expect("a count");
    for key in ["tp", "fp", "fn", "tn"] {
        assert_eq!(
            count(&shipped, key),
            count(&report["calibrated"]["test"], key),
            "{key}: {shipped} against {}",
            report["calibrated"]["test"]
        );
    }
    // A false "you are looping" interrupts real work: this judge's
    // held-out precision is at least the 0.90 its threshold was chosen for
    // on train (a refit that lost it would show here).
    let (tp, fp) = (count(&shipped, "tp") as f64, count(&shipped, "fp") as f64);
    assert!(tp / (tp + fp) >= 0.90, "{shipped}");
}

#[test]
fn the_tuned_encoder_is_refused_where_no_calibrated_judge_reads_it() {
    let pairs = workspace("data/pairs/unseen-batches-16-18.jsonl");
    let pairs = pairs.to_str().expect("a UTF-8 path");
    for (args, says) in [
        (
            &[
                "judge",
                "eval",
                "--pairs",
                pairs,
                "--tuned-encoder",
                "--judge",
                "cosine",
            ][..],
            "the argument '--tuned-encoder [<ENCODER>]' cannot be used with '--judge <JUDGE>'",
        ),
        (
            &["threshold", "--pairs", pairs, "--tuned-encoder"][..],
            "unexpected argument '--tuned-encoder' found",
        ),
    ] {
        let out = run(["tune"].iter().chain(args));
        assert_eq!(out.code, Some(2), "{out:?}");
        assert!(out.stderr.contains(says), "{}", out.stderr);
        assert_eq!(out.stdout, "");
    }
}

#[test]
fn eval_only_scores_the_judge_the_config_runs() {
    let threshold = |document: &Value| document["threshold"].as_f64().unwrap_or(-1.0);
    let close = |a: f64, b: f32| (a - f64::from(b)).abs() < 1e-4;
    // `judge eval --config CONFIG` and `extra`.
    let eval_with = |config: &Path, extra: &[&OsStr]| {
        let mut args: Vec<&OsStr> = vec!["--config".as_ref(), config.as_os_str()];
        args.extend_from_slice(extra);
        tune_shipped_json(EVAL, &args)
    };
    // The defaults: the calibrated judge with the tuned encoder.
    let (defaults, default_scored) = tune_shipped_json(EVAL, &[]);
    assert!(
        defaults.stderr.contains("tuned-minilm"),
        "{}",
        defaults.stderr
    );
    assert_eq!(default_scored["judge"], "calibrated");
    let tuned = loopguard_semantic::JudgeWeights::shipped_tuned().threshold;
    assert!(close(threshold(&default_scored), tuned), "{default_scored}");

    // A config without it: the 14 readings, on their own weights.
    let (plain, plain_scored) = eval_with(&config("similarity_without_tuned_encoder.toml"), &[]);
    assert!(!plain.stderr.contains("tuned-minilm"), "{}", plain.stderr);
    let shipped = loopguard_semantic::JudgeWeights::shipped().threshold;
    assert!(close(threshold(&plain_scored), shipped), "{plain_scored}");
    assert_ne!(plain_scored["tp"], default_scored["tp"]);

    // The config's judge_threshold and judge kind are the config's too.
    let dir = TempDir::new().expect("a temporary directory");
    let moved = write_config(
        &dir,
        "moved.toml",
        "[similarity]\ntuned_encoder = false\njudge_threshold = 0.9\n",
    );
    let (_, moved_scored) = eval_with(&moved, &[]);
    assert!(close(threshold(&moved_scored), 0.9), "{moved_scored}");
    let cosine = write_config(
        &dir,
        "cosine.toml",
        "[similarity]\njudge = \"cosine\"\nrequest_threshold = 0.8\n",
    );
    let (_, cosine_scored) = eval_with(&cosine, &[]);
    assert_eq!(cosine_scored["judge"], "cosine");
    assert!(close(threshold(&cosine_scored), 0.8), "{cosine_scored}");
    // --judge overrides the config's kind.
    let (_, overridden) = eval_with(&cosine, &["--judge".as_ref(), "calibrated".as_ref()]);
    assert_eq!(overridden["judge"], "calibrated");
    assert!(close(threshold(&overridden), tuned), "{overridden}");
    // So does --weights: they are the calibrated judge's.
    let weights = workspace("crates/judge/judge-weights.json");
    let (_, weighed) = eval_with(&cosine, &["--weights".as_ref(), weights.as_os_str()]);
    assert_eq!(weighed["judge"], "calibrated");
    assert!(close(threshold(&weighed), shipped), "{weighed}");
    assert_eq!(weighed["tp"], plain_scored["tp"]);
}

#[test]
fn a_weights_file_that_cannot_be_read_stops_eval_only_before_anything_is_embedded() {
    let pairs = workspace("data/pairs/replies.jsonl");
    let dir = TempDir::new().expect("a temporary directory");
    let missing = dir.path().join("no-such-weights.json");
    let out = run([
        "tune".as_ref(),
        "judge".as_ref(),
        "eval".as_ref(),
        "--pairs".as_ref(),
        pairs.as_os_str(),
        "--weights".as_ref(),
        missing.as_os_str(),
    ]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr.contains("--weights") && out.stderr.contains("no-such-weights.json"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("distinct texts"), "{}", out.stderr);
    assert_eq!(out.stdout, "");
}
