//! The repository's own files, for the tests that read them (`docs`,
//! `history`).
//!
//! The walk starts at the workspace root and skips `target`, `.git`,
//! `models/cache` (downloaded, not in git), any `*-target` directory and,
//! in a git checkout, what git ignores (a maintainer's Python environment
//! under `research/tuned-encoder/`, say): files nobody commits are not the
//! repository's. Files not yet added to git are read.

use std::fs;
use std::path::{Path, PathBuf};

/// The workspace root, canonical.
pub(crate) fn root() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    fs::canonicalize(&root).unwrap_or_else(|err| panic!("{}: {err}", root.display()))
}

/// What git ignores under `root` (directories and files, relative to it),
/// or nothing when `root` is not a git checkout or git cannot run.
fn ignored_by_git(root: &Path) -> Vec<PathBuf> {
    let listed = std::process::Command::new("git")
        .current_dir(root)
        .args([
            "ls-files",
            "--others",
            "--ignored",
            "--exclude-standard",
            "--directory",
            "-z",
        ])
        .output();
    match listed {
        Ok(output) if output.status.success() => output
            .stdout
            .split(|byte| *byte == 0)
            .filter(|path| !path.is_empty())
            .map(|path| root.join(String::from_utf8_lossy(path).trim_end_matches('/')))
            .collect(),
        _ => Vec::new(),
    }
}

/// Every file of the repository that the checks read, sorted.
pub(crate) fn files(root: &Path) -> Vec<PathBuf> {
    let ignored = ignored_by_git(root);
    let mut out = Vec::new();
    walk(root, root, &ignored, &mut out);
    out.sort();
    out
}

/// The files under `dir`, less the skipped directories and what git
/// ignores (`ignored`), into `out`.
fn walk(root: &Path, dir: &Path, ignored: &[PathBuf], out: &mut Vec<PathBuf>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|err| panic!("{}: {err}", dir.display()));
    for entry in entries {
        let entry = entry.unwrap_or_else(|err| panic!("{}: {err}", dir.display()));
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        // `symlink_metadata`: a link to a directory is not followed, so
        // the walk cannot loop or leave the repository.
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            let skipped = name == "target"
                || name == ".git"
                || name.ends_with("-target")
                || path
                    .strip_prefix(root)
                    .is_ok_and(|rel| rel == Path::new("models/cache"));
            if !skipped && !ignored.contains(&path) {
                walk(root, &path, ignored, out);
            }
        } else if meta.is_file() && name != ".git" && !ignored.contains(&path) {
            // (In a git worktree `.git` is a file.)
            out.push(path);
        }
    }
}

/// A path relative to the root, for messages.
pub(crate) fn shown(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The file's text, or `None` for a binary: an image, a font, `Cargo.lock`
/// or anything that is not UTF-8.
pub(crate) fn text(path: &Path) -> Option<String> {
    const BINARY: &[&str] = &[
        "png", "jpg", "jpeg", "gif", "bmp", "ico", "webp", "tif", "tiff", "ttf", "otf", "woff",
        "woff2", "eot", "onnx", "so", "dylib", "dll", "a", "rlib", "zip", "gz", "whl", "db",
        "sqlite",
    ];
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    if ext.is_some_and(|e| BINARY.contains(&e.as_str()))
        || path.file_name().is_some_and(|n| n == "Cargo.lock")
    {
        return None;
    }
    String::from_utf8(fs::read(path).ok()?).ok()
}
