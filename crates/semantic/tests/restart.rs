//! The semantic detectors across a restart: what `export_task` gives, put
//! back into fresh detectors with `import_task`, decides like one whole
//! run. With a toy embedder and with semantic matching off: no model
//! needed (the real model's turn is in `restart_model`).

#[path = "../../../tests/support/engine_split.rs"]
mod engine_split;

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use loopguard_config::Config;
use loopguard_core_types::{Detection, Event, EventKind, ProgressSnapshot};
use loopguard_detectors::{ObservedEvent, SemanticTopic};
use loopguard_host::{
    ExtensionDetector, ExtensionError, LoopGuard, MemoryStore, TopicAssigner, topic_text,
};
use loopguard_semantic::engine::STATE_FORMAT;
use loopguard_semantic::{
    Embedder, EmbeddingService, Result, SemanticDetectors, SemanticLimits, ServiceOptions,
};
use serde_json::{Value, json};

use engine_split::split_on_a_durable_store;

/// A bag of words: each lowercase word hashed (FNV-1a) into one of 32
/// dimensions. Texts sharing most of their words are close: "review the
/// auth code" and "review the auth code again" are 0.894 apart (above
/// 0.85), with "please" as well 0.816 (below).
#[derive(Debug)]
pub(crate) struct Words;

impl Embedder for Words {
    fn model_id(&self) -> &str {
        "words"
    }

    fn dimension(&self) -> usize {
        32
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        Ok(texts
            .iter()
            .map(|text| {
                let mut vector = vec![0.0f32; 32];
                for word in text
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|word| !word.is_empty())
                {
                    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
                    for byte in word.to_lowercase().bytes() {
                        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
                    }
                    vector[(hash % 32) as usize] += 1.0;
                }
                let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
                vector.iter_mut().for_each(|x| *x /= norm);
                vector
            })
            .collect())
    }
}

/// A fresh service over [`Words`]: a restarted process has an empty cache.
pub(crate) fn words_service() -> Arc<EmbeddingService> {
    Arc::new(EmbeddingService::new(Arc::new(Words)).unwrap_or_else(|e| panic!("service: {e}")))
}

/// Small windows, so that a short sequence evicts pairs, rows and topics.
pub(crate) fn small_limits() -> SemanticLimits {
    SemanticLimits::new()
        .histories_per_task(2)
        .rows_per_history(3)
        .topics_per_task(3)
        .rows_per_topic(2)
}

pub(crate) fn event(json: &str) -> Event {
    Event::from_json(json).unwrap_or_else(|e| panic!("{json}: {e}"))
}

fn collab(task: &str, from: &str, to: &str, request: &str) -> Event {
    event(&format!(
        r#"{{"type":"collaboration","task":"{task}","from":"{from}","to":"{to}","request":"{request}"}}"#
    ))
}

fn handoff(task: &str, from: &str, to: &str, content: &str) -> Event {
    event(&format!(
        r#"{{"type":"handoff","task":"{task}","from":"{from}","to":"{to}","content":"{content}"}}"#
    ))
}

/// A coverage (as an orchestrator might compute it) that a JSON number does
/// not carry back exactly: `serde_json` reads "0.9856906946328695" as
/// 0.9856906946328696 unless its `float_roundtrip` feature is on.
pub(crate) const ODD_COVERAGE: f64 = 0.985_690_694_632_869_5;

/// A `progress` event built in code, as an embedding orchestrator would.
pub(crate) fn progress(task: &str, tests_failed: Option<u64>, coverage: f64) -> Event {
    let mut event = event(&format!(r#"{{"type":"progress","task":"{task}"}}"#));
    event.kind = EventKind::Progress(ProgressSnapshot {
        tests_failed,
        coverage: Some(coverage),
        ..ProgressSnapshot::default()
    });
    event
}

fn with_id(mut event: Event, id: &str) -> Event {
    event.id = Some(id.to_owned());
    event
}

/// A sequence that exercises every piece of per-task state: repeats in
/// one pair and in another, a pair and a recipient forgotten (two per
/// task), a request window that overflows (three per pair), progress that
/// is new information and progress that is not (a coverage whose shortest
/// decimal form a JSON number may not carry back exactly), topics joined, started and forgotten (three per task), ids
/// cited as evidence, a second task, and a reset by `completed`.
pub(crate) fn busy_sequence() -> Vec<Event> {
    let auth = "review the auth code";
    let again = "review the auth code again";
    let papers = "find papers on retrieval augmented generation";
    vec![
        with_id(collab("A", "planner", "coder", auth), "a1"),
        with_id(collab("A", "planner", "coder", again), "a2"),
        handoff("A", "planner", "researcher", papers),
        collab("A", "planner", "tester", auth),
        with_id(
            handoff(
                "A",
                "planner",
                "researcher",
                "find recent papers on retrieval augmented generation",
            ),
            "q5",
        ),
        progress("A", Some(3), ODD_COVERAGE),
        handoff("A", "planner", "researcher", papers),
        progress("A", None, ODD_COVERAGE),
        handoff(
            "A",
            "planner",
            "researcher",
            "find papers on retrieval augmented generation please",
        ),
        collab("A", "planner", "coder", again),
        handoff("B", "a", "b", "deploy the staging cluster"),
        collab("A", "coder", "planner", "update the changelog"),
        collab("A", "planner", "tester", auth),
        handoff(
            "A",
            "reviewer",
            "planner",
            "please review the auth code again",
        ),
        collab("A", "planner", "coder", "review auth code"),
        collab("A", "planner", "coder", "the auth code review"),
        handoff("B", "b", "a", "deploy the staging cluster now"),
        collab("A", "planner", "coder", auth),
        handoff("A", "tester", "coder", "bake the bread at 220 degrees"),
        handoff("A", "coder", "tester", "write the release notes"),
        handoff("A", "tester", "coder", "fix the flaky checkout test"),
        handoff("A", "planner", "researcher", papers),
        event(r#"{"type":"completed","task":"B"}"#),
        handoff("B", "a", "b", "deploy the staging cluster"),
        handoff("B", "a", "b", "deploy the staging cluster"),
        handoff("A", "coder", "reviewer", auth),
        progress("A", None, ODD_COVERAGE),
        handoff("A", "planner", "researcher", papers),
    ]
}

/// What the detectors said about one event: the topic, and each
/// detector's detections.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Said {
    pub(crate) task: String,
    pub(crate) topic: Option<SemanticTopic>,
    /// Each detector's detections, as JSON.
    pub(crate) detections: Vec<Value>,
}

/// Feeds `events` (input lines from `first`) to `detectors` the way the
/// engine does: the topic first, then every extension, then the resets of
/// `completed` and `human`.
pub(crate) async fn feed(detectors: &SemanticDetectors, first: u64, events: &[Event]) -> Vec<Said> {
    let mut said = Vec::new();
    for (index, event) in events.iter().enumerate() {
        let line = first + index as u64;
        let topic = match (detectors.topics(), topic_text(event)) {
            (Some(topics), Some(text)) => topics
                .assign(&event.task, None, line, text)
                .await
                .unwrap_or_else(|e| panic!("line {line}: {e}")),
            _ => None,
        };
        let mut observed = ObservedEvent::new(line, event);
        observed.semantic_topic = topic.as_ref();
        let mut detections = Vec::new();
        for extension in detectors.extensions() {
            let found: Vec<Detection> = extension
                .observe(&observed)
                .await
                .unwrap_or_else(|e| panic!("line {line}: {e}"));
            detections.push(serde_json::to_value(&found).unwrap_or_else(|e| panic!("{e}")));
        }
        if matches!(event.kind, EventKind::Completed | EventKind::Human { .. }) {
            for extension in detectors.extensions() {
                extension.reset_task(&event.task).await;
            }
            if let Some(topics) = detectors.topics() {
                topics.reset_task(&event.task).await;
            }
        }
        said.push(Said {
            task: event.task.clone(),
            topic,
            detections,
        });
    }
    said
}

/// Topic ids made comparable between runs: each becomes the line that
/// started its topic (ids differ between processes; within a task they
/// only tell topics apart).
pub(crate) fn canonical(said: &[Said], first_line: u64) -> Vec<Said> {
    let mut started: HashMap<(String, u64), u64> = HashMap::new();
    said.iter()
        .enumerate()
        .map(|(index, said)| {
            let mut said = said.clone();
            if let Some(topic) = &mut said.topic {
                let line = first_line + index as u64;
                topic.id = *started.entry((said.task.clone(), topic.id)).or_insert(line);
            }
            said
        })
        .collect()
}

/// Every task's state in `detectors`, through JSON text as a store keeps
/// it: (task, key, state), the key being the detector's name or "topics".
pub(crate) async fn export_all(
    detectors: &SemanticDetectors,
    tasks: &BTreeSet<String>,
) -> Vec<(String, String, Value)> {
    let through_text = |value: Value| -> Value {
        let text = serde_json::to_string(&value).unwrap_or_else(|e| panic!("{e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"))
    };
    let mut saved = Vec::new();
    for task in tasks {
        for extension in detectors.extensions() {
            if let Some(state) = extension.export_task(task).await {
                saved.push((
                    task.clone(),
                    extension.name().to_owned(),
                    through_text(state),
                ));
            }
        }
        if let Some(topics) = detectors.topics()
            && let Some(state) = topics.export_task(task).await
        {
            saved.push((task.clone(), "topics".to_owned(), through_text(state)));
        }
    }
    saved
}

/// Puts `saved` back into `detectors`.
pub(crate) async fn import_all(detectors: &SemanticDetectors, saved: &[(String, String, Value)]) {
    for (task, key, state) in saved {
        import_one(detectors, key, task, state.clone())
            .await
            .unwrap_or_else(|e| panic!("import {key} of {task}: {e}"));
    }
}

/// Imports `state` into the part named `key` ("topics": the assigner).
pub(crate) async fn import_one(
    detectors: &SemanticDetectors,
    key: &str,
    task: &str,
    state: Value,
) -> std::result::Result<(), ExtensionError> {
    if key == "topics" {
        let topics = detectors.topics().unwrap_or_else(|| panic!("an assigner"));
        return topics.import_task(task, state).await;
    }
    let extension = detectors
        .extensions()
        .into_iter()
        .find(|extension| extension.name() == key)
        .unwrap_or_else(|| panic!("no detector {key}"));
    extension.import_task(task, state).await
}

/// Replays `events` whole with detectors from `make`, then split before
/// every event: the first part into one set of detectors, its export
/// imported into a fresh set (a restart), the rest into that. Every split
/// must say exactly what the whole run said. Returns the whole run.
pub(crate) async fn split_everywhere(
    events: &[Event],
    make: impl Fn() -> SemanticDetectors,
) -> Vec<Said> {
    let tasks: BTreeSet<String> = events.iter().map(|event| event.task.clone()).collect();
    let whole = canonical(&feed(&make(), 1, events).await, 1);
    let whole_json = json_of(&whole);
    for split in 0..=events.len() {
        let before = make();
        let mut said = feed(&before, 1, &events[..split]).await;
        let saved = export_all(&before, &tasks).await;
        drop(before);
        let after = make();
        import_all(&after, &saved).await;
        said.extend(feed(&after, split as u64 + 1, &events[split..]).await);
        let said = canonical(&said, 1);
        assert_eq!(
            json_of(&said),
            whole_json,
            "split before event {}",
            split + 1
        );
    }
    whole
}

/// The comparable form: serde_json of topics and detections.
pub(crate) fn json_of(said: &[Said]) -> Vec<Value> {
    said.iter()
        .map(|said| {
            let topic = said.topic.as_ref().map(|topic| {
                json!({
                    "id": topic.id,
                    "label": topic.label,
                    "similarity": topic.similarity,
                    "threshold": topic.threshold,
                    "matched_line": topic.matched_line,
                })
            });
            json!({"task": said.task, "topic": topic, "detections": said.detections})
        })
        .collect()
}

/// Kinds fired over a run, to check the sequence shows something.
fn kinds_fired(said: &[Said]) -> BTreeSet<String> {
    said.iter()
        .flat_map(|said| said.detections.iter())
        .filter_map(|found| found.as_array())
        .flatten()
        .filter_map(|detection| detection["kind"].as_str().map(str::to_owned))
        .collect()
}

fn toy(limits: SemanticLimits) -> SemanticDetectors {
    SemanticDetectors::with_limits(&Config::default(), Some(words_service()), limits)
}

fn exact(limits: SemanticLimits) -> SemanticDetectors {
    let mut config = Config::default();
    config.semantic.enabled = false;
    SemanticDetectors::with_limits(&config, None, limits)
}

#[tokio::test]
async fn a_restart_anywhere_decides_like_one_run_with_embeddings() {
    let events = busy_sequence();
    let whole = split_everywhere(&events, || toy(small_limits())).await;
    let kinds = kinds_fired(&whole);
    assert!(
        kinds.contains("collaboration_loop") && kinds.contains("repeated_query"),
        "{kinds:?}"
    );
    // Topics were joined, with a similarity and a match.
    assert!(whole.iter().any(|said| {
        said.topic
            .as_ref()
            .is_some_and(|t| t.matched_line.is_some())
    }));
    // With the default (roomier) windows too.
    split_everywhere(&events, || toy(SemanticLimits::default())).await;
}

#[tokio::test]
async fn a_restart_anywhere_decides_like_one_run_with_exact_text() {
    let events = busy_sequence();
    let whole = split_everywhere(&events, || exact(small_limits())).await;
    let kinds = kinds_fired(&whole);
    assert!(
        kinds.contains("collaboration_loop") && kinds.contains("repeated_query"),
        "{kinds:?}"
    );
    split_everywhere(&events, || exact(SemanticLimits::default())).await;
}

#[tokio::test]
async fn without_its_state_a_restarted_detector_decides_otherwise() {
    // The contrast that shows the split test can fail: the same split
    // without the import loses the repeats of the first part.
    let events = busy_sequence();
    let tasks: BTreeSet<String> = events.iter().map(|e| e.task.clone()).collect();
    let whole = json_of(&canonical(&feed(&toy(small_limits()), 1, &events).await, 1));
    let mut differs = 0;
    for split in 1..events.len() {
        let before = toy(small_limits());
        let mut said = feed(&before, 1, &events[..split]).await;
        let _ = export_all(&before, &tasks).await;
        said.extend(feed(&toy(small_limits()), split as u64 + 1, &events[split..]).await);
        if json_of(&canonical(&said, 1)) != whole {
            differs += 1;
        }
    }
    assert!(differs > events.len() / 2, "{differs} splits differ");
}

#[tokio::test]
async fn the_export_is_versioned_texts_bounded_by_the_windows() {
    let detectors = toy(small_limits());
    let events: Vec<Event> = (0..40)
        .map(|n| collab("T", "planner", "coder", &format!("request number {n}")))
        .chain((0..40).map(|n| handoff("T", "planner", &format!("agent{}", n % 5), "same query")))
        .collect();
    feed(&detectors, 1, &events).await;
    let tasks = BTreeSet::from(["T".to_owned()]);
    let saved = export_all(&detectors, &tasks).await;
    let keys: Vec<&str> = saved.iter().map(|(_, key, _)| key.as_str()).collect();
    assert_eq!(keys, ["collaboration_loop", "repeated_query", "topics"]);
    for (_, key, state) in &saved {
        assert_eq!(state["format"], json!(STATE_FORMAT), "{key}");
        let text = state.to_string();
        assert!(text.len() < 2_000, "{key}: {} bytes: {text}", text.len());
    }
    let pairs = &saved[0].2["pairs"];
    assert_eq!(pairs.as_array().map(Vec::len), Some(1));
    let requests = pairs[0]["requests"].as_array().cloned().unwrap_or_default();
    let lines: Vec<u64> = requests.iter().filter_map(|r| r["line"].as_u64()).collect();
    assert_eq!(lines, [38, 39, 40], "the last three, oldest first");
    assert_eq!(
        requests[2]["text"], "request number 39",
        "texts, not vectors"
    );
    let recipients = saved[1].2["recipients"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let to: Vec<&str> = recipients.iter().filter_map(|r| r["to"].as_str()).collect();
    assert_eq!(
        to,
        ["agent3", "agent4"],
        "two recipients, least recent first"
    );
    let topics = saved[2].2["topics"].as_array().cloned().unwrap_or_default();
    assert!(topics.len() <= 3, "{topics:?}");
    assert!(
        topics
            .iter()
            .all(|t| t["members"].as_array().is_some_and(|m| m.len() <= 2))
    );
    // A task it holds nothing of has nothing to export.
    assert!(
        detectors.extensions()[0]
            .export_task("nobody")
            .await
            .is_none()
    );
}

#[tokio::test]
async fn an_import_embeds_the_window_once_in_one_batch() {
    let before = toy(SemanticLimits::default());
    let events: Vec<Event> = (0..10)
        .map(|n| collab("T", "planner", "coder", &format!("request number {n}")))
        .collect();
    feed(&before, 1, &events).await;
    let collaboration = before.collaboration_loop();
    let state = collaboration
        .export_task("T")
        .await
        .unwrap_or_else(|| panic!("a state"));
    let service = Arc::new(
        EmbeddingService::with_options(Arc::new(Words), ServiceOptions::new())
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let after = SemanticDetectors::with_service(&Config::default(), Arc::clone(&service));
    after
        .collaboration_loop()
        .import_task("T", state)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let stats = service.stats();
    assert_eq!((stats.texts_embedded, stats.batches), (10, 1), "{stats:?}");
    assert_eq!(after.collaboration_loop().tasks(), 1);
}

/// Every way a saved state can be wrong, for a detector named `name`.
fn bad_states(name: &str) -> Vec<(Value, &'static str)> {
    let body = match name {
        "collaboration_loop" => json!({"pairs": [{"from": "a", "to": "b", "requests": []}]}),
        "repeated_query" => json!({"metrics": {}, "recipients": []}),
        _ => json!({"topics": []}),
    };
    let with_format = |format: Value| {
        let mut state = body.clone();
        state["format"] = format;
        state
    };
    let mut extra = with_format(json!(STATE_FORMAT));
    extra["vectors"] = json!([0.5, 0.5]);
    let mut no_words = with_format(json!(STATE_FORMAT));
    let row = json!([{"line": 1, "text": " ?! "}]);
    match name {
        "collaboration_loop" => no_words["pairs"][0]["requests"] = row,
        "repeated_query" => no_words["recipients"] = json!([{"to": "x", "queries": row}]),
        _ => no_words["topics"] = json!([{"id": 1, "label": "l", "members": row}]),
    }
    let mut states = vec![
        (
            with_format(json!(STATE_FORMAT + 1)),
            "has format 2, and this loopguard reads format 1",
        ),
        (with_format(json!("one")), "not a version number"),
        (body.clone(), "has no \"format\""),
        (json!("garbage"), "is not a JSON object"),
        (json!([1, 2, 3]), "is not a JSON object"),
        (extra, "is malformed: unknown field `vectors`"),
        (
            json!({"format": STATE_FORMAT}),
            "is malformed: missing field",
        ),
        (no_words, "line 1's text has no words"),
    ];
    if name == "topics" {
        let topic = json!({"id": 7, "label": "l", "members": []});
        states.push((
            json!({"format": STATE_FORMAT, "topics": [topic, topic]}),
            "has topic id 7 twice",
        ));
    }
    states
}

#[tokio::test]
async fn a_bad_state_is_an_error_naming_the_detector_and_the_task_starts_afresh() {
    for detectors in [
        toy(SemanticLimits::default()),
        exact(SemanticLimits::default()),
    ] {
        // Something to lose: task T is held by every part.
        feed(
            &detectors,
            1,
            &[
                collab("T", "a", "b", "review the auth code"),
                handoff("T", "a", "b", "find papers"),
            ],
        )
        .await;
        let mut names: Vec<String> = detectors
            .extensions()
            .iter()
            .map(|extension| extension.name().to_owned())
            .collect();
        if detectors.topics().is_some() {
            names.push("topics".to_owned());
        }
        for name in &names {
            for (state, problem) in bad_states(name) {
                let err = import_one(&detectors, name, "T", state.clone())
                    .await
                    .expect_err(&format!("{name}: {state} is refused"));
                let message = err.to_string();
                assert!(
                    message.starts_with(&format!("{name}: task 'T'")),
                    "{message}"
                );
                assert!(
                    message.contains(problem),
                    "{name}: {message} (wanted {problem})"
                );
                assert!(message.ends_with("the task starts afresh"), "{message}");
            }
        }
        // The task was forgotten: the same request is no repeat now.
        let said = feed(
            &detectors,
            3,
            &[collab("T", "a", "b", "review the auth code")],
        )
        .await;
        assert_eq!(said[0].detections[0], json!([]));
        assert_eq!(
            said[0].topic.as_ref().map(|topic| topic.similarity),
            detectors.topics().map(|_| None),
            "a new topic"
        );
    }
}

// --- Through the engine, on a durable store ------------------------------

/// The workspace's `tests/traces/NAME`.
pub(crate) fn trace(name: &str) -> Vec<Event> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/traces")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(event)
        .collect()
}

/// An engine as the command line builds one: the semantic detectors on a
/// durable store.
fn engine_on(store: &Arc<MemoryStore>, detectors: &SemanticDetectors) -> LoopGuard {
    detectors
        .install(LoopGuard::builder(Config::default()).store(Arc::clone(store) as _))
        .build()
        .unwrap_or_else(|e| panic!("engine: {e}"))
}

/// The trace whole on one engine, then split before every event across two
/// engines (each with fresh detectors) on one durable store: the same
/// decisions. Returns the whole run.
pub(crate) async fn engine_split_everywhere(
    name: &str,
    make: &impl Fn() -> SemanticDetectors,
) -> Vec<Value> {
    split_on_a_durable_store(
        &trace(name),
        |store| engine_on(store, &make()),
        |split, halves, whole| {
            for (got, want) in halves.iter().zip(whole) {
                assert_eq!(got, want, "{name} split before event {}", split + 1);
            }
            assert_eq!(halves.len(), whole.len());
        },
    )
    .await
}

/// The semantic traces' detections, by kind.
pub(crate) fn kinds_decided(decisions: &[Value]) -> BTreeSet<String> {
    decisions
        .iter()
        .filter_map(|d| d["detections"].as_array())
        .flatten()
        .filter_map(|d| d["kind"].as_str().map(str::to_owned))
        .collect()
}

pub(crate) const SEMANTIC_TRACES: [&str; 3] = [
    "semantic_collaboration.jsonl",
    "repeated_query.jsonl",
    "semantic_topic_cycle.jsonl",
];

#[tokio::test]
async fn the_engine_split_anywhere_on_a_durable_store_decides_like_one_run() {
    let mut kinds = BTreeSet::new();
    for name in SEMANTIC_TRACES {
        kinds.extend(kinds_decided(
            &engine_split_everywhere(name, &|| exact(SemanticLimits::default())).await,
        ));
        engine_split_everywhere(name, &|| toy(SemanticLimits::default())).await;
        engine_split_everywhere(name, &|| toy(small_limits())).await;
    }
    for kind in ["collaboration_loop", "repeated_query"] {
        assert!(kinds.contains(kind), "{kind} in {kinds:?}");
    }
    // And the long sequence, as a trace of its own.
    let whole = split_on_a_durable_store(
        &busy_sequence(),
        |store| engine_on(store, &toy(small_limits())),
        |split, halves, whole| assert_eq!(halves, whole, "split before event {}", split + 1),
    )
    .await;
    assert!(
        kinds_decided(&whole).contains("topic_cycle"),
        "{:?}",
        kinds_decided(&whole)
    );
}

/// A detector that forgets across restarts: it exports nothing.
#[derive(Debug)]
struct Forgetful(Arc<dyn ExtensionDetector>);

#[async_trait]
impl ExtensionDetector for Forgetful {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn kinds(&self) -> Vec<String> {
        self.0.kinds()
    }

    async fn observe(
        &self,
        event: &ObservedEvent<'_>,
    ) -> std::result::Result<Vec<Detection>, ExtensionError> {
        self.0.observe(event).await
    }

    async fn reset_task(&self, task: &str) {
        self.0.reset_task(task).await;
    }
}

/// An assigner that forgets across restarts.
#[derive(Debug)]
struct ForgetfulTopics(Arc<dyn TopicAssigner>);

#[async_trait]
impl TopicAssigner for ForgetfulTopics {
    async fn assign(
        &self,
        task: &str,
        task_type: Option<&str>,
        line: u64,
        text: &str,
    ) -> std::result::Result<Option<SemanticTopic>, ExtensionError> {
        self.0.assign(task, task_type, line, text).await
    }

    async fn reset_task(&self, task: &str) {
        self.0.reset_task(task).await;
    }
}

#[tokio::test]
async fn the_engine_split_without_the_detectors_state_decides_otherwise() {
    // The contrast: the engine keeps its own detectors' state, so what
    // differs here is what the semantic detectors would lose.
    let forgetful = |store: &Arc<MemoryStore>| {
        let detectors = toy(small_limits());
        let mut builder = LoopGuard::builder(Config::default()).store(Arc::clone(store) as _);
        for extension in detectors.extensions() {
            builder = builder.extension(Arc::new(Forgetful(extension)));
        }
        if let Some(topics) = detectors.topics() {
            builder = builder.topics(Arc::new(ForgetfulTopics(topics)));
        }
        builder.build().unwrap_or_else(|e| panic!("engine: {e}"))
    };
    let events = busy_sequence();
    let mut differs = 0;
    split_on_a_durable_store(&events, forgetful, |_, halves, whole| {
        differs += usize::from(halves != whole);
    })
    .await;
    assert!(differs > events.len() / 2, "{differs} splits differ");
}

#[tokio::test]
async fn a_new_topic_after_an_import_takes_an_id_the_task_never_had() {
    // `topic_cycle` keeps counting a task's forgotten topics under their
    // ids, so a new topic must not take one; ids of another process may be
    // anything, here above any this process would draw.
    let old = (1u64 << 62) + 5;
    let state = json!({
        "format": STATE_FORMAT,
        "topics": [{"id": old, "label": "review the auth code",
                    "members": [{"line": 1, "text": "review the auth code"}]}],
    });
    let detectors = toy(SemanticLimits::default());
    let topics = detectors.topics().unwrap_or_else(|| panic!("an assigner"));
    topics
        .import_task("T", state)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let joined = topics
        .assign("T", None, 2, "review the auth code again")
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("a topic"));
    assert_eq!((joined.id, joined.matched_line), (old, Some(1)));
    let started = topics
        .assign("T", None, 3, "deploy the staging cluster")
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("a topic"));
    assert!(started.id > old, "{} > {old}", started.id);
}
