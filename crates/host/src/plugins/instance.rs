//! The typed layer over the C calls: a [`PluginInstance`] encodes events
//! and task states as the JSON of the wire format, decodes the answers,
//! checks that detections are of kinds the plugin declared, and does not
//! send an event of a type newer than the plugin's ABI. Safe code: the
//! calls themselves go through [`call`](super::call).
#![forbid(unsafe_code)]

use std::fmt;

use loopguard_core_types::{Detection, Event};
use loopguard_plugin_api::wire;

use super::call::RawInstance;
use super::error::PluginFault;
use super::event_types;
use super::library::PluginInfo;
use super::worker::Calls;

/// One instance of a plugin: `Send`, not `Sync` (one call at a time).
pub struct PluginInstance {
    raw: RawInstance,
    name: String,
    kinds: Vec<String>,
    /// The ABI minor the plugin was built for: which event types it reads.
    abi_minor: u32,
    /// The last request's bytes, reused.
    input: Vec<u8>,
}

impl fmt::Debug for PluginInstance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginInstance")
            .field("name", &self.name)
            .field("kinds", &self.kinds)
            .field("abi_minor", &self.abi_minor)
            .finish_non_exhaustive()
    }
}

impl PluginInstance {
    /// Wraps a live instance of the plugin `info` describes.
    pub(super) fn new(raw: RawInstance, info: &PluginInfo) -> PluginInstance {
        PluginInstance {
            raw,
            name: info.name.clone(),
            kinds: info.kinds.clone(),
            abi_minor: info.abi.minor,
            input: Vec::with_capacity(512),
        }
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the plugin wants to hear of task resets (ABI 1.1 and later).
    pub fn supports_reset(&self) -> bool {
        self.raw.functions().supports_reset()
    }

    /// Whether the plugin hands over its per-task state for a durable
    /// store (ABI 1.2 and later, with both `export_task` and
    /// `import_task`): without it, a task restored from a store starts
    /// afresh in the plugin.
    pub fn supports_state(&self) -> bool {
        self.raw.functions().supports_state()
    }

    /// Whether the plugin is sent events of `event_type`: not when the
    /// type is newer than the plugin's ABI (a plugin of ABI 1.2 or older
    /// would fail on it; from 1.3 on, plugins skip types they do not
    /// know).
    pub fn reads_event_type(&self, event_type: &str) -> bool {
        event_types::plugin_reads(self.abi_minor, event_type)
    }

    /// Observes one event from input line `line`: its detections, each
    /// attributed to the plugin and of a kind it declared. An event whose
    /// type is newer than the plugin's ABI is not sent: no detections.
    pub fn observe(&mut self, line: u64, event: &Event) -> Result<Vec<Detection>, PluginFault> {
        if !self.reads_event_type(event.kind.type_name()) {
            return Ok(Vec::new());
        }
        let mut input = std::mem::take(&mut self.input);
        wire::encode_observe(line, event, &mut input);
        let result = self.observe_encoded(&input);
        self.input = input;
        result
    }

    /// Observes one event already encoded with
    /// [`encode_observe`](loopguard_plugin_api::wire::encode_observe). The
    /// bytes are sent as they are: the caller checks
    /// [`reads_event_type`](Self::reads_event_type) first.
    pub fn observe_encoded(&mut self, input: &[u8]) -> Result<Vec<Detection>, PluginFault> {
        let mut detections = self.raw.observe(input, |bytes| {
            wire::decode_detections(bytes).map_err(|err| err.0)
        })?;
        for detection in &mut detections {
            if !self.kinds.iter().any(|kind| *kind == detection.kind) {
                return Err(PluginFault::InvalidAnswer(format!(
                    "a detection of kind {:?}, which it does not declare (it declares {})",
                    detection.kind,
                    self.kinds.join(", ")
                )));
            }
            detection.detector = self.name.clone().into();
            detection.line = None;
        }
        Ok(detections)
    }

    /// Tells the plugin a task was reset. A plugin of ABI 1.0 is not told
    /// (it sees the `completed` or `human` event itself).
    pub fn reset_task(&mut self, task: &str) -> Result<(), PluginFault> {
        self.raw.reset_task(task)
    }

    /// The task's state as the plugin exports it (`None`: nothing to keep,
    /// or a plugin without the 1.2 state functions).
    pub fn export_task(&mut self, task: &str) -> Result<Option<serde_json::Value>, PluginFault> {
        let state = self.raw.export_task(task, |bytes| {
            if bytes.is_empty() {
                return Ok(None);
            }
            let state: serde_json::Value = serde_json::from_slice(bytes)
                .map_err(|err| format!("its exported task state is not valid JSON: {err}"))?;
            Ok((!state.is_null()).then_some(state))
        })?;
        Ok(state.flatten())
    }

    /// Hands the plugin a task's state that [`export_task`](Self::export_task)
    /// gave (a no-op for a plugin without the 1.2 state functions).
    pub fn import_task(
        &mut self,
        task: &str,
        state: &serde_json::Value,
    ) -> Result<(), PluginFault> {
        if !self.supports_state() {
            return Ok(());
        }
        let state = serde_json::to_vec(state)
            .map_err(|err| PluginFault::Host(format!("cannot encode the task state: {err}")))?;
        self.raw.import_task(task, &state)
    }
}

impl Calls for PluginInstance {
    fn name(&self) -> &str {
        &self.name
    }

    fn observe_encoded(
        &mut self,
        _task: &str,
        input: &[u8],
    ) -> Result<Vec<Detection>, PluginFault> {
        PluginInstance::observe_encoded(self, input)
    }

    fn reset_task(&mut self, task: &str) -> Result<(), PluginFault> {
        PluginInstance::reset_task(self, task)
    }

    fn export_task(&mut self, task: &str) -> Result<Option<serde_json::Value>, PluginFault> {
        PluginInstance::export_task(self, task)
    }

    fn import_task(&mut self, task: &str, state: &serde_json::Value) -> Result<(), PluginFault> {
        PluginInstance::import_task(self, task, state)
    }
}
