//! The C-call layer: calls through the function pointers of a plugin's
//! table, with bytes in and bytes (or a [`PluginFault`]) out.
//!
//! This is one of the two plugin modules with `unsafe` code (the other is
//! [`library`](super::library), which finds the table). Here every call
//! crosses the ABI: the host lends its input bytes for the call, reads the
//! [`Buffer`] the plugin filled, turns its status into a result, and hands
//! the buffer back to the plugin's own `free_buffer` (the side that
//! allocates frees). Nothing here knows JSON or events: the typed layer
//! ([`PluginInstance`](super::PluginInstance)) encodes and decodes, so an
//! out-of-process worker can drive a library through this same layer.

use std::ffi::c_void;

use loopguard_plugin_api::abi::{
    Buffer, CreateFn, DescribeFn, DestroyFn, ExportTaskFn, FreeBufferFn, ImportTaskFn, ObserveFn,
    ResetTaskFn, status,
};

use super::error::PluginFault;

/// The functions of a plugin's table, checked and copied out of it by
/// [`library`](super::library). The library is never unloaded, so they
/// stay callable for the life of the process.
#[derive(Debug, Clone, Copy)]
pub(super) struct Functions {
    pub(super) describe: DescribeFn,
    pub(super) create: CreateFn,
    pub(super) destroy: DestroyFn,
    pub(super) observe: ObserveFn,
    pub(super) free_buffer: FreeBufferFn,
    /// Since ABI 1.1.
    pub(super) reset_task: Option<ResetTaskFn>,
    /// Since ABI 1.2 (null in a plugin that keeps no state).
    pub(super) export_task: Option<ExportTaskFn>,
    /// Since ABI 1.2 (null in a plugin that keeps no state).
    pub(super) import_task: Option<ImportTaskFn>,
}

impl Functions {
    /// `describe`: the plugin's description, read by `read` from the
    /// bytes it answered.
    pub(super) fn describe<T>(
        &self,
        read: impl FnOnce(&[u8]) -> Result<T, String>,
    ) -> Result<T, PluginFault> {
        let mut out = Buffer::EMPTY;
        // SAFETY: `out` is a valid buffer for the plugin to fill.
        let code = unsafe { (self.describe)(&mut out) };
        answer(self.free_buffer, code, out, read)
    }

    /// `create`: a new instance from the plugin's config bytes (JSON).
    /// `plugin` names it in logs.
    pub(super) fn create(&self, plugin: &str, config: &[u8]) -> Result<RawInstance, PluginFault> {
        let mut instance: *mut c_void = std::ptr::null_mut();
        let mut out = Buffer::EMPTY;
        // SAFETY: the config is borrowed for the call; both out-pointers
        // are valid.
        let code = unsafe { (self.create)(config.as_ptr(), config.len(), &mut instance, &mut out) };
        answer(self.free_buffer, code, out, |_| Ok(()))?;
        if instance.is_null() {
            return Err(PluginFault::InvalidAnswer(
                "create gave no instance".to_owned(),
            ));
        }
        Ok(RawInstance {
            functions: *self,
            instance,
            plugin: plugin.to_owned(),
        })
    }

    /// Whether the table has `reset_task` (ABI 1.1 and later).
    pub(super) fn supports_reset(&self) -> bool {
        self.reset_task.is_some()
    }

    /// Whether the table has both state functions (ABI 1.2 and later): a
    /// state the plugin could not take back is not worth storing.
    pub(super) fn supports_state(&self) -> bool {
        self.export_task.is_some() && self.import_task.is_some()
    }
}

/// One live instance of a plugin, called with bytes: `Send`, not `Sync`
/// (`&mut self` keeps calls to one at a time). Dropping it destroys the
/// instance.
pub(super) struct RawInstance {
    functions: Functions,
    instance: *mut c_void,
    /// The plugin's name, for the log.
    plugin: String,
}

// SAFETY: the SDK requires plugin detectors to be `Send`, and `&mut self`
// on every call keeps calls to one at a time.
unsafe impl Send for RawInstance {}

impl RawInstance {
    /// The table's functions.
    pub(super) fn functions(&self) -> &Functions {
        &self.functions
    }

    /// `observe`: one encoded request in; its answer read by `read`.
    pub(super) fn observe<T>(
        &mut self,
        input: &[u8],
        read: impl FnOnce(&[u8]) -> Result<T, String>,
    ) -> Result<T, PluginFault> {
        let mut out = Buffer::EMPTY;
        // SAFETY: a live instance, used by this caller alone (`&mut self`);
        // the input is borrowed for the call.
        let code = unsafe {
            (self.functions.observe)(self.instance, input.as_ptr(), input.len(), &mut out)
        };
        answer(self.functions.free_buffer, code, out, read)
    }

    /// `reset_task`, when the table has it (a no-op otherwise).
    pub(super) fn reset_task(&mut self, task: &str) -> Result<(), PluginFault> {
        let Some(reset_task) = self.functions.reset_task else {
            return Ok(());
        };
        let mut out = Buffer::EMPTY;
        // SAFETY: as in `observe`.
        let code = unsafe { reset_task(self.instance, task.as_ptr(), task.len(), &mut out) };
        answer(self.functions.free_buffer, code, out, |_| Ok(()))
    }

    /// `export_task`: the task's state bytes read by `read`; `None` when
    /// the table lacks either state function.
    pub(super) fn export_task<T>(
        &mut self,
        task: &str,
        read: impl FnOnce(&[u8]) -> Result<T, String>,
    ) -> Result<Option<T>, PluginFault> {
        let (Some(export_task), true) =
            (self.functions.export_task, self.functions.supports_state())
        else {
            return Ok(None);
        };
        let mut out = Buffer::EMPTY;
        // SAFETY: as in `observe`.
        let code = unsafe { export_task(self.instance, task.as_ptr(), task.len(), &mut out) };
        answer(self.functions.free_buffer, code, out, read).map(Some)
    }

    /// `import_task` with the task's state bytes (a no-op when the table
    /// lacks either state function).
    pub(super) fn import_task(&mut self, task: &str, state: &[u8]) -> Result<(), PluginFault> {
        let (Some(import_task), true) =
            (self.functions.import_task, self.functions.supports_state())
        else {
            return Ok(());
        };
        let mut out = Buffer::EMPTY;
        // SAFETY: as in `observe`; the state is borrowed for the call.
        let code = unsafe {
            import_task(
                self.instance,
                task.as_ptr(),
                task.len(),
                state.as_ptr(),
                state.len(),
                &mut out,
            )
        };
        answer(self.functions.free_buffer, code, out, |_| Ok(()))
    }
}

impl Drop for RawInstance {
    fn drop(&mut self) {
        // SAFETY: the instance came from `create` and is not used again; the
        // library is never unloaded.
        let code = unsafe { (self.functions.destroy)(self.instance) };
        if code != status::OK {
            tracing::warn!(plugin = %self.plugin, status = code, "plugin instance did not close cleanly");
        }
    }
}

/// Reads a plugin's answer with `read` (on success) or its message, and
/// hands the buffer back to the plugin.
fn answer<T>(
    free_buffer: FreeBufferFn,
    code: i32,
    out: Buffer,
    read: impl FnOnce(&[u8]) -> Result<T, String>,
) -> Result<T, PluginFault> {
    // SAFETY: the plugin filled `out` (or left it empty) and it stays
    // valid until handed back below.
    let bytes = unsafe { out.as_bytes() };
    let message = || String::from_utf8_lossy(bytes).into_owned();
    let result = match code {
        status::OK => read(bytes).map_err(PluginFault::InvalidAnswer),
        status::ERROR => Err(PluginFault::Failed(message())),
        status::PANIC => Err(PluginFault::Panicked(message())),
        other => Err(PluginFault::InvalidAnswer(format!(
            "unknown status {other}: {}",
            message()
        ))),
    };
    if !out.ptr.is_null() {
        // SAFETY: the plugin's own buffer, handed back once.
        unsafe { free_buffer(out) };
    }
    result
}
