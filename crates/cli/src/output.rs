//! Output formats: how decisions and reports are written.
//!
//! A replay hands every non-blank input line to an [`Output`] as it is
//! decided, then the trace's [`Summary`]. Each format is one implementation.

use std::io;

use loopguard_host::{ReplayItem, ReportBuilder};

use crate::summary::Summary;

mod json;
mod jsonl;
mod text;

pub(crate) use json::Json;
pub(crate) use jsonl::Jsonl;
pub(crate) use text::{SpendColumn, Text, id_column, pad, shown_id, spend_cell, wrap};

/// Where a replay's answers go.
pub(crate) trait Output {
    /// One input line's answer: a decision, or why the line is not an event.
    fn item(&mut self, item: ReplayItem<'_>) -> io::Result<()>;

    /// After the last line, with the counts of the whole trace.
    fn finish(&mut self, summary: &Summary) -> io::Result<()>;
}

/// Prints nothing and keeps the whole report: for callers that want it.
#[derive(Debug, Default)]
pub(crate) struct Collect(pub(crate) ReportBuilder);

impl Output for Collect {
    fn item(&mut self, item: ReplayItem<'_>) -> io::Result<()> {
        match item {
            ReplayItem::Decision(decision) => self.0.add_decision(decision),
            ReplayItem::Error(error) => self.0.add_error(error.clone()),
        }
        Ok(())
    }

    fn finish(&mut self, _summary: &Summary) -> io::Result<()> {
        Ok(())
    }
}
