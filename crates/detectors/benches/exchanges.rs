//! The cost of one `observe` call in steady state for the exchange
//! detectors: `agent_pair`, `multi_agent` and `topic_cycle`.
//!
//! Each bench replays 1,000 pre-built events over a state warmed by one
//! earlier pass, so windows and tables are as full as they get. Criterion
//! reports events per second (`Throughput::Elements`). Three streams:
//!
//! - `loop_untimed`: the loop each detector catches, without timestamps
//!   (`a <-> b`; `a -> b -> c -> a`; one topic). Every event fires with a
//!   saturated 16-exchange window: the most work one event can cause.
//! - `team_timed`: four agents passing work and asking for help at random on
//!   eight topics, an event every 20 s, so windows expire as they go.
//! - `many_timed`: 200 agents and 400 topics at random, an event every 2 s:
//!   far more pairs, cycles and topics than the per-task caps, so nearly
//!   every event evicts the least recently used entry.
//!
//! Timed streams keep the clock moving across passes (time never goes back),
//! as a live orchestrator's would.
use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use loopguard_config::Config;
use loopguard_core_types::{Detection, Event, Timestamp};
use loopguard_detectors::{AgentPair, Detector, MultiAgent, ObservedEvent, TopicCycle};

const EVENTS: usize = 1_000;

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

const TEAM: [&str; 4] = ["planner", "coder", "tester", "reviewer"];

const TOPICS: [&str; 8] = [
    "Fix the flaky retry test in the HTTP client",
    "Parser panics on an empty input line",
    "Add pagination to the orders endpoint",
    "Link error: cc not found on the CI image",
    "Rounding of invoice totals is off by one cent",
    "Migrate the settings module to pydantic-settings",
    "Review the error messages of the config loader",
    "Speed up the integration tests",
];

fn handoff(from: &str, to: &str, topic: Option<&str>, content: &str) -> Event {
    let topic = topic
        .map(|topic| format!(r#","topic":"{topic}""#))
        .unwrap_or_default();
    Event::from_json(&format!(
        r#"{{"type":"handoff","task":"T","from":"{from}","to":"{to}","content":"{content}"{topic}}}"#
    ))
    .expect("valid handoff")
}

fn collaboration(from: &str, to: &str, request: &str) -> Event {
    Event::from_json(&format!(
        r#"{{"type":"collaboration","task":"T","from":"{from}","to":"{to}","request":"{request}"}}"#
    ))
    .expect("valid collaboration")
}

/// Work going around `a -> b -> c -> a`, over and over.
fn three_cycle_stream() -> Vec<Event> {
    let lap = [("a", "b"), ("b", "c"), ("c", "a")];
    (0..EVENTS)
        .map(|i| {
            let (from, to) = lap[i % lap.len()];
            handoff(from, to, Some(TOPICS[0]), "same work again")
        })
        .collect()
}

/// `a <-> b` on one topic, over and over.
fn ping_pong_stream() -> Vec<Event> {
    (0..EVENTS)
        .map(|i| {
            let (from, to) = if i % 2 == 0 { ("a", "b") } else { ("b", "a") };
            handoff(from, to, Some(TOPICS[0]), "same work again")
        })
        .collect()
}

fn team_stream() -> Vec<Event> {
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    (0..EVENTS)
        .map(|_| {
            let from = TEAM[rng.below(TEAM.len())];
            let to = TEAM[(TEAM.iter().position(|a| *a == from).unwrap_or(0)
                + 1
                + rng.below(TEAM.len() - 1))
                % TEAM.len()];
            let topic = TOPICS[rng.below(TOPICS.len())];
            if rng.below(4) == 0 {
                collaboration(from, to, &format!("Could you help with this: {topic}?"))
            } else if rng.below(2) == 0 {
                handoff(from, to, Some(topic), "Here is what I have so far.")
            } else {
                // No explicit topic: the content is the topic.
                handoff(from, to, None, topic)
            }
        })
        .collect()
}

fn many_stream() -> Vec<Event> {
    let mut rng = Rng(0x0dd_ba11_cafe_f00d);
    (0..EVENTS)
        .map(|_| {
            let from = rng.below(200);
            let to = (from + 1 + rng.below(199)) % 200;
            let topic = format!("subtask {} of the refactoring", rng.below(400));
            handoff(
                &format!("agent-{from}"),
                &format!("agent-{to}"),
                Some(&topic),
                "",
            )
        })
        .collect()
}

/// One pass over `events`; `clock` (milliseconds) advances by `step_ms`
/// per event when the stream is timed.
fn pass<D: Detector>(
    detector: &D,
    state: &mut D::State,
    events: &[Event],
    clock: &mut Option<i64>,
    step_ms: i64,
    out: &mut Vec<Detection>,
) {
    for (line, event) in (1..).zip(events) {
        let mut observed = ObservedEvent::new(line, event);
        if let Some(now) = clock {
            *now += step_ms;
            observed.time = Some(Timestamp(*now));
        }
        detector.observe(state, &observed, out);
        black_box(&out);
        out.clear();
    }
}

fn bench_stream<D: Detector>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    detector: &D,
    events: &[Event],
    step_ms: Option<i64>,
) {
    let mut state = D::State::default();
    let mut clock = step_ms.map(|_| 1_795_000_000_000_i64);
    let step = step_ms.unwrap_or(0);
    let mut out = Vec::new();
    // Warm the state: windows and tables full, as in a long-running task.
    pass(detector, &mut state, events, &mut clock, step, &mut out);
    group.bench_function(name, |b| {
        b.iter(|| pass(detector, &mut state, events, &mut clock, step, &mut out))
    });
}

fn exchanges(c: &mut Criterion) {
    let config = Config::default();
    let ping_pong = ping_pong_stream();
    let three_cycle = three_cycle_stream();
    let team = team_stream();
    let many = many_stream();

    let mut group = c.benchmark_group("agent_pair");
    configure(&mut group);
    let detector = AgentPair::new(&config);
    bench_stream(&mut group, "loop_untimed", &detector, &ping_pong, None);
    bench_stream(&mut group, "team_timed", &detector, &team, Some(20_000));
    bench_stream(&mut group, "many_timed", &detector, &many, Some(2_000));
    group.finish();

    let mut group = c.benchmark_group("multi_agent");
    configure(&mut group);
    let detector = MultiAgent::new(&config);
    bench_stream(&mut group, "loop_untimed", &detector, &three_cycle, None);
    bench_stream(&mut group, "team_timed", &detector, &team, Some(20_000));
    bench_stream(&mut group, "many_timed", &detector, &many, Some(2_000));
    group.finish();

    let mut group = c.benchmark_group("topic_cycle");
    configure(&mut group);
    let detector = TopicCycle::new(&config);
    bench_stream(&mut group, "loop_untimed", &detector, &ping_pong, None);
    bench_stream(&mut group, "team_timed", &detector, &team, Some(20_000));
    bench_stream(&mut group, "many_timed", &detector, &many, Some(2_000));
    group.finish();
}

fn configure(group: &mut BenchmarkGroup<'_, WallTime>) {
    group
        .throughput(Throughput::Elements(EVENTS as u64))
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
}

criterion_group!(benches, exchanges);
criterion_main!(benches);
