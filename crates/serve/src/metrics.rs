//! `GET /metrics`: the loop figures in the Prometheus text format, through
//! the Prometheus project's Rust client.
//!
//! Every figure is this process's since it started (a fleet's replicas are
//! summed by the query, as Prometheus sums any counter): the events and
//! detections it answered, the tasks it has seen and where they stand, how
//! many loops a task had when it finished, how long a task took from its
//! first detection to its resolution, how long the engine took per event,
//! the errors the decisions reported, and the OTLP spans it took or left.
//!
//! Spend (trace format 1.2, ruling 18): every decision of a task whose
//! events carried `usage` carries the task's running totals after that
//! event; what the event added is the difference from the totals of the
//! task's previous decision, so the counters `loopguard_tokens_total`,
//! `loopguard_cost_usd_total` and `loopguard_loop_cost_usd_total` are the
//! sums of what the served events spent (priced as the engine priced them).
//! The part that went into loops is counted under the kind of the first
//! loop detection on the decision that raised it (one of
//! [`SPEND_LOOP_KINDS`]). A task this process had not followed (its first
//! event here, or one forgotten as below) counts its totals so far.
//!
//! The per-task figures keep a little state per task (its status, whether it
//! was ever gated, when its first unresolved detection came), for at most
//! [`TRACKED_TASKS`] tasks: the least recently seen one beyond that is
//! forgotten (and leaves the `loopguard_tasks` gauge), so memory stays
//! bounded however long the server runs.

use std::num::NonZeroUsize;
use std::time::Instant;

use std::sync::atomic::AtomicU64;

use loopguard_core_types::{Action, Decision, Spend, TaskStatus};
use loopguard_host::{Observed, SPEND_LOOP_KINDS};
use parking_lot::Mutex;
use prometheus_client::encoding::{EncodeLabelSet, text::encode};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The most tasks whose status the metrics follow at once.
pub(crate) const TRACKED_TASKS: usize = 100_000;

/// The event types of the trace format; any other counts as `other`, so an
/// orchestrator's own types cannot grow the label set without bound.
const EVENT_TYPES: [&str; 9] = [
    "handoff",
    "collaboration",
    "failure",
    "turn",
    "transition",
    "progress",
    "completed",
    "human",
    "tool_call",
];

/// `event_type`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    event_type: &'static str,
}

/// `kind`, `action`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DetectionLabels {
    kind: String,
    action: &'static str,
}

/// `action`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionLabels {
    action: &'static str,
}

/// `status`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    status: &'static str,
}

/// `source`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    source: &'static str,
}

/// `outcome`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

/// `reason`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

/// `direction`: `input` or `output`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DirectionLabels {
    direction: &'static str,
}

/// `kind`: one of [`SPEND_LOOP_KINDS`], or `other`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LoopKindLabels {
    kind: &'static str,
}

/// A counter of dollars.
type Dollars = Counter<f64, AtomicU64>;

/// What the metrics keep per task.
#[derive(Debug, Clone, Copy)]
struct TaskTrack {
    status: TaskStatus,
    /// Whether the task was ever behind the human gate.
    gated: bool,
    /// When its first detection since it was last resolved came.
    first_detection: Option<Instant>,
    /// Its highest loop count since it last completed (completing resets
    /// the count the decisions carry).
    loops: u32,
    /// Its spend after the last decision seen, when its events carried
    /// usage.
    spend: Option<Spend>,
}

/// The server's metrics and their registry.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    events: Family<EventLabels, Counter>,
    decisions: Family<ActionLabels, Counter>,
    detections: Family<DetectionLabels, Counter>,
    line_errors: Counter,
    errors: Family<SourceLabels, Counter>,
    tasks: Family<StatusLabels, Gauge>,
    tasks_seen: Counter,
    tasks_gated: Counter,
    loops_per_task: Histogram,
    resolution_seconds: Histogram,
    observe_seconds: Histogram,
    otlp_spans: Family<OutcomeLabels, Counter>,
    webhook: Family<OutcomeLabels, Counter>,
    refused: Family<ReasonLabels, Counter>,
    tokens: Family<DirectionLabels, Counter>,
    cost_usd: Dollars,
    loop_cost_usd: Family<LoopKindLabels, Dollars>,
    tracked: Mutex<lru::LruCache<String, TaskTrack>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Registers every metric.
    pub(crate) fn new() -> Metrics {
        let mut registry = Registry::with_prefix("loopguard");
        let events = Family::<EventLabels, Counter>::default();
        registry.register(
            "events",
            "Events answered, by type (a type outside the trace format counts as other)",
            events.clone(),
        );
        let decisions = Family::<ActionLabels, Counter>::default();
        registry.register(
            "decisions",
            "Decisions answered, by their action",
            decisions.clone(),
        );
        let detections = Family::<DetectionLabels, Counter>::default();
        registry.register(
            "detections",
            "Detections, by kind and the action each asked for",
            detections.clone(),
        );
        let line_errors = Counter::default();
        registry.register(
            "line_errors",
            "Input lines that were not valid events (answered 400 or with an error line)",
            line_errors.clone(),
        );
        let errors = Family::<SourceLabels, Counter>::default();
        registry.register(
            "errors",
            "Errors the decisions reported, by source: store, detector (a plugin or an extension), semantic, other",
            errors.clone(),
        );
        let tasks = Family::<StatusLabels, Gauge>::default();
        registry.register(
            "tasks",
            "Tasks this process follows, by their status now",
            tasks.clone(),
        );
        let tasks_seen = Counter::default();
        registry.register(
            "tasks_seen",
            "Tasks seen (the gate rate is loopguard_tasks_gated_total / loopguard_tasks_seen_total)",
            tasks_seen.clone(),
        );
        let tasks_gated = Counter::default();
        registry.register(
            "tasks_gated",
            "Tasks that went behind the human gate (escalated or paused) at least once",
            tasks_gated.clone(),
        );
        let loops_per_task = Histogram::new([0.0, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0]);
        registry.register(
            "loops_per_task",
            "A task's loops when it completed or was aborted as stuck (its highest loop count since it last completed)",
            loops_per_task.clone(),
        );
        let resolution_seconds = Histogram::new(exponential_buckets(1.0, 4.0, 10));
        registry.register(
            "resolution_seconds",
            "From a task's first detection to its resolution (it completes, or a human answers its gate), by this server's clock",
            resolution_seconds.clone(),
        );
        let observe_seconds = Histogram::new(exponential_buckets(0.000_01, 4.0, 10));
        registry.register(
            "observe_seconds",
            "How long the engine took to decide one event",
            observe_seconds.clone(),
        );
        let otlp_spans = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "otlp_spans",
            "OTLP spans received on /v1/traces: accepted (mapped to events) or ignored",
            otlp_spans.clone(),
        );
        let webhook = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "webhook",
            "Decisions for the webhook: delivered, failed (every attempt), dropped (the queue was full)",
            webhook.clone(),
        );
        let refused = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "refused",
            "Requests and connections refused: header_timeout (the connection closed), \
             body_timeout (408), connections (serve.max_connections open), queue (503, \
             serve.queue requests handled)",
            refused.clone(),
        );
        let (tokens, cost_usd, loop_cost_usd) = register_spend(&mut registry);
        let capacity = NonZeroUsize::new(TRACKED_TASKS).unwrap_or(NonZeroUsize::MIN);
        Metrics {
            registry,
            events,
            decisions,
            detections,
            line_errors,
            errors,
            tasks,
            tasks_seen,
            tasks_gated,
            loops_per_task,
            resolution_seconds,
            observe_seconds,
            otlp_spans,
            webhook,
            refused,
            tokens,
            cost_usd,
            loop_cost_usd,
            tracked: Mutex::new(lru::LruCache::new(capacity)),
        }
    }

    /// Counts one answered event.
    pub(crate) fn decided(&self, decision: &Decision, observed: Observed<'_>) {
        let event_type = EVENT_TYPES
            .iter()
            .find(|known| **known == observed.event_type)
            .copied()
            .unwrap_or("other");
        self.events.get_or_create(&EventLabels { event_type }).inc();
        self.decisions
            .get_or_create(&ActionLabels {
                action: action_name(decision.action),
            })
            .inc();
        for detection in &decision.detections {
            self.detections
                .get_or_create(&DetectionLabels {
                    kind: detection.kind.to_string(),
                    action: action_name(detection.action),
                })
                .inc();
        }
        for error in &decision.errors {
            self.errors
                .get_or_create(&SourceLabels {
                    source: error_source(error),
                })
                .inc();
        }
        self.observe_seconds.observe(observed.elapsed.as_secs_f64());
        self.follow(decision, observed.event_type, Instant::now());
    }

    /// Counts one input line that was not a valid event.
    pub(crate) fn line_failed(&self) {
        self.line_errors.inc();
    }

    /// Counts OTLP spans: `accepted` mapped to events, `ignored` not.
    pub(crate) fn otlp_spans(&self, accepted: u64, ignored: u64) {
        self.otlp_spans
            .get_or_create(&OutcomeLabels {
                outcome: "accepted",
            })
            .inc_by(accepted);
        self.otlp_spans
            .get_or_create(&OutcomeLabels { outcome: "ignored" })
            .inc_by(ignored);
    }

    /// Counts one decision for the webhook by its `outcome`.
    pub(crate) fn webhook(&self, outcome: &'static str) {
        self.webhook.get_or_create(&OutcomeLabels { outcome }).inc();
    }

    /// Counts one request or connection refused, by its `reason`:
    /// `header_timeout`, `body_timeout`, `connections` or `queue`.
    pub(crate) fn refused(&self, reason: &'static str) {
        self.refused.get_or_create(&ReasonLabels { reason }).inc();
    }

    /// Follows the decision's task: its status, gate, loops, resolution.
    fn follow(&self, decision: &Decision, event_type: &str, now: Instant) {
        let mut tracked = self.tracked.lock();
        let previous = tracked.get(decision.task.as_str()).copied();
        let mut track = previous.unwrap_or(TaskTrack {
            status: decision.status,
            gated: false,
            first_detection: None,
            loops: 0,
            spend: None,
        });
        match previous {
            None => {
                self.tasks_seen.inc();
                self.status_gauge(decision.status).inc();
            }
            Some(previous) if previous.status != decision.status => {
                self.status_gauge(previous.status).dec();
                self.status_gauge(decision.status).inc();
            }
            Some(_) => {}
        }
        let status_changed = previous.is_none_or(|previous| previous.status != decision.status);
        if decision.status.is_gated() && !track.gated {
            track.gated = true;
            self.tasks_gated.inc();
        }
        if !decision.detections.is_empty() && track.first_detection.is_none() {
            track.first_detection = Some(now);
        }
        let resolved = (event_type == "completed" && decision.status == TaskStatus::Completed)
            || (event_type == "human" && !decision.status.is_gated());
        if resolved && let Some(first) = track.first_detection.take() {
            self.resolution_seconds
                .observe(now.saturating_duration_since(first).as_secs_f64());
        }
        track.loops = track.loops.max(decision.loop_count);
        if status_changed
            && matches!(
                decision.status,
                TaskStatus::Completed | TaskStatus::AbortedStuck
            )
        {
            self.loops_per_task.observe(f64::from(track.loops));
            track.loops = 0;
        }
        track.status = decision.status;
        self.count_spend(decision, previous.and_then(|previous| previous.spend));
        track.spend = decision.usage.or(track.spend);
        if let Some((_, forgotten)) = tracked.push(decision.task.clone(), track)
            && previous.is_none()
        {
            // The least recently seen task made room: it leaves the gauge.
            self.status_gauge(forgotten.status).dec();
        }
    }

    /// Counts what the decision's event spent: its task's totals now less
    /// `before`, the totals of the task's previous decision.
    fn count_spend(&self, decision: &Decision, before: Option<Spend>) {
        let Some(now) = decision.usage else {
            return;
        };
        let before = before.unwrap_or_default();
        let input = now
            .total
            .input_tokens
            .saturating_sub(before.total.input_tokens);
        let output = now
            .total
            .output_tokens
            .saturating_sub(before.total.output_tokens);
        for (direction, added) in [("input", input), ("output", output)] {
            if added > 0 {
                self.tokens
                    .get_or_create(&DirectionLabels { direction })
                    .inc_by(added);
            }
        }
        let cost = dollars_added(now.total.cost_usd, before.total.cost_usd);
        if cost > 0.0 {
            self.cost_usd.inc_by(cost);
        }
        let in_loops = dollars_added(now.in_loops.cost_usd, before.in_loops.cost_usd);
        if in_loops > 0.0 {
            self.loop_cost_usd
                .get_or_create(&LoopKindLabels {
                    kind: loop_kind(decision),
                })
                .inc_by(in_loops);
        }
    }

    fn status_gauge(&self, status: TaskStatus) -> Gauge {
        self.tasks
            .get_or_create(&StatusLabels {
                status: status_name(status),
            })
            .clone()
    }

    /// The text exposition of every metric.
    pub(crate) fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::with_capacity(8 * 1024);
        encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

/// Registers the spend counters: tokens by direction, dollars, dollars in
/// loops by kind.
fn register_spend(
    registry: &mut Registry,
) -> (
    Family<DirectionLabels, Counter>,
    Dollars,
    Family<LoopKindLabels, Dollars>,
) {
    let tokens = Family::<DirectionLabels, Counter>::default();
    registry.register(
        "tokens",
        "Tokens the served events spent (their usage), by direction: input or output",
        tokens.clone(),
    );
    let cost_usd = Dollars::default();
    registry.register(
        "cost_usd",
        "US dollars the served events spent: each event's own cost_usd, else its tokens at the \
         [pricing] of its model (an event that cannot be priced adds tokens only)",
        cost_usd.clone(),
    );
    let loop_cost_usd = Family::<LoopKindLabels, Dollars>::default();
    registry.register(
        "loop_cost_usd",
        "US dollars spent on events a loop detection named as evidence (each event once), by the \
         kind of the first loop detection on the decision that counted them",
        loop_cost_usd.clone(),
    );
    (tokens, cost_usd, loop_cost_usd)
}

/// The dollars between two running totals (none when the later has no
/// cost; never negative).
fn dollars_added(now: Option<f64>, before: Option<f64>) -> f64 {
    let added = now.unwrap_or(0.0) - before.unwrap_or(0.0);
    if added.is_finite() {
        added.max(0.0)
    } else {
        0.0
    }
}

/// The kind spend in loops is counted under: the first detection on the
/// decision of a kind in [`SPEND_LOOP_KINDS`], else `other`.
fn loop_kind(decision: &Decision) -> &'static str {
    decision
        .detections
        .iter()
        .find_map(|detection| {
            SPEND_LOOP_KINDS
                .iter()
                .find(|kind| **kind == &*detection.kind)
                .copied()
        })
        .unwrap_or("other")
}

/// The action's name in the trace format.
fn action_name(action: Action) -> &'static str {
    match action {
        Action::None => "none",
        Action::Warn => "warn",
        Action::BreakCycle => "break_cycle",
        Action::InjectContext => "inject_context",
        Action::Pivot => "pivot",
        Action::Block => "block",
        Action::Escalate => "escalate",
        Action::Abort => "abort",
    }
}

/// The status's name in the trace format.
fn status_name(status: TaskStatus) -> &'static str {
    match status {
        TaskStatus::Active => "active",
        TaskStatus::Completed => "completed",
        TaskStatus::Escalated => "escalated",
        TaskStatus::Paused => "paused",
        TaskStatus::AbortedStuck => "aborted_stuck",
    }
}

/// Where a decision's error came from, by how the engine words it.
fn error_source(error: &str) -> &'static str {
    if error.starts_with("store:") {
        "store"
    } else if error.starts_with("detector ") {
        "detector"
    } else if error.starts_with("topic assigner:")
        || error.starts_with("argument matcher:")
        || error.starts_with("exchange matcher:")
    {
        "semantic"
    } else {
        "other"
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn decision(task: &str, status: TaskStatus, loop_count: u32) -> Decision {
        Decision {
            usage: None,
            line: 1,
            task: task.to_owned(),
            action: Action::None,
            loop_count,
            status,
            pivots: 0,
            directive: None,
            id: None,
            detections: Vec::new(),
            errors: Vec::new(),
            notes: Vec::new(),
            degraded: false,
        }
    }

    fn observed(event_type: &str) -> Observed<'_> {
        Observed::new(event_type, Duration::from_micros(40))
    }

    #[test]
    fn tasks_move_between_statuses_and_the_gate_is_counted_once() {
        let metrics = Metrics::new();
        metrics.decided(&decision("a", TaskStatus::Active, 0), observed("handoff"));
        let mut escalated = decision("a", TaskStatus::Escalated, 2);
        escalated
            .detections
            .push(loopguard_core_types::Detection::new(
                "agent_pair",
                "agent_pair",
                loopguard_core_types::Severity::High,
                Action::Escalate,
                vec![1],
                "a and b",
            ));
        metrics.decided(&escalated, observed("handoff"));
        metrics.decided(&decision("a", TaskStatus::Escalated, 2), observed("turn"));
        metrics.decided(&decision("a", TaskStatus::Active, 2), observed("human"));
        metrics.decided(
            &decision("a", TaskStatus::Completed, 2),
            observed("completed"),
        );
        metrics.decided(&decision("b", TaskStatus::Active, 0), observed("weird"));
        let text = metrics.encode().unwrap_or_default();
        for line in [
            "loopguard_tasks_seen_total 2",
            "loopguard_tasks_gated_total 1",
            "loopguard_tasks{status=\"completed\"} 1",
            "loopguard_tasks{status=\"active\"} 1",
            "loopguard_tasks{status=\"escalated\"} 0",
            "loopguard_events_total{event_type=\"other\"} 1",
            "loopguard_events_total{event_type=\"handoff\"} 2",
            "loopguard_loops_per_task_count 1",
            "loopguard_loops_per_task_sum 2.0",
            "loopguard_resolution_seconds_count 1",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }

    fn spend(tokens: u64, cost: f64, loop_cost: f64) -> Option<Spend> {
        use loopguard_core_types::SpendTotals;
        Some(Spend {
            total: SpendTotals {
                input_tokens: tokens,
                output_tokens: tokens / 10,
                cost_usd: Some(cost),
            },
            in_loops: SpendTotals {
                input_tokens: 0,
                output_tokens: 0,
                cost_usd: (loop_cost > 0.0).then_some(loop_cost),
            },
        })
    }

    #[test]
    fn spend_is_counted_from_each_tasks_running_totals() {
        let metrics = Metrics::new();
        let mut first = decision("a", TaskStatus::Active, 0);
        first.usage = spend(100, 0.5, 0.0);
        metrics.decided(&first, observed("turn"));
        let mut other = decision("b", TaskStatus::Active, 0);
        other.usage = spend(50, 0.25, 0.0);
        metrics.decided(&other, observed("turn"));
        let mut looped = decision("a", TaskStatus::Active, 1);
        looped.usage = spend(300, 1.5, 1.0);
        looped.detections.push(loopguard_core_types::Detection::new(
            "tool_repeat",
            "tool_repeat",
            loopguard_core_types::Severity::Low,
            Action::InjectContext,
            vec![1, 3],
            "same call",
        ));
        metrics.decided(&looped, observed("tool_call"));
        // A task without usage adds nothing.
        metrics.decided(&decision("c", TaskStatus::Active, 0), observed("turn"));
        let text = metrics.encode().unwrap_or_default();
        for line in [
            "loopguard_tokens_total{direction=\"input\"} 350",
            "loopguard_tokens_total{direction=\"output\"} 35",
            "loopguard_cost_usd_total 1.75",
            "loopguard_loop_cost_usd_total{kind=\"tool_repeat\"} 1.0",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }

    #[test]
    fn errors_are_counted_by_their_source() {
        assert_eq!(error_source("store: the database is gone"), "store");
        assert_eq!(error_source("detector my-plugin: fault"), "detector");
        assert_eq!(error_source("exchange matcher: no model"), "semantic");
        assert_eq!(error_source("something else"), "other");
    }
}
