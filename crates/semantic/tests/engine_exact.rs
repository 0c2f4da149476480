//! The semantic detectors with semantic matching off (exact normalized
//! text), and their bookkeeping with a toy embedder: no model needed.

use std::sync::Arc;

use loopguard_config::Config;
use loopguard_core_types::{Action, Decision, Event, TaskStatus};
use loopguard_host::LoopGuard;
use loopguard_semantic::{
    EXACT_SUFFIX, Embedder, EmbeddingService, Result, SemanticDetectors, SemanticLimits,
};

fn event(json: &str) -> Event {
    Event::from_json(json).unwrap_or_else(|e| panic!("{json}: {e}"))
}

fn collab(task: &str, from: &str, to: &str, request: &str) -> Event {
    event(&format!(
        r#"{{"type":"collaboration","task":"{task}","from":"{from}","to":"{to}","request":"{request}"}}"#
    ))
}

fn handoff(task: &str, to: &str, content: &str) -> Event {
    event(&format!(
        r#"{{"type":"handoff","task":"{task}","from":"planner","to":"{to}","content":"{content}"}}"#
    ))
}

fn engine(detectors: &SemanticDetectors) -> LoopGuard {
    detectors
        .install(LoopGuard::builder(Config::default()))
        .build()
        .unwrap_or_else(|e| panic!("engine: {e}"))
}

async fn replay(guard: &LoopGuard, events: Vec<Event>) -> Vec<Decision> {
    let mut decisions = Vec::new();
    for (index, event) in events.into_iter().enumerate() {
        decisions.push(guard.observe_line(index as u64 + 1, event).await);
    }
    decisions
}

fn kinds_at(decision: &Decision) -> Vec<&str> {
    decision
        .detections
        .iter()
        .map(|d| d.kind.as_ref())
        .collect()
}

#[tokio::test]
async fn exact_repeats_are_loops_and_say_semantic_matching_is_off() {
    let mut config = Config::default();
    config.semantic.enabled = false;
    let detectors = SemanticDetectors::exact(&config);
    assert!(!detectors.is_semantic());
    assert!(detectors.topics().is_none(), "topic_cycle keeps exact text");
    assert!(detectors.service().is_none());
    let guard = engine(&detectors);
    let decisions = replay(
        &guard,
        vec![
            collab(
                "T",
                "planner",
                "coder",
                "Can you review this authentication code?",
            ),
            collab(
                "T",
                "planner",
                "coder",
                "Can you review this auth code again?",
            ),
            collab(
                "T",
                "planner",
                "coder",
                "can you REVIEW this authentication code",
            ),
            collab(
                "T",
                "planner",
                "tester",
                "Can you review this authentication code?",
            ),
            collab(
                "T",
                "planner",
                "coder",
                "Can you review this authentication code?!",
            ),
            collab(
                "T",
                "planner",
                "coder",
                "Can you review this authentication code?",
            ),
        ],
    )
    .await;
    let loops: Vec<u32> = decisions.iter().map(|d| d.loop_count).collect();
    // The rewording (line 2) and the other agent (line 4) do not count.
    assert_eq!(loops, [0, 0, 1, 1, 2, 3]);
    assert_eq!(kinds_at(&decisions[2]), ["collaboration_loop"]);
    let third = &decisions[2].detections[0];
    assert_eq!(third.kind, "collaboration_loop");
    assert_eq!(
        third.reason,
        format!("request from 'planner' to 'coder' repeats line 1's {EXACT_SUFFIX}")
    );
    assert!(third.reason.contains("semantic matching is off"));
    assert_eq!(third.similarity, Some(1.0));
    assert_eq!(third.threshold, Some(0.85));
    assert_eq!(third.matched_line, Some(1));
    assert_eq!(third.evidence, [1, 3]);
    // The latest equal request is the match.
    let last = decisions[5]
        .detections
        .iter()
        .find(|d| d.kind == "collaboration_loop")
        .expect("a collaboration loop");
    assert_eq!(last.matched_line, Some(5));
    assert_eq!(decisions[5].action, Action::Escalate);
    assert_eq!(decisions[5].status, TaskStatus::Escalated);
    for decision in &decisions {
        for detection in &decision.detections {
            if detection.kind == "collaboration_loop" {
                assert!(detection.reason.ends_with(EXACT_SUFFIX), "{detection:?}");
            }
        }
    }
}

#[tokio::test]
async fn exact_repeated_queries_count_until_progress() {
    let detectors = SemanticDetectors::exact(&Config::default());
    let guard = engine(&detectors);
    let decisions = replay(
        &guard,
        vec![
            handoff("T", "researcher", "Find papers on RAG"),
            handoff("T", "researcher", "find papers on rag."),
            handoff("T", "researcher", "Search for papers about RAG"),
            handoff("T", "researcher", "Find papers on RAG!"),
            event(r#"{"type":"progress","task":"T","tests_failed":2}"#),
            handoff("T", "researcher", "Find papers on RAG"),
        ],
    )
    .await;
    let repeated = |decision: &Decision| {
        decision
            .detections
            .iter()
            .find(|d| d.kind == "repeated_query")
            .cloned()
    };
    assert!(repeated(&decisions[1]).is_some(), "{:?}", decisions[1]);
    let second = repeated(&decisions[3]).expect("the second repeat");
    assert_eq!(second.severity, loopguard_core_types::Severity::Medium);
    assert_eq!(second.evidence, [1, 2, 4]);
    assert_eq!(second.count, Some(3));
    assert!(second.reason.ends_with(EXACT_SUFFIX), "{}", second.reason);
    assert!(
        second.reason.contains("no new information since line 1"),
        "{}",
        second.reason
    );
    assert!(repeated(&decisions[2]).is_none(), "a rewording");
    assert!(
        repeated(&decisions[5]).is_none(),
        "new information at line 5"
    );
}

#[tokio::test]
async fn exact_similarity_is_one_for_equal_normalized_text_and_zero_otherwise() -> Result<()> {
    let detectors = SemanticDetectors::exact(&Config::default());
    assert_eq!(
        detectors.similarity("Fix the bug!", "fix THE bug").await?,
        1.0
    );
    assert_eq!(
        detectors.similarity("Fix the bug", "Fix the bugs").await?,
        0.0
    );
    assert_eq!(detectors.similarity("?!", "?!").await?, 0.0, "no words");
    Ok(())
}

#[tokio::test]
async fn from_config_with_semantic_matching_off_loads_nothing() -> Result<()> {
    let mut config = Config::default();
    config.semantic.enabled = false;
    // A model directory that does not exist is not looked at.
    config.semantic.model_dir = Some("/nonexistent/loopguard-models".into());
    config.semantic.offline = Some(true);
    let detectors = SemanticDetectors::from_config(&config)?;
    assert!(!detectors.is_semantic());
    Ok(())
}

/// A toy model: one axis per first word, so texts starting with the same
/// word are "the same" (cosine 1) and others are not (cosine 0).
struct FirstWord;

impl Embedder for FirstWord {
    fn model_id(&self) -> &str {
        "first-word"
    }
    fn dimension(&self) -> usize {
        8
    }
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        Ok(texts
            .iter()
            .map(|text| {
                let first = text.split_whitespace().next().unwrap_or_default();
                let axis = first.bytes().map(usize::from).sum::<usize>() % 8;
                (0..8).map(|i| if i == axis { 1.0 } else { 0.0 }).collect()
            })
            .collect())
    }
}

fn toy_service() -> Arc<EmbeddingService> {
    Arc::new(EmbeddingService::new(Arc::new(FirstWord)).unwrap_or_else(|e| panic!("{e}")))
}

#[tokio::test]
async fn state_is_bounded_per_task_and_forgotten_on_completed() {
    let detectors = SemanticDetectors::with_limits(
        &Config::default(),
        Some(toy_service()),
        SemanticLimits::new().max_tasks(16).histories_per_task(2),
    );
    let guard = engine(&detectors);
    for n in 0..100 {
        guard
            .observe_line(n, collab(&format!("T{n}"), "a", "b", "review it"))
            .await;
    }
    assert!(detectors.collaboration_loop().tasks() <= 16);
    assert!(detectors.repeated_query().tasks() <= 16);

    // Completed forgets the task: the same request is new again.
    let lines = [
        collab("K", "a", "b", "review it"),
        collab("K", "a", "b", "review it again"),
        event(r#"{"type":"completed","task":"K"}"#),
        collab("K", "a", "b", "review it once more"),
    ];
    let decisions = replay(&guard, lines.to_vec()).await;
    assert_eq!(kinds_at(&decisions[1]), ["collaboration_loop"]);
    assert!(
        !kinds_at(&decisions[3]).contains(&"collaboration_loop"),
        "{:?}",
        decisions[3]
    );

    // A task remembers its last 2 pairs: a third pushes the first out.
    let lines = [
        collab("P", "a", "b", "review it"),
        collab("P", "a", "c", "deploy it"),
        collab("P", "a", "d", "test it"),
        collab("P", "a", "b", "review it"),
        collab("P", "a", "d", "test it"),
    ];
    let decisions = replay(&guard, lines.to_vec()).await;
    assert!(decisions[3].detections.is_empty(), "{:?}", decisions[3]);
    assert_eq!(kinds_at(&decisions[4]), ["collaboration_loop"]);
}
