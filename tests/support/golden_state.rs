//! Shared by the golden saved-state tests of `loopguard-host`,
//! `loopguard-semantic` and `loopguard-progress-evaluator` (each includes
//! this file with `#[path]`): where a fixture is, reading and writing it,
//! comparing the key structure of two saved states, and the assertions
//! every golden test makes alike.
//!
//! A fixture is written only when [`WRITE_FIXTURES_ENV`] is set, and only
//! when it is missing: a checked-in fixture is never overwritten by a test
//! run (delete it first to write it again, and only for a format that has
//! not shipped).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// Set to `1` to write the fixtures that are missing.
pub(crate) const WRITE_FIXTURES_ENV: &str = "LOOPGUARD_WRITE_FIXTURES";

/// What a crate's golden tests say of all their fixtures.
pub(crate) struct Fixtures {
    /// The saved-state format the fixtures were written in.
    pub(crate) format: u32,
    /// The command that writes missing fixtures (run with
    /// [`WRITE_FIXTURES_ENV`]`=1`).
    pub(crate) write_command: &'static str,
    /// The saved state, in messages ("the progress evaluator's saved state").
    pub(crate) state: &'static str,
}

/// One fixture: a trace of the workspace's `tests/traces/` (or a sequence
/// of the tests named like one), the line after which the state was
/// saved, and what the saved state holds there.
#[derive(Debug)]
pub(crate) struct Golden {
    pub(crate) trace: &'static str,
    pub(crate) after_line: usize,
    pub(crate) holds: &'static str,
}

impl Fixtures {
    /// Where the fixture of `golden` is checked in: the including crate's
    /// `tests/fixtures/state/format-N/TRACE.after-line-L.json`.
    pub(crate) fn path(&self, golden: &Golden) -> PathBuf {
        let stem = golden.trace.trim_end_matches(".jsonl");
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/state")
            .join(format!("format-{}", self.format))
            .join(format!("{stem}.after-line-{}.json", golden.after_line))
    }

    /// The checked-in fixture of `golden`, written first from `generate`
    /// (what this build saves) if it is missing and writing is on;
    /// `generate` is not run otherwise.
    pub(crate) async fn fixture(
        &self,
        golden: &Golden,
        generate: impl Future<Output = Value>,
    ) -> Value {
        let path = self.path(golden);
        if writing_fixtures() && !path.exists() {
            write_fixture(&path, &generate.await);
        }
        read_fixture(&path, self.write_command)
    }

    /// Fails unless `written`, the format this build writes, is the format
    /// of the fixtures.
    pub(crate) fn assert_written_format(&self, written: u32) {
        assert_eq!(
            written, self.format,
            "the format of {} is now {written}: add fixtures of format {written} (a new \
             folder and a new list, written with {WRITE_FIXTURES_ENV}=1) and keep the \
             format-{} ones, which must still be read or be refused by name",
            self.state, self.format
        );
    }

    /// Fails unless `fixture` (of `golden`) was saved after `after_line`.
    pub(crate) fn assert_split(&self, golden: &Golden, fixture: &Value) {
        assert_eq!(
            fixture["after_line"],
            Value::from(golden.after_line),
            "{}: {}",
            golden.trace,
            self.path(golden).display()
        );
    }

    /// Fails unless `continued` (what this build says after the split of
    /// `golden`, restored from its fixture) is `whole` (what one whole run
    /// says there).
    pub(crate) fn assert_continues_like_one_run(
        &self,
        golden: &Golden,
        continued: &[Value],
        whole: &[Value],
    ) {
        assert_eq!(
            continued,
            whole,
            "{} restored from {} says otherwise than one whole run",
            golden.trace,
            self.path(golden).display()
        );
    }

    /// Fails, listing the differences, unless `written` (what this build
    /// writes after reading `saved`, a state of the fixture of `golden`)
    /// has the key structure of `saved`. `whose` names the state in
    /// messages ("task T").
    pub(crate) fn assert_same_structure(
        &self,
        golden: &Golden,
        whose: &str,
        saved: &Value,
        written: &Value,
    ) {
        let differences = structure_differences(saved, written);
        assert!(
            differences.is_empty(),
            "{} {whose}: the saved state of {} and the state this build writes after \
             reading it differ in structure (a renamed or added field is a new format):\n{}",
            golden.trace,
            self.path(golden).display(),
            differences.join("\n")
        );
    }
}

/// Whether this run may write missing fixtures.
fn writing_fixtures() -> bool {
    std::env::var_os(WRITE_FIXTURES_ENV).is_some_and(|value| value == "1")
}

/// Writes `fixture` to `path` as pretty JSON with a final newline.
fn write_fixture(path: &Path, fixture: &Value) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    }
    let mut text = serde_json::to_string_pretty(fixture).unwrap_or_else(|e| panic!("{e}"));
    text.push('\n');
    // Written whole, then renamed into place: tests running at the same
    // time never read half a fixture.
    let partial = path.with_extension(format!("partial-{:?}", std::thread::current().id()));
    std::fs::write(&partial, text)
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", partial.display()));
    std::fs::rename(&partial, path)
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    eprintln!("wrote fixture {}", path.display());
}

/// The checked-in fixture at `path`. A missing one fails with the command
/// that writes it (`command`, run with [`WRITE_FIXTURES_ENV`]`=1`).
fn read_fixture(path: &Path, command: &str) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "the golden fixture {} cannot be read ({e}). Write it with \
             `{WRITE_FIXTURES_ENV}=1 {command}` and check it in; it must never \
             change afterwards (a changed saved-state format is a new format \
             number and a new fixture)",
            path.display()
        )
    });
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("the golden fixture {} is not JSON: {e}", path.display()))
}

/// The key structure of a JSON value: which keys an object has at every
/// level. Array elements are merged into one shape; the elements of an
/// empty array are "unknown" (nothing says which keys they would hold), and
/// a `null` matches anything (an optional value that is not there).
#[derive(Debug, Clone, PartialEq)]
enum Shape {
    Unknown,
    Null,
    Scalar,
    Array(Box<Shape>),
    Object(BTreeMap<String, Shape>),
}

fn shape(value: &Value) -> Shape {
    match value {
        Value::Null => Shape::Null,
        Value::Bool(_) | Value::Number(_) | Value::String(_) => Shape::Scalar,
        Value::Array(items) => Shape::Array(Box::new(
            items.iter().map(shape).fold(Shape::Unknown, merge),
        )),
        Value::Object(map) => Shape::Object(
            map.iter()
                .map(|(key, value)| (key.clone(), shape(value)))
                .collect(),
        ),
    }
}

/// Two element shapes of one array as one: the union of the keys of
/// objects (a field skipped when empty may be absent from some elements).
fn merge(a: Shape, b: Shape) -> Shape {
    match (a, b) {
        (Shape::Unknown | Shape::Null, other) | (other, Shape::Unknown | Shape::Null) => other,
        (Shape::Array(a), Shape::Array(b)) => Shape::Array(Box::new(merge(*a, *b))),
        (Shape::Object(mut a), Shape::Object(b)) => {
            for (key, value) in b {
                let merged = match a.remove(&key) {
                    Some(old) => merge(old, value),
                    None => value,
                };
                a.insert(key, merged);
            }
            Shape::Object(a)
        }
        (a, _) => a,
    }
}

/// Where the key structures of `expected` (a fixture) and `actual` (a
/// state written by this build) differ, one line per difference naming
/// its path (`builtin.exact_failure.recent[].at`). Empty when they agree:
/// the same keys in every object at every level. Values, array lengths
/// and `null`s are not compared.
fn structure_differences(expected: &Value, actual: &Value) -> Vec<String> {
    let mut differences = Vec::new();
    compare(&shape(expected), &shape(actual), "$", &mut differences);
    differences
}

fn compare(expected: &Shape, actual: &Shape, path: &str, out: &mut Vec<String>) {
    match (expected, actual) {
        (Shape::Unknown | Shape::Null, _)
        | (_, Shape::Unknown | Shape::Null)
        | (Shape::Scalar, Shape::Scalar) => {}
        (Shape::Array(expected), Shape::Array(actual)) => {
            compare(expected, actual, &format!("{path}[]"), out);
        }
        (Shape::Object(expected), Shape::Object(actual)) => {
            for (key, value) in expected {
                match actual.get(key) {
                    Some(other) => compare(value, other, &format!("{path}.{key}"), out),
                    None => out.push(format!(
                        "{path}.{key}: in the fixture, not written by this build"
                    )),
                }
            }
            for key in actual.keys().filter(|key| !expected.contains_key(*key)) {
                out.push(format!(
                    "{path}.{key}: written by this build, not in the fixture"
                ));
            }
        }
        (expected, actual) => out.push(format!(
            "{path}: the fixture has {}, this build writes {}",
            describe(expected),
            describe(actual)
        )),
    }
}

fn describe(shape: &Shape) -> &'static str {
    match shape {
        Shape::Unknown => "an unknown element",
        Shape::Null => "null",
        Shape::Scalar => "a scalar",
        Shape::Array(_) => "an array",
        Shape::Object(_) => "an object",
    }
}

/// The paths of the arrays that are empty in every one of `states`: parts
/// of the format whose inner keys no fixture freezes. (A key whose value is
/// `null` everywhere is frozen as a key; its value is not looked into.)
pub(crate) fn never_filled(states: &[&Value]) -> Vec<String> {
    let merged = states
        .iter()
        .map(|state| shape(state))
        .fold(Shape::Unknown, merge);
    let mut paths = Vec::new();
    unknown_paths(&merged, "$", &mut paths);
    paths
}

fn unknown_paths(shape: &Shape, path: &str, out: &mut Vec<String>) {
    match shape {
        Shape::Unknown => out.push(path.to_owned()),
        Shape::Null | Shape::Scalar => {}
        Shape::Array(element) => unknown_paths(element, &format!("{path}[]"), out),
        Shape::Object(map) => {
            for (key, value) in map {
                unknown_paths(value, &format!("{path}.{key}"), out);
            }
        }
    }
}

#[test]
fn a_renamed_key_at_any_depth_is_a_structure_difference() {
    let fixture = serde_json::json!({"a": {"list": [{"x": 1, "y": null}], "n": 2}});
    let same = serde_json::json!({"a": {"list": [], "n": 5}});
    assert!(structure_differences(&fixture, &same).is_empty());
    let renamed = serde_json::json!({"a": {"list": [{"x2": 1, "y": 3}], "n": 2}});
    assert_eq!(
        structure_differences(&fixture, &renamed),
        [
            "$.a.list[].x: in the fixture, not written by this build",
            "$.a.list[].x2: written by this build, not in the fixture"
        ]
    );
    let empty = serde_json::json!({"a": {"list": [], "n": null}});
    assert_eq!(never_filled(&[&empty]), ["$.a.list[]"]);
    assert!(never_filled(&[&empty, &fixture]).is_empty());
}
