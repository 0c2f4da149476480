//! The OTLP spans waiting for their trace to be decided: a [`Buffer`] per
//! server, bounded in traces and in spans per trace, and the skeletons of
//! the traces decided recently (so that a late span is mapped with the
//! spans of its trace decided before it).

use std::collections::{HashMap, HashSet};
use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

use loopguard_import::otlp::Span;
use parking_lot::Mutex;

/// The span attributes a trace's skeleton keeps: what the mapping needs to
/// link a late span to its agent and its task.
const SKELETON_KEYS: [&str; 6] = [
    "gen_ai.operation.name",
    "openinference.span.kind",
    "gen_ai.agent.name",
    "agent.name",
    "gen_ai.conversation.id",
    "session.id",
];

/// The spans waiting for their trace to be decided.
#[derive(Debug)]
pub(crate) struct Buffer {
    traces: Mutex<HashMap<String, Pending>>,
    /// The skeletons of recently decided traces.
    decided: Mutex<lru::LruCache<String, Vec<Span>>>,
    /// How long a trace waits after its last span.
    flush_after: Duration,
    max_traces: usize,
    max_spans: usize,
}

/// One trace's spans so far.
#[derive(Debug)]
struct Pending {
    spans: Vec<Span>,
    /// When its last span arrived.
    last: Instant,
}

impl Buffer {
    /// An empty buffer with `[serve]`'s bounds.
    pub(crate) fn new(flush_after: Duration, max_traces: usize, max_spans: usize) -> Buffer {
        let remembered = NonZeroUsize::new(max_traces).unwrap_or(NonZeroUsize::MIN);
        Buffer {
            traces: Mutex::new(HashMap::new()),
            decided: Mutex::new(lru::LruCache::new(remembered)),
            flush_after,
            max_traces: max_traces.max(1),
            max_spans: max_spans.max(1),
        }
    }

    /// How often the background task looks for expired traces.
    pub(crate) fn tick(&self) -> Duration {
        (self.flush_after / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))
    }

    /// Buffers `spans` (arrived at `now`); returns the batches to decide
    /// now: the traces whose root arrived, those that reached the span
    /// bound, and, beyond the trace bound, those that waited longest.
    pub(crate) fn add(&self, spans: Vec<Span>, now: Instant) -> Vec<Vec<Span>> {
        let mut ready = Vec::new();
        let mut rooted = HashSet::new();
        let mut traces = self.traces.lock();
        for span in spans {
            let trace = span.trace_id.clone();
            if span.parent_span_id.is_none() {
                rooted.insert(trace.clone());
            }
            let pending = traces.entry(trace).or_insert_with(|| Pending {
                spans: Vec::new(),
                last: now,
            });
            pending.last = now;
            pending.spans.push(span);
            if pending.spans.len() >= self.max_spans {
                ready.push(std::mem::take(&mut pending.spans));
            }
        }
        for trace in rooted {
            if let Some(pending) = traces.remove(&trace) {
                ready.push(pending.spans);
            }
        }
        traces.retain(|_, pending| !pending.spans.is_empty());
        while traces.len() > self.max_traces {
            let Some(oldest) = traces
                .iter()
                .min_by_key(|(_, pending)| pending.last)
                .map(|(trace, _)| trace.clone())
            else {
                break;
            };
            if let Some(pending) = traces.remove(&oldest) {
                ready.push(pending.spans);
            }
        }
        ready.retain(|batch| !batch.is_empty());
        ready
    }

    /// Takes the traces whose last span arrived `flush_after` before `now`.
    pub(crate) fn expired(&self, now: Instant) -> Vec<Vec<Span>> {
        let mut traces = self.traces.lock();
        let due: Vec<String> = traces
            .iter()
            .filter(|(_, pending)| now.saturating_duration_since(pending.last) >= self.flush_after)
            .map(|(trace, _)| trace.clone())
            .collect();
        due.iter()
            .filter_map(|trace| traces.remove(trace))
            .map(|pending| pending.spans)
            .collect()
    }

    /// Takes every buffered trace.
    pub(crate) fn drain(&self) -> Vec<Vec<Span>> {
        let mut traces = self.traces.lock();
        traces.drain().map(|(_, pending)| pending.spans).collect()
    }

    /// The skeleton of `trace`'s spans decided before (empty when none
    /// is remembered).
    pub(crate) fn skeleton(&self, trace: &str) -> Vec<Span> {
        self.decided.lock().get(trace).cloned().unwrap_or_default()
    }

    /// Remembers the skeleton of `spans` (one trace's, just decided) after
    /// `before` (its skeleton so far), at most `max_spans` spans.
    pub(crate) fn remember(&self, before: Vec<Span>, spans: &[Span]) {
        let Some(trace) = spans.first().map(|span| span.trace_id.clone()) else {
            return;
        };
        let room = self.max_spans.saturating_sub(before.len());
        let mut skeleton = before;
        skeleton.extend(spans.iter().take(room).map(|span| {
            Span {
                trace_id: span.trace_id.clone(),
                span_id: span.span_id.clone(),
                parent_span_id: span.parent_span_id.clone(),
                name: span.name.clone(),
                start_unix_nano: span.start_unix_nano,
                end_unix_nano: span.end_unix_nano,
                attributes: SKELETON_KEYS
                    .iter()
                    .filter_map(|key| Some(((*key).to_owned(), span.attributes.get(*key)?.clone())))
                    .collect(),
                ..Span::default()
            }
        }));
        self.decided.lock().put(trace, skeleton);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(trace: &str, id: &str, parent: Option<&str>) -> Span {
        Span {
            trace_id: trace.to_owned(),
            span_id: id.to_owned(),
            parent_span_id: parent.map(str::to_owned),
            ..Span::default()
        }
    }

    #[test]
    fn a_trace_waits_for_its_root_then_goes_whole() {
        let buffer = Buffer::new(Duration::from_secs(5), 8, 100);
        let now = Instant::now();
        assert!(
            buffer
                .add(
                    vec![span("t", "c", Some("r")), span("u", "x", Some("y"))],
                    now
                )
                .is_empty()
        );
        let ready = buffer.add(vec![span("t", "r", None)], now);
        assert_eq!(ready.len(), 1);
        let ids: Vec<&str> = ready[0].iter().map(|s| s.span_id.as_str()).collect();
        assert_eq!(ids, ["c", "r"]);
        assert!(buffer.expired(now + Duration::from_secs(4)).is_empty());
        let expired = buffer.expired(now + Duration::from_secs(5));
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0][0].trace_id, "u");
        assert!(buffer.drain().is_empty());
    }

    #[test]
    fn the_bounds_flush_early_rather_than_grow() {
        let buffer = Buffer::new(Duration::from_secs(5), 2, 3);
        let now = Instant::now();
        let later = now + Duration::from_millis(1);
        assert!(buffer.add(vec![span("a", "1", Some("0"))], now).is_empty());
        assert!(
            buffer
                .add(vec![span("b", "1", Some("0"))], later)
                .is_empty()
        );
        // A third trace: the one that waited longest goes.
        let ready = buffer.add(vec![span("c", "1", Some("0"))], later);
        assert_eq!(ready.len(), 1);
        assert_eq!(ready[0][0].trace_id, "a");
        // Three spans of one trace: decided at once.
        let ready = buffer.add(
            vec![span("b", "2", Some("0")), span("b", "3", Some("0"))],
            later,
        );
        assert_eq!(ready.len(), 1);
        assert_eq!(ready[0].len(), 3);
        assert_eq!(buffer.drain().len(), 1, "c is left");
    }
}
