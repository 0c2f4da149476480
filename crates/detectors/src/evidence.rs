//! Evidence: the input lines (and orchestrator ids) that show a loop.

/// One event a detector remembers as evidence: its line and, if the event
/// carried one, its `id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvidenceRef {
    /// The 1-based input line.
    pub line: u64,
    /// The event's `id`, if any.
    pub id: Option<Box<str>>,
}

impl EvidenceRef {
    /// Evidence for the event at `line` with the given id.
    pub fn new(line: u64, id: Option<&str>) -> EvidenceRef {
        EvidenceRef {
            line,
            id: id.map(Box::from),
        }
    }
}

/// Lines and ids of `refs`, in order, for [`loopguard_core_types::Detection`]'s
/// `evidence` and `evidence_ids`.
pub fn evidence_of<'a>(refs: impl IntoIterator<Item = &'a EvidenceRef>) -> (Vec<u64>, Vec<String>) {
    let mut lines = Vec::new();
    let mut ids = Vec::new();
    for reference in refs {
        lines.push(reference.line);
        if let Some(id) = &reference.id {
            ids.push(id.to_string());
        }
    }
    (lines, ids)
}
