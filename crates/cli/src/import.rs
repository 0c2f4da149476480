//! `loopguard import` and `replay --from`: other frameworks' logs as
//! loopguard traces (the importers are `loopguard-import`'s).

use std::fs;
use std::io::{self, BufRead, Cursor, Write};
use std::path::Path;

use anyhow::{Context, anyhow};
use loopguard_import::{Format, Imported, import};

use crate::cli::ImportArgs;
use crate::outcome::Outcome;

/// The format called `name`, or an error listing the known ones.
fn format_named(name: &str) -> anyhow::Result<Format> {
    Format::named(name).ok_or_else(|| {
        let known: Vec<&str> = Format::ALL.iter().map(|(name, _)| *name).collect();
        anyhow!(
            "--from {name}: unknown log format (known: {})",
            known.join(", ")
        )
    })
}

/// Imports the log at `path`: its task id defaults to the file's stem.
fn import_file(format: Format, path: &Path) -> anyhow::Result<Imported> {
    let text = fs::read_to_string(path)
        .with_context(|| format!("cannot read the log {}", path.display()))?;
    let stem = path
        .file_stem()
        .and_then(|stem| stem.to_str())
        .unwrap_or("log");
    let imported =
        import(format, stem, &text).with_context(|| format!("cannot import {}", path.display()))?;
    for dropped in &imported.dropped {
        eprintln!(
            "loopguard: {}: dropped {}: {} ({})",
            path.display(),
            dropped.what,
            dropped.count,
            dropped.why
        );
    }
    Ok(imported)
}

/// Runs `loopguard import`.
pub(crate) fn run(args: &ImportArgs) -> anyhow::Result<Outcome> {
    let format = format_named(&args.from)?;
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let mut failed = false;
    for path in &args.inputs {
        match import_file(format, path) {
            Ok(imported) => {
                for event in &imported.events {
                    writeln!(out, "{}", event.to_json())?;
                }
            }
            Err(err) => {
                // One message, then the other logs.
                eprintln!("loopguard: {err:#}");
                failed = true;
            }
        }
    }
    out.flush()?;
    Ok(if failed {
        Outcome::LineErrors
    } else {
        Outcome::Clean
    })
}

/// `replay --from FORMAT FILE`: the log imported, as a trace to read.
pub(crate) fn open_imported(
    format: &str,
    path: &Path,
) -> anyhow::Result<(Box<dyn BufRead>, String)> {
    let format = format_named(format)?;
    let imported = import_file(format, path)?;
    let mut trace = Vec::new();
    for event in &imported.events {
        writeln!(trace, "{}", event.to_json())?;
    }
    Ok((Box::new(Cursor::new(trace)), path.display().to_string()))
}
