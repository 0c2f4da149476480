//! The real model (all-MiniLM-L6-v2, int8) on a few pairs of the shipped
//! file: the pinned files are fetched on first use, like the semantic
//! crate's tests do.

use std::path::PathBuf;

use loopguard_semantic::{Embedder, ProvisionOptions};
use loopguard_tune::{
    EmbedOptions, EmbedderChoice, EmbeddingCache, PairSet, Split, Thresholds, TuneOptions,
    embed_texts, tune_pairs,
};
use tempfile::TempDir;

fn shipped() -> PathBuf {
    crate::common::shipped_pairs("requests.jsonl")
}

#[test]
fn minilm_scores_shipped_pairs_and_caches_them() {
    let all = PairSet::read(&shipped()).expect("the shipped pair file reads");
    assert!(all.issues.is_empty(), "{:?}", all.issues);
    assert!(all.pairs.len() >= 400, "{} pairs", all.pairs.len());
    assert!(all.split(Split::Test).count() > 0, "a held-out split");
    // Twelve pairs of each split, and docs/semantic.md's reference pair.
    let mut few = all.clone();
    let train = all.split(Split::Train).take(12).cloned();
    let test = all.split(Split::Test).take(12).cloned();
    few.pairs = train.chain(test).collect();
    let reference = loopguard_tune::Pair {
        line: 0,
        a: "Can you review this authentication code?".into(),
        b: "Can you review this auth code again?".into(),
        same: true,
        kind: Some("request".into()),
        source: None,
        split: Split::Train,
        hard: None,
    };
    few.pairs.push(reference);

    let embedder = EmbedderChoice::MiniLm.load(&ProvisionOptions::new(), |_| {});
    assert_eq!(
        (embedder.model_id(), embedder.dimension()),
        ("all-MiniLM-L6-v2-int8", 384)
    );
    let cache = TempDir::new().expect("a temporary directory");
    let options = EmbedOptions::new().cache(EmbeddingCache::new(cache.path()));
    let texts = few.distinct_texts();
    let (vectors, stats) = embed_texts(
        embedder.as_ref(),
        texts.iter().copied(),
        &options,
        &mut |_, _| {},
    )
    .expect("the model embeds");
    assert_eq!(
        (stats.texts, stats.embedded, stats.cached),
        (texts.len(), texts.len(), 0)
    );

    let cosine = vectors
        .cosine(
            "Can you review this authentication code?",
            "Can you review this auth code again?",
        )
        .expect("both embedded");
    assert!(
        (cosine - 0.889).abs() < 0.01,
        "{cosine} (0.889 in docs/spec/models.md)"
    );

    let report = tune_pairs(
        &few,
        &vectors,
        &stats,
        &TuneOptions::new(Thresholds::new(0.70, 0.95, 0.01).expect("a range")),
    )
    .expect("the sweep runs");
    assert_eq!(report.rows.len(), 26);
    assert_eq!(report.train.items, 13);
    assert_eq!(report.test.map(|t| t.items), Some(12));
    let best = report.best_f1.expect("a best threshold");
    assert!(best.test.is_some(), "scored on the held-out pairs");
    for pair in &report.pairs {
        assert!((-1.0..=1.0).contains(&pair.cosine), "{pair:?}");
    }

    // The same texts again: all from the disk cache, no inference.
    let (again, stats) = embed_texts(
        embedder.as_ref(),
        texts.iter().copied(),
        &options,
        &mut |_, _| {},
    )
    .expect("from the cache");
    assert_eq!((stats.cached, stats.embedded), (texts.len(), 0));
    let cached = again
        .cosine(
            "Can you review this authentication code?",
            "Can you review this auth code again?",
        )
        .expect("both cached");
    assert_eq!(cached, cosine, "the cache gives back the very vectors");
}
