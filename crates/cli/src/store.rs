//! `--store URL`, and `loopguard tasks` / `log` / `report`: what a store
//! keeps, read back.

use std::collections::HashMap;
use std::io::{self, Write};

use anyhow::Context;
use loopguard_host::{AuditEntry, AuditRecord, CycleEpisode, PivotRecord, TaskSnapshot};
use serde_json::json;

use crate::cli::{ListFormat, LogArgs, ReportArgs, TasksArgs};
use crate::outcome::Outcome;
use crate::output::{id_column, pad, shown_id};
use crate::setup::open_store;

/// Runs `loopguard tasks`: every task the store keeps, ordered by id.
pub(crate) async fn tasks(args: &TasksArgs) -> anyhow::Result<Outcome> {
    let store = open_store(&args.store).await?;
    let tasks = store.tasks().await.context("cannot list the tasks")?;
    let episodes = store
        .episodes(None)
        .await
        .context("cannot read the cycle log")?;
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for episode in &episodes {
        *counts.entry(episode.task.as_str()).or_default() += 1;
    }
    let count = |task: &TaskSnapshot| counts.get(task.task.as_str()).copied().unwrap_or(0);
    let mut out = io::stdout().lock();
    match args.format {
        ListFormat::Json => {
            let tasks: Vec<_> = tasks
                .iter()
                .map(|task| {
                    json!({
                        "task": task.task,
                        "status": task.status,
                        "loop_count": task.loop_count,
                        "pivots": task.pivots,
                        "last_seen": task.last_seen,
                        "episodes": count(task),
                    })
                })
                .collect();
            serde_json::to_writer_pretty(&mut out, &json!({ "tasks": tasks }))?;
            writeln!(out)?;
        }
        ListFormat::Text => {
            // Ids are cut for people, and the column width capped: a width
            // from input never reaches the formatter.
            let width = id_column(
                tasks
                    .iter()
                    .map(|task| shown_id(&task.task).chars().count()),
                "TASK".len(),
            );
            writeln!(
                out,
                "{}  {:<13}  {:>5}  {:>6}  {:>8}  LAST SEEN",
                pad("TASK", width),
                "STATUS",
                "LOOPS",
                "PIVOTS",
                "EPISODES"
            )?;
            for task in &tasks {
                writeln!(
                    out,
                    "{}  {:<13}  {:>5}  {:>6}  {:>8}  {}",
                    pad(shown_id(&task.task), width),
                    enum_name(json!(task.status)),
                    task.loop_count,
                    task.pivots,
                    count(task),
                    task.last_seen
                )?;
            }
            if tasks.is_empty() {
                writeln!(out, "(no tasks)")?;
            }
        }
    }
    out.flush()?;
    Ok(Outcome::Clean)
}

/// Runs `loopguard log`: the audit trail (or, with `--episodes`, the cycle
/// log), oldest first.
pub(crate) async fn log(args: &LogArgs) -> anyhow::Result<Outcome> {
    let store = open_store(&args.store).await?;
    let task = args.task.as_deref();
    let episodes = store
        .episodes(task)
        .await
        .context("cannot read the cycle log")?;
    let audit = store
        .audit(task)
        .await
        .context("cannot read the audit log")?;
    let pivots = store
        .pivots(task)
        .await
        .context("cannot read the pivot records")?;
    let mut out = io::stdout().lock();
    match args.format {
        ListFormat::Json => {
            let log = if args.episodes {
                json!({ "episodes": episodes })
            } else {
                json!({ "audit": audit, "pivots": pivots, "episodes": episodes })
            };
            serde_json::to_writer_pretty(&mut out, &log)?;
            writeln!(out)?;
        }
        ListFormat::Text if args.episodes => {
            for episode in &episodes {
                writeln!(out, "{}", episode_line(episode))?;
            }
            if episodes.is_empty() {
                writeln!(out, "(no episodes)")?;
            }
        }
        ListFormat::Text => {
            for entry in &audit {
                writeln!(out, "{}", audit_line(entry))?;
                if let AuditRecord::Detection(detection) = &entry.record
                    && detection.action == loopguard_core_types::Action::Pivot
                {
                    for pivot in pivots
                        .iter()
                        .filter(|pivot| pivot.task == entry.task && pivot.line == entry.line)
                    {
                        writeln!(out, "{}", pivot_line(pivot))?;
                    }
                }
            }
            if audit.is_empty() {
                writeln!(
                    out,
                    "(no audit entries{})",
                    if episodes.is_empty() {
                        ""
                    } else {
                        "; this store keeps only the cycle log: see --episodes"
                    }
                )?;
            }
        }
    }
    out.flush()?;
    Ok(Outcome::Clean)
}

/// Runs `loopguard report`: the report of everything the store keeps.
pub(crate) async fn report(args: &ReportArgs) -> anyhow::Result<Outcome> {
    let store = open_store(&args.store).await?;
    let report = loopguard_host::store_report(store.as_ref(), args.task.as_deref())
        .await
        .context("cannot read the store")?;
    let mut out = io::stdout().lock();
    match args.format {
        ListFormat::Json => {
            serde_json::to_writer_pretty(&mut out, &report)?;
            writeln!(out)?;
        }
        ListFormat::Text => {
            writeln!(
                out,
                "{} events, {} tasks",
                report.events,
                report.tasks.len()
            )?;
            for task in &report.tasks {
                writeln!(
                    out,
                    "{}: {}, loop count {}, pivots {}, {} detections",
                    shown_id(&task.task),
                    enum_name(json!(task.status)),
                    task.loop_count,
                    task.pivots,
                    task.detections.len()
                )?;
                for detection in &task.detections {
                    writeln!(
                        out,
                        "  line {} {} {} -> {}: {}",
                        detection.line.unwrap_or_default(),
                        detection.kind,
                        detection.severity,
                        detection.action,
                        detection.reason
                    )?;
                }
            }
        }
    }
    out.flush()?;
    Ok(Outcome::Clean)
}

/// One audit entry for people: `T-1042 line 7 at 2026-11-22T10:00:00Z
/// exact_failure high -> escalate (loop 3): reason` or `T-1042 line 9 at
/// ... reset by human: loop count 3 -> 0, pivots 1 -> 0, was escalated`.
fn audit_line(entry: &AuditEntry) -> String {
    let head = format!(
        "{} line {} at {}",
        shown_id(&entry.task),
        entry.line,
        entry.at
    );
    match &entry.record {
        AuditRecord::Detection(detection) => format!(
            "{head} {} {} -> {}{}: {}",
            detection.kind,
            detection.severity,
            detection.action,
            detection
                .loop_count
                .map(|count| format!(" (loop {count})"))
                .unwrap_or_default(),
            detection.reason
        ),
        AuditRecord::Reset {
            reason,
            previous_loop_count,
            previous_pivots,
            previous_status,
        } => format!(
            "{head} reset by {}: loop count {previous_loop_count} -> 0, pivots {previous_pivots} -> 0, was {}",
            enum_name(json!(reason)),
            enum_name(json!(previous_status))
        ),
        other => format!("{head} {}", other.entry()),
    }
}

/// One pivot record for people, under the detection that issued it.
fn pivot_line(pivot: &PivotRecord) -> String {
    format!(
        "  pivot #{} issued{}",
        pivot.number,
        pivot
            .directive
            .as_deref()
            .map(|directive| format!(": {directive}"))
            .unwrap_or_default()
    )
}

/// One episode for people: `#3 T-1042 2026-11-22T10:00:00Z exact_failure
/// -> escalate (escalated) lines 1,3,5,7; resolved human at ...`.
fn episode_line(episode: &CycleEpisode) -> String {
    let lines: Vec<String> = episode.lines.iter().map(u64::to_string).collect();
    let resolution = match (&episode.resolution, episode.resolved_at) {
        (Some(resolution), Some(at)) => {
            format!("resolved {} at {at}", enum_name(json!(resolution)))
        }
        (Some(resolution), None) => format!("resolved {}", enum_name(json!(resolution))),
        _ => "open".to_owned(),
    };
    format!(
        "#{} {} {} {} -> {}{} lines {}; {}",
        episode.id,
        shown_id(&episode.task),
        episode.opened_at,
        episode.patterns.join(","),
        enum_name(json!(episode.intervention)),
        if episode.escalated {
            " (escalated)"
        } else {
            ""
        },
        lines.join(","),
        resolution
    )
}

/// A unit enum by its trace-format name (`inject_context`, `human`).
fn enum_name(value: serde_json::Value) -> String {
    match value {
        serde_json::Value::String(name) => name,
        other => other.to_string(),
    }
}
