//! Write a loopguard detector as a plugin: a small safe trait, one macro,
//! and `cargo build`. This crate is all a plugin depends on; it is kept
//! stable so that plugins need not follow every loopguard release.
//!
//! A plugin is a `cdylib` that loopguard loads at start-up. It sees every
//! event of every task (the trace format's [`Event`]s, each with its input
//! line), keeps its own per-task state, and
//! answers with [`Detection`]s of its own kinds. Its detections join the
//! built-in ones: the strongest action wins, and the report lists them
//! under the plugin's kinds. A plugin that panics does not take loopguard
//! down: the panic is reported on that event's decision, and after
//! `plugin_host.max_faults` faults the plugin is disabled for the rest of
//! the run (at once if a call hangs past `plugin_host.call_timeout_ms`).
//! With `plugin_host.isolation = "process"`, the plugin runs in a worker
//! process of its own, and a segfault, an abort or an exit in it is such a
//! fault too: the worker is restarted with the task states loopguard kept
//! (from [`Detector::export_task`]), and the plugin goes on. Same library,
//! no rebuild; write logs to stderr, not stdout (a worker's stdout is its
//! pipe to loopguard).
//!
//! # From `cargo new` to a loaded plugin
//!
//! **1.** A library crate (outside the loopguard checkout, or listed in its
//! workspace):
//!
//! ```text
//! cargo new --lib apologies && cd apologies
//! ```
//!
//! **2.** In its `Cargo.toml`, a `cdylib` (the loadable library; `rlib`
//! too, so that `cargo test` runs its unit tests) and this crate:
//!
//! ```toml
//! [lib]
//! crate-type = ["cdylib", "rlib"]
//!
//! [dependencies]
//! loopguard-plugin-api = { path = "../loopguard/crates/plugin-api" }
//! ```
//!
//! **3.** In `src/lib.rs`, implement [`Detector`] and export it with
//! [`export_detector!`]. This one reports a task whose agents keep
//! apologizing instead of making progress:
//!
//! ```
//! use std::collections::HashMap;
//!
//! use loopguard_plugin_api::serde_json::{self, Value};
//! use loopguard_plugin_api::{Action, Detection, Detector, Event, EventKind, Severity};
//!
//! /// Turns that apologize, per task: the input lines.
//! pub struct Apologies {
//!     limit: usize,
//!     lines: HashMap<String, Vec<u64>>,
//! }
//!
//! impl Detector for Apologies {
//!     const NAME: &'static str = "apologies";
//!     const VERSION: &'static str = env!("CARGO_PKG_VERSION");
//!     const KINDS: &'static [&'static str] = &["apology_loop"];
//!     const DESCRIPTION: &'static str = "agents apologizing instead of progressing";
//!
//!     // The `config` table of this plugin's `[[plugins]]` entry, as JSON
//!     // (`{}` when there is none). An error stops loopguard at start-up.
//!     fn new(config: Value) -> Result<Self, String> {
//!         let limit = match config.get("limit") {
//!             None => 3,
//!             Some(limit) => limit
//!                 .as_u64()
//!                 .and_then(|n| usize::try_from(n).ok())
//!                 .filter(|n| *n >= 1)
//!                 .ok_or("`limit` must be a whole number of at least 1")?,
//!         };
//!         Ok(Apologies { limit, lines: HashMap::new() })
//!     }
//!
//!     fn observe(&mut self, line: u64, event: &Event) -> Vec<Detection> {
//!         let EventKind::Turn { agent, output, .. } = &event.kind else {
//!             return Vec::new();
//!         };
//!         if !output.to_lowercase().contains("apologize") {
//!             return Vec::new();
//!         }
//!         let lines = self.lines.entry(event.task.clone()).or_default();
//!         lines.push(line);
//!         if lines.len() < self.limit {
//!             return Vec::new();
//!         }
//!         vec![Detection::new(
//!             Self::NAME,
//!             "apology_loop",
//!             Severity::Medium,
//!             Action::InjectContext,
//!             lines.clone(),
//!             format!("{} apologies in this task", lines.len()),
//!         )
//!         // The agents it is about (trace format 1.2), so that a dashboard
//!         // need not read them out of the reason.
//!         .with_agents([agent.as_str()])]
//!     }
//!
//!     // `completed` and `human` reset a task: forget it.
//!     fn reset_task(&mut self, task: &str) {
//!         self.lines.remove(task);
//!     }
//!
//!     // With a durable store, loopguard keeps each task's state (optional:
//!     // without these two a task starts afresh after a restart).
//!     fn export_task(&self, task: &str) -> Option<Value> {
//!         let lines = self.lines.get(task)?;
//!         Some(serde_json::json!({ "format": 1, "lines": lines }))
//!     }
//!
//!     fn import_task(&mut self, task: &str, state: Value) -> Result<(), String> {
//!         let lines = state
//!             .get("format")
//!             .filter(|format| *format == 1)
//!             .and(state.get("lines"))
//!             .and_then(|lines| serde_json::from_value(lines.clone()).ok())
//!             .ok_or("apologies: unreadable task state")?;
//!         self.lines.insert(task.to_owned(), lines);
//!         Ok(())
//!     }
//! }
//!
//! loopguard_plugin_api::export_detector!(Apologies);
//!
//! // Unit tests can drive the detector through the very ABI loopguard
//! // uses (JSON in and out, panics caught):
//! use loopguard_plugin_api::testing::Harness;
//! let mut plugin = Harness::<Apologies>::new(r#"{"limit": 2}"#)?;
//! let sorry = Event::from_json(
//!     r#"{"type":"turn","task":"T1","agent":"coder","output":"I apologize.","success":false}"#,
//! )?;
//! assert!(plugin.observe(1, &sorry)?.is_empty());
//! let found = plugin.observe(2, &sorry)?;
//! assert_eq!(found[0].kind, "apology_loop");
//! assert_eq!(found[0].evidence, [1, 2]);
//! assert!(Harness::<Apologies>::new(r#"{"limit": 0}"#).is_err());
//! // A task's state survives a new instance (a restart):
//! let state = plugin.export_task("T1")?.expect("a state");
//! let mut restarted = Harness::<Apologies>::new(r#"{"limit": 2}"#)?;
//! restarted.import_task("T1", &state)?;
//! assert_eq!(restarted.observe(3, &sorry)?[0].evidence, [1, 2, 3]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! **4.** Build it, and hand it to loopguard:
//!
//! ```text
//! cargo build --release
//! loopguard plugins target/release/libapologies.so          # name, version, ABI, kinds
//! loopguard replay --plugin target/release/libapologies.so trace.jsonl
//! ```
//!
//! (`.dylib` on macOS, `.dll` on Windows.) Detections of `apology_loop`
//! appear in the decisions and the report like any other. To give the
//! plugin a config, name it in loopguard's TOML instead of `--plugin`
//! (a relative `path` is relative to the config file):
//!
//! ```toml
//! [[plugins]]
//! path = "target/release/libapologies.so"
//! config = { limit = 2 }
//!
//! [plugin_host]
//! max_faults = 3          # faults (panics, errors) before a plugin is disabled
//! max_concurrency = 4     # plugin calls running at once
//! call_timeout_ms = 5000  # a call that takes longer is a fault
//! isolation = "process"   # the default: each plugin in a worker process
//!                         # (a crash is a fault); "in-process" is faster
//! ```
//!
//! # What an event carries
//!
//! Each [`Event`] is a trace-format line: its type's own fields in
//! [`Event::kind`] (an [`EventKind`]), the task, the time and the id, and
//! any other field of the line in `extra`. Since ABI 1.4, an event says
//! what its step spent when the orchestrator or the importer knew it
//! (trace format 1.2): [`Event::usage`] reads its `usage` as a [`Usage`]
//! (input and output tokens, the cost in US dollars, the model; each
//! optional), `None` for an event without. loopguard checks `usage` on
//! every input line, so what a plugin is handed is well formed:
//!
//! ```
//! use loopguard_plugin_api::{Event, Usage};
//!
//! let event = Event::from_json(
//!     r#"{"type":"tool_call","task":"T1","agent":"coder","tool":"pytest",
//!         "usage":{"input_tokens":1800,"output_tokens":95,"model":"gpt-4o"}}"#,
//! )?;
//! let usage: Option<Usage> = event.usage()?;
//! let tokens = usage.map_or(0, |u| u.input_tokens.unwrap_or(0) + u.output_tokens.unwrap_or(0));
//! assert_eq!(tokens, 1895);
//! # Ok::<(), loopguard_plugin_api::EventError>(())
//! ```
//!
//! A plugin built with an SDK older than 1.4 is sent the same events and
//! keeps loading; it sees `usage` only as an unknown field of `extra`.
//!
//! # Rules for a detector
//!
//! - Report only your own [`Detector::KINDS`]; a built-in kind (such as
//!   `exact_failure`) is refused at load, and a detection of an undeclared
//!   kind is a fault.
//! - `evidence` lists input lines, oldest first, this event's line last.
//! - Be quick and synchronous: loopguard calls plugins off its async
//!   reactor, a bounded number at once, one call per instance at a time.
//! - Keep per-task state small and versioned if you export it
//!   ([`Detector::export_task`]): a durable store writes it with every
//!   event, and a restart reads it back with [`Detector::import_task`].
//! - Expect event types newer than your plugin: the SDK skips a type it
//!   does not know (no detections, never an error), and a newer SDK may
//!   hand you new [`EventKind`] variants (it is `#[non_exhaustive]`), so
//!   end a `match` with `_ => Vec::new()`.
//! - Build with the default `panic = "unwind"`: with `panic = "abort"` a
//!   panic cannot be caught and ends the process.
//!
//! # The ABI
//!
//! [`abi`] documents the table the entry symbol returns, the append-only
//! rule, and who frees what; [`wire`] the JSON that crosses. Both are the
//! SDK's business: an author needs only [`Detector`] and
//! [`export_detector!`].
#![deny(missing_docs)]

pub use abi::{
    ABI_MAJOR, ABI_MINOR, ABI_OLDEST_SUPPORTED_MINOR, ENTRY_SYMBOL, PluginHeader, PluginTable,
    RUSTC_VERSION, SDK_VERSION,
};
pub use loopguard_core_types::{
    Action, Detection, Event, EventError, EventKind, FailureSignature, ProgressSnapshot, Severity,
    TRACE_FORMAT_VERSION, Timestamp, Usage,
};
pub use wire::{ObserveRequest, PluginDescription};
pub use {serde, serde_json};

pub mod abi;
pub mod testing;
pub mod wire;

#[doc(hidden)]
pub mod export;

/// A loop detector that loopguard loads from a plugin.
///
/// One instance serves every task: keep per-task state keyed by
/// `event.task`. loopguard calls an instance from one thread at a time, so
/// `&mut self` needs no locking (and the type need only be `Send`).
pub trait Detector: Sized + Send + 'static {
    /// The plugin's name: the `detector` of its detections, and how errors
    /// and logs name it.
    const NAME: &'static str;
    /// The plugin's version (usually `env!("CARGO_PKG_VERSION")`).
    const VERSION: &'static str;
    /// The detection kinds it reports: its own names, never a built-in kind.
    const KINDS: &'static [&'static str];
    /// One sentence on what it catches, shown by `loopguard plugins`.
    const DESCRIPTION: &'static str = "";

    /// Builds the detector from its config: the `config` table of its
    /// `[[plugins]]` entry in loopguard's TOML, as JSON (`{}` without one).
    /// An error is shown at start-up, naming the plugin.
    fn new(config: serde_json::Value) -> Result<Self, String>;

    /// Looks at one event from input line `line` (the engine's sequence
    /// number when streamed) and returns its detections, usually none.
    /// Each detection's `detector` is set to [`Detector::NAME`].
    ///
    /// Events of a type newer than this SDK (ABI 1.3) are not passed on:
    /// the SDK answers them with no detections, so a detector never sees
    /// [`EventKind::Unknown`].
    fn observe(&mut self, line: u64, event: &Event) -> Vec<Detection>;

    /// Forgets a task: called after the task's `completed` or `human`
    /// event was observed.
    fn reset_task(&mut self, task: &str) {
        let _ = task;
    }

    /// The task's state, for a durable store to keep with the task (ABI
    /// 1.2): asked after every event of the task when loopguard's store is
    /// durable (SQLite, PostgreSQL), so that after a restart
    /// [`Detector::import_task`] continues the task where it stopped.
    /// Version it (`{"format": 1, ...}`) and keep it bounded: it is written
    /// with every event. `None` (the default): nothing to keep, and after a
    /// restart the task starts afresh.
    fn export_task(&self, task: &str) -> Option<serde_json::Value> {
        let _ = task;
        None
    }

    /// Puts back a task's state that [`Detector::export_task`] gave
    /// (perhaps in another process, or an older version of the plugin),
    /// replacing whatever the instance holds for the task. Called when
    /// loopguard reloads the task from its store; a task with nothing
    /// stored is reset with [`Detector::reset_task`] instead. A state it
    /// cannot read is an error naming the plugin, reported on the event's
    /// decision. The default ignores the state.
    fn import_task(&mut self, task: &str, state: serde_json::Value) -> Result<(), String> {
        let _ = (task, state);
        Ok(())
    }
}

/// Exports a [`Detector`] as a loopguard plugin: defines the entry symbol
/// (`loopguard_plugin_entry_v1`) and its table, with every function wrapped
/// in `catch_unwind`. Use it once per library, at the crate's top level.
///
/// ```
/// # use loopguard_plugin_api::{Detection, Detector, Event};
/// struct Silent;
/// impl Detector for Silent {
///     const NAME: &'static str = "silent";
///     const VERSION: &'static str = "0.1.0";
///     const KINDS: &'static [&'static str] = &["never"];
///     fn new(_config: loopguard_plugin_api::serde_json::Value) -> Result<Self, String> {
///         Ok(Silent)
///     }
///     fn observe(&mut self, _line: u64, _event: &Event) -> Vec<Detection> {
///         Vec::new()
///     }
/// }
/// loopguard_plugin_api::export_detector!(Silent);
///
/// // What the host sees first:
/// // SAFETY: the entry returns a pointer to a static table.
/// let table = unsafe { &*loopguard_plugin_entry_v1() };
/// assert_eq!(table.header.abi_major, loopguard_plugin_api::ABI_MAJOR);
/// assert_eq!(table.header.abi_minor, loopguard_plugin_api::ABI_MINOR);
/// ```
#[macro_export]
macro_rules! export_detector {
    ($detector:ty) => {
        $crate::export_detector!(@abi $detector, $crate::ABI_MAJOR, $crate::ABI_MINOR);
    };
    // Test fixtures only: claim other ABI numbers.
    (@abi $detector:ty, $major:expr, $minor:expr) => {
        /// The loopguard plugin entry: the ABI table of this library.
        #[unsafe(no_mangle)]
        pub extern "C" fn loopguard_plugin_entry_v1() -> *const $crate::PluginTable {
            $crate::export::install_panic_hook();
            static TABLE: $crate::PluginTable = $crate::export::table::<$detector>($major, $minor);
            &TABLE
        }
    };
}
