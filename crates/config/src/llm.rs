//! `[llm]`: the OpenAI-compatible server asked as a judge of goal
//! proximity and for second opinions.

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::check::{invalid, is_http_url, within};

/// `[llm]`: the LLM judge of goal proximity, asked only when test metrics
/// and completion signals cannot decide. Without a base URL and a model
/// (here or in the environment) there is no judge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    /// The OpenAI-compatible API's base URL, e.g. `http://127.0.0.1:11434/v1`
    /// (the judge posts to `{base_url}/chat/completions`). Config wins over
    /// `LOOPGUARD_LLM_BASE_URL`.
    pub base_url: Option<String>,
    /// The model name. Config wins over `LOOPGUARD_LLM_MODEL`.
    pub model: Option<String>,
    /// The environment variable holding the API key, if the server needs one
    /// (default `LOOPGUARD_LLM_API_KEY`). The key itself is never in a file.
    pub api_key_env: String,
    /// Seconds one request may take (default 20).
    pub timeout_secs: u64,
    /// Retries after a connection error, a 5xx or a 429, with exponential
    /// backoff (default 2).
    pub retries: u32,
}

impl Default for LlmConfig {
    fn default() -> Self {
        LlmConfig {
            base_url: None,
            model: None,
            api_key_env: "LOOPGUARD_LLM_API_KEY".to_owned(),
            timeout_secs: 20,
            retries: 2,
        }
    }
}

impl LlmConfig {
    /// Checks the URL, the model's name, the key's variable and the
    /// timeouts.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if let Some(url) = &self.base_url
            && !is_http_url(url)
        {
            return Err(invalid(
                "llm.base_url",
                format!("{url:?}"),
                "must be an http:// or https:// URL, e.g. \"http://127.0.0.1:11434/v1\"",
            ));
        }
        if let Some(model) = &self.model
            && model.trim().is_empty()
        {
            return Err(invalid(
                "llm.model",
                format!("{model:?}"),
                "must name a model",
            ));
        }
        if self.api_key_env.is_empty() || self.api_key_env.contains(['=', '\0']) {
            return Err(invalid(
                "llm.api_key_env",
                format!("{:?}", self.api_key_env),
                "must be the name of an environment variable",
            ));
        }
        within(
            "llm.timeout_secs",
            self.timeout_secs,
            1..=600,
            "must be between 1 and 600",
        )?;
        if self.retries > 10 {
            return Err(invalid("llm.retries", self.retries, "must be at most 10"));
        }
        Ok(())
    }
}
