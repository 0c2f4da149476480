//! The repository's own files, for the tests that read them (`docs`,
//! `history`), and the limits every Rust file is held to: at most 1,500
//! lines a file, at most 150 a function.
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

/// The most lines a Rust source file may have.
const MAX_FILE_LINES: usize = 1_500;

/// The most lines a function may span, from its `fn` line to its closing
/// brace (its attributes and doc comment not counted).
const MAX_FN_LINES: usize = 150;

/// The Rust files of the repository as git lists them (those it tracks
/// and those not yet added, less what it ignores), less `research/` and
/// any `target` directory; every `*.rs` file the walk finds when git
/// cannot list them.
fn tracked_rust_files(root: &Path) -> Vec<PathBuf> {
    let listed = std::process::Command::new("git")
        .current_dir(root)
        .args([
            "ls-files",
            "--cached",
            "--others",
            "--exclude-standard",
            "-z",
            "--",
            "*.rs",
        ])
        .output();
    let mut paths: Vec<PathBuf> = match listed {
        Ok(output) if output.status.success() => output
            .stdout
            .split(|byte| *byte == 0)
            .filter(|path| !path.is_empty())
            .map(|path| root.join(String::from_utf8_lossy(path).as_ref()))
            .collect(),
        _ => files(root)
            .into_iter()
            .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
            .collect(),
    };
    paths.retain(|path| {
        let relative = path.strip_prefix(root).unwrap_or(path);
        !relative.starts_with("research")
            && !relative
                .components()
                .any(|part| part.as_os_str() == "target")
            // A file deleted but not yet staged is still listed.
            && path.is_file()
    });
    paths.sort();
    paths
}

/// Every function of a file whose body spans more than [`MAX_FN_LINES`]:
/// free functions, methods, trait methods with a default body, and those
/// nested in other functions or in modules.
struct LongFunctions {
    /// `name:line: N lines` for each one.
    found: Vec<String>,
}

impl LongFunctions {
    fn check(&mut self, name: &syn::Ident, sig: &syn::Signature, block: &syn::Block) {
        let start = sig.fn_token.span.start().line;
        let end = block.brace_token.span.close().end().line;
        let lines = end + 1 - start;
        if lines > MAX_FN_LINES {
            self.found
                .push(format!("{start}: fn {name} is {lines} lines"));
        }
    }
}

impl<'ast> syn::visit::Visit<'ast> for LongFunctions {
    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        self.check(&item.sig.ident, &item.sig, &item.block);
        syn::visit::visit_item_fn(self, item);
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        self.check(&item.sig.ident, &item.sig, &item.block);
        syn::visit::visit_impl_item_fn(self, item);
    }

    fn visit_trait_item_fn(&mut self, item: &'ast syn::TraitItemFn) {
        if let Some(block) = &item.default {
            self.check(&item.sig.ident, &item.sig, block);
        }
        syn::visit::visit_trait_item_fn(self, item);
    }
}

#[test]
fn no_source_file_is_over_1500_lines_and_no_function_over_150() {
    let root = root();
    let mut checked = 0;
    let mut over = Vec::new();
    for path in tracked_rust_files(&root) {
        let name = shown(&root, &path);
        let text = fs::read_to_string(&path).unwrap_or_else(|err| panic!("{name}: {err}"));
        checked += 1;
        let lines = text.lines().count();
        if lines > MAX_FILE_LINES {
            over.push(format!("{name}: {lines} lines"));
        }
        match syn::parse_file(&text) {
            Ok(file) => {
                let mut long = LongFunctions { found: Vec::new() };
                syn::visit::Visit::visit_file(&mut long, &file);
                over.extend(long.found.iter().map(|found| format!("{name}:{found}")));
            }
            Err(err) => over.push(format!(
                "{name}:{}: cannot be parsed to measure its functions: {err}",
                err.span().start().line
            )),
        }
    }
    assert!(checked > 0, "no Rust file found under {}", root.display());
    assert!(
        over.is_empty(),
        "{} file(s) or function(s) too long (a file at most {MAX_FILE_LINES} lines, a function \
         at most {MAX_FN_LINES} from its `fn` line to its closing brace; split them):\n{}",
        over.len(),
        over.join("\n")
    );
}
