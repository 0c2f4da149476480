//! The repository stands on its own: every relative Markdown link resolves
//! inside it, and no file points at the orchestrator's folder of specs
//! outside it (the contract lives in `docs/spec/`). The files read are the
//! repository's (`crate::repo::files`).

use std::path::{Component, Path, PathBuf};

use crate::repo::{files, root, shown, text};

/// The folder outside the project that files must not cite. Built at run
/// time so that this file does not contain it.
fn needle() -> String {
    concat!("sha", "red/").to_owned()
}

/// The 1-based line of byte `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at].bytes().filter(|&b| b == b'\n').count() + 1
}

/// `text` with the contents of fenced code blocks and inline code spans
/// replaced by spaces (newlines kept), so every byte keeps its position.
fn without_code(text: &str) -> Vec<u8> {
    let mut out = text.as_bytes().to_vec();

    // Fenced blocks: a line opening with three or more backticks or tildes
    // up to a line with at least as many of the same character.
    let mut fence: Option<(u8, usize)> = None;
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        let end = start + line.len();
        let trimmed = line.trim_start();
        let marker = trimmed.bytes().next().filter(|&c| c == b'`' || c == b'~');
        let run = marker.map_or(0, |c| trimmed.bytes().take_while(|&b| b == c).count());
        let in_block = match (fence, marker) {
            (None, Some(c)) if run >= 3 => {
                fence = Some((c, run));
                true
            }
            (Some((c, n)), Some(m)) if m == c && run >= n && trimmed[run..].trim().is_empty() => {
                fence = None;
                true
            }
            (Some(_), _) => true,
            (None, _) => false,
        };
        if in_block {
            blank(&mut out[start..end]);
        }
        start = end;
    }

    // Inline code: a run of N backticks up to the next run of exactly N in
    // the same paragraph (a blank line ends the search); an unmatched run is
    // literal text.
    let bytes = out.clone();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            i += 2;
            continue;
        }
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let n = bytes[i..].iter().take_while(|&&b| b == b'`').count();
        let mut j = i + n;
        let mut close = None;
        while j < bytes.len() {
            if bytes[j] == b'\n'
                && bytes[j + 1..]
                    .iter()
                    .take_while(|&&b| b != b'\n')
                    .all(|b| b.is_ascii_whitespace())
            {
                break;
            }
            if bytes[j] == b'`' {
                let m = bytes[j..].iter().take_while(|&&b| b == b'`').count();
                if m == n {
                    close = Some(j + m);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                blank(&mut out[i..end]);
                i = end;
            }
            None => i += n,
        }
    }
    out
}

/// Spaces over everything but newlines.
fn blank(bytes: &mut [u8]) {
    for b in bytes.iter_mut().filter(|b| **b != b'\n') {
        *b = b' ';
    }
}

/// Every inline link or image destination of a Markdown text, with the
/// byte where its `[` is: `[text](dest)`, `![alt](dest "title")`,
/// `[text](<dest with spaces>)`; links inside code are not links.
fn links(markdown: &str) -> Vec<(usize, String)> {
    let bytes = without_code(markdown);
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => {
                i += 2;
                continue;
            }
            b'[' => {}
            _ => {
                i += 1;
                continue;
            }
        }
        // The matching `]`, brackets nested, within one paragraph.
        let mut depth = 0usize;
        let mut j = i;
        let mut close = None;
        while j < bytes.len() {
            match bytes[j] {
                b'\\' => j += 1,
                b'[' => depth += 1,
                b']' => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(j);
                        break;
                    }
                }
                b'\n' if bytes.get(j + 1) == Some(&b'\n') => break,
                _ => {}
            }
            j += 1;
        }
        if let Some(close) = close
            && bytes.get(close + 1) == Some(&b'(')
            && let Some(dest) = destination(&bytes[close + 2..])
        {
            found.push((i, dest));
        }
        // Links nested in the text (`[![alt](img)](page)`) are found too.
        i += 1;
    }
    found
}

/// The destination at the start of `rest` (just after the `(`).
fn destination(rest: &[u8]) -> Option<String> {
    let start = rest
        .iter()
        .position(|b| *b != b' ' && *b != b'\t' && *b != b'\n')?;
    let rest = &rest[start..];
    let dest = if rest.first() == Some(&b'<') {
        let end = rest.iter().position(|b| *b == b'>' || *b == b'\n')?;
        &rest[1..end]
    } else {
        // Up to whitespace or the `)` that balances the opening one.
        let mut depth = 0usize;
        let mut end = rest.len();
        let mut k = 0;
        while k < rest.len() {
            match rest[k] {
                b'\\' => k += 1,
                b'(' => depth += 1,
                b')' if depth == 0 => {
                    end = k;
                    break;
                }
                b')' => depth -= 1,
                b if b.is_ascii_whitespace() => {
                    end = k;
                    break;
                }
                _ => {}
            }
            k += 1;
        }
        &rest[..end.min(rest.len())]
    };
    Some(String::from_utf8_lossy(dest).into_owned())
}

/// Whether a destination names a file of the repository: not a URL with a
/// scheme (`https:`, `mailto:`, ...) and not a pure `#anchor`.
fn is_relative(dest: &str) -> bool {
    let scheme = dest.split_once(':').is_some_and(|(s, _)| {
        s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
    });
    !dest.is_empty() && !dest.starts_with('#') && !dest.starts_with("//") && !scheme
}

/// `%20` and the like, decoded.
fn percent_decoded(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `path` with `.` and `..` resolved by name, so a link cannot pass by
/// leaving the repository through `..` and finding a file outside.
fn normalized(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// What is wrong with a relative link of `file`, if anything.
fn broken(root: &Path, file: &Path, dest: &str) -> Option<&'static str> {
    let path = dest.split(['#', '?']).next().unwrap_or_default();
    if path.is_empty() {
        return None; // `?query` or `#fragment` of the file itself
    }
    let path = percent_decoded(path);
    let target = match path.strip_prefix('/') {
        // Rooted at the repository, as GitHub reads it.
        Some(from_root) => root.join(from_root),
        None => file.parent().unwrap_or(root).join(&path),
    };
    let target = normalized(&target);
    if !target.starts_with(root) {
        Some("leaves the repository")
    } else if !target.exists() {
        Some("does not exist")
    } else {
        None
    }
}

#[test]
fn relative_markdown_links_resolve_inside_the_repository() {
    let root = root();
    let mut checked = 0;
    let mut bad = Vec::new();
    for file in files(&root) {
        if file.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let Some(markdown) = text(&file) else {
            bad.push(format!("{}: not UTF-8", shown(&root, &file)));
            continue;
        };
        for (at, dest) in links(&markdown) {
            if !is_relative(&dest) {
                continue;
            }
            checked += 1;
            if let Some(why) = broken(&root, &file, &dest) {
                let line = line_of(&markdown, at);
                bad.push(format!("{}:{line}: ({dest}) {why}", shown(&root, &file)));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} broken relative link(s):\n{}",
        bad.len(),
        bad.join("\n")
    );
    assert!(
        checked > 0,
        "no relative Markdown link found under {}",
        root.display()
    );
}

#[test]
fn no_file_cites_the_folder_outside_the_project() {
    let root = root();
    let needle = needle();
    let mut bad = Vec::new();
    for file in files(&root) {
        let Some(text) = text(&file) else { continue };
        for (n, line) in text.lines().enumerate() {
            if line.contains(&needle) {
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
        "{} line(s) cite `{needle}` (the contract is docs/spec/ in this repository):\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// The link reader itself, on the cases that matter.
#[test]
fn the_link_reader_sees_links_and_not_code() {
    let markdown = "\
[a](a.md) and ![b](img/b.png \"title\") and [c](<c d.md>)\n\
`[not](code.md)` and ``[nor](this.md)``\n\
```text\n\
[fenced](not-a-link.md)\n\
```\n\
[![badge](badge.svg)](page.md#part) [web](https://example.invalid) [here](#top)\n\
[wrapped\n\
text](wrapped.md) \\[escaped](no.md) [paren](a_(b).md)\n";
    let found: Vec<String> = links(markdown).into_iter().map(|(_, d)| d).collect();
    assert_eq!(
        found,
        [
            "a.md",
            "img/b.png",
            "c d.md",
            "page.md#part",
            "badge.svg",
            "https://example.invalid",
            "#top",
            "wrapped.md",
            "a_(b).md",
        ]
    );
    let relative: Vec<&String> = found.iter().filter(|d| is_relative(d)).collect();
    assert_eq!(relative.len(), 7, "{relative:?}");
    assert!(!is_relative("mailto:someone@example.invalid"));
    assert_eq!(line_of(markdown, markdown.find("[wrapped").unwrap_or(0)), 7);

    let root = root();
    let readme = root.join("README.md");
    assert_eq!(
        broken(&root, &readme, "docs/spec/trace-format.md#rulings"),
        None
    );
    assert_eq!(broken(&root, &readme, "docs/spec/"), None);
    assert_eq!(
        broken(&root, &readme, "docs/spec/nope.md"),
        Some("does not exist")
    );
    assert_eq!(
        broken(&root, &readme, "../README.md"),
        Some("leaves the repository")
    );
}
