//! Importers: other frameworks' logs turned into loopguard's trace format
//! (`docs/spec/trace-format.md`), so that a recorded run replays without a
//! converter of one's own.
//!
//! An importer adds no rules (ruling 16): it says what became what, and
//! drops what is not work (an orchestrator's own bookkeeping, runner
//! noise). A converted trace replays exactly like a hand-written one.
//! `docs/importers.md` has each format's mapping table.
//!
//! ```
//! use loopguard_import::{Format, import};
//!
//! let log = r#"{"history": [
//!   {"role": "Orchestrator (-> WebSurfer)", "content": "Open the pricing page"},
//!   {"role": "WebSurfer", "content": "The pricing page lists three plans."}
//! ]}"#;
//! let imported = import(Format::MagenticOne, "run-1", log).expect("a log");
//! assert_eq!(imported.events.len(), 2);
//! assert_eq!(imported.events[0].task, "run-1");
//! ```

use loopguard_core_types::Event;

mod magentic_one;

/// A log format loopguard imports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Magentic-One / AutoGen AgentChat logs: a JSON object whose `history`
    /// is a list of `{"role", "content"}` messages.
    MagenticOne,
}

impl Format {
    /// Every format, by the name the command line takes.
    pub const ALL: [(&'static str, Format); 1] = [("magentic-one", Format::MagenticOne)];

    /// The format called `name` on the command line.
    pub fn named(name: &str) -> Option<Format> {
        Format::ALL
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, format)| *format)
    }
}

/// What an import gave: the events, in order, and what was dropped.
#[derive(Debug, Clone, Default)]
pub struct Imported {
    /// The trace's events, in the log's order.
    pub events: Vec<Event>,
    /// What was left out and why, one entry per kind of thing with a count
    /// ("3 messages of role 'Orchestrator (thought)': the orchestrator's
    /// own ledger, not work").
    pub dropped: Vec<Dropped>,
}

/// Things of one kind that an import left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// What they are.
    pub what: String,
    /// Why they are not events.
    pub why: &'static str,
    /// How many.
    pub count: usize,
}

impl Imported {
    fn drop_one(&mut self, what: String, why: &'static str) {
        match self.dropped.iter_mut().find(|d| d.what == what) {
            Some(dropped) => dropped.count += 1,
            None => self.dropped.push(Dropped {
                what,
                why,
                count: 1,
            }),
        }
    }
}

/// Why a log could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The log is not JSON (or is cut short).
    #[error("{name}: not a JSON {format} log: {error}")]
    Json {
        /// The log's name (its file).
        name: String,
        /// The format asked for.
        format: &'static str,
        /// The parser's error, with its line and column.
        error: serde_json::Error,
    },
    /// The log lacks what the format must have.
    #[error("{name}: {problem}")]
    Shape {
        /// The log's name.
        name: String,
        /// What is missing or wrong, and where.
        problem: String,
    },
}

/// Imports the log `text` (called `name` in errors; its task id unless the
/// log names one) in `format`.
pub fn import(format: Format, name: &str, text: &str) -> Result<Imported, ImportError> {
    match format {
        Format::MagenticOne => magentic_one::import(name, text),
    }
}
