//! Shared by the golden saved-state tests of `loopguard-host`,
//! `loopguard-semantic` and `loopguard-progress-evaluator` (each includes
//! this file with `#[path]`): reading and writing checked-in fixtures, and
//! comparing the key structure of two saved states.
//!
//! A fixture is written only when [`WRITE_FIXTURES_ENV`] is set, and only
//! when it is missing: a checked-in fixture is never overwritten by a test
//! run (delete it first to write it again, and only for a format that has
//! not shipped).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

/// Set to `1` to write the fixtures that are missing.
pub(crate) const WRITE_FIXTURES_ENV: &str = "LOOPGUARD_WRITE_FIXTURES";

/// Whether this run may write missing fixtures.
pub(crate) fn writing_fixtures() -> bool {
    std::env::var_os(WRITE_FIXTURES_ENV).is_some_and(|value| value == "1")
}

/// Whether the fixture at `path` should be written now: writing is on and
/// the file is missing.
pub(crate) fn should_write(path: &Path) -> bool {
    writing_fixtures() && !path.exists()
}

/// Writes `fixture` to `path` as pretty JSON with a final newline.
pub(crate) fn write_fixture(path: &Path, fixture: &Value) {
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
pub(crate) fn read_fixture(path: &Path, command: &str) -> Value {
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
pub(crate) fn structure_differences(expected: &Value, actual: &Value) -> Vec<String> {
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
