//! The progress evaluator's integration tests, one binary with a module
//! per area (faster to build on a small machine than a binary each).

#[path = "cases/golden_state.rs"]
/// Saved state of format 1, checked in, continues like one whole run.
mod golden_state;
#[path = "cases/judge_http.rs"]
/// The LLM judge against a real HTTP server on 127.0.0.1.
mod judge_http;
#[path = "cases/restart.rs"]
/// The evaluator's per-task state across a restart.
mod restart;
#[path = "cases/support.rs"]
/// Helpers shared by the modules above.
mod support;
