//! Shared by the restart tests of `loopguard-semantic` and
//! `loopguard-progress-evaluator` (each includes this file with `#[path]`):
//! events through the engine, whole and split across a restart on one
//! durable store.

use std::sync::Arc;

use loopguard_core_types::Event;
use loopguard_host::{LoopGuard, MemoryStore};
use serde_json::Value;

/// Input lines `first..` of `events` through `guard`, which must report no
/// errors: its decisions, as JSON.
pub(crate) async fn decide(guard: &LoopGuard, first: u64, events: &[Event]) -> Vec<Value> {
    let mut decisions = Vec::new();
    for (index, event) in events.iter().enumerate() {
        let decision = guard
            .observe_line(first + index as u64, event.clone())
            .await;
        assert!(
            decision.errors.is_empty(),
            "line {}: {:?}",
            decision.line,
            decision.errors
        );
        decisions.push(serde_json::to_value(&decision).unwrap_or_else(|e| panic!("{e}")));
    }
    decisions
}

/// `events` whole on an engine from `engine` (on a durable store of its
/// own), then split before every event from the second across two engines
/// from `engine` on one durable store (a restart). `check` is given each
/// split (the index of the first event after it), the decisions of its two
/// halves and those of the whole run. Returns the whole run's decisions.
pub(crate) async fn split_on_a_durable_store(
    events: &[Event],
    engine: impl Fn(&Arc<MemoryStore>) -> LoopGuard,
    mut check: impl FnMut(usize, &[Value], &[Value]),
) -> Vec<Value> {
    let whole = decide(&engine(&Arc::new(MemoryStore::durable())), 1, events).await;
    for split in 1..events.len() {
        let store = Arc::new(MemoryStore::durable());
        let mut halves = decide(&engine(&store), 1, &events[..split]).await;
        halves.extend(decide(&engine(&store), split as u64 + 1, &events[split..]).await);
        check(split, &halves, &whole);
    }
    whole
}
