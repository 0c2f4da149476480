//! What the same-request judge adds to a check: the lexical contrast of two
//! texts (tokenizing, stemming, comparing), the same for a long
//! instruction with one word swapped (the words veto's order test walks
//! every shared word), a reworded pair that names another platform (the
//! names of one kind decide), the first look that decides most pairs without
//! another embedding, WordNet's word relations (`related_cover`, part of
//! the contrast), and the whole judgement of an undecided pair with its
//! residual texts in the embedding cache (the common case after the first
//! time a pair is seen).
//!
//! ```text
//! cargo bench -p loopguard-semantic --bench judge [-- --quick]
//! ```
//!
//! No model is needed: the embedder is a toy one, so the figures are the
//! judge's own cost on top of the embeddings the detectors already make.
//! The second opinion's figures (`judge/second_opinion_*`) are its own
//! cost around an LLM's time: a verdict it does not hear, and one it
//! answered before.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use loopguard_semantic::{
    Embedder, EmbeddingService, JudgeWeights, SameRequestJudge, judge::compare,
    judge::related::related_cover,
};

/// A toy embedder: a vector from the text's bytes, enough to exercise the
/// cache and the cosine.
struct Toy;

impl Embedder for Toy {
    fn model_id(&self) -> &str {
        "toy"
    }
    fn dimension(&self) -> usize {
        8
    }
    fn embed_batch(&self, texts: &[&str]) -> loopguard_semantic::Result<Vec<Vec<f32>>> {
        Ok(texts
            .iter()
            .map(|text| {
                let mut v = [0.1f32; 8];
                for (i, byte) in text.bytes().enumerate() {
                    v[i % 8] += f32::from(byte) / 255.0;
                }
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                v.iter().map(|x| x / norm).collect()
            })
            .collect())
    }
}

const CONTRAST: (&str, &str) = (
    "Resize the search-indexer pool to 4 nodes in prod-eu.",
    "Resize the search-indexer pool to 4 nodes in prod-us.",
);
const REWORDING: (&str, &str) = (
    "Can you speed up the checkout query in orders/service.go?",
    "Could you optimize the slow checkout query in orders/service.go?",
);

/// A long instruction with one word swapped: the words veto's order test
/// walks every word the two texts share.
const WORDS_SWAP: (&str, &str) = (
    "Replay the nightly export job against the staging billing database with 200 workers for twenty minutes and report the p95 duration and the failure count.",
    "Replay the nightly export job against the production billing database with 200 workers for twenty minutes and report the p95 duration and the failure count.",
);

/// Another action on the same object, reworded: no veto, and the texts
/// share too few words for their templates to be skipped.
const ANOTHER_ACTION: (&str, &str) = (
    "Open the Q3 goal-setting round in Workday for the design team.",
    "Remind the design leads in Workday that their Q3 goals are due on Monday.",
);

/// The same step for another platform, reworded: no words veto (the text
/// was written anew), so the names of one kind decide (the `kind` veto),
/// and the names in one place are looked at before.
const KINDS: (&str, &str) = (
    "Fix the blank screen after login in the Android app.",
    "The iOS app shows a blank screen after login as well; look into it.",
);

fn bench(c: &mut Criterion) {
    // The first use reads the shipped WordNet relations: once per process.
    let started = std::time::Instant::now();
    black_box(related_cover(REWORDING.0, REWORDING.1));
    eprintln!(
        "judge/related_cover: the WordNet relations read in {:.0} ms (once per process)",
        started.elapsed().as_secs_f64() * 1e3
    );
    let judge = SameRequestJudge::calibrated(JudgeWeights::shipped());
    c.bench_function("judge/related_cover", |b| {
        b.iter(|| related_cover(black_box(REWORDING.0), black_box(REWORDING.1)))
    });
    c.bench_function("judge/lexical_contrast", |b| {
        b.iter(|| compare(black_box(REWORDING.0), black_box(REWORDING.1)))
    });
    c.bench_function("judge/lexical_contrast_words_swap", |b| {
        b.iter(|| compare(black_box(WORDS_SWAP.0), black_box(WORDS_SWAP.1)))
    });
    c.bench_function("judge/lexical_contrast_kinds", |b| {
        b.iter(|| compare(black_box(KINDS.0), black_box(KINDS.1)))
    });
    // Another action on the same object: no veto, the templates are
    // written for the embedder.
    c.bench_function("judge/first_look_with_templates", |b| {
        b.iter(|| {
            judge.first_look(
                black_box(ANOTHER_ACTION.0),
                black_box(ANOTHER_ACTION.1),
                0.83,
                0.5,
            )
        })
    });
    c.bench_function("judge/first_look_vetoed", |b| {
        b.iter(|| judge.first_look(black_box(CONTRAST.0), black_box(CONTRAST.1), 0.97, 0.5))
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap_or_else(|err| panic!("a runtime: {err}"));
    let service = EmbeddingService::new(Arc::new(Toy)).unwrap_or_else(|err| panic!("{err}"));
    // Warm the cache: the texts and the residual texts are embedded once.
    runtime
        .block_on(judge.judge(&service, REWORDING.0, REWORDING.1, 0.9, 0.5))
        .unwrap_or_else(|err| panic!("{err}"));
    bench_undecided(
        c,
        "judge/undecided_pair_warm_cache",
        &runtime,
        &service,
        &judge,
    );
    // With weights that weigh the tuned encoder's cosine: a second
    // service (the toy again here) asked for the two texts, from its cache.
    let tuned_service =
        Arc::new(EmbeddingService::new(Arc::new(Toy)).unwrap_or_else(|err| panic!("{err}")));
    let tuned_judge = SameRequestJudge::calibrated(JudgeWeights::shipped_tuned())
        .with_tuned_encoder(tuned_service);
    runtime
        .block_on(tuned_judge.judge(&service, REWORDING.0, REWORDING.1, 0.9, 0.5))
        .unwrap_or_else(|err| panic!("{err}"));
    bench_undecided(
        c,
        "judge/undecided_pair_warm_cache_tuned",
        &runtime,
        &service,
        &tuned_judge,
    );
    second_opinion(c, &judge);
}

/// `judge` on the undecided reworded pair, its texts in the caches.
fn bench_undecided(
    c: &mut Criterion,
    name: &str,
    runtime: &tokio::runtime::Runtime,
    service: &EmbeddingService,
    judge: &SameRequestJudge,
) {
    c.bench_function(name, |b| {
        b.iter(|| {
            runtime
                .block_on(judge.judge(
                    service,
                    black_box(REWORDING.0),
                    black_box(REWORDING.1),
                    0.9,
                    0.5,
                ))
                .map(|verdict| verdict.same)
        })
    });
}

/// What a second opinion adds around the LLM's own time: a verdict it
/// does not hear (the band check), and one it heard before (the cache).
/// The LLM is the fake chat-completions server of `loopguard-test-support`
/// on loopback (no LLM runs here); it is asked once, to fill the cache.
#[cfg(feature = "llm")]
fn second_opinion(c: &mut Criterion, judge: &SameRequestJudge) {
    use loopguard_semantic::{Features, LlmSecondOpinion, SecondOpinionPolicy};
    use loopguard_test_support::fake_llm::{FakeAnswer, FakeLlm};

    let (runtime, fake) = FakeLlm::start_in_background(|_, _| {
        FakeAnswer::Content(r#"{"same": true, "reason": "a rewording"}"#.into())
    });
    let opinion = LlmSecondOpinion::new(loopguard_llm_client::LlmSettings {
        base_url: fake.base_url(),
        model: "bench".into(),
        api_key: None,
        timeout: std::time::Duration::from_secs(10),
        retries: 0,
        backoff: std::time::Duration::from_millis(5),
    })
    .unwrap_or_else(|err| panic!("{err}"));
    let judge = judge
        .clone()
        .with_second_opinion(Arc::new(opinion), SecondOpinionPolicy::default());
    let features = Features {
        cosine: 0.83,
        contrast: compare(REWORDING.0, REWORDING.1),
        residuals: None,
        tuned_cosine: None,
    };
    let verdict = |score: f32| judge.verdict(features.clone(), score, 0.54);
    let sure = verdict(0.95);
    c.bench_function("judge/second_opinion_not_heard", |b| {
        b.iter(|| {
            runtime.block_on(judge.review(
                black_box(REWORDING.0),
                black_box(REWORDING.1),
                sure.clone(),
            ))
        })
    });
    let unsure = verdict(0.5);
    let first = runtime.block_on(judge.review(REWORDING.0, REWORDING.1, unsure.clone()));
    assert!(first.same, "the fake said the same: {first:?}");
    c.bench_function("judge/second_opinion_cached", |b| {
        b.iter(|| {
            runtime.block_on(judge.review(
                black_box(REWORDING.0),
                black_box(REWORDING.1),
                unsure.clone(),
            ))
        })
    });
    assert_eq!(fake.requests(), 1, "every later answer came from the cache");
}

#[cfg(not(feature = "llm"))]
fn second_opinion(_: &mut Criterion, _: &SameRequestJudge) {}

criterion_group!(benches, bench);
criterion_main!(benches);
