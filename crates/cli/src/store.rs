//! `--store URL`, and `loopguard tasks` / `log` / `report`: what a store
//! keeps, read back (read-only: never created, migrated or locked).
//!
//! For `replay --store`: the run a replay records on its store (the input
//! line each commit covers, the line errors, `--resume`), and the summary
//! of its store failures at the end.

use std::collections::HashMap;
use std::io::{self, BufRead, Write};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use loopguard_core_types::{LineError, Timestamp};
use loopguard_host::{
    AuditEntry, AuditRecord, CycleEpisode, Durability, KeptOpinion, LoopGuard, PivotRecord,
    ReplayItem, Store, TaskSnapshot,
};
use serde_json::json;

use crate::cli::{ListFormat, LogArgs, OpinionsArgs, ReportArgs, TasksArgs};
use crate::outcome::Outcome;
use crate::output::{Output, SpendColumn, id_column, pad, shown_id, spend_cell};
use crate::summary::Summary;

/// How long the end of a replay waits for the store's writer to write what
/// it still holds (its own retries end sooner).
const SETTLE_WAIT: Duration = Duration::from_secs(30);

/// The store `--store URL` names, for reading only.
async fn open_store(url: &str) -> anyhow::Result<Arc<dyn Store>> {
    loopguard_store_sqlx::open_store_read_only(url)
        .await
        .context("cannot open the store")
}

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
    let spends = spends_of(store.as_ref(), &tasks).await?;
    let mut out = io::stdout().lock();
    match args.format {
        ListFormat::Json => {
            let tasks: Vec<_> = tasks
                .iter()
                .zip(&spends)
                .map(|(task, spend)| {
                    let mut row = json!({
                        "task": task.task,
                        "status": task.status,
                        "loop_count": task.loop_count,
                        "pivots": task.pivots,
                        "last_seen": task.last_seen,
                        "episodes": count(task),
                    });
                    if let (Some(spend), Some(row)) = (spend, row.as_object_mut()) {
                        row.insert("usage".into(), json!(spend));
                    }
                    row
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
            let spend = SpendColumn::new(spends.iter().map(Option::as_ref), "SPEND");
            writeln!(
                out,
                "{}  {:<13}  {:>5}  {:>6}  {:>8}  {}LAST SEEN",
                pad("TASK", width),
                "STATUS",
                "LOOPS",
                "PIVOTS",
                "EPISODES",
                spend.header(),
            )?;
            for (index, task) in tasks.iter().enumerate() {
                writeln!(
                    out,
                    "{}  {:<13}  {:>5}  {:>6}  {:>8}  {}{}",
                    pad(shown_id(&task.task), width),
                    enum_name(json!(task.status)),
                    task.loop_count,
                    task.pivots,
                    count(task),
                    spend.cell(index),
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

/// Each task's spend (ruling 18), from its stored record.
async fn spends_of(
    store: &dyn Store,
    tasks: &[TaskSnapshot],
) -> anyhow::Result<Vec<Option<loopguard_core_types::Spend>>> {
    let mut spends = Vec::with_capacity(tasks.len());
    for task in tasks {
        let record = store
            .load_record(&task.task)
            .await
            .with_context(|| format!("cannot read task {}", task.task))?;
        spends.push(record.and_then(|record| record.spend()));
    }
    Ok(spends)
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

/// Runs `loopguard opinions`: the second opinions a store keeps, oldest
/// first; or, with `--forget-older-than`, forgets the older ones.
pub(crate) async fn opinions(args: &OpinionsArgs) -> anyhow::Result<Outcome> {
    let mut out = io::stdout().lock();
    if let Some(days) = args.forget_older_than {
        const DAY_MILLIS: i64 = 24 * 60 * 60 * 1000;
        let before = Timestamp(
            Timestamp::now()
                .0
                .saturating_sub(i64::from(days).saturating_mul(DAY_MILLIS)),
        );
        // A store that is not there is an error, not a new empty one.
        drop(open_store(&args.store).await?);
        let store = loopguard_store_sqlx::open_store(&args.store)
            .await
            .context("cannot open the store for writing")?;
        let forgotten = store.forget_opinions_before(before).await;
        store.close().await;
        let forgotten = forgotten.context("cannot forget the second opinions")?;
        match args.format {
            ListFormat::Json => {
                serde_json::to_writer_pretty(
                    &mut out,
                    &json!({ "forgotten": forgotten, "before": before }),
                )?;
                writeln!(out)?;
            }
            ListFormat::Text => writeln!(
                out,
                "forgot {forgotten} second opinion{} answered before {before}",
                if forgotten == 1 { "" } else { "s" }
            )?,
        }
        return Ok(Outcome::Clean);
    }
    let store = open_store(&args.store).await?;
    let opinions = store
        .opinions()
        .await
        .context("cannot read the second opinions")?;
    match args.format {
        ListFormat::Json => {
            serde_json::to_writer_pretty(&mut out, &json!({ "opinions": opinions }))?;
            writeln!(out)?;
        }
        ListFormat::Text => {
            for opinion in &opinions {
                writeln!(out, "{}", opinion_line(opinion))?;
            }
            if opinions.is_empty() {
                writeln!(out, "(no second opinions)")?;
            }
        }
    }
    Ok(Outcome::Clean)
}

/// One kept answer on one line: when, the verdict, who, the key's first
/// 12 digits, and the reason (its line breaks as spaces).
fn opinion_line(opinion: &KeptOpinion) -> String {
    let one_line = |text: &str| text.replace(['\n', '\r'], " ");
    format!(
        "{}  {:<9}  {}  key {}  {}",
        opinion.answered_at,
        if opinion.same { "same" } else { "different" },
        one_line(&opinion.by),
        opinion.key.get(..12).unwrap_or(&opinion.key),
        one_line(&opinion.reason)
    )
}

/// Runs `loopguard report`: the report of everything the store keeps.
pub(crate) async fn report(args: &ReportArgs) -> anyhow::Result<Outcome> {
    let store = open_store(&args.store).await?;
    let mut report = loopguard_host::store_report(store.as_ref(), args.task.as_deref())
        .await
        .context("cannot read the store")?;
    let runs = store.runs().await.context("cannot read the runs")?;
    // The furthest input line any run committed (with engines sharing a
    // store, runs overlap in time; in sequence, the last one's).
    let last_committed_line = runs.iter().filter_map(|run| run.last_line).max();
    if args.task.is_none() {
        report.errors = store
            .line_errors()
            .await
            .context("cannot read the line errors")?
            .into_iter()
            .map(|stored| LineError {
                line: stored.line,
                error: stored.error,
            })
            .collect();
    }
    let mut out = io::stdout().lock();
    match args.format {
        ListFormat::Json => {
            let mut value = serde_json::to_value(&report)?;
            if let Some(object) = value.as_object_mut() {
                object.insert("last_committed_line".into(), json!(last_committed_line));
            }
            serde_json::to_writer_pretty(&mut out, &value)?;
            writeln!(out)?;
        }
        ListFormat::Text => {
            writeln!(
                out,
                "{} events, {} tasks",
                report.events,
                report.tasks.len()
            )?;
            if let Some(run) = runs.last() {
                match run.last_line {
                    Some(line) => writeln!(
                        out,
                        "last committed line {line} (run {}, from line {})",
                        run.run, run.first_line
                    )?,
                    None => writeln!(
                        out,
                        "no line committed yet (run {}, from line {})",
                        run.run, run.first_line
                    )?,
                }
            }
            for error in &report.errors {
                writeln!(out, "line {}: {}", error.line, error.error)?;
            }
            for task in &report.tasks {
                let spent = task
                    .usage
                    .map(|spend| format!(", spent {}", spend_cell(&spend)))
                    .unwrap_or_default();
                writeln!(
                    out,
                    "{}: {}, loop count {}, pivots {}, {} detections{spent}",
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

/// The store failures a replay's decisions reported.
#[derive(Debug, Default)]
pub(crate) struct StoreFailures {
    /// Decisions whose writes failed (at first).
    pub(crate) decisions: u64,
    /// The first such error.
    pub(crate) first: Option<String>,
    /// The last input line answered (an event or a line error).
    pub(crate) last_line: u64,
}

/// An [`Output`] that also records, for the store, what a replay answers:
/// each line error is noted for the store's run, and each decision whose
/// writes failed is counted.
pub(crate) struct Recorder<'a> {
    store: &'a dyn Store,
    inner: &'a mut dyn Output,
    failures: &'a mut StoreFailures,
}

impl<'a> Recorder<'a> {
    /// Records for `store` what goes to `inner`, counting in `failures`.
    pub(crate) fn new(
        store: &'a dyn Store,
        inner: &'a mut dyn Output,
        failures: &'a mut StoreFailures,
    ) -> Recorder<'a> {
        Recorder {
            store,
            inner,
            failures,
        }
    }
}

impl Output for Recorder<'_> {
    fn item(&mut self, item: ReplayItem<'_>) -> io::Result<()> {
        match item {
            ReplayItem::Decision(decision) => {
                self.failures.last_line = self.failures.last_line.max(decision.line);
                if let Some(error) = decision
                    .errors
                    .iter()
                    .find(|error| error.starts_with("store:"))
                {
                    self.failures.decisions += 1;
                    if self.failures.first.is_none() {
                        self.failures.first = Some(format!("line {}: {error}", decision.line));
                    }
                }
            }
            ReplayItem::Error(error) => {
                self.failures.last_line = self.failures.last_line.max(error.line);
                self.store.note_line_error(error.line, &error.error);
            }
        }
        self.inner.item(item)
    }

    fn finish(&mut self, summary: &Summary) -> io::Result<()> {
        self.inner.finish(summary)
    }
}

/// Starts the replay's run on `store`: a new run numbered from
/// `first_line`, or with `resume` the store's latest run, continued after
/// its last committed line (those lines of `input` are skipped). Returns
/// the input and the number of its next line.
pub(crate) async fn begin_run<R: BufRead>(
    store: &dyn Store,
    mut input: R,
    first_line: u64,
    resume: bool,
) -> anyhow::Result<(R, u64)> {
    if resume && store.durability() == Durability::Memory {
        bail!(
            "--resume needs a durable store to continue from (--store sqlite://PATH or \
             postgres://...): a memory store keeps nothing between runs"
        );
    }
    let run = store
        .begin_run(first_line, resume)
        .await
        .context(if resume {
            "cannot resume"
        } else {
            "cannot record the run in the store"
        })?;
    let mut next = first_line;
    if resume && let Some(run) = run {
        next = run.last_line.map_or(run.first_line, |line| line + 1);
        let mut scratch = Vec::new();
        for line in run.first_line..next {
            scratch.clear();
            if input.read_until(b'\n', &mut scratch)? == 0 {
                bail!(
                    "cannot resume: the input ends at line {}, but the store's run {} \
                     committed up to line {} (is it the input that run read, from its line {}?)",
                    line.saturating_sub(1),
                    run.run,
                    next - 1,
                    run.first_line
                );
            }
        }
    }
    Ok((input, next))
}

/// Writes the commits a shared store's engine keeps after failures (see
/// `LoopGuard::write_pending`), retrying for up to the settle time while the
/// database is away. Returns how many still wait (`None` for other
/// stores, whose writer keeps its own).
pub(crate) async fn write_pending(engine: &LoopGuard, store: &dyn Store) -> Option<usize> {
    if store.durability() != Durability::Shared {
        return None;
    }
    let deadline = tokio::time::Instant::now() + SETTLE_WAIT;
    loop {
        match engine.write_pending().await {
            Ok(0) => return Some(0),
            Ok(_) | Err(_) if tokio::time::Instant::now() >= deadline => {
                return Some(engine.pending_writes());
            }
            _ => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// Ends the replay's run on `store` once its engine is dropped: waits for
/// the store's writer to write (or give up) what it holds, records the last
/// line when everything decided is committed, and says on stderr how many
/// commits failed, how many a retry wrote, and how many never reached the
/// store. Returns whether any never did.
pub(crate) async fn settle(
    store: &dyn Store,
    failures: &StoreFailures,
    engine_waiting: Option<usize>,
) -> bool {
    let health = match store.health() {
        Some(health) => Some(health.settled(SETTLE_WAIT).await),
        None => None,
    };
    let (failed, recovered, lost, first) = match &health {
        Some(health) if health.started => (
            health.failed,
            health.recovered,
            health.lost + health.backlog,
            health
                .first_error
                .clone()
                .or_else(|| failures.first.clone()),
        ),
        // A shared store: the engine kept the failed commits and wrote what
        // it could; what still waits is lost.
        _ if let Some(waiting) = engine_waiting => {
            let lost = u64::try_from(waiting).unwrap_or(u64::MAX);
            (
                failures.decisions,
                failures.decisions.saturating_sub(lost),
                lost,
                failures.first.clone(),
            )
        }
        // No writer (or no retries): every failed commit is lost.
        _ => (
            failures.decisions,
            0,
            failures.decisions,
            failures.first.clone(),
        ),
    };
    let mut run_error = None;
    if lost == 0
        && failures.last_line > 0
        && let Err(err) = store.finish_run(failures.last_line).await
    {
        run_error = Some(err);
    }
    if failed > 0 {
        let first = first.unwrap_or_default();
        if lost > 0 {
            eprintln!(
                "loopguard: {failed} commit(s) failed and {lost} were not written: the store \
                 misses those events' writes ({recovered} were written later by a retry); \
                 the first error: {first}"
            );
        } else {
            eprintln!(
                "loopguard: {failed} commit(s) failed at first and were all written later by \
                 a retry; the first error: {first}"
            );
        }
    }
    if failed == 0 && failures.decisions > 0 {
        // Store errors that were not commits (reading a task's record).
        eprintln!(
            "loopguard: {} decision(s) reported a store error; the first: {}",
            failures.decisions,
            failures.first.as_deref().unwrap_or_default()
        );
    }
    if let Some(err) = run_error {
        eprintln!("loopguard: cannot record the run's last line in the store: {err}");
    }
    store.close().await;
    lost > 0
}
