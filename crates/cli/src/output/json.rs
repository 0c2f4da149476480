//! `--format json`: one report for the whole trace.

use std::io::{self, Write};

use loopguard_host::ReplayItem;

use super::{Collect, Output};
use crate::summary::Summary;

/// Writes nothing per line and the pretty-printed `Report` at the end.
#[derive(Debug)]
pub(crate) struct Json<W> {
    out: W,
    report: Collect,
    notes: Vec<String>,
}

impl<W: Write> Json<W> {
    /// A report writer.
    pub(crate) fn new(out: W) -> Json<W> {
        Json {
            out,
            report: Collect::default(),
            notes: Vec::new(),
        }
    }

    /// A report writer whose report carries `notes`.
    pub(crate) fn with_notes(mut self, notes: Vec<String>) -> Json<W> {
        self.notes = notes;
        self
    }
}

impl<W: Write> Output for Json<W> {
    fn item(&mut self, item: ReplayItem<'_>) -> io::Result<()> {
        self.report.item(item)
    }

    fn finish(&mut self, _summary: &Summary) -> io::Result<()> {
        let mut report = std::mem::take(&mut self.report).0.finish();
        report.notes = std::mem::take(&mut self.notes);
        serde_json::to_writer_pretty(&mut self.out, &report)?;
        writeln!(self.out)?;
        self.out.flush()
    }
}
