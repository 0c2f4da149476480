//! A PostgreSQL outage during a run (issue 18, "nothing lost, nothing
//! silently undone"): connections refused for a while (a TCP proxy of the
//! test's own in front of the server, stopped and restarted), and backends
//! terminated one by one with `pg_terminate_backend`. Either way every
//! decision equals the one of a run without an outage (a task escalated
//! during the outage stays escalated, loop counts exact), and once the
//! database is back the store holds every event, as that run's store does.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use loopguard_config::Config;
use loopguard_core_types::{Event, TaskStatus, Timestamp};
use loopguard_host::{AuditEntry, CycleEpisode, LoopGuard, Store, TaskSnapshot};
use loopguard_store_sqlx::PostgresStore;
use loopguard_test_support::pg_faults::{BackendKiller, Victims, application_name};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use super::postgres::Schema;
use super::{failure_e1, postgres_guard};

pub(super) type AnyError = Box<dyn std::error::Error + Send + Sync>;

/// How long the store may take to hold everything once the database is
/// back (the engine writes what it kept in the background).
const CATCH_UP: Duration = Duration::from_secs(30);

/// A TCP proxy on a loopback port in front of the PostgreSQL server:
/// stopped, it refuses connections and cuts the ones it carried.
pub(super) struct Proxy {
    pub(super) port: u16,
    target: SocketAddr,
    running: Option<JoinHandle<()>>,
}

impl Proxy {
    pub(super) async fn start(target: SocketAddr) -> Result<Proxy, AnyError> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let mut proxy = Proxy {
            port,
            target,
            running: None,
        };
        proxy.serve(listener);
        Ok(proxy)
    }

    fn serve(&mut self, listener: TcpListener) {
        let target = self.target;
        self.running = Some(tokio::spawn(async move {
            // Dropping the set (when this task is aborted) aborts every
            // connection it carries.
            let mut connections = JoinSet::new();
            while let Ok((mut inbound, _)) = listener.accept().await {
                connections.spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        }));
    }

    /// Refuses new connections and cuts the open ones.
    pub(super) async fn stop(&mut self) {
        if let Some(running) = self.running.take() {
            running.abort();
            let _ = running.await;
        }
    }

    /// Listens again on the same port.
    pub(super) async fn restart(&mut self) -> Result<(), AnyError> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match TcpListener::bind(("127.0.0.1", self.port)).await {
                Ok(listener) => {
                    self.serve(listener);
                    return Ok(());
                }
                Err(err) if Instant::now() > deadline => return Err(err.into()),
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }
}

/// The server's address and a schema URL routed through `port` instead.
pub(super) fn through_port(url: &str, port: u16) -> Result<(SocketAddr, String), AnyError> {
    let (scheme, rest) = url.split_once("://").ok_or("a URL")?;
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let (user, host) = match authority.rsplit_once('@') {
        Some((user, host)) => (format!("{user}@"), host),
        None => (String::new(), authority),
    };
    let host = if host.contains(':') {
        host.to_owned()
    } else {
        format!("{host}:5432")
    };
    let target: SocketAddr = host.replace("localhost", "127.0.0.1").parse()?;
    assert!(target.ip().is_loopback(), "the tests use loopback only");
    Ok((target, format!("{scheme}://{user}127.0.0.1:{port}{tail}")))
}

/// The events of a run, with their lines: tasks that loop on one failure
/// (one of them escalates), one reset by `human`, one by `completed`, one
/// ping-ponging between two agents. `phase` numbers keep each task's
/// events in their own order across phases.
pub(super) fn events(phase: u32, per_task: u32) -> Result<Vec<(u64, Event)>, AnyError> {
    let mut events = Vec::new();
    for n in 0..per_task {
        let step = phase * 1000 + n;
        let line = u64::from(step) * 10;
        let human = if n % 4 == 1 {
            r#"{"type":"human","task":"T-human","note":"go on"}"#.to_owned()
        } else {
            r#"{"type":"failure","task":"T-human","agent":"coder","error":"E2"}"#.to_owned()
        };
        let done = if n % 5 == 2 {
            r#"{"type":"completed","task":"T-done"}"#.to_owned()
        } else {
            r#"{"type":"failure","task":"T-done","agent":"coder","error":"E3"}"#.to_owned()
        };
        let (from, to) = if step % 2 == 0 {
            ("planner", "coder")
        } else {
            ("coder", "planner")
        };
        for (offset, json) in [
            r#"{"type":"failure","task":"T-esc","agent":"coder","error":"E1 mismatched types"}"#
                .to_owned(),
            human,
            done,
            format!(r#"{{"type":"handoff","task":"T-pair","from":"{from}","to":"{to}"}}"#),
        ]
        .into_iter()
        .enumerate()
        {
            events.push((line + offset as u64, Event::from_json(&json)?));
        }
    }
    Ok(events)
}

/// A decision as JSON, without what an outage adds to it: its errors, and
/// the `degraded` flag and note of a decision made while the store could
/// not be written (each checked where the test expects them).
async fn decide(guard: &LoopGuard, line: u64, event: Event) -> Result<serde_json::Value, AnyError> {
    let decision = guard.observe_line(line, event).await;
    without_outage(&decision)
}

pub(super) fn without_outage(
    decision: &loopguard_core_types::Decision,
) -> Result<serde_json::Value, AnyError> {
    assert_eq!(
        decision.degraded,
        decision.errors.iter().any(|e| e.starts_with("store:")),
        "degraded exactly when the store could not be written: {decision:?}"
    );
    let mut value = serde_json::to_value(decision)?;
    if let Some(object) = value.as_object_mut() {
        object.remove("errors");
        object.remove("degraded");
        if let Some(notes) = object
            .get_mut("notes")
            .and_then(|notes| notes.as_array_mut())
        {
            notes.retain(|note| !note.as_str().is_some_and(|n| n.starts_with("degraded:")));
            if notes.is_empty() {
                object.remove("notes");
            }
        }
    }
    Ok(value)
}

/// What the store holds of one task, without what differs between runs by
/// design (wall-clock times, episode ids).
#[derive(Debug, PartialEq)]
pub(super) struct TaskKept {
    snapshot: Option<TaskSnapshot>,
    audit: Vec<AuditEntry>,
    pivots: usize,
    episodes: Vec<CycleEpisode>,
}

pub(super) async fn kept(store: &dyn Store, tasks: &[&str]) -> Result<Vec<TaskKept>, AnyError> {
    let mut all = Vec::new();
    for task in tasks {
        let mut snapshot = store.load_task(task).await?;
        if let Some(snapshot) = &mut snapshot {
            snapshot.last_seen = Timestamp(0);
        }
        let mut audit = store.audit(Some(task)).await?;
        for entry in &mut audit {
            entry.at = Timestamp(0);
        }
        let mut episodes = store.episodes(Some(task)).await?;
        for episode in &mut episodes {
            episode.id = 0;
            episode.opened_at = Timestamp(0);
            episode.resolved_at = episode.resolved_at.map(|_| Timestamp(0));
        }
        all.push(TaskKept {
            snapshot,
            audit,
            pivots: store.pivots(Some(task)).await?.len(),
            episodes,
        });
    }
    Ok(all)
}

pub(super) const TASKS: [&str; 4] = ["T-esc", "T-human", "T-done", "T-pair"];

/// Waits until `store` holds what `reference` holds (the engine writes
/// what it kept once the database is back), or the time is up.
async fn catches_up(store: &dyn Store, reference: &[TaskKept]) -> Result<(), AnyError> {
    let deadline = Instant::now() + CATCH_UP;
    loop {
        let now = kept(store, &TASKS).await;
        if let Ok(now) = &now
            && now.as_slice() == reference
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            let now = now?;
            for (got, want) in now.iter().zip(reference) {
                assert_eq!(got, want, "the store after the outage");
            }
            return Err("the store does not hold what the run decided".into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One run without an outage on a schema of its own: its decisions and
/// what its store holds.
async fn reference_run(
    phases: &[Vec<(u64, Event)>],
) -> Result<Option<(Vec<serde_json::Value>, Vec<TaskKept>)>, AnyError> {
    let Some(schema) = Schema::create("outage_ref")
        .await
        .map_err(|err| err.to_string())?
    else {
        return Ok(None);
    };
    let result = async {
        let (store, guard) = postgres_guard::<AnyError>(&schema.url).await?;
        let mut decisions = Vec::new();
        for (line, event) in phases.iter().flatten() {
            decisions.push(decide(&guard, *line, event.clone()).await?);
        }
        let held = kept(store.as_ref(), &TASKS).await?;
        Ok::<_, AnyError>((decisions, held))
    }
    .await;
    schema.drop().await.map_err(|err| err.to_string())?;
    result.map(Some)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_refused_midway_lose_nothing_and_undo_nothing() -> Result<(), AnyError> {
    let phases = [events(0, 2)?, events(1, 6)?, events(2, 3)?];
    let Some((expected, reference)) = reference_run(&phases).await? else {
        return Ok(());
    };
    let Some(schema) = Schema::create("outage_refused")
        .await
        .map_err(|err| err.to_string())?
    else {
        return Ok(());
    };
    let result = async {
        let (target, _) = through_port(&schema.url, 0)?;
        let mut proxy = Proxy::start(target).await?;
        let (_, url) = through_port(&schema.url, proxy.port)?;
        let store = Arc::new(PostgresStore::open(&url).await?);
        let guard = LoopGuard::builder(Config::default())
            .store(store.clone())
            .build()?;
        let mut decisions = Vec::new();
        for (line, event) in &phases[0] {
            decisions.push(decide(&guard, *line, event.clone()).await?);
        }
        proxy.stop().await;
        for (line, event) in &phases[1] {
            let decision = guard.observe_line(*line, event.clone()).await;
            assert!(
                decision.errors.iter().any(|e| e.starts_with("store:")),
                "the outage is reported on the decision: {:?}",
                decision.errors
            );
            assert!(decision.degraded, "marked degraded: {decision:?}");
            assert!(
                decision.notes.iter().any(|n| n.starts_with("degraded:")),
                "{:?}",
                decision.notes
            );
            decisions.push(without_outage(&decision)?);
        }
        let escalated_during = decisions
            .iter()
            .skip(phases[0].len())
            .any(|d| d["task"] == "T-esc" && d["status"] == "escalated");
        assert!(escalated_during, "T-esc escalates during the outage");
        proxy.restart().await?;
        for (line, event) in &phases[2] {
            decisions.push(decide(&guard, *line, event.clone()).await?);
        }
        for (at, (got, want)) in decisions.iter().zip(&expected).enumerate() {
            assert_eq!(got, want, "decision {at}");
        }
        assert_eq!(decisions.len(), expected.len());
        let last_esc = decisions
            .iter()
            .rev()
            .find(|d| d["task"] == "T-esc")
            .ok_or("T-esc decided")?;
        assert_eq!(last_esc["status"], "escalated");
        assert_eq!(last_esc["loop_count"], 10);
        catches_up(store.as_ref(), &reference).await?;
        let esc = store.load_task("T-esc").await?.ok_or("T-esc kept")?;
        assert_eq!((esc.status, esc.loop_count), (TaskStatus::Escalated, 10));
        proxy.stop().await;
        Ok::<(), AnyError>(())
    }
    .await;
    schema.drop().await.map_err(|err| err.to_string())?;
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backends_terminated_one_by_one_lose_no_event_and_keep_loop_counts_exact()
-> Result<(), AnyError> {
    const KILLS: usize = 20;
    let phases = [events(0, 150)?];
    let Some((expected, reference)) = reference_run(&phases).await? else {
        return Ok(());
    };
    let Some(schema) = Schema::create("outage_killed")
        .await
        .map_err(|err| err.to_string())?
    else {
        return Ok(());
    };
    let result = async {
        let name = application_name("lg_kill");
        let url = format!("{}&application_name={name}", schema.url);
        let store = Arc::new(PostgresStore::open(&url).await?);
        let guard = LoopGuard::builder(Config::default())
            .store(store.clone())
            .build()?;
        let base = std::env::var("LOOPGUARD_TEST_POSTGRES_URL")?;
        // One backend of this test's pool at a time, preferring one inside
        // a transaction (holding a task's lock).
        let killer = BackendKiller::start(
            &base,
            &name,
            Victims::OneBusyFirst,
            Duration::from_millis(15),
            None,
        )
        .await?;
        let mut decisions = Vec::new();
        let total = phases.iter().map(Vec::len).sum::<usize>().max(1);
        for (index, (line, event)) in phases.iter().flatten().enumerate() {
            decisions.push(decide(&guard, *line, event.clone()).await?);
            // Paced by the killer's progress, not by the clock, so that a
            // busy machine still sees the kills spread over the whole
            // stream: after the n-th event, n/total of them are due. The
            // pool's connection stays open between events for the killer
            // to find; if it cannot (the wait is bounded), the stream goes
            // on and the count below says so.
            let due = (index + 1) * KILLS / total;
            let give_up = Instant::now() + Duration::from_secs(2);
            while killer.killed() < due && Instant::now() < give_up {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        let kills = killer.stop().await?.killed;
        assert!(kills >= KILLS, "{kills} backends terminated");
        for (at, (got, want)) in decisions.iter().zip(&expected).enumerate() {
            assert_eq!(got, want, "decision {at}");
        }
        catches_up(store.as_ref(), &reference).await?;
        Ok::<(), AnyError>(())
    }
    .await;
    schema.drop().await.map_err(|err| err.to_string())?;
    result
}

#[tokio::test]
async fn a_commit_is_written_only_over_the_row_it_was_decided_on() -> Result<(), AnyError> {
    let Some(schema) = Schema::create("outage_over")
        .await
        .map_err(|err| err.to_string())?
    else {
        return Ok(());
    };
    let result = async {
        let (store, guard) = postgres_guard::<AnyError>(&schema.url).await?;
        for _ in 0..4 {
            guard.observe(failure_e1()?).await;
        }
        // A writer holds the task's row lock, its row at version 4...
        let lock = store.lock_task("T").await?;
        let seen = lock.record().cloned().ok_or("T kept")?;
        assert_eq!(
            (seen.snapshot.status, seen.snapshot.loop_count, seen.version),
            (TaskStatus::Escalated, 3, 4)
        );
        // ...when a write that bypasses the lock moves the row on.
        let mut newer = seen.clone();
        newer.snapshot.status = TaskStatus::Active;
        newer.snapshot.loop_count = 1;
        newer.version = 9;
        let bare = |record| loopguard_host::TaskCommit {
            line: 0,
            record,
            audit: Vec::new(),
            pivots: Vec::new(),
            episodes: Vec::new(),
        };
        store.commit(&[bare(newer)]).await?;
        // The writer's commit, decided on version 4, is refused.
        let mut stale = seen.clone();
        stale.version = 5;
        let refused = lock.commit(&bare(stale)).await;
        let message = refused.err().map(|err| err.to_string()).unwrap_or_default();
        assert!(message.contains("no longer at version 4"), "{message}");
        let kept = store.load_record("T").await?.ok_or("T kept")?;
        assert_eq!((kept.version, kept.snapshot.loop_count), (9, 1));
        // The engine's next event is applied to the newest row, and
        // answered from it.
        let decision = guard.observe(failure_e1()?).await;
        assert!(decision.errors.is_empty(), "{:?}", decision.errors);
        assert!(!decision.degraded);
        assert_eq!(
            (decision.status, decision.loop_count),
            (TaskStatus::Active, 2)
        );
        let kept = store.load_record("T").await?.ok_or("T kept")?;
        assert_eq!((kept.version, kept.snapshot.loop_count), (10, 2));
        // A `human` on the other replica resets it: that reset stands.
        let human = Event::from_json(r#"{"type":"human","task":"T","note":"ok"}"#)?;
        let other = LoopGuard::builder(Config::default())
            .store(Arc::new(PostgresStore::open(&schema.url).await?))
            .build()?;
        other.observe(human).await;
        let after = guard.observe(failure_e1()?).await;
        assert_eq!((after.status, after.loop_count), (TaskStatus::Active, 0));
        Ok::<(), AnyError>(())
    }
    .await;
    schema.drop().await.map_err(|err| err.to_string())?;
    result
}
