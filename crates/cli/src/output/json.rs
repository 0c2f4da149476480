//! `--format json`: one report for the whole trace.

use std::io::{self, Write};

use loopguard_core_types::Report;
use loopguard_host::ReplayItem;

use super::Output;

/// Writes nothing per line and the pretty-printed `Report` at the end.
#[derive(Debug)]
pub(crate) struct Json<W> {
    out: W,
}

impl<W: Write> Json<W> {
    /// A report writer.
    pub(crate) fn new(out: W) -> Json<W> {
        Json { out }
    }
}

impl<W: Write> Output for Json<W> {
    fn item(&mut self, _item: ReplayItem<'_>) -> io::Result<()> {
        Ok(())
    }

    fn finish(&mut self, report: &Report) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut self.out, report)?;
        writeln!(self.out)?;
        self.out.flush()
    }
}
