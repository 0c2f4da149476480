//! The C ABI between the host and a plugin: the entry symbol, the table it
//! returns, the buffers that cross, the status codes.
//!
//! # Layout of ABI 1.4
//!
//! The library exports one symbol, [`ENTRY_SYMBOL`]
//! (`loopguard_plugin_entry_v1`, the major version in its name), an
//! `extern "C" fn() -> *const PluginTable` returning a pointer to a static
//! [`PluginTable`] that lives as long as the library:
//!
//! | offset (64-bit) | field | since |
//! |-----|-------|-------|
//! | 0  | `abi_major: u32` | 1.0 |
//! | 4  | `abi_minor: u32` | 1.0 |
//! | 8  | `struct_size: usize` (bytes of the table as the plugin built it) | 1.0 |
//! | 16 | `sdk_version: StrRef` (UTF-8, not NUL-terminated) | 1.0 |
//! | 32 | `rustc_version: StrRef` | 1.0 |
//! | 48 | `describe` | 1.0 |
//! | 56 | `create` | 1.0 |
//! | 64 | `destroy` | 1.0 |
//! | 72 | `observe` | 1.0 |
//! | 80 | `free_buffer` | 1.0 |
//! | 88 | `reset_task` | 1.1 |
//! | 96 | `export_task` (may be null) | 1.2 |
//! | 104 | `import_task` (may be null) | 1.2 |
//!
//! ABI 1.3 and 1.4 add no slot: their table is the 1.2 table, and what
//! changed is a promise about `observe` (1.3) and what the SDK reads of an
//! event (1.4), below.
//!
//! # The append-only rule
//!
//! A field, once released, never moves, changes type or changes meaning.
//! A new function or field is *appended* at the end of [`PluginTable`] and
//! bumps [`ABI_MINOR`]; the host reads it only when the plugin's
//! `abi_minor` and `struct_size` say it is there, so plugins built against
//! an older minor keep loading (down to [`ABI_OLDEST_SUPPORTED_MINOR`]).
//! Anything else (removing, reordering or retyping a field, changing a
//! function's contract or the JSON it exchanges incompatibly) is a new
//! [`ABI_MAJOR`], with a new entry symbol name. The host refuses another
//! major, a minor newer than it knows, and a minor older than the oldest
//! it supports, naming both versions.
//!
//! | version | change |
//! |---------|--------|
//! | 1.0 | the header, `describe`, `create`, `destroy`, `observe`, `free_buffer` |
//! | 1.1 | `reset_task`: the host tells the plugin when a task was reset (`completed`, `human`) |
//! | 1.2 | `export_task`, `import_task`: a task's state as JSON, kept by a durable store so that a restart continues the task; either slot may be null (the plugin keeps no state) |
//! | 1.3 | no new slot: the plugin handles event types newer than itself. `observe` answers an event whose `type` its SDK does not know (such as the trace format 1.1's `tool_call` for a 1.3 SDK built before `EventKind::ToolCall` existed; a later SDK hands it to the detector) with no detections and no error, without calling the detector. The host sends an event to a plugin only if the plugin's minor carries its type (`tool_call`: 1.3; the eight types of trace format 1.0: every minor), since a plugin of 1.0 to 1.2 answers an unknown type with an error |
//! | 1.4 | no new slot: events carry their `usage` (trace format 1.2: what the step spent in tokens and dollars, and the model), which the SDK reads ([`Event::usage`](loopguard_core_types::Event::usage), [`Usage`](loopguard_core_types::Usage)). The JSON is the same for every minor (an older SDK keeps `usage` among the fields it does not know), so the host sends it to every plugin and older plugins keep loading |
//!
//! # Ownership
//!
//! The side that allocates frees. Bytes the host passes in (`config`,
//! `input`, `task`, `state`) are borrowed for the duration of the call. Every
//! [`Buffer`] a plugin fills is allocated by the plugin and handed back to
//! the plugin's own `free_buffer`, exactly once, whatever the status. The
//! instance `create` returns is released by `destroy`.
//!
//! # Calls
//!
//! Every function returns a status ([`status`]). With [`status::OK`] the
//! output buffer holds the answer; with [`status::ERROR`] or
//! [`status::PANIC`] it holds a UTF-8 message. The host calls an instance
//! from one thread at a time (instances need only be `Send`); `describe`
//! needs no instance. No function may unwind: the SDK catches every panic.

use std::ffi::c_void;

/// The ABI's major version: a plugin of another major is refused.
pub const ABI_MAJOR: u32 = 1;

/// The ABI's minor version: the number of append-only extensions of the
/// major's first table. A host refuses a plugin with a newer minor.
pub const ABI_MINOR: u32 = 4;

/// The oldest minor of [`ABI_MAJOR`] this SDK's host side still loads.
pub const ABI_OLDEST_SUPPORTED_MINOR: u32 = 0;

/// The name of the one symbol a plugin exports (its ABI major in the name).
pub const ENTRY_SYMBOL: &str = "loopguard_plugin_entry_v1";

/// The prefix of every major's entry symbol, followed by the major
/// (`loopguard_plugin_entry_v2` ...): a host looks for other majors to say
/// what a library it cannot load was built for.
pub const ENTRY_SYMBOL_PREFIX: &str = "loopguard_plugin_entry_v";

/// This SDK's version (the `loopguard-plugin-api` crate's version).
pub const SDK_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The `rustc --version` this SDK was compiled with: in a plugin, the
/// compiler that built the plugin. For diagnostics only; the ABI does not
/// depend on it.
pub const RUSTC_VERSION: &str = env!("LOOPGUARD_PLUGIN_API_RUSTC_VERSION");

/// Status codes every ABI function returns.
pub mod status {
    /// Success: the output buffer holds the answer (possibly empty).
    pub const OK: i32 = 0;
    /// The plugin refused or failed: the output buffer holds a UTF-8
    /// message.
    pub const ERROR: i32 = 1;
    /// The plugin panicked (and the SDK caught it): the output buffer holds
    /// the panic's message.
    pub const PANIC: i32 = 2;
}

/// A borrowed UTF-8 string with static lifetime in the plugin (not
/// NUL-terminated).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct StrRef {
    /// The first byte (may be null when `len` is 0).
    pub ptr: *const u8,
    /// Length in bytes.
    pub len: usize,
}

impl StrRef {
    /// A reference to a static string.
    pub const fn from_static(text: &'static str) -> StrRef {
        StrRef {
            ptr: text.as_ptr(),
            len: text.len(),
        }
    }

    /// The string, with invalid UTF-8 replaced.
    ///
    /// # Safety
    ///
    /// `ptr` must point to `len` readable bytes (or `len` must be 0).
    pub unsafe fn to_string_lossy(self) -> String {
        if self.ptr.is_null() || self.len == 0 {
            return String::new();
        }
        // SAFETY: the caller guarantees `len` readable bytes at `ptr`.
        let bytes = unsafe { std::slice::from_raw_parts(self.ptr, self.len) };
        String::from_utf8_lossy(bytes).into_owned()
    }
}

/// Bytes a plugin allocated and hands to the host; the host gives them back
/// to the plugin's `free_buffer`.
#[repr(C)]
#[derive(Debug)]
pub struct Buffer {
    /// The first byte; null for an empty buffer.
    pub ptr: *mut u8,
    /// Bytes in use.
    pub len: usize,
    /// Bytes allocated (the allocating side's business).
    pub capacity: usize,
}

impl Buffer {
    /// The empty buffer: nothing to read, nothing to free.
    pub const EMPTY: Buffer = Buffer {
        ptr: std::ptr::null_mut(),
        len: 0,
        capacity: 0,
    };

    /// Hands a vector's allocation over (an empty vector gives
    /// [`Buffer::EMPTY`]). Only [`Buffer::into_vec`] in the same library may
    /// take it back.
    pub fn from_vec(bytes: Vec<u8>) -> Buffer {
        if bytes.capacity() == 0 {
            return Buffer::EMPTY;
        }
        let mut bytes = std::mem::ManuallyDrop::new(bytes);
        Buffer {
            ptr: bytes.as_mut_ptr(),
            len: bytes.len(),
            capacity: bytes.capacity(),
        }
    }

    /// Takes back an allocation made by [`Buffer::from_vec`].
    ///
    /// # Safety
    ///
    /// The buffer must come from [`Buffer::from_vec`] in this same library
    /// (same allocator), and must not be used again.
    pub unsafe fn into_vec(self) -> Vec<u8> {
        if self.ptr.is_null() {
            return Vec::new();
        }
        // SAFETY: the caller guarantees the parts come from a Vec<u8> of
        // this allocator.
        unsafe { Vec::from_raw_parts(self.ptr, self.len, self.capacity) }
    }

    /// The bytes, borrowed.
    ///
    /// # Safety
    ///
    /// `ptr` must point to `len` readable bytes (or be null), valid until
    /// the buffer is freed.
    pub unsafe fn as_bytes(&self) -> &[u8] {
        if self.ptr.is_null() || self.len == 0 {
            return &[];
        }
        // SAFETY: guaranteed by the caller.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// The start of every table of every 1.x minor: enough to check the
/// versions before anything else is read.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PluginHeader {
    /// [`ABI_MAJOR`] of the SDK the plugin was built with.
    pub abi_major: u32,
    /// [`ABI_MINOR`] of the SDK the plugin was built with.
    pub abi_minor: u32,
    /// `size_of` the table as the plugin built it: the host reads no field
    /// past it.
    pub struct_size: usize,
    /// The SDK's version ([`SDK_VERSION`]).
    pub sdk_version: StrRef,
    /// The compiler's version ([`RUSTC_VERSION`]).
    pub rustc_version: StrRef,
}

/// `describe(out)`: writes the plugin's [`PluginDescription`] as JSON to
/// `out`. Needs no instance.
///
/// [`PluginDescription`]: crate::PluginDescription
pub type DescribeFn = unsafe extern "C" fn(out: *mut Buffer) -> i32;

/// `create(config, config_len, instance, out)`: builds an instance from the
/// JSON `config` (an object; `{}` when the host has none) and writes it to
/// `*instance`. On an error, `out` holds the message.
pub type CreateFn = unsafe extern "C" fn(
    config: *const u8,
    config_len: usize,
    instance: *mut *mut c_void,
    out: *mut Buffer,
) -> i32;

/// `destroy(instance)`: releases an instance made by `create`.
pub type DestroyFn = unsafe extern "C" fn(instance: *mut c_void) -> i32;

/// `observe(instance, input, input_len, out)`: one event in (an
/// [`ObserveRequest`] as JSON), the detections out (a JSON array; an empty
/// buffer means none).
///
/// [`ObserveRequest`]: crate::ObserveRequest
pub type ObserveFn = unsafe extern "C" fn(
    instance: *mut c_void,
    input: *const u8,
    input_len: usize,
    out: *mut Buffer,
) -> i32;

/// `free_buffer(buffer)`: releases a buffer the plugin filled.
pub type FreeBufferFn = unsafe extern "C" fn(buffer: Buffer);

/// `reset_task(instance, task, task_len, out)` (since 1.1): forget the task
/// (UTF-8) on `completed` and `human`.
pub type ResetTaskFn = unsafe extern "C" fn(
    instance: *mut c_void,
    task: *const u8,
    task_len: usize,
    out: *mut Buffer,
) -> i32;

/// `export_task(instance, task, task_len, out)` (since 1.2): writes the
/// task's state to `out` as JSON, for a durable store to keep with the
/// task; an empty buffer or `null` means nothing to keep. The host asks
/// after every event of the task when its store is durable.
pub type ExportTaskFn = unsafe extern "C" fn(
    instance: *mut c_void,
    task: *const u8,
    task_len: usize,
    out: *mut Buffer,
) -> i32;

/// `import_task(instance, task, task_len, state, state_len, out)` (since
/// 1.2): puts back a task's state (JSON, as `export_task` wrote it, maybe
/// by another instance or an older version of the plugin) when the host
/// reloads the task from its store. A state it cannot read is an error:
/// `out` holds the message, as for `observe`.
pub type ImportTaskFn = unsafe extern "C" fn(
    instance: *mut c_void,
    task: *const u8,
    task_len: usize,
    state: *const u8,
    state_len: usize,
    out: *mut Buffer,
) -> i32;

/// `loopguard_plugin_entry_v1()`: the table, static in the plugin.
pub type EntryFn = unsafe extern "C" fn() -> *const PluginTable;

/// The table the entry symbol returns. Append-only: see the [module
/// documentation](self). Function slots are `Option`s so that a table
/// written by hand with a null slot is refused rather than called.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PluginTable {
    /// Versions and sizes, read first.
    pub header: PluginHeader,
    /// 1.0: the plugin's name, version and kinds.
    pub describe: Option<DescribeFn>,
    /// 1.0: a new instance from a config.
    pub create: Option<CreateFn>,
    /// 1.0: releases an instance.
    pub destroy: Option<DestroyFn>,
    /// 1.0: one event in, detections out.
    pub observe: Option<ObserveFn>,
    /// 1.0: releases a buffer the plugin filled.
    pub free_buffer: Option<FreeBufferFn>,
    /// 1.1: a task was reset.
    pub reset_task: Option<ResetTaskFn>,
    /// 1.2: a task's state out, for a durable store (null: none kept).
    pub export_task: Option<ExportTaskFn>,
    /// 1.2: a task's state back in, from a durable store (null: none
    /// kept).
    pub import_task: Option<ImportTaskFn>,
}

// SAFETY: the table is immutable, and the strings it points to are static.
unsafe impl Sync for PluginTable {}
// SAFETY: as above.
unsafe impl Send for PluginTable {}

/// Bytes of a 1.0 table: every field before `reset_task`.
pub const TABLE_SIZE_V1_0: usize = std::mem::offset_of!(PluginTable, reset_task);

/// Bytes of a 1.1 table: every field before `export_task`.
pub const TABLE_SIZE_V1_1: usize = std::mem::offset_of!(PluginTable, export_task);

/// Bytes of a 1.2 table.
pub const TABLE_SIZE_V1_2: usize = std::mem::size_of::<PluginTable>();

/// Bytes of a 1.3 table: the 1.2 table (1.3 adds no slot).
pub const TABLE_SIZE_V1_3: usize = std::mem::size_of::<PluginTable>();

/// Bytes of a 1.4 table: the 1.2 table (1.4 adds no slot).
pub const TABLE_SIZE_V1_4: usize = std::mem::size_of::<PluginTable>();

/// The smallest `struct_size` a table of `minor` may have (`None` for a
/// minor this SDK does not know).
pub const fn table_size_for_minor(minor: u32) -> Option<usize> {
    match minor {
        0 => Some(TABLE_SIZE_V1_0),
        1 => Some(TABLE_SIZE_V1_1),
        2 => Some(TABLE_SIZE_V1_2),
        3 => Some(TABLE_SIZE_V1_3),
        4 => Some(TABLE_SIZE_V1_4),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_is_the_documented_one() {
        use std::mem::offset_of;
        let word = std::mem::size_of::<usize>();
        assert_eq!(offset_of!(PluginHeader, abi_major), 0);
        assert_eq!(offset_of!(PluginHeader, abi_minor), 4);
        assert_eq!(offset_of!(PluginHeader, struct_size), 8);
        assert_eq!(offset_of!(PluginHeader, sdk_version), 8 + word);
        assert_eq!(offset_of!(PluginTable, describe), 8 + 5 * word);
        assert_eq!(offset_of!(PluginTable, free_buffer), 8 + 9 * word);
        assert_eq!(TABLE_SIZE_V1_0, 8 + 10 * word);
        assert_eq!(TABLE_SIZE_V1_1, TABLE_SIZE_V1_0 + word);
        assert_eq!(offset_of!(PluginTable, reset_task), 8 + 10 * word);
        assert_eq!(offset_of!(PluginTable, export_task), 8 + 11 * word);
        assert_eq!(offset_of!(PluginTable, import_task), 8 + 12 * word);
        assert_eq!(TABLE_SIZE_V1_2, TABLE_SIZE_V1_1 + 2 * word);
        assert_eq!(TABLE_SIZE_V1_3, TABLE_SIZE_V1_2, "1.3 adds no slot");
        assert_eq!(TABLE_SIZE_V1_4, TABLE_SIZE_V1_3, "1.4 adds no slot");
        assert_eq!(ABI_MINOR, 4);
        assert_eq!(table_size_for_minor(0), Some(TABLE_SIZE_V1_0));
        assert_eq!(table_size_for_minor(1), Some(TABLE_SIZE_V1_1));
        assert_eq!(table_size_for_minor(2), Some(TABLE_SIZE_V1_2));
        assert_eq!(table_size_for_minor(3), Some(TABLE_SIZE_V1_3));
        assert_eq!(table_size_for_minor(ABI_MINOR), Some(TABLE_SIZE_V1_4));
        assert_eq!(table_size_for_minor(ABI_MINOR + 1), None);
        for minor in ABI_OLDEST_SUPPORTED_MINOR..=ABI_MINOR {
            assert!(table_size_for_minor(minor).is_some(), "minor {minor}");
        }
        assert_eq!(ENTRY_SYMBOL, format!("{ENTRY_SYMBOL_PREFIX}{ABI_MAJOR}"));
    }

    #[test]
    fn buffers_round_trip_and_empty_ones_are_null() {
        let buffer = Buffer::from_vec(b"hello".to_vec());
        // SAFETY: made by from_vec just above.
        assert_eq!(unsafe { buffer.as_bytes() }, b"hello");
        // SAFETY: made by from_vec in this library, used once.
        assert_eq!(unsafe { buffer.into_vec() }, b"hello");
        let empty = Buffer::from_vec(Vec::new());
        assert!(empty.ptr.is_null());
        // SAFETY: the empty buffer is null.
        assert!(unsafe { empty.into_vec() }.is_empty());
        assert!(!RUSTC_VERSION.is_empty());
    }
}
