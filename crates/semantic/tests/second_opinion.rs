//! The same-request judge's second opinion: which verdicts it hears, how
//! its answer decides them, and that nothing is lost when it fails.
//!
//! The LLM is the fake chat-completions server of `loopguard-test-support`
//! on 127.0.0.1 (no LLM runs on a test machine): its answers come from
//! each test's rule; the HTTP, the prompt, the timeouts, the cache and the
//! cooldown are the real ones. The last test runs the real model through
//! the engine.

use std::sync::Arc;
use std::time::Duration;

use loopguard_config::{Config, LlmConfig};
use loopguard_llm_client::LlmSettings;
use loopguard_semantic::judge::compare;
use loopguard_semantic::{
    Features, JudgeKind, JudgeWeights, LlmSecondOpinion, SAME_REQUEST_PROMPT, SameRequestJudge,
    SecondOpinionOutcome, SecondOpinionPolicy, Verdict,
};
use loopguard_test_support::fake_llm::{FakeAnswer, FakeLlm, message};

/// A calibrated verdict on `a` and `b` with this score and cosine (their
/// words compared for real, so a veto is the judge's own).
fn verdict(a: &str, b: &str, score: f32, cosine: f32) -> Verdict {
    let features = Features {
        cosine,
        contrast: compare(a, b),
        residuals: None,
        tuned_cosine: None,
    };
    SameRequestJudge::calibrated(JudgeWeights::shipped()).verdict(features, score, 0.54)
}

fn settings(base_url: &str) -> LlmSettings {
    LlmSettings {
        base_url: base_url.to_owned(),
        model: "fake-judge".to_owned(),
        api_key: None,
        timeout: Duration::from_secs(5),
        retries: 0,
        backoff: Duration::from_millis(5),
    }
}

/// The calibrated judge with the fake server as its second opinion.
fn judge(base_url: &str, policy: SecondOpinionPolicy) -> SameRequestJudge {
    let opinion = LlmSecondOpinion::new(settings(base_url)).expect("a client");
    SameRequestJudge::calibrated(JudgeWeights::shipped())
        .with_second_opinion(Arc::new(opinion), policy)
}

fn says(same: bool, reason: &str) -> FakeAnswer {
    FakeAnswer::Content(serde_json::json!({"same": same, "reason": reason}).to_string())
}

const A: &str = "Please take another look at the login code for security issues";
const B: &str = "Can you review this authentication code?";

#[tokio::test]
async fn a_pair_in_the_band_is_decided_by_the_llm_with_the_deciding_question() {
    let fake = FakeLlm::start(|_, _| says(true, "a reworded review request")).await;
    let judge = judge(&fake.base_url(), SecondOpinionPolicy::default());
    let reviewed = judge.review(A, B, verdict(A, B, 0.41, 0.66)).await;
    assert!(reviewed.same, "the LLM's answer decides: {reviewed:?}");
    assert_eq!(reviewed.score, 0.41, "the judge's score is kept");
    let reason = reviewed.reason();
    assert!(
        reason.starts_with("LLM fake-judge says the same request (a reworded review request), overruling the judge: different request (score 0.41, cosine 0.66)"),
        "{reason}"
    );
    let bodies = fake.bodies();
    assert_eq!(bodies.len(), 1);
    assert_eq!(
        message(&bodies[0], "system").as_deref(),
        Some(SAME_REQUEST_PROMPT)
    );
    let user = message(&bodies[0], "user").expect("a question");
    assert!(user.contains(&format!("First message: {A:?}")), "{user}");
    assert!(user.contains(&format!("Second message: {B:?}")), "{user}");
    let stats = judge.second_opinion_stats().expect("stats");
    assert_eq!((stats.wanted, stats.answered, stats.overturned), (1, 1, 1));
}

#[tokio::test]
async fn an_agreeing_answer_keeps_the_verdict_and_says_so() {
    let fake = FakeLlm::start(|_, _| says(false, "another aspect")).await;
    let judge = judge(&fake.base_url(), SecondOpinionPolicy::default());
    let reviewed = judge.review(A, B, verdict(A, B, 0.3, 0.66)).await;
    assert!(!reviewed.same);
    assert!(
        reviewed.reason().starts_with(
            "LLM fake-judge says a different request (another aspect), agreeing with the judge"
        ),
        "{}",
        reviewed.reason()
    );
    assert_eq!(judge.second_opinion_stats().expect("stats").overturned, 0);
}

#[tokio::test]
async fn sure_verdicts_never_reach_the_llm() {
    let fake = FakeLlm::start(|_, _| says(true, "x")).await;
    let judge = judge(&fake.base_url(), SecondOpinionPolicy::default());
    // Sure either way, no veto; and a pair below the candidate floor.
    for (score, cosine) in [(0.95, 0.93), (0.05, 0.7), (0.5, 0.3)] {
        let before = verdict(A, B, score, cosine);
        let after = judge.review(A, B, before.clone()).await;
        assert_eq!(after, before, "score {score}, cosine {cosine}");
    }
    assert_eq!(fake.requests(), 0);
    // The cosine judge's verdicts are never sent.
    let mut cosine = verdict(A, B, 0.5, 0.66);
    cosine.judge = JudgeKind::Cosine;
    assert_eq!(judge.review(A, B, cosine.clone()).await, cosine);
    assert_eq!(fake.requests(), 0);
}

#[tokio::test]
async fn a_vetoed_pair_is_heard_only_when_its_cosine_is_high() {
    let (x, y) = (
        "Please review pull request #412 for the billing service",
        "Please review pull request #418 for the billing service",
    );
    assert!(compare(x, y).veto.is_some(), "#412 vs #418 is vetoed");
    let fake = FakeLlm::start(|_, _| says(false, "another PR")).await;
    // By default no vetoed pair is heard, however close.
    let default = judge(&fake.base_url(), SecondOpinionPolicy::default());
    let close = verdict(x, y, 0.02, 0.95);
    assert_eq!(default.review(x, y, close.clone()).await, close);
    assert_eq!(fake.requests(), 0);
    let judge = judge(
        &fake.base_url(),
        SecondOpinionPolicy {
            vetoed_cosine: 0.8,
            ..SecondOpinionPolicy::default()
        },
    );
    let low = verdict(x, y, 0.02, 0.7);
    assert_eq!(
        judge.review(x, y, low.clone()).await,
        low,
        "cosine 0.7 < 0.8"
    );
    assert_eq!(fake.requests(), 0);
    let high = judge.review(x, y, verdict(x, y, 0.02, 0.95)).await;
    assert!(
        matches!(
            high.second_opinion,
            Some(SecondOpinionOutcome::Answered { .. })
        ),
        "{high:?}"
    );
    assert!(!high.same);
    assert_eq!(fake.requests(), 1);
}

#[tokio::test]
async fn an_answer_is_kept_for_the_same_pair_of_texts() {
    let fake = FakeLlm::start(|_, _| says(true, "the same review")).await;
    let judge = judge(&fake.base_url(), SecondOpinionPolicy::default());
    let first = judge.review(A, B, verdict(A, B, 0.41, 0.66)).await;
    let again = judge.review(A, B, verdict(A, B, 0.41, 0.66)).await;
    assert!(first.same && again.same);
    assert_eq!(fake.requests(), 1, "asked once");
    assert!(
        again.reason().contains(", as before,"),
        "{}",
        again.reason()
    );
    // The other order is another question.
    judge.review(B, A, verdict(B, A, 0.41, 0.66)).await;
    assert_eq!(fake.requests(), 2);
    let stats = judge.second_opinion_stats().expect("stats");
    assert_eq!((stats.answered, stats.cached), (2, 1));
}

/// Answers kept beyond the judge's memory: a judge built afresh (a
/// restart, another replica) on the same store recalls an asked pair's
/// answer instead of asking again.
#[cfg(feature = "engine")]
mod kept_answers {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;
    use loopguard_host::{MemoryStore, Store};
    use loopguard_semantic::{AnswerArchive, Opinion, OpinionError, SecondOpinion};

    use super::*;

    /// A second opinion that counts its questions and always answers
    /// `same`; `describe` names the model.
    #[derive(Debug)]
    struct Counting {
        model: &'static str,
        same: bool,
        asked: AtomicUsize,
    }

    #[async_trait]
    impl SecondOpinion for Counting {
        async fn same_request(&self, _: &str, _: &str) -> Result<Opinion, OpinionError> {
            self.asked.fetch_add(1, Ordering::Relaxed);
            Ok(Opinion {
                same: self.same,
                reason: format!("{} says {}", self.model, self.same),
            })
        }

        fn describe(&self) -> String {
            format!("model {}", self.model)
        }
    }

    fn counting(model: &'static str, same: bool) -> Arc<Counting> {
        Arc::new(Counting {
            model,
            same,
            asked: AtomicUsize::new(0),
        })
    }

    /// A fresh judge (nothing in memory) asking `opinion`, keeping its
    /// answers in `store`.
    fn fresh(opinion: &Arc<Counting>, store: &Arc<dyn Store>) -> SameRequestJudge {
        asking(opinion).with_answers_kept_in(Arc::clone(store))
    }

    /// The calibrated judge with `opinion` as its second opinion.
    fn asking(opinion: &Arc<Counting>) -> SameRequestJudge {
        SameRequestJudge::calibrated(JudgeWeights::shipped()).with_second_opinion(
            Arc::clone(opinion) as Arc<dyn SecondOpinion>,
            SecondOpinionPolicy::default(),
        )
    }

    #[tokio::test]
    async fn a_restarted_judge_recalls_the_answer_and_decides_alike() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::durable());
        let first = counting("m", true);
        let judge = fresh(&first, &store);
        assert!(judge.keeps_answers());
        let decided = judge.review(A, B, verdict(A, B, 0.41, 0.66)).await;
        assert!(decided.same);
        assert_eq!(first.asked.load(Ordering::Relaxed), 1);

        // Restarted: a new judge whose model would now answer otherwise.
        let second = counting("m", false);
        let restarted = fresh(&second, &store);
        let again = restarted.review(A, B, verdict(A, B, 0.41, 0.66)).await;
        assert_eq!(second.asked.load(Ordering::Relaxed), 0, "not asked again");
        assert!(again.same, "decided as it was decided: {again:?}");
        assert!(
            again
                .reason()
                .starts_with("model m says the same request (m says true), as before,"),
            "{}",
            again.reason()
        );
        let stats = restarted.second_opinion_stats().expect("stats");
        assert_eq!(
            (stats.answered, stats.cached, stats.recalled),
            (0, 1, 1),
            "{stats:?}"
        );
        // The other order was never asked.
        restarted.review(B, A, verdict(B, A, 0.41, 0.66)).await;
        assert_eq!(second.asked.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn another_model_asks_again() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::durable());
        let first = counting("m", true);
        fresh(&first, &store)
            .review(A, B, verdict(A, B, 0.41, 0.66))
            .await;
        let other = counting("n", false);
        let verdict = fresh(&other, &store)
            .review(A, B, verdict(A, B, 0.41, 0.66))
            .await;
        assert_eq!(other.asked.load(Ordering::Relaxed), 1);
        assert!(!verdict.same, "model n's own answer: {verdict:?}");
    }

    #[tokio::test]
    async fn a_counters_only_store_keeps_nothing() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let first = counting("m", true);
        let judge = fresh(&first, &store);
        assert!(!judge.keeps_answers());
        judge.review(A, B, verdict(A, B, 0.41, 0.66)).await;
        let second = counting("m", true);
        fresh(&second, &store)
            .review(A, B, verdict(A, B, 0.41, 0.66))
            .await;
        assert_eq!(second.asked.load(Ordering::Relaxed), 1);
    }

    /// An archive that fails every read and write, or whose writes return
    /// an answer kept first by someone else.
    #[derive(Debug)]
    struct Archive {
        broken: bool,
        kept_first: Option<Opinion>,
    }

    #[async_trait]
    impl AnswerArchive for Archive {
        async fn recall(&self, _: &str) -> Result<Option<(String, Opinion)>, OpinionError> {
            if self.broken {
                return Err(OpinionError("database is locked".into()));
            }
            Ok(None)
        }

        async fn keep(&self, _: &str, _: &str, opinion: &Opinion) -> Result<Opinion, OpinionError> {
            if self.broken {
                return Err(OpinionError("database is locked".into()));
            }
            Ok(self.kept_first.clone().unwrap_or_else(|| opinion.clone()))
        }
    }

    fn with_archive(opinion: &Arc<Counting>, archive: Archive) -> SameRequestJudge {
        asking(opinion).with_answer_archive(Arc::new(archive))
    }

    #[tokio::test]
    async fn a_failing_archive_costs_nothing_but_the_keeping() {
        let opinion = counting("m", true);
        let judge = with_archive(
            &opinion,
            Archive {
                broken: true,
                kept_first: None,
            },
        );
        let reviewed = judge.review(A, B, verdict(A, B, 0.41, 0.66)).await;
        assert!(reviewed.same, "the answer is used: {reviewed:?}");
        assert!(matches!(
            reviewed.second_opinion,
            Some(SecondOpinionOutcome::Answered { cached: false, .. })
        ));
        // Kept in memory all the same.
        judge.review(A, B, verdict(A, B, 0.41, 0.66)).await;
        assert_eq!(opinion.asked.load(Ordering::Relaxed), 1);
        let stats = judge.second_opinion_stats().expect("stats");
        assert_eq!((stats.archive_failed, stats.cached), (2, 1), "{stats:?}");
    }

    #[tokio::test]
    async fn the_answer_kept_first_wins() {
        let opinion = counting("m", true);
        let judge = with_archive(
            &opinion,
            Archive {
                broken: false,
                kept_first: Some(Opinion {
                    same: false,
                    reason: "another replica's answer".into(),
                }),
            },
        );
        let reviewed = judge.review(A, B, verdict(A, B, 0.41, 0.66)).await;
        assert!(!reviewed.same, "{reviewed:?}");
        assert!(
            reviewed.reason().contains("(another replica's answer)"),
            "{}",
            reviewed.reason()
        );
    }
}

#[tokio::test]
async fn a_failing_llm_leaves_the_verdict_standing_then_rests_for_the_cooldown() {
    let fake = FakeLlm::start(|n, _| match n {
        0 => FakeAnswer::Status(503),
        1 => FakeAnswer::Content("I think they are the same.".into()),
        _ => says(true, "x"),
    })
    .await;
    let policy = SecondOpinionPolicy {
        cooldown: Duration::from_secs(3600),
        ..SecondOpinionPolicy::default()
    };
    let judge = judge(&fake.base_url(), policy);
    let before = verdict(A, B, 0.41, 0.66);
    let failed = judge.review(A, B, before.clone()).await;
    assert_eq!(failed.same, before.same, "the judge's verdict stands");
    let reason = failed.reason();
    assert!(
        reason.starts_with("different request (score 0.41, cosine 0.66); the second opinion (LLM fake-judge) gave none, so the judge's verdict stands: HTTP 503 from http://127.0.0.1:"),
        "{reason}"
    );
    // Cooling down: the next pair is not sent at all.
    let (c, d) = (
        "fix the flaky login test",
        "repair the login test that flakes",
    );
    let skipped = judge.review(c, d, verdict(c, d, 0.5, 0.8)).await;
    assert!(!skipped.same);
    assert_eq!(fake.requests(), 1, "not asked while cooling down");
    match &skipped.second_opinion {
        Some(SecondOpinionOutcome::Failed { error, .. }) => {
            assert!(
                error.starts_with("not asked: it failed 0 s ago (HTTP 503"),
                "{error}"
            )
        }
        other => panic!("not a failure: {other:?}"),
    }
    let stats = judge.second_opinion_stats().expect("stats");
    assert_eq!((stats.failed, stats.skipped, stats.answered), (1, 1, 0));
}

#[tokio::test]
async fn a_garbled_answer_is_a_failure_and_the_next_pair_is_asked_after_the_cooldown() {
    let fake = FakeLlm::start(|n, _| match n {
        0 => FakeAnswer::Content("Yes, the same.".into()),
        _ => says(true, "a rewording"),
    })
    .await;
    let policy = SecondOpinionPolicy {
        cooldown: Duration::ZERO,
        ..SecondOpinionPolicy::default()
    };
    let judge = judge(&fake.base_url(), policy);
    let garbled = judge.review(A, B, verdict(A, B, 0.41, 0.66)).await;
    assert!(!garbled.same);
    assert!(
        garbled.reason().contains("unusable answer"),
        "{}",
        garbled.reason()
    );
    let answered = judge.review(A, B, verdict(A, B, 0.41, 0.66)).await;
    assert!(answered.same, "asked again once the cooldown is over");
    assert_eq!(fake.requests(), 2);
}

#[tokio::test]
async fn an_unreachable_llm_is_named_and_the_verdict_stands() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let address = listener.local_addr().expect("bound");
    drop(listener);
    let judge = judge(
        &format!("http://{address}/v1"),
        SecondOpinionPolicy::default(),
    );
    let reviewed = judge.review(A, B, verdict(A, B, 0.7, 0.66)).await;
    assert!(reviewed.same, "the judge said the same; that stands");
    let reason = reviewed.reason();
    assert!(reason.contains("gave none"), "{reason}");
    assert!(
        reason.contains(&format!(
            "cannot reach http://{address}/v1/chat/completions"
        )),
        "{reason}"
    );
}

#[test]
fn enabling_it_needs_an_llm_and_the_calibrated_judge() {
    let mut config = Config::default();
    config.similarity.second_opinion.enabled = true;
    // No [llm], and (unless the machine sets them) no LOOPGUARD_LLM_*.
    if std::env::var_os("LOOPGUARD_LLM_BASE_URL").is_none() {
        let err = SameRequestJudge::from_config_and_llm(&config.similarity, &LlmConfig::default())
            .expect_err("no LLM named");
        let text = err.to_string();
        assert!(text.contains("similarity.second_opinion.enabled"), "{text}");
        assert!(text.contains("llm.base_url and llm.model"), "{text}");
    }
    let llm = LlmConfig {
        base_url: Some("http://127.0.0.1:9/v1".into()),
        model: Some("m".into()),
        ..LlmConfig::default()
    };
    let judge = SameRequestJudge::from_config_and_llm(&config.similarity, &llm).expect("built");
    let (by, policy) = judge.second_opinion().expect("a second opinion");
    assert_eq!(by, "LLM m");
    assert_eq!(policy, SecondOpinionPolicy::default());

    config.similarity.judge = JudgeKind::Cosine;
    let err = SameRequestJudge::from_config_and_llm(&config.similarity, &llm)
        .expect_err("the cosine judge has no unsure pairs");
    assert!(err.to_string().contains("\"cosine\""), "{err}");

    // Off (the default), no LLM is needed and none is used.
    let off =
        SameRequestJudge::from_config_and_llm(&Config::default().similarity, &llm).expect("built");
    assert!(off.second_opinion().is_none());
}

/// Through the engine, with the real model: a reworded request the judge
/// alone lets pass (its score in the band) is a loop when the LLM says it
/// is the same request, and the detection's reason says who decided; with
/// the LLM down, the judge's verdict stands and nothing is lost.
#[cfg(all(feature = "fastembed", feature = "engine"))]
mod through_the_engine {
    use loopguard_config::{Config, LlmConfig};
    use loopguard_core_types::Event;
    use loopguard_host::LoopGuard;
    use loopguard_semantic::{SameRequestJudge, SemanticDetectors, SemanticLimits};
    use loopguard_test_support::fake_llm::{FakeAnswer, FakeLlm};

    use crate::common::service;

    /// One request and a looser rewording of it that the shipped judge
    /// scores inside the default band (checked below, so a refit that
    /// moves it says so).
    const FIRST: &str = "Rotate the API keys for the staging cluster.";
    const REWORDED: &str = "Staging needs fresh API keys.";

    fn collab(request: &str) -> Event {
        Event::from_json(&format!(
            r#"{{"type":"collaboration","task":"T","from":"planner","to":"coder","request":"{request}"}}"#
        ))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// The defaults without the tuned encoder: `FIRST` / `REWORDED` is a
    /// pair the 14 readings' judge misses and is unsure of.
    fn defaults() -> Config {
        let mut config = Config::default();
        config.similarity.tuned_encoder = loopguard_config::TunedEncoder::Off;
        config
    }

    fn engine(base_url: &str) -> LoopGuard {
        let mut config = defaults();
        config.similarity.second_opinion.enabled = true;
        config.llm = LlmConfig {
            base_url: Some(base_url.to_owned()),
            model: Some("fake-judge".into()),
            retries: 0,
            ..LlmConfig::default()
        };
        let judge = SameRequestJudge::from_config_and_llm(&config.similarity, &config.llm)
            .unwrap_or_else(|e| panic!("judge: {e}"));
        SemanticDetectors::with_judge(&config, Some(service()), SemanticLimits::default(), judge)
            .install(LoopGuard::builder(config))
            .build()
            .unwrap_or_else(|e| panic!("engine: {e}"))
    }

    #[tokio::test]
    async fn the_llm_catches_a_rewording_the_judge_lets_pass() {
        let service = service();
        let cosine = loopguard_semantic::cosine(
            &service.embed(FIRST).await.expect("embedded"),
            &service.embed(REWORDED).await.expect("embedded"),
        )
        .expect("a cosine");
        let alone = SameRequestJudge::from_config(&defaults().similarity).expect("judge");
        let verdict = alone
            .judge(&service, FIRST, REWORDED, cosine, alone.weights().threshold)
            .await
            .expect("a verdict");
        assert!(
            !verdict.same && loopguard_semantic::SecondOpinionPolicy::default().wants(&verdict),
            "the pair must be one the judge misses and is unsure of: {verdict:?}"
        );

        let fake = FakeLlm::start(|_, _| {
            FakeAnswer::Content(r#"{"same": true, "reason": "the same key rotation"}"#.into())
        })
        .await;
        let guard = engine(&fake.base_url());
        let first = guard.observe_line(1, collab(FIRST)).await;
        assert!(first.detections.is_empty(), "{first:?}");
        let second = guard.observe_line(2, collab(REWORDED)).await;
        let detection = second
            .detections
            .iter()
            .find(|d| d.kind == "collaboration_loop")
            .unwrap_or_else(|| panic!("a loop at line 2: {second:?}"));
        assert!(
            detection.reason.contains(
                "LLM fake-judge says the same request (the same key rotation), overruling the judge"
            ),
            "{}",
            detection.reason
        );
        assert_eq!(fake.requests(), 1);
    }

    #[tokio::test]
    async fn with_the_llm_down_the_judge_decides_and_says_so() {
        let fake = FakeLlm::start(|_, _| FakeAnswer::Status(500)).await;
        let guard = engine(&fake.base_url());
        guard.observe_line(1, collab(FIRST)).await;
        let second = guard.observe_line(2, collab(REWORDED)).await;
        assert!(
            !second
                .detections
                .iter()
                .any(|d| d.kind == "collaboration_loop"),
            "the judge alone lets it pass: {second:?}"
        );
        // An exact repeat is decided without the LLM, and is a loop.
        let third = guard.observe_line(3, collab(FIRST)).await;
        assert!(
            third
                .detections
                .iter()
                .any(|d| d.kind == "collaboration_loop"),
            "{third:?}"
        );
        assert_eq!(fake.requests(), 1, "asked once, then cooling down");
    }
}
