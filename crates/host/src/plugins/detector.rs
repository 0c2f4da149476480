//! The adapter layer: a plugin instance as an [`ExtensionDetector`] the
//! engine calls. [`PluginHost`] makes a [`PluginDetector`] per configured
//! plugin; the detector runs each call on its instance's worker thread
//! behind the host's limiter, skips events of types newer than the
//! plugin's ABI, counts faults and disables the plugin after too many.
//! Safe code.
#![forbid(unsafe_code)]

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use std::path::PathBuf;

use loopguard_config::{Isolation, PluginConfig, PluginHostConfig};
use loopguard_core_types::Detection;
use loopguard_detectors::ObservedEvent;
use loopguard_plugin_api::wire;

use super::child::{self, ProcessInstance, StartError};
use super::error::{PluginError, PluginFault};
use super::event_types;
use super::library::{AbiVersion, Plugin, PluginInfo};
use super::worker::{Calls, Limiter, Worker};
use crate::extension::{ExtensionDetector, ExtensionError};

/// Runs plugin calls: off the async reactor, a bounded number at once, and
/// disabling a plugin after too many faults.
#[derive(Debug, Clone)]
pub struct PluginHost {
    limiter: Limiter,
    max_faults: u32,
    call_timeout: Duration,
    isolation: Isolation,
    worker: Option<PathBuf>,
    memory_limit_mb: Option<u64>,
}

impl PluginHost {
    /// A host with `[plugin_host]`'s settings.
    pub fn new(config: &PluginHostConfig) -> PluginHost {
        PluginHost {
            limiter: Limiter::new(config.max_concurrency),
            max_faults: config.max_faults.max(1),
            call_timeout: Duration::from_millis(config.call_timeout_ms.max(1)),
            isolation: config.isolation,
            worker: config.worker.clone(),
            memory_limit_mb: config.memory_limit_mb,
        }
    }

    /// The plugin of a `[[plugins]]` entry, started as its isolation says
    /// (its own, else `plugin_host.isolation`): loaded here, or in a worker
    /// process of its own.
    pub fn start(&self, entry: &PluginConfig) -> Result<Arc<PluginDetector>, PluginError> {
        match entry.isolation.unwrap_or(self.isolation) {
            Isolation::InProcess => self.detector(&Plugin::load(&entry.path)?, &entry.config),
            Isolation::Process => self.process_detector(&entry.path, &entry.config),
        }
    }

    /// The plugin library at `library` with its `config`, in a worker
    /// process of its own (process isolation), as a detector for the
    /// engine. The worker program is `plugin_host.worker`, else
    /// `LOOPGUARD_PLUGIN_WORKER`, else this program when it is `loopguard`,
    /// else a `loopguard-plugin-worker` beside this program or on the
    /// `PATH`.
    pub fn process_detector(
        &self,
        library: &std::path::Path,
        config: &serde_json::Value,
    ) -> Result<Arc<PluginDetector>, PluginError> {
        let worker_error = |reason: String| PluginError::Worker {
            path: library.to_owned(),
            reason,
        };
        let program = child::worker_program(self.worker.as_deref()).map_err(worker_error)?;
        let (instance, hello) = ProcessInstance::start(
            &program,
            library,
            config,
            self.call_timeout,
            self.memory_limit_mb,
        )
        .map_err(|err| match err {
            StartError::Load(reason) => worker_error(reason),
            StartError::Create(name, fault) => PluginError::Start {
                path: library.to_owned(),
                name,
                fault,
            },
        })?;
        let worker = Worker::spawn(Box::new(instance)).map_err(|err| PluginError::Start {
            path: library.to_owned(),
            name: hello.name.clone(),
            fault: PluginFault::Host(format!("cannot start its thread: {err}")),
        })?;
        let info = PluginInfo {
            path: library.to_owned(),
            name: hello.name,
            version: hello.version,
            description: hello.description,
            kinds: hello.kinds,
            abi: AbiVersion {
                major: hello.abi_major,
                minor: hello.abi_minor,
            },
            sdk_version: hello.sdk_version,
            rustc_version: hello.rustc_version,
        };
        Ok(self.wrap(
            info,
            worker,
            hello.supports_reset,
            hello.supports_state,
            true,
        ))
    }

    /// An instance of `plugin` with its `config`, as a detector for the
    /// engine.
    pub fn detector(
        &self,
        plugin: &Plugin,
        config: &serde_json::Value,
    ) -> Result<Arc<PluginDetector>, PluginError> {
        let instance = plugin.instantiate(config)?;
        let supports_reset = instance.supports_reset();
        let supports_state = instance.supports_state();
        let worker = Worker::spawn(Box::new(instance)).map_err(|err| PluginError::Start {
            path: plugin.info.path.clone(),
            name: plugin.info.name.clone(),
            fault: PluginFault::Host(format!("cannot start its thread: {err}")),
        })?;
        Ok(self.wrap(
            plugin.info.clone(),
            worker,
            supports_reset,
            supports_state,
            false,
        ))
    }

    /// The detector over a started `worker`, under this host's limits.
    fn wrap(
        &self,
        info: PluginInfo,
        worker: Worker,
        supports_reset: bool,
        supports_state: bool,
        isolated: bool,
    ) -> Arc<PluginDetector> {
        Arc::new(PluginDetector {
            info,
            supports_reset,
            supports_state,
            isolated,
            worker,
            limiter: self.limiter.clone(),
            max_faults: self.max_faults,
            call_timeout: self.call_timeout,
            faults: AtomicU32::new(0),
            disabled: AtomicBool::new(false),
        })
    }
}

/// A plugin instance as an [`ExtensionDetector`]: called off the reactor,
/// faults counted, disabled after `plugin_host.max_faults` of them.
pub struct PluginDetector {
    /// What the plugin said of itself (its ABI minor says which event
    /// types it reads).
    info: PluginInfo,
    supports_reset: bool,
    supports_state: bool,
    /// In a worker process (process isolation): a call past its deadline
    /// kills the worker, which is restarted, instead of keeping a thread
    /// busy for good.
    isolated: bool,
    worker: Worker,
    limiter: Limiter,
    max_faults: u32,
    call_timeout: Duration,
    faults: AtomicU32,
    disabled: AtomicBool,
}

impl fmt::Debug for PluginDetector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginDetector")
            .field("name", &self.info.name)
            .field("kinds", &self.info.kinds)
            .field("faults", &self.faults)
            .field("disabled", &self.disabled)
            .finish_non_exhaustive()
    }
}

impl PluginDetector {
    /// The plugin's name.
    pub fn plugin_name(&self) -> &str {
        &self.info.name
    }

    /// What the plugin said of itself when it started (in a worker
    /// process: what its worker said it loaded).
    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    /// Whether the plugin runs in a worker process of its own.
    pub fn is_isolated(&self) -> bool {
        self.isolated
    }

    /// Faults so far.
    pub fn faults(&self) -> u32 {
        self.faults.load(Ordering::Relaxed)
    }

    /// Whether the plugin was disabled after `max_faults` faults.
    pub fn is_disabled(&self) -> bool {
        self.disabled.load(Ordering::Relaxed)
    }

    /// Runs `call` on the instance's thread, holding one of the host's
    /// permits.
    async fn run<T: Send + 'static>(
        &self,
        call: impl FnOnce(&mut dyn Calls) -> Result<T, PluginFault> + Send + 'static,
    ) -> Result<T, PluginFault> {
        self.limiter
            .run(&self.worker, self.call_timeout, call)
            .await
    }

    /// Counts a fault, disables the plugin at `max_faults` (or at once when
    /// it timed out in process: its thread is still busy with the call),
    /// and says so. A call skipped while a crashed worker waits out its
    /// backoff is said, not counted.
    fn fault(&self, fault: &PluginFault, task: &str, line: Option<u64>) -> String {
        if matches!(fault, PluginFault::Restarting(_)) {
            // The crash before it was counted; waiting out its backoff is not
            // another fault.
            tracing::debug!(plugin = %self.info.name, task, line, "plugin call skipped: its worker restarts");
            return fault.to_string();
        }
        let count = self
            .faults
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1);
        let mut message = format!("{fault} (fault {count} of {})", self.max_faults);
        let hung = !self.isolated && matches!(fault, PluginFault::TimedOut(_));
        if (count >= self.max_faults || hung) && !self.disabled.swap(true, Ordering::Relaxed) {
            message.push_str("; plugin disabled for the rest of the run");
            tracing::error!(plugin = %self.info.name, task, line, faults = count, error = %fault, "plugin disabled");
        } else {
            tracing::warn!(plugin = %self.info.name, task, line, faults = count, error = %fault, "plugin fault");
        }
        message
    }
}

#[async_trait]
impl ExtensionDetector for PluginDetector {
    fn name(&self) -> &str {
        &self.info.name
    }

    fn kinds(&self) -> Vec<String> {
        self.info.kinds.clone()
    }

    async fn observe(&self, event: &ObservedEvent<'_>) -> Result<Vec<Detection>, ExtensionError> {
        if self.is_disabled() {
            return Ok(Vec::new());
        }
        // A type newer than the plugin's ABI: a plugin built before it
        // would fail on it, and ignoring it is never a fault.
        if !event_types::plugin_reads(self.info.abi.minor, event.event.kind.type_name()) {
            return Ok(Vec::new());
        }
        // Encoded here, so that the blocking call owns its bytes.
        let mut input = Vec::with_capacity(256);
        wire::encode_observe(event.line, event.event, &mut input);
        let task = event.event.task.to_string();
        self.run(move |instance| instance.observe_encoded(&task, &input))
            .await
            .map_err(|fault| {
                ExtensionError(self.fault(&fault, &event.event.task, Some(event.line)))
            })
    }

    async fn reset_task(&self, task: &str) {
        if !self.supports_reset || self.is_disabled() {
            return;
        }
        let owned = task.to_owned();
        if let Err(fault) = self.run(move |instance| instance.reset_task(&owned)).await {
            // A reset has no decision to carry the error: it is logged.
            self.fault(&fault, task, None);
        }
    }

    async fn export_task(&self, task: &str) -> Option<serde_json::Value> {
        if !self.supports_state || self.is_disabled() {
            return None;
        }
        let owned = task.to_owned();
        match self.run(move |instance| instance.export_task(&owned)).await {
            Ok(state) => state,
            Err(fault) => {
                // No decision carries the error: it is logged. The task is
                // stored without this plugin's part, so a reload would
                // start it afresh in the plugin.
                self.fault(&fault, task, None);
                None
            }
        }
    }

    async fn import_task(
        &self,
        task: &str,
        state: serde_json::Value,
    ) -> Result<(), ExtensionError> {
        if !self.supports_state || self.is_disabled() {
            return Ok(());
        }
        let owned = task.to_owned();
        self.run(move |instance| instance.import_task(&owned, &state))
            .await
            .map_err(|fault| {
                ExtensionError(format!(
                    "plugin {}: {}",
                    self.info.name,
                    self.fault(&fault, task, None)
                ))
            })
    }
}
