//! `loopguard tune threshold`: the sweep on a small pair file (the lexical
//! baseline, whose cosines are known), its exit codes, the bundled traces
//! and the shipped pair file with the real model; and the pair files and
//! runs that the tests of `tune judge` (`tune_judge`, `tune_shipped`)
//! share.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tempfile::TempDir;

use crate::support::*;

/// A file of the workspace.
pub(crate) fn workspace(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// Lexical cosines (word overlap): 0.75, 1, 0.5, 0.75; the test pair 0.816.
pub(crate) const PAIRS: &str = r#"{"a": "alpha beta gamma delta", "b": "alpha beta gamma epsilon", "same": true, "kind": "request"}
{"a": "alpha beta", "b": "Alpha, beta!", "same": true, "kind": "request"}
{"a": "alpha beta gamma delta", "b": "alpha beta zeta eta", "same": false, "kind": "request"}
{"a": "one two three four", "b": "one two three five", "same": false, "kind": "topic"}
{"a": "x y", "b": "x y z", "same": true, "split": "test", "kind": "request"}
"#;

pub(crate) fn pair_file(dir: &TempDir, text: &str) -> PathBuf {
    let path = dir.path().join("pairs.jsonl");
    fs::write(&path, text).expect("write the pair file");
    path
}

/// The whitespace-separated cells of the table row at `threshold`.
fn row<'a>(stdout: &'a str, threshold: &str) -> Vec<&'a str> {
    stdout
        .lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.first() == Some(&threshold) && cells.len() >= 9)
        .unwrap_or_else(|| panic!("no row {threshold} in\n{stdout}"))
}

fn assert_six_files(out: &Path) {
    for name in [
        "sweep.csv",
        "sweep.json",
        "pr_curve.png",
        "pr_curve.svg",
        "histogram.png",
        "histogram.svg",
    ] {
        let bytes = fs::read(out.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(bytes.len() > 100, "{name} is {} bytes", bytes.len());
        if name.ends_with(".png") {
            assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{name} is a PNG");
        }
        if name.ends_with(".svg") {
            assert!(bytes.starts_with(b"<svg"), "{name} is an SVG");
        }
    }
}

#[test]
fn a_small_pair_file_gives_the_table_and_six_files() {
    let dir = TempDir::new().expect("a temporary directory");
    let pairs = pair_file(&dir, PAIRS);
    let out = dir.path().join("out");
    let run = run([
        "tune".as_ref(),
        "threshold".as_ref(),
        "--pairs".as_ref(),
        pairs.as_os_str(),
        "--embedder".as_ref(),
        "lexical".as_ref(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let stdout = &run.stdout;
    // 0.70 to 0.95: 26 rows. Below 0.75 both 0.75 pairs are flagged (one
    // same, one different); from 0.75 on neither is (strictly above).
    let rows = stdout
        .lines()
        .filter(|line| line.starts_with("     0."))
        .count();
    assert_eq!(rows, 26, "{stdout}");
    assert_eq!(
        row(stdout, "0.70")[..9],
        [
            "0.70", "2", "1", "1", "0", "0.667", "1.000", "0.800", "0.500"
        ]
    );
    assert_eq!(
        row(stdout, "0.74"),
        [
            "0.74", "2", "1", "1", "0", "0.667", "1.000", "0.800", "0.500", "<-", "best", "F1"
        ]
    );
    assert_eq!(
        row(stdout, "0.75")[..9],
        [
            "0.75", "1", "0", "2", "1", "1.000", "0.500", "0.667", "0.000"
        ]
    );
    assert_eq!(
        row(stdout, "0.85"),
        [
            "0.85",
            "1",
            "0",
            "2",
            "1",
            "1.000",
            "0.500",
            "0.667",
            "0.000",
            "<-",
            "configured"
        ]
    );
    assert!(stdout.contains("best F1: 0.74\n"), "{stdout}");
    assert!(
        stdout.contains(
            "  held-out  precision 1.000  recall 1.000  F1 1.000  FPR n/a  (TP 1, FP 0, TN 0, FN 0)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("  [similarity]\n  request_threshold = 0.74\n  topic_threshold = 0.74\n"),
        "{stdout}"
    );
    assert!(
        run.stderr
            .contains("9 distinct texts: 9 embedded by lexical"),
        "{}",
        run.stderr
    );
    assert_six_files(&out);
    for name in ["sweep.csv", "pr_curve.png", "histogram.svg"] {
        let listed = format!("  {}", out.join(name).display());
        assert!(stdout.lines().any(|l| l == listed), "{listed} in\n{stdout}");
    }
    let csv = fs::read_to_string(out.join("sweep.csv")).expect("the CSV");
    assert_eq!(csv.lines().count(), 27);
    assert!(
        csv.contains("\n0.74,2,1,1,0,0.6667,1.0000,0.8000,0.5000,best_f1\n"),
        "{csv}"
    );
    let json: Value =
        serde_json::from_str(&fs::read_to_string(out.join("sweep.json")).expect("the JSON"))
            .expect("sweep.json is JSON");
    assert_eq!(json["mode"], "pairs");
    assert_eq!(json["best_f1"]["threshold"], 0.74);
    assert_eq!(json["best_f1"]["test"]["tp"], 1);
    assert_eq!(json["rows"].as_array().map(Vec::len), Some(26));
    assert_eq!(json["rows"][25]["precision"], 1.0);
}

#[test]
fn kind_and_format_json() {
    let dir = TempDir::new().expect("a temporary directory");
    let pairs = pair_file(&dir, PAIRS);
    let run = run([
        "tune".as_ref(),
        "threshold".as_ref(),
        "--pairs".as_ref(),
        pairs.as_os_str(),
        "--embedder".as_ref(),
        "lexical".as_ref(),
        "--kind".as_ref(),
        "request".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        "--min-precision".as_ref(),
        "0.9".as_ref(),
    ]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let report: Value = serde_json::from_str(&run.stdout).expect("one JSON document");
    assert_eq!(report["kind"], "request");
    // The topic pair is left out: no false alarm at any threshold.
    assert_eq!(report["train"]["items"], 3);
    assert_eq!(report["rows"][0]["fp"], 0);
    assert_eq!(
        report["configured"][0]["key"],
        "similarity.request_threshold"
    );
    assert_eq!(report["min_precision"]["floor"], 0.9);
    assert_eq!(report["min_precision"]["choice"]["threshold"], 0.7);
    assert_eq!(report["embedder"]["model_id"], "lexical-bow-tf-4096");
}

#[test]
fn bad_lines_are_listed_and_strict_makes_them_exit_1() {
    let dir = TempDir::new().expect("a temporary directory");
    let text = format!("{PAIRS}{{\"a\": \"x\", \"same\": true}}\nnot json\n");
    let pairs = pair_file(&dir, &text);
    let args = |strict: bool| {
        let mut args = vec![
            "tune".into(),
            "threshold".into(),
            "--pairs".into(),
            pairs.clone().into_os_string(),
            "--embedder".into(),
            "lexical".into(),
        ];
        if strict {
            args.push("--strict".into());
        }
        args
    };
    let lenient = run(args(false));
    assert_eq!(lenient.code, Some(0), "{lenient:?}");
    let name = pairs.display();
    assert!(
        lenient
            .stderr
            .contains(&format!("loopguard: {name}:6: `b` is missing (a text)\n")),
        "{}",
        lenient.stderr
    );
    assert!(
        lenient
            .stderr
            .contains(&format!("loopguard: {name}:7: not a JSON object")),
        "{}",
        lenient.stderr
    );
    assert!(
        lenient.stdout.contains("2 input line(s) skipped"),
        "{}",
        lenient.stdout
    );
    assert!(
        lenient.stdout.contains("best F1: 0.74"),
        "the rest is swept"
    );
    let strict = run(args(true));
    assert_eq!(strict.code, Some(1), "{strict:?}");
    assert!(
        strict.stdout.contains("best F1: 0.74"),
        "the work is still done"
    );
}

#[test]
fn a_bad_tuned_cosines_file_stops_the_run_before_any_work_and_names_its_line() {
    let dir = TempDir::new().expect("a temporary directory");
    let pairs = pair_file(&dir, PAIRS);
    let cosines = dir.path().join("oof.jsonl");
    fs::write(
        &cosines,
        "{\"a\": \"x\", \"b\": \"y\", \"tuned_cosine\": 0.5}\n{\"a\": \"x\", \"b\": \"z\"}\n",
    )
    .expect("write the cosines");
    let fit = |extra: &[&str]| {
        let mut args: Vec<std::ffi::OsString> = vec![
            "tune".into(),
            "judge".into(),
            "fit".into(),
            "--pairs".into(),
            pairs.clone().into_os_string(),
            "--tuned-cosines".into(),
            cosines.clone().into_os_string(),
        ];
        args.extend(extra.iter().map(std::ffi::OsString::from));
        run(args)
    };
    let bad = fit(&["--tuned-encoder"]);
    assert_eq!(bad.code, Some(2), "{bad:?}");
    assert!(
        bad.stderr.contains(&format!(
            "tuned cosines {}, line 2: not {{\"a\", \"b\", \"tuned_cosine\"}}: missing field \
             `tuned_cosine`",
            cosines.display()
        )),
        "{}",
        bad.stderr
    );
    // Nothing was embedded: the file is read first.
    assert!(!bad.stderr.contains("distinct texts"), "{}", bad.stderr);
    // Without a tuned encoder there are no tuned cosines to replace: a
    // usage error.
    let no_encoder = fit(&[]);
    assert_eq!(no_encoder.code, Some(2), "{no_encoder:?}");
    assert!(
        no_encoder
            .stderr
            .contains("the following required arguments were not provided")
            && no_encoder.stderr.contains("--tuned-encoder"),
        "{}",
        no_encoder.stderr
    );
    assert_eq!(no_encoder.stdout, "");
}

#[test]
fn unreadable_input_and_bad_ranges_exit_2() {
    let dir = TempDir::new().expect("a temporary directory");
    let missing = dir.path().join("missing.jsonl");
    let unreadable = run([
        "tune".as_ref(),
        "threshold".as_ref(),
        "--pairs".as_ref(),
        missing.as_os_str(),
        "--embedder".as_ref(),
        "lexical".as_ref(),
    ]);
    assert_eq!(unreadable.code, Some(2), "{unreadable:?}");
    assert!(
        unreadable.stderr.starts_with(&format!(
            "loopguard: cannot read the pair file {}",
            missing.display()
        )),
        "{}",
        unreadable.stderr
    );
    assert!(unreadable.stdout.is_empty());

    let pairs = pair_file(&dir, PAIRS);
    for (flags, says) in [
        (
            &["--from", "0.9", "--to", "0.8"][..],
            "--from 0.9 must be below --to 0.8",
        ),
        (&["--step", "0"][..], "--step 0 must be above 0"),
        (&["--step", "0.000001"][..], "at most 10000"),
        (&["--min-precision", "1.5"][..], "precision floor"),
    ] {
        let mut args = vec![
            "tune".into(),
            "threshold".into(),
            "--pairs".into(),
            pairs.clone().into_os_string(),
            "--embedder".into(),
            "lexical".into(),
        ];
        args.extend(flags.iter().map(|flag| std::ffi::OsString::from(*flag)));
        let bad = run(args);
        assert_eq!(bad.code, Some(2), "{flags:?}: {bad:?}");
        assert!(bad.stderr.contains(says), "{flags:?}: {}", bad.stderr);
    }

    let no_semantic = run([
        "tune".as_ref(),
        "threshold".as_ref(),
        "--pairs".as_ref(),
        pairs.as_os_str(),
        "--no-semantic".as_ref(),
    ]);
    assert_eq!(no_semantic.code, Some(2), "{no_semantic:?}");
    assert!(
        no_semantic.stderr.contains("--embedder lexical"),
        "{}",
        no_semantic.stderr
    );
}

#[test]
fn a_trace_without_its_sidecar_exits_2_naming_it() {
    let dir = TempDir::new().expect("a temporary directory");
    let trace = dir.path().join("run.jsonl");
    fs::write(
        &trace,
        "{\"type\":\"collaboration\",\"task\":\"T\",\"from\":\"a\",\"to\":\"b\",\"request\":\"x\"}\n",
    )
    .expect("write a trace");
    let run = run([
        "tune".as_ref(),
        "threshold".as_ref(),
        "--traces".as_ref(),
        dir.path().as_os_str(),
        "--embedder".as_ref(),
        "lexical".as_ref(),
    ]);
    assert_eq!(run.code, Some(2), "{run:?}");
    let sidecar = dir.path().join("run.expected.jsonl");
    assert!(
        run.stderr.contains(&sidecar.display().to_string()),
        "{}",
        run.stderr
    );
}

#[test]
fn the_bundled_traces_with_their_holdout() {
    let dir = TempDir::new().expect("a temporary directory");
    let out = dir.path().join("out");
    let cache = dir.path().join("cache");
    let traces = workspace("data/tune-traces");
    let holdout = workspace("data/tune-traces/holdout");
    let run = run([
        "tune".as_ref(),
        "threshold".as_ref(),
        "--traces".as_ref(),
        traces.as_os_str(),
        "--holdout".as_ref(),
        holdout.as_os_str(),
        "--cache-dir".as_ref(),
        cache.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(run.code, Some(0), "{run:?}");
    let stdout = &run.stdout;
    assert!(
        stdout.contains("train: 3 trace(s), 9 expected detection(s); held-out: 1 trace(s)"),
        "{stdout}"
    );
    // TN and FPR do not exist for traces.
    let first = row(stdout, "0.70");
    assert_eq!((first[3], first[8]), ("n/a", "n/a"), "{stdout}");
    assert!(stdout.contains("best F1: "), "{stdout}");
    assert!(stdout.contains("  held-out  precision "), "{stdout}");
    assert!(stdout.contains("wrongly flagged at "), "{stdout}");
    assert_six_files(&out);
    let json: Value =
        serde_json::from_str(&fs::read_to_string(out.join("sweep.json")).expect("the JSON"))
            .expect("sweep.json is JSON");
    assert_eq!(json["mode"], "traces");
    assert!(
        json["detections"]
            .as_array()
            .is_some_and(|d| d.iter().any(|d| d["expected"] == true)),
        "{}",
        json["detections"]
    );
    // The reworded review request (cosine 0.79) is caught at 0.70, the
    // "unit tests" / "integration tests" near miss (0.87) wrongly flagged.
    let fired_at = |file: &str, line: u64| {
        json["detections"].as_array().is_some_and(|all| {
            all.iter().any(|d| {
                d["line"] == line && d["trace"].as_str().is_some_and(|t| t.ends_with(file))
            })
        })
    };
    assert!(fired_at("review-requests.jsonl", 3));
    assert!(fired_at("review-requests.jsonl", 6));
}

#[test]
fn the_shipped_pairs_end_to_end_and_cached() {
    let dir = TempDir::new().expect("a temporary directory");
    let out = dir.path().join("out");
    let cache = dir.path().join("cache");
    let pairs = workspace("data/pairs/requests.jsonl");
    let args = [
        "tune".as_ref(),
        "threshold".as_ref(),
        "--pairs".as_ref(),
        pairs.as_os_str(),
        "--cache-dir".as_ref(),
        cache.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
        "--min-precision".as_ref(),
        "0.75".as_ref(),
    ];
    let first = run(args);
    assert_eq!(first.code, Some(0), "{first:?}");
    let stdout = &first.stdout;
    assert!(
        stdout.contains("minilm (all-MiniLM-L6-v2-int8, 384 dimensions)"),
        "{stdout}"
    );
    assert!(stdout.contains("best F1: "), "{stdout}");
    assert!(stdout.contains("  held-out  precision "), "{stdout}");
    assert!(stdout.contains("configured now: "), "{stdout}");
    assert!(stdout.contains("  [similarity]\n"), "{stdout}");
    assert_six_files(&out);
    assert!(
        first.stderr.contains(" 0 from the cache"),
        "{}",
        first.stderr
    );

    // Again: every text from the cache, no inference.
    let second = run(args);
    assert_eq!(second.code, Some(0), "{second:?}");
    assert!(
        second.stderr.contains(": 0 embedded by minilm"),
        "{}",
        second.stderr
    );
    assert_eq!(
        first.stdout, second.stdout,
        "the same vectors, the same table"
    );
}

#[test]
fn trace_lines_that_are_not_events_are_listed_and_strict_exits_1() {
    let dir = TempDir::new().expect("a temporary directory");
    let trace = dir.path().join("run.jsonl");
    fs::write(
        &trace,
        "{\"type\":\"collaboration\",\"task\":\"T\",\"from\":\"a\",\"to\":\"b\",\"request\":\"review the auth code\"}\n\
         not an event\n\
         {\"type\":\"collaboration\",\"task\":\"T\",\"from\":\"a\",\"to\":\"b\",\"request\":\"review the auth code\"}\n",
    )
    .expect("write a trace");
    fs::write(
        dir.path().join("run.expected.jsonl"),
        "{\"line\": 3, \"kind\": \"collaboration_loop\"}\n",
    )
    .expect("write a sidecar");
    let args = |strict: bool| {
        let mut args: Vec<std::ffi::OsString> = vec![
            "tune".into(),
            "threshold".into(),
            "--traces".into(),
            trace.clone().into_os_string(),
            "--embedder".into(),
            "lexical".into(),
            "--kind".into(),
            "request".into(),
        ];
        if strict {
            args.push("--strict".into());
        }
        args
    };
    let lenient = run(args(false));
    assert_eq!(lenient.code, Some(0), "{lenient:?}");
    assert!(
        lenient
            .stderr
            .contains(&format!("loopguard: {}:2: ", trace.display())),
        "{}",
        lenient.stderr
    );
    // The exact repeat on line 3 is caught at every threshold.
    assert_eq!(
        row(&lenient.stdout, "0.95")[..5],
        ["0.95", "1", "0", "n/a", "0"]
    );
    let strict = run(args(true));
    assert_eq!(strict.code, Some(1), "{strict:?}");
}

/// Pairs for the judge: two rewordings and two one-word contrasts in each
/// split, so a fit has both labels to learn from.
pub(crate) const JUDGE_PAIRS: &str = r#"{"a": "Review PR #412 for the login bug.", "b": "Review PR #418 for the login bug.", "same": false}
{"a": "Scale the Kafka brokers up.", "b": "Scale the Kafka brokers down.", "same": false}
{"a": "Restart the Redis cluster.", "b": "restart the redis cluster again please", "same": true}
{"a": "Can you fix the flaky login test?", "b": "Please fix the flaky login test.", "same": true}
{"a": "Deploy build 5812 to staging.", "b": "Deploy build 5813 to staging.", "same": false, "split": "test"}
{"a": "Check the disk usage on db-1.", "b": "check the disk usage on db-1 again", "same": true, "split": "test"}
"#;

/// `text` written to `dir/name`, a config for `--config`.
pub(crate) fn write_config(dir: &TempDir, name: &str, text: &str) -> PathBuf {
    let path = dir.path().join(name);
    fs::write(&path, text).expect("write the config");
    path
}

/// `tune judge fit`.
pub(crate) const FIT: &[&str] = &["judge", "fit"];
/// `tune judge eval`.
pub(crate) const EVAL: &[&str] = &["judge", "eval"];
/// `tune threshold`.
pub(crate) const THRESHOLD: &[&str] = &["threshold"];

/// `tune SUBCOMMAND --pairs PAIRS --embedder lexical EXTRA`.
pub(crate) fn tune_lexical(subcommand: &[&str], pairs: &Path, extra: &[&OsStr]) -> Run {
    let mut args: Vec<&OsStr> = vec!["tune".as_ref()];
    args.extend(subcommand.iter().map(OsStr::new));
    args.extend::<[&OsStr; 4]>([
        "--pairs".as_ref(),
        pairs.as_os_str(),
        "--embedder".as_ref(),
        "lexical".as_ref(),
    ]);
    args.extend_from_slice(extra);
    run(args)
}

/// `tune judge eval --pairs PAIRS --embedder lexical JUDGE --format json`.
pub(crate) fn eval_only_json(pairs: &Path, judge: &[&OsStr]) -> Run {
    let mut extra: Vec<&OsStr> = judge.to_vec();
    extra.extend::<[&OsStr; 2]>(["--format".as_ref(), "json".as_ref()]);
    tune_lexical(EVAL, pairs, &extra)
}
