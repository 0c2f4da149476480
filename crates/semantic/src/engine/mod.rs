//! The detectors that use the model, ready for loopguard's engine (cargo
//! feature `engine`, on by default).
//!
//! Three parts, all made by [`SemanticDetectors`]:
//!
//! - [`CollaborationLoop`] (kind `collaboration_loop`, Decision 74): a
//!   `collaboration` request more similar than the request threshold to an
//!   earlier request of the same task, from the same agent to the same
//!   agent. Loop-feeding: the engine counts one loop per detection, and the
//!   3rd loop takes the task to the human gate.
//! - [`RepeatedQuery`] (kind `repeated_query`): a `handoff` whose content
//!   repeats an earlier handoff's to the same agent with no new information
//!   (no progress) in between: `inject_context`.
//! - [`SemanticTopics`], the [`TopicAssigner`] behind `topic_cycle`: texts
//!   on the same subject share a topic even when worded differently.
//!
//! "More similar than the threshold" means the cosine of the two texts'
//! embeddings is strictly above it: `similarity.request_threshold` and
//! `similarity.topic_threshold` (default 0.85), or the event's task type's
//! own (`[similarity.task_types.NAME]`, chosen by the event's `task_type`
//! field). Every detection reports the `similarity`, the `threshold` and
//! the `matched_line`, and its reason names the config key the threshold
//! came from.
//!
//! **Semantic matching off** (`semantic.enabled = false`): the same
//! detectors compare exact normalized text instead (lowercase, punctuation
//! dropped, whitespace collapsed: [`loopguard_detectors::normalize_topic`]),
//! with similarity 1 for equal texts and never a match otherwise, and every
//! reason ends in [`EXACT_SUFFIX`]. There is no topic assigner then:
//! `topic_cycle` groups exact normalized text by itself. Semantic matching
//! is never turned off silently: with `enabled = true`, a model that cannot
//! be provisioned or loaded is an error from
//! [`SemanticDetectors::from_config`].
//!
//! **Bounded state.** Each detector keeps at most
//! [`SemanticLimits::max_tasks`] tasks (least recently used forgotten
//! first), and forgets a task on `completed` and `human`. Embeddings are
//! awaited before any lock is taken, so tasks never wait for each other's
//! inference; the [`EmbeddingService`] caches them by text, so the three
//! parts embed a text once.
//!
//! **Long texts.** At most `limits.max_text_bytes` of a text (default
//! 8192) is kept in a window or a saved state, cut on a character boundary;
//! a saved row of a cut text notes the whole's `len`. The model reads at
//! most [`EMBEDDING_INPUT_BYTES`](crate::EMBEDDING_INPUT_BYTES) of a text
//! (see [`crate::embedding_input`]), no more than is kept, so a
//! kept text embeds as the whole did. With semantic matching off, a
//! normalized text longer than the limit is kept as its cut and the hash
//! of the whole: texts that differ past the limit stay different.
//!
//! **Restarts.** With a durable store (SQLite, PostgreSQL), each part's
//! state of a task survives a restart: the engine keeps what
//! `export_task` gives (versioned JSON, [`STATE_FORMAT`], holding the
//! remembered texts, never their vectors) and hands it back through
//! `import_task`, which embeds the texts again (one batched call, at most
//! one inference per text of the task's windows), so a trace replayed
//! across a restart gets the decisions of one whole run.
//!
//! ```no_run
//! use std::sync::Arc;
//! use loopguard_core_types::{Action, Event};
//! use loopguard_config::Config;
//! use loopguard_host::LoopGuard;
//! use loopguard_semantic::SemanticDetectors;
//!
//! # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
//! let config = Config::default();
//! // Provisions the pinned files (fetching them on first use) and loads the model.
//! let semantic = SemanticDetectors::from_config(&config)?;
//! let guard = semantic.install(LoopGuard::builder(config)).build()?;
//! let ask = |request: &str| {
//!     Event::from_json(&format!(
//!         r#"{{"type":"collaboration","task":"T","from":"planner","to":"coder","request":"{request}"}}"#
//!     ))
//! };
//! guard.observe(ask("Can you review this authentication code?")?).await;
//! let decision = guard.observe(ask("Can you review this auth code again?")?).await;
//! assert_eq!(decision.loop_count, 1);
//! assert_eq!(decision.action, Action::Warn);
//! // "request from 'planner' to 'coder' is 0.889 similar to line 1's (threshold 0.85 ...)"
//! println!("{}", decision.detections[0].reason);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::num::NonZeroUsize;
use std::sync::Arc;

use loopguard_config::{Config, CycleCount};
use loopguard_core_types::Event;
use loopguard_host::{
    ArgumentMatcher, ExchangeMatcher, ExtensionDetector, ExtensionError, LoopGuardBuilder,
    TopicAssigner,
};

pub use collaboration_loop::CollaborationLoop;
pub use exchange_texts::ExchangeTexts;
pub use kept_answers::StoreAnswers;
pub use repeated_query::RepeatedQuery;
pub use tool_arguments::{MAX_FREE_TEXT_ARGS, ToolArguments};
pub use topics::{SemanticTopics, TOPIC_LABEL_CHARS};

use crate::error::{Result, SemanticError};
use crate::judge::SameRequestJudge;
use crate::service::EmbeddingService;
use history::{Matcher, Probe};

mod collaboration_loop;
mod exchange_texts;
mod history;
mod judged;
mod kept_answers;
mod keyed_texts;
mod repeated_query;
mod tool_arguments;
mod topics;

/// The format of the per-task state the detectors export to a durable
/// store (`{"format": 1, ...}`); an import of another format is an error,
/// and the task starts afresh.
pub const STATE_FORMAT: u32 = 1;

/// How every reason ends when semantic matching is off.
pub const EXACT_SUFFIX: &str = "(exact normalized text: semantic matching is off in config)";

/// How much the semantic detectors remember. Memory is dominated by the
/// vectors (384 floats, 1.5 KB each): with the defaults, one task holds at
/// most 8 × 32 vectors in each of five keyed histories (`collaboration_loop`'s
/// pairs, `repeated_query`'s recipients and its senders' replies, the
/// argument matcher's arguments, the exchange matcher's senders) and 32 × 4
/// topic vectors: about 2 MB when every history is full, which takes more
/// than a thousand distinct texts in one task; a task with one looping pair
/// holds a few KB.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SemanticLimits {
    /// Tasks each detector remembers; the least recently seen is forgotten
    /// first (default 1024).
    pub max_tasks: usize,
    /// Per task: ordered pairs (`collaboration_loop`), recipients and
    /// senders (`repeated_query`), arguments (the argument matcher) and
    /// senders (the exchange matcher) remembered, each least recently used
    /// forgotten first (default 8 of each).
    pub histories_per_task: usize,
    /// Requests or queries remembered per pair or recipient, oldest
    /// forgotten first (default 32).
    pub rows_per_history: usize,
    /// Topics remembered per task, least recently joined forgotten first
    /// (default 32).
    pub topics_per_task: usize,
    /// Members remembered per topic and compared with a new text (default
    /// 4: the latest ones).
    pub rows_per_topic: usize,
}

impl Default for SemanticLimits {
    fn default() -> Self {
        SemanticLimits {
            max_tasks: 1024,
            histories_per_task: 8,
            rows_per_history: 32,
            topics_per_task: 32,
            rows_per_topic: 4,
        }
    }
}

impl SemanticLimits {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets how many tasks each detector remembers.
    #[must_use]
    pub fn max_tasks(mut self, tasks: usize) -> Self {
        self.max_tasks = tasks;
        self
    }

    /// Sets how many pairs or recipients a task remembers.
    #[must_use]
    pub fn histories_per_task(mut self, histories: usize) -> Self {
        self.histories_per_task = histories;
        self
    }

    /// Sets how many requests or queries a pair or recipient remembers.
    #[must_use]
    pub fn rows_per_history(mut self, rows: usize) -> Self {
        self.rows_per_history = rows;
        self
    }

    /// Sets how many topics a task remembers.
    #[must_use]
    pub fn topics_per_task(mut self, topics: usize) -> Self {
        self.topics_per_task = topics;
        self
    }

    /// Sets how many members a topic remembers.
    #[must_use]
    pub fn rows_per_topic(mut self, rows: usize) -> Self {
        self.rows_per_topic = rows;
        self
    }
}

/// The semantic detectors of one engine: `collaboration_loop`,
/// `repeated_query` and, when semantic matching is on, the topic assigner.
///
/// Make one per engine (its detectors keep per-task state); several may
/// share one [`EmbeddingService`] ([`SemanticDetectors::with_service`]),
/// which is what holds the model.
#[derive(Debug, Clone)]
pub struct SemanticDetectors {
    matcher: Matcher,
    collaboration: Arc<CollaborationLoop>,
    queries: Arc<RepeatedQuery>,
    topics: Option<Arc<SemanticTopics>>,
    arguments: Option<Arc<ToolArguments>>,
    exchanges: Option<Arc<ExchangeTexts>>,
}

impl SemanticDetectors {
    /// The detectors `config` asks for: with `semantic.enabled` (the
    /// default), provisions the pinned model files per `[semantic]`
    /// (fetching them on first use unless offline), loads the model and
    /// starts an [`EmbeddingService`] with `semantic.cache_capacity`;
    /// otherwise, the exact-text fallback, loading nothing.
    ///
    /// The error is the semantic crate's own: the missing or corrupt file,
    /// its checksum and the command that fetches it, or why the runtime or
    /// the model would not load. Never a silent fallback.
    #[cfg(feature = "fastembed")]
    pub fn from_config(config: &Config) -> Result<SemanticDetectors> {
        SemanticDetectors::from_config_notify(config, |_| {})
    }

    /// Like [`SemanticDetectors::from_config`], calling `before_fetch` just
    /// before files are downloaded (not when they are all in place), so a
    /// command can tell its user why the first run takes longer.
    #[cfg(feature = "fastembed")]
    pub fn from_config_notify(
        config: &Config,
        before_fetch: impl Fn(&crate::FetchPlan),
    ) -> Result<SemanticDetectors> {
        if !config.semantic.enabled {
            return Ok(SemanticDetectors::exact(config));
        }
        // The weights file (and the second opinion's LLM settings) first: a
        // bad one fails before the model loads.
        #[cfg(feature = "llm")]
        let judge = SameRequestJudge::from_config_and_llm(&config.similarity, &config.llm)?;
        #[cfg(not(feature = "llm"))]
        let judge = SameRequestJudge::from_config(&config.similarity)?;
        let (service, judge) = load_service_and_tuned_encoder(config, judge, before_fetch)
            .map_err(|err| match err {
                StartError::Service(err) | StartError::TunedEncoder(err) => err,
            })?;
        Ok(SemanticDetectors::with_judge(
            config,
            Some(service),
            SemanticLimits::default(),
            judge,
        ))
    }

    /// Semantic detectors over an already running service (shared between
    /// engines or tests: the model is loaded once), whatever
    /// `semantic.enabled` says. The judge is `similarity.judge` with the
    /// shipped weights; [`SemanticDetectors::with_judge`] takes a team's own
    /// (`similarity.judge_weights`, read by
    /// [`SameRequestJudge::from_config`]).
    pub fn with_service(config: &Config, service: Arc<EmbeddingService>) -> SemanticDetectors {
        SemanticDetectors::with_limits(config, Some(service), SemanticLimits::default())
    }

    /// The exact normalized-text fallback (`semantic.enabled = false`):
    /// nothing is loaded, and every reason says semantic matching is off.
    pub fn exact(config: &Config) -> SemanticDetectors {
        SemanticDetectors::with_limits(config, None, SemanticLimits::default())
    }

    /// Semantic detectors over `service`, or the exact fallback without
    /// one, remembering as much as `limits` allows; the judge is
    /// `similarity.judge` with the shipped weights.
    pub fn with_limits(
        config: &Config,
        service: Option<Arc<EmbeddingService>>,
        limits: SemanticLimits,
    ) -> SemanticDetectors {
        let judge = SameRequestJudge::of_kind(config.similarity.judge);
        SemanticDetectors::with_judge(config, service, limits, judge)
    }

    /// [`SemanticDetectors::with_limits`] with `judge` deciding "the same
    /// request" for `collaboration_loop` and `repeated_query` (with
    /// embeddings; exact text decides without them).
    pub fn with_judge(
        config: &Config,
        service: Option<Arc<EmbeddingService>>,
        limits: SemanticLimits,
        judge: SameRequestJudge,
    ) -> SemanticDetectors {
        // What the detectors keep of a text (`limits.max_text_bytes`); never
        // less than the model reads, so a kept text embeds as the whole.
        let max_text_bytes = config
            .limits
            .max_text_bytes
            .max(crate::EMBEDDING_INPUT_BYTES);
        let matcher = match &service {
            Some(service) => Matcher::Semantic {
                service: Arc::clone(service),
                max_text_bytes,
            },
            None => Matcher::Exact { max_text_bytes },
        };
        let similarity = &config.similarity;
        SemanticDetectors {
            collaboration: Arc::new(CollaborationLoop::new(
                matcher.clone(),
                similarity.clone(),
                limits.clone(),
                judge.clone(),
            )),
            queries: Arc::new(RepeatedQuery::new(
                matcher.clone(),
                similarity.clone(),
                limits.clone(),
                judge.clone(),
            )),
            // Without embeddings, the hub tracker compares texts itself.
            exchanges: service.is_some().then(|| {
                Arc::new(ExchangeTexts::new(
                    matcher.clone(),
                    similarity.clone(),
                    limits.clone(),
                    judge.clone(),
                    config.cycles.counting() == CycleCount::Repeats,
                ))
            }),
            // Without embeddings, `tool_calls` compares free text itself.
            arguments: service.is_some().then(|| {
                Arc::new(ToolArguments::new(
                    matcher.clone(),
                    similarity.clone(),
                    config.tools.clone(),
                    limits.clone(),
                    judge,
                ))
            }),
            topics: service.map(|service| {
                Arc::new(SemanticTopics::new(
                    service,
                    similarity.clone(),
                    limits,
                    max_text_bytes,
                ))
            }),
            matcher,
        }
    }

    /// Whether texts are compared by embeddings (`false`: exact normalized
    /// text).
    pub fn is_semantic(&self) -> bool {
        self.matcher.is_semantic()
    }

    /// The embedding service, when semantic matching is on.
    pub fn service(&self) -> Option<&Arc<EmbeddingService>> {
        match &self.matcher {
            Matcher::Semantic { service, .. } => Some(service),
            Matcher::Exact { .. } => None,
        }
    }

    /// The `collaboration_loop` detector.
    pub fn collaboration_loop(&self) -> Arc<CollaborationLoop> {
        Arc::clone(&self.collaboration)
    }

    /// The `repeated_query` detector.
    pub fn repeated_query(&self) -> Arc<RepeatedQuery> {
        Arc::clone(&self.queries)
    }

    /// The extension detectors, for [`LoopGuardBuilder::extension`].
    pub fn extensions(&self) -> Vec<Arc<dyn ExtensionDetector>> {
        vec![
            Arc::clone(&self.collaboration) as Arc<dyn ExtensionDetector>,
            Arc::clone(&self.queries) as Arc<dyn ExtensionDetector>,
        ]
    }

    /// The topic assigner, for [`LoopGuardBuilder::topics`]; `None` when
    /// semantic matching is off (`topic_cycle` then uses exact normalized
    /// text by itself).
    pub fn topics(&self) -> Option<Arc<dyn TopicAssigner>> {
        self.topics
            .as_ref()
            .map(|topics| Arc::clone(topics) as Arc<dyn TopicAssigner>)
    }

    /// The tool-argument matcher, for [`LoopGuardBuilder::arguments`];
    /// `None` when semantic matching is off (`tool_calls` then compares
    /// free-text arguments as normalized text).
    pub fn arguments(&self) -> Option<Arc<ToolArguments>> {
        self.arguments.clone()
    }

    /// The exchange matcher, for [`LoopGuardBuilder::exchanges`]; `None`
    /// when semantic matching is off (the hub tracker then compares
    /// exchanges' texts as normalized text).
    pub fn exchanges(&self) -> Option<Arc<ExchangeTexts>> {
        self.exchanges.clone()
    }

    /// Adds the extension detectors, the topic assigner, the tool-argument
    /// matcher and the exchange matcher to `builder`.
    pub fn install(&self, mut builder: LoopGuardBuilder) -> LoopGuardBuilder {
        for extension in self.extensions() {
            builder = builder.extension(extension);
        }
        if let Some(topics) = self.topics() {
            builder = builder.topics(topics);
        }
        if let Some(arguments) = &self.arguments {
            builder = builder.arguments(Arc::clone(arguments) as Arc<dyn ArgumentMatcher>);
        }
        if let Some(exchanges) = &self.exchanges {
            builder = builder.exchanges(Arc::clone(exchanges) as Arc<dyn ExchangeMatcher>);
        }
        builder
    }

    /// How similar two texts are, the way these detectors judge it: the
    /// cosine of their embeddings, or with semantic matching off 1 for
    /// equal normalized texts and 0 otherwise (also 0 when either has no
    /// words).
    pub async fn similarity(&self, a: &str, b: &str) -> Result<f32> {
        let (a, b) = (self.matcher.probe(a).await?, self.matcher.probe(b).await?);
        Ok(match (a, b) {
            (Some(Probe::Vector { vector: a, .. }), Some(Probe::Vector { vector: b, .. })) => {
                crate::similarity::cosine(&a, &b)?.clamp(-1.0, 1.0)
            }
            (Some(Probe::Text(a)), Some(Probe::Text(b))) if a == b => 1.0,
            _ => 0.0,
        })
    }
}

/// Provisions the model files per `config.semantic`, loads the model and
/// starts a service with `semantic.cache_capacity`: what
/// [`SemanticDetectors::from_config`] does, for callers that share one
/// service between several engines.
#[cfg(feature = "fastembed")]
pub fn load_service(
    config: &Config,
    before_fetch: impl FnOnce(&crate::FetchPlan),
) -> Result<Arc<EmbeddingService>> {
    let resolved = provision_options(&config.semantic).resolve();
    let files = crate::ModelFiles::ensure_resolved_notify(&resolved, before_fetch)?;
    service_over(config, crate::FastEmbedder::new(&files))
}

/// `judge` with its tuned encoder loaded and attached when its weights
/// need it ([`SameRequestJudge::needs_tuned_encoder`]); as it is
/// otherwise, loading nothing. The tuned encoder is the one the weights
/// name ([`SameRequestJudge::tuned_encoder_needed`]): the smaller reads
/// the pinned tokenizer files of the model directory `config.semantic`
/// names (call [`load_service`] first: it provisions them), its own file
/// found and checked by [`crate::ModelFiles::tuned_model`]; the larger's
/// base is fetched into that directory when it is not there, and its
/// update read from there ([`crate::MpnetBase`]). It caches
/// `semantic.cache_capacity` texts of its own.
#[cfg(feature = "fastembed")]
pub fn attach_tuned_encoder(config: &Config, judge: SameRequestJudge) -> Result<SameRequestJudge> {
    if !judge.needs_tuned_encoder() {
        return Ok(judge);
    }
    let resolved = provision_options(&config.semantic).resolve();
    let files = crate::ModelFiles::ensure_resolved_notify(&resolved, |_| {})?;
    let base = larger_base(&resolved, &judge, &|_| {})?;
    let tuned = tuned_service(config, &files, base.as_ref())?;
    Ok(judge.with_tuned_encoder(tuned))
}

/// Which half of [`load_service_and_tuned_encoder`] failed: the pinned
/// model's (semantic matching cannot start) or the tuned encoder's (the
/// judge cannot), so a caller can say which and how to go without it.
#[cfg(feature = "fastembed")]
#[derive(Debug)]
pub enum StartError {
    /// Provisioning the files or loading the pinned model failed.
    Service(SemanticError),
    /// Provisioning or loading the tuned encoder the judge's weights
    /// need failed.
    TunedEncoder(SemanticError),
}

#[cfg(feature = "fastembed")]
impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Service(err) => write!(f, "semantic matching cannot start: {err}"),
            StartError::TunedEncoder(err) => {
                write!(
                    f,
                    "the same-request judge's tuned encoder cannot start: {err}"
                )
            }
        }
    }
}

// The message already says the cause, so no `source`: a chain printer
// would say it twice.
#[cfg(feature = "fastembed")]
impl std::error::Error for StartError {}

/// [`load_service`] and [`attach_tuned_encoder`] in one: the files are
/// provisioned first (a download, if any, happens before either model
/// loads; `before_fetch` hears of each: the pinned files, then the larger
/// tuned encoder's base when the judge needs it and it is not there),
/// then the pinned model and, when `judge`'s weights need it, the tuned
/// encoder are loaded one after the other. Loading them on two threads
/// starts faster (0.40 s against about 0.6 s for `loopguard similarity`
/// on two cores) but peaks 100 to 140 MB higher, which is what a
/// long-running sidecar's memory limit has to allow for; so they load in
/// turn.
#[cfg(feature = "fastembed")]
pub fn load_service_and_tuned_encoder(
    config: &Config,
    judge: SameRequestJudge,
    before_fetch: impl Fn(&crate::FetchPlan),
) -> std::result::Result<(Arc<EmbeddingService>, SameRequestJudge), StartError> {
    let resolved = provision_options(&config.semantic).resolve();
    let files = crate::ModelFiles::ensure_resolved_notify(&resolved, &before_fetch)
        .map_err(StartError::Service)?;
    let base = larger_base(&resolved, &judge, &before_fetch).map_err(StartError::TunedEncoder)?;
    let service =
        service_over(config, crate::FastEmbedder::new(&files)).map_err(StartError::Service)?;
    if !judge.needs_tuned_encoder() {
        return Ok((service, judge));
    }
    let tuned = tuned_service(config, &files, base.as_ref()).map_err(StartError::TunedEncoder)?;
    Ok((service, judge.with_tuned_encoder(tuned)))
}

/// The larger tuned encoder's base model, provisioned, when `judge`'s
/// weights name that encoder; `None` otherwise.
#[cfg(feature = "fastembed")]
fn larger_base(
    resolved: &crate::Resolved,
    judge: &SameRequestJudge,
    before_fetch: &impl Fn(&crate::FetchPlan),
) -> Result<Option<crate::MpnetBase>> {
    if judge.tuned_encoder_needed() != Some(crate::MPNET_TUNED_MODEL_ID) {
        return Ok(None);
    }
    crate::MpnetBase::ensure_resolved_notify(resolved, before_fetch).map(Some)
}

/// A service over the tuned encoder: the larger one over `base` when it
/// is given, otherwise the smaller one with the pinned tokenizer files of
/// `files` and its own file ([`crate::ModelFiles::tuned_model`]).
#[cfg(feature = "fastembed")]
fn tuned_service(
    config: &Config,
    files: &crate::ModelFiles,
    base: Option<&crate::MpnetBase>,
) -> Result<Arc<EmbeddingService>> {
    let options = crate::FastEmbedderOptions::default();
    service_over(
        config,
        match base {
            Some(base) => crate::FastEmbedder::tuned_mpnet(files, base, &options),
            None => crate::FastEmbedder::tuned(files, &options),
        },
    )
}

/// A service with `semantic.cache_capacity` over a loaded embedder.
#[cfg(feature = "fastembed")]
fn service_over(
    config: &Config,
    embedder: Result<crate::FastEmbedder>,
) -> Result<Arc<EmbeddingService>> {
    let service = EmbeddingService::with_options(
        Arc::new(embedder?),
        crate::ServiceOptions::new().cache_capacity(config.semantic.cache_capacity),
    )?;
    Ok(Arc::new(service))
}

/// The provisioning options `[semantic]` gives: `model_dir` and
/// `ort_library` when set (they win over `LOOPGUARD_MODEL_DIR` and
/// `ORT_DYLIB_PATH`), and `offline` when set (it wins over
/// `LOOPGUARD_OFFLINE`; unset leaves the choice to it).
pub fn provision_options(semantic: &loopguard_config::SemanticConfig) -> crate::ProvisionOptions {
    let mut options = crate::ProvisionOptions::new();
    if let Some(dir) = &semantic.model_dir {
        options = options.model_dir(dir);
    }
    if let Some(library) = &semantic.ort_library {
        options = options.ort_library(library);
    }
    if let Some(offline) = semantic.offline {
        options = options.offline(offline);
    }
    options
}

/// The event's `task_type` field, if it is a string.
fn task_type(event: &Event) -> Option<&str> {
    event
        .extra
        .get("task_type")
        .and_then(|value| value.as_str())
}

/// A detector error naming what failed.
fn extension_error(what: &str, err: &SemanticError) -> ExtensionError {
    ExtensionError(format!("{what}: {err}"))
}

/// `n`, or 1 for 0 (an LRU cache needs room for one).
fn non_zero(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).unwrap_or(NonZeroUsize::MIN)
}

/// "1st", "2nd", "3rd", "4th", ... "11th", "21st".
fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals() {
        let got: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101]
            .into_iter()
            .map(ordinal)
            .collect();
        assert_eq!(
            got,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st"
            ]
        );
    }

    #[test]
    fn config_wins_and_an_unset_offline_defers_to_the_environment() {
        let mut semantic = loopguard_config::SemanticConfig::default();
        let env = |key: &str| match key {
            crate::ENV_MODEL_DIR => Some("/from/env".into()),
            crate::ENV_OFFLINE => Some("1".into()),
            _ => None,
        };
        let resolved = provision_options(&semantic).resolve_with(env);
        assert_eq!(resolved.model_dir, std::path::Path::new("/from/env"));
        assert!(
            resolved.offline,
            "an unset offline leaves LOOPGUARD_OFFLINE in charge"
        );
        semantic.model_dir = Some("/from/config".into());
        semantic.ort_library = Some("/from/config/libonnxruntime.so".into());
        let resolved = provision_options(&semantic).resolve_with(env);
        assert_eq!(resolved.model_dir, std::path::Path::new("/from/config"));
        assert_eq!(
            resolved.runtime.map(|(path, _)| path),
            Some("/from/config/libonnxruntime.so".into())
        );
        semantic.offline = Some(true);
        let resolved = provision_options(&semantic).resolve_with(|_| None);
        assert!(resolved.offline);
        // `offline = false` in the config overrides LOOPGUARD_OFFLINE=1.
        semantic.offline = Some(false);
        let resolved = provision_options(&semantic).resolve_with(env);
        assert!(!resolved.offline);
    }
}
