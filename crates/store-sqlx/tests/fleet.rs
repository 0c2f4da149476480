//! Two engines on one PostgreSQL schema (a fleet of two) while every
//! backend of theirs is terminated, 0.1 s apart, for 6 s. Events of four
//! tasks alternate between the engines, one at a time, as a client behind
//! a load balancer sends them. Every round:
//!
//! - no answered decision goes backwards: each one not marked `degraded`
//!   is the decision of one engine replaying the same events without a
//!   fault;
//! - once both engines have written what waits, the store holds exactly
//!   what that replay's store holds (status, loop count, pivots, audit
//!   rows with their detections, the cycle log).
//!
//! And one engine cut off from the database while the other moves a task
//! on: its degraded decisions' events are applied to the newer row when
//! the database answers, so no increment is lost and nothing is written
//! over the other engine's work.

use std::sync::Arc;
use std::time::{Duration, Instant};

use loopguard_config::Config;
use loopguard_core_types::{Event, TaskStatus};
use loopguard_host::{LoopGuard, MemoryStore, Store};
use loopguard_store_sqlx::PostgresStore;
use loopguard_test_support::pg_faults::{BackendKiller, Terminations, Victims, application_name};

use super::outage::{AnyError, Proxy, TASKS, events, kept, through_port, without_outage};
use super::postgres::Schema;

/// How long backends are terminated, and how far apart.
const FAULTS_FOR: Duration = Duration::from_secs(6);
const FAULT_EVERY: Duration = Duration::from_millis(100);
/// Rounds, each on a schema of its own: the result must hold every time.
const ROUNDS: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_engines_under_terminated_backends_never_answer_backwards_and_store_the_replay()
-> Result<(), AnyError> {
    for round in 0..ROUNDS {
        let Some(schema) = Schema::create(&format!("fleet_{round}"))
            .await
            .map_err(|err| err.to_string())?
        else {
            return Ok(());
        };
        let result = one_round(&schema.url).await;
        schema.drop().await.map_err(|err| err.to_string())?;
        result.map_err(|err| format!("round {round}: {err}"))?;
    }
    Ok(())
}

/// Events alternating between two engines while the killer runs; then
/// the checks.
async fn one_round(url: &str) -> Result<(), AnyError> {
    let name = application_name("lg_fleet");
    let url = format!("{url}&application_name={name}");
    let mut engines = Vec::new();
    for _ in 0..2 {
        let store = Arc::new(PostgresStore::open(&url).await?);
        engines.push(LoopGuard::builder(Config::default()).store(store).build()?);
    }
    let store = PostgresStore::open(&url).await?;
    let all = events(0, 100_000)?;

    let base = std::env::var("LOOPGUARD_TEST_POSTGRES_URL")?;
    let killer =
        BackendKiller::start(&base, &name, Victims::All, FAULT_EVERY, Some(FAULTS_FOR)).await?;
    let mut answered = Vec::new();
    for (index, (line, event)) in all.iter().enumerate() {
        if killer.is_over() {
            break;
        }
        // Four tasks in turn, each task's events alternating between the
        // engines.
        let engine = &engines[(index + index / TASKS.len()) % 2];
        answered.push(engine.observe_line(*line, event.clone()).await);
    }
    let Terminations { rounds, killed } = killer.finish().await?;
    assert!(rounds >= 50, "{rounds} rounds of terminated backends");
    assert!(
        killed >= rounds,
        "{killed} backends terminated in {rounds} rounds"
    );

    // The replay: one engine, no fault, the same events in the same order.
    let sent: Vec<(u64, Event)> = all.into_iter().take(answered.len()).collect();
    let reference_store = Arc::new(MemoryStore::durable());
    let reference = LoopGuard::builder(Config::default())
        .store(reference_store.clone())
        .build()?;
    let mut degraded = 0;
    for (at, ((line, event), got)) in sent.iter().zip(&answered).enumerate() {
        let want = reference.observe_line(*line, event.clone()).await;
        if got.degraded {
            degraded += 1;
            continue;
        }
        assert_eq!(
            without_outage(got)?,
            without_outage(&want)?,
            "decision {at} of {} ({degraded} degraded so far)",
            answered.len()
        );
    }

    // Both engines write what waits; the store then holds the replay's.
    let deadline = Instant::now() + Duration::from_secs(30);
    for engine in &engines {
        while engine.write_pending().await.unwrap_or(usize::MAX) > 0 {
            assert!(Instant::now() < deadline, "the waiting events are written");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let held = kept(&store, &TASKS).await?;
    let replayed = kept(reference_store.as_ref(), &TASKS).await?;
    for (got, want) in held.iter().zip(&replayed) {
        assert_eq!(
            got,
            want,
            "the store after {} events ({degraded} degraded)",
            answered.len()
        );
    }
    eprintln!(
        "fleet round: {} events, {killed} backends terminated in {rounds} rounds, {degraded} degraded decisions",
        answered.len()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_engine_merges_its_waiting_events_into_the_newer_row() -> Result<(), AnyError> {
    let Some(schema) = Schema::create("fleet_merge")
        .await
        .map_err(|err| err.to_string())?
    else {
        return Ok(());
    };
    let result = async {
        // Engine A reaches the database through a proxy; engine B directly.
        let (target, _) = through_port(&schema.url, 0)?;
        let mut proxy = Proxy::start(target).await?;
        let (_, proxied) = through_port(&schema.url, proxy.port)?;
        let build = |url: String| async move {
            let store = Arc::new(PostgresStore::open(&url).await?);
            let engine = LoopGuard::builder(Config::default()).store(store).build()?;
            Ok::<_, AnyError>(engine)
        };
        let (a, b) = (build(proxied).await?, build(schema.url.clone()).await?);
        let failure =
            || Event::from_json(r#"{"type":"failure","task":"M","agent":"coder","error":"E7"}"#);
        let mut line = 0;
        let mut next = || {
            line += 1;
            line
        };
        a.observe_line(next(), failure()?).await;
        b.observe_line(next(), failure()?).await;
        // A is cut off: its events are decided on its own copy, degraded.
        proxy.stop().await;
        for _ in 0..3 {
            let decision = a.observe_line(next(), failure()?).await;
            assert!(decision.degraded, "{decision:?}");
        }
        assert_eq!(a.pending_writes(), 3);
        // Meanwhile B moves the task on, its decisions written.
        let mut answered = Vec::new();
        for _ in 0..3 {
            let decision = b.observe_line(next(), failure()?).await;
            assert!(!decision.degraded, "{decision:?}");
            answered.push(decision.loop_count);
        }
        assert!(
            answered.windows(2).all(|pair| pair[0] <= pair[1]),
            "{answered:?}"
        );
        // A answers again: its three events join B's row, none written
        // over it.
        proxy.restart().await?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while a.write_pending().await.unwrap_or(usize::MAX) > 0 {
            assert!(Instant::now() < deadline, "A's waiting events are written");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Eight identical failures, whoever saw them: what one engine
        // replaying them stores.
        let reference = LoopGuard::new(Config::default())?;
        let mut want = None;
        for line in 1..=8 {
            want = Some(reference.observe_line(line, failure()?).await);
        }
        let want = want.ok_or("decided")?;
        let store = PostgresStore::open(&schema.url).await?;
        let stored = store.load_task("M").await?.ok_or("M stored")?;
        assert_eq!(
            (stored.status, stored.loop_count, stored.pivots),
            (want.status, want.loop_count, want.pivots)
        );
        assert_eq!(stored.status, TaskStatus::Escalated);
        // And both engines answer from there.
        let after = b.observe_line(next(), failure()?).await;
        assert_eq!(after.loop_count, want.loop_count + 1);
        let after = a.observe_line(next(), failure()?).await;
        assert!(!after.degraded, "{after:?}");
        assert_eq!(after.loop_count, want.loop_count + 2);
        proxy.stop().await;
        Ok::<(), AnyError>(())
    }
    .await;
    schema.drop().await.map_err(|err| err.to_string())?;
    result
}
