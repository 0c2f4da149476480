//! Evidence: the input lines (and orchestrator ids) that show a loop.
//!
//! One event is often remembered by several detectors at once (a handoff
//! sits in its pair's window, its topic's window and the windows of the
//! cycles it is on), so what is remembered is one shared record per event:
//! a reference costs a pointer, and an event's `id` is stored once however
//! many detectors keep it. [`crate::ObservedEvent::evidence_ref`] makes the
//! record on first use and hands every detector the same one.

use std::fmt;
use std::sync::Arc;

use loopguard_core_types::Timestamp;

/// `Record::at_ms` of an event without a time. No RFC 3339 time (years
/// 0000–9999) maps to it, so it cannot be confused with a real one.
pub(crate) const NO_TIME: i64 = i64::MIN;

/// One event a detector remembers as evidence: its line, its time, and its
/// `id` if it had one. Cloning shares the record.
#[derive(Clone)]
pub struct EvidenceRef(Arc<Record>);

/// What an [`EvidenceRef`] points to. The time is bare milliseconds with a
/// sentinel (not `Option<Timestamp>`) to keep the record small.
#[derive(Debug)]
struct Record {
    line: u64,
    at_ms: i64,
    id: Option<Box<str>>,
}

impl EvidenceRef {
    /// Evidence for the event at `line` with the given id, without a time.
    pub fn new(line: u64, id: Option<&str>) -> EvidenceRef {
        EvidenceRef::timed(line, None, id)
    }

    /// Evidence for the event at `line`, at `time`, with the given id.
    pub fn timed(line: u64, time: Option<Timestamp>, id: Option<&str>) -> EvidenceRef {
        EvidenceRef(Arc::new(Record {
            line,
            at_ms: time.map_or(NO_TIME, Timestamp::as_millis),
            id: id.map(Box::from),
        }))
    }

    /// The 1-based input line.
    pub fn line(&self) -> u64 {
        self.0.line
    }

    /// The event's `id`, if any.
    pub fn id(&self) -> Option<&str> {
        self.0.id.as_deref()
    }

    /// The event's time in milliseconds, or [`NO_TIME`].
    pub(crate) fn at_ms(&self) -> i64 {
        self.0.at_ms
    }
}

impl PartialEq for EvidenceRef {
    fn eq(&self, other: &EvidenceRef) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
            || (self.0.line == other.0.line
                && self.0.at_ms == other.0.at_ms
                && self.0.id == other.0.id)
    }
}

impl Eq for EvidenceRef {}

/// Stored as `[line, at_ms, id]`: what a task's persisted state holds for
/// each remembered event. A record shared by several detectors is written
/// once per detector and read back as separate (equal) records.
impl serde::Serialize for EvidenceRef {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (self.0.line, self.0.at_ms, self.0.id.as_deref()).serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for EvidenceRef {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (line, at_ms, id) = <(u64, i64, Option<Box<str>>)>::deserialize(deserializer)?;
        Ok(EvidenceRef(Arc::new(Record { line, at_ms, id })))
    }
}

impl fmt::Debug for EvidenceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Anything remembered as evidence of an event: its input line and, if it
/// had one, its `id`. [`EvidenceRef`] is one; a detector outside this crate
/// with its own saved form of an event implements it to share
/// [`evidence_of`].
pub trait Evidence {
    /// The 1-based input line.
    fn line(&self) -> u64;
    /// The event's `id`, if any.
    fn id(&self) -> Option<&str>;
}

impl Evidence for EvidenceRef {
    fn line(&self) -> u64 {
        EvidenceRef::line(self)
    }

    fn id(&self) -> Option<&str> {
        EvidenceRef::id(self)
    }
}

/// Lines and ids of `refs`, in order, for [`loopguard_core_types::Detection`]'s
/// `evidence` and `evidence_ids`.
pub fn evidence_of<'a, E: Evidence + 'a>(
    refs: impl IntoIterator<Item = &'a E>,
) -> (Vec<u64>, Vec<String>) {
    let mut lines = Vec::new();
    let mut ids = Vec::new();
    for reference in refs {
        lines.push(reference.line());
        if let Some(id) = reference.id() {
            ids.push(id.to_owned());
        }
    }
    (lines, ids)
}

/// Lists numbers the way reasons read them: "2", "2 and 4", "2, 4 and 7".
pub fn join_with_and(numbers: &[u64]) -> String {
    use std::fmt::Write as _;
    let mut text = String::new();
    for (index, number) in numbers.iter().enumerate() {
        if index > 0 {
            text.push_str(if index + 1 == numbers.len() {
                " and "
            } else {
                ", "
            });
        }
        // Writing to a String cannot fail.
        let _ = write!(text, "{number}");
    }
    text
}

#[cfg(test)]
mod tests {
    use loopguard_core_types::Event;

    use super::*;

    #[test]
    fn a_reference_is_one_pointer_and_clones_share_the_record() {
        assert_eq!(size_of::<EvidenceRef>(), size_of::<usize>());
        let event = Event::from_json(
            r#"{"type":"completed","task":"T","id":"e-1","ts":"2026-11-22T10:00:00Z"}"#,
        )
        .expect("valid");
        let observed = crate::ObservedEvent::new(7, &event);
        let (a, b) = (observed.evidence_ref(), observed.evidence_ref());
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert_eq!((a.line(), a.id()), (7, Some("e-1")));
        assert_eq!(a.at_ms(), event.ts.map_or(0, Timestamp::as_millis));
        assert_eq!(EvidenceRef::new(3, None).at_ms(), NO_TIME);
        assert_eq!(
            evidence_of([&a, &EvidenceRef::new(9, None)]),
            (vec![7, 9], vec!["e-1".to_owned()])
        );
    }
}
