//! Output formats: how decisions and reports are written.
//!
//! A replay hands every non-blank input line to an [`Output`] as it is
//! decided, then the finished report. Each format is one implementation.

use std::io;

use loopguard_core_types::Report;
use loopguard_host::ReplayItem;

mod json;
mod jsonl;
mod text;

pub(crate) use json::Json;
pub(crate) use jsonl::Jsonl;
pub(crate) use text::{Text, wrap};

/// Where a replay's answers go.
pub(crate) trait Output {
    /// One input line's answer: a decision, or why the line is not an event.
    fn item(&mut self, item: ReplayItem<'_>) -> io::Result<()>;

    /// The report of the whole trace, after the last line.
    fn finish(&mut self, report: &Report) -> io::Result<()>;
}

/// Prints nothing: for callers that want only the report.
#[derive(Debug, Default)]
pub(crate) struct Quiet;

impl Output for Quiet {
    fn item(&mut self, _item: ReplayItem<'_>) -> io::Result<()> {
        Ok(())
    }

    fn finish(&mut self, _report: &Report) -> io::Result<()> {
        Ok(())
    }
}
