//! `--format jsonl`: one JSON object per non-blank input line.

use std::io::{self, Write};

use loopguard_host::ReplayItem;

use super::Output;
use crate::summary::Summary;

/// Writes each decision as `Decision` serializes, and each bad line as
/// `{"line":N,"error":"..."}`, one per line, so the output has exactly one
/// object per non-blank input line.
#[derive(Debug)]
pub(crate) struct Jsonl<W> {
    out: W,
    /// When set, every object starts with `"scenario":NAME` (the demo).
    scenario: Option<&'static str>,
}

impl<W: Write> Jsonl<W> {
    /// Plain JSON Lines.
    pub(crate) fn new(out: W) -> Jsonl<W> {
        Jsonl {
            out,
            scenario: None,
        }
    }

    /// JSON Lines whose objects name the demo scenario they belong to.
    pub(crate) fn tagged(out: W, scenario: &'static str) -> Jsonl<W> {
        Jsonl {
            out,
            scenario: Some(scenario),
        }
    }
}

impl<W: Write> Output for Jsonl<W> {
    fn item(&mut self, item: ReplayItem<'_>) -> io::Result<()> {
        let body = match item {
            ReplayItem::Decision(decision) => serde_json::to_string(decision),
            ReplayItem::Error(error) => serde_json::to_string(error),
        }?;
        match self.scenario.zip(body.strip_prefix('{')) {
            Some((scenario, rest)) => {
                let name = serde_json::to_string(scenario)?;
                let comma = if rest.starts_with('}') { "" } else { "," };
                writeln!(self.out, "{{\"scenario\":{name}{comma}{rest}")
            }
            None => writeln!(self.out, "{body}"),
        }
    }

    fn finish(&mut self, _summary: &Summary) -> io::Result<()> {
        self.out.flush()
    }
}
