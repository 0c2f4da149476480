//! A task's state as a durable store keeps it: what
//! [`ProgressEvaluator::export_task`](loopguard_host::ExtensionDetector::export_task)
//! gives and `import_task` reads back (versioned JSON, [`STATE_FORMAT`]).
//!
//! Everything that decides a detection or appears in one is kept: the
//! latest metrics and which kinds were ever reported, the rising run, what
//! progress events showed since the previous agent failure, that failure's
//! line, the last progress line, the recent failures' message hashes, the
//! stalled run with its evidence and judge notes, the external run, and
//! (with a judge) the goal and the failures the judge is shown. Not kept:
//! the judge's answer cache (a cache: after a restart a question is asked
//! again), and where the task stands among the evaluator's other tasks
//! (which one the task capacity forgets first), a property of the process.

use std::collections::VecDeque;

use loopguard_core_types::ProgressSnapshot;
use loopguard_detectors::ExternalKind;
use loopguard_host::ExtensionError;
use serde::{Deserialize, Serialize};

use super::{
    DETECTOR, EVIDENCE_CAP, FailureRecord, NOTES_CAP, STATE_FORMAT, Seen, TaskState, Window,
};

/// [`TaskState`] as a durable store keeps it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SavedTask {
    format: u32,
    /// The task's goal (kept only with a judge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    goal: Option<String>,
    /// The latest value of every metric reported.
    metrics: SavedMetrics,
    has_tests: bool,
    has_completion: bool,
    /// The current run of snapshots whose failing tests did not fall.
    rising: Vec<SavedRising>,
    /// What `progress` events showed since the previous agent failure.
    since_failure: SavedWindow,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    previous_failure: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_progress: Option<u64>,
    /// Message hashes of the recent agent failures, oldest first (32 hex
    /// digits each: a JSON number cannot carry 128 bits everywhere).
    recent: Vec<String>,
    /// The recent agent failures as the judge sees them (kept only with a
    /// judge), oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    failures: Vec<SavedFailure>,
    stalled: u32,
    stalled_seen: Vec<SavedSeen>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    judge_notes: Vec<String>,
    external: u32,
    external_seen: Vec<SavedExternal>,
}

/// An event remembered as evidence.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedSeen {
    line: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<String>,
}

/// A snapshot of the rising run.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedRising {
    line: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    failing: u64,
}

/// An agent failure as the judge sees it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedFailure {
    line: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    agent: String,
    error: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error_type: Option<String>,
}

/// An external failure of the current run.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedExternal {
    line: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    /// `network`, `timeout`, `authentication` or `dependency`.
    kind: String,
}

/// [`Window`].
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedWindow {
    events: u32,
    forward: bool,
    regressed: bool,
}

/// A task's latest metrics. Coverage is kept as text (Rust's shortest
/// round-tripping form): a JSON number read back by `serde_json` without
/// its `float_roundtrip` feature may come back one unit in the last place
/// off, and a coverage that seems to move is progress.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedMetrics {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tests_total: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tests_failed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    coverage: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    files_changed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deps_added: Option<u64>,
}

impl SavedSeen {
    fn of(seen: &Seen) -> SavedSeen {
        SavedSeen {
            line: seen.line,
            id: seen.id.as_deref().map(str::to_owned),
        }
    }
}

fn seen(line: u64, id: Option<&str>) -> Seen {
    Seen {
        line,
        id: id.map(Box::from),
    }
}

impl SavedTask {
    /// The saved form of `state`.
    pub(super) fn of(state: &TaskState) -> SavedTask {
        let latest = &state.latest;
        SavedTask {
            format: STATE_FORMAT,
            goal: state.goal.as_deref().map(str::to_owned),
            metrics: SavedMetrics {
                tests_total: latest.tests_total,
                tests_failed: latest.tests_failed,
                coverage: latest.coverage.map(|coverage| coverage.to_string()),
                files_changed: latest.files_changed,
                deps_added: latest.deps_added,
            },
            has_tests: state.has_tests,
            has_completion: state.has_completion,
            rising: state
                .rising
                .iter()
                .map(|(seen, failing)| SavedRising {
                    line: seen.line,
                    id: seen.id.as_deref().map(str::to_owned),
                    failing: *failing,
                })
                .collect(),
            since_failure: SavedWindow {
                events: state.since_failure.events,
                forward: state.since_failure.forward,
                regressed: state.since_failure.regressed,
            },
            previous_failure: state.previous_failure,
            last_progress: state.last_progress,
            recent: state
                .recent
                .iter()
                .map(|hash| format!("{hash:032x}"))
                .collect(),
            failures: state
                .failures
                .iter()
                .map(|(seen, record)| SavedFailure {
                    line: seen.line,
                    id: seen.id.as_deref().map(str::to_owned),
                    agent: record.agent.clone(),
                    error: record.error.clone(),
                    error_type: record.error_type.clone(),
                })
                .collect(),
            stalled: state.stalled,
            stalled_seen: state.stalled_seen.iter().map(SavedSeen::of).collect(),
            judge_notes: state.judge_notes.iter().cloned().collect(),
            external: state.external,
            external_seen: state
                .external_seen
                .iter()
                .map(|(seen, kind)| SavedExternal {
                    line: seen.line,
                    id: seen.id.as_deref().map(str::to_owned),
                    kind: kind.as_str().to_owned(),
                })
                .collect(),
        }
    }

    /// The state back, for an evaluator with (`judged`) or without a judge
    /// and a failure history of `history`; or what is wrong with it.
    pub(super) fn restore(self, judged: bool, history: usize) -> Result<TaskState, String> {
        let coverage = match &self.metrics.coverage {
            Some(text) => Some(
                text.parse::<f64>()
                    .ok()
                    .filter(|coverage| coverage.is_finite())
                    .ok_or_else(|| format!("has a coverage that is not a number: {text:?}"))?,
            ),
            None => None,
        };
        for (what, len, cap) in [
            ("rising snapshots", self.rising.len(), EVIDENCE_CAP),
            ("stalled failures", self.stalled_seen.len(), EVIDENCE_CAP),
            ("external failures", self.external_seen.len(), EVIDENCE_CAP),
            ("judge notes", self.judge_notes.len(), NOTES_CAP),
        ] {
            if len > cap {
                return Err(format!("has {len} {what}, more than the {cap} ever kept"));
            }
        }
        let recent = self
            .recent
            .iter()
            .map(|hex| {
                (hex.len() == 32)
                    .then(|| u128::from_str_radix(hex, 16).ok())
                    .flatten()
                    .ok_or_else(|| format!("has a message hash that is not 32 hex digits: {hex:?}"))
            })
            .collect::<Result<Vec<u128>, String>>()?;
        let external_seen = self
            .external_seen
            .iter()
            .map(|external| {
                Ok((
                    seen(external.line, external.id.as_deref()),
                    external_kind(&external.kind)?,
                ))
            })
            .collect::<Result<VecDeque<_>, String>>()?;
        // A failure history shortened in the config since: the newest
        // entries, as the shorter window would have kept them.
        let newest = |len: usize| len.saturating_sub(history.max(1));
        let skip_recent = newest(recent.len());
        let skip_failures = newest(self.failures.len());
        Ok(TaskState {
            goal: self.goal.filter(|_| judged).map(Box::from),
            latest: ProgressSnapshot {
                tests_total: self.metrics.tests_total,
                tests_failed: self.metrics.tests_failed,
                coverage,
                files_changed: self.metrics.files_changed,
                deps_added: self.metrics.deps_added,
            },
            has_tests: self.has_tests,
            has_completion: self.has_completion,
            rising: self
                .rising
                .iter()
                .map(|rising| (seen(rising.line, rising.id.as_deref()), rising.failing))
                .collect(),
            since_failure: Window {
                events: self.since_failure.events,
                forward: self.since_failure.forward,
                regressed: self.since_failure.regressed,
            },
            previous_failure: self.previous_failure,
            last_progress: self.last_progress,
            recent: recent.into_iter().skip(skip_recent).collect(),
            failures: if judged {
                self.failures
                    .into_iter()
                    .skip(skip_failures)
                    .map(|failure| {
                        (
                            seen(failure.line, failure.id.as_deref()),
                            FailureRecord {
                                line: failure.line,
                                agent: failure.agent,
                                error: failure.error,
                                error_type: failure.error_type,
                            },
                        )
                    })
                    .collect()
            } else {
                VecDeque::new()
            },
            stalled: self.stalled,
            stalled_seen: self
                .stalled_seen
                .iter()
                .map(|saved| seen(saved.line, saved.id.as_deref()))
                .collect(),
            judge_notes: self.judge_notes.into(),
            external: self.external,
            external_seen,
        })
    }
}

/// The kind named `name` ([`ExternalKind::as_str`]).
fn external_kind(name: &str) -> Result<ExternalKind, String> {
    [
        ExternalKind::Network,
        ExternalKind::Timeout,
        ExternalKind::Authentication,
        ExternalKind::Dependency,
    ]
    .into_iter()
    .find(|kind| kind.as_str() == name)
    .ok_or_else(|| format!("has an unknown external failure kind {name:?}"))
}

/// Reads a saved state: a JSON object whose `format` is [`STATE_FORMAT`],
/// then the rest. The error names the detector, the task and what is wrong.
pub(super) fn parse(task: &str, state: serde_json::Value) -> Result<SavedTask, ExtensionError> {
    let format = match state.get("format") {
        Some(format) => format.as_u64().ok_or_else(|| {
            import_error(
                task,
                &format!("has a \"format\" that is not a version number: {format}"),
            )
        })?,
        None if state.is_object() => return Err(import_error(task, "has no \"format\"")),
        None => {
            let mut text = state.to_string();
            if let Some((cut, _)) = text.char_indices().nth(80) {
                text.truncate(cut);
                text.push('…');
            }
            return Err(import_error(task, &format!("is not a JSON object: {text}")));
        }
    };
    if format != u64::from(STATE_FORMAT) {
        return Err(import_error(
            task,
            &format!("has format {format}, and this loopguard reads format {STATE_FORMAT}"),
        ));
    }
    serde_json::from_value(state).map_err(|err| import_error(task, &format!("is malformed: {err}")))
}

/// "progress: task `task`'s saved state `problem`; the task starts afresh".
pub(super) fn import_error(task: &str, problem: &str) -> ExtensionError {
    ExtensionError(format!(
        "{DETECTOR}: task '{task}'s saved state {problem}; the task starts afresh"
    ))
}
