//! The loopguard engine an orchestrator embeds.
//!
//! [`LoopGuard`] keeps the state of every live task, runs the built-in
//! detectors (and any [`ExtensionDetector`]) over each event, and combines
//! all detections of an event into one [`Decision`](loopguard_core_types::Decision):
//! the strongest action wins and every detection is kept as evidence. Loop
//! counts, the human gate (an escalated or paused task answers `escalate`
//! until a `human` event), resets on `completed` and `human`, and the cycle
//! log ([`CycleEpisode`], one per detection episode, kept by a [`Store`])
//! are handled here. Detections are logged with `tracing`: INFO for a
//! detection, WARN for an intervention, ERROR for an escalation.
//!
//! A store's [`Durability`] decides what outlives the process. With a
//! durable store (SQLite, PostgreSQL, or [`MemoryStore::durable`]) every
//! event's [`TaskCommit`] (the task's counters and whole detector state,
//! its [`AuditEntry`] rows and [`PivotRecord`]s, its episodes) commits
//! before the decision is returned, so an engine started on the same store
//! continues every task exactly where the last one stopped; with a shared
//! store (PostgreSQL) each event runs under its task's lock, so several
//! engines can serve one task.
//!
//! With the default `plugins` feature, [`load_plugins`] loads detector
//! plugins (`cdylib`s built against `loopguard-plugin-api`) as extension
//! detectors: called off the reactor, their panics contained, disabled
//! after `plugin_host.max_faults` faults.
//!
//! ```
//! use loopguard_core_types::{Action, Event};
//! use loopguard_config::Config;
//! use loopguard_host::LoopGuard;
//!
//! # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
//! let guard = LoopGuard::new(Config::default())?;
//! let hop = |from: &str, to: &str| {
//!     Event::from_json(&format!(r#"{{"type":"handoff","task":"T","from":"{from}","to":"{to}"}}"#))
//! };
//! let mut decision = guard.observe(hop("planner", "coder")?).await;
//! for (from, to) in [("coder", "planner"), ("planner", "coder"), ("coder", "planner")] {
//!     decision = guard.observe(hop(from, to)?).await;
//! }
//! assert_eq!(decision.action, Action::BreakCycle);
//! assert_eq!(decision.detections[0].kind, "agent_pair");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub use engine::{LoopGuard, LoopGuardBuilder, STATE_FORMAT};
pub use error::HostError;
pub use extension::{
    ArgumentMatcher, ExchangeMatcher, ExchangeRef, ExtensionDetector, ExtensionError, ToolCallRef,
    TopicAssigner, id_seed, topic_text,
};
#[cfg(feature = "plugins")]
pub use plugins::{
    AbiVersion, Plugin, PluginDetector, PluginError, PluginFault, PluginHost, PluginInfo,
    PluginInstance, load_plugins, run_worker,
};
pub use replay::{
    Observed, ReplayItem, ReportBuilder, replay, replay_each, replay_each_from,
    replay_observed_from, store_report,
};
pub use spend::{EventSpend, PRICED_EVENTS_KEPT, SPEND_LOOP_KINDS, SavedSpend, saved_spend_detail};
pub use store::{
    AuditEntry, AuditRecord, CycleEpisode, DetectionSummary, Durability, KeptOpinion, MemoryStore,
    PivotRecord, Resolution, RunRecord, Store, StoreError, StoreHealth, StoredLineError,
    TaskCommit, TaskLock, TaskRecord, TaskSnapshot, WriteHealth, summarize_detections,
};

mod backlog;
mod engine;
mod error;
mod extension;
mod persistence;
#[cfg(feature = "plugins")]
mod plugins;
pub mod policy;
mod replay;
mod spend;
mod store;
#[cfg(test)]
mod test_support;
mod writer;

/// The repository README's Rust examples, compiled and run as doctests
/// (`cargo test -p loopguard-host --doc`). Only a doctest build reads the
/// README, which is outside this crate: a build of the packaged crate
/// never does.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
