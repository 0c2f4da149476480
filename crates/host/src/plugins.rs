//! Dynamic detector plugins: `cdylib`s built against
//! `loopguard-plugin-api`, loaded at start-up with `libloading`.
//!
//! [`Plugin::load`] opens a library (and never closes it), checks its ABI
//! table (another major, a newer minor, an older minor than this host
//! supports: refused, naming both versions), and asks it to describe
//! itself. [`PluginHost::detector`] creates an instance from the plugin's
//! config and wraps it as a [`PluginDetector`], an [`ExtensionDetector`]
//! whose detections join the built-in ones. Calls run off the async
//! reactor, on a thread that owns the instance (one call at a time), at
//! most `plugin_host.max_concurrency` at once over all plugins. A panic or an error inside a
//! plugin is a fault: it is reported on the event's decision and logged,
//! and after `plugin_host.max_faults` faults the plugin is disabled for the
//! rest of the run; the other detectors go on. A call that does not answer
//! within `plugin_host.call_timeout_ms` is abandoned and disables the
//! plugin at once.
//!
//! With a durable store, a plugin of ABI 1.2 or later exports each task's
//! state after every event and imports it when the engine reloads the task
//! (after a restart, an eviction, another replica's events); a plugin of
//! an older ABI, or one without those functions, starts such a task
//! afresh.
//!
//! With `plugin_host.isolation = "process"` (the default; a plugin's own
//! `isolation` overrides it), [`PluginHost::start`] runs the plugin in a worker process
//! of its own (`loopguard plugin-worker LIBRARY`, [`run_worker`]) that
//! loads the library with the same [`Plugin::load`] and
//! [`PluginInstance`] code and answers over its stdin and stdout. A crash
//! of the worker (a signal, an exit, garbage on the pipe) or a call past
//! its deadline (the worker is killed) is a fault of that call; the next
//! call starts a new worker (after a backoff that grows with the crashes in
//! a row; a call within it is skipped at once, [`PluginFault::Restarting`],
//! not a fault), creates the instance again and imports the task states
//! the host kept from the answers (ABI 1.2 plugins), so the plugin
//! continues where it was. A worker ends itself when its host dies.
//! The engine sees the same [`PluginDetector`] in both modes.
//!
//! Event types newer than a plugin are never a fault: a plugin of ABI 1.3
//! or later skips a type its SDK does not know, and a plugin of an older
//! ABI (whose SDK would refuse it) is not sent events of types newer than
//! it (`tool_call`, since 1.3), as if it had seen nothing.
//!
//! # Layers
//!
//! One module per layer; only the first two, and `sandbox`'s one call,
//! hold `unsafe` code.
//!
//! - `library`: loading and ABI checks: opening the library, the entry
//!   symbol, reading the table, refusing other versions ([`Plugin`],
//!   [`AbiVersion`], [`PluginInfo`]).
//! - `call`: the C calls through the table's function pointers, bytes in
//!   and bytes or a [`PluginFault`] out, buffers handed back to the plugin.
//! - `instance`: the typed calls over them: JSON of events, detections and
//!   task states ([`PluginInstance`]).
//! - `event_types`: which event types a plugin of each ABI minor is sent.
//! - `worker`: the limiter, the worker thread that owns an instance, and
//!   the watchdog that enforces call deadlines.
//! - `detector`: the adapter to the engine, with fault counting
//!   ([`PluginHost`], [`PluginDetector`]).
//! - `protocol`: the frames between the host and a worker process.
//! - `child`: the host's side of a worker process (start, calls, crash
//!   detection, restart with the kept task states).
//! - `process_worker`: the worker process's side ([`run_worker`]).
//! - `sandbox`: what a worker does before it loads the library (closing
//!   inherited descriptors, the memory limit).
//!
//! ```no_run
//! use std::sync::Arc;
//! use loopguard_config::{Config, PluginConfig};
//! use loopguard_host::{LoopGuard, load_plugins};
//!
//! let mut config = Config::default();
//! config.plugins.push(PluginConfig::new("target/release/libloopguard_plugin_monologue.so"));
//! let mut builder = LoopGuard::builder(config.clone());
//! for plugin in load_plugins(&config)? {
//!     builder = builder.extension(plugin);
//! }
//! let guard = builder.build()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::path::Path;
use std::sync::Arc;

use loopguard_config::Config;

pub use detector::{PluginDetector, PluginHost};
pub use error::{PluginError, PluginFault};
pub use instance::PluginInstance;
pub use library::{AbiVersion, Plugin, PluginInfo};
pub use process_worker::run_worker;

mod call;
mod child;
mod detector;
mod error;
mod event_types;
mod instance;
mod library;
mod process_worker;
mod protocol;
mod sandbox;
mod worker;

#[cfg(test)]
mod tests;

/// Loads every plugin of `config.plugins` (paths as written: resolve
/// relative ones first) and creates its instance with its config. Refuses
/// two plugins of the same name.
pub fn load_plugins(config: &Config) -> Result<Vec<Arc<PluginDetector>>, PluginError> {
    let host = PluginHost::new(&config.plugin_host);
    let mut detectors = Vec::new();
    let mut seen: Vec<(String, &Path)> = Vec::new();
    for entry in &config.plugins {
        let detector = host.start(entry)?;
        let name = detector.plugin_name();
        if let Some((name, first)) = seen.iter().find(|(seen, _)| seen == name) {
            return Err(PluginError::DuplicateName {
                name: name.clone(),
                first: first.to_path_buf(),
                second: entry.path.clone(),
            });
        }
        seen.push((name.to_owned(), &entry.path));
        detectors.push(detector);
    }
    Ok(detectors)
}
