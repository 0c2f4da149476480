//! The labelled pair file: JSON Lines, one pair of texts a line, each
//! labelled "the same" or not.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::{LineIssue, Result, TuneError};

/// Which part of a labelled set a pair belongs to.
///
/// Thresholds are chosen on [`Split::Train`] pairs only; [`Split::Test`]
/// pairs are scored once a threshold is chosen (the held-out check), and
/// never influence the choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    /// Used to choose (the default when a line has no `split`).
    Train,
    /// Held out: scored after choosing.
    Test,
}

impl Split {
    /// `train` or `test`.
    pub fn as_str(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Test => "test",
        }
    }
}

/// One labelled pair: two texts and whether they ask for the same thing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pair {
    /// The 1-based line of the pair file it came from.
    pub line: u64,
    /// The first text.
    pub a: String,
    /// The second text.
    pub b: String,
    /// Whether the two texts are "the same" (request or topic).
    pub same: bool,
    /// What kind of sameness is labelled: `request`, `topic`, or the
    /// file's own word.
    pub kind: Option<String>,
    /// Where the pair came from (free text).
    pub source: Option<String>,
    /// Train or test.
    pub split: Split,
    /// Which hard case the pair is (`synonym`, `long`, ...), when the
    /// file says: `loopguard tune judge fit` and `judge eval` score the
    /// pairs of each apart.
    pub hard: Option<String>,
}

/// A pair file as read: its valid pairs and the lines that were skipped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PairSet {
    /// The file, as named in messages.
    pub file: PathBuf,
    /// Every valid pair, in file order.
    pub pairs: Vec<Pair>,
    /// The lines that were not valid pairs, each with what is wrong.
    pub issues: Vec<LineIssue>,
}

impl PairSet {
    /// Reads the pair file at `path`. Only a file that cannot be opened or
    /// read is an error; a bad line becomes a [`LineIssue`] and the others
    /// are kept.
    pub fn read(path: &Path) -> Result<PairSet> {
        let file =
            File::open(path).map_err(|e| TuneError::io("cannot read the pair file", path, e))?;
        PairSet::parse(BufReader::new(file), path)
    }

    /// Parses pair lines from `input`; `file` names them in messages.
    ///
    /// The format, one JSON object a line (blank lines are skipped):
    /// `{"a": TEXT, "b": TEXT, "same": BOOL}`, optionally with `"kind"`
    /// (a string, e.g. `request` or `topic`), `"source"` (a string),
    /// `"split"` (`train`, the default, or `test`) and `"hard"` (a string:
    /// which hard case the pair is). Unknown fields are
    /// ignored; a missing or mistyped `a`, `b` or `same`, or a text with
    /// nothing but white space, makes the line bad.
    pub fn parse(mut input: impl BufRead, file: &Path) -> Result<PairSet> {
        let mut set = PairSet {
            file: file.to_path_buf(),
            ..PairSet::default()
        };
        let mut buffer = Vec::new();
        let mut line = 0u64;
        loop {
            buffer.clear();
            let read = input
                .read_until(b'\n', &mut buffer)
                .map_err(|e| TuneError::io("cannot read the pair file", file, e))?;
            if read == 0 {
                break;
            }
            line += 1;
            let text = match std::str::from_utf8(&buffer) {
                Ok(text) => text.trim(),
                Err(err) => {
                    set.issues.push(LineIssue::new(
                        file,
                        line,
                        format!("the line is not valid UTF-8 ({err})"),
                    ));
                    continue;
                }
            };
            if text.is_empty() {
                continue;
            }
            match parse_line(text, line) {
                Ok(pair) => set.pairs.push(pair),
                Err(message) => set.issues.push(LineIssue::new(file, line, message)),
            }
        }
        Ok(set)
    }

    /// The pairs whose `kind` is `kind` (all of them for `None`).
    #[must_use]
    pub fn with_kind(&self, kind: Option<&str>) -> PairSet {
        PairSet {
            file: self.file.clone(),
            pairs: self
                .pairs
                .iter()
                .filter(|pair| kind.is_none_or(|kind| pair.kind.as_deref() == Some(kind)))
                .cloned()
                .collect(),
            issues: self.issues.clone(),
        }
    }

    /// The pairs of one split.
    pub fn split(&self, split: Split) -> impl Iterator<Item = &Pair> {
        self.pairs.iter().filter(move |pair| pair.split == split)
    }

    /// Every distinct text of the set, in order of first appearance: what
    /// has to be embedded.
    pub fn distinct_texts(&self) -> Vec<&str> {
        let mut seen = HashSet::new();
        self.pairs
            .iter()
            .flat_map(|pair| [pair.a.as_str(), pair.b.as_str()])
            .filter(|text| seen.insert(*text))
            .collect()
    }
}

/// One line as a pair, or what is wrong with it.
fn parse_line(text: &str, line: u64) -> std::result::Result<Pair, String> {
    let value: Value =
        serde_json::from_str(text).map_err(|err| format!("not a JSON object: {err}"))?;
    let Value::Object(object) = value else {
        return Err(format!(
            "not a JSON object but {} (one pair a line: {{\"a\": ..., \"b\": ..., \"same\": true}})",
            type_name(&value)
        ));
    };
    let a = text_field(&object, "a")?;
    let b = text_field(&object, "b")?;
    let same = match object.get("same") {
        Some(Value::Bool(same)) => *same,
        Some(other) => {
            return Err(format!(
                "`same` must be true or false, not {}",
                type_name(other)
            ));
        }
        None => return Err("`same` is missing (true or false)".into()),
    };
    let kind = optional_string(&object, "kind")?;
    let source = optional_string(&object, "source")?;
    let hard = optional_string(&object, "hard")?;
    let split = match optional_string(&object, "split")?.as_deref() {
        None | Some("train") => Split::Train,
        Some("test") => Split::Test,
        Some(other) => {
            return Err(format!(
                "`split` must be \"train\" or \"test\", not {other:?}"
            ));
        }
    };
    Ok(Pair {
        line,
        a,
        b,
        same,
        kind,
        source,
        split,
        hard,
    })
}

fn text_field(object: &Map<String, Value>, key: &str) -> std::result::Result<String, String> {
    match object.get(key) {
        Some(Value::String(text)) if text.trim().is_empty() => {
            Err(format!("`{key}` is empty: a pair needs two texts"))
        }
        Some(Value::String(text)) => Ok(text.clone()),
        Some(other) => Err(format!(
            "`{key}` must be a string, not {}",
            type_name(other)
        )),
        None => Err(format!("`{key}` is missing (a text)")),
    }
}

fn optional_string(
    object: &Map<String, Value>,
    key: &str,
) -> std::result::Result<Option<String>, String> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other) => Err(format!(
            "`{key}` must be a string, not {}",
            type_name(other)
        )),
    }
}

/// "a number", "an array", ... for messages.
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> PairSet {
        match PairSet::parse(text.as_bytes(), Path::new("p.jsonl")) {
            Ok(set) => set,
            Err(err) => panic!("{err}"),
        }
    }

    #[test]
    fn optional_fields_and_defaults() {
        let set = parse(
            "{\"a\":\"x\",\"b\":\"y\",\"same\":true}\n\n{\"a\":\"x\",\"b\":\"z\",\"same\":false,\"kind\":\"topic\",\"source\":\"s\",\"split\":\"test\",\"extra\":1}\n",
        );
        assert!(set.issues.is_empty(), "{:?}", set.issues);
        assert_eq!(set.pairs.len(), 2);
        assert_eq!(set.pairs[0].split, Split::Train);
        assert_eq!(set.pairs[0].kind, None);
        assert_eq!(set.pairs[1].line, 3);
        assert_eq!(set.pairs[1].split, Split::Test);
        assert_eq!(set.pairs[1].kind.as_deref(), Some("topic"));
        assert_eq!(set.distinct_texts(), ["x", "y", "z"]);
        assert_eq!(set.with_kind(Some("topic")).pairs.len(), 1);
    }

    #[test]
    fn every_bad_line_says_what_is_wrong() {
        let set = parse(concat!(
            "[1]\n",
            "{\"a\":\"x\",\"b\":\"y\"}\n",
            "{\"a\":\" \",\"b\":\"y\",\"same\":true}\n",
            "{\"a\":1,\"b\":\"y\",\"same\":true}\n",
            "{\"a\":\"x\",\"b\":\"y\",\"same\":\"yes\"}\n",
            "{\"a\":\"x\",\"b\":\"y\",\"same\":true,\"split\":\"dev\"}\n",
            "{\"a\":\"x\",\"b\":\"y\",\"same\":true,\"kind\":3}\n",
            "{nope\n",
        ));
        assert!(set.pairs.is_empty());
        let messages: Vec<String> = set.issues.iter().map(ToString::to_string).collect();
        assert_eq!(messages.len(), 8, "{messages:#?}");
        assert!(messages[0].starts_with("p.jsonl:1: not a JSON object but an array"));
        assert_eq!(messages[1], "p.jsonl:2: `same` is missing (true or false)");
        assert_eq!(
            messages[2],
            "p.jsonl:3: `a` is empty: a pair needs two texts"
        );
        assert_eq!(messages[3], "p.jsonl:4: `a` must be a string, not a number");
        assert_eq!(
            messages[4],
            "p.jsonl:5: `same` must be true or false, not a string"
        );
        assert!(messages[5].contains("`split` must be \"train\" or \"test\""));
        assert!(messages[6].contains("`kind` must be a string"));
        assert!(messages[7].starts_with("p.jsonl:8: not a JSON object: "));
    }
}
