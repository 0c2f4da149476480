//! `[limits]` in the semantic detectors (issue 18): what they keep of a
//! text is bounded by `limits.max_text_bytes` (the stored state never
//! grows with a text's length), what the model reads of one by
//! `EMBEDDING_INPUT_BYTES`, and texts that differ only past the limit stay
//! different where texts are compared exactly. Sizes, never timings.

use std::collections::BTreeSet;
use std::sync::Arc;

use loopguard_config::Config;
use loopguard_core_types::{EMBEDDING_INPUT_BYTES, Event, EventKind};
use loopguard_host::{LoopGuard, MemoryStore};
use loopguard_semantic::{Embedder, EmbeddingService, Result, SemanticDetectors};
use parking_lot::Mutex;
use serde_json::Value;

use crate::restart::{Words, event, export_all, feed, import_all, words_service};

/// 5 MB of words, different for each `n` from its first word on.
fn huge_text(n: usize) -> String {
    let mut text = format!("topic{n} ");
    text.push_str(&"review the code again ".repeat(5_000_000 / 22));
    text
}

fn collaboration(task: &str, to: &str, request: &str) -> Event {
    let mut event = event(&format!(
        r#"{{"type":"collaboration","task":"{task}","from":"planner","to":"{to}","request":"r"}}"#
    ));
    if let EventKind::Collaboration { request: slot, .. } = &mut event.kind {
        *slot = request.to_owned();
    }
    event
}

fn handoff(task: &str, to: &str, content: &str) -> Event {
    let mut event = event(&format!(
        r#"{{"type":"handoff","task":"{task}","from":"planner","to":"{to}","content":"c"}}"#
    ));
    if let EventKind::Handoff { content: slot, .. } = &mut event.kind {
        *slot = Some(content.to_owned());
    }
    event
}

/// Three 5 MB requests and three 5 MB handoff contents in task `T`, then a
/// few small events.
fn huge_events() -> Vec<Event> {
    let mut events = Vec::new();
    for n in 0..3 {
        events.push(collaboration("T", "coder", &huge_text(n)));
        events.push(handoff("T", "researcher", &huge_text(10 + n)));
    }
    for n in 0..5 {
        events.push(collaboration("T", "tester", &format!("small request {n}")));
    }
    events
}

/// Every saved text row (an object with `line` and `text`) in `state`.
fn rows(state: &Value) -> Vec<&Value> {
    let mut found = Vec::new();
    let mut stack = vec![state];
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(map) => {
                if map.contains_key("line") && map.get("text").is_some_and(Value::is_string) {
                    found.push(value);
                }
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    found
}

/// The most a state of `rows` saved texts may take: each text at most
/// `limits.max_text_bytes`, plus 256 bytes for its line, id, length and
/// the JSON around it, plus 4 KB for the rest of the state.
fn bound(config: &Config, rows: usize) -> usize {
    rows * (config.limits.max_text_bytes + 256) + 4096
}

#[tokio::test]
async fn exported_state_does_not_grow_with_a_texts_length() {
    let config = Config::default();
    let detectors = SemanticDetectors::with_service(&config, words_service());
    let events = huge_events();
    feed(&detectors, 1, &events).await;
    let tasks = BTreeSet::from(["T".to_owned()]);
    let saved = export_all(&detectors, &tasks).await;
    let mut size = 0;
    let mut count = 0;
    let mut cut = 0;
    for (_, key, state) in &saved {
        let text = serde_json::to_string(state).expect("JSON");
        size += text.len();
        for row in rows(state) {
            count += 1;
            let kept = row["text"].as_str().map_or(0, str::len);
            assert!(
                kept <= config.limits.max_text_bytes,
                "{key}: a text of {kept} bytes"
            );
            // A cut text notes the length of the whole.
            if let Some(len) = row.get("len") {
                cut += 1;
                assert!(len.as_u64() > Some(4_900_000), "{key}: {len}");
            }
        }
    }
    // 3 requests, 3 contents (kept as queries to their recipients and as
    // their senders' replies), and the last 4 members of the one topic
    // they share: 13 cut rows.
    assert_eq!(cut, 13, "{saved:.2000?}");
    println!("exported state: {size} bytes for {count} rows");
    assert!(
        size <= bound(&config, count),
        "{size} bytes for {count} rows"
    );

    // Imported again, the cut texts embed like the whole ones: a repeat
    // of a 5 MB request after the restart is still a repeat.
    let restarted = SemanticDetectors::with_service(&config, words_service());
    import_all(&restarted, &saved).await;
    let said = feed(
        &restarted,
        100,
        &[collaboration("T", "coder", &huge_text(0))],
    )
    .await;
    let found = &said[0].detections;
    assert!(
        found
            .iter()
            .any(|d| d.to_string().contains("collaboration_loop")),
        "{found:?}"
    );
}

#[tokio::test]
async fn the_engines_stored_state_does_not_grow_with_a_texts_length() {
    let config = Config::default();
    let store = Arc::new(MemoryStore::durable());
    let detectors = SemanticDetectors::with_service(&config, words_service());
    let guard = detectors
        .install(LoopGuard::builder(config.clone()).store(Arc::clone(&store) as _))
        .build()
        .expect("engine");
    let events = huge_events();
    for (index, event) in events.iter().enumerate() {
        let decision = guard.observe_line(index as u64 + 1, event.clone()).await;
        assert!(decision.errors.is_empty(), "{:?}", decision.errors);
    }
    let record = loopguard_host::Store::load_record(store.as_ref(), "T")
        .await
        .expect("the store answers")
        .expect("the task is stored");
    let state = record.state.expect("a durable store keeps the state");
    let value: Value = serde_json::from_str(&state).expect("JSON");
    let count = rows(&value).len();
    println!("stored state: {} bytes for {count} rows", state.len());
    assert!(count >= 12, "{state:.2000}");
    assert!(
        state.len() <= bound(&config, count),
        "{} bytes for {count} rows",
        state.len()
    );
}

#[tokio::test]
async fn exact_texts_differing_past_the_limit_stay_different() {
    let config = Config::default();
    let detectors = SemanticDetectors::exact(&config);
    let base = "review the code again ".repeat(1_000);
    let (one, two) = (format!("{base} one"), format!("{base} two"));
    let events = [
        collaboration("T", "coder", &one),
        collaboration("T", "coder", &two),
        collaboration("T", "coder", &one),
    ];
    let said = feed(&detectors, 1, &events).await;
    let loops = |index: usize| {
        said[index]
            .detections
            .iter()
            .filter(|d| d.to_string().contains("collaboration_loop"))
            .count()
    };
    // Line 2 differs from line 1 only past the limit: not a repeat. Line 3
    // repeats line 1.
    assert_eq!((loops(1), loops(2)), (0, 1), "{said:?}");
    let saved = export_all(&detectors, &BTreeSet::from(["T".to_owned()])).await;
    for (key, row) in saved.iter().flat_map(|(_, key, state)| {
        rows(state)
            .into_iter()
            .map(move |row| (key.clone(), row.clone()))
    }) {
        let kept = row["text"].as_str().map_or(0, str::len);
        assert!(kept <= config.limits.max_text_bytes, "{key}: {kept}");
    }
    // And across a restart, still so.
    let restarted = SemanticDetectors::exact(&config);
    import_all(&restarted, &saved).await;
    let said = feed(&restarted, 10, &[collaboration("T", "coder", &two)]).await;
    assert!(
        said[0]
            .detections
            .iter()
            .any(|d| d.to_string().contains("collaboration_loop")),
        "{said:?}"
    );
}

/// [`Words`], remembering the longest text it was given.
#[derive(Debug, Default)]
struct Recording {
    longest: Mutex<usize>,
}

impl Embedder for Recording {
    fn model_id(&self) -> &str {
        "recording"
    }

    fn dimension(&self) -> usize {
        Words.dimension()
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let mut longest = self.longest.lock();
        for text in texts {
            *longest = (*longest).max(text.len());
        }
        Words.embed_batch(texts)
    }
}

#[tokio::test]
async fn the_model_reads_a_bounded_prefix_of_a_long_text() {
    let recording = Arc::new(Recording::default());
    let service =
        EmbeddingService::new(Arc::clone(&recording) as Arc<dyn Embedder>).expect("service");
    // Multi-byte characters, so that the cut must find a boundary.
    let text = format!("ünïcode {}", "wörds and more wörds ".repeat(250_000));
    let whole = service.embed(&text).await.expect("embeds");
    assert!(*recording.longest.lock() <= EMBEDDING_INPUT_BYTES);
    let prefix = loopguard_core_types::truncate_to_char_boundary(&text, EMBEDDING_INPUT_BYTES);
    assert_eq!(whole, service.embed(prefix).await.expect("embeds"));
    // One inference: the prefix is the cached input of the whole.
    assert_eq!(service.stats().texts_embedded, 1);
    assert_eq!(service.cached(&text), Some(whole));
}
