//! [`ProgressEvaluator`]: the rules that tell a progressive retry from a
//! stuck one.

use std::collections::VecDeque;
use std::fmt::{self, Write as _};
use std::num::NonZeroUsize;
use std::sync::Arc;

use async_trait::async_trait;
use loopguard_config::Config;
use loopguard_core_types::{
    Action, Detection, EventKind, FailureView, ProgressSnapshot, Severity, kinds,
};
use loopguard_detectors::{
    Evidence, ExternalKind, FailureClass, ObservedEvent, classify, evidence_of, hash128,
    join_with_and, push_bounded,
};
use loopguard_host::{ExtensionDetector, ExtensionError};
use lru::LruCache;
use parking_lot::Mutex;

use crate::judge::{FailureRecord, GoalJudge, JudgeError, JudgeRequest, Judgement, Verdict};
use loopguard_llm_client::truncate;

/// The detector's name in detections.
pub const DETECTOR: &str = "progress";
/// Tasks whose state is kept by default; the least recently seen is
/// forgotten beyond it.
pub const DEFAULT_TASK_CAPACITY: usize = 50_000;
/// Judgements cached by default (per task and question).
pub const DEFAULT_CACHE_CAPACITY: usize = 4_096;
/// Longest error message (and goal) kept for the judge, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 1_000;
/// Rising snapshots, stalled failures and external failures kept as
/// evidence.
const EVIDENCE_CAP: usize = 16;
/// Notes on judge failures kept for one stalled run.
const NOTES_CAP: usize = 3;
/// The format of the per-task state the evaluator exports to a durable
/// store (`{"format": 1, ...}`); an import of another format is an error,
/// and the task starts afresh.
pub const STATE_FORMAT: u32 = 1;

// A child of this module, so that it reads and fills `TaskState` directly.
#[path = "saved.rs"]
mod saved;

/// Judges failures whose messages differ by the task's progress: test
/// metrics first, completion signals next, the [`GoalJudge`] last.
///
/// An [`ExtensionDetector`] named `progress`, reporting `regression` and
/// `no_progress` (both loop-feeding: the engine counts them, sets their
/// severity and action, and escalates at the gate) and `external_failure`
/// (never a loop; `warn`, and `escalate` from the
/// `progress.external_failures_before_escalation`th in a row). The rules are
/// in the crate documentation.
///
/// Its state is per task, bounded (at most [`DEFAULT_TASK_CAPACITY`] tasks,
/// the least recently seen forgotten first; bounded histories per task) and
/// forgotten on `completed` and `human`. With a durable store it survives a
/// restart: the engine keeps what `export_task` gives with the task and
/// hands it back through `import_task`.
pub struct ProgressEvaluator {
    no_progress_failures: u32,
    external_before_escalation: u32,
    history: usize,
    judge: Option<Arc<dyn GoalJudge>>,
    tasks: Mutex<LruCache<String, TaskState>>,
    cache: Mutex<LruCache<(String, u128), Judgement>>,
}

impl fmt::Debug for ProgressEvaluator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Sizes, not contents: an engine's debug print stays short.
        f.debug_struct("ProgressEvaluator")
            .field("no_progress_failures", &self.no_progress_failures)
            .field(
                "external_before_escalation",
                &self.external_before_escalation,
            )
            .field("history", &self.history)
            .field("judge", &self.judge)
            .field("live_tasks", &self.tasks.lock().len())
            .field("cached_judgements", &self.cache.lock().len())
            .finish()
    }
}

/// What the evaluator remembers about one task.
#[derive(Debug, Default)]
struct TaskState {
    /// The task's goal, for the judge (kept only with a judge).
    goal: Option<Box<str>>,
    /// The latest value of every metric reported.
    latest: ProgressSnapshot,
    /// Whether any `progress` event reported a test metric (tests, coverage).
    has_tests: bool,
    /// Whether any `progress` event reported a completion signal
    /// (`files_changed`, `deps_added`).
    has_completion: bool,
    /// The current run of snapshots whose failing tests did not fall,
    /// starting at its lowest: (evidence, failing tests).
    rising: VecDeque<(Seen, u64)>,
    /// What `progress` events showed since the previous agent failure.
    since_failure: Window,
    /// The line of the previous agent failure.
    previous_failure: Option<u64>,
    /// The line of the last progress signal (a forward move).
    last_progress: Option<u64>,
    /// Message hashes of the recent agent failures (exact repeats are
    /// `exact_failure`'s).
    recent: VecDeque<u128>,
    /// The recent agent failures as the judge sees them (kept only with a
    /// judge).
    failures: VecDeque<(Seen, FailureRecord)>,
    /// Differing agent failures in a row with no progress signal.
    stalled: u32,
    /// The latest of them, as evidence.
    stalled_seen: VecDeque<Seen>,
    /// Why the judge could not help with some of them (the latest few).
    judge_notes: VecDeque<String>,
    /// External failures in a row (no agent failure in between).
    external: u32,
    external_seen: VecDeque<(Seen, ExternalKind)>,
}

/// What the `progress` events between two agent failures showed.
#[derive(Debug, Default, Clone, Copy)]
struct Window {
    events: u32,
    forward: bool,
    regressed: bool,
}

/// An event remembered as evidence.
#[derive(Debug, Clone)]
struct Seen {
    line: u64,
    id: Option<Box<str>>,
}

impl TaskState {
    /// A progress signal (or a verdict) ends the run of stalled failures.
    fn restart_stalled(&mut self) {
        self.stalled = 0;
        self.stalled_seen.clear();
        self.judge_notes.clear();
    }
}

impl Evidence for Seen {
    fn line(&self) -> u64 {
        self.line
    }

    fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }
}

impl Seen {
    fn of(event: &ObservedEvent<'_>) -> Seen {
        Seen {
            line: event.line,
            id: event.event.id.as_deref().map(Box::from),
        }
    }
}

/// How one snapshot moved from the task's latest metrics.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Movement {
    /// Towards the goal: fewer failing (or a lower failure rate), more
    /// coverage, more tests, more files changed or dependencies added.
    forward: bool,
    /// More failing tests and a failure rate that did not fall.
    regressed: bool,
}

/// What a failure needs after the first look.
enum Next {
    Done(Vec<Detection>),
    Ask(Box<JudgeRequest>),
}

impl ProgressEvaluator {
    /// The evaluator with the limits of `config` and no judge.
    pub fn new(config: &Config) -> ProgressEvaluator {
        let cap = |n: usize| NonZeroUsize::new(n).unwrap_or(NonZeroUsize::MIN);
        ProgressEvaluator {
            no_progress_failures: config.progress.no_progress_failures.max(1),
            external_before_escalation: config.progress.external_failures_before_escalation.max(1),
            history: usize::try_from(config.failures.history.max(1)).unwrap_or(usize::MAX),
            judge: None,
            tasks: Mutex::new(LruCache::new(cap(DEFAULT_TASK_CAPACITY))),
            cache: Mutex::new(LruCache::new(cap(DEFAULT_CACHE_CAPACITY))),
        }
    }

    /// Asks `judge` about the failures metrics cannot decide.
    pub fn with_judge(mut self, judge: Arc<dyn GoalJudge>) -> ProgressEvaluator {
        self.judge = Some(judge);
        self
    }

    /// Keeps the state of at most `tasks` tasks (at least 1).
    pub fn with_task_capacity(self, tasks: usize) -> ProgressEvaluator {
        self.tasks
            .lock()
            .resize(NonZeroUsize::new(tasks).unwrap_or(NonZeroUsize::MIN));
        self
    }

    /// The judge, if one is configured.
    pub fn judge(&self) -> Option<&Arc<dyn GoalJudge>> {
        self.judge.as_ref()
    }

    /// Number of tasks whose state is held.
    pub fn live_tasks(&self) -> usize {
        self.tasks.lock().len()
    }

    /// Looks at one event; the synchronous rules and, when they cannot
    /// decide, the judge.
    pub async fn evaluate(&self, event: &ObservedEvent<'_>) -> Vec<Detection> {
        let next = {
            let mut tasks = self.tasks.lock();
            self.first_look(&mut tasks, event)
        };
        match next {
            Next::Done(found) => found,
            Next::Ask(request) => {
                let answer = self.ask(&request).await;
                let mut tasks = self.tasks.lock();
                let state =
                    tasks.get_or_insert_mut_ref(event.event.task.as_str(), TaskState::default);
                self.apply_judgement(state, event, &request, answer)
            }
        }
    }

    /// Everything that needs no judge, under the lock.
    fn first_look(
        &self,
        tasks: &mut LruCache<String, TaskState>,
        event: &ObservedEvent<'_>,
    ) -> Next {
        let goal = event.event.extra.get("goal").and_then(|goal| goal.as_str());
        match &event.event.kind {
            EventKind::Progress(snapshot) => {
                let state =
                    tasks.get_or_insert_mut_ref(event.event.task.as_str(), TaskState::default);
                self.remember_goal(state, goal);
                Next::Done(
                    self.on_progress(state, event, snapshot)
                        .into_iter()
                        .collect(),
                )
            }
            kind if kind.failure().is_some() => {
                // A `failure`, or a `tool_call` that failed (ruling 14).
                let Some(FailureView {
                    agent,
                    error,
                    error_type,
                    ..
                }) = kind.failure()
                else {
                    return Next::Done(Vec::new());
                };
                let state =
                    tasks.get_or_insert_mut_ref(event.event.task.as_str(), TaskState::default);
                self.remember_goal(state, goal);
                match classify(error_type, error) {
                    FailureClass::External(kind) => {
                        Next::Done(vec![self.on_external(state, event, kind)])
                    }
                    FailureClass::Agent => {
                        self.on_agent_failure(state, event, agent, error, error_type)
                    }
                }
            }
            _ => {
                // Other events matter only for the goal, and only with a judge.
                if let (Some(goal), Some(_)) = (goal, &self.judge) {
                    let state =
                        tasks.get_or_insert_mut_ref(event.event.task.as_str(), TaskState::default);
                    self.remember_goal(state, Some(goal));
                }
                Next::Done(Vec::new())
            }
        }
    }

    fn remember_goal(&self, state: &mut TaskState, goal: Option<&str>) {
        if state.goal.is_none()
            && self.judge.is_some()
            && let Some(goal) = goal
        {
            state.goal = Some(Box::from(truncate(goal, MAX_MESSAGE_BYTES)));
        }
    }

    /// A `progress` event: remember it, and report rising failing tests.
    fn on_progress(
        &self,
        state: &mut TaskState,
        event: &ObservedEvent<'_>,
        snapshot: &ProgressSnapshot,
    ) -> Option<Detection> {
        let movement = movement(&state.latest, snapshot);
        state.has_tests |= snapshot.tests_total.is_some()
            || snapshot.tests_failed.is_some()
            || snapshot.coverage.is_some();
        state.has_completion |= snapshot.files_changed.is_some() || snapshot.deps_added.is_some();
        merge(&mut state.latest, snapshot);
        state.since_failure.events += 1;
        state.since_failure.forward |= movement.forward;
        state.since_failure.regressed |= movement.regressed;
        if movement.forward || movement.regressed {
            // A new state of the task: the stalled run is over (a rise is
            // reported below as its own loop).
            state.restart_stalled();
        }
        if movement.forward {
            state.last_progress = Some(event.line);
        }
        let failing = snapshot.tests_failed?;
        let seen = Seen::of(event);
        if !movement.regressed {
            let rises_or_holds = state
                .rising
                .back()
                .is_some_and(|(_, last)| failing >= *last);
            if !rises_or_holds || movement.forward {
                state.rising.clear();
                state.rising.push_back((seen, failing));
            }
            return None;
        }
        if state.rising.len() >= EVIDENCE_CAP {
            // Keep the start of the run (its lowest point) and the latest.
            state.rising.remove(1);
        }
        state.rising.push_back((seen, failing));
        let values: Vec<String> = state.rising.iter().map(|(_, n)| n.to_string()).collect();
        let (lines, ids) = evidence_of(state.rising.iter().map(|(seen, _)| seen));
        let reason = format!(
            "failing tests rose {} (lines {}): the task is moving away from its goal",
            values.join(" → "),
            join_with_and(&lines)
        );
        let mut detection = loop_detection(kinds::REGRESSION, lines, ids, reason);
        detection.count = u32::try_from(state.rising.len()).ok();
        Some(detection)
    }

    /// An external failure: reported, never a loop; a run of them escalates.
    fn on_external(
        &self,
        state: &mut TaskState,
        event: &ObservedEvent<'_>,
        kind: ExternalKind,
    ) -> Detection {
        state.external = state.external.saturating_add(1);
        if state.external_seen.len() >= EVIDENCE_CAP {
            state.external_seen.pop_front();
        }
        state.external_seen.push_back((Seen::of(event), kind));
        let count = state.external;
        let (lines, ids) = evidence_of(state.external_seen.iter().map(|(seen, _)| seen));
        let (action, reason) = if count >= self.external_before_escalation {
            let mut kinds: Vec<&str> = Vec::new();
            for (_, kind) in &state.external_seen {
                if !kinds.contains(&kind.as_str()) {
                    kinds.push(kind.as_str());
                }
            }
            (
                Action::Escalate,
                format!(
                    "{count} external failures in a row ({}; lines {}): a dependency problem \
                     outside the agents, not an agent loop; a human should check the service",
                    kinds.join(", "),
                    join_with_and(&lines)
                ),
            )
        } else {
            (
                Action::Warn,
                format!(
                    "external failure ({kind}), not counted as a loop; {count} in a row \
                     (escalates at {})",
                    self.external_before_escalation
                ),
            )
        };
        let mut detection = Detection::new(
            DETECTOR,
            kinds::EXTERNAL_FAILURE,
            Severity::for_loop(count),
            action,
            lines,
            reason,
        );
        detection.count = Some(count);
        detection.evidence_ids = ids;
        detection
    }

    /// An agent failure: exact repeats are `exact_failure`'s; a differing
    /// message is judged by what happened since the previous failure.
    fn on_agent_failure(
        &self,
        state: &mut TaskState,
        event: &ObservedEvent<'_>,
        agent: &str,
        error: &str,
        error_type: Option<&str>,
    ) -> Next {
        let window = std::mem::take(&mut state.since_failure);
        let previous = state.previous_failure.replace(event.line);
        state.external = 0;
        state.external_seen.clear();
        // Kept as a number in the saved state (format 1).
        let hash = u128::from_le_bytes(hash128(error));
        let exact = state.recent.contains(&hash);
        push_bounded(&mut state.recent, hash, self.history);
        // Only a judge reads the messages: without one, none are kept.
        let asked = self.judge.is_some().then(|| {
            let record = FailureRecord {
                line: event.line,
                agent: agent.to_owned(),
                error: truncate(error, MAX_MESSAGE_BYTES).to_owned(),
                error_type: error_type.map(str::to_owned),
            };
            let history: Vec<FailureRecord> =
                state.failures.iter().map(|(_, f)| f.clone()).collect();
            push_bounded(
                &mut state.failures,
                (Seen::of(event), record.clone()),
                self.history,
            );
            (history, record)
        });
        if exact || window.forward || window.regressed {
            // A repeat is counted by `exact_failure`; a rise was counted on
            // its `progress` event; a forward move excuses the failure.
            return Next::Done(Vec::new());
        }
        // Undecidable by metrics: the task reports progress signals, and
        // none moved since the previous failure.
        let has_signals = state.has_tests || state.has_completion;
        if has_signals
            && previous.is_some()
            && let Some((history, current)) = asked
        {
            return Next::Ask(Box::new(JudgeRequest {
                task: event.event.task.clone(),
                goal: state.goal.as_deref().unwrap_or("unknown").to_owned(),
                history,
                current,
                metrics: Some(state.latest),
            }));
        }
        Next::Done(
            self.count_stalled(state, event, previous)
                .into_iter()
                .collect(),
        )
    }

    /// The metrics-only verdict on a differing failure with no progress
    /// since the previous one (ruling 13, Decision 74): when the task
    /// reports progress signals and none moved since a previous failure,
    /// this failure is one `no_progress` loop (the first failure of a task
    /// never is: there is nothing to compare it with); a task with no
    /// progress signals at all is the "no tests" warning sign, where the
    /// `no_progress_failures`th differing failure in a row is the first
    /// loop and each further one is another. The run of stalled failures
    /// (its evidence) lasts until a progress signal.
    fn count_stalled(
        &self,
        state: &mut TaskState,
        event: &ObservedEvent<'_>,
        previous_failure: Option<u64>,
    ) -> Option<Detection> {
        state.stalled = state.stalled.saturating_add(1);
        push_bounded(&mut state.stalled_seen, Seen::of(event), EVIDENCE_CAP);
        let count = state.stalled;
        let has_signals = state.has_tests || state.has_completion;
        let is_loop = if has_signals {
            previous_failure.is_some()
        } else {
            count >= self.no_progress_failures
        };
        if !is_loop {
            return None;
        }
        let (mut lines, ids) = evidence_of(state.stalled_seen.iter());
        let mut reason = if let (1, Some(previous)) = (count, previous_failure) {
            // The run is this failure alone (progress excused the one
            // before): the previous failure is what it is compared with.
            lines.insert(0, previous);
            format!(
                "a failure (line {}) that differs from the previous one (line {previous}) ",
                event.line
            )
        } else {
            format!(
                "{count} differing failures in a row (lines {}) ",
                join_with_and(&lines)
            )
        };
        if !has_signals {
            reason.push_str("with no tests and no completion signals: nothing shows the task getting closer to its goal");
        } else {
            match state.last_progress {
                Some(line) => {
                    let _ = write!(
                        reason,
                        "with no progress in the test metrics or completion signals since line {line}"
                    );
                }
                None => {
                    reason.push_str("with no progress in the test metrics or completion signals")
                }
            }
            if !state.has_tests {
                reason.push_str(" (no tests)");
            }
        }
        if !state.judge_notes.is_empty() {
            let notes: Vec<&str> = state.judge_notes.iter().map(String::as_str).collect();
            let _ = write!(reason, "; {}; metrics-only verdict", notes.join("; "));
            // Each note is reported once.
            state.judge_notes.clear();
        }
        let mut detection = loop_detection(kinds::NO_PROGRESS, lines, ids, reason);
        detection.count = Some(count);
        Some(detection)
    }

    /// The judge's answer for `request`, from the cache when it was asked
    /// before.
    async fn ask(&self, request: &JudgeRequest) -> Result<Judgement, JudgeError> {
        let Some(judge) = &self.judge else {
            return Err(JudgeError::Config("no judge".into()));
        };
        let key = (request.task.clone(), request.digest());
        if let Some(cached) = self.cache.lock().get(&key) {
            return Ok(cached.clone());
        }
        let answer = judge.judge(request).await;
        match &answer {
            Ok(judgement) => {
                tracing::info!(
                    task = %request.task,
                    line = request.current.line,
                    judge = %judge.describe(),
                    verdict = %judgement.verdict,
                    reason = %judgement.reason,
                    "LLM judge consulted"
                );
                self.cache.lock().put(key, judgement.clone());
            }
            Err(err) => tracing::warn!(
                task = %request.task,
                line = request.current.line,
                judge = %judge.describe(),
                error = %err,
                "LLM judge failed; metrics-only verdict"
            ),
        }
        answer
    }

    /// Turns the judge's answer (or its failure) into detections.
    fn apply_judgement(
        &self,
        state: &mut TaskState,
        event: &ObservedEvent<'_>,
        request: &JudgeRequest,
        answer: Result<Judgement, JudgeError>,
    ) -> Vec<Detection> {
        let judgement = match answer {
            Ok(judgement) => judgement,
            Err(err) => {
                let who = self
                    .judge
                    .as_ref()
                    .map_or_else(String::new, |j| j.describe());
                let note = format!("LLM unreachable ({who}) on line {}: {err}", event.line);
                push_bounded(&mut state.judge_notes, note, NOTES_CAP);
                // The judge is asked only about a failure after another.
                let previous = request.history.last().map(|failure| failure.line);
                return self
                    .count_stalled(state, event, previous.or(Some(event.line)))
                    .into_iter()
                    .collect();
            }
        };
        let kind = match judgement.verdict {
            Verdict::Progress => {
                state.restart_stalled();
                return Vec::new();
            }
            Verdict::Regressive => kinds::REGRESSION,
            Verdict::NoProgress => kinds::NO_PROGRESS,
        };
        state.restart_stalled();
        let who = self
            .judge
            .as_ref()
            .map_or_else(String::new, |j| j.describe());
        // The failures the judge was shown, this one last.
        let shown = request.history.len() + 1;
        let skip = state.failures.len().saturating_sub(shown);
        let (mut lines, mut ids) =
            evidence_of(state.failures.iter().skip(skip).map(|(seen, _)| seen));
        if lines.last() != Some(&request.current.line) {
            // The task was reset while the judge thought: the request's lines.
            lines = request.history.iter().map(|f| f.line).collect();
            lines.push(request.current.line);
            ids = event.event.id.iter().cloned().collect();
        }
        let reason = format!("LLM judge ({who}): {}", judgement.reason);
        vec![loop_detection(kind, lines, ids, reason)]
    }
}

#[async_trait]
impl ExtensionDetector for ProgressEvaluator {
    fn name(&self) -> &str {
        DETECTOR
    }

    fn kinds(&self) -> Vec<String> {
        [
            kinds::REGRESSION,
            kinds::NO_PROGRESS,
            kinds::EXTERNAL_FAILURE,
        ]
        .map(str::to_owned)
        .to_vec()
    }

    async fn observe(&self, event: &ObservedEvent<'_>) -> Result<Vec<Detection>, ExtensionError> {
        Ok(self.evaluate(event).await)
    }

    async fn reset_task(&self, task: &str) {
        self.tasks.lock().pop(task);
    }

    /// The task's state (versioned JSON, [`STATE_FORMAT`]): its latest
    /// metrics and whether test metrics or completion signals were ever
    /// reported, the run of rising snapshots, what progress events showed
    /// since the previous agent failure and that failure's line, the line
    /// of the last progress, the recent failures' message hashes, the
    /// stalled run (count, evidence and judge notes), the external run
    /// (count, evidence and kinds) and, with a judge, the goal and the
    /// failures the judge is shown. Bounded by those windows. Not the
    /// judge's answer cache: after a restart a question is asked again.
    /// `None` for a task it holds nothing of.
    async fn export_task(&self, task: &str) -> Option<serde_json::Value> {
        // `peek`: an export does not change which task is forgotten first.
        let saved = self.tasks.lock().peek(task).map(saved::SavedTask::of)?;
        serde_json::to_value(saved).ok()
    }

    /// Puts back what [`export_task`](ExtensionDetector::export_task)
    /// gave, replacing what the evaluator holds of the task (without a
    /// judge, the goal and the judge's failures are dropped; a failure
    /// history shortened in the config keeps the newest). An unknown
    /// format or malformed JSON is an error naming the detector, and the
    /// task starts afresh.
    async fn import_task(
        &self,
        task: &str,
        state: serde_json::Value,
    ) -> Result<(), ExtensionError> {
        let restored = saved::parse(task, state).and_then(|saved| {
            saved
                .restore(self.judge.is_some(), self.history)
                .map_err(|problem| saved::import_error(task, &problem))
        });
        let mut tasks = self.tasks.lock();
        match restored {
            Ok(state) => {
                tasks.put(task.to_owned(), state);
                Ok(())
            }
            Err(err) => {
                tasks.pop(task);
                Err(err)
            }
        }
    }
}

/// A loop-feeding detection: the engine sets its severity, action and loop
/// count, so these are placeholders.
fn loop_detection(
    kind: &'static str,
    lines: Vec<u64>,
    ids: Vec<String>,
    reason: String,
) -> Detection {
    let mut detection = Detection::new(DETECTOR, kind, Severity::Low, Action::Warn, lines, reason);
    detection.evidence_ids = ids;
    detection
}

/// How `snapshot` moved from `latest`, metric by metric (see [`Movement`]).
/// A metric reported for the first time is a baseline, not a move, except
/// the running totals `files_changed` and `deps_added`, which start at 0.
fn movement(latest: &ProgressSnapshot, snapshot: &ProgressSnapshot) -> Movement {
    let rate = |failed: Option<u64>, total: Option<u64>| match (failed, total) {
        (Some(failed), Some(total)) if total > 0 => Some(failed as f64 / total as f64),
        _ => None,
    };
    let total = snapshot.tests_total.or(latest.tests_total);
    let before_rate = rate(latest.tests_failed, latest.tests_total);
    let now_rate = rate(snapshot.tests_failed, total);
    let rate_fell = matches!((before_rate, now_rate), (Some(b), Some(n)) if n < b);
    let failing = match (latest.tests_failed, snapshot.tests_failed) {
        (Some(before), Some(now)) => now.cmp(&before),
        _ => std::cmp::Ordering::Equal,
    };
    let regressed = failing.is_gt() && !rate_fell;
    let grew =
        |before: Option<u64>, now: Option<u64>| now.is_some_and(|now| now > before.unwrap_or(0));
    let more_tests =
        matches!((latest.tests_total, snapshot.tests_total), (Some(b), Some(n)) if n > b);
    let more_coverage = matches!((latest.coverage, snapshot.coverage), (Some(b), Some(n)) if n > b);
    let forward = !regressed
        && (failing.is_lt()
            || rate_fell
            || more_tests
            || more_coverage
            || grew(latest.files_changed, snapshot.files_changed)
            || grew(latest.deps_added, snapshot.deps_added));
    Movement { forward, regressed }
}

/// Folds a snapshot into the task's latest metrics (`files_changed` is a
/// running total: it never falls).
fn merge(latest: &mut ProgressSnapshot, snapshot: &ProgressSnapshot) {
    latest.tests_total = snapshot.tests_total.or(latest.tests_total);
    latest.tests_failed = snapshot.tests_failed.or(latest.tests_failed);
    latest.coverage = snapshot.coverage.or(latest.coverage);
    latest.deps_added = snapshot.deps_added.or(latest.deps_added);
    latest.files_changed = match (latest.files_changed, snapshot.files_changed) {
        (Some(before), Some(now)) => Some(before.max(now)),
        (before, now) => now.or(before),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopguard_core_types::Event;
    use loopguard_host::policy::feeds_loop_count;

    fn progress(fields: &str) -> String {
        let comma = if fields.is_empty() { "" } else { "," };
        format!(r#"{{"type":"progress","task":"T"{comma}{fields}}}"#)
    }

    fn failure(error: &str) -> String {
        format!(r#"{{"type":"failure","task":"T","agent":"coder","error":"{error}"}}"#)
    }

    /// Runs the lines through `evaluator`; returns (line, detection).
    async fn run_on(evaluator: &ProgressEvaluator, lines: &[String]) -> Vec<(u64, Detection)> {
        let mut found = Vec::new();
        for (index, text) in lines.iter().enumerate() {
            let event = Event::from_json(text).expect("valid event");
            let line = index as u64 + 1;
            let observed = ObservedEvent::new(line, &event);
            for detection in evaluator.evaluate(&observed).await {
                found.push((line, detection));
            }
        }
        found
    }

    async fn run(lines: &[String]) -> Vec<(u64, Detection)> {
        run_on(&ProgressEvaluator::new(&Config::default()), lines).await
    }

    fn fired(found: &[(u64, Detection)], kind: &str) -> Vec<u64> {
        found
            .iter()
            .filter(|(_, detection)| detection.kind == kind)
            .map(|(line, _)| *line)
            .collect()
    }

    /// A judge that answers from a script and remembers what it was asked.
    #[derive(Debug, Default)]
    struct Scripted {
        answers: Mutex<VecDeque<Result<Judgement, JudgeError>>>,
        asked: Mutex<Vec<JudgeRequest>>,
    }

    impl Scripted {
        fn answering(answers: Vec<Result<Judgement, JudgeError>>) -> Arc<Scripted> {
            Arc::new(Scripted {
                answers: Mutex::new(answers.into()),
                asked: Mutex::default(),
            })
        }
    }

    fn says(verdict: Verdict, reason: &str) -> Result<Judgement, JudgeError> {
        Ok(Judgement {
            verdict,
            reason: reason.to_owned(),
        })
    }

    #[async_trait]
    impl GoalJudge for Scripted {
        async fn judge(&self, request: &JudgeRequest) -> Result<Judgement, JudgeError> {
            self.asked.lock().push(request.clone());
            self.answers
                .lock()
                .pop_front()
                .unwrap_or_else(|| Err(JudgeError::Malformed("script ran out".into())))
        }

        fn describe(&self) -> String {
            "model scripted".to_owned()
        }
    }

    fn with_judge(judge: &Arc<Scripted>) -> ProgressEvaluator {
        ProgressEvaluator::new(&Config::default()).with_judge(judge.clone())
    }

    #[tokio::test]
    async fn improved_coverage_is_not_a_loop() {
        let lines = [
            progress(r#""tests_total":20,"tests_failed":4,"coverage":0.40"#),
            failure("assertion failed: parse(a)"),
            progress(r#""tests_total":20,"tests_failed":4,"coverage":0.55"#),
            failure("assertion failed: parse(a=)"),
            progress(r#""tests_total":20,"tests_failed":4,"coverage":0.70"#),
            failure("assertion failed: parse(a=1,)"),
            progress(r#""tests_total":20,"tests_failed":4,"coverage":0.80"#),
            failure("assertion failed: parse(a=1,b)"),
        ];
        assert_eq!(run(&lines).await, []);
    }

    #[tokio::test]
    async fn failing_tests_one_three_five_eight_is_regressive() {
        let lines = [
            progress(r#""tests_total":40,"tests_failed":1"#),
            failure("1 failing: test_parse_empty"),
            progress(r#""tests_total":40,"tests_failed":3"#),
            failure("3 failing: test_parse_empty, test_parse_nested, test_roundtrip"),
            progress(r#""tests_total":40,"tests_failed":5"#),
            failure("5 failing: test_parse_*"),
            progress(r#""tests_total":40,"tests_failed":8"#),
            failure("8 failing: test_parse_*, test_render_*"),
        ];
        let found = run(&lines).await;
        assert_eq!(fired(&found, kinds::REGRESSION), [3, 5, 7]);
        assert_eq!(
            found.len(),
            3,
            "the failures themselves add nothing: {found:?}"
        );
        let last = &found[2].1;
        assert_eq!(last.detector, DETECTOR);
        assert_eq!(last.evidence, [1, 3, 5, 7]);
        assert_eq!(last.count, Some(4));
        assert_eq!(
            last.reason,
            "failing tests rose 1 → 3 → 5 → 8 (lines 1, 3, 5 and 7): the task is moving away \
             from its goal"
        );
        assert!(found[0].1.reason.starts_with("failing tests rose 1 → 3 ("));
        // Loop-feeding: the engine owns severity and action.
        assert_eq!((last.severity, last.action), (Severity::Low, Action::Warn));
        assert!(feeds_loop_count(&last.kind));
    }

    #[tokio::test]
    async fn a_rise_after_a_fall_starts_a_new_run() {
        let lines = [
            progress(r#""tests_failed":5"#),
            progress(r#""tests_failed":2"#),
            progress(r#""tests_failed":2"#),
            progress(r#""tests_failed":4"#),
        ];
        let found = run(&lines).await;
        assert_eq!(fired(&found, kinds::REGRESSION), [4]);
        assert_eq!(found[0].1.evidence, [2, 4]);
        assert!(found[0].1.reason.starts_with("failing tests rose 2 → 4 "));
    }

    #[tokio::test]
    async fn more_failing_tests_at_a_lower_rate_is_progress() {
        // 1 of 10 failing, then 3 of 100: more tests written, rate down.
        let lines = [
            progress(r#""tests_total":10,"tests_failed":1"#),
            failure("first"),
            progress(r#""tests_total":100,"tests_failed":3"#),
            failure("second"),
            failure("third"),
            failure("fourth"),
        ];
        let found = run(&lines).await;
        assert_eq!(fired(&found, kinds::REGRESSION), [] as [u64; 0]);
        // Line 4 is excused by the progress on line 3; nothing moved before
        // 5 and 6, each one loop (ruling 13).
        assert_eq!(fired(&found, kinds::NO_PROGRESS), [5, 6]);
    }

    #[tokio::test]
    async fn completion_signals_excuse_differing_failures() {
        let lines = [
            failure("missing module config"),
            progress(r#""files_changed":2"#),
            failure("missing fn load"),
            progress(r#""files_changed":4,"deps_added":1"#),
            failure("missing fn save"),
            progress(r#""deps_added":2"#),
            failure("missing trait impl"),
        ];
        assert_eq!(run(&lines).await, []);
    }

    #[tokio::test]
    async fn no_tests_and_differing_failures_is_no_progress() {
        let lines: Vec<String> = (1..=7).map(|n| failure(&format!("error {n}"))).collect();
        let found = run(&lines).await;
        // Ruling 13: the 3rd differing failure in a row is the first loop,
        // and each further one is another.
        assert_eq!(fired(&found, kinds::NO_PROGRESS), [3, 4, 5, 6, 7]);
        let first = &found[0].1;
        assert_eq!(first.evidence, [1, 2, 3]);
        assert_eq!(first.count, Some(3));
        assert_eq!(
            first.reason,
            "3 differing failures in a row (lines 1, 2 and 3) with no tests and no completion \
             signals: nothing shows the task getting closer to its goal"
        );
        assert!(feeds_loop_count(&first.kind));
        // The run goes on after a detection: its evidence grows.
        assert_eq!(found[1].1.evidence, [1, 2, 3, 4]);
        assert_eq!(found[1].1.count, Some(4));
    }

    #[tokio::test]
    async fn exact_repeats_are_left_to_exact_failure() {
        let same: Vec<String> = (0..6).map(|_| failure("E0308")).collect();
        assert_eq!(run(&same).await, []);
        // Repeats neither count nor break the run of differing failures.
        let lines = [
            failure("a"),
            failure("a"),
            failure("b"),
            failure("a"),
            failure("c"),
        ];
        let found = run(&lines).await;
        assert_eq!(fired(&found, kinds::NO_PROGRESS), [5]);
        assert_eq!(found[0].1.evidence, [1, 3, 5]);
    }

    #[tokio::test]
    async fn external_timeouts_are_not_counted_and_escalate_at_the_third() {
        let lines = [
            failure("request to api.example timed out after 30s"),
            r#"{"type":"failure","task":"T","agent":"coder","error":"x","error_type":"timeout","id":"e2"}"#.to_owned(),
            failure("connect ECONNREFUSED 10.0.0.7:443"),
            failure("HTTP 503 Service Unavailable"),
        ];
        let found = run(&lines).await;
        assert_eq!(fired(&found, kinds::EXTERNAL_FAILURE), [1, 2, 3, 4]);
        assert!(found.iter().all(|(_, d)| !feeds_loop_count(&d.kind)));
        let actions: Vec<Action> = found.iter().map(|(_, d)| d.action).collect();
        assert_eq!(
            actions,
            [
                Action::Warn,
                Action::Warn,
                Action::Escalate,
                Action::Escalate
            ]
        );
        let severities: Vec<Severity> = found.iter().map(|(_, d)| d.severity).collect();
        assert_eq!(
            severities,
            [
                Severity::Low,
                Severity::Medium,
                Severity::High,
                Severity::High
            ]
        );
        assert_eq!(
            found[0].1.reason,
            "external failure (timeout), not counted as a loop; 1 in a row (escalates at 3)"
        );
        let third = &found[2].1;
        assert_eq!(third.evidence, [1, 2, 3]);
        assert_eq!(third.evidence_ids, ["e2"]);
        assert_eq!(third.count, Some(3));
        assert_eq!(
            third.reason,
            "3 external failures in a row (timeout, network; lines 1, 2 and 3): a dependency \
             problem outside the agents, not an agent loop; a human should check the service"
        );
    }

    #[tokio::test]
    async fn an_agent_failure_breaks_the_external_run_but_externals_do_not_break_the_agents() {
        let lines = [
            failure("timed out"),
            failure("timed out"),
            failure("agent error a"),
            failure("timed out"),
            failure("agent error b"),
            failure("timed out"),
            failure("agent error c"),
        ];
        let found = run(&lines).await;
        assert!(
            found
                .iter()
                .filter(|(_, d)| d.kind == kinds::EXTERNAL_FAILURE)
                .all(|(_, d)| d.action == Action::Warn),
            "{found:?}"
        );
        assert_eq!(fired(&found, kinds::NO_PROGRESS), [7]);
        assert_eq!(
            found.last().map(|(_, d)| d.evidence.clone()),
            Some(vec![3, 5, 7])
        );
    }

    #[tokio::test]
    async fn stale_metrics_without_a_judge_get_the_metrics_only_verdict() {
        let lines = [
            progress(r#""tests_total":30,"tests_failed":6,"coverage":0.5"#),
            failure("first"),
            progress(r#""tests_total":30,"tests_failed":6,"coverage":0.5"#),
            failure("second"),
            failure("third"),
        ];
        let found = run(&lines).await;
        // Ruling 13: the first failure is never a loop; each later one with
        // metrics reported and none moved since the previous failure is one.
        assert_eq!(fired(&found, kinds::NO_PROGRESS), [4, 5]);
        assert_eq!(
            found[0].1.reason,
            "2 differing failures in a row (lines 2 and 4) with no progress in the test \
             metrics or completion signals"
        );
        assert_eq!(found[1].1.evidence, [2, 4, 5]);
    }

    #[tokio::test]
    async fn the_judge_is_asked_only_when_metrics_cannot_decide() {
        let judge = Scripted::answering(vec![
            says(Verdict::Regressive, "each fix breaks a neighbouring parser"),
            says(Verdict::NoProgress, "the same lexer bug in new words"),
            says(Verdict::Progress, "the build now reaches the tests"),
        ]);
        let evaluator = with_judge(&judge);
        let lines = [
            r#"{"type":"handoff","task":"T","from":"planner","to":"coder","goal":"parse TOML tables"}"#.to_owned(),
            progress(r#""tests_total":30,"tests_failed":6"#),
            failure("first"),            // 3: the first failure: never asked
            progress(r#""tests_failed":4"#),
            failure("second"),           // 5: progress on line 4: decided
            failure("timed out"),        // 6: external: decided
            failure("third"),            // 7: metrics unmoved: asked -> regressive
            progress(r#""tests_failed":4"#),
            failure("fourth"),           // 9: unchanged snapshot: asked -> no_progress
            failure("fourth"),           // 10: exact repeat: exact_failure's
            failure("fifth"),            // 11: asked -> progress
            progress(r#""tests_failed":6"#), // 12: regression, decided
            failure("sixth"),            // 13: a rise on line 12: decided
        ];
        let found = run_on(&evaluator, &lines).await;
        let asked = judge.asked.lock().clone();
        let asked_lines: Vec<u64> = asked.iter().map(|r| r.current.line).collect();
        assert_eq!(asked_lines, [7, 9, 11]);
        assert_eq!(asked[0].goal, "parse TOML tables");
        let history: Vec<&str> = asked[0].history.iter().map(|f| f.error.as_str()).collect();
        assert_eq!(history, ["first", "second"]);
        assert_eq!(asked[0].metrics.and_then(|m| m.tests_failed), Some(4));

        assert_eq!(fired(&found, kinds::REGRESSION), [7, 12]);
        assert_eq!(fired(&found, kinds::NO_PROGRESS), [9]);
        let regressive = &found.iter().find(|(line, _)| *line == 7).expect("line 7").1;
        assert_eq!(
            regressive.reason,
            "LLM judge (model scripted): each fix breaks a neighbouring parser"
        );
        assert_eq!(regressive.evidence, [3, 5, 7]);
        let stuck = &found.iter().find(|(line, _)| *line == 9).expect("line 9").1;
        assert_eq!(
            stuck.reason,
            "LLM judge (model scripted): the same lexer bug in new words"
        );
    }

    #[tokio::test]
    async fn answers_are_cached_per_task_and_question() {
        let judge = Scripted::answering(vec![says(Verdict::Progress, "closer")]);
        let evaluator = with_judge(&judge);
        let lines = [
            progress(r#""tests_failed":2"#),
            failure("first"),
            failure("second"),
        ];
        assert_eq!(run_on(&evaluator, &lines).await, []);
        // The same trace again (after the task was reset): not asked again.
        evaluator.reset_task("T").await;
        assert_eq!(run_on(&evaluator, &lines).await, []);
        assert_eq!(judge.asked.lock().len(), 1);
        // Another task with the same question is its own question.
        let other: Vec<String> = lines
            .iter()
            .map(|l| l.replace(r#""T""#, r#""U""#))
            .collect();
        run_on(&evaluator, &other).await;
        assert_eq!(judge.asked.lock().len(), 2);
    }

    #[tokio::test]
    async fn a_failing_judge_falls_back_to_metrics_and_says_so() {
        let judge = Scripted::answering(vec![
            Err(JudgeError::Timeout(std::time::Duration::from_secs(20))),
            Err(JudgeError::Malformed("not JSON".into())),
        ]);
        let evaluator = with_judge(&judge);
        let lines = [
            progress(r#""tests_failed":2"#),
            failure("first"),
            failure("second"),
            failure("third"),
        ];
        let found = run_on(&evaluator, &lines).await;
        assert_eq!(judge.asked.lock().len(), 2);
        // Each failure the judge could not answer gets the metrics-only
        // verdict: one loop (ruling 13), its note said once.
        assert_eq!(fired(&found, kinds::NO_PROGRESS), [3, 4]);
        assert_eq!(
            found[0].1.reason,
            "2 differing failures in a row (lines 2 and 3) with no progress in the test \
             metrics or completion signals; LLM unreachable (model scripted) on line 3: no \
             answer within 20000 ms; metrics-only verdict"
        );
        assert_eq!(
            found[1].1.reason,
            "3 differing failures in a row (lines 2, 3 and 4) with no progress in the test \
             metrics or completion signals; LLM unreachable (model scripted) on line 4: \
             unusable answer: not JSON; metrics-only verdict"
        );
        // A failure is not cached: the same question is asked again.
        evaluator.reset_task("T").await;
        run_on(&evaluator, &lines).await;
        assert_eq!(judge.asked.lock().len(), 4);
    }

    #[tokio::test]
    async fn without_a_goal_the_judge_hears_unknown() {
        let judge = Scripted::answering(vec![says(Verdict::Progress, "fine")]);
        let evaluator = with_judge(&judge);
        let lines = [progress(r#""coverage":0.5"#), failure("a"), failure("b")];
        run_on(&evaluator, &lines).await;
        assert_eq!(judge.asked.lock()[0].goal, "unknown");
    }

    #[tokio::test]
    async fn reset_forgets_a_task_and_the_task_count_is_capped() {
        let evaluator = ProgressEvaluator::new(&Config::default()).with_task_capacity(2);
        let lines = [failure("a"), failure("b")];
        run_on(&evaluator, &lines).await;
        evaluator.reset_task("T").await;
        assert_eq!(evaluator.live_tasks(), 0);
        // After the reset "c" is the first failure again: no detection.
        assert_eq!(run_on(&evaluator, &[failure("c")]).await, []);
        for task in ["A", "B", "C"] {
            let line = format!(r#"{{"type":"failure","task":"{task}","agent":"x","error":"e"}}"#);
            run_on(&evaluator, &[line]).await;
        }
        assert_eq!(evaluator.live_tasks(), 2);
    }

    #[tokio::test]
    async fn other_events_keep_no_state_without_a_judge() {
        let evaluator = ProgressEvaluator::new(&Config::default());
        let lines = [
            r#"{"type":"handoff","task":"H","from":"a","to":"b","goal":"g"}"#.to_owned(),
            r#"{"type":"turn","task":"H","agent":"a","output":"o","success":false}"#.to_owned(),
        ];
        run_on(&evaluator, &lines).await;
        assert_eq!(evaluator.live_tasks(), 0);
    }

    #[test]
    fn movement_compares_metric_by_metric() {
        let snap = |json: &str| match Event::from_json(&progress(json)).expect("valid").kind {
            EventKind::Progress(snapshot) => snapshot,
            _ => unreachable!("a progress event"),
        };
        let latest = snap(r#""tests_total":10,"tests_failed":2,"coverage":0.5"#);
        let forward = Movement {
            forward: true,
            regressed: false,
        };
        let regressed = Movement {
            forward: false,
            regressed: true,
        };
        let neither = Movement::default();
        for (json, expected) in [
            (r#""tests_failed":1"#, forward),
            (r#""coverage":0.6"#, forward),
            (r#""tests_total":12"#, forward),
            (r#""files_changed":1"#, forward),
            (r#""deps_added":1"#, forward),
            (r#""tests_failed":3"#, regressed),
            (r#""tests_failed":3,"coverage":0.9"#, regressed),
            (r#""tests_total":100,"tests_failed":3"#, forward),
            (r#""tests_failed":2"#, neither),
            (r#""coverage":0.4"#, neither),
            (r#""tests_total":8"#, neither),
            ("", neither),
        ] {
            assert_eq!(movement(&latest, &snap(json)), expected, "{json}");
        }
        // A first report of a test metric is a baseline.
        assert_eq!(
            movement(&ProgressSnapshot::default(), &latest),
            Movement::default()
        );
    }

    #[test]
    fn files_changed_is_a_running_total() {
        let mut latest = ProgressSnapshot {
            files_changed: Some(4),
            ..ProgressSnapshot::default()
        };
        merge(
            &mut latest,
            &ProgressSnapshot {
                files_changed: Some(2),
                tests_failed: Some(1),
                ..ProgressSnapshot::default()
            },
        );
        assert_eq!(
            (latest.files_changed, latest.tests_failed),
            (Some(4), Some(1))
        );
    }

    #[test]
    fn join_with_and_reads_naturally() {
        assert_eq!(join_with_and(&[2]), "2");
        assert_eq!(join_with_and(&[2, 4]), "2 and 4");
        assert_eq!(join_with_and(&[2, 4, 7]), "2, 4 and 7");
    }
}
