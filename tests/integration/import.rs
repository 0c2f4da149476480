//! Importers through the command: `loopguard import --from FORMAT` and
//! `replay --from FORMAT`, with the fixtures of `crates/import`.

use std::ffi::OsStr;

use crate::support::*;

fn import_fixture(name: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../import/tests/fixtures")
        .join(name)
}

#[test]
fn a_magentic_one_log_imports_and_replays_and_a_bad_one_is_named() {
    let log = import_fixture("magentic_one_loop.json");
    let edges = import_fixture("magentic_one_edges.json");
    let cut = import_fixture("magentic_one_truncated.json");
    let out = run([
        OsStr::new("import"),
        OsStr::new("--from"),
        OsStr::new("magentic-one"),
        log.as_os_str(),
        cut.as_os_str(),
        edges.as_os_str(),
    ]);
    assert_eq!(out.code, Some(1), "one log could not be imported: {out:?}");
    let events = parse_jsonl(&out.stdout);
    assert_eq!(events.len(), 15 + 3, "both good logs are written");
    assert!(
        out.stderr.contains("magentic_one_truncated.json")
            && out.stderr.contains("not a JSON Magentic-One log"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("dropped messages of role 'Orchestrator (thought)': 5"),
        "{}",
        out.stderr
    );

    // Replayed directly: the re-issued instruction and the same page.
    let replayed = run([
        OsStr::new("replay"),
        OsStr::new("--from"),
        OsStr::new("magentic-one"),
        log.as_os_str(),
        OsStr::new("--format"),
        OsStr::new("jsonl"),
        OsStr::new("--no-semantic"),
    ]);
    assert_eq!(replayed.code, Some(0), "{replayed:?}");
    let decisions = parse_jsonl(&replayed.stdout);
    assert_eq!(decisions.len(), 15);
    assert!(!lines_with(&decisions, "m1-pricing", "tool_repeat").is_empty());
    assert!(!lines_with(&decisions, "m1-pricing", "agent_pair").is_empty());

    let unknown = run([
        OsStr::new("import"),
        OsStr::new("--from"),
        OsStr::new("crewai"),
        log.as_os_str(),
    ]);
    assert_eq!(unknown.code, Some(2), "{unknown:?}");
    assert!(
        unknown
            .stderr
            .contains("unknown log format (known: magentic-one)"),
        "{}",
        unknown.stderr
    );
}
