//! Bytes per task: how much memory one task's [`BuiltinState`] holds after
//! a realistic stream. Not a timing bench: it prints sizes.
//!
//! The engine keeps one `BuiltinState` per live task, so this is the
//! per-task cost of the built-in detectors. The target is at most 4 KiB for
//! a busy task in steady state. A counting global allocator measures the
//! heap bytes the state holds (requested sizes; the system allocator adds
//! its own overhead per block, so blocks are counted too), plus the inline
//! `size_of::<BuiltinState>()`.
//!
//! Streams (every event with an `id` of 36 characters, like a UUID, and a
//! `ts` unless said otherwise):
//!
//! - `team`: four agents handing work around on eight topics, asking for
//!   help, failing (some messages repeat), taking turns, reporting progress
//!   and moving between four phases; an event every 15 s.
//! - `team_no_ids`: the same events without `id`.
//! - `workflow`: a 13-edge workflow graph over 8 phases, walked at random,
//!   with a progress report every 10 transitions; an event every 30 s.
//! - `ping_pong`: two agents handing the same work back and forth; an
//!   event every 5 s, so the 600 s window is always full.
//! - `ping_pong_untimed`: the same without `ts` (windows never expire).
//!
//! Each line also shows every detector's state when it runs alone over the
//! stream. Alone, a detector keeps its own evidence records; together they
//! share one per event, so the parts add up to more than the total.
//!
//! Run with `cargo bench -p loopguard-detectors --bench state_size`.
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use loopguard_config::Config;
use loopguard_core_types::{Detection, Event};
use loopguard_detectors::{
    AgentPair, BuiltinDetectors, BuiltinState, Detector, EdgeLimit, ExactFailure, MultiAgent,
    ObservedEvent, Oscillation, PhaseVisits, ProgressState, ProgressTracker, RepeatedOutput,
    TopicCycle, TransitionLimit,
};

/// Counts live heap bytes and blocks of the whole process.
struct Counting;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);
static LIVE_BLOCKS: AtomicIsize = AtomicIsize::new(0);

fn size_of_layout(layout: Layout) -> isize {
    isize::try_from(layout.size()).unwrap_or(isize::MAX)
}

// SAFETY: every call forwards to `System` with the same arguments; the
// counters do not affect the allocation.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            LIVE_BYTES.fetch_add(size_of_layout(layout), Ordering::Relaxed);
            LIVE_BLOCKS.fetch_add(1, Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(ptr, layout) };
        LIVE_BYTES.fetch_sub(size_of_layout(layout), Ordering::Relaxed);
        LIVE_BLOCKS.fetch_sub(1, Ordering::Relaxed);
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            LIVE_BYTES.fetch_add(size_of_layout(layout), Ordering::Relaxed);
            LIVE_BLOCKS.fetch_add(1, Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as is.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            let grown = isize::try_from(new_size).unwrap_or(isize::MAX) - size_of_layout(layout);
            LIVE_BYTES.fetch_add(grown, Ordering::Relaxed);
        }
        new
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live() -> (isize, isize) {
    (
        LIVE_BYTES.load(Ordering::Relaxed),
        LIVE_BLOCKS.load(Ordering::Relaxed),
    )
}

/// A tiny deterministic generator (xorshift64): the same stream every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const EVENTS: usize = 2_000;
const START_SECS: u64 = 1_795_000_000;

/// Builds the events of one stream: `id` like a UUID, `ts` every
/// `step_secs` seconds (none when 0).
struct Stream {
    rng: Rng,
    n: u64,
    step_secs: u64,
    ids: bool,
    events: Vec<Event>,
}

impl Stream {
    fn new(seed: u64, step_secs: u64) -> Stream {
        Stream {
            rng: Rng(seed),
            n: 0,
            step_secs,
            ids: true,
            events: Vec::with_capacity(EVENTS),
        }
    }

    /// Adds an event of `fields` (JSON members after `type`).
    fn push(&mut self, kind: &str, fields: &str) {
        self.n += 1;
        let a = self.rng.next();
        let id = if self.ids {
            format!(
                r#","id":"{:08x}-{:04x}-{:04x}-{:04x}-{:012x}""#,
                a >> 32,
                (a >> 16) & 0xffff,
                a & 0xffff,
                self.n & 0xffff,
                self.n
            )
        } else {
            String::new()
        };
        let ts = if self.step_secs == 0 {
            String::new()
        } else {
            let secs = START_SECS + self.n * self.step_secs;
            let stamp = loopguard_core_types::Timestamp(i64::try_from(secs * 1000).unwrap_or(0));
            format!(r#","ts":"{stamp}""#)
        };
        let text = format!(r#"{{"type":"{kind}","task":"TICKET-4711"{id}{ts}{fields}}}"#);
        match Event::from_json(&text) {
            Ok(event) => self.events.push(event),
            Err(err) => panic!("bench event {text}: {err}"),
        }
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

const ERRORS: [&str; 6] = [
    "error[E0308]: mismatched types: expected `Result<Config, ConfigError>`, found `Config`",
    "test orders::pagination::second_page ... FAILED: assertion `left == right` failed",
    "thread 'main' panicked at src/parser.rs:41:9: index out of bounds",
    "AssertionError: expected 104.99 to equal 105.00",
    "error: linker `cc` not found",
    "ModuleNotFoundError: No module named 'pydantic_settings'",
];

const PHASES: [&str; 4] = ["plan", "code", "test", "review"];

fn team(ids: bool) -> Vec<Event> {
    let mut s = Stream::new(0x5eed_1234_abcd_ef01, 15);
    s.ids = ids;
    let mut tests_failed = 40_u32;
    let mut files = 0_u32;
    while s.events.len() < EVENTS {
        let from = s.rng.below(TEAM.len());
        let to = (from + 1 + s.rng.below(TEAM.len() - 1)) % TEAM.len();
        let (from, to) = (TEAM[from], TEAM[to]);
        let topic = TOPICS[s.rng.below(TOPICS.len())];
        match s.rng.below(20) {
            0..=8 => {
                let fields = format!(
                    r#","from":"{from}","to":"{to}","topic":"{topic}","content":"Here is where I got with it; please take over from the failing step."#
                );
                s.push("handoff", &format!("{fields}\""));
            }
            9..=10 => s.push(
                "collaboration",
                &format!(
                    r#","from":"{from}","to":"{to}","request":"Could you help with this: {topic}?""#
                ),
            ),
            11..=13 => {
                let error = ERRORS[s.rng.below(ERRORS.len())].replace('`', "'");
                s.push(
                    "failure",
                    &format!(r#","agent":"{from}","error":"{error}""#),
                );
            }
            14..=16 => {
                let success = s.rng.below(3) == 0;
                let output = TOPICS[s.rng.below(3)];
                s.push(
                    "turn",
                    &format!(r#","agent":"{from}","output":"Tried: {output}","success":{success}"#),
                );
            }
            17 => {
                tests_failed = tests_failed.saturating_sub(u32::from(s.rng.below(2) == 0));
                files += u32::from(s.rng.below(2) == 0);
                s.push(
                    "progress",
                    &format!(r#","tests_total":120,"tests_failed":{tests_failed},"files_changed":{files}"#),
                );
            }
            _ => {
                let a = s.rng.below(PHASES.len());
                let b = (a + 1) % PHASES.len();
                s.push(
                    "transition",
                    &format!(r#","from":"{}","to":"{}""#, PHASES[a], PHASES[b]),
                );
            }
        }
    }
    s.events
}

/// 13 directed edges over 8 phases.
const EDGES: [(&str, &str); 13] = [
    ("intake", "plan"),
    ("plan", "research"),
    ("research", "plan"),
    ("plan", "code"),
    ("code", "build"),
    ("build", "code"),
    ("build", "test"),
    ("test", "code"),
    ("test", "review"),
    ("review", "code"),
    ("review", "plan"),
    ("review", "release"),
    ("release", "intake"),
];

fn workflow() -> Vec<Event> {
    let mut s = Stream::new(0x0dd_ba11_cafe_f00d, 30);
    let mut at = "intake";
    let mut tests_failed = 60_u32;
    let mut hops = 0;
    while s.events.len() < EVENTS {
        let next: Vec<_> = EDGES.iter().filter(|(from, _)| *from == at).collect();
        let (from, to) = *next[s.rng.below(next.len())];
        s.push("transition", &format!(r#","from":"{from}","to":"{to}""#));
        at = to;
        hops += 1;
        if hops % 10 == 0 {
            tests_failed = tests_failed.saturating_sub(1);
            s.push(
                "progress",
                &format!(r#","tests_total":200,"tests_failed":{tests_failed}"#),
            );
        }
    }
    s.events
}

fn ping_pong(step_secs: u64) -> Vec<Event> {
    let mut s = Stream::new(0xfeed_f00d_1234_5678, step_secs);
    for i in 0..EVENTS {
        let (from, to) = if i % 2 == 0 {
            ("coder", "reviewer")
        } else {
            ("reviewer", "coder")
        };
        s.push(
            "handoff",
            &format!(
                r#","from":"{from}","to":"{to}","content":"Please look at the pull request again""#
            ),
        );
    }
    s.events
}

/// Bytes and blocks a state holds after `events`: (heap bytes, heap
/// blocks, peak heap bytes during the stream).
fn measure<S>(
    make: impl FnOnce() -> S,
    events: &[Event],
    mut observe: impl FnMut(&mut S, &mut ObservedEvent<'_>, &mut Vec<Detection>),
) -> (isize, isize, isize) {
    let (bytes0, blocks0) = live();
    let mut state = make();
    let mut peak = 0;
    for (line, event) in (1..).zip(events) {
        let mut out = Vec::new();
        observe(&mut state, &mut ObservedEvent::new(line, event), &mut out);
        drop(out);
        peak = peak.max(live().0 - bytes0);
    }
    let (bytes, blocks) = live();
    let result = (bytes - bytes0, blocks - blocks0, peak);
    drop(state);
    result
}

/// One detector's own state after `events`, with progress worked out as
/// the built-in detectors do.
fn detector_bytes<D: Detector>(detector: &D, events: &[Event]) -> isize {
    let (heap, _, _) = measure(
        || (D::State::default(), ProgressState::default()),
        events,
        |(state, progress), event, out| {
            event.progressed = ProgressTracker.observe(progress, event.event);
            detector.observe(state, event, out);
        },
    );
    heap + isize::try_from(size_of::<D::State>()).unwrap_or(0)
}

fn main() {
    let config = Config::default();
    let detectors = BuiltinDetectors::new(&config);
    let inline = isize::try_from(size_of::<BuiltinState>()).unwrap_or(0);
    println!("BuiltinState inline: {inline} bytes; {EVENTS} events per stream");
    println!(
        "{:<18} {:>7} {:>7} {:>7} {:>6}  each detector alone (heap + inline)",
        "stream", "total", "heap", "peak", "blocks"
    );
    let streams = [
        ("team", team(true)),
        ("team_no_ids", team(false)),
        ("workflow", workflow()),
        ("ping_pong", ping_pong(5)),
        ("ping_pong_untimed", ping_pong(0)),
    ];
    for (name, events) in &streams {
        let (heap, blocks, peak) = measure(BuiltinState::default, events, |state, event, out| {
            detectors.observe(state, event, out);
        });
        let parts = [
            ("exact", detector_bytes(&ExactFailure::new(&config), events)),
            ("pair", detector_bytes(&AgentPair::new(&config), events)),
            ("multi", detector_bytes(&MultiAgent::new(&config), events)),
            ("topic", detector_bytes(&TopicCycle::new(&config), events)),
            ("edge", detector_bytes(&EdgeLimit::new(&config), events)),
            ("visits", detector_bytes(&PhaseVisits::new(&config), events)),
            (
                "trans",
                detector_bytes(&TransitionLimit::new(&config), events),
            ),
            ("osc", detector_bytes(&Oscillation::new(&config), events)),
            (
                "output",
                detector_bytes(&RepeatedOutput::new(&config), events),
            ),
        ];
        let parts: Vec<String> = parts
            .iter()
            .map(|(part, bytes)| format!("{part} {bytes}"))
            .collect();
        println!(
            "{name:<18} {:>7} {heap:>7} {:>7} {blocks:>6}  {}",
            heap + inline,
            peak + inline,
            parts.join(", ")
        );
    }
}
