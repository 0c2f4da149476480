//! Integration tests of loopguard-tune, one binary.
//!
//! Every test but those in `model` runs on toy embedders whose cosines are
//! known exactly, so the expected counts are computed by hand. The `model`
//! tests run the real pinned model: the first run fetches it through
//! `ModelFiles::ensure_with`, later runs find it in `models/cache/`.

mod cache;
mod common;
mod model;
mod pairs;
mod split;
mod sweep;
mod traces;
