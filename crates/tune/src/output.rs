//! The files of `--out`: the table as CSV and JSON, and the pictures.

use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{Result, TuneError};
use crate::report::TuneReport;

/// Writes the sweep into `dir` (created if missing): `sweep.csv`,
/// `sweep.json` and, with the `plots` feature, `pr_curve.png`,
/// `pr_curve.svg`, `histogram.png` and `histogram.svg`. Returns the files
/// written, in that order.
pub fn write_outputs(report: &TuneReport, dir: &Path) -> Result<Vec<PathBuf>> {
    fs::create_dir_all(dir).map_err(|e| TuneError::io("cannot create", dir, e))?;
    let mut written = Vec::new();

    let csv = dir.join("sweep.csv");
    write_file(&csv, |out| report.write_csv(out))?;
    written.push(csv);

    let json = dir.join("sweep.json");
    write_file(&json, |out| {
        serde_json::to_writer_pretty(&mut *out, report).map_err(std::io::Error::other)?;
        writeln!(out)
    })?;
    written.push(json);

    #[cfg(feature = "plots")]
    written.extend(crate::plots::write_plots(report, dir)?);
    Ok(written)
}

fn write_file(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let file = fs::File::create(path).map_err(|e| TuneError::io("cannot create", path, e))?;
    let mut out = BufWriter::new(file);
    write(&mut out).map_err(|e| TuneError::io("cannot write", path, e))?;
    out.flush()
        .map_err(|e| TuneError::io("cannot write", path, e))
}
