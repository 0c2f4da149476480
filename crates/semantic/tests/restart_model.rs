//! The semantic detectors across a restart with the real model: the
//! reworded requests, queries and topics that only embeddings catch, and
//! the semantic traces through the engine on a durable store.

use std::sync::Arc;

use loopguard_config::Config;
use loopguard_core_types::Event;
use loopguard_semantic::{EmbeddingService, SemanticDetectors, ServiceOptions};

use crate::common::embedder;
use crate::restart::{
    SEMANTIC_TRACES, engine_split_everywhere, event, kinds_decided, split_everywhere,
};

/// A restarted process's service: the shared model, a cache of its own
/// (`cache` texts; 0: every vector computed again).
fn fresh_service(cache: usize) -> Arc<EmbeddingService> {
    Arc::new(
        EmbeddingService::with_options(embedder(), ServiceOptions::new().cache_capacity(cache))
            .unwrap_or_else(|e| panic!("service: {e}")),
    )
}

fn model_detectors(cache: usize) -> SemanticDetectors {
    SemanticDetectors::with_service(&Config::default(), fresh_service(cache))
}

fn line(json: String) -> Event {
    event(&json)
}

#[tokio::test]
async fn reworded_repeats_survive_a_restart_anywhere_with_the_model() {
    let ask = |request: &str| {
        line(format!(
            r#"{{"type":"collaboration","task":"T","from":"planner","to":"coder","request":"{request}"}}"#
        ))
    };
    let query = |content: &str| {
        line(format!(
            r#"{{"type":"handoff","task":"T","from":"planner","to":"researcher","content":"{content}"}}"#
        ))
    };
    let events = vec![
        ask("Can you review this authentication code?"),
        query("Find recent papers on retrieval augmented generation"),
        ask("Can you review this auth code again?"),
        query("Search for recent papers about retrieval augmented generation"),
        event(r#"{"type":"progress","task":"T","tests_failed":3,"coverage":0.41}"#),
        query("Find the latest papers on retrieval-augmented generation"),
        ask("Could you review this authentication code again?"),
        event(r#"{"type":"progress","task":"T","tests_failed":3,"coverage":0.41}"#),
        query("Look up recent research papers on retrieval augmented generation"),
        ask("Update the changelog for the release"),
        ask("Can you please review this authentication code?"),
    ];
    // No cache at all: every vector, before and after the restart, is
    // computed again, and an import's are computed in one batch.
    let whole = split_everywhere(&events, || model_detectors(0)).await;
    let fired: Vec<usize> = whole
        .iter()
        .enumerate()
        .filter(|(_, said)| said_fired(said))
        .map(|(index, _)| index + 1)
        .collect();
    assert!(fired.len() >= 4, "detections on lines {fired:?}");
}

/// Whether any detector fired on this event.
fn said_fired(said: &crate::restart::Said) -> bool {
    said.detections
        .iter()
        .any(|found| found.as_array().is_some_and(|found| !found.is_empty()))
}

#[tokio::test]
async fn the_semantic_traces_split_anywhere_decide_like_one_run_with_the_model() {
    let mut kinds = std::collections::BTreeSet::new();
    for name in SEMANTIC_TRACES {
        kinds.extend(kinds_decided(
            &engine_split_everywhere(name, &|| model_detectors(1_000)).await,
        ));
    }
    for kind in ["collaboration_loop", "repeated_query", "topic_cycle"] {
        assert!(kinds.contains(kind), "{kind} in {kinds:?}");
    }
}

#[tokio::test]
async fn matched_tool_arguments_survive_a_restart_anywhere_with_the_model() {
    let whole = engine_split_everywhere("tool_args_reworded.jsonl", &|| model_detectors(64)).await;
    assert!(
        kinds_decided(&whole).contains("tool_repeat"),
        "the reworded searches are one call: {whole:?}"
    );
}

#[tokio::test]
async fn matched_exchange_texts_survive_a_restart_anywhere_with_the_model() {
    // The orchestrator becomes a hub at the 6th handoff; its reworded
    // instructions and the web surfer's reworded replies bring nothing
    // new, so they count as exchanges: a pair cycle, whichever line the
    // restart falls before.
    let whole = engine_split_everywhere("hub_reworded.jsonl", &|| model_detectors(64)).await;
    assert!(
        kinds_decided(&whole).contains("agent_pair"),
        "the reworded exchanges repeat: {whole:?}"
    );
}
