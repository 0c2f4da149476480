//! The loopguard trace contract, version 1, as Rust types.
//!
//! Everything in loopguard speaks this vocabulary: the engine, the plugins,
//! the command line and the sidecar. Events come in as JSON Lines
//! ([`Event::from_json`]); every event gets a [`Decision`] back, carrying an
//! [`Action`] (mildest to strongest) and the [`Detection`]s that justify it;
//! a whole trace gives a [`Report`]. [`LimitsConfig`] bounds what a line may
//! hold. loopguard's other settings are the application's, in
//! `loopguard-config`: the plugin SDK re-exports this crate, and a setting
//! is no part of what plugins build against.
//!
//! ```
//! use loopguard_core_types::{Action, Event, EventKind};
//!
//! let event = Event::from_json(
//!     r#"{"type":"failure","task":"T1","agent":"coder","error":"E0308 mismatched types"}"#,
//! )?;
//! assert!(matches!(event.kind, EventKind::Failure { .. }));
//! assert!(Action::Escalate > Action::Pivot);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub use decision::{Action, Decision, Detection, FailureSignature, Severity, TaskStatus, kinds};
pub use event::{EVENT_TYPES, Event, EventError, EventKind, FailureView, ProgressSnapshot};
pub use limits::{EMBEDDING_INPUT_BYTES, LimitsConfig};
pub use report::{LineError, Report, TaskReport};
pub use spend::{BudgetCrossing, LoopSpend, Spend, SpendTotals, usd};
pub use text::truncate_to_char_boundary;
pub use time::Timestamp;
pub use usage::Usage;

mod decision;
mod event;
mod limits;
mod report;
mod spend;
mod text;
mod time;
mod usage;

/// The version of the trace format these types implement.
pub const TRACE_FORMAT_VERSION: u32 = 1;
