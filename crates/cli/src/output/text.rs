//! `--format text`: for people reading a terminal.
//!
//! One line per detection as it happens, a pivot's directive indented under
//! it, bad lines on stderr, then a summary per task and a totals line.
//! Colors are written with `anstyle`; the `anstream` writers the caller
//! passes in strip them when the stream is not a terminal.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Display;
use std::io::{self, Write};

use anstyle::{AnsiColor, Style};
use loopguard_core_types::{Action, Decision, Detection, Severity, Spend, TaskStatus, usd};
use loopguard_host::ReplayItem;

use super::Output;
use crate::summary::Summary;

const DIM: Style = Style::new().dimmed();
const BOLD: Style = Style::new().bold();
/// Where the lines under a detection (directive, agent to skip) start.
const INDENT: &str = "           ";
/// Width the directive is wrapped to, indent included.
const WIDTH: usize = 100;

/// Longest task id shown whole in text output, in characters; a longer one
/// is cut (see [`shown_id`]).
const SHOWN_ID_CHARS: usize = 64;
/// Characters of a cut id shown before its ellipsis.
const CUT_ID_CHARS: usize = 40;
/// Widest a column of ids is padded to: a cut id and its length fit.
pub(crate) const MAX_ID_COLUMN: usize = SHOWN_ID_CHARS + 24;

/// A task id for people: whole when at most 64 characters, otherwise its
/// first 40, an ellipsis and its length (`tttt… (65536 bytes)`), so that no
/// id, however long, floods a terminal or a table. Machine formats (JSON)
/// keep ids whole.
pub(crate) fn shown_id(id: &str) -> Cow<'_, str> {
    if id.len() <= SHOWN_ID_CHARS || id.chars().nth(SHOWN_ID_CHARS).is_none() {
        return Cow::Borrowed(id);
    }
    let cut: String = id.chars().take(CUT_ID_CHARS).collect();
    Cow::Owned(format!("{cut}… ({} bytes)", id.len()))
}

/// The width of a column of ids of `ids` columns under a header of `header`,
/// at most [`MAX_ID_COLUMN`] (a width
/// from input is never handed to the formatter uncapped).
pub(crate) fn id_column(ids: impl Iterator<Item = usize>, header: usize) -> usize {
    ids.chain([header])
        .max()
        .unwrap_or(header)
        .min(MAX_ID_COLUMN)
}

/// The text format.
#[derive(Debug)]
pub(crate) struct Text<W, E> {
    out: W,
    err: E,
    /// Detection lines written so far.
    detections: usize,
    /// Each task's status after its last decision, to say when it changes.
    statuses: HashMap<String, TaskStatus>,
    /// Header lines, written before the first answer (or the summary).
    notes: Vec<String>,
}

impl<W: Write, E: Write> Text<W, E> {
    /// Detections and the summary to `out`, bad lines to `err`.
    pub(crate) fn new(out: W, err: E) -> Text<W, E> {
        Text {
            out,
            err,
            detections: 0,
            statuses: HashMap::new(),
            notes: Vec::new(),
        }
    }

    /// The same, with `notes` as header lines ("note: ...") before anything
    /// else, e.g. that semantic matching is off.
    pub(crate) fn with_notes(mut self, notes: Vec<String>) -> Text<W, E> {
        self.notes = notes;
        self
    }

    /// Writes the notes once, before the first line of output.
    fn header(&mut self) -> io::Result<()> {
        for note in std::mem::take(&mut self.notes) {
            let label = paint(AnsiColor::Yellow.on_default().bold(), "note:");
            let lines = wrap(&note, WIDTH - "note: ".len());
            for (number, line) in lines.iter().enumerate() {
                if number == 0 {
                    writeln!(self.out, "{label} {line}")?;
                } else {
                    writeln!(self.out, "      {line}")?;
                }
            }
        }
        Ok(())
    }

    fn decision(&mut self, decision: &Decision) -> io::Result<()> {
        // A detector that failed on this event (a plugin's panic): to
        // stderr, like a bad line.
        for error in &decision.errors {
            writeln!(
                self.err,
                "{}: {error}",
                paint(
                    severity_style(Severity::High),
                    format!("line {}", decision.line)
                )
            )?;
        }
        // How the event was read when not as it came (a time that ran
        // backwards): to stderr, a note, not a detection.
        for note in &decision.notes {
            writeln!(
                self.err,
                "{}: note: {note}",
                paint(DIM, format!("line {}", decision.line))
            )?;
        }
        for detection in &decision.detections {
            self.detection(decision, detection)?;
        }
        let before = self
            .statuses
            .insert(decision.task.clone(), decision.status)
            .unwrap_or_default();
        // Say so when a task goes behind the gate or aborts, and when the
        // gate lifts; other changes show in the summary.
        let meaning = if decision.status.precedence() > before.precedence() {
            match decision.status {
                TaskStatus::AbortedStuck => Some("stuck; the task is aborted"),
                TaskStatus::Paused => Some("the pivot budget is spent; waiting for a human"),
                _ => Some("waiting for a human"),
            }
        } else if before.is_gated() && !decision.status.is_gated() {
            Some("the gate is lifted")
        } else {
            None
        };
        if let Some(meaning) = meaning {
            // Under the detections that caused it, or on a line of its own.
            let at = if decision.detections.is_empty() {
                format!(
                    "{}  {}  ",
                    paint(DIM, format!("line {:<4}", decision.line)),
                    shown_id(&decision.task)
                )
            } else {
                INDENT.to_owned()
            };
            let style = status_style(decision.status);
            writeln!(
                self.out,
                "{at}{} {} ({meaning})",
                paint(style, "status:"),
                paint(style, decision.status),
            )?;
        }
        Ok(())
    }

    fn detection(&mut self, decision: &Decision, detection: &Detection) -> io::Result<()> {
        self.detections += 1;
        let evidence = detection
            .evidence
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        writeln!(
            self.out,
            "{}  {}  {}  {}  {}  {} {}",
            paint(DIM, format!("line {:<4}", decision.line)),
            shown_id(&decision.task),
            paint(
                severity_style(detection.severity),
                pad(detection.severity, 8)
            ),
            // `collaboration_loop`, the longest built-in kind, fits.
            paint(BOLD, pad(&detection.kind, 18)),
            paint(action_style(detection.action), pad(detection.action, 14)),
            detection.reason,
            paint(DIM, format!("[evidence: lines {evidence}]")),
        )?;
        let directive = detection.directive.as_ref().or(
            // The decision carries the directive of the pivot it orders.
            decision
                .directive
                .as_ref()
                .filter(|_| detection.action == Action::Pivot),
        );
        if let Some(directive) = directive {
            let label = "directive:";
            let lines = wrap(directive, WIDTH - INDENT.len() - label.len() - 1);
            for (number, line) in lines.iter().enumerate() {
                if number == 0 {
                    let label = paint(action_style(Action::Pivot), label);
                    writeln!(self.out, "{INDENT}{label} {line}")?;
                } else {
                    writeln!(
                        self.out,
                        "{INDENT}{:width$} {line}",
                        "",
                        width = label.len()
                    )?;
                }
            }
        }
        if let Some(agent) = &detection.skip_agent {
            writeln!(
                self.out,
                "{INDENT}{} {agent}",
                paint(action_style(Action::BreakCycle), "skip agent:")
            )?;
        }
        Ok(())
    }

    fn summary(&mut self, summary: &Summary) -> io::Result<()> {
        if self.detections == 0 && !summary.tasks.is_empty() {
            writeln!(self.out, "{}", paint(DIM, "no loops detected"))?;
        }
        if !summary.tasks.is_empty() {
            writeln!(self.out)?;
            self.task_table(summary)?;
        }
        let mut statuses: Vec<(TaskStatus, usize)> = Vec::new();
        for task in &summary.tasks {
            match statuses
                .iter_mut()
                .find(|(status, _)| *status == task.status)
            {
                Some((_, count)) => *count += 1,
                None => statuses.push((task.status, 1)),
            }
        }
        statuses.sort_by_key(|(status, _)| std::cmp::Reverse(status.precedence()));
        let statuses = statuses
            .iter()
            .map(|(status, count)| format!("{count} {status}"))
            .collect::<Vec<_>>()
            .join(", ");
        let tasks = plural(summary.tasks.len(), "task");
        let tasks = if statuses.is_empty() {
            tasks
        } else {
            format!("{tasks} ({statuses})")
        };
        let spent = summary
            .spend()
            .map(|spend| format!(", spent {}", spend_cell(&spend)))
            .unwrap_or_default();
        writeln!(
            self.out,
            "{} {}, {}, {}, {}{spent}",
            paint(BOLD, "Totals:"),
            plural(summary.events, "event"),
            tasks,
            plural(summary.detections, "detection"),
            plural(summary.errors, "line error"),
        )?;
        self.out.flush()?;
        self.err.flush()
    }

    fn task_table(&mut self, summary: &Summary) -> io::Result<()> {
        let task_width = id_column(
            summary
                .tasks
                .iter()
                .map(|task| shown_id(&task.task).chars().count()),
            "task".len(),
        );
        let spend = SpendColumn::new(
            summary.tasks.iter().map(|task| task.usage.as_ref()),
            "spend",
        );
        let spend_header = spend.header();
        writeln!(
            self.out,
            "{}",
            paint(
                BOLD,
                format!(
                    "{:<task_width$}  {:<13}  {:>5}  {:>6}  {spend_header}detections",
                    "task", "status", "loops", "pivots"
                )
            )
        )?;
        for (index, task) in summary.tasks.iter().enumerate() {
            let spend = spend.cell(index);
            let by_kind = if task.by_kind.is_empty() {
                "-".to_owned()
            } else {
                task.by_kind
                    .iter()
                    .map(|(kind, count)| format!("{kind} ×{count}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            writeln!(
                self.out,
                "{}  {}  {:>5}  {:>6}  {spend}{}",
                pad(shown_id(&task.task), task_width),
                paint(status_style(task.status), pad(task.status, 13)),
                task.loop_count,
                task.pivots,
                by_kind,
            )?;
        }
        Ok(())
    }
}

impl<W: Write, E: Write> Output for Text<W, E> {
    fn item(&mut self, item: ReplayItem<'_>) -> io::Result<()> {
        self.header()?;
        match item {
            ReplayItem::Decision(decision) => self.decision(decision),
            ReplayItem::Error(error) => writeln!(
                self.err,
                "{}: {}",
                paint(
                    severity_style(Severity::High),
                    format!("line {}", error.line)
                ),
                error.error
            ),
        }
    }

    fn finish(&mut self, summary: &Summary) -> io::Result<()> {
        self.header()?;
        self.summary(summary)
    }
}

/// Words of `text` in lines of at most `width` columns (a longer word gets
/// a line of its own).
pub(crate) fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// `text` in `style`, reset after it.
fn paint(style: Style, text: impl Display) -> String {
    format!("{style}{text}{style:#}")
}

/// `value` left-aligned in `width` columns (padded before it is painted, so
/// escape codes do not count). Padded by hand, not with `{:<width$}`: the
/// formatter panics on a width of 65,536 or more, and no width from input
/// may reach it.
pub(crate) fn pad(value: impl Display, width: usize) -> String {
    // Through a `String`: the contract types' `Display` ignores width.
    let mut text = value.to_string();
    let columns = text.chars().count();
    if columns < width {
        text.extend(std::iter::repeat_n(' ', width - columns));
    }
    text
}

/// A table's spend column (ruling 18): shown only when some row spent,
/// as wide as its widest cell, `-` for a row that spent nothing.
pub(crate) struct SpendColumn {
    title: &'static str,
    cells: Vec<Option<String>>,
    width: Option<usize>,
}

impl SpendColumn {
    /// The column of `spends`, one per row, headed `title`.
    pub(crate) fn new<'a>(
        spends: impl Iterator<Item = Option<&'a Spend>>,
        title: &'static str,
    ) -> SpendColumn {
        let cells: Vec<Option<String>> = spends.map(|spend| spend.map(spend_cell)).collect();
        let width = cells
            .iter()
            .flatten()
            .map(|cell| cell.chars().count())
            .max()
            .map(|width| width.max(title.len()));
        SpendColumn {
            title,
            cells,
            width,
        }
    }

    /// The header with its two spaces after, or nothing.
    pub(crate) fn header(&self) -> String {
        self.padded(Some(self.title))
    }

    /// Row `index`'s cell with its two spaces after, or nothing.
    pub(crate) fn cell(&self, index: usize) -> String {
        self.padded(self.cells.get(index).and_then(Option::as_deref))
    }

    fn padded(&self, text: Option<&str>) -> String {
        match self.width {
            Some(width) => format!("{}  ", pad(text.unwrap_or("-"), width)),
            None => String::new(),
        }
    }
}

/// A task's spend in one cell: dollars when a cost is known, else tokens,
/// each with the part spent in loops.
pub(crate) fn spend_cell(spend: &Spend) -> String {
    match spend.total.cost_usd {
        Some(cost) => format!(
            "{} ({} in loops)",
            usd(cost),
            usd(spend.in_loops.cost_usd.unwrap_or(0.0))
        ),
        None => format!(
            "{} tokens ({} in loops)",
            spend.total.tokens(),
            spend.in_loops.tokens()
        ),
    }
}

fn plural(count: impl Display, noun: &str) -> String {
    let count = count.to_string();
    if count == "1" {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

fn severity_style(severity: Severity) -> Style {
    match severity {
        Severity::Low => AnsiColor::Cyan.on_default(),
        Severity::Medium => AnsiColor::Yellow.on_default(),
        Severity::High => AnsiColor::Red.on_default(),
        Severity::Critical => AnsiColor::Red.on_default().bold(),
    }
}

fn action_style(action: Action) -> Style {
    match action {
        Action::None => Style::new(),
        Action::Warn | Action::BreakCycle | Action::InjectContext => AnsiColor::Yellow.on_default(),
        Action::Pivot => AnsiColor::Magenta.on_default().bold(),
        Action::Block => AnsiColor::Red.on_default(),
        Action::Escalate | Action::Abort => AnsiColor::Red.on_default().bold(),
    }
}

fn status_style(status: TaskStatus) -> Style {
    match status {
        TaskStatus::Active | TaskStatus::Completed => AnsiColor::Green.on_default(),
        TaskStatus::Escalated | TaskStatus::Paused => AnsiColor::Yellow.on_default().bold(),
        TaskStatus::AbortedStuck => AnsiColor::Red.on_default().bold(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_ids_are_cut_with_their_length_and_padding_never_panics() {
        assert_eq!(shown_id("T-1042"), "T-1042");
        let exact = "é".repeat(SHOWN_ID_CHARS);
        assert_eq!(shown_id(&exact), exact);
        let long = "é".repeat(SHOWN_ID_CHARS + 1);
        assert_eq!(
            shown_id(&long),
            format!("{}… (130 bytes)", "é".repeat(CUT_ID_CHARS))
        );
        let huge = "t".repeat(65_536);
        assert!(shown_id(&huge).ends_with("… (65536 bytes)"));
        assert_eq!(id_column([65_536].into_iter(), 4), MAX_ID_COLUMN);
        // `format!("{:<65536}", ..)` panics; `pad` does not.
        assert_eq!(pad("ab", 65_536).len(), 65_536);
        assert_eq!(pad("abc", 2), "abc");
    }

    #[test]
    fn wrap_keeps_lines_short_and_words_whole() {
        let lines = wrap("one two three four five six", 9);
        assert_eq!(lines, ["one two", "three", "four five", "six"]);
        assert!(wrap("", 10).is_empty());
    }
}
