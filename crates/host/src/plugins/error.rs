//! The errors of the plugin layers: [`PluginError`] when a plugin cannot be
//! loaded or started, [`PluginFault`] when one call into it goes wrong.
//! Shared vocabulary of every layer; safe code.
#![forbid(unsafe_code)]

use std::path::PathBuf;

use super::library::AbiVersion;

/// Why a plugin could not be loaded or started. Every message names the
/// library.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PluginError {
    /// The file is missing, or is not a library this system can load.
    #[error("plugin {path}: not a loadable library: {reason}")]
    NotALibrary {
        /// The library.
        path: PathBuf,
        /// The loader's message.
        reason: String,
    },
    /// The library has no `loopguard_plugin_entry_v1` symbol.
    #[error("plugin {path}: {reason}")]
    MissingSymbol {
        /// The library.
        path: PathBuf,
        /// What is missing, and what was found instead.
        reason: String,
    },
    /// The plugin was built for an ABI this host does not load.
    #[error(
        "plugin {path}: built for plugin ABI {plugin} (loopguard-plugin-api {sdk}, {rustc}), \
         but this loopguard speaks plugin ABI {host} and loads {oldest} to {host}: {advice}"
    )]
    Abi {
        /// The library.
        path: PathBuf,
        /// The plugin's ABI.
        plugin: AbiVersion,
        /// This host's ABI.
        host: AbiVersion,
        /// The oldest ABI this host loads.
        oldest: AbiVersion,
        /// The plugin's SDK version.
        sdk: String,
        /// The compiler that built the plugin.
        rustc: String,
        /// What to do about it.
        advice: &'static str,
    },
    /// The plugin's table or description is not usable.
    #[error("plugin {path}: {reason}")]
    Invalid {
        /// The library.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The plugin refused its config (or panicked creating an instance).
    #[error("plugin {name} ({path}) cannot start: {fault}")]
    Start {
        /// The library.
        path: PathBuf,
        /// The plugin's name.
        name: String,
        /// Its answer.
        fault: PluginFault,
    },
    /// The plugin's worker process (process isolation) could not be
    /// started, or did not load the library.
    #[error("plugin {path}: {reason}")]
    Worker {
        /// The library.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// Two loaded plugins have the same name.
    #[error("plugins {first} and {second} are both named {name:?}: names must be unique")]
    DuplicateName {
        /// The name.
        name: String,
        /// The first library.
        first: PathBuf,
        /// The second library.
        second: PathBuf,
    },
}

/// What went wrong in one call into a plugin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PluginFault {
    /// The plugin panicked (the SDK caught it).
    #[error("panicked: {0}")]
    Panicked(String),
    /// The plugin returned an error.
    #[error("returned an error: {0}")]
    Failed(String),
    /// The plugin's answer was not valid (not JSON, an undeclared kind, an
    /// unknown status).
    #[error("gave an invalid answer: {0}")]
    InvalidAnswer(String),
    /// The host could not run the call.
    #[error("could not be called: {0}")]
    Host(String),
    /// The plugin's worker process (process isolation) died or broke the
    /// protocol: what happened, e.g. "its worker was killed by SIGSEGV".
    #[error("{0}")]
    Crashed(String),
    /// The plugin did not answer within `plugin_host.call_timeout_ms`.
    #[error("did not answer within {} ms", .0.as_millis())]
    TimedOut(std::time::Duration),
    /// The plugin's worker (process isolation) crashed and is restarted
    /// after a backoff that has this much left: the call was not made (not
    /// a fault of its own; the crash was counted).
    #[error(
        "skipped this event: its worker is restarted in {} ms, after it crashed",
        .0.as_millis().max(1)
    )]
    Restarting(std::time::Duration),
}
