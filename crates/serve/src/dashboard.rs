//! The live dashboard: the pages, their data, and the live feed.
//!
//! - `GET /` (the overview) and `GET /tasks/{task}` (one task) are static
//!   HTML; `GET /assets/*` their CSS and JS. All are compiled into the
//!   binary (`include_str!`, no build step, nothing fetched from elsewhere)
//!   and hold no data, so they need no token. They are served with
//!   `Content-Security-Policy: default-src 'self'` (no inline script or
//!   style) and `X-Content-Type-Options: nosniff`; the JS writes every
//!   string from the events with `textContent`.
//! - `GET /v1/dashboard` is the overview's data, **computed from the store
//!   on each request** (its task snapshots and the newest [`AUDIT_WINDOW`]
//!   entries of its audit log, read with `Store::audit_recent`, so the cost
//!   of a request does not grow with the log), so it survives a page reload
//!   and a server restart as the store does, with nothing kept in the
//!   server's memory between requests. The detection counts (in total and
//!   per task), the timeline and the agent matrix are over that window.
//!   Its output is bounded: the [`MAX_TASKS`] tasks with
//!   the latest activity, the [`RECENT_DETECTIONS`] newest detections, a
//!   timeline of [`BUCKETS`] one-minute buckets for at most [`MAX_KINDS`]
//!   kinds, and the [`MAX_AGENTS`] agents most involved in detections.
//! - `GET /v1/live` streams every decision as it is answered, as
//!   server-sent events (`event: decision`, the decision as JSON); a
//!   subscriber that falls behind the live feed's backlog gets
//!   `event: lagged` with `{"missed": N}` and goes on; a comment every
//!   15 s keeps the connection open; at most [`LIVE_SUBSCRIBERS`] streams
//!   are open at once (503 beyond). The page reads it with `fetch` (which
//!   can send the token) and refetches `/v1/dashboard` when decisions
//!   arrive (at most every two seconds).
//! - `GET /v1/tasks/{task}/timeline` is the task page's timeline: the
//!   task's audit log (detections and counter resets, with their lines and
//!   times), newest first, at most [`TIMELINE_ENTRIES`] (`"more": true` when
//!   there are older ones). The page shows it
//!   beside `GET /v1/tasks/{task}` (status, counters, cycle log).
//!
//! The overview's `spend` and the task's `spend` (tokens and dollars, in
//! total and in loops, the costliest loops, spend over the task's last
//! events) are read from the tasks' saved state: see
//! [`crate::dashboard_spend`].
//!
//! The timeline ends at the latest detection's time (the events' own
//! times, else the time they were observed), so a replayed trace with old
//! timestamps still shows.
//!
//! The agent matrix counts, for each pair of agents, the detections that
//! name both; its diagonal counts the detections that name the agent at
//! all. A detection names the agents in its `agents` field (trace format
//! 1.2: the pair, the cycle, the caller of a tool, the failing agent), and
//! its `skip_agent`. A detection stored by an older build, without
//! `agents`, names those its reason quotes for the handoff-based kinds:
//! `agent_pair` (`agents 'a' and 'b'`), `multi_agent` (the cycle `'a' ->
//! 'b' -> 'c' -> 'a'`), `topic_cycle` (the latest `'from' -> 'to'`),
//! `collaboration_loop` (`request from 'a' to 'b'`) and `repeated_query`
//! (`query to 'a'`). Phase kinds name no agents and do not count.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State as Shared};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use loopguard_core_types::{Decision, Detection, TaskStatus, Timestamp, kinds};
use loopguard_host::{AuditEntry, AuditRecord, TaskSnapshot};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, watch};

use crate::error::ApiError;
use crate::outlets::LIVE_BACKLOG;
use crate::respond::json;
use crate::state::State;

/// The newest detections `GET /v1/dashboard` lists.
pub(crate) const RECENT_DETECTIONS: usize = 200;
/// The newest audit entries `GET /v1/dashboard` reads: its detection
/// counts, recent detections, timeline and agent matrix are over these, so
/// a request costs the same however long the store's log has grown.
pub(crate) const AUDIT_WINDOW: usize = 20_000;
/// The newest audit entries `GET /v1/tasks/{task}/timeline` lists.
pub(crate) const TIMELINE_ENTRIES: usize = 500;
/// The tasks `GET /v1/dashboard` lists (those with the latest activity).
pub(crate) const MAX_TASKS: usize = 500;
/// The timeline's one-minute buckets (an hour).
pub(crate) const BUCKETS: usize = 60;
/// The kinds the timeline draws a series for; the rest are summed as
/// `other`.
pub(crate) const MAX_KINDS: usize = 10;
/// The agents the matrix shows (those in the most detections).
pub(crate) const MAX_AGENTS: usize = 20;
/// One timeline bucket in milliseconds.
const BUCKET_MS: i64 = 60_000;
/// The `GET /v1/live` streams open at once; one more is answered 503 (each
/// holds a connection and a place in the live feed).
pub(crate) const LIVE_SUBSCRIBERS: usize = 64;
/// How often `GET /v1/live` sends a keep-alive comment.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The overview page.
const INDEX_HTML: &str = include_str!("../assets/index.html");
/// The task page.
const TASK_HTML: &str = include_str!("../assets/task.html");
/// Both pages' style sheet.
const CSS: &str = include_str!("../assets/dashboard.css");
/// Both pages' script.
const JS: &str = include_str!("../assets/dashboard.js");
/// The tab icon.
const ICON: &str = include_str!("../assets/favicon.svg");

/// The pages' content security policy: scripts, styles, images and
/// requests from this server only; nothing inline, no framing.
const CSP: &str = "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The content type of the pages.
const HTML: &str = "text/html; charset=utf-8";

/// `GET /`: the overview page.
pub(crate) async fn index_page() -> Response {
    page(HTML, INDEX_HTML)
}

/// `GET /tasks/{task}`: the task page (it reads the task from its path).
pub(crate) async fn task_page() -> Response {
    page(HTML, TASK_HTML)
}

/// `GET /assets/dashboard.css`.
pub(crate) async fn stylesheet() -> Response {
    page("text/css; charset=utf-8", CSS)
}

/// `GET /assets/dashboard.js`.
pub(crate) async fn script() -> Response {
    page("text/javascript; charset=utf-8", JS)
}

/// `GET /assets/favicon.svg`.
pub(crate) async fn icon() -> Response {
    page("image/svg+xml", ICON)
}

/// A static page or asset with the security headers.
fn page(content_type: &'static str, body: &'static str) -> Response {
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CSP),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

/// `Cache-Control: no-store`, for the data routes: each answer is read
/// from the store when asked.
fn no_store() -> [(HeaderName, HeaderValue); 1] {
    [(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))]
}

/// `GET /v1/dashboard`: the overview's data, from the store.
pub(crate) async fn get_dashboard(
    Shared(state): Shared<Arc<State>>,
) -> Result<impl IntoResponse, ApiError> {
    let store = state.store();
    let tasks = store.tasks().await?;
    let audit = store.audit_recent(None, AUDIT_WINDOW).await?;
    let mut view = Dashboard::build(tasks, &audit, Timestamp::now());
    let listed: Vec<String> = view.tasks.iter().map(|row| row.task.clone()).collect();
    view.spend = crate::dashboard_spend::overview(store, &listed).await?;
    Ok((no_store(), json(&view).map_err(ApiError::from)))
}

/// `GET /v1/tasks/{task}/timeline`: the task's audit log (detections and
/// resets, each with its line and time), newest first, at most
/// [`TIMELINE_ENTRIES`]; 404 for a task the store does not have.
pub(crate) async fn get_task_timeline(
    Shared(state): Shared<Arc<State>>,
    Path(task): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    let store = state.store();
    if store.load_task(&task).await?.is_none() {
        return Err(ApiError::NoTask(task));
    }
    // One more than shown says whether there are older ones.
    let audit = store
        .audit_recent(Some(&task), TIMELINE_ENTRIES + 1)
        .await?;
    let entries: Vec<&AuditEntry> = audit.iter().rev().take(TIMELINE_ENTRIES).collect();
    let more = audit.len() > TIMELINE_ENTRIES;
    let body = json!({ "task": task, "more": more, "entries": entries });
    Ok((no_store(), json(&body).map_err(ApiError::from)))
}

/// `GET /v1/live`: every decision as it is answered, as server-sent
/// events, until the client goes or the server stops.
pub(crate) async fn get_live(Shared(state): Shared<Arc<State>>) -> Result<Response, ApiError> {
    if state.outlets.live.receiver_count() >= LIVE_SUBSCRIBERS {
        return Err(ApiError::LiveStreamsFull {
            limit: LIVE_SUBSCRIBERS,
        });
    }
    // Subscribed before the response starts: a decision answered after the
    // client has the headers is in the stream.
    let decisions = state.outlets.live.subscribe();
    let closing = state.closing.subscribe();
    let ready = SseEvent::default()
        .event("ready")
        .data(json!({ "backlog": LIVE_BACKLOG }).to_string());
    let first = futures_util::stream::once(async move { Ok::<_, Infallible>(ready) });
    let rest = futures_util::StreamExt::map(live_items(decisions, closing), |item| {
        Ok::<_, Infallible>(match item {
            Live::Decision(decision) => SseEvent::default()
                .event("decision")
                .json_data(&*decision)
                .unwrap_or_else(|err| SseEvent::default().event("error").data(err.to_string())),
            Live::Lagged(missed) => SseEvent::default()
                .event("lagged")
                .data(json!({ "missed": missed }).to_string()),
        })
    });
    let mut response = Sse::new(futures_util::StreamExt::chain(first, rest))
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"))
        .into_response();
    // Proxies that buffer (nginx) pass the stream through at once.
    response.headers_mut().insert(
        HeaderName::from_static("x-accel-buffering"),
        HeaderValue::from_static("no"),
    );
    Ok(response)
}

/// One item of the live feed, as a subscriber sees it.
#[derive(Debug)]
enum Live {
    /// A decision, as answered.
    Decision(Arc<Decision>),
    /// The subscriber fell behind the feed's backlog: this many decisions
    /// were skipped.
    Lagged(u64),
}

/// The live feed for one subscriber: until the feed closes or `closing`
/// turns `true` (the server stops).
fn live_items(
    decisions: broadcast::Receiver<Arc<Decision>>,
    closing: watch::Receiver<bool>,
) -> impl futures_util::Stream<Item = Live> {
    futures_util::stream::unfold(
        (decisions, closing),
        |(mut decisions, mut closing)| async move {
            let item = tokio::select! {
                biased;
                // The server stops (or is gone): end the stream so that a
                // graceful shutdown does not wait on it.
                _ = closing.wait_for(|closing| *closing) => return None,
                received = decisions.recv() => match received {
                    Ok(decision) => Live::Decision(decision),
                    Err(RecvError::Lagged(missed)) => Live::Lagged(missed),
                    Err(RecvError::Closed) => return None,
                },
            };
            Some((item, (decisions, closing)))
        },
    )
}

/// `GET /v1/dashboard`'s body.
#[derive(Debug, Serialize)]
pub(crate) struct Dashboard {
    /// When it was computed.
    generated_at: Timestamp,
    /// Counts over everything in the store.
    totals: Totals,
    /// The tasks, latest activity first (at most [`MAX_TASKS`]).
    tasks: Vec<TaskRow>,
    /// The newest detections first (at most [`RECENT_DETECTIONS`]): each
    /// detection as the decision reported it, with its `task`, `line`, `at`
    /// and `agents`.
    recent_detections: Vec<Value>,
    /// Detections per kind per minute.
    timeline: Timeline,
    /// Which agents loop with which.
    agents: AgentMatrix,
    /// What the listed tasks spent, in total and in loops, and their
    /// costliest loops (see [`crate::dashboard_spend`]).
    spend: crate::dashboard_spend::SpendOverview,
}

/// Counts over the whole store.
#[derive(Debug, Serialize)]
struct Totals {
    /// Every task.
    tasks: usize,
    /// Tasks per status (every status named, zero included).
    by_status: BTreeMap<&'static str, usize>,
    /// Every detection in the audit log.
    detections: usize,
}

/// One task, as `GET /v1/tasks` lists it, with its last activity.
#[derive(Debug, Serialize)]
struct TaskRow {
    task: String,
    status: TaskStatus,
    loop_count: u32,
    pivots: u32,
    detections: usize,
    last_activity: Timestamp,
    last_detection: Option<LastDetection>,
}

/// A task's last detection.
#[derive(Debug, Serialize)]
struct LastDetection {
    kind: String,
    line: u64,
    action: loopguard_core_types::Action,
    severity: loopguard_core_types::Severity,
    at: Timestamp,
}

/// Detections per kind in one-minute buckets.
#[derive(Debug, Serialize)]
struct Timeline {
    /// The bucket width.
    bucket_seconds: u32,
    /// The first bucket's start.
    start: Timestamp,
    /// The last bucket's end (the minute after the latest detection).
    end: Timestamp,
    /// One series per kind, most detections first.
    series: Vec<Series>,
}

/// One kind's counts.
#[derive(Debug, Serialize)]
struct Series {
    kind: String,
    total: u32,
    counts: Vec<u32>,
}

/// Agents × agents: detections that name both.
#[derive(Debug, Serialize)]
struct AgentMatrix {
    /// The agents, most involved first.
    agents: Vec<String>,
    /// `counts[i][j]`: detections naming both `agents[i]` and `agents[j]`
    /// (on the diagonal: naming `agents[i]`).
    counts: Vec<Vec<u32>>,
    /// Detections that name at least one agent.
    detections: usize,
}

impl Dashboard {
    /// The overview of `tasks` and the `audit` log (oldest first) at `now`.
    pub(crate) fn build(
        tasks: Vec<TaskSnapshot>,
        audit: &[AuditEntry],
        now: Timestamp,
    ) -> Dashboard {
        let detections: Vec<(&AuditEntry, &Detection)> = audit
            .iter()
            .filter_map(|entry| match &entry.record {
                AuditRecord::Detection(detection) => Some((entry, detection.as_ref())),
                _ => None,
            })
            .collect();
        let mut by_status: BTreeMap<&'static str, usize> = [
            TaskStatus::Active,
            TaskStatus::Completed,
            TaskStatus::Escalated,
            TaskStatus::Paused,
            TaskStatus::AbortedStuck,
        ]
        .into_iter()
        .map(|status| (status.as_str(), 0))
        .collect();
        for task in &tasks {
            *by_status.entry(task.status.as_str()).or_default() += 1;
        }
        Dashboard {
            generated_at: now,
            totals: Totals {
                tasks: tasks.len(),
                by_status,
                detections: detections.len(),
            },
            tasks: task_rows(tasks, &detections),
            recent_detections: detections
                .iter()
                .rev()
                .take(RECENT_DETECTIONS)
                .map(|(entry, detection)| recent(entry, detection))
                .collect(),
            timeline: timeline(&detections, now),
            agents: agent_matrix(&detections),
            spend: Default::default(),
        }
    }
}

/// A detection with its audit entry.
type Found<'a> = (&'a AuditEntry, &'a Detection);

/// The task rows, latest activity first, with their detection counts and
/// last detections (as `GET /v1/tasks` counts them).
fn task_rows(tasks: Vec<TaskSnapshot>, detections: &[Found<'_>]) -> Vec<TaskRow> {
    let mut per_task: HashMap<&str, (usize, Option<Found<'_>>)> = HashMap::new();
    for &(entry, detection) in detections {
        let counted = per_task.entry(entry.task.as_str()).or_default();
        counted.0 += 1;
        counted.1 = Some((entry, detection));
    }
    let mut rows: Vec<TaskRow> = tasks
        .into_iter()
        .map(|task| {
            let (count, last) = per_task
                .get(task.task.as_str())
                .copied()
                .unwrap_or_default();
            TaskRow {
                status: task.status,
                loop_count: task.loop_count,
                pivots: task.pivots,
                detections: count,
                last_activity: task.last_seen,
                last_detection: last.map(|(entry, detection)| LastDetection {
                    kind: detection.kind.to_string(),
                    line: detection.line.unwrap_or(entry.line),
                    action: detection.action,
                    severity: detection.severity,
                    at: entry.at,
                }),
                task: task.task,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.last_activity
            .cmp(&a.last_activity)
            .then_with(|| a.task.cmp(&b.task))
    });
    rows.truncate(MAX_TASKS);
    rows
}

/// One detection of the recent list: as the decision reported it, with its
/// task, line, time and agents.
fn recent(entry: &AuditEntry, detection: &Detection) -> Value {
    let mut value = serde_json::to_value(detection).unwrap_or_else(|_| json!({}));
    if let Some(object) = value.as_object_mut() {
        object.insert("task".into(), json!(entry.task));
        object.insert("line".into(), json!(detection.line.unwrap_or(entry.line)));
        object.insert("at".into(), json!(entry.at));
        object.insert("agents".into(), json!(agents_of(detection)));
    }
    value
}

/// Detections per kind per minute over the hour up to the latest detection.
fn timeline(detections: &[(&AuditEntry, &Detection)], now: Timestamp) -> Timeline {
    let latest = detections
        .iter()
        .map(|(entry, _)| entry.at)
        .max()
        .unwrap_or(now);
    let end = (latest.as_millis().div_euclid(BUCKET_MS) + 1).saturating_mul(BUCKET_MS);
    let span = BUCKET_MS * BUCKETS as i64;
    let start = end.saturating_sub(span);
    let mut per_kind: HashMap<&str, Vec<u32>> = HashMap::new();
    for (entry, detection) in detections {
        let at = entry.at.as_millis();
        if at < start || at >= end {
            continue;
        }
        let bucket = usize::try_from((at - start) / BUCKET_MS)
            .unwrap_or(0)
            .min(BUCKETS - 1);
        let counts = per_kind
            .entry(detection.kind.as_ref())
            .or_insert_with(|| vec![0; BUCKETS]);
        counts[bucket] += 1;
    }
    let mut series: Vec<Series> = per_kind
        .into_iter()
        .map(|(kind, counts)| Series {
            kind: kind.to_owned(),
            total: counts.iter().sum(),
            counts,
        })
        .collect();
    series.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.kind.cmp(&b.kind)));
    if series.len() > MAX_KINDS {
        let rest = series.split_off(MAX_KINDS - 1);
        let mut other = Series {
            kind: "other".to_owned(),
            total: 0,
            counts: vec![0; BUCKETS],
        };
        for series in rest {
            other.total += series.total;
            for (sum, count) in other.counts.iter_mut().zip(series.counts) {
                *sum += count;
            }
        }
        series.push(other);
    }
    Timeline {
        bucket_seconds: (BUCKET_MS / 1000) as u32,
        start: Timestamp(start),
        end: Timestamp(end),
        series,
    }
}

/// The agents × agents counts over every detection that names agents.
fn agent_matrix(detections: &[(&AuditEntry, &Detection)]) -> AgentMatrix {
    let named: Vec<Vec<String>> = detections
        .iter()
        .map(|(_, detection)| agents_of(detection))
        .filter(|agents| !agents.is_empty())
        .collect();
    let mut involvement: HashMap<&str, u32> = HashMap::new();
    for agents in &named {
        for agent in agents {
            *involvement.entry(agent.as_str()).or_default() += 1;
        }
    }
    let mut agents: Vec<(&str, u32)> = involvement.into_iter().collect();
    agents.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    agents.truncate(MAX_AGENTS);
    let index: HashMap<&str, usize> = agents
        .iter()
        .enumerate()
        .map(|(at, (agent, _))| (*agent, at))
        .collect();
    let mut counts = vec![vec![0u32; agents.len()]; agents.len()];
    for names in &named {
        let at: Vec<usize> = names
            .iter()
            .filter_map(|agent| index.get(agent.as_str()).copied())
            .collect();
        for &i in &at {
            for &j in &at {
                counts[i][j] += 1;
            }
        }
    }
    AgentMatrix {
        agents: agents
            .iter()
            .map(|(agent, _)| (*agent).to_owned())
            .collect(),
        counts,
        detections: named.len(),
    }
}

/// The agents a detection names (see the module docs): those its reason
/// quotes, for the handoff-based kinds, and its `skip_agent`; each once, in
/// order of mention.
pub(crate) fn agents_of(detection: &Detection) -> Vec<String> {
    let mut agents = if detection.agents.is_empty() {
        agents_in_reason(detection)
    } else {
        detection.agents.clone()
    };
    agents.extend(detection.skip_agent.clone());
    let mut seen = Vec::with_capacity(agents.len());
    agents.retain(|agent| {
        if agent.is_empty() || seen.contains(agent) {
            false
        } else {
            seen.push(agent.clone());
            true
        }
    });
    agents
}

/// The agents a detection without `agents` quotes in its reason, for the
/// handoff-based kinds (stored by a build before trace format 1.2).
fn agents_in_reason(detection: &Detection) -> Vec<String> {
    let reason = detection.reason.as_str();
    match detection.kind.as_ref() {
        kinds::AGENT_PAIR => (|| {
            let rest = reason.strip_prefix("agents '")?;
            let (a, rest) = rest.split_once("' and '")?;
            let (b, _) = rest.split_once("' exchanged")?;
            Some(vec![a.to_owned(), b.to_owned()])
        })()
        .unwrap_or_default(),
        kinds::MULTI_AGENT => (|| {
            let rest = reason.strip_prefix("work went around ")?;
            let (cycle, _) = rest.split_once(" twice")?;
            Some(cycle.split(" -> ").filter_map(unquote).collect())
        })()
        .unwrap_or_default(),
        kinds::TOPIC_CYCLE => (|| {
            let (_, latest) = reason.rsplit_once("; latest ")?;
            Some(latest.split(" -> ").filter_map(unquote).collect())
        })()
        .unwrap_or_default(),
        kinds::COLLABORATION_LOOP => (|| {
            let rest = reason.strip_prefix("request from '")?;
            let (a, rest) = rest.split_once("' to '")?;
            Some(vec![a.to_owned(), until_verb(rest)?.to_owned()])
        })()
        .unwrap_or_default(),
        kinds::REPEATED_QUERY => (|| {
            let rest = reason.strip_prefix("query to '")?;
            Some(vec![until_verb(rest)?.to_owned()])
        })()
        .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// `'name'` without its quotes.
fn unquote(text: &str) -> Option<String> {
    let name = text.trim().strip_prefix('\'')?.strip_suffix('\'')?;
    Some(name.to_owned())
}

/// The quoted name that `rest` starts with, up to `' is ` or `' repeats `.
fn until_verb(rest: &str) -> Option<&str> {
    ["' is ", "' repeats "]
        .iter()
        .filter_map(|verb| rest.find(verb))
        .min()
        .map(|end| &rest[..end])
}

#[cfg(test)]
mod tests {
    use loopguard_core_types::{Action, Severity};

    use super::*;

    fn detection(kind: &'static str, reason: &str) -> Detection {
        Detection::new(kind, kind, Severity::High, Action::Warn, vec![1], reason)
    }

    #[tokio::test]
    async fn a_lagging_subscriber_is_told_how_many_it_missed_then_goes_on_until_closing() {
        use futures_util::StreamExt;
        let feed = broadcast::Sender::new(4);
        let closing = watch::Sender::new(false);
        let mut items = std::pin::pin!(live_items(feed.subscribe(), closing.subscribe()));
        let decision = |line| {
            Arc::new(Decision {
                usage: None,
                line,
                task: "T".into(),
                action: Action::None,
                loop_count: 0,
                status: TaskStatus::Active,
                pivots: 0,
                directive: None,
                id: None,
                detections: Vec::new(),
                errors: Vec::new(),
                notes: Vec::new(),
                degraded: false,
            })
        };
        for line in 1..=6 {
            feed.send(decision(line)).expect("a subscriber");
        }
        assert!(matches!(items.next().await, Some(Live::Lagged(2))));
        for line in 3..=6 {
            match items.next().await {
                Some(Live::Decision(decision)) => assert_eq!(decision.line, line),
                other => panic!("decision {line} expected, got {other:?}"),
            }
        }
        feed.send(decision(7)).expect("a subscriber");
        assert!(matches!(items.next().await, Some(Live::Decision(_))));
        closing.send_replace(true);
        feed.send(decision(8)).expect("a subscriber");
        assert!(
            items.next().await.is_none(),
            "closing ends the stream first"
        );
    }

    #[test]
    fn the_agents_are_read_from_the_handoff_kinds_reasons() {
        let cases = [
            (
                kinds::AGENT_PAIR,
                "agents 'coder' and 'reviewer' exchanged work 5 times (more than 4)",
                vec!["coder", "reviewer"],
            ),
            (
                kinds::MULTI_AGENT,
                "work went around 'planner' -> 'coder' -> 'tester' -> 'planner' twice: 6 \
                 handoffs along the cycle (a loop from 6)",
                vec!["planner", "coder", "tester"],
            ),
            (
                kinds::TOPIC_CYCLE,
                "topic 'it's the cache' came up in 5 exchanges (more than 4), matched by exact \
                 normalized text; latest 'a b' -> 'c'",
                vec!["a b", "c"],
            ),
            (
                kinds::COLLABORATION_LOOP,
                "request from 'lead' to 'coder' is 0.950 similar to line 3's (threshold 0.9 \
                 from default)",
                vec!["lead", "coder"],
            ),
            (
                kinds::REPEATED_QUERY,
                "query to 'search' repeats line 2's, its second repeat; no new information",
                vec!["search"],
            ),
            (
                kinds::EDGE_LIMIT,
                "edge 'review' -> 'code' taken 5 times without progress (limit 4)",
                vec![],
            ),
            (kinds::AGENT_PAIR, "a reworded reason", vec![]),
        ];
        for (kind, reason, expected) in cases {
            assert_eq!(agents_of(&detection(kind, reason)), expected, "{reason}");
        }
        let mut skip = detection(kinds::AGENT_PAIR, "agents 'a' and 'b' exchanged work");
        skip.skip_agent = Some("b".into());
        assert_eq!(agents_of(&skip), vec!["a", "b"], "each agent once");
    }

    #[test]
    fn the_agents_field_is_read_before_the_reason() {
        let named = detection(kinds::AGENT_PAIR, "agents 'x' and 'y' exchanged work")
            .with_agents(["coder", "reviewer"]);
        assert_eq!(agents_of(&named), vec!["coder", "reviewer"]);
        let failing =
            detection(kinds::EXACT_FAILURE, "same error message as line 1").with_agents(["tester"]);
        assert_eq!(agents_of(&failing), vec!["tester"]);
        let plugin = detection("monologue", "talked to itself").with_agents(["a", "b"]);
        assert_eq!(
            agents_of(&plugin),
            vec!["a", "b"],
            "a plugin may name agents"
        );
    }

    fn entry(task: &str, minute: i64, detection: Detection) -> AuditEntry {
        AuditEntry {
            task: task.into(),
            line: 1,
            at: Timestamp(1_800_000_000_000 + minute * BUCKET_MS),
            record: AuditRecord::Detection(Box::new(detection)),
        }
    }

    #[test]
    fn the_timeline_is_the_hour_up_to_the_latest_detection_and_bounded() {
        let mut audit = vec![entry("T", -120, detection("old", "too old"))];
        for (minute, kind) in
            (0..12).zip(["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"])
        {
            audit.push(entry("T", minute, detection(kind, "x")));
        }
        audit.push(entry("T", 11, detection("a", "x")));
        let view = Dashboard::build(Vec::new(), &audit, Timestamp(0));
        let timeline = &view.timeline;
        assert_eq!(timeline.series.len(), MAX_KINDS);
        assert_eq!(timeline.series[0].kind, "a");
        assert_eq!(timeline.series[0].total, 2);
        assert_eq!(timeline.series[0].counts[BUCKETS - 12], 1);
        assert_eq!(
            timeline.series[0].counts[BUCKETS - 1],
            1,
            "the latest minute is the last bucket"
        );
        let other = timeline.series.last().expect("an other series");
        assert_eq!(other.kind, "other");
        assert_eq!(
            other.total, 3,
            "the kinds beyond the limit, not the old one"
        );
        assert_eq!(view.totals.detections, 14);
        assert_eq!(view.recent_detections.len(), 14);
        assert_eq!(view.recent_detections[0]["kind"], "a", "newest first");
    }

    #[test]
    fn the_matrix_counts_detections_naming_both_agents() {
        let audit = vec![
            entry(
                "T",
                0,
                detection(kinds::AGENT_PAIR, "agents 'a' and 'b' exchanged work"),
            ),
            entry(
                "T",
                1,
                detection(kinds::AGENT_PAIR, "agents 'a' and 'b' exchanged work"),
            ),
            entry(
                "U",
                2,
                detection(
                    kinds::MULTI_AGENT,
                    "work went around 'a' -> 'c' -> 'a' twice",
                ),
            ),
            entry("U", 3, detection(kinds::EXACT_FAILURE, "same error")),
        ];
        let matrix = Dashboard::build(Vec::new(), &audit, Timestamp(0)).agents;
        assert_eq!(matrix.agents, vec!["a", "b", "c"]);
        assert_eq!(
            matrix.counts,
            vec![vec![3, 2, 1], vec![2, 2, 0], vec![1, 0, 1]]
        );
        assert_eq!(matrix.detections, 3);
    }
}
