//! A 1,000-pair threshold sweep with a warm embedding cache: what a
//! researcher's second `loopguard tune` costs once every text is on disk.
//!
//! ```text
//! cargo bench -p loopguard-tune --bench sweep [-- --quick]
//! ```
//!
//! The vectors are 384 floats, like all-MiniLM-L6-v2's, made by a stand-in
//! embedder (a hash of the text, so no model is needed); the cache file they
//! sit in is the one the real model's would be. The stand-in panics if it
//! is ever asked for a vector during a measurement: every text must come
//! from the cache.

use std::hint::black_box;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use criterion::{Criterion, criterion_group, criterion_main};
use loopguard_semantic::Embedder;
use loopguard_tune::{
    EmbedOptions, EmbeddingCache, LexicalEmbedder, PairSet, ScoreTable, Thresholds, TuneOptions,
    embed_texts, tune_pairs,
};

/// Pairs in the set.
const PAIRS: usize = 1_000;
/// The vector length of the real model.
const DIMENSION: usize = 384;

/// Unit vectors from a hash of the text; refuses to embed once `frozen`.
struct Stand {
    frozen: AtomicBool,
}

impl Embedder for Stand {
    fn model_id(&self) -> &str {
        "bench-hash-384"
    }

    fn dimension(&self) -> usize {
        DIMENSION
    }

    fn embed_batch(&self, texts: &[&str]) -> loopguard_semantic::Result<Vec<Vec<f32>>> {
        assert!(
            !self.frozen.load(Ordering::Relaxed),
            "an inference during the measurement: the cache was not warm"
        );
        Ok(texts.iter().map(|text| vector(text)).collect())
    }
}

fn vector(text: &str) -> Vec<f32> {
    let mut state = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let mut v: Vec<f32> = (0..DIMENSION)
        .map(|_| {
            // splitmix64
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) as f64 / u64::MAX as f64 - 0.5) as f32
        })
        .collect();
    loopguard_semantic::normalize(&mut v);
    v
}

/// 1,000 labelled pairs over 1,500 distinct texts (every other pair
/// shares its first text with the pair before), a quarter held out.
fn pairs() -> PairSet {
    let subjects = [
        "review the retry logic in payments/charge.go",
        "fix the flaky checkout test",
        "add unit tests for the currency rounding helper",
        "deploy build 5812 to staging",
        "find recent benchmarks of vector databases for RAG",
    ];
    let mut lines = Vec::with_capacity(PAIRS);
    for i in 0..PAIRS {
        let subject = subjects[(i / 2) % subjects.len()];
        let a = format!("Can you {subject} (ticket {})?", i / 2);
        let b = if i % 2 == 0 {
            format!("Please {subject} again, ticket {}.", i / 2)
        } else {
            format!("Could you {subject} for ticket {} instead?", i + 7_000)
        };
        let split = if i % 4 == 3 { "test" } else { "train" };
        lines.push(
            serde_json::json!({"a": a, "b": b, "same": i % 2 == 0, "split": split}).to_string(),
        );
    }
    PairSet::parse(lines.join("\n").as_bytes(), Path::new("bench.jsonl"))
        .unwrap_or_else(|e| panic!("the bench pairs parse: {e}"))
}

fn benches(c: &mut Criterion) {
    let set = pairs();
    assert_eq!(set.pairs.len(), PAIRS);
    let texts = set.distinct_texts();
    assert_eq!(texts.len(), 1_500);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("a temporary directory: {e}"));
    let options = EmbedOptions::new().cache(EmbeddingCache::new(dir.path()));
    let stand = Stand {
        frozen: AtomicBool::new(false),
    };
    // Warm the cache once, then forbid inference.
    let (_, stats) = embed_texts(&stand, texts.iter().copied(), &options, &mut |_, _| {})
        .unwrap_or_else(|e| panic!("warm-up: {e}"));
    assert_eq!(stats.embedded, texts.len());
    stand.frozen.store(true, Ordering::Relaxed);
    let thresholds = Thresholds::new(0.70, 0.95, 0.01).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(thresholds.values().len(), 26);
    let tune = TuneOptions::new(thresholds.clone())
        .min_precision(0.9)
        .unwrap_or_else(|e| panic!("{e}"));

    let mut group = c.benchmark_group("sweep_1000_pairs");
    group.bench_function("warm_cache_load_cosine_sweep_26", |b| {
        b.iter(|| {
            let (vectors, stats) =
                embed_texts(&stand, texts.iter().copied(), &options, &mut |_, _| {})
                    .unwrap_or_else(|e| panic!("{e}"));
            debug_assert_eq!(stats.embedded, 0);
            black_box(tune_pairs(&set, &vectors, &stats, &tune).unwrap_or_else(|e| panic!("{e}")))
        });
    });

    let (vectors, stats) = embed_texts(&stand, texts.iter().copied(), &options, &mut |_, _| {})
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((stats.cached, stats.embedded), (texts.len(), 0));
    group.bench_function("cache_load_only", |b| {
        b.iter(|| {
            black_box(
                embed_texts(&stand, texts.iter().copied(), &options, &mut |_, _| {})
                    .unwrap_or_else(|e| panic!("{e}")),
            )
        });
    });
    group.bench_function("tune_pairs_vectors_in_memory_26", |b| {
        b.iter(|| {
            black_box(tune_pairs(&set, &vectors, &stats, &tune).unwrap_or_else(|e| panic!("{e}")))
        });
    });
    let scored: Vec<(f32, bool)> = set
        .pairs
        .iter()
        .map(|p| (vectors.cosine(&p.a, &p.b).unwrap_or(f32::NAN), p.same))
        .collect();
    group.bench_function("sweep_only_sort_and_26_thresholds", |b| {
        b.iter(|| black_box(ScoreTable::new(scored.iter().copied()).sweep(&thresholds)));
    });
    let table = ScoreTable::new(scored.iter().copied());
    let fine = Thresholds::new(0.0, 0.9999, 0.0001).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fine.values().len(), 10_000);
    group.bench_function("sweep_only_10000_thresholds_presorted", |b| {
        b.iter(|| black_box(table.sweep(&fine)));
    });
    let lexical = LexicalEmbedder::new();
    group.bench_function("lexical_embed_and_tune_no_cache", |b| {
        b.iter(|| {
            let (vectors, stats) = embed_texts(
                &lexical,
                texts.iter().copied(),
                &EmbedOptions::new(),
                &mut |_, _| {},
            )
            .unwrap_or_else(|e| panic!("{e}"));
            black_box(tune_pairs(&set, &vectors, &stats, &tune).unwrap_or_else(|e| panic!("{e}")))
        });
    });
    group.finish();
}

criterion_group!(sweep, benches);
criterion_main!(sweep);
