//! Keys and their positions, found in toml's spanned document
//! ([`toml::de::DeTable`]) rather than by scanning the text.
//!
//! Why the parsed document: toml points an unknown-field error at the key
//! itself, and every key in the spanned document carries the same byte
//! range, so the path to the key whose range holds the error's start is
//! the dotted key, exactly. A scan of the text for `[table]` headers above
//! the error would go wrong on dotted keys (`cycles.window_sec = 3` at the
//! top), inline tables, quoted keys with dots or brackets, arrays of tables
//! (which element?), and a `[` at the start of a line inside a multi-line
//! string. The document is parsed a second time only on the error path,
//! and only when it is syntactically valid (a syntax error has no key,
//! only a position).

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::{ConfigError, ConfigLocation, TextPosition};

/// toml's error as a [`ConfigError::Parse`]: its span turned into a line
/// and column, and the key it is about found in the document.
pub(crate) fn parse_error(text: &str, err: &toml::de::Error) -> ConfigError {
    let span = err.span();
    // toml's messages are one line today; joined in case one is not, so
    // that the error stays one line.
    let message = err
        .message()
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    ConfigError::Parse {
        location: ConfigLocation {
            file: None,
            position: span
                .as_ref()
                .map(|span| TextPosition::of_offset(text, span.start)),
        },
        key: span.and_then(|span| key_at(text, span.start)),
        message,
    }
}

/// One step of a dotted key: a table key or an array index.
#[derive(Debug, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

/// The dotted key (`phases.max_visit`, `plugins[1].confg`, `phase`)
/// of the key, or failing that the value, whose span holds byte `at`.
pub(crate) fn key_at(text: &str, at: usize) -> Option<String> {
    let document = DeTable::parse(text).ok()?;
    let mut path = Vec::new();
    find_in_table(document.get_ref(), at, &mut path).then(|| render(&path))
}

/// `err` with the position of its key in `text`, for an
/// [`ConfigError::Invalid`] that has none yet.
pub(crate) fn in_text(mut err: ConfigError, text: &str) -> ConfigError {
    if let ConfigError::Invalid { key, location, .. } = &mut err
        && location.position.is_none()
    {
        location.position = position_of(text, key);
    }
    err
}

fn holds(span: Range<usize>, at: usize) -> bool {
    span.start <= at && at < span.end.max(span.start + 1)
}

/// Depth first, children before their parent: the deepest key or value
/// holding `at` wins (a key in an inline table, not the table).
fn find_in_table(table: &DeTable<'_>, at: usize, path: &mut Vec<Step>) -> bool {
    for (key, value) in table {
        path.push(Step::Key(key.get_ref().to_string()));
        if holds(key.span(), at) || find_in_value(value, at, path) {
            return true;
        }
        path.pop();
    }
    false
}

fn find_in_value(value: &Spanned<DeValue<'_>>, at: usize, path: &mut Vec<Step>) -> bool {
    let inside = match value.get_ref() {
        DeValue::Table(table) => find_in_table(table, at, path),
        DeValue::Array(array) => array.iter().enumerate().any(|(index, item)| {
            path.push(Step::Index(index));
            let found = find_in_value(item, at, path);
            if !found {
                path.pop();
            }
            found
        }),
        _ => false,
    };
    // A standard table's span is its `[header]` only, so a key below it
    // is never taken for the table: its children were searched first.
    inside || holds(value.span(), at)
}

/// Where the dotted `key` is written in `text`; when the text leaves it
/// out, where its nearest written table is.
fn position_of(text: &str, key: &str) -> Option<TextPosition> {
    let document = DeTable::parse(text).ok()?;
    let mut table = Some(document.get_ref());
    let mut value: Option<&Spanned<DeValue<'_>>> = None;
    let mut found: Option<Range<usize>> = None;
    for step in parse_dotted(key) {
        let (span, next) = match step {
            Step::Key(name) => {
                let Some((key, next)) =
                    table.and_then(|table| table.iter().find(|(key, _)| *key.get_ref() == name))
                else {
                    break;
                };
                (key.span(), next)
            }
            Step::Index(index) => {
                let Some(next) = value
                    .and_then(|value| value.get_ref().as_array())
                    .and_then(|array| array.get(index))
                else {
                    break;
                };
                (next.span(), next)
            }
        };
        found = Some(span);
        value = Some(next);
        table = next.get_ref().as_table();
    }
    found.map(|span| TextPosition::of_offset(text, span.start))
}

/// `a.b."c.d"[2].e` as steps; the inverse of [`render`].
fn parse_dotted(key: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut current = String::new();
    let mut pending = false;
    let mut chars = key.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                pending = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => current.extend(chars.next()),
                        c => current.push(c),
                    }
                }
            }
            '.' | '[' => {
                if pending || !current.is_empty() {
                    steps.push(Step::Key(std::mem::take(&mut current)));
                }
                pending = false;
                if c == '[' {
                    let digits: String = chars.by_ref().take_while(|c| *c != ']').collect();
                    match digits.trim().parse() {
                        Ok(index) => steps.push(Step::Index(index)),
                        Err(_) => return steps,
                    }
                }
            }
            c => current.push(c),
        }
    }
    if pending || !current.is_empty() {
        steps.push(Step::Key(current));
    }
    steps
}

/// Steps as a dotted key, quoting a key that is not bare.
fn render(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                let bare = !key.is_empty()
                    && key
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                if bare {
                    out.push_str(key);
                } else {
                    out.push_str(&format!("{key:?}"));
                }
            }
            Step::Index(index) => out.push_str(&format!("[{index}]")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotted_keys_round_trip() {
        for key in [
            "a",
            "a.b",
            "edges.overrides.\"planner->x\"",
            "plugins[1].path",
            "a.\"\"",
        ] {
            assert_eq!(render(&parse_dotted(key)), key);
        }
        assert_eq!(
            parse_dotted("p[0].q"),
            [Step::Key("p".into()), Step::Index(0), Step::Key("q".into())]
        );
    }
}
