//! Progress evaluation: is a failing task moving towards its goal?
//!
//! A loop is "no progress", not "a repeat" (Decision 74). An exact repeat of
//! a failure message is the fast path (`exact_failure`, ruling 2); a failure
//! whose message differs is judged by the task's progress: test metrics
//! first, completion signals next, an LLM judgement last.
//! [`ProgressEvaluator`] is that judge, plugged into the engine as an
//! [`ExtensionDetector`](loopguard_host::ExtensionDetector):
//!
//! ```
//! use std::sync::Arc;
//! use loopguard_core_types::{Action, Event};
//! use loopguard_config::Config;
//! use loopguard_host::LoopGuard;
//! use loopguard_progress_evaluator::ProgressEvaluator;
//!
//! # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
//! let config = Config::default();
//! let guard = LoopGuard::builder(config.clone())
//!     .extension(Arc::new(ProgressEvaluator::new(&config)))
//!     .build()?;
//! let mut last = None;
//! for failing in [1, 3, 5, 8] {
//!     let line = format!(r#"{{"type":"progress","task":"T","tests_total":40,"tests_failed":{failing}}}"#);
//!     last = Some(guard.observe(Event::from_json(&line)?).await);
//! }
//! let decision = last.expect("four decisions");
//! // Three rises are three `regression` loops: the human gate.
//! assert_eq!(decision.action, Action::Escalate);
//! assert_eq!(decision.detections[0].kind, "regression");
//! assert!(decision.detections[0].reason.starts_with("failing tests rose 1 → 3 → 5 → 8"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The rules
//!
//! Per task, from its `progress` and `failure` events:
//!
//! - **Progress events.** A snapshot is compared with the task's latest
//!   metrics. Failing tests that rise (and a failure rate, where
//!   `tests_total` is known on both sides, that does not fall) are a
//!   `regression` loop at once, whatever the error messages say: "1, 3, 5, 8
//!   failing" is three loops, each reason reading "failing tests rose 1 → 3
//!   → 5 → 8" with the rising snapshots' lines as evidence. Fewer failing
//!   tests, a lower failure rate, more coverage, more tests, or more
//!   `files_changed` or `deps_added` (completion signals) are progress. A
//!   metric reported for the first time is a baseline, not a move (the
//!   running totals `files_changed` and `deps_added` start from 0).
//! - **External failures** ([`loopguard_detectors::classify`]: network,
//!   timeout, authentication, dependency) never add to the loop count
//!   (ruling 3). Each one is an `external_failure` detection with action
//!   `warn`; the `progress.external_failures_before_escalation`th (3) in a
//!   row, with no agent failure in between, and every one after it
//!   `escalate`s, as a dependency problem rather than an agent loop.
//! - **Agent failures.** An exact repeat of a recent message is
//!   `exact_failure`'s (skipped here). A differing message is judged by what
//!   the `progress` events showed since the previous agent failure:
//!   progress excuses it; a rise was already a `regression`. Otherwise, in a
//!   task that never reported a metric it is one more failure with "no
//!   tests and no completion signals"; the
//!   `progress.no_progress_failures`th (3) such failure in a row is the
//!   first `no_progress` loop, and each further one is another (ruling 13).
//! - **Undecidable** is a differing agent failure in a task that does report
//!   metrics, none of which moved since the previous agent failure (no
//!   `progress` event in between, or only unchanged ones). With a
//!   [`GoalJudge`] it is asked (once per task and question: answers are
//!   cached, so a replay does not ask again): `regressive` is a
//!   `regression` loop, `no_progress` a `no_progress` loop, both with the
//!   reason "LLM judge (model X): ..."; `progress` excuses it. Without a
//!   judge, the metrics-only verdict applies: the failure is one
//!   `no_progress` loop (ruling 13, Decision 74). The first failure of a
//!   task (nothing to compare) is never a loop and never asked about.
//!
//! # When the judge fails
//!
//! The judge never blocks the pipeline and never turns into an error of
//! the decision. An unreachable server, a timeout, an error status after
//! the retries, or an answer that is not the strict JSON format all fall
//! back to the metrics-only verdict for that failure (one `no_progress`
//! loop), and its detection says so:
//! "...; LLM unreachable (model X) on line 7: no answer within 20000 ms;
//! metrics-only verdict". A failed question is not cached.
//!
//! # Restarts
//!
//! With a durable store (SQLite, PostgreSQL), a task's state survives a
//! restart: the engine keeps what the evaluator exports after every event
//! (versioned JSON, [`STATE_FORMAT`]; everything that decides a detection,
//! not the judge's answer cache) and hands it back when it reloads the
//! task, so a trace replayed across a restart gets the decisions of one
//! whole run.
#![deny(missing_docs)]

pub use evaluator::{
    DEFAULT_CACHE_CAPACITY, DEFAULT_TASK_CAPACITY, DETECTOR, MAX_MESSAGE_BYTES, ProgressEvaluator,
    STATE_FORMAT,
};
pub use judge::{FailureRecord, GoalJudge, JudgeError, JudgeRequest, Judgement, Verdict};
pub use openai::{BASE_URL_ENV, MODEL_ENV, OpenAiJudge, OpenAiSettings};

mod evaluator;
mod judge;
mod openai;
