//! Tests of the plugin layers together, through real plugin libraries
//! built by `loopguard-test-support`.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use loopguard_config::{Config, Isolation, PluginConfig, PluginHostConfig};
use loopguard_core_types::{Action, Detection, Event};
use loopguard_detectors::ObservedEvent;
use loopguard_plugin_api::abi;

use super::*;
use crate::extension::{ExtensionDetector, ExtensionError};
use loopguard_test_support::build_cdylib;

fn fixture(package: &str) -> PathBuf {
    build_cdylib(package).unwrap_or_else(|err| panic!("{err}"))
}

/// The plugin library of `package`, loaded.
fn load_fixture(package: &str) -> Plugin {
    Plugin::load(&fixture(package)).expect("loads")
}

fn event(json: &str) -> Event {
    Event::from_json(json).expect("a valid event")
}

fn turn(output: &str) -> Event {
    event(&format!(
        r#"{{"type":"turn","task":"T","agent":"a","output":"{output}","success":true}}"#
    ))
}

async fn observe(
    detector: &PluginDetector,
    line: u64,
    event: &Event,
) -> Result<Vec<Detection>, ExtensionError> {
    let observed = ObservedEvent::new(line, event).at(None);
    detector.observe(&observed).await
}

/// Fails unless `detector` answers `event` (on `line`) with no detection;
/// `why` says why none is expected ("skipped": a disabled plugin is not
/// called).
async fn assert_finds_nothing(detector: &PluginDetector, line: u64, event: &Event, why: &str) {
    let found = observe(detector, line, event)
        .await
        .unwrap_or_else(|err| panic!("{why}: {err}"));
    assert!(found.is_empty(), "{why}: {found:?}");
}

/// The panicky fixture, loaded as the engine loads plugins, called under
/// `plugin_host`, in process (these tests are of in-process calls; the
/// worker process is tested through the `loopguard` binary, in
/// `tests/integration/isolation.rs`).
fn load_panicky(plugin_host: PluginHostConfig) -> Arc<PluginDetector> {
    let mut config = Config::default();
    config
        .plugins
        .push(PluginConfig::new(fixture("loopguard-fixture-panicky")));
    config.plugin_host = PluginHostConfig {
        isolation: Isolation::InProcess,
        ..plugin_host
    };
    let mut detectors = load_plugins(&config).expect("loads");
    detectors.remove(0)
}

#[test]
fn a_real_plugin_describes_itself_and_runs() {
    let plugin = load_fixture("loopguard-plugin-monologue");
    let info = plugin.info();
    assert_eq!(
        (info.name.as_str(), info.abi),
        ("monologue", AbiVersion::HOST)
    );
    assert_eq!(info.kinds, ["monologue"]);
    assert_eq!(info.sdk_version, abi::SDK_VERSION);
    assert_eq!(info.rustc_version, abi::RUSTC_VERSION);
    let mut instance = plugin
        .instantiate(&serde_json::json!({"repeats": 2}))
        .expect("starts");
    assert!(instance.supports_reset());
    assert!(
        instance
            .observe(1, &turn("x"))
            .expect("observes")
            .is_empty()
    );
    let found = instance.observe(2, &turn("x")).expect("observes");
    assert_eq!(
        (found[0].kind.as_ref(), found[0].action),
        ("monologue", Action::InjectContext)
    );
    instance.reset_task("T").expect("resets");
    assert!(
        instance
            .observe(3, &turn("x"))
            .expect("observes")
            .is_empty()
    );
    let err = plugin
        .instantiate(&serde_json::json!({"repeats": 1}))
        .expect_err("refused");
    assert!(
        err.to_string().starts_with("plugin monologue (")
            && err.to_string().contains("`repeats` = 1"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panics_are_contained_counted_and_disable_the_plugin() {
    let panicky = &load_panicky(PluginHostConfig {
        max_faults: 2,
        ..PluginHostConfig::default()
    });
    let seen = observe(panicky, 1, &turn("fine")).await.expect("observes");
    assert_eq!(seen[0].kind, "panicky_seen");
    let first = observe(panicky, 2, &turn("boom"))
        .await
        .expect_err("panics");
    let first = first.to_string();
    assert!(
        first.starts_with("panicked: the fixture blew up on line 2 (at ")
            && first.contains("panicky/src/lib.rs:")
            && first.ends_with(") (fault 1 of 2)"),
        "{first}"
    );
    assert!(!panicky.is_disabled());
    // The instance goes on after a contained panic.
    assert_eq!(
        observe(panicky, 3, &turn("fine"))
            .await
            .expect("observes")
            .len(),
        1
    );
    let second = observe(panicky, 4, &turn("boom"))
        .await
        .expect_err("panics");
    assert!(
        second
            .to_string()
            .ends_with("(fault 2 of 2); plugin disabled for the rest of the run"),
        "{second}"
    );
    assert!(panicky.is_disabled());
    // Disabled: not called any more.
    assert_finds_nothing(panicky, 5, &turn("boom"), "skipped").await;
    assert_finds_nothing(panicky, 6, &turn("fine"), "skipped").await;
    assert_eq!(panicky.faults(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_callers_are_all_answered_in_order_per_task() {
    let plugin = load_fixture("loopguard-plugin-monologue");
    let host = PluginHost::new(&PluginHostConfig {
        max_concurrency: 2,
        ..PluginHostConfig::default()
    });
    let detector = host
        .detector(&plugin, &serde_json::json!({"repeats": 2}))
        .expect("starts");
    let callers: Vec<_> = (0..16)
        .map(|task| {
            let detector = Arc::clone(&detector);
            tokio::spawn(async move {
                let same = event(&format!(
                    r#"{{"type":"turn","task":"T{task}","agent":"a","output":"o","success":true}}"#
                ));
                let mut evidence = Vec::new();
                for line in 1..=20 {
                    for found in observe(&detector, line, &same).await.expect("observes") {
                        evidence.push(found.evidence.len());
                    }
                }
                evidence
            })
        })
        .collect();
    for caller in callers {
        // 20 identical turns with repeats = 2: a detection from the
        // 2nd on, each run one line longer.
        assert_eq!(caller.await.expect("joins"), (2..=20).collect::<Vec<_>>());
    }
}

#[tokio::test]
async fn a_plugin_that_does_not_answer_in_time_is_disabled() {
    let panicky = &load_panicky(PluginHostConfig {
        call_timeout_ms: 50,
        ..PluginHostConfig::default()
    });
    let err = observe(panicky, 1, &turn("hang"))
        .await
        .expect_err("times out");
    assert_eq!(
        err.to_string(),
        "did not answer within 50 ms (fault 1 of 3); plugin disabled for the rest of the run"
    );
    assert!(panicky.is_disabled());
    assert_finds_nothing(panicky, 2, &turn("fine"), "skipped").await;
}

#[test]
fn another_abi_major_is_refused_naming_both_versions() {
    let path = fixture("loopguard-fixture-abi-major-2");
    let err = Plugin::load(&path).expect_err("refused");
    let message = err.to_string();
    assert!(
        matches!(
            err,
            PluginError::Abi {
                plugin: AbiVersion { major: 2, minor: 0 },
                ..
            }
        ),
        "{message}"
    );
    assert!(message.contains("built for plugin ABI 2.0"), "{message}");
    assert!(
        message.contains(&format!("speaks plugin ABI {}", AbiVersion::HOST)),
        "{message}"
    );
    assert!(message.contains(&path.display().to_string()), "{message}");
}

#[test]
fn an_abi_1_0_plugin_still_loads_without_the_1_1_functions() {
    let plugin = load_fixture("loopguard-fixture-abi-1-0");
    assert_eq!(plugin.info().abi, AbiVersion { major: 1, minor: 0 });
    let mut instance = plugin.instantiate(&serde_json::json!({})).expect("starts");
    assert!(!instance.supports_reset());
    instance.reset_task("T").expect("a no-op for 1.0");
    assert!(!instance.supports_state());
    assert_eq!(
        instance.export_task("T"),
        Ok(None),
        "a 1.0 plugin keeps nothing"
    );
    instance
        .import_task("T", &serde_json::json!({"format": 1}))
        .expect("a no-op for 1.0");
    let failure = event(r#"{"type":"failure","task":"T","agent":"a","error":"E1"}"#);
    let found = instance.observe(4, &failure).expect("observes");
    assert_eq!(
        (found[0].kind.as_ref(), found[0].evidence.as_slice()),
        ("legacy_failure", &[4][..])
    );
}

/// The events of a trace of the workspace's `tests/traces`, with their
/// lines.
fn trace_events(name: &str) -> Vec<(u64, Event)> {
    let path = format!("{}/../../tests/traces/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("the trace exists");
    text.lines()
        .enumerate()
        .filter_map(|(index, line)| Some((index as u64 + 1, Event::from_json(line).ok()?)))
        .collect()
}

/// Replays `events` through a new engine with a new instance of
/// `plugin` on `store`: each decision as JSON.
async fn replay_with(
    plugin: &Plugin,
    store: &Arc<crate::MemoryStore>,
    events: &[(u64, Event)],
) -> Vec<serde_json::Value> {
    let detector = PluginHost::new(&PluginHostConfig::default())
        .detector(plugin, &serde_json::json!({}))
        .expect("starts");
    let guard = crate::LoopGuard::builder(Config::default())
        .store(store.clone())
        .extension(detector.clone())
        .build()
        .expect("valid");
    let mut decisions = Vec::new();
    for (line, event) in events {
        let decision = guard.observe_line(*line, event.clone()).await;
        assert!(decision.errors.is_empty(), "{:?}", decision.errors);
        decisions.push(serde_json::to_value(&decision).expect("serializes"));
    }
    assert_eq!(detector.faults(), 0);
    decisions
}

/// Whether `events` split before every event, across two engines and
/// two instances of `plugin` on one durable store, decide like one run.
async fn splits_like_one_run(plugin: &Plugin, events: &[(u64, Event)]) -> Vec<usize> {
    let whole = replay_with(plugin, &Arc::new(crate::MemoryStore::durable()), events).await;
    let mut differing = Vec::new();
    for split in 1..events.len() {
        let store = Arc::new(crate::MemoryStore::durable());
        let mut halves = replay_with(plugin, &store, &events[..split]).await;
        halves.extend(replay_with(plugin, &store, &events[split..]).await);
        if halves != whole {
            differing.push(split);
        }
    }
    differing
}

#[tokio::test]
async fn a_plugin_trace_split_anywhere_on_a_durable_store_decides_like_one_run() {
    let plugin = load_fixture("loopguard-plugin-monologue");
    let events = trace_events("monologue.jsonl");
    assert!(events.len() > 5);
    let whole = replay_with(&plugin, &Arc::new(crate::MemoryStore::durable()), &events).await;
    let monologues = whole
        .iter()
        .filter(|decision| decision.to_string().contains(r#""kind":"monologue""#))
        .count();
    assert!(monologues >= 2, "the trace has monologues: {whole:?}");
    assert_eq!(
        splits_like_one_run(&plugin, &events).await,
        Vec::<usize>::new()
    );
}

#[tokio::test]
async fn without_the_state_functions_a_split_plugin_starts_its_tasks_afresh() {
    // The same plugin with its 1.2 state slots taken away, as a plugin
    // of ABI 1.1 has them.
    let mut plugin = load_fixture("loopguard-plugin-monologue");
    plugin.functions.export_task = None;
    plugin.functions.import_task = None;
    let events = trace_events("monologue.jsonl");
    let differing = splits_like_one_run(&plugin, &events).await;
    // A split inside the run of lines 4 to 6 loses the monologue on 6.
    assert!(
        differing.contains(&4) && differing.contains(&5),
        "{differing:?}"
    );
}

#[tokio::test]
async fn a_task_state_the_plugin_cannot_read_is_a_fault_naming_it() {
    let plugin = load_fixture("loopguard-plugin-monologue");
    let detector = PluginHost::new(&PluginHostConfig::default())
        .detector(&plugin, &serde_json::json!({"repeats": 2}))
        .expect("starts");
    assert_eq!(detector.export_task("T").await, None, "no run yet");
    observe(&detector, 1, &turn("x")).await.expect("observes");
    let state = detector.export_task("T").await.expect("a run to keep");
    let err = detector
        .import_task("T", serde_json::json!({"format": 99}))
        .await
        .expect_err("refused");
    let message = err.to_string();
    assert!(
        message.starts_with("plugin monologue: returned an error: monologue")
            && message.ends_with("(fault 1 of 3)"),
        "{message}"
    );
    assert_eq!(detector.faults(), 1);
    // A fresh instance continues the run it is given.
    let restarted = PluginHost::new(&PluginHostConfig::default())
        .detector(&plugin, &serde_json::json!({"repeats": 2}))
        .expect("starts");
    restarted.import_task("T", state).await.expect("imports");
    let found = observe(&restarted, 2, &turn("x")).await.expect("observes");
    assert_eq!(found[0].evidence, [1, 2]);
}

#[test]
fn files_that_are_not_plugins_are_refused_clearly() {
    let dir = std::env::temp_dir().join(format!("loopguard-host-plugins-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let text = dir.join("notes.so");
    std::fs::write(&text, "not a library\n").expect("written");
    let err = Plugin::load(&text).expect_err("refused");
    assert!(matches!(err, PluginError::NotALibrary { .. }), "{err}");
    assert!(
        err.to_string().starts_with(&format!(
            "plugin {}: not a loadable library: ",
            text.display()
        )),
        "{err}"
    );
    let missing = Plugin::load(&dir.join("missing.so")).expect_err("refused");
    assert!(
        matches!(missing, PluginError::NotALibrary { .. }),
        "{missing}"
    );
    let _ = std::fs::remove_dir_all(&dir);

    // A real library that is not a plugin.
    let system = if cfg!(target_os = "macos") {
        "/usr/lib/libSystem.B.dylib"
    } else if cfg!(windows) {
        "kernel32.dll"
    } else {
        "libc.so.6"
    };
    let err = Plugin::load(Path::new(system)).expect_err("refused");
    assert!(matches!(err, PluginError::MissingSymbol { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("has no loopguard_plugin_entry_v1 symbol: not a loopguard plugin"),
        "{err}"
    );
}

#[test]
fn two_plugins_of_one_name_are_refused() {
    let path = fixture("loopguard-plugin-monologue");
    let config = Config {
        plugins: vec![PluginConfig::new(&path), PluginConfig::new(&path)],
        plugin_host: PluginHostConfig {
            isolation: Isolation::InProcess,
            ..PluginHostConfig::default()
        },
        ..Config::default()
    };
    let err = load_plugins(&config).expect_err("refused");
    assert!(matches!(err, PluginError::DuplicateName { .. }), "{err}");
}

/// A `tool_call` of trace format 1.1: newer than the 1.0 to 1.2 SDKs.
const TOOL_CALL: &str =
    r#"{"type":"tool_call","task":"T","agent":"a","tool":"grep","args":{"q":"x"},"result":"..."}"#;

fn tool_call() -> Event {
    let event = Event::from_json_forward(TOOL_CALL).expect("read forward");
    assert_eq!(event.kind.type_name(), "tool_call");
    event
}

/// The detections of each event of `events` through a new monologue
/// detector (`repeats` = 3), and its faults.
async fn monologue_run(plugin: &Plugin, events: &[(u64, Event)]) -> (Vec<Vec<Detection>>, u32) {
    let detector = PluginHost::new(&PluginHostConfig::default())
        .detector(plugin, &serde_json::json!({}))
        .expect("starts");
    let mut found = Vec::new();
    for (line, event) in events {
        found.push(observe(&detector, *line, event).await.expect("observes"));
    }
    (found, detector.faults())
}

#[tokio::test]
async fn a_tool_call_reaches_a_current_plugin_without_a_fault() {
    let plugin = load_fixture("loopguard-plugin-monologue");
    assert_eq!(plugin.info().abi, AbiVersion::HOST);
    let mut instance = plugin.instantiate(&serde_json::json!({})).expect("starts");
    assert!(
        instance.reads_event_type("tool_call"),
        "a 1.3 plugin is sent it"
    );
    assert_eq!(instance.observe(1, &tool_call()), Ok(Vec::new()));

    // Identical turns on lines 1, 2, 4 and 5, with and without a tool call
    // on line 3: the plugin's detector is handed the tool call, which ends
    // the monologue's run (any other event of the task does).
    let turns = [1, 2, 4, 5].map(|line| (line, turn("same")));
    let mut with_tool_call = turns.to_vec();
    with_tool_call.insert(2, (3, tool_call()));
    let (without, faults_without) = monologue_run(&plugin, &turns).await;
    let (with, faults_with) = monologue_run(&plugin, &with_tool_call).await;
    assert_eq!((faults_without, faults_with), (0, 0));
    assert!(
        with.iter().all(Vec::is_empty),
        "the tool call ended the run: {with:?}"
    );
    assert_eq!(without[2][0].evidence, [1, 2, 4]);
    assert_eq!(without[3][0].evidence, [1, 2, 4, 5]);
}

#[tokio::test]
async fn an_old_abi_plugin_is_never_sent_a_tool_call_but_still_sees_the_types_it_knows() {
    let plugin = load_fixture("loopguard-fixture-abi-1-0");
    assert_eq!(plugin.info().abi, AbiVersion { major: 1, minor: 0 });
    // Sent one anyway, the 1.0 fixture fails on it, as its SDK did: that
    // would be a fault.
    let mut instance = plugin.instantiate(&serde_json::json!({})).expect("starts");
    let mut encoded = Vec::new();
    loopguard_plugin_api::wire::encode_observe(1, &tool_call(), &mut encoded);
    let refused = instance.observe_encoded(&encoded).expect_err("refused");
    assert!(
        matches!(&refused, PluginFault::Failed(message) if message.contains("tool_call")),
        "{refused}"
    );
    assert!(!instance.reads_event_type("tool_call"));
    assert_eq!(
        instance.observe(1, &tool_call()),
        Ok(Vec::new()),
        "not sent"
    );

    let detector = PluginHost::new(&PluginHostConfig::default())
        .detector(&plugin, &serde_json::json!({}))
        .expect("starts");
    assert_finds_nothing(&detector, 1, &tool_call(), "not sent").await;
    let failure = event(r#"{"type":"failure","task":"T","agent":"a","error":"E1"}"#);
    let found = observe(&detector, 2, &failure).await.expect("observes");
    assert_eq!(
        (found[0].kind.as_ref(), found[0].evidence.as_slice()),
        ("legacy_failure", &[2][..])
    );
    assert_finds_nothing(&detector, 3, &turn("x"), "observes").await;
    assert_eq!(detector.faults(), 0);
    assert!(!detector.is_disabled());
}

#[test]
fn the_worker_side_answers_frames_with_the_same_instance_code() {
    use super::protocol::{self, answer, op};
    let library = fixture("loopguard-plugin-monologue");
    let mut requests = Vec::new();
    let mut frame = Vec::new();
    protocol::encode_request(op::CREATE, "", br#"{"repeats": 2}"#, &mut frame);
    requests.extend_from_slice(&frame);
    for line in 1..=2 {
        let mut input = Vec::new();
        loopguard_plugin_api::wire::encode_observe(line, &turn("x"), &mut input);
        protocol::encode_request(op::OBSERVE | protocol::EXPORT, "T", &input, &mut frame);
        requests.extend_from_slice(&frame);
    }
    // Garbage in a request's place: the worker stops with an error.
    requests.extend_from_slice(b"garbage\n");
    let mut answers = Vec::new();
    let served = process_worker::serve(&library, requests.as_slice(), &mut answers);
    assert!(served.is_err(), "garbage ends the worker");

    let mut frames = Vec::new();
    let mut rest = answers.as_slice();
    while let Some((header, body)) = rest.split_first_chunk::<4>() {
        let len = protocol::checked_len(*header).expect("a frame");
        frames.push(&body[..len]);
        rest = &body[len..];
    }
    assert_eq!(frames.len(), 4, "hello, create, two observes");
    assert_eq!(frames[0][0], answer::OK);
    let hello: protocol::Hello = serde_json::from_slice(&frames[0][1..]).expect("a hello");
    assert_eq!(
        (hello.name.as_str(), hello.supports_state),
        ("monologue", true)
    );
    assert_eq!(protocol::decode_answer(frames[1]), Ok(&b""[..]));
    let observed = |frame: &[u8]| {
        let payload = protocol::decode_answer(frame).expect("answered");
        let (detections, state) = protocol::split_prefixed(payload).expect("two parts");
        let detections =
            loopguard_plugin_api::wire::decode_detections(detections).expect("detections");
        (detections, state.to_vec())
    };
    let (first, state) = observed(frames[2]);
    assert!(first.is_empty());
    assert!(!state.is_empty(), "the task's state after the event");
    let (second, _) = observed(frames[3]);
    assert_eq!(second[0].kind, "monologue");
    assert_eq!(second[0].detector, "monologue");
}
