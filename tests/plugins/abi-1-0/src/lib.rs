//! A plugin as the first SDK built it: an ABI 1.0 table, written by hand
//! with the 1.0 fields only (no `reset_task`, a smaller `struct_size`). A
//! newer host (1.1 to 1.4) must still load and run it, and must not read past
//! its end.
//!
//! It reports a `legacy_failure` warning on every `failure` event. Like
//! every plugin of the 1.0 to 1.2 SDKs, it reads events strictly: an event
//! of a type newer than itself (`tool_call`) is an error, which the host
//! would count as a fault, so a host must not send it one.

use std::ffi::c_void;

use loopguard_plugin_api::abi::{
    Buffer, CreateFn, DescribeFn, DestroyFn, FreeBufferFn, ObserveFn, PluginHeader,
    TABLE_SIZE_V1_0, status,
};
use loopguard_plugin_api::export;
use loopguard_plugin_api::serde_json::{self, Value};
use loopguard_plugin_api::{
    Action, Detection, Detector, Event, EventKind, ObserveRequest, Severity,
};

/// The legacy detector.
pub struct Legacy;

impl Detector for Legacy {
    const NAME: &'static str = "legacy";
    const VERSION: &'static str = "1.0.0";
    const KINDS: &'static [&'static str] = &["legacy_failure"];

    fn new(_config: Value) -> Result<Self, String> {
        Ok(Legacy)
    }

    fn observe(&mut self, line: u64, event: &Event) -> Vec<Detection> {
        if !matches!(event.kind, EventKind::Failure { .. }) {
            return Vec::new();
        }
        vec![Detection::new(
            Self::NAME,
            "legacy_failure",
            Severity::Low,
            Action::Warn,
            vec![line],
            "a failure, seen by a 1.0 plugin",
        )]
    }
}

/// The ABI 1.0 table: the 1.1 table without its last field.
#[repr(C)]
pub struct TableV1_0 {
    header: PluginHeader,
    describe: Option<DescribeFn>,
    create: Option<CreateFn>,
    destroy: Option<DestroyFn>,
    observe: Option<ObserveFn>,
    free_buffer: Option<FreeBufferFn>,
}

// SAFETY: immutable, and its strings are static.
unsafe impl Sync for TableV1_0 {}

const _: () = assert!(std::mem::size_of::<TableV1_0>() == TABLE_SIZE_V1_0);

static TABLE: TableV1_0 = TableV1_0 {
    header: export::header(1, 0, std::mem::size_of::<TableV1_0>()),
    describe: Some(export::describe::<Legacy>),
    create: Some(export::create::<Legacy>),
    destroy: Some(export::destroy::<Legacy>),
    observe: Some(observe_strictly),
    free_buffer: Some(export::free_buffer),
};

/// `observe` as the 1.0 SDK had it: the request read strictly (the
/// derived `Deserialize` of [`ObserveRequest`]), so that an event type the
/// plugin does not know is an error, not skipped as from ABI 1.3 on.
///
/// # Safety
///
/// As `export::observe`.
unsafe extern "C" fn observe_strictly(
    instance: *mut c_void,
    input: *const u8,
    input_len: usize,
    out: *mut Buffer,
) -> i32 {
    let bytes = if input.is_null() || input_len == 0 {
        &[][..]
    } else {
        // SAFETY: the host lends `input_len` bytes at `input` for the call.
        unsafe { std::slice::from_raw_parts(input, input_len) }
    };
    // The 1.0 SDK knew the eight event types of trace format 1.0 only.
    const TYPES_1_0: [&str; 8] = [
        "handoff",
        "collaboration",
        "failure",
        "turn",
        "transition",
        "progress",
        "completed",
        "human",
    ];
    let event_type = serde_json::from_slice::<Value>(bytes)
        .ok()
        .and_then(|request| request["event"]["type"].as_str().map(str::to_owned));
    let unknown = match &event_type {
        Some(event_type) if !TYPES_1_0.contains(&event_type.as_str()) => {
            Some(format!("unknown event type {event_type:?}"))
        }
        _ => None,
    };
    let strict = serde_json::from_slice::<ObserveRequest>(bytes).map_err(|err| err.to_string());
    if let Some(err) = unknown.or(strict.err()) {
        if !out.is_null() {
            let message = format!("the event is not valid JSON of the trace format: {err}");
            // SAFETY: the host hands a writable buffer; it frees it with this
            // library's `free_buffer`.
            unsafe { out.write(Buffer::from_vec(message.into_bytes())) };
        }
        return status::ERROR;
    }
    // SAFETY: forwarded from the host.
    unsafe { export::observe::<Legacy>(instance, input, input_len, out) }
}

/// The loopguard plugin entry: the 1.0 table.
#[unsafe(no_mangle)]
pub extern "C" fn loopguard_plugin_entry_v1() -> *const TableV1_0 {
    &TABLE
}
