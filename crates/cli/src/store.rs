//! `--store URL`, and `loopguard tasks` / `loopguard log`: what a store
//! keeps, read back.

use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::Arc;

use anyhow::Context;
use loopguard_host::{CycleEpisode, Store, TaskSnapshot};
use serde_json::json;

use crate::Outcome;
use crate::cli::{ListFormat, LogArgs, TasksArgs};

/// The store `--store URL` names, migrated and ready. A store that cannot
/// be opened stops the command before any work.
pub(crate) async fn open(url: &str) -> anyhow::Result<Arc<dyn Store>> {
    loopguard_store_sqlx::open_store(url)
        .await
        .context("cannot open the store")
}

/// Runs `loopguard tasks`: every task the store keeps, ordered by id.
pub(crate) async fn tasks(args: &TasksArgs) -> anyhow::Result<Outcome> {
    let store = open(&args.store).await?;
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
            let width = tasks
                .iter()
                .map(|task| task.task.len())
                .max()
                .unwrap_or(0)
                .max(4);
            writeln!(
                out,
                "{:<width$}  {:<13}  {:>5}  {:>6}  {:>8}  LAST SEEN",
                "TASK", "STATUS", "LOOPS", "PIVOTS", "EPISODES"
            )?;
            for task in &tasks {
                writeln!(
                    out,
                    "{:<width$}  {:<13}  {:>5}  {:>6}  {:>8}  {}",
                    task.task,
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

/// Runs `loopguard log`: the cycle log, oldest first.
pub(crate) async fn log(args: &LogArgs) -> anyhow::Result<Outcome> {
    let store = open(&args.store).await?;
    let episodes = store
        .episodes(args.task.as_deref())
        .await
        .context("cannot read the cycle log")?;
    let mut out = io::stdout().lock();
    match args.format {
        ListFormat::Json => {
            serde_json::to_writer_pretty(&mut out, &json!({ "episodes": episodes }))?;
            writeln!(out)?;
        }
        ListFormat::Text => {
            for episode in &episodes {
                writeln!(out, "{}", episode_line(episode))?;
            }
            if episodes.is_empty() {
                writeln!(out, "(no episodes)")?;
            }
        }
    }
    out.flush()?;
    Ok(Outcome::Clean)
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
        episode.task,
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
