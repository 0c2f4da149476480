//! Detector plugins through the real `libloading` path: the two plugins of
//! `plugins/` and the fixtures of `tests/plugins/`, built as cdylibs with
//! the tests' own profile and loaded by the `loopguard` binary.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::Value;

use crate::support::*;

/// The library of a workspace plugin package, built once per test binary
/// (one cache for every module: two builds of a package at once would
/// rewrite a library another test has loaded).
pub(crate) fn plugin(package: &'static str) -> PathBuf {
    static BUILT: Mutex<BTreeMap<&str, PathBuf>> = Mutex::new(BTreeMap::new());
    let mut built = BUILT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    built
        .entry(package)
        .or_insert_with(|| {
            loopguard_test_support::build_cdylib(package).unwrap_or_else(|err| panic!("{err}"))
        })
        .clone()
}

const MONOLOGUE: &str = "loopguard-plugin-monologue";
const TURN_BUDGET: &str = "loopguard-plugin-turn-budget";
const PANICKY: &str = "loopguard-fixture-panicky";
const ABI_MAJOR_2: &str = "loopguard-fixture-abi-major-2";
const ABI_1_0: &str = "loopguard-fixture-abi-1-0";

/// Both places a plugin can run (`--plugin-isolation`): the tests of the
/// fixtures' behaviour run in each, and must pass in both.
const ISOLATIONS: [&str; 2] = ["process", "in-process"];

/// `--plugin LIBRARY --plugin-isolation ISOLATION`.
fn plugin_flags<'a>(library: &'a Path, isolation: &'a str) -> [&'a Path; 4] {
    [
        Path::new("--plugin"),
        library,
        Path::new("--plugin-isolation"),
        Path::new(isolation),
    ]
}

/// A config file naming plugins, in a temporary directory kept alive by
/// the returned guard.
fn plugin_config(toml: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("loopguard.toml");
    std::fs::write(&path, toml).expect("config written");
    (dir, path)
}

/// `loopguard --no-semantic replay TRACE --format FORMAT ARGS...`.
fn replay(trace_name: &str, format: &str, args: &[&Path]) -> Run {
    let trace = trace(trace_name);
    let mut all = vec![
        Path::new("--no-semantic"),
        Path::new("replay"),
        trace.as_path(),
        Path::new("--format"),
        Path::new(format),
    ];
    all.extend_from_slice(args);
    run(all)
}

fn jsonl(run: &Run) -> Vec<Value> {
    assert_eq!(run.code, Some(0), "{run:?}");
    parse_jsonl(&run.stdout)
}

fn errors_of(decision: &Value) -> Vec<&str> {
    decision["errors"]
        .as_array()
        .map(|errors| errors.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn the_monologue_plugin_reports_its_kind_in_decisions_and_the_report() {
    let library = plugin(MONOLOGUE);
    for isolation in ISOLATIONS {
        monologue_in(&library, isolation);
    }
}

fn monologue_in(library: &Path, isolation: &str) {
    let flag = plugin_flags(library, isolation);
    let decisions = jsonl(&replay("monologue.jsonl", "jsonl", &flag));
    assert_eq!(decisions.len(), 10);
    // The handoff on line 3 breaks the first run; line 7 is another task.
    assert_eq!(lines_with(&decisions, "T1", "monologue"), [6, 8]);
    assert!(lines_with(&decisions, "T2", "monologue").is_empty());
    let first = detection(&decisions, 6, "monologue");
    assert_eq!(first["detector"], "monologue");
    assert_eq!(first["action"], "inject_context");
    assert_eq!(numbers(&first["evidence"]), [4, 5, 6]);
    assert_eq!(at(&decisions, 6)["action"], "inject_context");
    assert_eq!(
        numbers(&detection(&decisions, 8, "monologue")["evidence"]),
        [4, 5, 6, 8]
    );
    // `completed` reset the task: the plugin was told.
    assert!(of_kind(at(&decisions, 10), "monologue").is_empty());

    let run = replay("monologue.jsonl", "json", &flag);
    assert_eq!(run.code, Some(0), "{run:?}");
    let report: Value = serde_json::from_str(&run.stdout).expect("the report is JSON");
    let found: Vec<u64> = task(&report, "T1")["detections"]
        .as_array()
        .expect("detections")
        .iter()
        .filter(|d| d["kind"] == "monologue")
        .filter_map(|d| d["line"].as_u64())
        .collect();
    assert_eq!(found, [6, 8]);
    assert_eq!(report["errors"], serde_json::json!([]));
}

#[test]
fn the_turn_budget_plugin_takes_its_budget_from_the_config_and_escalates() {
    let library = plugin(TURN_BUDGET);
    let (_dir, config) = plugin_config(&format!(
        "[[plugins]]\npath = '{}'\nconfig = {{ budget = 5 }}\n",
        library.display()
    ));
    let decisions = jsonl(&replay(
        "turn_budget.jsonl",
        "jsonl",
        &[Path::new("--config"), &config],
    ));
    // T1's events on lines 1, 2, 4, 5 and 6 are its budget; line 7 is past it.
    assert_eq!(lines_with(&decisions, "T1", "turn_budget"), [7]);
    let past = detection(&decisions, 7, "turn_budget");
    assert_eq!(past["detector"], "turn_budget");
    assert_eq!(numbers(&past["evidence"]), [1, 7]);
    assert_eq!(at(&decisions, 7)["action"], "escalate");
    assert_eq!(at(&decisions, 7)["status"], "escalated");
    // The gate holds until the human on line 9, who starts a fresh budget.
    assert_eq!(at(&decisions, 8)["action"], "escalate");
    assert_eq!(at(&decisions, 10)["status"], "active");
    assert!(lines_with(&decisions, "T2", "turn_budget").is_empty());

    // With --plugin there is no config: the default budget (25) is not spent.
    let flag = [Path::new("--plugin"), library.as_path()];
    let decisions = jsonl(&replay("turn_budget.jsonl", "jsonl", &flag));
    assert!(lines_with(&decisions, "T1", "turn_budget").is_empty());
}

#[test]
fn a_plugin_refusing_its_config_stops_the_run_naming_the_key() {
    let library = plugin(TURN_BUDGET);
    let (_dir, config) = plugin_config(&format!(
        "[[plugins]]\npath = '{}'\nconfig = {{ budget = 0 }}\n",
        library.display()
    ));
    let run = replay(
        "turn_budget.jsonl",
        "jsonl",
        &[Path::new("--config"), &config],
    );
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stdout.is_empty(), "{run:?}");
    assert!(
        run.stderr.contains("plugin turn_budget (")
            && run.stderr.contains("`budget` = 0 is not valid"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_panicking_plugin_is_contained_reported_and_disabled_while_the_others_go_on() {
    let library = plugin(PANICKY);
    for isolation in ISOLATIONS {
        panics_in(&library, isolation);
    }
}

fn panics_in(library: &Path, isolation: &str) {
    let flag = plugin_flags(library, isolation);
    let decisions = jsonl(&replay("plugin_panics.jsonl", "jsonl", &flag));
    assert_eq!(decisions.len(), 10, "every event got its decision");
    for (line, fault) in [(3, 1), (5, 2), (7, 3)] {
        let errors = errors_of(at(&decisions, line));
        assert_eq!(errors.len(), 1, "line {line}: {errors:?}");
        assert!(
            errors[0].starts_with(&format!(
                "detector panicky: panicked: the fixture blew up on line {line}"
            )) && errors[0].contains(&format!("(fault {fault} of 3)")),
            "{isolation}: {}",
            errors[0]
        );
    }
    assert!(errors_of(at(&decisions, 7))[0].ends_with("plugin disabled for the rest of the run"));
    // Disabled after three faults: not called again, neither for a panic
    // (line 8) nor for a turn it would report (line 9).
    assert!(errors_of(at(&decisions, 8)).is_empty());
    assert_eq!(lines_with(&decisions, "T1", "panicky_seen"), [1]);
    // The built-in detectors went on: the 4th identical failure escalates.
    assert_eq!(lines_with(&decisions, "T1", "exact_failure"), [4, 6, 10]);
    assert_eq!(at(&decisions, 10)["action"], "escalate");

    let run = replay("plugin_panics.jsonl", "json", &flag);
    assert_eq!(run.code, Some(0), "{run:?}");
    let report: Value = serde_json::from_str(&run.stdout).expect("the report is JSON");
    let lines: Vec<u64> = report["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .filter_map(|error| error["line"].as_u64())
        .collect();
    assert_eq!(lines, [3, 5, 7]);
    assert_eq!(task(&report, "T1")["status"], "escalated");

    // `plugin_host.max_faults` decides when.
    let (_dir, config) = plugin_config(&format!(
        "[plugin_host]\nmax_faults = 1\n\n[[plugins]]\npath = '{}'\n",
        library.display()
    ));
    let decisions = jsonl(&replay(
        "plugin_panics.jsonl",
        "jsonl",
        &[
            Path::new("--config"),
            &config,
            Path::new("--plugin-isolation"),
            Path::new(isolation),
        ],
    ));
    let faulted: Vec<u64> = decisions
        .iter()
        .filter(|decision| !errors_of(decision).is_empty())
        .filter_map(|decision| decision["line"].as_u64())
        .collect();
    assert_eq!(faulted, [3]);
    assert!(errors_of(at(&decisions, 3))[0].contains("(fault 1 of 1); plugin disabled"));
}

#[test]
fn a_plugin_that_hangs_is_cut_off_by_the_call_timeout_and_the_run_goes_on() {
    let library = plugin(PANICKY);
    let (_dir, config) = plugin_config(&format!(
        "[plugin_host]\ncall_timeout_ms = 200\n\n[[plugins]]\npath = '{}'\n",
        library.display()
    ));
    let failure =
        r#"{"type":"failure","task":"T1","agent":"coder","error":"E0308 mismatched types"}"#;
    let trace = format!(
        "{}\n{failure}\n{failure}\n{failure}\n{failure}\n",
        r#"{"type":"turn","task":"T1","agent":"coder","output":"hang","success":false}"#
    );
    // In a worker process, the hung worker is killed and the next call
    // starts another; in process, the stuck thread cannot be had back, so
    // the plugin is disabled at once.
    for (isolation, fault) in [
        ("process", "(fault 1 of 3)"),
        (
            "in-process",
            "(fault 1 of 3); plugin disabled for the rest of the run",
        ),
    ] {
        let run = run_with_stdin(
            [
                Path::new("--no-semantic"),
                Path::new("replay"),
                Path::new("-"),
                Path::new("--format"),
                Path::new("jsonl"),
                Path::new("--config"),
                &config,
                Path::new("--plugin-isolation"),
                Path::new(isolation),
            ],
            trace.as_bytes(),
        );
        let decisions = jsonl(&run);
        assert_eq!(
            decisions.len(),
            5,
            "{isolation}: every event got its decision"
        );
        assert_eq!(
            errors_of(at(&decisions, 1)),
            [format!(
                "detector panicky: did not answer within 200 ms {fault}"
            )],
            "{isolation}"
        );
        assert_eq!(lines_with(&decisions, "T1", "exact_failure"), [3, 4, 5]);
        assert_eq!(at(&decisions, 5)["action"], "escalate");
        // The restarted worker is called again; the disabled plugin is not.
        let seen = errors_of(at(&decisions, 2)).len() + errors_of(at(&decisions, 3)).len();
        assert_eq!(seen, 0, "{isolation}: {decisions:?}");
    }
}

#[test]
fn an_abi_1_0_plugin_still_loads_and_runs() {
    let library = plugin(ABI_1_0);
    for isolation in ISOLATIONS {
        let flag = plugin_flags(&library, isolation);
        let decisions = jsonl(&replay("plugin_panics.jsonl", "jsonl", &flag));
        assert_eq!(
            lines_with(&decisions, "T1", "legacy_failure"),
            [2, 4, 6, 10],
            "{isolation}"
        );
        assert_eq!(
            detection(&decisions, 2, "legacy_failure")["detector"],
            "legacy"
        );
    }
}

#[test]
fn replay_refuses_another_abi_major_or_a_file_that_is_not_a_library() {
    let library = plugin(ABI_MAJOR_2);
    let not_a_library = trace("monologue.jsonl");
    for isolation in ISOLATIONS {
        let run = replay(
            "monologue.jsonl",
            "jsonl",
            &plugin_flags(&library, isolation),
        );
        assert_eq!(run.code, Some(2), "{isolation}: {run:?}");
        assert!(run.stdout.is_empty(), "{isolation}: {run:?}");
        assert!(
            run.stderr.starts_with(&format!(
                "loopguard: plugin {}: built for plugin ABI 2.0",
                library.display()
            )) && run.stderr.contains("this loopguard speaks plugin ABI 1.4"),
            "{isolation}: {}",
            run.stderr
        );

        let run = replay(
            "monologue.jsonl",
            "jsonl",
            &plugin_flags(&not_a_library, isolation),
        );
        assert_eq!(run.code, Some(2), "{isolation}: {run:?}");
        assert!(
            run.stderr.starts_with(&format!(
                "loopguard: plugin {}: not a loadable library: ",
                not_a_library.display()
            )),
            "{isolation}: {}",
            run.stderr
        );
    }
}

#[test]
fn the_plugins_command_describes_plugins_without_a_trace() {
    let (monologue, budget, legacy) = (plugin(MONOLOGUE), plugin(TURN_BUDGET), plugin(ABI_1_0));
    let listed = run([
        Path::new("plugins"),
        &monologue,
        &budget,
        &legacy,
        Path::new("--format"),
        Path::new("json"),
    ]);
    assert_eq!(listed.code, Some(0), "{listed:?}");
    let listing: Value = serde_json::from_str(&listed.stdout).expect("JSON");
    assert_eq!(listing["host_abi"], "1.4");
    assert_eq!(listing["oldest_abi"], "1.0");
    let plugins = listing["plugins"].as_array().expect("plugins");
    let summary: Vec<(&str, &str, &Value)> = plugins
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap_or_default(),
                p["abi"].as_str().unwrap_or_default(),
                &p["kinds"],
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("monologue", "1.4", &serde_json::json!(["monologue"])),
            ("turn_budget", "1.4", &serde_json::json!(["turn_budget"])),
            ("legacy", "1.0", &serde_json::json!(["legacy_failure"])),
        ]
    );
    for plugin in plugins {
        assert_eq!(plugin["version"].as_str().map(str::is_empty), Some(false));
        assert_eq!(plugin["sdk_version"], loopguard_plugin_api::SDK_VERSION);
        // Started as a run starts them: in a worker process by default.
        assert_eq!(plugin["isolation"], "process", "{plugin}");
        assert!(
            plugin["rustc_version"]
                .as_str()
                .is_some_and(|v| v.starts_with("rustc ")),
            "{plugin}"
        );
    }

    // Text for people; a refused library is named on stderr, exit 2, and
    // the others are still described.
    let future = plugin(ABI_MAJOR_2);
    let shown = run([Path::new("plugins"), &monologue, &future]);
    assert_eq!(shown.code, Some(2), "{shown:?}");
    assert!(
        shown.stdout.starts_with("monologue 0.1.0\n"),
        "{}",
        shown.stdout
    );
    assert!(
        shown.stdout.contains("  kinds:  monologue\n"),
        "{}",
        shown.stdout
    );
    assert!(shown.stdout.contains("  ABI:    1.4 "), "{}", shown.stdout);
    assert!(
        shown
            .stdout
            .contains("  runs:   in a worker process (process)\n"),
        "{}",
        shown.stdout
    );
    // Asked to run them in process, it says so.
    let in_process = run([
        Path::new("plugins"),
        &monologue,
        Path::new("--plugin-isolation"),
        Path::new("in-process"),
        Path::new("--format"),
        Path::new("json"),
    ]);
    assert_eq!(in_process.code, Some(0), "{in_process:?}");
    let listing: Value = serde_json::from_str(&in_process.stdout).expect("JSON");
    assert_eq!(
        listing["plugins"][0]["isolation"], "in-process",
        "{listing}"
    );
    assert!(
        shown.stderr.contains("1 of 2 plugins refused")
            && shown.stderr.contains("built for plugin ABI 2.0"),
        "{}",
        shown.stderr
    );
}

#[test]
fn a_plugin_replayed_in_two_runs_on_sqlite_decides_like_one_run() {
    let library = plugin(MONOLOGUE);
    let folder = tempfile::tempdir().expect("a temp folder");
    let text = std::fs::read_to_string(trace("monologue.jsonl")).expect("the trace");
    let lines: Vec<&str> = text.lines().collect();
    let write = |name: &str, part: &[&str]| {
        let path = folder.path().join(name);
        std::fs::write(&path, format!("{}\n", part.join("\n"))).expect("written");
        path
    };
    let replay_into = |url: &str, file: &Path, first_line: usize| {
        let first_line = first_line.to_string();
        jsonl(&run([
            Path::new("--no-semantic"),
            Path::new("replay"),
            file,
            Path::new("--format"),
            Path::new("jsonl"),
            Path::new("--store"),
            Path::new(url),
            Path::new("--plugin"),
            library.as_path(),
            Path::new("--first-line"),
            Path::new(&first_line),
        ]))
    };
    let whole_url = format!("sqlite://{}", folder.path().join("whole.db").display());
    let whole = replay_into(&whole_url, &write("whole.jsonl", &lines), 1);
    let monologues: Vec<&Value> = whole
        .iter()
        .filter(|decision| decision.to_string().contains(r#""kind":"monologue""#))
        .collect();
    assert_eq!(monologues.len(), 2, "{whole:?}");
    for split in 1..lines.len() {
        let url = format!(
            "sqlite://{}",
            folder.path().join(format!("split-{split}.db")).display()
        );
        let mut halves = replay_into(&url, &write("first.jsonl", &lines[..split]), 1);
        halves.extend(replay_into(
            &url,
            &write("second.jsonl", &lines[split..]),
            split + 1,
        ));
        assert_eq!(halves, whole, "split before line {}", split + 1);
    }
}
