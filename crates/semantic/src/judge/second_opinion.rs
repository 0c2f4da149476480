//! A second opinion on the pairs the calibrated judge is unsure of.
//!
//! Most of the calibrated judge's mistakes are pairs it scores near its
//! threshold, or reworded repeats that a veto (an identifier written two
//! ways, a synonym read as a contrast) sends low while their cosine stays
//! high (`docs/tuning.md`). A [`SecondOpinion`], an LLM by
//! default ([`LlmSecondOpinion`], cargo feature `llm`), is asked about
//! those pairs only ([`SecondOpinionPolicy::wants`]), and its answer
//! decides them. Every other pair never reaches it.
//!
//! Nothing is lost when it fails: an unreachable server, a timeout or a
//! garbled answer leaves the judge's own verdict standing, and the
//! verdict's reason says so. After a failure it is not asked again for a
//! cooldown, so a server that is down does not cost every event its
//! timeout. Answers are kept by the pair of texts, so a task that repeats
//! itself asks once; with an [`AnswerArchive`] (the engine's durable
//! store, `SameRequestJudge::with_answers_kept_in`) they outlive the
//! process and are shared by the engines that share the store, so a
//! restart or another replica decides the pair as it was decided.

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use loopguard_config::SecondOpinionConfig;
use parking_lot::Mutex;
use sha2::{Digest, Sha256};

use super::Verdict;

/// A second opinion's answer about one pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opinion {
    /// The same request?
    pub same: bool,
    /// Why, in the answerer's words (may be empty).
    pub reason: String,
}

/// Why a second opinion gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct OpinionError(pub String);

/// Anything that can tell whether two texts are one request: an LLM
/// ([`LlmSecondOpinion`]), a team's own classifier, a human queue.
#[async_trait]
pub trait SecondOpinion: Send + Sync + std::fmt::Debug {
    /// Is `later` the same request as `earlier` (would anything be lost if
    /// it were dropped because `earlier` was already answered)?
    async fn same_request(&self, earlier: &str, later: &str) -> Result<Opinion, OpinionError>;

    /// Who answers, for a reason: "model qwen2.5-7b-instruct".
    fn describe(&self) -> String;

    /// What makes its answers its own: who answers and how it is asked.
    /// Part of the key its answers are kept under, so another model or
    /// other instructions never reuse them. Default: [`describe`].
    ///
    /// [`describe`]: SecondOpinion::describe
    fn identity(&self) -> String {
        self.describe()
    }
}

/// Where a second opinion's answers are kept beyond the judge's memory,
/// by a key of who answers and the two texts ([`AnswerArchive::keep`]):
/// the engine's durable store (`loopguard_semantic::StoreAnswers`), or a
/// team's own.
#[async_trait]
pub trait AnswerArchive: Send + Sync + std::fmt::Debug {
    /// The answer kept under `key`, and who gave it, if one is kept.
    async fn recall(&self, key: &str) -> Result<Option<(String, Opinion)>, OpinionError>;

    /// Keeps `opinion` (given by `by`) under `key` unless an answer is
    /// kept there already, and returns the one kept: the first answer
    /// wins, so judges that share the archive decide alike.
    async fn keep(&self, key: &str, by: &str, opinion: &Opinion) -> Result<Opinion, OpinionError>;
}

/// Which pairs a [`SecondOpinion`] hears, and how it is kept
/// (`[similarity.second_opinion]`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SecondOpinionPolicy {
    /// The lowest judge score asked about.
    pub band_low: f32,
    /// The highest judge score asked about.
    pub band_high: f32,
    /// A vetoed pair is asked about when its cosine is strictly above
    /// this (1 by default: none is).
    pub vetoed_cosine: f32,
    /// After a failure, how long before it is asked again.
    pub cooldown: Duration,
    /// Answers kept, by the pair of texts.
    pub cache_capacity: NonZeroUsize,
}

impl Default for SecondOpinionPolicy {
    fn default() -> Self {
        SecondOpinionPolicy::from_config(&SecondOpinionConfig::default())
    }
}

impl SecondOpinionPolicy {
    /// The policy of `[similarity.second_opinion]` (whether it is enabled
    /// is the caller's question).
    pub fn from_config(config: &SecondOpinionConfig) -> SecondOpinionPolicy {
        SecondOpinionPolicy {
            band_low: config.band_low,
            band_high: config.band_high,
            vetoed_cosine: config.vetoed_cosine,
            cooldown: Duration::from_secs(config.cooldown_secs),
            cache_capacity: NonZeroUsize::new(config.cache_capacity).unwrap_or(NonZeroUsize::MIN),
        }
    }

    /// Whether the calibrated judge's `verdict` is unsure enough to ask
    /// about: its score inside the band, or a veto on texts whose cosine
    /// is above [`SecondOpinionPolicy::vetoed_cosine`]. Never a pair
    /// below the judge's candidate floor, nor the cosine judge's verdicts.
    pub fn wants(&self, verdict: &Verdict) -> bool {
        if verdict.judge != super::JudgeKind::Calibrated
            || verdict.features.nearest_cosine() < verdict.candidate_floor
        {
            return false;
        }
        let in_band = (self.band_low..=self.band_high).contains(&verdict.score);
        let close_but_vetoed = verdict.features.contrast.veto.is_some()
            && verdict.features.cosine > self.vetoed_cosine;
        in_band || close_but_vetoed
    }
}

/// What a second opinion did about one verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecondOpinionOutcome {
    /// It answered, and its answer decided.
    Answered {
        /// Its answer.
        opinion: Opinion,
        /// What the judge itself said (the same request?).
        judge_same: bool,
        /// Who answered ([`SecondOpinion::describe`]).
        by: String,
        /// Whether the answer came from the cache of earlier answers.
        cached: bool,
    },
    /// It gave no answer (or was not asked, cooling down after a
    /// failure): the judge's own verdict stands.
    Failed {
        /// What went wrong.
        error: String,
        /// Who was asked.
        by: String,
    },
}

/// How often a judge's second opinion was needed and how it went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SecondOpinionStats {
    /// Verdicts looked at (every calibrated verdict of a judge with a
    /// second opinion).
    pub verdicts: u64,
    /// Of those, the ones it was wanted for.
    pub wanted: u64,
    /// Answers asked for and given.
    pub answered: u64,
    /// Answers taken from the cache (in memory or, counted in
    /// `recalled` too, the archive).
    pub cached: u64,
    /// Of the cached answers, those read from the [`AnswerArchive`].
    pub recalled: u64,
    /// Reads from and writes to the archive that failed (the pair was
    /// asked, or its answer used, all the same).
    pub archive_failed: u64,
    /// Asked and failed.
    pub failed: u64,
    /// Not asked: cooling down after a failure.
    pub skipped: u64,
    /// Answers that turned the judge's verdict over.
    pub overturned: u64,
}

/// A second opinion as a judge uses it: the policy, the answers kept, the
/// cooldown after a failure, and the counts.
#[derive(Debug)]
pub(crate) struct Reviewer {
    opinion: Arc<dyn SecondOpinion>,
    /// [`SecondOpinion::identity`], read once: part of every key.
    identity: String,
    policy: SecondOpinionPolicy,
    answers: Mutex<lru::LruCache<[u8; 32], Opinion>>,
    /// When it last failed, and how.
    last_failure: Mutex<Option<(Instant, String)>>,
    counts: Counts,
}

#[derive(Debug, Default)]
struct Counts {
    verdicts: AtomicU64,
    wanted: AtomicU64,
    answered: AtomicU64,
    cached: AtomicU64,
    recalled: AtomicU64,
    archive_failed: AtomicU64,
    failed: AtomicU64,
    skipped: AtomicU64,
    overturned: AtomicU64,
}

impl Reviewer {
    pub(crate) fn new(opinion: Arc<dyn SecondOpinion>, policy: SecondOpinionPolicy) -> Reviewer {
        Reviewer {
            identity: opinion.identity(),
            opinion,
            policy,
            answers: Mutex::new(lru::LruCache::new(policy.cache_capacity)),
            last_failure: Mutex::new(None),
            counts: Counts::default(),
        }
    }

    pub(crate) fn policy(&self) -> &SecondOpinionPolicy {
        &self.policy
    }

    pub(crate) fn describe(&self) -> String {
        self.opinion.describe()
    }

    pub(crate) fn stats(&self) -> SecondOpinionStats {
        let read = |count: &AtomicU64| count.load(Ordering::Relaxed);
        SecondOpinionStats {
            verdicts: read(&self.counts.verdicts),
            wanted: read(&self.counts.wanted),
            answered: read(&self.counts.answered),
            cached: read(&self.counts.cached),
            recalled: read(&self.counts.recalled),
            archive_failed: read(&self.counts.archive_failed),
            failed: read(&self.counts.failed),
            skipped: read(&self.counts.skipped),
            overturned: read(&self.counts.overturned),
        }
    }

    /// Whether `verdict` is one to ask about; counts it.
    pub(crate) fn wants(&self, verdict: &Verdict) -> bool {
        if verdict.judge != super::JudgeKind::Calibrated {
            return false;
        }
        self.counts.verdicts.fetch_add(1, Ordering::Relaxed);
        let wanted = self.policy.wants(verdict);
        if wanted {
            self.counts.wanted.fetch_add(1, Ordering::Relaxed);
        }
        wanted
    }

    /// `verdict` on `earlier` and `later`, decided by the second opinion
    /// when it answers (the caller has checked [`Reviewer::wants`]). An
    /// answer is looked for in memory, then in `archive`, and only then
    /// asked for; a new answer is kept in both.
    pub(crate) async fn review(
        &self,
        earlier: &str,
        later: &str,
        mut verdict: Verdict,
        archive: Option<&dyn AnswerArchive>,
    ) -> Verdict {
        let earlier = crate::embedding_input(earlier);
        let later = crate::embedding_input(later);
        let key = pair_key(&self.identity, earlier, later);
        let mut by = self.opinion.describe();
        let mut kept = self.answers.lock().get(&key).cloned();
        if kept.is_none()
            && let Some(archive) = archive
        {
            match archive.recall(&hex(&key)).await {
                Ok(Some((answered_by, opinion))) => {
                    self.counts.recalled.fetch_add(1, Ordering::Relaxed);
                    self.answers.lock().put(key, opinion.clone());
                    by = answered_by;
                    kept = Some(opinion);
                }
                Ok(None) => {}
                Err(error) => {
                    self.counts.archive_failed.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(error = %error,
                        "cannot read kept second opinions; the pair is asked");
                }
            }
        }
        let (opinion, cached) = match kept {
            Some(opinion) => {
                self.counts.cached.fetch_add(1, Ordering::Relaxed);
                (opinion, true)
            }
            None => {
                if let Some(error) = self.cooling_down() {
                    self.counts.skipped.fetch_add(1, Ordering::Relaxed);
                    verdict.second_opinion = Some(SecondOpinionOutcome::Failed { error, by });
                    return verdict;
                }
                match self.opinion.same_request(earlier, later).await {
                    Ok(opinion) => {
                        self.counts.answered.fetch_add(1, Ordering::Relaxed);
                        let opinion = self.keep(archive, &key, &by, opinion).await;
                        self.answers.lock().put(key, opinion.clone());
                        (opinion, false)
                    }
                    Err(error) => {
                        self.counts.failed.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(by = %by, error = %error,
                            "same-request second opinion failed; the judge's verdict stands");
                        *self.last_failure.lock() = Some((Instant::now(), error.0.clone()));
                        verdict.second_opinion =
                            Some(SecondOpinionOutcome::Failed { error: error.0, by });
                        return verdict;
                    }
                }
            }
        };
        if opinion.same != verdict.same {
            self.counts.overturned.fetch_add(1, Ordering::Relaxed);
        }
        let judge_same = verdict.same;
        verdict.same = opinion.same;
        verdict.second_opinion = Some(SecondOpinionOutcome::Answered {
            opinion,
            judge_same,
            by,
            cached,
        });
        verdict
    }

    /// Keeps a new answer in `archive`; the one kept there first when
    /// another judge answered first. When the archive fails, the answer
    /// is used all the same (and kept in memory only).
    async fn keep(
        &self,
        archive: Option<&dyn AnswerArchive>,
        key: &[u8; 32],
        by: &str,
        opinion: Opinion,
    ) -> Opinion {
        let Some(archive) = archive else {
            return opinion;
        };
        match archive.keep(&hex(key), by, &opinion).await {
            Ok(kept) => kept,
            Err(error) => {
                self.counts.archive_failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %error,
                    "cannot keep a second opinion; it is used, and kept in memory only");
                opinion
            }
        }
    }

    /// Why it is not asked now: it failed less than the cooldown ago.
    fn cooling_down(&self) -> Option<String> {
        let last = self.last_failure.lock();
        let (when, error) = last.as_ref()?;
        let since = when.elapsed();
        (since < self.policy.cooldown).then(|| {
            format!(
                "not asked: it failed {} s ago ({error}); asked again after {} s",
                since.as_secs(),
                self.policy.cooldown.as_secs()
            )
        })
    }
}

/// The answers' key: who answers ([`SecondOpinion::identity`]) and the
/// two texts in order, each with its length.
fn pair_key(identity: &str, earlier: &str, later: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for text in [identity, earlier, later] {
        hasher.update((text.len() as u64).to_le_bytes());
        hasher.update(text.as_bytes());
    }
    hasher.finalize().into()
}

/// A key as an archive holds it: 64 lowercase hex digits.
fn hex(key: &[u8; 32]) -> String {
    use std::fmt::Write;
    key.iter().fold(String::with_capacity(64), |mut out, byte| {
        let _ = write!(out, "{byte:02x}");
        out
    })
}

#[cfg(feature = "llm")]
pub use self::llm::{LlmSecondOpinion, SAME_REQUEST_PROMPT};

#[cfg(feature = "llm")]
mod llm {
    use async_trait::async_trait;
    use loopguard_llm_client::{ChatClient, LlmError, LlmSettings, MAX_BODY_BYTES, truncate};
    use serde::Deserialize;

    use super::{Opinion, OpinionError, SecondOpinion};

    /// Longest reason kept from an answer, in bytes.
    const MAX_REASON_BYTES: usize = 300;

    /// The instructions the LLM gets: the deciding question of
    /// `data/pairs/README.md` and the strict answer format.
    pub const SAME_REQUEST_PROMPT: &str = "You decide whether two messages sent to an AI agent \
ask for the same work. The deciding question: would anything be lost if the second message \
were dropped because the first one was already answered? \
Nothing lost: the same request (\"same\": true). That includes a repeat in other words, a \
synonym, politeness, \"again\", more urgency, an identifier or number written another way \
(\"PR 412\" and \"#412\", \"prod\" and \"production\"), or context that asks nothing new. \
Something lost: a different request (\"same\": false). That includes another object, file, \
identifier, number, environment, version, person or date; the opposite direction or swapped \
roles; another action or aspect on the same object (review it vs speed it up); a report of \
work done or an answer, rather than the request; a request that adds a step. \
Answer with exactly one JSON object and nothing else: \
{\"same\": true | false, \"reason\": \"<one short sentence>\"}.";

    /// A [`SecondOpinion`] from an LLM on any OpenAI-compatible
    /// chat-completions server (`[llm]`), asked with
    /// [`SAME_REQUEST_PROMPT`] at temperature 0 for
    /// `{"same": true | false, "reason": "..."}`.
    #[derive(Debug, Clone)]
    pub struct LlmSecondOpinion {
        client: ChatClient,
    }

    /// The answer asked for; other fields are ignored (small models add
    /// some).
    #[derive(Deserialize)]
    struct Answer {
        same: bool,
        #[serde(default)]
        reason: String,
    }

    impl LlmSecondOpinion {
        /// A second opinion from the server and model of `settings`.
        pub fn new(settings: LlmSettings) -> Result<LlmSecondOpinion, LlmError> {
            Ok(LlmSecondOpinion {
                client: ChatClient::new(settings)?,
            })
        }

        /// The settings it asks with.
        pub fn settings(&self) -> &LlmSettings {
            self.client.settings()
        }
    }

    #[async_trait]
    impl SecondOpinion for LlmSecondOpinion {
        async fn same_request(&self, earlier: &str, later: &str) -> Result<Opinion, OpinionError> {
            let question = question(earlier, later);
            let content = self
                .client
                .ask(SAME_REQUEST_PROMPT, &question)
                .await
                .map_err(|err| OpinionError(err.to_string()))?;
            parse_content(&content)
        }

        fn describe(&self) -> String {
            format!("LLM {}", self.settings().model)
        }

        /// The model and the instructions: a new prompt asks again.
        fn identity(&self) -> String {
            format!("{}\n{SAME_REQUEST_PROMPT}", self.describe())
        }
    }

    /// The user message: the two texts, each as a JSON string (quotes and
    /// newlines inside a text cannot end it early).
    pub(super) fn question(earlier: &str, later: &str) -> String {
        let quote = |text: &str| serde_json::Value::from(text).to_string();
        format!(
            "First message: {}\nSecond message: {}\nDo they ask for the same work?",
            quote(earlier),
            quote(later)
        )
    }

    /// Reads `{"same": bool, "reason": "..."}` from the message content,
    /// inside a Markdown code fence or not.
    pub(super) fn parse_content(content: &str) -> Result<Opinion, OpinionError> {
        let trimmed = content.trim();
        let unfenced = trimmed
            .strip_prefix("```json")
            .or_else(|| trimmed.strip_prefix("```"))
            .and_then(|rest| rest.strip_suffix("```"))
            .unwrap_or(trimmed)
            .trim();
        let answer: Answer = serde_json::from_str(unfenced).map_err(|err| {
            OpinionError(format!(
                "unusable answer: the content is not {{\"same\": true|false, \"reason\"}} JSON \
                 ({err}): {:?}",
                truncate(content, MAX_BODY_BYTES)
            ))
        })?;
        Ok(Opinion {
            same: answer.same,
            reason: truncate(answer.reason.trim(), MAX_REASON_BYTES).to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_ordered_and_unambiguous() {
        assert_eq!(pair_key("m", "a", "b"), pair_key("m", "a", "b"));
        assert_ne!(pair_key("m", "a", "b"), pair_key("m", "b", "a"));
        assert_ne!(pair_key("m", "ab", "c"), pair_key("m", "a", "bc"));
        assert_ne!(pair_key("m", "a", "b"), pair_key("n", "a", "b"));
        let key = hex(&pair_key("m", "a", "b"));
        assert_eq!(key.len(), 64);
        assert!(
            key.bytes()
                .all(|byte| byte.is_ascii_hexdigit() && !byte.is_ascii_uppercase())
        );
    }

    #[cfg(feature = "llm")]
    #[test]
    fn answers_parse_with_or_without_a_fence() {
        for content in [
            r#"{"same": true, "reason": " a rewording "}"#,
            "```json\n{\"same\": true, \"reason\": \"a rewording\"}\n```",
            r#"{"same": true, "reason": "a rewording", "confidence": 0.9}"#,
        ] {
            let opinion = llm::parse_content(content).expect(content);
            assert_eq!(
                opinion,
                Opinion {
                    same: true,
                    reason: "a rewording".into()
                }
            );
        }
        let opinion = llm::parse_content(r#"{"same": false}"#).expect("no reason is fine");
        assert!(!opinion.same && opinion.reason.is_empty());
        for content in [
            "Yes, they are the same.",
            r#"{"same": "yes", "reason": "x"}"#,
            r#"{"verdict": "same"}"#,
            "",
        ] {
            let err = llm::parse_content(content).expect_err(content);
            assert!(err.0.starts_with("unusable answer"), "{content}: {err}");
        }
    }

    #[cfg(feature = "llm")]
    #[test]
    fn the_question_quotes_both_texts() {
        let text = llm::question("fix \"it\"\nnow", "fix it");
        assert!(
            text.contains(r#"First message: "fix \"it\"\nnow""#),
            "{text}"
        );
        assert!(text.contains(r#"Second message: "fix it""#), "{text}");
    }
}
