//! Process isolation of detector plugins (`plugin_host.isolation =
//! "process"`): the real `loopguard` binary starts a `loopguard
//! plugin-worker` process per plugin (the default), and the `crashy`
//! fixture crashes it in every way a plugin can (a segfault, an abort, a
//! stack overflow, an exit, garbage on stdout, a hang, allocating without
//! bound) on a chosen line. Each crash
//! is a fault of that line only, the worker is restarted with the task
//! states the host kept, the built-in detectors never notice, and after
//! `max_faults` the plugin is disabled. (The panicky and ABI fixtures run
//! in both isolations in `plugins.rs`.)

use std::path::Path;

use serde_json::Value;

use crate::plugins::plugin;
use crate::support::*;

const CRASHY: &str = "loopguard-fixture-crashy";
const MONOLOGUE: &str = "loopguard-plugin-monologue";

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
        // Rust's guard page handler reports the overflow and aborts.
        ("stack", "", "its worker was killed by SIGABRT"),
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

#[test]
fn plugins_run_in_a_worker_process_unless_the_config_says_otherwise() {
    let library = plugin(CRASHY);
    let crash = "{ crash_at = [3], how = \"segv\" }";
    let unsaid = format!(
        "[[plugins]]\npath = '{}'\nconfig = {crash}\n",
        library.display()
    );
    let found = decisions(&replay_with("plugin_crash.jsonl", &unsaid));
    assert_eq!(found.len(), 10, "every line answered");
    assert_eq!(
        faults(&found),
        [(
            3,
            vec!["detector crashy: its worker was killed by SIGSEGV (fault 1 of 3)"]
        )]
    );
    // Said otherwise, the segfault is loopguard's own: the run dies on line 3.
    let in_process = replay_with(
        "plugin_crash.jsonl",
        &format!("[plugin_host]\nisolation = \"in-process\"\n\n{unsaid}"),
    );
    assert_eq!(in_process.code, None, "killed by a signal: {in_process:?}");
    assert!(in_process.stdout.lines().count() < 3, "{in_process:?}");
}

/// The pids of the processes whose parent is `parent` (from `/proc`).
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    // After the command's `)`: state, then the parent's pid.
                    let rest = stat.rsplit_once(')')?.1;
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(parent)
        })
        .collect()
}

/// Whether `pid` is gone (or a zombie nobody reaped: it runs no more).
fn is_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
    }
}

#[test]
fn a_worker_ends_when_its_host_is_killed_even_inside_a_hung_call() {
    use std::io::Write as _;
    use std::process::Stdio;

    let library = plugin(CRASHY);
    let dir = tempfile::tempdir().expect("a temp dir");
    let config = dir.path().join("loopguard.toml");
    // The worker hangs in the plugin on line 1, well inside its deadline.
    std::fs::write(
        &config,
        isolated(
            "call_timeout_ms = 600000",
            &library,
            "{ crash_at = [1], how = \"hang\" }",
        ),
    )
    .expect("config written");
    let mut host = loopguard()
        .args([
            "--no-semantic",
            "replay",
            "-",
            "--format",
            "jsonl",
            "--config",
        ])
        .arg(&config)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("loopguard starts");
    let mut stdin = host.stdin.take().expect("stdin is piped");
    stdin
        .write_all(b"{\"type\":\"turn\",\"task\":\"T1\",\"agent\":\"coder\",\"output\":\"x\",\"success\":true}\n")
        .expect("the event is sent");
    stdin.flush().expect("flushed");
    // Wait (at most 60 s) for the worker to start: a child of the host.
    let mut workers = Vec::new();
    for _ in 0..600 {
        workers = children_of(host.id());
        if !workers.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(workers.len(), 1, "one worker: {workers:?}");
    // Give it time to be inside the hung call, then kill the host outright.
    std::thread::sleep(std::time::Duration::from_millis(500));
    host.kill().expect("the host is killed");
    let _ = host.wait();
    let worker = workers[0];
    let mut gone = false;
    for _ in 0..300 {
        if is_gone(worker) {
            gone = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    if !gone {
        // Do not leave it behind, then fail.
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &worker.to_string()])
            .status();
    }
    assert!(gone, "the worker {worker} outlived its host by 30 s");
    drop(stdin);
}

#[test]
fn a_plugin_that_crashes_as_it_starts_is_refused_by_name_not_a_crash() {
    let library = plugin(CRASHY);
    let dir = tempfile::tempdir().expect("a temp dir");
    let config = dir.path().join("loopguard.toml");
    std::fs::write(
        &config,
        format!(
            "[[plugins]]\npath = '{}'\nconfig = {{ crash_at = [0], how = \"segv\" }}\n",
            library.display()
        ),
    )
    .expect("config written");
    // `replay` refuses to start, naming the plugin and the signal.
    let run_replay = replay_with(
        "plugin_crash.jsonl",
        &std::fs::read_to_string(&config).expect("read"),
    );
    // `plugins` describes it as refused, the same way.
    let described = run([
        Path::new("plugins"),
        Path::new("--config"),
        &config,
        Path::new("--format"),
        Path::new("json"),
    ]);
    for run in [&run_replay, &described] {
        assert_eq!(run.code, Some(2), "{run:?}");
        assert!(
            run.stderr.contains("crashy") && run.stderr.contains("killed by SIGSEGV"),
            "{}",
            run.stderr
        );
    }
    assert!(run_replay.stdout.is_empty(), "{run_replay:?}");
    let listing: Value = serde_json::from_str(&described.stdout).expect("JSON");
    assert_eq!(listing["plugins"], serde_json::json!([]));
    assert_eq!(listing["refused"].as_array().map(Vec::len), Some(1));
}

#[test]
fn no_decision_waits_out_a_restart_backoff_and_skipped_events_are_not_faults() {
    let library = plugin(CRASHY);
    // Crashes on lines 3 to 6: each restart is due later (0, 50 ms, 200 ms,
    // then 1 s after its crash). Lines come within microseconds of each
    // other, so a line is answered at once without the plugin (said, not
    // counted) well before the last backoff has passed, however slow the
    // machine; only the crash lines a worker was started for are faults.
    let crash_lines = [3, 4, 5, 6];
    let found = decisions(&replay_with(
        "plugin_crash.jsonl",
        &isolated(
            "max_faults = 10",
            &library,
            "{ crash_at = [3, 4, 5, 6], how = \"segv\" }",
        ),
    ));
    assert_eq!(found.len(), 10);
    let faults = faults(&found);
    let mut counted = 0;
    let mut skipped = 0;
    for (line, errors) in &faults {
        assert_eq!(errors.len(), 1, "line {line}: {errors:?}");
        if errors[0].contains("skipped this event") {
            assert!(
                errors[0].starts_with(
                    "detector crashy: skipped this event: its worker is restarted in "
                ) && !errors[0].contains("fault"),
                "line {line}: {errors:?}"
            );
            skipped += 1;
        } else {
            counted += 1;
            assert!(crash_lines.contains(line), "line {line}: {errors:?}");
            assert_eq!(
                errors[0],
                format!(
                    "detector crashy: its worker was killed by SIGSEGV (fault {counted} of 10)"
                ),
                "line {line}"
            );
        }
    }
    // Lines 3 and 4 always reach a worker (no backoff after one crash).
    assert_eq!(faults[0].0, 3);
    assert_eq!(faults[1].0, 4);
    assert!(skipped >= 1, "{faults:?}");
    assert_eq!(
        built_in(&found),
        built_in(&decisions(&replay_with("plugin_crash.jsonl", "")))
    );
}
