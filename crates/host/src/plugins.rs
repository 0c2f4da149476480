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
//! ```no_run
//! use std::sync::Arc;
//! use loopguard_core_types::{Config, PluginConfig};
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

use std::ffi::c_void;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use libloading::Library;
use loopguard_core_types::{Config, Detection, Event, PluginHostConfig, kinds};
use loopguard_detectors::ObservedEvent;
use loopguard_plugin_api::abi::{
    self, Buffer, CreateFn, DescribeFn, DestroyFn, ExportTaskFn, FreeBufferFn, ImportTaskFn,
    ObserveFn, PluginHeader, PluginTable, ResetTaskFn, status,
};
use loopguard_plugin_api::wire::{self, PluginDescription};
use serde::Serialize;
use tokio::sync::Semaphore;

use crate::extension::{ExtensionDetector, ExtensionError};

use worker::Worker;

mod worker;

/// A plugin ABI version, `major.minor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct AbiVersion {
    /// Incompatible changes.
    pub major: u32,
    /// Append-only extensions of the table.
    pub minor: u32,
}

impl AbiVersion {
    /// The ABI this host speaks.
    pub const HOST: AbiVersion = AbiVersion {
        major: abi::ABI_MAJOR,
        minor: abi::ABI_MINOR,
    };

    /// The oldest ABI this host still loads.
    pub const OLDEST: AbiVersion = AbiVersion {
        major: abi::ABI_MAJOR,
        minor: abi::ABI_OLDEST_SUPPORTED_MINOR,
    };
}

impl fmt::Display for AbiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl Serialize for AbiVersion {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

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
    /// The plugin did not answer within `plugin_host.call_timeout_ms`.
    #[error("did not answer within {} ms", .0.as_millis())]
    TimedOut(std::time::Duration),
}

/// What a plugin says about itself, and how it was built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginInfo {
    /// The library it was loaded from.
    pub path: PathBuf,
    /// Its name: the `detector` of its detections.
    pub name: String,
    /// Its own version.
    pub version: String,
    /// What it catches.
    pub description: String,
    /// The detection kinds it reports.
    pub kinds: Vec<String>,
    /// The ABI it was built for.
    pub abi: AbiVersion,
    /// The `loopguard-plugin-api` version it was built with.
    pub sdk_version: String,
    /// The compiler that built it.
    pub rustc_version: String,
}

/// The functions of a plugin's table, checked and copied out of it.
#[derive(Debug, Clone, Copy)]
struct Functions {
    create: CreateFn,
    destroy: DestroyFn,
    observe: ObserveFn,
    free_buffer: FreeBufferFn,
    /// Since ABI 1.1.
    reset_task: Option<ResetTaskFn>,
    /// Since ABI 1.2 (null in a plugin that keeps no state).
    export_task: Option<ExportTaskFn>,
    /// Since ABI 1.2 (null in a plugin that keeps no state).
    import_task: Option<ImportTaskFn>,
}

/// A loaded plugin library. The library stays loaded for the life of the
/// process.
#[derive(Debug, Clone)]
pub struct Plugin {
    info: PluginInfo,
    functions: Functions,
}

impl Plugin {
    /// Loads the library at `path` and reads its ABI table and description.
    ///
    /// Refused, with a message naming the library: a file that is not a
    /// library, one without the entry symbol, an ABI this host does not
    /// load (naming both versions), a table with a missing function, a
    /// description without a name or kinds, or a built-in kind among them.
    pub fn load(path: &Path) -> Result<Plugin, PluginError> {
        // SAFETY: opening a library runs its initializers: a plugin is code
        // the user chose to run, like the host itself.
        let library =
            unsafe { Library::new(loadable(path)) }.map_err(|err| PluginError::NotALibrary {
                path: path.to_owned(),
                reason: error_chain(&err),
            })?;
        // Never unloaded: code and data of the plugin (its table, thread
        // locals, anything it leaked) must outlive every call.
        let library: &'static Library = Box::leak(Box::new(library));
        let entry_name = format!("{}\0", abi::ENTRY_SYMBOL);
        // SAFETY: the symbol is declared by the ABI with this type.
        let entry = unsafe { library.get::<abi::EntryFn>(entry_name.as_bytes()) }
            .map(|symbol| *symbol)
            .map_err(|_| missing_entry(library, path))?;
        // SAFETY: the entry takes no arguments and returns a static table.
        let table = unsafe { entry() };
        if table.is_null() {
            return Err(invalid(path, "its entry returned no table"));
        }
        // SAFETY: every 1.x table starts with the header.
        let header = unsafe { table.cast::<PluginHeader>().read() };
        // SAFETY: the header's strings are static in the plugin.
        let sdk_version = unsafe { header.sdk_version.to_string_lossy() };
        // SAFETY: as above.
        let rustc_version = unsafe { header.rustc_version.to_string_lossy() };
        let version = AbiVersion {
            major: header.abi_major,
            minor: header.abi_minor,
        };
        if let Some(advice) = abi_refusal(version) {
            return Err(PluginError::Abi {
                path: path.to_owned(),
                plugin: version,
                host: AbiVersion::HOST,
                oldest: AbiVersion::OLDEST,
                sdk: sdk_version,
                rustc: rustc_version,
                advice,
            });
        }
        // SAFETY: the versions are checked; the table is static.
        let (describe, functions) =
            unsafe { read_functions(table, &header) }.map_err(|reason| invalid(path, &reason))?;
        let mut out = Buffer::EMPTY;
        // SAFETY: `out` is a valid buffer for the plugin to fill.
        let code = unsafe { describe(&mut out) };
        let description = answer(functions.free_buffer, code, out, |bytes| {
            serde_json::from_slice::<PluginDescription>(bytes).map_err(|err| err.to_string())
        })
        .map_err(|fault| invalid(path, &format!("describe {fault}")))?;
        check_description(&description).map_err(|reason| invalid(path, &reason))?;
        let info = PluginInfo {
            path: path.to_owned(),
            name: description.name,
            version: description.version,
            description: description.description,
            kinds: description.kinds,
            abi: version,
            sdk_version,
            rustc_version,
        };
        tracing::info!(
            plugin = %info.name,
            version = %info.version,
            abi = %info.abi,
            path = %path.display(),
            "plugin loaded"
        );
        Ok(Plugin { info, functions })
    }

    /// What the plugin says about itself.
    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    /// Creates an instance with the plugin's `config` (a JSON object).
    pub fn instantiate(&self, config: &serde_json::Value) -> Result<PluginInstance, PluginError> {
        let config = serde_json::to_vec(config).unwrap_or_default();
        let mut instance: *mut c_void = std::ptr::null_mut();
        let mut out = Buffer::EMPTY;
        // SAFETY: the config is borrowed for the call; both out-pointers
        // are valid.
        let code = unsafe {
            (self.functions.create)(config.as_ptr(), config.len(), &mut instance, &mut out)
        };
        let started = answer(self.functions.free_buffer, code, out, |_| Ok(())).and_then(|()| {
            if instance.is_null() {
                Err(PluginFault::InvalidAnswer(
                    "create gave no instance".to_owned(),
                ))
            } else {
                Ok(())
            }
        });
        started.map_err(|fault| PluginError::Start {
            path: self.info.path.clone(),
            name: self.info.name.clone(),
            fault,
        })?;
        Ok(PluginInstance {
            functions: self.functions,
            instance,
            kinds: self.info.kinds.clone(),
            name: self.info.name.clone(),
            input: Vec::with_capacity(512),
        })
    }
}

/// The name to hand the system loader: a bare file name that exists in the
/// working directory is that file (the loader would search the system's
/// library paths for it instead).
fn loadable(path: &Path) -> PathBuf {
    let bare = path.parent().is_some_and(|dir| dir.as_os_str().is_empty());
    if bare && path.is_file() {
        Path::new(".").join(path)
    } else {
        path.to_owned()
    }
}

/// An error and its causes on one line (the loader's own message is the
/// cause of libloading's).
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// Why the entry symbol is missing: another major's entry, or no plugin
/// at all.
fn missing_entry(library: &Library, path: &Path) -> PluginError {
    let other = (0..=16)
        .filter(|major| *major != abi::ABI_MAJOR)
        .find(|major| {
            let name = format!("{}{major}\0", abi::ENTRY_SYMBOL_PREFIX);
            // SAFETY: only probing whether the symbol exists; it is not called.
            unsafe { library.get::<*const c_void>(name.as_bytes()) }.is_ok()
        });
    let reason = match other {
        Some(major) => format!(
            "exports {prefix}{major}, not {entry}: it was built for plugin ABI {major}.x, but \
             this loopguard speaks plugin ABI {host}; rebuild it against loopguard-plugin-api {sdk}",
            prefix = abi::ENTRY_SYMBOL_PREFIX,
            entry = abi::ENTRY_SYMBOL,
            host = AbiVersion::HOST,
            sdk = abi::SDK_VERSION,
        ),
        None => format!(
            "has no {entry} symbol: not a loopguard plugin (a plugin exports one with \
             loopguard_plugin_api::export_detector!)",
            entry = abi::ENTRY_SYMBOL
        ),
    };
    PluginError::MissingSymbol {
        path: path.to_owned(),
        reason,
    }
}

/// Why a plugin of ABI `plugin` is refused, if it is.
fn abi_refusal(plugin: AbiVersion) -> Option<&'static str> {
    if plugin.major != AbiVersion::HOST.major {
        Some("major versions must match; rebuild the plugin against this loopguard's plugin-api")
    } else if plugin.minor > AbiVersion::HOST.minor {
        Some("the plugin is newer than this loopguard; update loopguard, or rebuild the plugin")
    } else if plugin < AbiVersion::OLDEST {
        Some("the plugin is older than this loopguard still loads; rebuild the plugin")
    } else {
        None
    }
}

/// Reads the function slots of a checked table, within its `struct_size`.
///
/// # Safety
///
/// `table` must point to a plugin's static table of at least
/// `header.struct_size` bytes, whose versions were checked.
unsafe fn read_functions(
    table: *const PluginTable,
    header: &PluginHeader,
) -> Result<(DescribeFn, Functions), String> {
    let needed = abi::table_size_for_minor(header.abi_minor)
        .ok_or_else(|| format!("unknown ABI minor {}", header.abi_minor))?;
    if header.struct_size < needed {
        return Err(format!(
            "its table has {} bytes, but ABI {}.{} tables have at least {needed}",
            header.struct_size, header.abi_major, header.abi_minor
        ));
    }
    let base = table.cast::<u8>();
    let size = header.struct_size;
    /// One slot, if the table reaches it.
    ///
    /// # Safety
    ///
    /// As for `read_functions`.
    unsafe fn slot<T: Copy>(base: *const u8, size: usize, offset: usize) -> Option<T> {
        (offset + std::mem::size_of::<T>() <= size)
            // SAFETY: within the table's `struct_size` bytes; the ABI
            // declares the slot's type and its offset.
            .then(|| unsafe { base.add(offset).cast::<T>().read() })
    }
    fn required<T>(slot: Option<Option<T>>, name: &str) -> Result<T, String> {
        slot.flatten()
            .ok_or_else(|| format!("its table has no `{name}` function"))
    }
    use std::mem::offset_of;
    // SAFETY (all slots): as for `read_functions`.
    let describe = required(
        unsafe { slot(base, size, offset_of!(PluginTable, describe)) },
        "describe",
    )?;
    let functions = Functions {
        create: required(
            unsafe { slot(base, size, offset_of!(PluginTable, create)) },
            "create",
        )?,
        destroy: required(
            unsafe { slot(base, size, offset_of!(PluginTable, destroy)) },
            "destroy",
        )?,
        observe: required(
            unsafe { slot(base, size, offset_of!(PluginTable, observe)) },
            "observe",
        )?,
        free_buffer: required(
            unsafe { slot(base, size, offset_of!(PluginTable, free_buffer)) },
            "free_buffer",
        )?,
        reset_task: if header.abi_minor >= 1 {
            unsafe { slot(base, size, offset_of!(PluginTable, reset_task)) }.flatten()
        } else {
            None
        },
        export_task: if header.abi_minor >= 2 {
            unsafe { slot(base, size, offset_of!(PluginTable, export_task)) }.flatten()
        } else {
            None
        },
        import_task: if header.abi_minor >= 2 {
            unsafe { slot(base, size, offset_of!(PluginTable, import_task)) }.flatten()
        } else {
            None
        },
    };
    Ok((describe, functions))
}

/// A description loopguard can use: a name, and kinds of its own.
fn check_description(description: &PluginDescription) -> Result<(), String> {
    if description.name.trim().is_empty() {
        return Err("describes itself without a name".to_owned());
    }
    if description.kinds.is_empty() {
        return Err(format!(
            "{} declares no detection kinds (Detector::KINDS)",
            description.name
        ));
    }
    if let Some(kind) = description
        .kinds
        .iter()
        .find(|kind| kinds::ALL.contains(&kind.as_str()))
    {
        return Err(format!(
            "{} declares the built-in kind {kind:?}: a plugin reports kinds of its own",
            description.name
        ));
    }
    if let Some(kind) = description.kinds.iter().find(|kind| kind.trim().is_empty()) {
        return Err(format!(
            "{} declares an empty kind {kind:?}",
            description.name
        ));
    }
    Ok(())
}

fn invalid(path: &Path, reason: &str) -> PluginError {
    PluginError::Invalid {
        path: path.to_owned(),
        reason: reason.to_owned(),
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

/// One instance of a plugin: `Send`, not `Sync` (one call at a time).
pub struct PluginInstance {
    functions: Functions,
    instance: *mut c_void,
    name: String,
    kinds: Vec<String>,
    /// The last request's bytes, reused.
    input: Vec<u8>,
}

// SAFETY: the SDK requires plugin detectors to be `Send`, and `&mut self`
// on every call keeps calls to one at a time.
unsafe impl Send for PluginInstance {}

impl fmt::Debug for PluginInstance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginInstance")
            .field("name", &self.name)
            .field("kinds", &self.kinds)
            .finish_non_exhaustive()
    }
}

impl PluginInstance {
    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the plugin wants to hear of task resets (ABI 1.1 and later).
    pub fn supports_reset(&self) -> bool {
        self.functions.reset_task.is_some()
    }

    /// Whether the plugin hands over its per-task state for a durable
    /// store (ABI 1.2 and later, with both `export_task` and
    /// `import_task`): without it, a task restored from a store starts
    /// afresh in the plugin.
    pub fn supports_state(&self) -> bool {
        self.functions.export_task.is_some() && self.functions.import_task.is_some()
    }

    /// Observes one event from input line `line`: its detections, each
    /// attributed to the plugin and of a kind it declared.
    pub fn observe(&mut self, line: u64, event: &Event) -> Result<Vec<Detection>, PluginFault> {
        let mut input = std::mem::take(&mut self.input);
        wire::encode_observe(line, event, &mut input);
        let result = self.observe_encoded(&input);
        self.input = input;
        result
    }

    /// Observes one event already encoded with
    /// [`encode_observe`](loopguard_plugin_api::wire::encode_observe).
    pub fn observe_encoded(&mut self, input: &[u8]) -> Result<Vec<Detection>, PluginFault> {
        let mut out = Buffer::EMPTY;
        // SAFETY: a live instance, used by this caller alone (`&mut self`);
        // the input is borrowed for the call.
        let code = unsafe {
            (self.functions.observe)(self.instance, input.as_ptr(), input.len(), &mut out)
        };
        let mut detections = answer(self.functions.free_buffer, code, out, |bytes| {
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
        let Some(reset_task) = self.functions.reset_task else {
            return Ok(());
        };
        let mut out = Buffer::EMPTY;
        // SAFETY: as in `observe_encoded`.
        let code = unsafe { reset_task(self.instance, task.as_ptr(), task.len(), &mut out) };
        answer(self.functions.free_buffer, code, out, |_| Ok(()))
    }

    /// The task's state as the plugin exports it (`None`: nothing to keep,
    /// or a plugin without the 1.2 state functions).
    pub fn export_task(&mut self, task: &str) -> Result<Option<serde_json::Value>, PluginFault> {
        // Both or neither: a state the plugin could not take back is
        // not worth storing.
        let (Some(export_task), Some(_)) = (self.functions.export_task, self.functions.import_task)
        else {
            return Ok(None);
        };
        let mut out = Buffer::EMPTY;
        // SAFETY: as in `observe_encoded`.
        let code = unsafe { export_task(self.instance, task.as_ptr(), task.len(), &mut out) };
        answer(self.functions.free_buffer, code, out, |bytes| {
            if bytes.is_empty() {
                return Ok(None);
            }
            let state: serde_json::Value = serde_json::from_slice(bytes)
                .map_err(|err| format!("its exported task state is not valid JSON: {err}"))?;
            Ok((!state.is_null()).then_some(state))
        })
    }

    /// Hands the plugin a task's state that [`export_task`](Self::export_task)
    /// gave (a no-op for a plugin without the 1.2 state functions).
    pub fn import_task(
        &mut self,
        task: &str,
        state: &serde_json::Value,
    ) -> Result<(), PluginFault> {
        let (Some(_), Some(import_task)) = (self.functions.export_task, self.functions.import_task)
        else {
            return Ok(());
        };
        let state = serde_json::to_vec(state)
            .map_err(|err| PluginFault::Host(format!("cannot encode the task state: {err}")))?;
        let mut out = Buffer::EMPTY;
        // SAFETY: as in `observe_encoded`; the state is borrowed for the
        // call.
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

impl Drop for PluginInstance {
    fn drop(&mut self) {
        // SAFETY: the instance came from `create` and is not used again; the
        // library is never unloaded.
        let code = unsafe { (self.functions.destroy)(self.instance) };
        if code != status::OK {
            tracing::warn!(plugin = %self.name, status = code, "plugin instance did not close cleanly");
        }
    }
}

/// Runs plugin calls: off the async reactor, a bounded number at once, and
/// disabling a plugin after too many faults.
#[derive(Debug, Clone)]
pub struct PluginHost {
    limiter: Arc<Semaphore>,
    max_faults: u32,
    call_timeout: Duration,
}

impl PluginHost {
    /// A host with `[plugin_host]`'s settings.
    pub fn new(config: &PluginHostConfig) -> PluginHost {
        let permits = usize::try_from(config.max_concurrency.max(1)).unwrap_or(1);
        PluginHost {
            limiter: Arc::new(Semaphore::new(permits)),
            max_faults: config.max_faults.max(1),
            call_timeout: Duration::from_millis(config.call_timeout_ms.max(1)),
        }
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
        let worker = Worker::spawn(instance).map_err(|err| PluginError::Start {
            path: plugin.info.path.clone(),
            name: plugin.info.name.clone(),
            fault: PluginFault::Host(format!("cannot start its thread: {err}")),
        })?;
        Ok(Arc::new(PluginDetector {
            name: plugin.info.name.clone(),
            kinds: plugin.info.kinds.clone(),
            supports_reset,
            supports_state,
            worker,
            limiter: Arc::clone(&self.limiter),
            max_faults: self.max_faults,
            call_timeout: self.call_timeout,
            faults: AtomicU32::new(0),
            disabled: AtomicBool::new(false),
        }))
    }
}

/// Loads every plugin of `config.plugins` (paths as written: resolve
/// relative ones first) and creates its instance with its config. Refuses
/// two plugins of the same name.
pub fn load_plugins(config: &Config) -> Result<Vec<Arc<PluginDetector>>, PluginError> {
    let host = PluginHost::new(&config.plugin_host);
    let mut detectors = Vec::new();
    let mut seen: Vec<(String, &Path)> = Vec::new();
    for entry in &config.plugins {
        let plugin = Plugin::load(&entry.path)?;
        if let Some((name, first)) = seen.iter().find(|(name, _)| *name == plugin.info.name) {
            return Err(PluginError::DuplicateName {
                name: name.clone(),
                first: first.to_path_buf(),
                second: entry.path.clone(),
            });
        }
        seen.push((plugin.info.name.clone(), &entry.path));
        detectors.push(host.detector(&plugin, &entry.config)?);
    }
    Ok(detectors)
}

/// A plugin instance as an [`ExtensionDetector`]: called off the reactor,
/// faults counted, disabled after `plugin_host.max_faults` of them.
pub struct PluginDetector {
    name: String,
    kinds: Vec<String>,
    supports_reset: bool,
    supports_state: bool,
    worker: Worker,
    limiter: Arc<Semaphore>,
    max_faults: u32,
    call_timeout: Duration,
    faults: AtomicU32,
    disabled: AtomicBool,
}

impl fmt::Debug for PluginDetector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginDetector")
            .field("name", &self.name)
            .field("kinds", &self.kinds)
            .field("faults", &self.faults)
            .field("disabled", &self.disabled)
            .finish_non_exhaustive()
    }
}

impl PluginDetector {
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
        call: impl FnOnce(&mut PluginInstance) -> Result<T, PluginFault> + Send + 'static,
    ) -> Result<T, PluginFault> {
        let _permit = self
            .limiter
            .acquire()
            .await
            .map_err(|err| PluginFault::Host(err.to_string()))?;
        self.worker.call(self.call_timeout, call).await
    }

    /// Counts a fault, disables the plugin at `max_faults` (or at once when
    /// it timed out: its thread is still busy with the call), and says so.
    fn fault(&self, fault: &PluginFault, task: &str, line: Option<u64>) -> String {
        let count = self
            .faults
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1);
        let mut message = format!("{fault} (fault {count} of {})", self.max_faults);
        let hung = matches!(fault, PluginFault::TimedOut(_));
        if (count >= self.max_faults || hung) && !self.disabled.swap(true, Ordering::Relaxed) {
            message.push_str("; plugin disabled for the rest of the run");
            tracing::error!(plugin = %self.name, task, line, faults = count, error = %fault, "plugin disabled");
        } else {
            tracing::warn!(plugin = %self.name, task, line, faults = count, error = %fault, "plugin fault");
        }
        message
    }
}

#[async_trait]
impl ExtensionDetector for PluginDetector {
    fn name(&self) -> &str {
        &self.name
    }

    fn kinds(&self) -> Vec<String> {
        self.kinds.clone()
    }

    async fn observe(&self, event: &ObservedEvent<'_>) -> Result<Vec<Detection>, ExtensionError> {
        if self.is_disabled() {
            return Ok(Vec::new());
        }
        // Encoded here, so that the blocking call owns its bytes.
        let mut input = Vec::with_capacity(256);
        wire::encode_observe(event.line, event.event, &mut input);
        self.run(move |instance| instance.observe_encoded(&input))
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
                    self.name,
                    self.fault(&fault, task, None)
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopguard_core_types::{Action, PluginConfig, PluginHostConfig};
    use loopguard_plugin_api::testing::build_cdylib;

    fn fixture(package: &str) -> PathBuf {
        build_cdylib(package).unwrap_or_else(|err| panic!("{err}"))
    }

    fn event(json: &str) -> Event {
        Event::from_json(json).expect("a valid event")
    }

    fn turn(output: &str) -> Event {
        event(&format!(
            r#"{{"type":"turn","task":"T","agent":"a","output":"{output}","success":true}}"#
        ))
    }

    async fn observe(
        detector: &PluginDetector,
        line: u64,
        event: &Event,
    ) -> Result<Vec<Detection>, ExtensionError> {
        let observed = ObservedEvent::new(line, event).at(None);
        detector.observe(&observed).await
    }

    #[test]
    fn versions_are_refused_by_major_newer_minor_and_older_minor() {
        let v = |major, minor| AbiVersion { major, minor };
        assert_eq!(abi_refusal(AbiVersion::HOST), None);
        assert_eq!(abi_refusal(AbiVersion::OLDEST), None);
        assert!(abi_refusal(v(abi::ABI_MAJOR + 1, 0)).is_some_and(|a| a.contains("major")));
        assert!(abi_refusal(v(0, 9)).is_some_and(|a| a.contains("major")));
        assert!(
            abi_refusal(v(abi::ABI_MAJOR, abi::ABI_MINOR + 1)).is_some_and(|a| a.contains("newer"))
        );
    }

    #[test]
    fn a_real_plugin_describes_itself_and_runs() {
        let path = fixture("loopguard-plugin-monologue");
        let plugin = Plugin::load(&path).expect("loads");
        let info = plugin.info();
        assert_eq!(
            (info.name.as_str(), info.abi),
            ("monologue", AbiVersion::HOST)
        );
        assert_eq!(info.kinds, ["monologue"]);
        assert_eq!(info.sdk_version, abi::SDK_VERSION);
        assert_eq!(info.rustc_version, abi::RUSTC_VERSION);
        let mut instance = plugin
            .instantiate(&serde_json::json!({"repeats": 2}))
            .expect("starts");
        assert!(instance.supports_reset());
        assert!(
            instance
                .observe(1, &turn("x"))
                .expect("observes")
                .is_empty()
        );
        let found = instance.observe(2, &turn("x")).expect("observes");
        assert_eq!(
            (found[0].kind.as_ref(), found[0].action),
            ("monologue", Action::InjectContext)
        );
        instance.reset_task("T").expect("resets");
        assert!(
            instance
                .observe(3, &turn("x"))
                .expect("observes")
                .is_empty()
        );
        let err = plugin
            .instantiate(&serde_json::json!({"repeats": 1}))
            .expect_err("refused");
        assert!(
            err.to_string().starts_with("plugin monologue (")
                && err.to_string().contains("`repeats` = 1"),
            "{err}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn panics_are_contained_counted_and_disable_the_plugin() {
        let mut config = Config::default();
        config
            .plugins
            .push(PluginConfig::new(fixture("loopguard-fixture-panicky")));
        config.plugin_host.max_faults = 2;
        let detectors = load_plugins(&config).expect("loads");
        let panicky = &detectors[0];
        let seen = observe(panicky, 1, &turn("fine")).await.expect("observes");
        assert_eq!(seen[0].kind, "panicky_seen");
        let first = observe(panicky, 2, &turn("boom"))
            .await
            .expect_err("panics");
        let first = first.to_string();
        assert!(
            first.starts_with("panicked: the fixture blew up on line 2 (at ")
                && first.contains("panicky/src/lib.rs:")
                && first.ends_with(") (fault 1 of 2)"),
            "{first}"
        );
        assert!(!panicky.is_disabled());
        // The instance goes on after a contained panic.
        assert_eq!(
            observe(panicky, 3, &turn("fine"))
                .await
                .expect("observes")
                .len(),
            1
        );
        let second = observe(panicky, 4, &turn("boom"))
            .await
            .expect_err("panics");
        assert!(
            second
                .to_string()
                .ends_with("(fault 2 of 2); plugin disabled for the rest of the run"),
            "{second}"
        );
        assert!(panicky.is_disabled());
        // Disabled: not called any more.
        assert!(
            observe(panicky, 5, &turn("boom"))
                .await
                .expect("skipped")
                .is_empty()
        );
        assert!(
            observe(panicky, 6, &turn("fine"))
                .await
                .expect("skipped")
                .is_empty()
        );
        assert_eq!(panicky.faults(), 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_callers_are_all_answered_in_order_per_task() {
        let plugin = Plugin::load(&fixture("loopguard-plugin-monologue")).expect("loads");
        let host = PluginHost::new(&PluginHostConfig {
            max_concurrency: 2,
            ..PluginHostConfig::default()
        });
        let detector = host
            .detector(&plugin, &serde_json::json!({"repeats": 2}))
            .expect("starts");
        let callers: Vec<_> = (0..16)
            .map(|task| {
                let detector = Arc::clone(&detector);
                tokio::spawn(async move {
                    let same = event(&format!(
                        r#"{{"type":"turn","task":"T{task}","agent":"a","output":"o","success":true}}"#
                    ));
                    let mut evidence = Vec::new();
                    for line in 1..=20 {
                        for found in observe(&detector, line, &same).await.expect("observes") {
                            evidence.push(found.evidence.len());
                        }
                    }
                    evidence
                })
            })
            .collect();
        for caller in callers {
            // 20 identical turns with repeats = 2: a detection from the
            // 2nd on, each run one line longer.
            assert_eq!(caller.await.expect("joins"), (2..=20).collect::<Vec<_>>());
        }
    }

    #[tokio::test]
    async fn a_plugin_that_does_not_answer_in_time_is_disabled() {
        let mut config = Config::default();
        config
            .plugins
            .push(PluginConfig::new(fixture("loopguard-fixture-panicky")));
        config.plugin_host.call_timeout_ms = 50;
        let detectors = load_plugins(&config).expect("loads");
        let panicky = &detectors[0];
        let err = observe(panicky, 1, &turn("hang"))
            .await
            .expect_err("times out");
        assert_eq!(
            err.to_string(),
            "did not answer within 50 ms (fault 1 of 3); plugin disabled for the rest of the run"
        );
        assert!(panicky.is_disabled());
        assert!(
            observe(panicky, 2, &turn("fine"))
                .await
                .expect("skipped")
                .is_empty()
        );
    }

    #[test]
    fn another_abi_major_is_refused_naming_both_versions() {
        let path = fixture("loopguard-fixture-abi-major-2");
        let err = Plugin::load(&path).expect_err("refused");
        let message = err.to_string();
        assert!(
            matches!(
                err,
                PluginError::Abi {
                    plugin: AbiVersion { major: 2, minor: 0 },
                    ..
                }
            ),
            "{message}"
        );
        assert!(message.contains("built for plugin ABI 2.0"), "{message}");
        assert!(
            message.contains(&format!("speaks plugin ABI {}", AbiVersion::HOST)),
            "{message}"
        );
        assert!(message.contains(&path.display().to_string()), "{message}");
    }

    #[test]
    fn an_abi_1_0_plugin_still_loads_without_the_1_1_functions() {
        let plugin = Plugin::load(&fixture("loopguard-fixture-abi-1-0")).expect("loads");
        assert_eq!(plugin.info().abi, AbiVersion { major: 1, minor: 0 });
        let mut instance = plugin.instantiate(&serde_json::json!({})).expect("starts");
        assert!(!instance.supports_reset());
        instance.reset_task("T").expect("a no-op for 1.0");
        assert!(!instance.supports_state());
        assert_eq!(
            instance.export_task("T"),
            Ok(None),
            "a 1.0 plugin keeps nothing"
        );
        instance
            .import_task("T", &serde_json::json!({"format": 1}))
            .expect("a no-op for 1.0");
        let failure = event(r#"{"type":"failure","task":"T","agent":"a","error":"E1"}"#);
        let found = instance.observe(4, &failure).expect("observes");
        assert_eq!(
            (found[0].kind.as_ref(), found[0].evidence.as_slice()),
            ("legacy_failure", &[4][..])
        );
    }

    /// The events of a trace of the workspace's `tests/traces`, with their
    /// lines.
    fn trace_events(name: &str) -> Vec<(u64, Event)> {
        let path = format!("{}/../../tests/traces/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).expect("the trace exists");
        text.lines()
            .enumerate()
            .filter_map(|(index, line)| Some((index as u64 + 1, Event::from_json(line).ok()?)))
            .collect()
    }

    /// Replays `events` through a new engine with a new instance of
    /// `plugin` on `store`: each decision as JSON.
    async fn replay_with(
        plugin: &Plugin,
        store: &Arc<crate::MemoryStore>,
        events: &[(u64, Event)],
    ) -> Vec<serde_json::Value> {
        let detector = PluginHost::new(&PluginHostConfig::default())
            .detector(plugin, &serde_json::json!({}))
            .expect("starts");
        let guard = crate::LoopGuard::builder(Config::default())
            .store(store.clone())
            .extension(detector.clone())
            .build()
            .expect("valid");
        let mut decisions = Vec::new();
        for (line, event) in events {
            let decision = guard.observe_line(*line, event.clone()).await;
            assert!(decision.errors.is_empty(), "{:?}", decision.errors);
            decisions.push(serde_json::to_value(&decision).expect("serializes"));
        }
        assert_eq!(detector.faults(), 0);
        decisions
    }

    /// Whether `events` split before every event, across two engines and
    /// two instances of `plugin` on one durable store, decide like one run.
    async fn splits_like_one_run(plugin: &Plugin, events: &[(u64, Event)]) -> Vec<usize> {
        let whole = replay_with(plugin, &Arc::new(crate::MemoryStore::durable()), events).await;
        let mut differing = Vec::new();
        for split in 1..events.len() {
            let store = Arc::new(crate::MemoryStore::durable());
            let mut halves = replay_with(plugin, &store, &events[..split]).await;
            halves.extend(replay_with(plugin, &store, &events[split..]).await);
            if halves != whole {
                differing.push(split);
            }
        }
        differing
    }

    #[tokio::test]
    async fn a_plugin_trace_split_anywhere_on_a_durable_store_decides_like_one_run() {
        let plugin = Plugin::load(&fixture("loopguard-plugin-monologue")).expect("loads");
        let events = trace_events("monologue.jsonl");
        assert!(events.len() > 5);
        let whole = replay_with(&plugin, &Arc::new(crate::MemoryStore::durable()), &events).await;
        let monologues = whole
            .iter()
            .filter(|decision| decision.to_string().contains(r#""kind":"monologue""#))
            .count();
        assert!(monologues >= 2, "the trace has monologues: {whole:?}");
        assert_eq!(
            splits_like_one_run(&plugin, &events).await,
            Vec::<usize>::new()
        );
    }

    #[tokio::test]
    async fn without_the_state_functions_a_split_plugin_starts_its_tasks_afresh() {
        // The same plugin with its 1.2 state slots taken away, as a plugin
        // of ABI 1.1 has them.
        let mut plugin = Plugin::load(&fixture("loopguard-plugin-monologue")).expect("loads");
        plugin.functions.export_task = None;
        plugin.functions.import_task = None;
        let events = trace_events("monologue.jsonl");
        let differing = splits_like_one_run(&plugin, &events).await;
        // A split inside the run of lines 4 to 6 loses the monologue on 6.
        assert!(
            differing.contains(&4) && differing.contains(&5),
            "{differing:?}"
        );
    }

    #[tokio::test]
    async fn a_task_state_the_plugin_cannot_read_is_a_fault_naming_it() {
        let plugin = Plugin::load(&fixture("loopguard-plugin-monologue")).expect("loads");
        let detector = PluginHost::new(&PluginHostConfig::default())
            .detector(&plugin, &serde_json::json!({"repeats": 2}))
            .expect("starts");
        assert_eq!(detector.export_task("T").await, None, "no run yet");
        observe(&detector, 1, &turn("x")).await.expect("observes");
        let state = detector.export_task("T").await.expect("a run to keep");
        let err = detector
            .import_task("T", serde_json::json!({"format": 99}))
            .await
            .expect_err("refused");
        let message = err.to_string();
        assert!(
            message.starts_with("plugin monologue: returned an error: monologue")
                && message.ends_with("(fault 1 of 3)"),
            "{message}"
        );
        assert_eq!(detector.faults(), 1);
        // A fresh instance continues the run it is given.
        let restarted = PluginHost::new(&PluginHostConfig::default())
            .detector(&plugin, &serde_json::json!({"repeats": 2}))
            .expect("starts");
        restarted.import_task("T", state).await.expect("imports");
        let found = observe(&restarted, 2, &turn("x")).await.expect("observes");
        assert_eq!(found[0].evidence, [1, 2]);
    }

    #[test]
    fn older_minors_are_read_without_the_state_slots_and_a_short_1_2_table_is_refused() {
        use loopguard_plugin_api::export;
        use loopguard_plugin_monologue::Monologue;
        // A 1.1 table: its slots past `reset_task` are not read, whatever
        // lies there.
        let mut table = export::table::<Monologue>(1, 1);
        table.header.struct_size = abi::TABLE_SIZE_V1_1;
        // SAFETY: a live table of at least `struct_size` bytes.
        let (_, functions) = unsafe { read_functions(&table, &table.header) }.expect("reads");
        assert!(functions.reset_task.is_some());
        assert!(functions.export_task.is_none() && functions.import_task.is_none());
        // A 1.2 table has both.
        let table = export::table::<Monologue>(1, 2);
        // SAFETY: as above.
        let (_, functions) = unsafe { read_functions(&table, &table.header) }.expect("reads");
        assert!(functions.export_task.is_some() && functions.import_task.is_some());
        // A 1.2 table as small as a 1.1 one is not a 1.2 table.
        let mut short = export::table::<Monologue>(1, 2);
        short.header.struct_size = abi::TABLE_SIZE_V1_1;
        // SAFETY: as above.
        let err = unsafe { read_functions(&short, &short.header) }.expect_err("refused");
        assert!(err.contains("ABI 1.2 tables have at least"), "{err}");
    }

    #[test]
    fn files_that_are_not_plugins_are_refused_clearly() {
        let dir =
            std::env::temp_dir().join(format!("loopguard-host-plugins-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temp dir");
        let text = dir.join("notes.so");
        std::fs::write(&text, "not a library\n").expect("written");
        let err = Plugin::load(&text).expect_err("refused");
        assert!(matches!(err, PluginError::NotALibrary { .. }), "{err}");
        assert!(
            err.to_string().starts_with(&format!(
                "plugin {}: not a loadable library: ",
                text.display()
            )),
            "{err}"
        );
        let missing = Plugin::load(&dir.join("missing.so")).expect_err("refused");
        assert!(
            matches!(missing, PluginError::NotALibrary { .. }),
            "{missing}"
        );
        let _ = std::fs::remove_dir_all(&dir);

        // A real library that is not a plugin.
        let system = if cfg!(target_os = "macos") {
            "/usr/lib/libSystem.B.dylib"
        } else if cfg!(windows) {
            "kernel32.dll"
        } else {
            "libc.so.6"
        };
        let err = Plugin::load(Path::new(system)).expect_err("refused");
        assert!(matches!(err, PluginError::MissingSymbol { .. }), "{err}");
        assert!(
            err.to_string()
                .contains("has no loopguard_plugin_entry_v1 symbol: not a loopguard plugin"),
            "{err}"
        );
    }

    #[test]
    fn two_plugins_of_one_name_are_refused() {
        let path = fixture("loopguard-plugin-monologue");
        let config = Config {
            plugins: vec![PluginConfig::new(&path), PluginConfig::new(&path)],
            ..Config::default()
        };
        let err = load_plugins(&config).expect_err("refused");
        assert!(matches!(err, PluginError::DuplicateName { .. }), "{err}");
    }
}
