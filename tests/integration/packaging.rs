//! Every file a crate's sources compile in (`include_str!`,
//! `include_bytes!`, `#[path]`) lies inside that crate's directory, so
//! `cargo package` carries it and the packaged crate builds on its own.
//! A doctest-only item (`#[cfg(doctest)]`, the host's README examples)
//! may read from the repository: only a doctest build reads it.
//! (`cargo package --workspace --no-verify` in `.ci/run` checks the
//! manifests; this checks what it does not build.)

use std::path::{Component, Path, PathBuf};

use crate::repo;

/// The crate directory holding `file`: the nearest folder above it with a
/// `Cargo.toml` that has a `[package]`.
fn crate_dir(file: &Path) -> Option<PathBuf> {
    file.ancestors().skip(1).find_map(|dir| {
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).ok()?;
        manifest.contains("[package]").then(|| dir.to_path_buf())
    })
}

/// `path` with its `.` and `..` resolved without the file system.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The string literal right after `at` in `line` (its first `"...")`.
fn literal_after(line: &str, at: usize) -> Option<&str> {
    let rest = &line[at..];
    let start = rest.find('"')? + 1;
    let len = rest[start..].find('"')?;
    Some(&rest[start..start + len])
}

/// Whether the item at line `index` of `lines` is under `#[cfg(doctest)]`:
/// that attribute among the attributes and doc comments right above it.
fn doctest_only(lines: &[&str], index: usize) -> bool {
    lines[..index]
        .iter()
        .rev()
        .map(|line| line.trim())
        .take_while(|line| line.starts_with("#[") || line.starts_with("///"))
        .any(|line| line == "#[cfg(doctest)]")
}

/// Each path `text` compiles in, with its line number, less those of an
/// item under `#[cfg(doctest)]`.
fn compiled_in(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        if line.trim_start().starts_with("//") || doctest_only(&lines, index) {
            continue;
        }
        for needle in ["include_str!(", "include_bytes!(", "#[path = "] {
            if let Some(at) = line.find(needle)
                && let Some(path) = literal_after(line, at)
            {
                found.push((index + 1, path.to_string()));
            }
        }
    }
    found
}

#[test]
fn no_crate_compiles_in_a_file_from_outside_its_directory() {
    let root = repo::root();
    let mut outside = Vec::new();
    for file in repo::files(&root) {
        let in_src = file
            .strip_prefix(&root)
            .is_ok_and(|rel| rel.components().any(|part| part.as_os_str() == "src"));
        if file.extension().is_none_or(|ext| ext != "rs") || !in_src {
            continue;
        }
        let (Some(text), Some(krate)) = (repo::text(&file), crate_dir(&file)) else {
            continue;
        };
        let dir = file.parent().unwrap_or(&root);
        for (line, path) in compiled_in(&text) {
            if !lexical(&dir.join(&path)).starts_with(&krate) {
                outside.push(format!("{}:{line}: {path}", repo::shown(&root, &file)));
            }
        }
    }
    assert!(
        outside.is_empty(),
        "compiled in from outside the crate (move the file into the crate, or keep a copy \
         there):\n{}",
        outside.join("\n")
    );
}

#[test]
fn the_reader_sees_includes_and_leaves_doctest_only_items_and_comments_out() {
    let text = "const A: &str = include_str!(\"../a.txt\");\n\
                // include_str!(\"../../commented.txt\")\n\
                #[cfg(doctest)]\n\
                #[doc = include_str!(\"../../../README.md\")]\n\
                pub struct Readme;\n\
                #[path = \"other.rs\"]\n\
                mod other;\n\
                static B: &[u8] = include_bytes!(\"b.bin\");\n";
    let found: Vec<String> = compiled_in(text)
        .into_iter()
        .map(|(_, path)| path)
        .collect();
    assert_eq!(found, ["../a.txt", "other.rs", "b.bin"]);
    assert_eq!(
        lexical(Path::new("/w/crates/x/src/../../../config/a")),
        Path::new("/w/config/a")
    );
}
