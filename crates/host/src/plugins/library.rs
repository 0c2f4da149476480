//! The loading layer: opening a plugin library, finding its entry symbol,
//! reading and checking its ABI table, refusing versions this host does
//! not load, and asking the plugin to describe itself.
//!
//! This is one of the two plugin modules with `unsafe` code (the other is
//! [`call`](super::call), which calls the functions found here): opening a
//! library runs its code, and the table is read through raw pointers
//! within the `struct_size` the plugin declares. A library, once opened, is
//! never closed.

use std::ffi::c_void;
use std::fmt;
use std::path::{Path, PathBuf};

use libloading::Library;
use loopguard_core_types::kinds;
use loopguard_plugin_api::abi::{self, PluginHeader, PluginTable};
use loopguard_plugin_api::wire::PluginDescription;
use serde::Serialize;

use super::call::Functions;
use super::error::PluginError;
use super::instance::PluginInstance;

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

/// A loaded plugin library. The library stays loaded for the life of the
/// process.
#[derive(Debug, Clone)]
pub struct Plugin {
    pub(super) info: PluginInfo,
    pub(super) functions: Functions,
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
        let functions =
            unsafe { read_functions(table, &header) }.map_err(|reason| invalid(path, &reason))?;
        let description = functions
            .describe(|bytes| {
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
        let raw = self
            .functions
            .create(&self.info.name, &config)
            .map_err(|fault| PluginError::Start {
                path: self.info.path.clone(),
                name: self.info.name.clone(),
                fault,
            })?;
        Ok(PluginInstance::new(raw, &self.info))
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
) -> Result<Functions, String> {
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
    let functions = Functions {
        describe: required(
            unsafe { slot(base, size, offset_of!(PluginTable, describe)) },
            "describe",
        )?,
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
    Ok(functions)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_refused_by_major_newer_minor_and_older_minor() {
        let v = |major, minor| AbiVersion { major, minor };
        assert_eq!(abi_refusal(AbiVersion::HOST), None);
        assert_eq!(abi_refusal(AbiVersion::OLDEST), None);
        // Every minor before this host's still loads (1.3 before events
        // carried their usage, 1.4).
        for minor in abi::ABI_OLDEST_SUPPORTED_MINOR..abi::ABI_MINOR {
            assert_eq!(abi_refusal(v(abi::ABI_MAJOR, minor)), None, "1.{minor}");
        }
        assert!(abi_refusal(v(abi::ABI_MAJOR + 1, 0)).is_some_and(|a| a.contains("major")));
        assert!(abi_refusal(v(0, 9)).is_some_and(|a| a.contains("major")));
        assert!(
            abi_refusal(v(abi::ABI_MAJOR, abi::ABI_MINOR + 1)).is_some_and(|a| a.contains("newer"))
        );
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
        let functions = unsafe { read_functions(&table, &table.header) }.expect("reads");
        assert!(functions.reset_task.is_some());
        assert!(functions.export_task.is_none() && functions.import_task.is_none());
        // A 1.2 table has both.
        let table = export::table::<Monologue>(1, 2);
        // SAFETY: as above.
        let functions = unsafe { read_functions(&table, &table.header) }.expect("reads");
        assert!(functions.export_task.is_some() && functions.import_task.is_some());
        // A 1.3 table is a 1.2 table (1.3 adds no slot).
        let table = export::table::<Monologue>(1, 3);
        // SAFETY: as above.
        let functions = unsafe { read_functions(&table, &table.header) }.expect("reads");
        assert!(functions.reset_task.is_some() && functions.supports_state());
        // A 1.2 table as small as a 1.1 one is not a 1.2 table.
        let mut short = export::table::<Monologue>(1, 2);
        short.header.struct_size = abi::TABLE_SIZE_V1_1;
        // SAFETY: as above.
        let err = unsafe { read_functions(&short, &short.header) }.expect_err("refused");
        assert!(err.contains("ABI 1.2 tables have at least"), "{err}");
    }
}
