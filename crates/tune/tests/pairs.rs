//! Reading pair files: bad lines are reported with their line numbers and
//! skipped, the rest is kept.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;

use loopguard_tune::{Pair, PairSet, Split, TuneError};
use tempfile::TempDir;

use crate::common::shipped_pairs;

#[test]
fn bad_lines_are_reported_with_their_line_numbers() {
    let dir = TempDir::new().expect("a temporary directory");
    let path = dir.path().join("pairs.jsonl");
    fs::write(
        &path,
        concat!(
            "{\"a\": \"review the auth code\", \"b\": \"review the auth code again\", \"same\": true}\n",
            "\n",
            "{\"a\": \"review the auth code\", \"same\": true}\n",
            "{\"a\": \"deploy\", \"b\": \"\", \"same\": false}\n",
            "{\"a\": \"x\", \"b\": \"y\", \"same\": \"no\"}\n",
            "not json at all\n",
            "{\"a\": \"deploy to staging\", \"b\": \"deploy to production\", \"same\": false, \"split\": \"test\", \"reviewer\": \"ana\"}\n",
            "{\"a\": \"x\", \"b\": \"y\", \"same\": true, \"split\": \"holdout\"}\n",
        ),
    )
    .expect("write the pair file");
    let set = PairSet::read(&path).expect("the file reads");
    assert_eq!(set.pairs.len(), 2, "the good lines are kept");
    assert_eq!(set.pairs.iter().map(|p| p.line).collect::<Vec<_>>(), [1, 7]);
    assert_eq!(
        set.pairs[1].split,
        Split::Test,
        "unknown fields are ignored"
    );
    let lines: Vec<u64> = set.issues.iter().map(|i| i.line).collect();
    assert_eq!(lines, [3, 4, 5, 6, 8], "blank line 2 is no error");
    let shown: Vec<String> = set.issues.iter().map(ToString::to_string).collect();
    let name = path.display();
    assert_eq!(shown[0], format!("{name}:3: `b` is missing (a text)"));
    assert_eq!(
        shown[1],
        format!("{name}:4: `b` is empty: a pair needs two texts")
    );
    assert_eq!(
        shown[2],
        format!("{name}:5: `same` must be true or false, not a string")
    );
    assert!(shown[3].starts_with(&format!("{name}:6: not a JSON object")));
    assert_eq!(
        shown[4],
        format!("{name}:8: `split` must be \"train\" or \"test\", not \"holdout\"")
    );
}

#[test]
fn an_unreadable_file_is_an_error_naming_it() {
    let dir = TempDir::new().expect("a temporary directory");
    let path = dir.path().join("missing.jsonl");
    let err = PairSet::read(&path).expect_err("no such file");
    assert!(matches!(err, TuneError::Io { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.starts_with(&format!("cannot read the pair file {}", path.display())),
        "{message}"
    );
}

#[test]
fn kinds_filter_the_pairs() {
    let text = concat!(
        "{\"a\": \"a\", \"b\": \"b\", \"same\": true, \"kind\": \"request\"}\n",
        "{\"a\": \"a\", \"b\": \"c\", \"same\": false, \"kind\": \"topic\"}\n",
        "{\"a\": \"a\", \"b\": \"d\", \"same\": false}\n",
    );
    let set = PairSet::parse(text.as_bytes(), std::path::Path::new("p")).expect("parses");
    assert_eq!(set.with_kind(None).pairs.len(), 3);
    assert_eq!(set.with_kind(Some("request")).pairs.len(), 1);
    assert_eq!(set.with_kind(Some("topic")).distinct_texts(), ["a", "c"]);
    assert!(set.with_kind(Some("other")).pairs.is_empty());
}

/// A pair file's pairs by their line number.
fn by_line(set: &PairSet) -> BTreeMap<u64, &Pair> {
    set.pairs.iter().map(|pair| (pair.line, pair)).collect()
}

#[test]
fn the_unseen_batches_read_cleanly_with_a_test_split_of_their_own() {
    let set = PairSet::read(&shipped_pairs("unseen-batches-16-18.jsonl")).expect("the file reads");
    assert!(set.issues.is_empty(), "{:?}", set.issues);
    assert_eq!(set.pairs.len(), 192);
    assert_eq!(set.split(Split::Test).count(), 48, "a quarter held out");
}

/// `data/pairs/second-annotator.jsonl` names real lines of the pair files,
/// each once, and agrees with every label, as `data/pairs/README.md` ("A
/// second annotator") says.
#[test]
fn the_second_annotator_labels_real_pairs_and_agrees_with_them() {
    let requests = PairSet::read(&shipped_pairs("requests.jsonl")).expect("requests read");
    let unseen = PairSet::read(&shipped_pairs("unseen-batches-16-18.jsonl")).expect("unseen read");
    let (requests_by_line, unseen_by_line) = (by_line(&requests), by_line(&unseen));
    let text = fs::read_to_string(shipped_pairs("second-annotator.jsonl")).expect("labels read");
    let mut seen = BTreeSet::new();
    let mut disagreements = Vec::new();
    for (at, line) in text.lines().enumerate() {
        let label: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        let file = label["file"].as_str().expect("a file").to_owned();
        let number = label["line"].as_u64().expect("a line number");
        let same = label["same"].as_bool().expect("a verdict");
        let pairs = match file.as_str() {
            "requests.jsonl" => &requests_by_line,
            "unseen-batches-16-18.jsonl" => &unseen_by_line,
            other => panic!("line {}: unknown file {other}", at + 1),
        };
        let pair = pairs
            .get(&number)
            .unwrap_or_else(|| panic!("line {}: no pair at {file}:{number}", at + 1));
        assert!(seen.insert((file.clone(), number)), "{file}:{number} twice");
        if file == "requests.jsonl" {
            assert_eq!(pair.split, Split::Test, "{file}:{number} is held out");
        }
        if pair.same != same {
            disagreements.push(format!("{file}:{number}"));
        }
    }
    assert_eq!(seen.len(), 485);
    let held_out = requests.split(Split::Test).count();
    let labelled_held_out = seen.iter().filter(|(f, _)| f == "requests.jsonl").count();
    assert_eq!(labelled_held_out, held_out, "every held-out pair");
    assert!(disagreements.is_empty(), "{disagreements:?}");
}
