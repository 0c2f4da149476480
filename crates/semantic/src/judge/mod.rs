//! "Is this the same request?": the judge behind `collaboration_loop`,
//! `repeated_query` and every other same-request check.
//!
//! Two judges:
//!
//! - **cosine** (the original): the same request when the embeddings'
//!   cosine is strictly above the threshold (0.85 by default).
//! - **calibrated** (the default): the cosine plus what the two texts
//!   differ in, word by word ([`loopguard_judge`]): a *veto* when an
//!   identifier, a number, one or two deciding words or a direction
//!   differ; the *residual cosine*, the cosine of the two sides' differing
//!   words alone (a synonym swap keeps it high, a real contrast does not);
//!   and an *intent mismatch* (review vs speed up). A logistic combination
//!   of them, with weights fitted on labelled pairs (`loopguard tune
//!   --judge calibrated`) and loaded from a small file ([`JudgeWeights`]),
//!   gives a score in 0..1; the same request when it is above the
//!   threshold.
//!
//! What needs no model (reading the texts, the vetoes, the features and
//! the weights) is the crate `loopguard-judge`, re-exported here; this
//! module adds the embeddings the calibrated judge asks for, and the
//! second opinion ([`second_opinion`]).
//!
//! Judging is two steps, so that any embedder can serve the second:
//! [`SameRequestJudge::first_look`] decides from the cosine and the words
//! alone when it can (a veto, a cosine too low to matter, or the cosine
//! judge), and otherwise asks for the residual texts' cosine;
//! [`Pending::finish`] decides with it. [`SameRequestJudge::judge`] does
//! both with an [`EmbeddingService`] (its cache keeps the short residual
//! texts).
//!
//! With weights that weigh `tuned_cosine` (`[similarity] tuned_encoder =
//! true`, [`JudgeWeights::needs_tuned_encoder`]), a pair with a cosine of
//! [`TUNED_CANDIDATE_FLOOR`] or more also waits for the cosine of its two
//! texts by the tuned encoder (`FastEmbedder::tuned`), a second service
//! given with [`SameRequestJudge::with_tuned_encoder`]; a veto then
//! settles the residuals, not the score. The [`CANDIDATE_FLOOR`] is then
//! on the nearer of the two cosines, and a detector asks
//! [`SameRequestJudge::over_the_floor`] which of its candidates between
//! the two floors the tuned encoder lifts over it before judging them.
//!
//! The floors, and every other cut-off the judge reads pairs with, are
//! its weights' ([`JudgeWeights::cutoffs`]): a weights file's own, or the
//! shipped [`Cutoffs`].

pub mod second_opinion;

use std::sync::Arc;

pub use loopguard_config::JudgeKind;
use loopguard_config::{SimilarityConfig, Threshold, TunedEncoder};
pub use loopguard_judge::related;
use loopguard_judge::residual_texts;
pub use loopguard_judge::{
    CANDIDATE_FLOOR, Contrast, Cutoffs, DEFAULT_WEIGHTS_JSON, FEATURE_NAMES, FEATURES, Features,
    IdentifierClass, JudgeError, JudgeWeights, MPNET_WEIGHTS_JSON, ReadText, Residuals,
    TEMPLATE_JACCARD_CEILING, TUNED_CANDIDATE_FLOOR, TUNED_FEATURE, TUNED_WEIGHTS_JSON, Veto,
    compare,
};

use self::second_opinion::Reviewer;
pub use self::second_opinion::{
    AnswerArchive, Opinion, OpinionError, SecondOpinion, SecondOpinionOutcome, SecondOpinionPolicy,
    SecondOpinionStats,
};
use crate::{EmbeddingService, Result, SemanticError, cosine};

/// The lexical side of the same-request judge: what two texts differ in,
/// word by word (`loopguard-judge`'s reading and comparison).
pub mod lexical {
    pub use loopguard_judge::{
        Contrast, IdentifierClass, ReadText, TEMPLATE_PLACEHOLDER, Tokens, VETOES, Veto, VetoRule,
        adds_to_earlier_work, compare, compare_read, compare_with_rule, reads_as_report,
        reads_as_statement, templates, tokenize,
    };
}

/// The judge's answer for one pair.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Which judge answered.
    pub judge: JudgeKind,
    /// The same request?
    pub same: bool,
    /// The score compared with the threshold: the cosine for the cosine
    /// judge, the calibrated score (0..1) otherwise.
    pub score: f32,
    /// The threshold (strictly exceeded).
    pub threshold: f32,
    /// The cosine below which the calibrated judge scores a pair 0, not
    /// one request whatever its words (its weights' candidate floor,
    /// [`Cutoffs::candidate_floor`]).
    pub candidate_floor: f32,
    /// Everything it looked at.
    pub features: Features,
    /// What the second opinion did, when the judge has one and the pair
    /// was one to ask about ([`SecondOpinionPolicy::wants`]); `None`
    /// otherwise.
    pub second_opinion: Option<SecondOpinionOutcome>,
}

impl Verdict {
    /// What decided, in words, for a detection's reason:
    /// "same request (score 0.91, cosine 0.89)", "different identifiers
    /// (#412 vs #418)"; and what a second opinion said: "different request
    /// (score 0.62, cosine 0.90); LLM m says: another table
    /// (overruling the judge)".
    pub fn reason(&self) -> String {
        match &self.second_opinion {
            None => self.judge_reason(self.same),
            Some(SecondOpinionOutcome::Failed { error, by }) => format!(
                "{}; the second opinion ({by}) gave none, so the judge's verdict stands: {error}",
                self.judge_reason(self.same)
            ),
            Some(SecondOpinionOutcome::Answered {
                opinion,
                judge_same,
                by,
                cached,
            }) => {
                let said = if opinion.same {
                    "the same request"
                } else {
                    "a different request"
                };
                let why = if opinion.reason.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", opinion.reason)
                };
                let kept = if *cached { ", as before" } else { "" };
                let agreement = if opinion.same == *judge_same {
                    "agreeing with the judge"
                } else {
                    "overruling the judge"
                };
                format!(
                    "{by} says {said}{why}{kept}, {agreement}: {}",
                    self.judge_reason(*judge_same)
                )
            }
        }
    }

    /// What the judge itself decided, had it decided `same`.
    fn judge_reason(&self, same: bool) -> String {
        let cosine = self.features.cosine;
        match (self.judge, same) {
            (JudgeKind::Cosine, _) => format!(
                "cosine {cosine:.2} {} the threshold {:.2}",
                if same { "above" } else { "not above" },
                self.threshold
            ),
            (JudgeKind::Calibrated, true) => {
                format!("same request (score {:.2}, cosine {cosine:.2})", self.score)
            }
            (JudgeKind::Calibrated, false) => match &self.features.contrast.veto {
                _ if self.features.nearest_cosine() < self.candidate_floor => {
                    let floor = self.candidate_floor;
                    match self.features.tuned_cosine {
                        Some(tuned) => format!(
                            "too far apart to be one request (cosine {cosine:.2}, tuned \
                             {tuned:.2}, both below {floor:.2})"
                        ),
                        None => format!(
                            "too far apart to be one request (cosine {cosine:.2} below \
                             {floor:.2})"
                        ),
                    }
                }
                Some(veto) => format!("{veto} (score {:.2}, cosine {cosine:.2})", self.score),
                None if self.features.contrast.report_vs_request => format!(
                    "a report, not the request (score {:.2}, cosine {cosine:.2})",
                    self.score
                ),
                None if self.features.contrast.intent_mismatch => format!(
                    "different intent (score {:.2}, cosine {cosine:.2})",
                    self.score
                ),
                None => format!(
                    "different request (score {:.2}, cosine {cosine:.2})",
                    self.score
                ),
            },
        }
    }
}

/// A judge, configured: the cosine judge, or the calibrated one with its
/// weights.
#[derive(Debug, Clone)]
pub struct SameRequestJudge {
    kind: JudgeKind,
    weights: Arc<JudgeWeights>,
    /// The texts read lately, shared by the judge's clones.
    readings: Arc<Readings>,
    /// The second opinion on the pairs it is unsure of, when it has one.
    reviewer: Option<Arc<Reviewer>>,
    /// Where the second opinion's answers outlive the process, when set
    /// ([`SameRequestJudge::with_answer_archive`]); per clone.
    archive: Option<Arc<dyn AnswerArchive>>,
    /// The tuned encoder, when the weights need its cosine and it is
    /// loaded ([`SameRequestJudge::with_tuned_encoder`]).
    tuned: Option<Arc<EmbeddingService>>,
}

/// How much text a judge keeps read ([`ReadText`]), in bytes of what the
/// model reads of each text (at most [`crate::EMBEDDING_INPUT_BYTES`] a
/// text): some 5,000 requests of a line each, or 128 texts of 4 KB. A
/// reading takes some tens of times its text's bytes, so this bounds the
/// cache to a few tens of megabytes whatever the texts.
const READINGS_TEXT_BYTES: usize = 512 * 1024;

/// The texts a judge read lately, most recent kept: reading a text (its
/// tokens, WordNet senses, report and intent readings) is most of what
/// comparing two costs, and a detector compares one text with many (up to
/// a window of earlier ones, 32 by default).
struct Readings(parking_lot::Mutex<KeptReadings>);

/// The readings, least recently used first out, and their texts' bytes.
struct KeptReadings {
    readings: lru::LruCache<Arc<str>, Arc<ReadText>>,
    bytes: usize,
}

impl Readings {
    fn new() -> Readings {
        Readings(parking_lot::Mutex::new(KeptReadings {
            readings: lru::LruCache::unbounded(),
            bytes: 0,
        }))
    }

    /// `text` read: from the cache, or read now and kept. Every reading
    /// is of what the model reads of the text, so that is the key.
    fn read(&self, text: &str) -> Arc<ReadText> {
        let text = crate::embedding_input(text);
        if let Some(read) = self.0.lock().readings.get(text) {
            return Arc::clone(read);
        }
        // Read outside the lock: other detectors' look-ups go on meanwhile.
        let read = Arc::new(ReadText::new(text));
        let mut kept = self.0.lock();
        if kept
            .readings
            .put(Arc::from(text), Arc::clone(&read))
            .is_none()
        {
            kept.bytes += text.len();
        }
        while kept.bytes > READINGS_TEXT_BYTES {
            match kept.readings.pop_lru() {
                Some((oldest, _)) => kept.bytes -= oldest.len(),
                None => break,
            }
        }
        read
    }
}

impl std::fmt::Debug for Readings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.0.lock();
        f.debug_struct("Readings")
            .field("texts", &kept.readings.len())
            .field("bytes", &kept.bytes)
            .finish()
    }
}

/// A pair the judge needs more cosines for: its residual texts' (and
/// templates'), its tuned encoder's, or both.
#[derive(Debug, Clone)]
pub struct Pending {
    judge: SameRequestJudge,
    threshold: f32,
    features: Features,
    /// The residual cosines when the words alone settled them (`None`
    /// inside: not computed); `None` when they are still wanted.
    known_residuals: Option<Option<Residuals>>,
    /// Whether the tuned encoder's cosine of the two texts is wanted.
    wants_tuned: bool,
    /// The two texts, for a side with no differing words of its own.
    texts: (String, String),
    /// The two texts' templates ([`lexical::templates`]), when they are
    /// compared ([`TEMPLATE_JACCARD_CEILING`]).
    templates: Option<(String, String)>,
}

/// The first look at a pair: decided, or waiting for the residual texts'
/// cosine.
#[derive(Debug, Clone)]
pub enum FirstLook {
    /// Decided without another embedding.
    Decided(Verdict),
    /// Needs the cosines of [`Pending::residual_texts`] and
    /// [`Pending::templates`] ([`Pending::needs_residuals`]), or the tuned
    /// encoder's cosine of the two texts ([`Pending::needs_tuned_cosine`]).
    Pending(Pending),
}

impl SameRequestJudge {
    /// The cosine judge.
    pub fn cosine() -> SameRequestJudge {
        SameRequestJudge {
            kind: JudgeKind::Cosine,
            weights: Arc::new(JudgeWeights::shipped()),
            readings: Arc::new(Readings::new()),
            reviewer: None,
            archive: None,
            tuned: None,
        }
    }

    /// The calibrated judge with `weights`. It starts reading WordNet's
    /// word relations on a thread of their own ([`related::warm_up`]).
    pub fn calibrated(weights: JudgeWeights) -> SameRequestJudge {
        related::warm_up();
        SameRequestJudge {
            kind: JudgeKind::Calibrated,
            weights: Arc::new(weights),
            readings: Arc::new(Readings::new()),
            reviewer: None,
            archive: None,
            tuned: None,
        }
    }

    /// The judge of `kind`, with the shipped weights.
    pub fn of_kind(kind: JudgeKind) -> SameRequestJudge {
        match kind {
            JudgeKind::Cosine => SameRequestJudge::cosine(),
            JudgeKind::Calibrated => SameRequestJudge::calibrated(JudgeWeights::shipped()),
        }
    }

    /// This judge with `opinion` asked about the pairs `policy` wants
    /// ([`SecondOpinionPolicy::wants`]) by [`SameRequestJudge::judge`],
    /// [`SameRequestJudge::judge_many`] and [`SameRequestJudge::review`].
    /// Only the calibrated judge's verdicts are ever sent; the cosine
    /// judge keeps its own.
    pub fn with_second_opinion(
        mut self,
        opinion: Arc<dyn SecondOpinion>,
        policy: SecondOpinionPolicy,
    ) -> SameRequestJudge {
        self.reviewer = Some(Arc::new(Reviewer::new(opinion, policy)));
        self
    }

    /// This judge with its second opinion's answers kept in `archive` as
    /// well as in memory: a pair is asked only when neither holds an
    /// answer, and a new answer is kept in both. Judges that share an
    /// archive (engines that share a store, or one engine after a restart)
    /// decide an asked pair alike. When the archive fails, the pair is
    /// asked (or its answer used) all the same and a warning is logged.
    /// Only this judge and its later clones use it; it changes nothing
    /// for a judge without a second opinion.
    pub fn with_answer_archive(mut self, archive: Arc<dyn AnswerArchive>) -> SameRequestJudge {
        self.archive = Some(archive);
        self
    }

    /// This judge with `tuned` as its tuned encoder: a service over
    /// `FastEmbedder::tuned` (the `tuned_cosine` reading). Only weights
    /// that use that reading ([`JudgeWeights::needs_tuned_encoder`]) ask
    /// it anything.
    pub fn with_tuned_encoder(mut self, tuned: Arc<EmbeddingService>) -> SameRequestJudge {
        self.tuned = Some(tuned);
        self
    }

    /// Whether the judge's weights need the tuned encoder's cosine (it
    /// must then be given, [`SameRequestJudge::with_tuned_encoder`]).
    pub fn needs_tuned_encoder(&self) -> bool {
        self.kind == JudgeKind::Calibrated && self.weights.needs_tuned_encoder()
    }

    /// Which tuned encoder the judge needs, by the id its weights name
    /// ([`JudgeWeights::tuned_encoder_needed`]), when it needs one.
    pub fn tuned_encoder_needed(&self) -> Option<&str> {
        (self.kind == JudgeKind::Calibrated)
            .then(|| self.weights.tuned_encoder_needed())
            .flatten()
    }

    /// Whether the second opinion's answers are kept in an archive.
    pub fn keeps_answers(&self) -> bool {
        self.reviewer.is_some() && self.archive.is_some()
    }

    /// Who gives the second opinion and which pairs it hears, when the
    /// judge has one.
    pub fn second_opinion(&self) -> Option<(String, SecondOpinionPolicy)> {
        self.reviewer
            .as_ref()
            .map(|reviewer| (reviewer.describe(), *reviewer.policy()))
    }

    /// How often the second opinion was wanted and how it went, when the
    /// judge has one (shared by the judge's clones).
    pub fn second_opinion_stats(&self) -> Option<SecondOpinionStats> {
        self.reviewer.as_ref().map(|reviewer| reviewer.stats())
    }

    /// `verdict` on `earlier` and `later` (from [`Pending::finish`] or a
    /// [`FirstLook::Decided`]) with the second opinion's answer when the
    /// judge has one and the verdict is one to ask about; as it was
    /// otherwise. Never an error: when the second opinion fails the
    /// verdict stands, and says so.
    pub async fn review(&self, earlier: &str, later: &str, verdict: Verdict) -> Verdict {
        match &self.reviewer {
            Some(reviewer) if reviewer.wants(&verdict) => {
                reviewer
                    .review(earlier, later, verdict, self.archive.as_deref())
                    .await
            }
            _ => verdict,
        }
    }

    /// The judge `similarity` configures: its `judge`, with the weights
    /// of its `judge_weights` file (the shipped ones when unset: with
    /// `tuned_encoder`, those fitted with the tuned encoder). A weights
    /// file that cannot be read, or is not weights, is an error naming it.
    ///
    /// A judge whose weights need the tuned encoder
    /// ([`SameRequestJudge::needs_tuned_encoder`]) must be given it
    /// ([`SameRequestJudge::with_tuned_encoder`]) before it judges;
    /// [`crate::SemanticDetectors::from_config`] does.
    pub fn from_config(similarity: &SimilarityConfig) -> Result<SameRequestJudge> {
        match (similarity.judge, &similarity.judge_weights) {
            (JudgeKind::Cosine, _) => Ok(SameRequestJudge::cosine()),
            (JudgeKind::Calibrated, None) => Ok(SameRequestJudge::calibrated(
                match similarity.tuned_encoder {
                    TunedEncoder::Off => JudgeWeights::shipped(),
                    TunedEncoder::MiniLm => JudgeWeights::shipped_tuned(),
                    TunedEncoder::Mpnet => JudgeWeights::shipped_mpnet(),
                },
            )),
            (JudgeKind::Calibrated, Some(path)) => {
                Ok(SameRequestJudge::calibrated(JudgeWeights::from_file(path)?))
            }
        }
    }

    /// The judge `similarity` configures ([`SameRequestJudge::from_config`])
    /// with, when `similarity.second_opinion.enabled`, the LLM of `llm`
    /// (and the process environment: `LOOPGUARD_LLM_BASE_URL`,
    /// `LOOPGUARD_LLM_MODEL`, the key's variable) as its second opinion.
    /// Enabled with no LLM named, or with the cosine judge, is an error
    /// naming the keys.
    #[cfg(feature = "llm")]
    pub fn from_config_and_llm(
        similarity: &SimilarityConfig,
        llm: &loopguard_config::LlmConfig,
    ) -> Result<SameRequestJudge> {
        let judge = SameRequestJudge::from_config(similarity)?;
        if !similarity.second_opinion.enabled {
            return Ok(judge);
        }
        if judge.kind() != JudgeKind::Calibrated {
            return Err(SemanticError::Judge(
                "similarity.second_opinion.enabled is true, but similarity.judge is \"cosine\": \
                 the second opinion hears the calibrated judge's unsure pairs; set judge = \
                 \"calibrated\" or turn the second opinion off"
                    .into(),
            ));
        }
        let settings = loopguard_llm_client::LlmSettings::from_config(llm)
            .map_err(|err| SemanticError::Judge(format!("second opinion: {err}")))?
            .ok_or_else(|| {
                SemanticError::Judge(format!(
                    "similarity.second_opinion.enabled is true, but no LLM is named: set \
                     llm.base_url and llm.model (or {} and {})",
                    loopguard_llm_client::BASE_URL_ENV,
                    loopguard_llm_client::MODEL_ENV
                ))
            })?;
        let opinion = second_opinion::LlmSecondOpinion::new(settings)
            .map_err(|err| SemanticError::Judge(format!("second opinion: {err}")))?;
        Ok(judge.with_second_opinion(
            Arc::new(opinion),
            SecondOpinionPolicy::from_config(&similarity.second_opinion),
        ))
    }

    /// The operating threshold for a task of type `task_type`, and the
    /// config key (or file) it came from: `similarity.request_threshold`
    /// (or its task type's) for the cosine judge; for the calibrated one
    /// `similarity.judge_threshold` (or its task type's) when set, else
    /// the weights file's own.
    pub fn threshold_for(
        &self,
        similarity: &SimilarityConfig,
        task_type: Option<&str>,
    ) -> Threshold {
        match self.kind {
            JudgeKind::Cosine => similarity.request_threshold_for(task_type),
            JudgeKind::Calibrated => {
                similarity
                    .judge_threshold_for(task_type)
                    .unwrap_or_else(|| Threshold {
                        value: self.weights.threshold,
                        key: match &similarity.judge_weights {
                            Some(path) => format!("the judge weights {}", path.display()),
                            None => match self.weights.tuned_encoder_needed() {
                                Some(id) if id == crate::MPNET_TUNED_MODEL_ID => {
                                    "the shipped judge weights for the larger tuned encoder"
                                        .to_owned()
                                }
                                Some(_) => {
                                    "the shipped judge weights for the tuned encoder".to_owned()
                                }
                                None => "the shipped judge weights".to_owned(),
                            },
                        },
                    })
            }
        }
    }

    /// The cosine below which a pair is never the same request, so need
    /// not be judged: the cosine judge's threshold for it, the calibrated
    /// judge's candidate floor (whatever the words say, texts further
    /// apart than that are not one request), or its tuned candidate floor
    /// when its weights weigh the tuned encoder's cosine (which may lift
    /// the pair over the floor) ([`JudgeWeights::candidate_floor`]).
    pub fn candidate_floor(&self, cosine_threshold: f32) -> f32 {
        match self.kind {
            JudgeKind::Cosine => cosine_threshold,
            JudgeKind::Calibrated => self.weights.candidate_floor(),
        }
    }

    /// `text` as the judge reads it, from the texts it read lately when it
    /// is one of them.
    pub fn read(&self, text: &str) -> Arc<ReadText> {
        self.readings.read(text)
    }

    /// Which judge it is.
    pub fn kind(&self) -> JudgeKind {
        self.kind
    }

    /// Its weights (used by the calibrated judge only).
    pub fn weights(&self) -> &JudgeWeights {
        &self.weights
    }

    /// The score of a pair of `features`: its cosine for the cosine judge,
    /// its weights' score ([`JudgeWeights::score`]) for the calibrated one.
    pub fn score(&self, features: &Features) -> f32 {
        match self.kind {
            JudgeKind::Cosine => features.cosine,
            JudgeKind::Calibrated => self.weights.score(features),
        }
    }

    /// This judge's verdict on a pair of `features` that scored `score`
    /// against `threshold`, with no second opinion asked.
    pub fn verdict(&self, features: Features, score: f32, threshold: f32) -> Verdict {
        Verdict {
            judge: self.kind,
            same: score > threshold,
            score,
            threshold,
            candidate_floor: self.weights.cutoffs.candidate_floor,
            features,
            second_opinion: None,
        }
    }

    /// The default operating threshold: the configured cosine threshold
    /// for the cosine judge, the weights' own for the calibrated one.
    pub fn default_threshold(&self, cosine_threshold: f32) -> f32 {
        match self.kind {
            JudgeKind::Cosine => cosine_threshold,
            JudgeKind::Calibrated => self.weights.threshold,
        }
    }

    /// Judges `a` and `b`, whose embeddings' cosine is `cosine`, as far as
    /// that and their words allow ([`JudgeWeights::look`]).
    pub fn first_look(&self, a: &str, b: &str, cosine: f32, threshold: f32) -> FirstLook {
        let calibrated = self.kind == JudgeKind::Calibrated;
        let look = calibrated.then(|| {
            let (read_a, read_b) = (self.readings.read(a), self.readings.read(b));
            self.weights.look((&read_a, &read_b), (a, b), cosine)
        });
        // The tuned encoder is asked about every pair from its floor up:
        // its cosine weighs in the score, and lifts a pair below the
        // candidate floor over it when it reads the texts as nearer.
        let wants_tuned = calibrated && self.weights.wants_tuned_cosine(cosine);
        let Some(look) = look else {
            // The cosine judge reads no words.
            return FirstLook::Decided(self.pending(threshold, cosine, no_contrast()).finish(None));
        };
        let mut pending = self.pending(threshold, cosine, look.contrast);
        pending.known_residuals = look.known_residuals;
        pending.wants_tuned = wants_tuned;
        if look.same_words {
            // The same words (case, spacing and end punctuation aside): the
            // same request at any threshold below 1, whatever the weights.
            let mut verdict = pending.finish(Some(Residuals::SAME));
            verdict.score = 1.0;
            verdict.same = verdict.score > threshold;
            return FirstLook::Decided(verdict);
        }
        if let Some(residuals) = pending.known_residuals
            && !wants_tuned
        {
            return FirstLook::Decided(pending.finish(residuals));
        }
        pending.texts = (a.to_owned(), b.to_owned());
        pending.templates = look.templates;
        FirstLook::Pending(pending)
    }

    /// A pair of cosine `cosine` and contrast `contrast`, wanting nothing
    /// yet.
    fn pending(&self, threshold: f32, cosine: f32, contrast: Contrast) -> Pending {
        Pending {
            judge: self.clone(),
            threshold,
            features: Features {
                cosine,
                contrast,
                residuals: None,
                tuned_cosine: None,
            },
            known_residuals: Some(None),
            wants_tuned: false,
            texts: (String::new(), String::new()),
            templates: None,
        }
    }

    /// Judges `a` and `b` (their embeddings' cosine is `cosine`), embedding
    /// the residual texts with `service` when needed.
    pub async fn judge(
        &self,
        service: &EmbeddingService,
        a: &str,
        b: &str,
        cosine_ab: f32,
        threshold: f32,
    ) -> Result<Verdict> {
        // `a` is the earlier text, `b` the one judged against it.
        self.judge_many(service, b, &[(a, cosine_ab)], threshold)
            .await?
            .pop()
            .ok_or_else(|| SemanticError::Judge("the judge gave no verdict".into()))
    }

    /// Judges each earlier text of `earlier` (with its embeddings' cosine
    /// with `text`) against `text`, each pair as [`SameRequestJudge::judge`]
    /// judges it, with the residual texts of every pair that needs them
    /// embedded in one call to `service`: one inference for a detector's
    /// event, however many of its candidates need one. The verdicts are in
    /// `earlier`'s order.
    pub async fn judge_many(
        &self,
        service: &EmbeddingService,
        text: &str,
        earlier: &[(&str, f32)],
        threshold: f32,
    ) -> Result<Vec<Verdict>> {
        let looks: Vec<FirstLook> = earlier
            .iter()
            .map(|&(before, cosine)| self.first_look(before, text, cosine, threshold))
            .collect();
        let tuned_cosines = self.tuned_cosines(&looks).await?;
        let mut tuned_cosines = tuned_cosines.into_iter();
        // Each pending pair's residual texts and whole texts, and its
        // templates when they are compared: four or six a pair (the whole
        // texts are in the service's cache already).
        let residual_texts: Vec<(String, String)> = looks
            .iter()
            .filter_map(|look| match look {
                FirstLook::Pending(pending) if pending.needs_residuals() => {
                    Some(pending.residual_texts())
                }
                _ => None,
            })
            .collect();
        let mut wanted: Vec<&str> = Vec::with_capacity(residual_texts.len() * 6);
        let pending_texts = looks.iter().filter_map(|look| match look {
            FirstLook::Pending(pending) if pending.needs_residuals() => {
                Some((pending.texts(), pending.templates()))
            }
            _ => None,
        });
        for ((ra, rb), ((a, b), templates)) in residual_texts.iter().zip(pending_texts) {
            wanted.extend([ra.as_str(), rb.as_str(), a, b]);
            if let Some((ta, tb)) = templates {
                wanted.extend([ta, tb]);
            }
        }
        let vectors = if wanted.is_empty() {
            Vec::new()
        } else {
            service.embed_many(&wanted).await?
        };
        let mut vectors = vectors.iter();
        let verdicts = looks
            .into_iter()
            .map(|look| match look {
                FirstLook::Decided(verdict) => Ok(verdict),
                FirstLook::Pending(pending) => {
                    let tuned = if pending.needs_tuned_cosine() {
                        tuned_cosines.next()
                    } else {
                        None
                    };
                    if !pending.needs_residuals() {
                        return Ok(pending.finish_with(None, tuned));
                    }
                    let wanted = if pending.templates().is_some() { 6 } else { 4 };
                    let mine: Vec<&[f32]> = vectors.by_ref().take(wanted).map(|v| &v[..]).collect();
                    let residuals = match mine.as_slice() {
                        [ra, rb, a, b] => Some(Residuals::of((ra, rb), (a, b), None)),
                        [ra, rb, a, b, ta, tb] => {
                            Some(Residuals::of((ra, rb), (a, b), Some((ta, tb))))
                        }
                        _ => None,
                    }
                    .transpose()?;
                    Ok(pending.finish_with(residuals, tuned))
                }
            })
            .collect::<Result<Vec<Verdict>>>()?;
        let Some(reviewer) = &self.reviewer else {
            return Ok(verdicts);
        };
        // The second opinion on every pair it is wanted for, asked at
        // once: an event waits for the slowest answer, not their sum.
        let archive = self.archive.as_deref();
        let reviews = verdicts
            .into_iter()
            .zip(earlier)
            .map(|(verdict, &(before, _))| async move {
                if reviewer.wants(&verdict) {
                    reviewer.review(before, text, verdict, archive).await
                } else {
                    verdict
                }
            });
        Ok(futures_util::future::join_all(reviews).await)
    }
}

impl SameRequestJudge {
    /// Which of `earlier` (each an earlier text and its pinned cosine with
    /// `text`) can be the same request as `text`, in order: a pinned
    /// cosine at the candidate floor or over ([`JudgeWeights::is_candidate`]);
    /// with weights that weigh the tuned encoder's cosine, also a pinned
    /// one at the tuned candidate floor or over
    /// ([`JudgeWeights::wants_tuned_cosine`]) that the tuned encoder lifts
    /// over the floor. The tuned encoder reads only the texts of the pairs
    /// between the two floors (its service caches them): a detector then
    /// judges, words and residuals, only the pairs the floor does not rule
    /// out.
    pub async fn over_the_floor(&self, text: &str, earlier: &[(&str, f32)]) -> Result<Vec<bool>> {
        let weights = &self.weights;
        let mut over: Vec<bool> = earlier
            .iter()
            .map(|&(_, cosine)| weights.is_candidate(cosine))
            .collect();
        if self.kind != JudgeKind::Calibrated || !self.needs_tuned_encoder() {
            return Ok(over);
        }
        let between: Vec<usize> = earlier
            .iter()
            .enumerate()
            .filter(|&(_, &(_, cosine))| {
                weights.wants_tuned_cosine(cosine) && !weights.is_candidate(cosine)
            })
            .map(|(index, _)| index)
            .collect();
        if between.is_empty() {
            return Ok(over);
        }
        let Some(tuned) = &self.tuned else {
            return Err(self.missing_tuned_encoder());
        };
        let mut wanted: Vec<&str> = Vec::with_capacity(between.len() + 1);
        wanted.push(text);
        wanted.extend(between.iter().map(|&index| earlier[index].0));
        let vectors = tuned.embed_many(&wanted).await?;
        let Some((new, before)) = vectors.split_first() else {
            return Err(SemanticError::Judge(
                "the tuned encoder returned no vectors".into(),
            ));
        };
        for (&index, vector) in between.iter().zip(before) {
            over[index] = weights.is_candidate(cosine(new, vector)?);
        }
        Ok(over)
    }

    /// The error of weights that weigh `tuned_cosine` when the judge was not
    /// given the tuned encoder.
    fn missing_tuned_encoder(&self) -> SemanticError {
        SemanticError::Judge(format!(
            "the judge weights weigh tuned_cosine, but the tuned encoder ({}) was not loaded",
            self.weights
                .tuned_encoder_needed()
                .unwrap_or(crate::TUNED_MODEL_ID)
        ))
    }

    /// The tuned encoder's cosine of each pending look that wants it, in
    /// order: every text embedded in one call (the service's cache keeps
    /// them). An error when the weights need the tuned encoder and the
    /// judge was not given it.
    async fn tuned_cosines(&self, looks: &[FirstLook]) -> Result<Vec<f32>> {
        let wanted: Vec<&str> = looks
            .iter()
            .filter_map(|look| match look {
                FirstLook::Pending(pending) if pending.needs_tuned_cosine() => {
                    Some(pending.texts())
                }
                _ => None,
            })
            .flat_map(|(a, b)| [a, b])
            .collect();
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let Some(tuned) = &self.tuned else {
            return Err(self.missing_tuned_encoder());
        };
        let vectors = tuned.embed_many(&wanted).await?;
        vectors
            .chunks(2)
            .map(|pair| match pair {
                [a, b] => cosine(a, b),
                _ => Err(SemanticError::Judge(
                    "the tuned encoder returned an odd number of vectors".into(),
                )),
            })
            .collect()
    }
}

impl Pending {
    /// Whether the residual texts' (and templates') cosines are wanted:
    /// [`Pending::residual_texts`], [`Pending::templates`].
    pub fn needs_residuals(&self) -> bool {
        self.known_residuals.is_none()
    }

    /// Whether the tuned encoder's cosine of [`Pending::texts`] is wanted.
    pub fn needs_tuned_cosine(&self) -> bool {
        self.wants_tuned
    }

    /// The two texts judged.
    pub fn texts(&self) -> (&str, &str) {
        (&self.texts.0, &self.texts.1)
    }

    /// The two texts' templates, each with the words both name written
    /// as a placeholder ([`lexical::templates`]); `None` when the texts
    /// share too many words for templates to tell anything
    /// ([`TEMPLATE_JACCARD_CEILING`]).
    pub fn templates(&self) -> Option<(&str, &str)> {
        self.templates
            .as_ref()
            .map(|(a, b)| (a.as_str(), b.as_str()))
    }

    /// The two sides' differing words, each joined in order. A side with
    /// none of its own is its whole text: the other side's extra words are
    /// then compared with everything it asked ("the review comments"
    /// against "merge PR #233").
    pub fn residual_texts(&self) -> (String, String) {
        residual_texts(&self.features.contrast, self.texts())
    }

    /// The verdict, with the residual texts' cosines (`None`: not
    /// computed), and no tuned encoder's cosine.
    pub fn finish(self, residuals: Option<Residuals>) -> Verdict {
        self.finish_with(residuals, None)
    }

    /// The verdict, with the residual texts' cosines (ignored when the
    /// words settled them: [`Pending::needs_residuals`] is false) and the
    /// tuned encoder's cosine of the two texts (`None`: not computed).
    pub fn finish_with(
        mut self,
        residuals: Option<Residuals>,
        tuned_cosine: Option<f32>,
    ) -> Verdict {
        self.features.residuals = match self.known_residuals {
            Some(known) => known,
            None => residuals,
        };
        self.features.tuned_cosine = tuned_cosine;
        let score = self.judge.score(&self.features);
        self.judge.verdict(self.features, score, self.threshold)
    }
}

/// The contrast of the cosine judge, which reads no words.
fn no_contrast() -> Contrast {
    Contrast {
        report_vs_request: false,
        veto: None,
        only_a: Vec::new(),
        only_b: Vec::new(),
        word_jaccard: 0.0,
        intent_mismatch: false,
        related_cover: 0.0,
        synonyms: Vec::new(),
        adds_on_one_side: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Weights of this intercept and these weights, at threshold 0.5, with
    /// the shipped cut-offs.
    fn weights_of(bias: f32, weights: Vec<f32>) -> JudgeWeights {
        JudgeWeights {
            format: 1,
            model: "m".into(),
            fitted_on: String::new(),
            bias,
            weights,
            threshold: 0.5,
            tuned_encoder: None,
            cutoffs: Cutoffs::SHIPPED,
        }
    }

    #[test]
    fn the_judge_crate_knows_this_crate_s_tuned_encoders() {
        assert_eq!(loopguard_judge::MINILM_TUNED_ENCODER, crate::TUNED_MODEL_ID);
        assert_eq!(
            loopguard_judge::MPNET_TUNED_ENCODER,
            crate::MPNET_TUNED_MODEL_ID
        );
    }

    #[test]
    fn each_tuned_encoder_setting_picks_its_own_shipped_weights() {
        let read = |json| JudgeWeights::from_json(json).expect("shipped weights read");
        let (tuned, mpnet) = (read(TUNED_WEIGHTS_JSON), read(MPNET_WEIGHTS_JSON));
        assert_eq!(tuned.tuned_encoder_needed(), Some(crate::TUNED_MODEL_ID));
        assert_eq!(
            mpnet.tuned_encoder_needed(),
            Some(crate::MPNET_TUNED_MODEL_ID)
        );
        let mut similarity = SimilarityConfig::default();
        for (encoder, weights, key) in [
            (
                TunedEncoder::Off,
                read(DEFAULT_WEIGHTS_JSON),
                "the shipped judge weights",
            ),
            (
                TunedEncoder::MiniLm,
                tuned,
                "the shipped judge weights for the tuned encoder",
            ),
            (
                TunedEncoder::Mpnet,
                mpnet,
                "the shipped judge weights for the larger tuned encoder",
            ),
        ] {
            similarity.tuned_encoder = encoder;
            let judge = SameRequestJudge::from_config(&similarity).expect("shipped");
            assert_eq!(judge.weights(), &weights, "{encoder}");
            assert_eq!(judge.needs_tuned_encoder(), encoder.is_on(), "{encoder}");
            assert_eq!(judge.threshold_for(&similarity, None).key, key);
        }
        // The cosine judge needs no encoder whatever the setting.
        similarity.judge = JudgeKind::Cosine;
        let judge = SameRequestJudge::from_config(&similarity).expect("cosine");
        assert_eq!(judge.tuned_encoder_needed(), None);
    }

    #[test]
    fn templates_are_compared_only_for_texts_that_share_less_than_half_their_words() {
        let judge = SameRequestJudge::calibrated(JudgeWeights::shipped());
        let FirstLook::Pending(apart) = judge.first_look(
            "Draft the Q3 board deck.",
            "Present the Q3 board deck once the numbers are final.",
            0.83,
            0.5,
        ) else {
            panic!("needs the residual");
        };
        assert!(apart.features.contrast.word_jaccard < TEMPLATE_JACCARD_CEILING);
        assert_eq!(
            apart.templates(),
            Some((
                "draft the X X X",
                "present the X X X once the numbers are final"
            ))
        );
        let FirstLook::Pending(close) = judge.first_look(
            "Per the runbook the on-call team owns the pager; it's yours.",
            "The on-call team owns the pager per the runbook. Over to you.",
            0.9,
            0.5,
        ) else {
            panic!("needs the residual");
        };
        assert!(close.features.contrast.word_jaccard >= TEMPLATE_JACCARD_CEILING);
        assert_eq!(close.templates(), None);
        let unit = [1.0f32, 0.0];
        let residuals = Residuals::of((&unit, &unit), (&unit, &unit), None).expect("cosines");
        assert_eq!(residuals.templates, 1.0);
    }

    #[test]
    fn a_text_is_read_once_and_the_readings_kept_are_bounded_by_their_bytes() {
        let readings = Readings::new();
        let first = readings.read("Review PR #412 for security issues");
        let again = readings.read("Review PR #412 for security issues");
        assert!(Arc::ptr_eq(&first, &again), "read twice");
        // Texts of 4 KB (the most of a text the model reads) until the
        // kept bytes have been over the budget several times.
        let long = |n: usize| format!("{n} {}", "review the payments code ".repeat(200));
        let count = 4 * READINGS_TEXT_BYTES / crate::EMBEDDING_INPUT_BYTES;
        for n in 0..count {
            readings.read(&long(n));
        }
        let (kept, bytes) = {
            let kept = readings.0.lock();
            (kept.readings.len(), kept.bytes)
        };
        assert!(bytes <= READINGS_TEXT_BYTES, "{bytes} bytes kept");
        assert!(kept < count, "{kept} of {count} kept");
        let summed: usize = readings
            .0
            .lock()
            .readings
            .iter()
            .map(|(text, _)| text.len())
            .sum();
        assert_eq!(summed, bytes);
        // The newest is kept, the first is gone.
        let newest = readings.read(&long(count - 1));
        assert!(readings.0.lock().readings.len() == kept, "{newest:?}");
        assert!(
            readings
                .0
                .lock()
                .readings
                .peek("Review PR #412 for security issues")
                .is_none()
        );
    }

    #[test]
    fn texts_below_the_candidate_floor_score_zero() {
        let judge = SameRequestJudge::calibrated(weights_of(20.0, vec![0.0; FEATURES]));
        let (just_below, just_above) = (CANDIDATE_FLOOR - 0.01, CANDIDATE_FLOOR + 0.01);
        let below =
            match judge.first_look("restart nginx", "write the hiring plan", just_below, 0.5) {
                FirstLook::Decided(verdict) => verdict,
                FirstLook::Pending(pending) => pending.finish(None),
            };
        assert_eq!((below.same, below.score), (false, 0.0), "{below:?}");
        assert_eq!(
            below.reason(),
            format!(
                "too far apart to be one request (cosine {just_below:.2} below {CANDIDATE_FLOOR:.2})"
            )
        );
        let above =
            match judge.first_look("restart nginx", "write the hiring plan", just_above, 0.5) {
                FirstLook::Decided(verdict) => verdict,
                FirstLook::Pending(pending) => pending.finish(Some(Residuals::SAME)),
            };
        assert!(above.same && above.score > 0.99, "{above:?}");
    }

    #[test]
    fn the_cosine_judge_is_the_strict_threshold() {
        let judge = SameRequestJudge::cosine();
        let FirstLook::Decided(above) = judge.first_look("a", "b", 0.86, 0.85) else {
            panic!("the cosine judge decides at once");
        };
        assert!(above.same);
        let FirstLook::Decided(at) = judge.first_look("a", "b", 0.85, 0.85) else {
            panic!("decided");
        };
        assert!(!at.same);
        assert_eq!(at.reason(), "cosine 0.85 not above the threshold 0.85");
    }

    #[test]
    fn the_same_words_are_the_same_request_at_any_threshold_below_one() {
        let judge = SameRequestJudge::calibrated(weights_of(-20.0, vec![0.0; FEATURE_NAMES.len()]));
        let FirstLook::Decided(verdict) = judge.first_look(
            "Merge the  docs branch.",
            "merge the docs branch",
            0.99,
            0.99,
        ) else {
            panic!("decided at once");
        };
        assert!(verdict.same, "{verdict:?}");
        assert_eq!(verdict.score, 1.0);
        let FirstLook::Decided(at_one) = judge.first_look("a b c", "A B C", 1.0, 1.0) else {
            panic!("decided at once");
        };
        assert!(!at_one.same, "a threshold is strictly exceeded");
        // One word more is no longer the same text: these weights say no.
        let verdict = match judge.first_look(
            "Merge the docs branch",
            "Merge the docs branch after the review",
            0.97,
            0.5,
        ) {
            FirstLook::Decided(verdict) => verdict,
            FirstLook::Pending(pending) => pending.finish(Some(Residuals::SAME)),
        };
        assert!(!verdict.same, "{verdict:?}");
    }

    /// Weights that weigh only the cosine and the tuned encoder's cosine.
    fn tuned_weights() -> JudgeWeights {
        let mut weights = vec![0.0; FEATURES];
        weights[0] = 1.0;
        weights[TUNED_FEATURE] = 8.0;
        JudgeWeights {
            tuned_encoder: Some(crate::TUNED_MODEL_ID.to_owned()),
            ..weights_of(-8.0, weights)
        }
    }

    #[test]
    fn with_the_tuned_encoder_the_floor_is_on_the_nearer_cosine() {
        let judge = SameRequestJudge::calibrated(tuned_weights());
        assert_eq!(judge.candidate_floor(0.85), TUNED_CANDIDATE_FLOOR);
        let shipped = SameRequestJudge::calibrated(JudgeWeights::shipped());
        assert_eq!(shipped.candidate_floor(0.85), CANDIDATE_FLOOR);
        // Between the two floors the tuned encoder is asked, and lifts a
        // rewording it reads as one over the floor.
        let (a, b) = (
            "migrating the cron jobs to managed schedulers",
            "moving our scheduled tasks onto a hosted scheduler",
        );
        let look = |cosine| match judge.first_look(a, b, cosine, 0.5) {
            FirstLook::Pending(pending) => pending,
            FirstLook::Decided(verdict) => panic!("the tuned cosine is wanted: {verdict:?}"),
        };
        assert!(look(0.4).needs_tuned_cosine());
        let lifted = look(0.4).finish_with(None, Some(0.99));
        assert!(lifted.same && lifted.score > 0.5, "{lifted:?}");
        let far = look(0.4).finish_with(None, Some(0.45));
        assert_eq!((far.same, far.score), (false, 0.0), "{far:?}");
        assert_eq!(
            far.reason(),
            "too far apart to be one request (cosine 0.40, tuned 0.45, both below 0.50)"
        );
        // Below the tuned floor nothing is asked.
        let FirstLook::Decided(below) = judge.first_look(a, b, TUNED_CANDIDATE_FLOOR - 0.01, 0.5)
        else {
            panic!("decided below the tuned floor");
        };
        assert_eq!((below.same, below.score), (false, 0.0));
    }

    #[tokio::test]
    async fn a_weights_file_s_candidate_floor_is_the_judge_s() {
        let lower =
            DEFAULT_WEIGHTS_JSON.replace("\"candidate_floor\": 0.5", "\"candidate_floor\": 0.4");
        assert_ne!(lower, DEFAULT_WEIGHTS_JSON);
        let file = tempfile::NamedTempFile::new().expect("a temporary file");
        std::fs::write(file.path(), lower).expect("written");
        let similarity = SimilarityConfig {
            judge_weights: Some(file.path().to_path_buf()),
            ..SimilarityConfig::default()
        };
        let judge = SameRequestJudge::from_config(&similarity).expect("the file reads");
        let shipped = SameRequestJudge::calibrated(JudgeWeights::shipped());
        assert_eq!(judge.candidate_floor(0.85), 0.4);
        assert_eq!(shipped.candidate_floor(0.85), CANDIDATE_FLOOR);
        let verdict = |judge: &SameRequestJudge, cosine: f32| match judge.first_look(
            "merge the docs branch",
            "merge the docs branch too",
            cosine,
            0.5,
        ) {
            FirstLook::Decided(verdict) => verdict,
            FirstLook::Pending(pending) => pending.finish(Some(Residuals::SAME)),
        };
        // Between the two floors: scored with the file's, 0 with the shipped.
        assert_eq!(verdict(&shipped, 0.45).score, 0.0);
        assert!(verdict(&judge, 0.45).score > 0.0);
        assert_eq!(
            verdict(&judge, 0.35).reason(),
            "too far apart to be one request (cosine 0.35 below 0.40)"
        );
        // A detector's candidates are those at the file's floor or over.
        let texts = [("merge the docs branch too", 0.45), ("book a flight", 0.35)];
        let over = judge
            .over_the_floor("merge the docs branch", &texts)
            .await
            .expect("read");
        assert_eq!(over, [true, false]);
    }

    #[test]
    fn the_tuned_cosine_is_wanted_for_every_candidate_but_the_same_words() {
        let judge = SameRequestJudge::calibrated(tuned_weights());
        assert!(judge.needs_tuned_encoder());
        // A veto settles the residuals, not the score: the tuned cosine is
        // still wanted.
        let FirstLook::Pending(vetoed) =
            judge.first_look("Review PR #412", "Review PR #418", 0.95, 0.5)
        else {
            panic!("the tuned cosine is wanted");
        };
        assert!(vetoed.needs_tuned_cosine());
        assert!(!vetoed.needs_residuals());
        assert_eq!(vetoed.texts(), ("Review PR #412", "Review PR #418"));
        let verdict = vetoed.finish_with(Some(Residuals::SAME), Some(0.1));
        assert_eq!(
            verdict.features.residuals, None,
            "the veto's residuals stand"
        );
        assert_eq!(verdict.features.tuned_cosine, Some(0.1));
        assert!(!verdict.same, "{verdict:?}");
        // Below the candidate floor, and for the same words, nothing is.
        assert!(matches!(
            judge.first_look("Review PR #412", "Book a flight", 0.2, 0.5),
            FirstLook::Decided(_)
        ));
        assert!(matches!(
            judge.first_look("Review PR #412", "review PR #412.", 0.99, 0.5),
            FirstLook::Decided(_)
        ));
        // A rewording wants both.
        let FirstLook::Pending(reworded) = judge.first_look(
            "Can you speed up the checkout query?",
            "Could you optimize the checkout query?",
            0.9,
            0.5,
        ) else {
            panic!("pending");
        };
        assert!(reworded.needs_tuned_cosine() && reworded.needs_residuals());
        let verdict = reworded.finish_with(Some(Residuals::SAME), Some(0.9));
        assert!(verdict.same, "{verdict:?}");
        // The shipped weights never want it.
        let shipped = SameRequestJudge::calibrated(JudgeWeights::shipped());
        assert!(matches!(
            shipped.first_look("Review PR #412", "Review PR #418", 0.95, 0.5),
            FirstLook::Decided(_)
        ));
    }

    /// Two "topics" by a word, for the services of the tests below (no
    /// model: the plumbing is what is tested).
    /// A toy encoder: the texts containing its word at (1, 0), every other
    /// text at its second field.
    struct Toy(&'static str, [f32; 2]);

    impl crate::Embedder for Toy {
        fn model_id(&self) -> &str {
            "toy"
        }
        fn dimension(&self) -> usize {
            2
        }
        fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
            Ok(texts
                .iter()
                .map(|t| {
                    if t.contains(self.0) {
                        vec![1.0, 0.0]
                    } else {
                        self.1.to_vec()
                    }
                })
                .collect())
        }
    }

    #[tokio::test]
    async fn the_tuned_encoder_is_asked_once_a_text_and_its_absence_is_an_error() {
        let service = EmbeddingService::new(Arc::new(Toy("zzz", [0.6, 0.8]))).expect("service");
        let tuned =
            Arc::new(EmbeddingService::new(Arc::new(Toy("#418", [0.6, 0.8]))).expect("service"));
        let without = SameRequestJudge::calibrated(tuned_weights());
        let err = without
            .judge(&service, "Review PR #412", "Review PR #418", 0.95, 0.5)
            .await
            .expect_err("no tuned encoder");
        assert!(err.to_string().contains("tuned encoder"), "{err}");
        let judge = without.with_tuned_encoder(Arc::clone(&tuned));
        let verdicts = judge
            .judge_many(
                &service,
                "Review PR #418",
                &[
                    ("Review PR #412", 0.95),
                    ("Review PR #418 again", 0.97),
                    ("Book it", 0.1),
                ],
                0.5,
            )
            .await
            .expect("judged");
        // #412 against #418: the toy tuned encoder puts them 0.6 apart.
        assert!((verdicts[0].features.tuned_cosine.expect("asked") - 0.6).abs() < 1e-6);
        assert!(!verdicts[0].same);
        assert!((verdicts[1].features.tuned_cosine.expect("asked") - 1.0).abs() < 1e-6);
        assert!(verdicts[1].same, "{:?}", verdicts[1]);
        assert_eq!(verdicts[2].features.tuned_cosine, None, "below the floor");
        // Three distinct texts were embedded by the tuned encoder, once each.
        assert_eq!(tuned.stats().texts_embedded, 3);
    }

    #[tokio::test]
    async fn between_the_floors_the_tuned_encoder_says_which_pairs_are_candidates() {
        let tuned = Arc::new(
            EmbeddingService::new(Arc::new(Toy("scheduler", [0.0, 1.0]))).expect("service"),
        );
        let text = "moving our scheduled tasks onto a hosted scheduler";
        let earlier = [
            ("migrating the cron jobs to managed schedulers", 0.4),
            ("Book a flight to Oslo", 0.4),
            ("Write the plan", TUNED_CANDIDATE_FLOOR - 0.01),
            ("Restart redis", CANDIDATE_FLOOR),
        ];
        let without = SameRequestJudge::calibrated(tuned_weights());
        let err = without
            .over_the_floor(text, &earlier)
            .await
            .expect_err("no tuned encoder");
        assert!(err.to_string().contains("tuned encoder"), "{err}");
        let judge = without.with_tuned_encoder(Arc::clone(&tuned));
        let over = judge.over_the_floor(text, &earlier).await.expect("read");
        assert_eq!(over, [true, false, false, true]);
        // The new text and the two between the floors, nothing else.
        assert_eq!(tuned.stats().texts_embedded, 3);
        // Weights that do not weigh the tuned cosine: the pinned floor
        // alone, and no encoder asked.
        let shipped = SameRequestJudge::calibrated(JudgeWeights::shipped());
        let over = shipped.over_the_floor(text, &earlier).await.expect("read");
        assert_eq!(over, [false, false, false, true]);
    }

    #[test]
    fn a_veto_decides_without_a_residual_and_names_the_difference() {
        let judge = SameRequestJudge::calibrated(weights_of(
            -2.0,
            vec![
                6.0, -8.0, 2.0, -1.0, -2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
            ],
        ));
        let FirstLook::Decided(verdict) =
            judge.first_look("Review PR #412", "Review PR #418", 0.95, 0.5)
        else {
            panic!("a veto decides at once");
        };
        assert!(!verdict.same, "{verdict:?}");
        assert!(
            verdict
                .reason()
                .starts_with("different numbers (412 vs 418)"),
            "{}",
            verdict.reason()
        );
        // A rewording needs the residual; with a high one it is the same.
        let FirstLook::Pending(pending) = judge.first_look(
            "Can you speed up the checkout query?",
            "Could you optimize the checkout query?",
            0.9,
            0.5,
        ) else {
            panic!("needs the residual");
        };
        assert_eq!(
            pending.residual_texts(),
            ("speed up".to_owned(), "optimize".to_owned())
        );
        let verdict = pending.finish(Some(Residuals {
            between: 0.8,
            a_to_b: 0.8,
            b_to_a: 0.8,
            templates: 0.8,
        }));
        assert!(verdict.same, "{verdict:?}");
        assert!(
            verdict.reason().starts_with("same request (score"),
            "{}",
            verdict.reason()
        );
    }
}
