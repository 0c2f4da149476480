//! Configuration: TOML with every default from the trace format's table.
//!
//! Every table denies unknown keys, so a typo is an error that names the
//! key rather than a setting silently ignored. [`Config::validate`] checks
//! values and names the bad key and value.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The text of `config/default.toml`, embedded: every setting at its default.
pub const DEFAULT_CONFIG_TOML: &str = include_str!("../../../config/default.toml");

/// All of loopguard's settings.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The human gate.
    pub gate: GateConfig,
    /// Similarity thresholds for "same request" and "same topic".
    pub similarity: SimilarityConfig,
    /// The local embedding model behind the similarity detectors.
    pub semantic: SemanticConfig,
    /// Failure history.
    pub failures: FailureConfig,
    /// Agent exchange cycles (`agent_pair`, `multi_agent`, `topic_cycle`).
    pub cycles: CycleConfig,
    /// Per-edge hop limits (`edge_limit`).
    pub edges: EdgeConfig,
    /// Phase visit and transition limits.
    pub phases: PhaseConfig,
    /// Oscillation between phases.
    pub oscillation: OscillationConfig,
    /// Repeated failed output and strategy pivots.
    pub entropy: EntropyConfig,
    /// The engine's own bookkeeping.
    pub engine: EngineConfig,
    /// Progress evaluation of differing failures (`regression`,
    /// `no_progress`, `external_failure`).
    pub progress: ProgressConfig,
    /// The optional LLM judge of goal proximity (an OpenAI-compatible
    /// chat-completions server).
    pub llm: LlmConfig,
    /// Detector plugins loaded at start-up (`[[plugins]]`, one table each).
    pub plugins: Vec<PluginConfig>,
    /// How plugins are called and when a faulty one is disabled.
    pub plugin_host: PluginHostConfig,
}

/// `[[plugins]]`: one detector plugin, a `cdylib` built against
/// `loopguard-plugin-api`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginConfig {
    /// The library (`.so`, `.dylib`, `.dll`). A relative path is relative
    /// to the config file that names it.
    pub path: std::path::PathBuf,
    /// The plugin's own settings, handed to it as JSON (`{}` when absent).
    #[serde(default = "empty_table")]
    pub config: serde_json::Value,
}

impl PluginConfig {
    /// A plugin at `path` with no settings of its own.
    pub fn new(path: impl Into<std::path::PathBuf>) -> PluginConfig {
        PluginConfig {
            path: path.into(),
            config: empty_table(),
        }
    }
}

fn empty_table() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

/// `[plugin_host]`: how plugins are called.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PluginHostConfig {
    /// Faults (a panic, an error, an answer that is not valid) after which
    /// a plugin is disabled for the rest of the run (default 3).
    pub max_faults: u32,
    /// Plugin calls running at once, over all plugins (default 4).
    pub max_concurrency: u32,
    /// Milliseconds a plugin call may take (default 5000). A plugin that
    /// does not answer in time is disabled for the rest of the run: its
    /// call is abandoned, and its thread stays busy with it.
    pub call_timeout_ms: u64,
}

impl Default for PluginHostConfig {
    fn default() -> Self {
        PluginHostConfig {
            max_faults: 3,
            max_concurrency: 4,
            call_timeout_ms: 5000,
        }
    }
}

/// `[gate]`: when a task goes behind the human gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GateConfig {
    /// Loops before the human gate (default 3: "after 3rd unresolved loop
    /// -> gate").
    pub loops_before_gate: u32,
}

/// `[similarity]`: cosine thresholds, strictly exceeded to count as "same".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimilarityConfig {
    /// Same-request threshold for collaboration requests and repeated
    /// queries (default 0.85).
    pub request_threshold: f32,
    /// Same-topic threshold (default 0.85).
    pub topic_threshold: f32,
    /// Thresholds for one task type, chosen by an event's `task_type` field
    /// (`[similarity.task_types.research]`). A key left out keeps the
    /// general threshold.
    pub task_types: BTreeMap<String, TaskTypeThresholds>,
}

/// `[similarity.task_types.NAME]`: thresholds for one task type.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TaskTypeThresholds {
    /// Overrides `similarity.request_threshold` for this task type.
    pub request_threshold: Option<f32>,
    /// Overrides `similarity.topic_threshold` for this task type.
    pub topic_threshold: Option<f32>,
}

/// A threshold and the config key it came from, so a report can say which
/// threshold fired.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// The cosine to exceed.
    pub value: f32,
    /// The config key, e.g. `similarity.request_threshold` or
    /// `similarity.task_types.research.request_threshold`.
    pub key: String,
}

impl SimilarityConfig {
    /// The same-request threshold for a task of type `task_type`.
    pub fn request_threshold_for(&self, task_type: Option<&str>) -> Threshold {
        self.pick(
            task_type,
            "request_threshold",
            |t| t.request_threshold,
            self.request_threshold,
        )
    }

    /// The same-topic threshold for a task of type `task_type`.
    pub fn topic_threshold_for(&self, task_type: Option<&str>) -> Threshold {
        self.pick(
            task_type,
            "topic_threshold",
            |t| t.topic_threshold,
            self.topic_threshold,
        )
    }

    fn pick(
        &self,
        task_type: Option<&str>,
        name: &str,
        field: impl Fn(&TaskTypeThresholds) -> Option<f32>,
        general: f32,
    ) -> Threshold {
        if let Some(task_type) = task_type
            && let Some(value) = self.task_types.get(task_type).and_then(field)
        {
            return Threshold {
                value,
                key: format!("similarity.task_types.{task_type}.{name}"),
            };
        }
        Threshold {
            value: general,
            key: format!("similarity.{name}"),
        }
    }
}

/// `[semantic]`: the local embedding model (all-MiniLM-L6-v2 on ONNX
/// Runtime, from pinned PyPI files).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SemanticConfig {
    /// Use embeddings (default true). When false, the similarity detectors
    /// fall back to exact normalized-text matching and every detection says
    /// so.
    pub enabled: bool,
    /// Where the model files are (default: `LOOPGUARD_MODEL_DIR`, else
    /// `models/cache/` of the checkout). Config wins over the environment.
    pub model_dir: Option<std::path::PathBuf>,
    /// The ONNX Runtime library (default: `ORT_DYLIB_PATH`, else the pinned
    /// copy in the model directory).
    pub ort_library: Option<std::path::PathBuf>,
    /// Whether missing files may be downloaded: `true` never downloads,
    /// `false` may even when `LOOPGUARD_OFFLINE=1` is set. Unset (the
    /// default): `LOOPGUARD_OFFLINE` decides, and without it files are
    /// fetched on first use.
    pub offline: Option<bool>,
    /// Embeddings cached by text (default 10000).
    pub cache_capacity: usize,
}

impl Default for SemanticConfig {
    fn default() -> Self {
        SemanticConfig {
            enabled: true,
            model_dir: None,
            ort_library: None,
            offline: None,
            cache_capacity: 10_000,
        }
    }
}

/// `[failures]`: failure history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FailureConfig {
    /// Failures kept per task and compared with a new one (default 10).
    pub history: u32,
}

/// `[cycles]`: exchange cycles between agents and on topics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CycleConfig {
    /// More exchanges than this in the window is a cycle (default 3).
    pub max_exchanges: u32,
    /// The exchange window in seconds (default 600). Events without
    /// timestamps are not windowed.
    pub window_secs: u64,
    /// Exchange count from which a cycle is of medium severity (default 5).
    pub severity_medium: u32,
    /// Exchange count from which a cycle is of high severity (default 8).
    pub severity_high: u32,
    /// Exchange count from which a cycle is critical and escalates
    /// (default 12; at most 16, the exchanges a window keeps).
    pub severity_critical: u32,
    /// Most distinct agents in a multi-agent cycle (default 6; the fewest
    /// is 3).
    pub max_cycle_agents: u32,
}

/// `[edges]`: hops along one transition edge without progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EdgeConfig {
    /// Hops of one edge without progress before the task aborts
    /// (`MAX_LOOP_EDGE`, default 5).
    pub max_loop_edge: u32,
    /// Per-edge limits, keyed `"from->to"`.
    pub overrides: BTreeMap<String, u32>,
}

/// `[phases]`: visits per phase and repeats per transition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PhaseConfig {
    /// Entries into one phase before further entries are blocked
    /// (default 10).
    pub max_visits: u32,
    /// Occurrences of one from→to before further ones are blocked
    /// (default 5).
    pub max_transitions: u32,
    /// Per-phase visit limits, keyed by phase name.
    pub visit_overrides: BTreeMap<String, u32>,
}

/// `[oscillation]`: short cycles in the recent transitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OscillationConfig {
    /// Longest cycle looked for (default 3; the shortest is 2).
    pub cycle_detection_length: u32,
    /// Recent transitions kept per task (default 10).
    pub history: u32,
}

/// `[entropy]`: repeated failed output and strategy pivots.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EntropyConfig {
    /// Identical failed outputs in a row that issue a pivot (default 3).
    pub threshold: u32,
    /// Pivots before the task is paused (`MAX_PIVOTS`, default 2).
    pub max_pivots: u32,
}

/// `[engine]`: the engine's own bookkeeping.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineConfig {
    /// Seconds a task may stay idle before its in-memory state is evicted
    /// (default 86400, 24 h).
    pub task_ttl_secs: u64,
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            loops_before_gate: 3,
        }
    }
}

impl Default for SimilarityConfig {
    fn default() -> Self {
        SimilarityConfig {
            request_threshold: 0.85,
            topic_threshold: 0.85,
            task_types: BTreeMap::new(),
        }
    }
}

impl Default for FailureConfig {
    fn default() -> Self {
        FailureConfig { history: 10 }
    }
}

impl Default for CycleConfig {
    fn default() -> Self {
        CycleConfig {
            max_exchanges: 3,
            window_secs: 600,
            severity_medium: 5,
            severity_high: 8,
            severity_critical: 12,
            max_cycle_agents: 6,
        }
    }
}

impl Default for EdgeConfig {
    fn default() -> Self {
        EdgeConfig {
            max_loop_edge: 5,
            overrides: BTreeMap::new(),
        }
    }
}

impl Default for PhaseConfig {
    fn default() -> Self {
        PhaseConfig {
            max_visits: 10,
            max_transitions: 5,
            visit_overrides: BTreeMap::new(),
        }
    }
}

impl Default for OscillationConfig {
    fn default() -> Self {
        OscillationConfig {
            cycle_detection_length: 3,
            history: 10,
        }
    }
}

impl Default for EntropyConfig {
    fn default() -> Self {
        EntropyConfig {
            threshold: 3,
            max_pivots: 2,
        }
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            task_ttl_secs: 86_400,
        }
    }
}

/// `[progress]`: judging failures by test metrics and completion signals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProgressConfig {
    /// Differing failures in a row with no progress signal between them
    /// that make one `no_progress` loop (default 3).
    pub no_progress_failures: u32,
    /// External failures in a row in one task that escalate as a
    /// dependency problem (default 3, ruling 3).
    pub external_failures_before_escalation: u32,
}

impl Default for ProgressConfig {
    fn default() -> Self {
        ProgressConfig {
            no_progress_failures: 3,
            external_failures_before_escalation: 3,
        }
    }
}

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

/// A configuration that could not be read or is not valid.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The TOML does not parse, or names a key loopguard does not know.
    #[error("config: {0}")]
    Parse(String),
    /// A key has a value loopguard cannot use.
    #[error("config: `{key}` = {value} is not valid: {reason}")]
    Invalid {
        /// The dotted key, e.g. `cycles.window_secs`.
        key: String,
        /// The value as written.
        value: String,
        /// What a valid value looks like.
        reason: String,
    },
}

/// Most exchanges the detectors keep per pair, cycle or topic window (the
/// detectors' `WINDOW_CAP`); counts saturate there, so
/// `cycles.severity_critical` must not exceed it.
const MOST_EXCHANGES_KEPT: u32 = 16;

impl CycleConfig {
    /// Severity of a cycle detection with this many exchanges (ruling 4).
    pub fn severity(&self, exchanges: u32) -> crate::Severity {
        use crate::Severity;
        if exchanges >= self.severity_critical {
            Severity::Critical
        } else if exchanges >= self.severity_high {
            Severity::High
        } else if exchanges >= self.severity_medium {
            Severity::Medium
        } else {
            Severity::Low
        }
    }
}

impl EdgeConfig {
    /// The hop limit for the edge `from->to`.
    pub fn limit_for(&self, from: &str, to: &str) -> u32 {
        if self.overrides.is_empty() {
            return self.max_loop_edge;
        }
        self.overrides
            .get(&format!("{from}->{to}"))
            .copied()
            .unwrap_or(self.max_loop_edge)
    }
}

impl PhaseConfig {
    /// The visit limit for `phase`.
    pub fn visit_limit_for(&self, phase: &str) -> u32 {
        self.visit_overrides
            .get(phase)
            .copied()
            .unwrap_or(self.max_visits)
    }
}

impl Config {
    /// Parses TOML and validates it. Keys left out keep their defaults.
    ///
    /// ```
    /// use loopguard_core_types::Config;
    /// let config = Config::from_toml_str("[cycles]\nwindow_secs = 300\n")?;
    /// assert_eq!(config.cycles.window_secs, 300);
    /// assert_eq!(config.gate.loops_before_gate, 3);
    /// assert!(Config::from_toml_str("[cycles]\nwindow_sec = 300\n").is_err());
    /// # Ok::<(), loopguard_core_types::ConfigError>(())
    /// ```
    pub fn from_toml_str(text: &str) -> Result<Config, ConfigError> {
        let config: Config =
            toml::from_str(text).map_err(|err| ConfigError::Parse(err.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// Checks every value; the error names the first bad key and its value.
    pub fn validate(&self) -> Result<(), ConfigError> {
        fn invalid(key: &str, value: impl ToString, reason: &str) -> ConfigError {
            ConfigError::Invalid {
                key: key.to_owned(),
                value: value.to_string(),
                reason: reason.to_owned(),
            }
        }
        fn at_least_one(key: &str, value: u32) -> Result<(), ConfigError> {
            if value == 0 {
                return Err(invalid(key, value, "must be at least 1"));
            }
            Ok(())
        }
        fn threshold(key: &str, value: f32) -> Result<(), ConfigError> {
            if !(value.is_finite() && (-1.0..=1.0).contains(&value)) {
                return Err(invalid(
                    key,
                    value,
                    "a cosine threshold must be between -1 and 1",
                ));
            }
            Ok(())
        }
        at_least_one("gate.loops_before_gate", self.gate.loops_before_gate)?;
        threshold(
            "similarity.request_threshold",
            self.similarity.request_threshold,
        )?;
        threshold(
            "similarity.topic_threshold",
            self.similarity.topic_threshold,
        )?;
        for (task_type, thresholds) in &self.similarity.task_types {
            if let Some(value) = thresholds.request_threshold {
                threshold(
                    &format!("similarity.task_types.{task_type}.request_threshold"),
                    value,
                )?;
            }
            if let Some(value) = thresholds.topic_threshold {
                threshold(
                    &format!("similarity.task_types.{task_type}.topic_threshold"),
                    value,
                )?;
            }
        }
        if self.semantic.cache_capacity > 10_000_000 {
            return Err(invalid(
                "semantic.cache_capacity",
                self.semantic.cache_capacity,
                "at most 10000000 embeddings are cached",
            ));
        }
        at_least_one("failures.history", self.failures.history)?;
        if self.failures.history > 1000 {
            return Err(invalid(
                "failures.history",
                self.failures.history,
                "at most 1000 failures are kept per task",
            ));
        }
        let cycles = &self.cycles;
        at_least_one("cycles.max_exchanges", cycles.max_exchanges)?;
        if cycles.window_secs == 0 {
            return Err(invalid("cycles.window_secs", 0, "must be at least 1"));
        }
        if cycles.severity_medium <= cycles.max_exchanges {
            return Err(invalid(
                "cycles.severity_medium",
                cycles.severity_medium,
                "must be greater than cycles.max_exchanges (the first detection is low)",
            ));
        }
        if cycles.severity_high <= cycles.severity_medium {
            return Err(invalid(
                "cycles.severity_high",
                cycles.severity_high,
                "must be greater than cycles.severity_medium",
            ));
        }
        if cycles.severity_critical <= cycles.severity_high {
            return Err(invalid(
                "cycles.severity_critical",
                cycles.severity_critical,
                "must be greater than cycles.severity_high",
            ));
        }
        if cycles.severity_critical > MOST_EXCHANGES_KEPT {
            return Err(invalid(
                "cycles.severity_critical",
                cycles.severity_critical,
                "must be at most 16: windows keep at most 16 exchanges per pair, cycle or \
                 topic, so a higher count is never reached",
            ));
        }
        if !(3..=16).contains(&cycles.max_cycle_agents) {
            return Err(invalid(
                "cycles.max_cycle_agents",
                cycles.max_cycle_agents,
                "must be between 3 and 16",
            ));
        }
        at_least_one("edges.max_loop_edge", self.edges.max_loop_edge)?;
        for (edge, limit) in &self.edges.overrides {
            let key = format!("edges.overrides.\"{edge}\"");
            match edge.split_once("->") {
                Some((from, to)) if !from.is_empty() && !to.is_empty() && !to.contains("->") => {}
                _ => {
                    return Err(invalid(
                        &key,
                        limit,
                        "edge keys are written \"from->to\", e.g. \"planner->researcher\"",
                    ));
                }
            }
            at_least_one(&key, *limit)?;
        }
        at_least_one("phases.max_visits", self.phases.max_visits)?;
        at_least_one("phases.max_transitions", self.phases.max_transitions)?;
        for (phase, limit) in &self.phases.visit_overrides {
            at_least_one(&format!("phases.visit_overrides.\"{phase}\""), *limit)?;
        }
        let oscillation = &self.oscillation;
        if oscillation.cycle_detection_length < 2 {
            return Err(invalid(
                "oscillation.cycle_detection_length",
                oscillation.cycle_detection_length,
                "must be at least 2 (the shortest oscillation is A->B, B->A)",
            ));
        }
        if oscillation.history < 2 * oscillation.cycle_detection_length || oscillation.history > 256
        {
            return Err(invalid(
                "oscillation.history",
                oscillation.history,
                "must hold two full cycles (at least 2 x cycle_detection_length) and be at most 256",
            ));
        }
        if self.entropy.threshold < 2 {
            return Err(invalid(
                "entropy.threshold",
                self.entropy.threshold,
                "must be at least 2 (one output cannot repeat itself)",
            ));
        }
        if self.engine.task_ttl_secs == 0 {
            return Err(invalid("engine.task_ttl_secs", 0, "must be at least 1"));
        }
        at_least_one(
            "progress.no_progress_failures",
            self.progress.no_progress_failures,
        )?;
        at_least_one(
            "progress.external_failures_before_escalation",
            self.progress.external_failures_before_escalation,
        )?;
        let llm = &self.llm;
        if let Some(url) = &llm.base_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(invalid(
                "llm.base_url",
                format!("{url:?}"),
                "must be an http:// or https:// URL, e.g. \"http://127.0.0.1:11434/v1\"",
            ));
        }
        if let Some(model) = &llm.model
            && model.trim().is_empty()
        {
            return Err(invalid(
                "llm.model",
                format!("{model:?}"),
                "must name a model",
            ));
        }
        if llm.api_key_env.is_empty() || llm.api_key_env.contains(['=', '\0']) {
            return Err(invalid(
                "llm.api_key_env",
                format!("{:?}", llm.api_key_env),
                "must be the name of an environment variable",
            ));
        }
        if !(1..=600).contains(&llm.timeout_secs) {
            return Err(invalid(
                "llm.timeout_secs",
                llm.timeout_secs,
                "must be between 1 and 600",
            ));
        }
        if llm.retries > 10 {
            return Err(invalid("llm.retries", llm.retries, "must be at most 10"));
        }
        at_least_one("plugin_host.max_faults", self.plugin_host.max_faults)?;
        if !(1..=1024).contains(&self.plugin_host.max_concurrency) {
            return Err(invalid(
                "plugin_host.max_concurrency",
                self.plugin_host.max_concurrency,
                "must be between 1 and 1024",
            ));
        }
        if !(1..=600_000).contains(&self.plugin_host.call_timeout_ms) {
            return Err(invalid(
                "plugin_host.call_timeout_ms",
                self.plugin_host.call_timeout_ms,
                "must be between 1 and 600000 (10 minutes)",
            ));
        }
        for (index, plugin) in self.plugins.iter().enumerate() {
            if plugin.path.as_os_str().is_empty() {
                return Err(invalid(
                    &format!("plugins[{index}].path"),
                    "\"\"",
                    "must name a plugin library, e.g. \"target/release/libmy_plugin.so\"",
                ));
            }
            if !plugin.config.is_object() {
                return Err(invalid(
                    &format!("plugins[{index}].config"),
                    &plugin.config,
                    "must be a table, e.g. config = { budget = 40 }",
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_toml_matches_the_built_in_defaults() {
        let parsed = Config::from_toml_str(DEFAULT_CONFIG_TOML).expect("default.toml is valid");
        assert_eq!(parsed, Config::default());
    }

    #[test]
    fn defaults_follow_the_spec_table() {
        let config = Config::default();
        assert_eq!(config.gate.loops_before_gate, 3);
        assert_eq!(config.similarity.request_threshold, 0.85);
        assert_eq!(config.similarity.topic_threshold, 0.85);
        assert_eq!(config.cycles.max_exchanges, 3);
        assert_eq!(config.cycles.window_secs, 600);
        assert_eq!(
            (
                config.cycles.severity_medium,
                config.cycles.severity_high,
                config.cycles.severity_critical
            ),
            (5, 8, 12)
        );
        assert_eq!(config.edges.max_loop_edge, 5);
        assert_eq!(config.phases.max_visits, 10);
        assert_eq!(config.phases.max_transitions, 5);
        assert_eq!(config.oscillation.cycle_detection_length, 3);
        assert_eq!(config.entropy.threshold, 3);
        assert_eq!(config.entropy.max_pivots, 2);
        assert_eq!(config.failures.history, 10);
        assert_eq!(config.engine.task_ttl_secs, 86_400);
    }

    #[test]
    fn unknown_key_is_named() {
        let err = Config::from_toml_str("[phases]\nmax_visit = 4\n").expect_err("typo");
        assert!(err.to_string().contains("max_visit"), "{err}");
        let err = Config::from_toml_str("[phase]\nmax_visits = 4\n").expect_err("typo");
        assert!(err.to_string().contains("phase"), "{err}");
    }

    #[test]
    fn bad_value_names_key_and_value() {
        let err = Config::from_toml_str("[cycles]\nwindow_secs = 0\n").expect_err("zero");
        assert_eq!(
            err.to_string(),
            "config: `cycles.window_secs` = 0 is not valid: must be at least 1"
        );
        let err = Config::from_toml_str("[similarity]\nrequest_threshold = 1.5\n")
            .expect_err("out of range");
        assert!(
            err.to_string().contains("similarity.request_threshold")
                && err.to_string().contains("1.5"),
            "{err}"
        );
        let err = Config::from_toml_str("[edges.overrides]\n\"planner\" = 3\n").expect_err("key");
        assert!(err.to_string().contains("planner"), "{err}");
    }

    #[test]
    fn overrides_apply_per_phase_and_edge() {
        let config = Config::from_toml_str(
            "[phases.visit_overrides]\ntest = 5\n[edges.overrides]\n\"planner->researcher\" = 8\n",
        )
        .expect("valid");
        assert_eq!(config.phases.visit_limit_for("test"), 5);
        assert_eq!(config.phases.visit_limit_for("build"), 10);
        assert_eq!(config.edges.limit_for("planner", "researcher"), 8);
        assert_eq!(config.edges.limit_for("researcher", "planner"), 5);
    }

    #[test]
    fn task_type_thresholds_override_and_name_their_key() {
        let config = Config::from_toml_str(
            "[similarity]\nrequest_threshold = 0.9\n[similarity.task_types.research]\nrequest_threshold = 0.8\n",
        )
        .expect("valid");
        let research = config.similarity.request_threshold_for(Some("research"));
        assert_eq!(research.value, 0.8);
        assert_eq!(
            research.key,
            "similarity.task_types.research.request_threshold"
        );
        let general = config.similarity.request_threshold_for(Some("coding"));
        assert_eq!(
            (general.value, general.key.as_str()),
            (0.9, "similarity.request_threshold")
        );
        let topic = config.similarity.topic_threshold_for(Some("research"));
        assert_eq!(
            (topic.value, topic.key.as_str()),
            (0.85, "similarity.topic_threshold")
        );
        let err = Config::from_toml_str("[similarity.task_types.x]\ntopic_threshold = 2.0\n")
            .expect_err("out of range");
        assert!(
            err.to_string()
                .contains("similarity.task_types.x.topic_threshold"),
            "{err}"
        );
    }

    #[test]
    fn severity_critical_must_fit_in_a_window() {
        let err = Config::from_toml_str("[cycles]\nseverity_critical = 17\n").expect_err("17");
        assert_eq!(
            err.to_string(),
            "config: `cycles.severity_critical` = 17 is not valid: must be at most 16: windows \
             keep at most 16 exchanges per pair, cycle or topic, so a higher count is never \
             reached"
        );
        let config = Config::from_toml_str("[cycles]\nseverity_critical = 16\n").expect("16");
        assert_eq!(config.cycles.severity_critical, 16);
    }

    #[test]
    fn progress_and_llm_defaults_and_validation() {
        let config = Config::default();
        assert_eq!(config.progress.no_progress_failures, 3);
        assert_eq!(config.progress.external_failures_before_escalation, 3);
        assert_eq!(config.llm.base_url, None);
        assert_eq!(config.llm.model, None);
        assert_eq!(config.llm.api_key_env, "LOOPGUARD_LLM_API_KEY");
        assert_eq!((config.llm.timeout_secs, config.llm.retries), (20, 2));

        let config = Config::from_toml_str(
            "[llm]\nbase_url = \"http://127.0.0.1:8080/v1\"\nmodel = \"qwen\"\n",
        )
        .expect("valid");
        assert_eq!(config.llm.model.as_deref(), Some("qwen"));
        for (toml, key) in [
            (
                "[progress]\nno_progress_failures = 0\n",
                "progress.no_progress_failures",
            ),
            (
                "[progress]\nexternal_failures_before_escalation = 0\n",
                "progress.external_failures_before_escalation",
            ),
            ("[llm]\nbase_url = \"localhost:8080\"\n", "llm.base_url"),
            ("[llm]\nmodel = \" \"\n", "llm.model"),
            ("[llm]\napi_key_env = \"\"\n", "llm.api_key_env"),
            ("[llm]\ntimeout_secs = 0\n", "llm.timeout_secs"),
            ("[llm]\nretries = 11\n", "llm.retries"),
            ("[llm]\nkey = \"sk-1\"\n", "key"),
        ] {
            let err = Config::from_toml_str(toml).expect_err(toml);
            assert!(err.to_string().contains(key), "{toml}: {err}");
        }
    }

    #[test]
    fn plugins_are_tables_with_a_path_and_their_own_config() {
        let config = Config::from_toml_str(
            "[plugin_host]\nmax_faults = 5\n\n[[plugins]]\npath = \"a.so\"\n\n\
             [[plugins]]\npath = \"b.so\"\nconfig = { budget = 40, name = \"x\" }\n",
        )
        .expect("valid");
        assert_eq!(config.plugin_host.max_faults, 5);
        assert_eq!(config.plugin_host.max_concurrency, 4);
        assert_eq!(config.plugin_host.call_timeout_ms, 5000);
        assert_eq!(config.plugins.len(), 2);
        assert_eq!(config.plugins[0], PluginConfig::new("a.so"));
        assert_eq!(
            config.plugins[1].config,
            serde_json::json!({"budget": 40, "name": "x"})
        );
        for (toml, key) in [
            ("[plugin_host]\nmax_faults = 0\n", "plugin_host.max_faults"),
            (
                "[plugin_host]\nmax_concurrency = 0\n",
                "plugin_host.max_concurrency",
            ),
            (
                "[plugin_host]\ncall_timeout_ms = 0\n",
                "plugin_host.call_timeout_ms",
            ),
            ("[[plugins]]\npath = \"\"\n", "plugins[0].path"),
            (
                "[[plugins]]\npath = \"a\"\nconfig = 3\n",
                "plugins[0].config",
            ),
            ("[[plugins]]\npath = \"a\"\nconfg = {}\n", "confg"),
            ("[[plugins]]\nconfig = {}\n", "path"),
        ] {
            let err = Config::from_toml_str(toml).expect_err(toml);
            assert!(err.to_string().contains(key), "{toml}: {err}");
        }
    }

    #[test]
    fn cycle_severity_follows_ruling_4() {
        let cycles = CycleConfig::default();
        use crate::Severity::*;
        let got: Vec<_> = [4, 5, 7, 8, 11, 12, 30]
            .iter()
            .map(|n| cycles.severity(*n))
            .collect();
        assert_eq!(got, [Low, Medium, Medium, High, High, Critical, Critical]);
    }
}
