//! Process isolation of detector plugins (`plugin_host.isolation =
//! "process"`): the real `loopguard` binary starts a `loopguard
//! plugin-worker` process per plugin, and the `crashy` fixture crashes it
//! in every way a plugin can (a segfault, an abort, an exit, garbage on
//! stdout, a hang, allocating without bound) on a chosen line. Each crash
//! is a fault of that line only, the worker is restarted with the task
//! states the host kept, the built-in detectors never notice, and after
//! `max_faults` the plugin is disabled. The panicky and ABI fixtures behave
//! as in process.

use std::path::Path;

use serde_json::Value;

use crate::plugins::plugin;
use crate::support::*;

const CRASHY: &str = "loopguard-fixture-crashy";
const PANICKY: &str = "loopguard-fixture-panicky";
const MONOLOGUE: &str = "loopguard-plugin-monologue";
const ABI_1_0: &str = "loopguard-fixture-abi-1-0";
const ABI_MAJOR_2: &str = "loopguard-fixture-abi-major-2";

/// `loopguard --no-semantic replay TRACE --format jsonl --config CONFIG`,
/// the config written from `toml` to a temporary directory.
fn replay_with(trace_name: &str, toml: &str) -> Run {
    let dir = tempfile::tempdir().expect("a temp dir");
    let config = dir.path().join("loopguard.toml");
    std::fs::write(&config, toml).expect("config written");
    let trace = trace(trace_name);
    run([
        Path::new("--no-semantic"),
        Path::new("replay"),
        &trace,
        Path::new("--format"),
        Path::new("jsonl"),
        Path::new("--config"),
        &config,
    ])
}

fn decisions(run: &Run) -> Vec<Value> {
    assert_eq!(run.code, Some(0), "{run:?}");
    parse_jsonl(&run.stdout)
}

/// A config with `host` in `[plugin_host]` (process isolation) and one
/// plugin at `library` with `config`.
fn isolated(host: &str, library: &Path, config: &str) -> String {
    format!(
        "[plugin_host]\nisolation = \"process\"\n{host}\n\n[[plugins]]\npath = '{}'\nconfig = {config}\n",
        library.display()
    )
}

fn errors_of(decision: &Value) -> Vec<&str> {
    decision["errors"]
        .as_array()
        .map(|errors| errors.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Every line with errors, and the errors.
fn faults(decisions: &[Value]) -> Vec<(u64, Vec<&str>)> {
    decisions
        .iter()
        .filter(|decision| !errors_of(decision).is_empty())
        .map(|decision| (decision["line"].as_u64().unwrap_or(0), errors_of(decision)))
        .collect()
}

/// The built-in detections of a run: (line, kind), plugins' kinds left out.
fn built_in(decisions: &[Value]) -> Vec<(u64, String)> {
    decisions
        .iter()
        .flat_map(|decision| {
            let line = decision["line"].as_u64().unwrap_or(0);
            decision["detections"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|d| !d["kind"].as_str().unwrap_or("").starts_with("crashy"))
                .map(move |d| (line, d["kind"].as_str().unwrap_or("").to_owned()))
        })
        .collect()
}

#[test]
fn every_kind_of_crash_is_a_fault_of_its_line_and_the_plugin_goes_on_where_it_was() {
    let library = plugin(CRASHY);
    // Without the plugin, and with it not crashing: what the run should
    // look like whatever happens to the plugin.
    let bare = decisions(&replay_with("plugin_crash.jsonl", ""));
    let calm = decisions(&replay_with(
        "plugin_crash.jsonl",
        &isolated("", &library, "{}"),
    ));
    assert!(faults(&calm).is_empty(), "{:?}", faults(&calm));
    assert!(!built_in(&bare).is_empty());
    assert_eq!(built_in(&calm), built_in(&bare));
    // T1's every third event; T2 (line 3, 7) never reaches three.
    assert_eq!(lines_with(&calm, "T1", "crashy_count"), [4, 8]);

    for (how, host, what) in [
        ("segv", "", "its worker was killed by SIGSEGV"),
        ("abort", "", "its worker was killed by SIGABRT"),
        ("exit", "", "its worker exited with status 3"),
        (
            "garbage",
            "",
            "its worker wrote something that is not a frame: \"garb\" read as a frame of",
        ),
        (
            "hang",
            "call_timeout_ms = 300",
            "did not answer within 300 ms",
        ),
        // Past the limit an allocation fails and Rust aborts.
        (
            "alloc",
            "memory_limit_mb = 256",
            "its worker was killed by SIGABRT",
        ),
    ] {
        // Line 3 is T2's: the crash loses T2's event, not T1's count.
        let run = replay_with(
            "plugin_crash.jsonl",
            &isolated(
                host,
                &library,
                &format!("{{ crash_at = [3], how = \"{how}\" }}"),
            ),
        );
        let found = decisions(&run);
        assert_eq!(found.len(), 10, "{how}: every line answered");
        let faults = faults(&found);
        assert_eq!(faults.len(), 1, "{how}: {faults:?}");
        let (line, errors) = &faults[0];
        assert_eq!((*line, errors.len()), (3, 1), "{how}: {faults:?}");
        assert!(
            errors[0].starts_with(&format!("detector crashy: {what}"))
                && errors[0].ends_with("(fault 1 of 3)"),
            "{how}: {}",
            errors[0]
        );
        assert_eq!(built_in(&found), built_in(&bare), "{how}");
        // Restarted with T1's count: its detections are the calm run's.
        assert_eq!(
            lines_with(&found, "T1", "crashy_count"),
            [4, 8],
            "{how}: the restarted worker lost T1's count"
        );
    }
}

#[test]
fn after_max_faults_crashes_the_plugin_is_disabled_and_the_built_ins_go_on() {
    let library = plugin(CRASHY);
    let bare = decisions(&replay_with("plugin_crash.jsonl", ""));
    let found = decisions(&replay_with(
        "plugin_crash.jsonl",
        &isolated(
            "max_faults = 2",
            &library,
            "{ crash_at = [5, 6, 7], how = \"segv\" }",
        ),
    ));
    assert_eq!(found.len(), 10);
    assert_eq!(
        faults(&found),
        [
            (
                5,
                vec!["detector crashy: its worker was killed by SIGSEGV (fault 1 of 2)"]
            ),
            (
                6,
                vec![
                    "detector crashy: its worker was killed by SIGSEGV (fault 2 of 2); plugin \
                     disabled for the rest of the run"
                ]
            ),
        ]
    );
    // Counted until then (line 4), silent after.
    assert_eq!(lines_with(&found, "T1", "crashy_count"), [4]);
    assert_eq!(built_in(&found), built_in(&bare));
}

#[test]
fn the_worker_keeps_no_inherited_descriptor_but_its_pipes() {
    let library = plugin(CRASHY);
    let found = decisions(&replay_with(
        "plugin_crash.jsonl",
        &isolated("", &library, "{ crash_at = [1], how = \"fds\" }"),
    ));
    assert_eq!(
        detection(&found, 1, "crashy_fds")["reason"],
        "open fds: []",
        "the worker sees descriptors beyond stdin, stdout and stderr"
    );
}

#[test]
fn a_well_behaved_plugin_decides_the_same_in_either_isolation() {
    let library = plugin(MONOLOGUE);
    let plugin_entry = |isolation: &str| {
        format!(
            "[[plugins]]\npath = '{}'\nisolation = \"{isolation}\"\n",
            library.display()
        )
    };
    let in_process = replay_with("monologue.jsonl", &plugin_entry("in-process"));
    let process = replay_with("monologue.jsonl", &plugin_entry("process"));
    assert_eq!(in_process.code, Some(0), "{in_process:?}");
    assert_eq!(process.code, Some(0), "{process:?}");
    assert!(!in_process.stdout.is_empty());
    assert_eq!(process.stdout, in_process.stdout);
    assert_eq!(lines_with(&decisions(&process), "T1", "monologue"), [6, 8]);
}

#[test]
fn the_panicky_and_abi_fixtures_behave_in_a_worker_as_in_process() {
    // Panics: contained by the SDK, counted, the plugin disabled at 3.
    let library = plugin(PANICKY);
    let found = decisions(&replay_with(
        "plugin_panics.jsonl",
        &isolated("", &library, "{}"),
    ));
    assert_eq!(found.len(), 10);
    let faulted: Vec<u64> = faults(&found).iter().map(|(line, _)| *line).collect();
    assert_eq!(faulted, [3, 5, 7]);
    assert!(
        errors_of(at(&found, 3))[0]
            .starts_with("detector panicky: panicked: the fixture blew up on line 3"),
        "{:?}",
        errors_of(at(&found, 3))
    );
    assert!(errors_of(at(&found, 7))[0].ends_with("plugin disabled for the rest of the run"));
    assert_eq!(lines_with(&found, "T1", "panicky_seen"), [1]);
    assert_eq!(lines_with(&found, "T1", "exact_failure"), [4, 6, 10]);

    // A hang: the worker is killed and restarted, not the plugin disabled.
    let dir = tempfile::tempdir().expect("a temp dir");
    let config = dir.path().join("loopguard.toml");
    std::fs::write(&config, isolated("call_timeout_ms = 300", &library, "{}"))
        .expect("config written");
    let trace = format!(
        "{}\n{}\n",
        r#"{"type":"turn","task":"T1","agent":"coder","output":"hang","success":false}"#,
        r#"{"type":"turn","task":"T1","agent":"coder","output":"fine","success":true}"#
    );
    let run = run_with_stdin(
        [
            Path::new("--no-semantic"),
            Path::new("replay"),
            Path::new("-"),
            Path::new("--format"),
            Path::new("jsonl"),
            Path::new("--config"),
            &config,
        ],
        trace.as_bytes(),
    );
    let found = decisions(&run);
    assert_eq!(
        errors_of(at(&found, 1)),
        ["detector panicky: did not answer within 300 ms (fault 1 of 3)"]
    );
    assert_eq!(lines_with(&found, "T1", "panicky_seen"), [2]);

    // ABI 1.0: loads and runs in its worker.
    let legacy = plugin(ABI_1_0);
    let found = decisions(&replay_with(
        "plugin_panics.jsonl",
        &isolated("", &legacy, "{}"),
    ));
    assert_eq!(lines_with(&found, "T1", "legacy_failure"), [2, 4, 6, 10]);

    // Another ABI major: refused at start, as in process.
    let major_2 = plugin(ABI_MAJOR_2);
    let run = replay_with("monologue.jsonl", &isolated("", &major_2, "{}"));
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stdout.is_empty(), "{run:?}");
    assert!(
        run.stderr.starts_with(&format!(
            "loopguard: plugin {}: built for plugin ABI 2.0",
            major_2.display()
        )) && run.stderr.contains("this loopguard speaks plugin ABI 1.3"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_worker_program_that_cannot_start_is_named() {
    let library = plugin(CRASHY);
    let run = replay_with(
        "plugin_crash.jsonl",
        &isolated("worker = \"/nonexistent/loopguard\"", &library, "{}"),
    );
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(
        run.stderr
            .contains("cannot start its worker /nonexistent/loopguard")
            && run.stderr.contains("plugin_host.worker"),
        "{}",
        run.stderr
    );
}
