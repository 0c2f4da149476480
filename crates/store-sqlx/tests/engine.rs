//! The engine on the SQL stores: a replay split across two engines (a
//! restart) ends exactly like one whole replay; a pivot commits whole or
//! not at all; two engines on one PostgreSQL task keep its counters exact.

use std::sync::Arc;

use loopguard_config::Config;
use loopguard_core_types::{Action, Event, Timestamp};
use loopguard_host::{AuditEntry, AuditRecord, CycleEpisode, LoopGuard, Store, TaskSnapshot};
use loopguard_store_sqlx::{PostgresStore, SqliteStore, open_store};

use super::postgres::Schema;
use super::{TestResult, failure_e1, postgres_guard};

/// The traces replayed split and whole: every built-in kind, resets, the
/// gate and pivots.
const TRACES: [&str; 13] = [
    "agent_pair.jsonl",
    "agent_pair_window.jsonl",
    "exact_failure.jsonl",
    "edge_limit.jsonl",
    "edge_limit_progress.jsonl",
    "human_gate.jsonl",
    "multi_agent.jsonl",
    "oscillation.jsonl",
    "phase_visits.jsonl",
    "repeated_output.jsonl",
    "topic_cycle.jsonl",
    "transition_limit.jsonl",
    "completed_reset.jsonl",
];

/// The events of a trace in the workspace's `tests/traces/`, with their
/// line numbers.
fn trace_events(name: &str) -> Vec<(u64, Event)> {
    let path = format!("{}/../../tests/traces/{name}", env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(&path).unwrap_or_default();
    let events: Vec<_> = String::from_utf8_lossy(&bytes)
        .lines()
        .enumerate()
        .filter_map(|(index, text)| Some((index as u64 + 1, Event::from_json(text.trim()).ok()?)))
        .collect();
    assert!(events.len() > 3, "{path} has events");
    events
}

/// Replays `events` through a new engine on `store`: each decision as JSON.
async fn replay_on(
    store: Arc<dyn Store>,
    events: &[(u64, Event)],
) -> Result<Vec<serde_json::Value>, Box<dyn std::error::Error>> {
    replay_with(Config::default(), store, events).await
}

/// [`replay_on`] with `config`.
async fn replay_with(
    config: Config,
    store: Arc<dyn Store>,
    events: &[(u64, Event)],
) -> Result<Vec<serde_json::Value>, Box<dyn std::error::Error>> {
    let guard = LoopGuard::builder(config).store(store).build()?;
    let mut decisions = Vec::new();
    for (line, event) in events {
        let decision = guard.observe_line(*line, event.clone()).await;
        assert!(
            decision.errors.is_empty(),
            "line {line}: {:?}",
            decision.errors
        );
        decisions.push(serde_json::to_value(&decision)?);
    }
    Ok(decisions)
}

/// What a store holds at the end, without what differs between runs by
/// design: wall-clock times (events without `ts`) and episode ids (each
/// engine draws its own).
#[derive(Debug, PartialEq)]
struct Kept {
    tasks: Vec<TaskSnapshot>,
    audit: Vec<AuditEntry>,
    pivots: usize,
    episodes: Vec<CycleEpisode>,
}

async fn kept(store: &dyn Store) -> Result<Kept, Box<dyn std::error::Error>> {
    let mut tasks = store.tasks().await?;
    for task in &mut tasks {
        task.last_seen = Timestamp(0);
    }
    let mut audit = store.audit(None).await?;
    for entry in &mut audit {
        entry.at = Timestamp(0);
    }
    let mut episodes = store.episodes(None).await?;
    for episode in &mut episodes {
        episode.id = 0;
        episode.opened_at = Timestamp(0);
        episode.resolved_at = episode.resolved_at.map(|_| Timestamp(0));
    }
    Ok(Kept {
        tasks,
        audit,
        pivots: store.pivots(None).await?.len(),
        episodes,
    })
}

/// One trace, whole on one database and split at `split` on another (the
/// store reopened between the halves, as after a restart): the same
/// decisions and the same final store.
async fn split_equals_whole(
    whole_url: &str,
    split_url: &str,
    events: &[(u64, Event)],
    split: usize,
) -> TestResult {
    let whole_store = open_store(whole_url).await?;
    let whole = replay_on(whole_store.clone(), events).await?;
    let mut halves = replay_on(open_store(split_url).await?, &events[..split]).await?;
    let split_store = open_store(split_url).await?;
    halves.extend(replay_on(split_store.clone(), &events[split..]).await?);
    assert_eq!(halves, whole, "split at {split}");
    assert_eq!(
        kept(split_store.as_ref()).await?,
        kept(whole_store.as_ref()).await?,
        "split at {split}"
    );
    // Something was kept at all: the comparison is not of two empty logs.
    assert!(!kept(whole_store.as_ref()).await?.tasks.is_empty());
    Ok(())
}

/// The split points tried per trace: a third, a half, two thirds.
fn splits(events: &[(u64, Event)]) -> [usize; 3] {
    let len = events.len();
    [len / 3, len / 2, len * 2 / 3]
}

/// The line of the first decision that issued a pivot, replaying on a
/// durable in-memory store.
async fn first_pivot(events: &[(u64, Event)]) -> Result<usize, Box<dyn std::error::Error>> {
    let store: Arc<dyn Store> = Arc::new(loopguard_host::MemoryStore::durable());
    let decisions = replay_on(store, events).await?;
    let at = decisions
        .iter()
        .position(|decision| decision["action"] == "pivot")
        .ok_or("the trace issues a pivot")?;
    Ok(at)
}

mod sqlite {
    use super::*;

    fn url(folder: &tempfile::TempDir, name: &str) -> String {
        format!("sqlite://{}", folder.path().join(name).display())
    }

    #[tokio::test]
    async fn a_trace_replayed_in_two_runs_ends_like_one_run() -> TestResult {
        for name in TRACES {
            let events = trace_events(name);
            for split in splits(&events) {
                let folder = tempfile::tempdir()?;
                split_equals_whole(
                    &url(&folder, "whole.db"),
                    &url(&folder, "split.db"),
                    &events,
                    split,
                )
                .await
                .map_err(|err| format!("{name}: {err}"))?;
            }
        }
        Ok(())
    }

    /// Ruling 18 through a restart at every line: the spend, the spend in
    /// loops and the budget continue exactly, decision by decision, and the
    /// store's report has the spend of one whole replay.
    #[tokio::test]
    async fn spend_and_budgets_continue_exactly_across_a_restart_at_every_line() -> TestResult {
        let config = || {
            Config::from_toml_str(
                "[budget]\nmax_loop_cost_usd = 0.05\n\
                 [pricing.gpt-4o-mini]\ninput_per_mtok = 0.15\noutput_per_mtok = 0.6\n",
            )
        };
        let events = trace_events("spend_budget.jsonl");
        let folder = tempfile::tempdir()?;
        let whole_store = open_store(&url(&folder, "whole.db")).await?;
        let whole = replay_with(config()?, whole_store.clone(), &events).await?;
        let whole_report = loopguard_host::store_report(whole_store.as_ref(), None).await?;
        assert!(
            whole_report.tasks.iter().all(|task| task.usage.is_some()),
            "every task spent"
        );
        for split in 1..events.len() {
            let split_url = url(&folder, &format!("split-{split}.db"));
            let mut halves =
                replay_with(config()?, open_store(&split_url).await?, &events[..split]).await?;
            let split_store = open_store(&split_url).await?;
            halves.extend(replay_with(config()?, split_store.clone(), &events[split..]).await?);
            assert_eq!(halves, whole, "split at {split}");
            let report = loopguard_host::store_report(split_store.as_ref(), None).await?;
            let usage = |report: &loopguard_core_types::Report| {
                report
                    .tasks
                    .iter()
                    .map(|task| task.usage)
                    .collect::<Vec<_>>()
            };
            assert_eq!(usage(&report), usage(&whole_report), "split at {split}");
        }
        Ok(())
    }

    #[tokio::test]
    async fn a_pivot_commits_whole_or_not_at_all() -> TestResult {
        let events = trace_events("repeated_output.jsonl");
        let pivot_at = first_pivot(&events).await?;
        let folder = tempfile::tempdir()?;
        let store = Arc::new(SqliteStore::open(&url(&folder, "pivot.db")).await?);
        let guard = LoopGuard::builder(Config::default())
            .store(store.clone())
            .build()?;
        for (line, event) in &events[..pivot_at] {
            guard.observe_line(*line, event.clone()).await;
        }
        let task = events[pivot_at].1.task.clone();
        let before = store.load_record(&task).await?;
        let audit_before = store.audit(None).await?.len();
        // The first statement of the pivot's commit is its pivot record;
        // fail right after it.
        store.inject_commit_failure(1);
        let (line, event) = &events[pivot_at];
        let decision = guard.observe_line(*line, event.clone()).await;
        assert_eq!(decision.action, Action::Pivot);
        assert!(
            decision
                .errors
                .iter()
                .any(|e| e.contains("injected failure")),
            "{:?}",
            decision.errors
        );
        // Nothing of the pivot is in the database: no record, the old pivot
        // count and entropy state, no audit row.
        assert!(store.pivots(None).await?.is_empty());
        assert_eq!(store.load_record(&task).await?, before);
        assert_eq!(store.audit(None).await?.len(), audit_before);

        // The engine kept it and writes it with the next commit: nothing
        // is lost.
        if let Some((line, event)) = events.get(pivot_at + 1) {
            let next = guard.observe_line(*line, event.clone()).await;
            assert!(next.errors.is_empty(), "{:?}", next.errors);
        } else {
            let next = Event::from_json(&format!(
                r#"{{"type":"transition","task":"{task}","from":"a","to":"b"}}"#
            ))?;
            guard.observe_line(9_999, next).await;
        }
        let pivots = store.pivots(None).await?;
        assert_eq!(pivots.len(), 1, "{pivots:?}");
        assert_eq!((pivots[0].line, pivots[0].number), (*line, 1));
        let record = store.load_record(&task).await?.ok_or("kept")?;
        assert_eq!(record.snapshot.pivots, 1);
        Ok(())
    }

    #[tokio::test]
    async fn a_database_gone_midway_keeps_every_write_for_later_and_says_so() -> TestResult {
        let folder = tempfile::tempdir()?;
        let store = Arc::new(SqliteStore::open(&url(&folder, "gone.db")).await?);
        let guard = LoopGuard::builder(Config::default())
            .store(store.clone())
            .build()?;
        guard.observe(failure_e1()?).await;
        store.close().await;
        for expected_count in 1..=3 {
            let decision = guard.observe(failure_e1()?).await;
            assert_eq!(decision.loop_count, expected_count, "detection goes on");
            assert!(
                decision
                    .errors
                    .iter()
                    .any(|e| e.contains("kept in memory and retried")),
                "{:?}",
                decision.errors
            );
        }
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_events_share_commits_and_keep_each_tasks_order() -> TestResult {
        // Eight tasks, each fed by its own tokio task at once: the writer
        // batches their commits; each task's audit log must still be in its
        // own order and equal to a run of that task alone.
        let folder = tempfile::tempdir()?;
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&url(&folder, "many.db")).await?);
        let guard = Arc::new(
            LoopGuard::builder(Config::default())
                .store(store.clone())
                .build()?,
        );
        let events = |task: usize| -> Vec<(u64, Event)> {
            (0..30u64)
                .filter_map(|n| {
                    let json = if n % 7 == 6 {
                        format!(r#"{{"type":"human","task":"T{task}","note":"ok"}}"#)
                    } else {
                        format!(
                            r#"{{"type":"failure","task":"T{task}","agent":"a","error":"E{}"}}"#,
                            n % 2
                        )
                    };
                    Some((n + 1, Event::from_json(&json).ok()?))
                })
                .collect()
        };
        let mut handles = Vec::new();
        for task in 0..8 {
            let guard = guard.clone();
            let events = events(task);
            handles.push(tokio::spawn(async move {
                for (line, event) in events {
                    let decision = guard.observe_line(line, event).await;
                    assert!(decision.errors.is_empty(), "{:?}", decision.errors);
                }
            }));
        }
        for handle in handles {
            handle.await?;
        }
        for task in 0..8 {
            let alone: Arc<dyn Store> = Arc::new(loopguard_host::MemoryStore::durable());
            replay_on(alone.clone(), &events(task)).await?;
            let name = format!("T{task}");
            let untimed = |mut audit: Vec<AuditEntry>| {
                for entry in &mut audit {
                    entry.at = Timestamp(0);
                }
                audit
            };
            let expected = untimed(alone.audit(Some(&name)).await?);
            assert!(expected.len() > 10, "the run has detections and resets");
            assert_eq!(untimed(store.audit(Some(&name)).await?), expected, "{name}");
        }
        Ok(())
    }
}

mod postgres {
    use super::*;

    #[tokio::test]
    async fn a_trace_replayed_in_two_runs_ends_like_one_run() -> TestResult {
        for name in TRACES {
            let events = trace_events(name);
            let split = events.len() / 2;
            let (Some(whole), Some(halves)) = (
                Schema::create("cont_whole").await?,
                Schema::create("cont_split").await?,
            ) else {
                return Ok(());
            };
            let result = split_equals_whole(&whole.url, &halves.url, &events, split)
                .await
                .map_err(|err| format!("{name}: {err}"));
            whole.drop().await?;
            halves.drop().await?;
            result?;
        }
        Ok(())
    }

    #[tokio::test]
    async fn a_pivot_commits_whole_or_not_at_all() -> TestResult {
        let Some(schema) = Schema::create("pivot").await? else {
            return Ok(());
        };
        let result = async {
            let events = trace_events("repeated_output.jsonl");
            let pivot_at = first_pivot(&events).await?;
            let (store, guard) = postgres_guard::<Box<dyn std::error::Error>>(&schema.url).await?;
            for (line, event) in &events[..pivot_at] {
                guard.observe_line(*line, event.clone()).await;
            }
            let task = events[pivot_at].1.task.clone();
            let before = store.load_record(&task).await?;
            let audit_before = store.audit(None).await?.len();
            store.inject_commit_failure(1);
            let (line, event) = &events[pivot_at];
            let decision = guard.observe_line(*line, event.clone()).await;
            assert_eq!(decision.action, Action::Pivot);
            // The failed commit rolled back whole; the engine tried again
            // at once, from the stored row: the decision is written, not
            // degraded, and the pivot, its count, the state and the audit
            // rows are in the store together, written once.
            assert!(decision.errors.is_empty(), "{:?}", decision.errors);
            assert!(!decision.degraded, "{decision:?}");
            assert_eq!(guard.pending_writes(), 0);
            let pivots = store.pivots(None).await?;
            assert_eq!(pivots.len(), 1);
            assert_eq!((pivots[0].line, pivots[0].number), (*line, 1));
            let record = store.load_record(&task).await?.ok_or("kept")?;
            assert_eq!(record.snapshot.pivots, 1);
            let version = before.map_or(0, |r| r.version);
            assert_eq!(record.version, version + 1);
            assert!(store.audit(None).await?.len() > audit_before);
            // The task's next commit goes on from there: nothing redone.
            let next = Event::from_json(&format!(
                r#"{{"type":"transition","task":"{task}","from":"a","to":"b"}}"#
            ))?;
            let again = guard.observe_line(9_999, next).await;
            assert!(again.errors.is_empty(), "{:?}", again.errors);
            assert_eq!(store.pivots(None).await?.len(), 1);
            let record = store.load_record(&task).await?.ok_or("kept")?;
            assert_eq!(record.version, version + 2);
            Ok::<(), Box<dyn std::error::Error>>(())
        }
        .await;
        schema.drop().await?;
        result
    }

    #[tokio::test]
    async fn a_database_gone_midway_is_reported_on_each_decision_and_detection_goes_on()
    -> TestResult {
        let Some(schema) = Schema::create("gone").await? else {
            return Ok(());
        };
        let result = async {
            let (store, guard) = postgres_guard::<Box<dyn std::error::Error>>(&schema.url).await?;
            let first = guard.observe(failure_e1()?).await;
            assert!(first.errors.is_empty(), "{:?}", first.errors);
            // The pool is closed: every later read and write fails.
            store.close().await;
            for expected_count in 1..=3 {
                let decision = guard.observe(failure_e1()?).await;
                assert_eq!(decision.loop_count, expected_count, "detection goes on");
                assert_eq!(decision.detections.len(), 1);
                assert!(
                    decision
                        .errors
                        .iter()
                        .any(|e| e.starts_with("store: store postgres://")
                            && e.contains("lock task")),
                    "{:?}",
                    decision.errors
                );
            }
            Ok::<(), Box<dyn std::error::Error>>(())
        }
        .await;
        schema.drop().await?;
        result
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_engines_hammering_one_task_keep_its_counters_exact() -> TestResult {
        let Some(schema) = Schema::create("hammer").await? else {
            return Ok(());
        };
        let result = async {
            // Two engines, each with its own pool (as two replicas), four
            // writers each, all sending the same failure of one task.
            const PER_WRITER: usize = 20;
            const WRITERS: usize = 8;
            let engines = [
                Arc::new(
                    LoopGuard::builder(Config::default())
                        .store(Arc::new(PostgresStore::open(&schema.url).await?))
                        .build()?,
                ),
                Arc::new(
                    LoopGuard::builder(Config::default())
                        .store(Arc::new(PostgresStore::open(&schema.url).await?))
                        .build()?,
                ),
            ];
            let mut handles = Vec::new();
            for writer in 0..WRITERS {
                let guard = engines[writer % 2].clone();
                handles.push(tokio::spawn(async move {
                    let mut counts = Vec::new();
                    for _ in 0..PER_WRITER {
                        let event = Event::from_json(
                            r#"{"type":"failure","task":"hammer","agent":"coder","error":"E0308 mismatched types"}"#,
                        )?;
                        let decision = guard.observe(event).await;
                        assert!(decision.errors.is_empty(), "{:?}", decision.errors);
                        counts.push(decision.loop_count);
                    }
                    Ok::<_, Box<dyn std::error::Error + Send + Sync>>(counts)
                }));
            }
            let mut counts = Vec::new();
            for handle in handles {
                counts.extend(handle.await?.map_err(|err| err.to_string())?);
            }
            // Every event saw the one before it: the loop counts are 0, 1,
            // ..., n-1, each exactly once.
            counts.sort_unstable();
            let total = u32::try_from(PER_WRITER * WRITERS)?;
            assert_eq!(counts, (0..total).collect::<Vec<_>>());
            let store = PostgresStore::open(&schema.url).await?;
            let record = store.load_record("hammer").await?.ok_or("kept")?;
            assert_eq!(record.snapshot.loop_count, total - 1);
            assert_eq!(record.version, u64::from(total));
            let detections = store
                .audit(Some("hammer"))
                .await?
                .iter()
                .filter(|entry| matches!(entry.record, AuditRecord::Detection(_)))
                .count();
            assert_eq!(detections, usize::try_from(total - 1)?);
            Ok::<(), Box<dyn std::error::Error>>(())
        }
        .await;
        schema.drop().await?;
        result
    }
}

/// `audit_recent` is the end of `audit`, oldest first, for the whole log
/// and for one task, at limits below, at and above its length.
async fn recent_audit_is_the_end_of_the_log(store: Arc<dyn Store>) -> TestResult {
    for name in ["human_gate.jsonl", "agent_pair.jsonl", "multi_agent.jsonl"] {
        replay_on(Arc::clone(&store), &trace_events(name)).await?;
    }
    let all = store.audit(None).await?;
    assert!(
        all.len() > 6,
        "the traces leave an audit log: {}",
        all.len()
    );
    let task = all[0].task.clone();
    let of_task = store.audit(Some(&task)).await?;
    for limit in [0, 1, 3, of_task.len(), all.len(), all.len() + 5] {
        let recent = store.audit_recent(None, limit).await?;
        assert_eq!(
            recent,
            all[all.len().saturating_sub(limit)..],
            "all, {limit}"
        );
        let recent = store.audit_recent(Some(&task), limit).await?;
        assert_eq!(
            recent,
            of_task[of_task.len().saturating_sub(limit)..],
            "{task}, {limit}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn recent_audit_in_memory_and_sqlite() -> TestResult {
    recent_audit_is_the_end_of_the_log(Arc::new(loopguard_host::MemoryStore::durable())).await?;
    let folder = tempfile::tempdir()?;
    let url = format!("sqlite://{}", folder.path().join("recent.db").display());
    recent_audit_is_the_end_of_the_log(open_store(&url).await?).await
}

#[tokio::test]
async fn recent_audit_in_postgres() -> TestResult {
    let Some(schema) = Schema::create("recent_audit").await? else {
        return Ok(());
    };
    recent_audit_is_the_end_of_the_log(open_store(&schema.url).await?).await
}

/// `detection_summaries` counts each task's detections and keeps its
/// newest, as a walk of the whole audit log finds them, in the order of
/// the tasks' first detections.
async fn detection_summaries_match_the_log(store: Arc<dyn Store>) -> TestResult {
    for name in ["human_gate.jsonl", "agent_pair.jsonl", "multi_agent.jsonl"] {
        replay_on(Arc::clone(&store), &trace_events(name)).await?;
    }
    let log = store.audit(None).await?;
    let detections: Vec<(&str, &loopguard_core_types::Detection)> = log
        .iter()
        .filter_map(|entry| match &entry.record {
            AuditRecord::Detection(detection) => Some((entry.task.as_str(), &**detection)),
            _ => None,
        })
        .collect();
    let mut tasks: Vec<&str> = Vec::new();
    for (task, _) in &detections {
        if !tasks.contains(task) {
            tasks.push(task);
        }
    }
    let summaries = store.detection_summaries().await?;
    let listed: Vec<&str> = summaries
        .iter()
        .map(|summary| summary.task.as_str())
        .collect();
    assert_eq!(listed, tasks);
    assert!(
        summaries.iter().any(|summary| summary.count > 1),
        "some task has more than one detection: {summaries:?}"
    );
    for summary in &summaries {
        let of_task: Vec<_> = detections
            .iter()
            .filter(|(task, _)| *task == summary.task)
            .collect();
        assert_eq!(
            summary.count,
            u64::try_from(of_task.len())?,
            "{}",
            summary.task
        );
        assert_eq!(
            Some(&summary.last),
            of_task.last().map(|(_, detection)| *detection),
            "{}",
            summary.task
        );
    }
    assert_eq!(summaries, loopguard_host::summarize_detections(&log));
    Ok(())
}

#[tokio::test]
async fn detection_summaries_in_memory_and_sqlite() -> TestResult {
    detection_summaries_match_the_log(Arc::new(loopguard_host::MemoryStore::durable())).await?;
    let folder = tempfile::tempdir()?;
    let url = format!("sqlite://{}", folder.path().join("summaries.db").display());
    detection_summaries_match_the_log(open_store(&url).await?).await
}

#[tokio::test]
async fn detection_summaries_in_postgres() -> TestResult {
    let Some(schema) = Schema::create("detection_summaries").await? else {
        return Ok(());
    };
    detection_summaries_match_the_log(open_store(&schema.url).await?).await
}
