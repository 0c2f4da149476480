//! The progress evaluator across a restart: what `export_task` gives, put
//! back into a fresh evaluator with `import_task`, decides like one whole
//! run; and through the engine on a durable store.

#[path = "../../../../tests/support/engine_split.rs"]
mod engine_split;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use loopguard_config::Config;
use loopguard_core_types::{Event, EventKind, ProgressSnapshot};
use loopguard_host::{ExtensionDetector, ExtensionError, LoopGuard, MemoryStore};
use loopguard_progress_evaluator::{
    GoalJudge, JudgeError, JudgeRequest, Judgement, ProgressEvaluator, STATE_FORMAT, Verdict,
};
use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::support::{event, feed, workspace_file};
use engine_split::split_on_a_durable_store;

/// A judge whose answer depends only on the question, so that asking
/// again after a restart (answers are not kept) gets the same answer; it
/// remembers what it was asked.
#[derive(Debug, Default)]
struct Steady {
    asked: Mutex<Vec<JudgeRequest>>,
}

#[async_trait]
impl GoalJudge for Steady {
    async fn judge(&self, request: &JudgeRequest) -> Result<Judgement, JudgeError> {
        self.asked.lock().push(request.clone());
        let error = request.current.error.as_str();
        let says = |verdict, reason: &str| {
            Ok(Judgement {
                verdict,
                reason: format!("{reason} (after {} failures)", request.history.len()),
            })
        };
        if error.contains("flaky") {
            Err(JudgeError::Timeout(Duration::from_secs(20)))
        } else if error.contains("parse") {
            says(Verdict::Regressive, "each fix breaks a neighbouring parser")
        } else if error.contains("lexer") {
            says(Verdict::NoProgress, "the same lexer bug in new words")
        } else {
            says(Verdict::Progress, "closer")
        }
    }

    fn describe(&self) -> String {
        "model steady".to_owned()
    }
}

fn failure(task: &str, error: &str) -> Event {
    event(&format!(
        r#"{{"type":"failure","task":"{task}","agent":"coder","error":"{error}"}}"#
    ))
}

fn with_id(mut event: Event, id: &str) -> Event {
    event.id = Some(id.to_owned());
    event
}

/// A coverage (as an orchestrator might compute it) that a JSON number does
/// not carry back exactly: `serde_json` reads "0.9856906946328695" as
/// 0.9856906946328696 unless its `float_roundtrip` feature is on.
const ODD_COVERAGE: f64 = 0.985_690_694_632_869_5;

/// A `progress` event built in code, as an embedding orchestrator would.
fn progress(task: &str, snapshot: ProgressSnapshot) -> Event {
    let mut event = event(&format!(r#"{{"type":"progress","task":"{task}"}}"#));
    event.kind = EventKind::Progress(snapshot);
    event
}

fn failing(total: u64, failed: u64, coverage: f64) -> ProgressSnapshot {
    ProgressSnapshot {
        tests_total: Some(total),
        tests_failed: Some(failed),
        coverage: Some(coverage),
        ..ProgressSnapshot::default()
    }
}

/// Progress that moves and regresses, differing failures that stall,
/// exact repeats, external failures in a run and broken by an agent
/// failure, a goal, ids cited as evidence, failures the judge is asked
/// about (and one it cannot answer), an unchanged coverage that a lossy
/// JSON number would make look changed, several tasks, and a reset by
/// `completed`.
fn busy_sequence() -> Vec<Event> {
    vec![
        event(
            r#"{"type":"handoff","task":"J","from":"planner","to":"coder","goal":"parse TOML tables"}"#,
        ),
        with_id(progress("J", failing(30, 6, ODD_COVERAGE)), "p2"),
        failure("J", "first"),
        with_id(failure("N", "cannot find function load"), "n4"),
        progress(
            "J",
            ProgressSnapshot {
                tests_failed: Some(4),
                ..ProgressSnapshot::default()
            },
        ),
        failure("J", "second"),
        failure("X", "request timed out after 30s"),
        failure("J", "third parse error"),
        with_id(failure("X", "connect ECONNREFUSED 10.0.0.7:443"), "x9"),
        progress("J", failing(30, 4, ODD_COVERAGE)),
        failure("J", "fourth: lexer"),
        failure("J", "fourth: lexer"),
        failure("N", "cannot find struct Settings"),
        failure("J", "fifth: flaky"),
        failure("X", "HTTP 503 Service Unavailable"),
        failure("J", "sixth: flaky again"),
        failure("N", "unresolved import settings"),
        failure("J", "seventh: flaky still"),
        failure("X", "agent error"),
        with_id(progress("S", failing(40, 1, 0.5)), "s20"),
        progress("S", failing(40, 3, 0.5)),
        failure("S", "3 failing"),
        progress("S", failing(40, 5, 0.5)),
        failure("N", "a fourth differing error"),
        progress("S", failing(40, 8, 0.49)),
        failure("X", "request timed out after 30s"),
        event(r#"{"type":"completed","task":"S"}"#),
        progress("S", failing(40, 2, 0.6)),
        progress("S", failing(40, 4, 0.6)),
        failure("N", "yet another error"),
        // An exact repeat of the task's oldest remembered failure: not a
        // differing one (else it would be the third in a row).
        failure("N", "cannot find function load"),
        failure("N", "and another"),
        progress(
            "J",
            ProgressSnapshot {
                files_changed: Some(3),
                ..ProgressSnapshot::default()
            },
        ),
        failure("J", "eighth parse error"),
        failure("J", "ninth parse error"),
        event(r#"{"type":"human","task":"N","note":"looked at it"}"#),
        failure("N", "after the human"),
        failure("J", "tenth"),
    ]
}

/// Every task's state, through JSON text as a store keeps it.
async fn export_all(
    evaluator: &ProgressEvaluator,
    tasks: &BTreeSet<String>,
) -> Vec<(String, Value)> {
    let mut saved = Vec::new();
    for task in tasks {
        if let Some(state) = evaluator.export_task(task).await {
            let text = serde_json::to_string(&state).unwrap_or_else(|e| panic!("{e}"));
            let state = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
            saved.push((task.clone(), state));
        }
    }
    saved
}

fn with_judge(judge: &Arc<Steady>) -> ProgressEvaluator {
    ProgressEvaluator::new(&Config::default()).with_judge(Arc::clone(judge) as _)
}

/// `events` whole, then split before every event with the state of the
/// first part imported into a fresh evaluator (and a fresh judge: its
/// answers are not kept): the same detections, and the judge asked the
/// same questions. Returns the whole run.
async fn split_everywhere(events: &[Event], judged: bool) -> Vec<Value> {
    let tasks: BTreeSet<String> = events.iter().map(|event| event.task.clone()).collect();
    let make = |judge: &Arc<Steady>| {
        if judged {
            with_judge(judge)
        } else {
            ProgressEvaluator::new(&Config::default())
        }
    };
    let whole_judge = Arc::new(Steady::default());
    let whole = feed(&make(&whole_judge), 1, events).await;
    let whole_asked = whole_judge.asked.lock().clone();
    for split in 0..=events.len() {
        let (judge_before, judge_after) =
            (Arc::new(Steady::default()), Arc::new(Steady::default()));
        let before = make(&judge_before);
        let mut said = feed(&before, 1, &events[..split]).await;
        let saved = export_all(&before, &tasks).await;
        drop(before);
        let after = make(&judge_after);
        for (task, state) in saved {
            after
                .import_task(&task, state)
                .await
                .unwrap_or_else(|e| panic!("split before {}: {e}", split + 1));
        }
        said.extend(feed(&after, split as u64 + 1, &events[split..]).await);
        assert_eq!(said, whole, "split before event {}", split + 1);
        let mut asked = judge_before.asked.lock().clone();
        asked.extend(judge_after.asked.lock().iter().cloned());
        assert_eq!(
            asked,
            whole_asked,
            "split before event {}: questions",
            split + 1
        );
    }
    whole
}

fn kinds_fired(said: &[Value]) -> BTreeSet<String> {
    said.iter()
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(|d| d["kind"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn a_restart_anywhere_evaluates_like_one_run() {
    let events = busy_sequence();
    let whole = split_everywhere(&events, false).await;
    let kinds = kinds_fired(&whole);
    for kind in ["regression", "no_progress", "external_failure"] {
        assert!(kinds.contains(kind), "{kind} in {kinds:?}");
    }
}

#[tokio::test]
async fn a_restart_anywhere_evaluates_like_one_run_with_a_judge() {
    let events = busy_sequence();
    let whole = split_everywhere(&events, true).await;
    let reasons: Vec<String> = whole
        .iter()
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(|d| d["reason"].as_str().map(str::to_owned))
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("LLM judge (model steady)")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.contains("LLM unreachable")),
        "a judge note: {reasons:?}"
    );
}

#[tokio::test]
async fn without_its_state_a_restarted_evaluator_decides_otherwise() {
    // The contrast that shows the split test can fail.
    let events = busy_sequence();
    let whole = feed(&ProgressEvaluator::new(&Config::default()), 1, &events).await;
    let mut differs = 0;
    for split in 1..events.len() {
        let mut said = feed(
            &ProgressEvaluator::new(&Config::default()),
            1,
            &events[..split],
        )
        .await;
        said.extend(
            feed(
                &ProgressEvaluator::new(&Config::default()),
                split as u64 + 1,
                &events[split..],
            )
            .await,
        );
        differs += usize::from(said != whole);
    }
    assert!(differs > events.len() / 2, "{differs} splits differ");
}

#[tokio::test]
async fn the_export_is_versioned_and_bounded_by_the_windows() {
    let evaluator = with_judge(&Arc::new(Steady::default()));
    let mut events = vec![event(
        r#"{"type":"handoff","task":"T","from":"a","to":"b","goal":"ship it"}"#,
    )];
    events.extend((0..200).map(|n| failure("T", &format!("error number {n}"))));
    events.extend((0..40).map(|_| failure("T", "request timed out")));
    feed(&evaluator, 1, &events).await;
    let state = evaluator
        .export_task("T")
        .await
        .unwrap_or_else(|| panic!("a state"));
    assert_eq!(state["format"], json!(STATE_FORMAT));
    assert_eq!(state["goal"], "ship it");
    let len = |key: &str| state[key].as_array().map_or(0, Vec::len);
    assert_eq!(len("recent"), 10, "failures.history");
    assert_eq!(len("failures"), 10, "failures.history");
    assert_eq!(len("external_seen"), 16);
    assert!(len("stalled_seen") <= 16);
    assert_eq!(state["external"], 40);
    let text = state.to_string();
    assert!(text.len() < 4_000, "{} bytes: {text}", text.len());
    // The judge's cache is not part of it, and a task never seen has none.
    assert!(!text.contains("closer"), "{text}");
    assert!(evaluator.export_task("nobody").await.is_none());
    // Without a judge, neither the goal nor the messages are kept.
    let plain = ProgressEvaluator::new(&Config::default());
    feed(&plain, 1, &events).await;
    let state = plain
        .export_task("T")
        .await
        .unwrap_or_else(|| panic!("a state"));
    assert!(
        state.get("goal").is_none() && state.get("failures").is_none(),
        "{state}"
    );
}

#[tokio::test]
async fn a_bad_state_is_an_error_naming_the_detector_and_the_task_starts_afresh() {
    let evaluator = ProgressEvaluator::new(&Config::default());
    let two = [failure("T", "a"), failure("T", "b")];
    feed(&evaluator, 1, &two).await;
    let good = evaluator
        .export_task("T")
        .await
        .unwrap_or_else(|| panic!("a state"));
    let with = |key: &str, value: Value| {
        let mut state = good.clone();
        state[key] = value;
        state
    };
    let mut without_field = good.clone();
    if let Some(object) = without_field.as_object_mut() {
        object.remove("stalled");
    }
    let bad = [
        (
            with("format", json!(STATE_FORMAT + 1)),
            "has format 2, and this loopguard reads format 1",
        ),
        (with("format", json!(-1)), "not a version number"),
        (json!({"recent": []}), "has no \"format\""),
        (json!("garbage"), "is not a JSON object"),
        (
            with("vectors", json!([0.5])),
            "is malformed: unknown field `vectors`",
        ),
        (without_field, "is malformed: missing field `stalled`"),
        (with("recent", json!(["xyz"])), "not 32 hex digits"),
        (
            with("external_seen", json!([{"line": 1, "kind": "gremlins"}])),
            "unknown external failure kind \"gremlins\"",
        ),
        (
            with("metrics", json!({"coverage": "most"})),
            "coverage that is not a number",
        ),
        (
            with(
                "stalled_seen",
                json!(
                    (1..=17)
                        .map(|line| json!({"line": line}))
                        .collect::<Vec<_>>()
                ),
            ),
            "has 17 stalled failures, more than the 16 ever kept",
        ),
    ];
    for (state, problem) in bad {
        let err: ExtensionError = evaluator
            .import_task("T", state.clone())
            .await
            .expect_err(&format!("{state} is refused"));
        let message = err.to_string();
        assert!(message.starts_with("progress: task 'T'"), "{message}");
        assert!(message.contains(problem), "{message} (wanted {problem})");
        assert!(message.ends_with("the task starts afresh"), "{message}");
        assert_eq!(evaluator.live_tasks(), 0, "the task was forgotten");
    }
    // Afresh: "c" is a first failure again, not the third in a row.
    assert_eq!(feed(&evaluator, 3, &[failure("T", "c")]).await, [json!([])]);
    // And the good state does put it back: "c" is now the third.
    let fresh = ProgressEvaluator::new(&Config::default());
    fresh
        .import_task("T", good)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let third = feed(&fresh, 3, &[failure("T", "c")]).await;
    assert_eq!(third[0][0]["kind"], "no_progress");
    assert_eq!(third[0][0]["evidence"], json!([1, 2, 3]));
}

// --- Through the engine, on a durable store ------------------------------

fn trace(name: &str) -> Vec<Event> {
    workspace_file(&format!("traces/{name}"))
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(event)
        .collect()
}

/// An engine as the command line builds one for `config` (the evaluator,
/// here with `judge` when given), on `store`.
fn engine_on(config: &Config, store: &Arc<MemoryStore>, judge: Option<&Arc<Steady>>) -> LoopGuard {
    let mut evaluator = ProgressEvaluator::new(config);
    if let Some(judge) = judge {
        evaluator = evaluator.with_judge(Arc::clone(judge) as _);
    }
    LoopGuard::builder(config.clone())
        .store(Arc::clone(store) as _)
        .extension(Arc::new(evaluator))
        .build()
        .unwrap_or_else(|e| panic!("engine: {e}"))
}

/// `events` whole on one engine, then split before every event across two
/// engines (each with a fresh evaluator and judge) on one durable store:
/// the same decisions. Returns the whole run.
async fn engine_split_everywhere(config: &Config, events: &[Event], judged: bool) -> Vec<Value> {
    let judge = || judged.then(|| Arc::new(Steady::default()));
    split_on_a_durable_store(
        events,
        |store| engine_on(config, store, judge().as_ref()),
        |split, halves, whole| assert_eq!(halves, whole, "split before event {}", split + 1),
    )
    .await
}

#[tokio::test]
async fn the_engine_split_anywhere_on_a_durable_store_decides_like_one_run() {
    let config = Config::from_toml_str(&workspace_file("configs/progress.toml"))
        .unwrap_or_else(|e| panic!("tests/configs/progress.toml: {e}"));
    let whole = engine_split_everywhere(&config, &trace("progress.jsonl"), false).await;
    let kinds: BTreeSet<String> = whole
        .iter()
        .filter_map(|d| d["detections"].as_array())
        .flatten()
        .filter_map(|d| d["kind"].as_str().map(str::to_owned))
        .collect();
    for kind in ["regression", "no_progress", "external_failure"] {
        assert!(kinds.contains(kind), "{kind} in {kinds:?}");
    }
    engine_split_everywhere(&config, &trace("progress_judge.jsonl"), true).await;
    engine_split_everywhere(&config, &busy_sequence(), false).await;
    engine_split_everywhere(&config, &busy_sequence(), true).await;
}
