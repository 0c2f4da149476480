//! The tuned encoder (`models/tuned-encoder/model-tuned-int8.onnx`),
//! loaded through the same runtime and tokenizer files as the pinned model.

use std::fs;

use loopguard_config::Config;
use loopguard_semantic::{
    Embedder, FastEmbedder, FastEmbedderOptions, ModelFiles, SameRequestJudge, SemanticError,
    StartError, TUNED_MODEL, TUNED_MODEL_BUNDLED, TUNED_MODEL_ID, TunedModelSource,
    bundled_tuned_model_sha256, cosine, load_service_and_tuned_encoder, tuned_encoder_saw,
    tuned_model_dir,
};

use crate::common::{corrupt, embedder, files, judged_tuned_cosine, model_dir, pairs_seen_by};

/// Pairs written for this test (none is in `data/pairs`), with the
/// cosine ONNX Runtime 1.31.1 gives from Python for the same file and
/// tokenizer (`research/tuned-encoder/export.py`'s `embed`, 256 tokens):
/// one file name changed, one country, a "please" more, one line number.
const FROM_PYTHON: [(&str, &str, f32); 4] = [
    (
        "The sync daemon panics with \"called `Option::unwrap()` on a `None` value\" in src/daemon/watch.rs line 57; please fix it.",
        "The sync daemon panics with \"called `Option::unwrap()` on a `None` value\" in src/daemon/queue.rs line 57; please fix it.",
        0.84787,
    ),
    (
        "Extend the remote-work stipend for our Canada employees to 75 dollars a month, backdated to 1 March.",
        "Extend the remote-work stipend for our Mexico employees to 75 dollars a month, backdated to 1 March.",
        0.54807,
    ),
    (
        "Rename the cust_id column to customer_id in the orders_2024 table please; three dashboards and the nightly export still read cust_id.",
        "Rename the cust_id column to customer_id in the orders_2024 table; three dashboards and the nightly export still read cust_id.",
        0.98503,
    ),
    (
        "Downtime on conveyor line 8 doubled to 40 minutes a shift; review the motor maintenance log and propose a plan.",
        "Downtime on conveyor line 2 doubled to 40 minutes a shift; review the motor maintenance log and propose a plan.",
        0.82952,
    ),
];

fn pair_cosine(model: &dyn Embedder, a: &str, b: &str) -> f32 {
    let vectors = model.embed_batch(&[a, b]).expect("embedded");
    cosine(&vectors[0], &vectors[1]).expect("a cosine")
}

#[test]
fn the_tuned_encoder_reads_as_it_does_in_python_and_tells_one_word_apart() {
    let tuned = FastEmbedder::tuned(files(), &FastEmbedderOptions::default())
        .unwrap_or_else(|e| panic!("cannot load the tuned encoder: {e}"));
    assert_eq!(tuned.model_id(), TUNED_MODEL_ID);
    assert!(TUNED_MODEL_ID.ends_with(&TUNED_MODEL.sha256[..12]));
    assert_eq!(tuned.dimension(), 384);
    let base = embedder();
    for (a, b, python) in FROM_PYTHON {
        let cosine = pair_cosine(&tuned, a, b);
        assert!(
            (cosine - python).abs() < 0.002,
            "{a:?} / {b:?}: {cosine} here, {python} in Python"
        );
    }
    // Another country, another line: the pinned model sees the same
    // words; the tuned one, other work.
    for (a, b, _) in [FROM_PYTHON[1], FROM_PYTHON[3]] {
        let before = pair_cosine(base.as_ref(), a, b);
        let after = pair_cosine(&tuned, a, b);
        assert!(
            after < before - 0.05,
            "{a:?} / {b:?}: {before} before tuning, {after} after"
        );
    }
}

#[test]
fn a_tuned_encoder_file_that_is_not_the_pinned_one_is_refused_by_its_checksum() {
    // Without a copy in the model directory, the one built in is used
    // (feature `bundled-tuned-encoder`), else the workspace's.
    let dir = model_dir(&[], &[]);
    let verified = ModelFiles::verify(dir.path()).expect("the pinned files");
    let found = verified
        .tuned_model()
        .expect("the built-in or workspace copy");
    let shipped = tuned_model_dir().join(TUNED_MODEL.name);
    if TUNED_MODEL_BUNDLED {
        assert_eq!(found, TunedModelSource::Bundled);
    } else {
        assert_eq!(found, TunedModelSource::File(shipped.clone()));
    }
    // A copy in the model directory wins; a damaged one is an error naming
    // it, never passed over for the next place.
    let copy = dir.path().join(TUNED_MODEL.name);
    fs::copy(&shipped, &copy).expect("copy the tuned file");
    assert_eq!(
        verified.tuned_model().expect("a good copy"),
        TunedModelSource::File(copy.clone())
    );
    corrupt(&copy);
    let err = verified.tuned_model().expect_err("a corrupt copy");
    assert!(matches!(err, SemanticError::TunedModel { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("not the pinned file at")
            && message.contains(&copy.display().to_string())
            && message.contains(TUNED_MODEL.sha256)
            && message.contains("tuned_encoder = false"),
        "{message}"
    );
    let err = FastEmbedder::tuned(&verified, &FastEmbedderOptions::default())
        .expect_err("no model from a corrupt file");
    assert!(err.to_string().contains("not the pinned file"), "{err}");
}

#[test]
fn the_built_in_copy_is_the_pinned_file_byte_for_byte() {
    // The build carries the file only with `bundled-tuned-encoder` (on in
    // the binary and the wheel, so in `cargo test --workspace`).
    let sha256 = bundled_tuned_model_sha256();
    assert_eq!(sha256.is_some(), TUNED_MODEL_BUNDLED);
    match sha256 {
        Some(sha256) => {
            assert_eq!(sha256, TUNED_MODEL.sha256);
            let bytes = TunedModelSource::Bundled
                .bytes()
                .expect("the built-in bytes");
            assert_eq!(bytes.len() as u64, TUNED_MODEL.size);
            let shipped = fs::read(tuned_model_dir().join(TUNED_MODEL.name)).expect("the file");
            assert!(
                bytes == shipped,
                "the built-in copy differs from the shipped file"
            );
        }
        None => {
            let err = TunedModelSource::Bundled
                .bytes()
                .expect_err("no built-in copy");
            assert!(err.to_string().contains("bundled-tuned-encoder"), "{err}");
        }
    }
}

#[test]
fn the_texts_it_was_tuned_on_are_train_texts_and_never_test_ones() {
    let (seen_train, train, seen_test) = pairs_seen_by(tuned_encoder_saw);
    // Every train pair (its weights read each one's out-of-fold cosine
    // from data/pairs/tuned-oof-cosines.jsonl).
    assert_eq!(seen_train, train);
    assert_eq!(seen_test, 0);
    assert!(!tuned_encoder_saw("a text nobody wrote"));
}

#[test]
fn the_model_and_the_tuned_encoder_load_together_and_a_failure_says_which() {
    let dir = model_dir(&[], &[]);
    let mut config = Config::default();
    config.semantic.model_dir = Some(dir.path().to_path_buf());
    config.semantic.offline = Some(true);
    // The defaults' judge reads the tuned encoder: both load.
    let judge = SameRequestJudge::from_config(&config.similarity).expect("the default judge");
    assert!(judge.needs_tuned_encoder());
    let (service, judge) =
        load_service_and_tuned_encoder(&config, judge, |_| {}).expect("both models");
    let (a, b) = (FROM_PYTHON[1].0, FROM_PYTHON[1].1);
    let tuned = judged_tuned_cosine(&service, &judge, a, b).expect("the tuned cosine was read");
    assert!((tuned - FROM_PYTHON[1].2).abs() < 0.002, "{tuned}");

    // Without it, only the pinned model loads and the judge is as it was.
    config.similarity.tuned_encoder = loopguard_config::TunedEncoder::Off;
    let judge = SameRequestJudge::from_config(&config.similarity).expect("the 14 readings");
    let (_, judge) = load_service_and_tuned_encoder(&config, judge, |_| {}).expect("one model");
    assert!(!judge.needs_tuned_encoder());

    // A damaged tuned copy in the model directory is the tuned encoder's
    // failure, not semantic matching's.
    config.similarity.tuned_encoder = loopguard_config::TunedEncoder::MiniLm;
    let copy = dir.path().join(TUNED_MODEL.name);
    fs::copy(tuned_model_dir().join(TUNED_MODEL.name), &copy).expect("copy the tuned file");
    corrupt(&copy);
    let judge = SameRequestJudge::from_config(&config.similarity).expect("the default judge");
    let err = load_service_and_tuned_encoder(&config, judge, |_| {}).expect_err("a damaged copy");
    assert!(matches!(err, StartError::TunedEncoder(_)), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("the same-request judge's tuned encoder cannot start: "),
        "{err}"
    );
    // A missing pinned file (offline: not fetched) is semantic matching's.
    fs::remove_file(&copy).expect("remove the damaged copy");
    fs::remove_file(dir.path().join("model.onnx")).expect("remove the pinned model");
    let judge = SameRequestJudge::from_config(&config.similarity).expect("the default judge");
    let err = load_service_and_tuned_encoder(&config, judge, |_| {}).expect_err("no model");
    assert!(matches!(err, StartError::Service(_)), "{err:?}");
}
