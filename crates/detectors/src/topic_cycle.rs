//! Topic cycles: the same topic exchanged between agents again and again
//! (ruling 4).
//!
//! Every `handoff` and `collaboration` between two different agents is an
//! exchange on a topic. The topic is, in order of preference:
//!
//! 1. the [`SemanticTopic`] a semantic topic assigner chose for the event
//!    ([`ObservedEvent::semantic_topic`]), matched by embedding similarity;
//! 2. a handoff's explicit `topic`, normalized ([`normalize_topic`]);
//! 3. a handoff's `content` or a collaboration's `request`, normalized.
//!
//! An event whose text normalizes to nothing has no topic and is not
//! counted (a `topic` of punctuation alone falls back to the content).
//! Exchanges on one topic count together whichever agents made them, and
//! exchanges on different topics never do, even between the same agents.
//! More than `cycles.max_exchanges` (3) exchanges on one topic within
//! `cycles.window_secs` (600 s) is a detection, so the 4th is the first,
//! and every further exchange on the topic in the window fires again with
//! its count. Severity and action follow the same ladder as
//! [`crate::AgentPair`]; the detection never adds to the task's loop count.
//! Without timestamps the window does not apply.
//!
//! Topics are kept as 64-bit hashes; the reason's label (at most
//! [`LABEL_CHARS`] characters) comes from the event that fires, whose
//! normalized text is the topic.
//!
//! ```
//! use loopguard_core_types::Event;
//! use loopguard_config::Config;
//! use loopguard_detectors::{Detector, ObservedEvent, TopicCycle};
//!
//! let detector = TopicCycle::new(&Config::default());
//! let mut state = Default::default();
//! let mut found = Vec::new();
//! for (line, (from, to, topic)) in [
//!     ("a", "b", "Fix the login bug"),
//!     ("b", "c", "fix the LOGIN bug!"),
//!     ("c", "a", "Fix the login bug."),
//!     ("a", "c", "fix  the login-bug"),
//! ]
//! .iter()
//! .enumerate()
//! {
//!     let text = format!(
//!         r#"{{"type":"handoff","task":"T","from":"{from}","to":"{to}","topic":"{topic}"}}"#
//!     );
//!     let event = Event::from_json(&text)?;
//!     detector.observe(&mut state, &ObservedEvent::new(line as u64 + 1, &event), &mut found);
//! }
//! assert_eq!(found.len(), 1);
//! assert!(found[0].reason.starts_with("topic 'fix the login bug'"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::hash::Hasher;

use loopguard_config::{Config, CycleConfig};
use loopguard_core_types::{Detection, EventKind, kinds};
use rustc_hash::FxHasher;

use crate::agent_pair::{
    ExchangeWindow, LruTable, Sweep, WINDOW_CAP, count_text, cycle_detection, window_millis,
    within_text,
};
use crate::{Detector, ObservedEvent};

/// Most topics remembered per task; the least recently used is forgotten
/// first.
pub const MAX_TOPICS: usize = 32;

/// Longest topic label in a reason, in characters.
pub const LABEL_CHARS: usize = 60;

/// A topic chosen by a semantic topic assigner (the semantic crate): the
/// engine passes it in [`ObservedEvent::semantic_topic`].
#[derive(Debug, Clone, PartialEq)]
pub struct SemanticTopic {
    /// A stable id for the topic within its task.
    pub id: u64,
    /// A short label (the text that started the topic).
    pub label: String,
    /// The cosine similarity to the topic, when this event joined an earlier
    /// one (`None` when it started a new topic).
    pub similarity: Option<f32>,
    /// The threshold that was compared with.
    pub threshold: f32,
    /// The earlier line this event's content matched, if it joined a topic.
    pub matched_line: Option<u64>,
}

/// Normalizes free text into a topic key: lowercase, punctuation dropped,
/// whitespace collapsed.
///
/// Words are runs of alphanumeric characters (any script); everything else
/// separates words. Text without any word normalizes to the empty string.
///
/// ```
/// use loopguard_detectors::normalize_topic;
/// assert_eq!(normalize_topic("  Fix: the LOGIN-bug!! "), "fix the login bug");
/// assert_eq!(normalize_topic("?!"), "");
/// ```
pub fn normalize_topic(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for_each_normalized(text, |c| {
        out.push(c);
        true
    });
    out
}

/// Feeds the characters of [`normalize_topic`]'s result to `sink` without
/// building the string (the detector hashes them, so long content costs no
/// allocation); stops early when `sink` returns `false`. A plain loop with
/// an ASCII fast path: iterator adapters here cost more than the hashing.
fn for_each_normalized(text: &str, mut sink: impl FnMut(char) -> bool) {
    // A space is owed after a word, and paid only when another word starts.
    let mut started = false;
    let mut space_owed = false;
    for c in text.chars() {
        if !c.is_alphanumeric() {
            space_owed = started;
            continue;
        }
        if space_owed {
            space_owed = false;
            if !sink(' ') {
                return;
            }
        }
        started = true;
        if c.is_ascii() {
            if !sink(c.to_ascii_lowercase()) {
                return;
            }
        } else {
            for lower in c.to_lowercase() {
                if !sink(lower) {
                    return;
                }
            }
        }
    }
}

/// Key spaces, so that a semantic topic id never equals a text's hash.
const TEXT_KEY: u8 = 0;
const SEMANTIC_KEY: u8 = 1;

/// The key of a text's normalized form, `None` when it is empty.
fn text_key(text: &str) -> Option<u64> {
    let mut hasher = FxHasher::default();
    hasher.write_u8(TEXT_KEY);
    // UTF-8 goes to the hasher in chunks: a hash step per character would
    // cost more than the normalizing. The same normalized text always
    // gives the same chunks, so the same key.
    let mut chunk = [0_u8; 64];
    let mut len = 0;
    let mut empty = true;
    for_each_normalized(text, |c| {
        empty = false;
        if len + 4 > chunk.len() {
            hasher.write(chunk.get(..len).unwrap_or_default());
            len = 0;
        }
        if let Some(free) = chunk.get_mut(len..) {
            // At least 4 bytes are free: any char fits.
            len += c.encode_utf8(free).len();
        }
        true
    });
    hasher.write(chunk.get(..len).unwrap_or_default());
    (!empty).then(|| hasher.finish())
}

fn semantic_key(id: u64) -> u64 {
    let mut hasher = FxHasher::default();
    hasher.write_u8(SEMANTIC_KEY);
    hasher.write_u64(id);
    hasher.finish()
}

/// At most [`LABEL_CHARS`] characters of `chars`, ending in `…` when cut.
fn label(chars: impl Iterator<Item = char>) -> String {
    let mut label: String = chars.take(LABEL_CHARS + 1).collect();
    if label.chars().count() > LABEL_CHARS {
        let keep = label
            .char_indices()
            .nth(LABEL_CHARS - 1)
            .map_or(label.len(), |(index, _)| index);
        label.truncate(keep);
        label.push('…');
    }
    label
}

/// The first characters of `text`'s normalized form, enough for
/// [`label`] to tell whether it must cut.
fn text_label_chars(text: &str) -> String {
    let mut out = String::new();
    let mut left = LABEL_CHARS + 1;
    for_each_normalized(text, |c| {
        out.push(c);
        left -= 1;
        left > 0
    });
    out
}

/// Detects one topic exchanged too often (kind `topic_cycle`).
#[derive(Debug, Clone)]
pub struct TopicCycle {
    cycles: CycleConfig,
    window_ms: i64,
}

/// What [`TopicCycle`] remembers about one task: one exchange window per
/// topic hash, at most [`MAX_TOPICS`] topics. A topic whose exchanges have
/// all left the window is forgotten (it would count from zero anyway).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct TopicCycleState {
    topics: LruTable<ExchangeWindow>,
    sweep: Sweep,
}

impl TopicCycleState {
    /// How many topics are remembered.
    pub fn topics(&self) -> usize {
        self.topics.len()
    }
}

impl TopicCycle {
    /// The detector with the `[cycles]` limits of `config`.
    pub fn new(config: &Config) -> TopicCycle {
        TopicCycle {
            cycles: config.cycles.clone(),
            window_ms: window_millis(&config.cycles),
        }
    }
}

/// Where an event's topic came from.
enum Topic<'a> {
    Semantic(&'a SemanticTopic),
    Text(&'a str),
}

impl Detector for TopicCycle {
    type State = TopicCycleState;
    const WINDOWED: bool = true;
    const CONFIG_SECTION: &'static str = "cycles";
    const KINDS: &'static [&'static str] = &[kinds::TOPIC_CYCLE];

    fn name(&self) -> &'static str {
        "topic_cycle"
    }

    fn observe(
        &self,
        state: &mut TopicCycleState,
        event: &ObservedEvent<'_>,
        out: &mut Vec<Detection>,
    ) {
        let (from, to, texts) = match &event.event.kind {
            EventKind::Handoff {
                from,
                to,
                content,
                topic,
            } => (from, to, [topic.as_deref(), content.as_deref()]),
            EventKind::Collaboration { from, to, request } => {
                (from, to, [Some(request.as_str()), None])
            }
            _ => return,
        };
        if from == to {
            return;
        }
        // Any agent that exchanged the text is an agent of its topic.
        if !event.counts_for(|_| true) {
            // News (ruling 4, trace format 1.2), or a hub's news (ruling
            // 17): work, not a cycle.
            return;
        }
        let found = match event.semantic_topic {
            Some(semantic) => Some((semantic_key(semantic.id), Topic::Semantic(semantic))),
            None => texts
                .into_iter()
                .flatten()
                .find_map(|text| Some((text_key(text)?, Topic::Text(text)))),
        };
        let Some((key, topic)) = found else {
            return;
        };
        state
            .sweep
            .sweep_table(&mut state.topics, event.time, self.window_ms);
        let Some(window) = state.topics.entry(key, MAX_TOPICS, ExchangeWindow::default) else {
            return;
        };
        // The earlier exchanges of the same text count too, once: the loop
        // began there.
        for earlier in event.exchange.earlier() {
            window.add_earlier(event.time, earlier.evidence.clone(), self.window_ms);
        }
        let count = window.record(event.time, event.evidence_ref(), self.window_ms);
        state.sweep.note(event.time, self.window_ms);
        if count <= self.cycles.max_exchanges {
            return;
        }
        let (label, matched) = match topic {
            Topic::Semantic(semantic) => {
                let mut matched = String::from("matched by similarity");
                if let Some(similarity) = semantic.similarity {
                    matched.push_str(&format!(
                        " ({similarity:.2} against threshold {:.2}",
                        semantic.threshold
                    ));
                    if let Some(line) = semantic.matched_line {
                        matched.push_str(&format!(", line {line}"));
                    }
                    matched.push(')');
                }
                (label(semantic.label.chars()), matched)
            }
            Topic::Text(text) => (
                label(text_label_chars(text).chars()),
                String::from("matched by exact normalized text"),
            ),
        };
        let reason = format!(
            "topic '{label}' came up in {} exchanges{} (more than {}), {matched}; latest '{from}' -> '{to}'",
            count_text(count, WINDOW_CAP),
            within_text(event.time, &self.cycles),
            self.cycles.max_exchanges,
        );
        let mut detection = cycle_detection(
            self.name(),
            kinds::TOPIC_CYCLE,
            &self.cycles,
            window,
            (to, vec![from.clone(), to.clone()]),
            reason,
        );
        if let Topic::Semantic(semantic) = topic {
            detection.similarity = semantic.similarity;
            detection.threshold = Some(semantic.threshold);
            detection.matched_line = semantic.matched_line;
        }
        out.push(detection);
    }
}

#[cfg(test)]
mod tests {
    use loopguard_core_types::{Action, Event, Severity};

    use super::*;
    use crate::agent_pair::tests::{run, ts_at};

    fn detector() -> TopicCycle {
        TopicCycle::new(&Config::default())
    }

    fn line(json: &str) -> Event {
        Event::from_json(json).expect("valid")
    }

    fn with_topic(from: &str, to: &str, topic: &str) -> Event {
        line(&format!(
            r#"{{"type":"handoff","task":"T","from":"{from}","to":"{to}","topic":"{topic}","content":"unrelated {from}"}}"#
        ))
    }

    fn with_content(from: &str, to: &str, content: &str) -> Event {
        line(&format!(
            r#"{{"type":"handoff","task":"T","from":"{from}","to":"{to}","content":"{content}"}}"#
        ))
    }

    fn request(from: &str, to: &str, request: &str) -> Event {
        line(&format!(
            r#"{{"type":"collaboration","task":"T","from":"{from}","to":"{to}","request":"{request}"}}"#
        ))
    }

    fn fired(found: &[Vec<Detection>]) -> Vec<(usize, u32)> {
        found
            .iter()
            .enumerate()
            .flat_map(|(index, d)| d.iter().map(move |d| (index + 1, d.count.unwrap_or(0))))
            .collect()
    }

    #[test]
    fn fourth_exchange_on_a_topic_fires_whichever_agents() {
        let events = [
            with_topic("a", "b", "Fix the login bug"),
            with_topic("b", "c", "fix the LOGIN bug!"),
            with_topic("c", "d", "Fix the login bug."),
            with_topic("d", "e", "fix  the login-bug"),
        ];
        let found = run(&detector(), &mut TopicCycleState::default(), 1, &events);
        assert_eq!(fired(&found), vec![(4, 4)]);
        let detection = &found[3][0];
        assert_eq!(detection.detector, "topic_cycle");
        assert_eq!(detection.kind, kinds::TOPIC_CYCLE);
        assert_eq!(detection.severity, Severity::Low);
        assert_eq!(detection.action, Action::BreakCycle);
        assert_eq!(detection.skip_agent.as_deref(), Some("e"));
        assert_eq!(detection.evidence, vec![1, 2, 3, 4]);
        assert_eq!(
            detection.reason,
            "topic 'fix the login bug' came up in 4 exchanges (more than 3), \
             matched by exact normalized text; latest 'd' -> 'e'"
        );
        assert_eq!(
            (
                detection.similarity,
                detection.threshold,
                detection.matched_line
            ),
            (None, None, None)
        );
    }

    #[test]
    fn content_and_requests_are_topics_when_there_is_no_topic() {
        let events = [
            with_content("a", "b", "Write the parser"),
            request("b", "a", "write the parser?"),
            with_topic("a", "b", "write THE parser"),
            with_content("b", "a", "write the parser"),
        ];
        let found = run(&detector(), &mut TopicCycleState::default(), 1, &events);
        assert_eq!(fired(&found), vec![(4, 4)]);
        assert_eq!(found[3][0].skip_agent.as_deref(), Some("a"));
    }

    #[test]
    fn the_explicit_topic_wins_over_the_content() {
        // Same content, different explicit topics: two topics.
        let events = [
            with_topic("a", "b", "parser"),
            with_topic("b", "a", "lexer"),
            with_topic("a", "b", "parser"),
            with_topic("b", "a", "lexer"),
            with_topic("a", "b", "parser"),
            with_topic("b", "a", "lexer"),
        ];
        let mut state = TopicCycleState::default();
        let found = run(&detector(), &mut state, 1, &events);
        assert!(found.iter().all(Vec::is_empty), "{found:?}");
        assert_eq!(state.topics(), 2);
        // The 4th exchange on "parser" fires, with parser lines only.
        let found = run(
            &detector(),
            &mut state,
            7,
            &[with_topic("b", "a", "Parser")],
        );
        assert_eq!(found[0][0].evidence, vec![1, 3, 5, 7]);
    }

    #[test]
    fn empty_topics_self_handoffs_and_other_events_are_not_counted() {
        let mut events = vec![
            line(r#"{"type":"handoff","task":"T","from":"a","to":"b"}"#),
            line(r#"{"type":"handoff","task":"T","from":"a","to":"b","content":"  ...  "}"#),
            request("a", "b", "?!"),
            with_topic("a", "a", "parser"),
            line(r#"{"type":"failure","task":"T","agent":"a","error":"parser"}"#),
            line(r#"{"type":"turn","task":"T","agent":"a","output":"parser","success":false}"#),
            line(r#"{"type":"transition","task":"T","from":"parser","to":"parser"}"#),
        ];
        // A topic of punctuation alone falls back to the content.
        events.push(line(
            r#"{"type":"handoff","task":"T","from":"a","to":"b","topic":"--","content":"Parser"}"#,
        ));
        let mut state = TopicCycleState::default();
        let found = run(&detector(), &mut state, 1, &events);
        assert!(found.iter().all(Vec::is_empty));
        assert_eq!(state.topics(), 1);
        let found = run(
            &detector(),
            &mut state,
            9,
            &[
                with_content("b", "a", "parser"),
                with_content("a", "b", "parser"),
            ],
        );
        assert!(found.iter().all(Vec::is_empty), "{found:?}");
        let found = run(
            &detector(),
            &mut state,
            11,
            &[with_content("b", "a", "parser")],
        );
        assert_eq!(found[0][0].evidence, vec![8, 9, 10, 11]);
    }

    fn observe_semantic(
        state: &mut TopicCycleState,
        line_no: u64,
        event: &Event,
        topic: &SemanticTopic,
    ) -> Vec<Detection> {
        let mut observed = ObservedEvent::new(line_no, event);
        observed.semantic_topic = Some(topic);
        let mut out = Vec::new();
        detector().observe(state, &observed, &mut out);
        out
    }

    #[test]
    fn semantic_topics_win_and_their_match_is_reported() {
        let mut state = TopicCycleState::default();
        let texts = [
            "the login page crashes",
            "login crashes on submit",
            "crash in the login form",
            "login form still crashing",
        ];
        let mut found = Vec::new();
        for (index, text) in texts.iter().enumerate() {
            let topic = SemanticTopic {
                id: 7,
                label: "the login page crashes".into(),
                similarity: (index > 0).then_some(0.9),
                threshold: 0.85,
                matched_line: (index > 0).then_some(1),
            };
            let event = with_topic("a", "b", text);
            found.push(observe_semantic(
                &mut state,
                index as u64 + 1,
                &event,
                &topic,
            ));
        }
        assert_eq!(fired(&found), vec![(4, 4)]);
        let detection = &found[3][0];
        assert_eq!(detection.similarity, Some(0.9));
        assert_eq!(detection.threshold, Some(0.85));
        assert_eq!(detection.matched_line, Some(1));
        assert_eq!(
            detection.reason,
            "topic 'the login page crashes' came up in 4 exchanges (more than 3), \
             matched by similarity (0.90 against threshold 0.85, line 1); latest 'a' -> 'b'"
        );
        // Semantic ids and texts live in different key spaces.
        assert_ne!(semantic_key(7), text_key("7").unwrap_or(0));
        assert_eq!(state.topics(), 1);
    }

    #[test]
    fn window_keeps_exactly_600_seconds() {
        let timed = |secs: u64, millis: u64| {
            line(&format!(
                r#"{{"type":"handoff","task":"T","from":"a","to":"b","topic":"t","ts":"{}"}}"#,
                ts_at(secs, millis)
            ))
        };
        let first = [timed(0, 0), timed(100, 0), timed(200, 0)];
        for (last, fires) in [
            (timed(600, 0), true),
            (timed(600, 1), false),
            (timed(601, 0), false),
        ] {
            let mut events = first.to_vec();
            events.push(last);
            let found = run(&detector(), &mut TopicCycleState::default(), 1, &events);
            assert_eq!(!found[3].is_empty(), fires, "{found:?}");
            if fires {
                assert!(found[3][0].reason.contains("4 exchanges within 600 s"));
            }
        }
    }

    #[test]
    fn ids_are_echoed_in_evidence_ids() {
        let events: Vec<Event> = (0..4)
            .map(|i| {
                line(&format!(
                    r#"{{"type":"collaboration","task":"T","from":"a","to":"b","request":"help","id":"c{i}"}}"#
                ))
            })
            .collect();
        let found = run(&detector(), &mut TopicCycleState::default(), 1, &events);
        assert_eq!(found[3][0].evidence_ids, vec!["c0", "c1", "c2", "c3"]);
    }

    #[test]
    fn topics_are_capped_and_the_least_recently_used_is_forgotten() {
        for (others, fires) in [(MAX_TOPICS - 1, true), (MAX_TOPICS, false)] {
            let mut events: Vec<Event> = (0..3).map(|_| with_topic("a", "b", "kept")).collect();
            events.extend((0..others).map(|i| with_topic("a", "b", &format!("other {i}"))));
            events.push(with_topic("a", "b", "kept"));
            let mut state = TopicCycleState::default();
            let found = run(&detector(), &mut state, 1, &events);
            assert_eq!(found.last().is_some_and(|d| !d.is_empty()), fires);
            assert_eq!(state.topics(), MAX_TOPICS);
        }
    }

    #[test]
    fn long_topics_are_labelled_in_at_most_60_characters() {
        let long = "word ".repeat(40);
        let events: Vec<Event> = (0..4).map(|_| with_content("a", "b", &long)).collect();
        let found = run(&detector(), &mut TopicCycleState::default(), 1, &events);
        let reason = &found[3][0].reason;
        let shown = reason
            .strip_prefix("topic '")
            .and_then(|rest| rest.split_once('\''))
            .map(|(shown, _)| shown)
            .expect("quoted label");
        assert_eq!(shown.chars().count(), LABEL_CHARS);
        assert!(shown.ends_with('…'));
        assert_eq!(label("short".chars()), "short");
        let exact: String = "x".repeat(LABEL_CHARS);
        assert_eq!(label(exact.chars()), exact);
    }

    #[test]
    fn normalize_topic_lowercases_drops_punctuation_and_collapses_space() {
        assert_eq!(
            normalize_topic("  Fix: the LOGIN-bug!! "),
            "fix the login bug"
        );
        assert_eq!(normalize_topic("Größe\tÄNDERN\n\n#42"), "größe ändern 42");
        assert_eq!(normalize_topic("snake_case/path.rs"), "snake case path rs");
        assert_eq!(normalize_topic(""), "");
        assert_eq!(normalize_topic(" ?! -- "), "");
        assert_eq!(normalize_topic("日本語 テスト"), "日本語 テスト");
    }

    /// The original, iterator-based normalization: the loop must agree.
    fn reference_normalize(text: &str) -> String {
        let mut out = String::new();
        for word in text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|word| !word.is_empty())
        {
            if !out.is_empty() {
                out.push(' ');
            }
            out.extend(word.chars().flat_map(char::to_lowercase));
        }
        out
    }

    #[test]
    fn normalize_topic_agrees_with_the_reference() {
        for text in [
            "",
            " ",
            "a",
            "--a--",
            "İstanbul ΣΊΣΥΦΟΣ straße ǅemal",
            "tabs\tand\nnewlines\r\n  and  spaces",
            "emoji 🚀 between, words; 42x",
            "ⅫⅣ roman ① circled",
        ] {
            assert_eq!(normalize_topic(text), reference_normalize(text), "{text:?}");
        }
    }

    #[test]
    fn long_text_keys_do_not_depend_on_chunking() {
        let long_a = format!("{}é tail", "Ünïcode wörds, ".repeat(30));
        let long_b = format!("{}É TAIL!!", "ünïcode   WÖRDS ".repeat(30));
        assert_eq!(normalize_topic(&long_a), normalize_topic(&long_b));
        assert_eq!(text_key(&long_a), text_key(&long_b));
        let other = format!("{}é tails", "Ünïcode wörds, ".repeat(30));
        assert_ne!(text_key(&long_a), text_key(&other));
    }

    #[test]
    fn topic_key_hashes_exactly_the_normalized_text() {
        for (a, b) in [("Fix the bug", "fix  THE bug!"), ("a-b", "A B")] {
            assert_eq!(normalize_topic(a), normalize_topic(b));
            assert_eq!(text_key(a), text_key(b));
        }
        for (a, b) in [("fix the bug", "fix the bugs"), ("ab", "a b")] {
            assert_ne!(normalize_topic(a), normalize_topic(b));
            assert_ne!(text_key(a), text_key(b));
        }
        assert_eq!(text_key("..."), None);
    }
}
