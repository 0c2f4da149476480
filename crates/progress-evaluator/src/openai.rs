//! [`OpenAiJudge`]: the goal judge on any OpenAI-compatible
//! chat-completions server (OpenAI, vLLM, Ollama, llama.cpp's server).

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use loopguard_core_types::LlmConfig;
use serde::Deserialize;
use serde_json::json;

use crate::judge::{GoalJudge, JudgeError, JudgeRequest, Judgement, metrics_text};

/// The environment variable read for the base URL when the config has none.
pub const BASE_URL_ENV: &str = "LOOPGUARD_LLM_BASE_URL";
/// The environment variable read for the model when the config has none.
pub const MODEL_ENV: &str = "LOOPGUARD_LLM_MODEL";

/// Longest reason kept from an answer, in bytes.
const MAX_REASON_BYTES: usize = 500;
/// Longest error body quoted in a [`JudgeError::Status`], in bytes.
const MAX_BODY_BYTES: usize = 200;
/// Longest wait between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// The instructions: the strict answer format and what each verdict means.
const SYSTEM_PROMPT: &str = "You judge whether a software task worked on by AI agents is moving \
towards its goal. You get the goal, the agents' earlier failures (oldest first), the latest \
test metrics and the failure to judge. Answer with exactly one JSON object and nothing else: \
{\"verdict\": \"regressive\" | \"no_progress\" | \"progress\", \"reason\": \"<one sentence>\"}. \
regressive: the task is moving away from its goal (failures get worse or spread). \
no_progress: the attempts circle around the same problem without getting closer. \
progress: the failures show the task getting closer (a later stage fails, less fails).";

/// Where and how [`OpenAiJudge`] asks.
#[derive(Clone, PartialEq, Eq)]
pub struct OpenAiSettings {
    /// The API's base URL; the judge posts to `{base_url}/chat/completions`.
    pub base_url: String,
    /// The model name.
    pub model: String,
    /// Sent as `Authorization: Bearer KEY` when present.
    pub api_key: Option<String>,
    /// Time one attempt may take.
    pub timeout: Duration,
    /// Attempts after the first one, after a connection error, a 5xx or a
    /// 429.
    pub retries: u32,
    /// Wait before the first retry; doubled for each further one (at most
    /// 10 s).
    pub backoff: Duration,
}

impl fmt::Debug for OpenAiSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The key never reaches a log.
        f.debug_struct("OpenAiSettings")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("timeout", &self.timeout)
            .field("retries", &self.retries)
            .field("backoff", &self.backoff)
            .finish()
    }
}

impl OpenAiSettings {
    /// The settings of `[llm]`, completed from the environment as `env`
    /// answers it: the base URL and model from the config, else from
    /// `LOOPGUARD_LLM_BASE_URL` and `LOOPGUARD_LLM_MODEL`; the key from the
    /// variable `llm.api_key_env` names. `Ok(None)` when no base URL or no
    /// model is set: there is no judge.
    pub fn from_config_with_env(
        config: &LlmConfig,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<OpenAiSettings>, JudgeError> {
        let set = |value: Option<String>| value.filter(|v| !v.trim().is_empty());
        let base_url = match set(config.base_url.clone()) {
            Some(url) => url,
            None => match set(env(BASE_URL_ENV)) {
                Some(url) if url.starts_with("http://") || url.starts_with("https://") => url,
                Some(url) => {
                    return Err(JudgeError::Config(format!(
                        "{BASE_URL_ENV}={url:?} is not an http:// or https:// URL"
                    )));
                }
                None => return Ok(None),
            },
        };
        let Some(model) = set(config.model.clone()).or_else(|| set(env(MODEL_ENV))) else {
            return Ok(None);
        };
        Ok(Some(OpenAiSettings {
            base_url,
            model,
            api_key: set(env(&config.api_key_env)),
            timeout: Duration::from_secs(config.timeout_secs.max(1)),
            retries: config.retries,
            backoff: Duration::from_millis(500),
        }))
    }
}

/// A [`GoalJudge`] that asks an OpenAI-compatible chat-completions server.
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
    client: reqwest::Client,
    endpoint: String,
    settings: OpenAiSettings,
}

/// The parts of a chat-completions answer the judge reads.
#[derive(Deserialize)]
struct Completion {
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
struct Choice {
    message: Message,
}

#[derive(Deserialize)]
struct Message {
    content: Option<String>,
}

impl OpenAiJudge {
    /// A judge with these settings.
    pub fn new(settings: OpenAiSettings) -> Result<OpenAiJudge, JudgeError> {
        let client = reqwest::Client::builder()
            .timeout(settings.timeout)
            .build()
            .map_err(|err| JudgeError::Config(format!("cannot build the HTTP client: {err}")))?;
        let endpoint = format!(
            "{}/chat/completions",
            settings.base_url.trim_end_matches('/')
        );
        Ok(OpenAiJudge {
            client,
            endpoint,
            settings,
        })
    }

    /// The judge `[llm]` and the process environment describe, or `None`
    /// when no base URL or no model is set.
    pub fn from_config(config: &LlmConfig) -> Result<Option<OpenAiJudge>, JudgeError> {
        OpenAiSettings::from_config_with_env(config, |name| std::env::var(name).ok())?
            .map(OpenAiJudge::new)
            .transpose()
    }

    /// The settings it was built with.
    pub fn settings(&self) -> &OpenAiSettings {
        &self.settings
    }

    /// One attempt: the answer, or an error and whether to retry it.
    async fn attempt(&self, body: &serde_json::Value) -> Result<Judgement, (JudgeError, bool)> {
        let mut request = self.client.post(&self.endpoint).json(body);
        if let Some(key) = &self.settings.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|err| self.transport(&err))?;
        let status = response.status();
        let text = response.text().await.map_err(|err| self.transport(&err))?;
        if !status.is_success() {
            let retry = status.is_server_error() || status.as_u16() == 429;
            let error = JudgeError::Status {
                status: status.as_u16(),
                url: self.endpoint.clone(),
                body: truncate(text.trim(), MAX_BODY_BYTES).to_owned(),
            };
            return Err((error, retry));
        }
        parse_answer(&text).map_err(|err| (err, false))
    }

    fn transport(&self, err: &reqwest::Error) -> (JudgeError, bool) {
        if err.is_timeout() {
            return (JudgeError::Timeout(self.settings.timeout), false);
        }
        let message = std::error::Error::source(err)
            .map_or_else(|| err.to_string(), |source| format!("{err}: {source}"));
        let error = JudgeError::Unreachable {
            url: self.endpoint.clone(),
            message,
        };
        (error, err.is_connect())
    }
}

#[async_trait]
impl GoalJudge for OpenAiJudge {
    async fn judge(&self, request: &JudgeRequest) -> Result<Judgement, JudgeError> {
        let body = json!({
            "model": self.settings.model,
            "temperature": 0,
            "response_format": {"type": "json_object"},
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": question(request)},
            ],
        });
        let mut backoff = self.settings.backoff;
        let mut attempt = 0;
        loop {
            match self.attempt(&body).await {
                Ok(judgement) => return Ok(judgement),
                Err((error, true)) if attempt < self.settings.retries => {
                    tracing::debug!(attempt, error = %error, "LLM judge: retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    attempt += 1;
                }
                Err((error, _)) => return Err(error),
            }
        }
    }

    fn describe(&self) -> String {
        format!("model {}", self.settings.model)
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

/// Reads the strict answer out of a chat-completions response body.
fn parse_answer(body: &str) -> Result<Judgement, JudgeError> {
    let completion: Completion = serde_json::from_str(body)
        .map_err(|err| JudgeError::Malformed(format!("not a chat-completions response: {err}")))?;
    let content = completion
        .choices
        .into_iter()
        .next()
        .and_then(|choice| choice.message.content)
        .ok_or_else(|| JudgeError::Malformed("the response has no message content".into()))?;
    let mut judgement: Judgement = serde_json::from_str(content.trim()).map_err(|err| {
        JudgeError::Malformed(format!(
            "the content is not {{\"verdict\", \"reason\"}} JSON ({err}): {:?}",
            truncate(&content, MAX_BODY_BYTES)
        ))
    })?;
    let reason = judgement.reason.trim();
    if reason.is_empty() {
        return Err(JudgeError::Malformed("the reason is empty".into()));
    }
    judgement.reason = truncate(reason, MAX_REASON_BYTES).to_owned();
    Ok(judgement)
}

/// At most `max` bytes of `text`, cut at a character boundary.
pub(crate) fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FailureRecord, Verdict};

    fn completion(content: &str) -> String {
        json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]})
            .to_string()
    }

    #[test]
    fn strict_answers_parse() {
        let judgement = parse_answer(&completion(
            r#" {"verdict": "regressive", "reason": " more tests fail "} "#,
        ))
        .expect("valid");
        assert_eq!(judgement.verdict, Verdict::Regressive);
        assert_eq!(judgement.reason, "more tests fail");
    }

    #[test]
    fn garbage_is_malformed() {
        for body in [
            "not json".to_owned(),
            json!({"choices": []}).to_string(),
            json!({"choices": [{"message": {"content": null}}]}).to_string(),
            completion("The task is progressing."),
            completion("```json\n{\"verdict\":\"progress\",\"reason\":\"x\"}\n```"),
            completion(r#"{"verdict":"progressing","reason":"x"}"#),
            completion(r#"{"verdict":"progress"}"#),
            completion(r#"{"verdict":"progress","reason":"  "}"#),
            completion(r#"{"verdict":"progress","reason":"x","confidence":0.9}"#),
        ] {
            let err = parse_answer(&body).expect_err(&body);
            assert!(matches!(err, JudgeError::Malformed(_)), "{body}: {err}");
        }
    }

    #[test]
    fn settings_come_from_config_then_environment() {
        let env = |name: &str| match name {
            BASE_URL_ENV => Some("http://env:1/v1".to_owned()),
            MODEL_ENV => Some("env-model".to_owned()),
            "LOOPGUARD_LLM_API_KEY" => Some("sk-env".to_owned()),
            _ => None,
        };
        let config = LlmConfig::default();
        let settings = OpenAiSettings::from_config_with_env(&config, env)
            .expect("valid")
            .expect("configured by the environment");
        assert_eq!(settings.base_url, "http://env:1/v1");
        assert_eq!(settings.model, "env-model");
        assert_eq!(settings.api_key.as_deref(), Some("sk-env"));
        assert_eq!(settings.timeout, Duration::from_secs(20));
        assert_eq!(settings.retries, 2);
        assert!(!format!("{settings:?}").contains("sk-env"));

        let config = LlmConfig {
            base_url: Some("http://config:2/v1".into()),
            model: Some("config-model".into()),
            api_key_env: "MY_KEY".into(),
            timeout_secs: 3,
            retries: 0,
        };
        let settings = OpenAiSettings::from_config_with_env(&config, env)
            .expect("valid")
            .expect("configured");
        assert_eq!(settings.base_url, "http://config:2/v1");
        assert_eq!(settings.model, "config-model");
        assert_eq!(settings.api_key, None);
        assert_eq!(
            (settings.timeout, settings.retries),
            (Duration::from_secs(3), 0)
        );
    }

    #[test]
    fn no_url_or_no_model_means_no_judge() {
        let none = |_: &str| None;
        assert_eq!(
            OpenAiSettings::from_config_with_env(&LlmConfig::default(), none),
            Ok(None)
        );
        let only_url = LlmConfig {
            base_url: Some("http://x/v1".into()),
            ..LlmConfig::default()
        };
        assert_eq!(
            OpenAiSettings::from_config_with_env(&only_url, none),
            Ok(None)
        );
        let bad_env = |name: &str| (name == BASE_URL_ENV).then(|| "localhost:1".to_owned());
        let err = OpenAiSettings::from_config_with_env(&LlmConfig::default(), bad_env)
            .expect_err("not a URL");
        assert!(err.to_string().contains(BASE_URL_ENV), "{err}");
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

    #[test]
    fn truncate_cuts_at_a_char_boundary() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("héllo", 3), "hé");
        assert_eq!(truncate("abc", 10), "abc");
    }
}
