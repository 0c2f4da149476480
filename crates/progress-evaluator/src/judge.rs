//! The LLM hook: a judge of whether a failing task is moving towards its
//! goal, asked only when test metrics and completion signals cannot decide.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use loopguard_core_types::ProgressSnapshot;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Judges goal proximity from a task's failure history.
///
/// [`crate::ProgressEvaluator`] asks it about a failure whose message differs
/// from the earlier ones when the task's metrics did not move since the
/// previous failure. Its answers are cached per task and question, so it is
/// never asked the same thing twice. An implementation must bound its own
/// time (the event waits for it) and return an error rather than guess: on
/// an error the evaluator falls back to its metrics-only verdict.
#[async_trait]
pub trait GoalJudge: Send + Sync + fmt::Debug {
    /// Judges one failure.
    async fn judge(&self, request: &JudgeRequest) -> Result<Judgement, JudgeError>;

    /// Who judges, for reasons: e.g. `model qwen2.5:7b`.
    fn describe(&self) -> String;
}

/// What the judge is asked about: a task's goal, its failure history and
/// the failure to judge.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeRequest {
    /// The task id.
    pub task: String,
    /// The task's goal: the `goal` field of its first event that had one,
    /// else `unknown`.
    pub goal: String,
    /// Earlier failures of the agents, oldest first (at most
    /// `failures.history`).
    pub history: Vec<FailureRecord>,
    /// The failure to judge.
    pub current: FailureRecord,
    /// The latest value of every metric the task reported, if any.
    pub metrics: Option<ProgressSnapshot>,
}

/// One agent failure as the judge sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureRecord {
    /// The input line of the failure.
    pub line: u64,
    /// The agent whose attempt failed.
    pub agent: String,
    /// The error message (at most [`crate::MAX_MESSAGE_BYTES`] bytes kept).
    pub error: String,
    /// The error's type, if given.
    pub error_type: Option<String>,
}

/// The judge's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Judgement {
    /// Whether the task moves towards its goal.
    pub verdict: Verdict,
    /// Why, in one sentence.
    pub reason: String,
}

/// Where a failing task is heading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Away from the goal: a `regression` loop.
    Regressive,
    /// Circling without getting closer: a `no_progress` loop.
    NoProgress,
    /// Towards the goal: no loop.
    Progress,
}

impl Verdict {
    /// The verdict's name in the answer format: `regressive`,
    /// `no_progress`, `progress`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Regressive => "regressive",
            Verdict::NoProgress => "no_progress",
            Verdict::Progress => "progress",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a judge gave no judgement. The evaluator then uses its metrics-only
/// verdict and says so in the detection's reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JudgeError {
    /// The judge is configured wrongly (named by its key or variable).
    #[error("LLM judge config: {0}")]
    Config(String),
    /// The server could not be reached.
    #[error("cannot reach {url}: {message}")]
    Unreachable {
        /// The URL posted to.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// No answer within the timeout.
    #[error("no answer within {} ms", .0.as_millis())]
    Timeout(Duration),
    /// The server answered with an error status (after the retries, for a
    /// 5xx or a 429).
    #[error("HTTP {status} from {url}: {body}")]
    Status {
        /// The HTTP status code.
        status: u16,
        /// The URL posted to.
        url: String,
        /// The start of the answer's body.
        body: String,
    },
    /// The answer is not the strict JSON format asked for.
    #[error("unusable answer: {0}")]
    Malformed(String),
}

impl JudgeRequest {
    /// A 128-bit digest of everything the judge is shown except input line
    /// numbers (the task is the other half of the cache key), so the same
    /// question replayed or streamed again is recognised.
    pub(crate) fn digest(&self) -> u128 {
        let mut hasher = Sha256::new();
        let mut field = |text: &str| {
            hasher.update((text.len() as u64).to_le_bytes());
            hasher.update(text.as_bytes());
        };
        field(&self.goal);
        for failure in self.history.iter().chain([&self.current]) {
            field(&failure.agent);
            field(&failure.error);
            field(failure.error_type.as_deref().unwrap_or("\u{0}"));
        }
        field(&self.metrics.map_or_else(String::new, |m| metrics_text(&m)));
        let digest = hasher.finalize();
        let mut head = [0u8; 16];
        head.copy_from_slice(&digest[..16]);
        u128::from_le_bytes(head)
    }
}

/// The metrics as `name=value` pairs, the ones reported only.
pub(crate) fn metrics_text(metrics: &ProgressSnapshot) -> String {
    let count = |value: Option<u64>| value.map(|value| value.to_string());
    [
        ("tests_total", count(metrics.tests_total)),
        ("tests_failed", count(metrics.tests_failed)),
        ("coverage", metrics.coverage.map(|value| value.to_string())),
        ("files_changed", count(metrics.files_changed)),
        ("deps_added", count(metrics.deps_added)),
    ]
    .into_iter()
    .filter_map(|(name, value)| Some(format!("{name}={}", value?)))
    .collect::<Vec<_>>()
    .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(line: u64, error: &str) -> FailureRecord {
        FailureRecord {
            line,
            agent: "coder".into(),
            error: error.into(),
            error_type: None,
        }
    }

    fn request() -> JudgeRequest {
        JudgeRequest {
            task: "T".into(),
            goal: "parse the config".into(),
            history: vec![record(1, "a")],
            current: record(3, "b"),
            metrics: None,
        }
    }

    #[test]
    fn digest_ignores_lines_and_sees_everything_else() {
        let base = request();
        let mut moved = base.clone();
        moved.history[0].line = 40;
        moved.current.line = 42;
        assert_eq!(base.digest(), moved.digest());
        let variants: Vec<JudgeRequest> = vec![
            JudgeRequest {
                goal: "other".into(),
                ..base.clone()
            },
            JudgeRequest {
                current: record(3, "c"),
                ..base.clone()
            },
            JudgeRequest {
                history: vec![],
                ..base.clone()
            },
            JudgeRequest {
                metrics: Some(ProgressSnapshot {
                    tests_failed: Some(1),
                    ..ProgressSnapshot::default()
                }),
                ..base.clone()
            },
            // Field boundaries count: ("ab", "") is not ("a", "b").
            JudgeRequest {
                history: vec![record(1, "ab")],
                current: record(3, ""),
                ..base.clone()
            },
        ];
        for variant in variants {
            assert_ne!(base.digest(), variant.digest(), "{variant:?}");
        }
    }

    #[test]
    fn verdicts_use_the_answer_format_names() {
        for verdict in [Verdict::Regressive, Verdict::NoProgress, Verdict::Progress] {
            let json = serde_json::to_string(&verdict).expect("serializes");
            assert_eq!(json, format!("\"{verdict}\""));
        }
        let judgement: Judgement =
            serde_json::from_str(r#"{"verdict":"no_progress","reason":"same stage"}"#)
                .expect("valid");
        assert_eq!(judgement.verdict, Verdict::NoProgress);
        assert!(serde_json::from_str::<Judgement>(r#"{"verdict":"maybe","reason":"x"}"#).is_err());
        assert!(
            serde_json::from_str::<Judgement>(r#"{"verdict":"progress","reason":"x","extra":1}"#)
                .is_err()
        );
    }

    #[test]
    fn metrics_text_lists_what_was_reported() {
        let metrics = ProgressSnapshot {
            tests_total: Some(10),
            tests_failed: Some(2),
            coverage: Some(0.5),
            files_changed: None,
            deps_added: Some(1),
        };
        assert_eq!(
            metrics_text(&metrics),
            "tests_total=10, tests_failed=2, coverage=0.5, deps_added=1"
        );
        assert_eq!(metrics_text(&ProgressSnapshot::default()), "");
    }
}
