//! The loopguard trace contract, version 1, as Rust types.
//!
//! Everything in loopguard speaks this vocabulary: the engine, the plugins,
//! the command line and the sidecar. Events come in as JSON Lines
//! ([`Event::from_json`]); every event gets a [`Decision`] back, carrying an
//! [`Action`] (mildest to strongest) and the [`Detection`]s that justify it;
//! a whole trace gives a [`Report`]. [`Config`] holds every setting with the
//! defaults of the spec's table.
//!
//! ```
//! use loopguard_core_types::{Action, Config, Event, EventKind};
//!
//! let event = Event::from_json(
//!     r#"{"type":"failure","task":"T1","agent":"coder","error":"E0308 mismatched types"}"#,
//! )?;
//! assert!(matches!(event.kind, EventKind::Failure { .. }));
//! assert!(Action::Escalate > Action::Pivot);
//! assert_eq!(Config::default().gate.loops_before_gate, 3);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub use config::{
    Config, ConfigError, ConfigLocation, CycleConfig, CycleCount, DEFAULT_CONFIG_TOML, EdgeConfig,
    EngineConfig, EntropyConfig, FailureConfig, GateConfig, JudgeKind, OscillationConfig,
    PhaseConfig, SecondOpinionConfig, SemanticConfig, SimilarityConfig, TaskTypeThresholds,
    TextPosition, Threshold, TunedEncoder,
};
pub use config::{EMBEDDING_INPUT_BYTES, LimitsConfig};
pub use config::{Isolation, PluginConfig, PluginHostConfig, ServeConfig};
pub use config::{LlmConfig, ProgressConfig};
pub use config::{PerToolConfig, ToolLimits, ToolsConfig};
pub use decision::{Action, Decision, Detection, FailureSignature, Severity, TaskStatus, kinds};
pub use event::{EVENT_TYPES, Event, EventError, EventKind, FailureView, ProgressSnapshot};
pub use report::{LineError, Report, TaskReport};
pub use text::truncate_to_char_boundary;
pub use time::Timestamp;

mod config;
mod decision;
mod event;
mod report;
mod text;
mod time;

/// The version of the trace format these types implement.
pub const TRACE_FORMAT_VERSION: u32 = 1;
