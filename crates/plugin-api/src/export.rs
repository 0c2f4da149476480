//! What [`export_detector!`](crate::export_detector) expands to: the ABI's
//! functions for one [`Detector`] type, each wrapped in `catch_unwind`.
//!
//! Public only for the macro (and for fixtures that write a table by
//! hand); a plugin author never names these.

use std::any::Any;
use std::cell::RefCell;
use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

use loopguard_core_types::EventKind;
use serde_json::Value;

use crate::Detector;
use crate::abi::{Buffer, PluginHeader, PluginTable, RUSTC_VERSION, SDK_VERSION, StrRef, status};
use crate::wire::{PluginDescription, decode_observe, encode_detections};

thread_local! {
    /// Where the last panic on this thread happened, as the hook saw it.
    static PANIC_LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs (once) the plugin's panic hook: it prints nothing and keeps
/// the panic's location for the message the host gets. Called by the
/// entry symbol, so only a loaded plugin's panics are quiet; the library
/// has its own copy of `std`, so the host's hook is untouched.
pub fn install_panic_hook() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let location = info
                .location()
                .map(|at| format!("{}:{}:{}", at.file(), at.line(), at.column()));
            PANIC_LOCATION.with(|slot| *slot.borrow_mut() = location);
        }));
    });
}

/// The table of `D` with the given versions (the macro passes the SDK's).
pub const fn table<D: Detector>(abi_major: u32, abi_minor: u32) -> PluginTable {
    PluginTable {
        header: header(abi_major, abi_minor, std::mem::size_of::<PluginTable>()),
        describe: Some(describe::<D>),
        create: Some(create::<D>),
        destroy: Some(destroy::<D>),
        observe: Some(observe::<D>),
        free_buffer: Some(free_buffer),
        reset_task: Some(reset_task::<D>),
        export_task: Some(export_task::<D>),
        import_task: Some(import_task::<D>),
    }
}

/// A header with this SDK's version strings.
pub const fn header(abi_major: u32, abi_minor: u32, struct_size: usize) -> PluginHeader {
    PluginHeader {
        abi_major,
        abi_minor,
        struct_size,
        sdk_version: StrRef::from_static(SDK_VERSION),
        rustc_version: StrRef::from_static(RUSTC_VERSION),
    }
}

/// The ABI's `describe` for `D`.
///
/// # Safety
///
/// `out` must be null or point to a writable [`Buffer`].
pub unsafe extern "C" fn describe<D: Detector>(out: *mut Buffer) -> i32 {
    // SAFETY: forwarded from the caller.
    unsafe {
        guard(out, || {
            let description = PluginDescription {
                name: D::NAME.to_owned(),
                version: D::VERSION.to_owned(),
                kinds: D::KINDS.iter().map(|kind| (*kind).to_owned()).collect(),
                description: D::DESCRIPTION.to_owned(),
            };
            serde_json::to_vec(&description).map_err(|err| err.to_string())
        })
    }
}

/// The ABI's `create` for `D`.
///
/// # Safety
///
/// `config` must point to `config_len` readable bytes (or be null with
/// length 0); `instance` and `out` must be null or writable.
pub unsafe extern "C" fn create<D: Detector>(
    config: *const u8,
    config_len: usize,
    instance: *mut *mut c_void,
    out: *mut Buffer,
) -> i32 {
    // SAFETY: forwarded from the caller.
    unsafe {
        guard(out, || {
            if instance.is_null() {
                return Err("create: the instance pointer is null".to_owned());
            }
            let bytes = borrowed(config, config_len);
            let config = if bytes.is_empty() {
                Value::Object(serde_json::Map::new())
            } else {
                serde_json::from_slice(bytes)
                    .map_err(|err| format!("the plugin's config is not valid JSON: {err}"))?
            };
            let detector = D::new(config)?;
            instance.write(Box::into_raw(Box::new(detector)).cast::<c_void>());
            Ok(Vec::new())
        })
    }
}

/// The ABI's `destroy` for `D`.
///
/// # Safety
///
/// `instance` must come from `create::<D>` and not be used afterwards.
pub unsafe extern "C" fn destroy<D: Detector>(instance: *mut c_void) -> i32 {
    if instance.is_null() {
        return status::OK;
    }
    // SAFETY: the caller hands back a pointer made by `create::<D>`.
    let detector = unsafe { Box::from_raw(instance.cast::<D>()) };
    match catch_unwind(AssertUnwindSafe(move || drop(detector))) {
        Ok(()) => status::OK,
        Err(payload) => {
            forget_payload(payload);
            status::PANIC
        }
    }
}

/// The ABI's `observe` for `D`. An event of a type this SDK does not know
/// is answered with no detections, without calling `D`.
///
/// # Safety
///
/// `instance` must come from `create::<D>`, used by one thread at a time;
/// `input` must point to `input_len` readable bytes; `out` must be null or
/// writable.
pub unsafe extern "C" fn observe<D: Detector>(
    instance: *mut c_void,
    input: *const u8,
    input_len: usize,
    out: *mut Buffer,
) -> i32 {
    // SAFETY: forwarded from the caller.
    unsafe {
        guard(out, || {
            // SAFETY: the host gives exclusive access to a live instance.
            let detector = instance
                .cast::<D>()
                .as_mut()
                .ok_or("observe: no instance")?;
            let request = decode_observe(borrowed(input, input_len)).map_err(|err| err.0)?;
            // A type newer than this SDK (ABI 1.3): skipped, never an error.
            if matches!(request.event.kind, EventKind::Unknown { .. }) {
                return Ok(Vec::new());
            }
            let mut detections = detector.observe(request.line, &request.event);
            for detection in &mut detections {
                detection.detector = D::NAME.into();
            }
            Ok(encode_detections(&detections))
        })
    }
}

/// The ABI's `reset_task` for `D`.
///
/// # Safety
///
/// As [`observe`], with `task` pointing to `task_len` bytes of UTF-8.
pub unsafe extern "C" fn reset_task<D: Detector>(
    instance: *mut c_void,
    task: *const u8,
    task_len: usize,
    out: *mut Buffer,
) -> i32 {
    // SAFETY: forwarded from the caller.
    unsafe {
        guard(out, || {
            // SAFETY: the host gives exclusive access to a live instance.
            let detector = instance
                .cast::<D>()
                .as_mut()
                .ok_or("reset_task: no instance")?;
            let task = task_str(task, task_len, "reset_task")?;
            detector.reset_task(task);
            Ok(Vec::new())
        })
    }
}

/// The ABI's `export_task` for `D`: the state as JSON, nothing for `None`.
///
/// # Safety
///
/// As [`reset_task`].
pub unsafe extern "C" fn export_task<D: Detector>(
    instance: *mut c_void,
    task: *const u8,
    task_len: usize,
    out: *mut Buffer,
) -> i32 {
    // SAFETY: forwarded from the caller.
    unsafe {
        guard(out, || {
            // SAFETY: the host gives exclusive access to a live instance.
            let detector = instance
                .cast::<D>()
                .as_ref()
                .ok_or("export_task: no instance")?;
            let task = task_str(task, task_len, "export_task")?;
            match detector.export_task(task) {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(state) => serde_json::to_vec(&state)
                    .map_err(|err| format!("export_task: the state is not JSON: {err}")),
            }
        })
    }
}

/// The ABI's `import_task` for `D`.
///
/// # Safety
///
/// As [`reset_task`], with `state` pointing to `state_len` readable bytes.
pub unsafe extern "C" fn import_task<D: Detector>(
    instance: *mut c_void,
    task: *const u8,
    task_len: usize,
    state: *const u8,
    state_len: usize,
    out: *mut Buffer,
) -> i32 {
    // SAFETY: forwarded from the caller.
    unsafe {
        guard(out, || {
            // SAFETY: the host gives exclusive access to a live instance.
            let detector = instance
                .cast::<D>()
                .as_mut()
                .ok_or("import_task: no instance")?;
            let task = task_str(task, task_len, "import_task")?;
            let state = serde_json::from_slice(borrowed(state, state_len))
                .map_err(|err| format!("import_task: the state is not valid JSON: {err}"))?;
            detector.import_task(task, state)?;
            Ok(Vec::new())
        })
    }
}

/// The ABI's `free_buffer`: releases a buffer this library filled.
///
/// # Safety
///
/// `buffer` must come from this library's functions, freed once.
pub unsafe extern "C" fn free_buffer(buffer: Buffer) {
    // SAFETY: the buffer was made by `Buffer::from_vec` in this library.
    let bytes = unsafe { buffer.into_vec() };
    drop(bytes);
}

/// The task id of a call to `function`, borrowed from the host.
///
/// # Safety
///
/// `task` points to `task_len` readable bytes (or is null with 0).
unsafe fn task_str<'a>(
    task: *const u8,
    task_len: usize,
    function: &str,
) -> Result<&'a str, String> {
    // SAFETY: forwarded from the caller.
    let bytes = unsafe { borrowed(task, task_len) };
    std::str::from_utf8(bytes).map_err(|err| format!("{function}: the task is not UTF-8: {err}"))
}

/// Runs `body`, catching a panic, and writes its answer (or the error or
/// panic message) to `out`; returns the status.
///
/// # Safety
///
/// `out` must be null or point to a writable [`Buffer`].
unsafe fn guard(out: *mut Buffer, body: impl FnOnce() -> Result<Vec<u8>, String>) -> i32 {
    let (code, bytes) = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(bytes)) => (status::OK, bytes),
        Ok(Err(message)) => (status::ERROR, message.into_bytes()),
        Err(payload) => {
            let mut message = panic_message(payload.as_ref());
            forget_payload(payload);
            if let Some(at) = PANIC_LOCATION.with(|slot| slot.borrow_mut().take()) {
                message = format!("{message} (at {at})");
            }
            (status::PANIC, message.into_bytes())
        }
    };
    if !out.is_null() {
        // SAFETY: the caller guarantees `out` is writable.
        unsafe { out.write(Buffer::from_vec(bytes)) };
    }
    code
}

/// The message of a panic payload (`panic!("...")` gives a `&str` or a
/// `String`).
fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

/// Drops a panic payload; a payload whose own `Drop` panics must not unwind
/// out of the plugin either.
fn forget_payload(payload: Box<dyn Any + Send>) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        // Leaked: dropping it could panic again.
        std::mem::forget(again);
    }
}

/// `len` bytes at `ptr`, or none for a null pointer.
///
/// # Safety
///
/// `ptr` must point to `len` readable bytes that outlive the call.
unsafe fn borrowed<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if ptr.is_null() || len == 0 {
        return &[];
    }
    // SAFETY: guaranteed by the caller.
    unsafe { std::slice::from_raw_parts(ptr, len) }
}
