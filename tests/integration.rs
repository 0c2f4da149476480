//! Integration tests of the `loopguard` binary: every test runs the built
//! command on a trace in `tests/traces/` (or on standard input) and checks
//! the JSON it prints against the trace format's rules (`docs/spec/`); the
//! exceptions are `docs`, `history` and `packaging`, which check the
//! repository's own files (`repo`): relative Markdown links resolve,
//! nothing cites a spec folder outside the repository, no product file
//! outside `research/` tells the history of the work, and no crate
//! compiles in a file from outside its directory.
//!
//! All of them compile into this one test binary (a faster build on a
//! 2-core machine); the modules group them by area.

#[path = "integration/repo.rs"]
mod repo;
#[path = "integration/support.rs"]
mod support;

#[path = "integration/bad_input.rs"]
mod bad_input;
#[path = "integration/commands.rs"]
mod commands;
#[path = "integration/cycles.rs"]
mod cycles;
#[path = "integration/docs.rs"]
mod docs;
#[path = "integration/durability.rs"]
mod durability;
#[path = "integration/exchanges.rs"]
mod exchanges;
#[path = "integration/failures.rs"]
mod failures;
#[path = "integration/heldout.rs"]
mod heldout;
#[path = "integration/history.rs"]
mod history;
#[path = "integration/hubs.rs"]
mod hubs;
#[path = "integration/import.rs"]
mod import;
#[path = "integration/installed.rs"]
mod installed;
#[path = "integration/isolation.rs"]
mod isolation;
#[path = "integration/limits.rs"]
mod limits;
#[path = "integration/packaging.rs"]
mod packaging;
#[path = "integration/phases.rs"]
mod phases;
#[path = "integration/plugins.rs"]
mod plugins;
#[path = "integration/progress.rs"]
mod progress;
#[path = "integration/repeated_output.rs"]
mod repeated_output;
#[path = "integration/restart.rs"]
mod restart;
#[path = "integration/semantic.rs"]
mod semantic;
#[path = "integration/serve.rs"]
mod serve;
#[path = "integration/store.rs"]
mod store;
#[path = "integration/tools.rs"]
mod tools;
#[path = "integration/tune.rs"]
mod tune;
#[path = "integration/tune_judge.rs"]
mod tune_judge;
#[path = "integration/tune_shipped.rs"]
mod tune_shipped;
