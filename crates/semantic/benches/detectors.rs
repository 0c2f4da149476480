//! What the semantic detectors cost per event once the embedding cache is
//! warm (a text seen before: the common case, since every text is embedded
//! once and then looked up by `collaboration_loop`, `repeated_query` and
//! the topic assigner), and what they add to the engine's per-event cost.
//!
//! ```text
//! cargo bench -p loopguard-semantic --bench detectors [-- --quick]
//! ```
//!
//! The pinned files are fetched on first run (through `ModelFiles`), like
//! the tests do.

use std::hint::black_box;
use std::sync::Arc;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, criterion_group, criterion_main};
use loopguard_config::Config;
use loopguard_core_types::Event;
use loopguard_detectors::ObservedEvent;
use loopguard_host::{
    ArgumentMatcher, ExchangeMatcher, ExchangeRef, ExtensionDetector, LoopGuard, ToolCallRef,
};
use loopguard_semantic::{
    Embedder, EmbeddingService, FastEmbedder, FastEmbedderOptions, JudgeKind, ModelFiles,
    ProvisionOptions, SameRequestJudge, SemanticDetectors, SemanticLimits, ServiceOptions,
};

/// Tasks the events are spread over.
const TASKS: usize = 64;
/// Ordered pairs (and recipients) per task.
const PAIRS: [(&str, &str); 4] = [
    ("planner", "coder"),
    ("coder", "reviewer"),
    ("reviewer", "planner"),
    ("planner", "researcher"),
];

/// 64 distinct requests on 16 subjects, 4 wordings each: some repeat a
/// subject (a match above the threshold), most do not.
fn texts() -> Vec<String> {
    let subjects = [
        "the authentication code",
        "the flaky checkout test",
        "the CSV export for invoices",
        "the rate limiter",
        "the database migration",
        "the release notes",
        "the login page layout",
        "the payment webhook retries",
        "the search index rebuild",
        "the memory leak in the worker",
        "the Kubernetes deployment",
        "the onboarding email copy",
        "the GraphQL schema",
        "the nightly backup job",
        "the error messages of the CLI",
        "the retrieval augmented generation papers",
    ];
    let wordings = [
        "Can you review {}?",
        "Please take another look at {} again",
        "Could you fix {} today?",
        "What is the status of {}?",
    ];
    subjects
        .iter()
        .flat_map(|subject| wordings.iter().map(move |w| w.replace("{}", subject)))
        .collect()
}

fn event(json: &str) -> Event {
    Event::from_json(json).unwrap_or_else(|e| panic!("{json}: {e}"))
}

/// The text of `task`'s event in `round`: every task goes through all
/// the texts, each in its own order.
fn text_index(task: usize, round: usize, texts: usize) -> usize {
    (round * 5 + task * 3) % texts
}

/// Collaboration and handoff events, cycling through tasks, pairs and
/// texts so that each task's histories fill up as they would in a long
/// run.
fn events(texts: &[String], kind: &str) -> Vec<Event> {
    (0..4096)
        .map(|n| {
            let (task, round) = (n % TASKS, n / TASKS);
            let (from, to) = PAIRS[round % PAIRS.len()];
            let text = &texts[text_index(task, round, texts.len())];
            match kind {
                "collaboration" => event(&format!(
                    r#"{{"type":"collaboration","task":"T{task}","from":"{from}","to":"{to}","request":"{text}"}}"#
                )),
                _ => event(&format!(
                    r#"{{"type":"handoff","task":"T{task}","from":"{from}","to":"{to}","content":"{text}"}}"#
                )),
            }
        })
        .collect()
}

/// Benches `detector` on `events` in turn, one event an iteration.
fn bench_observe(
    group: &mut BenchmarkGroup<'_, WallTime>,
    runtime: &tokio::runtime::Runtime,
    name: &str,
    detector: &dyn ExtensionDetector,
    events: &[Event],
) {
    let mut n = 0usize;
    group.bench_function(name, |b| {
        b.iter(|| {
            n += 1;
            let event = &events[n % events.len()];
            let observed = ObservedEvent::new(n as u64, event);
            black_box(runtime.block_on(detector.observe(&observed)))
        });
    });
}

/// A service over `model` with every one of `texts` already in its cache,
/// so each text the benches use is a cache hit.
fn warm_service(
    model: FastEmbedder,
    runtime: &tokio::runtime::Runtime,
    texts: &[&str],
) -> Arc<EmbeddingService> {
    let service = Arc::new(
        EmbeddingService::with_options(
            Arc::new(model) as Arc<dyn Embedder>,
            ServiceOptions::new().cache_capacity(10_000),
        )
        .unwrap_or_else(|e| panic!("cannot start the service: {e}")),
    );
    runtime
        .block_on(service.embed_many(texts))
        .unwrap_or_else(|e| panic!("warm-up: {e}"));
    service
}

/// What both groups measure with: the pinned model files, a runtime, the
/// texts and a service with every one of them cached, the default config
/// and the events.
struct Fixture {
    files: ModelFiles,
    runtime: tokio::runtime::Runtime,
    texts: Vec<String>,
    service: Arc<EmbeddingService>,
    config: Config,
    collaborations: Vec<Event>,
    handoffs: Vec<Event>,
}

impl Fixture {
    /// The model files (fetched on first run), the model loaded and its
    /// service warmed with every text.
    fn load() -> Fixture {
        let files = ModelFiles::ensure_with(&ProvisionOptions::new())
            .unwrap_or_else(|e| panic!("cannot provision the model files: {e}"));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap_or_else(|e| panic!("tokio runtime: {e}"));
        let texts = texts();
        let model =
            FastEmbedder::with_options(&files, &FastEmbedderOptions::new().intra_threads(2))
                .unwrap_or_else(|e| panic!("cannot load the model: {e}"));
        let service = warm_service(model, &runtime, &text_refs(&texts));
        let collaborations = events(&texts, "collaboration");
        let handoffs = events(&texts, "handoff");
        Fixture {
            files,
            runtime,
            texts,
            service,
            config: Config::default(),
            collaborations,
            handoffs,
        }
    }

    /// Says the service's counts on stderr: no inference ran during the
    /// measurements, every text was cached.
    fn report(&self, group: &str) {
        eprintln!(
            "embedding service after {group}: {:?}",
            self.service.stats()
        );
    }
}

/// `texts` borrowed.
fn text_refs(texts: &[String]) -> Vec<&str> {
    texts.iter().map(String::as_str).collect()
}

/// Each semantic detector on its own, one event at a time, every text in
/// the cache; and the embedding lookup alone, for scale.
fn per_event_warm_cache(c: &mut Criterion) {
    let fixture = Fixture::load();
    let mut group = c.benchmark_group("per_event_warm_cache");
    let detectors = SemanticDetectors::with_service(&fixture.config, Arc::clone(&fixture.service));
    bench_loop_detectors(&mut group, &fixture, &detectors, "");
    bench_cosine_judge(&mut group, &fixture);
    bench_tuned_encoder(&mut group, &fixture);
    bench_matchers(&mut group, &fixture, &detectors);
    let Fixture {
        runtime,
        texts,
        service,
        ..
    } = &fixture;
    group.bench_function("service_cached_lookup", |b| {
        b.iter(|| black_box(runtime.block_on(service.embed(black_box(&texts[5])))));
    });
    group.finish();
    fixture.report("per_event_warm_cache");
}

/// `collaboration_loop` on collaboration events and `repeated_query` on
/// handoffs, each benched under its name followed by `suffix`.
fn bench_loop_detectors(
    group: &mut BenchmarkGroup<'_, WallTime>,
    fixture: &Fixture,
    detectors: &SemanticDetectors,
    suffix: &str,
) {
    let collaboration_loop = detectors.collaboration_loop();
    bench_observe(
        group,
        &fixture.runtime,
        &format!("collaboration_loop{suffix}"),
        collaboration_loop.as_ref(),
        &fixture.collaborations,
    );
    let repeated_query = detectors.repeated_query();
    bench_observe(
        group,
        &fixture.runtime,
        &format!("repeated_query{suffix}"),
        repeated_query.as_ref(),
        &fixture.handoffs,
    );
}

/// The same two detectors with the cosine judge: what the calibrated
/// judge (its 14 readings: `with_service` keeps them whatever the config
/// says) costs on top.
fn bench_cosine_judge(group: &mut BenchmarkGroup<'_, WallTime>, fixture: &Fixture) {
    let mut cosine_config = fixture.config.clone();
    cosine_config.similarity.judge = JudgeKind::Cosine;
    let cosine_detectors =
        SemanticDetectors::with_service(&cosine_config, Arc::clone(&fixture.service));
    bench_loop_detectors(group, fixture, &cosine_detectors, "_cosine_judge");
}

/// The same two detectors with the judge the defaults run: the calibrated
/// one reading the tuned encoder too (its cache warm as well), next to the
/// 14 readings' judge.
fn bench_tuned_encoder(group: &mut BenchmarkGroup<'_, WallTime>, fixture: &Fixture) {
    let tuned_model =
        FastEmbedder::tuned(&fixture.files, &FastEmbedderOptions::new().intra_threads(2))
            .unwrap_or_else(|e| panic!("cannot load the tuned encoder: {e}"));
    let tuned_service = warm_service(tuned_model, &fixture.runtime, &text_refs(&fixture.texts));
    let default_judge = SameRequestJudge::from_config(&fixture.config.similarity)
        .unwrap_or_else(|e| panic!("the default judge: {e}"))
        .with_tuned_encoder(tuned_service);
    assert!(default_judge.needs_tuned_encoder(), "the defaults read it");
    let tuned_detectors = SemanticDetectors::with_judge(
        &fixture.config,
        Some(Arc::clone(&fixture.service)),
        SemanticLimits::default(),
        default_judge,
    );
    bench_loop_detectors(group, fixture, &tuned_detectors, "_tuned_encoder");
}

/// The tool-argument matcher on a search call whose query is free text,
/// the exchange matcher on a hub's handoff (matched against its earlier
/// texts, ruling 17), and the topic assigner.
fn bench_matchers(
    group: &mut BenchmarkGroup<'_, WallTime>,
    fixture: &Fixture,
    detectors: &SemanticDetectors,
) {
    let Fixture {
        runtime,
        texts,
        handoffs,
        ..
    } = fixture;
    let arguments = detectors.arguments().unwrap_or_else(|| panic!("semantic"));
    let searches: Vec<Event> = (0..4096)
        .map(|n| {
            let (task, round) = (n % TASKS, n / TASKS);
            let text = &texts[text_index(task, round, texts.len())];
            event(&format!(
                r#"{{"type":"tool_call","task":"T{task}","agent":"researcher","tool":"web_search","args":{{"q":"{text}","limit":5}},"result":"none"}}"#
            ))
        })
        .collect();
    let mut n = 0usize;
    group.bench_function("tool_arguments_free_text_query", |b| {
        b.iter(|| {
            n += 1;
            let event = &searches[n % searches.len()];
            let call = ToolCallRef::of(event, n as u64).unwrap_or_else(|| panic!("a tool call"));
            black_box(runtime.block_on(arguments.match_args(call)))
        });
    });

    let exchanges = detectors.exchanges().unwrap_or_else(|| panic!("semantic"));
    let mut n = 0usize;
    group.bench_function("exchange_texts_handoff", |b| {
        b.iter(|| {
            n += 1;
            let event = &handoffs[n % handoffs.len()];
            let exchange =
                ExchangeRef::of(event, n as u64).unwrap_or_else(|| panic!("an exchange"));
            black_box(runtime.block_on(exchanges.match_exchange(exchange)))
        });
    });

    let topics = detectors.topics().unwrap_or_else(|| panic!("semantic"));
    let mut n = 0usize;
    group.bench_function("topic_assigner", |b| {
        b.iter(|| {
            n += 1;
            let task = n % TASKS;
            let text = &texts[text_index(task, n / TASKS, texts.len())];
            black_box(runtime.block_on(topics.assign(&format!("T{task}"), None, n as u64, text)))
        });
    });
}

/// The whole engine on collaboration events, with and without the
/// semantic detectors: the difference is what semantic matching adds.
fn engine_collaboration_event(c: &mut Criterion) {
    let fixture = Fixture::load();
    let Fixture {
        runtime,
        service,
        config,
        collaborations,
        ..
    } = &fixture;
    let mut group = c.benchmark_group("engine_collaboration_event");
    let structural = LoopGuard::new(config.clone()).unwrap_or_else(|e| panic!("engine: {e}"));
    let semantic = SemanticDetectors::with_service(config, Arc::clone(service))
        .install(LoopGuard::builder(config.clone()))
        .build()
        .unwrap_or_else(|e| panic!("engine: {e}"));
    // The same detectors on exact text: the engine's own cost of what the
    // extra detections trigger (loops, the gate, the cycle log), without
    // any vector.
    let exact = SemanticDetectors::exact(config)
        .install(LoopGuard::builder(config.clone()))
        .build()
        .unwrap_or_else(|e| panic!("engine: {e}"));
    for (name, engine) in [
        ("structural_only", &structural),
        ("with_exact_fallback", &exact),
        ("with_semantic", &semantic),
    ] {
        let mut n = 0usize;
        group.bench_function(name, |b| {
            b.iter(|| {
                n += 1;
                let event = collaborations[n % collaborations.len()].clone();
                black_box(runtime.block_on(engine.observe_line(n as u64, event)))
            });
        });
    }
    group.finish();
    fixture.report("engine_collaboration_event");
}

criterion_group!(detectors, per_event_warm_cache, engine_collaboration_event);
criterion_main!(detectors);
