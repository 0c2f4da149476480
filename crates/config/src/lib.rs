//! loopguard's configuration: TOML with every default from the trace
//! format's table, one module per section, each checking its own values.
//!
//! Every table denies unknown keys, so a typo is an error that names the
//! key rather than a setting silently ignored. [`Config::validate`] checks
//! values and names the bad key and value; an error read from text says
//! where, as `FILE:LINE:COLUMN` ([`ConfigLocation`]).
//!
//! The events, decisions and detections the settings act on are the trace
//! contract's, in `loopguard-core-types`; this crate is the application's
//! settings only, so a new setting never changes what plugins build
//! against.
//!
//! ```
//! use loopguard_config::Config;
//!
//! let config = Config::from_toml_str("[gate]\nloops_before_gate = 2\n")?;
//! assert_eq!(config.gate.loops_before_gate, 2);
//! assert_eq!(Config::default().gate.loops_before_gate, 3);
//! # Ok::<(), loopguard_config::ConfigError>(())
//! ```
#![deny(missing_docs)]

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use budget::{BudgetConfig, BudgetLimits};
pub use cycles::{CycleConfig, CycleCount};
pub use edges::EdgeConfig;
pub use engine::EngineConfig;
pub use entropy::EntropyConfig;
pub use error::{ConfigError, ConfigLocation, TextPosition};
pub use failures::FailureConfig;
pub use gate::GateConfig;
pub use llm::LlmConfig;
pub use loopguard_core_types::{EMBEDDING_INPUT_BYTES, LimitsConfig};
pub use oscillation::OscillationConfig;
pub use phases::PhaseConfig;
pub use plugins::{Isolation, PluginConfig, PluginHostConfig};
pub use pricing::{Price, PricingConfig};
pub use progress::ProgressConfig;
pub use semantic::SemanticConfig;
pub use serve::ServeConfig;
pub use similarity::{
    JudgeKind, SecondOpinionConfig, SimilarityConfig, TaskTypeThresholds, Threshold, TunedEncoder,
};
pub use tools::{PerToolConfig, ToolLimits, ToolsConfig};

mod budget;
mod check;
mod cycles;
mod edges;
mod engine;
mod entropy;
mod error;
mod failures;
mod gate;
mod limits;
mod llm;
mod locate;
mod oscillation;
mod phases;
mod plugins;
mod pricing;
mod progress;
mod semantic;
mod serve;
mod similarity;
mod tools;

/// The text of `default.toml` (this crate's; the repository's
/// `config/default.toml` is a byte-for-byte copy), embedded: every setting
/// at its default.
pub const DEFAULT_CONFIG_TOML: &str = include_str!("../default.toml");

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
    /// Stale tool calls (`tool_repeat`, `tool_cycle`, `tool_no_new_info`;
    /// ruling 15).
    pub tools: ToolsConfig,
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
    /// Bounds on input: line length, task id length, and how much of a
    /// text detectors keep.
    pub limits: LimitsConfig,
    /// `loopguard serve`: where it listens, its token and its limits.
    pub serve: ServeConfig,
    /// What models' tokens cost (`[pricing.MODEL]`), for events whose
    /// `usage` has tokens but no cost (ruling 18). None built in.
    pub pricing: PricingConfig,
    /// The most a task may spend, in all or in loops (`[budget]`, ruling
    /// 18). No limit by default.
    pub budget: BudgetConfig,
}

impl Config {
    /// Parses TOML and validates it. Keys left out keep their defaults.
    /// An error says where the problem is, by line and column.
    ///
    /// ```
    /// use loopguard_config::{Config, ConfigError};
    /// let config = Config::from_toml_str("[cycles]\nwindow_secs = 300\n")?;
    /// assert_eq!(config.cycles.window_secs, 300);
    /// assert_eq!(config.gate.loops_before_gate, 3);
    /// let err = Config::from_toml_str("[cycles]\nwindow_sec = 300\n").unwrap_err();
    /// assert_eq!(err.key(), Some("cycles.window_sec"));
    /// assert!(err.to_string().starts_with("config:2:1: `cycles.window_sec`: unknown field"));
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub fn from_toml_str(text: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|err| locate::parse_error(text, &err))?;
        config
            .validate()
            .map_err(|err| locate::in_text(err, text))?;
        Ok(config)
    }

    /// Reads the TOML file at `path` and validates it, as
    /// [`Config::from_toml_str`]; an error names the file
    /// ([`ConfigError::Read`] when it cannot be read).
    ///
    /// ```
    /// use loopguard_config::{Config, ConfigError};
    /// let path = std::env::temp_dir().join("loopguard-from-file-doc.toml");
    /// std::fs::write(&path, "[cycles]\nwindow_secs = 0\n").unwrap();
    /// let err = Config::from_file(&path).unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     format!(
    ///         "{}:2:1: `cycles.window_secs` = 0 is not valid: must be at least 1",
    ///         path.display()
    ///     )
    /// );
    /// assert!(matches!(
    ///     Config::from_file("no-such-loopguard.toml"),
    ///     Err(ConfigError::Read { .. })
    /// ));
    /// ```
    pub fn from_file(path: impl AsRef<Path>) -> Result<Config, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source: Arc::new(source),
        })?;
        Config::from_toml_str(&text).map_err(|err| err.in_file(path))
    }

    /// One line per deprecated key the config uses, saying what it is read
    /// as and what to write instead. The command line prints them on
    /// stderr when it loads a config.
    ///
    /// ```
    /// use loopguard_config::{Config, CycleCount};
    /// let config = Config::from_toml_str("[cycles]\nrepeats_only = false\n")?;
    /// assert_eq!(config.cycles.counting(), CycleCount::Every);
    /// assert_eq!(
    ///     config.deprecations(),
    ///     ["`cycles.repeats_only` is deprecated: read as `cycles.count = \"every\"`; write that instead"]
    /// );
    /// assert!(Config::default().deprecations().is_empty());
    /// # Ok::<(), loopguard_config::ConfigError>(())
    /// ```
    pub fn deprecations(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(repeats_only) = self.cycles.repeats_only {
            let count = if repeats_only { "repeats" } else { "every" };
            lines.push(format!(
                "`cycles.repeats_only` is deprecated: read as `cycles.count = \"{count}\"`; write that instead"
            ));
        }
        lines
    }

    /// Checks every value, section by section; the error names the first
    /// bad key and its value.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.gate.validate()?;
        self.similarity.validate()?;
        self.semantic.validate()?;
        self.failures.validate()?;
        self.tools.validate()?;
        self.cycles.validate()?;
        self.edges.validate()?;
        self.phases.validate()?;
        self.oscillation.validate()?;
        self.entropy.validate()?;
        self.engine.validate()?;
        self.progress.validate()?;
        self.llm.validate()?;
        self.plugin_host.validate()?;
        limits::validate_limits(&self.limits)?;
        self.serve.validate()?;
        plugins::validate_plugins(&self.plugins)?;
        self.pricing.validate()?;
        self.budget.validate()
    }
}
