//! The product's files describe what loopguard does today: its docs,
//! READMEs and comments do not tell the story of the work that built it.
//! History is `git log`; experiments, logs of what was tried and training
//! notes live in `research/`, which is not part of the product.
//!
//! Every text file of the repository (`crate::repo::files`) outside
//! `research/` and any `target*` directory is read, and a line that names
//! a work period by its number or as "this one" or "the last one" fails
//! the test, named as `file:line`. The words are put together at run time
//! (see [`history_words`]) so that this file does not name them itself.

use std::path::{Component, Path};

use crate::repo::{files, root, shown, text};

/// The word for a stretch of work, built at run time so that this file
/// does not contain the phrases it looks for.
fn history_words() -> (String, [String; 2]) {
    let period = ["ses", "sion"].concat();
    let named = [format!("this {period}"), format!("last {period}")];
    (period, named)
}

/// Whether `line` matches `(?i)PERIODs? [0-9]+|this PERIOD|last PERIOD`,
/// where PERIOD is [`history_words`]' word (case folded as ASCII).
fn names_a_period(line: &str, period: &str, named: &[String]) -> bool {
    let lower = line.to_ascii_lowercase();
    if named.iter().any(|phrase| lower.contains(phrase.as_str())) {
        return true;
    }
    let bytes = lower.as_bytes();
    lower.match_indices(period).any(|(at, _)| {
        let mut next = at + period.len();
        if bytes.get(next) == Some(&b's') {
            next += 1;
        }
        bytes.get(next) == Some(&b' ') && bytes.get(next + 1).is_some_and(u8::is_ascii_digit)
    })
}

/// Whether `relative` (a path from the repository's root) is outside what
/// the product's files are: `research/`, or a `target*` directory.
fn exempt(relative: &Path) -> bool {
    match relative.components().next() {
        Some(Component::Normal(first)) => {
            let first = first.to_string_lossy();
            first == "research" || first.starts_with("target") || first == ".git"
        }
        _ => false,
    }
}

#[test]
fn no_product_file_tells_the_history_of_the_work() {
    let root = root();
    let (period, named) = history_words();
    let mut checked = 0;
    let mut bad = Vec::new();
    for file in files(&root) {
        let relative = file.strip_prefix(&root).unwrap_or(&file);
        if exempt(relative) {
            continue;
        }
        let Some(text) = text(&file) else { continue };
        checked += 1;
        for (n, line) in text.lines().enumerate() {
            if names_a_period(line, &period, &named) {
                bad.push(format!(
                    "{}:{}: {}",
                    shown(&root, &file),
                    n + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} line(s) tell the work's history (say what is true today; `git log` keeps the \
         history, research/ the experiments):\n{}",
        bad.len(),
        bad.join("\n")
    );
    assert!(checked > 0, "no text file found under {}", root.display());
}

/// The matcher itself, on the cases that matter.
#[test]
fn the_history_matcher_sees_numbered_periods_and_nothing_else() {
    let (period, named) = history_words();
    let sees = |line: &str| names_a_period(line, &period, &named);
    let numbered = format!("measured in {period} 12, shipped later");
    let plural = format!("{}S 23 TO 28", period.to_uppercase());
    let this = format!("Nothing changed this {period}.");
    let last = format!("as the Last {period} found");
    for line in [&numbered, &plural, &this, &last] {
        assert!(sees(line), "{line:?} should be found");
    }
    let no_number = format!("an ONNX Runtime {period} per model");
    let colon = format!("the bare {period}: 4.9 ms");
    let store = format!("user {period}s expire");
    for line in [&no_number, &colon, &store, &"nothing here".to_owned()] {
        assert!(!sees(line), "{line:?} should not be found");
    }
    assert!(exempt(Path::new("research/tuning-log.md")));
    assert!(exempt(Path::new("target-ci/debug/x.txt")));
    assert!(!exempt(Path::new("docs/tuning.md")));
    assert!(!exempt(Path::new("crates/research/x.rs")));
}
