//! A plugin as the first SDK built it: an ABI 1.0 table, written by hand
//! with the 1.0 fields only (no `reset_task`, a smaller `struct_size`). A
//! newer host (1.1, 1.2) must still load and run it, and must not read past
//! its end.
//!
//! It reports a `legacy_failure` warning on every `failure` event.

use loopguard_plugin_api::abi::{
    CreateFn, DescribeFn, DestroyFn, FreeBufferFn, ObserveFn, PluginHeader, TABLE_SIZE_V1_0,
};
use loopguard_plugin_api::export;
use loopguard_plugin_api::serde_json::Value;
use loopguard_plugin_api::{Action, Detection, Detector, Event, EventKind, Severity};

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
    observe: Some(export::observe::<Legacy>),
    free_buffer: Some(export::free_buffer),
};

/// The loopguard plugin entry: the 1.0 table.
#[unsafe(no_mangle)]
pub extern "C" fn loopguard_plugin_entry_v1() -> *const TableV1_0 {
    &TABLE
}
