//! [`OpenAiJudge`]: the goal judge on any OpenAI-compatible
//! chat-completions server (OpenAI, vLLM, Ollama, llama.cpp's server).

use async_trait::async_trait;
use loopguard_config::LlmConfig;
pub use loopguard_llm_client::{BASE_URL_ENV, LlmSettings as OpenAiSettings, MODEL_ENV};
use loopguard_llm_client::{ChatClient, LlmError, MAX_BODY_BYTES, truncate};

use crate::judge::{GoalJudge, JudgeError, JudgeRequest, Judgement, metrics_text};

/// Longest reason kept from an answer, in bytes.
const MAX_REASON_BYTES: usize = 500;

/// The instructions: the strict answer format and what each verdict means.
const SYSTEM_PROMPT: &str = "You judge whether a software task worked on by AI agents is moving \
towards its goal. You get the goal, the agents' earlier failures (oldest first), the latest \
test metrics and the failure to judge. Answer with exactly one JSON object and nothing else: \
{\"verdict\": \"regressive\" | \"no_progress\" | \"progress\", \"reason\": \"<one sentence>\"}. \
regressive: the task is moving away from its goal (failures get worse or spread). \
no_progress: the attempts circle around the same problem without getting closer. \
progress: the failures show the task getting closer (a later stage fails, less fails).";

/// A [`GoalJudge`] that asks an OpenAI-compatible chat-completions server
/// (through [`ChatClient`]).
///
/// It posts the question with `temperature: 0` and `response_format:
/// {"type": "json_object"}`, and accepts only the strict answer
/// `{"verdict": "regressive" | "no_progress" | "progress", "reason": "..."}`
/// (no other field, a non-empty reason) as the message content; anything
/// else is [`JudgeError::Malformed`]. Each attempt has the configured
/// timeout; a connection error, a 5xx or a 429 is retried with exponential
/// backoff up to `retries` times; a timeout, another 4xx or a garbage answer
/// is not retried (the evaluator falls back at once).
#[derive(Debug, Clone)]
pub struct OpenAiJudge {
    client: ChatClient,
}

impl From<LlmError> for JudgeError {
    fn from(error: LlmError) -> JudgeError {
        match error {
            LlmError::Unreachable { url, message } => JudgeError::Unreachable { url, message },
            LlmError::Timeout(timeout) => JudgeError::Timeout(timeout),
            LlmError::Status { status, url, body } => JudgeError::Status { status, url, body },
            LlmError::Malformed(message) => JudgeError::Malformed(message),
            LlmError::Config(message) => JudgeError::Config(message),
            // `LlmError` may grow; a new kind reads as a configuration or
            // transport problem, named as the client words it.
            other => JudgeError::Config(other.to_string()),
        }
    }
}

impl OpenAiJudge {
    /// A judge with these settings.
    pub fn new(settings: OpenAiSettings) -> Result<OpenAiJudge, JudgeError> {
        Ok(OpenAiJudge {
            client: ChatClient::new(settings)?,
        })
    }

    /// The judge `[llm]` and the process environment describe, or `None`
    /// when no base URL or no model is set.
    pub fn from_config(config: &LlmConfig) -> Result<Option<OpenAiJudge>, JudgeError> {
        OpenAiSettings::from_config(config)?
            .map(OpenAiJudge::new)
            .transpose()
    }

    /// The settings it was built with.
    pub fn settings(&self) -> &OpenAiSettings {
        self.client.settings()
    }
}

#[async_trait]
impl GoalJudge for OpenAiJudge {
    async fn judge(&self, request: &JudgeRequest) -> Result<Judgement, JudgeError> {
        let content = self.client.ask(SYSTEM_PROMPT, &question(request)).await?;
        parse_content(&content)
    }

    fn describe(&self) -> String {
        format!("model {}", self.settings().model)
    }
}

/// The user message: goal, metrics, history and the failure to judge.
fn question(request: &JudgeRequest) -> String {
    let mut text = format!("Task: {}\nGoal: {}\n", request.task, request.goal);
    let metrics = request.metrics.as_ref().map(metrics_text);
    text.push_str(&format!(
        "Latest metrics: {}\n",
        metrics
            .as_deref()
            .filter(|m| !m.is_empty())
            .unwrap_or("none reported")
    ));
    text.push_str("Earlier failures, oldest first:\n");
    if request.history.is_empty() {
        text.push_str("(none)\n");
    }
    let describe = |failure: &crate::FailureRecord| {
        let kind = failure
            .error_type
            .as_deref()
            .map(|t| format!(", type {t}"))
            .unwrap_or_default();
        format!(
            "[line {}, agent {}{kind}] {}\n",
            failure.line, failure.agent, failure.error
        )
    };
    for failure in &request.history {
        text.push_str(&describe(failure));
    }
    text.push_str("Failure to judge:\n");
    text.push_str(&describe(&request.current));
    text.push_str("Is the task moving towards its goal?");
    text
}

/// Reads the strict answer out of a chat completion's message content.
fn parse_content(content: &str) -> Result<Judgement, JudgeError> {
    let mut judgement: Judgement = serde_json::from_str(content.trim()).map_err(|err| {
        JudgeError::Malformed(format!(
            "the content is not {{\"verdict\", \"reason\"}} JSON ({err}): {:?}",
            truncate(content, MAX_BODY_BYTES)
        ))
    })?;
    let reason = judgement.reason.trim();
    if reason.is_empty() {
        return Err(JudgeError::Malformed("the reason is empty".into()));
    }
    judgement.reason = truncate(reason, MAX_REASON_BYTES).to_owned();
    Ok(judgement)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FailureRecord, Verdict};

    #[test]
    fn strict_answers_parse() {
        let judgement =
            parse_content(r#" {"verdict": "regressive", "reason": " more tests fail "} "#)
                .expect("valid");
        assert_eq!(judgement.verdict, Verdict::Regressive);
        assert_eq!(judgement.reason, "more tests fail");
    }

    #[test]
    fn garbage_is_malformed() {
        for content in [
            "The task is progressing.",
            "```json\n{\"verdict\":\"progress\",\"reason\":\"x\"}\n```",
            r#"{"verdict":"progressing","reason":"x"}"#,
            r#"{"verdict":"progress"}"#,
            r#"{"verdict":"progress","reason":"  "}"#,
            r#"{"verdict":"progress","reason":"x","confidence":0.9}"#,
        ] {
            let err = parse_content(content).expect_err(content);
            assert!(matches!(err, JudgeError::Malformed(_)), "{content}: {err}");
        }
    }

    #[test]
    fn client_errors_keep_their_kind() {
        let timeout = std::time::Duration::from_secs(3);
        assert_eq!(
            JudgeError::from(LlmError::Timeout(timeout)),
            JudgeError::Timeout(timeout)
        );
        assert_eq!(
            JudgeError::from(LlmError::Malformed("x".into())),
            JudgeError::Malformed("x".into())
        );
        assert!(matches!(
            JudgeError::from(LlmError::Status {
                status: 503,
                url: "u".into(),
                body: "b".into()
            }),
            JudgeError::Status { status: 503, .. }
        ));
    }

    #[test]
    fn the_question_shows_goal_metrics_history_and_current() {
        let failure = |line, error: &str| FailureRecord {
            line,
            agent: "coder".into(),
            error: error.into(),
            error_type: Some("E".into()),
        };
        let request = JudgeRequest {
            task: "T-7".into(),
            goal: "make the parser total".into(),
            history: vec![failure(2, "first")],
            current: failure(5, "second"),
            metrics: None,
        };
        let text = question(&request);
        for part in [
            "Task: T-7",
            "Goal: make the parser total",
            "Latest metrics: none reported",
            "[line 2, agent coder, type E] first",
            "Failure to judge:\n[line 5, agent coder, type E] second",
        ] {
            assert!(text.contains(part), "{part:?} in {text}");
        }
    }
}
