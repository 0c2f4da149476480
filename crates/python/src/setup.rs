//! Building a guard's engine the way `loopguard replay` builds it: the
//! config (file, dict or defaults) with `semantic` applied and validated,
//! the embedding model (provisioned by `loopguard-semantic`: the same
//! pinned files, `LOOPGUARD_MODEL_DIR`, fetched with pip on first use,
//! checksummed), the semantic detectors, the plugins and the progress
//! evaluator with its LLM judge.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use loopguard_config::Config;
use loopguard_host::{LoopGuard, Store, load_plugins};
use loopguard_progress_evaluator::{OpenAiJudge, ProgressEvaluator};
use loopguard_semantic::{
    FetchPlan, MPNET_TUNED_MODEL_ID, ModelFiles, MpnetBase, SameRequestJudge, SemanticDetectors,
    SemanticError, SemanticLimits, StartError,
};
use pyo3::prelude::*;

use crate::error::{GuardError, chain};

/// Where a guard's settings come from.
#[derive(Debug)]
pub(crate) enum ConfigSource {
    /// The defaults.
    Defaults,
    /// A TOML file.
    File(PathBuf),
    /// The TOML document a dict gave, as TOML text.
    Toml(String),
}

/// The settings `source` gives, with `semantic = false` applied (it turns
/// the model off; `true` leaves the config's choice), paths in a file made
/// relative to its directory, validated; its deprecated keys are named on
/// stderr.
pub(crate) fn config(source: &ConfigSource, semantic: bool) -> Result<Config, GuardError> {
    let config = read_config(source, semantic)?;
    for line in config.deprecations() {
        eprintln!("loopguard: {line}");
    }
    Ok(config)
}

/// [`config`] without a word on stderr.
fn read_config(source: &ConfigSource, semantic: bool) -> Result<Config, GuardError> {
    let mut config = match source {
        ConfigSource::Defaults => Config::default(),
        ConfigSource::File(path) => {
            let config = Config::from_file(path).map_err(|err| GuardError::Config(chain(&err)))?;
            relative_to(config, path)
        }
        ConfigSource::Toml(text) => Config::from_toml_str(text)
            .map_err(|err| GuardError::Config(format!("the config dict: {}", chain(&err))))?,
    };
    if !semantic {
        config.semantic.enabled = false;
    }
    config
        .validate()
        .map_err(|err| GuardError::Config(format!("the config is not valid: {}", chain(&err))))?;
    Ok(config)
}

/// `config` with its plugin paths and judge weights made relative to the
/// config file's directory, as the command line reads them.
fn relative_to(mut config: Config, file: &Path) -> Config {
    if let Some(dir) = file.parent() {
        for plugin in &mut config.plugins {
            if plugin.path.is_relative() {
                plugin.path = dir.join(&plugin.path);
            }
        }
        if let Some(weights) = &mut config.similarity.judge_weights
            && weights.is_relative()
        {
            *weights = dir.join(&*weights);
        }
    }
    config
}

/// The `loopguard-plugin-worker` script this package installs (in the
/// interpreter's scripts folder, `sysconfig.get_path("scripts")`), which
/// runs a plugin in a worker process of its own (process isolation, the
/// default), when it is there and neither `LOOPGUARD_PLUGIN_WORKER` nor the
/// config names another: a guard's plugins then run isolated without a
/// setting.
pub(crate) fn installed_worker(py: Python<'_>) -> Option<PathBuf> {
    if std::env::var_os("LOOPGUARD_PLUGIN_WORKER").is_some_and(|value| !value.is_empty()) {
        return None;
    }
    let scripts: PathBuf = py
        .import("sysconfig")
        .and_then(|sysconfig| sysconfig.call_method1("get_path", ("scripts",)))
        .and_then(|path| path.extract())
        .ok()?;
    let worker = scripts.join(format!(
        "loopguard-plugin-worker{}",
        std::env::consts::EXE_SUFFIX
    ));
    worker.is_file().then_some(worker)
}

/// The engine over `store`: the model started when `config` enables
/// semantic matching (a failure is an error, never a silent fallback),
/// the plugins loaded, the progress evaluator added.
pub(crate) fn engine(config: Config, store: Arc<dyn Store>) -> Result<LoopGuard, GuardError> {
    let judge = SameRequestJudge::from_config_and_llm(&config.similarity, &config.llm)
        .map_err(|err| {
            GuardError::Start(format!(
                "the same-request judge cannot start: {}",
                chain(&err)
            ))
        })?
        // A durable store keeps the second opinion's answers too.
        .with_answers_kept_in(Arc::clone(&store));
    let detectors = if config.semantic.enabled {
        let (service, judge) =
            loopguard_semantic::load_service_and_tuned_encoder(&config, judge, announce_fetch)
                .map_err(|err| match err {
                    StartError::Service(err) => GuardError::Model(format!(
                        "semantic matching cannot start (pass semantic=False, or set \
                         semantic.enabled = false, to go without it): {}",
                        chain(&err)
                    )),
                    StartError::TunedEncoder(err) => GuardError::Model(format!(
                        "the same-request judge's tuned encoder cannot start: {}",
                        chain(&err)
                    )),
                })?;
        SemanticDetectors::with_judge(&config, Some(service), SemanticLimits::default(), judge)
    } else {
        SemanticDetectors::exact(&config)
    };
    let mut builder = detectors.install(LoopGuard::builder(config.clone()).store(store));
    for plugin in load_plugins(&config).map_err(|err| GuardError::Start(chain(&err)))? {
        builder = builder.extension(plugin);
    }
    let mut evaluator = ProgressEvaluator::new(&config);
    if let Some(judge) =
        OpenAiJudge::from_config(&config.llm).map_err(|err| GuardError::Config(chain(&err)))?
    {
        evaluator = evaluator.with_judge(Arc::new(judge));
    }
    builder
        .extension(Arc::new(evaluator))
        .build()
        .map_err(|err| GuardError::Config(format!("the config is not valid: {}", chain(&err))))
}

/// `loopguard.fetch_model()`: the pinned model files a guard over `source`
/// would use, fetched when missing and verified, in the directory `dir`
/// when given, else where the config's lookup order finds it; also the
/// larger tuned encoder's base and update when the config's judge needs
/// it. Returns
/// the model directory.
pub(crate) fn fetch_model(
    source: &ConfigSource,
    dir: Option<&Path>,
) -> Result<PathBuf, GuardError> {
    let config = read_config(source, true)?;
    let judge = SameRequestJudge::from_config(&config.similarity).map_err(|err| {
        GuardError::Config(format!(
            "the same-request judge's settings: {}",
            chain(&err)
        ))
    })?;
    let mut options = loopguard_semantic::provision_options(&config.semantic);
    if let Some(dir) = dir {
        options = options.model_dir(dir);
    }
    let resolved = options.resolve();
    let model_error = |err: SemanticError| {
        GuardError::Model(format!(
            "cannot provision the embedding model: {}",
            chain(&err)
        ))
    };
    let files =
        ModelFiles::ensure_resolved_notify(&resolved, announce_fetch).map_err(model_error)?;
    if judge.needs_tuned_encoder() {
        if judge.tuned_encoder_needed() == Some(MPNET_TUNED_MODEL_ID) {
            MpnetBase::ensure_resolved_notify(&resolved, announce_fetch).map_err(model_error)?;
        } else {
            files.tuned_model().map_err(model_error)?;
        }
    }
    Ok(files.dir().to_path_buf())
}

/// Says on stderr that the model is being fetched (once), and where.
fn announce_fetch(plan: &FetchPlan) {
    eprintln!(
        "loopguard: fetching {} with pip ({} file{}, {:.1} MB, once) into {} ({}) ...",
        plan.what,
        plan.files.len(),
        if plan.files.len() == 1 { "" } else { "s" },
        plan.bytes as f64 / 1e6,
        plan.dir.display(),
        plan.rule
    );
}
