//! Replaying a recorded trace: JSON Lines in, one decision per event and a
//! report out.

use std::io::BufRead;

use compact_str::CompactString;
use foldhash::HashMap as FastHashMap;
use loopguard_core_types::{Decision, Event, EventError, LineError, Report, TaskReport};

use crate::store::{AuditRecord, Store, StoreError};
use crate::{HostError, LoopGuard};

/// What a replay produces for one non-blank input line.
#[derive(Debug, Clone, Copy)]
pub enum ReplayItem<'a> {
    /// The line was an event; this is its decision.
    Decision(&'a Decision),
    /// The line was not a valid event.
    Error(&'a LineError),
}

/// Builds the JSON report of a trace from its decisions and line errors.
#[derive(Debug, Default)]
pub struct ReportBuilder {
    report: Report,
    index: FastHashMap<CompactString, usize>,
}

impl ReportBuilder {
    /// An empty report.
    pub fn new() -> ReportBuilder {
        ReportBuilder::default()
    }

    /// Adds one event's decision: counts the event, updates its task, keeps
    /// its detections (each with its line) and its detector errors.
    pub fn add_decision(&mut self, decision: &Decision) {
        self.report.events += 1;
        let at = match self.index.get(decision.task.as_str()) {
            Some(&at) => at,
            None => {
                let at = self.report.tasks.len();
                self.index
                    .insert(CompactString::from(decision.task.as_str()), at);
                self.report.tasks.push(TaskReport {
                    usage: None,
                    task: decision.task.clone(),
                    status: decision.status,
                    loop_count: 0,
                    pivots: 0,
                    detections: Vec::new(),
                });
                at
            }
        };
        if let Some(task) = self.report.tasks.get_mut(at) {
            task.status = decision.status;
            task.loop_count = decision.loop_count;
            task.pivots = decision.pivots;
            if decision.usage.is_some() {
                task.usage = decision.usage;
            }
            task.detections
                .extend(decision.detections.iter().map(|detection| {
                    let mut detection = detection.clone();
                    detection.line = Some(decision.line);
                    detection
                }));
        }
        for error in &decision.errors {
            self.report.errors.push(LineError {
                line: decision.line,
                error: error.clone(),
            });
        }
    }

    /// Adds a line that was not a valid event.
    pub fn add_error(&mut self, error: LineError) {
        self.report.errors.push(error);
    }

    /// The report so far.
    pub fn report(&self) -> &Report {
        &self.report
    }

    /// The finished report.
    pub fn finish(self) -> Report {
        self.report
    }
}

/// Replays JSON Lines from `input` through `engine`, calling `sink` for each
/// non-blank line, and returns the report.
///
/// A line that is not valid UTF-8, not JSON, of an unknown type or missing a
/// required field becomes a [`LineError`] with its 1-based line number; the
/// other lines are still processed. Blank lines are skipped. Only a failure
/// to read `input` itself is an error.
///
/// ```
/// use loopguard_config::Config;
/// use loopguard_host::{LoopGuard, replay};
///
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// let trace = "{\"type\":\"transition\",\"task\":\"T\",\"from\":\"a\",\"to\":\"b\"}\n\nnot json\n";
/// let guard = LoopGuard::new(Config::default())?;
/// let report = replay(&guard, trace.as_bytes(), |_| {}).await?;
/// assert_eq!(report.events, 1);
/// assert_eq!(report.errors[0].line, 3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub async fn replay<R, F>(engine: &LoopGuard, input: R, mut sink: F) -> Result<Report, HostError>
where
    R: BufRead,
    F: FnMut(ReplayItem<'_>),
{
    let mut report = ReportBuilder::new();
    replay_each(engine, input, |item| {
        sink(item);
        match item {
            ReplayItem::Decision(decision) => report.add_decision(decision),
            ReplayItem::Error(error) => report.add_error(error.clone()),
        }
    })
    .await?;
    Ok(report.finish())
}

/// Replays JSON Lines from `input` through `engine` like [`replay`], calling
/// `sink` for each non-blank line, but keeps no report: memory stays bounded
/// by the engine's per-task state however long the trace, for callers that
/// stream the answers (the command line's `jsonl` and `text` formats).
/// Returns the number of lines read.
///
/// ```
/// use loopguard_config::Config;
/// use loopguard_host::{LoopGuard, ReplayItem, replay_each};
///
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// let trace = "{\"type\":\"completed\",\"task\":\"T\"}\n\nnot json\n";
/// let guard = LoopGuard::new(Config::default())?;
/// let mut errors = Vec::new();
/// let lines = replay_each(&guard, trace.as_bytes(), |item| {
///     if let ReplayItem::Error(error) = item {
///         errors.push(error.line);
///     }
/// })
/// .await?;
/// assert_eq!((lines, errors), (3, vec![3]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub async fn replay_each<R, F>(engine: &LoopGuard, input: R, sink: F) -> Result<u64, HostError>
where
    R: BufRead,
    F: FnMut(ReplayItem<'_>),
{
    replay_each_from(engine, input, 1, sink).await
}

/// [`replay_each`] for a piece of a longer trace: the first line of `input`
/// is line `first_line` of the trace, so that decisions, evidence and the
/// audit log name the lines of the whole trace (`tail -n +501 trace.jsonl`
/// replays with `first_line` 501). Returns the number of lines read.
pub async fn replay_each_from<R, F>(
    engine: &LoopGuard,
    input: R,
    first_line: u64,
    mut sink: F,
) -> Result<u64, HostError>
where
    R: BufRead,
    F: FnMut(ReplayItem<'_>),
{
    replay_lines(engine, input, first_line, false, |item, _| sink(item)).await
}

/// How the engine took one event of a replay: what
/// [`replay_observed_from`] hands its sink with each decision.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Observed<'a> {
    /// The event's `type` as the trace format names it (an unknown type as
    /// it was written).
    pub event_type: &'a str,
    /// How long the engine took to decide it (the store's write included
    /// when the store commits before answering).
    pub elapsed: std::time::Duration,
}

impl<'a> Observed<'a> {
    /// An event of type `event_type` that took `elapsed`.
    pub fn new(event_type: &'a str, elapsed: std::time::Duration) -> Observed<'a> {
        Observed {
            event_type,
            elapsed,
        }
    }
}

/// [`replay_each_from`] whose sink also learns, for each decision, the
/// event's type and how long the engine took ([`Observed`]; `None` with a
/// line error): what a server counts and times per event.
pub async fn replay_observed_from<R, F>(
    engine: &LoopGuard,
    input: R,
    first_line: u64,
    sink: F,
) -> Result<u64, HostError>
where
    R: BufRead,
    F: FnMut(ReplayItem<'_>, Option<Observed<'_>>),
{
    replay_lines(engine, input, first_line, true, sink).await
}

/// The replay loop; with `observed`, each decision comes with its event's
/// type and time (a plain replay does not pay for the clock).
async fn replay_lines<R, F>(
    engine: &LoopGuard,
    mut input: R,
    first_line: u64,
    observed: bool,
    mut sink: F,
) -> Result<u64, HostError>
where
    R: BufRead,
    F: FnMut(ReplayItem<'_>, Option<Observed<'_>>),
{
    let limits = engine.config().limits.clone();
    let mut buffer = Vec::with_capacity(512);
    let mut line: u64 = first_line.saturating_sub(1);
    let mut lines_read: u64 = 0;
    loop {
        let read = read_line_within(&mut input, &mut buffer, limits.max_line_bytes)?;
        let error = match read {
            LineRead::End => break,
            LineRead::Line => None,
            LineRead::TooLong(len) => Some(
                EventError::LineTooLong {
                    len,
                    limit: limits.max_line_bytes,
                }
                .to_string(),
            ),
        };
        // Saturating: a line number never wraps to 0 (the command line
        // bounds `--first-line` far below the end of the range).
        line = line.saturating_add(1);
        lines_read += 1;
        let mut bytes = &buffer[..];
        if lines_read == 1 {
            // A UTF-8 byte-order mark (some Windows editors write one) is
            // not part of the first event.
            bytes = bytes.strip_prefix(UTF8_BOM).unwrap_or(bytes);
        }
        let text = match (error, std::str::from_utf8(bytes)) {
            (Some(error), _) => Err(error),
            (None, Ok(text)) => Ok(text.trim()),
            (None, Err(err)) => Err(format!("the line is not valid UTF-8 ({err})")),
        };
        let text = match text {
            Ok(text) => text,
            Err(error) => {
                let error = LineError { line, error };
                sink(ReplayItem::Error(&error), None);
                continue;
            }
        };
        if text.is_empty() {
            continue;
        }
        match Event::from_json_within(text, &limits) {
            Ok(event) if observed => {
                let event_type = CompactString::from(event.kind.type_name());
                let started = std::time::Instant::now();
                let decision = engine.observe_line(line, event).await;
                let observed = Observed {
                    event_type: &event_type,
                    elapsed: started.elapsed(),
                };
                sink(ReplayItem::Decision(&decision), Some(observed));
            }
            Ok(event) => {
                let decision = engine.observe_line(line, event).await;
                sink(ReplayItem::Decision(&decision), None);
            }
            Err(err) => {
                let error = LineError {
                    line,
                    error: err.to_string(),
                };
                sink(ReplayItem::Error(&error), None);
            }
        }
    }
    Ok(lines_read)
}

/// The UTF-8 encoding of U+FEFF, the byte-order mark.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// What [`read_line_within`] read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineRead {
    /// The input is at its end: no line.
    End,
    /// A line, in the buffer (with its newline, if it had one).
    Line,
    /// A line longer than the limit, of this many bytes (newline
    /// excluded): read to its end and dropped, the buffer left empty.
    TooLong(u64),
}

/// Reads one line of `input` into `buffer` (cleared first), holding at most
/// `max_bytes` of it (plus the newline): a longer line is consumed to its
/// end without being kept, and reported with its length, so a line of any
/// length costs at most `max_bytes` of memory.
fn read_line_within(
    input: &mut impl BufRead,
    buffer: &mut Vec<u8>,
    max_bytes: usize,
) -> std::io::Result<LineRead> {
    buffer.clear();
    let mut len: u64 = 0;
    let mut too_long = false;
    let mut any = false;
    loop {
        let available = match input.fill_buf() {
            Ok(available) => available,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        if available.is_empty() {
            break;
        }
        any = true;
        let (piece, done) = match available.iter().position(|&byte| byte == b'\n') {
            Some(at) => (&available[..=at], true),
            None => (available, false),
        };
        let taken = piece.len();
        let content = if done { taken - 1 } else { taken };
        len = len.saturating_add(content as u64);
        if !too_long {
            if len > max_bytes as u64 {
                too_long = true;
                buffer.clear();
                buffer.shrink_to(max_bytes.min(64 * 1024));
            } else {
                buffer.extend_from_slice(piece);
            }
        }
        input.consume(taken);
        if done {
            break;
        }
    }
    Ok(match (any, too_long) {
        (false, _) => LineRead::End,
        (true, true) => LineRead::TooLong(len),
        (true, false) => LineRead::Line,
    })
}

/// The report of everything a store keeps: every task (ordered by id) with
/// its status and counts, and its detections from the audit log, oldest
/// first; `events` is the number of events the store committed (a durable
/// store commits once per event). Two replays of a trace's halves on one
/// durable store give the report of one replay of the whole trace.
///
/// With `task`, the report of that task alone, read by its id (its
/// snapshot, record and audit entries), whatever else the store holds.
///
/// A [`Durability::Memory`](crate::Durability::Memory) store keeps no audit
/// log, so its report has tasks and counts only.
pub async fn store_report(store: &dyn Store, task: Option<&str>) -> Result<Report, StoreError> {
    let mut report = Report::default();
    let mut index: FastHashMap<CompactString, usize> = FastHashMap::default();
    // One task's report reads that task alone, not every task's snapshot.
    let snapshots = match task {
        Some(task) => store.load_task(task).await?.into_iter().collect(),
        None => store.tasks().await?,
    };
    for snapshot in snapshots {
        let mut usage = None;
        if let Some(record) = store.load_record(&snapshot.task).await? {
            report.events += record.version;
            usage = record.spend();
        }
        index.insert(
            CompactString::from(snapshot.task.as_str()),
            report.tasks.len(),
        );
        report.tasks.push(TaskReport {
            usage,
            task: snapshot.task,
            status: snapshot.status,
            loop_count: snapshot.loop_count,
            pivots: snapshot.pivots,
            detections: Vec::new(),
        });
    }
    for entry in store.audit(task).await? {
        if let AuditRecord::Detection(detection) = entry.record
            && let Some(&at) = index.get(entry.task.as_str())
            && let Some(task) = report.tasks.get_mut(at)
        {
            task.detections.push(*detection);
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader of `len` bytes of `x` then a newline and `tail`, made as
    /// it is read (never whole in memory), in pieces of 8 KiB.
    struct LongLine {
        left: u64,
        piece: Vec<u8>,
        tail: &'static [u8],
        newline: bool,
    }

    impl std::io::Read for LongLine {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let available = self.fill_buf()?;
            let n = available.len().min(out.len());
            out[..n].copy_from_slice(&available[..n]);
            self.consume(n);
            Ok(n)
        }
    }

    impl BufRead for LongLine {
        fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
            if self.left > 0 {
                let n = self.left.min(self.piece.len() as u64) as usize;
                return Ok(&self.piece[..n]);
            }
            if !self.newline {
                return Ok(b"\n");
            }
            Ok(self.tail)
        }

        fn consume(&mut self, amount: usize) {
            if self.left > 0 {
                self.left -= amount as u64;
            } else if !self.newline {
                self.newline = true;
            } else {
                self.tail = &self.tail[amount..];
            }
        }
    }

    #[test]
    fn a_line_past_the_limit_is_measured_without_being_held() {
        let len: u64 = 300 * 1024 * 1024;
        let mut input = LongLine {
            left: len,
            piece: vec![b'x'; 8192],
            tail: b"{}\n",
            newline: false,
        };
        let mut buffer = Vec::new();
        let limit = 1024 * 1024;
        assert_eq!(
            read_line_within(&mut input, &mut buffer, limit).expect("reads"),
            LineRead::TooLong(len)
        );
        // The buffer never grew past the limit and one piece.
        assert!(buffer.capacity() <= limit + 8192, "{}", buffer.capacity());
        assert_eq!(
            read_line_within(&mut input, &mut buffer, limit).expect("reads"),
            LineRead::Line
        );
        assert_eq!(buffer, b"{}\n");
        assert_eq!(
            read_line_within(&mut input, &mut buffer, limit).expect("reads"),
            LineRead::End
        );
    }

    #[test]
    fn a_line_at_the_limit_is_read_and_one_past_it_is_not() {
        let mut buffer = Vec::new();
        for text in [&b"12345678\n"[..], b"12345678"] {
            let mut input = text;
            let read = read_line_within(&mut input, &mut buffer, 8).expect("reads");
            assert_eq!((read, &buffer[..]), (LineRead::Line, text));
        }
        let mut input = &b"123456789\n{}"[..];
        assert_eq!(
            read_line_within(&mut input, &mut buffer, 8).expect("reads"),
            LineRead::TooLong(9)
        );
        assert!(buffer.is_empty());
        assert_eq!(
            read_line_within(&mut input, &mut buffer, 8).expect("reads"),
            LineRead::Line
        );
        assert_eq!(buffer, b"{}");
    }
}
