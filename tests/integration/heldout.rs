//! The same-request judge's rules are not written from the pairs that
//! measure it: no text of a held-out pair (the `test` split of
//! `data/pairs/requests.jsonl`, and every row of a held-out batch,
//! `data/pairs/unseen-batch-N.jsonl`) appears in the judge's sources, its
//! word lists, its tests or its fixtures. (Batches 16–18,
//! `unseen-batches-16-18.jsonl`, are seen: their texts are the encoders'
//! parity references in `crates/semantic/tests/tuned_mpnet.rs`.)
//!
//! A text is compared whitespace-collapsed and case-folded, and only when
//! it is long enough to be a sentence of its own (short texts such as
//! "fix the build" occur in any English writing).

use std::path::{Path, PathBuf};

use crate::repo::{files, root, shown, text};

/// A text shorter than this (in bytes, collapsed) is not looked for.
const MIN_TEXT: usize = 24;

/// Where the judge's rules, word lists and tests live.
fn judge_files(root: &Path) -> Vec<PathBuf> {
    let places = [
        root.join("crates/judge"),
        root.join("crates/semantic/src"),
        root.join("crates/semantic/tests"),
    ];
    files(root)
        .into_iter()
        .filter(|path| places.iter().any(|place| path.starts_with(place)))
        .collect()
}

/// Lower case, runs of whitespace as one space, trimmed.
fn collapsed(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// A source file's text as prose: comment markers at the start of lines
/// (`//!`, `///`, `//`, `#`) dropped, then [`collapsed`], so that a quote
/// wrapped over several comment lines is still seen.
fn as_prose(source: &str) -> String {
    let lines: Vec<&str> = source
        .lines()
        .map(|line| {
            let line = line.trim_start();
            ["//!", "///", "//", "#"]
                .iter()
                .find_map(|marker| line.strip_prefix(marker))
                .unwrap_or(line)
        })
        .collect();
    collapsed(&lines.join("\n"))
}

/// The held-out texts, collapsed, each with where it comes from.
fn held_out_texts(root: &Path) -> Vec<(String, String)> {
    let pairs = root.join("data/pairs");
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&pairs)
        .unwrap_or_else(|err| panic!("{}: {err}", pairs.display()))
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with("unseen-batch-") && name.ends_with(".jsonl"))
        })
        .collect();
    sources.sort();
    sources.insert(0, pairs.join("requests.jsonl"));
    let mut texts = Vec::new();
    for source in sources {
        // The unseen batches are held out whole; the main file by split.
        let every_row = !source.ends_with("requests.jsonl");
        let body = std::fs::read_to_string(&source)
            .unwrap_or_else(|err| panic!("{}: {err}", source.display()));
        for (number, line) in body.lines().enumerate() {
            let row: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|err| panic!("{}:{}: {err}", source.display(), number + 1));
            if !every_row && row["split"] != "test" {
                continue;
            }
            for side in ["a", "b"] {
                if let Some(side) = row[side].as_str() {
                    let side = collapsed(side);
                    if side.len() >= MIN_TEXT {
                        let from = format!("{}:{}", shown(root, &source), number + 1);
                        texts.push((side, from));
                    }
                }
            }
        }
    }
    texts
}

#[test]
fn no_held_out_pair_text_is_in_the_judges_sources_or_tests() {
    let root = root();
    let texts = held_out_texts(&root);
    assert!(texts.len() > 300, "{} held-out texts read", texts.len());
    let judge = judge_files(&root);
    assert!(judge.len() > 20, "{} judge files read", judge.len());
    let mut found = Vec::new();
    for path in &judge {
        let Some(body) = text(path) else {
            continue;
        };
        let body = as_prose(&body);
        for (held, from) in &texts {
            if body.contains(held.as_str()) {
                found.push(format!("{}: \"{held}\" ({from})", shown(&root, path)));
            }
        }
    }
    assert!(
        found.is_empty(),
        "held-out pair texts in the judge's files:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_comparison_sees_a_text_across_comment_lines_and_case() {
    let wanted = collapsed("please review the auth middleware");
    let wrapped = as_prose("/// e.g. \"Please Review the\n///   auth middleware\" ...");
    assert!(wrapped.contains(&wanted), "{wrapped}");
    let other = as_prose("// review the auth\n// middleware, please");
    assert!(!other.contains(&wanted), "{other}");
}
