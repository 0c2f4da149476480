//! loopguard's client for any OpenAI-compatible chat-completions server
//! (OpenAI, vLLM, Ollama, llama.cpp's server): the one place loopguard
//! talks to an LLM.
//!
//! Two users ask through it: the progress evaluator's goal judge
//! (`loopguard-progress-evaluator`) and the same-request judge's second
//! opinion (`loopguard-semantic`). Each writes its own question and reads
//! its own strict JSON answer; this crate does the rest:
//!
//! - [`LlmSettings`]: where and how to ask, from `[llm]` and the
//!   environment (`LOOPGUARD_LLM_BASE_URL`, `LOOPGUARD_LLM_MODEL`, the key
//!   in the variable `llm.api_key_env` names). The key never reaches a log.
//! - [`ChatClient::ask`]: posts the question with `temperature: 0` and
//!   `response_format: {"type": "json_object"}`, within the configured
//!   timeout; retries a connection error, a 5xx or a 429 with exponential
//!   backoff; and returns the answer's message content.
//! - [`LlmError`]: one clear error per failure, naming the URL.
//!
//! ```no_run
//! use loopguard_config::LlmConfig;
//! use loopguard_llm_client::{ChatClient, LlmSettings};
//!
//! # async fn ask() -> Result<(), loopguard_llm_client::LlmError> {
//! let config = LlmConfig {
//!     base_url: Some("http://127.0.0.1:8080/v1".into()),
//!     model: Some("qwen2.5-1.5b-instruct".into()),
//!     ..LlmConfig::default()
//! };
//! if let Some(settings) = LlmSettings::from_config(&config)? {
//!     let client = ChatClient::new(settings)?;
//!     let content = client
//!         .ask("Answer with one JSON object.", "{\"question\": \"...\"}")
//!         .await?;
//!     println!("{content}");
//! }
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

use std::fmt;
use std::time::Duration;

use loopguard_config::LlmConfig;
use serde::Deserialize;
use serde_json::json;

/// The environment variable read for the base URL when the config has none.
pub const BASE_URL_ENV: &str = "LOOPGUARD_LLM_BASE_URL";
/// The environment variable read for the model when the config has none.
pub const MODEL_ENV: &str = "LOOPGUARD_LLM_MODEL";

/// Longest error body quoted in an [`LlmError::Status`], in bytes.
pub const MAX_BODY_BYTES: usize = 200;
/// Longest wait between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// Why an LLM gave no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// The client is configured wrongly (named by its key or variable).
    #[error("LLM config: {0}")]
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
    /// The answer is not a chat completion with message content, or (as
    /// its reader says) not the strict format asked for.
    #[error("unusable answer: {0}")]
    Malformed(String),
}

/// Where and how [`ChatClient`] asks.
#[derive(Clone, PartialEq, Eq)]
pub struct LlmSettings {
    /// The API's base URL; the client posts to `{base_url}/chat/completions`.
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

impl fmt::Debug for LlmSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The key never reaches a log.
        f.debug_struct("LlmSettings")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("timeout", &self.timeout)
            .field("retries", &self.retries)
            .field("backoff", &self.backoff)
            .finish()
    }
}

impl LlmSettings {
    /// The settings of `[llm]`, completed from the environment as `env`
    /// answers it: the base URL and model from the config, else from
    /// `LOOPGUARD_LLM_BASE_URL` and `LOOPGUARD_LLM_MODEL`; the key from the
    /// variable `llm.api_key_env` names. `Ok(None)` when no base URL or no
    /// model is set: there is no LLM.
    pub fn from_config_with_env(
        config: &LlmConfig,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<LlmSettings>, LlmError> {
        let set = |value: Option<String>| value.filter(|v| !v.trim().is_empty());
        let base_url = match set(config.base_url.clone()) {
            Some(url) => url,
            None => match set(env(BASE_URL_ENV)) {
                Some(url) if url.starts_with("http://") || url.starts_with("https://") => url,
                Some(url) => {
                    return Err(LlmError::Config(format!(
                        "{BASE_URL_ENV}={url:?} is not an http:// or https:// URL"
                    )));
                }
                None => return Ok(None),
            },
        };
        let Some(model) = set(config.model.clone()).or_else(|| set(env(MODEL_ENV))) else {
            return Ok(None);
        };
        Ok(Some(LlmSettings {
            base_url,
            model,
            api_key: set(env(&config.api_key_env)),
            timeout: Duration::from_secs(config.timeout_secs.max(1)),
            retries: config.retries,
            backoff: Duration::from_millis(500),
        }))
    }

    /// [`LlmSettings::from_config_with_env`] with the process environment.
    pub fn from_config(config: &LlmConfig) -> Result<Option<LlmSettings>, LlmError> {
        LlmSettings::from_config_with_env(config, |name| std::env::var(name).ok())
    }
}

/// A client of one chat-completions server and model.
#[derive(Debug, Clone)]
pub struct ChatClient {
    client: reqwest::Client,
    endpoint: String,
    settings: LlmSettings,
}

/// The parts of a chat-completions answer the client reads.
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

impl ChatClient {
    /// A client with these settings.
    pub fn new(settings: LlmSettings) -> Result<ChatClient, LlmError> {
        let client = reqwest::Client::builder()
            .timeout(settings.timeout)
            .build()
            .map_err(|err| LlmError::Config(format!("cannot build the HTTP client: {err}")))?;
        let endpoint = format!(
            "{}/chat/completions",
            settings.base_url.trim_end_matches('/')
        );
        Ok(ChatClient {
            client,
            endpoint,
            settings,
        })
    }

    /// The settings it was built with.
    pub fn settings(&self) -> &LlmSettings {
        &self.settings
    }

    /// The URL it posts to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Asks `user` with the instructions `system`, for a JSON object
    /// (`temperature: 0`, `response_format: {"type": "json_object"}`), and
    /// returns the answer's message content as it came: reading it is the
    /// caller's. A connection error, a 5xx or a 429 is retried with
    /// exponential backoff up to `retries` times; a timeout, another 4xx
    /// or a body that is no chat completion is not.
    pub async fn ask(&self, system: &str, user: &str) -> Result<String, LlmError> {
        let body = json!({
            "model": self.settings.model,
            "temperature": 0,
            "response_format": {"type": "json_object"},
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
        });
        let mut backoff = self.settings.backoff;
        let mut attempt = 0;
        loop {
            match self.attempt(&body).await {
                Ok(content) => return Ok(content),
                Err((error, true)) if attempt < self.settings.retries => {
                    tracing::debug!(attempt, error = %error, url = %self.endpoint, "LLM: retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    attempt += 1;
                }
                Err((error, _)) => return Err(error),
            }
        }
    }

    /// One attempt: the content, or an error and whether to retry it.
    async fn attempt(&self, body: &serde_json::Value) -> Result<String, (LlmError, bool)> {
        let mut request = self.client.post(&self.endpoint).json(body);
        if let Some(key) = &self.settings.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|err| self.transport(&err))?;
        let status = response.status();
        let text = response.text().await.map_err(|err| self.transport(&err))?;
        if !status.is_success() {
            let retry = status.is_server_error() || status.as_u16() == 429;
            let error = LlmError::Status {
                status: status.as_u16(),
                url: self.endpoint.clone(),
                body: truncate(text.trim(), MAX_BODY_BYTES).to_owned(),
            };
            return Err((error, retry));
        }
        message_content(&text).map_err(|err| (err, false))
    }

    fn transport(&self, err: &reqwest::Error) -> (LlmError, bool) {
        if err.is_timeout() {
            return (LlmError::Timeout(self.settings.timeout), false);
        }
        let message = std::error::Error::source(err)
            .map_or_else(|| err.to_string(), |source| format!("{err}: {source}"));
        let error = LlmError::Unreachable {
            url: self.endpoint.clone(),
            message,
        };
        (error, err.is_connect())
    }
}

/// The first choice's message content of a chat-completions response body.
pub fn message_content(body: &str) -> Result<String, LlmError> {
    let completion: Completion = serde_json::from_str(body)
        .map_err(|err| LlmError::Malformed(format!("not a chat-completions response: {err}")))?;
    completion
        .choices
        .into_iter()
        .next()
        .and_then(|choice| choice.message.content)
        .ok_or_else(|| LlmError::Malformed("the response has no message content".into()))
}

/// At most `max` bytes of `text`, cut at a character boundary.
pub use loopguard_core_types::truncate_to_char_boundary as truncate;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_come_from_config_then_environment() {
        let env = |name: &str| match name {
            BASE_URL_ENV => Some("http://env:1/v1".to_owned()),
            MODEL_ENV => Some("env-model".to_owned()),
            "LOOPGUARD_LLM_API_KEY" => Some("sk-env".to_owned()),
            _ => None,
        };
        let config = LlmConfig::default();
        let settings = LlmSettings::from_config_with_env(&config, env)
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
        let settings = LlmSettings::from_config_with_env(&config, env)
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
    fn no_url_or_no_model_means_no_llm() {
        let none = |_: &str| None;
        assert_eq!(
            LlmSettings::from_config_with_env(&LlmConfig::default(), none),
            Ok(None)
        );
        let only_url = LlmConfig {
            base_url: Some("http://x/v1".into()),
            ..LlmConfig::default()
        };
        assert_eq!(LlmSettings::from_config_with_env(&only_url, none), Ok(None));
        let bad_env = |name: &str| (name == BASE_URL_ENV).then(|| "localhost:1".to_owned());
        let err = LlmSettings::from_config_with_env(&LlmConfig::default(), bad_env)
            .expect_err("not a URL");
        assert!(err.to_string().contains(BASE_URL_ENV), "{err}");
    }

    #[test]
    fn content_is_read_from_the_first_choice() {
        let body =
            json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": " hi "}}]});
        assert_eq!(message_content(&body.to_string()), Ok(" hi ".to_owned()));
        for body in [
            "not json".to_owned(),
            json!({"choices": []}).to_string(),
            json!({"choices": [{"message": {"content": null}}]}).to_string(),
        ] {
            let err = message_content(&body).expect_err(&body);
            assert!(matches!(err, LlmError::Malformed(_)), "{body}: {err}");
        }
    }

    #[test]
    fn truncate_cuts_at_a_char_boundary() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("héllo", 3), "hé");
        assert_eq!(truncate("abc", 10), "abc");
    }
}
