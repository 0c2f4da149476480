//! The cost of one `observe` call in steady state, per detector, for the
//! failure, phase and output detectors, and for all built-in detectors over a
//! mixed stream.
//!
//! Each bench replays 1,000 pre-built events (a deterministic pseudo-random
//! but realistic stream) over a state warmed by one earlier pass, so the
//! windows and tables are full. Criterion reports events per second
//! (`Throughput::Elements`). A `completed` event every 250 events resets the
//! task's state, as the engine does, so the stream mixes quiet stretches with
//! stretches where the limits fire.
use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use loopguard_config::Config;
use loopguard_core_types::{Detection, Event, EventKind};
use loopguard_detectors::{
    BuiltinDetectors, BuiltinState, Detector, EdgeLimit, ExactFailure, ObservedEvent, Oscillation,
    PhaseVisits, ProgressState, ProgressTracker, RepeatedOutput, TransitionLimit,
};

const EVENTS: usize = 1_000;
/// A task completes (and its state resets) every this many events.
const COMPLETE_EVERY: usize = 250;

/// A tiny deterministic generator (xorshift64): the same stream every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

const AGENTS: [&str; 4] = ["planner", "coder", "tester", "reviewer"];

const ERRORS: [&str; 8] = [
    "error[E0308]: mismatched types: expected `Result<Config, ConfigError>`, found `Config` at src/config.rs:88:5",
    "thread 'main' panicked at src/parser.rs:142:17: index out of bounds: the len is 3 but the index is 3",
    "test retry::tests::gives_up_after_three_attempts ... FAILED: assertion `left == right` failed (left: 4, right: 3)",
    "TypeError: Cannot read properties of undefined (reading 'map') at renderList (src/components/List.tsx:31:22)",
    "AssertionError: expected status 200 but got 500 from POST /api/orders (body: {\"error\":\"db locked\"})",
    "ModuleNotFoundError: No module named 'pydantic_settings' while importing app.settings",
    "error: linker `cc` not found: install a C toolchain or set the `CC` environment variable",
    "FAILED tests/test_invoice.py::test_rounding - decimal.InvalidOperation: [<class 'decimal.ConversionSyntax'>]",
];

const OUTPUTS: [&str; 4] = [
    "I updated the retry loop to back off exponentially and re-ran the tests; three still fail.",
    "Patched the parser to check the index before reading the next token. Tests fail at the same place.",
    "Added the missing import and bumped the dependency; the build still fails to link.",
    "Rewrote the rounding helper with Decimal.quantize; test_rounding still raises InvalidOperation.",
];

/// Phases of a small workflow and the edges the walk may take from each.
const WORKFLOW: [(&str, &[&str]); 6] = [
    ("plan", &["research", "build"]),
    ("research", &["plan", "build"]),
    ("build", &["test", "plan"]),
    ("test", &["build", "review"]),
    ("review", &["build", "deploy", "plan"]),
    ("deploy", &["plan"]),
];

/// The pre-built events of one bench, with what the progress tracker says
/// about each.
struct Stream {
    events: Vec<Event>,
    progressed: Vec<bool>,
}

impl Stream {
    /// `EVENTS` events, each line made by `make(index, rng)`; a `completed`
    /// event every `COMPLETE_EVERY`.
    fn new(seed: u64, mut make: impl FnMut(usize, &mut Rng) -> String) -> Stream {
        let mut rng = Rng(seed);
        let mut tracker_state = ProgressState::default();
        let mut events = Vec::with_capacity(EVENTS);
        let mut progressed = Vec::with_capacity(EVENTS);
        for index in 0..EVENTS {
            let line = if index % COMPLETE_EVERY == COMPLETE_EVERY - 1 {
                format!(r#"{{"type":"completed","task":"T-1042","id":"e{index}"}}"#)
            } else {
                make(index, &mut rng)
            };
            let event = Event::from_json(&line).expect("bench events are valid");
            progressed.push(ProgressTracker.observe(&mut tracker_state, &event));
            if matches!(event.kind, EventKind::Completed) {
                tracker_state = ProgressState::default();
            }
            events.push(event);
        }
        Stream { events, progressed }
    }
}

fn failure_line(index: usize, rng: &mut Rng) -> String {
    // Mostly a few recurring errors, sometimes a fresh one.
    let error = if rng.below(4) == 0 {
        format!("{} (attempt {index})", ERRORS[rng.below(ERRORS.len())])
    } else {
        ERRORS[rng.below(3)].to_owned()
    };
    failure_line_with(index, &error)
}

fn failure_line_with(index: usize, error: &str) -> String {
    let agent = AGENTS[index % AGENTS.len()];
    let error = error.replace('"', "\\\"");
    format!(
        r#"{{"type":"failure","task":"T-1042","id":"e{index}","agent":"{agent}","error":"{error}","error_type":"build","location":"src/lib.rs:42","stack":"at main (src/main.rs:10)\nat run (src/lib.rs:42)"}}"#
    )
}

/// A random walk over `WORKFLOW`, with a `progress` event now and then.
fn transition_lines() -> impl FnMut(usize, &mut Rng) -> String {
    let mut phase = 0;
    let mut files = 0;
    move |index, rng| {
        if rng.below(25) == 0 {
            files += 1;
            return format!(
                r#"{{"type":"progress","task":"T-1042","id":"e{index}","files_changed":{files}}}"#
            );
        }
        let (from, targets) = WORKFLOW[phase];
        let to = targets[rng.below(targets.len())];
        phase = WORKFLOW
            .iter()
            .position(|(name, _)| *name == to)
            .unwrap_or(0);
        format!(
            r#"{{"type":"transition","task":"T-1042","id":"e{index}","from":"{from}","to":"{to}"}}"#
        )
    }
}

fn turn_line(index: usize, rng: &mut Rng) -> String {
    let agent = AGENTS[index % AGENTS.len()];
    let success = rng.below(10) == 0;
    // Runs of the same output: change it about every fourth turn.
    let output = OUTPUTS[(index / 4 + rng.below(2)) % OUTPUTS.len()];
    format!(
        r#"{{"type":"turn","task":"T-1042","id":"e{index}","agent":"{agent}","output":"{output}","success":{success}}}"#
    )
}

fn mixed_lines() -> impl FnMut(usize, &mut Rng) -> String {
    let mut transitions = transition_lines();
    move |index, rng| match rng.below(6) {
        0 => failure_line(index, rng),
        1 => turn_line(index, rng),
        2 => {
            let from = AGENTS[rng.below(AGENTS.len())];
            let to = AGENTS[rng.below(AGENTS.len())];
            format!(
                r#"{{"type":"handoff","task":"T-1042","id":"e{index}","from":"{from}","to":"{to}","content":"please look at the failing retry test"}}"#
            )
        }
        _ => transitions(index, rng),
    }
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

/// One pass of `stream` through `detector`, resetting the state on
/// `completed` as the engine does. Returns how many detections fired.
fn replay<D: Detector>(
    detector: &D,
    state: &mut D::State,
    stream: &Stream,
    out: &mut Vec<Detection>,
) -> usize {
    let mut fired = 0;
    for (index, (event, progressed)) in stream.events.iter().zip(&stream.progressed).enumerate() {
        if matches!(event.kind, EventKind::Completed) {
            *state = D::State::default();
            continue;
        }
        let mut observed = ObservedEvent::new(index as u64 + 1, event);
        observed.progressed = *progressed;
        out.clear();
        detector.observe(state, black_box(&observed), out);
        fired += black_box(&*out).len();
    }
    fired
}

fn bench_one<D: Detector>(c: &mut Criterion, name: &str, detector: D, stream: &Stream) {
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(stream.events.len() as u64));
    let mut state = D::State::default();
    let mut out = Vec::new();
    let fired = replay(&detector, &mut state, stream, &mut out);
    // How often the measured path builds a detection, for reading the figure.
    eprintln!(
        "{name}: {fired} detections per {} events",
        stream.events.len()
    );
    group.bench_function("observe", |b| {
        b.iter(|| replay(&detector, &mut state, stream, &mut out))
    });
    group.finish();
}

fn detectors(c: &mut Criterion) {
    let config = Config::default();
    let failures = Stream::new(1, failure_line);
    let transitions = Stream::new(2, transition_lines());
    let turns = Stream::new(3, turn_line);
    bench_one(c, "exact_failure", ExactFailure::new(&config), &failures);
    // Every message different: the cost when nothing repeats.
    let distinct = Stream::new(5, |index, rng| {
        let error = format!("{} (attempt {index})", ERRORS[rng.below(ERRORS.len())]);
        failure_line_with(index, &error)
    });
    bench_one(
        c,
        "exact_failure_distinct",
        ExactFailure::new(&config),
        &distinct,
    );
    bench_one(c, "edge_limit", EdgeLimit::new(&config), &transitions);
    bench_one(c, "phase_visits", PhaseVisits::new(&config), &transitions);
    bench_one(
        c,
        "transition_limit",
        TransitionLimit::new(&config),
        &transitions,
    );
    bench_one(c, "oscillation", Oscillation::new(&config), &transitions);
    bench_one(c, "repeated_output", RepeatedOutput::new(&config), &turns);
}

fn builtin(c: &mut Criterion) {
    let detectors = BuiltinDetectors::new(&Config::default());
    let stream = Stream::new(4, mixed_lines());
    let mut group = c.benchmark_group("builtin_detectors");
    group.throughput(Throughput::Elements(stream.events.len() as u64));
    let mut state = BuiltinState::default();
    let mut out = Vec::new();
    let run = |state: &mut BuiltinState, out: &mut Vec<Detection>| {
        for (index, event) in stream.events.iter().enumerate() {
            if matches!(event.kind, EventKind::Completed) {
                state.reset();
                continue;
            }
            out.clear();
            detectors.observe(
                state,
                black_box(&mut ObservedEvent::new(index as u64 + 1, event)),
                out,
            );
            black_box(&*out);
        }
    };
    run(&mut state, &mut out);
    group.bench_function("observe_mixed", |b| b.iter(|| run(&mut state, &mut out)));
    group.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = detectors, builtin
}
criterion_main!(benches);
