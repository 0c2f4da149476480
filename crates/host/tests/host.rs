//! The engine's policy, gate, resets, cycle log, eviction and concurrency,
//! through its public API. One test binary for the crate.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use loopguard_config::Config;
use loopguard_core_types::{Action, Decision, Detection, Event, Severity, TaskStatus, kinds};
use loopguard_detectors::ObservedEvent;
use loopguard_host::{
    ExtensionDetector, ExtensionError, LoopGuard, MemoryStore, Resolution, Store, replay,
};
use proptest::prelude::*;

#[path = "host/spend.rs"]
mod spend;

fn event(json: &str) -> Event {
    Event::from_json(json).expect("test events are valid")
}

fn failure(task: &str, error: &str) -> Event {
    event(&format!(
        r#"{{"type":"failure","task":"{task}","agent":"coder","error":"{error}"}}"#
    ))
}

fn human(task: &str) -> Event {
    event(&format!(
        r#"{{"type":"human","task":"{task}","note":"reviewed"}}"#
    ))
}

/// A scripted extension detector: on events with an extra field
/// `"script": "kind:action"` it reports a detection of that kind and action,
/// and on `"script": "fail"` it fails. It stands in for a plugin or a
/// semantic detector so the policy can be tested on kinds no built-in
/// detector emits yet.
#[derive(Debug, Default)]
struct Scripted {
    resets: AtomicUsize,
}

#[async_trait]
impl ExtensionDetector for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    fn kinds(&self) -> Vec<String> {
        vec!["scripted".into()]
    }

    async fn observe(&self, event: &ObservedEvent<'_>) -> Result<Vec<Detection>, ExtensionError> {
        let Some(script) = event.event.extra.get("script").and_then(|v| v.as_str()) else {
            return Ok(Vec::new());
        };
        if script == "fail" {
            return Err(ExtensionError("scripted failure".into()));
        }
        let mut parts = script.split(':');
        let kind = parts.next().unwrap_or_default().to_owned();
        let action: Action = parts
            .next()
            .unwrap_or("warn")
            .parse()
            .map_err(ExtensionError)?;
        Ok(vec![Detection::new(
            "scripted",
            kind,
            Severity::Medium,
            action,
            vec![event.line],
            "scripted",
        )])
    }

    async fn reset_task(&self, _task: &str) {
        self.resets.fetch_add(1, Ordering::Relaxed);
    }
}

fn scripted(task: &str, script: &str) -> Event {
    event(&format!(
        r#"{{"type":"transition","task":"{task}","from":"x{script}","to":"y{script}","script":"{script}"}}"#
    ))
}

fn guard_with(extension: Arc<Scripted>) -> LoopGuard {
    LoopGuard::builder(Config::default())
        .extension(extension)
        .build()
        .expect("default config is valid")
}

#[tokio::test]
async fn fourth_identical_failure_reaches_the_gate_and_a_human_lifts_it() {
    let guard = LoopGuard::new(Config::default()).expect("valid");
    let mut decisions = Vec::new();
    for _ in 0..4 {
        decisions.push(guard.observe(failure("T1", "E0308 mismatched types")).await);
    }
    let counts: Vec<u32> = decisions.iter().map(|d| d.loop_count).collect();
    assert_eq!(counts, [0, 1, 2, 3]);
    let actions: Vec<Action> = decisions.iter().map(|d| d.action).collect();
    assert_eq!(
        actions,
        [
            Action::None,
            Action::Warn,
            Action::InjectContext,
            Action::Escalate
        ]
    );
    let last = &decisions[3];
    assert!(decisions.iter().all(|d| d.task == "T1"));
    assert_eq!(last.status, TaskStatus::Escalated);
    assert_eq!(last.detections[0].severity, Severity::High);
    assert_eq!(last.detections[0].loop_count, Some(3));

    // The gate holds on any event until a human comes.
    let unrelated = guard
        .observe(event(
            r#"{"type":"transition","task":"T1","from":"a","to":"b"}"#,
        ))
        .await;
    assert_eq!(unrelated.action, Action::Escalate);
    assert_eq!(unrelated.status, TaskStatus::Escalated);

    let lifted = guard.observe(human("T1")).await;
    assert_eq!(lifted.action, Action::None);
    assert_eq!(lifted.status, TaskStatus::Active);
    assert_eq!(lifted.loop_count, 0);

    // After the reset the same failure is a first attempt again.
    let again = guard.observe(failure("T1", "E0308 mismatched types")).await;
    assert_eq!(again.loop_count, 0);
    assert_eq!(again.action, Action::None);

    // Another task was never touched.
    let other = guard.observe(failure("T2", "E0308 mismatched types")).await;
    assert_eq!(other.loop_count, 0);
}

#[tokio::test]
async fn completed_resets_and_more_events_make_the_task_active() {
    let guard = LoopGuard::new(Config::default()).expect("valid");
    for _ in 0..3 {
        guard.observe(failure("T", "boom")).await;
    }
    let done = guard
        .observe(event(r#"{"type":"completed","task":"T"}"#))
        .await;
    assert_eq!(done.status, TaskStatus::Completed);
    assert_eq!(done.loop_count, 0);
    let next = guard.observe(failure("T", "boom")).await;
    assert_eq!(next.status, TaskStatus::Active);
    assert_eq!(next.loop_count, 0, "history was reset with the counters");
}

#[tokio::test]
async fn strongest_action_wins_and_every_detection_is_kept() {
    let extension = Arc::new(Scripted::default());
    let guard = guard_with(extension);
    let decision = guard.observe(scripted("T", "oscillation:block")).await;
    assert_eq!(decision.action, Action::Block);
    assert_eq!(decision.status, TaskStatus::Active);
    assert_eq!(decision.detections.len(), 1);
    // An exact failure repeat plus a scripted abort on one event: abort wins,
    // both are evidence.
    guard.observe(failure("U", "same")).await;
    let mut repeat = failure("U", "same");
    repeat
        .extra
        .insert("script".into(), serde_json::json!("edge_limit:abort"));
    let decision = guard.observe(repeat).await;
    assert_eq!(decision.action, Action::Abort);
    assert_eq!(decision.status, TaskStatus::AbortedStuck);
    let found: Vec<&str> = decision.detections.iter().map(|d| &*d.kind).collect();
    assert!(found.contains(&kinds::EXACT_FAILURE), "{found:?}");
    assert!(found.contains(&"edge_limit"), "{found:?}");
}

#[tokio::test]
async fn abort_is_terminal_even_for_a_human() {
    let guard = guard_with(Arc::new(Scripted::default()));
    let aborted = guard.observe(scripted("T", "edge_limit:abort")).await;
    assert_eq!(aborted.status, TaskStatus::AbortedStuck);
    let after_human = guard.observe(human("T")).await;
    assert_eq!(after_human.status, TaskStatus::AbortedStuck);
    assert_eq!(after_human.action, Action::Abort);
}

#[tokio::test]
async fn paused_beats_escalated_and_both_hold_until_a_human() {
    let guard = guard_with(Arc::new(Scripted::default()));
    let escalated = guard.observe(scripted("T", "phase_visits:escalate")).await;
    assert_eq!(escalated.status, TaskStatus::Escalated);
    let paused = guard
        .observe(scripted("T", "repeated_output:escalate"))
        .await;
    assert_eq!(paused.status, TaskStatus::Paused);
    // A later escalation does not demote paused to escalated (ruling 10).
    let still = guard.observe(scripted("T", "phase_visits:escalate")).await;
    assert_eq!(still.status, TaskStatus::Paused);
    let lifted = guard.observe(human("T")).await;
    assert_eq!(lifted.status, TaskStatus::Active);
    assert_eq!(lifted.action, Action::None);
}

#[tokio::test]
async fn loop_feeding_kinds_from_extensions_add_to_the_loop_count() {
    let guard = guard_with(Arc::new(Scripted::default()));
    let first = guard
        .observe(scripted("T", "collaboration_loop:none"))
        .await;
    assert_eq!(first.loop_count, 1);
    assert_eq!(first.detections[0].loop_count, Some(1));
    assert_eq!(first.action, Action::Warn);
    // Cycle kinds do not feed the loop count (ruling 4).
    let cycle = guard.observe(scripted("T", "agent_pair:break_cycle")).await;
    assert_eq!(cycle.loop_count, 1);
    guard
        .observe(scripted("T", "collaboration_loop:none"))
        .await;
    let gate = guard
        .observe(scripted("T", "collaboration_loop:none"))
        .await;
    assert_eq!(gate.loop_count, 3);
    assert_eq!(gate.action, Action::Escalate);
    assert_eq!(gate.status, TaskStatus::Escalated);
}

#[tokio::test]
async fn a_failing_extension_is_reported_and_the_rest_goes_on() {
    let guard = guard_with(Arc::new(Scripted::default()));
    guard.observe(failure("T", "same")).await;
    let mut repeat = failure("T", "same");
    repeat
        .extra
        .insert("script".into(), serde_json::json!("fail"));
    let decision = guard.observe(repeat).await;
    assert_eq!(decision.errors, ["detector scripted: scripted failure"]);
    assert_eq!(decision.detections[0].kind, kinds::EXACT_FAILURE);
    assert_eq!(decision.loop_count, 1);
}

#[tokio::test]
async fn extensions_are_told_of_resets() {
    let extension = Arc::new(Scripted::default());
    let guard = guard_with(extension.clone());
    guard.observe(human("T")).await;
    guard
        .observe(event(r#"{"type":"completed","task":"T"}"#))
        .await;
    assert_eq!(extension.resets.load(Ordering::Relaxed), 2);
}

#[tokio::test]
async fn cycle_log_records_an_episode_and_its_resolution() {
    let store = Arc::new(MemoryStore::new());
    let guard = LoopGuard::builder(Config::default())
        .store(store.clone())
        .build()
        .expect("valid");
    for _ in 0..4 {
        guard.observe(failure("T", "same")).await;
    }
    let open = store.episodes(Some("T")).await.expect("memory store");
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].patterns, ["exact_failure"]);
    assert_eq!(open[0].intervention, Action::Escalate);
    assert!(open[0].escalated);
    assert_eq!(open[0].lines, [2, 3, 4]);
    assert_eq!(open[0].resolution, None);
    guard.observe(human("T")).await;
    let closed = store.episodes(Some("T")).await.expect("memory store");
    assert_eq!(closed.len(), 1);
    assert_eq!(closed[0].resolution, Some(Resolution::Human));
    let snapshot = store.load_task("T").await.expect("memory store");
    assert_eq!(snapshot.map(|s| s.status), Some(TaskStatus::Active));
    // A new episode after the reset gets a new id.
    guard.observe(failure("T", "again")).await;
    guard.observe(failure("T", "again")).await;
    let all = store.episodes(Some("T")).await.expect("memory store");
    assert_eq!(all.len(), 2);
    assert_ne!(all[0].id, all[1].id);
}

#[tokio::test]
async fn idle_tasks_are_evicted_but_their_log_stays() {
    let mut config = Config::default();
    config.engine.task_ttl_secs = 60;
    let store = Arc::new(MemoryStore::new());
    let guard = LoopGuard::builder(config)
        .store(store.clone())
        .build()
        .expect("valid");
    let at = |task: &str, ts: &str| {
        event(&format!(
            r#"{{"type":"failure","task":"{task}","agent":"a","error":"same","ts":"{ts}"}}"#
        ))
    };
    guard.observe(at("old", "2026-11-22T10:00:00Z")).await;
    guard.observe(at("old", "2026-11-22T10:00:01Z")).await;
    guard.observe(at("fresh", "2026-11-22T10:01:30Z")).await;
    assert_eq!(guard.live_tasks(), 2);
    let now =
        loopguard_core_types::Timestamp::parse_rfc3339("2026-11-22T10:02:00Z").expect("valid");
    assert_eq!(guard.evict_idle(now), 1);
    assert_eq!(guard.live_tasks(), 1);
    assert!(guard.task("old").is_none());
    assert!(guard.task("fresh").is_some());
    assert_eq!(store.episodes(Some("old")).await.expect("ok").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_callers_keep_every_task_exact() {
    let guard = Arc::new(LoopGuard::new(Config::default()).expect("valid"));
    let mut handles = Vec::new();
    for task in 0..50 {
        let guard = guard.clone();
        handles.push(tokio::spawn(async move {
            let mut last = None;
            for _ in 0..3 {
                last = Some(guard.observe(failure(&format!("T{task}"), "same")).await);
                tokio::task::yield_now().await;
            }
            last
        }));
    }
    for handle in handles {
        let last: Option<Decision> = handle.await.expect("no panic");
        assert_eq!(last.map(|d| d.loop_count), Some(2));
    }
    assert_eq!(guard.live_tasks(), 50);
}

#[tokio::test]
async fn invalid_config_is_refused_with_the_key() {
    let mut config = Config::default();
    config.entropy.threshold = 1;
    let err = LoopGuard::new(config).expect_err("invalid");
    assert!(err.to_string().contains("entropy.threshold"), "{err}");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime")
}

fn arb_event_line() -> impl Strategy<Value = String> {
    let name = prop::sample::select(vec!["a", "b", "c", "d", "plan", "test"]);
    let task = prop::sample::select(vec!["T1", "T2", "T3"]);
    let text = prop::sample::select(vec!["boom", "E1", "same", "  same  ", "", "x y"]);
    (0..9u8, task, name.clone(), name, text, any::<bool>(), 0..20u64).prop_map(
        |(kind, task, a, b, text, flag, n)| match kind {
            0 => format!(r#"{{"type":"handoff","task":"{task}","from":"{a}","to":"{b}","content":"{text}"}}"#),
            1 => format!(r#"{{"type":"collaboration","task":"{task}","from":"{a}","to":"{b}","request":"{text}"}}"#),
            2 => format!(r#"{{"type":"failure","task":"{task}","agent":"{a}","error":"{text}"}}"#),
            3 => format!(r#"{{"type":"turn","task":"{task}","agent":"{a}","output":"{text}","success":{flag}}}"#),
            4 => format!(r#"{{"type":"transition","task":"{task}","from":"{a}","to":"{b}"}}"#),
            5 => format!(r#"{{"type":"progress","task":"{task}","tests_failed":{n},"files_changed":{n}}}"#),
            6 => format!(r#"{{"type":"completed","task":"{task}"}}"#),
            7 => format!(r#"{{"type":"human","task":"{task}"}}"#),
            _ => format!(
                r#"{{"type":"handoff","task":"{task}","from":"{a}","to":"{b}","ts":"2026-11-22T10:{:02}:00Z"}}"#,
                n % 60
            ),
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Random valid events: the engine never panics, and its invariants hold.
    #[test]
    fn random_events_keep_the_invariants(lines in prop::collection::vec(arb_event_line(), 1..200)) {
        let guard = LoopGuard::new(Config::default()).expect("valid");
        let trace = lines.join("\n");
        let mut decisions = Vec::new();
        let report = runtime()
            .block_on(replay(&guard, trace.as_bytes(), |item| {
                if let loopguard_host::ReplayItem::Decision(d) = item {
                    decisions.push(d.clone());
                }
            }))
            .expect("in-memory input");
        prop_assert_eq!(report.events as usize, lines.len());
        prop_assert!(report.errors.is_empty());
        for decision in &decisions {
            if decision.status == TaskStatus::AbortedStuck {
                prop_assert_eq!(decision.action, Action::Abort);
            } else if decision.status.is_gated() {
                prop_assert_eq!(decision.action, Action::Escalate);
            }
            let strongest = decision.detections.iter().map(|d| d.action).max().unwrap_or_default();
            prop_assert!(decision.action >= strongest);
        }
    }

    /// Random bytes: every line is either a decision or an error with its
    /// line number; nothing panics.
    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let guard = LoopGuard::new(Config::default()).expect("valid");
        let report = runtime()
            .block_on(replay(&guard, bytes.as_slice(), |_| {}))
            .expect("in-memory input");
        let lines = bytes.split(|b| *b == b'\n').count() as u64;
        for error in &report.errors {
            prop_assert!(error.line >= 1 && error.line <= lines);
        }
    }

    /// Random JSON-ish text built from event fragments.
    #[test]
    fn mangled_events_never_panic(lines in prop::collection::vec(arb_event_line(), 1..20), cut in 0usize..80) {
        let guard = LoopGuard::new(Config::default()).expect("valid");
        let mangled: Vec<String> = lines.iter().map(|l| l.chars().take(cut.max(1)).collect()).collect();
        let trace = mangled.join("\n");
        let report = runtime().block_on(replay(&guard, trace.as_bytes(), |_| {})).expect("in-memory input");
        prop_assert_eq!(report.events as usize + report.errors.len(), mangled.iter().filter(|l| !l.trim().is_empty()).count());
    }
}

/// A scripted topic assigner: texts mentioning "auth" share topic 7 with a
/// fixed similarity; others get no topic. It stands in for the semantic
/// crate's embedding-based assigner so the seam is tested on its own.
#[derive(Debug, Default)]
struct AuthTopics {
    calls: AtomicUsize,
}

#[async_trait]
impl loopguard_host::TopicAssigner for AuthTopics {
    async fn assign(
        &self,
        _task: &str,
        _task_type: Option<&str>,
        line: u64,
        text: &str,
    ) -> Result<Option<loopguard_detectors::SemanticTopic>, ExtensionError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(text
            .contains("auth")
            .then(|| loopguard_detectors::SemanticTopic {
                id: 7,
                label: "auth".into(),
                similarity: (line > 1).then_some(0.91),
                threshold: 0.85,
                matched_line: (line > 1).then_some(1),
            }))
    }
}

#[tokio::test]
async fn a_topic_assigner_groups_differently_worded_exchanges() {
    let assigner = Arc::new(AuthTopics::default());
    // Every exchange counts (trace format 1.1): the topic is what is
    // looked at. By default the four wordings would each be news unless an
    // exchange matcher judged them the same.
    let mut config = Config::default();
    config.cycles.count = loopguard_config::CycleCount::Every;
    let guard = LoopGuard::builder(config)
        .topics(assigner.clone())
        .build()
        .expect("valid");
    let contents = [
        "review the auth module",
        "auth code needs another look",
        "please check auth again",
        "auth: one more pass",
    ];
    let mut last = None;
    for (i, content) in contents.iter().enumerate() {
        let (from, to) = if i % 2 == 0 { ("a", "b") } else { ("c", "d") };
        last = Some(
            guard
                .observe_line(
                    i as u64 + 1,
                    event(&format!(
                        r#"{{"type":"handoff","task":"T","from":"{from}","to":"{to}","content":"{content}"}}"#
                    )),
                )
                .await,
        );
    }
    let decision = last.expect("four decisions");
    let topic = decision
        .detections
        .iter()
        .find(|d| d.kind == kinds::TOPIC_CYCLE)
        .expect("a topic cycle across differently worded contents");
    assert_eq!(decision.task, "T");
    assert_eq!(topic.similarity, Some(0.91));
    assert_eq!(topic.matched_line, Some(1));
    assert_eq!(topic.evidence, [1, 2, 3, 4]);
    assert_eq!(assigner.calls.load(Ordering::Relaxed), 4);
    // An explicit topic is not sent to the assigner.
    guard
        .observe(event(
            r#"{"type":"handoff","task":"T","from":"a","to":"b","content":"auth","topic":"login"}"#,
        ))
        .await;
    assert_eq!(assigner.calls.load(Ordering::Relaxed), 4);
}

#[tokio::test]
async fn decisions_echo_the_task_id_and_line() {
    let guard = LoopGuard::new(Config::default()).expect("valid");
    let streamed = guard
        .observe(event(r#"{"type":"completed","task":"T-9","id":"evt-1"}"#))
        .await;
    assert_eq!(streamed.task, "T-9");
    assert_eq!(streamed.id.as_deref(), Some("evt-1"));
    assert_eq!(streamed.line, 1);
    let replayed = guard
        .observe_line(42, event(r#"{"type":"human","task":"T-10"}"#))
        .await;
    assert_eq!(
        (replayed.task.as_str(), replayed.id, replayed.line),
        ("T-10", None, 42)
    );
}

#[tokio::test]
async fn a_restarted_engine_continues_a_task_from_its_stored_snapshot() {
    let store = Arc::new(MemoryStore::new());
    let first = LoopGuard::builder(Config::default())
        .store(store.clone())
        .build()
        .expect("valid");
    for _ in 0..4 {
        first.observe(failure("T", "same")).await;
    }
    assert_eq!(
        first.task("T").map(|t| t.status),
        Some(TaskStatus::Escalated)
    );
    drop(first);

    // A new engine on the same store: the gate still holds and the loop
    // count goes on from 3.
    let second = LoopGuard::builder(Config::default())
        .store(store.clone())
        .build()
        .expect("valid");
    let next = second
        .observe(event(
            r#"{"type":"transition","task":"T","from":"a","to":"b"}"#,
        ))
        .await;
    assert_eq!(
        (next.status, next.loop_count, next.action),
        (TaskStatus::Escalated, 3, Action::Escalate)
    );
    let lifted = second.observe(human("T")).await;
    assert_eq!((lifted.status, lifted.loop_count), (TaskStatus::Active, 0));
    // A task the store never saw starts fresh.
    let fresh = second.observe(failure("U", "x")).await;
    assert_eq!((fresh.status, fresh.loop_count), (TaskStatus::Active, 0));
}

#[tokio::test]
async fn two_engines_on_one_store_keep_each_others_cycle_log() {
    let store = Arc::new(MemoryStore::new());
    for _run in 0..2 {
        let guard = LoopGuard::builder(Config::default())
            .store(store.clone())
            .build()
            .expect("valid");
        guard.observe(failure("A", "same")).await;
        guard.observe(failure("A", "same")).await;
        guard.observe(human("A")).await;
    }
    let episodes = store.episodes(Some("A")).await.expect("memory store");
    assert_eq!(
        episodes.len(),
        2,
        "the second run overwrote the first: {episodes:?}"
    );
    assert_ne!(episodes[0].id, episodes[1].id);
}

/// The events of a trace file in `tests/traces/`, with their line numbers
/// (lines that are not events are skipped).
fn trace_events(name: &str) -> Vec<(u64, Event)> {
    let path = format!("{}/../../tests/traces/{name}", env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(&path).expect("the trace exists");
    String::from_utf8_lossy(&bytes)
        .lines()
        .enumerate()
        .filter_map(|(index, text)| {
            let event = Event::from_json(text.trim()).ok()?;
            Some((index as u64 + 1, event))
        })
        .collect()
}

/// Replays `events` through a new engine on `store`, returning each
/// decision as JSON.
async fn replay_on(store: &Arc<MemoryStore>, events: &[(u64, Event)]) -> Vec<serde_json::Value> {
    let guard = LoopGuard::builder(Config::default())
        .store(store.clone())
        .build()
        .expect("valid");
    let mut decisions = Vec::new();
    for (line, event) in events {
        let decision = guard.observe_line(*line, event.clone()).await;
        assert!(decision.errors.is_empty(), "{:?}", decision.errors);
        decisions.push(serde_json::to_value(&decision).expect("serializes"));
    }
    decisions
}

/// Task snapshots without `last_seen`: events without `ts` are timed by
/// the wall clock, which differs between runs.
async fn untimed_tasks(store: &MemoryStore) -> Vec<loopguard_host::TaskSnapshot> {
    let mut tasks = store.tasks().await.expect("memory store");
    for task in &mut tasks {
        task.last_seen = loopguard_core_types::Timestamp(0);
    }
    tasks
}

/// The audit log without times (see [`untimed_tasks`]).
async fn untimed_audit(store: &MemoryStore) -> Vec<loopguard_host::AuditEntry> {
    let mut audit = store.audit(None).await.expect("memory store");
    for entry in &mut audit {
        entry.at = loopguard_core_types::Timestamp(0);
    }
    audit
}

/// The cycle log without episode ids (each engine draws its own).
async fn episodes_without_ids(store: &MemoryStore) -> Vec<loopguard_host::CycleEpisode> {
    let mut episodes = store.episodes(None).await.expect("memory store");
    for episode in &mut episodes {
        episode.id = 0;
        episode.opened_at = loopguard_core_types::Timestamp(0);
        episode.resolved_at = episode
            .resolved_at
            .map(|_| loopguard_core_types::Timestamp(0));
    }
    episodes
}

#[tokio::test]
async fn every_trace_split_anywhere_replays_like_the_whole_trace_on_a_durable_store() {
    let traces = [
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
    for name in traces {
        let events = trace_events(name);
        assert!(events.len() > 3, "{name} has events");
        let whole_store = Arc::new(MemoryStore::durable());
        let whole = replay_on(&whole_store, &events).await;
        for split in 1..events.len() {
            let store = Arc::new(MemoryStore::durable());
            let mut halves = replay_on(&store, &events[..split]).await;
            // A new engine: nothing of the first is in memory.
            halves.extend(replay_on(&store, &events[split..]).await);
            assert_eq!(halves, whole, "{name} split before event {split}");
            assert_eq!(
                untimed_tasks(&store).await,
                untimed_tasks(&whole_store).await,
                "{name} split at {split}: tasks"
            );
            assert_eq!(
                untimed_audit(&store).await,
                untimed_audit(&whole_store).await,
                "{name} split at {split}: audit log"
            );
            assert_eq!(
                store.pivots(None).await.expect("ok").len(),
                whole_store.pivots(None).await.expect("ok").len(),
                "{name} split at {split}: pivots"
            );
            assert_eq!(
                episodes_without_ids(&store).await,
                episodes_without_ids(&whole_store).await,
                "{name} split at {split}: cycle log"
            );
        }
    }
}

#[tokio::test]
async fn a_memory_store_without_durability_still_starts_windows_afresh() {
    // The contrast that shows the durable store is what carries the
    // windows: with counters only, a split pair of exchanges is not seen.
    let events = trace_events("agent_pair.jsonl");
    let whole = replay_on(&Arc::new(MemoryStore::new()), &events).await;
    let store = Arc::new(MemoryStore::new());
    let split = events.len() / 2;
    let mut halves = replay_on(&store, &events[..split]).await;
    halves.extend(replay_on(&store, &events[split..]).await);
    assert_ne!(halves, whole);
}

#[tokio::test]
async fn the_audit_log_records_detections_and_each_reset_with_its_reason_and_previous_count() {
    let store = Arc::new(MemoryStore::durable());
    let guard = LoopGuard::builder(Config::default())
        .store(store.clone())
        .build()
        .expect("valid");
    for _ in 0..3 {
        guard.observe(failure("T", "same")).await;
    }
    guard.observe(human("T")).await;
    guard
        .observe(event(r#"{"type":"completed","task":"T"}"#))
        .await;
    let audit = store.audit(Some("T")).await.expect("memory store");
    let entries: Vec<&str> = audit.iter().map(|entry| entry.record.entry()).collect();
    assert_eq!(entries, ["detection", "detection", "reset", "reset"]);
    match &audit[2].record {
        loopguard_host::AuditRecord::Reset {
            reason,
            previous_loop_count,
            previous_status,
            ..
        } => {
            assert_eq!(*reason, Resolution::Human);
            assert_eq!(*previous_loop_count, 2);
            assert_eq!(*previous_status, TaskStatus::Active);
        }
        other => panic!("expected a reset, got {other:?}"),
    }
    assert_eq!(audit[2].line, 4);
    match &audit[3].record {
        loopguard_host::AuditRecord::Reset {
            reason,
            previous_loop_count,
            ..
        } => assert_eq!((*reason, *previous_loop_count), (Resolution::Completed, 0)),
        other => panic!("expected a reset, got {other:?}"),
    }
    match &audit[1].record {
        loopguard_host::AuditRecord::Detection(detection) => {
            assert_eq!(detection.kind, kinds::EXACT_FAILURE);
            assert_eq!(detection.loop_count, Some(2));
            assert_eq!(detection.line, Some(3));
        }
        other => panic!("expected a detection, got {other:?}"),
    }
}

#[tokio::test]
async fn a_stored_state_that_cannot_be_read_falls_back_to_the_counters_and_says_so() {
    let store = Arc::new(MemoryStore::durable());
    let first = LoopGuard::builder(Config::default())
        .store(store.clone())
        .build()
        .expect("valid");
    for _ in 0..2 {
        first.observe(failure("T", "same")).await;
    }
    drop(first);
    let mut record = store.load_record("T").await.expect("ok").expect("kept");
    assert!(
        record
            .state
            .as_deref()
            .is_some_and(|s| s.contains("\"format\":1"))
    );
    record.state = Some("{not json".into());
    record.version += 1;
    store
        .commit(&[loopguard_host::TaskCommit {
            line: 0,
            record,
            audit: Vec::new(),
            pivots: Vec::new(),
            episodes: Vec::new(),
        }])
        .await
        .expect("ok");
    let second = LoopGuard::builder(Config::default())
        .store(store.clone())
        .build()
        .expect("valid");
    let decision = second.observe(failure("T", "same")).await;
    assert_eq!(decision.loop_count, 1, "the counter carried over");
    assert!(
        decision
            .errors
            .iter()
            .any(|e| e.contains("task T's saved detector state is unreadable")),
        "{:?}",
        decision.errors
    );
}

#[tokio::test]
async fn a_task_evicted_from_memory_reloads_its_whole_state_from_a_durable_store() {
    let events = trace_events("agent_pair.jsonl");
    let whole = replay_on(&Arc::new(MemoryStore::durable()), &events).await;
    let store = Arc::new(MemoryStore::durable());
    let guard = LoopGuard::builder(Config::default())
        .store(store.clone())
        .build()
        .expect("valid");
    let mut decisions = Vec::new();
    for (line, event) in &events {
        // Evict everything before every event: each one is reloaded.
        let evicted = guard.evict_idle(loopguard_core_types::Timestamp(i64::MAX / 2));
        assert!(decisions.is_empty() || evicted > 0, "the task was evicted");
        let decision = guard.observe_line(*line, event.clone()).await;
        decisions.push(serde_json::to_value(&decision).expect("serializes"));
    }
    assert_eq!(decisions, whole);
}

/// An extension that keeps a state it can never take back: its import
/// always fails. It counts the resets the engine asks for.
#[derive(Debug, Default)]
struct Unrestorable {
    resets: AtomicUsize,
}

#[async_trait]
impl ExtensionDetector for Unrestorable {
    fn name(&self) -> &str {
        "unrestorable"
    }

    fn kinds(&self) -> Vec<String> {
        Vec::new()
    }

    async fn observe(&self, _event: &ObservedEvent<'_>) -> Result<Vec<Detection>, ExtensionError> {
        Ok(Vec::new())
    }

    async fn reset_task(&self, _task: &str) {
        self.resets.fetch_add(1, Ordering::Relaxed);
    }

    async fn export_task(&self, _task: &str) -> Option<serde_json::Value> {
        Some(serde_json::json!({"format": 99}))
    }

    async fn import_task(
        &self,
        _task: &str,
        _state: serde_json::Value,
    ) -> Result<(), ExtensionError> {
        Err(ExtensionError("format 99 is unknown".into()))
    }
}

#[tokio::test]
async fn an_extension_whose_saved_state_cannot_be_restored_starts_the_task_afresh() {
    let store = Arc::new(MemoryStore::durable());
    let first = LoopGuard::builder(Config::default())
        .store(store.clone())
        .extension(Arc::new(Unrestorable::default()))
        .build()
        .expect("valid");
    first.observe(failure("T", "E1")).await;
    drop(first);

    let extension = Arc::new(Unrestorable::default());
    let second = LoopGuard::builder(Config::default())
        .store(store.clone())
        .extension(extension.clone())
        .build()
        .expect("valid");
    let decision = second.observe(failure("T", "E1")).await;
    assert!(
        decision.errors.iter().any(|error| error
            == "detector unrestorable: its saved state was not restored: format 99 is unknown"),
        "{:?}",
        decision.errors
    );
    assert_eq!(
        extension.resets.load(Ordering::Relaxed),
        1,
        "the engine told the detector to start the task afresh"
    );
    // The built-in state was restored all the same.
    assert_eq!(decision.loop_count, 1);
}

/// 13 handoffs between two agents, a day apart, in the given order of days.
fn day_apart_handoffs(days: impl Iterator<Item = u32>) -> Vec<Event> {
    days.enumerate()
        .map(|(index, day)| {
            let (from, to) = if index % 2 == 0 { ("a", "b") } else { ("b", "a") };
            event(&format!(
                r#"{{"type":"handoff","task":"T","from":"{from}","to":"{to}","ts":"2026-10-{day:02}T10:00:00Z"}}"#
            ))
        })
        .collect()
}

#[tokio::test]
async fn time_running_backwards_never_makes_a_window_span_more_than_its_length() {
    // A day apart: never 4 exchanges within 600 s, whichever the order.
    for (order, days) in [
        ("ascending", day_apart_handoffs(1..=13)),
        ("descending", day_apart_handoffs((1..=13).rev())),
    ] {
        let guard = LoopGuard::new(Config::default()).expect("engine");
        let mut found = Vec::new();
        let mut notes = Vec::new();
        for (line, handoff) in (1..).zip(days) {
            let decision = guard.observe_line(line, handoff).await;
            found.extend(decision.detections);
            notes.extend(decision.notes);
        }
        assert!(found.is_empty(), "{order}: {found:?}");
        if order == "descending" {
            // Every event after the first went back in time: each is
            // counted at the latest time and says so.
            assert_eq!(notes.len(), 12, "{notes:?}");
            assert!(notes[0].contains("time went backwards"), "{}", notes[0]);
        } else {
            assert!(notes.is_empty(), "{notes:?}");
        }
    }
    // Clamped events still count at the task's latest time: four quick
    // exchanges, the last three timed slightly earlier than the first, are
    // one window and a cycle.
    let guard = LoopGuard::new(Config::default()).expect("engine");
    let mut last = None;
    for (line, (from, to, second)) in (1..).zip([
        ("a", "b", 30),
        ("b", "a", 10),
        ("a", "b", 20),
        ("b", "a", 25),
    ]) {
        let handoff = event(&format!(
            r#"{{"type":"handoff","task":"T","from":"{from}","to":"{to}","ts":"2026-10-01T10:00:{second:02}Z"}}"#
        ));
        last = Some(guard.observe_line(line, handoff).await);
    }
    let last = last.expect("four decisions");
    assert_eq!(last.detections.len(), 1, "{last:?}");
    assert_eq!(last.detections[0].kind, "agent_pair");
    assert_eq!(last.notes.len(), 1);
}
