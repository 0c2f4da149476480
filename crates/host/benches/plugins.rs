//! The per-event cost of a detector plugin against the same detector
//! linked in statically: the `monologue` plugin, on a stream of turns,
//! handoffs and failures over 64 tasks.
//!
//! - `detector/static`: `Monologue::observe`, a plain Rust call.
//! - `detector/plugin_call`: the same detector in its loaded `cdylib`,
//!   through the ABI: the event encoded as JSON, the call, the plugin
//!   decoding it, the detections back as JSON (none, usually: no bytes).
//! - `extension/static_inline` and `extension/plugin_offloaded`: the same
//!   two as the engine calls them (`ExtensionDetector::observe`): the
//!   static one inline, the plugin on its own thread behind the host's
//!   semaphore, as `loopguard` runs it.
//! - `extension/plugin_process`: the plugin in a worker process of its
//!   own (process isolation): the same call over a pipe to
//!   `loopguard-plugin-worker`, with the task's state exported after
//!   each event (the host keeps it for a restart).
//! - `engine/...`: `LoopGuard::observe_line` per event with each.
//!
//! Each group also runs with 4 KB turn outputs (`_4k`), where JSON costs
//! more.
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use criterion::{Criterion, criterion_group, criterion_main};
use loopguard_config::Config;
use loopguard_core_types::{Detection, Event};
use loopguard_detectors::ObservedEvent;
use loopguard_host::{
    ExtensionDetector, ExtensionError, LoopGuard, Plugin, PluginDetector, PluginHost,
};
use loopguard_plugin_api::Detector;
use loopguard_plugin_monologue::Monologue;
use parking_lot::Mutex;

const TASKS: usize = 64;
const EVENTS: usize = 4096;

/// The statically linked detector as an extension, called inline.
#[derive(Debug)]
struct StaticMonologue(Mutex<Monologue>);

#[async_trait]
impl ExtensionDetector for StaticMonologue {
    fn name(&self) -> &str {
        "monologue"
    }

    fn kinds(&self) -> Vec<String> {
        vec!["monologue".to_owned()]
    }

    async fn observe(&self, event: &ObservedEvent<'_>) -> Result<Vec<Detection>, ExtensionError> {
        Ok(self.0.lock().observe(event.line, event.event))
    }

    async fn reset_task(&self, task: &str) {
        self.0.lock().reset_task(task);
    }
}

/// A deterministic stream: per task, turns (a third repeat their
/// predecessor, so monologues do fire), handoffs and failures.
fn events(output_bytes: usize) -> Vec<Event> {
    let filler = "x".repeat(output_bytes.saturating_sub(40));
    (0..EVENTS)
        .map(|step| {
            let task = step % TASKS;
            let round = step / TASKS;
            let line = match round % 5 {
                3 => format!(
                    r#"{{"type":"handoff","task":"T{task}","from":"writer","to":"editor","content":"round {round}"}}"#
                ),
                4 => format!(
                    r#"{{"type":"failure","task":"T{task}","agent":"editor","error":"E{} in section {task}"}}"#,
                    round % 3
                ),
                n => format!(
                    r#"{{"type":"turn","task":"T{task}","agent":"writer","output":"draft {} of section {task} {filler}","success":true}}"#,
                    n / 2
                ),
            };
            Event::from_json(&line).unwrap_or_else(|err| panic!("bench event {line}: {err}"))
        })
        .collect()
}

fn monologue() -> Monologue {
    Monologue::new(serde_json::json!({})).unwrap_or_else(|err| panic!("{err}"))
}

fn plugin() -> Plugin {
    let path = loopguard_test_support::build_cdylib("loopguard-plugin-monologue")
        .unwrap_or_else(|err| panic!("{err}"));
    Plugin::load(&path).unwrap_or_else(|err| panic!("{err}"))
}

fn plugin_detector(plugin: &Plugin) -> Arc<PluginDetector> {
    PluginHost::new(&Config::default().plugin_host)
        .detector(plugin, &serde_json::json!({}))
        .unwrap_or_else(|err| panic!("{err}"))
}

/// The plugin in a worker process of its own, run by this package's
/// `loopguard-plugin-worker`.
fn process_detector(plugin: &Plugin) -> Arc<PluginDetector> {
    let mut host = Config::default().plugin_host;
    host.worker = Some(env!("CARGO_BIN_EXE_loopguard-plugin-worker").into());
    PluginHost::new(&host)
        .process_detector(&plugin.info().path, &serde_json::json!({}))
        .unwrap_or_else(|err| panic!("{err}"))
}

/// The time of `iters` events through `$body` inside one `block_on`, so
/// the runtime's entry is not in the figure.
macro_rules! timed {
    ($runtime:expr, $stream:expr, $iters:expr, |$line:ident, $event:ident| $body:expr) => {
        $runtime.block_on(async {
            let start = Instant::now();
            for i in 0..$iters {
                let $event = &$stream[(i as usize) % $stream.len()];
                let $line = i + 1;
                $body;
            }
            start.elapsed()
        })
    };
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let plugin = plugin();
    for (suffix, output_bytes) in [("", 200), ("_4k", 4096)] {
        let stream = events(output_bytes);

        let mut group = c.benchmark_group(format!("detector{suffix}"));
        let mut detector = monologue();
        let mut next = 0usize;
        group.bench_function("static", |b| {
            b.iter(|| {
                next = (next + 1) % stream.len();
                black_box(detector.observe(next as u64, &stream[next]))
            })
        });
        let mut instance = plugin
            .instantiate(&serde_json::json!({}))
            .unwrap_or_else(|err| panic!("{err}"));
        let mut next = 0usize;
        group.bench_function("plugin_call", |b| {
            b.iter(|| {
                next = (next + 1) % stream.len();
                black_box(instance.observe(next as u64, &stream[next]))
            })
        });
        group.finish();

        let mut group = c.benchmark_group(format!("extension{suffix}"));
        let inline = StaticMonologue(Mutex::new(monologue()));
        group.bench_function("static_inline", |b| {
            b.iter_custom(|iters| {
                timed!(runtime, stream, iters, |line, event| {
                    black_box(inline.observe(&observed(line, event)).await.ok())
                })
            })
        });
        let offloaded = plugin_detector(&plugin);
        group.bench_function("plugin_offloaded", |b| {
            b.iter_custom(|iters| {
                timed!(runtime, stream, iters, |line, event| {
                    black_box(offloaded.observe(&observed(line, event)).await.ok())
                })
            })
        });
        let isolated = process_detector(&plugin);
        group.bench_function("plugin_process", |b| {
            b.iter_custom(|iters| {
                timed!(runtime, stream, iters, |line, event| {
                    black_box(isolated.observe(&observed(line, event)).await.ok())
                })
            })
        });
        group.finish();

        let mut group = c.benchmark_group(format!("engine{suffix}"));
        let engines = [
            (
                "static",
                Arc::new(StaticMonologue(Mutex::new(monologue()))) as Arc<dyn ExtensionDetector>,
            ),
            ("plugin", plugin_detector(&plugin)),
            ("plugin_process", process_detector(&plugin)),
        ];
        for (name, extension) in engines {
            let guard = LoopGuard::builder(Config::default())
                .extension(extension)
                .build()
                .expect("default config");
            group.bench_function(name, |b| {
                b.iter_custom(|iters| {
                    timed!(runtime, stream, iters, |line, event| {
                        black_box(guard.observe_line(line, event.clone()).await)
                    })
                })
            });
        }
        group.finish();
    }
}

fn observed(line: u64, event: &Event) -> ObservedEvent<'_> {
    ObservedEvent::new(line, event).at(None)
}

criterion_group!(benches, bench);
criterion_main!(benches);
