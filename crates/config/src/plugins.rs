//! `[[plugins]]` and `[plugin_host]`: which detector plugins are loaded,
//! where they run, and how they are called.

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::check::{at_least_one, invalid, within};

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

impl PluginHostConfig {
    /// Checks every `plugin_host.*` value.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        at_least_one("plugin_host.max_faults", self.max_faults)?;
        within(
            "plugin_host.max_concurrency",
            self.max_concurrency,
            1..=1024,
            "must be between 1 and 1024",
        )?;
        within(
            "plugin_host.call_timeout_ms",
            self.call_timeout_ms,
            1..=600_000,
            "must be between 1 and 600000 (10 minutes)",
        )?;
        if self
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
        if let Some(megabytes) = self.memory_limit_mb {
            within(
                "plugin_host.memory_limit_mb",
                megabytes,
                16..=1 << 24,
                "must be between 16 and 16777216 (16 TiB)",
            )?;
        }
        Ok(())
    }
}

/// Checks every `[[plugins]]` entry: a library path, and a table for its
/// own config.
pub(crate) fn validate_plugins(plugins: &[PluginConfig]) -> Result<(), ConfigError> {
    for (index, plugin) in plugins.iter().enumerate() {
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
