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
}

impl<W: Write> Json<W> {
    /// A report writer.
    pub(crate) fn new(out: W) -> Json<W> {
        Json {
            out,
            report: Collect::default(),
        }
    }
}

impl<W: Write> Output for Json<W> {
    fn item(&mut self, item: ReplayItem<'_>) -> io::Result<()> {
        self.report.item(item)
    }

    fn finish(&mut self, _summary: &Summary) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut self.out, self.report.0.report())?;
        writeln!(self.out)?;
        self.out.flush()
    }
}
